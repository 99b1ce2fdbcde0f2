"""What every BMM branch kernel shares outside the cube pipeline: GM operands normalised for the
kernels, the broadcast batch mapping, and the launch convention.

Launch convention: each branch module `kernels/bmm/<branch>.py` has

    launch(plan: Plan, ops: Operands, *, mode: str) -> pyto.Report

which runs its @pl.kernel with `pyto.run` on `ops.a, ops.b, ops.bias, ops.out` (numpy arrays in full
mode, pyto.spec in timing mode) and the static parameters it derives from `plan.tiling`.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable
import numpy as np

import pyto
import pyto.language as pl
from pyto.dtypes import LOW_PRECISION, DType, as_dtype
from pyto.emulator.admission import broadcast_axes
from pyto.errors import PytoError, ShapeError

from .conditions import planning_chip

CODED = (DType.hf8, DType.fp4e2m1, DType.fp4e1m2)    # stored as uint8 codes: the launch declares their dtype


@dataclass
class Operands:
    """GM tensors of one BMM launch, all of rank 2 + nb (nb = number of output batch dims).

    a: [*a_batch, M, K] ([*a_batch, K, M] with transpose_a), b: [*b_batch, K, N] ([*b_batch, N, K] with
    transpose_b), batch dims left-padded with 1 so every tensor has nb of them; a batch dim of 1 is
    broadcast. bias: [*bias_batch, 1, N] (fp32 for float inputs, int32 for int8; zeros [1.., 1, 1] and
    has_bias False when absent). out: [*batch, M, N] in the output dtype, zero-initialised. scale_a / scale_b (MX
    only, else None): the E8M0 scales in the kernels' GM forms (block.MxScales), [Ba*M, K/64, 2] and
    [Bb*K/64, N, 2].
    """

    a: object
    b: object
    bias: object
    out: object
    has_bias: bool
    batch: tuple          # the output batch shape
    out_dtype: DType
    scale_a: object = None
    scale_b: object = None

    @property
    def nb(self) -> int:
        return len(self.batch)


def cdiv(x: int, y: int) -> int:
    """ceil(x / y) for positive ints."""
    return -(-x // y)


def ceil_align(x: int, a: int) -> int:
    """x rounded up to a multiple of a."""
    return cdiv(x, a) * a


def prod(xs) -> int:
    """The product of a sequence of ints (1 for an empty one)."""
    out = 1
    for x in xs:
        out *= x
    return out


def user_operand(x, who: str, name: str) -> tuple:
    """(array or pyto.spec, its DType) for a user's operand; ShapeError naming `who` and `name` otherwise."""
    if isinstance(x, pyto.Spec):
        return x, x.dtype
    if not isinstance(x, np.ndarray):
        try:
            x = np.asarray(x)
        except (ValueError, TypeError) as e:       # ragged nested lists and the like
            raise ShapeError(f"{who}: {name} is not an array: {e}") from None
    try:
        return x, as_dtype(x.dtype)
    except PytoError as e:
        raise ShapeError(f"{who}: {name} has dtype {x.dtype}: {e}") from None


def out_dtype(dtype: DType) -> DType:
    """numpy.matmul's result type on the cube: int8 -> int32, the 8-bit floats (FP8, HF8, MXFP8) -> fp32 (their
    L0C accumulator: Fixpipe writes no 8-bit float), else the input dtype."""
    if dtype in LOW_PRECISION:
        return DType.fp32
    return DType.int32 if dtype is DType.int8 else dtype


def batch_offsets(flat: int, batch: tuple, x_batch: tuple) -> list:
    """Leading offsets into a tensor with batch dims `x_batch` for output batch number `flat`.

    A dim of size 1 in `x_batch` is broadcast (offset 0). Plain Python: kernels call it at trace time.
    """
    idx = []
    for d in reversed(batch):
        idx.append(flat % d)
        flat //= d
    idx.reverse()
    return [0 if xd == 1 else i for i, xd in zip(idx, x_batch)]


