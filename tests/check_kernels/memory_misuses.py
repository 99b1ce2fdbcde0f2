"""Kernels that get their on-chip memory wrong: what make_tile's fixed addresses (resource_management/make_tile.md)
and load's tensor bounds (memory_data_movement/load.md) let an author write and the device would not report.

overlapping_tiles: two UB tiles whose ranges overlap, the second written after the first was loaded, then the
first stored: its bytes are the other tile's: ClobberedReadError. ub_overflow: a Vec tile placed so that it ends
past UB's 248 KB: CapacityError. l1_overflow: two Mat operands, the second past L1's 512 KB: CapacityError.
misaligned_left: a Left tile at 0x100 (L0A tiles are 512-byte aligned): AlignmentError. never_written: an add
reads a tile nothing loaded: UninitializedReadError. load_past_edge: the last block's load starts at row 48 of a
64-row tensor with a 32-row tile: OutOfBoundsError.
"""
import pytest

import pypto_pro.language as pl

VEC = pl.TileType(shape=[32, 128], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)       # 16 KB
P = pl.PipeType

pytestmark = pytest.mark.pyto_check(expect={
    "overlapping_tiles": "ClobberedReadError", "ub_overflow": "CapacityError", "l1_overflow": "CapacityError",
    "misaligned_left": "AlignmentError", "never_written": "UninitializedReadError",
    "load_past_edge": "OutOfBoundsError"})


def _sync(src, dst, event_id: int = 0):
    pl.system.sync_src(set_pipe=src, wait_pipe=dst, event_id=event_id)
    pl.system.sync_dst(set_pipe=src, wait_pipe=dst, event_id=event_id)


@pl.jit
def overlapping_tiles(x: pl.Tensor[[32, 128], pl.DT_FP32], y: pl.Tensor[[32, 128], pl.DT_FP32]):
    x_ub = pl.make_tile(VEC, addr=0x0000)
    ones = pl.make_tile(pl.TileType(shape=[16, 128], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec),
                        addr=0x2000)                       # inside x_ub's [0x0, 0x4000)
    with pl.section_vector():
        pl.load(x_ub, x, [0, 0])
        _sync(P.MTE2, P.V)
        pl.expands(ones, 1.0)
        _sync(P.V, P.MTE3)
        pl.store(y, x_ub, [0, 0])


@pl.jit
def ub_overflow(x: pl.Tensor[[32, 128], pl.DT_FP32], y: pl.Tensor[[32, 128], pl.DT_FP32]):
    x_ub = pl.make_tile(VEC, addr=0x00000)
    y_ub = pl.make_tile(VEC, addr=0x3C000)                 # [0x3C000, 0x40000): UB ends at 0x3E000
    with pl.section_vector():
        pl.load(x_ub, x, [0, 0])
        _sync(P.MTE2, P.V)
        pl.exp(y_ub, x_ub)
        _sync(P.V, P.MTE3)
        pl.store(y, y_ub, [0, 0])


@pl.jit
def l1_overflow(a: pl.Tensor[[128, 512], pl.DT_FP16], b: pl.Tensor[[512, 128], pl.DT_FP16],
                c: pl.Tensor[[128, 128], pl.DT_FP32]):
    a_mat = pl.make_tile(pl.TileType(shape=[128, 512], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat),
                         addr=0x00000)                     # 128 KB
    b_mat = pl.make_tile(pl.TileType(shape=[512, 128], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat),
                         addr=0x70000)                     # 128 KB from 448 KB: past L1's 512 KB
    with pl.section_cube():
        pl.load(a_mat, a, [0, 0])
        pl.load(b_mat, b, [0, 0])


@pl.jit
def misaligned_left(a: pl.Tensor[[64, 64], pl.DT_FP16], b: pl.Tensor[[64, 64], pl.DT_FP16],
                    c: pl.Tensor[[64, 64], pl.DT_FP32]):
    a_mat = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat), addr=0x0)
    a_left = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Left),
                          addr=0x100)                      # L0A tiles are 512-byte aligned
    with pl.section_cube():
        pl.load(a_mat, a, [0, 0])
        _sync(P.MTE2, P.MTE1)
        pl.move(a_left, a_mat)


@pl.jit
def never_written(x: pl.Tensor[[32, 128], pl.DT_FP32], y: pl.Tensor[[32, 128], pl.DT_FP32]):
    x_ub = pl.make_tile(VEC, addr=0x0000)
    bias_ub = pl.make_tile(VEC, addr=0x4000)               # never loaded
    with pl.section_vector():
        pl.load(x_ub, x, [0, 0])
        _sync(P.MTE2, P.V)
        pl.add(x_ub, x_ub, bias_ub)
        _sync(P.V, P.MTE3)
        pl.store(y, x_ub, [0, 0])


@pl.jit
def load_past_edge(x: pl.Tensor[[64, 128], pl.DT_FP32], y: pl.Tensor[[64, 128], pl.DT_FP32]):
    x_ub = pl.make_tile(VEC, addr=0x0000)
    with pl.section_vector():
        for r in pl.range(0, 64, 24):                      # rows 0, 24, 48: the last block runs past row 63
            pl.load(x_ub, x, [r, 0])
            _sync(P.MTE2, P.MTE3)
            pl.store(y, x_ub, [r, 0])
            _sync(P.MTE3, P.MTE2)
