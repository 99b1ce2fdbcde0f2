"""Errors name the buffer, the numbers and the kernel line; nothing but PytoError escapes."""
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pyto
import pyto.language as pl
from pyto.testing import assert_close, assert_race, matmul_bound

from dsl_helpers import matmul_from_gm, matmul_tiles


def _mm_inputs(M=32, N=32, K=32):
    return (np.ones((M, K), np.float16), np.ones((K, N), np.float16), np.zeros((M, N), np.float32))


@pl.kernel
def big_l0c(a, b, out, *, M, N):
    pl.alloc(pl.L0C, [M, N], pl.DT_FP32)


def test_capacity_l0c_fits_950_not_a2():
    pyto.run(big_l0c, *_mm_inputs(), M=256, N=256)                      # 256 KB: fits 950PR's 256 KB
    with pytest.raises(pyto.CapacityError) as ei:
        pyto.run(big_l0c, *_mm_inputs(), M=256, N=256, chip="atlas-a2")  # ... not A2's 128 KB
    e = ei.value
    assert e.buffer == "L0C" and e.asked == 262144 and e.capacity == 131072 and e.in_use == 0
    msg = str(e)
    assert "L0C" in msg and "262144" in msg and "131072" in msg and "atlas-a2" in msg
    assert "test_emulator_errors.py:" in msg and "pl.alloc(pl.L0C, [M, N], pl.DT_FP32)" in msg


@pl.kernel
def ring_overflow(a, b, out):
    pl.alloc(pl.L1, [256, 256], pl.DT_FP16, buffers=2)                  # 256 KB
    pl.alloc(pl.L1, [256, 256], pl.DT_FP16, buffers=2)                  # another 256 KB: full
    pl.alloc(pl.L1, [16, 16], pl.DT_FP16)


def test_capacity_counts_rings_and_in_use():
    with pytest.raises(pyto.CapacityError) as ei:
        pyto.run(ring_overflow, *_mm_inputs())
    assert ei.value.in_use == 524288 and ei.value.asked == 512 and "L1" in str(ei.value)


@pl.kernel
def padded_charge(a, b, out):
    pl.alloc(pl.L0A, [17, 17], pl.DT_INT8)        # CeilAlign 32 for int8: 32*32 = 1024 B
    pl.alloc(pl.L0A, [250, 250], pl.DT_FP16)      # 256*256*2 = 131072 > 64 KB


def test_capacity_charged_at_padded_size():
    with pytest.raises(pyto.CapacityError) as ei:
        pyto.run(padded_charge, *_mm_inputs())
    assert ei.value.asked == 131072 and ei.value.in_use == 1024


@pl.kernel
def bad_view(a, b, out, *, R0, C0):
    ac = pl.alloc(pl.L0C, [64, 64], pl.DT_FP32)
    ac[R0:R0 + 16, C0:C0 + 16]


@pytest.mark.parametrize("r0,c0", [(8, 0), (0, 4)])
def test_view_off_fractal_grid(r0, c0):
    with pytest.raises(pyto.AlignmentError, match="fractal grid"):
        pyto.run(bad_view, *_mm_inputs(), R0=r0, C0=c0)


def test_view_on_grid_and_out_of_bounds():
    pyto.run(bad_view, *_mm_inputs(), R0=16, C0=48)
    with pytest.raises(pyto.OutOfBoundsError):
        pyto.run(bad_view, *_mm_inputs(), R0=64, C0=0)


@pl.kernel
def oob_load(a, b, out, *, R, VALID=None):
    t = pl.alloc(pl.L1, [16, 16], pl.DT_FP16)
    if VALID:
        pl.set_validshape(t, VALID)
    pl.load(t, a, [R, 0])


def test_gm_offset_out_of_bounds_and_edge_tile():
    with pytest.raises(pyto.OutOfBoundsError, match=r"valid region \[16, 16\] .* runs past the edge of GM tensor "
                                                    r"'a'.*rows 31:47.*set_validshape\(tile, \[1, 16\]\)"):
        pyto.run(oob_load, *_mm_inputs(), R=31)      # a partial edge tile is no longer clipped
    pyto.run(oob_load, *_mm_inputs(), R=31, VALID=(1, 16))    # its valid shape inside the tensor: loads
    with pytest.raises(pyto.OutOfBoundsError, match="outside GM tensor 'a'"):
        pyto.run(oob_load, *_mm_inputs(), R=32)


@pl.kernel
def wrong_buffer(a, b, out):
    al1 = pl.alloc(pl.L1, [32, 32], pl.DT_FP16)
    br = pl.alloc(pl.L0B, [32, 32], pl.DT_FP16)
    ac = pl.alloc(pl.L0C, [32, 32], pl.DT_FP32)
    pl.matmul(ac, al1, br)


@pl.kernel
def wrong_shape(a, b, out):
    al = pl.alloc(pl.L0A, [32, 48], pl.DT_FP16)
    br = pl.alloc(pl.L0B, [32, 32], pl.DT_FP16)
    ac = pl.alloc(pl.L0C, [32, 32], pl.DT_FP32)
    pl.matmul(ac, al, br)


@pl.kernel
def wrong_dtype(a, b, out):
    al = pl.alloc(pl.L0A, [32, 32], pl.DT_FP16)
    br = pl.alloc(pl.L0B, [32, 32], pl.DT_BF16)
    ac = pl.alloc(pl.L0C, [32, 32], pl.DT_FP32)
    pl.matmul(ac, al, br)


