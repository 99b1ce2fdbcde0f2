"""Vector ops (V pipe, UB operands) and the L0C->UB split rules of AccToVecMode."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..dtypes import DType
from ..errors import AlignmentError, KernelError, ShapeError, UnsupportedError
from ..ir import AccToVecMode, Buf, Instr, Loc, Op, Pipe, Role, rect_overlaps
from .opcommon import emit
from .tile import Tile
from .trace import caller_loc, current


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


def _vector_loc() -> Optional[Loc]:
    """The kernel line of a vector op, or None in the AIC's trace: the op is the AIVs' (their traces check and
    record it); the AIC's trace only notes that the launch uses the vector side."""
    tr = current()
    loc = caller_loc()
    if tr.is_aic:
        tr.skip(loc)
        return None
    return loc


def _ub(x, what: str, loc: Loc) -> Tile:
    if not isinstance(x, Tile) or x.buffer is not Buf.UB:
        raise ShapeError(f"{loc}: {what} must be a Vec (UB) tile, got {x!r}")
    if x.t:
        raise UnsupportedError(f"{loc}: {what} is the transposed view {x!r}: vector ops on DN views are not built yet")
    return x


def _emit(op: Op, kind: str, dst: Tile, srcs: list, attrs: dict, loc: Loc, scratch: Optional[Tile] = None) -> None:
    """Record one V instruction; `scratch` (a reduction's tmp) is written too, so sync and race checks see it."""
    for src in srcs:
        if src.store is dst.store and src.rect != dst.rect and rect_overlaps(src.rect, dst.rect):
            raise ShapeError(f"{loc}: pl.{kind} writes {dst!r} rows {dst.rect[0]}:{dst.rect[1]}, columns "
                             f"{dst.rect[2]}:{dst.rect[3]} over its source rows {src.rect[0]}:{src.rect[1]}, columns "
                             f"{src.rect[2]}:{src.rect[3]}: a vector op works in place (the same view) or on "
                             f"separate ones; a shifted overlap depends on the order the hardware repeats in")
    attrs["kind"] = kind
    # the V pipe streams its operands at vector_bytes_per_cycle: the largest operand (a reduction's source, an
    # expand's matrix) in the widest dtype (a cast's wider side)
    attrs["elems"] = max(t.shape[0] * t.shape[1] for t in (dst, *srcs))
    attrs["width"] = max(t.dtype.itemsize for t in (dst, *srcs))
    dsts = (dst,) if scratch is None else (dst, scratch)
    emit(op, Pipe.V, Role.AIV0, tuple(s.access for s in srcs), tuple(d.access for d in dsts), attrs, loc,
         f"pl.{kind}", (*dsts, *srcs))


def _same(loc: Loc, kind: str, *tiles: Tile) -> None:
    shape, dtype = tiles[0].shape, tiles[0].dtype
    for t in tiles[1:]:
        if t.shape != shape or t.dtype is not dtype:
            raise ShapeError(f"{loc}: pl.{kind} operands differ: {tiles[0]!r} {list(shape)} {dtype} vs "
                             f"{t!r} {list(t.shape)} {t.dtype}")


def _binary(kind: str):
    def op(dst: Tile, a: Tile, b: Tile) -> None:
        loc = _vector_loc()
        if loc is None:
            return
        for name, t in (("dst", dst), ("a", a), ("b", b)):
            _ub(t, f"pl.{kind} {name}", loc)
        _same(loc, kind, dst, a, b)
        _emit(Op.VBINARY, kind, dst, [a, b], {}, loc)
    op.__name__ = kind
    op.__doc__ = (f"dst = {kind}(a, b) elementwise on UB tiles (V pipe): one shape and dtype for all three (a "
                  f"ShapeError otherwise)" + ({"add": "; int adds wrap", "sub": "; int subtractions wrap",
                                               "mul": "; int products wrap",
                                               "div": "; int division rounds toward zero"}.get(kind, "") + "."))
    return op


add, sub, mul, div, minimum = (_binary(k) for k in ("add", "sub", "mul", "div", "minimum"))
_maximum = _binary("maximum")


def maximum(dst: Tile, a: Tile, b: Tile, dim: Optional[int] = None) -> None:
    """dst = max(a, b) elementwise; with dim=1, the row max of `a` into `dst` [rows, 1] (`b` is the scratch,
    as pl.sum's `tmp`)."""
    if dim is None:
        return _maximum(dst, a, b)
    loc = _vector_loc()
    if loc is not None:
        _reduce("maximum", dst, a, b, dim, loc)


