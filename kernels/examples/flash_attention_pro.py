"""Flash-attention forward in PyPTO-Pro's spelling, on any number of blocks: out = softmax(SCALE * q k^T) v.

    rep = flash_attention_pro[None, blocks](q, k, v, out)      # q [S, TD], k and v [N, TD], out [S, TD]; fp16

S >= 1 and N >= 1 are any sizes (pl.DYNAMIC); TD = 64 is the head dimension (a module constant: PyPTO-Pro's tile
shapes are compile-time). Query rows go in tiles of TS = 64, dealt round-robin to the blocks (`for qi in
pl.range(core_id, q_tiles, num_cores)`, the loop of PyPTO-Pro's fa/ device tests); keys and values in blocks of
TKV = 64. The last query tile and the last KV block are tails: the kernel sets their valid shapes
(tail_block_handling.md), loads and stores move only those, the matmuls take M/K/N from them, and the bytes around
them are never read.

Per query tile (one AIC and its two AIVs; rows = the tile's valid rows) and KV block j (cols = its valid keys):

    cube    Mat q [TS, TD] NZ -> Left;  k block loaded with order=[1, 0] into a ZN Mat [TD, TKV] (K^T as the NZ
            bytes of the block as stored, load.md "Cube侧转置场景") -> Right
            s = q k^T                       matmul, AccPhase.Final; Acc valid [rows, cols]
            Acc -> Vec                      DualModeSplitM, STPhase.Final (move.md: AIV0 gets ceil(rows/2) rows, AIV1
                                            the rest); set_cross_core(FIX, S_READY)
    vector  (each AIV its share of the rows, after wait_cross_core(V, S_READY))
            s = SCALE * s                   fp32 from here on
            rowmax -> [R, 1] DN column      pl.maximum(dim=0) (sum.md / maximum.md: dim=0 is each row)
            j = 0:  m = rowmax;  p = exp(s - m) (expand_sub, exp);  l = rowsum(p)
            j > 0:  m_new = max(m, rowmax);  alpha = exp(m - m_new);  m = m_new      (on the [1, R] ND views of
                    the columns: CV_fused_operator_quick_start.md's dual views at one address)
                    p = exp(s - m);  l = alpha * l + rowsum(p)
            p cast to fp16 (CAST_ROUND, as the fa/ tests), ND -> NZ (move), inserted into Mat P [TS, TKV] at
            [the AIV's first row, 0] (insert.md); set_cross_core(MTE3, P_READY)
    cube    v block -> Mat -> Right;  wait_cross_core(MTE1, P_READY);  Mat P valid [rows, cols] -> Left
            pv = p v                        matmul, AccPhase.Final; DualModeSplitM, STPhase.Final; set (FIX, PV_READY)
    vector  wait (V, PV_READY);  j = 0: o = pv;  j > 0: o = alpha * o + pv   (expand_mul, add)
At the end of the tile each AIV writes its rows: out = fp16(o / l) (expand_div, cast, store).

Synchronisation, as PyPTO-Pro kernels write it: inside a core, tile groups with mutex ids under auto_mutex order
the pipes (K and V double-buffered in L1, so the next block's loads run ahead); the output tile is a make_tile
tile with a hand-written V -> MTE3 flag before its store; between the cube and the vector only the three
cross-core events (INTRA_BLOCK: the AIC's set reaches both AIVs, the AIC's wait takes a set from each). An AIV
with no rows (a one-row tail) still takes part in the events. S, P and PV are single-buffered, and nothing else
is needed to reuse them or the output tile: the cube's next QK^T runs behind its MTE1 wait for the P made from the
last S; a set_cross_core on MTE3 goes off once the MTE3 work before it (the last insert, the last store) has
landed, and the next PV, hence the next write of the output tile, waits for it (the serial schedule of the fa/
tests without their QK preload).

PyPTO-Pro's own flash-attention device tests (python/tests/st/pypto_pro/frontend/fa/) run the DN formulation
(K Q^T, DualModeSplitN, column reductions; the unalign16 ones fillpad the KV tail with pad=min); this is the ND
formulation: row reductions into DN columns, which iterate their source's valid region, so the KV tail's stale
columns are never read and need no pad.

`build(...)` makes variants: `dtype=pl.DT_BF16`; and deliberate mistakes for tests: `rescale=False` skips o's
alpha rescale (wrong numbers), `wait_scores=False` drops the vector's wait for S (a RaceError on the UB tile
's_vec'), `set_probs=False` drops the vector's P_READY set (the cube's wait hangs: a DeadlockError),
`store_flag=False` drops the V -> MTE3 flag before the output store (a RaceError on 'o_out').
"""

