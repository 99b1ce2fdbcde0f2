"""Tiles: PyPTO-Pro's `TileType`, `make_tile` and `make_tile_group` (tiles at byte addresses), pyto's `pl.alloc`
(the same tiles at the next free aligned address), tile groups, and views on the fractal grid.

Sources: docs/zh/pypto_pro/api/SIMD-API/basic_data_structures/TileType.md, .../resource_management/make_tile.md
and make_tile_group.md; the group cursor is `parser/_buffer_parser._build_tile_group_ir`'s (it starts at the last
slot, so the first `next()` gives slot 0).

A tile is a rectangle of a store (ir.TileStore: the storage at one address). Two tiles that name the same bytes
the same way share the store: the same address, dtype, fractal and shape, in the same layout or its transpose (a
DN [M, 1] tile is the ND [1, M] store read transposed, a ZN [K, N] L1 tile the NZ [N, K] store). Such a tile is a
*transposed view* (`Tile.t`): its shape and slices are in its own terms, its accesses in the store's.
"""
from __future__ import annotations

import operator
import re
from typing import Optional, Sequence

import numpy as np

from ..chip import FORMATS
from ..dtypes import FP4, DType, as_dtype
from ..errors import AlignmentError, CapacityError, KernelError, OutOfBoundsError, ShapeError, UnsupportedError
from ..ir import Access, Buf, Loc, TileStore
from .trace import caller_loc, current
from .types import TensorLayout, TilePad, Unbuilt

_NAME = re.compile(r"([A-Za-z_][A-Za-z_0-9]*)\s*=\s*pl\.(?:alloc|make_tile_group|make_tile)\b")
_PLACING = re.compile(r"\bpl\.(?:alloc|make_tile_group|make_tile)\b")
_TUPLE_TARGET = re.compile(r"^\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)+)\s*,?\s*=(?!=)(.*)$")
#: the layout each memory space takes when a TileType names none (TileType.md's table for A5; Left: the chip's)
_DEFAULT_LAYOUT = {Buf.L1: "NZ", Buf.L0B: "ZN", Buf.L0C: "NZ", Buf.UB: "ND", Buf.BT: "ND", Buf.FB: "ND",
                   Buf.L0A_MX: "ZZ", Buf.L0B_MX: "NN", Buf.L0B_SP: "ZN"}
#: the layouts pyto models per memory space (TileType.md allows more in some: those raise UnsupportedError)
_LEGAL = {Buf.L1: ("NZ", "ZN", "ND", "ZZ", "NN"), Buf.L0A: ("NZ", "ZZ"), Buf.L0B: ("ZN",), Buf.L0C: ("NZ",),
          Buf.UB: ("ND", "DN", "NZ"), Buf.BT: ("ND",), Buf.FB: ("ND",), Buf.L0A_MX: ("ZZ",), Buf.L0B_MX: ("NN",),
          Buf.L0B_SP: ("ZN",)}
#: MX scale tiles (E8M0, matmul_mx.md; seeds/004 §5.1): scale_a [M, K/32] in Zz fractals of 16 x 2, scale_b [K/32, N]
#: in Nn fractals of 2 x 16 (32 B each), in Mat and in ScaleLeft / ScaleRight; layout -> fractal (rows, cols)
SCALE_FRACTAL = {"ZZ": (16, 2), "NN": (2, 16)}
_SCALE_BUFS = (Buf.L0A_MX, Buf.L0B_MX)
#: the 4:2 sparse index (seeds/004 §5.2; language/cube_sparse.py): uint8 bytes of four 2-bit indices, in Zn fractals of
#: 32 indices along K (8 bytes) x 16 along N = 128 B, one per 512 B int8 fractal of the dense B. A uint8 Mat tile is
#: one (a ZN [K/8, N] tile: its NZ store [N, K/8] holds a fractal as 16 x 8), and so is every SparseIndex tile
#: (ZN [K/8, N], its own format as L0B's); buffer -> the store's fractal grid (rows, cols)
INDEX_FRACTAL = {Buf.L1: (16, 8), Buf.L0B_SP: (8, 16)}
#: a layout that is the transpose of the store's: the tile is a transposed view of a store in the other one
_TRANSPOSE = {"ZN": "NZ", "DN": "ND"}
_STORE_LAYOUT = {Buf.L0B: "ZN", Buf.L0B_SP: "ZN"}   # ZN in L0B (and SparseIndex) is its own format, not a view
#: Acc FP32/INT32 tiles' fractal when the TileType names none (TileType.md)
ACC_FRACTAL = 1024
_CUBE = (Buf.L1, Buf.L0A, Buf.L0B, Buf.L0C, Buf.BT, Buf.FB, Buf.L0A_MX, Buf.L0B_MX, Buf.L0B_SP)


