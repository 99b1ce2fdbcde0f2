"""The L2 replay over numbered arrays (l2_replay.py, behind l2.l2_hits) gives the same hits as the plain Python
reference (l2.hits_reference) on random streams: reads and writes of tiles and of unions of tiles (covered by
written pieces, or not), rewrites, nd_num entries sharing an index, key-only regions, several programs and
sync_all phases, capacities that evict."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import pyto
import pyto.emulator.encode.encode as E
from pyto_kernels.bmm import bmm
from pyto_kernels.examples.matmul_pingpong import matmul_pingpong
from pyto.emulator.schedule.l2 import hits_reference, l2_hits
from pyto.ir import GMTensor
from pyto.emulator.schedule.l2_replay import intern_rows
from test_timing import store_then_read_stacked

TILE = st.sampled_from([(16, 16), (8, 16), (16, 2), (32, 8), (16, 1)])
# one access: is_read, shape (0-1 a tile, 2 a block of h x w tiles, 3 a rectangle on an 8-row grid, 4 key only),
# tile row and column, h, w, tensor, batch, sync_all phase step, regions under its index (an nd_num transfer)
ACCESS = st.tuples(st.booleans(), st.sampled_from([0, 0, 1, 2, 2, 3, 4]), st.integers(0, 63), st.integers(0, 159),
                   st.integers(1, 3), st.integers(1, 5), st.integers(0, 1), st.sampled_from([-1, 0]),
                   st.sampled_from([0] * 20 + [1, 2]), st.sampled_from([1] * 8 + [2]))


@st.composite
def streams(draw):
    """(streams, capacity): key = hash(region), as the encoder names regions (the reference needs a key per
    region: a written region's key must be resident while it is)."""
    th, tw = draw(TILE)
    rows, cols = draw(st.sampled_from([(64, 64), (32, 160), (48, 40)]))
    out, index = [], 0
    for prog in draw(st.lists(st.lists(ACCESS, min_size=20, max_size=80), min_size=1, max_size=3)):
        stream, phase = [], 0
        for read, shape, i, j, h, w, tensor, batch, step, nd in prog:
            phase += step
            for part in range(nd):
                if shape == 4:
                    stream.append((index, ("key only", i % 3), None, 64.0, read, phase))
                    continue
                r0, c0 = th * ((i + part) % (rows // th)), tw * (j % (cols // tw))
                if shape < 2:
                    rect = (r0, r0 + th, c0, c0 + tw)
                elif shape == 2:
                    rect = (r0, r0 + th * h, c0, c0 + tw * w)
                else:
                    r0 = 8 * (i % (rows // 8))
                    rect = (r0, r0 + 8 * h, 8 * (j % (cols // 8)), 8 * (j % (cols // 8)) + 4 * w)
                region = (tensor, batch, rect)
                nbytes = float((rect[1] - rect[0]) * (rect[3] - rect[2]) * 2)
                stream.append((index, hash(region), region, nbytes, read, phase))
            index += 1
        out.append(stream)
    total = sum(a[3] for s in out for a in s)
    capacity = draw(st.sampled_from([0.05, 0.2, 0.5, 1e9])) * total
    return out, capacity


@settings(max_examples=120, deadline=None, derandomize=True)
@given(streams())
def test_l2_hits_equal_the_reference(case):
    s, capacity = case
    assert l2_hits(s, capacity) == hits_reference(s, capacity)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3), st.integers(-(1 << 62), 1 << 62)),
                max_size=200))
def test_intern_rows_numbers_distinct_rows(rows):
    a = np.array(rows, np.int64).reshape(-1, 3)
    ids, first = intern_rows(a)
    assert len(first) == len(np.unique(a, axis=0)) and (a[first][ids] == a).all()
    assert (np.sort(first) == first).all()         # numbered in order of first appearance


def test_decreasing_phases_take_the_reference():
    """Phases that decrease within a stream (never from the encoder) are replayed by the reference itself."""
    region = (1, 0, (0, 16, 0, 16))
    s = [[(0, hash(region), region, 512.0, True, 1), (1, hash(region), region, 512.0, True, 0)]]
    assert l2_hits(s, 1 << 20) == hits_reference(s, 1 << 20) == {1: (512.0, 0)}


def test_many_written_regions_on_a_band():
    """More than WRITTEN_SCAN written regions on a read's bands: the scan keeps the most recent, as the
    reference's does (columns written one by one, rewritten, then read in runs)."""
    rng = np.random.default_rng(0)
    s = []
    for i in range(400):
        if rng.random() < 0.6:
            c = int(rng.integers(0, 48))
            rect = (16 * int(rng.integers(0, 2)), 16 * int(rng.integers(1, 3)), c, c + 1)
            read = False
        else:
            c = int(rng.integers(0, 40))
            rect = (0, 16 * int(rng.integers(1, 3)), c, c + int(rng.integers(1, 11)))
            read = True
        region = (3, -1, rect)
        s.append((i, hash(region), region, float((rect[1] - rect[0]) * (rect[3] - rect[2])), read, 0))
    for capacity in (1e9, 3000.0):
        assert l2_hits([s], capacity) == hits_reference([s], capacity)
    assert len(hits_reference([s], 1e9)) > 30
    # the region covering a read is the 65th most recent written on its band: out of the scan, a miss
    cover = (3, -1, (0, 16, 0, 64))
    s = [(0, hash(cover), cover, 1024.0, False, 0)]
    s += [(1 + j, hash((3, -1, (0, 16, 64 + j, 65 + j))), (3, -1, (0, 16, 64 + j, 65 + j)), 16.0, False, 0)
          for j in range(64)]
    part = (3, -1, (0, 8, 0, 64))
    s.append((100, hash(part), part, 512.0, True, 0))
    assert l2_hits([s], 1e9) == hits_reference([s], 1e9) == {}
    assert l2_hits([s[:1] + s[2:]], 1e9) == hits_reference([s[:1] + s[2:]], 1e9) == {100: (512.0, 0)}


def _l2_entries(index: int, ins, nbytes: float, read: bool, phase: int) -> "list | tuple":
    """The entries of a GM transfer in l2.py's streams: (index, key, (tensor uid, batch, rectangle), bytes,
    read, sync_all phase) per GM region; an nd_num transfer's equal matrices share its bytes: the streams
    l2.hits_reference takes, written out from the instructions as l2_streams.py gathers them as arrays."""
    side = ins.srcs if read else ins.dsts      # a transfer reads GM (its sources) or writes it, not both
    if len(side) == 1 and type(side[0].obj) is GMTensor:
        acc = side[0]
        r = (acc.obj.uid, acc.batch, acc.rect)
        return ((index, hash(r), r, nbytes, read, phase),)
    regions = [(acc.obj.uid, acc.batch, acc.rect) for acc in side if type(acc.obj) is GMTensor]
    share = nbytes / len(regions)
    return [(index, hash(r), r, share, read, phase) for r in regions]


def test_the_encoders_hits_equal_the_reference(monkeypatch):
    """The Encoder's accesses (l2_streams.py: regions read off the instructions as rows, keys their hashes)
    replay to the reference's hits on the streams _l2_entries lists: blocks alike, an nd_num load,
    sync_all phases (StreamK's reduction)."""
    add, finish = E.Encoder.add, E.Encoder.finish
    compared = []

    def add_and_list(self, programs, code):
        streams = self.__dict__.setdefault("ref_streams", [])
        for prog, io in zip(programs, code.gm_io):
            streams.append([a for j, i, nbytes, read, phase in io
                            for a in _l2_entries(self.n + i, prog.instrs[j], nbytes, read, phase)])
        add(self, programs, code)

    def compare_and_finish(self):
        idx, hit, fill = self.l2.hits(self.chip.l2_bytes, self.n)
        ref = hits_reference(self.ref_streams, self.chip.l2_bytes)
        assert {i: (b, f) for i, b, f in zip(idx.tolist(), hit.tolist(), fill.tolist())} == ref
        compared.append((len(ref), max((a[5] for s in self.ref_streams for a in s), default=0)))
        return finish(self)

    monkeypatch.setattr(E.Encoder, "add", add_and_list)
    monkeypatch.setattr(E.Encoder, "finish", compare_and_finish)
    f16 = lambda *shape: pyto.spec(shape, "fp16")       # noqa: E731
    pyto.run(matmul_pingpong, f16(512, 512), f16(512, 512), f16(512, 512), mode="timing", blocks=4, TM=128,
             TN=128, TK=64)
    x = np.arange(2 * 16 * 64, dtype=np.float32).reshape(2, 16, 64)
    pyto.run(store_then_read_stacked, x, np.zeros_like(x), np.zeros_like(x), BOTH=True)
    bmm(f16(1, 128, 4096), f16(1, 4096, 128), branch="stream_k")
    assert len(compared) == 3 and all(n for n, _ in compared) and compared[2][1] > 0, compared
