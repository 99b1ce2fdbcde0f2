"""Helpers for kernel authors' own test suites: expected failures, numpy comparisons, strategies.

Tolerances are justified by the arithmetic: a result rounded to the output dtype is off by at most
half an ulp (u = 2^-11 fp16, 2^-8 bf16, 2^-24 fp32) of its value, or half the smallest subnormal
near zero. fp32 accumulation of K products is bounded by `matmul_bound`: by default Higham and Mary's
probabilistic bound, about lambda * sqrt(K) * 2^-24 * sum|a_i b_i| with lambda ~ 8-9 (rounding errors
modelled as independent and mean-zero; it fails with probability below 1e-12 per element), with
`worst_case=True` the deterministic K * 2^-24 * sum|a_i b_i|, which holds for any data but hides a lost
K step at long K. Integer results (int8 matmuls accumulate in int32) are exact. `assert_matches`'
default is one rounding to the output dtype (a kernel that computes in fp32 and rounds once); a matmul
passes `bound=` (its accumulation is not one rounding).
"""
from __future__ import annotations

import gzip
import json
import math
from typing import Callable, Optional, Sequence

import ml_dtypes
import numpy as np

from .dtypes import DType, as_dtype
from .emulator import CompiledKernel, run
from .errors import DeadlockError, PytoError, RaceError
from .report import Report

__all__ = ["UNIT_ROUNDOFF", "assert_close", "assert_deadlock", "assert_matches", "assert_race", "cube_dtypes",
           "matmul_bound", "matmul_shapes", "phase_programs", "read_trace"]

UNIT_ROUNDOFF = {DType.fp16: 2.0 ** -11, DType.bf16: 2.0 ** -8, DType.fp32: 2.0 ** -24, DType.int32: 0.0,
                 DType.int8: 0.0}


