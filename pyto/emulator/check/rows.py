"""The checked pass's record of a launch, made block by block as soon as each block is encoded, so that the
block's Instr records can go (timing mode holds no Python object per instruction until the schedule is done).

A block is kept as integer rows (numpy): per access its object (a number in the launch's object table: tiles,
GM tensors, byte spaces), rectangle and batch, sources first, then destinations (as lower.py lowers them: with
the byte-level accesses overlap.py adds for shared tiles and GM views); per instruction its access counts,
whether it adds atomically or carries a phase, its op, kernel line and name (interned). A block that reuses an
earlier block's encoding (blockcache.py: equal signatures, so the same instructions on the same tiles and
rectangles, differing only in GM positions) keeps only its own tile objects and its GM rows, and of those only
a shift per GM tensor when every access of the tensor moved by the same amount (a BMM's blocks: one batch
each), else its GM rectangles. Messages are made from Instr and Access records rebuilt from the rows
(`Instrs`), naming the same objects, lines and rectangles the traced ones did.
"""
from __future__ import annotations

import struct
from itertools import chain, starmap
from operator import attrgetter, itemgetter
from typing import Optional

import numpy as np

from ...ir import Access, GMTensor, Instr, Op, Pipe, Role, TileStore
from ..data.gmviews import GMFootprint
from .overlap import ByteAccess, ByteAccesses, with_bytes

_RECT = struct.Struct("4q")          # a rectangle as 4 int64 (packing tuples beats numpy's conversion of them)
_PLAIN, _BYTES, _FOOT = 0, 1, 2      # an access row: as traced, a shared tile's bytes, a GM view's root footprint
_ATOMIC, _PHASE = 1, 2               # instruction flags
# what a block sharing another's encoding must agree on in each tile, for the other's tile rows to be its own
_STORE_FIELDS = ("buf", "shape", "padded", "dtype", "layout", "grid", "name", "key", "loc", "nbytes", "addr",
                 "autosync", "shared", "fractal")


def _small(a: np.ndarray) -> np.ndarray:
    """`a` as int32 when its values fit (rows are kept until the launch is checked)."""
    if a.size == 0 or (int(a.min()) >= -2**31 and int(a.max()) < 2**31):
        return a.astype(np.int32)
    return a


_SRCS, _DSTS, _RECT_OF, _BATCH_OF = attrgetter("srcs"), attrgetter("dsts"), attrgetter("rect"), attrgetter("batch")


def _by_slot(places: list) -> dict:
    """{(destination?, position): (instructions, their places in `places`)} of (instruction, destination?,
    position) places."""
    out: dict = {}
    for k, (i, d, s) in enumerate(places):
        got = out.setdefault((d, s), ([], []))
        got[0].append(i)
        got[1].append(k)
    return {key: (at, np.array(where, np.int64)) for key, (at, where) in out.items()}


def _distinct_rows(a: np.ndarray) -> tuple:
    """(the distinct rows of int matrix `a`, each row's number among them): np.unique(axis=0)'s, by 1-D uniques."""
    key = np.zeros(len(a), np.int64)
    for col in a.T:
        values, inv = np.unique(col, return_inverse=True)
        key = np.unique(key * len(values) + inv.reshape(-1), return_inverse=True)[1].reshape(-1)   # (< rows)
    _, first, which = np.unique(key, return_index=True, return_inverse=True)
    return a[first], which.reshape(-1)


class Tables:
    """The launch's objects (by identity: each a number, kept alive), kernel lines and instruction names."""

    def __init__(self):
        self.objects: list = []
        self._ids: dict = {}
        self.locs: list = []
        self._locs: dict = {}
        self.names: list = []
        self._names: dict = {}

    def number(self, objs: list) -> np.ndarray:
        ids = self._ids
        out = np.empty(len(objs), np.int32)
        for k, o in enumerate(objs):
            g = ids.get(id(o))
            if g is None:
                g = ids[id(o)] = len(self.objects)
                self.objects.append(o)
            out[k] = g
        return out


