"""ToMatmul (docs/bmm_branches.md §4): a BMM with a batch-1 side, run as a matmul.

What the kernel does for each fold of `ToMatmulTiling` (tile sizes always from `tiling.matmul`, turned
into static parameters by kernels/matmul.py's `plan_matmul`):

* plain (no batch on either side) and fold_m (BatchB = 1, A ND): A [*batch, M, K] has batch and M
  adjacent, so its GM array *is* [B*M, K], and C [*batch, M, N] *is* [B*M, N]. Both are reshaped
  (numpy views: no data moves) and kernels/matmul.py's multi-core matmul runs on [B*M, K] @ [K, N].
* fold_m that is not free — A stored DN ([*batch, K, M]: batch and M not adjacent) or a bias that
  differs between batches — runs the batched walk below instead: every task is one output tile of
  one batch, B is shared by all batches (its re-reads hit L2), no rewrite of A is needed.
* a_resident (BatchA = 1, M̄K̄*dtype <= L1): every core loads A into L1 once and keeps it; the cores
  share the B x tiles_m x tiles_n output tiles of B's batches and stream only B's tiles. A is held
  when it fits twice into L1 (kernels/matmul.py's full-load rule, which leaves L1 room for B's
  double buffer); a larger A is streamed per tile like fold_n.
* fold_n (BatchA = 1, A too big for L1): the seed folds B to [K, B*N] (a transpose pass) and scatters
  the [M, B*N] output back; pyto runs the broadcast problem instead (A's batch broadcast to B) with
  the same batched walk — the same result without the two passes (A's re-reads hit L2).

The batched walk is ASW_Basic's (`asw_basic.asw_walk`): task t = (batch, tile), the tiles of a batch in
the ASW window snake, dealt round robin over the cores; each tile goes through the shared cube pipeline
(kernels/bmm/block.py).
"""
from __future__ import annotations

import math

import numpy as np

import pyto
import pyto.language as pl
from pyto.errors import PlanError
from pyto.tiling import CubeTileShapes, ceil_align

from ..matmul import matmul_kernel, plan_matmul
from ..swizzle import Swizzle
from .asw_basic import asw_walk
from .block import alloc_buffers
from .common import Operands

_BATCHED_PARAMS = ("BASE_M", "BASE_N", "BASE_K", "K_L1", "HOLD_M", "HOLD_STAGES", "STAGES", "L0_STAGES",
                   "L0C_STAGES", "WINDOW", "SNAKE", "TRANSPOSE_A", "TRANSPOSE_B", "BIAS", "UNIT_FLAG", "L1_PIECES")


@pl.kernel
def to_matmul_kernel(a, b, bias, out, *, BASE_M: int, BASE_N: int, BASE_K: int, K_L1: int, HOLD_M: int = 0,
                     HOLD_STAGES: int = 1, STAGES: int = 2, L0_STAGES: int = 2, L0C_STAGES: int = 2,
                     WINDOW: int = 1, SNAKE: bool = False, TRANSPOSE_A: bool = False, TRANSPOSE_B: bool = False,
                     BIAS: bool = False, UNIT_FLAG: bool = True, L1_PIECES: int = 0):
    """out [*batch, M, N] = a [*a_batch, M, K] @ b [*b_batch, K, N] (+ bias [*bias_batch, 1, N] when BIAS).

    Every tensor has the same number of batch dims; a batch dim of 1 is broadcast. a is [..., K, M] with
    TRANSPOSE_A, b [..., N, K] with TRANSPOSE_B. HOLD_M > 0: A (batch 1) is held in L1 as one slab of
    HOLD_M rows (a multiple of BASE_M) x all K, loaded once per core.
    """
    M, N = out.shape[-2], out.shape[-1]
    K = a.shape[-2] if TRANSPOSE_A else a.shape[-1]
    assert (a.shape[-1] if TRANSPOSE_A else a.shape[-2]) == M, f"a {a.shape} vs out {out.shape}"
    assert (b.shape[-1] if TRANSPOSE_B else b.shape[-2]) == K, f"b {b.shape} vs K = {K}"
    assert (b.shape[-2] if TRANSPOSE_B else b.shape[-1]) == N, f"b {b.shape} vs out {out.shape}"
    assert a.ndim == b.ndim == out.ndim == bias.ndim, "operands must share their number of batch dims"
    assert not HOLD_M or math.prod(a.shape[:-2]) == 1, "a held A has batch 1"
    bufs = alloc_buffers(a.dtype, BASE_M, BASE_N, BASE_K, K_L1, stages=STAGES, l0_stages=L0_STAGES,
                         l0c_stages=L0C_STAGES, stream_a=not HOLD_M, hold_stages=HOLD_STAGES,
                         hold_a=(HOLD_M, ceil_align(K, BASE_K)) if HOLD_M else None,
                         bias_dtype=bias.dtype if BIAS else None, transpose_a=TRANSPOSE_A, transpose_b=TRANSPOSE_B)
    grid = Swizzle(WINDOW, SNAKE).grid(M, N, BASE_M, BASE_N, batch=math.prod(out.shape[:-2]))
    with pl.section_cube():          # ASW_Basic's (batch, tile) walk: B first, the window snake inside a batch
        asw_walk(bufs, a, b, bias if BIAS else None, out, grid, hold_a=bool(HOLD_M), transpose_a=TRANSPOSE_A,
                 transpose_b=TRANSPOSE_B, unit_flag=UNIT_FLAG, l1_pieces=L1_PIECES)