def _bytes(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def _expect(cls, kernel, arrays, match: Optional[str], kwargs) -> PytoError:
    snapshot = [np.array(a, copy=True) for a in arrays if isinstance(a, np.ndarray)]
    try:
        run(kernel, *arrays, **kwargs)
    except cls as e:
        if match is not None and match not in str(e):
            raise AssertionError(f"{cls.__name__} raised, but its message lacks {match!r}:\n{e}") from e
        after = [a for a in arrays if isinstance(a, np.ndarray)]
        for before, now in zip(snapshot, after):
            if not np.array_equal(_bytes(before), _bytes(now)):     # bitwise: NaNs and -0.0 included
                raise AssertionError("a failed run changed the caller's arrays") from e
        return e
    hint = ""
    if cls is RaceError and kwargs.get("auto_sync", True):
        hint = (" (with auto_sync=True the framework orders the pipes itself; a kernel synchronised by hand is "
                "checked with auto_sync=False)")
    raise AssertionError(f"expected {cls.__name__} from kernel '{kernel.name}', but it ran to completion{hint}")


def assert_deadlock(kernel, *arrays, match: Optional[str] = None, **kwargs) -> DeadlockError:
    """Run `kernel` and require a DeadlockError (optionally containing `match`); the arrays stay untouched when
    it is raised (a kernel that completes has written its outputs before the AssertionError)."""
    return _expect(DeadlockError, kernel, arrays, match, kwargs)


def assert_race(kernel, *arrays, match: Optional[str] = None, **kwargs) -> RaceError:
    """Run `kernel` and require a RaceError (optionally containing `match`); the arrays stay untouched when it
    is raised (a kernel that completes has written its outputs before the AssertionError)."""
    return _expect(RaceError, kernel, arrays, match, kwargs)


def matmul_bound(a: np.ndarray, b: np.ndarray, out_dtype, bias: Optional[np.ndarray] = None, *,
                 worst_case: bool = False, p_fail: float = 1e-12) -> np.ndarray:
    """Per-element error bound of a cube matmul a @ b (+ bias, added in L0C) accumulated in fp32 and rounded
    once to `out_dtype`, against the exact (float64) a @ b (+ bias).

    bound = u_out * |ref| + (1 + u_out) * g * S + floor, where ref = a @ b (+ bias), S = |a| @ |b| (+ |bias|),
    n = K (+ 1 with a bias) terms, u = 2^-24, u_out the output's unit roundoff (`UNIT_ROUNDOFF`), floor =
    max(half the output's smallest subnormal, fp32's smallest normal) for rounding near zero, and

    * default (probabilistic: Higham & Mary, "A new approach to probabilistic rounding error analysis",
      SIAM J. Sci. Comput. 41(5), 2019, their inner-product bound):
      g = min(gamma_n, exp(lam * sqrt(n) * u + n * u^2 / (1 - u)) - 1),
      lam = sqrt(2 * ln(2n / p_fail)) / (1 - u) (8.9 at n = 65536 with the default p_fail = 1e-12);
    * worst_case=True: g = gamma_n = n * u / (1 - n * u) (Higham, "Accuracy and Stability", (3.5)).

    Why it is safe. However a kernel orders the fp32 additions (one BLAS call over a whole K loop as the
    emulator does, L0C accumulation K step by K step as the cube does, split-K or Stream-K partials added
    in a workspace or atomically in fp32), the result is a sum of the n terms along a binary tree, so each
    term meets at most n roundings (its product's, for fp32 inputs, and the additions above it; fp16 and
    bf16 products are exact in fp32): the computed sum is sum_i t_i * prod_k (1 + d_ik), |d_ik| <= u. The
    worst case bounds each |prod - 1| by gamma_n. The default models the d's as independent, mean-zero
    random variables (what random-looking data gives; rigorous under stochastic rounding); then Azuma's
    inequality bounds each |prod - 1| by the exp(...) - 1 term above except with probability <= 2 exp(-lam^2
    (1 - u)^2 / 2) = p_fail / n, so the n terms together, hence the element, break it with probability
    <= p_fail (a union bound: the real tail is far lighter). Taking the min with gamma_n keeps it rigorous
    where the worst case is smaller (n <= 64 with the default p_fail: small K keeps the worst case).
    The output rounding is the one exact step: |fl(s) - s| <= u_out * |s| <= u_out * (|ref| + g * S).

    What it assumes (default). The model is broken by data built so every addition rounds the same way:
    a constant, non-representable value summed in sequence, or a running sum that swallows terms below half
    its ulp (terms ~2^24 x smaller than the sum). Measured on the emulator's BLAS and on K-step
    accumulation, random normal, uniform [0, 1), mean-shifted and linspace data stay below 0.03 of the
    bound up to K = 65536, constant data (0.1 x 0.3, sequential 16-wide K steps) below 0.3; use
    worst_case=True for data like that at long K, or anything adversarial.

    What it catches. The bound grows as sqrt(K) * sum|a b| instead of K * sum|a b|. On standard normal
    inputs (fp32, median element) it is 0.03 at K = 2048, 0.24 at 8192, 2.0 at 32768, 5.7 at 65536 (the
    worst case: 0.16, 2.5, 41, 163), i.e. ~2,800x / 11,000x the real fp32 error at K = 2048 / 8192 instead
    of ~15,000x / 110,000x. One missing, doubled or misplaced 16- or 32-wide K step is an error ~ N(0, 16..64)
    per element: it exceeds the default bound on ~95% of the elements at K = 8192, ~60% at 32768 and ~20%
    at 65536 (tests/test_testing.py checks this property for K = 16..65536), while the worst case lets it
    through on every element from K ~ 32768 on. Integer outputs (int8 inputs accumulate in int32) are
    exact: the bound is 0.
    """
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    ref = a64 @ b64
    absprod = np.abs(a64) @ np.abs(b64)
    n = a64.shape[-1]
    if bias is not None:
        bias64 = np.asarray(bias, np.float64)
        ref, absprod, n = ref + bias64, absprod + np.abs(bias64), n + 1
    dt = as_dtype(out_dtype)
    if not dt.is_float or np.issubdtype(np.asarray(a).dtype, np.integer):
        return np.zeros_like(ref)
    u_out = UNIT_ROUNDOFF[dt]
    acc = _accumulation_factor(n, worst_case=worst_case, p_fail=p_fail) * absprod
    return u_out * np.abs(ref) + (1 + u_out) * acc + max(_half_subnormal(dt), float(np.finfo(np.float32).tiny))


def _accumulation_factor(n: int, *, worst_case: bool = False, p_fail: float = 1e-12) -> float:
    """g of `matmul_bound`: |fp32 sum of n terms t_i - exact sum| <= g * sum|t_i|, any order of the additions.
    worst_case: gamma_n = n u / (1 - n u), u = 2^-24; else min(gamma_n, Higham & Mary's probabilistic
    exp(lam sqrt(n) u + n u^2 / (1 - u)) - 1), lam = sqrt(2 ln(2n / p_fail)) / (1 - u): exceeded with
    probability <= p_fail under the model of independent mean-zero rounding errors."""
    if not 0 < p_fail < 1:
        raise PytoError(f"matmul_bound: p_fail must be in (0, 1), got {p_fail!r}")
    u = 2.0 ** -24
    n = max(int(n), 1)
    if n * u >= 1:
        raise PytoError(f"matmul_bound: {n} terms: n * 2^-24 >= 1, no fp32 accumulation bound")
    gamma = n * u / (1 - n * u)
    if worst_case:
        return gamma
    lam = math.sqrt(2 * math.log(2 * n / p_fail)) / (1 - u)
    return min(gamma, math.expm1(lam * math.sqrt(n) * u + n * u * u / (1 - u)))


def _half_subnormal(dt: DType) -> float:
    """Half the smallest subnormal of a float dtype: rounding near zero is absolute, not relative."""
    return float(ml_dtypes.finfo(dt.np).smallest_subnormal) / 2


def assert_close(actual: np.ndarray, expected: np.ndarray, bound: np.ndarray, what: str = "result") -> None:
    """Require |actual - expected| <= bound elementwise (a NaN never passes; an infinity only where
    expected holds the same one); report the worst element otherwise."""
    act = np.asarray(actual, np.float64)
    if act.shape != np.shape(expected):
        raise AssertionError(f"{what}: shape {act.shape}, expected {np.shape(expected)} (no broadcasting: "
                             f"reshape the reference if a [R, 1] reduction is meant)")
    with np.errstate(invalid="ignore"):
        err = np.abs(act - expected)
        bad = ~((err <= bound) | (act == expected))
    if bad.any():
        worst = np.argmax(np.where(bad, np.nan_to_num(err - bound, nan=np.inf), -np.inf))
        i = tuple(int(x) for x in np.unravel_index(worst, err.shape))
        want, limit = float(np.asarray(expected)[i]), float(np.broadcast_to(bound, err.shape)[i])
        span = ""
        if bad.ndim >= 2:
            rows = np.flatnonzero(bad.any(axis=tuple(x for x in range(bad.ndim) if x != bad.ndim - 2)))
            cols = np.flatnonzero(bad.any(axis=tuple(x for x in range(bad.ndim) if x != bad.ndim - 1)))
            span = f" (rows {rows[0]}..{rows[-1]}, columns {cols[0]}..{cols[-1]})"
        raise AssertionError(f"{what}: {int(bad.sum())} of {err.size} elements beyond the bound{span}; worst at {i}: "
                             f"got {float(act[i])!r}, expected {want!r}, |error| {err[i]:.3g} > bound {limit:.3g}")


def assert_matches(kernel, reference_fn: Callable, *arrays, outputs: Sequence[int] = (-1,),
                   rtol: Optional[float] = None, atol: Optional[float] = None, bound: Optional[Callable] = None,
                   **kwargs) -> Report:
    """Run `kernel` (a @pl.kernel, or a pyto.compile result called on `arrays`), then compare each output with
    `reference_fn(*inputs_as_float64)` (a tuple or list for several outputs, one per index in `outputs`).

    `outputs` are the indices of the output arrays in `arrays` (default the last); `reference_fn` receives
    the other arrays only, in order, as float64.

    Default tolerance, per element: |out - ref| <= rtol * |ref| + atol with rtol = 2u of the output dtype (one
    rounding of a value computed in fp32, with a factor 2 to spare) and atol = 4 * 2^-24 * max|ref| (fp32
    headroom where the reference is near 0); integers exact. It suits a kernel that computes in fp32 and
    rounds once; a chain of ops computed in fp16/bf16 passes a larger rtol. A matmul's accumulation is not
    one rounding: pass `bound=`, a function of the same float64 inputs returning the bound (a tuple for
    several outputs), e.g. `bound=lambda a, b: matmul_bound(a, b, np.float16)` for kernel(a, b, out).
    """
    if bound is not None and (rtol is not None or atol is not None):
        raise PytoError("assert_matches takes bound= or rtol/atol, not both")
    if isinstance(kernel, CompiledKernel) and kwargs:
        raise PytoError(f"assert_matches: a compiled kernel's launch options are fixed by pyto.compile; got "
                        f"{', '.join(sorted(kwargs))}")
    outs = [i % len(arrays) for i in outputs]
    inputs = [np.asarray(a, np.float64) for i, a in enumerate(arrays) if i not in outs]
    rep = kernel(*arrays) if isinstance(kernel, CompiledKernel) else run(kernel, *arrays, **kwargs)
    name = kernel.kernel.name if isinstance(kernel, CompiledKernel) else kernel.name
    refs = reference_fn(*inputs)
    refs = tuple(refs) if isinstance(refs, (tuple, list)) else (refs,)
    bounds = None
    if bound is not None:
        bounds = bound(*inputs)
        bounds = tuple(bounds) if isinstance(bounds, (tuple, list)) else (bounds,)
    if len(refs) != len(outs) or (bounds is not None and len(bounds) != len(outs)):
        raise AssertionError(f"assert_matches: {len(outs)} output(s) (outputs={list(outputs)}) but the reference "
                             f"gave {len(refs)}" + ("" if bounds is None else f" and the bound {len(bounds)}"))
    for j, (i, ref) in enumerate(zip(outs, refs)):
        out, ref = arrays[i], np.asarray(ref, np.float64)
        if bounds is not None:
            lim = bounds[j]
        else:
            dt = as_dtype(out.dtype)
            r = 2 * UNIT_ROUNDOFF[dt] if rtol is None else rtol
            floor = 0.0
            if dt.is_float:     # fp32 headroom near 0, and half the output's subnormal spacing (rounding there)
                floor = 4 * 2.0 ** -24 * float(np.max(np.abs(ref), initial=0.0)) + _half_subnormal(dt)
            lim = (floor if atol is None else atol) + r * np.abs(ref)
        assert_close(out, ref, lim, f"output {i} of {name}")
    return rep


# ---- hypothesis strategies (imported lazily: hypothesis is a test dependency) --------------------
def read_trace(path) -> tuple[dict, list]:
    """A trace Report.save_trace wrote (.json or .json.gz), read back for a test: ({pid: core name such as
    'AIC 0' or 'AIV 3'}, its complete ('X') events, one per instruction: name, cat = pipe, ts, dur, args)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    cores = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    return cores, [e for e in events if e["ph"] == "X"]


def cube_dtypes():
    """A hypothesis strategy: fp16, bf16, fp32, int8 as DType (needs the [test] extra: hypothesis). `d.np` is
    the numpy dtype, `d.acc` the L0C accumulation type (int8 -> int32, the output of an int8 matmul)."""
    from hypothesis import strategies as st
    return st.sampled_from([DType.fp16, DType.bf16, DType.fp32, DType.int8])


def matmul_shapes(max_m: int = 160, max_n: int = 160, max_k: int = 200):
    """A hypothesis strategy of (M, N, K), often not multiples of 16 (needs hypothesis)."""
    from hypothesis import strategies as st
    return st.tuples(st.integers(1, max_m), st.integers(1, max_n), st.integers(1, max_k))


PHASES = ("none", "Partial", "Final")


def phase_programs(max_ops: int = 6, tiles: int = 2, initialised: bool = False):
    """A hypothesis strategy of random cube programs over L0C tiles (needs hypothesis): a loop count and ops
    (kind, tile, phase).

    kind is 'mm' (matmul), 'acc' (matmul_acc) or 'st' (store); phase 'none', 'Partial' or 'Final'; tile an
    index into `tiles` L0C tiles of the kernel's choosing (the project's tests use fp32 [16, 16] tiles).
    With `initialised`, each tile's first op is an 'mm', so no program ends in an uninitialised read and the
    examples go to the unit_flag verdicts (ok, deadlock, race).
    """
    from hypothesis import strategies as st
    op = st.tuples(st.sampled_from(["mm", "acc", "st"]), st.integers(0, tiles - 1), st.sampled_from(PHASES))
    progs = st.tuples(st.integers(1, 3), st.lists(op, min_size=1, max_size=max_ops))
    if not initialised:
        return progs

    def first_mm(prog):
        loops, ops = prog
        seen, out = set(), []
        for kind, tile, phase in ops:
            out.append(("mm" if tile not in seen else kind, tile, phase))
            seen.add(tile)
        return loops, out
    return progs.map(first_mm)
