"""A correct CV-fused kernel, as a PyPTO-Pro author writes it: out = relu(a @ b + bias).

The AIC computes a @ b (fp16 in, fp32 in L0C) and moves the product to its two AIVs' UB, each its half of the
rows (Acc -> Vec, AccToVecMode.DualModeSplitM), then raises cross-core event 0 on FIX; each AIV loads its half of
bias, waits for event 0, adds and applies relu on V and stores its rows. Every tile is a make_tile tile: only the
kernel's own flags and the cross-core event order anything.
"""
import pytest

import pypto_pro.language as pl

M, K, N = 64, 64, 64
HALF = M // 2
P = pl.PipeType

pytestmark = pytest.mark.pyto_check(block_dim=1)


def _sync(src, dst, event_id: int = 0):
    pl.system.sync_src(set_pipe=src, wait_pipe=dst, event_id=event_id)
    pl.system.sync_dst(set_pipe=src, wait_pipe=dst, event_id=event_id)


@pl.jit
def matmul_bias_relu(a: pl.Tensor[[M, K], pl.DT_FP16], b: pl.Tensor[[K, N], pl.DT_FP16],
                     bias: pl.Tensor[[M, N], pl.DT_FP32], out: pl.Tensor[[M, N], pl.DT_FP32]):
    product = pl.make_tile(pl.TileType(shape=[HALF, N], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec),
                           addr=0x0000)
    with pl.section_cube():
        a_mat = pl.make_tile(pl.TileType(shape=[M, K], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat), addr=0x0)
        b_mat = pl.make_tile(pl.TileType(shape=[K, N], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat),
                             addr=0x2000)
        a_left = pl.make_tile(pl.TileType(shape=[M, K], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Left),
                              addr=0x0)
        b_right = pl.make_tile(pl.TileType(shape=[K, N], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Right),
                               addr=0x0)
        c_acc = pl.make_tile(pl.TileType(shape=[M, N], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc), addr=0x0)
        pl.load(a_mat, a, [0, 0])
        pl.load(b_mat, b, [0, 0])
        _sync(P.MTE2, P.MTE1)
        pl.move(a_left, a_mat)
        pl.move(b_right, b_mat)
        _sync(P.MTE1, P.M)
        pl.matmul(c_acc, a_left, b_right)
        _sync(P.M, P.FIX)
        pl.move(product, c_acc, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM)
        pl.system.set_cross_core(pipe=P.FIX, event_id=0)
    with pl.section_vector():
        bias_ub = pl.make_tile(pl.TileType(shape=[HALF, N], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec),
                               addr=0x2000)
        row = pl.get_subblock_idx() * HALF
        pl.load(bias_ub, bias, [row, 0])
        _sync(P.MTE2, P.V)
        pl.system.wait_cross_core(pipe=P.V, event_id=0)
        pl.add(product, product, bias_ub)
        pl.relu(product, product)
        _sync(P.V, P.MTE3)
        pl.store(out, product, [row, 0])
