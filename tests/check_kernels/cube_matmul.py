"""Correct cube kernels, as a PyPTO-Pro author writes them: C = A @ B in fp16 with fp32 accumulation.

matmul_rows: M is pl.DYNAMIC (`pyto check` needs --shape a=Mx64 --shape c=Mx32, M a multiple of TM); the AI cores
take TM-row blocks in turn, A's blocks double-buffered in L1 and L0A and the products in L0C, every hop ordered by
auto_mutex's tile groups. matmul_block: block i computes rows [64 i, 64 i + 64) of a [128, 128] @ [128, 64]
product through make_tile tiles at fixed addresses, each hop ordered by a sync_src / sync_dst pair (both run on
block_dim 2, the marker's; on one block matmul_block computes the top half only).
"""
import pytest

import pypto_pro.language as pl

TM, K, N = 32, 64, 32

pytestmark = pytest.mark.pyto_check(block_dim=2, a=(128, K), c=(128, N))


@pl.jit(auto_mutex=True)
def matmul_rows(a: pl.Tensor[[pl.DYNAMIC, K], pl.DT_FP16], b: pl.Tensor[[K, N], pl.DT_FP16],
                c: pl.Tensor[[pl.DYNAMIC, N], pl.DT_FP32]):
    m = a.shape[0]
    a_mat = pl.make_tile_group(type=pl.TileType(shape=[TM, K], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat),
                               addrs=0x00000, mutex_ids=[0, 1])
    b_mat = pl.make_tile_group(type=pl.TileType(shape=[K, N], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat),
                               addrs=0x10000, mutex_ids=[2])
    a_left = pl.make_tile_group(type=pl.TileType(shape=[TM, K], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Left),
                                addrs=0x0, mutex_ids=[3, 4])
    b_right = pl.make_tile_group(type=pl.TileType(shape=[K, N], dtype=pl.DT_FP16,
                                                  target_memory=pl.MemorySpace.Right), addrs=0x0, mutex_ids=[5])
    c_acc = pl.make_tile_group(type=pl.TileType(shape=[TM, N], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc),
                               addrs=0x0, mutex_ids=[6, 7])
    with pl.section_cube():
        bl1, br = b_mat.current(), b_right.current()
        pl.load(bl1, b, [0, 0])
        pl.move(br, bl1)
        for r in pl.range(pl.get_block_idx() * TM, m, pl.get_block_num() * TM):
            al1, al, ac = a_mat.next(), a_left.next(), c_acc.next()
            pl.load(al1, a, [r, 0])
            pl.move(al, al1)
            pl.matmul(ac, al, br)
            pl.store(c, ac, [r, 0])


def _sync(src, dst, event_id: int = 0):
    pl.system.sync_src(set_pipe=src, wait_pipe=dst, event_id=event_id)
    pl.system.sync_dst(set_pipe=src, wait_pipe=dst, event_id=event_id)


@pl.jit
def matmul_block(a: pl.Tensor[[128, 128], pl.DT_FP16], b: pl.Tensor[[128, 64], pl.DT_FP16],
                 c: pl.Tensor[[128, 64], pl.DT_FP32]):
    a_mat = pl.make_tile(pl.TileType(shape=[64, 128], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat), addr=0x0)
    b_mat = pl.make_tile(pl.TileType(shape=[128, 64], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat),
                         addr=0x4000)
    a_left = pl.make_tile(pl.TileType(shape=[64, 128], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Left), addr=0x0)
    b_right = pl.make_tile(pl.TileType(shape=[128, 64], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Right),
                           addr=0x0)
    c_acc = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc), addr=0x0)
    with pl.section_cube():
        row = pl.get_block_idx() * 64
        pl.load(a_mat, a, [row, 0])
        pl.load(b_mat, b, [0, 0])
        _sync(pl.PipeType.MTE2, pl.PipeType.MTE1)
        pl.move(a_left, a_mat)
        pl.move(b_right, b_mat)
        _sync(pl.PipeType.MTE1, pl.PipeType.M)
        pl.matmul(c_acc, a_left, b_right)
        _sync(pl.PipeType.M, pl.PipeType.FIX)
        pl.store(c, c_acc, [row, 0])
