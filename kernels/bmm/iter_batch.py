"""IterBatch (docs/bmm_branches.md §6): batches split over cores, each batch one ordinary matmul tiled per the L1 case.

Core c takes batches c, c + C, c + 2C, ... (C = cores used) and runs each as BaseM x BaseN output tiles
through the shared cube pipeline (block.mmad_tile), M tiles outer, N tiles inner. What stays in L1 is the
seed's condition 3, read from plan.tiling (IterBatchTiling):

  (a) resident 'AB', one batch per core: A [M̄, K̄] and B [K̄, N̄] loaded whole once (block.held_a/held_b),
      every output tile reads L1 views of them; nothing is read twice.
  (b) resident 'AB', several batches per core: the same with two L1 slots per side, so batch i+1's
      A and B load while batch i computes (held_a/held_b switch slot when the batch changes).
  (c) resident 'A' (or 'B'), one batch: that side held whole; the other streamed per output tile in
      K segments of k_L1_b rows of B (or in M segments of A, each over the whole K), double-buffered
      when L1 has room. Fixpipe with unit_flag (tiling.unit_flag), as the seed asks.
  (d) (c) with two L1 slots for the resident side (batches ping-pong, half the L1 budget each).
  (e) resident '': A and B both streamed in K segments of k_L1 (= K/Step), double-buffered when L1 has
      room: the standard K loop of a matmul.

A side with batch dim 1 (broadcast) is read through `batch_offsets`; a held broadcast side keeps its L1
key across batches, so it is loaded once per core.

Choices where the seed leaves room:
* A held slab must be a whole number of base tiles (block.held_a/held_b). BaseM/BaseN are rebalanced to
  the same tile count with the least padding (ceil(M / tiles) rounded to the fractal), which keeps the
  slab within the planner's M̄ x K̄ budget wherever possible.
* The planner budgets one copy of a streamed slice; the kernel double-buffers it, with a shallower K
  slice when both copies would not fit (as long as each transfer stays >= min_TileSize), and fits the
  bias row and any held padding the budget leaves out (`_fit_l1` gives the order).
* A streamed K slice is loaded in pieces (asw_basic.l1_pieces_for: one per BaseK step while every piece
  stays >= 2 x min_TileSize) so the cube starts on the first piece: 2-3% on the streamed cases measured.
* unit_flag in every case (the tiling's unit_flag; the seed asks for it in case (c)): the next tile's first MMAD
  into an L0C slot waits only until Fixpipe has read the blocks, where software sync waits until the store
  has landed in GM (its 500-cycle latency): with small batches that made the two L0C slots the bottleneck.
* In (c)/(d) with B resident, A's M segments are streamed per output tile (re-read once per N tile when
  BaseN < N); with A resident, B's K segments are streamed per output tile (re-read once per M tile): the
  seed's "切分侧重复读".
"""
from __future__ import annotations

import pyto
import pyto.language as pl
from pyto.errors import PlanError
from pyto.tiling import bias_row_bytes

from .asw_basic import l1_pieces_for
from .block import MxScales, alloc_buffers, held_ab, matrix_shape, mmad_tile
from .conditions import ACC_BYTES
from .common import batch_offsets, cdiv, ceil_align, Operands, planned_params, prod, run_kernel, with_mx


