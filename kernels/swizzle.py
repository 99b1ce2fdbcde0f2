"""Block order as a policy (CATLASS `block_swizzle`): which output tile a core computes next.

Two policies: `Swizzle.identity()` (row-major over the tile grid) and `Swizzle.asw(cores)`, docs/bmm_branches.md §8.2.2's
ASW sliding-window snake: M tiles are grouped in windows of W rows; inside a window N is walked column
by column (each column top to bottom), forward in even windows and backward in odd ones, so that the C
tiles running at the same time touch only W row blocks of A and one band of B columns (a small L2
footprint), and a window boundary never makes B's band jump back to the start.

Tiles are dealt round robin: core c takes tasks c, c + blocks, c + 2 * blocks, ... of the order.

L2 tiling (docs/bmm_branches.md §8.2.3, "工作集超过 128MB 时按 mL2TileNum x nL2TileNum 切块"): `Swizzle.tiles_l2` cuts the
grid into l2_m x l2_n blocks, walks the blocks (block rows in order, block columns snaking), and inside each
block runs the window snake *diagonally* ("每个 L2 块内错位分核（对角线分配）"): in a window's step q its row i
takes column (q + i) mod cols instead of column q, so the W cores that start together read W different A
row blocks *and* W different B column blocks (no two of them the same address), while each window still
covers exactly its W rows x the block's columns (the same L2 footprint). A grid with `batch` > 1 repeats
the order once per batch, batch-major (`TileGrid.task`).
Plain Python: no DSL calls, usable by kernels, planners and tests alike.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Sequence

Coord = tuple  # (mi, ni): the tile's row and column in the tile grid


def asw_window(cores: int) -> int:
    """docs/bmm_branches.md §8.2.2 W = max{d | d divides C, d <= floor(sqrt(C))} (C = 32 -> 4, 24 -> 4, 20 -> 4, 1 -> 1)."""
    if cores < 1:
        raise ValueError(f"core count must be >= 1, got {cores}")
    r = math.isqrt(cores)
    return max(d for d in range(1, r + 1) if cores % d == 0)


def l2_blocks(m: int, n: int, k: int, tile_m: int, tile_n: int, itemsize: int, l2_bytes: int) -> tuple[int, int]:
    """docs/bmm_branches.md §8.2.3's mL2TileNum x nL2TileNum for an m x n x k matmul cut into tile_m x tile_n tiles:
    (1, 1) when A + B fit L2, else the fewest L2 blocks whose A rows + B columns fit L2, ties to the
    smaller tails."""
    tm, tn = -(-m // tile_m), -(-n // tile_n)
    if (m * k + k * n) * itemsize <= l2_bytes:
        return 1, 1
    best, best_key = (tm, tn), None
    for ml2 in range(1, tm + 1):
        rest = l2_bytes - -(-tm // ml2) * tile_m * k * itemsize
        cols = rest // (k * tile_n * itemsize) if rest > 0 else 0
        if cols < 1:
            continue
        nl2 = -(-tn // min(cols, tn))
        key = (ml2 * nl2, ml2 * -(-tm // ml2) - tm + nl2 * -(-tn // nl2) - tn)
        if best_key is None or key < best_key:
            best, best_key = (ml2, nl2), key
    return best


@dataclass(frozen=True)
class Swizzle:
    """An execution order over an m_tiles x n_tiles grid: windows of `window` M rows, optional snake."""

    window: int = 1
    snake: bool = False

    @classmethod
    def identity(cls) -> "Swizzle":
        """Row-major: (0, 0), (0, 1), ..., (1, 0), ..."""
        return cls(1, False)

    @classmethod
    def asw(cls, cores: int) -> "Swizzle":
        """docs/bmm_branches.md §8.2.2 ASW sliding-window snake for `cores` cores running at once."""
        return cls(asw_window(cores), True)

    def tiles(self, m_tiles: int, n_tiles: int) -> list:
        """Every (mi, ni) of the grid exactly once, in execution order."""
        if self.window == 1 and not self.snake:
            return [(mi, ni) for mi in range(m_tiles) for ni in range(n_tiles)]
        order = []
        for w, m_start in enumerate(range(0, m_tiles, self.window)):
            rows = range(m_start, min(m_start + self.window, m_tiles))
            cols = range(n_tiles - 1, -1, -1) if self.snake and w % 2 else range(n_tiles)
            order.extend((mi, ni) for ni in cols for mi in rows)
        return order

    def tiles_l2(self, m_tiles: int, n_tiles: int, l2_m: int = 1, l2_n: int = 1) -> list:
        """Every (mi, ni) once: L2 blocks in turn (columns snaking), each walked by the diagonal window snake.

        With l2_m = l2_n = 1 this is `tiles` (no L2 tiling, no diagonal).
        """
        return list(_l2_order(self, m_tiles, n_tiles, l2_m, l2_n))

    def _block_tiles(self, rows: range, cols: list, diagonal: bool) -> list:
        order = []
        for w, m_start in enumerate(range(rows.start, rows.stop, self.window)):
            win = range(m_start, min(m_start + self.window, rows.stop))
            seq = cols[::-1] if self.snake and w % 2 else cols
            nc = len(seq)
            order.extend((mi, seq[(q + i) % nc if diagonal else q]) for q in range(nc) for i, mi in enumerate(win))
        return order

    @staticmethod
    def assign(tiles: Sequence, blocks: int, block_idx: int) -> list:
        """The tiles core `block_idx` of `blocks` runs, in its order (round robin over `tiles`)."""
        if not 0 <= block_idx < blocks:
            raise ValueError(f"block_idx {block_idx} outside 0..{blocks - 1}")
        return list(tiles[block_idx::blocks])

    def grid(self, m: int, n: int, tile_m: int, tile_n: int, *, batch: int = 1, l2_m: int = 1,
             l2_n: int = 1) -> "TileGrid":
        """This order applied to an m x n output cut into tile_m x tile_n tiles (`batch` of them; L2 blocks)."""
        return TileGrid(m, n, tile_m, tile_n, self, batch, l2_m, l2_n)


@lru_cache(maxsize=64)
def _l2_order(sw: Swizzle, m_tiles: int, n_tiles: int, l2_m: int, l2_n: int) -> tuple:
    if l2_m <= 1 and l2_n <= 1:
        return tuple(sw.tiles(m_tiles, n_tiles))
    bm, bn = -(-m_tiles // max(1, l2_m)), -(-n_tiles // max(1, l2_n))
    order = []
    for r, m_start in enumerate(range(0, m_tiles, bm)):
        starts = list(range(0, n_tiles, bn))
        for n_start in (starts[::-1] if sw.snake and r % 2 else starts):
            order += sw._block_tiles(range(m_start, min(m_start + bm, m_tiles)),
                                     list(range(n_start, min(n_start + bn, n_tiles))), True)
    return tuple(order)


@dataclass(frozen=True)
class TileGrid:
    """An m x n output cut into tile_m x tile_n tiles, walked in a swizzle order.

    As CATLASS's swizzle: `block_coord(task)` (GetBlockCoord) and `actual_shape(coord)` (GetActualBlockShape).
    `batch` matrices of that shape (`task(t)` -> (batch, coord), batch-major); l2_m x l2_n L2 blocks
    (`Swizzle.tiles_l2`).
    """

    m: int
    n: int
    tile_m: int
    tile_n: int
    swizzle: Swizzle = Swizzle()
    batch: int = 1
    l2_m: int = 1
    l2_n: int = 1

    @property
    def m_tiles(self) -> int:
        return -(-self.m // self.tile_m)

    @property
    def n_tiles(self) -> int:
        return -(-self.n // self.tile_n)

    @property
    def count(self) -> int:
        """Tiles of one matrix."""
        return self.m_tiles * self.n_tiles

    @property
    def tasks(self) -> int:
        """Tiles of all `batch` matrices."""
        return self.batch * self.count

    @cached_property
    def _order(self) -> tuple:
        return _l2_order(self.swizzle, self.m_tiles, self.n_tiles, self.l2_m, self.l2_n)

    def task(self, t: int) -> tuple:
        """(batch, (mi, ni)) of the t-th task in execution order (batch-major)."""
        return t // self.count, self._order[t % self.count]

    def order(self) -> list:
        """Every (mi, ni) once, in execution order."""
        return list(self._order)

    def block_coord(self, task: int) -> Coord:
        """The (mi, ni) of the task-th tile in execution order."""
        return self._order[task]

    def offset(self, coord: Coord) -> tuple:
        """(row, col) of the tile's first element."""
        return coord[0] * self.tile_m, coord[1] * self.tile_n

    def actual_shape(self, coord: Coord) -> tuple:
        """(rows, cols) of the tile, smaller than (tile_m, tile_n) on the bottom and right tails."""
        r0, c0 = self.offset(coord)
        return min(self.tile_m, self.m - r0), min(self.tile_n, self.n - c0)

    def for_block(self, blocks: int, block_idx: int) -> list:
        """The coords core `block_idx` of `blocks` computes, in its order."""
        return self.swizzle.assign(self._order, blocks, block_idx)