def sum(dst: Tile, src: Tile, tmp: Tile, dim: int = 1) -> None:  # noqa: A001 - the DSL's spelling
    """Row sum of `src` into `dst` [rows, 1] (`tmp` is scratch, as on the hardware)."""
    loc = _vector_loc()
    if loc is not None:
        _reduce("sum", dst, src, tmp, dim, loc)


def _reduce(kind: str, dst: Tile, src: Tile, tmp: Tile, dim: int, loc: Loc) -> None:
    for name, t in (("dst", dst), ("src", src), ("tmp", tmp)):
        _ub(t, f"pl.{kind} {name}", loc)
    if dim != 1:
        raise KernelError(f"{loc}: row reductions take dim=1 (reduce along columns), got {dim!r}")
    if dst.shape[0] != src.shape[0] or dst.shape[1] != 1 or dst.dtype is not src.dtype:
        raise ShapeError(f"{loc}: pl.{kind}(dim=1) of {list(src.shape)} {src.dtype} writes a "
                         f"[{src.shape[0]}, 1] {src.dtype} tile, got {list(dst.shape)} {dst.dtype}")
    if tmp.dtype is not src.dtype or tmp.shape[0] * tmp.shape[1] < src.shape[0] * src.shape[1]:
        raise ShapeError(f"{loc}: pl.{kind}(dim=1) needs a scratch tile of at least the source's "
                         f"{src.shape[0] * src.shape[1]} {src.dtype} elements (docs/cube_phase.md §5.3 uses one shaped like the "
                         f"source), got {tmp!r} {list(tmp.shape)} {tmp.dtype}")
    for name, t in (("source", src), ("destination", dst)):
        if t.store is tmp.store and rect_overlaps(t.rect, tmp.rect):
            raise ShapeError(f"{loc}: pl.{kind}(dim=1) scratch {tmp!r} overlaps its {name}: the reduction "
                             f"overwrites its scratch")
    _emit(Op.VREDUCE, kind, dst, [src], {}, loc, scratch=tmp)


def _expand(kind: str):
    def op(dst: Tile, src: Tile, vec: Tile, dim: int = 1) -> None:
        loc = _vector_loc()
        if loc is None:
            return
        for name, t in (("dst", dst), ("src", src), ("vec", vec)):
            _ub(t, f"pl.expand_{kind} {name}", loc)
        if dim not in (0, 1):
            raise KernelError(f"{loc}: expand ops broadcast a [rows, 1] column (dim=1) or a [1, cols] row "
                              f"(dim=0), got dim={dim!r}")
        _same(loc, f"expand_{kind}", dst, src)
        want = (src.shape[0], 1) if dim == 1 else (1, src.shape[1])
        if vec.shape != want or vec.dtype is not src.dtype:
            raise ShapeError(f"{loc}: pl.expand_{kind}(dim={dim}) needs vec {list(want)} {src.dtype}, got "
                             f"{list(vec.shape)} {vec.dtype}")
        _emit(Op.VEXPAND, kind, dst, [src, vec], {}, loc)
    op.__name__ = f"expand_{kind}"
    op.__doc__ = (f"dst = src {kind} vec, vec broadcast along each row (dim=1: vec is [rows, 1]) or down "
                  f"each column (dim=0: vec is [1, cols]).")
    return op


expand_add, expand_sub, expand_mul, expand_div = (_expand(k) for k in ("add", "sub", "mul", "div"))




def _round_scalar(value: float, dtype: DType) -> float:
    """`value` rounded once, to nearest even, to a float dtype (as the kernel's scalar argument of type T is):
    through fp32 rounded to odd, which keeps the one rounding to bf16 exact (a plain float64 -> bf16 cast rounds
    twice)."""
    with np.errstate(all="ignore"):      # beyond the dtype's range is its infinity, whatever np.seterr says
        if dtype is DType.fp32 or dtype is DType.fp16:
            return float(np.array(value, np.float64).astype(dtype.np))
        f = np.float32(value)
        if np.isfinite(f) and float(f) != value:
            if (float(f) > value) == (value > 0):     # truncate toward zero, then set the last bit: round to odd
                f = np.nextafter(f, np.float32(0))
            f = np.array(f.view(np.uint32) | np.uint32(1), np.uint32).view(np.float32)
        return float(np.array(f, np.float32).astype(dtype.np))


