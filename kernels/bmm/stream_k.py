"""StreamK (docs/bmm_branches.md §7): K split between cores when B x M x N cannot fill them, partial sums reduced after.

    out[*batch, M, N] = a[*a_batch, M, K] @ b[*b_batch, K, N] (+ bias[*bias_batch, 1, N])

Work units (the seed's 核间组织): output block (batch, mi, ni) of single_m x single_n, m_cnt x n_cnt blocks
per batch, each computed by a reduction group of grid_k cores; core c of a group takes the K segment
[c * singleCoreK, (c + 1) * singleCoreK). Unit u = ((batch * m_cnt + mi) * n_cnt + ni) * grid_k + c runs on
core u mod cores_used, so a group's cores are neighbours. Inside a unit, the block is cut into
base_m x base_n tiles, each the shared pipeline of `block.py` over the unit's K segment (L0C accumulates
in place; the segment leaves the core once, through Fixpipe).

Reduction, tiling.reduce:
* "workspace" (deterministic, the default): Fixpipe writes each unit's fp32 partial block (int32 for int8)
  to its own slot of a GM workspace [units, single_m, single_n]; `pl.system.sync_all()`; then the AIVs of the
  launch (2 per block) share the output in row chunks: a chunk's partials, one per segment, come in one
  load (nd_num: the same rows x columns of each of the group's slots, which lie a fixed stride apart),
  stacked in UB, and are added pairwise in a fixed order (the upper half into the lower: log2(segments)
  vector ops instead of one per segment, as the reduction is on the critical path); then the bias row is
  added, the sum cast to the output dtype and stored. Same inputs -> the same bits, run after run (no
  atomics, no order that depends on timing).
* "atomic" (AtomicAdd, not deterministic on hardware: the order the adds land in is timing's): the AIVs
  first zero the target, `pl.system.sync_all()`, then every unit's Fixpipe adds its partial into it with
  AtomicAdd (the bias comes in once, through BT on segment 0). The target is the output itself for
  fp32 and int32 (int8 inputs) outputs. fp16/bf16 outputs would be rounded on every add (each partial and
  each sum in the output's type: 2 x grid_k roundings), so for them the target is an fp32 GM
  workspace [B, M, N] and, after a second `pl.system.sync_all()`, the AIVs cast it to the output: one rounding,
  as in workspace mode, for one more pass over the output in fp32.

Empty units are skipped: a K segment past K (only with a forced grid_k), a block past M or N (when the
aligned block size times m_cnt overshoots) — the reducer then sums only the segments that exist.
"""
from __future__ import annotations

import math

import pyto
import pyto.language as pl
from pyto.chip import Chip
from pyto.tiling import ceil_align

from .asw_basic import fit_l1_stages, l1_pieces_for
from .block import MxScales, accumulate, alloc_buffers, as_computed, at_edge, matrix_shape, store_tile, with_valid
from .common import batch_offsets, cdiv, Operands, run_tiled, with_mx

VEC_ALIGN = 16     # UB view columns: 16 elements = 32B of fp16/bf16, a whole 32B block of fp32/int32 too


def units_of(nb: int, m_cnt: int, n_cnt: int, grid_k: int) -> list:
    """(flat batch, mi, ni, c) of every unit u, in u order."""
    return [(f, mi, ni, c) for f in range(nb) for mi in range(m_cnt) for ni in range(n_cnt) for c in range(grid_k)]


def chunks(nb: int, m_cnt: int, n_cnt: int, sm: int, sn: int, M: int, N: int, rows: int, cols: int) -> list:
    """Reduction items: (flat batch, mi, ni, r0, c0, nrows, ncols) covering each non-empty block's real extent
    in row x column chunks of at most rows x cols (block coordinates)."""
    out = []
    for f in range(nb):
        for mi in range(m_cnt):
            bm = min(sm, M - mi * sm)
            for ni in range(n_cnt):
                bn = min(sn, N - ni * sn)
                if bm <= 0 or bn <= 0:
                    continue
                out += [(f, mi, ni, r0, c0, min(rows, bm - r0), min(cols, bn - c0))
                        for r0 in range(0, bm, rows) for c0 in range(0, bn, cols)]
    return out