def _iter_batch_kernel(a, b, bias, out, scale_a, scale_b, *, BASE_M: int, BASE_N: int, BASE_K: int, K_L1: int,
                       HOLD_M: int = 0, HOLD_N: int = 0, HOLD_STAGES: int = 1, STAGES: int = 2, L0_STAGES: int = 2,
                       L0C_STAGES: int = 2, TRANSPOSE_A: bool = False, TRANSPOSE_B: bool = False,
                       BIAS: bool = False, UNIT_FLAG: bool = True, L1_PIECES: int = 0, HOLD_PIECES: int = 1):
    """out [*batch, M, N] = a [*ba, M, K] @ b [*bb, K, N] (+ bias [*bbias, 1, N]), batch by batch.

    a is [*ba, K, M] with TRANSPOSE_A, b [*bb, N, K] with TRANSPOSE_B; a batch dim of 1 is broadcast.
    HOLD_M / HOLD_N: rows of A / columns of B held in L1 over the whole K (0: streamed in K_L1 slices).
    L1_PIECES: GM->L1 pieces per streamed K slice (block.accumulate's l1_pieces; 0 = one load).
    HOLD_PIECES: GM->L1 loads along K per held slab (block.held_ab), A's and B's interleaved.
    scale_a / scale_b (the MX kernel; None in the plain one): E8M0 scales in block.MxScales' GM forms.
    """
    batch = tuple(out.shape[:-2])
    M, N = out.shape[-2], out.shape[-1]
    K = matrix_shape(a)[-2] if TRANSPOSE_A else matrix_shape(a)[-1]     # (elements: FP4's last axis is packed)
    Kb = matrix_shape(b)[-1] if TRANSPOSE_B else matrix_shape(b)[-2]
    assert K == Kb, f"a {a.shape} and b {b.shape} differ in K ({K} vs {Kb})"
    k_hold = ceil_align(K, BASE_K)
    mx = None if scale_a is None else MxScales(scale_a, scale_b, a.shape[:-2], b.shape[:-2], M, N, K)
    bufs = alloc_buffers(a.dtype, BASE_M, BASE_N, BASE_K, K_L1, stages=STAGES, l0_stages=L0_STAGES,
                         l0c_stages=L0C_STAGES, stream_a=not HOLD_M, stream_b=not HOLD_N,
                         hold_a=(HOLD_M, k_hold) if HOLD_M else None, hold_b=(k_hold, HOLD_N) if HOLD_N else None,
                         hold_stages=HOLD_STAGES, bias_dtype=bias.dtype if BIAS else None, transpose_a=TRANSPOSE_A,
                         transpose_b=TRANSPOSE_B, dtype_b=b.dtype, mx=mx)
    with pl.section_cube():
        for bi in pl.range(pl.get_block_idx(), prod(batch), pl.get_block_num()):
            a_b = batch_offsets(bi, batch, a.shape[:-2])
            b_b = batch_offsets(bi, batch, b.shape[:-2])
            c_b = batch_offsets(bi, batch, batch)
            bias_b = batch_offsets(bi, batch, bias.shape[:-2])
            n_tiles = list(range(0, N, BASE_N))
            for i, m0 in enumerate(range(0, M, BASE_M)):
                for n0 in (n_tiles if i % 2 == 0 else n_tiles[::-1]):      # snake: a B tile reused across rows
                    a_l1, b_l1 = held_ab(bufs, a, b, a_b + [m0] if HOLD_M else None, b_b + [n0] if HOLD_N else None,
                                         transpose_a=TRANSPOSE_A, transpose_b=TRANSPOSE_B, pieces=HOLD_PIECES)
                    mmad_tile(bufs, a, b, out, a_b + [m0], b_b + [n0], c_b + [m0, n0], K, a_l1=a_l1, b_l1=b_l1,
                              bias=bias if BIAS else None, bias_off=bias_b + [0, n0], transpose_a=TRANSPOSE_A,
                              transpose_b=TRANSPOSE_B, use_unit_flag=UNIT_FLAG, l1_pieces=L1_PIECES)


iter_batch_kernel, iter_batch_mx_kernel = with_mx(_iter_batch_kernel)


# ---- host side -------------------------------------------------------------------------------------
def _balanced(size: int, base: int, align: int) -> int:
    """The same number of base tiles over `size`, as even as the fractal allows (never larger than base)."""
    return min(base, ceil_align(cdiv(size, cdiv(size, base)), align))


def _l1_bytes(q: dict, isz: int, align: int, bias: bool) -> int:
    """L1 the kernel allocates, padded as pl.alloc charges it."""
    use = 0
    if q["HOLD_M"]:
        use += q["HOLD_STAGES"] * q["HOLD_M"] * ceil_align(q["k_hold"], align)
    else:
        use += q["STAGES"] * ceil_align(q["BASE_M"], align) * ceil_align(q["K_L1"], align)
    if q["HOLD_N"]:
        use += q["HOLD_STAGES"] * ceil_align(q["k_hold"], align) * q["HOLD_N"]
    else:
        use += q["STAGES"] * ceil_align(q["K_L1"], align) * ceil_align(q["BASE_N"], align)
    use *= isz
    return use + (bias_row_bytes(q["BASE_N"], ACC_BYTES) if bias else 0)


