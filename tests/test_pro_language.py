"""pl.jit kernels: decorator forms, annotations checked at launch, the launch forms, pyto.run / pyto.compile with
them, scalar and tiling-data parameters, the names of PyPTO-Pro's language and pyto.alias_pypto_pro()."""
import dataclasses
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pyto
import pyto.language as pl
from pro_kernels import vec

RNG = np.random.default_rng(3)


@pl.jit
def scaled_copy(x: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32], out: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32],
                rows: pl.DT_INT32, scale: pl.DT_FP32):
    """out[:rows] = x[:rows] * scale, 8 rows a block, on the AIVs."""
    t = pl.make_tile(vec([8, 64]), addr=0x0)
    u = pl.make_tile(vec([8, 64]), addr=0x800)
    with pl.section_vector():
        for r in pl.range(pl.get_block_idx() * 8, rows, pl.get_block_num() * 8):
            pl.load(t, x, [r, 0])
            pl.system.bar_all()
            pl.mul(u, t, scale)
            pl.system.bar_all()
            pl.store(out, u, [r, 0])
            pl.system.bar_all()


def test_launch_forms_return_the_report():
    x = RNG.random((32, 64), np.float32)
    for launch, blocks in ((scaled_copy, 1), (scaled_copy[2], 2), (scaled_copy[None, 4], 4)):
        out = np.zeros_like(x)
        rep = launch(x, out, 32, 0.5)
        assert isinstance(rep, pyto.Report) and rep.blocks == blocks
        np.testing.assert_array_equal(out, x * np.float32(0.5))


def test_scalar_parameters_are_concrete_at_trace_time():
    x = RNG.random((32, 64), np.float32)
    out = np.zeros_like(x)
    scaled_copy[None, 2](x, out, 16, 2.0)
    np.testing.assert_array_equal(out[:16], x[:16] * 2)
    assert not out[16:].any()


@pytest.mark.parametrize("args, match", [
    ((np.zeros((32, 63), np.float32), np.zeros((32, 64), np.float32), 8, 1.0),
     r"parameter 'x' is annotated pl\.Tensor\[\[pl\.DYNAMIC, 64\], pl\.DT_FP32\] but got shape \[32, 63\]: dim 1 is 63"),
    ((np.zeros((32, 64), np.float16), np.zeros((32, 64), np.float32), 8, 1.0), r"parameter 'x' .* got a fp16 tensor"),
    ((np.zeros((32, 64), np.float32), np.zeros((2, 32, 64), np.float32), 8, 1.0), r"parameter 'out' .* \(3 dims\)"),
    ((np.zeros((32, 64), np.float32), np.zeros((32, 64), np.float32), 8.5, 1.0),
     r"parameter 'rows' is an integer \(int32\) scalar, got 8\.5"),
    ((np.zeros((32, 64), np.float32), [0.0] * 64, 8, 1.0), r"parameter 'out' is a GM tensor: pass a numpy array")])
def test_arguments_not_matching_their_annotation(args, match):
    with pytest.raises(pyto.ShapeError, match=match):
        scaled_copy(*args)


def test_argument_count_and_keywords():
    x = np.zeros((8, 64), np.float32)
    with pytest.raises(pyto.KernelError, match=r"takes 4 arguments \(x, out, rows, scale\), got 3"):
        scaled_copy(x, x, 8)


def test_pyto_run_and_compile_take_a_jit_kernel():
    x = RNG.random((16, 64), np.float32)
    out = np.zeros_like(x)
    rep = pyto.run(scaled_copy, x, out, 16, 3.0, blocks=2)
    assert rep.blocks == 2
    np.testing.assert_array_equal(out, x * 3)
    timing = pyto.run(scaled_copy, pyto.spec((16, 64), "fp32"), pyto.spec((16, 64), "fp32"), 16, 3.0, mode="timing")
    assert timing.mode == "timing" and timing.cycles > 0
    compiled = pyto.compile(scaled_copy, x, out, 16, 3.0, blocks=2)
    y = RNG.random((16, 64), np.float32)
    out2 = np.zeros_like(y)
    compiled(y, out2)
    np.testing.assert_array_equal(out2, y * 3)