class BlockRows:
    """One block's record for the checked pass (module docstring). `first`: its first instruction's launch index;
    `code`: its encoding (blockcache.py); `ids`: its programs' core numbers; `model`: the block whose tile rows it
    shares (None: it has its own rows)."""

    def __init__(self, first: int, code, programs: list):
        self.first, self.code, self.n = first, code, code.n
        self.ids = tuple(p.id for p in programs)
        self.vector = any(p.role is not Role.AIC for p in programs)
        self.model: Optional[BlockRows] = None
        self.gobj: np.ndarray = np.zeros(0, np.int32)     # local object -> launch object number
        self.shift: Optional[np.ndarray] = None           # per local object, (batch, row, col) its GM rows moved
        self.g_move: Optional[np.ndarray] = None          # or per GM row, which of `g_moves` (batch, row, col)
        self.g_moves: Optional[np.ndarray] = None         # it moved by
        self.g_rect = self.g_batch = None                 # or the GM rows themselves

    # ---- making the record --------------------------------------------------------------------------------
    def own(self, programs: list, tables: Tables, overlap: bool) -> None:
        """Rows of the block's own (a Python walk over its instructions: once per distinct encoding)."""
        bytes_ = ByteAccesses() if overlap else None
        accs, counts, flags, ops, locs, names = [], [], [], [], [], []
        loc_ids, name_ids = tables._locs, tables._names
        for prog in programs:
            for ins in prog.instrs:
                s, d = ins.srcs, ins.dsts
                if bytes_ is not None:
                    s, d = with_bytes(s, bytes_), with_bytes(d, bytes_)
                counts += (len(s), len(d))
                accs += s
                accs += d
                a = ins.attrs
                flags.append((_ATOMIC if d and a.get("atomic") == "add" else 0)
                             | (_PHASE if a.get("phase") is not None else 0))
                ops.append(ins.op)
                loc = loc_ids.get(ins.loc)
                if loc is None:
                    loc = loc_ids[ins.loc] = len(tables.locs)
                    tables.locs.append(ins.loc)
                locs.append(loc)
                name = name_ids.get(ins.name)
                if name is None:
                    name = name_ids[ins.name] = len(tables.names)
                    tables.names.append(ins.name)
                names.append(name)
        m = len(accs)
        sd = np.array(counts, np.int64).reshape(-1, 2)
        self.nsrc, self.nacc = sd[:, 0].astype(np.int32), (sd[:, 0] + sd[:, 1]).astype(np.int32)
        ptr = np.zeros(self.n + 1, np.int64)
        np.cumsum(self.nacc, out=ptr[1:])
        self.ptr = _small(ptr)
        self.flags = np.array(flags, np.uint8)
        self.op = np.array(ops, np.uint8)
        self.loc, self.name = np.array(locs, np.int32), np.array(names, np.int32)
        # distinct accesses (a tile's Access is shared by the instructions naming it), then their objects
        _, at, which = np.unique(np.fromiter(map(id, accs), np.int64, m), return_index=True, return_inverse=True)
        which = which.reshape(-1)
        distinct = [accs[p] for p in at.tolist()]
        _, o_at, o_which = np.unique(np.fromiter((id(a.obj) for a in distinct), np.int64, len(distinct)),
                                     return_index=True, return_inverse=True)
        o_which = o_which.reshape(-1)
        objs = [distinct[p].obj for p in o_at.tolist()]
        self.a_obj = o_which.astype(np.int32)[which]
        packed = b"".join(starmap(_RECT.pack, [a.rect for a in distinct]))
        self.a_rect = _small(np.frombuffer(packed, np.int64).reshape(-1, 4)[which])
        self.a_batch = _small(np.array([a.batch for a in distinct], np.int64)[which])
        kind = np.array([_BYTES if type(a) is ByteAccess else _FOOT if type(a) is GMFootprint else _PLAIN
                         for a in distinct], np.int8)[which]
        self.a_kind = kind if (kind != _PLAIN).any() else None
        self.gobj = tables.number(objs)
        self.gm_local = np.array([type(o) is GMTensor for o in objs], np.bool_)
        # where each object is first named (the block that shares these rows finds its own objects there), and
        # each plain GM row's place (instruction, destination?, position among the instruction's sources or
        # destinations), where a sharing block reads its own GM accesses
        self.first_use = np.unique(self.a_obj, return_index=True)[1]
        gm_rows = np.flatnonzero(self.gm_local[self.a_obj] & (kind == _PLAIN))
        self.gm_rows = gm_rows
        self.shareable = self.a_kind is None and not any(type(o) is TileStore and o.shared for o in objs)
        self._slots: Optional[list] = None

    def _places(self, rows: np.ndarray) -> list:
        """(instruction, destination?, position) of access rows `rows` of this (own) record."""
        owner = np.searchsorted(self.ptr, rows, side="right") - 1
        k = rows - self.ptr[owner]
        dst = k >= self.nsrc[owner]
        pos = np.where(dst, k - self.nsrc[owner], k)
        return list(zip(owner.tolist(), dst.tolist(), pos.tolist()))

    def share(self, model: "BlockRows", programs: list, tables: Tables) -> bool:
        """Take `model`'s rows (its encoding is this block's): keep this block's own objects and GM rows. False
        (nothing kept) when a tile differs in what the check reads, or the model has byte-level rows."""
        if not model.shareable:
            return False
        instrs = list(chain.from_iterable(prog.instrs for prog in programs))
        if len(instrs) != model.n:
            return False
        if model._slots is None:
            model._slots = (model._places(model.first_use), _by_slot(model._places(model.gm_rows)))
        uses, gm_slots = model._slots
        objs = [((instrs[i].dsts if d else instrs[i].srcs)[s]).obj for i, d, s in uses]
        for o, g in zip(objs, model.gobj.tolist()):
            mine = tables.objects[g]
            if type(o) is not type(mine):
                return False
            if type(o) is GMTensor:
                if o is not mine:
                    return False
            elif (type(o) is not TileStore or o.shared or o.program % 3 != mine.program % 3
                  or any(getattr(o, f) != getattr(mine, f) for f in _STORE_FIELDS)):
                return False
        g = len(model.gm_rows)
        rect, batch = np.empty((g, 4), np.int64), np.empty(g, np.int64)
        for (d, s), (at, where) in gm_slots.items():      # C-level maps: one group per (destination?, position)
            accs = list(map(itemgetter(s), map(_DSTS if d else _SRCS, map(instrs.__getitem__, at))))
            rect[where] = np.frombuffer(b"".join(starmap(_RECT.pack, map(_RECT_OF, accs))), np.int64).reshape(-1, 4)
            batch[where] = np.fromiter(map(_BATCH_OF, accs), np.int64, len(accs))
        self.model = model
        self.gobj = tables.number(objs)
        rows = model.gm_rows
        d_rect = rect - model.a_rect[rows]
        d_batch = batch - model.a_batch[rows]
        obj = model.a_obj[rows]
        shift = np.zeros((len(objs), 3), np.int64)
        moved = np.stack([d_batch, d_rect[:, 0], d_rect[:, 2]], axis=1)
        shift[obj] = moved
        same_size = g == 0 or ((d_rect[:, 0] == d_rect[:, 1]).all() and (d_rect[:, 2] == d_rect[:, 3]).all())
        if same_size and (shift[obj] == moved).all():
            self.shift = shift
        elif same_size:     # a block's tiles repeat few moves: each row names one in a small table
            self.g_moves, which = _distinct_rows(moved)
            self.g_move = which.astype(np.uint8 if len(self.g_moves) <= 256 else
                                                   np.uint16 if len(self.g_moves) <= 65536 else np.int64)
        else:
            self.g_rect, self.g_batch = _small(rect), _small(batch)
        return True

    # ---- reading it back ------------------------------------------------------------------------------------
    @property
    def own_rows(self) -> "BlockRows":
        return self.model or self

    def rows(self, sel: Optional[np.ndarray] = None) -> tuple:
        """(object number, rectangle (m x 4), batch) of the block's access rows `sel` (row numbers, ascending;
        None: all), int64, in its order."""
        own = self.own_rows
        pick = slice(None) if sel is None else sel
        obj = self.gobj[own.a_obj[pick]].astype(np.int64)
        rect = own.a_rect[pick].astype(np.int64)
        batch = own.a_batch[pick].astype(np.int64)
        if self.model is not None:
            gm = own.gm_rows                  # this block's GM rows, `at` among those picked
            if sel is None:
                at, hit = gm, slice(None)
            else:
                pos = np.minimum(np.searchsorted(sel, gm), max(len(sel) - 1, 0))
                hit = (sel[pos] == gm) if len(sel) else np.zeros(len(gm), np.bool_)
                at = pos[hit]
            if self.shift is not None:
                s = self.shift[own.a_obj[gm[hit]]]
            elif self.g_move is not None:
                s = self.g_moves[self.g_move[hit]]
            else:
                rect[at], batch[at] = self.g_rect[hit], self.g_batch[hit]
                return obj, rect, batch
            rect[at] += s[:, [1, 1, 2, 2]]
            batch[at] += s[:, 0]
        return obj, rect, batch

    def nbytes(self) -> int:
        """Host bytes the record holds (its arrays)."""
        return sum(a.nbytes for a in vars(self).values() if isinstance(a, np.ndarray))


