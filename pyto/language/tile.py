"""Tiles the kernel author allocates: `pl.alloc`, rings of tiles, and views on the fractal grid."""
from __future__ import annotations

import operator
import re
from typing import Optional, Sequence

import numpy as np

from ..chip import FORMATS
from ..dtypes import DType, as_dtype
from ..errors import AlignmentError, KernelError, OutOfBoundsError, ShapeError
from ..ir import Access, Buf, TileStore
from .trace import caller_loc, current

_NAME = re.compile(r"([A-Za-z_][A-Za-z_0-9]*)\s*=\s*pl\.alloc\b")
_DEFAULT_LAYOUT = {Buf.L1: "NZ", Buf.L0B: "ZN", Buf.L0C: "NZ", Buf.UB: "ND", Buf.BT: "ND", Buf.FB: "ND"}


def _ceil(x: int, a: int) -> int:
    return -(-x // a) * a


def grid_of(buf: Buf, dtype: DType) -> tuple:
    """The fractal grid of a tile: (row step, col step) its views must sit on (seeds/004)."""
    c0 = 32 // dtype.itemsize
    if buf is Buf.L0C:
        return (16, 16)
    if buf is Buf.L0B:
        return (c0, 16)          # Zn: fractal K0 x N0
    if buf in (Buf.L1, Buf.L0A):
        return (16, c0)          # Nz / Zz: fractal 16 x K0
    return (1, c0)               # UB / BT / FB: ND rows, 32B-aligned columns


def padded_of(buf: Buf, shape: tuple, dtype: DType) -> tuple:
    """Stored shape: seeds/002's CeilAlign(16) (32 for int8) on fractal buffers; ND rows of 32B on UB/BT/FB."""
    rows, cols = shape
    if buf in (Buf.UB, Buf.BT, Buf.FB):
        return (rows, _ceil(cols, 32 // dtype.itemsize))
    a = 32 if dtype.itemsize == 1 else 16
    return (_ceil(rows, a), _ceil(cols, a))


class Tile:
    """A rectangle of one allocation. `tile[r0:r1, c0:c1]` gives a view on the fractal grid."""

    __slots__ = ("store", "rect", "access")

    def __init__(self, store: TileStore, rect: tuple):
        self.store, self.rect = store, rect
        self.access = Access(store, rect)    # what an instruction on this tile records (one per tile, shared)

    @property
    def shape(self) -> tuple:
        """(rows, cols) of this tile or view."""
        r0, r1, c0, c1 = self.rect
        return (r1 - r0, c1 - c0)

    @property
    def dtype(self) -> DType:
        """The element type."""
        return self.store.dtype

    @property
    def buffer(self) -> Buf:
        """The on-chip buffer it lives in (pl.L1, pl.L0A, ...)."""
        return self.store.buf

    def current(self) -> "Tile":
        """A single tile is a ring of one: current(), next() and previous() are the tile itself."""
        return self

    next = previous = current

    def __getitem__(self, idx) -> "Tile":
        r0, r1, c0, c1 = self.rect
        try:   # the common case, checked in one go: two step-less slices of ints on the grid
            sr, sc = idx
            a0 = 0 if sr.start is None else sr.start
            b0 = r1 - r0 if sr.stop is None else sr.stop
            a1 = 0 if sc.start is None else sc.start
            b1 = c1 - c0 if sc.stop is None else sc.stop
            g0, g1 = self.store.grid
            e0, e1 = self.store.shape
            n = (r0 + a0, r0 + b0, c0 + a1, c0 + b1)
            if (sr.step is None and sc.step is None and type(a0) is int and type(b0) is int
                    and type(a1) is int and type(b1) is int and 0 <= a0 < b0 <= r1 - r0 and 0 <= a1 < b1 <= c1 - c0
                    and not n[0] % g0 and not n[2] % g1 and (not n[1] % g0 or n[1] == e0)
                    and (not n[3] % g1 or n[3] == e1)):
                return Tile(self.store, n)
        except (TypeError, ValueError, AttributeError):
            pass
        return self._slow_view(idx)

    def _slow_view(self, idx) -> "Tile":
        """Slicing with every check spelled out, raising the error that names what is wrong."""
        if not (isinstance(idx, tuple) and len(idx) == 2 and all(isinstance(s, slice) for s in idx)):
            raise KernelError(f"{caller_loc()}: tiles are sliced as tile[r0:r1, c0:c1], got {idx!r}")
        r0, r1, c0, c1 = self.rect
        new = []
        for s, lo, hi in ((idx[0], r0, r1), (idx[1], c0, c1)):
            if s.step not in (None, 1):
                raise KernelError(f"{caller_loc()}: tile slices take no step, got {s.step}")
            a = 0 if s.start is None else as_int(s.start)
            b = hi - lo if s.stop is None else as_int(s.stop)
            if a is None or b is None:
                raise KernelError(f"{caller_loc()}: tile slice bounds must be integers, got {s.start!r}:{s.stop!r}")
            if a < 0 or b > hi - lo or a >= b:
                raise OutOfBoundsError(f"{caller_loc()}: view [{a}:{b}] outside {self.store!r} of extent "
                                       f"{hi - lo} on that axis")
            new.append((lo + a, lo + b))
        (nr0, nr1), (nc0, nc1) = new
        g = self.store.grid
        full = self.store.shape
        for name, lo, hi, step, edge in (("row", nr0, nr1, g[0], full[0]), ("column", nc0, nc1, g[1], full[1])):
            if lo % step or (hi % step and hi != edge):
                bad = lo if lo % step else hi
                raise AlignmentError(f"{caller_loc()}: view of {self.store!r}: {name} offset {bad} is off the "
                                     f"fractal grid (multiples of {step} for {self.store.buf.name} "
                                     f"{self.store.layout} {self.dtype})")
        return Tile(self.store, (nr0, nr1, nc0, nc1))

    def __repr__(self) -> str:
        r0, r1, c0, c1 = self.rect
        whole = (r0, c0) == (0, 0) and (r1, c1) == tuple(self.store.shape)
        return repr(self.store) + ("" if whole else f"[{r0}:{r1}, {c0}:{c1}]")


class Ring:
    """`buffers` tiles used in turn (PyPTO-Pro tile groups): current(), next(), previous()."""

    def __init__(self, tiles: list):
        self.tiles, self.i = tiles, 0

    def current(self) -> Tile:
        """The slot in use (the one the last next() returned)."""
        return self.tiles[self.i]

    def next(self) -> Tile:
        """Advance to the next slot, then return it."""
        self.i = (self.i + 1) % len(self.tiles)
        return self.tiles[self.i]

    def previous(self) -> Tile:
        """The slot used before the current one (ping-pong: the one being drained)."""
        return self.tiles[(self.i - 1) % len(self.tiles)]

    def __len__(self) -> int:
        return len(self.tiles)

    def __getitem__(self, i: int) -> Tile:
        if not isinstance(i, int) or isinstance(i, bool) or not -len(self.tiles) <= i < len(self.tiles):
            raise KernelError(f"{caller_loc()}: a ring of {len(self.tiles)} tiles is indexed by a slot number "
                              f"0..{len(self.tiles) - 1}, got {i!r}; take a tile (ring.current(), ring.next(), "
                              f"ring[i]) before viewing part of it")
        return self.tiles[i]


def as_int(v) -> Optional[int]:
    """`v` as a Python int if it is an integer (int or numpy integer, not bool): offsets, slice bounds and
    loop bounds are often computed with numpy. None otherwise."""
    if type(v) is int:
        return v
    if isinstance(v, (bool, np.bool_)) or not hasattr(v, "__index__"):
        return None
    try:
        return operator.index(v)
    except TypeError:
        return None


def dtype_at(dtype, loc) -> DType:
    """as_dtype, with the kernel line in its error."""
    try:
        return as_dtype(dtype)
    except ShapeError as e:
        raise ShapeError(f"{loc}: {e}") from None


def _name_from_source(tr, loc) -> Optional[str]:
    """The variable a `name = pl.alloc(...)` on the kernel line assigns. With several on one line
    (`a = pl.alloc(...); b = pl.alloc(...)`) the calls run left to right each time the line runs, so
    the n-th call made from the line takes the (n mod count)-th name."""
    names = _NAME.findall(loc.text)
    if not names:
        return None
    n = tr.allocs_at.get(loc, 0)
    tr.allocs_at[loc] = n + 1
    return names[n % len(names)]


def alloc(buffer: Buf, shape: Sequence[int], dtype, *, layout: Optional[str] = None,
          buffers: int = 1, name: Optional[str] = None):
    """Allocate a tile (or a ring of `buffers` tiles) in `buffer`; capacity is charged at padded size.

    `buffers` > 1 gives a Ring (double buffering: ring.next() moves to the next slot, current() / previous()); it
    starts at slot 0, so the first next() gives slot 1 (every slot is used in turn, whichever comes first).
    `layout`: the buffer's format on this chip (the default; other formats are refused), or "ND" for a single
    row in L1 (a bias row staged on its way to BT, copied as it is: no Nd2Nz, charged as one 32B-aligned row,
    not a 16-row fractal; it feeds BT only). `name`: the tile's name in errors and traces (default: the variable
    the kernel line assigns, e.g. 'a_l1').
    """
    tr = current()
    loc = caller_loc()
    if not isinstance(buffer, Buf) or buffer is Buf.GM:
        raise KernelError(f"{loc}: pl.alloc needs an on-chip buffer (pl.L1, pl.L0A, ..., pl.UB), got {buffer!r}")
    if (not isinstance(shape, (tuple, list)) or len(shape) != 2
            or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape)):
        raise ShapeError(f"{loc}: tile shape must be two positive Python ints, got {shape!r}")
    if not isinstance(buffers, int) or isinstance(buffers, bool) or buffers < 1:
        raise KernelError(f"{loc}: buffers must be a positive int, got {buffers!r}")
    if layout is not None and not isinstance(layout, str):
        raise KernelError(f"{loc}: layout must be a format name ('Nz', 'Zz', 'ND', ...) or None, got {layout!r}")
    dt = dtype_at(dtype, loc)
    if buffer is Buf.L0C and dt not in (DType.fp32, DType.int32):
        raise ShapeError(f"{loc}: L0C tiles accumulate in fp32 or int32, got {dt}")
    if buffer is Buf.BT and dt not in (DType.fp32, DType.int32):
        raise ShapeError(f"{loc}: the bias table holds fp32 (int32 for int8 matmuls), got {dt}")
    default = tr.chip.formats["L0A"] if buffer is Buf.L0A else _DEFAULT_LAYOUT[buffer]
    lay = (layout or default).upper()
    if lay not in FORMATS:
        raise ShapeError(f"{loc}: unknown layout {layout!r}; formats are {', '.join(FORMATS)} ({buffer.name} tiles "
                         f"are {default} on {tr.chip.name})")
    nd_row = buffer is Buf.L1 and lay == "ND"
    if nd_row and shape[0] != 1:
        raise ShapeError(f"{loc}: an ND tile in L1 is a single row (a bias row for BT), got {list(shape)}; matrices "
                         f"in L1 are {default}")
    if lay != default and not nd_row:
        raise ShapeError(f"{loc}: {buffer.name} tiles are {default} on {tr.chip.name}, not {lay}"
                         + (" (or ND for a single bias row)" if buffer is Buf.L1 else ""))
    shape = tuple(shape)
    if buffer is Buf.UB:
        tr.launch.mark_vector(loc)     # the AIVs take part in this launch
    padded = padded_of(Buf.UB if nd_row else buffer, shape, dt)      # an ND row: as UB rows are stored
    nbytes = padded[0] * padded[1] * dt.itemsize
    if name is None:
        name = _name_from_source(tr, loc) or f"{buffer.name.lower()}{tr.alloc_count}"
    what = (f"'{name}' {list(shape)} {dt} (padded {padded[0]}x{padded[1]})"
            + (f" x {buffers} buffers" if buffers > 1 else ""))
    tr.charge(buffer, nbytes * buffers, what, loc)
    tiles = []
    for i in range(buffers):
        nm = f"{name}[{i}]" if buffers > 1 else name
        stores = tr.launch.stores(tr.block, tr.alloc_count, lambda prog: TileStore(
            buffer, shape, padded, dt, lay, grid_of(Buf.UB if nd_row else buffer, dt), nm, tr.alloc_count, prog, loc,
            nbytes),
            vector=buffer is Buf.UB)
        tr.alloc_count += 1
        mine = stores[0] if len(stores) == 1 else stores[max(0, int(tr.role) - 1)]
        if (mine.buf, mine.shape, mine.dtype) != (buffer, shape, dt):
            raise KernelError(f"{loc}: allocation #{mine.key} is {mine.buf.name} {list(mine.shape)} {mine.dtype} in "
                              f"another role's trace but {buffer.name} {list(shape)} {dt} here; allocations "
                              f"must not depend on the role or subblock")
        tiles.append(Tile(mine, (0, shape[0], 0, shape[1])))
    return Ring(tiles) if buffers > 1 else tiles[0]
