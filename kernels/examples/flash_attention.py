"""Flash Attention forward for ONE block of queries: docs/cube_phase.md §5.3's cube -> vector -> cube pattern.

Shapes (GM, row-major):
    q   [M, D]   fp16 or bf16   queries of this block
    k   [N, D]   same dtype     keys, stored as usual: K^T is a DN operand. Each [BN, D] block is loaded
                                with order=[1, 0] into k_l1, a ZN [D, BN] Mat tile: the NZ bytes of the block
                                as stored (a plain Nd2Nz), and the move to L0B reads them as K^T, so no K^T
                                copy is needed. This is the route every chip has; an NZ [D, BN] k_l1 would make
                                the load a Dn2Nz (the 950 only, docs/fractal_formats.md §4.4), and the kernel needs the 950
                                anyway for its L0C->UB and UB->L1 paths
    v   [N, D]   same dtype     values
    out [M, D]   same dtype     softmax(SCALE * q @ k.T) @ v

Static params: M, N, D (checked against the tensors), BN (KV block, N % BN == 0), DK (the QK
matmul's K chunk: D is accumulated in D // DK steps with AccPhase.Partial ... Final; default D),
SCALE (default 1 / sqrt(D)), MODE (0 = correct; 1 and 2 are docs/cube_phase.md §6's misuse cases, see below).

Per KV block j (one block of the online softmax, Milakov & Gimelshein / FlashAttention-2):
    cube    s_l0c  = q_l0a @ k_l0b                       AccPhase.Partial ... Final (unit_flag), under
                                                          set_mm_layout_transform (the K-split rule)
            s_l0c -> s_ub                                 Fixpipe L0C->UB, DualModeSplitM, STPhase.Final:
                                                          each AIV owns M/2 whole rows
    vector  s      = SCALE * s_ub                         (fp32 from here on)
            m_new  = max(m, rowmax(s))
            alpha  = exp(m - m_new)                       rescale of everything so far
            p      = exp(s - m_new);  l = alpha * l + rowsum(p)
            p_ub   = cast(p) to the input dtype  ->  p_l1[rows of this AIV]   (UB->L1, vector to cube)
    cube    o_l0c  = p_l0a @ v_l0b                       AccPhase.Final
            o_l0c -> pv_ub                                DualModeSplitM, STPhase.Final
    vector  o_ub   = alpha * o_ub + pv_ub
At the end each AIV writes its rows: out = cast(o_ub / l).

M must be a multiple of 32: DualModeSplitM hands each AIV M/2 rows, and the AIV's slice of p_l1
(an L1 Nz view) must sit on the 16-row fractal grid. Needs the L0C->UB and UB->L1 paths (950).
Capacity: L0A holds q and p, M (D + BN) x 2 B <= 64 KB (e.g. M = D = BN = 128); UB per AIV about
(M/2) (5 BN + 6 D) x 4 B. Everything is single-buffered: cube and vector take turns within a KV block.

MODE (deliberate misuse, for tests):
    1  the S move carries no phase after the phased QK matmul (docs/cube_phase.md §6.2): no software sync
       on the M<->FIX edge and no unit_flag wait either -> RaceError on L0C tile 's_l0c'.
    2  every L0C->UB move uses STPhase.Partial, never Final (docs/cube_phase.md §6.3): unit_flag stays 1, so
       the next KV block's AccPhase.Final matmul waits forever -> DeadlockError (with >= 2 KV blocks).
"""
from __future__ import annotations

import math

import pyto.language as pl


