"""What PyPTO-Pro's tile vector ops share (V pipe, Vec/UB operands): operand and dtype checks that name the kernel
line, scalar operands, the operand rectangles an op computes over, and the one Instr each op records; the Vec -> Vec
copy; the L0C->UB split rules of AccToVecMode.

The ops themselves: vector_elementwise.py (binary, unary, bitwise, cast, compare/select, fused, part*),
vector_reduce.py (reductions, expands, transpose, fill_index), vector_unbuilt.py (the names pyto does not build).
Rules (`_api.py` section B, docs/zh/pypto_pro/api/SIMD-API/operation/memory_vector_computation/): no broadcast, no
implicit dtype promotion, identical shapes unless an op says otherwise. Operands are taken through
opcommon.region / extent: an elementwise op computes over its destination's region and reads each source over the
same rectangle (PTO-ISA iterates the dst's validRow x validCol); what the numbers are is pyto/emulator/data/vector_effects.py.
"""
from __future__ import annotations

from typing import Iterable, Optional

import numpy as np

from ..dtypes import LOW_PRECISION, DType
from ..errors import AlignmentError, KernelError, ShapeError
from ..ir import Access, AccToVecMode, Buf, Loc, Op, Pipe, Role, rect_overlaps
from .debug import Scalar, depend, operand
from .opcommon import emit, extent, region
from .tile import Tile, TileGroup
from .trace import caller_loc, current

FP16, BF16, FP32, INT8, INT32, UINT8 = DType.fp16, DType.bf16, DType.fp32, DType.int8, DType.int32, DType.uint8
FLOATS = frozenset({FP16, BF16, FP32})
INTS = frozenset({INT8, UINT8, INT32})
ALL = FLOATS | INTS
PAGES = "docs/zh/pypto_pro/api/SIMD-API/operation/memory_vector_computation/"


