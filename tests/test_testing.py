"""pyto.testing itself (a kernel-author helper's audit): its default tolerance catches real bugs, its bounds
are exact for integers and take a bias, matmul_bound passes fp32 accumulation in any order and fails a lost,
doubled or misplaced K step up to K = 65536, its helpers check what they are given."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume, example, given, settings, strategies as st

import pyto
import pyto.language as pl
from pyto_kernels.examples.matmul_pingpong import matmul_pingpong
from pyto.dtypes import DType
from pyto.testing import assert_close, assert_matches, assert_race, cube_dtypes, matmul_bound, phase_programs


@pl.kernel
def scale(x, out, *, S: float):
    """out = x * S on one AIV (an AIV-only kernel launched with blocks=1), computed in the tile's dtype."""
    t = pl.alloc(pl.UB, list(x.shape), x.dtype)
    with pl.section_vector():
        pl.load(t, x)
        pl.mul(t, t, S)
        pl.store(out, t, [0, 0])


@pytest.mark.parametrize("dt,wrong", [(ml_dtypes.bfloat16, 2.02), (np.float16, 2.003)])
def test_default_tolerance_is_one_rounding(dt, wrong):
    """A 1% (bf16) or 0.15% (fp16) scale error fails the default; the right scale passes it."""
    x = (np.random.default_rng(0).standard_normal((16, 64)) * 10).astype(dt)
    assert_matches(scale, lambda v: 2 * v, x, np.zeros_like(x), S=2.0)
    with pytest.raises(AssertionError, match="beyond the bound"):
        assert_matches(scale, lambda v: 2 * v, x, np.zeros_like(x), S=wrong)


@pl.kernel
def top_rows_only(x, out, *, ROWS: int):
    """out[:ROWS] = x[:ROWS]; the rest of out is left as it was (zeros): a kernel that forgot some rows."""
    t = pl.alloc(pl.UB, [ROWS, x.shape[1]], x.dtype)
    with pl.section_vector():      # one AIV: an AIV-only kernel launched with blocks=1
        pl.load(t, x)
        pl.store(out, t, [0, 0])


def test_small_elements_are_checked_beside_large_ones():
    """A reference with elements 1000x smaller than its largest: the right kernel passes the default tolerance,
    one that leaves them zero fails it, and the message says where the bad elements are."""
    x = np.concatenate([np.full((8, 64), 100.0), np.full((8, 64), 0.1)]).astype(np.float16)
    assert_matches(top_rows_only, lambda v: v, x, np.zeros_like(x), ROWS=16)
    with pytest.raises(AssertionError, match=r"rows 8\.\.15, columns 0\.\.63"):
        assert_matches(top_rows_only, lambda v: v, x, np.zeros_like(x), ROWS=8)


def test_default_tolerance_takes_correctly_rounded_subnormals():
    """fp16 results near 1e-6 are subnormal: a correct rounding there is off by up to half the subnormal
    spacing, absolute (a review found them failing the relative default)."""
    from test_pro_vector import cast_kernel
    x = np.random.default_rng(2).uniform(-2e-6, 2e-6, (16, 64)).astype(np.float32)
    out = np.zeros((16, 64), np.float16)
    assert_matches(cast_kernel, lambda v: v, x, out)


def test_matmul_bound_is_exact_for_integers_and_takes_a_bias():
    rng = np.random.default_rng(1)
    a8, b8 = rng.integers(-128, 128, (16, 1024)).astype(np.int8), rng.integers(-128, 128, (1024, 16)).astype(np.int8)
    assert not matmul_bound(a8, b8, np.int32).any()
    a, b = rng.standard_normal((16, 64)).astype(np.float16), rng.standard_normal((64, 16)).astype(np.float16)
    bias = np.full(16, 1000.0, np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64) + bias
    rounded = exact.astype(np.float16)          # a correct kernel: the biased sum rounded once
    assert_close(rounded, exact, matmul_bound(a, b, np.float16, bias=bias))
    with pytest.raises(AssertionError):
        assert_close(rounded, exact, matmul_bound(a, b, np.float16))     # the bias's rounding not counted


