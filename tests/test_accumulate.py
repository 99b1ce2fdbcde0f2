"""pyto.run_options(accumulate=...): the data pass's two orders of L0C accumulation (pyto/emulator/data/datapass.py).

"fused" (the default) sums a K loop's products in one fp32 matmul and adds it to the bias; "per_mmad" starts L0C
from the bias (or zero) and rounds it to fp32 after every MMAD, each MMAD's chunk one fp32 matmul. Both are within
pyto.testing.matmul_bound of the exact result; per_mmad is bit for bit a step-wise numpy reference written here;
data whose rounding order matters tells them apart; a bad value is a KernelError naming the allowed ones."""
import ml_dtypes
import numpy as np
import pytest

import pyto
import pyto.language as pl
from pyto.testing import assert_close, matmul_bound
from pyto_kernels.examples.matmul_pingpong import matmul_pingpong

DTYPES = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp32": np.float32}


@pl.kernel
def k_loop(a, b, bias, out, *, TK: int, BIAS: bool):
    """out [M, N] = a [M, K] @ b [K, N] (+ bias [1, N], the input dtype or int32) in one L0C tile: K in steps of
    TK, one MMAD each (matmul, with the bias, then matmul_acc), L1 and L0 rings of two."""
    M, K = a.shape
    N = b.shape[1]
    assert K % TK == 0 and tuple(out.shape) == (M, N) and tuple(bias.shape) == (1, N)
    dt = a.dtype
    a_l1, b_l1 = pl.alloc(pl.L1, [M, TK], dt, buffers=2), pl.alloc(pl.L1, [TK, N], dt, buffers=2)
    a_l0a, b_l0b = pl.alloc(pl.L0A, [M, TK], dt, buffers=2), pl.alloc(pl.L0B, [TK, N], dt, buffers=2)
    c_l0c = pl.alloc(pl.L0C, [M, N], dt.acc)
    bias_bt = None
    if BIAS:
        bias_l1, bias_bt = pl.alloc(pl.L1, [1, N], bias.dtype), pl.alloc(pl.BT, [1, N], dt.acc)
        pl.load(bias_l1, bias)
        pl.move(bias_bt, bias_l1)
    for k in pl.range(0, K, TK):
        a1, b1 = a_l1.next(), b_l1.next()
        pl.load(a1, a, [0, k])
        pl.load(b1, b, [k, 0])
        a0, b0 = a_l0a.next(), b_l0b.next()
        pl.move(a0, a1)
        pl.move(b0, b1)
        if k == 0:
            if BIAS:
                pl.matmul(c_l0c, a0, b0, bias_bt)
            else:
                pl.matmul(c_l0c, a0, b0)
        else:
            pl.matmul_acc(c_l0c, c_l0c, a0, b0)
    pl.store(out, c_l0c, [0, 0])