def _stream_k_kernel(a, b, bias, out, scale_a, scale_b, *, GRID_K: int, M_CNT: int, N_CNT: int, SINGLE_M: int,
                     SINGLE_N: int, SINGLE_K: int, BASE_M: int, BASE_N: int, BASE_K: int, K_L1: int, STAGES: int = 2,
                     L0_STAGES: int = 2, L0C_STAGES: int = 2, ATOMIC: bool = False, RED_ROWS: int = 16,
                     RED_COLS: int = 16, TRANSPOSE_A: bool = False, TRANSPOSE_B: bool = False,
                     BIAS: bool = False, L1_PIECES: int = 1, TAIL_K: int = 0):
    """out [*batch, M, N] = a @ b (+ bias) with K split GRID_K ways (shapes as asw_basic_kernel; scale_a / scale_b
    the MX kernel's E8M0 scales, None in the plain one).

    RED_ROWS x RED_COLS: the UB chunk one AIV reduces (or zeroes / casts) at a time, RED_COLS a multiple of 16.
    L1_PIECES (>= 1): GM->L1 pieces per L1 step; a unit loads only its own rows, columns and K segment.
    TAIL_K: the unit's last tile's last L1 step in pieces of TAIL_K along K, loads and MMADs (block.accumulate's
    tail_k: 0 = off, else a multiple of 16 (int8: 32) up to BASE_K): the reduction waits for every segment's
    end, so the drain after the last load is on the critical path (earlier tiles' drains overlap the next
    tile's loads; with several units a core, the next unit's: params_of turns it off there).
    """
    (a0, a1), (b0, b1) = matrix_shape(a)[-2:], matrix_shape(b)[-2:]     # (elements: FP4's last axis is packed)
    M, K = (a1, a0) if TRANSPOSE_A else (a0, a1)
    N, Kb = (b0, b1) if TRANSPOSE_B else (b1, b0)
    assert K == Kb, f"a {a.shape} and b {b.shape} differ in K ({K} vs {Kb})"
    assert a.ndim == b.ndim == out.ndim == bias.ndim, f"ranks differ: a {a.shape}, b {b.shape}, out {out.shape}"
    assert tuple(out.shape[-2:]) == (M, N), f"out {out.shape}, expected [..., {M}, {N}]"
    assert RED_COLS % VEC_ALIGN == 0, f"RED_COLS={RED_COLS} must be a multiple of {VEC_ALIGN}"
    acc = a.dtype.acc
    out_b, a_b, b_b = tuple(out.shape[:-2]), tuple(a.shape[:-2]), tuple(b.shape[:-2])
    bias_b = tuple(bias.shape[:-2])
    nb = math.prod(out_b)
    units = units_of(nb, M_CNT, N_CNT, GRID_K)
    cast_out = out.dtype is not acc

    mx = None if scale_a is None else MxScales(scale_a, scale_b, a_b, b_b, M, N, K)
    bufs = alloc_buffers(a.dtype, BASE_M, BASE_N, BASE_K, K_L1, stages=STAGES, l0_stages=L0_STAGES,
                         l0c_stages=L0C_STAGES, bias_dtype=bias.dtype if BIAS and ATOMIC else None,
                         transpose_a=TRANSPOSE_A, transpose_b=TRANSPOSE_B, dtype_b=b.dtype, mx=mx)
    if ATOMIC:
        target = pl.workspace([nb, M, N], acc) if cast_out else out
        zero_ub = pl.alloc(pl.UB, [RED_ROWS, RED_COLS], acc, name="zero_ub")
        if cast_out:
            part_ub = pl.alloc(pl.UB, [RED_ROWS, RED_COLS], acc, buffers=2, name="part_ub")
    else:
        ws = pl.workspace([len(units), SINGLE_M, SINGLE_N], acc)
        segs = segments(K, GRID_K, SINGLE_K)
        parts_ub = pl.alloc(pl.UB, [segs * RED_ROWS, RED_COLS], acc, buffers=2, name="parts_ub")
        if BIAS:
            bias_ub = pl.alloc(pl.UB, [1, RED_COLS], acc, buffers=2, name="bias_ub")
    if cast_out:
        out_ub = pl.alloc(pl.UB, [RED_ROWS, RED_COLS], out.dtype, buffers=2, name="out_ub")

    if ATOMIC:       # the target starts at zero: every AIV zeroes its share of [B, M, N]
        with pl.section_vector():
            aiv, naiv = pl.get_block_idx(), pl.get_block_num() * pl.get_subblock_num()
            pl.expands(zero_ub, 0)
            for f, _, _, r0, c0, rows, cols in chunks(nb, 1, 1, M, N, M, N, RED_ROWS, RED_COLS)[aiv::naiv]:
                t_off = [f] if cast_out else batch_offsets(f, out_b, out_b)
                pl.store(target, with_valid(zero_ub[0:rows, 0:ceil_align(cols, VEC_ALIGN)], rows, cols),
                         [*t_off, r0, c0])
        pl.system.sync_all()

    with pl.section_cube():
        for u in pl.range(pl.get_block_idx(), len(units), pl.get_block_num()):
            f, mi, ni, c = units[u]
            rows_blk, cols_blk = min(SINGLE_M, M - mi * SINGLE_M), min(SINGLE_N, N - ni * SINGLE_N)
            k_start = c * SINGLE_K
            if rows_blk <= 0 or cols_blk <= 0 or k_start >= K:
                continue
            a_off, b_off = batch_offsets(f, out_b, a_b), batch_offsets(f, out_b, b_b)
            for m0 in pl.range(0, rows_blk, BASE_M):
                for n0 in pl.range(0, cols_blk, BASE_N):
                    m_abs, n_abs = mi * SINGLE_M + m0, ni * SINGLE_N + n0
                    with_bias = ATOMIC and BIAS and c == 0
                    c_l0c = accumulate(bufs, a, b, [*a_off, m_abs], [*b_off, n_abs], min(SINGLE_K, K - k_start),
                                       min(BASE_M, rows_blk - m0), min(BASE_N, cols_blk - n0), k_start=k_start,
                                       bias=bias if with_bias else None,
                                       bias_off=[*batch_offsets(f, out_b, bias_b), 0, n_abs] if with_bias else None,
                                       transpose_a=TRANSPOSE_A, transpose_b=TRANSPOSE_B, l1_pieces=L1_PIECES,
                                       tail_k=TAIL_K if m0 + BASE_M >= rows_blk and n0 + BASE_N >= cols_blk else 0)
                    if ATOMIC:
                        t_off = [f] if cast_out else batch_offsets(f, out_b, out_b)
                        store_tile(target, c_l0c, [*t_off, m_abs, n_abs], atomic=True)
                    else:
                        # the workspace takes what the MMADs wrote (the tile's fractals, inside its block of
                        # SINGLE_M x SINGLE_N): the reduction reads its part of that back
                        store_tile(ws, as_computed(c_l0c, ws, [u, m0, n0]), [u, m0, n0])

    if ATOMIC and not cast_out:
        return
    pl.system.sync_all()
    with pl.section_vector():
        aiv, naiv = pl.get_block_idx(), pl.get_block_num() * pl.get_subblock_num()
        if ATOMIC:   # cast the fp32 target to the output
            for f, _, _, r0, c0, rows, cols in chunks(nb, 1, 1, M, N, M, N, RED_ROWS, RED_COLS)[aiv::naiv]:
                w = ceil_align(cols, VEC_ALIGN)
                sum_v = at_edge(part_ub.next()[0:rows, 0:w], target, [f, r0, c0])
                pl.load(sum_v, target, [f, r0, c0])
                out_v = with_valid(out_ub.next()[0:rows, 0:w], rows, cols)
                pl.cast(out_v, sum_v, mode=pl.RoundMode.CAST_RINT)
                pl.store(out, out_v, [*batch_offsets(f, out_b, out_b), r0, c0])
            return
        items = chunks(nb, M_CNT, N_CNT, SINGLE_M, SINGLE_N, M, N, RED_ROWS, RED_COLS)
        for f, mi, ni, r0, c0, rows, cols in items[aiv::naiv]:
            w = ceil_align(cols, VEC_ALIGN)
            u0 = ((f * M_CNT + mi) * N_CNT + ni) * GRID_K
            m_abs, n_abs = mi * SINGLE_M + r0, ni * SINGLE_N + c0
            parts = parts_ub.next()[0:segs * rows, 0:w]
            # segment c's partial in rows [c*rows, (c+1)*rows), each [rows, cols] (nd_num: the valid shape per part)
            pl.load(with_valid(parts[:, :], rows, min(w, SINGLE_N - c0)), ws, [u0, r0, c0], nd_num=segs)
            n = segs
            while n > 1:       # pairwise, a fixed order: the top h partials added into the first h
                h = n // 2
                pl.add(with_valid(parts[0:h * rows, :], h * rows, cols), parts[0:h * rows, :],
                       parts[(n - h) * rows:n * rows, :])
                n -= h
            sum_v = with_valid(parts[0:rows, :], rows, cols)
            if BIAS:
                bias_v = at_edge(bias_ub.next()[0:1, 0:w], bias, [*batch_offsets(f, out_b, bias_b), 0, n_abs])
                pl.load(bias_v, bias, [*batch_offsets(f, out_b, bias_b), 0, n_abs])
                pl.neg(bias_v, bias_v)                  # no expand_add in PyPTO-Pro: x - (-b) is x + b
                pl.expand_sub(sum_v, sum_v, bias_v, dim=1)
            res = sum_v
            if cast_out:
                res = with_valid(out_ub.next()[0:rows, 0:w], rows, cols)
                pl.cast(res, sum_v, mode=pl.RoundMode.CAST_RINT)
            pl.store(out, res, [*batch_offsets(f, out_b, out_b), m_abs, n_abs])


