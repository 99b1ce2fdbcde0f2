"""pyto.testing itself (a kernel-author helper's audit): its default tolerance catches real bugs, its bounds
are exact for integers and take a bias, its helpers check what they are given."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings

import pyto
import pyto.language as pl
from kernels.examples.matmul_pingpong import matmul_pingpong
from pyto.testing import assert_close, assert_matches, assert_race, matmul_bound, phase_programs


@pl.kernel
def scale(x, out, *, S: float):
    """out = x * S on one AIV (an AIV-only kernel launched with blocks=1), computed in the tile's dtype."""
    t = pl.alloc(pl.UB, list(x.shape), x.dtype)
    with pl.section_vector():
        pl.load(t, x)
        pl.muls(t, t, S)
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
    from test_vector import cast_kernel
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