@pl.kernel
def flash_attention(q, k, v, out, *, M: int, N: int, D: int, BN: int, DK: int = None, SCALE: float = None,
                    MODE: int = 0):
    assert tuple(q.shape) == (M, D) and tuple(k.shape) == (N, D) and tuple(v.shape) == (N, D), \
        f"q {q.shape}, k {k.shape}, v {v.shape} do not match M={M}, N={N}, D={D}"
    assert tuple(out.shape) == (M, D) and q.dtype == k.dtype == v.dtype == out.dtype
    assert M % 32 == 0, "M must be a multiple of 32 (each AIV's M/2 rows of p_l1 on the 16-row grid)"
    assert N % BN == 0, "N must be a multiple of BN"
    DK = D if DK is None else DK
    assert D % DK == 0
    SCALE = 1.0 / math.sqrt(D) if SCALE is None else SCALE
    MODE = int(MODE)
    dt = q.dtype
    R = M // 2                                          # rows owned by each AIV
    st_phase = pl.STPhase.Partial if MODE == 2 else pl.STPhase.Final   # of both L0C->UB moves

    # ---- cube side (AIC): L1, L0A, L0B, L0C ----------------------------------------------------
    q_l1 = pl.alloc(pl.L1, [M, D], dt)
    k_l1 = pl.alloc(pl.L1, [D, BN], dt, layout=pl.ZN)   # K^T: the K block's bytes as stored
    v_l1 = pl.alloc(pl.L1, [BN, D], dt)
    p_l1 = pl.alloc(pl.L1, [M, BN], dt)                 # P, written by both AIVs (UB->L1)
    q_l0a = pl.alloc(pl.L0A, [M, D], dt)
    p_l0a = pl.alloc(pl.L0A, [M, BN], dt)
    k_l0b = pl.alloc(pl.L0B, [D, BN], dt)
    v_l0b = pl.alloc(pl.L0B, [BN, D], dt)
    s_l0c = pl.alloc(pl.L0C, [M, BN], pl.DT_FP32)          # S = Q K^T of one KV block
    o_l0c = pl.alloc(pl.L0C, [M, D], pl.DT_FP32)           # P V of one KV block

    # ---- vector side (each AIV, its own UB): R = M/2 rows ------------------------------------
    s_ub = pl.alloc(pl.UB, [R, BN], pl.DT_FP32)            # scores, then p in fp32
    tmp_ub = pl.alloc(pl.UB, [R, BN], pl.DT_FP32)          # scratch of the row reductions
    p_ub = pl.alloc(pl.UB, [R, BN], dt)                 # p in the input dtype, for the PV matmul
    # per-row columns: [R, 1] DN tiles (a row reduction's output, sum.md: layout=pl.DN)
    m_ub = pl.alloc(pl.UB, [R, 1], pl.DT_FP32, layout=pl.DN)       # running row max
    m_new_ub = pl.alloc(pl.UB, [R, 1], pl.DT_FP32, layout=pl.DN)
    alpha_ub = pl.alloc(pl.UB, [R, 1], pl.DT_FP32, layout=pl.DN)   # exp(m_old - m_new)
    l_ub = pl.alloc(pl.UB, [R, 1], pl.DT_FP32, layout=pl.DN)       # running row sum
    rowsum_ub = pl.alloc(pl.UB, [R, 1], pl.DT_FP32, layout=pl.DN)
    pv_ub = pl.alloc(pl.UB, [R, D], pl.DT_FP32)            # P V of this block (this AIV's rows)
    o_ub = pl.alloc(pl.UB, [R, D], pl.DT_FP32)             # running output, unnormalised
    out_ub = pl.alloc(pl.UB, [R, D], dt)

    with pl.section_cube():
        pl.load(q_l1, q, [0, 0])
        pl.move(q_l0a, q_l1)
    with pl.section_vector():
        pl.expands(m_ub, -math.inf)
        pl.expands(l_ub, 0.0)
        pl.expands(o_ub, 0.0)

    for j in pl.range(0, N, BN):
        # S = Q K^T, accumulated over D in DK chunks; the hardware unit_flag hands it to Fixpipe.
        with pl.section_cube():
            pl.load(k_l1, k, [j, 0], order=[1, 0])
            pl.move(k_l0b, k_l1)
            pl.system.set_mm_layout_transform(enabled=True)
            for d in pl.range(0, D, DK):
                phase = pl.AccPhase.Final if d + DK == D else pl.AccPhase.Partial
                if d == 0:
                    pl.matmul(s_l0c, q_l0a[:, d:d + DK], k_l0b[d:d + DK, :], phase=phase)
                else:
                    pl.matmul_acc(s_l0c, s_l0c, q_l0a[:, d:d + DK], k_l0b[d:d + DK, :], phase=phase)
            if MODE == 1:
                pl.move(s_ub, s_l0c, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM)   # misuse: no phase
            else:
                pl.move(s_ub, s_l0c, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM, phase=st_phase)
            pl.system.set_mm_layout_transform(enabled=False)

        # online softmax on this AIV's R rows
        with pl.section_vector():
            pl.mul(s_ub, s_ub, SCALE)
            pl.maximum(m_new_ub, s_ub, tmp_ub, dim=0)               # rowmax of this block
            pl.maximum(m_new_ub, m_new_ub, m_ub)                    # m_new = max(m, rowmax)
            pl.sub(alpha_ub, m_ub, m_new_ub)
            pl.exp(alpha_ub, alpha_ub)                              # alpha = exp(m - m_new)
            pl.expand_sub(s_ub, s_ub, m_new_ub, dim=0)
            pl.exp(s_ub, s_ub)                                      # p = exp(s - m_new), in fp32
            pl.sum(rowsum_ub, s_ub, tmp_ub, dim=0)
            pl.mul(l_ub, l_ub, alpha_ub)
            pl.add(l_ub, l_ub, rowsum_ub)                           # l = alpha * l + rowsum(p)
            pl.move(m_ub, m_new_ub)                                 # m = m_new (Vec -> Vec)
            pl.cast(p_ub, s_ub, mode=pl.RoundMode.CAST_RINT)        # p rounded to the input dtype
            r0 = pl.get_subblock_idx() * R
            pl.move(p_l1[r0:r0 + R, :], p_ub)                       # UB->L1: this AIV's rows of P

        # P V on the cube
        with pl.section_cube():
            pl.load(v_l1, v, [j, 0])
            pl.move(v_l0b, v_l1)
            pl.move(p_l0a, p_l1)
            pl.matmul(o_l0c, p_l0a, v_l0b, phase=pl.AccPhase.Final)
            pl.move(pv_ub, o_l0c, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM, phase=st_phase)

        with pl.section_vector():
            pl.expand_mul(o_ub, o_ub, alpha_ub, dim=0)
            pl.add(o_ub, o_ub, pv_ub)                               # o = alpha * o + P V

    with pl.section_vector():
        pl.expand_div(o_ub, o_ub, l_ub, dim=0)
        pl.cast(out_ub, o_ub, mode=pl.RoundMode.CAST_RINT)
        pl.store(out, out_ub, [pl.get_subblock_idx() * R, 0])