@pytest.mark.parametrize("kernel,text", [(wrong_buffer, "left operand must be in pl.MemorySpace.Left (L0A)"),
                                         (wrong_shape, "do not chain"), (wrong_dtype, "differ in dtype")])
def test_misuse_names_the_line(kernel, text):
    with pytest.raises(pyto.ShapeError) as ei:
        pyto.run(kernel, *_mm_inputs())
    assert text in str(ei.value) and "test_emulator_errors.py:" in str(ei.value) and "pl.matmul" in str(ei.value)


@pl.kernel
def takes_tile(a, b, out, *, T):
    pl.alloc(pl.L1, [T, T], pl.DT_FP16)


def test_static_params_must_be_python_scalars():
    with pytest.raises(pyto.KernelError, match="must be a Python int"):
        pyto.run(takes_tile, *_mm_inputs(), T=[16])
    with pytest.raises(pyto.KernelError, match="no static parameter"):
        pyto.run(takes_tile, *_mm_inputs(), TILE=16)
    with pytest.raises(pyto.ShapeError,
                       match=r"tile shape must be two positive ints \(a 2-D tile\), got \[16\.0, 16\.0\]"):
        pyto.run(takes_tile, *_mm_inputs(), T=16.0)


def test_missing_static_param_is_named():
    with pytest.raises(pyto.KernelError, match="needs the static parameter.*T"):
        pyto.run(takes_tile, *_mm_inputs())


def _misuse(what):
    """A kernel whose one misuse is `what(a, t)` (t: an L1 tile group of two tiles); `what` is defined in this
    file, so the line an error names is here."""
    @pl.kernel
    def misuse(a, b, out):
        what(a, pl.alloc(pl.L1, [32, 32], pl.DT_FP16, buffers=2))
    return misuse


def _nested_sections(a, t):
    with pl.section_cube():
        with pl.section_vector():
            pass


def _barrier_on_cube_pipe_in_vector_section(a, t):
    with pl.section_vector():
        pl.system.bar_m()


def _assign_gm_shape(a, t):
    a.shape = (1, 2)


def _python_error(a, t):
    M, K = a.shape[0]


@pytest.mark.parametrize("what,err,text", [
    (lambda a, t: pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.M, event_id=0), pyto.SyncError,
     "has no such pipe"),
    (_barrier_on_cube_pipe_in_vector_section, pyto.SyncError, "AIV .vector core. has no such pipe"),
    (_nested_sections, pyto.KernelError, "sections do not nest"),
    (lambda a, t: pl.alloc(pl.L1, [16, 16], pl.DT_FP16, layout=3), pyto.KernelError, "layout must be"),
    (lambda a, t: pl.alloc(pl.L1, [16, 16], pl.DT_FP16, buffers=True), pyto.KernelError, "buffers must be a positive"),
    (lambda a, t: pl.alloc(pl.L1, [16, 16], "complex"), pyto.ShapeError, "unknown dtype"),
    (lambda a, t: pl.workspace([True, 16], pl.DT_FP32), pyto.ShapeError, "workspace shape"),
    (lambda a, t: t[5], pyto.KernelError, "indexed by a slot number"),
    (lambda a, t: t[0:16, :], pyto.KernelError, "take a tile"),
    (lambda a, t: a[0], pyto.KernelError, "index one element with 2 indices"),
    (_assign_gm_shape, pyto.KernelError, "read-only in a kernel"),
    (lambda a, t: pl.load(t[0], a, [0, 0], order="yes"), pyto.KernelError, "pl.load order must list two axes"),
    (_python_error, pyto.KernelError, "raised TypeError"),
    (lambda a, t: pl.load(t[0], a, [0.0, 0]), pyto.KernelError, "offsets must be integers"),
    (lambda a, t: pl.load(t[0], a, [np.True_, 0]), pyto.KernelError, "offsets must be integers"),
    (lambda a, t: t[0][0:16.0, :], pyto.KernelError, "slice bounds must be integers"),
    (lambda a, t: pl.range(np.float32(4)), pyto.KernelError, "range bounds must be integers"),
])
def test_dsl_misuse_is_a_pyto_error_naming_the_line(what, err, text):
    with pytest.raises(err, match=text) as ei:
        pyto.run(_misuse(what), *_mm_inputs())
    assert "test_emulator_errors.py:" in str(ei.value), str(ei.value)


@pl.kernel
def numpy_int_indices(a, b, out):
    """Offsets, slice bounds and loop bounds computed with numpy (np.int64) work as Python ints do."""
    t = pl.alloc(pl.L1, [32, 32], pl.DT_FP16)
    ac = pl.alloc(pl.L0C, [32, 32], pl.DT_FP32)
    al, br = pl.alloc(pl.L0A, [32, 32], pl.DT_FP16), pl.alloc(pl.L0B, [32, 32], pl.DT_FP16)
    bl1 = pl.alloc(pl.L1, [32, 32], pl.DT_FP16)
    for k in pl.range(np.int64(0), np.int64(2)):
        pl.load(t, a, [np.int64(0), np.int64(32) * k])
        pl.load(bl1, b, [np.int32(32) * k, np.int64(0)])
        pl.move(al, t[np.int64(0):np.int64(32), :])
        pl.move(br, bl1)
        if k == 0:
            pl.matmul(ac, al, br)
        else:
            pl.matmul_acc(ac, ac, al, br)
    pl.store(out, ac, [np.int64(0), np.int64(0)])