import math

import pyto.language as pl

TS, TKV, TD = 64, 64, 64            # query rows per tile, keys per KV block, head dimension
R = TS // 2                         # rows of an AIV's share (DualModeSplitM halves the tile)
SCALE = 1.0 / math.sqrt(TD)
S_READY, P_READY, PV_READY = 0, 1, 2          # cross-core event ids
P_ = pl.PipeType
SPLIT_M = pl.AccToVecMode.DualModeSplitM

# ---- addresses (bytes in each memory space) ------------------------------------------------------------------
# Mat (L1): q, k x 2, v x 2, p: [64, 64] fp16 tiles of 8 KB
MAT_Q, MAT_K, MAT_V, MAT_P = 0x0000, 0x2000, 0x6000, 0xA000
LEFT_Q, LEFT_P = 0x0000, 0x2000                 # Left (L0A)
RIGHT_K, RIGHT_V = 0x0000, 0x2000               # Right (L0B)
ACC_S, ACC_O = 0x0000, 0x4000                   # Acc (L0C): [64, 64] fp32, 16 KB each
# Vec (UB, each AIV): [32, 64] fp32 tiles of 8 KB, fp16 of 4 KB, [32, 1] fp32 columns of 128 B
VEC_S, VEC_PV, VEC_TMP, VEC_O = 0x0000, 0x2000, 0x4000, 0x6000
VEC_P, VEC_P_NZ, VEC_OUT = 0x8000, 0x9000, 0xA000
VEC_M, VEC_L, VEC_ALPHA, VEC_RED = 0xB000, 0xB100, 0xB200, 0xB300


def _tt(shape, dtype, mem, **kw) -> pl.TileType:
    return pl.TileType(shape=shape, dtype=dtype, target_memory=mem, valid_shape=[-1, -1], **kw)


