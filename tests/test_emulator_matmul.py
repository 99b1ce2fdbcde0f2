"""The double-buffered multi-core matmul kernel against a float64 numpy reference."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pyto
import pyto.language as pl
from dsl_helpers import matmul_from_gm, matmul_tiles
from pyto_kernels.examples.matmul_pingpong import matmul_pingpong
from pyto.testing import assert_close, assert_matches, cube_dtypes, matmul_bound, matmul_shapes

DTYPES = {"fp16": (np.float16, np.float16), "bf16": (ml_dtypes.bfloat16, ml_dtypes.bfloat16),
          "fp32": (np.float32, np.float32), "int8": (np.int8, np.int32)}


def _operands(M, N, K, name, seed):
    rng = np.random.default_rng(seed)
    dt, odt = DTYPES[name]
    if name == "int8":
        a = rng.integers(-128, 128, (M, K)).astype(dt)
        b = rng.integers(-128, 128, (K, N)).astype(dt)
    else:
        a = rng.standard_normal((M, K)).astype(dt)
        b = rng.standard_normal((K, N)).astype(dt)
    return a, b, np.zeros((M, N), odt)


def _check(a, b, out, name):
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if name == "int8":
        assert np.array_equal(out, ref.astype(np.int64).astype(np.int32))
    else:
        assert_close(out, ref, matmul_bound(a, b, out.dtype))


@pytest.mark.parametrize("name", list(DTYPES))
@pytest.mark.parametrize("M,N,K,blocks", [(128, 128, 256, 1), (200, 150, 333, 4), (17, 33, 70, 3), (1, 1, 1, 1)])
def test_pingpong_matmul_matches_numpy(name, M, N, K, blocks):
    a, b, out = _operands(M, N, K, name, seed=M * N + K)
    tk = 64 if name != "fp32" else 32
    pyto.run(matmul_pingpong, a, b, out, blocks=blocks, TM=64, TN=64, TK=tk)
    _check(a, b, out, name)


@settings(max_examples=15)
@given(matmul_shapes(150, 150, 200), st.integers(1, 6), cube_dtypes())
def test_pingpong_matmul_property(shape, blocks, dt):
    (M, N, K), name = shape, dt.name
    a, b, out = _operands(M, N, K, name, seed=1)
    pyto.run(matmul_pingpong, a, b, out, blocks=blocks, TM=32, TN=48, TK=32 if name != "int8" else 64)
    _check(a, b, out, name)


def test_assert_matches_runs_and_compares_with_the_reference():
    """pyto.testing.assert_matches for a kernel author's own tests: int8 exact, a wrong reference fails."""
    a, b, out = _operands(40, 24, 96, "int8", seed=3)
    rep = assert_matches(matmul_pingpong, lambda x, y: x @ y, a, b, out, blocks=2, TM=32, TN=32, TK=64)
    assert rep.instructions > 0 and np.array_equal(out, a.astype(np.int32) @ b.astype(np.int32))
    with pytest.raises(AssertionError, match="beyond the bound"):
        assert_matches(matmul_pingpong, lambda x, y: x @ y + 1, a, b, out, TM=32, TN=32, TK=64)
    a, b, out = _operands(40, 24, 96, "fp32", seed=3)
    # a matmul's accumulation is not one rounding: its bound is matmul_bound's
    assert_matches(matmul_pingpong, lambda x, y: x @ y, a, b, out, TM=32, TN=32, TK=32,
                   bound=lambda x, y: matmul_bound(x, y, np.float32))


def test_pingpong_on_a2_and_multicore_report():
    a, b, out = _operands(256, 256, 512, "fp16", seed=3)
    rep = pyto.run(matmul_pingpong, a, b, out, chip="atlas-a2", blocks=8, TM=128, TN=128, TK=64)
    _check(a, b, out, "fp16")
    assert rep.chip == "atlas-a2" and rep.blocks == 8
    assert rep.cycles > 0 and rep.time_us > 0 and rep.instructions > 0
    assert set(rep.pipe_cycles) >= {"MTE2", "MTE1", "M", "FIX"}
    assert rep.bottleneck in rep.pipe_cycles
    assert "T_total" in rep.summary()


def test_double_buffering_overlaps_pipes():
    """With rings of two, MTE2 of the next K step overlaps MMAD: faster than single-buffered."""
    a, b, out = _operands(128, 128, 2048, "fp16", seed=4)
    t2 = pyto.run(matmul_pingpong, a, b, out, TM=128, TN=128, TK=64, STAGES=2).cycles
    t1 = pyto.run(matmul_pingpong, a, b, out, TM=128, TN=128, TK=64, STAGES=1).cycles
    assert t2 < t1


@pl.kernel
def int8_bias(a, b, bias, out):
    M, K = a.shape
    N = b.shape[1]
    a1, b1, r1 = pl.alloc(pl.L1, [M, K], pl.DT_INT8), pl.alloc(pl.L1, [K, N], pl.DT_INT8), pl.alloc(pl.L1, [1, N], pl.DT_INT32)
    a0, b0 = pl.alloc(pl.L0A, [M, K], pl.DT_INT8), pl.alloc(pl.L0B, [K, N], pl.DT_INT8)
    bt = pl.alloc(pl.BT, [1, N], pl.DT_INT32)
    c = pl.alloc(pl.L0C, [M, N], pl.DT_INT32)
    pl.load(a1, a)
    pl.load(b1, b)
    pl.load(r1, bias)
    pl.move(a0, a1)
    pl.move(b0, b1)
    pl.move(bt, r1)
    pl.matmul(c, a0, b0, bt)
    pl.store(out, c)


