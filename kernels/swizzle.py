"""Block order as a policy (CATLASS `block_swizzle`): which output tile a core computes next.

Two policies: `Swizzle.identity()` (row-major over the tile grid) and `Swizzle.asw(cores)`, seeds/000's
ASW sliding-window snake: M tiles are grouped in windows of W rows; inside a window N is walked column
by column (each column top to bottom), forward in even windows and backward in odd ones, so that the C
tiles running at the same time touch only W row blocks of A and one band of B columns (a small L2
footprint), and a window boundary never makes B's band jump back to the start.

Tiles are dealt round robin: core c takes tasks c, c + blocks, c + 2 * blocks, ... of the order.
Plain Python: no DSL calls, usable by kernels, planners and tests alike.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Sequence

Coord = tuple  # (mi, ni): the tile's row and column in the tile grid


def asw_window(cores: int) -> int:
    """seeds/000 W = max{d | d divides C, d <= floor(sqrt(C))} (C = 32 -> 4, 24 -> 4, 20 -> 4, 1 -> 1)."""
    if cores < 1:
        raise ValueError(f"core count must be >= 1, got {cores}")
    r = math.isqrt(cores)
    return max(d for d in range(1, r + 1) if cores % d == 0)


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
        """seeds/000 ASW sliding-window snake for `cores` cores running at once."""
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

    @staticmethod
    def assign(tiles: Sequence, blocks: int, block_idx: int) -> list:
        """The tiles core `block_idx` of `blocks` runs, in its order (round robin over `tiles`)."""
        if not 0 <= block_idx < blocks:
            raise ValueError(f"block_idx {block_idx} outside 0..{blocks - 1}")
        return list(tiles[block_idx::blocks])

    def grid(self, m: int, n: int, tile_m: int, tile_n: int) -> "TileGrid":
        """This order applied to an m x n output cut into tile_m x tile_n tiles."""
        return TileGrid(m, n, tile_m, tile_n, self)


@dataclass(frozen=True)
class TileGrid:
    """An m x n output cut into tile_m x tile_n tiles, walked in a swizzle order.

    As CATLASS's swizzle: `block_coord(task)` (GetBlockCoord) and `actual_shape(coord)` (GetActualBlockShape).
    """

    m: int
    n: int
    tile_m: int
    tile_n: int
    swizzle: Swizzle = Swizzle()

    @property
    def m_tiles(self) -> int:
        return -(-self.m // self.tile_m)

    @property
    def n_tiles(self) -> int:
        return -(-self.n // self.tile_n)

    @property
    def count(self) -> int:
        return self.m_tiles * self.n_tiles

    @cached_property
    def _order(self) -> list:
        return self.swizzle.tiles(self.m_tiles, self.n_tiles)

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