def _inputs(M, K, N, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dt = DTYPES[dtype]
    a = rng.standard_normal((M, K)).astype(dt)
    b = rng.standard_normal((K, N)).astype(dt)
    bias = rng.standard_normal((1, N)).astype(dt)
    return a, b, bias


def _run(kernel, *arrays, accumulate=None, **kw):
    out = arrays[-1]
    if accumulate is None:
        pyto.run(kernel, *arrays, **kw)
    else:
        with pyto.run_options(accumulate=accumulate):
            pyto.run(kernel, *arrays, **kw)
    return out.copy()


def stepwise(a, b, bias, tk):
    """The cube's order, independently of pyto: L0C starts from the bias in fp32 (or zeros); each K chunk's
    product is one fp32 matmul of the chunk, added to L0C and rounded to fp32."""
    m, k = a.shape
    acc = (np.zeros((m, b.shape[1]), np.float32) if bias is None
           else np.repeat(bias.astype(np.float32), m, axis=0))
    for k0 in range(0, k, tk):
        chunk = a[:, k0:k0 + tk].astype(np.float32) @ b[k0:k0 + tk].astype(np.float32)
        acc = (acc + chunk).astype(np.float32)
    return acc


def _exact(a, b, bias=None):
    ref = a.astype(np.float64) @ b.astype(np.float64)
    return ref if bias is None else ref + bias.astype(np.float64)


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("with_bias", [False, True])
def test_both_orders_are_within_the_matmul_bound(dtype, with_bias):
    a, b, bias = _inputs(32, 512, 48, dtype, seed=1)
    out = np.zeros((32, 48), np.float32)
    kw = dict(TK=32, BIAS=with_bias)
    fused = _run(k_loop, a, b, bias, out, **kw)
    per = _run(k_loop, a, b, bias, out, accumulate="per_mmad", **kw)
    used = bias if with_bias else None
    bound = matmul_bound(a, b, np.float32, bias=used)
    assert_close(fused, _exact(a, b, used), bound, "fused")
    assert_close(per, _exact(a, b, used), bound, "per_mmad")
    assert_close(per, fused.astype(np.float64), 2 * bound, "per_mmad vs fused")
    assert np.any(per != fused)              # on random data the two orders round differently in the last bits
    assert np.array_equal(fused, _run(k_loop, a, b, bias, out, accumulate="fused", **kw))   # the default's name


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("with_bias", [False, True])
def test_per_mmad_is_the_stepwise_fp32_reference_bit_for_bit(dtype, with_bias):
    a, b, bias = _inputs(32, 512, 48, dtype, seed=2)
    out = np.zeros((32, 48), np.float32)
    per = _run(k_loop, a, b, bias, out, accumulate="per_mmad", TK=32, BIAS=with_bias)
    assert np.array_equal(per, stepwise(a, b, bias if with_bias else None, 32))


def test_per_mmad_bit_for_bit_on_a_multi_block_pingpong_with_fp16_output():
    """Several output tiles over 4 blocks, K in 64-wide MMADs, L0C rounded to fp16 by Fixpipe on the way out."""
    a, b, _ = _inputs(128, 384, 192, "fp16", seed=3)
    out = np.zeros((128, 192), np.float16)
    per = _run(matmul_pingpong, a, b, out, accumulate="per_mmad", blocks=4, TM=64, TN=64, TK=64)
    expect = np.empty_like(out)
    for m0 in range(0, 128, 64):
        for n0 in range(0, 192, 64):
            expect[m0:m0 + 64, n0:n0 + 64] = stepwise(a[m0:m0 + 64], b[:, n0:n0 + 64], None, 64).astype(np.float16)
    assert np.array_equal(per, expect)
    fused = _run(matmul_pingpong, a, b, out, blocks=4, TM=64, TN=64, TK=64)
    assert_close(fused, _exact(a, b), matmul_bound(a, b, np.float16))
    assert_close(per, _exact(a, b), matmul_bound(a, b, np.float16))


def _order_sensitive(K: int = 2048, TK: int = 32):
    """Operands of k_loop where the order of fp32 roundings shows: a large first product (64 x 64 = 4096 at
    k = 0), then products of 2^-13, each below half of 4096's fp32 ulp (2^-11) but summing to 2^-8 per TK = 32
    wide MMAD. Returns (a, b, bias, out) and the per_mmad and fused results."""
    a = np.zeros((16, K), np.float16)
    b = np.zeros((K, 16), np.float16)
    a[:, 0], b[0, :] = 64, 64
    a[:, TK:], b[TK:, :] = 2.0 ** -6, 2.0 ** -7
    bias = np.zeros((1, 16), np.float16)
    out = np.zeros((16, 16), np.float32)
    per = _run(k_loop, a, b, bias, out, accumulate="per_mmad", TK=TK, BIAS=False)
    fused = _run(k_loop, a, b, bias, out, TK=TK, BIAS=False)
    return (a, b, bias, out), per, fused


def test_the_rounding_order_shows():
    """A large first product (64 x 64 = 4096 at k = 0), then 2016 products of 2^-13, each below half of 4096's
    fp32 ulp (2^-11) but summing to 2^-8 per 32-wide MMAD. Per MMAD, every chunk's sum is exact and so is 4096 +
    j * 2^-8: the exact result. One fp32 matmul over the whole K loop adds the small products to the running sum
    one at a time (BLAS kernels sum along K in sequence, at least within a K block) and loses those of the
    block that starts with 4096."""
    K, TK = 2048, 32
    (a, b, bias, out), per, fused = _order_sensitive(K, TK)
    exact = 4096 + (K // TK - 1) * 2.0 ** -8
    assert np.all(per == np.float32(exact)) and np.array_equal(per, stepwise(a, b, None, TK))
    assert np.all(fused < per)
    assert_close(fused, _exact(a, b), matmul_bound(a, b, np.float32, worst_case=True))


def test_int8_accumulates_exactly_in_either_order():
    rng = np.random.default_rng(4)
    a = rng.integers(-128, 128, (16, 256)).astype(np.int8)
    b = rng.integers(-128, 128, (256, 32)).astype(np.int8)
    bias = rng.integers(-1000, 1000, (1, 32)).astype(np.int32)
    out = np.zeros((16, 32), np.int32)
    exact = a.astype(np.int64) @ b.astype(np.int64) + bias
    for mode in ("fused", "per_mmad"):
        assert np.array_equal(_run(k_loop, a, b, bias, out, accumulate=mode, TK=64, BIAS=True), exact)


def test_compiled_launches_take_the_option_at_each_call():
    """A pyto.compile'd kernel follows the run_options in force when it is called, whenever it was compiled."""
    K, TK = 2048, 32
    (a, b, bias, out), per, fused = _order_sensitive(K, TK)
    compiled = pyto.compile(k_loop, a, b, bias, out, TK=TK, BIAS=False)
    for mode, expect in (("per_mmad", per), (None, fused), ("per_mmad", per), ("fused", fused)):
        out[...] = 0
        if mode is None:
            compiled(a, b, bias, out)
        else:
            with pyto.run_options(accumulate=mode):
                compiled(a, b, bias, out)
        assert np.array_equal(out, expect), mode
    with pyto.run_options(accumulate="per_mmad"):
        later = pyto.compile(k_loop, a, b, bias, out, TK=TK, BIAS=False)
        with pyto.run_options(check=True):        # an inner block that does not name accumulate keeps it
            later(a, b, bias, out)
        assert np.array_equal(out, per)
    later(a, b, bias, out)
    assert np.array_equal(out, fused)


@pytest.mark.parametrize("bad", ["exact", "PER_MMAD", "", 1, True])
def test_an_unknown_order_is_a_kernel_error_naming_the_allowed_ones(bad):
    with pytest.raises(pyto.KernelError, match=r"accumulate must be one of 'fused', 'per_mmad', got"):
        pyto.run_options(accumulate=bad)