def _padded(x, nb: int):
    """x with its batch dims left-padded with 1 to nb; contiguous, except that a broadcast view (np.broadcast_to:
    stride-0 axes) stays a view: the emulator stages what it repeats once and reads the rest through it."""
    shape = tuple(x.shape)
    want = (1,) * (nb + 2 - len(shape)) + shape
    if isinstance(x, pyto.Spec):
        return pyto.spec(want, x.dtype)
    if broadcast_axes(x):
        return np.asarray(x).reshape(want)        # prepending size-1 dims: always a view
    return np.ascontiguousarray(x).reshape(want)


def operands(problem, a, b, bias=None, scale_a=None, scale_b=None) -> Operands:
    """Normalise user operands (numpy arrays or pyto.spec) for the branch kernels of `problem`; MX: the logical
    scales scale_a [*a_batch, M, K/32], scale_b [*b_batch, K/32, N] (api.bmm checks their shapes) in the kernels'
    GM forms (mx_gm_scales)."""
    given = [x for x in (a, b, bias, scale_a, scale_b) if x is not None]
    timing = any(isinstance(x, pyto.Spec) for x in given)
    if timing and not all(isinstance(x, pyto.Spec) for x in given):
        raise ShapeError("bmm: give every operand as a pyto.spec (timing mode) or every one as an array (full "
                         "mode), not a mix")
    nb = len(problem.batch_shape)
    dt = problem.dtype
    odt = out_dtype(dt)
    acc = dt.acc
    a_n, b_n = _padded(a, nb), _padded(b, nb)
    has_bias = bias is not None
    if has_bias:
        shape = tuple(bias.shape)
        N = problem.N
        if not shape or shape[-1] != N or (len(shape) >= 2 and shape[-2] != 1) or len(shape) > nb + 2:
            raise ShapeError(f"bmm: bias must be [N], [1, N] or [*batch, 1, N] with N = {N}, got {list(shape)}")
        if len(shape) == 1:
            shape = (1, N)
        bshape = (1,) * (nb + 2 - len(shape)) + shape
        for d, o in zip(bshape[:-2], problem.batch_shape):
            if d not in (1, o):
                raise ShapeError(f"bmm: bias batch dims {list(shape[:-2])} do not broadcast to {list(problem.batch_shape)}")
        if timing or isinstance(bias, pyto.Spec):
            bias_n = pyto.spec(bshape, acc)
        else:
            bdt = as_dtype(np.asarray(bias).dtype)
            if (dt is DType.int8) != (bdt in (DType.int8, DType.int32)):
                raise ShapeError(f"bmm: bias dtype {bdt} does not go with {dt} inputs")
            bias_n = np.asarray(bias).reshape(bshape).astype(acc.np)
    else:
        bshape = (1,) * (nb + 2 - 1) + (1,)
        bias_n = pyto.spec(bshape, acc) if timing else np.zeros(bshape, acc.np)
    out_shape = tuple(problem.batch_shape) + (problem.M, problem.N)
    if timing:
        a_n = a_n if isinstance(a_n, pyto.Spec) else pyto.spec(a_n.shape, dt)
        b_n = b_n if isinstance(b_n, pyto.Spec) else pyto.spec(b_n.shape, problem.b_dtype)
        out = pyto.spec(out_shape, odt)
    else:
        out = np.zeros(out_shape, odt.np)
    sa = sb = None
    if problem.mx:
        sa, sb = mx_gm_scales(scale_a, scale_b, problem.K)
    return Operands(a_n, b_n, bias_n, out, has_bias, tuple(problem.batch_shape), odt, sa, sb)


