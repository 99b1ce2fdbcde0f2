"""L2 cache model: which GM reads are served by L2 (capacity and LRU from the chip table).

GM accesses of all programs are replayed in an approximate global order: sync_all phase by phase
(every access before a pl.system.sync_all comes before every access after it), and within a phase the
programs advance in step (each program's k-th GM access of the phase before anyone's (k+1)-th), which
stands for cores running concurrently. A read hits when the same region (tensor, batch, rectangle)
is resident; writes allocate too (write-back), so data stored and read back hits, also when the read
is inside written regions (a reduction reading rows of the blocks Fixpipe wrote, across blocks too).
Other partial overlaps count as misses: a simplification that only understates hits.

`l2_hits` numbers the streams' keys, regions and instructions and replays them in l2_replay.py (numba);
`hits_reference` is the same replay in plain Python over the tuples, kept for differential tests.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from .l2_replay import BAND, WRITTEN_SCAN, replay_arrays


class _Written:
    """The written regions of one tensor and batch still in L2, indexed by 16-row band: a read looks only at
    regions on its own rows (a tensor updated in place reads rows nothing has written yet: no scan)."""

    __slots__ = ("rects", "bands", "seq")

    def __init__(self):
        self.rects: dict = {}   # rectangle -> (key, write sequence number)
        self.bands: dict = {}   # band -> set of rectangles on it
        self.seq = 0

    def add(self, rect: tuple, key: int) -> None:
        self.seq += 1
        self.rects[rect] = (key, self.seq)
        for band in range(rect[0] // BAND, (rect[1] - 1) // BAND + 1):
            self.bands.setdefault(band, set()).add(rect)

    def drop(self, rect: tuple) -> None:
        if self.rects.pop(rect, None) is not None:
            for band in range(rect[0] // BAND, (rect[1] - 1) // BAND + 1):
                self.bands[band].discard(rect)

    def inside(self, rect: tuple) -> list:
        """The keys of written regions that together contain `rect` (disjoint pieces of it), or []. One region
        containing it, else pieces taken greedily newest first, then oldest first: a cover that neither order
        finds is missed (an understatement, as other misses are)."""
        r0, r1, c0, c1 = rect
        near = set()
        for band in range(r0 // BAND, (r1 - 1) // BAND + 1):
            on = self.bands.get(band)
            if not on:
                return []           # a band of the read's rows holds nothing written: not covered
            near |= on
        cands = sorted(near, key=lambda w: -self.rects[w][1])[:WRITTEN_SCAN]
        for w0, w1, v0, v1 in cands:
            if w0 <= r0 and r1 <= w1 and v0 <= c0 and c1 <= v1:
                return [self.rects[(w0, w1, v0, v1)][0]]
        # newest first, then oldest first (a partial rewrite over a tile hides the older region the cover needs)
        return self._pieces(rect, cands) or self._pieces(rect, cands[::-1])

    def _pieces(self, rect: tuple, cands: list) -> list:
        """Greedy: each region whose piece of `rect` overlaps none taken, until the pieces cover it; [] if not."""
        r0, r1, c0, c1 = rect
        need = (r1 - r0) * (c1 - c0)
        pieces = []
        for w in cands:
            w0, w1, v0, v1 = w
            a0, a1, b0, b1 = max(r0, w0), min(r1, w1), max(c0, v0), min(c1, v1)
            if a0 < a1 and b0 < b1 and all(a1 <= p0 or p1 <= a0 or b1 <= q0 or q1 <= b0
                                           for p0, p1, q0, q1, _ in pieces):
                pieces.append((a0, a1, b0, b1, self.rects[w][0]))
                need -= (a1 - a0) * (b1 - b0)
                if need == 0:
                    return [key for *_, key in pieces]
        return []


def l2_hits(streams: list, capacity: int) -> dict:
    """As `hits_reference` (same streams, same dict), replayed over numbered arrays in l2_replay.py. Streams
    whose sync_all phases are negative or decrease (never from the encoder) take the reference."""
    flat = [a for s in streams for a in s]
    if not flat:
        return {}
    if any(s and (s[0][5] < 0 or any(a[5] > b[5] for a, b in zip(s, s[1:]))) for s in streams):
        return hits_reference(streams, capacity)
    keys: dict = {}
    regions: dict = {}
    books: dict = {}
    rects: list = []
    book: list = []
    rid = []
    for a in flat:
        region = a[2]
        if region is None:
            rid.append(-1)
            continue
        r = regions.get(region)
        if r is None:
            r = regions[region] = len(regions)
            book.append(books.setdefault(region[:2], len(books)))
            rects.append(region[2])
        rid.append(r)
    kid = [keys.setdefault(a[1], len(keys)) for a in flat]
    index, inv = np.unique(np.array([a[0] for a in flat], np.int64), return_inverse=True)   # numbered in order
    prog = np.repeat(np.arange(len(streams)), [len(s) for s in streams])
    nbytes = [a[3] for a in flat]
    got, served, filler = replay_arrays(
        prog, np.array([a[5] for a in flat], np.int64), inv.reshape(-1), np.array(kid, np.int64),
        np.array(rid, np.int64), np.array(nbytes, np.float64), np.array([bool(a[4]) for a in flat]),
        np.array(book, np.int64), np.array(rects, np.int64).reshape(-1, 4), len(keys), len(index), capacity)
    exact = all(type(b) is int for b in nbytes)     # int bytes sum to ints, as the reference's do
    return {int(index[g]): (int(b) if exact else b, int(index[f]))
            for g, b, f in zip(got.tolist(), served.tolist(), filler.tolist())}


def hits_reference(streams: list, capacity: int) -> dict:
    """Instruction index -> (bytes of its GM read served by L2, the index of the access that brought the data
    into L2: the one that allocated the region, or the latest of the written regions covering it; the hit
    completes no earlier than it, as a request merged into a fill in flight does).

    `streams`: per program, its GM accesses in program order as (index, key, region, bytes, is_read, sync_all
    phase): key an int naming the region, region its (tensor uid, batch, rectangle) or None. An access of
    several regions (an nd_num load) comes as one entry per region under one index: its hits add up (bytes
    summed, the latest filler).
    """
    lru: OrderedDict = OrderedDict()       # key -> (bytes, region, the index of the access that allocated it)
    written: dict = {}      # (tensor uid, batch) -> _Written: the written regions resident
    used = 0
    hits: dict = {}
    for index, key, region, nbytes, read, _ in _in_step(streams):
        if key in lru:
            lru.move_to_end(key)
            if read:
                _hit(hits, index, nbytes, lru[key][2])
            elif region is not None:       # (re)written: the latest write of the region, also after a read of it
                written.setdefault(region[:2], _Written()).add(region[2], key)
            continue
        if read and region is not None and written:
            book = written.get(region[:2])
            hosts = book.inside(region[2]) if book else ()
            if hosts:
                for host in hosts:
                    lru.move_to_end(host)
                _hit(hits, index, nbytes, max(lru[h][2] for h in hosts))
                continue
        lru[key] = (nbytes, region, index)
        used += nbytes
        if region is not None and not read:
            written.setdefault(region[:2], _Written()).add(region[2], key)
        while used > capacity and lru:
            _, (b, old, _) = lru.popitem(last=False)
            used -= b
            if old is not None and old[:2] in written:
                written[old[:2]].drop(old[2])
    return hits


def _hit(hits: dict, index: int, nbytes: float, filler: int) -> None:
    old = hits.get(index)
    hits[index] = (nbytes, filler) if old is None else (old[0] + nbytes, max(old[1], filler))


def _in_step(streams: list):
    """The accesses of all streams, phase by phase, the streams in step within a phase."""
    if all(not s or s[-1][5] == 0 for s in streams):      # no sync_all: one phase (phases only grow)
        for k in range(max((len(s) for s in streams), default=0)):
            for s in streams:
                if k < len(s):
                    yield s[k]
        return
    pos = [0] * len(streams)
    phase = 0
    while True:
        ends = []
        for s, p in zip(streams, pos):
            e = p
            while e < len(s) and s[e][5] == phase:
                e += 1
            ends.append(e)
        for k in range(max((e - p for p, e in zip(pos, ends)), default=0)):
            for s, p, e in zip(streams, pos, ends):
                if p + k < e:
                    yield s[p + k]
        pos = ends
        if all(p >= len(s) for s, p in zip(streams, pos)):
            return
        phase = min(s[p][5] for s, p in zip(streams, pos) if p < len(s))
