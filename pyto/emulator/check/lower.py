"""The checked pass's instructions lowered to integer arrays (for checkcore.py), from the blocks' records
(rows.py: each block's accesses as integer rows, made when the block was encoded) and the block encodings
(threads, cores, sync_alls, auto-sync dependencies), with numpy: no walk over Instr records.

An access is (object, batch, r0, r1, c0, c1); an instruction's sources come first, then its
destinations. Objects (tiles and GM tensors, by identity) and histories ((object, batch) pairs) get dense
numbers; a tile or workspace gets a region of one flat mask of written cells (memory.Initialised's
geometry)."""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np
from numba import njit

from ...ir import GMTensor, Pipe, TileStore
from .. import jitmode
from ..data.memory import Initialised
from .overlap import ByteSpace
from .rows import _ATOMIC

# an instruction's thread within its block (sanitizer.py's threads: the AIC's MTE2 MTE1 M FIX S are 0-4, AIV0's
# MTE2 V MTE3 S 5-8, AIV1's 9-12), by pipe: the AIC's and an AIV's offset (-1: not on that core)
_AIC_T = np.full(len(Pipe), -1, np.int64)
_AIV_T = np.full(len(Pipe), -1, np.int64)
for _p, _t in ((Pipe.MTE2, 0), (Pipe.MTE1, 1), (Pipe.M, 2), (Pipe.FIX, 3), (Pipe.S, 4)):
    _AIC_T[_p] = _t
for _p, _t in ((Pipe.MTE2, 0), (Pipe.V, 1), (Pipe.MTE3, 2), (Pipe.S, 3)):
    _AIV_T[_p] = _t


class Accesses(NamedTuple):
    """The accesses of the visited instructions, one row each. Instruction i's (global index; none for one
    not visited) are rows `start[i]` to `start[i] + nacc[i]`, its first `nsrc[i]` its sources. Per access:
    history `hist`, object `obj`, `rect` (n x 4), and its cells in the written mask: flat offset of its
    row 0 `cell`, row stride `stride`, cell rectangle `cells` (n x 4, clipped as numpy slicing clips). Per
    object: `gm`, `tracked` (a tile, or a GM tensor the launch writes), `masked` (a tile or workspace),
    `ncells`. (A follower's instruction has its GM accesses only: the only ones checkcore reads of it.)"""

    start: np.ndarray
    nsrc: np.ndarray
    nacc: np.ndarray
    atomic: np.ndarray
    hist: np.ndarray
    obj: np.ndarray
    rect: np.ndarray
    cell: np.ndarray
    stride: np.ndarray
    cells: np.ndarray
    gm: np.ndarray
    tracked: np.ndarray
    masked: np.ndarray
    ncells: np.ndarray
    relaxed: np.ndarray
    mask_size: int
    n_hist: int