def test_numpy_integers_index_like_python_ints():
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((32, 64)).astype(np.float16), rng.standard_normal((64, 32)).astype(np.float16)
    out = np.zeros((32, 32), np.float16)
    pyto.run(numpy_int_indices, a, b, out)
    assert_close(out, a.astype(np.float64) @ b.astype(np.float64), matmul_bound(a, b, np.float16))


def test_tiles_allocated_on_one_line_are_named_in_order():
    @pl.kernel
    def one_line(a, b, out):
        x = pl.alloc(pl.L1, [32, 32], pl.DT_FP16); y = pl.alloc(pl.L1, [1024, 1024], pl.DT_FP16)  # noqa: E702,F841

    with pytest.raises(pyto.CapacityError, match="'y' \\[1024, 1024\\]") as e:
        pyto.run(one_line, *_mm_inputs())
    # what is already held, so the author knows what to shrink (an onboarding review asked for it)
    assert re.search(r"in use: 'x' \[32, 32\] fp16 \(padded 32x32\) 2048 B at 0x0 \(line \d+\); shrink a tile",
                     str(e.value))


def test_dsl_outside_kernel_and_direct_call():
    with pytest.raises(pyto.KernelError, match="@pl.kernel"):
        pl.alloc(pl.L1, [16, 16], pl.DT_FP16)
    with pytest.raises(pyto.KernelError, match="@pl.kernel"):
        pl.range(4)
    with pytest.raises(pyto.KernelError, match="pyto.run"):
        takes_tile(*_mm_inputs(), T=16)


@pl.kernel
def vector_in_cube(a, b, out):
    u = pl.alloc(pl.UB, [16, 16], pl.DT_FP16)
    with pl.section_cube():
        pl.add(u, u, u)


def test_vector_op_in_cube_section():
    with pytest.raises(pyto.KernelError, match="section_vector"):
        pyto.run(vector_in_cube, *_mm_inputs())


@pl.kernel
def l0c_to_ub(a, b, out):
    ac = pl.alloc(pl.L0C, [32, 32], pl.DT_FP32)
    u = pl.alloc(pl.UB, [32, 32], pl.DT_FP32)
    pl.move(u, ac, acc_to_vec_mode=pl.AccToVecMode.SingleModeVec0)


def test_path_missing_on_a2():
    with pytest.raises(pyto.UnsupportedError, match="L0C->UB"):
        pyto.run(l0c_to_ub, *_mm_inputs(), chip="atlas-a2")


@pl.kernel
def read_before_write(a, b, out):
    al1 = pl.alloc(pl.L1, [32, 32], pl.DT_FP16)
    al = pl.alloc(pl.L0A, [32, 32], pl.DT_FP16)
    pl.move(al, al1)


def test_uninitialized_read():
    with pytest.raises(pyto.UninitializedReadError, match="L1 tile 'al1'"):
        pyto.run(read_before_write, *_mm_inputs())


@pl.kernel
def same_tile_all_blocks(a, b, out, *, SYNC):
    """Every block writes out[0:32, 0:32] (a cross-core WAW) unless they take turns around sync_all."""
    ac = pl.alloc(pl.L0C, [32, 32], pl.DT_FP32)
    al, br = pl.alloc(pl.L0A, [32, 32], pl.DT_FP16), pl.alloc(pl.L0B, [32, 32], pl.DT_FP16)
    al1, bl1 = pl.alloc(pl.L1, [32, 32], pl.DT_FP16), pl.alloc(pl.L1, [32, 32], pl.DT_FP16)
    pl.load(al1, a)
    pl.load(bl1, b)
    pl.move(al, al1)
    pl.move(br, bl1)
    pl.matmul(ac, al, br)
    for turn in pl.range(pl.get_block_num()):
        if turn == pl.get_block_idx() or not SYNC:
            pl.store(out, ac, [0, 0])
        if SYNC:
            pl.system.sync_all(core_type=pl.SyncCoreType.AIC_ONLY)


def test_gm_race_across_cores_and_sync_all():
    a, b, out = _mm_inputs()
    pyto.run(same_tile_all_blocks, a, b, out, blocks=3, SYNC=True)
    assert np.all(out == 32.0)
    e = assert_race(same_tile_all_blocks, a, b, out, blocks=3, SYNC=False)
    assert "WAW" in str(e) and "GM tensor 'out'" in str(e)
    # every pair of blocks races on the tile; the report names two different ones
    assert len(set(re.findall(r"AIC of block (\d)", str(e)))) == 2, str(e)


def _one_product(a, b, a_l1, b_l1, a0, b0, c):
    pl.load(a_l1, a, [0, 0])
    pl.load(b_l1, b, [0, 0])
    pl.move(a0, a_l1)
    pl.move(b0, b_l1)
    pl.matmul(c, a0, b0)


def _fp32_tiles():
    return (pl.alloc(pl.L1, [16, 16], pl.DT_FP32), pl.alloc(pl.L1, [16, 16], pl.DT_FP32), pl.alloc(pl.L0A, [16, 16], pl.DT_FP32),
            pl.alloc(pl.L0B, [16, 16], pl.DT_FP32), pl.alloc(pl.L0C, [16, 16], pl.DT_FP32))


