"""`bmm()`: Batch-Matmul with numpy.matmul semantics on the emulated chip, dispatched to the planner's branch.

    c = bmm(a, b, bias=None, *, chip="ascend950pr", branch=None, transpose_a=False, transpose_b=False)
    c, rep = bmm(a, b, report=True)              # the emulator's Report too
    _, rep = bmm(pyto.spec(...), pyto.spec(...))  # timing mode: no data, (None, report)

a [..., M, K] ([..., K, M] with transpose_a), b [..., K, N] ([..., N, K] with transpose_b); batch dims
broadcast as numpy.matmul's, and a 1-D operand is promoted as numpy.matmul does (a to one row, b to one
column; the promoted axis is removed from the result); bias [..., 1, N], [1, N] or [N]. fp16, bf16, fp32
give the input dtype (accumulated in fp32), int8 gives int32; the 950's 8-bit floats (FP8 E4M3FN / E5M2 in any
mix, HF8 named with dtype='hf8', MXFP8 with scale_a= / scale_b=) and MXFP4 (packed uint8 pairs named with
dtype='fp4e2m1' / 'fp4e1m2' or a pair of them, with scale_a= / scale_b=) give fp32. The flow is plan -> operands ->
`pyto_kernels.bmm.<branch>.launch` (the launch convention of kernels/bmm/common.py); BRANCH_MODULES names each
branch's module.

`check(c, a, b, bias, ...)` compares a result with a float64 numpy reference (int8 exactly, the others
within pyto.testing.matmul_bound with the bias as one more exact term): the `pyto bmm` command and the
tests use it; `compare(...)` is the same comparison with its figures (max |error|, the bound there, the
worst |error| / bound).
"""
from __future__ import annotations

import importlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Optional

import numpy as np

import pyto
from pyto import lowp
from pyto.chip import Chip, load_chip
from pyto.dtypes import DType, as_dtype, stored_as
from pyto.emulator import admission
from pyto.errors import KernelError, ShapeError, UnsupportedError
from pyto.testing import assert_close, matmul_bound

from . import footprint
from .common import mode_of, operands, out_dtype, user_operand
from .conditions import BRANCHES, MX_GROUP, MX_K_STEP
from .planner import FP4, Plan, logical_dims, mixable, parse_problem, plan

BRANCH_MODULES = {b: f"pyto_kernels.bmm.{b}" for b in BRANCHES}


def launcher(branch: str):
    """The `launch(plan, ops, *, mode)` of a branch; UnsupportedError when its module does not exist yet."""
    name = BRANCH_MODULES[branch]
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name != name:
            raise
        raise UnsupportedError(f"bmm: branch '{branch}' has no kernel yet (module {name} does not exist); "
                               f"force another branch with branch=...") from None
    return module.launch


