"""What every BMM branch kernel shares outside the cube pipeline: GM operands normalised for the
kernels, the broadcast batch mapping, and the launch convention.

Launch convention: each branch module `kernels/bmm/<branch>.py` has

    launch(plan: Plan, ops: Operands, *, mode: str) -> pyto.Report

which runs its @pl.kernel with `pyto.run` on `ops.a, ops.b, ops.bias, ops.out` (numpy arrays in full
mode, pyto.spec in timing mode) and the static parameters it derives from `plan.tiling`.
"""
from __future__ import annotations

from dataclasses import dataclass
import numpy as np

import pyto
from pyto.dtypes import DType, as_dtype
from pyto.emulator.admission import broadcast_axes
from pyto.errors import PytoError, ShapeError


@dataclass
class Operands:
    """GM tensors of one BMM launch, all of rank 2 + nb (nb = number of output batch dims).

    a: [*a_batch, M, K] ([*a_batch, K, M] with transpose_a), b: [*b_batch, K, N] ([*b_batch, N, K] with
    transpose_b), batch dims left-padded with 1 so every tensor has nb of them; a batch dim of 1 is
    broadcast. bias: [*bias_batch, 1, N] (fp32 for float inputs, int32 for int8; zeros [1.., 1, 1] and
    has_bias False when absent). out: [*batch, M, N] in the output dtype, zero-initialised.
    """

    a: object
    b: object
    bias: object
    out: object
    has_bias: bool
    batch: tuple          # the output batch shape
    out_dtype: DType

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
    """numpy.matmul's result type on the cube: int8 -> int32, else the input dtype."""
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


def operands(problem, a, b, bias=None) -> Operands:
    """Normalise user operands (numpy arrays or pyto.spec) for the branch kernels of `problem`."""
    given = [x for x in (a, b, bias) if x is not None]
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
        b_n = b_n if isinstance(b_n, pyto.Spec) else pyto.spec(b_n.shape, dt)
        out = pyto.spec(out_shape, odt)
    else:
        out = np.zeros(out_shape, odt.np)
    return Operands(a_n, b_n, bias_n, out, has_bias, tuple(problem.batch_shape), odt)


def run_kernel(kernel, plan, ops: Operands, params: dict, blocks: int, mode: str) -> pyto.Report:
    """The branch kernels' common launch: pyto.run on (a, b, bias, out) with the plan's chip."""
    return pyto.run(kernel, ops.a, ops.b, ops.bias, ops.out, chip=plan.chip_spec or plan.chip, blocks=blocks,
                    mode=mode, **params)


def planned_params(params_for, plan) -> tuple[dict, int]:
    """`params_for(tiling, problem, chip)` of the plan: a batch branch's (static parameters, block count)
    (IterBatch, MergeBatch)."""
    return params_for(plan.tiling, plan.problem, plan.chip_spec or pyto.load_chip(plan.chip))


def run_tiled(kernel, params_of, plan, ops: Operands, mode: str) -> pyto.Report:
    """run_kernel with `params_of(tiling, problem, chip, bias=...)` on the plan's cores (ASW_Basic, StreamK)."""
    chip = plan.chip_spec or pyto.load_chip(plan.chip)
    params = params_of(plan.tiling, plan.problem, chip, bias=ops.has_bias)
    return run_kernel(kernel, plan, ops, params, plan.tiling.cores_used, mode)


def mode_of(ops: Operands) -> str:
    return "timing" if isinstance(ops.out, pyto.Spec) else "full"