@pl.kernel
def race_then_rewrite(a, b, out):
    """Phase 0: both blocks write out[0:16] (a race); phase 1: block 0 rewrites those rows. Block 1 follows
    block 0's clocks: its phase-0 store must be checked before block 0's phase-1 store covers block 0's."""
    a_l1, b_l1, a0, b0, c = _fp32_tiles()
    with pl.section_cube():
        _one_product(a, b, a_l1, b_l1, a0, b0, c)
        pl.store(out, c, [0, 0])
    pl.system.sync_all(core_type=pl.SyncCoreType.AIC_ONLY)
    with pl.section_cube():
        pl.store(out, c, [16 * pl.get_block_idx(), 0])


@pl.kernel
def atomic_then_plain(a, b, out):
    """Every block adds into out[0:16] atomically, then block 0 overwrites it: a race with block 1's add,
    though block 0's own add (not ordered with block 1's) covered that entry."""
    a_l1, b_l1, a0, b0, c = _fp32_tiles()
    with pl.section_cube():
        _one_product(a, b, a_l1, b_l1, a0, b0, c)
        pl.store(out, c, [0, 0], atomic=pl.AtomicType.AtomicAdd)
        if pl.get_block_idx() == 0:
            pl.store(out, c, [0, 0])


@pl.kernel
def read_then_atomic(a, b, out, *, SLOW: int):
    """After sync_all block 1 reads ws and then adds into it while block 0 adds into it: block 1's read
    races with block 0's add, whichever comes first (SLOW delays block 0)."""
    ws = pl.workspace([16, 16], pl.DT_FP32)
    a_l1, b_l1, a0, b0, c = _fp32_tiles()
    with pl.section_cube():
        _one_product(a, b, a_l1, b_l1, a0, b0, c)
        if pl.get_block_idx() == 0:
            pl.store(ws, c, [0, 0])
    pl.system.sync_all(core_type=pl.SyncCoreType.AIC_ONLY)
    with pl.section_cube():
        if pl.get_block_idx() == 1:
            pl.load(a_l1, ws, [0, 0])
        for _ in pl.range(SLOW if pl.get_block_idx() == 0 else 0):
            pl.matmul(c, a0, b0)
        pl.store(ws, c, [0, 0], atomic=pl.AtomicType.AtomicAdd)
        pl.store(out, c, [16 * pl.get_block_idx(), 0])


@pytest.mark.parametrize("mode", ["full", "timing"])
@pytest.mark.parametrize("kernel,rows,params", [(race_then_rewrite, 32, {}), (atomic_then_plain, 16, {}),
                                                (read_then_atomic, 32, {"SLOW": 0}),
                                                (read_then_atomic, 32, {"SLOW": 40})])
def test_gm_races_hidden_by_covering_writes_are_found(kernel, rows, params, mode):
    """A covering write drops an earlier access only when that access happens before it (not for two
    atomic adds, not for a phase checked late); found by a fuzzing helper against an independent model."""
    a, b = np.ones((16, 16), np.float32), np.ones((16, 16), np.float32)
    out = np.zeros((rows, 16), np.float32)
    args = (a, b, out) if mode == "full" else tuple(pyto.spec(x.shape, "fp32") for x in (a, b, out))
    with pytest.raises(pyto.RaceError, match="GM"):
        pyto.run(kernel, *args, blocks=2, mode=mode, **params)


@pl.kernel
def expert_sync(a, b, out, *, MODE):
    al1 = pl.alloc(pl.L1, [32, 32], pl.DT_FP16)
    al = pl.alloc(pl.L0A, [32, 32], pl.DT_FP16)
    pl.load(al1, a)
    if MODE in (0, 2):
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE1, event_id=0)
    if MODE == 2:
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE1, event_id=0)
    pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE1, event_id=0)
    pl.move(al, al1)


def test_expert_flags_without_auto_sync():
    pyto.run(expert_sync, *_mm_inputs(), MODE=0, auto_sync=False)
    with pytest.raises(pyto.DeadlockError, match=r"waits for event \(PipeType\.MTE2->PipeType\.MTE1, event_id 0\)"):
        pyto.run(expert_sync, *_mm_inputs(), MODE=1, auto_sync=False)
    with pytest.raises(pyto.SyncError, match="set again"):
        pyto.run(expert_sync, *_mm_inputs(), MODE=2, auto_sync=False)


@pl.kernel
def flag_left_set(a, b, out, *, AGAIN: bool):
    """A K loop's prefetch flag, raised once more after the last step (AGAIN) than it is waited for."""
    al1 = pl.alloc(pl.L1, [32, 32], pl.DT_FP16)
    al = pl.alloc(pl.L0A, [32, 32], pl.DT_FP16)
    for _ in pl.range(2):
        pl.load(al1, a)
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE1, event_id=1)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE1, event_id=1)
        pl.move(al, al1)
        pl.system.sync_src(set_pipe=pl.PipeType.MTE1, wait_pipe=pl.PipeType.MTE2, event_id=2)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE1, wait_pipe=pl.PipeType.MTE2, event_id=2)
    if AGAIN:
        pl.system.sync_src(set_pipe=pl.PipeType.MTE1, wait_pipe=pl.PipeType.MTE2, event_id=2)