def bmm(a, b, bias=None, *, chip: "str | Chip" = "ascend950pr", branch: Optional[str] = None,
        transpose_a: bool = False, transpose_b: bool = False, report: bool = False, reduce: str = "workspace",
        tune: bool = False, scale_a=None, scale_b=None, dtype=None):
    """C = A @ B (+ bias) with numpy.matmul semantics, run by the branch kernel the planner picks.

    branch forces a branch (PlanError when its structural preconditions fail; UnsupportedError when its
    kernel is not built). reduce: StreamK's reduction, "workspace" (deterministic, the default) or "atomic"
    (AtomicAdd). tune: the plan of plan(..., tune=True), the fastest simulated candidate (its file cache makes
    the second tune of a problem free). Inputs given as pyto.spec run in timing mode and return (None, report).
    Returns C, or (C, Report) with report=True.

    8-bit floats (the 950): a, b FP8 (ml_dtypes float8_e4m3fn / float8_e5m2 arrays, in any mix) or HF8 (uint8
    codes, pyto.lowp.HF8, named with dtype="hf8"; or pyto.spec(shape, "hf8")); C is fp32 (the accumulator). MX
    (MXFP8): scale_a [*a_batch, M, K/32] and scale_b [*b_batch, K/32, N] (logical, whatever transpose_a / _b;
    ml_dtypes float8_e8m0fnu arrays or pyto.spec(shape, "fp8e8m0")), one scale per 32 elements of K, K % 64 == 0,
    no bias: C = (A * 2^(scale_a - 127)) @ (B * 2^(scale_b - 127)) per 32-element group. dtype: names the inputs'
    dtype where the arrays do not (HF8's uint8 codes, FP4's packed bytes), or a pair (A's, B's: an FP4 E2M1 x E1M2
    mix); arrays must be stored as it.

    MXFP4: a and b are uint8 arrays of packed FP4 pairs as PyPTO-Pro's FP4 GM tensors hold them (pyto.lowp.pack_fp4:
    element 2i in the low nibble of byte i along the stored last axis): a [*a_batch, M, K/2] ([*a_batch, K, M/2] with
    transpose_a), b [*b_batch, K, N/2] or, with transpose_b, [*b_batch, N, K/2] (test_matmul_mx.py's B), named by
    dtype='fp4e2m1' / 'fp4e1m2' / ('fp4e2m1', 'fp4e1m2') or given as pyto.spec(packed shape, 'fp4e2m1'); the scales
    as for MXFP8, in logical shapes [*a_batch, M, K/32] and [*b_batch, K/32, N].
    """
    for flag, v in (("transpose_a", transpose_a), ("transpose_b", transpose_b), ("report", report)):
        if not isinstance(v, (bool, np.bool_)):
            raise KernelError(f"bmm: {flag} must be True or False, got {v!r}")
    a, dt = user_operand(a, "bmm", "a")
    b, dtb = user_operand(b, "bmm", "b")
    if dtype is not None:
        da, db = dtype_pair(dtype)
        dt, dtb = _declared(a, dt, da, "a"), _declared(b, dtb, db, "b")
    if not mixable(dt, dtb):
        raise ShapeError(f"bmm: a and b must have one dtype (or be FP8 E4M3FN / E5M2, or FP4 E2M1 / E1M2, in any mix), "
                         f"got {dt} and {dtb}")
    if bias is not None:
        bias, _ = user_operand(bias, "bmm", "bias")
    mx = _mx_scales(a, b, scale_a, scale_b, bias, transpose_a, transpose_b, dt, dtb)
    a, b, squeeze = promote_vectors(a, b, transpose_a, transpose_b)
    p = cached_plan(a.shape, b.shape, dt, chip, False if bias is None else tuple(bias.shape), transpose_a,
                    transpose_b, branch, reduce, tune, None if dtb is dt else dtb, mx)
    _admit(p, a, b, bias)
    ops = operands(p.problem, a, b, bias, scale_a, scale_b)
    mode = mode_of(ops)
    rep = launcher(p.branch)(p, ops, mode=mode)
    if mode == "timing":
        return None, rep
    out = squeeze(ops.out)
    return (out, rep) if report else out


_PLANS: "OrderedDict[tuple, Plan]" = OrderedDict()     # bmm()'s plans per problem (least recently used out)
PLAN_CACHE_SIZE = 256


def cached_plan(a_shape, b_shape, dtype, chip, bias, transpose_a: bool, transpose_b: bool, branch, reduce: str,
                tune: bool = False, dtype_b=None, mx: bool = False) -> Plan:
    """plan(...) of a problem bmm() planned before, else planned now and kept (a plan is a pure function of the
    problem and the chip table: a table edited on disk loads as a new Chip, hence a new key)."""
    spec = load_chip(chip)
    key = (tuple(a_shape), tuple(b_shape), dtype, id(spec), bias, bool(transpose_a), bool(transpose_b), branch,
           reduce, bool(tune), dtype_b, bool(mx))
    hit = _PLANS.get(key)
    if hit is not None and hit.chip_spec is spec:
        _PLANS.move_to_end(key)
        return hit
    p = plan(a_shape, b_shape, dtype=dtype, chip=spec, bias=bias, transpose_a=transpose_a, transpose_b=transpose_b,
             branch=branch, reduce=reduce, tune=bool(tune), dtype_b=dtype_b, mx=mx)
    _PLANS[key] = p
    while len(_PLANS) > PLAN_CACHE_SIZE:
        _PLANS.popitem(last=False)
    return p


