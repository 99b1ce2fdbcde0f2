"""pyto.compile: one launch configuration checked once, computed for many inputs."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pyto
import pyto.language as pl
from pyto_kernels.examples.matmul_pingpong import matmul_pingpong
from pyto.testing import assert_close, cube_dtypes, matmul_bound, matmul_shapes
from test_emulator_matmul import _check, _operands

TILES = dict(TM=32, TN=48, TK=32)


def test_compiled_kernel_computes_new_inputs_like_run():
    """Each call computes its own inputs (float64 reference), bit for bit what pyto.run gives; the report is
    run's, in full mode."""
    M, N, K = 70, 90, 150
    compiled = pyto.compile(matmul_pingpong, pyto.spec((M, K), "fp16"), pyto.spec((K, N), "fp16"),
                            pyto.spec((M, N), "fp16"), blocks=3, **TILES)
    for seed in range(3):
        a, b, out = _operands(M, N, K, "fp16", seed)
        rep = compiled(a, b, out)
        _check(a, b, out, "fp16")
        by_run = np.zeros_like(out)
        ref = pyto.run(matmul_pingpong, a, b, by_run, blocks=3, **TILES)
        assert np.array_equal(out, by_run)
        assert rep.mode == "full" and rep.cycles == ref.cycles and rep.instructions == ref.instructions
    assert compiled.report.mode == "timing" and compiled.report.cycles == rep.cycles


@settings(max_examples=8, deadline=None)
@given(matmul_shapes(100, 100, 130), st.integers(1, 4), cube_dtypes())
def test_compiled_property(shape, blocks, dt):
    (M, N, K), name = shape, dt.name
    a, b, out = _operands(M, N, K, name, seed=0)
    compiled = pyto.compile(matmul_pingpong, a, b, out, blocks=blocks, TM=32, TN=32, TK=64 if name == "int8" else 32)
    for seed in (1, 2):
        a, b, out = _operands(M, N, K, name, seed)
        compiled(a, b, out)
        _check(a, b, out, name)


def test_calls_with_other_shapes_dtypes_or_counts_are_refused():
    a, b, out = _operands(32, 32, 64, "fp16", 0)
    compiled = pyto.compile(matmul_pingpong, a, b, out, **TILES)
    with pytest.raises(pyto.ShapeError, match=r"argument 'a' is \[32, 65\] fp16; kernel 'matmul_pingpong' was "
                                              r"compiled for \[32, 64\] fp16"):
        compiled(np.zeros((32, 65), np.float16), b, out)
    with pytest.raises(pyto.ShapeError, match="argument 'b' is .* fp32"):
        compiled(a, b.astype(np.float32), out)
    with pytest.raises(pyto.KernelError, match="compiled for 3 GM tensors"):
        compiled(a, b)
    with pytest.raises(pyto.ShapeError, match="must be a numpy array"):
        compiled(a, b, pyto.spec((32, 32), "fp16"))
    ro = out.copy()
    ro.flags.writeable = False
    with pytest.raises(pyto.ShapeError, match="read-only"):
        compiled(a, b, ro)
    a_ro = a.copy()
    a_ro.flags.writeable = False
    compiled(a_ro, b, out)     # an input may be read-only
    _check(a, b, out, "fp16")


def test_timing_only_compile_cannot_compute():
    specs = [pyto.spec(s, "fp16") for s in ((32, 64), (64, 32), (32, 32))]
    compiled = pyto.compile(matmul_pingpong, *specs, check=False, **TILES)
    assert compiled.report.cycles == pyto.run(matmul_pingpong, *specs, mode="timing", **TILES).cycles
    with pytest.raises(pyto.KernelError, match="check=False"):
        compiled(*_operands(32, 32, 64, "fp16", 0))


@pl.kernel
def unphased_store_race(a, b, out):
    """docs/cube_phase.md §6.2 misuse: a phased matmul whose store has no phase: a race."""
    ac = pl.alloc(pl.L0C, [32, 32], pl.DT_FP32)
    al, br = pl.alloc(pl.L0A, [32, 32], pl.DT_FP16), pl.alloc(pl.L0B, [32, 32], pl.DT_FP16)
    al1, bl1 = pl.alloc(pl.L1, [32, 32], pl.DT_FP16), pl.alloc(pl.L1, [32, 32], pl.DT_FP16)
    pl.load(al1, a, [0, 0])
    pl.load(bl1, b, [0, 0])
    pl.move(al, al1)
    pl.move(br, bl1)
    pl.matmul(ac, al, br, phase=pl.AccPhase.Final)
    pl.store(out, ac, [0, 0])