def test_jit_keywords():
    f = lambda a: None  # noqa: E731
    with pytest.raises(pyto.KernelError, match=r"pl.jit got unexpected keyword\(s\) sanitizer"):
        pl.jit(sanitizer=True)
    piped = pl.jit(pipeline=pl.pipeline.PipelineConfig(preload=2))(scaled_copy.fn)     # declared: the file imports
    with pytest.raises(pyto.UnsupportedError, match=r"kernel 'scaled_copy': pl.jit\(pipeline=\.\.\.\).* not built"):
        piped(np.zeros((16, 64), np.float32), np.zeros((16, 64), np.float32), 8, 1.0)    # refused at launch
    with pytest.raises(pyto.KernelError, match=r"auto_mutex must be True or False"):
        pl.jit(auto_mutex="yes")(scaled_copy.fn)
    assert pl.jit(f) is f                        # no kernel annotation: passed through, as PyPTO-Pro's pl.jit does
    assert pl.jit(scaled_copy) is scaled_copy    # @pl.jit twice: one kernel
    with pytest.raises(pyto.KernelError, match=r"kernel\[block_dim\]\(\.\.\.\) or kernel\[None, block_dim"):
        scaled_copy["stream", 2]


@dataclasses.dataclass
class Tiling:
    rows: int
    scale: float


@pl.jit(arch="a5", name="tiled_copy")
def tiled_copy(x: pl.Tensor[[16, 64], pl.DT_FP32], out: pl.Tensor[[16, 64], pl.DT_FP32], tiling: Tiling):
    t = pl.make_tile(vec([16, 64]), addr=0)
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        pl.system.bar_all()
        pl.mul(t, t, tiling.scale)
        pl.system.bar_all()
        pl.store(out, t, [0, 0])


def test_tiling_data_is_passed_through():
    x = RNG.random((16, 64), np.float32)
    out = np.zeros_like(x)
    rep = tiled_copy(x, out, Tiling(16, 4.0))
    assert rep.kernel == "tiled_copy" and rep.chip == "ascend950pr"
    np.testing.assert_array_equal(out, x * 4)


def test_outputs_are_written_only_on_success():
    @pl.jit
    def bad(x: pl.Tensor[[16, 64], pl.DT_FP32], out: pl.Tensor[[16, 64], pl.DT_FP32]):
        t = pl.make_tile(vec([16, 64]), addr=0)
        with pl.section_vector():
            pl.load(t, x, [0, 0])
            pl.store(out, t, [0, 0])             # no flag between MTE2 and MTE3: a race
    x = np.ones((16, 64), np.float32)
    out = np.full_like(x, 7.0)
    with pytest.raises(pyto.RaceError):
        bad(x, out)
    assert (out == 7.0).all()


def test_the_kernel_body_runs_only_under_a_launch():
    with pytest.raises(pyto.KernelError, match=r"inside a kernel being launched"):
        pl.make_tile(vec([8, 8]), addr=0)


def test_names():
    assert pl.DT_FP16 is pyto.DType.fp16 and repr(pl.DT_BF16) == "pl.DT_BF16"
    assert pl.MemorySpace.Mat is pl.L1 and pl.MemorySpace.Acc is pl.L0C and pl.MemorySpace.Vec is pl.UB
    assert pl.PipeType.MTE2.name == "MTE2" and pl.NZ == "NZ" and repr(pl.ZN) == "pl.ZN"
    assert [m.name for m in pl.AccPhase] == ["Unspecified", "Partial", "Final"]
    assert [m.name for m in pl.STPhase] == ["Unspecified", "Partial", "Final"]
    assert [int(m) for m in pl.CrossCoreSyncMode] == [0, 1, 2, 3]
    assert {m.name for m in pl.SyncCoreType} == {"MIX", "AIV_ONLY", "AIC_ONLY"}
    for old in ("set_flag", "wait_flag", "pipe_barrier", "block_idx", "subblock_idx", "block_num", "sync_all",
                "cross_core_set_flag", "fp16", "PIPE_MTE2", "Ring"):
        assert not hasattr(pl, old), old


def test_scalar_helpers():
    seen = []

    @pl.jit
    def k(x: pl.Tensor[[8, 8], pl.DT_FP32]):
        seen.append((pl.min(3, 5), pl.max(3, 5), pl.const(2.7, pl.DT_INT32), pl.const(1, pl.DT_FP32)))
    k(np.zeros((8, 8), np.float32))
    assert seen[0] == (3, 5, 2, 1.0) and isinstance(seen[0][3], float)


