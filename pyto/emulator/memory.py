"""The machine's storage in full mode: one array per tile store, staged copies of GM tensors,
and which parts have been written (for UninitializedReadError)."""
from __future__ import annotations

import numpy as np

from ..errors import UninitializedReadError
from ..ir import Access, GMTensor, Instr, TileStore
from .widen import widen


def _flat3(shape: tuple) -> tuple:
    """(batch, rows, cols) view of a GM tensor shape with any number of leading dimensions."""
    return (int(np.prod(shape[:-2], dtype=np.int64)),) + tuple(shape[-2:])


def _cell_name(obj) -> str:
    """What one cell of obj's initialisation mask is: a fractal, an ND row's 32-byte block, a GM element."""
    if not isinstance(obj, TileStore):
        return "elements"
    if obj.grid[0] == 1:
        return "32-byte blocks"
    return "fractals"


class Memory:
    """Arrays keyed by store/tensor identity. GM is staged: user arrays change only on `commit`."""

    def __init__(self, tensors: list, arrays: list, compute: bool):
        self.compute = compute
        self.tiles: dict = {}
        self.pending: dict = {}   # L0C store -> (rect, [a, ...], [b, ...]): MMAD products not yet summed
        self.init: dict = {}
        # ids of objects written everywhere, whose reads need no mask lookup: from the start, the
        # kernel's arguments (only workspaces, made by the kernel, are tracked)
        self.full: set = {id(t) for t in tensors if not t.workspace}
        self.gm: dict = {}
        self.user = list(zip(tensors, arrays))
        if compute:
            for t, a in self.user:
                self.gm[id(t)] = np.array(a, copy=True).reshape(_flat3(t.shape))

    # ---- tiles ----------------------------------------------------------------------------
    def tile(self, store: TileStore) -> np.ndarray:
        arr = self.tiles.get(id(store))
        if arr is None:
            arr = np.zeros(store.padded, dtype=store.dtype.np)
            self.tiles[id(store)] = arr
        return arr

    def view(self, acc: Access) -> np.ndarray:
        """The array of a tile view (after summing any MMAD products queued on that tile)."""
        if self.pending and id(acc.obj) in self.pending:
            self._flush(acc.obj)
        r0, r1, c0, c1 = acc.rect
        return self.tile(acc.obj)[r0:r1, c0:c1]

    def queue_product(self, acc: Access, a: np.ndarray, b: np.ndarray, wide: type, start: bool = False) -> bool:
        """Queue a @ b, computed in `wide`, to be added into view `acc`; False if products of another view are
        queued. a and b are copied (their L0 buffers are rewritten before the sum) and widened at the sum."""
        q = self.pending.get(id(acc.obj))
        if q is None:
            if not start:
                return False
            self.pending[id(acc.obj)] = (acc.obj, acc.rect, wide, [a.copy()], [b.copy()])
            return True
        if q[1] != acc.rect or q[2] is not wide:
            return False
        q[3].append(a.copy())
        q[4].append(b.copy())
        return True

    def _flush(self, store: TileStore) -> None:
        _, (r0, r1, c0, c1), wide, a_list, b_list = self.pending.pop(id(store))
        a = widen(a_list[0] if len(a_list) == 1 else np.concatenate(a_list, axis=1), wide)
        b = widen(b_list[0] if len(b_list) == 1 else np.concatenate(b_list, axis=0), wide)
        out = self.tile(store)[r0:r1, c0:c1]
        prod = a @ b
        if out.dtype.kind == "i":   # int32 accumulation wraps like the hardware
            out[...] = (out.astype(np.int64) + prod.astype(np.int64)).astype(np.int32)
        else:
            out += prod.astype(out.dtype, copy=False)

    def gm_array(self, t: GMTensor) -> np.ndarray:
        arr = self.gm.get(id(t))
        if arr is None:  # a workspace
            arr = np.zeros(_flat3(t.shape), dtype=t.dtype.np)
            self.gm[id(t)] = arr
        return arr

    # ---- initialisation tracking -----------------------------------------------------------
    def _mask(self, obj) -> np.ndarray:
        m = self.init.get(id(obj))
        if m is None:
            if isinstance(obj, TileStore):
                g = obj.grid
                m = np.zeros((-(-obj.padded[0] // g[0]), -(-obj.padded[1] // g[1])), dtype=bool)
            else:
                m = np.zeros(_flat3(obj.shape), dtype=bool)
            self.init[id(obj)] = m
        return m

    def _cells(self, acc: Access):
        r0, r1, c0, c1 = acc.rect
        if isinstance(acc.obj, TileStore):
            g = acc.obj.grid
            return self._mask(acc.obj)[r0 // g[0]: -(-r1 // g[0]), c0 // g[1]: -(-c1 // g[1])]
        if not acc.obj.workspace:
            return None
        return self._mask(acc.obj)[acc.batch, r0:r1, c0:c1]

    def mark_written(self, acc: Access) -> None:
        if id(acc.obj) in self.full:
            return
        cells = self._cells(acc)
        if cells is not None:
            cells[...] = True
            if isinstance(acc.obj, TileStore) and self.init[id(acc.obj)].all():
                self.full.add(id(acc.obj))

    def check_read(self, acc: Access, instr: Instr):
        """An UninitializedReadError if part of `acc` was never written, else None."""
        if id(acc.obj) in self.full:
            return None
        cells = self._cells(acc)
        if cells is not None and not cells.all():
            r0, r1, c0, c1 = acc.rect
            return UninitializedReadError(
                f"{instr.loc}: {instr.name} on {instr.pipe.name} (PIPE_{instr.pipe.name}) reads "
                f"{acc.obj!r}[{r0}:{r1}, {c0}:{c1}] "
                f"but part of it was never written ({int((~cells).sum())} of {cells.size} "
                f"{_cell_name(acc.obj)} uninitialised)")
        return None

    def commit(self, written: set) -> None:
        """Write staged GM back into the caller's arrays the kernel wrote (only after a successful run)."""
        if not self.compute:
            return
        for t, a in self.user:
            if id(t) in written:
                np.copyto(a, self.gm[id(t)].reshape(a.shape))
