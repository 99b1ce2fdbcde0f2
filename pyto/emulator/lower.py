"""The checked pass's instructions lowered to integer arrays (for checkcore.py): one Python walk over the
instructions the pass visits reads their accesses; everything else comes from the block encodings
(threads, cores, sync_alls, auto-sync dependencies) with numpy.

An access is a row (object, batch, r0, r1, c0, c1); an instruction's sources come first, then its
destinations. Objects (tiles and GM tensors, by identity) and histories ((object, batch) pairs) get dense
numbers; a tile or workspace gets a region of one flat mask of written cells (memory.Initialised's
geometry)."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..ir import GMTensor, Pipe
from .memory import Initialised

# thread within a block (sanitizer.thread_of) by pipe: the AIC's and an AIV's (-1: not on that core)
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
    `ncells`."""

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
    mask_size: int
    n_hist: int


def threads(spans: list) -> tuple:
    """Per instruction of the launch: (its core, block*3 + role; its thread within the block; whether it is a
    sync_all), from the block encodings."""
    cores, pipes, kinds = [], [], []
    for sp in spans:
        a = sp.code.arrays
        ids = np.array([prog.id for prog in sp.programs], np.int64)
        cores.append(ids[a["core_i"]])
        pipes.append(a["pipe_i"].astype(np.int64))
        kinds.append(a["kind"])
    core = np.concatenate(cores) if cores else np.zeros(0, np.int64)
    pipe = np.concatenate(pipes) if pipes else np.zeros(0, np.int64)
    role = core % 3
    thread = np.where(role == 0, _AIC_T[pipe], 5 + (role - 1) * 4 + _AIV_T[pipe])
    sync = (np.concatenate(kinds) == 3) if kinds else np.zeros(0, bool)
    return core, thread, sync


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


def _walk(instrs: list, sel: list) -> tuple:
    """The one pass over Instr records: per visited instruction its source and destination counts and
    whether it adds atomically; per access (id of object, batch, r0, r1, c0, c1)."""
    flat, counts, atomic = [], [], []
    for i in sel:
        ins = instrs[i]
        s, d = ins.srcs, ins.dsts
        counts += (len(s), len(d))
        for a in s:
            flat += (id(a.obj), a.batch, *a.rect)
        if d:
            atomic.append(ins.attrs.get("atomic") == "add")
            for a in d:
                flat += (id(a.obj), a.batch, *a.rect)
        else:
            atomic.append(False)
    return flat, counts, atomic


class Lowering:
    """Accesses of the instructions walked so far (`add`), in walking order; `finish` numbers objects and
    histories and lays out the written mask."""

    def __init__(self, instrs: list):
        n = len(instrs)
        self.instrs = instrs
        self.start, self.nsrc, self.nacc = (np.zeros(n, np.int64) for _ in range(3))
        self.atomic = np.zeros(n, np.bool_)
        self.rows: list = []
        self.owners: list = []
        self.m = 0
        self.written: set = set()
        self._cached = (-1, None)       # (rows walked, _table of them)

    def add(self, sel: np.ndarray) -> None:
        """Walk instructions `sel` (global indices, each at most once)."""
        flat, counts, atomic = _walk(self.instrs, sel.tolist())
        rows = np.array(flat, np.int64).reshape(-1, 6)
        sd = np.array(counts, np.int64).reshape(-1, 2)
        tot = sd[:, 0] + sd[:, 1]
        self.start[sel] = self.m + np.cumsum(tot) - tot
        self.nsrc[sel], self.nacc[sel], self.atomic[sel] = sd[:, 0], tot, atomic
        self.rows.append(rows)
        self.owners.append(np.repeat(sel, tot))
        self.m += len(rows)

    def _table(self) -> tuple:
        """(all rows, owner of each, object number of each, the objects, whether each is a GM tensor)."""
        if self._cached[0] == self.m:
            return self._cached[1]
        rows = np.concatenate(self.rows) if self.rows else np.zeros((0, 6), np.int64)
        owner = np.concatenate(self.owners) if self.owners else np.zeros(0, np.int64)
        _, at, obj = np.unique(rows[:, 0], return_index=True, return_inverse=True)
        objects = []
        for p in at.tolist():                                  # the object behind each id, from one access
            ins = self.instrs[int(owner[p])]
            k = p - int(self.start[owner[p]])
            objects.append((ins.srcs[k] if k < len(ins.srcs) else ins.dsts[k - len(ins.srcs)]).obj)
        gm = np.array([type(o) is GMTensor for o in objects], np.bool_)
        self._cached = (self.m, (rows, owner, obj.reshape(-1), objects, gm))
        return self._cached[1]

    def leaders_walked(self) -> np.ndarray:
        """Once the leaders' instructions are walked: note the GM tensors they write (`written`) and return,
        per instruction, 1 if it touches one of those, 2 if it reads a workspace (and touches none), else 0."""
        rows, owner, obj, objects, gm = self._table()
        is_dst = np.arange(len(rows)) - self.start[owner] >= self.nsrc[owner]
        wrote = np.zeros(len(objects), np.bool_)
        wrote[obj[is_dst & gm[obj]]] = True
        self.written = {id(o) for o, w in zip(objects, wrote) if w}
        ws = np.array([type(o) is GMTensor and o.workspace for o in objects], np.bool_)
        out = np.zeros(len(self.instrs), np.int8)
        out[owner[ws[obj] & ~is_dst]] = 2
        out[owner[wrote[obj]]] = 1
        return out

    def finish(self, init: Initialised) -> Accesses:
        rows, owner, obj, objects, gm = self._table()
        no, m = len(objects), len(rows)
        tracked = ~gm | np.array([id(o) in self.written for o in objects], np.bool_)
        # cell geometry: (batches, rows, cols, row grid, col grid) per masked object
        geo = np.zeros((no, 5), np.int64)
        masked = np.zeros(no, np.bool_)
        for k, o in enumerate(objects):
            g = init.geometry(o)
            if g is not None:
                geo[k], masked[k] = g, True
        ncells = geo[:, 0] * geo[:, 1] * geo[:, 2]
        base = np.zeros(no, np.int64)
        if no > 1:
            np.cumsum(ncells[:-1], out=base[1:])
        g = geo[obj]
        batch, rect = rows[:, 1], np.ascontiguousarray(rows[:, 2:6])
        nr, nc = g[:, 1], g[:, 2]
        gr, gc = np.maximum(g[:, 3], 1), np.maximum(g[:, 4], 1)
        cells = np.stack([np.clip(rect[:, 0] // gr, 0, nr), np.clip(-(-rect[:, 1] // gr), 0, nr),
                          np.clip(rect[:, 2] // gc, 0, nc), np.clip(-(-rect[:, 3] // gc), 0, nc)], axis=1)
        cell = base[obj] + np.where(gm[obj], batch, 0) * nr * nc
        # histories: (object, batch) pairs (a tile's batch is -1)
        key = obj * (int(batch.max()) + 2 if m else 1) + batch + 1
        _, hist = np.unique(key, return_inverse=True)
        hist = hist.reshape(-1).astype(np.int64)
        return Accesses(self.start, self.nsrc, self.nacc, self.atomic, hist, obj.astype(np.int64), rect, cell,
                        np.ascontiguousarray(nc), cells, gm, tracked, masked, ncells, int(ncells.sum()),
                        int(hist.max()) + 1 if m else 0)
