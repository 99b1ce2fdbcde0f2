"""Tiles that overlap in a buffer (docs/design.md §4.5, "Addresses"), and GM views of one tensor: the checked pass
follows their bytes (their elements).

pyto keeps a tile's data as its logical matrix (one array per store), which is exact as long as no read sees bytes
another store wrote. Stores whose byte ranges overlap another's are marked `shared` when placed
(language/address.py); for them:

* every access also touches the bytes it covers in the buffer, a `ByteSpace` (one per buffer of one core): the
  race checker sees those accesses like any other, so unordered overlapping accesses of two tiles on different
  pipes are a RaceError on the byte range (races within one store are caught on the store itself);
* `clobbered` walks them in start order and keeps, per byte, the store that last wrote it: a read of a store some
  of whose bytes were last written through another store is a ClobberedReadError naming both tiles, their ranges
  and lines (started in order is happens-before order here: two accesses it could misorder are a race, found
  first).

GM views (pl.make_tensor, pl.set_stride) alias their root tensor the same way: with_bytes follows each access
through a view with the root rectangles it covers (gmviews.footprint), so races and uninitialised reads are found
on the root's elements.

A view's bytes follow its store's layout (docs/fractal_formats.md §3): ND rows (padded to 32 B), NZ columns of fractals (each a
contiguous run of padded-rows x 32 B), ZZ rows of fractals, ZN (L0B) rows of K0 x 16 fractals; L0C's NZ has
16 x 16 fractals; MX scales (E8M0) ZZ rows of 16 x 2 fractals, NN columns of 2 x 16 ones.
"""
from __future__ import annotations

from bisect import bisect_right
from typing import Optional

from ...errors import ClobberedReadError
from ...ir import Access, Buf, GMTensor, Instr, TileStore, core_name
from ..data.gmviews import footprint


class ByteSpace:
    """The bytes of one buffer of one core, as the object of the byte-level accesses of shared stores."""

    __slots__ = ("core", "buf")
    workspace = False          # (memory.Initialised: not a GM tensor, no initialisation mask)
    autosync = False

    def __init__(self, core: int, buf: Buf):
        self.core, self.buf = core, buf

    def __repr__(self) -> str:
        return f"{self.buf.name} of {core_name(self.core)}"


class ByteAccess(Access):
    """The bytes [lo, hi) of a ByteSpace one tile access covers (rect (0, 1, lo, hi)); `of` is that access."""

    __slots__ = ("of",)

    def __init__(self, space: ByteSpace, lo: int, hi: int, of: Access):
        super().__init__(space, (0, 1, lo, hi))
        self.of = of


def _fractal(store: TileStore) -> tuple:
    """(rows, cols) of one fractal of the store's layout."""
    c0 = 32 // store.dtype.itemsize
    if store.buf is Buf.L0C:
        return 16, 16
    if store.dtype.name == "fp8e8m0":       # MX scales: Zz 16 x 2, Nn 2 x 16 (seeds/004 §5.1)
        return (16, 2) if store.layout == "ZZ" else (2, 16)
    if store.dtype.name == "uint8" and store.buf in (Buf.L1, Buf.L0B_SP):    # a 4:2 sparse index (seeds/004 §5.2):
        return (16, 8) if store.layout == "NZ" else (8, 16)                  # 128 B fractals, tile.INDEX_FRACTAL
    if store.layout == "ZN":
        return c0, 16
    return 16, c0