def _ceil(x: int, a: int) -> int:
    return -(-x // a) * a


def grid_of(buf: Buf, dtype: DType) -> tuple:
    """The fractal grid of a store: (row step, col step) its views must sit on (docs/fractal_formats.md §4.1)."""
    c0 = 32 // dtype.itemsize
    if buf is Buf.L0C:
        return (16, 16)
    if buf is Buf.L0B:
        return (c0, 16)          # Zn: fractal K0 x N0
    if buf in (Buf.L1, Buf.L0A):
        return (16, c0)          # Nz / Zz: fractal 16 x K0
    return (1, c0)               # UB / BT / FB: ND rows, 32B-aligned columns


def padded_of(buf: Buf, shape: tuple, dtype: DType) -> tuple:
    """Stored shape: docs/tile_shapes.md §6.4's CeilAlign(16) (32 for the 8-bit types, 64 for the 4-bit ones: the
    fractal's K0 along either axis, as int8's 32) on fractal buffers; ND rows of 32B on UB/BT/FB."""
    rows, cols = shape
    if buf in (Buf.UB, Buf.BT, Buf.FB):
        return (rows, _ceil(cols, 32 // dtype.itemsize))
    a = 32 if dtype.bits == 8 else 64 if dtype.bits == 4 else 16
    return (_ceil(rows, a), _ceil(cols, a))


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
    """as_dtype, with the kernel line in its error; a PyPTO-Pro dtype pyto does not build is UnsupportedError."""
    if isinstance(dtype, Unbuilt):
        raise dtype.refuse(str(loc))
    try:
        return as_dtype(dtype)
    except ShapeError as e:
        raise ShapeError(f"{loc}: {e}") from None


def _shape2(shape, what: str, loc) -> tuple:
    if (not isinstance(shape, (tuple, list)) or len(shape) != 2
            or not all(as_int(s) is not None and as_int(s) > 0 for s in shape)):
        raise ShapeError(f"{loc}: {what} must be two positive ints (a 2-D tile), got {shape!r}")
    return (as_int(shape[0]), as_int(shape[1]))


# ---- TileType -----------------------------------------------------------------------------------------------
class TileType:
    """A tile's specification (PyPTO-Pro's TileType): shape, dtype, memory space, layout and the tail attributes.
    It allocates nothing: `pl.make_tile` / `pl.make_tile_group` place it. `layout=None` takes the space's default
    (Mat NZ, Left the chip's L0A format, Right ZN, Acc NZ, Vec ND); an Acc FP32/INT32 tile's `fractal` defaults
    to 1024.

    Tails: `valid_shape` [rows, cols] is a static valid shape (the tile's valid region from the start, which
    pl.set_validshape may not change); None or [-1, -1] is dynamic: the whole tile until pl.set_validshape sets it.
    `pad` (pl.TilePad) is the value pl.fillpad writes outside the valid region; nothing else reads it (a pad
    without fillpad leaves the stale bytes, as on hardware). `compact` (CompactMode.md: 0/None, 1 normal,
    2 row_plus_one) is recorded and has no effect in pyto: it says how the hardware packs a tail tile's fractals
    in its bytes, and pyto holds a tile's elements by position, not at byte addresses, so no value a kernel can
    read depends on it (row_plus_one's extra row is already in the shape the kernel declares)."""

    __slots__ = ("shape", "dtype", "target_memory", "valid_shape", "layout", "fractal", "pad", "compact")

    def __init__(self, shape, dtype, target_memory=Buf.UB, valid_shape=None, layout=None, fractal=None, pad=None,
                 compact=None):
        loc = caller_loc()
        self.shape = _shape2(shape, "TileType shape", loc)
        self.dtype = dtype
        if isinstance(target_memory, Unbuilt):
            raise target_memory.refuse(str(loc))
        if not isinstance(target_memory, Buf) or target_memory is Buf.GM:
            raise ShapeError(f"{loc}: TileType target_memory must be an on-chip pl.MemorySpace (Vec, Mat, Left, Right, "
                             f"Acc, Bias, Scaling, ScaleLeft, ScaleRight), got {target_memory!r}")
        self.target_memory = target_memory
        if layout is not None:
            lay = str(layout.value if isinstance(layout, TensorLayout) else layout).upper()
            if lay not in TensorLayout.__members__:
                raise ShapeError(f"{loc}: TileType layout must be pl.ND, pl.DN, pl.NZ, pl.ZN, pl.ZZ or pl.NN, got "
                                 f"{layout!r}")
            if lay not in _LEGAL[target_memory]:
                raise ShapeError(f"{loc}: layout {lay} is not legal for {target_memory!r} tiles: "
                                 f"{target_memory.name} takes {' or '.join(_LEGAL[target_memory])} (TileType.md's "
                                 f"layout table)")
            layout = TensorLayout[lay]
        self.layout = layout
        if valid_shape is not None and list(valid_shape) == [-1, -1]:
            valid_shape = None                # dynamic: the whole tile until pl.set_validshape
        if valid_shape is not None:
            valid_shape = _shape2(valid_shape, "TileType valid_shape", loc)
            if any(v > s for v, s in zip(valid_shape, self.shape)):
                raise ShapeError(f"{loc}: valid_shape {list(valid_shape)} is larger than the tile's shape "
                                 f"{list(self.shape)}")
        self.valid_shape = None if valid_shape is None else tuple(valid_shape)
        if fractal is not None and (as_int(fractal) is None or fractal <= 0):
            raise ShapeError(f"{loc}: TileType fractal must be a positive int (bytes), got {fractal!r}")
        self.fractal = fractal
        if compact not in (None, 0, 1, 2):
            raise ShapeError(f"{loc}: TileType compact must be None, 0, 1 or 2, got {compact!r}")
        self.compact = compact
        if pad is not None and (as_int(pad) is None or not 0 <= int(pad) <= 3):
            raise ShapeError(f"{loc}: TileType pad must be a pl.TilePad or 0..3, got {pad!r}")
        self.pad = pad

    def __repr__(self) -> str:
        lay = "" if self.layout is None else f", layout={self.layout!r}"
        return f"pl.TileType({list(self.shape)}, {self.dtype!r}, {self.target_memory!r}{lay})"


# ---- tiles and views ------------------------------------------------------------------------------------------
class Tile:
    """A rectangle of a store. `tile[r0:r1, c0:c1]` gives a view on the fractal grid (PyPTO-Pro's sub-view).

    `t`: the tile is the store read transposed (see the module docstring); `rect` is always in the store's
    coordinates, `shape` and slices in the tile's own. `mutex`: the mutex ids of its tile-group slot (auto_mutex).

    Tails (TileType.md, set_validshape.md, subview.md): `valid` is the valid shape (rows, cols) in the tile's own
    terms, None for the whole tile; it is the Tile object's state, as PyPTO-Pro's tile descriptor's: set_validshape
    changes it until set again (across loop iterations too), and a view takes its parent's clamped to the view.
    Ops take the valid region through `opcommon.region` (`region_of`); `pad` is the TileType's TilePad (fillpad's
    value), `fixed` a static TileType valid_shape (set_validshape refuses to change it)."""

    __slots__ = ("store", "rect", "access", "t", "mutex", "valid", "pad", "fixed", "_regions")

    def __init__(self, store: TileStore, rect: tuple, t: bool = False, mutex: tuple = (), valid: Optional[tuple] = None,
                 pad=None, fixed: bool = False):
        self.store, self.rect, self.t, self.mutex = store, rect, t, mutex
        self.access = Access(store, rect)    # what an instruction on this tile records (one per tile, shared)
        self.valid, self.pad, self.fixed = valid, pad, fixed
        self._regions = None                 # (rows, cols) -> Access of that corner, made on first use

    @property
    def valid_shape(self) -> tuple:
        """(rows, cols) of the valid region (PyPTO-Pro's GetValidRow/GetValidCol): the whole tile until set."""
        return self.shape if self.valid is None else self.valid

    def region_of(self, rows: int, cols: int) -> Access:
        """The Access of the tile's [0:rows, 0:cols] corner (own terms), one object per tile and extent: an op on
        the valid region records it (`opcommon.region`), and the encoders key on its identity and rectangle."""
        r0, r1, c0, c1 = self.rect
        if self.t:
            rows, cols = cols, rows
        if rows == r1 - r0 and cols == c1 - c0:
            return self.access
        regs = self._regions
        if regs is None:
            regs = self._regions = {}
        acc = regs.get((rows, cols))
        if acc is None:
            acc = regs[(rows, cols)] = Access(self.store, (r0, r0 + rows, c0, c0 + cols))
        return acc

    def _set_valid(self, valid: Optional[tuple]) -> None:
        self.valid = None if valid is None or tuple(valid) == self.shape else tuple(valid)

    @property
    def shape(self) -> tuple:
        """(rows, cols) of this tile or view, in its own terms."""
        r0, r1, c0, c1 = self.rect
        return (c1 - c0, r1 - r0) if self.t else (r1 - r0, c1 - c0)

    @property
    def dtype(self) -> DType:
        """The element type."""
        return self.store.dtype

    @property
    def buffer(self) -> Buf:
        """The on-chip buffer it lives in (pl.MemorySpace.Mat is pl.L1, ...)."""
        return self.store.buf

    @property
    def layout(self) -> TensorLayout:
        """Its layout as declared: the store's, or the transpose of it for a transposed view."""
        lay = self.store.layout
        if self.t:
            lay = {v: k for k, v in _TRANSPOSE.items()}[lay]
        return TensorLayout[lay]

    def __class_getitem__(cls, item):
        """`pl.Tile[[shape], dtype]`: PyPTO-Pro's annotation of a helper's or local's tile; no effect here."""
        return item

    def current(self) -> "Tile":
        """A single tile is a group of one: current(), next() and previous() are the tile itself."""
        return self

    next = previous = current

    def __getitem__(self, idx) -> "Tile":
        if type(idx) is tuple and len(idx) == 2 and not self.t:
            view = self._fast_view(idx[0], idx[1])      # the traced hot path
            if view is not None:
                return view
        if type(idx) is tuple and idx and type(idx[0]) is not slice:     # tile[i, j]: one element (getval.md)
            from .debug import subscript
            return subscript(self, idx)
        if self.t:
            try:
                sr, sc = idx
            except (TypeError, ValueError):
                return self._slow_view(idx)
            flip = None if self.valid is None else self.valid[::-1]
            plain = Tile(self.store, self.rect, False, self.mutex, flip, self.pad)
            view = plain._fast_view(sc, sr)
            if view is None:
                view = plain._slow_view((sc, sr))
            return Tile(view.store, view.rect, True, self.mutex, None if view.valid is None else view.valid[::-1],
                        self.pad)
        return self._slow_view(idx)

    def __setitem__(self, idx, value) -> None:
        """`tile[i, j] = value`: one element (setval.md)."""
        from .debug import subscript_store
        subscript_store(self, idx, value)

    def _fast_view(self, sr, sc) -> Optional["Tile"]:
        """The common view of an untransposed tile without a valid shape, checked in one go: two step-less int
        slices on the grid; None for anything else (_slow_view then checks it step by step)."""
        if (self.valid is not None or type(sr) is not slice or type(sc) is not slice or sr.step is not None
                or sc.step is not None):
            return None
        r0, r1, c0, c1 = self.rect
        a0, b0, a1, b1 = sr.start, sr.stop, sc.start, sc.stop
        if a0 is None:
            a0 = 0
        if b0 is None:
            b0 = r1 - r0
        if a1 is None:
            a1 = 0
        if b1 is None:
            b1 = c1 - c0
        if not (type(a0) is int and type(b0) is int and type(a1) is int and type(b1) is int
                and 0 <= a0 < b0 <= r1 - r0 and 0 <= a1 < b1 <= c1 - c0):
            return None
        store = self.store
        g0, g1 = store.grid
        e0, e1 = store.shape
        n0, n1, n2, n3 = r0 + a0, r0 + b0, c0 + a1, c0 + b1
        if n0 % g0 or n2 % g1 or (n1 % g0 and n1 != e0) or (n3 % g1 and n3 != e1):
            return None
        return Tile(store, (n0, n1, n2, n3), False, self.mutex, None, self.pad)

    def _slow_view(self, idx) -> "Tile":
        """Slicing with every check spelled out, raising the error that names what is wrong."""
        if not (isinstance(idx, tuple) and len(idx) == 2 and all(isinstance(s, slice) for s in idx)):
            raise KernelError(f"{caller_loc()}: tiles are sliced as tile[r0:r1, c0:c1], got {idx!r}")
        if self.t:
            idx = (idx[1], idx[0])
        valid = self.valid_shape[::-1] if self.t else self.valid_shape       # in the store's terms
        r0, r1, c0, c1 = self.rect
        new, vals = [], []
        for s, lo, hi, v in ((idx[0], r0, r1, valid[0]), (idx[1], c0, c1, valid[1])):
            if s.step not in (None, 1):
                raise KernelError(f"{caller_loc()}: tile slices take no step, got {s.step}")
            a = 0 if s.start is None else as_int(s.start)
            b = hi - lo if s.stop is None else as_int(s.stop)
            if a is None or b is None:
                raise KernelError(f"{caller_loc()}: tile slice bounds must be integers, got {s.start!r}:{s.stop!r}")
            if a < 0 or b > hi - lo or a >= b:
                raise OutOfBoundsError(f"{caller_loc()}: view [{a}:{b}] outside {self!r} of extent "
                                       f"{hi - lo} on that axis")
            new.append([lo + a, lo + b])
            vals.append((b if b < v else v) - a)     # subview.md: the parent's valid shape clamped to the view
        g = self.store.grid
        full = self.store.shape
        for i, (name, step, edge) in enumerate((("row", g[0], full[0]), ("column", g[1], full[1]))):
            lo, hi = new[i]
            if hi % step and hi != edge and not lo % step and self.store.buf is Buf.UB:
                # a Vec view ending inside a 32 B block runs on to the block's end; its valid shape is the slice
                # (subview.md: the sub-tile keeps the parent's row stride, its extent is set as its valid shape)
                new[i][1] = min(_ceil(hi, step), edge)
            elif lo % step or (hi % step and hi != edge):
                bad = lo if lo % step else hi
                if self.t:
                    name = "column" if name == "row" else "row"
                raise AlignmentError(f"{caller_loc()}: view of {self.store!r}: {name} offset {bad} is off the "
                                     f"fractal grid (multiples of {step} for {self.store.buf.name} "
                                     f"{self.layout.value} {self.dtype})")
        if vals[0] <= 0 or vals[1] <= 0:
            own = self.valid_shape
            raise ShapeError(f"{caller_loc()}: the view {list(idx[::-1] if self.t else idx)} of {self!r} lies outside "
                             f"its valid shape {list(own)} (subview.md clamps a view to its parent's valid shape; "
                             f"nothing would be left)")
        (nr0, nr1), (nc0, nc1) = new
        view = Tile(self.store, (nr0, nr1, nc0, nc1), self.t, self.mutex, None, self.pad)
        view._set_valid(tuple(vals[::-1]) if self.t else tuple(vals))
        return view

    def __repr__(self) -> str:
        r0, r1, c0, c1 = self.rect
        whole = (r0, c0) == (0, 0) and (r1, c1) == tuple(self.store.shape)
        if self.t:
            r0, r1, c0, c1 = c0, c1, r0, r1
        return (repr(self.store) + (f" ({self.layout.value} view)" if self.t else "")
                + ("" if whole else f"[{r0}:{r1}, {c0}:{c1}]"))


class TileGroup:
    """Tiles used in turn (PyPTO-Pro's make_tile_group handle; pl.alloc(..., buffers=n)): `next()` advances the
    cursor and returns that slot, `current()` / `previous()` do not advance, `g[i]` is slot i. The cursor starts at
    the last slot, so the first next() gives slot 0 and current() before any next() the last slot
    (`_buffer_parser._build_tile_group_ir`)."""

    def __init__(self, tiles: list):
        self.tiles, self.i = tiles, len(tiles) - 1

    def current(self) -> Tile:
        """The slot the cursor is on."""
        return self.tiles[self.i]

    def next(self) -> Tile:
        """Advance the cursor to the next slot, then return it."""
        i = self.i + 1
        tiles = self.tiles
        if i == len(tiles):
            i = 0
        self.i = i
        return tiles[i]

    def previous(self) -> Tile:
        """The slot before the cursor's (ping-pong: the one being drained)."""
        return self.tiles[(self.i - 1) % len(self.tiles)]

    def __len__(self) -> int:
        return len(self.tiles)

    def __getitem__(self, i: int) -> Tile:
        j = as_int(i)
        if j is None or not 0 <= j < len(self.tiles):
            raise KernelError(f"{caller_loc()}: a group of {len(self.tiles)} tiles is indexed by a slot number "
                              f"0..{len(self.tiles) - 1}, got {i!r}; take a tile (group.current(), group.next(), "
                              f"group[i]) before viewing part of it")
        return self.tiles[j]

    def __repr__(self) -> str:
        t = self.tiles[0]
        return f"tile group '{t.store.name.split('[')[0]}' ({len(self.tiles)} {t.buffer.name} tiles)"


# ---- placing stores -----------------------------------------------------------------------------------------
def _name_from_source(tr, loc) -> Optional[str]:
    """The variable a `name = pl.alloc(...)` (make_tile, make_tile_group) on the kernel line assigns. With
    several on one line the calls run left to right each time the line runs, so the n-th call made from the line
    takes the (n mod count)-th name. `a, b = pl.make_tile(...), pl.make_tile(...)` names them a and b (the i-th
    call on the line the i-th target)."""
    names = _NAME.findall(loc.text)
    tup = _TUPLE_TARGET.match(loc.text)
    if tup is not None:
        targets = [t.strip() for t in tup.group(1).split(",")]
        calls = len(_PLACING.findall(tup.group(2)))
        if 0 < calls <= len(targets):
            names = targets[:calls]
    if not names:
        return None
    n = tr.allocs_at.get(loc, 0)
    tr.allocs_at[loc] = n + 1
    return names[n % len(names)]


def _resolve_layout(tr, buf: Buf, layout, loc) -> str:
    default = tr.chip.formats["L0A"] if buf is Buf.L0A else _DEFAULT_LAYOUT[buf]
    if layout is not None and not isinstance(layout, str):
        raise KernelError(f"{loc}: layout must be a format name (pl.NZ, pl.ZN, pl.ND, ...) or None, got {layout!r}")
    lay = default if layout is None else str(layout.value if isinstance(layout, TensorLayout) else layout).upper()
    if lay not in FORMATS:
        raise ShapeError(f"{loc}: unknown layout {layout!r}; formats are {', '.join(FORMATS)} ({buf.name} tiles are "
                         f"{default} on {tr.chip.name})")
    if buf is Buf.L0A and lay != default:
        raise UnsupportedError(f"{loc}: {buf!r} tiles are {default} on {tr.chip.name} (pyto models one L0A format per "
                               f"chip, docs/fractal_formats.md §4), not {lay}")
    return lay


def _canonical(buf: Buf, shape: tuple, layout: str) -> tuple:
    """(store layout, store shape, transposed view?) of a tile declared `layout` `shape` in `buf`."""
    if layout in _TRANSPOSE and _STORE_LAYOUT.get(buf) != layout:
        return _TRANSPOSE[layout], (shape[1], shape[0]), True
    return layout, shape, False


#: where a 4-bit (FP4) tile may live: MXFP4's data path GM -> Mat -> Left / Right (matmul_mx.md)
_FP4_BUFS = (Buf.L1, Buf.L0A, Buf.L0B)


def _check_dtype(buf: Buf, dt: DType, loc) -> None:
    if dt in FP4 and buf not in _FP4_BUFS:
        raise UnsupportedError(f"{loc}: a {dt!r} tile in {buf!r} is not built in pyto: FP4 is storage and an MX cube "
                               f"input only (matmul_mx.md: GM -> Mat -> Left / Right for pl.matmul_mx); no vector op, "
                               f"cast or scalar computes on it here")
    if buf is Buf.L0C and dt not in (DType.fp32, DType.int32):
        raise ShapeError(f"{loc}: Acc (L0C) tiles accumulate in fp32 or int32, got {dt}")
    if buf is Buf.BT and dt not in (DType.fp32, DType.int32):
        raise ShapeError(f"{loc}: Bias tiles hold fp32 (int32 for int8 matmuls), got {dt}")
    if buf in _SCALE_BUFS and dt is not DType.fp8e8m0:
        raise ShapeError(f"{loc}: {buf!r} tiles hold E8M0 MX scales (pl.DT_FP8E8M0, MemorySpace.md: "
                         f"\"仅用于...DT_FP8E8M0分组缩放因子\"), got {dt}")
    if buf is Buf.L0B_SP and dt is not DType.uint8:
        raise ShapeError(f"{loc}: {buf!r} tiles hold the 4:2 sparse index, pl.DT_UINT8 bytes of four 2-bit indices "
                         f"(LoadDataWithSparse.md: idx is uint8_t; pl.move_sparse), got {dt}")
    if dt is DType.fp8e8m0 and buf not in (Buf.L1,) + _SCALE_BUFS:
        raise UnsupportedError(f"{loc}: an E8M0 (pl.DT_FP8E8M0) tile in {buf!r} is not built in pyto: E8M0 scales "
                               f"go GM -> Mat (layout ZZ / NN) -> ScaleLeft / ScaleRight for pl.matmul_mx")


def _check_scale_layout(tr, buf: Buf, dt: DType, lay: str, loc) -> None:
    """The MX scale tiles' rules once the layout is known: E8M0 in Mat is ZZ (scale_a) or NN (scale_b), and only
    E8M0 is; a scale buffer exists only on a chip whose table has it (the 950: chip.MX_BUFFERS)."""
    if buf is Buf.L1 and (dt is DType.fp8e8m0) != (lay in SCALE_FRACTAL):
        if dt is DType.fp8e8m0:
            raise ShapeError(f"{loc}: an E8M0 Mat tile is an MX scale tile, layout pl.ZZ (scale_a [M, K/32]) or "
                             f"pl.NN (scale_b [K/32, N]) (matmul_mx.md), got {lay}")
        raise ShapeError(f"{loc}: Mat layout {lay} is for E8M0 MX scale tiles only (matmul_mx.md), got a {dt} tile; "
                         f"matrices in Mat are NZ (or ZN)")
    if dt in FP4 and lay not in ("NZ", "ZN"):
        raise UnsupportedError(f"{loc}: a {dt!r} tile of layout {lay} is not built in pyto: FP4 data sits in NZ "
                               f"fractals of 16 x 64 (seeds/004 §2; Mat NZ / ZN, Left NZ, Right ZN)")
    if buf is Buf.L0B_SP and buf.name not in tr.chip.buffers:
        raise UnsupportedError(f"{loc}: {buf!r} (the 4:2 sparse index buffer {buf.name}) does not exist on chip "
                               f"{tr.chip.name}: its table has no buffers.{buf.name} (LoadDataWithSparse / "
                               f"MmadWithSparse are Atlas A2/A3's; the Ascend 950 has no 4:2 sparse cube)")
    if buf in _SCALE_BUFS and buf.name not in tr.chip.buffers:
        raise UnsupportedError(f"{loc}: {buf!r} (the MX scale buffer {buf.name}) does not exist on chip "
                               f"{tr.chip.name}: its table has no buffers.{buf.name} (PyPTO-Pro MemorySpace.md / "
                               f"matmul_mx.md: ScaleLeft / ScaleRight and MX matmuls are the Ascend 950's)")


def _stores(tr, key, buf: Buf, shape: tuple, dt: DType, layout: str, name: str, loc: Loc, addr: int,
            nbytes: int, padded: tuple, autosync: bool, fractal: int) -> TileStore:
    """This processor's store of `key` in this block (a UB tile has one per AIV; a cube buffer one, on the AIC),
    made and registered in the block's address map on first use."""
    launch = tr.launch
    grid = grid_of(Buf.UB if (buf is Buf.L1 and layout == "ND") else Buf.L1 if _nz_in_ub(buf, layout) else buf, dt)
    if dt is DType.fp8e8m0:
        grid = SCALE_FRACTAL[layout]          # an MX scale tile: its Zz / Nn fractal grid
    if _is_index(buf, dt, layout):
        grid = INDEX_FRACTAL[buf]             # a 4:2 sparse index tile: its 128 B Zn fractals

    def make(prog: int) -> TileStore:
        return TileStore(buf, shape, padded, dt, layout, grid, name, key, prog, loc, nbytes, addr, autosync,
                         False, fractal)
    stores = launch.stores(tr.block, key, make, vector=buf is Buf.UB)
    mine = stores[0] if len(stores) == 1 else stores[max(0, int(tr.role) - 1)]
    if (mine.buf, mine.shape, mine.dtype) != (buf, shape, dt):
        raise KernelError(f"{loc}: allocation #{mine.key} is {mine.buf.name} {list(mine.shape)} {mine.dtype} in "
                          f"another role's trace but {buf.name} {list(shape)} {dt} here; allocations "
                          f"must not depend on the role or subblock")
    return mine


def _nz_in_ub(buf: Buf, layout: str) -> bool:
    """An NZ Vec tile (insert.md's source): 16-row x 32-byte fractals in UB, on L1's fractal grid, each column of
    fractals padded rows x 32 B contiguous (emulator/check/overlap.py lays its bytes out so)."""
    return buf is Buf.UB and layout == "NZ"


def _is_index(buf: Buf, dt: DType, layout: str) -> bool:
    """Whether a store is a 4:2 sparse index's (INDEX_FRACTAL): uint8 in a Mat NZ store or in SparseIndex."""
    return dt is DType.uint8 and (buf is Buf.L0B_SP or (buf is Buf.L1 and layout == "NZ"))


def _padded_bytes(buf: Buf, shape: tuple, layout: str, dt: DType) -> tuple:
    nd_row = buf is Buf.L1 and layout == "ND"
    padded = padded_of(Buf.UB if nd_row else buf, shape, dt)     # an ND row in L1: as UB rows are stored
    if dt is DType.fp8e8m0 and layout in SCALE_FRACTAL:            # MX scales: whole 16 x 2 / 2 x 16 fractals
        f0, f1 = SCALE_FRACTAL[layout]
        padded = (_ceil(shape[0], f0), _ceil(shape[1], f1))
    if _is_index(buf, dt, layout):                                 # a sparse index: whole 128 B fractals
        f0, f1 = INDEX_FRACTAL[buf]
        padded = (_ceil(shape[0], f0), _ceil(shape[1], f1))
    if _nz_in_ub(buf, layout):
        padded = (_ceil(shape[0], 16), padded[1])                 # whole 16-row fractals
    return padded, dt.nbytes(padded[0] * padded[1])          # (4-bit: padded to whole 64-element fractals, even)


def _spec(tr, tt: TileType, loc) -> tuple:
    """(buffer, dtype, store layout, store shape, transposed, padded, bytes used, fractal) of a TileType here."""
    if not isinstance(tt, TileType):
        raise ShapeError(f"{loc}: expected a pl.TileType, got {tt!r}")
    buf = tt.target_memory
    dt = dtype_at(tt.dtype, loc)
    _check_dtype(buf, dt, loc)
    lay, shape, t = _canonical(buf, tt.shape, _resolve_layout(tr, buf, tt.layout, loc))
    _check_scale_layout(tr, buf, dt, lay, loc)
    if lay == "ND" and buf is Buf.L1 and shape[0] != 1:
        raise ShapeError(f"{loc}: an ND Mat (L1) tile is a single row (pyto's bias row for the Bias table), got "
                         f"{list(shape)}; matrices in L1 are NZ (or ZN)")
    padded, nbytes = _padded_bytes(buf, shape, lay, dt)
    fractal = tt.fractal if tt.fractal is not None else (ACC_FRACTAL if buf is Buf.L0C else 0)
    return buf, dt, lay, shape, t, padded, nbytes, int(fractal)


def _describe(name: str, buf: Buf, shape: tuple, dt: DType, layout) -> str:
    return f"'{name}' {buf!r} {list(shape)} {dt} {layout}"


def _at(tr, tt: TileType, addr: int, size: Optional[int], name: str, loc: Loc, mutex: tuple,
        spec: Optional[tuple] = None) -> Tile:
    """A tile of `tt` at `addr` (make_tile, and each slot of make_tile_group)."""
    buf, dt, lay, shape, t, padded, nbytes, fractal = spec or _spec(tr, tt, loc)
    what = _describe(name, buf, tt.shape, dt, lay if not t else {v: k for k, v in _TRANSPOSE.items()}[lay])
    space = tr.launch.space(tr.block, buf)
    space.check_align(addr, what, loc)
    if size is None:
        size = _elements_bytes(tt, dt, what, loc)
    elif as_int(size) is None or size <= 0:
        raise ShapeError(f"{loc}: make_tile size must be a positive int (bytes), got {size!r}")
    if size < nbytes:
        raise CapacityError(
            f"{loc}: {what} at {addr:#x} needs {nbytes:,} B ({lay} pads it to {padded[0]} x {padded[1]} "
            f"{'elements: whole fractals, docs/tile_shapes.md §6.4' if lay != 'ND' else 'elements: rows of 32 B'}), but its size is {size:,} B; pass "
            f"size={nbytes} (make_tile.md: NZ/ZN fractal round-up needs more than elements x dtype bytes)",
            buffer=buf.name, asked=nbytes, capacity=size, loc=str(loc))
    space.reserve(addr, size, what, loc)
    key = ("at", buf, addr, dt, lay, shape, fractal)
    store = _stores(tr, key, buf, shape, dt, lay, name, loc, addr, nbytes, padded, False, fractal)
    if buf is Buf.UB:
        tr.launch.mark_vector(loc)
    tile = Tile(store, (0, shape[0], 0, shape[1]), t, mutex, None, _pad_of(tt.pad), tt.valid_shape is not None)
    tile._set_valid(tt.valid_shape)
    return tile


def _elements_bytes(tt: TileType, dt: DType, what: str, loc) -> int:
    """A TileType's elements x dtype bytes (make_tile's default size, make_tile_group's slot stride): half a byte an
    element for FP4, whose element count must then be even (ShapeError naming the tile)."""
    try:
        return dt.nbytes(tt.shape[0] * tt.shape[1])
    except ShapeError as e:
        raise ShapeError(f"{loc}: {what}: {e}") from None


def _pad_of(pad):
    """A TileType's pad as a tile holds it: None for no pad (None or TilePad.null), else the TilePad."""
    return None if pad is None or int(pad) == 0 else TilePad(int(pad))


def make_tile(tile_type: TileType, *, addr: int, size: Optional[int] = None) -> Tile:
    """A tile of `tile_type` at byte `addr` of its memory space (PyPTO-Pro's make_tile). `addr` must be aligned
    (Vec/Mat 32 B, Left/Right 512 B, Acc 64 B: AlignmentError), `addr + size` within the buffer (CapacityError
    naming both), and `size` (default: elements x dtype bytes) at least what the layout's fractal padding uses.
    Overlapping other tiles is legal; nothing synchronises a make_tile tile but the kernel's own flags, barriers,
    mutexes and cross-core events."""
    tr = current()
    loc = caller_loc()
    a = as_int(addr)
    if a is None:
        raise KernelError(f"{loc}: make_tile addr must be an int (a byte offset in the memory space), got {addr!r}")
    name = _name_from_source(tr, loc) or f"tile@{a:#x}"
    return _at(tr, tile_type, a, size, name, loc, ())


def _mutex_slots(mutex_ids, depth, loc) -> tuple:
    """(depth, per-slot tuples of mutex ids) of make_tile_group's mutex_ids / depth."""
    if mutex_ids is None or (isinstance(mutex_ids, (list, tuple)) and len(mutex_ids) == 0):
        d = as_int(depth)
        if d is None or d <= 0:
            raise KernelError(f"{loc}: make_tile_group needs depth= (a positive int) when mutex_ids is None or "
                              f"empty, got depth={depth!r}")
        return d, ((),) * d
    if not isinstance(mutex_ids, (list, tuple)):
        raise KernelError(f"{loc}: mutex_ids must be a list of ints (one per slot) or of lists, got {mutex_ids!r}")
    slots = []
    for m in mutex_ids:
        ids = tuple(m) if isinstance(m, (list, tuple)) else (m,)
        for i in ids:
            if as_int(i) is None or not 0 <= i <= 31:
                raise KernelError(f"{loc}: mutex ids are ints 0..31, got {i!r} in {mutex_ids!r}")
        if len(set(ids)) != len(ids):
            raise KernelError(f"{loc}: a slot's mutex ids must differ, got {list(ids)}")
        slots.append(tuple(int(i) for i in ids))
    if len({len(s) for s in slots}) != 1:
        raise KernelError(f"{loc}: every slot of a tile group has the same number of mutex ids, got {mutex_ids!r}")
    if depth is not None and as_int(depth) != len(slots):
        raise KernelError(f"{loc}: depth={depth!r} but mutex_ids names {len(slots)} slots; they must agree")
    return len(slots), tuple(slots)


def make_tile_group(*, type: TileType, addrs, mutex_ids=None, depth: Optional[int] = None,  # noqa: A002
                    fwd_ids=None, bwd_ids=None) -> TileGroup:
    """`depth` tiles of one TileType used in turn (PyPTO-Pro's make_tile_group). `addrs`: one base address (slot i
    at base + i x elements x dtype bytes, also for a fractal tile that pads beyond that: PyPTO-Pro's
    tile_slot_size) or a list, one per slot. `mutex_ids`: per slot an id 0..31 (or a list of
    them); under auto_mutex each op on a slot takes its ids on its pipe (docs/design.md §4.4); None or [] (then
    `depth` is required): no framework sync. `fwd_ids`/`bwd_ids` feed PyPTO-Pro's pipeline= transform, which pyto
    does not build: they are checked and otherwise unused."""
    tr = current()
    loc = caller_loc()
    n, slots = _mutex_slots(mutex_ids, depth, loc)
    for ids, what in ((fwd_ids, "fwd_ids"), (bwd_ids, "bwd_ids")):
        if ids is not None and (not isinstance(ids, (list, tuple)) or len(ids) != n
                                or not all(as_int(i) is not None and 0 <= i <= 15 for i in ids)):
            raise KernelError(f"{loc}: {what} must list {n} cross-core event ids 0..15 (one per slot), got {ids!r}")
    spec = _spec(tr, type, loc)
    slot_size = _elements_bytes(type, spec[1], f"{type!r}", loc)
    if isinstance(addrs, (list, tuple)):
        if len(addrs) != n:
            raise KernelError(f"{loc}: addrs lists {len(addrs)} addresses for a group of {n} tiles")
        at = [as_int(a) for a in addrs]
        if any(a is None for a in at):
            raise KernelError(f"{loc}: addrs must be ints, got {addrs!r}")
    else:
        base = as_int(addrs)
        if base is None:
            raise KernelError(f"{loc}: addrs must be a base address (int) or a list of them, got {addrs!r}")
        # slot i at base + i x elements x dtype bytes, as PyPTO-Pro places them (ir/op/block_ops.py tile_slot_size)
        # even where a fractal layout pads a slot beyond that (a [1, N] NZ bias row): the slots' padded ranges then
        # overlap and their stores are followed byte by byte (overlap.py), so only bytes two slots really share
        # can clobber each other
        at = [base + i * slot_size for i in range(n)]
    name = _name_from_source(tr, loc) or f"group@{at[0]:#x}"
    tiles = [_at(tr, type, a, max(slot_size, spec[6]), f"{name}[{i}]" if n > 1 else name, loc, slots[i], spec)
             for i, a in enumerate(at)]
    return TileGroup(tiles)


def alloc(buffer: Buf, shape: Sequence[int], dtype, *, layout=None, buffers: int = 1, name: Optional[str] = None,
          pad=None):
    """pyto's extension: a tile (or a group of `buffers` tiles) at the next free aligned address of `buffer`, each
    charged at its padded size (docs/tile_shapes.md §6.4's CeilAlign), synchronised by pyto's dependency auto-sync (docs/design.md
    §4.4). A group's cursor is PyPTO-Pro's (the first next() gives slot 0). `layout`: the buffer's default,
    or ZN for an L1 tile held transposed (a DN operand as it is stored), or ND for a single row in L1 (a bias row
    staged on its way to the Bias table, charged as one 32 B-aligned row: pyto's extension, PyPTO-Pro's Mat tiles are
    fractal). `name`: the tile's name in errors and traces (default: the variable the kernel line assigns). `pad`: the
    TileType's pad (pl.TilePad, for pl.fillpad). A pl.alloc tile's valid shape is dynamic (pl.set_validshape)."""
    tr = current()
    loc = caller_loc()
    if pad is not None and (as_int(pad) is None or not 0 <= int(pad) <= 3):
        raise ShapeError(f"{loc}: pad must be a pl.TilePad, got {pad!r}")
    if not isinstance(buffer, Buf) or buffer is Buf.GM:
        raise KernelError(f"{loc}: pl.alloc needs an on-chip buffer (pl.L1, pl.L0A, ..., pl.UB), got {buffer!r}")
    shape = _shape2(shape, "tile shape", loc)
    if as_int(buffers) is None or isinstance(buffers, bool) or buffers < 1:
        raise KernelError(f"{loc}: buffers must be a positive int, got {buffers!r}")
    buffers = int(buffers)
    dt = dtype_at(dtype, loc)
    _check_dtype(buffer, dt, loc)
    lay_in = _resolve_layout(tr, buffer, layout, loc)
    if lay_in not in _LEGAL[buffer]:
        raise ShapeError(f"{loc}: layout {lay_in} is not legal for {buffer!r} tiles: {buffer.name} takes "
                         f"{' or '.join(_LEGAL[buffer])}")
    lay, sshape, t = _canonical(buffer, shape, lay_in)
    _check_scale_layout(tr, buffer, dt, lay, loc)
    if lay == "ND" and buffer is Buf.L1 and sshape[0] != 1:
        raise ShapeError(f"{loc}: an ND tile in L1 is a single row (a bias row for BT), got {list(shape)}; matrices "
                         f"in L1 are NZ")
    if buffer is Buf.UB:
        tr.launch.mark_vector(loc)     # the AIVs take part in this launch
    padded, nbytes = _padded_bytes(buffer, sshape, lay, dt)
    if name is None:
        name = _name_from_source(tr, loc) or f"{buffer.name.lower()}{tr.alloc_count}"
    key0 = tr.alloc_count
    tr.alloc_count += buffers
    existing = tr.launch.stores_if(tr.block, key0)
    if existing is None:      # the first trace to reach it places the group
        what = (f"'{name}' {list(shape)} {dt} (padded {padded[0]}x{padded[1]})"
                + (f" x {buffers} buffers" if buffers > 1 else ""))
        base = tr.launch.space(tr.block, buffer).first_fit(nbytes * buffers, what, loc)
    else:
        base = existing[0].addr
    fractal = ACC_FRACTAL if buffer is Buf.L0C else 0
    tiles = []
    for i in range(buffers):
        nm = f"{name}[{i}]" if buffers > 1 else name
        store = _stores(tr, key0 + i, buffer, sshape, dt, lay, nm, loc, base + i * nbytes, nbytes, padded, True,
                        fractal)
        tiles.append(Tile(store, (0, sshape[0], 0, sshape[1]), t, (), None, _pad_of(pad)))
    return TileGroup(tiles) if buffers > 1 else tiles[0]