def test_alias_pypto_pro_runs_a_kernel_file_with_its_own_import():
    """A kernel file written for PyPTO-Pro (`import pypto_pro.language as pl`) runs unchanged once aliased."""
    code = textwrap.dedent('''
        import numpy as np, pyto
        assert pyto.alias_pypto_pro()
        import pypto_pro.language as pl
        from pypto_pro.runtime.tilingkey import TilingKeyField
        assert pl is pyto.language and TilingKeyField(bits=2).bits == 2

        @pl.jit(auto_mutex=True)
        def add_kernel(a: pl.Tensor[[64, 64], pl.DT_FP16], b: pl.Tensor[[64, 64], pl.DT_FP16],
                       out: pl.Tensor[[64, 64], pl.DT_FP16]):
            tt = pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)
            tile_a = pl.make_tile_group(type=tt, addrs=0x0000, mutex_ids=[0])
            tile_b = pl.make_tile_group(type=tt, addrs=0x4000, mutex_ids=[1])
            tile_out = pl.make_tile_group(type=tt, addrs=0x8000, mutex_ids=[2])
            with pl.section_vector():
                cur_a, cur_b, cur_out = tile_a.current(), tile_b.current(), tile_out.current()
                pl.load(cur_a, a, [0, 0])
                pl.load(cur_b, b, [0, 0])
                pl.add(cur_out, cur_a, cur_b)
                pl.store(out, cur_out, [0, 0])

        a = np.full((64, 64), 1.5, np.float16); b = np.full((64, 64), 0.25, np.float16)
        out = np.zeros((64, 64), np.float16)
        add_kernel[None, 1](a, b, out)
        assert (out == np.float16(1.75)).all()
        print("ran")
    ''')
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and res.stdout.strip() == "ran", res.stderr


def test_torch_cpu_tensors_as_arguments():
    torch = pytest.importorskip("torch")
    x = torch.rand(16, 64, dtype=torch.float32)
    out = torch.zeros(16, 64, dtype=torch.float32)
    tiled_copy(x, out, Tiling(16, 2.0))
    assert torch.equal(out, x * 2)
    xb = torch.rand(16, 64).to(torch.bfloat16)
    with pytest.raises(pyto.ShapeError, match=r"parameter 'x' .* got a bf16 tensor"):
        tiled_copy(xb, out, Tiling(16, 2.0))
    ob = torch.zeros(16, 64, dtype=torch.bfloat16)
    bf16_copy(xb, ob)                                   # bf16 tensors are read and written through their bits
    assert torch.equal(ob, xb)


@pl.jit
def bf16_copy(x: pl.Tensor[[16, 64], pl.DT_BF16], out: pl.Tensor[[16, 64], pl.DT_BF16]):
    t = pl.make_tile(vec([16, 64], pl.DT_BF16), addr=0)
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        pl.system.bar_all()
        pl.store(out, t, [0, 0])


def test_bf16_numpy_arrays():
    import ml_dtypes
    x = RNG.random((16, 64)).astype(ml_dtypes.bfloat16)
    out = np.zeros_like(x)
    bf16_copy(x, out)
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("side", ["vector", "cube"])
def test_an_endless_loop_on_either_side_ends_in_a_capacity_error(side):
    """Every core's trace counts against max_block_instructions, also the ops of the other side it walks past (the
    AIC's trace walking an endless vector loop records nothing, and would otherwise never end)."""
    @pl.jit
    def endless(x: pl.Tensor[[16, 64], pl.DT_FP32]):
        t = pl.make_tile(vec([16, 64]), addr=0)
        with pl.section_cube():
            pass
        with getattr(pl, f"section_{side}")():
            while True:
                if side == "vector":
                    pl.add(t, t, 1.0)
                else:
                    pl.system.bar_m()
    with pyto.run_options(max_block_instructions=20_000):
        with pytest.raises(pyto.CapacityError, match=r"test_pro_language\.py:\d+ .*(pl\.add|bar_m).*more than 20,000 "):
            endless(np.zeros((16, 64), np.float32))
