"""ASW_Basic (docs/bmm_branches.md §8): output tiles over (B, M, N) split between the cores, in the ASW sliding-window order.

    out[*batch, M, N] = a[*a_batch, M, K] @ b[*b_batch, K, N] (+ bias[*bias_batch, 1, N])

Every batch dimension of size 1 is broadcast (`common.batch_offsets`), so BatchA = 1, BatchB = 1 and the
cross broadcast of docs/bmm_branches.md §8.1.2 ("交叉广播 case 也落入本分支") all run here; a / b may be DN (transpose flags).

What the kernel does, step by step as the seed's 实现方案 lists it:
1. Split: the task space is batch x tiles_m x tiles_n base tiles (base_m x base_n); B first (batch-major
   order), then M/N. Task t runs on core t mod cores_used (round robin, the seed's "多轮").
2. Swizzle: inside each batch, the tiles follow the ASW sliding-window snake (`pyto_kernels.swizzle`, W = the
   tiling's window): W tile rows walked along N, odd windows backwards, so the cores running together share
   W row blocks of A and one band of B columns, which stay in L2.
3. L2 tiling: when tiling.l2_tiles_m x l2_tiles_n > 1 (one batch's A + B exceeds L2), the grid is cut into
   that many L2 blocks, walked one after another, and each block's window snake is diagonal (staggered core
   assignment, see `Swizzle.tiles_l2`).
4. Core tiling: each tile is the shared pipeline of `block.py` (double-buffered L1 k_L1 slices, L0 base_k
   steps, unit_flag between MMAD and Fixpipe, bias through BT on the first MMAD). Each L1 slice arrives in
   `l1_pieces_for` pieces along K, so the cube starts before the whole slice is in (one tile per core
   otherwise runs load, then compute, then store, one after the other).
5. L1 full load: tiling.full_load 'A' ('B') holds the whole of A (B) in L1, loaded once per core (the side
   has no batch and fits one base tile; `block.held_a`); broadcast batches otherwise come back through L2.

`asw_walk` is the tile walk itself; `kernels/matmul.py` (a 2-D matmul is ASW with batch 1) uses it too.
"""
from __future__ import annotations

import math

import pyto
import pyto.language as pl
from pyto.chip import Chip
from pyto.dtypes import DType
from pyto.tiling import bias_row_bytes, ceil_align

from ..swizzle import Swizzle, TileGrid
from .block import Buffers, MxScales, alloc_buffers, held_a, held_b, matrix_shape, mmad_tile
from .common import batch_offsets, Operands, run_tiled, with_mx


