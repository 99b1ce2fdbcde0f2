"""A launch's GM accesses for the L2 replay, gathered block by block as numbered arrays (encode.py's Encoder
adds each block, then asks for the hits): what l2.py's streams of tuples say, without a tuple per access.

Each access's region is a row (tensor uid, batch, rectangle) of int64, read from the block's own instructions
right after they were traced (while they are in the CPU's cache); what a block's accesses have in common with
every block encoded alike (positions, bytes, directions, phases) is laid out once per BlockCode's gm_io. The
finish numbers the distinct rows (regions); a region's key, the LRU's name for it, is the hash of its tuple,
numbered in turn, as l2.py's streams name it for `l2.hits_reference`.
"""
from __future__ import annotations

import struct
from itertools import chain, starmap
from operator import attrgetter

import numpy as np

from ...ir import GMTensor
from .. import jitmode
from ..schedule.l2_replay import intern_rows, replay_arrays

_OBJ, _BATCH, _RECT = attrgetter("obj"), attrgetter("batch"), attrgetter("rect")
_PACK = struct.Struct("4q").pack      # a rectangle as 4 int64 (packing beats numpy's conversion of tuples)
_IO = struct.Struct("qqdqq").pack     # a gm_io entry: position, local index, bytes, is_read, sync_all phase
_IO_ROW = np.dtype([("j", "<i8"), ("i", "<i8"), ("bytes", "<f8"), ("read", "<i8"), ("phase", "<i8")])


class L2Accesses:
    """The GM accesses of the blocks added so far, stream (program) by stream in program order."""

    def __init__(self):
        self.layouts: dict = {}     # id(gm_io) -> (gm_io, its columns)
        self.parts: list = []       # per block: (columns, instruction base, program base, region rows)

    def _layout(self, gm_io: list) -> tuple:
        """A BlockCode's gm_io as columns in stream order: the local index, bytes, is_read, sync_all phase and
        program position of each transfer."""
        got = self.layouts.get(id(gm_io))
        if got is None:
            t = np.frombuffer(b"".join(starmap(_IO, chain.from_iterable(gm_io))), _IO_ROW)
            p = np.repeat(np.arange(len(gm_io)), [len(io) for io in gm_io])
            got = self.layouts[id(gm_io)] = (gm_io, (t["i"], t["bytes"], t["read"] != 0, t["phase"], p))
        return got[1]

    def add(self, programs: list, gm_io: list, base: int, prog0: int) -> None:
        """A block's accesses: its programs (numbered from prog0, instructions from base) and their gm_io."""
        cols = self._layout(gm_io)
        sides: list = []
        for prog, io in zip(programs, gm_io):
            instrs = prog.instrs
            sides += [instrs[j].srcs if read else instrs[j].dsts for j, _, _, read, _ in io]   # GM read or written
        try:
            accs = [acc for (acc,) in sides]
        except ValueError:               # a transfer of several regions (an nd_num one)
            accs = None
        m = len(sides)
        uids = [o.uid for o in map(_OBJ, accs) if type(o) is GMTensor] if accs is not None else None
        if uids is None or len(uids) < m:
            self.parts.append(self._regions(sides, cols, base, prog0))
            return
        rows = np.empty((m, 6), np.int64)
        rows[:, 0] = uids
        rows[:, 1] = np.fromiter(map(_BATCH, accs), np.int64, m)
        rows[:, 2:] = np.frombuffer(b"".join(starmap(_PACK, map(_RECT, accs))), np.int64).reshape(m, 4)
        self.parts.append((cols, base, prog0, rows))

    @staticmethod
    def _regions(sides: list, cols: tuple, base: int, prog0: int) -> tuple:
        """A block part with transfers of other than one GM region: one entry per region, sharing the bytes."""
        counts, shares, rows = [], [], []
        for side, nbytes in zip(sides, cols[1].tolist()):
            regs = [(acc.obj.uid, acc.batch, *acc.rect) for acc in side if type(acc.obj) is GMTensor]
            counts.append(len(regs))
            if len(side) == 1 and regs:
                shares.append(nbytes)
            else:
                share = nbytes / len(regs)       # (ZeroDivisionError for a transfer with no GM region, as the streams' reference does)
                shares += [share] * len(regs)
            rows += regs
        rep = np.array(counts, np.int64)
        i, _, read, phase, p = (np.repeat(x, rep) for x in cols)
        return (i, np.array(shares, np.float64), read, phase, p), base, prog0, np.array(rows, np.int64).reshape(-1, 6)

    def hits(self, capacity: int, n_index: int) -> tuple:
        """(instruction indices with L2 hits, bytes served by L2, filler indices) as l2.hits_reference finds
        on the same accesses (as l2.py's streams list them); indices below n_index."""
        if not self.parts:
            return np.zeros(0, np.int64), np.zeros(0, np.float64), np.zeros(0, np.int64)
        cat: dict = {k: [] for k in ("index", "nbytes", "read", "phase", "prog", "rows")}
        for (i, nbytes, read, phase, p), base, prog0, rows in self.parts:
            cat["index"].append(i + base)
            cat["nbytes"].append(nbytes)
            cat["read"].append(read)
            cat["phase"].append(phase)
            cat["prog"].append(p + prog0)
            cat["rows"].append(rows)
        a = {k: np.concatenate(v) for k, v in cat.items()}
        intern = jitmode.pick(intern_rows, len(a["rows"]), jitmode.ACCESSES)
        rid, first = intern(a["rows"])
        regions = a["rows"][first]
        book, _ = intern(np.ascontiguousarray(regions[:, :2]))
        u, b, r0, r1, c0, c1 = regions.T.tolist()
        hashes = np.fromiter(map(hash, zip(u, b, zip(r0, r1, c0, c1))), np.int64, len(regions))
        keys, kid_of = np.unique(hashes, return_inverse=True)    # the key: the region tuple's hash
        return replay_arrays(a["prog"], a["phase"], a["index"], kid_of.reshape(-1)[rid], rid, a["nbytes"],
                             a["read"], book, np.ascontiguousarray(regions[:, 2:]), len(keys), n_index, capacity)