def threads(spans: list) -> tuple:
    """Per instruction of the launch: (its core, block*3 + role; its thread within the block; whether it is a
    sync_all), from the block encodings (worked out once per encoding and role pattern)."""
    seen: dict = {}
    cores, threads_, syncs = [], [], []
    for sp in spans:
        roles = tuple(core % 3 for core in sp.ids)
        got = seen.get((id(sp.code), roles))
        if got is None:
            a = sp.code.arrays
            role = np.array(roles, np.int32)[a["core_i"]]
            pipe = a["pipe_i"].astype(np.int64)
            thread = np.where(role == 0, _AIC_T[pipe], 5 + (role - 1) * 4 + _AIV_T[pipe]).astype(np.int8)
            assert (np.where(role == 0, _AIC_T[pipe], _AIV_T[pipe]) >= 0).all(), "a pipe its core does not have"
            got = seen[(id(sp.code), roles)] = (role, thread, a["kind"] == 3)
        cores.append(got[0] + np.int32(3 * (sp.ids[0] // 3)))
        threads_.append(got[1])
        syncs.append(got[2])
    if not spans:
        return np.zeros(0, np.int32), np.zeros(0, np.int8), np.zeros(0, np.bool_)
    return np.concatenate(cores), np.concatenate(threads_), np.concatenate(syncs)


def deps(spans: list, leads: np.ndarray, n: int) -> tuple:
    """The auto-sync dependencies of the leaders' instructions as (ptr, idx) over global indices (followers
    have none: they are not replayed)."""
    counts, idx = np.zeros(n, np.int64), []
    for b in np.flatnonzero(leads):
        sp = spans[b]
        counts[sp.first:sp.first + sp.code.n] = np.diff(sp.code.dep_ptr)
        idx.append(sp.code.dep_idx + sp.first)
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ptr, (np.concatenate(idx) if idx else np.zeros(0, np.int64))


class Lowering:
    """The access rows the pass visits, from the blocks' records (rows.py), in walking order: `add_leaders`
    (every access of the leaders' instructions), then `add_followers` (of the followers' visited instructions,
    their GM accesses only: the only ones checkcore.py reads of a follower); `finish` numbers objects and
    histories and lays out the written mask."""

    def __init__(self, launch, n: int):
        self.blocks, self.objects = launch.blocks, launch.tables.objects
        self.gm_obj = np.array([type(o) is GMTensor for o in self.objects], np.bool_)
        self.start = np.zeros(n, np.int64)
        self.nsrc, self.nacc = np.zeros(n, np.int32), np.zeros(n, np.int32)
        self.atomic = np.zeros(n, np.bool_)
        self.gm_only = np.zeros(len(self.blocks), np.bool_)   # per block: its rows here are its GM accesses only
        self.objs: list = [np.zeros(0, np.int64)]             # per access, in chunks (one per block)
        self.rects: list = [np.zeros((0, 4), np.int64)]
        self.batches: list = [np.zeros(0, np.int64)]
        self.owners: list = [np.zeros(0, np.int64)]           # its instruction
        self.dsts: list = [np.zeros(0, np.bool_)]             # whether it is a destination
        self.m = 0
        self.written: set = set()
        self._cached = (-1, None)

    def _append(self, blk, sel: Optional[np.ndarray], visited: Optional[np.ndarray]) -> None:
        """Block `blk`'s rows `sel` (row numbers, ascending) of instructions `visited` marks (None: all of both)."""
        own = blk.own_rows
        obj, rect, batch = blk.rows(sel)
        n, f = blk.n, blk.first
        nsrc, nacc = own.nsrc, own.nacc
        if sel is None:
            owner = np.repeat(np.arange(n, dtype=np.int64), own.nacc)
            is_dst = np.arange(len(obj), dtype=np.int64) - own.ptr[owner] >= own.nsrc[owner]
        else:
            owner = np.searchsorted(own.ptr, sel, side="right") - 1
            is_dst = sel - own.ptr[owner] >= own.nsrc[owner]
            nacc = np.bincount(owner, minlength=n).astype(np.int32)
            nsrc = np.bincount(owner[~is_dst], minlength=n).astype(np.int32)
        starts = self.m + np.cumsum(nacc, dtype=np.int64) - nacc
        sel_i = slice(f, f + n) if visited is None else f + np.flatnonzero(visited)
        local = slice(None) if visited is None else np.flatnonzero(visited)
        self.start[sel_i], self.nsrc[sel_i], self.nacc[sel_i] = starts[local], nsrc[local], nacc[local]
        self.atomic[sel_i] = (own.flags[local] & _ATOMIC) != 0
        self.objs.append(obj)
        self.rects.append(rect)
        self.batches.append(batch)
        self.owners.append(owner + f)
        self.dsts.append(is_dst)
        self.m += len(obj)

    def add_leaders(self, blocks: np.ndarray) -> None:
        """Every access of the instructions of `blocks` (block positions)."""
        for b in blocks.tolist():
            self._append(self.blocks[b], None, None)

    def add_followers(self, blocks: np.ndarray, visit: np.ndarray) -> None:
        """The GM accesses of the instructions `visit` marks (launch-wide) of `blocks`."""
        for b in blocks.tolist():
            blk = self.blocks[b]
            mine = visit[blk.first:blk.first + blk.n]
            if not mine.any():
                continue
            own = blk.own_rows
            gm_rows = np.flatnonzero(self.gm_obj[blk.gobj[own.a_obj]])
            owner = np.searchsorted(own.ptr, gm_rows, side="right") - 1
            self.gm_only[b] = True
            self._append(blk, gm_rows[mine[owner]], mine)

    def _table(self) -> tuple:
        """(rectangles, batches, owner, whether a destination: per access; object number of each access,
        the objects, whether each is a GM tensor)."""
        if self._cached[0] == self.m:
            return self._cached[1]
        ids, rect, batch, owner, is_dst = (np.concatenate(x) for x in (self.objs, self.rects, self.batches,
                                                                       self.owners, self.dsts))
        used, obj = np.unique(ids, return_inverse=True)
        objects = [self.objects[g] for g in used.tolist()]
        gm = self.gm_obj[used]
        self._cached = (self.m, (rect, batch, owner, is_dst, obj.reshape(-1), objects, gm))
        return self._cached[1]

    def leaders_walked(self) -> np.ndarray:
        """Once the leaders' instructions are added: note the GM tensors they write (`written`) and return,
        per instruction, 1 if it touches one of those, 2 if it reads a workspace (and touches none), else 0."""
        _, _, owner, is_dst, obj, objects, gm = self._table()
        wrote = np.zeros(len(objects), np.bool_)
        wrote[obj[is_dst & gm[obj]]] = True
        self.written = {id(o) for o, w in zip(objects, wrote) if w}
        ws = np.array([type(o) is GMTensor and o.workspace for o in objects], np.bool_)
        out = np.zeros(len(self.start), np.int8)
        out[owner[ws[obj] & ~is_dst]] = 2
        out[owner[wrote[obj]]] = 1
        return out

    def finish(self, init: Initialised) -> Accesses:
        rect, batch, _, _, obj, objects, gm = self._table()
        no, m = len(objects), len(obj)
        tracked = ~gm | np.array([id(o) in self.written for o in objects], np.bool_)
        # cell geometry: (batches, rows, cols, row grid, col grid) per masked object
        geo = np.zeros((no, 5), np.int64)
        masked = np.zeros(no, np.bool_)
        for k, o in enumerate(objects):
            g = init.geometry(o)
            if g is not None:
                geo[k], masked[k] = g, True
        ncells = geo[:, 0] * geo[:, 1] * geo[:, 2]
        relaxed = np.array([type(o) is ByteSpace or (type(o) is TileStore and not o.autosync) for o in objects],
                           np.bool_)
        base = np.zeros(no, np.int64)
        if no > 1:
            np.cumsum(ncells[:-1], out=base[1:])
        fn = jitmode.pick(_cells, len(obj), jitmode.INSTRUCTIONS)
        cells, cell, stride = fn(obj, rect, batch, geo, base, gm)
        # histories: (object, batch) pairs (a tile's batch is -1)
        key = obj * (int(batch.max()) + 2 if m else 1) + batch + 1
        _, hist = np.unique(key, return_inverse=True)
        hist = hist.reshape(-1).astype(np.int64)
        return Accesses(self.start, self.nsrc, self.nacc, self.atomic, hist, obj.astype(np.int64), rect, cell,
                        stride, cells, gm, tracked, masked, ncells, relaxed, int(ncells.sum()),
                        int(hist.max()) + 1 if m else 0)

    def access(self, instrs, i: int, k: int):
        """The Access of row k of instruction i's rows here (`instrs`: rows.Instrs): its k-th lowered access, or
        for a follower its k-th GM one."""
        b, _ = instrs.where(i)
        accs = [a for a, _ in instrs.lowered(i)]
        if self.gm_only[b]:
            accs = [a for a in accs if type(a.obj) is GMTensor]
        return accs[k]


@njit(cache=True)
def _cells(obj, rect, batch, geo, base, gm):
    """Per access: its cell rectangle in its object's mask, clipped as numpy slicing clips ([r0 // grid :
    ceil(r1 / grid)] within the mask), the flat offset of its batch's row 0, the row stride."""
    m = len(obj)
    cells = np.empty((m, 4), np.int64)
    cell = np.empty(m, np.int64)
    stride = np.empty(m, np.int64)
    for a in range(m):
        o = obj[a]
        nr, nc = geo[o, 1], geo[o, 2]
        gr, gc = max(geo[o, 3], 1), max(geo[o, 4], 1)
        cells[a, 0] = min(max(rect[a, 0] // gr, 0), nr)
        cells[a, 1] = min(max(-(-rect[a, 1] // gr), 0), nr)
        cells[a, 2] = min(max(rect[a, 2] // gc, 0), nc)
        cells[a, 3] = min(max(-(-rect[a, 3] // gc), 0), nc)
        cell[a] = base[o] + (batch[a] if gm[o] else 0) * nr * nc
        stride[a] = nc
    return cells, cell, stride