def l0c_to_ub_split(dst: Tile, src: Tile, mode: Optional[AccToVecMode], loc: Loc) -> tuple:
    """Which part of `src` each AIV receives: (rect for AIV0 or None, rect for AIV1 or None), src coords.
    The dual modes halve M (SplitM) or N (SplitN) between the AIVs: M must be even (docs/design.md §3), and N/2 must sit
    on L0C's 16-column fractal grid (a half may not cut a fractal)."""
    if not isinstance(mode, AccToVecMode):
        raise KernelError(f"{loc}: an L0C->UB move needs acc_to_vec_mode=pl.AccToVecMode.<mode>, got {mode!r}")
    (m, n), r = src.shape, src.rect
    if mode in (AccToVecMode.SingleModeVec0, AccToVecMode.SingleModeVec1):
        want = (m, n)
        halves = (r, None) if mode is AccToVecMode.SingleModeVec0 else (None, r)
    elif mode is AccToVecMode.DualModeSplitM:
        if m % 2:
            raise ShapeError(f"{loc}: DualModeSplitM needs an even M, {src!r} has M = {m}")
        want = (m // 2, n)
        h = r[0] + m // 2
        halves = ((r[0], h, r[2], r[3]), (h, r[1], r[2], r[3]))
    else:
        if n % 32:
            raise AlignmentError(f"{loc}: DualModeSplitN gives each AIV N/2 columns, which must sit on L0C's 16-column "
                                 f"fractal grid: {src!r} has N = {n} (N/2 = {n / 2:g}); use an N that is a multiple "
                                 f"of 32, or DualModeSplitM")
        want = (m, n // 2)
        h = r[2] + n // 2
        halves = ((r[0], r[1], r[2], h), (r[0], r[1], h, r[3]))
    if dst.shape != want:
        raise ShapeError(f"{loc}: {mode.name} gives each AIV a [{want[0]}, {want[1]}] tile, but {dst!r} is "
                         f"{list(dst.shape)}")
    return halves


# ---- the kernel line and the operands -------------------------------------------------------------------------
def vector_loc() -> Optional[Loc]:
    """The kernel line of a vector op, or None in the AIC's trace: the op is the AIVs' (their traces check and
    record it); the AIC's trace only notes that the launch uses the vector side."""
    tr = current()
    loc = caller_loc()
    if tr.is_aic:
        tr.skip(loc)
        return None
    return loc


def vec(x, op: str, name: str, loc: Loc, dn: bool = False) -> Tile:
    """`x` as a Vec (UB) tile operand `name` of pl.`op`; a DN (transposed) view only where `dn` allows it."""
    if not isinstance(x, Tile) or x.buffer is not Buf.UB:
        hint = " (take a slot with .next(), .current() or [i])" if isinstance(x, TileGroup) else ""
        raise ShapeError(f"{loc}: pl.{op} {name} must be a Vec (UB) tile, got {x!r}{hint}")
    if x.t and not dn:
        raise ShapeError(f"{loc}: pl.{op} {name} {x!r} is a DN tile; pl.{op} takes row-major (ND) tiles here (PTO-ISA's "
                         f"vector instructions read rows): use the ND view of the same bytes")
    return x


def dtype_in(op: str, t: Tile, allowed: Iterable[DType], page: str, loc: Loc, what: str = "") -> None:
    """ShapeError unless t's dtype is one pl.`op` takes (the op's page lists them)."""
    if t.dtype not in allowed:
        names = ", ".join(d.name for d in DType if d in allowed)
        raise ShapeError(f"{loc}: pl.{op}{what} takes {names} tiles ({PAGES}{page}), not {t.dtype} ({t!r})")


def same(op: str, loc: Loc, *tiles: Tile) -> None:
    """One physical shape, dtype and layout for all of `tiles` (no broadcast, no implicit promotion)."""
    first = tiles[0]
    for t in tiles[1:]:
        if t.shape != first.shape or t.dtype is not first.dtype:
            raise ShapeError(f"{loc}: pl.{op} operands differ: {first!r} {list(first.shape)} {first.dtype} vs {t!r} "
                             f"{list(t.shape)} {t.dtype} (no broadcast, no implicit promotion)")
        if t.t != first.t:
            raise ShapeError(f"{loc}: pl.{op} mixes layouts: {first!r} is {first.layout.value}, {t!r} is "
                             f"{t.layout.value}; an elementwise op reads every operand's bytes in one order")


def same_shape(op: str, loc: Loc, *tiles: Tile) -> None:
    """One physical shape and layout (a cast's dtypes differ)."""
    first = tiles[0]
    for t in tiles[1:]:
        if t.shape != first.shape or t.t != first.t:
            raise ShapeError(f"{loc}: pl.{op} shapes differ: {first!r} {list(first.shape)} {first.layout.value} vs "
                             f"{t!r} {list(t.shape)} {t.layout.value}")


def is_scalar(x) -> bool:
    """A Python or numpy number, or a value read by pl.getval (a pl.Scalar: data the data pass supplies)."""
    return isinstance(x, (int, float, np.integer, np.floating, Scalar)) and not isinstance(x, (bool, np.bool_))


def round_scalar(value: float, dtype: DType) -> float:
    """`value` rounded once, to nearest even, to a float dtype (as the kernel's scalar argument of type T is):
    through fp32 rounded to odd, which keeps the one rounding to bf16 exact (a plain float64 -> bf16 cast rounds
    twice)."""
    with np.errstate(all="ignore"):      # beyond the dtype's range is its infinity, whatever np.seterr says
        if dtype is FP32 or dtype is FP16:
            return float(np.array(value, np.float64).astype(dtype.np))
        f = np.float32(value)
        if np.isfinite(f) and float(f) != value:
            if (float(f) > value) == (value > 0):     # truncate toward zero, then set the last bit: round to odd
                f = np.nextafter(f, np.float32(0))
            f = np.array(f.view(np.uint32) | np.uint32(1), np.uint32).view(np.float32)
        return float(np.array(f, np.float32).astype(dtype.np))


def scalar_of(dtype: DType, value, what: str, loc: Loc):
    """A scalar operand in the tile's type: for a float tile the value rounded once to its dtype (a scalar
    argument has the tile's type T; the vector unit then computes in fp32), for an int tile an int of the dtype's
    range (a KernelError otherwise: the scalar must be a value of the dtype)."""
    if dtype in LOW_PRECISION:
        raise ShapeError(f"{loc}: {what} on a {dtype!r} tile: FP8 and HF8 are storage-only types, no scalar is one "
                         f"(PyPTO-Pro basic_data_structures/Scalar.md); the vector unit does not compute on them here")
    if not is_scalar(value):
        raise KernelError(f"{loc}: {what} takes a Python number, got {value!r}")
    if isinstance(value, Scalar):                 # read by pl.getval: its expression, evaluated in the data pass
        return operand(value, dtype, what, loc)
    if dtype.is_float:
        return round_scalar(float(value), dtype)
    info = np.iinfo(dtype.np)
    if value != int(value) or not info.min <= value <= info.max:
        raise KernelError(f"{loc}: {what} on a {dtype} tile takes an integer in {dtype} range [{info.min}, "
                          f"{info.max}], got {value!r}")
    return int(value)


# ---- rectangles and the instruction ---------------------------------------------------------------------------
def over(t: Tile, rows: int, cols: int) -> Access:
    """The Access of t's first `rows` x `cols` elements (in t's own terms), in its store's coordinates: a source
    read over its destination's region."""
    r0, _, c0, _ = t.rect
    if t.t:
        return Access(t.store, (r0, r0 + cols, c0, c0 + rows))
    return Access(t.store, (r0, r0 + rows, c0, c0 + cols))


def mask_bytes(mask: Tile, rows: int, cols: int) -> Access:
    """The bytes of a compare's mask that hold `rows` x `cols` predicate bits: ceil(cols / 8) per row."""
    r0, _, c0, _ = mask.rect
    return Access(mask.store, (r0, r0 + rows, c0, c0 + -(-cols // 8)))


def record(op: Op, kind: str, dsts: list, srcs: list, loc: Loc, attrs: Optional[dict] = None, passes: int = 1) -> None:
    """Record one V instruction. dsts / srcs: (tile, Access) pairs. A source overlapping a destination is the same
    view (in place) or apart: a shifted overlap's result would depend on the order the hardware repeats in.
    Cost (timing.py): `passes` x (head + the largest operand's elements in the widest dtype at the V pipe's byte
    rate); passes > 1 for a call PyPTO-Pro lowers to several PTO instructions (add_relu: TADD, TRELU)."""
    attrs = {} if attrs is None else attrs
    for d, da in dsts:
        for s, sa in srcs:
            if sa.obj is da.obj and sa.rect != da.rect and rect_overlaps(sa.rect, da.rect):
                q, w = da.rect, sa.rect
                raise ShapeError(f"{loc}: pl.{kind} writes {d!r} rows {q[0]}:{q[1]}, columns {q[2]}:{q[3]} over its "
                                 f"source rows {w[0]}:{w[1]}, columns {w[2]}:{w[3]}: a vector op works in place (the "
                                 f"same view) or on separate ones; a shifted overlap depends on the order the "
                                 f"hardware repeats in")
    both = dsts + srcs
    attrs["kind"] = kind
    attrs["t"] = tuple(t.t for t, _ in both)
    attrs["elems"] = max(t.shape[0] * t.shape[1] for t, _ in both)
    attrs["width"] = max(t.dtype.itemsize for t, _ in both)
    if passes != 1:
        attrs["passes"] = passes
    tiles = tuple(dict.fromkeys(t for t, _ in both))
    ins = emit(op, Pipe.V, Role.AIV0, tuple(a for _, a in srcs), tuple(a for _, a in dsts), attrs, loc, f"pl.{kind}",
               tiles)
    if not isinstance(attrs.get("scalar", 0), (int, float)):
        depend(ins, [attrs["scalar"]], loc)       # a pl.getval value: the V op waits for the read


def whole(t: Tile) -> tuple:
    """(t, its region): an operand taken whole (its valid region)."""
    return t, region(t)


def copy(dst: Tile, src: Tile) -> None:
    """dst = src, Vec to Vec on the V pipe (pl.move between two Vec tiles, move.md): same shape, dtype and layout."""
    loc = vector_loc()
    if loc is None:
        return
    vec(dst, "move", "dst", loc, dn=True)
    vec(src, "move", "src", loc, dn=True)
    same("move", loc, dst, src)
    rows, cols = extent(dst)
    record(Op.VUNARY, "move", [whole(dst)], [(src, over(src, rows, cols))], loc)


__all__ = ["l0c_to_ub_split", "copy"]
