"""Vector kernels that break a rule of PyPTO-Pro's vector ops or their own assertions.

row_max_nd_column: a row maximum (pl.maximum with dim=0) into a [ROWS, 1] tile declared without layout=pl.DN
(elementwise/maximum.md: the [M, 1] result of a dim=0 reduction is DN; an ND one puts each row's value in a 32-byte
row of its own, wrong on the device): ShapeError. rows_asserted: the kernel asserts with pl.pto_assert that x's
rows are a multiple of ROWS (pto_assert.md), and the marker gives it 40 rows: KernelAssertionError.
"""
import pytest

import pypto_pro.language as pl

ROWS = 16
COLS = 128

pytestmark = pytest.mark.pyto_check(expect={"row_max_nd_column": "ShapeError",
                                            "rows_asserted": "KernelAssertionError"}, x=(40, COLS),
                                    y=(40, COLS))


@pl.jit(auto_mutex=True)
def row_max_nd_column(x: pl.Tensor[[ROWS, COLS], pl.DT_FP32], m: pl.Tensor[[ROWS, 1], pl.DT_FP32]):
    src = pl.make_tile_group(type=pl.TileType(shape=[ROWS, COLS], dtype=pl.DT_FP32,
                                              target_memory=pl.MemorySpace.Vec), addrs=0x0, mutex_ids=[0])
    tmp = pl.make_tile_group(type=pl.TileType(shape=[ROWS, COLS], dtype=pl.DT_FP32,
                                              target_memory=pl.MemorySpace.Vec), addrs=0x2000, mutex_ids=[1])
    col = pl.make_tile_group(type=pl.TileType(shape=[ROWS, 1], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec),
                             addrs=0x4000, mutex_ids=[2])        # needs layout=pl.DN
    with pl.section_vector():
        s, t, c = src.current(), tmp.current(), col.current()
        pl.load(s, x, [0, 0])
        pl.maximum(c, s, t, dim=0)
        pl.store(m, c, [0, 0])


@pl.jit(auto_mutex=True)
def rows_asserted(x: pl.Tensor[[pl.DYNAMIC, COLS], pl.DT_FP32], y: pl.Tensor[[pl.DYNAMIC, COLS], pl.DT_FP32]):
    rows = x.shape[0]
    pl.pto_assert(rows % ROWS == 0, "x has %d rows, not a multiple of %d", rows, ROWS)
    block = pl.make_tile_group(type=pl.TileType(shape=[ROWS, COLS], dtype=pl.DT_FP32,
                                                target_memory=pl.MemorySpace.Vec), addrs=0x0, mutex_ids=[0, 1])
    with pl.section_vector():
        for r in pl.range(0, rows, ROWS):
            t = block.next()
            pl.load(t, x, [r, 0])
            pl.exp(t, t)
            pl.store(y, t, [r, 0])
