"""Aliased dual views (TUT/quick_start/CV_fused_operator_quick_start.md, pitfalls.md §2.6): a row reduction's
[M, 1] DN result and the [1, M] ND view of the same bytes, declared at one address. pyto makes them views of one
store (tile.py), so a write through either is the other's data, and the pipes' order between them is the kernel's:
views with different mutex ids are not ordered across pipes (a RaceError, as on hardware), one mutex id orders
them."""
import numpy as np
import pytest

import pyto
import pyto.language as pl
from pyto.testing import UNIT_ROUNDOFF, assert_close
from pro_kernels import vec

RNG = np.random.default_rng(31)
R, C = 40, 64                   # 40 rows: the ND view's 160 B are five 32 B blocks
U32 = UNIT_ROUNDOFF[pl.DT_FP32]


def _dual(row_mutex: int = 3, store_view: bool = False):
    """Row sums of x into a DN [R, 1] tile, then, through the ND [1, R] view at its address: 2 * sums (an
    elementwise op) stored as a row, and x minus the row means (expand_sub of the DN tile, after the ND view was
    scaled by 1 / C in place). `store_view`: store the ND view itself right after the reduction (MTE3 reading what V
    wrote through the other view)."""
    @pl.jit(auto_mutex=True)
    def dual(x: pl.Tensor[[R, C], pl.DT_FP32], sums: pl.Tensor[[1, R], pl.DT_FP32],
             centred: pl.Tensor[[R, C], pl.DT_FP32]):
        src = pl.make_tile_group(type=vec([R, C]), addrs=0x0, mutex_ids=[0])
        tmp = pl.make_tile_group(type=vec([R, C]), addrs=0x4000, mutex_ids=[1])
        col = pl.make_tile_group(type=vec([R, 1], layout=pl.DN), addrs=0x8000, mutex_ids=[2])
        row = pl.make_tile_group(type=vec([1, R]), addrs=0x8000, mutex_ids=[row_mutex])
        two = pl.make_tile_group(type=vec([1, R]), addrs=0x8400, mutex_ids=[4])
        with pl.section_vector():
            s, t, c, r, o = src.current(), tmp.current(), col.current(), row.current(), two.current()
            pl.load(s, x, [0, 0])
            pl.sum(c, s, t, dim=0)
            if store_view:
                pl.store(sums, r, [0, 0])
                return
            pl.add(o, r, r)
            pl.store(sums, o, [0, 0])
            pl.mul(r, r, 1.0 / C)
            pl.expand_sub(t, s, c, dim=0)
            pl.store(centred, t, [0, 0])
    return dual


def test_a_dn_reduction_and_its_nd_view_are_one_storage():
    x = RNG.standard_normal((R, C)).astype(np.float32)
    sums, centred = np.zeros((1, R), np.float32), np.zeros((R, C), np.float32)
    _dual()(x, sums, centred)
    x64 = x.astype(np.float64)
    total = x64.sum(axis=1)
    # fp32 sums of C terms in any order: gamma_C * sum|x|; doubling is exact
    bound = 2 * C * U32 / (1 - C * U32) * np.abs(x64).sum(axis=1)
    assert_close(sums[0], 2 * total, bound + 1e-30, "2 x row sums through the ND view")
    mean_err = (C * U32 / (1 - C * U32) * np.abs(x64).sum(axis=1) / C + U32 * np.abs(total / C))[:, None]
    assert_close(centred, x64 - total[:, None] / C, mean_err * (1 + U32) + U32 * np.abs(x64 - total[:, None] / C),
                 "x - row means through the DN tile")


def test_dual_views_with_different_mutex_ids_race_across_pipes():
    """The reduction writes the DN tile on V, the store reads the ND view on MTE3: auto_mutex orders only tiles that
    share a mutex id, so nothing orders the two (the report names the storage by its first view, 'col')."""
    x = np.ones((R, C), np.float32)
    with pytest.raises(pyto.RaceError, match=r"(?s)RAW hazard detected at UB: UB tile 'col'.*PIPE_V \(AIV 0\) write: "
                                             r".*pl\.sum\(c, s, t, dim=0\).*PIPE_MTE3 \(AIV 0\) read: .*pl\.store\(sums, r"):
        _dual(store_view=True)(x, np.zeros((1, R), np.float32), np.zeros((R, C), np.float32))


def test_dual_views_sharing_a_mutex_id_are_ordered():
    x = RNG.standard_normal((R, C)).astype(np.float32)
    sums = np.zeros((1, R), np.float32)
    _dual(row_mutex=2, store_view=True)(x, sums, np.zeros((R, C), np.float32))
    total = x.astype(np.float64).sum(axis=1)
    assert_close(sums[0], total, C * U32 / (1 - C * U32) * np.abs(x.astype(np.float64)).sum(axis=1) + 1e-30,
                 "row sums stored through the ND view")