def _fit_l1(q: dict, p, t, cap: int, min_tile: int, *, hold: bool, stream: bool) -> None:
    """Shrink the kernel's L1 use to `cap`. The planner's budget is one copy of the streamed slice and
    leaves out the bias row and the padding of a held K to a multiple of BaseK. In order: keep two
    stream slots with a shallower K slice (halved while each streamed tile stays >= min_TileSize: double
    buffering hides the transfer, a deeper single slice does not); else one stream slot; a BaseK dividing
    K̄ (no held padding); a shallower slice again; one hold slot. PlanError if even that does not fit."""
    al, ka = p.mn_align, p.k_align

    def over() -> bool:
        return _l1_bytes(q, p.isz, al, p.bias) > cap

    def smallest_tile(k: int) -> int:
        rows = [r for r, held in ((q["BASE_M"], q["HOLD_M"]), (q["BASE_N"], q["HOLD_N"])) if not held]
        return min(rows) * k * p.isz

    if over() and stream:
        k_l1 = q["K_L1"]
        while over() and q["K_L1"] > q["BASE_K"]:
            k = max(q["BASE_K"], q["K_L1"] // 2 // q["BASE_K"] * q["BASE_K"])
            if smallest_tile(k) < min_tile:
                break
            q["K_L1"] = k
        if over():
            q.update(K_L1=k_l1, STAGES=1)
    if over() and hold and q["k_hold"] > p.Kp:
        bk = next(d for d in range(q["BASE_K"] // ka * ka, 0, -ka) if p.Kp % d == 0)
        whole = q["K_L1"] >= q["k_hold"]          # the streamed side (if any) takes all of K at once
        q.update(BASE_K=bk, k_hold=p.Kp, K_L1=p.Kp if whole else max(bk, q["K_L1"] // bk * bk))
    while over() and stream and q["K_L1"] > q["BASE_K"]:
        q["K_L1"] = max(q["BASE_K"], (q["K_L1"] // 2) // q["BASE_K"] * q["BASE_K"])
    if over() and q["HOLD_STAGES"] > 1:
        q["HOLD_STAGES"] = 1
    if over():
        raise PlanError(f"iter_batch case ({t.case}): the kernel's L1 tiles ({_l1_bytes(q, p.isz, al, p.bias)} B "
                        f"with {q}) do not fit L1 {cap} B")


def hold_pieces(q: dict, K: int, dt, chip) -> int:
    """GM->L1 loads along K per held slab: one per BaseK step of the held K, as long as every piece of each
    held side stays >= 2 x min_TileSize (the rule of asw_basic.l1_pieces_for for streamed slices)."""
    sides = [x for x in (q["HOLD_M"], q["HOLD_N"]) if x]
    if not sides:
        return 1
    return l1_pieces_for(min(sides), min(sides), q["BASE_K"], ceil_align(K, q["BASE_K"]), dt, chip)


def params_for(t, p, chip) -> tuple[dict, int]:
    """The kernel's static parameters from the tiling t (IterBatchTiling), and the block count."""
    al = p.mn_align
    bm, bn = _balanced(p.M, t.base_m, al), _balanced(p.N, t.base_n, al)
    k_hold = ceil_align(p.K, t.base_k)
    hold_a = t.resident in ("AB", "A")
    hold_b = t.resident in ("AB", "B")
    k_l1 = {"AB": k_hold, "A": t.k_l1_b}.get(t.resident, t.k_l1_a)
    q = dict(BASE_M=bm, BASE_N=bn, BASE_K=t.base_k, K_L1=k_l1, k_hold=k_hold,
             HOLD_M=ceil_align(p.M, bm) if hold_a else 0, HOLD_N=ceil_align(p.N, bn) if hold_b else 0,
             HOLD_STAGES=t.l1_buffers, STAGES=max(2, t.stream_buffers))
    _fit_l1(q, p, t, chip.buffers["L1"], chip.min_tile_bytes, hold=hold_a or hold_b, stream=not (hold_a and hold_b))
    if hold_a and hold_b and q["HOLD_STAGES"] == 2:
        # (b) with L1 to spare: up to 4 batch slots (the 4 buffers of docs/bmm_branches.md §8.2.4, "余量充足时开 4 buffer"), so
        # small batches, whose loads are latency bound, keep more batches in flight
        for more in range(min(4, t.batches_per_core), 2, -1):
            if _l1_bytes(dict(q, HOLD_STAGES=more), p.isz, al, p.bias) <= chip.buffers["L1"]:
                q["HOLD_STAGES"] = more
                break
    del q["k_hold"]
    stream = not (hold_a and hold_b)
    q.update(L0_STAGES=t.l0_buffers, L0C_STAGES=t.l0c_buffers, TRANSPOSE_A=p.transpose_a,
             TRANSPOSE_B=p.transpose_b, BIAS=p.bias, UNIT_FLAG=t.unit_flag,
             L1_PIECES=l1_pieces_for(q["BASE_M"], q["BASE_N"], q["BASE_K"], q["K_L1"], p.dtype, chip) if stream else 0,
             HOLD_PIECES=hold_pieces(q, p.K, p.dtype, chip))
    return q, t.cores_used


def kernel_params(plan) -> tuple[dict, int]:
    """The kernel's static parameters from plan.tiling (IterBatchTiling), and the block count."""
    return planned_params(params_for, plan)


def launch(plan, ops: Operands, *, mode: str) -> pyto.Report:
    """Run IterBatch for `plan` on `ops` (the launch convention of kernels/bmm/common.py)."""
    return run_kernel((iter_batch_kernel, iter_batch_mx_kernel), plan, ops, *kernel_params(plan), mode)