def test_int8_matmul_with_int32_bias_and_read_only_inputs():
    rng = np.random.default_rng(5)
    a = rng.integers(-128, 128, (32, 64)).astype(np.int8)
    b = rng.integers(-128, 128, (64, 48)).astype(np.int8)
    bias = rng.integers(-1000, 1000, (1, 48)).astype(np.int32)
    for x in (a, b, bias):
        x.flags.writeable = False           # inputs the kernel never writes may be read-only
    out = np.zeros((32, 48), np.int32)
    pyto.run(int8_bias, a, b, bias, out)
    assert np.array_equal(out, a.astype(np.int64) @ b.astype(np.int64) + bias)
    out.flags.writeable = False
    with pytest.raises(pyto.ShapeError, match="read-only"):
        pyto.run(int8_bias, a, b, bias, out)


@pl.kernel
def nd_num_load(a, out, *, NB, M, K, AXIS):
    """NB batches of a [B, M, K] tensor in one Nd2Nz load: stacked (AXIS 0) or side by side (AXIS 1)."""
    shape = [NB * M, K] if AXIS == 0 else [M, NB * K]
    t = pl.alloc(pl.UB, shape, a.dtype)
    with pl.section_vector():
        if pl.get_subblock_idx() == 0:
            pl.load(t, a, [1, 0, 0], nd_num=NB, nd_axis=AXIS)
            pl.store(out, t)


@pytest.mark.parametrize("axis", [0, 1])
def test_nd_num_loads_several_batches_in_one_instruction(axis):
    a = np.arange(5 * 16 * 16, dtype=np.float32).reshape(5, 16, 16)
    want = np.concatenate(list(a[1:4]), axis=axis)
    out = np.zeros_like(want)
    rep = pyto.run(nd_num_load, a, out, NB=3, M=16, K=16, AXIS=axis)
    assert np.array_equal(out, want)
    assert rep.instructions == 2
    with pytest.raises(pyto.OutOfBoundsError, match="nd_num reaches batch 5"):
        pyto.run(nd_num_load, a, np.zeros((16 * 5, 16) if axis == 0 else (16, 80), np.float32), NB=5, M=16, K=16,
                 AXIS=axis)


def test_widen_is_exact_for_every_fp16_value_and_any_layout():
    """The data path widens cube operands by table (pyto/emulator/data/widen.py): every fp16 bit pattern (subnormals,
    infinities, NaNs) gives numpy's own fp16 -> fp32 value, also from a strided view; other dtypes pass through."""
    from pyto.emulator.data.widen import widen
    every = np.arange(1 << 16, dtype=np.uint16).view(np.float16).reshape(256, 256)
    for x in (every, every[::3, 1::2], every.T):
        got = widen(x, np.float32)
        assert got.dtype == np.float32 and got.shape == x.shape
        assert np.array_equal(got.view(np.uint32), x.astype(np.float32).view(np.uint32))
    i8 = np.arange(-128, 128, dtype=np.int8).reshape(16, 16)
    assert np.array_equal(widen(i8, np.float64), i8.astype(np.float64))


@pl.kernel
def matmul_relu_out(a, b, out, *, VIA_UB: bool):
    """C = relu(A @ B) through Fixpipe's ReLU: straight to GM, or into both AIVs' UB and out from there."""
    M, K = a.shape
    N = b.shape[1]
    tiles = matmul_tiles(M, K, N, a.dtype)
    c_ub = pl.alloc(pl.UB, [M // 2, N], out.dtype) if VIA_UB else None
    with pl.section_cube():
        matmul_from_gm(tiles, a, [0, 0], b, [0, 0])
        if VIA_UB:
            pl.move(c_ub, tiles[-1], acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM,
                    relu_pre_mode=pl.ReluPreMode.NormalRelu)
        else:
            pl.store(out, tiles[-1], [0, 0], relu_pre_mode=pl.ReluPreMode.NormalRelu)
    if VIA_UB:
        with pl.section_vector():
            pl.store(out, c_ub, [pl.get_subblock_idx() * (M // 2), 0])


@pytest.mark.parametrize("via_ub", [False, True])
def test_fixpipe_relu_on_the_way_out(via_ub):
    """pl.store / pl.move(relu_pre_mode=pl.ReluPreMode.NormalRelu) out of L0C: max(x, 0) before the fp16
    conversion, no vector op needed (a kernel-author review found the DSL could not express Fixpipe's ReLU)."""
    rng = np.random.default_rng(12)
    a = rng.standard_normal((32, 64)).astype(np.float16)
    b = rng.standard_normal((64, 48)).astype(np.float16)
    out = np.full((32, 48), -7, np.float16)
    pyto.run(matmul_relu_out, a, b, out, VIA_UB=via_ub)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert (exact < -1).any() and (out >= 0).all()        # the ReLU had negatives to clip
    # relu commutes with the fp32 accumulation bound and the one rounding to fp16
    assert_close(out, np.maximum(exact, 0), matmul_bound(a, b, np.float16))


def test_relu_is_fixpipes_only():
    @pl.kernel
    def ub_relu(x, out):
        t = pl.alloc(pl.UB, [16, 16], pl.DT_FP32)
        with pl.section_vector():
            pl.load(t, x)
            pl.store(out, t, relu_pre_mode=pl.ReluPreMode.NormalRelu)
    x = np.ones((16, 16), np.float32)
    with pytest.raises(pyto.KernelError, match=r"pl\.store relu_pre_mode is Fixpipe's \(out of Acc/L0C\); on the "
                                               r"vector side use pl\.relu"):
        pyto.run(ub_relu, x, x.copy())
