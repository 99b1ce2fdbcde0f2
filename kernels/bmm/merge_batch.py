"""MergeBatch (docs/bmm_branches.md §5): b batches merged into one [b*M̄, K] @ [K, b*N̄] MMAD; the block diagonal is the output.

Each core takes `batches_per_core` consecutive batches (core c: [c*bpc, (c+1)*bpc)) and walks them in
groups of b. For one group:

    MTE2:  batch i's A [M, k_L1] -> rows [i*M̄, (i+1)*M̄) of the merged L1 tile   [b*M̄, k_L1]
           batch i's B [k_L1, N] -> cols [i*N̄, (i+1)*N̄) of the merged L1 tile   [k_L1, b*N̄]
           (one Nd2Nz instruction per operand for the whole group, ndNum = b, as the hardware fetches
           consecutive batches: one DMA setup instead of b; a broadcast operand, whose batches are not
           consecutive, takes one GM load per batch; each load moves the M x k / k x N inside the tensor, its
           valid shape; the rows/cols past M/N keep what they held, and feed only the dropped products)
    MTE1 + M: the merged tiles through L0A/L0B, MMAD [b*M̄, b*N̄] in L0C  (block.mmad_l1)
    FIX:   only the diagonal blocks c[i*M̄:(i+1)*M̄, i*N̄:(i+1)*N̄] -> out[batch i] (their valid M x N)

The off-diagonal blocks (batch i's A times batch j's B) are computed and dropped: (b-1)/b of the cube
work is wasted, which is the point of the branch — its home ground is bandwidth bound (docs/bmm_branches.md §5.1.5).

Choices where the seed leaves room:
* L1: the tiling's l1_buffers copies of b_L1 batches are run as a ring of slots of b batches (one group
  each): l1_buffers * b_L1 / b slots when K fits one L1 slice (the same bytes; the cube starts once b
  batches have landed rather than b_L1, and after the last load only one group is left to compute),
  l1_buffers slots when each group streams several K slices (b_L1 is then b: more groups live across K
  slices would need more L0C tiles than the tiling's two).
* Bias: one BT row [1, b*N̄] built from each batch's bias row (batch i's row loaded into L1 columns
  [i*N̄, i*N̄ + N), the columns up to (i+1)*N̄ zeroed first by one pl.expands of the L1 row when N < N̄), added by
  the first MMAD. Row block i of the merged tile then gets every batch's bias
  in its column blocks, so the kept diagonal block (i, i) gets exactly batch i's bias. The tiling
  checks b*N̄*4B <= BT. (The vector-side alternative would cost an L0C->UB->GM round trip per group.)
* L0C sync: software (no unit_flag). With unit_flag each 512B block of L0C is freed only by a
  STPhase.Final store over it; the cross-term blocks are never stored, so their flags would stay 1 and
  the next group's MMAD into the slot would wait forever. The framework's auto-sync orders the slot
  reuse instead (two L0C slots still let Fixpipe drain one group while the cube fills the next).
* A batch-1 side (the planner's broadcast expansion) is read through `batch_offsets`: the same A (or B)
  block is loaded for every batch of the group.
* MX (the MX kernel): each batch's E8M0 scales go into its block of the merged scale tiles (scale_a rows
  [i*M̄, i*M̄ + M) of a ZZ [b*M̄, k_L1/32] Mat tile, scale_b columns of an NN [k_L1/32, b*N̄] one), one GM load per
  batch and L1 step (block.load_scales); the scale rows / columns past M / N, like the data's, feed only dropped
  products. matmul_mx chains whole tiles, so a group's L0C tile is the whole slot with its valid shape and the
  MMADs read the whole L1 slots (block._mmad_mx).
"""
from __future__ import annotations

import pyto
import pyto.language as pl
from pyto.errors import PlanError
from pyto.tiling import bias_row_bytes

from .asw_basic import l1_pieces_for
from .block import (MX_GROUP, MxScales, alloc_buffers, alloc_l1, at_edge, load_l1, load_scales, matrix_shape, mmad_l1,
                    with_valid)
