"""4:2 sparse matmul kernels (pyto's extension: pl.move_sparse / pl.matmul_sparse on Atlas A2), as
tests/test_sparse.py's sparse_matmul_ring: c [M, N] int32 = a [M, K] int8 @ B, B 4:2 sparse along K, given as its
dense half stored transposed (b_t [N, K/2] int8) and its packed index likewise (idx_t [N, K/8] uint8: pyto.layout's
densify_4_2, pack_sparse_index, then .T). `pyto check` draws valid index bytes for idx_t (checker/sparse.py).

sparse_matmul: correct: ok. index_overwritten: the same, but the kernel writes one index byte itself (pl.setval,
ordered before the load) whose first pair is (1, 0), outside the cube's table: SparsityError at the MMAD.
"""
import pytest

import pypto_pro.language as pl

M, N, K, TK = 32, 64, 256, 64
P = pl.PipeType
SP = pl.MemorySpace.SparseIndex

pytestmark = pytest.mark.pyto_check(expect={"index_overwritten": "SparsityError"})


def tt(shape, dtype, mem, **kw):
    return pl.TileType(shape=shape, dtype=dtype, target_memory=mem, **kw)


def _sparse_matmul(a, b_t, idx_t, c):
    """The whole dense B and its index into Mat once; each K step moves views of both into double-buffered Right /
    SparseIndex slots (each index slot at its Right slot's address >> 2) and accumulates in one Acc tile."""
    b_l1 = pl.make_tile(tt([K // 2, N], pl.DT_INT8, pl.MemorySpace.Mat, layout=pl.ZN), addr=0x10000)
    i_l1 = pl.make_tile(tt([K // 8, N], pl.DT_UINT8, pl.MemorySpace.Mat, layout=pl.ZN), addr=0x30000)
    a_l1 = pl.make_tile_group(type=tt([M, TK], pl.DT_INT8, pl.MemorySpace.Mat), addrs=0x0, mutex_ids=[0, 1])
    a_l0 = pl.make_tile_group(type=tt([M, TK], pl.DT_INT8, pl.MemorySpace.Left), addrs=[0x0, 0x4000],
                              mutex_ids=[2, 3])
    b_l0 = pl.make_tile_group(type=tt([TK // 2, N], pl.DT_INT8, pl.MemorySpace.Right), addrs=[0x0, 0x4000],
                              mutex_ids=[4, 5])
    i_l0 = pl.make_tile_group(type=tt([TK // 8, N], pl.DT_UINT8, SP), addrs=[0x0, 0x1000], mutex_ids=[6, 7])
    c_l0 = pl.make_tile(tt([M, N], pl.DT_INT32, pl.MemorySpace.Acc), addr=0x0)
    pl.load(b_l1, b_t, [0, 0], order=[1, 0])
    pl.load(i_l1, idx_t, [0, 0], order=[1, 0])
    for ki in pl.range(0, K, TK):
        a_mat, a_left, b_right, i_sp = a_l1.next(), a_l0.next(), b_l0.next(), i_l0.next()
        pl.load(a_mat, a, [0, ki])
        pl.move(a_left, a_mat)
        pl.move_sparse(b_right, i_sp, b_l1[ki // 2:(ki + TK) // 2, 0:N], i_l1[ki // 8:(ki + TK) // 8, 0:N])
        phase = pl.AccPhase.Final if ki + TK == K else pl.AccPhase.Partial
        if ki == 0:
            pl.matmul_sparse(c_l0, a_left, b_right, i_sp, phase=phase)
        else:
            pl.matmul_sparse_acc(c_l0, c_l0, a_left, b_right, i_sp, phase=phase)
    pl.store(c, c_l0, [0, 0], phase=pl.STPhase.Final)


@pl.jit(arch="a2", auto_mutex=True)
def sparse_matmul(a: pl.Tensor[[M, K], pl.DT_INT8], b_t: pl.Tensor[[N, K // 2], pl.DT_INT8],
                  idx_t: pl.Tensor[[N, K // 8], pl.DT_UINT8], c: pl.Tensor[[M, N], pl.DT_INT32]):
    with pl.section_cube():
        _sparse_matmul(a, b_t, idx_t, c)


@pl.jit(arch="a2", auto_mutex=True)
def index_overwritten(a: pl.Tensor[[M, K], pl.DT_INT8], b_t: pl.Tensor[[N, K // 2], pl.DT_INT8],
                      idx_t: pl.Tensor[[N, K // 8], pl.DT_UINT8], c: pl.Tensor[[M, N], pl.DT_INT32]):
    with pl.section_cube():
        idx_t[5, 3] = 0b00_00_00_01       # column 5's index byte 3 (dense rows 12..15): its first pair is (1, 0)
        pl.system.sync_src(set_pipe=P.S, wait_pipe=P.MTE2, event_id=0)
        pl.system.sync_dst(set_pipe=P.S, wait_pipe=P.MTE2, event_id=0)
        _sparse_matmul(a, b_t, idx_t, c)