def dtype_pair(dtype) -> tuple:
    """(A's, B's) dtype from bmm's dtype=: one name for both, or a pair (an FP8 or FP4 mix)."""
    if isinstance(dtype, (tuple, list)):
        if len(dtype) != 2:
            raise ShapeError(f"bmm: dtype= takes one dtype or a pair (A's, B's), got {dtype!r}")
        return tuple(dtype)
    return dtype, dtype


def _declared(x, got: DType, dtype, name: str) -> DType:
    """The dtype `dtype` names for operand x, which must be stored as it (HF8: uint8 codes); ShapeError otherwise."""
    want = as_dtype(dtype)
    if not stored_as(want, got):
        raise ShapeError(f"bmm: dtype={want.name} names {name}'s elements, but {name} is stored as {got.name} "
                         f"({want.name} is stored as {want.np}; pyto.dtypes)")
    return want


def _mx_scales(a, b, scale_a, scale_b, bias, transpose_a: bool, transpose_b: bool, dt: Optional[DType] = None,
               dtb: Optional[DType] = None) -> bool:
    """Whether the call is MX; ShapeError naming the rule when its scales do not go with a and b: both given,
    E8M0, scale_a [*a_batch, M, K/32] and scale_b [*b_batch, K/32, N] (the logical shapes, matmul_mx.md), K % 64,
    matrices, no bias (matmul_mx has no bias operand). dt / dtb: a's and b's dtypes (FP4: packed last axes)."""
    if scale_a is None and scale_b is None:
        return False
    if scale_a is None or scale_b is None:
        raise ShapeError("bmm: MX needs both scale_a and scale_b (one given)")
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise ShapeError(f"bmm: MX takes matrices (a {list(a.shape)}, b {list(b.shape)}): 1-D operands have no "
                         f"scale layout here")
    if bias is not None:
        raise UnsupportedError("bmm: MX with a bias is not built (pl.matmul_mx has no bias operand, matmul_mx.md); "
                               "add the bias to the fp32 result")
    ash, bsh = logical_dims(a.shape, dt), logical_dims(b.shape, dtb)
    M, K = (ash[-1], ash[-2]) if transpose_a else (ash[-2], ash[-1])
    N = bsh[-2] if transpose_b else bsh[-1]
    if K % MX_K_STEP:
        raise ShapeError(f"bmm: MX needs K % {MX_K_STEP} == 0 (matmul_mx.md: K必须为64的倍数), got K = {K}")
    for s, name, want in ((scale_a, "scale_a", tuple(a.shape[:-2]) + (M, K // MX_GROUP)),
                          (scale_b, "scale_b", tuple(b.shape[:-2]) + (K // MX_GROUP, N))):
        s, sdt = user_operand(s, "bmm", name)
        if sdt is not DType.fp8e8m0:
            raise ShapeError(f"bmm: {name} must be E8M0 (ml_dtypes float8_e8m0fnu, pyto 'fp8e8m0'), got {sdt}")
        if tuple(s.shape) != want:
            pair = "[*a_batch, M, K/32]" if name == "scale_a" else "[*b_batch, K/32, N]"
            raise ShapeError(f"bmm: {name} has shape {list(s.shape)}; a {list(a.shape)} and b {list(b.shape)} "
                             f"(M = {M}, K = {K}, N = {N}) need {name} {pair} = {list(want)} (one E8M0 scale per "
                             f"{MX_GROUP} elements of K, matmul_mx.md)")
    return True


def _as_matrix_operand(x, side: str, transpose: bool):
    """A 1-D operand as numpy.matmul promotes it: a vector a is one row [1, K], b one column [K, 1] (stored
    transposed when the flag says so)."""
    n = x.shape[0]
    shape = (1, n) if (side == "a") != transpose else (n, 1)
    return pyto.spec(shape, x.dtype) if isinstance(x, pyto.Spec) else np.asarray(x).reshape(shape)


def promote_vectors(a, b, transpose_a: bool = False, transpose_b: bool = False):
    """numpy.matmul's 1-D rule: (a, b as matrices, a function removing the promoted axes from the result)."""
    a1, b1 = len(a.shape) == 1, len(b.shape) == 1
    if a1:
        a = _as_matrix_operand(a, "a", transpose_a)
    if b1:
        b = _as_matrix_operand(b, "b", transpose_b)

    def squeeze(c):
        if c is None:
            return c
        if b1:
            c = c[..., 0]
        if a1:
            c = c[..., 0, :] if not b1 else c[..., 0]
        return c
    return a, b, squeeze


def run_plan(p: Plan, a, b, bias=None, *, scale_a=None, scale_b=None):
    """Run an existing plan (from `plan(...)`) on operands: (C or None in timing mode, Report). An MX plan
    (plan(..., mx=True)) takes the scales as bmm does; arrays stored as the plan's dtypes stand for them (HF8's
    uint8 codes)."""
    pr = p.problem
    for name, x in (("a", a), ("b", b)):
        if not hasattr(x, "shape") or not hasattr(x, "dtype"):
            raise ShapeError(f"run_plan: {name} must be a numpy array or a pyto.spec, got {type(x).__name__}")
    dt = a.dtype if isinstance(a, pyto.Spec) else as_dtype(a.dtype)
    dtb = b.dtype if isinstance(b, pyto.Spec) else as_dtype(b.dtype)
    dt = pr.dtype if stored_as(pr.dtype, dt) else dt
    dtb = pr.b_dtype if stored_as(pr.b_dtype, dtb) else dtb
    if not mixable(dt, dtb):
        raise ShapeError(f"run_plan: a and b must have one dtype, got {dt} and {dtb}")
    mx = _mx_scales(a, b, scale_a, scale_b, bias, pr.transpose_a, pr.transpose_b, dt, dtb)
    given = parse_problem(a.shape, b.shape, dt, False if bias is None else tuple(bias.shape), pr.transpose_a,
                          pr.transpose_b, dtype_b=None if dtb is dt else dtb, mx=mx)
    if (given.batch_shape, given.M, given.N, given.K, given.dtype, given.b_dtype, given.mx, given.bias) != \
            (pr.batch_shape, pr.M, pr.N, pr.K, pr.dtype, pr.b_dtype, pr.mx, pr.bias):
        raise ShapeError(f"run_plan: the plan is for B {pr.batch_shape} M {pr.M} N {pr.N} K {pr.K} {pr.dtype}"
                         f"{' with a bias' if pr.bias else ''}; these operands are B {given.batch_shape} M {given.M} "
                         f"N {given.N} K {given.K} {given.dtype}{' with a bias' if given.bias else ''}: make a new "
                         f"plan(...) for them")
    _admit(p, a, b, bias)
    ops = operands(p.problem, a, b, bias, scale_a, scale_b)
    mode = mode_of(ops)
    rep = launcher(p.branch)(p, ops, mode=mode)
    return (None if mode == "timing" else ops.out), rep


def _admit(p: Plan, a, b, bias) -> None:
    """The host-memory check (footprint.py, pyto/emulator/admission.py) before anything is allocated or traced:
    CapacityError naming the estimate, the memory available and what to do when the run would not fit."""
    mode = "timing" if any(isinstance(x, pyto.Spec) for x in (a, b, bias) if x is not None) else "full"
    footprint.admit(p, a, b, bias, mode=mode, check=admission.timing_checks())


# ---- the numpy reference -------------------------------------------------------------------------------
def random_inputs(a_shape, b_shape, dtype, bias_shape=None, seed: int = 0):
    """(a, b, bias) for trying bmm: standard normal in a float dtype (HF8: its uint8 codes; the 8-bit floats with an
    fp32 bias); int8 uniform in [-128, 128) with an int32 bias in the same range. bias_shape None: no bias."""
    dt = as_dtype(dtype)
    rng = np.random.default_rng(seed)
    if dt is DType.hf8:         # HF8's uint8 codes of normal values (pyto.lowp.HF8), an fp32 bias
        a, b = (lowp.HF8.encode(rng.standard_normal(tuple(s))) for s in (a_shape, b_shape))
        return a, b, (None if bias_shape is None else rng.standard_normal(tuple(bias_shape)).astype(np.float32))
    if dt is DType.int8:
        def make(shape, np_dt):
            return rng.integers(-128, 128, shape).astype(np_dt)
        bias_dt = np.int32
    else:
        def make(shape, np_dt):
            return rng.standard_normal(shape).astype(np_dt)
        bias_dt = out_dtype(dt).np          # (the 8-bit floats: an fp32 bias)
    a, b = make(tuple(a_shape), dt.np), make(tuple(b_shape), dt.np)
    return a, b, (None if bias_shape is None else make(tuple(bias_shape), bias_dt))


def random_mx_inputs(a_shape, b_shape, dtype_a="fp8e4m3fn", dtype_b=None, seed: int = 0, *,
                     transpose_a: bool = False, transpose_b: bool = False):
    """(a, b, scale_a, scale_b) for trying MX bmm: standard normal A and B MX-quantised along K (pyto.lowp.mx_quantize:
    OCP MX scales, one per 32 elements), a / b stored as the transpose flags say, the scales in bmm's logical shapes
    [*a_batch, M, K/32] and [*b_batch, K/32, N]. a_shape / b_shape: the matrices' element shapes as stored; MXFP4
    (dtype 'fp4e2m1' / 'fp4e1m2') returns them packed along the stored last axis (pyto.lowp.pack_fp4), as bmm takes
    them."""
    rng = np.random.default_rng(seed)
    fa, fb = as_dtype(dtype_a).name, as_dtype(dtype_b or dtype_a).name
    a_log = rng.standard_normal(tuple(a_shape))
    b_log = rng.standard_normal(tuple(b_shape))
    a_log, b_log = _logical(a_log, transpose_a), _logical(b_log, transpose_b)
    qa, sa = lowp.mx_quantize(a_log, a_log.ndim - 1, fa)
    qb, sb = lowp.mx_quantize(b_log, b_log.ndim - 2, fb)
    qa, qb = np.ascontiguousarray(_logical(qa, transpose_a)), np.ascontiguousarray(_logical(qb, transpose_b))
    if as_dtype(fa) in FP4:
        qa, qb = lowp.pack_fp4(qa), lowp.pack_fp4(qb)
    return qa, qb, sa, sb


def _logical(x, transpose: bool) -> np.ndarray:
    x = np.asarray(x)
    return np.swapaxes(x, -1, -2) if transpose else x


def unpacked(x, dtype=None) -> np.ndarray:
    """x with one element a slot: FP4's packed pairs (dtype 'fp4e2m1' / 'fp4e1m2') split along the stored last axis
    (pyto.lowp.unpack_fp4: byte i -> elements 2i, 2i+1); any other x as it is."""
    x = np.asarray(x)
    return lowp.unpack_fp4(x) if dtype is not None and as_dtype(dtype) in FP4 else x


def decoded(x, dtype=None, scale=None, k_axis: int = -1) -> np.ndarray:
    """x's values in float64: its own dtype's (FP8 through ml_dtypes), or uint8 codes named dtype='hf8' through
    pyto.lowp.HF8, or FP4 codes one an element (`unpacked`) named 'fp4e2m1' / 'fp4e1m2' through pyto.lowp; with an
    MX `scale` (E8M0, one per 32 elements along k_axis) times 2^(scale - 127) per group."""
    x = np.asarray(x)
    dt = None if dtype is None else as_dtype(dtype)
    if dt is DType.hf8:
        out = lowp.HF8.decode(x)
    elif dt in FP4:
        out = lowp.as_format(dt.name).decode(x)
    else:
        out = x.astype(np.float64)
    if scale is not None:
        e = np.asarray(scale).view(np.uint8).astype(np.float64)
        out = out * np.repeat(np.where(e == 255, np.nan, np.exp2(e - 127)), MX_GROUP, axis=k_axis)
    return out


def reference(a, b, bias=None, *, transpose_a: bool = False, transpose_b: bool = False, dtype=None, scale_a=None,
              scale_b=None) -> np.ndarray:
    """A @ B (+ bias) in float64 (int64 for int8 inputs), numpy.matmul broadcasting; 8-bit floats decoded first
    (`decoded`: dtype='hf8' names HF8 codes, 'fp4e2m1' / 'fp4e1m2' or a pair of them FP4's packed pairs; MX: the
    scales applied)."""
    da, db = dtype_pair(dtype)
    a, b = _logical(unpacked(a, da), transpose_a), _logical(unpacked(b, db), transpose_b)
    if a.dtype == np.int8:
        out = a.astype(np.int64) @ b.astype(np.int64)
        return out if bias is None else out + np.asarray(bias).astype(np.int64)
    out = decoded(a, da, scale_a, -1) @ decoded(b, db, scale_b, -2)
    if bias is not None:
        out = out + np.asarray(bias).astype(np.float64)
    return out


@dataclass(frozen=True)
class Comparison:
    """A result against the float64 reference (`compare`): `why` is '' when it passes, else what failed; the
    figures: `max_error` the largest |c - reference|, `bound` the bound at that element (0 for int8: exact),
    `ratio` the worst |error| / bound over all elements (at most 1 passes; 0 for an exact int8 result). NaN
    figures when no elementwise comparison was made (a shape or dtype mismatch)."""

    why: str
    max_error: float
    bound: float
    ratio: float
    exact: bool = False           # int8: compared exactly as int32

    def figures(self) -> str:
        """'max |error| 0.0078 (bound there 0.0085), worst |error|/bound 0.96 of at most 1'; int8: '' when exact,
        else the largest difference; 'no figures' after a shape or dtype mismatch."""
        if np.isnan(self.ratio) and np.isnan(self.max_error) and self.why:
            return "no figures"
        if self.exact:
            return "" if not self.max_error else f"max |error| {self.max_error:g} (exact comparison)"
        return (f"max |error| {self.max_error:.3g} (bound there {self.bound:.3g}), worst |error|/bound "
                f"{self.ratio:.3g} of at most 1")


def compare(c, a, b, bias=None, *, transpose_a: bool = False, transpose_b: bool = False, dtype=None, scale_a=None,
            scale_b=None) -> Comparison:
    """c against the reference (int8: exactly as int32; floats: within matmul_bound), with the error figures.

    The float bound is pyto.testing.matmul_bound of [A, 1] @ [B; bias]: the bias is one more fp32 term of
    the accumulation, then the result is rounded once to the output dtype. 8-bit floats (dtype='hf8' naming HF8
    codes; MX scales) are decoded first (`decoded`) and give fp32.
    """
    nan = float("nan")
    a, b, squeeze = promote_vectors(np.asarray(a), np.asarray(b), transpose_a, transpose_b)
    da, db = dtype_pair(dtype)
    al, bl = _logical(unpacked(a, da), transpose_a), _logical(unpacked(b, db), transpose_b)
    ref = reference(a, b, bias, transpose_a=transpose_a, transpose_b=transpose_b, dtype=dtype, scale_a=scale_a,
                    scale_b=scale_b)
    c = np.asarray(c)
    if c.shape != squeeze(ref).shape:
        return Comparison(f"shape {c.shape}, expected {squeeze(ref).shape}", nan, nan, nan)
    c = c.reshape(ref.shape)
    if al.dtype == np.int8:
        want = ref.astype(np.int32)
        if c.dtype != np.int32:
            return Comparison(f"dtype {c.dtype}, expected int32", nan, nan, nan, exact=True)
        err = np.abs(c.astype(np.int64) - want)
        worst = float(err.max()) if err.size else 0.0
        if worst:
            bad = np.argwhere(c != want)
            i = tuple(int(x) for x in bad[0])
            why = f"{len(bad)} of {c.size} elements differ; first at {i}: got {c[i]}, expected {want[i]}"
            return Comparison(why, worst, 0.0, float("inf"), exact=True)
        return Comparison("", 0.0, 0.0, 0.0, exact=True)
    want = out_dtype(as_dtype(da) if da is not None else as_dtype(al.dtype)).np
    if c.dtype != want:
        return Comparison(f"dtype {c.dtype}, expected {want}", nan, nan, nan)
    batch = ref.shape[:-2]
    M, N, K = ref.shape[-2], ref.shape[-1], al.shape[-1]
    a_full = np.broadcast_to(decoded(al, da, scale_a, -1), batch + (M, K))
    b_full = np.broadcast_to(decoded(bl, db, scale_b, -2), batch + (K, N))
    bias_full = np.zeros(batch + (1, N)) if bias is None else np.broadcast_to(
        np.asarray(bias, np.float64).reshape((1,) * (len(batch) + 2 - np.ndim(bias)) + np.shape(bias)), batch + (1, N))
    a_aug = np.concatenate([a_full, np.ones(batch + (M, 1))], axis=-1)
    b_aug = np.concatenate([b_full, bias_full], axis=-2)
    bound = np.broadcast_to(matmul_bound(a_aug, b_aug, as_dtype(c.dtype)), ref.shape)
    figures = _figures(c, ref, bound)
    try:
        assert_close(c, ref, bound, "bmm result")
    except AssertionError as e:
        return Comparison(str(e), *figures)
    return Comparison("", *figures)


def _figures(c: np.ndarray, ref: np.ndarray, bound: np.ndarray) -> tuple:
    """(largest |error|, the bound there, worst |error| / bound) as assert_close judges: an element equal to the
    reference (an infinity where it holds the same one) has no error; a NaN makes the figures NaN."""
    if not c.size:
        return 0.0, 0.0, 0.0
    act = c.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        err = np.where(act == ref, 0.0, np.abs(act - ref))
        ratio = np.where(err == 0, 0.0, err / bound)
    if np.isnan(err).any():
        return float("nan"), float("nan"), float("nan")
    i = np.unravel_index(int(np.argmax(err)), err.shape)
    return float(err[i]), float(bound[i]), float(ratio.max())


def check(c, a, b, bias=None, *, transpose_a: bool = False, transpose_b: bool = False, dtype=None, scale_a=None,
          scale_b=None) -> str:
    """'' when c matches the reference (int8: exactly as int32; floats: within matmul_bound), else why not;
    `compare` gives the error figures too."""
    return compare(c, a, b, bias, transpose_a=transpose_a, transpose_b=transpose_b, dtype=dtype, scale_a=scale_a,
                   scale_b=scale_b).why


__all__ = ["BRANCH_MODULES", "Comparison", "bmm", "check", "compare", "launcher", "random_inputs", "reference",
           "run_plan"]