@pytest.mark.parametrize("mode", ["full", "timing"])
def test_an_event_left_set_when_the_kernel_ends_is_a_sync_error(mode):
    """mssanitizer's synccheck: a sync_src no sync_dst consumes leaves the event set for the next kernel
    (found by a kernel-author review)."""
    args = _mm_inputs() if mode == "full" else [pyto.spec((32, 32), "fp16")] * 3
    pyto.run(flag_left_set, *args, AGAIN=False, auto_sync=False, mode=mode)
    with pytest.raises(pyto.SyncError, match=r"test_emulator_errors\.py:\d+ .*wait_pipe=pl\.PipeType\.MTE2, "
                                              r"event_id=2\): pl\.system\.sync_src on block 0 AIC is set 1 more "
                                              r"time\(s\) than it is waited for"):
        pyto.run(flag_left_set, *args, AGAIN=True, auto_sync=False, mode=mode)
    with pyto.run_options(check=False), pytest.raises(pyto.SyncError, match="still set"):
        pyto.run(flag_left_set, *[pyto.spec((32, 32), "fp16")] * 3, AGAIN=True, auto_sync=False, mode="timing")


@pl.kernel
def unsynced(a, b, out):
    al1 = pl.alloc(pl.L1, [32, 32], pl.DT_FP16)
    al = pl.alloc(pl.L0A, [32, 32], pl.DT_FP16)
    pl.load(al1, a)
    pl.move(al, al1)


def test_auto_sync_off_exposes_race():
    pyto.run(unsynced, *_mm_inputs())
    e = assert_race(unsynced, *_mm_inputs(), auto_sync=False)
    assert "RAW" in str(e) and "PIPE_MTE2" in str(e) and "PIPE_MTE1" in str(e)


# ---- fuzz: random op sequences; only PytoError may escape ---------------------------------------
_OPS = st.tuples(st.sampled_from(["load_gm", "load_l0", "matmul", "matmul_acc", "store", "move", "view",
                                  "add", "sync", "barrier"]),
                 st.integers(0, 6), st.integers(0, 6), st.integers(-20, 80), st.integers(-20, 80),
                 st.sampled_from([None, "Partial", "Final"]))


_BARRIERS = (pl.system.bar_m, pl.system.bar_mte1, pl.system.bar_mte2, pl.system.bar_mte3, pl.system.bar_fix,
             pl.system.bar_v, pl.system.bar_all)


def _fuzz_kernel(ops):
    @pl.kernel
    def fuzz(a, b, out):
        tiles = [pl.alloc(pl.L1, [32, 32], pl.DT_FP16), pl.alloc(pl.L1, [32, 48], pl.DT_FP16),
                 pl.alloc(pl.L0A, [32, 32], pl.DT_FP16), pl.alloc(pl.L0B, [32, 48], pl.DT_FP16),
                 pl.alloc(pl.L0C, [32, 48], pl.DT_FP32), pl.alloc(pl.UB, [32, 48], pl.DT_FP32),
                 pl.alloc(pl.L0B, [32, 32], pl.DT_FP16)]
        gms = [a, b, out]
        for kind, i, j, x, y, ph in ops:
            t, u = tiles[i], tiles[j]
            acc = getattr(pl.AccPhase, ph) if ph else None
            stp = getattr(pl.STPhase, ph) if ph else None
            if kind == "load_gm":
                pl.load(t, gms[j % 3], [x, y])
            elif kind == "load_l0":
                pl.move(t, u)
            elif kind == "matmul":
                pl.matmul(tiles[4], t, u, phase=acc)
            elif kind == "matmul_acc":
                pl.matmul_acc(t, t, tiles[2], u, phase=acc)
            elif kind == "store":
                pl.store(gms[j % 3], t, [x, y], phase=stp)
            elif kind == "move":
                pl.move(t, u, phase=stp)
            elif kind == "view":
                t[x:y, 0:16]
            elif kind == "add":
                pl.add(t, u, t)
            elif kind == "sync":
                pl.system.sync_src(set_pipe=pl.PipeType(i % 7), wait_pipe=pl.PipeType(j % 7), event_id=x)
            else:
                _BARRIERS[i % len(_BARRIERS)]()
    return fuzz


@settings(max_examples=150)
@given(st.lists(_OPS, min_size=1, max_size=8))
def test_random_op_sequences_raise_only_pyto_errors(ops):
    a, b, out = np.ones((64, 64), np.float16), np.ones((64, 64), np.float16), np.zeros((64, 64), np.float32)
    before = out.copy()
    try:
        pyto.run(_fuzz_kernel(ops), a, b, out)
    except pyto.PytoError as e:
        assert np.array_equal(out, before)
        assert "test_emulator_errors.py" in str(e) or isinstance(e, (pyto.DeadlockError,))


def test_run_leaves_the_garbage_collector_as_it_found_it():
    """pyto.run pauses Python's cyclic GC while it traces; the caller's setting is restored, on errors too."""
    import gc
    a, b, out = _mm_inputs()
    was = gc.isenabled()
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            pyto.run(same_tile_all_blocks, a, b, out.copy(), blocks=1, SYNC=True)
            assert gc.isenabled() is enabled
            with pytest.raises(pyto.errors.RaceError):
                pyto.run(same_tile_all_blocks, a, b, out.copy(), blocks=2, SYNC=False)
            assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


# ---- what the host or the chip cannot hold ------------------------------------------------------------------
@pl.kernel
def scratch_ws(a, out, *, ROWS: int):
    ws = pl.workspace([ROWS, 1 << 20], pl.DT_FP32)  # noqa: F841