from .conditions import ACC_BYTES
from .common import batch_offsets, cdiv, ceil_align, Operands, planned_params, prod, run_kernel, with_mx


def _merge_batch_kernel(a, b, bias, out, scale_a, scale_b, *, B_L0: int, M_PAD: int, N_PAD: int, BASE_K: int,
                        K_L1: int, BPC: int, L1_STAGES: int = 2, L0_STAGES: int = 2, L0C_STAGES: int = 2,
                        TRANSPOSE_A: bool = False, TRANSPOSE_B: bool = False, BIAS: bool = False, L1_PIECES: int = 1):
    """out [*batch, M, N] = a [*ba, M, K] @ b [*bb, K, N] (+ bias [*bbias, 1, N]), batch i of each.

    a is [*ba, K, M] with TRANSPOSE_A, b [*bb, N, K] with TRANSPOSE_B; a batch dim of 1 is broadcast.
    B_L0 batches per merged MMAD (and per L1 slot, L1_STAGES slots), M_PAD/N_PAD each batch's block in
    the merged tile, K_L1 the K depth of one L1 slot, BPC consecutive batches per core. L1_PIECES: loads along
    K per L1 slot (multiples of BASE_K), so the cube starts on the first piece of a group. scale_a / scale_b (the MX
    kernel; None in the plain one): E8M0 scales in block.MxScales' GM forms.
    """
    batch = tuple(out.shape[:-2])
    M, N = out.shape[-2], out.shape[-1]
    K = matrix_shape(a)[-2] if TRANSPOSE_A else matrix_shape(a)[-1]     # (elements: FP4's last axis is packed)
    Kb = matrix_shape(b)[-1] if TRANSPOSE_B else matrix_shape(b)[-2]
    assert K == Kb, f"a {a.shape} and b {b.shape} differ in K ({K} vs {Kb})"
    assert M <= M_PAD and N <= N_PAD, f"M, N = {M}, {N} exceed the block {M_PAD} x {N_PAD}"
    steps = -(-K // BASE_K)
    align = max(16, 32 // a.dtype.itemsize)
    mx = None if scale_a is None else MxScales(scale_a, scale_b, a.shape[:-2], b.shape[:-2], M, N, K)
    bufs = alloc_buffers(a.dtype, B_L0 * M_PAD, B_L0 * N_PAD, BASE_K, K_L1, l0_stages=L0_STAGES,
                         l0c_stages=L0C_STAGES, stream_a=False, stream_b=False,
                         bias_dtype=bias.dtype if BIAS else None, transpose_a=TRANSPOSE_A, transpose_b=TRANSPOSE_B,
                         dtype_b=b.dtype, mx=mx)
    a_l1 = alloc_l1([B_L0 * M_PAD, K_L1], a.dtype, transpose=TRANSPOSE_A, buffers=L1_STAGES, name="a_l1")
    b_l1 = alloc_l1([K_L1, B_L0 * N_PAD], b.dtype, transpose=TRANSPOSE_B, buffers=L1_STAGES, name="b_l1")
    if mx is not None:          # the merged scale tiles, a slot per data slot (advanced together)
        a_l1s = pl.alloc(pl.L1, [B_L0 * M_PAD, K_L1 // MX_GROUP], pl.DT_FP8E8M0, layout=pl.ZZ, buffers=L1_STAGES,
                         name="a_scale_l1")
        b_l1s = pl.alloc(pl.L1, [K_L1 // MX_GROUP, B_L0 * N_PAD], pl.DT_FP8E8M0, layout=pl.NN, buffers=L1_STAGES,
                         name="b_scale_l1")
    # ndNum needs the group's batches consecutive in the operand: its batch dims are the output's (no broadcast)
    a_nd = tuple(a.shape[:-2]) == batch
    b_nd = tuple(b.shape[:-2]) == batch
    with pl.section_cube():
        first = pl.get_block_idx() * BPC
        last = min(prod(batch), first + BPC)
        for g0 in pl.range(first, last, B_L0):
            ng = min(B_L0, last - g0)
            # valid up to the last batch's real M x N: what the MMADs compute (a batch's rows/cols past M/N inside
            # the merged tile only feed dropped products) and no bias column past the last batch's N is read
            c_slot = bufs.c_l0c.next()
            c_l0c = with_valid(c_slot if mx is not None else c_slot[0:ng * M_PAD, 0:ng * N_PAD],
                               (ng - 1) * M_PAD + M, (ng - 1) * N_PAD + N)
            bias_bt = _bias_row(bufs, bias, batch, g0, ng, N_PAD, N) if BIAS else None
            step = 0
            for k1 in pl.range(0, K, K_L1):
                a_slot, b_slot = a_l1.next(), b_l1.next()
                k_len = min(K_L1, K - k1)
                a_s = b_s = None
                if mx is not None:
                    a_s, b_s = a_l1s.next(), b_l1s.next()
                    for i in pl.range(ng):
                        load_scales(bufs, a_s[i * M_PAD:(i + 1) * M_PAD, :], True,
                                    batch_offsets(g0 + i, batch, a.shape[:-2]), 0, k1, k_len)
                        load_scales(bufs, b_s[:, i * N_PAD:(i + 1) * N_PAD], False,
                                    batch_offsets(g0 + i, batch, b.shape[:-2]), 0, k1, k_len)
                k_all = ceil_align(k_len, align)
                piece = ceil_align(cdiv(k_all, L1_PIECES), BASE_K)
                for kp in pl.range(0, k_all, piece):        # K pieces, A's and B's interleaved (K order)
                    kw = min(piece, k_all - kp)
                    a_k = [k1 + kp, 0] if TRANSPOSE_A else [0, k1 + kp]
                    b_k = [0, k1 + kp] if TRANSPOSE_B else [k1 + kp, 0]
                    if a_nd:                                # the group's ng batches of A in one Nd2Nz (ndNum)
                        load_l1(a_slot[0:ng * M_PAD, kp:kp + kw], a, batch_offsets(g0, batch, a.shape[:-2]) + a_k,
                                transpose=TRANSPOSE_A, nd_num=ng, nd_axis=0)
                    if b_nd:
                        load_l1(b_slot[kp:kp + kw, 0:ng * N_PAD], b, batch_offsets(g0, batch, b.shape[:-2]) + b_k,
                                transpose=TRANSPOSE_B, nd_num=ng, nd_axis=1)
                    for i in pl.range(ng):                  # else one GM load per batch into its block of the slot
                        if not a_nd:
                            load_l1(a_slot[i * M_PAD:(i + 1) * M_PAD, kp:kp + kw], a,
                                    batch_offsets(g0 + i, batch, a.shape[:-2]) + a_k, transpose=TRANSPOSE_A)
                        if not b_nd:
                            load_l1(b_slot[kp:kp + kw, i * N_PAD:(i + 1) * N_PAD], b,
                                    batch_offsets(g0 + i, batch, b.shape[:-2]) + b_k, transpose=TRANSPOSE_B)
                if mx is None:
                    a_slot, b_slot = a_slot[0:ng * M_PAD, :], b_slot[:, 0:ng * N_PAD]
                step = mmad_l1(bufs, c_l0c, a_slot, b_slot, min(K_L1, K - k1), step=step, steps=steps,
                               bias_bt=bias_bt if k1 == 0 else None, use_unit_flag=False, a1s=a_s, b1s=b_s)
            for i in pl.range(ng):                          # the block diagonal out; cross terms dropped
                c_ii = c_l0c[i * M_PAD:(i + 1) * M_PAD, i * N_PAD:(i + 1) * N_PAD]
                offs = batch_offsets(g0 + i, batch, batch) + [0, 0]
                pl.store(out, at_edge(c_ii, out, offs), offs)


def _bias_row(bufs, bias, batch: tuple, g: int, ng: int, n_pad: int, n: int):
    """BT row [1, ng*N̄]: batch g+i's bias row in columns [i*N̄, i*N̄ + N), valid up to the last batch's N. The
    columns between batches, [i*N̄ + N, (i+1)*N̄), are no batch's: the L1 row is first filled with zeros there
    (pl.expands on the Mat tile, one MTE2 instruction, only when there are such gaps: N < N̄ and ng > 1), so the
    L1 -> BT move and the MMAD read defined bytes; the products they feed are dropped anyway."""
    bias_l1 = bufs.bias_l1.next()
    valid = (ng - 1) * n_pad + n
    row = with_valid(bias_l1[0:1, 0:ng * n_pad], 1, valid)
    if ng > 1 and n < n_pad:
        pl.expands(row, 0)
    for i in pl.range(ng):
        off = batch_offsets(g + i, batch, bias.shape[:-2])
        pl.load(at_edge(bias_l1[0:1, i * n_pad:(i + 1) * n_pad], bias, off + [0, 0]), bias, off + [0, 0])
    bias_bt = with_valid(bufs.bias_bt[0:1, 0:ng * n_pad], 1, valid)
    pl.move(bias_bt, row)
    return bias_bt


merge_batch_kernel, merge_batch_mx_kernel = with_mx(_merge_batch_kernel)


# ---- host side -------------------------------------------------------------------------------------
def _l1_bytes(b: int, m_pad: int, n_pad: int, k_l1: int, isz: int, stages: int, bias: bool) -> int:
    """L1 the kernel allocates (tiles are already on the fractal grid; the bias row as 4-byte elements, the
    widest bias: pyto.tiling.bias_row_bytes)."""
    use = stages * b * (m_pad + n_pad) * k_l1 * isz
    return use + (bias_row_bytes(b * n_pad, ACC_BYTES) if bias else 0)


def params_for(t, p, chip) -> tuple[dict, int]:
    """The kernel's static parameters from the tiling t (MergeBatchTiling), and the block count.

    The tiling's l1_buffers copies of b_L1 batches become a ring of l1_buffers * b_L1 / b slots of b
    batches (at most one per group the core runs) when K fits one L1 slice, else l1_buffers slots of b
    batches.
    """
    stages = t.l1_buffers
    if p.K <= t.k_l1:                         # no more slots than the core has groups: each would stay unused
        stages = max(stages, min(t.l1_buffers * t.b_l1 // t.b, t.groups_per_core))
    cap = chip.buffers["L1"]
    while _l1_bytes(t.b, t.m_pad, t.n_pad, t.k_l1, p.isz, stages, p.bias) > cap:
        if stages == 1:                       # the bias rows take a little L1 the tiling did not count
            raise PlanError(f"merge_batch: one L1 slot of {t.b} batches x k_L1 {t.k_l1} does not fit L1 {cap} B")
        stages -= 1
    params = dict(B_L0=t.b, M_PAD=t.m_pad, N_PAD=t.n_pad, BASE_K=t.base_k, K_L1=t.k_l1, BPC=t.batches_per_core,
                  L1_STAGES=stages, L0_STAGES=t.l0_buffers, L0C_STAGES=t.l0c_buffers,
                  TRANSPOSE_A=p.transpose_a, TRANSPOSE_B=p.transpose_b, BIAS=p.bias,
                  L1_PIECES=l1_pieces_for(t.base_m, t.base_n, t.base_k, min(t.k_l1, p.Kp), p.dtype, chip))
    return params, t.cores_used


def kernel_params(plan) -> tuple[dict, int]:
    """The kernel's static parameters from plan.tiling (MergeBatchTiling), and the block count."""
    return planned_params(params_for, plan)


def launch(plan, ops: Operands, *, mode: str) -> pyto.Report:
    """Run MergeBatch for `plan` on `ops` (the launch convention of kernels/bmm/common.py)."""
    return run_kernel((merge_batch_kernel, merge_batch_mx_kernel), plan, ops, *kernel_params(plan), mode)