def asw_walk(bufs: Buffers, a, b, bias, out, grid: TileGrid, *, hold_a: bool = False, hold_b: bool = False,
             grid_k: int = 1, k_seg: int = 0, transpose_a: bool = False, transpose_b: bool = False,
             unit_flag: bool = True, l1_pieces: int = 0) -> None:
    """This core's share of `grid`'s tasks (call inside pl.section_cube()).

    Task t (of grid.tasks * grid_k) runs on core t mod block_num: the (batch, tile) grid.task(t // grid_k),
    each of its base_m x base_n sub-tiles through `mmad_tile`. Batch offsets of a, b, bias and out come from
    the flat batch number with size-1 dims broadcast. hold_a / hold_b: read A / B from a slab held in L1
    (`held_a`/`held_b`: loaded when its rows / columns change). grid_k > 1: split-K, K segment k_seg per
    task, atomically added into out (zeroed), bias on segment 0 only. bias None: no bias. l1_pieces: how
    streamed L1 slots are filled (`block.accumulate`).
    """
    K = matrix_shape(a)[-2] if transpose_a else matrix_shape(a)[-1]
    out_b, a_b, b_b = tuple(out.shape[:-2]), tuple(a.shape[:-2]), tuple(b.shape[:-2])
    bias_b = tuple(bias.shape[:-2]) if bias is not None else ()
    seg = k_seg if grid_k > 1 else K
    for task in pl.range(pl.get_block_idx(), grid.tasks * grid_k, pl.get_block_num()):
        flat, coord = grid.task(task // grid_k)
        k_start = task % grid_k * seg
        a_off, b_off = batch_offsets(flat, out_b, a_b), batch_offsets(flat, out_b, b_b)
        c_off = batch_offsets(flat, out_b, out_b)
        (m1, n1), (rows, cols) = grid.offset(coord), grid.actual_shape(coord)
        for m0 in pl.range(m1, m1 + rows, bufs.base_m):
            for n0 in pl.range(n1, n1 + cols, bufs.base_n):
                a_l1 = held_a(bufs, a, [*a_off, m0], transpose=transpose_a) if hold_a else None
                b_l1 = held_b(bufs, b, [*b_off, n0], transpose=transpose_b) if hold_b else None
                with_bias = bias is not None and k_start == 0
                mmad_tile(bufs, a, b, out, [*a_off, m0], [*b_off, n0], [*c_off, m0, n0], min(seg, K - k_start),
                          k_start=k_start, a_l1=a_l1, b_l1=b_l1, bias=bias if with_bias else None,
                          bias_off=[*batch_offsets(flat, out_b, bias_b), 0, n0] if with_bias else None,
                          transpose_a=transpose_a, transpose_b=transpose_b, use_unit_flag=unit_flag,
                          atomic=grid_k > 1, l1_pieces=l1_pieces)


def _asw_basic_kernel(a, b, bias, out, scale_a, scale_b, *, BASE_M: int, BASE_N: int, BASE_K: int, K_L1: int,
                      STAGES: int = 2, L0_STAGES: int = 2, L0C_STAGES: int = 2, WINDOW: int = 1, L2_M: int = 1,
                      L2_N: int = 1, FULL_LOAD_A: bool = False, FULL_LOAD_B: bool = False, TRANSPOSE_A: bool = False,
                      TRANSPOSE_B: bool = False, BIAS: bool = False, L1_PIECES: int = 0):
    """out [*batch, M, N] = a [*a_batch, M, K] @ b [*b_batch, K, N] (+ bias [*bias_batch, 1, N] when BIAS).

    All four tensors have the same rank; a batch dim of 1 is broadcast. a is [.., K, M] with TRANSPOSE_A,
    b [.., N, K] with TRANSPOSE_B. FULL_LOAD_A / _B: that operand (no batch, one base tile wide) is held in L1.
    scale_a / scale_b (the MX kernel; None in the plain one): E8M0 scales in block.MxScales' GM forms.
    """
    (a0, a1), (b0, b1) = matrix_shape(a)[-2:], matrix_shape(b)[-2:]     # (elements: FP4's last axis is packed)
    M, K = (a1, a0) if TRANSPOSE_A else (a0, a1)
    N, Kb = (b0, b1) if TRANSPOSE_B else (b1, b0)
    assert K == Kb, f"a {a.shape} and b {b.shape} differ in K ({K} vs {Kb})"
    assert a.ndim == b.ndim == out.ndim == bias.ndim, f"ranks differ: a {a.shape}, b {b.shape}, out {out.shape}"
    assert tuple(out.shape[-2:]) == (M, N), f"out {out.shape}, expected [..., {M}, {N}]"
    assert not BIAS or tuple(bias.shape[-2:]) == (1, N), f"bias {bias.shape}, expected [..., 1, {N}]"
    assert not (FULL_LOAD_A and math.prod(a.shape[:-2]) > 1), "FULL_LOAD_A needs an A without batch"
    assert not (FULL_LOAD_B and math.prod(b.shape[:-2]) > 1), "FULL_LOAD_B needs a B without batch"
    k_pad = ceil_align(K, BASE_K)
    mx = None if scale_a is None else MxScales(scale_a, scale_b, a.shape[:-2], b.shape[:-2], M, N, K)
    bufs = alloc_buffers(a.dtype, BASE_M, BASE_N, BASE_K, K_L1, stages=STAGES, l0_stages=L0_STAGES,
                         l0c_stages=L0C_STAGES, stream_a=not FULL_LOAD_A, stream_b=not FULL_LOAD_B,
                         hold_a=(ceil_align(M, BASE_M), k_pad) if FULL_LOAD_A else None,
                         hold_b=(k_pad, ceil_align(N, BASE_N)) if FULL_LOAD_B else None,
                         bias_dtype=bias.dtype if BIAS else None, transpose_a=TRANSPOSE_A, transpose_b=TRANSPOSE_B,
                         dtype_b=b.dtype, mx=mx)
    grid = Swizzle(WINDOW, True).grid(M, N, BASE_M, BASE_N, batch=math.prod(out.shape[:-2]), l2_m=L2_M, l2_n=L2_N)
    with pl.section_cube():
        asw_walk(bufs, a, b, bias if BIAS else None, out, grid, hold_a=FULL_LOAD_A, hold_b=FULL_LOAD_B,
                 transpose_a=TRANSPOSE_A, transpose_b=TRANSPOSE_B, l1_pieces=L1_PIECES)


asw_basic_kernel, asw_basic_mx_kernel = with_mx(_asw_basic_kernel)


# ---- plan -> static parameters -> launch ------------------------------------------------------------
def _l1_bytes(rows: int, cols: int, dt: DType) -> int:
    """An L1 tile's bytes as pl.alloc charges them: CeilAlign 16 on both axes, 32 at 8 bits, 64 at 4 (FP4's fractals;
    pyto.language.tile.padded_of)."""
    a = 32 if dt.bits == 8 else 64 if dt.bits == 4 else 16
    return int(ceil_align(rows, a) * ceil_align(cols, a) * dt.itemsize)


def l1_use(params: dict, M: int, N: int, K: int, dt: DType, bias_dt) -> int:
    """L1 bytes asw_basic_kernel (or stream_k_kernel: no FULL_LOAD keys) allocates with `params`, as pl.alloc
    charges them (the bias row of bias_dt: pyto.tiling.bias_row_bytes)."""
    bm, bn, bk, k_l1, st = params["BASE_M"], params["BASE_N"], params["BASE_K"], params["K_L1"], params["STAGES"]
    k_pad = ceil_align(K, bk)
    full_a, full_b = params.get("FULL_LOAD_A", False), params.get("FULL_LOAD_B", False)
    used = 0 if full_a else st * _l1_bytes(bm, k_l1, dt)
    used += 0 if full_b else st * _l1_bytes(k_l1, bn, dt)
    used += _l1_bytes(ceil_align(M, bm), k_pad, dt) if full_a else 0
    used += _l1_bytes(k_pad, ceil_align(N, bn), dt) if full_b else 0
    if bias_dt is not None:
        used += bias_row_bytes(bn, bias_dt.itemsize)
    return used


def fit_l1_stages(params: dict, M: int, N: int, K: int, dt: DType, bias_dt, chip: Chip) -> dict:
    """Halve params["STAGES"] until the kernel's L1 allocation (l1_use) fits the chip's L1; returns params."""
    while params["STAGES"] > 1 and l1_use(params, M, N, K, dt, bias_dt) > chip.buffers["L1"]:
        params["STAGES"] //= 2
    return params


def l1_pieces_for(base_m: int, base_n: int, base_k: int, k_l1: int, dt: DType, chip: Chip) -> int:
    """GM->L1 pieces per L1 step (`block.accumulate`'s l1_pieces): one per base_k step, as long as every A
    and B piece stays >= 2 x min_TileSize (docs/bmm_branches.md §2: below 16KB a move loses efficiency; measured on the
    emulator, pieces of 16-32KB already lose more in MTE2 time than the earlier start of the cube wins)."""
    steps = max(1, k_l1 // base_k)
    smallest = min(base_m, base_n) * k_l1 * dt.itemsize
    return max(1, min(steps, smallest // (2 * chip.min_tile_bytes)))


def params_of(tiling, problem, chip: Chip, *, bias: bool = False) -> dict:
    """asw_basic_kernel's static parameters from an AswTiling (L1 stages trimmed if the kernel's padded
    allocation would not fit: the tiling budgets K aligned to 16, the kernel's held slab to base_k)."""
    t, dt = tiling, problem.dtype
    params = dict(BASE_M=t.base_m, BASE_N=t.base_n, BASE_K=t.base_k, K_L1=t.k_l1, STAGES=t.l1_buffers,
                  L0_STAGES=t.l0_buffers, L0C_STAGES=t.l0c_buffers, WINDOW=t.window, L2_M=t.l2_tiles_m,
                  L2_N=t.l2_tiles_n, FULL_LOAD_A=t.full_load == "A", FULL_LOAD_B=t.full_load == "B",
                  TRANSPOSE_A=problem.transpose_a, TRANSPOSE_B=problem.transpose_b, BIAS=bool(bias),
                  L1_PIECES=l1_pieces_for(t.base_m, t.base_n, t.base_k, t.k_l1, dt, chip))
    return fit_l1_stages(params, t.m, t.n, t.k, dt, dt.acc if bias else None, chip)


def launch(plan, ops: Operands, *, mode: str) -> pyto.Report:
    """Run ASW_Basic for `plan` (branch asw_basic) on the operands `ops` (see common.py)."""
    return run_tiled((asw_basic_kernel, asw_basic_mx_kernel), params_of, plan, ops, mode)