def test_gm_tensors_beyond_the_chips_gm_are_a_capacity_error():
    """950PR holds 128 GB of GM (HiBL 1.0): the arguments are checked before tracing, a workspace where it is made."""
    with pytest.raises(pyto.CapacityError, match=r"GM overflow on ascend950pr: .*'a' \[1048576, 131072\] fp16 "
                                                 r"274,877,906,944 B.*capacity 137,438,953,472 B") as e:
        pyto.run(takes_tile, pyto.spec((1 << 20, 1 << 17), "fp16"), pyto.spec((16, 16), "fp16"),
                 pyto.spec((16, 16), "fp32"), mode="timing", T=16)
    assert e.value.buffer == "GM" and e.value.capacity == 137438953472
    with pytest.raises(pyto.CapacityError, match=r"test_emulator_errors.py:\d+ ws = pl.workspace.*GM overflow.*'ws'"):
        pyto.run(scratch_ws, pyto.spec((16, 16), "fp16"), pyto.spec((16, 16), "fp16"), mode="timing", ROWS=40000)
    pyto.run(scratch_ws, pyto.spec((16, 16), "fp16"), pyto.spec((16, 16), "fp16"), mode="timing", ROWS=4)


def test_a_block_tracing_past_the_instruction_limit_is_a_capacity_error():
    """One block's trace is held until encoded: past max_block_instructions a CapacityError names the line and the
    option (a 10^5-cubed bmm in timing mode grew to 15 GB before)."""
    from pyto_kernels.examples.matmul_pingpong import matmul_pingpong
    specs = (pyto.spec((256, 1024), "fp16"), pyto.spec((1024, 256), "fp16"), pyto.spec((256, 256), "fp16"))
    with pyto.run_options(max_block_instructions=100):
        with pytest.raises(pyto.CapacityError, match=r"matmul_pingpong.py:\d+ pl\.\w+.*block 0 AIC traced more than "
                                                     r"100 instructions.*max_block_instructions") as e:
            pyto.run(matmul_pingpong, *specs, mode="timing")
    assert e.value.capacity == 100
    assert pyto.run(matmul_pingpong, *specs, mode="timing").instructions > 100     # the default is back
    with pytest.raises(pyto.KernelError, match="max_block_instructions must be a positive int"):
        with pyto.run_options(max_block_instructions=0):
            pass


@pl.kernel
def runs_out_of_memory(a, b, out):
    raise MemoryError()


def test_host_memory_running_out_while_tracing_is_a_capacity_error():
    with pytest.raises(pyto.CapacityError, match=r"test_emulator_errors.py:\d+ raise MemoryError\(\): host memory ran "
                                                 r"out tracing kernel 'runs_out_of_memory' \(block 0 AIC, 0 "
                                                 r"instructions so far\)") as e:
        pyto.run(runs_out_of_memory, *_mm_inputs())
    assert e.value.buffer == "host"