def _scalar_of(dst: Tile, value, what: str, loc: Loc):
    """A scalar operand in dst's type: for fp16/bf16/fp32 tiles the value rounded once to the tile's dtype (an
    Ascend C scalar argument has the tensor's type T; the vector unit then computes in fp32), for an int32 /
    int8 tile an int in the dtype's range (the result wraps like the hardware's int adds; the scalar itself
    must be a value of the dtype)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise KernelError(f"{loc}: {what} takes a Python number, got {value!r}")
    if dst.dtype.is_float:
        return _round_scalar(float(value), dst.dtype)
    info = np.iinfo(dst.dtype.np)
    if value != int(value) or not info.min <= value <= info.max:
        raise KernelError(f"{loc}: {what} on {dst.dtype} tile {dst!r} takes an integer in {dst.dtype} range "
                          f"[{info.min}, {info.max}], got {value!r}")
    return int(value)


def _scalar(kind: str):
    def op(dst: Tile, src: Tile, scalar: float) -> None:
        loc = _vector_loc()
        if loc is None:
            return
        _ub(dst, f"pl.{kind} dst", loc)
        _ub(src, f"pl.{kind} src", loc)
        _same(loc, kind, dst, src)
        _emit(Op.VSCALAR, kind, dst, [src], {"scalar": _scalar_of(dst, scalar, f"pl.{kind}", loc)}, loc)
    op.__name__ = kind
    op.__doc__ = (f"dst = src {kind[:-1]} scalar (one shape and dtype for dst and src). A float tile's scalar is "
                  f"rounded once to its dtype (an Ascend C scalar argument has the tensor's type); an int tile's "
                  f"must be an integer of its dtype's range (a KernelError otherwise).")
    return op


adds, muls = _scalar("adds"), _scalar("muls")


_FLOAT_ONLY = ("exp", "sqrt", "ln", "reciprocal", "rsqrt")


def _unary(kind: str):
    def op(dst: Tile, src: Tile) -> None:
        loc = _vector_loc()
        if loc is None:
            return
        _ub(dst, f"pl.{kind} dst", loc)
        _ub(src, f"pl.{kind} src", loc)
        _same(loc, kind, dst, src)
        if kind in _FLOAT_ONLY and not src.dtype.is_float:
            raise UnsupportedError(f"{loc}: pl.{kind} takes fp16/bf16/fp32 tiles, not {src.dtype} ({src!r})")
        _emit(Op.VUNARY, kind, dst, [src], {}, loc)
    op.__name__ = kind
    op.__doc__ = (f"dst = {kind}(src) elementwise (one shape and dtype for dst and src)"
                  + (": fp16/bf16/fp32 tiles only (an UnsupportedError for int tiles)." if kind in _FLOAT_ONLY
                     else "."))
    return op


exp, abs, sqrt, relu = (_unary(k) for k in ("exp", "abs", "sqrt", "relu"))  # noqa: A001
ln, reciprocal, rsqrt = (_unary(k) for k in ("ln", "reciprocal", "rsqrt"))   # Ascend C's Ln, Reciprocal, Rsqrt
copy = _unary("copy")       # Ascend C's Copy: UB -> UB on the V pipe, same dtype (pl.cast converts)
copy.__doc__ = "dst = src, UB to UB on the V pipe (same shape and dtype; pl.cast converts)."


def cast(dst: Tile, src: Tile) -> None:
    """dst = src converted to dst's dtype, same shape: float to float rounds to nearest even (overflow to inf),
    float to int rounds to nearest even and saturates to the int's range (NaN to 0), int to a narrower int
    wraps. int32 -> bf16 goes through fp32, the vector unit's compute type: |x| > 2^24 can round twice (one
    bf16 ulp)."""
    loc = _vector_loc()
    if loc is None:
        return
    _ub(dst, "pl.cast dst", loc)
    _ub(src, "pl.cast src", loc)
    if dst.shape != src.shape:
        raise ShapeError(f"{loc}: pl.cast shapes differ: {list(src.shape)} vs {list(dst.shape)}")
    _emit(Op.VCAST, "cast", dst, [src], {}, loc)


def duplicate(dst: Tile, value: float) -> None:
    """Fill `dst` with `value`: for a float tile rounded once to its dtype (beyond its range: inf), for an int
    tile an integer of its dtype's range (a KernelError otherwise)."""
    loc = _vector_loc()
    if loc is None:
        return
    _ub(dst, "pl.duplicate dst", loc)
    _emit(Op.VDUP, "duplicate", dst, [], {"scalar": _scalar_of(dst, value, "pl.duplicate", loc)}, loc)