stream_k_kernel, stream_k_mx_kernel = with_mx(_stream_k_kernel)


# ---- plan -> static parameters -> launch ------------------------------------------------------------
def segments(K: int, grid_k: int, single_k: int) -> int:
    """K segments that exist (a forced grid_k may leave the last ones past K; K = 0 still has one)."""
    return max(1, min(grid_k, cdiv(K, single_k)))


def tail_k_for(base_k: int, problem, chip: Chip) -> int:
    """StreamK's drain piece (TAIL_K): half of base_k, else base_k, the first on the fractal K grid that leaves
    K-contiguous rows (A's ND rows, or a DN B's) at least the burst minimum (below it each row is charged the
    minimum: 4x the bytes for 16 fp16 elements); 0 if neither does. Measured on the home-ground shapes of
    benchmarks/bmm_planner.py: half of base_k ends the kernels 0.5-2% sooner than base_k, a quarter is slower.
    """
    isz = problem.dtype.itemsize
    k_rows = not (problem.transpose_a and not problem.transpose_b)
    for k in (base_k // 2, base_k):         # (on the K grid: k_align, 64 for MX)
        if k > 0 and k % problem.k_align == 0 and (not k_rows or k * isz >= chip.burst_min_bytes):
            return k
    return 0


def reduce_chunk(t, problem, chip: Chip, blocks: int, *, bias: bool) -> tuple[int, int]:
    """(rows, cols) of the AIVs' UB chunk: columns up to the block width (a multiple of 16), rows so that
    the UB rings (workspace mode: two slots of a chunk's stacked partials) fit one AIV's UB and the output
    is spread over all 2 x blocks AIVs."""
    acc, out_isz = 4, problem.out_isz
    cast = problem.out_dtype is not problem.dtype.acc
    atomic = t.reduce == "atomic"
    segs = segments(problem.K, t.grid_k, t.single_core_k)
    if atomic:
        m, n, groups = problem.M, problem.N, problem.batch
    else:
        m, n, groups = min(t.single_m, problem.M), min(t.single_n, problem.N), problem.batch * t.m_cnt * t.n_cnt
    ub = chip.buffers["UB"]
    cols = ceil_align(n, VEC_ALIGN)

    def per_row(c: int) -> int:
        if atomic:
            return c * acc + (2 * c * acc + 2 * c * out_isz if cast else 0)
        return 2 * segs * c * acc + (2 * c * out_isz if cast else 0)

    fixed = 2 * cols * acc if bias and not atomic else 0
    while cols > VEC_ALIGN and per_row(cols) + fixed > ub:
        cols = ceil_align(cols // 2, VEC_ALIGN)
        fixed = 2 * cols * acc if bias and not atomic else 0
    rows_ub = max(1, (ub - fixed) // per_row(cols))
    want = max(1, cdiv(groups * m * cdiv(n, cols), 2 * blocks))
    return max(1, min(rows_ub, m, want)), cols


def params_of(tiling, problem, chip: Chip, *, bias: bool = False) -> dict:
    """stream_k_kernel's static parameters from a StreamKTiling (L1 stages halved while the streamed rings and,
    in atomic mode, the bias row do not fit L1: the tiling budgets the rings alone)."""
    t = tiling
    rows, cols = reduce_chunk(t, problem, chip, t.cores_used, bias=bias)
    params = dict(GRID_K=t.grid_k, M_CNT=t.m_cnt, N_CNT=t.n_cnt, SINGLE_M=t.single_m, SINGLE_N=t.single_n,
                  SINGLE_K=t.single_core_k, BASE_M=t.base_m, BASE_N=t.base_n, BASE_K=t.base_k, K_L1=t.k_l1,
                  STAGES=t.l1_buffers, L0_STAGES=t.l0_buffers, L0C_STAGES=t.l0c_buffers, ATOMIC=t.reduce == "atomic",
                  RED_ROWS=rows, RED_COLS=cols, TRANSPOSE_A=problem.transpose_a,
                  TRANSPOSE_B=problem.transpose_b, BIAS=bool(bias),
                  L1_PIECES=l1_pieces_for(t.base_m, t.base_n, t.base_k, t.k_l1, problem.dtype, chip),
                  # a core running several units: the next unit's loads hide a drain, the pieces only cost; MX's
                  # MMADs take whole base_k tiles (block._mmad_mx): no tail pieces
                  TAIL_K=tail_k_for(t.base_k, problem, chip) if t.rounds == 1 and not problem.mx else 0)
    bias_dt = problem.dtype.acc if bias and params["ATOMIC"] else None
    return fit_l1_stages(params, t.single_m, t.single_n, t.single_core_k, problem.dtype, bias_dt, chip)


def launch(plan, ops: Operands, *, mode: str) -> pyto.Report:
    """Run StreamK for `plan` (branch stream_k, tiling.reduce 'workspace' or 'atomic') on `ops` (common.py)."""
    return run_tiled((stream_k_kernel, stream_k_mx_kernel), params_of, plan, ops, mode)