class Instrs:
    """The launch's instructions rebuilt from the rows, for messages: `instrs[i]` is an Instr with the traced
    one's op, pipe, core, index, kernel line, name and accesses (attrs: only 'atomic' and 'phase', the flags the
    messages read); `accesses(i)` its accesses as lower.py lowers them (with byte-level ones)."""

    def __init__(self, blocks: list, tables: Tables):
        self.blocks, self.tables = blocks, tables
        self._rows: dict = {}        # block position -> its rows (expanded once)
        self.firsts = np.array([b.first for b in blocks], np.int64)
        self.n = int(blocks[-1].first + blocks[-1].n) if blocks else 0

    def __len__(self) -> int:
        return self.n

    def where(self, i: int) -> tuple:
        """(block number, position in the block) of instruction i."""
        b = int(np.searchsorted(self.firsts, i, side="right")) - 1
        return b, i - self.blocks[b].first

    def lowered(self, i: int) -> list:
        """Instruction i's access rows as Access records (sources, then destinations, byte-level ones after the
        access they follow), with their kinds."""
        b, j = self.where(i)
        blk = self.blocks[b]
        own = blk.own_rows
        lo, hi = int(own.ptr[j]), int(own.ptr[j + 1])
        got = self._rows.get(b)
        if got is None:
            got = self._rows[b] = blk.rows()
        obj, rect, batch = got
        objects = self.tables.objects
        out, parent = [], None
        for r in range(lo, hi):
            o = objects[int(obj[r])]
            rc, bt = tuple(int(x) for x in rect[r]), int(batch[r])
            kind = _PLAIN if own.a_kind is None else int(own.a_kind[r])
            if kind == _BYTES:
                acc = ByteAccess(o, rc[2], rc[3], parent)
            elif kind == _FOOT:
                acc = GMFootprint(o, rc, bt, parent)
            else:
                acc = parent = Access(o, rc, bt)
            out.append((acc, kind))
        return out

    def accesses(self, i: int) -> tuple:
        """(sources, destinations) of instruction i as lowered (lower.Lowering.accesses)."""
        b, j = self.where(i)
        blk = self.blocks[b]
        rows = [a for a, _ in self.lowered(i)]
        ns = int(blk.own_rows.nsrc[j])
        return tuple(rows[:ns]), tuple(rows[ns:])

    def __getitem__(self, i: int) -> Instr:
        b, j = self.where(i)
        blk = self.blocks[b]
        own = blk.own_rows
        rows = self.lowered(i)
        ns = int(own.nsrc[j])
        srcs = tuple(a for a, k in rows[:ns] if k == _PLAIN)
        dsts = tuple(a for a, k in rows[ns:] if k == _PLAIN)
        f = int(own.flags[j])
        attrs = {}
        if f & _ATOMIC:
            attrs["atomic"] = "add"
        if f & _PHASE:
            attrs["phase"] = True
        a = blk.code.arrays
        return Instr(Op(int(own.op[j])), Pipe(int(a["pipe_i"][j])), srcs, dsts, attrs,
                     self.tables.locs[int(own.loc[j])], blk.ids[int(a["core_i"][j])], i,
                     name=self.tables.names[int(own.name[j])])


class LaunchRows:
    """The record of every block of a launch, in order (`add` after each block is encoded)."""

    def __init__(self, overlap_of):
        self.blocks: list = []
        self.tables = Tables()
        self._overlap_of = overlap_of       # () -> whether the launch so far has shared tiles or GM views
        self._models: dict = {}             # id(encoding) -> the first block that has its own rows of it

    def add(self, first: int, programs: list, code) -> BlockRows:
        rec = BlockRows(first, code, programs)
        model = self._models.get(id(code))
        if model is None or not rec.share(model, programs, self.tables):
            rec.own(programs, self.tables, self._overlap_of())
            self._models.setdefault(id(code), rec)
        self.blocks.append(rec)
        return rec

    def nbytes(self) -> int:
        return sum(b.nbytes() for b in self.blocks)