def _fp32_matmul(a, b, bias, order: str, k_tile: int, parts: int) -> np.ndarray:
    """a @ b (+ bias) accumulated in fp32 the ways a kernel legitimately does: 'one_call' (the emulator: the bias
    in L0C, plus one float32 BLAS matmul of the whole K loop), 'k_steps' (the cube: L0C += one k_tile-deep
    matmul per K step), 'split_k' (K cut in `parts` segments, each K-stepped, added in fp32 one after the other as
    atomic adds land; the bias with the first). int8: exact (int64)."""
    if a.dtype == np.int8:
        out = a.astype(np.int64) @ b.astype(np.int64)
        return out if bias is None else out + bias.astype(np.int64)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    K = a.shape[1]
    start = np.zeros((a.shape[0], b.shape[1]), np.float32)
    if bias is not None:
        start += bias.astype(np.float32)
    if order == "one_call":
        return start + a32 @ b32

    def stepped(acc, k0, k1):
        for s in range(k0, k1, k_tile):
            acc += a32[:, s:min(s + k_tile, k1)] @ b32[s:min(s + k_tile, k1)]
        return acc
    if order == "k_steps":
        return stepped(start, 0, K)
    seg = -(-K // parts)
    total = start
    for k0 in range(0, K, seg):
        total = total + stepped(np.zeros_like(start), k0, min(k0 + seg, K))
    return total


def _with_fault(a, b, fault: str, s: int, w: int):
    """Operands whose correct product is a kernel's with one K step wrong: slice [s, s + w) of K dropped, counted
    twice (appended once more), or read from another offset (s2: the next or previous slice) for A or B."""
    a, b = a.copy(), b.copy()
    K = a.shape[1]
    if fault == "drop":
        a[:, s:s + w] = 0
        return a, b
    if fault == "double":
        return np.concatenate([a, a[:, s:s + w]], axis=1), np.concatenate([b, b[s:s + w]], axis=0)
    s2 = s + w if s + 2 * w <= K else (s - w if s >= w else K - w)
    if fault == "shift_a":
        a[:, s:s + w] = a[:, s2:s2 + w].copy()
    else:
        b[s:s + w] = b[s2:s2 + w].copy()
    return a, b


log_k = st.sampled_from(range(4, 17)).flatmap(lambda e: st.integers(max(16, 2 ** (e - 1) + 1), 2 ** e))


@settings(max_examples=100, deadline=None, derandomize=True)
@given(dt=cube_dtypes(), K=log_k, w=st.sampled_from([16, 32]),
       fault=st.sampled_from(["drop", "double", "shift_a", "shift_b"]), where=st.floats(0, 1),
       order=st.sampled_from(["one_call", "k_steps", "split_k"]), k_tile=st.sampled_from([16, 32, 64, 256]),
       parts=st.integers(2, 8), bias=st.booleans(), fp32_out=st.booleans(), seed=st.integers(0, 2 ** 16))
@example(dt=DType.fp32, K=65536, w=16, fault="drop", where=0.5, order="one_call", k_tile=16, parts=2, bias=False,
         fp32_out=False, seed=0)
@example(dt=DType.bf16, K=65536, w=16, fault="shift_b", where=1.0, order="k_steps", k_tile=16, parts=2,
         bias=True, fp32_out=False, seed=1)
@example(dt=DType.fp16, K=65536, w=16, fault="double", where=0.0, order="split_k", k_tile=256, parts=8,
         bias=False, fp32_out=False, seed=2)
@example(dt=DType.fp32, K=32768, w=32, fault="drop", where=0.3, order="k_steps", k_tile=32, parts=2, bias=False,
         fp32_out=False, seed=3)
@example(dt=DType.int8, K=65536, w=16, fault="shift_a", where=0.7, order="one_call", k_tile=16, parts=2,
         bias=True, fp32_out=False, seed=4)
@example(dt=DType.fp16, K=16, w=16, fault="drop", where=0.0, order="one_call", k_tile=16, parts=2, bias=False,
         fp32_out=False, seed=5)
def test_matmul_bound_passes_fp32_accumulation_and_fails_a_wrong_k_step(dt, K, w, fault, where, order, k_tile,
                                                                          parts, bias, fp32_out, seed):
    """On random normal inputs (int8: uniform), K = 16..65536: a @ b (+ bias) accumulated in fp32 in any of a
    kernel's orders and rounded once to the output dtype passes matmul_bound; the same with one 16- or 32-wide
    K step dropped, doubled or read from the wrong offset (A's or B's) fails it (int8: exactly)."""
    w = min(w, 16 * (K // 16))
    assume(fault in ("drop", "double") or K > w)
    rng = np.random.default_rng(seed)
    M = N = 16
    if dt is DType.int8:
        a, b = rng.integers(-128, 128, (M, K)).astype(np.int8), rng.integers(-128, 128, (K, N)).astype(np.int8)
        bias_arr = rng.integers(-1000, 1000, N).astype(np.int32) if bias else None
        out_np = np.int32
    else:
        a, b = rng.standard_normal((M, K)).astype(dt.np), rng.standard_normal((K, N)).astype(dt.np)
        bias_arr = rng.standard_normal(N).astype(dt.np) if bias else None
        out_np = np.float32 if fp32_out else dt.np
    s = w * int(where * (K // w - 1))
    exact = a.astype(np.float64) @ b.astype(np.float64) + (0 if bias_arr is None else bias_arr.astype(np.float64))
    bound = matmul_bound(a, b, out_np, bias=bias_arr)
    good = _fp32_matmul(a, b, bias_arr, order, k_tile, parts).astype(out_np)
    assert_close(good, exact, bound, f"{dt.name} K={K} {order}")
    fa, fb = _with_fault(a, b, fault, s, w)
    bad = _fp32_matmul(fa, fb, bias_arr, order, k_tile, parts).astype(out_np)
    with pytest.raises(AssertionError, match="beyond the bound"):
        assert_close(bad, exact, bound, f"{dt.name} K={K} {fault} at {s}")


def test_worst_case_bound_hides_a_dropped_k_step_that_the_default_catches():
    """The issue's case: K = 32768 in 32-wide K steps, one step lost. The worst-case bound (K * 2^-24 *
    sum|a b|, worst_case=True) passes it on every element; the default (probabilistic) bound fails it; the
    correct result passes both."""
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((16, 32768)).astype(np.float32), rng.standard_normal((32768, 16)).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    lost = _fp32_matmul(*_with_fault(a, b, "drop", 16384, 32), None, "k_steps", 32, 1)
    good = _fp32_matmul(a, b, None, "k_steps", 32, 1)
    worst, default = matmul_bound(a, b, np.float32, worst_case=True), matmul_bound(a, b, np.float32)
    assert_close(lost, exact, worst)
    with pytest.raises(AssertionError, match="beyond the bound"):
        assert_close(lost, exact, default)
    assert_close(good, exact, default)
    assert np.all(default < worst / 10)
    with pytest.raises(pyto.PytoError, match="p_fail"):
        matmul_bound(a, b, np.float32, p_fail=0.0)


def test_assert_matches_checks_what_it_is_given():
    a, b = np.ones((32, 64), np.float16), np.ones((64, 32), np.float16)
    out = np.zeros((32, 32), np.float16)
    kw = dict(TM=32, TN=32, TK=32)
    bound = lambda x, y: matmul_bound(x, y, np.float16)     # noqa: E731
    with pytest.raises(AssertionError, match="2 output"):
        assert_matches(matmul_pingpong, lambda x: x, a, b, out, outputs=(1, 2), **kw)
    assert_matches(matmul_pingpong, lambda x, y: [x @ y], a, b, out, bound=lambda x, y: [bound(x, y)], **kw)
    compiled = pyto.compile(matmul_pingpong, a, b, out, **kw)
    assert_matches(compiled, lambda x, y: x @ y, a, b, out, bound=bound)
    with pytest.raises(AssertionError, match="shape"):
        assert_close(np.zeros((8, 1)), np.zeros(8), 0.0)


@pl.kernel
def racy(a, out):
    t = pl.alloc(pl.L1, [32, 32], a.dtype)
    c = pl.alloc(pl.L0A, [32, 32], a.dtype)
    pl.load(t, a)
    pl.move(c, t)


def test_assert_race_takes_fortran_order_arrays_and_says_auto_sync_was_on():
    a = np.asfortranarray(np.ones((32, 32), np.float16))
    with pytest.raises(AssertionError, match="auto_sync=False"):
        assert_race(racy, a, a.copy())
    assert_race(racy, a, np.asfortranarray(a.copy()), auto_sync=False)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(prog=phase_programs(initialised=True))
def test_initialised_phase_programs_start_each_tile_with_a_matmul(prog):
    _, ops = prog
    first = {}
    for kind, tile, _ in ops:
        first.setdefault(tile, kind)
    assert set(first.values()) == {"mm"}