def mx_gm_scales(scale_a, scale_b, K: int) -> tuple:
    """The kernels' GM forms of the logical MX scales (block.MxScales): scale_a [*a_batch, M, K/32] ->
    [Ba*M, K/64, 2], a reshape (pair p of groups 2p, 2p+1 last: matmul_mx.md's [M, K/64, 2]); scale_b
    [*b_batch, K/32, N] -> [Bb*K/64, N, 2], each batch's [K/64, 2, N] with the pair axis moved last (a copy:
    matmul_mx.md's [K/64, N, 2]). Specs give specs."""
    pairs = K // 64
    sa_shape, sb_shape = tuple(scale_a.shape), tuple(scale_b.shape)
    ba, bb = prod(sa_shape[:-2]), prod(sb_shape[:-2])
    a3, b3 = (ba * sa_shape[-2], pairs, 2), (bb * pairs, sb_shape[-1], 2)
    if isinstance(scale_a, pyto.Spec):
        return pyto.spec(a3, DType.fp8e8m0), pyto.spec(b3, DType.fp8e8m0)
    sa = np.ascontiguousarray(scale_a).reshape(a3)
    sb = np.asarray(scale_b).reshape(bb, pairs, 2, sb_shape[-1]).transpose(0, 1, 3, 2)
    sb = np.ascontiguousarray(sb).reshape(b3)
    return sa, sb


def run_kernel(kernel, plan, ops: Operands, params: dict, blocks: int, mode: str) -> pyto.Report:
    """The branch kernels' common launch: pyto.run on (a, b, bias, out), MX: (a, b, bias, out, scale_a, scale_b),
    with the plan's chip. `kernel`: a branch's pair from `with_mx` (the MX one for an MX plan) or one kernel."""
    if isinstance(kernel, tuple):
        kernel = kernel[1] if ops.scale_a is not None else kernel[0]
    arrays = (ops.a, ops.b, ops.bias, ops.out) + ((ops.scale_a, ops.scale_b) if ops.scale_a is not None else ())
    pr = plan.problem
    if pr.dtype in CODED and not isinstance(ops.a, pyto.Spec):     # uint8 codes: HF8, FP4's packed pairs
        kernel = kernel.declare((pr.dtype, pr.b_dtype) + (None,) * (len(arrays) - 2))
    return pyto.run(kernel, *arrays, chip=plan.chip_spec or plan.chip, blocks=blocks, mode=mode, **params)


def with_mx(body: Callable) -> tuple:
    """(kernel, MX kernel) of a branch body `body(a, b, bias, out, scale_a, scale_b, *, STATIC...)`: the first
    launches on the four GM tensors every BMM launch has and runs body without scales (None), the second on the
    six of an MX launch (the scales in block.MxScales' GM forms). One body, so the MX path is the same kernel."""
    sig = inspect.signature(body, eval_str=True)

    def plain(a, b, bias, out, **static):
        return body(a, b, bias, out, None, None, **static)

    def mx(a, b, bias, out, scale_a, scale_b, **static):
        return body(a, b, bias, out, scale_a, scale_b, **static)

    name = body.__name__.lstrip("_")
    for fn, params, fn_name in ((plain, [p for n, p in sig.parameters.items() if n not in ("scale_a", "scale_b")],
                                 name), (mx, list(sig.parameters.values()), name.replace("_kernel", "_mx_kernel"))):
        fn.__signature__ = sig.replace(parameters=params)
        fn.__name__ = fn.__qualname__ = fn_name
        fn.__doc__, fn.__module__ = body.__doc__, body.__module__
    return pl.kernel(plain), pl.kernel(mx)


def planned_params(params_for, plan) -> tuple[dict, int]:
    """`params_for(tiling, problem, chip)` of the plan: a batch branch's (static parameters, block count)
    (IterBatch, MergeBatch), on the chip the tiling was derived on (conditions.planning_chip: MX's data budget)."""
    chip = planning_chip(plan.problem, plan.chip_spec or pyto.load_chip(plan.chip))
    return params_for(plan.tiling, plan.problem, chip)


def run_tiled(kernel, params_of, plan, ops: Operands, mode: str) -> pyto.Report:
    """run_kernel with `params_of(tiling, problem, chip, bias=...)` on the plan's cores (ASW_Basic, StreamK)."""
    chip = planning_chip(plan.problem, plan.chip_spec or pyto.load_chip(plan.chip))    # (MX: the data's budget)
    params = params_of(plan.tiling, plan.problem, chip, bias=ops.has_bias)
    return run_kernel(kernel, plan, ops, params, plan.tiling.cores_used, mode)


def mode_of(ops: Operands) -> str:
    return "timing" if isinstance(ops.out, pyto.Spec) else "full"

