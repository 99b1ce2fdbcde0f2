"""Helpers for kernel authors' own test suites: expected failures, numpy comparisons, strategies.

Tolerances are justified by the arithmetic: a result rounded to the output dtype is off by at most
half an ulp (u = 2^-11 fp16, 2^-8 bf16, 2^-24 fp32) of its value, or half the smallest subnormal
near zero, and fp32 accumulation of K products is off by at most K * 2^-24 * sum|a_i b_i| (the
standard worst-case summation bound).
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import ml_dtypes
import numpy as np

from .dtypes import DType, as_dtype
from .emulator import run
from .errors import DeadlockError, PytoError, RaceError
from .report import Report

__all__ = ["UNIT_ROUNDOFF", "assert_close", "assert_deadlock", "assert_matches", "assert_race", "cube_dtypes",
           "matmul_bound", "matmul_shapes", "phase_programs"]

UNIT_ROUNDOFF = {DType.fp16: 2.0 ** -11, DType.bf16: 2.0 ** -8, DType.fp32: 2.0 ** -24, DType.int32: 0.0,
                 DType.int8: 0.0}


def _expect(cls, kernel, arrays, match: Optional[str], kwargs) -> PytoError:
    snapshot = [np.array(a, copy=True) for a in arrays if isinstance(a, np.ndarray)]
    try:
        run(kernel, *arrays, **kwargs)
    except cls as e:
        if match is not None and match not in str(e):
            raise AssertionError(f"{cls.__name__} raised, but its message lacks {match!r}:\n{e}") from e
        after = [a for a in arrays if isinstance(a, np.ndarray)]
        for before, now in zip(snapshot, after):
            if not np.array_equal(before.view(np.uint8), now.view(np.uint8)):
                raise AssertionError("a failed run changed the caller's arrays") from e
        return e
    raise AssertionError(f"expected {cls.__name__} from kernel '{kernel.name}', but it ran to completion")


def assert_deadlock(kernel, *arrays, match: Optional[str] = None, **kwargs) -> DeadlockError:
    """Run `kernel` and require a DeadlockError (optionally containing `match`); arrays stay untouched."""
    return _expect(DeadlockError, kernel, arrays, match, kwargs)


def assert_race(kernel, *arrays, match: Optional[str] = None, **kwargs) -> RaceError:
    """Run `kernel` and require a RaceError (optionally containing `match`); arrays stay untouched."""
    return _expect(RaceError, kernel, arrays, match, kwargs)


def matmul_bound(a: np.ndarray, b: np.ndarray, out_dtype) -> np.ndarray:
    """Per-element error bound of a cube matmul a @ b with fp32 accumulation, rounded to `out_dtype`: half an
    ulp of the result, plus K * 2^-24 * sum|a_i b_i| for the accumulation (any order of the K additions)."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    ref = a64 @ b64
    absprod = np.abs(a64) @ np.abs(b64)
    u = UNIT_ROUNDOFF[as_dtype(out_dtype)]
    k = a64.shape[-1]
    acc = k * 2.0 ** -24 * absprod
    # half the output dtype's smallest subnormal: rounding near zero is absolute, not relative
    dt = as_dtype(out_dtype)
    sub = float(ml_dtypes.finfo(dt.np).smallest_subnormal) / 2 if dt.is_float else 0.0
    return u * np.abs(ref) + (1 + u) * acc + max(sub, float(np.finfo(np.float32).tiny))


def assert_close(actual: np.ndarray, expected: np.ndarray, bound: np.ndarray, what: str = "result") -> None:
    """Require |actual - expected| <= bound elementwise (a NaN never passes; an infinity only where
    expected holds the same one); report the worst element otherwise."""
    act = np.asarray(actual, np.float64)
    with np.errstate(invalid="ignore"):
        err = np.abs(act - expected)
        bad = ~((err <= bound) | (act == expected))
    if bad.any():
        worst = np.argmax(np.where(bad, np.nan_to_num(err - bound, nan=np.inf), -np.inf))
        i = tuple(int(x) for x in np.unravel_index(worst, err.shape))
        want, limit = float(np.asarray(expected)[i]), float(np.broadcast_to(bound, err.shape)[i])
        raise AssertionError(f"{what}: {int(bad.sum())} of {err.size} elements beyond the bound; worst at {i}: "
                             f"got {float(act[i])!r}, expected {want!r}, |error| {err[i]:.3g} > bound {limit:.3g}")


def assert_matches(kernel, reference_fn: Callable, *arrays, outputs: Sequence[int] = (-1,),
                   rtol: Optional[float] = None, atol: Optional[float] = None, **kwargs) -> Report:
    """Run `kernel`, then compare each output with `reference_fn(*inputs_as_float64)` (a tuple for several).

    `outputs` are the indices of the output arrays in `arrays` (default the last); `reference_fn` receives
    the other arrays only, in order, as float64 (e.g. `lambda a, b: a @ b` for kernel(a, b, out)).

    Default tolerance: rtol = 4 x unit roundoff of the output dtype, atol = rtol x max|reference|
    (integers exact). Pass rtol/atol, or compare with `matmul_bound`, when the math calls for it.
    """
    outs = [i % len(arrays) for i in outputs]
    inputs = [np.asarray(a, np.float64) for i, a in enumerate(arrays) if i not in outs]
    rep = run(kernel, *arrays, **kwargs)
    refs = reference_fn(*inputs)
    refs = refs if isinstance(refs, tuple) else (refs,)
    for i, ref in zip(outs, refs):
        out = arrays[i]
        dt = as_dtype(out.dtype)
        r = 4 * UNIT_ROUNDOFF[dt] if rtol is None else rtol
        a = r * float(np.max(np.abs(ref), initial=0.0)) if atol is None else atol
        assert_close(out, np.asarray(ref, np.float64), a + r * np.abs(ref), f"output {i} of {kernel.name}")
    return rep


# ---- hypothesis strategies (imported lazily: hypothesis is a test dependency) --------------------
def cube_dtypes():
    """A hypothesis strategy: fp16, bf16, fp32, int8 as DType (needs the [test] extra: hypothesis)."""
    from hypothesis import strategies as st
    return st.sampled_from([DType.fp16, DType.bf16, DType.fp32, DType.int8])


def matmul_shapes(max_m: int = 160, max_n: int = 160, max_k: int = 200):
    """A hypothesis strategy of (M, N, K), often not multiples of 16 (needs hypothesis)."""
    from hypothesis import strategies as st
    return st.tuples(st.integers(1, max_m), st.integers(1, max_n), st.integers(1, max_k))


PHASES = ("none", "Partial", "Final")


def phase_programs(max_ops: int = 6, tiles: int = 2):
    """A hypothesis strategy of random cube programs over L0C tiles (needs hypothesis): a loop count and ops
    (kind, tile, phase).

    kind is 'mm' (matmul), 'acc' (matmul_acc) or 'st' (store); phase 'none', 'Partial' or 'Final'.
    """
    from hypothesis import strategies as st
    op = st.tuples(st.sampled_from(["mm", "acc", "st"]), st.integers(0, tiles - 1), st.sampled_from(PHASES))
    return st.tuples(st.integers(1, 3), st.lists(op, min_size=1, max_size=max_ops))