def build(*, dtype=pl.DT_FP16, rescale: bool = True, wait_scores: bool = True, set_probs: bool = True,
          store_flag: bool = True):
    """The flash-attention kernel for `dtype` inputs and output (fp16 or bf16); the flags are the deliberate
    mistakes of the module docstring (all True: the correct kernel)."""
    Mat, Left, Right, Acc, Vec = (pl.MemorySpace.Mat, pl.MemorySpace.Left, pl.MemorySpace.Right, pl.MemorySpace.Acc,
                                  pl.MemorySpace.Vec)
    F32 = pl.DT_FP32

    @pl.jit(auto_mutex=True)
    def flash_attention_pro(q: pl.Tensor[[pl.DYNAMIC, TD], dtype], k: pl.Tensor[[pl.DYNAMIC, TD], dtype],
                            v: pl.Tensor[[pl.DYNAMIC, TD], dtype], out: pl.Tensor[[pl.DYNAMIC, TD], dtype]):
        S, N = q.shape[0], k.shape[0]
        q_tiles = (S + TS - 1) // TS
        kv_tiles = (N + TKV - 1) // TKV
        num_cores = pl.get_block_num()
        core_id = pl.get_block_idx() // pl.get_subblock_num()

        # ---- shared by the cube and the vector side: the hand-over tiles -------------------------------------
        s_vec = pl.make_tile_group(type=_tt([R, TKV], F32, Vec), addrs=VEC_S, mutex_ids=[0])
        pv_vec = pl.make_tile_group(type=_tt([R, TD], F32, Vec), addrs=VEC_PV, mutex_ids=[1])
        p_mat = pl.make_tile_group(type=_tt([TS, TKV], dtype, Mat), addrs=MAT_P, mutex_ids=[2])

        # ==== cube: S = q k^T, then P v ====================================================================
        with pl.section_cube():
            q_mat = pl.make_tile_group(type=_tt([TS, TD], dtype, Mat), addrs=MAT_Q, mutex_ids=[3])
            k_mat = pl.make_tile_group(type=_tt([TD, TKV], dtype, Mat, layout=pl.ZN), addrs=MAT_K, mutex_ids=[4, 5])
            v_mat = pl.make_tile_group(type=_tt([TKV, TD], dtype, Mat), addrs=MAT_V, mutex_ids=[6, 7])
            q_left = pl.make_tile_group(type=_tt([TS, TD], dtype, Left), addrs=LEFT_Q, mutex_ids=[8])
            p_left = pl.make_tile_group(type=_tt([TS, TKV], dtype, Left), addrs=LEFT_P, mutex_ids=[9])
            k_right = pl.make_tile_group(type=_tt([TD, TKV], dtype, Right), addrs=RIGHT_K, mutex_ids=[10])
            v_right = pl.make_tile_group(type=_tt([TKV, TD], dtype, Right), addrs=RIGHT_V, mutex_ids=[11])
            s_acc = pl.make_tile_group(type=_tt([TS, TKV], F32, Acc), addrs=ACC_S, mutex_ids=[12])
            o_acc = pl.make_tile_group(type=_tt([TS, TD], F32, Acc), addrs=ACC_O, mutex_ids=[13])
            qm, ql, pm, p_l, kr, vr = (q_mat.current(), q_left.current(), p_mat.current(), p_left.current(),
                                       k_right.current(), v_right.current())
            sa, oa, sv, pv = s_acc.current(), o_acc.current(), s_vec.current(), pv_vec.current()
            for qi in pl.range(core_id, q_tiles, num_cores):
                s0 = qi * TS
                rows = pl.min(S - s0, TS)
                pl.set_validshape(qm, [rows, TD])
                pl.set_validshape(ql, [rows, TD])
                pl.load(qm, q, [s0, 0])
                pl.move(ql, qm)
                for j in pl.range(0, kv_tiles):
                    n0 = j * TKV
                    cols = pl.min(N - n0, TKV)
                    km, vm = k_mat.next(), v_mat.next()
                    pl.set_validshape(km, [TD, cols])
                    pl.set_validshape(kr, [TD, cols])
                    pl.load(km, k, [n0, 0], order=[1, 0])             # K^T: the block's NZ bytes as stored
                    pl.move(kr, km)
                    pl.set_validshape(sa, [rows, cols])
                    pl.matmul(sa, ql, kr, phase=pl.AccPhase.Final)
                    pl.move(sv, sa, acc_to_vec_mode=SPLIT_M, phase=pl.STPhase.Final)
                    pl.system.set_cross_core(pipe=P_.FIX, event_id=S_READY)
                    pl.set_validshape(vm, [cols, TD])
                    pl.set_validshape(vr, [cols, TD])
                    pl.load(vm, v, [n0, 0])
                    pl.move(vr, vm)
                    pl.system.wait_cross_core(pipe=P_.MTE1, event_id=P_READY)
                    pl.set_validshape(pm, [rows, cols])
                    pl.set_validshape(p_l, [rows, cols])
                    pl.move(p_l, pm)
                    pl.set_validshape(oa, [rows, TD])
                    pl.matmul(oa, p_l, vr, phase=pl.AccPhase.Final)
                    pl.move(pv, oa, acc_to_vec_mode=SPLIT_M, phase=pl.STPhase.Final)
                    pl.system.set_cross_core(pipe=P_.FIX, event_id=PV_READY)

        # ==== vector: online softmax and the running output, each AIV on its share of the rows ============
        with pl.section_vector():
            tmp_vec = pl.make_tile_group(type=_tt([R, TKV], F32, Vec), addrs=VEC_TMP, mutex_ids=[3])
            p_vec = pl.make_tile_group(type=_tt([R, TKV], dtype, Vec), addrs=VEC_P, mutex_ids=[4])
            p_nz = pl.make_tile_group(type=_tt([R, TKV], dtype, Vec, layout=pl.NZ), addrs=VEC_P_NZ, mutex_ids=[5])
            o_vec = pl.make_tile_group(type=_tt([R, TD], F32, Vec), addrs=VEC_O, mutex_ids=[6])
            # per-row state: a [R, 1] DN column for reductions and expands and its [1, R] ND view at the same
            # address for elementwise ops (CV_fused_operator_quick_start.md); m, l, alpha, this block's row max/sum
            col, row = _tt([R, 1], F32, Vec, layout=pl.DN), _tt([1, R], F32, Vec)
            m_col = pl.make_tile_group(type=col, addrs=VEC_M, mutex_ids=[7])
            m_row = pl.make_tile_group(type=row, addrs=VEC_M, mutex_ids=[8])
            l_col = pl.make_tile_group(type=col, addrs=VEC_L, mutex_ids=[9])
            l_row = pl.make_tile_group(type=row, addrs=VEC_L, mutex_ids=[10])
            a_col = pl.make_tile_group(type=col, addrs=VEC_ALPHA, mutex_ids=[11])
            a_row = pl.make_tile_group(type=row, addrs=VEC_ALPHA, mutex_ids=[12])
            r_col = pl.make_tile_group(type=col, addrs=VEC_RED, mutex_ids=[13])
            r_row = pl.make_tile_group(type=row, addrs=VEC_RED, mutex_ids=[14])
            m_col, m_row, l_col, l_row, a_col, a_row, r_col, r_row = (
                g.current() for g in (m_col, m_row, l_col, l_row, a_col, a_row, r_col, r_row))
            o_out = pl.make_tile(_tt([R, TD], dtype, Vec), addr=VEC_OUT)      # synchronised by hand
            sv, pv, tmp, pf, pz, ov = (s_vec.current(), pv_vec.current(), tmp_vec.current(), p_vec.current(),
                                       p_nz.current(), o_vec.current())
            pm = p_mat.current()
            sub = pl.get_subblock_idx()
            for qi in pl.range(core_id, q_tiles, num_cores):
                s0 = qi * TS
                rows = pl.min(S - s0, TS)
                half = (rows + 1) // 2                     # move.md: M aligned up to 2, halved; AIV1 the rest
                mine = half if sub == 0 else rows - half
                r0 = 0 if sub == 0 else half               # the share's first row in the tile
                if mine > 0:
                    for t in (m_col, l_col, a_col, r_col):
                        pl.set_validshape(t, [mine, 1])
                    for t in (m_row, l_row, a_row, r_row):
                        pl.set_validshape(t, [1, mine])
                    for t in (pv, ov, o_out):
                        pl.set_validshape(t, [mine, TD])
                for j in pl.range(0, kv_tiles):
                    cols = pl.min(N - j * TKV, TKV)
                    if wait_scores:
                        pl.system.wait_cross_core(pipe=P_.V, event_id=S_READY)
                    if mine > 0:
                        for t in (sv, tmp, pf, pz):
                            pl.set_validshape(t, [mine, cols])
                        pl.mul(sv, sv, SCALE)
                        if j == 0:
                            pl.maximum(m_col, sv, tmp, dim=0)              # m = rowmax
                            pl.expand_sub(sv, sv, m_col, dim=0)
                            pl.exp(sv, sv)                                 # p = exp(s - m)
                            pl.sum(l_col, sv, tmp, dim=0)                  # l = rowsum(p)
                        else:
                            pl.maximum(r_col, sv, tmp, dim=0)              # this block's rowmax
                            pl.maximum(r_row, r_row, m_row)                # m_new = max(m, rowmax)
                            pl.sub(a_row, m_row, r_row)
                            pl.exp(a_row, a_row)                           # alpha = exp(m - m_new)
                            pl.move(m_row, r_row)                          # m = m_new
                            pl.expand_sub(sv, sv, m_col, dim=0)
                            pl.exp(sv, sv)                                 # p = exp(s - m_new)
                            pl.sum(r_col, sv, tmp, dim=0)
                            pl.mul(l_row, l_row, a_row)
                            pl.add(l_row, l_row, r_row)                    # l = alpha * l + rowsum(p)
                        pl.cast(pf, sv, mode=pl.RoundMode.CAST_ROUND)
                        pl.move(pz, pf)                                    # ND -> NZ in UB
                        pl.insert(pm, pz, [r0, 0])                         # this AIV's rows of P into Mat
                    if set_probs:
                        pl.system.set_cross_core(pipe=P_.MTE3, event_id=P_READY)
                    pl.system.wait_cross_core(pipe=P_.V, event_id=PV_READY)
                    if mine > 0:
                        if j == 0:
                            pl.move(ov, pv)                                # o = p v
                        else:
                            if rescale:
                                pl.expand_mul(ov, ov, a_col, dim=0)
                            pl.add(ov, ov, pv)                             # o = alpha * o + p v
                if mine > 0:
                    pl.expand_div(ov, ov, l_col, dim=0)
                    pl.cast(o_out, ov, mode=pl.RoundMode.CAST_ROUND)
                    if store_flag:
                        pl.system.sync_src(set_pipe=P_.V, wait_pipe=P_.MTE3, event_id=0)
                        pl.system.sync_dst(set_pipe=P_.V, wait_pipe=P_.MTE3, event_id=0)
                    pl.store(out, o_out, [s0 + r0, 0])

    return flash_attention_pro


flash_attention_pro = build()