def test_a_kernel_installed_in_site_packages_is_named_by_its_own_line(tmp_path):
    """Frames in site-packages are skipped when looking for the kernel author's line (numpy's own frames), except the
    kernel's own file: an installed kernels package was reported as '<unknown>:0' (an onboarding review)."""
    import importlib.util
    folder = tmp_path / "site-packages"
    folder.mkdir()
    src = folder / "installed_kernel.py"
    src.write_text("import pyto.language as pl\n\n\n@pl.kernel\ndef k(a, b, out):\n    assert a.shape[0] == 3, 'rows'\n")
    spec = importlib.util.spec_from_file_location("installed_kernel", src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(pyto.KernelError, match=r"installed_kernel.py:6 assert a.shape\[0\] == 3, 'rows': kernel 'k' "
                                               r"raised AssertionError: rows"):
        pyto.run(mod.k, *_mm_inputs())


@pl.kernel
def sync_all_in_one_block(x, out):
    """An AIV-only kernel: each AIV is a block of its own; the first two call sync_all, the others never do."""
    t = pl.alloc(pl.UB, [16, 64], pl.DT_FP32)
    r = pl.get_block_idx() * 16
    with pl.section_vector():
        pl.load(t, x, [r, 0])
    if pl.get_block_idx() < 2:
        pl.system.sync_all(core_type=pl.SyncCoreType.AIV_ONLY)
    with pl.section_vector():
        pl.store(out, t, [r, 0])


def test_a_sync_all_some_cores_never_reach_is_a_deadlock():
    """A launch-wide barrier that AIVs 2 and 3 never call hangs the chip (an error-message helper found it ran to
    completion: only the cores that called it were counted)."""
    x = np.ones((64, 64), np.float32)
    with pytest.raises(pyto.DeadlockError, match=r"2 of 4 cores arrived; calls of pl\.system\.sync_all per core "
                                                 r"differ: 1 on most, fewer on AIV 2 \(0\), AIV 3 \(0\)"):
        pyto.run(sync_all_in_one_block, x, np.zeros_like(x), blocks=4)


def test_launch_argument_mistakes_say_what_to_write():
    """An error-message helper's cases: each names the fix, not just the mistake."""
    from pyto_kernels.examples.matmul_pingpong import matmul_pingpong
    a = np.ones((32, 32), np.float16)
    with pytest.raises(pyto.KernelError, match=r"static parameters are keywords: TM=32"):
        pyto.run(matmul_pingpong, a, a, a.copy(), 32)
    with pytest.raises(pyto.KernelError, match=r"'out' is a GM tensor: pass it positionally"):
        pyto.run(matmul_pingpong, a, a, out=a.copy())
    with pytest.raises(pyto.KernelError, match=r"TM=an array \[32, 32\] float16"):
        pyto.run(matmul_pingpong, a, a, a.copy(), TM=a)
    with pytest.raises(pyto.KernelError, match=r"blocks must be an int in 1\.\.32, got 1\.5"):
        pyto.run(matmul_pingpong, a, a, a.copy(), blocks=1.5)
    with pytest.raises(pyto.KernelError, match=r"auto_sync=.no."):
        pyto.run(matmul_pingpong, a, a, a.copy(), auto_sync="no")


@pl.kernel
def ring_as_tile(a, out):
    a_l1 = pl.alloc(pl.L1, [32, 32], a.dtype, buffers=2)
    pl.load(a_l1, a)


def test_a_ring_where_a_tile_goes_says_take_a_slot():
    a = np.ones((32, 32), np.float16)
    with pytest.raises(pyto.ShapeError, match=r"pl\.load destination must be a tile in L1/UB, got the tile group "
                                             r"'a_l1' \(2 L1 tiles\): take a slot with \.next\(\)"):
        pyto.run(ring_as_tile, a, a.copy())


def test_run_plan_on_operands_of_another_problem():
    from pyto_kernels.bmm import plan
    from pyto_kernels.bmm.api import run_plan
    p = plan((2, 256, 256), (2, 256, 256), "fp16")
    with pytest.raises(pyto.ShapeError, match=r"the plan is for B \(2,\) M 256 .* M 128 .*make a new plan"):
        run_plan(p, pyto.spec((2, 128, 256), "fp16"), pyto.spec((2, 256, 256), "fp16"))


@pl.kernel
def workspace_handoff_without_flag(a, b, out):
    """The AIC stores a product to a GM workspace, the AIVs read it back, and nothing orders the two cores."""
    M, K = a.shape
    N = b.shape[1]
    ws = pl.workspace([M, N], pl.DT_FP32)
    tiles = matmul_tiles(M, K, N, pl.DT_FP16)
    u = pl.alloc(pl.UB, [M // 2, N], pl.DT_FP32)
    with pl.section_cube():
        matmul_from_gm(tiles, a, [0, 0], b, [0, 0])
        pl.store(ws, tiles[-1])
    with pl.section_vector():
        r = pl.get_subblock_idx() * (M // 2)
        pl.load(u, ws, [r, 0])
        pl.store(out, u, [r, 0])


def test_a_consumer_that_runs_ahead_of_its_producer_is_a_raw():
    """Across cores there is no program order; the AIVs' unflagged reads run first in the schedule, but they
    read what only the AIC's store provides: a RAW naming the store first (a fused-kernel helper found a WAR
    whose fix ordered the read before the write)."""
    a = np.ones((64, 64), np.float16)
    with pytest.raises(pyto.RaceError, match=r"RAW hazard.*GM tensor 'ws'[^\n]*\n  PIPE_FIX \(AIC of block 0\) "
                                             r"write: [^\n]*pl\.store\(ws, tiles\[-1\]\)\n  PIPE_MTE2 \(AIV0 of block 0\) read"):
        pyto.run(workspace_handoff_without_flag, a, a.copy(), np.zeros((64, 64), np.float32), chip="atlas-a2")


@pl.kernel
def load_then_scale_unsynced(x, out):
    t = pl.alloc(pl.UB, [16, 64], pl.DT_FP32)
    with pl.section_vector():
        r = pl.get_block_idx() * 16
        pl.load(t, x, [r, 0])
        pl.mul(t, t, 2.0)
        pl.store(out, t, [r, 0])


def test_an_in_place_op_racing_a_write_is_a_raw():
    """mul(t, t) unordered after a load into t: its read is the telling half (README's example said RAW, the
    report said WAW: the schedule ran the mul first and its write, covering its read, was all the history kept)."""
    x = np.ones((32, 64), np.float32)
    msg = str(assert_race(load_then_scale_unsynced, x, np.zeros_like(x), blocks=2, auto_sync=False))
    assert re.search(r"RAW hazard detected at UB: UB tile 't'\[0:16, 0:64\]\n  PIPE_MTE2 \(AIV 0\) "
                     r"write: [^\n]*pl\.load\(t, x[^\n]*\n  PIPE_V \(AIV 0\) read: [^\n]*pl\.mul", msg), msg


@pl.kernel
def grouped_rows(x, out, *, GROUPS: tuple):
    """Each group of rows (sizes from a static tuple, multiples of 16) copied through UB by one block (an AIV-only
    kernel: each AIV is a block)."""
    t = pl.alloc(pl.UB, [16, 32], x.dtype)
    start = sum(GROUPS[:pl.get_block_idx()])
    with pl.section_vector():
        for r in range(start, start + GROUPS[pl.get_block_idx()], 16):
            pl.load(t, x, [r, 0])
            pl.store(out, t, [r, 0])


def test_a_tuple_of_scalars_is_a_static_parameter():
    """Grouped kernels take their group sizes as a tuple (a fused-kernel helper had to build a closure), numpy
    integers in it too (issue 24: read as ints); a list or a tuple holding an array is still refused."""
    x = np.arange(64 * 32, dtype=np.float32).reshape(64, 32)
    out = np.zeros_like(x)
    pyto.run(grouped_rows, x, out, blocks=2, GROUPS=(16, 48))
    assert np.array_equal(out, x)
    out[:] = 0
    pyto.run(grouped_rows, x, out, blocks=2, GROUPS=(16, np.int64(48)))
    assert np.array_equal(out, x)
    with pytest.raises(pyto.KernelError, match="or a tuple of them"):
        pyto.run(grouped_rows, x, out, blocks=2, GROUPS=[16, 48])
    with pytest.raises(pyto.KernelError, match="or a tuple of them"):
        pyto.run(grouped_rows, x, out, blocks=2, GROUPS=(16, np.array([48])))


@pl.kernel
def bias_row_in_l1(a, b, bias, out, *, MISUSE: str):
    """A bias row staged in L1 as an ND row on its way to BT; MISUSE puts an ND L1 tile where it cannot go."""
    M, K = a.shape
    N = b.shape[1]
    tiles = matmul_tiles(M, K, N, pl.DT_FP16)
    row = pl.alloc(pl.L1, [2 if MISUSE == "two rows" else 1, N], pl.DT_FP32, layout="ND")
    bt = pl.alloc(pl.BT, [1, N], pl.DT_FP32)
    with pl.section_cube():
        pl.load(row, bias)
        pl.move(bt, row)
        a_l1, b_l1, a_l0a, b_l0b, c_l0c = tiles
        pl.load(a_l1, a, [0, 0])
        pl.load(b_l1, b, [0, 0])
        pl.move(a_l0a, a_l1)
        pl.move(b_l0b, b_l1)
        pl.matmul(c_l0c, a_l0a, b_l0b, bt)
        if MISUSE == "cube operand":
            pl.move(pl.alloc(pl.L0B, [1, N], pl.DT_FP32), row)
        pl.store(out, tiles[-1])


@pl.kernel
def l1_full_with_bias_rows(a, *, N: int):
    pl.alloc(pl.L1, [16, 16320], pl.DT_FP16)
    rows = pl.alloc(pl.L1, [1, N], pl.DT_FP32, layout="ND", buffers=2)


def test_a_bias_row_in_l1_is_an_nd_row_for_bt_only():
    """docs/tile_shapes.md §6.5's bias path GM -> L1 -> BT: the row sits in L1 as it is copied (ND, one 32B-aligned row, not a
    16-row fractal: a docs/tile_shapes.md audit found 16 x 256 fp32 rows crowding a legal tiling out of L1); a cube operand
    or a matrix cannot be ND in L1."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((32, 64)).astype(np.float16), rng.standard_normal((64, 48)).astype(np.float16)
    bias, out = rng.standard_normal((1, 48)).astype(np.float32), np.zeros((32, 48), np.float32)
    rep = pyto.run(bias_row_in_l1, a, b, bias, out, MISUSE="")
    assert_close(out, a.astype(np.float64) @ b.astype(np.float64) + bias, matmul_bound(a, b, np.float32, bias=bias))
    assert rep.instructions == 8
    pyto.run(l1_full_with_bias_rows, a, N=256)           # 522240 + 2 x 256 x 4 = 524288 B: fits exactly
    with pytest.raises(pyto.CapacityError, match=r"'rows' \[1, 264\] fp32 \(padded 1x264\) x 2 buffers asks 2112 B"):
        pyto.run(l1_full_with_bias_rows, a, N=264)
    with pytest.raises(pyto.ShapeError, match=r"an ND tile in L1 is a single row \(a bias row for BT\), got \[2, 48\]"):
        pyto.run(bias_row_in_l1, a, b, np.zeros((2, 48), np.float32), out, MISUSE="two rows")
    with pytest.raises(pyto.ShapeError, match=r"L1 tile 'row' is an ND row in Mat \(for the Bias table\); the cube's "
                                              r"operands come from NZ or ZN Mat tiles"):
        pyto.run(bias_row_in_l1, a, b, bias, out, MISUSE="cube operand")


@pl.kernel
def layout_typo(a, out):
    pl.alloc(pl.L0A, [16, 16], pl.DT_FP16, layout="XX")


def test_an_unknown_layout_is_named_as_such():
    a = np.zeros((16, 16), np.float16)
    with pytest.raises(pyto.ShapeError, match=r"unknown layout 'XX'; formats are ND, DN, NZ, ZZ, ZN, NN \(L0A tiles "
                                              r"are ZZ on atlas-a2\)"):
        pyto.run(layout_typo, a, a.copy(), chip="atlas-a2")


@pl.kernel
def waits_then_sets(x, out):
    """The AIC waits for flag 1 (MTE2) then sets flag 0 (FIX); each AIV waits for 0 then sets 1: on A2/A3 the
    AIC's wait holds its FIX pipe too, so nothing moves."""
    with pl.section_cube():
        pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=1)
        pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0)
    with pl.section_vector():
        pl.system.wait_cross_core(pipe=pl.PipeType.V, event_id=0)
        pl.system.set_cross_core(pipe=pl.PipeType.V, event_id=1)


def test_an_a2_deadlock_from_a_core_wide_wait_says_so():
    """The same kernel runs on the 950, where a cross-core wait holds only its pipe; on A2 the report names the
    chip's rule, not auto-sync (an A2-porting helper's case)."""
    x = np.zeros((16, 16), np.float16)
    pyto.run(waits_then_sets, x, x.copy(), auto_sync=False)
    with pytest.raises(pyto.DeadlockError, match=r"a cross-core wait holds every pipe of its core on this chip"):
        pyto.run(waits_then_sets, x, x.copy(), chip="atlas-a2", auto_sync=False)