def test_compile_raises_what_run_raises():
    """The verdict belongs to the configuration: compile reports it, with specs alone."""
    specs = [pyto.spec((32, 32), "fp16")] * 3
    with pytest.raises(pyto.PytoError) as by_compile:
        pyto.compile(unphased_store_race, *specs)
    with pytest.raises(pyto.PytoError) as by_run:
        pyto.run(unphased_store_race, *specs, mode="timing")
    assert type(by_compile.value) is type(by_run.value) and str(by_compile.value) == str(by_run.value)
    assert isinstance(by_compile.value, pyto.RaceError), by_compile.value
    with pytest.raises(pyto.KernelError, match=r"pyto\.compile takes a @pl\.jit or @pl\.kernel function"):
        pyto.compile(lambda a: a, *specs)


def test_fp32_accumulation_bound_holds_per_call():
    """A different dtype per compile: bf16 operands into fp32 output, against the float64 reference."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((48, 96)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((96, 40)).astype(ml_dtypes.bfloat16)
    out = np.zeros((48, 40), np.float32)
    compiled = pyto.compile(matmul_pingpong, a, b, out, **TILES)
    compiled(a, b, out)
    assert_close(out, a.astype(np.float64) @ b.astype(np.float64), matmul_bound(a, b, np.float32))


def test_arguments_that_share_memory_with_an_output_are_refused():
    """pyto stages each GM argument apart: an output that aliases an input (the same array, or a view of it)
    would not behave as on the device, so it is a ShapeError naming both (a numerics helper's case); separate
    arrays, or two reads of one array, are fine."""
    a = np.ones((64, 64), np.float16)
    with pytest.raises(pyto.ShapeError, match="'a' and 'out' share memory"):
        pyto.run(matmul_pingpong, a, np.ones((64, 64), np.float16), a, TM=32, TN=32, TK=32)
    buf = np.zeros((128, 64), np.float16)
    with pytest.raises(pyto.ShapeError, match="share memory"):
        pyto.run(matmul_pingpong, buf[:64], a, buf[32:96], TM=32, TN=32, TK=32)
    out = np.zeros((64, 64), np.float16)
    pyto.run(matmul_pingpong, a, a, out, TM=32, TN=32, TK=32)       # a read twice: no write to it
    assert np.all(out == 64)


def test_compiled_kernel_called_from_threads_gives_each_its_result():
    """A CompiledKernel keeps one staged memory; calls from several threads take turns (they mixed: a numerics
    helper saw 48 of 48 wrong)."""
    from concurrent.futures import ThreadPoolExecutor
    a = np.zeros((128, 512), np.float16)
    b = np.zeros((512, 128), np.float16)
    mm = pyto.compile(matmul_pingpong, a, b, np.zeros((128, 128), np.float16), blocks=2, TM=64, TN=64, TK=64)

    def job(seed):
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((128, 512)).astype(np.float16)
        y = rng.standard_normal((512, 128)).astype(np.float16)
        out = np.zeros((128, 128), np.float16)
        mm(x, y, out)
        return bool(np.all(np.abs(out - x.astype(np.float64) @ y.astype(np.float64)) <= matmul_bound(x, y, np.float16)))

    with ThreadPoolExecutor(3) as pool:
        assert all(pool.map(job, range(9)))


def test_results_do_not_depend_on_the_callers_numpy_error_state():
    """inf * 0 in a matmul is NaN on the device, with np.seterr(all='raise') too (it was a FloatingPointError
    from inside pyto)."""
    a = np.zeros((32, 32), np.float16)
    a[0, 0] = np.inf
    b = np.zeros((32, 32), np.float16)
    out = np.zeros((32, 32), np.float16)
    with np.errstate(all="raise"):
        pyto.run(matmul_pingpong, a, b, out, TM=32, TN=32, TK=32)
    assert np.isnan(out[0]).all() and not np.isnan(out[1:]).any()


def test_a_compiled_kernel_refuses_static_parameters_at_call_time():
    from test_emulator_phases import _inputs, k_loop
    a, b, out = _inputs(32, 48, 64)
    compiled = pyto.compile(k_loop, a, b, out, K_TOTAL=64, TILE_K=32)
    with pytest.raises(pyto.KernelError, match=r"compiled kernel 'k_loop' called with K_TOTAL=64, TILE_K=32: static "
                                               r"parameters are fixed at compile time.*GM arrays only \(a, b, out\)"):
        compiled(a, b, out, K_TOTAL=64, TILE_K=32)
    assert not out.any()
    compiled(a, b, out)
    assert out.any()
