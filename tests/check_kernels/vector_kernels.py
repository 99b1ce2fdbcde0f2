"""Correct vector kernels, as a PyPTO-Pro author writes them.

scale_add: out = alpha * x + y with a pl.DT_FP32 scalar parameter (`pyto check` needs --scalar alpha=V), each AIV
its HALF rows through make_tile tiles at fixed UB addresses, ordered by sync_src / sync_dst pairs; each AIV prints
its first x (pl.printf of a pl.getval, read on the scalar pipe S), so a check shows which data it ran on.

relu_rows: y = relu(x) over [256, 128] fp16, ROWS rows at a time, the input and output tiles two-slot tile groups
under auto_mutex: MTE2 loads block i + 1 while V computes block i and MTE3 drains block i - 1; the AIVs take the
blocks in turn.
"""
import pytest

import pypto_pro.language as pl

ROWS = 32
HALF = 32                        # scale_add's rows per AIV (on two AIVs)
VEC_FP32 = pl.TileType(shape=[HALF, 128], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)
VEC_ROWS = pl.TileType(shape=[ROWS, 128], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)

pytestmark = pytest.mark.pyto_check(block_dim=2, alpha=0.5)


@pl.jit
def scale_add(x: pl.Tensor[[64, 128], pl.DT_FP32], y: pl.Tensor[[64, 128], pl.DT_FP32],
              out: pl.Tensor[[64, 128], pl.DT_FP32], alpha: pl.DT_FP32):
    x_ub = pl.make_tile(VEC_FP32, addr=0x0000)
    y_ub = pl.make_tile(VEC_FP32, addr=0x4000)
    with pl.section_vector():
        row = pl.get_block_idx() * HALF
        pl.load(x_ub, x, [row, 0])
        pl.load(y_ub, y, [row, 0])
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.S, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.S, event_id=0)
        pl.printf("x[%d, 0] = %f\n", row, pl.getval(x_ub, 0))
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
        pl.axpy(y_ub, x_ub, alpha)                  # y_ub = alpha * x_ub + y_ub
        pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=1)
        pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=1)
        pl.store(out, y_ub, [row, 0])


@pl.jit(auto_mutex=True)
def relu_rows(x: pl.Tensor[[256, 128], pl.DT_FP16], y: pl.Tensor[[256, 128], pl.DT_FP16]):
    x_in = pl.make_tile_group(type=VEC_ROWS, addrs=0x0000, mutex_ids=[0, 1])
    y_out = pl.make_tile_group(type=VEC_ROWS, addrs=0x4000, mutex_ids=[2, 3])
    with pl.section_vector():
        for r in pl.range(pl.get_block_idx() * ROWS, 256, pl.get_block_num() * ROWS):
            xs, ys = x_in.next(), y_out.next()
            pl.load(xs, x, [r, 0])
            pl.relu(ys, xs)
            pl.store(y, ys, [r, 0])