def _reshape(x, shape: tuple):
    """A GM operand seen with another shape: a numpy view (no copy) or a new spec."""
    if isinstance(x, pyto.Spec):
        return pyto.spec(shape, x.dtype)
    v = x.reshape(shape)
    assert np.shares_memory(v, x), "a fold view must not copy"
    return v


def _tiles(plan) -> CubeTileShapes:
    t = plan.tiling.matmul
    return CubeTileShapes(t.base_m, t.base_m, t.base_k, t.k_l1, t.base_n, t.base_n)


def is_view(plan, ops: Operands) -> bool:
    """True when the fold is a free GM view run by kernels/matmul.py's kernel (plain, or fold_m with ND A
    and one bias row for every batch)."""
    p, t = plan.problem, plan.tiling
    if t.fold == "plain":
        return True
    one_bias = math.prod(tuple(ops.bias.shape[:-2])) == 1
    rows = (math.prod(ops.batch) * p.M, p.K)
    return t.fold == "fold_m" and not p.transpose_a and one_bias and _viewable(ops.a, rows)


def _viewable(x, shape: tuple) -> bool:
    """Whether x reshapes to `shape` without a copy (a broadcast view of A does not fold its batch into rows:
    the batched kernel reads it through the view instead)."""
    if isinstance(x, pyto.Spec):
        return True
    try:
        np.reshape(x, shape, copy=False)
    except ValueError:
        return False
    except TypeError:           # numpy < 2.1: no copy=; a view's shape can be set only without a copy
        v = x.view()
        try:
            v.shape = shape
        except AttributeError:
            return False
    return True


def _launch_view(plan, ops: Operands, mode: str) -> pyto.Report:
    p = plan.problem
    rows = math.prod(ops.batch) * p.M
    a = _reshape(ops.a, (p.K, p.M) if p.transpose_a else (rows, p.K))      # DN only when there is no batch
    b = _reshape(ops.b, (p.N, p.K) if p.transpose_b else (p.K, p.N))
    bias = _reshape(ops.bias, tuple(ops.bias.shape[-2:]))
    out = _reshape(ops.out, (rows, p.N))
    kw = dict(bias_dtype=bias.dtype if ops.has_bias else None, transpose_a=p.transpose_a, transpose_b=p.transpose_b,
              stages=plan.tiling.matmul.l1_buffers)
    chip = plan.chip_spec or plan.chip
    try:
        mp = plan_matmul(rows, p.N, p.K, p.dtype, chip, _tiles(plan), full_load=plan.tiling.matmul.full_load, **kw)
    except PlanError:               # the kernel's held slab is padded to base_k: it may not fit where the tiling's does
        mp = plan_matmul(rows, p.N, p.K, p.dtype, chip, _tiles(plan), full_load="", **kw)
    return pyto.run(matmul_kernel, a, b, bias, out, chip=chip, blocks=mp.blocks, mode=mode, **mp.params)


def batched_params(plan, ops: Operands) -> tuple[int, dict]:
    """(blocks, static parameters) of `to_matmul_kernel` for this plan: plan_matmul on one batch's
    [M, K] @ [K, N] with the tiling's tile shapes; A held (full load) for a_resident when it fits."""
    p, t = plan.problem, plan.tiling.matmul
    chip = plan.chip_spec or pyto.load_chip(plan.chip)
    tasks = math.prod(ops.batch) * -(-p.M // t.base_m) * -(-p.N // t.base_n)
    blocks = min(chip.aic, tasks)
    kw = dict(bias_dtype=ops.bias.dtype if ops.has_bias else None, transpose_a=p.transpose_a,
              transpose_b=p.transpose_b, blocks=blocks, stages=t.l1_buffers)
    mp = None
    if plan.tiling.fold == "a_resident" and t.full_load == "A":
        try:
            mp = plan_matmul(p.M, p.N, p.K, p.dtype, chip, _tiles(plan), full_load="A", **kw)
        except PlanError:
            mp = None                   # A fits L1 but not twice: streamed per tile (see the module doc)
    if mp is None:
        mp = plan_matmul(p.M, p.N, p.K, p.dtype, chip, _tiles(plan), full_load="", **kw)
    return blocks, {k: mp.params[k] for k in _BATCHED_PARAMS}


def launch(plan, ops: Operands, *, mode: str) -> pyto.Report:
    """Run the ToMatmul branch (the launch convention of kernels/bmm/common.py)."""
    if is_view(plan, ops):
        return _launch_view(plan, ops, mode)
    blocks, params = batched_params(plan, ops)
    return pyto.run(to_matmul_kernel, ops.a, ops.b, ops.bias, ops.out, chip=plan.chip_spec or plan.chip,
                    blocks=blocks, mode=mode, **params)