def byte_intervals(store: TileStore, rect: tuple) -> list:
    """The byte ranges [lo, hi) in the store's buffer that the view `rect` (store coordinates) covers, merged."""
    r0, r1, c0, c1 = rect
    rows, cols = store.padded
    isz, base = store.dtype.itemsize, store.addr
    out: list = []
    if store.layout == "ND":
        if c0 == 0 and c1 == cols:
            out.append((r0 * cols * isz, r1 * cols * isz))
        else:
            out += [((r * cols + c0) * isz, (r * cols + c1) * isz) for r in range(r0, r1)]
    else:
        fr, fc = _fractal(store)
        fbytes = fr * fc * isz
        if store.layout in ("NZ", "NN"):  # column blocks of fc, each padded rows x fc contiguous
            for j in range(c0 // fc, -(-c1 // fc)):
                out.append((j * rows * fc * isz + r0 * fc * isz, j * rows * fc * isz + r1 * fc * isz))
        else:                             # ZZ / ZN: row blocks of fr, each fr x padded cols contiguous
            for i in range(r0 // fr, -(-r1 // fr)):
                row = i * fr * cols * isz
                out.append((row + (c0 // fc) * fbytes, row + -(-c1 // fc) * fbytes))
    merged: list = []
    for lo, hi in sorted(out):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return [(base + int(lo), base + int(hi)) for lo, hi in merged]    # (FP4: whole bytes, a Fraction itemsize)


class ByteAccesses:
    """The byte-level accesses of the shared stores' accesses, made once per distinct access; and the root
    rectangles of accesses through GM views (gmviews.footprint), once per view and rectangle."""

    def __init__(self):
        self.spaces: dict = {}
        self.made: dict = {}      # id(access) -> (its ByteAccesses, the access: kept alive so ids stay unique)
        self.views: dict = {}     # (id(view), batch, rect) -> its root footprint (the view is kept alive by it)

    def gm(self, acc: Access) -> list:
        key = (id(acc.obj), acc.batch, acc.rect)
        got = self.views.get(key)
        if got is None:
            got = self.views[key] = footprint(acc)
        return got

    def of(self, acc: Access) -> list:
        got = self.made.get(id(acc))
        if got is None:
            store = acc.obj
            key = (store.program, store.buf)
            space = self.spaces.get(key)
            if space is None:
                space = self.spaces[key] = ByteSpace(*key)
            got = self.made[id(acc)] = ([ByteAccess(space, lo, hi, acc) for lo, hi in byte_intervals(store, acc.rect)],
                                        acc)
        return got[0]


def with_bytes(accs, bytes_: ByteAccesses) -> list:
    """`accs` (an instruction's sources, or its destinations) with each shared store's byte accesses after it, and
    after an access through a GM view the root rectangles it covers."""
    out = []
    for a in accs:
        out.append(a)
        obj = a.obj
        if type(obj) is TileStore:
            if obj.shared:
                out += bytes_.of(a)
        elif type(obj) is GMTensor and obj.view is not None:
            out += bytes_.gm(a)
    return out


class _Owners:
    """Per byte of one buffer, the store that last wrote it (and the instruction), as sorted disjoint runs."""

    def __init__(self):
        self.lo: list = []
        self.runs: list = []      # (lo, hi, store, instr), sorted by lo

    def query(self, lo: int, hi: int) -> list:
        k = max(0, bisect_right(self.lo, lo) - 1)
        out = []
        while k < len(self.runs) and self.runs[k][0] < hi:
            r = self.runs[k]
            if r[1] > lo:
                out.append(r)
            k += 1
        return out

    def assign(self, lo: int, hi: int, store, ins) -> None:
        keep = []
        for r in self.runs:
            if r[1] <= lo or r[0] >= hi:
                keep.append(r)
                continue
            if r[0] < lo:
                keep.append((r[0], lo, r[2], r[3]))
            if r[1] > hi:
                keep.append((hi, r[1], r[2], r[3]))
        keep.append((lo, hi, store, ins))
        keep.sort(key=lambda r: r[0])
        self.runs, self.lo = keep, [r[0] for r in keep]


def clobbered(instrs: list, order) -> Optional[ClobberedReadError]:
    """The first read, in start order, of a shared store's bytes last written through another store, or None."""
    owners: dict = {}
    for i in order:
        ins = instrs[i]
        shared = [a for a in ins.srcs if type(a.obj) is TileStore and a.obj.shared]
        for acc in shared:
            owner = owners.get((acc.obj.program, acc.obj.buf))
            if owner is None:
                continue
            for lo, hi in byte_intervals(acc.obj, acc.rect):
                for r in owner.query(lo, hi):
                    if r[2] is not acc.obj:
                        return _error(ins, acc, r, max(lo, r[0]), min(hi, r[1]))
        for acc in ins.dsts:
            if type(acc.obj) is TileStore and acc.obj.shared:
                owner = owners.setdefault((acc.obj.program, acc.obj.buf), _Owners())
                for lo, hi in byte_intervals(acc.obj, acc.rect):
                    owner.assign(lo, hi, acc.obj, ins)
    return None


def _error(ins: Instr, acc: Access, run: tuple, lo: int, hi: int) -> ClobberedReadError:
    other, writer = run[2], run[3]
    store = acc.obj
    return ClobberedReadError(
        f"{ins.loc}: {ins.name} reads {store!r} ({store.where()}), but its bytes [{lo:#x}, {hi:#x}) were last written "
        f"through {other!r} ({other.where()}) by {writer.name} at {writer.loc}: the two tiles overlap in "
        f"{store.buf.name} and are not views of one storage (same address, shape and dtype, or a transposed layout "
        f"of them), so the read would see the other tile's bytes; place them apart, or rewrite the tile before "
        f"reading it")
