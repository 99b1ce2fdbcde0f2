"""PyPTO-Pro's reductions, expands, transpose and fill_index (V pipe).

PyPTO-Pro's dim convention (math_functions/sum.md, elementwise/maximum.md, _api.py section B8): dim=0 reduces each
row (along the last axis) into a [rows, 1] tile that must be declared layout=pl.DN (the column's elements
contiguous: the DN [rows, 1] tile is the ND [1, rows] bytes read transposed), dim=1 each column into a [1, cols]
ND tile. expand_max/min/mul/sub/div(out, src, scalar, dim=0) broadcast a [rows, 1] DN tile along each row (dim=1: a
[1, cols] tile down each column); there is no expand_add. A reduction iterates its source's region; `tmp` is
checked (a Vec tile of src's shape and dtype) and neither read nor written (sum.md and argmax.md: the lowering
does not use it; PTO-ISA's TROWMAX/TROWMIN/TCOLMAX/TCOLMIN take no tmp either).
"""
from __future__ import annotations

from ..errors import AlignmentError, KernelError, ShapeError
from ..ir import Op, rect_overlaps
from .opcommon import extent
from .tile import Tile
from .vector import (ALL, FP16, FP32, INT8, INT32, UINT8, dtype_in, over, record, same, scalar_of, vec, vector_loc,
                     whole)

_PAGE = {"sum": "math_functions/sum.md", "maximum": "elementwise/maximum.md", "minimum": "elementwise/minimum.md",
         "argmax": "math_functions/argmax.md", "argmin": "math_functions/argmin.md"}
#: (dim=0 dtypes, dim=1 dtypes) of pyto's the pages list for each reduction's source
_SRC_DTYPES = {"sum": (frozenset({INT32, FP16, FP32}), ALL),
               "maximum": (frozenset({INT8, UINT8, INT32, FP16, FP32}), ALL),
               "minimum": (frozenset({INT8, UINT8, INT32, FP16, FP32}), ALL),
               "argmax": (frozenset({FP16, FP32}), ALL), "argmin": (frozenset({FP16, FP32}), ALL)}


def _dim(op: str, dim, loc) -> int:
    if dim not in (0, 1) or isinstance(dim, bool):
        raise KernelError(f"{loc}: pl.{op} dim must be 0 (each row, into a [rows, 1] DN tile) or 1 (each column, "
                          f"into [1, cols]), got {dim!r}")
    return dim


def _column(op: str, what: str, t: Tile, rows: int, loc) -> None:
    """`t` must be the [rows, 1] DN column PyPTO-Pro's dim=0 takes."""
    if t.shape != (rows, 1):
        raise ShapeError(f"{loc}: pl.{op}(dim=0) {what} must be [{rows}, 1] (one per row), got {t!r} "
                         f"{list(t.shape)}")
    if not t.t:
        raise ShapeError(f"{loc}: pl.{op}(dim=0) {what} {t!r} is an ND [{rows}, 1] tile: declare it "
                         f"pl.TileType([{rows}, 1], ..., layout=pl.DN) ({_PAGE.get(op, 'math_functions/' + op + '.md')}"
                         f" requires layout=pl.DN; an ND column puts each element in a 32-byte row of its own, and "
                         f"PyPTO-Pro gives a ValueError or wrong results)")


def _per_line(op: str, what: str, t: Tile, src: Tile, dim: int, rows: int, cols: int, loc):
    """The region of `t`, the one-per-row [rows, 1] DN column (dim=0) or one-per-column [1, cols] row (dim=1) that
    goes with `src`, over src's covered rows or cols."""
    if dim == 0:
        _column(op, what, t, src.shape[0], loc)
        return over(t, rows, 1)
    if t.shape != (1, src.shape[1]):
        raise ShapeError(f"{loc}: pl.{op}(dim=1) {what} must be [1, {src.shape[1]}] (one per column), got {t!r} "
                         f"{list(t.shape)}")
    return over(t, 1, cols)


def reduce_op(op: str, out: Tile, src: Tile, tmp: Tile, dim: int) -> None:
    """One reduction (sum, maximum, minimum, argmax, argmin) of src's region along `dim` into out."""
    loc = vector_loc()
    if loc is None:
        return
    dim = _dim(op, dim, loc)
    vec(src, op, "src", loc)
    vec(tmp, op, "tmp", loc, dn=True)
    vec(out, op, "out", loc, dn=dim == 0)
    if tmp.shape != src.shape or tmp.dtype is not src.dtype:
        raise ShapeError(f"{loc}: pl.{op} tmp must be a Vec tile of src's shape and dtype {list(src.shape)} "
                         f"{src.dtype} (_api.py's reduce rules), got {tmp!r} {list(tmp.shape)} {tmp.dtype}")
    dtype_in(op, src, _SRC_DTYPES[op][dim], _PAGE[op], loc, f"(dim={dim})")
    want = INT32 if op.startswith("arg") else src.dtype
    if out.dtype is not want:
        raise ShapeError(f"{loc}: pl.{op} writes {want} ({_PAGE[op]}), but out {out!r} is {out.dtype}")
    rows, cols = extent(src)
    dst = _per_line(op, "out", out, src, dim, rows, cols, loc)
    record(Op.VREDUCE, op, [(out, dst)], [(src, over(src, rows, cols))], loc, {"dim": dim})


def sum(out: Tile, src: Tile, tmp: Tile, *, dim: int = 0) -> None:  # noqa: A001 - the DSL's spelling
    """Sum of each row (dim=0, into a [rows, 1] DN tile) or column (dim=1, into [1, cols]) of src
    (math_functions/sum.md). Floats: dim=0 sums each 256-byte chunk of a row and adds the chunk sums in order in
    the dtype; dim=1 adds rows pairwise in the dtype (PTO-ISA's TROWSUM / TCOLSUM; vector_effects.py)."""
    reduce_op("sum", out, src, tmp, dim)


def argmax(out: Tile, src: Tile, tmp: Tile, *, dim: int = 0) -> None:
    """Column index of each row's maximum (dim=0, into a [rows, 1] DN int32 tile) or row index of each column's
    (dim=1, [1, cols]) (math_functions/argmax.md); ties: the first."""
    reduce_op("argmax", out, src, tmp, dim)


def argmin(out: Tile, src: Tile, tmp: Tile, *, dim: int = 0) -> None:
    """Index of each row's (dim=0) or column's (dim=1) minimum, as argmax (math_functions/argmin.md)."""
    reduce_op("argmin", out, src, tmp, dim)


def _expand(op: str):
    kind = op[len("expand_"):]
    base = {"max": "maximum", "min": "minimum"}.get(kind, kind)

    def fn(out: Tile, src: Tile, scalar: Tile, *, dim: int = 0) -> None:
        loc = vector_loc()
        if loc is None:
            return
        dim = _dim(op, dim, loc)
        vec(out, op, "out", loc)
        vec(src, op, "src", loc)
        vec(scalar, op, "scalar", loc, dn=dim == 0)
        same(op, loc, out, src)
        dtype_in(op, src, ALL, f"math_functions/{op}.md", loc)
        if scalar.dtype is not src.dtype:
            raise ShapeError(f"{loc}: pl.{op} scalar {scalar!r} is {scalar.dtype}, src {src!r} {src.dtype} (no implicit "
                             f"promotion)")
        rows, cols = extent(out)
        sa = _per_line(op, "scalar", scalar, src, dim, rows, cols, loc)
        record(Op.VEXPAND, op, [whole(out)], [(src, over(src, rows, cols)), (scalar, sa)], loc,
               {"base": base, "dim": dim})
    fn.__name__ = op
    fn.__doc__ = (f"out = src {kind} scalar broadcast: dim=0 a [rows, 1] DN tile along each row, dim=1 a [1, cols] "
                  f"tile down each column (math_functions/{op}.md); floats compute in fp32 and round once.")
    return fn


expand_max, expand_min, expand_mul, expand_sub, expand_div = (
    _expand(k) for k in ("expand_max", "expand_min", "expand_mul", "expand_sub", "expand_div"))


def transpose(out: Tile, src: Tile) -> None:
    """out = src transposed (transpose_and_element_access/transpose.md): out's shape is src's swapped, one dtype,
    not the same tile; each tile's row (cols x dtype bytes) a multiple of 32 bytes (an AlignmentError otherwise)."""
    loc = vector_loc()
    if loc is None:
        return
    vec(out, "transpose", "out", loc)
    vec(src, "transpose", "src", loc)
    dtype_in("transpose", src, ALL, "transpose_and_element_access/transpose.md", loc)
    if out.dtype is not src.dtype or out.shape != src.shape[::-1]:
        raise ShapeError(f"{loc}: pl.transpose out must be [{src.shape[1]}, {src.shape[0]}] {src.dtype} (src {src!r} "
                         f"transposed), got {out!r} {list(out.shape)} {out.dtype}")
    if out.store is src.store and rect_overlaps(out.rect, src.rect):
        raise ShapeError(f"{loc}: pl.transpose out {out!r} overlaps src {src!r}: it cannot work in place")
    for t in (src, out):
        if t.shape[1] * t.dtype.itemsize % 32:
            raise AlignmentError(f"{loc}: pl.transpose needs each row of {t!r} ({t.shape[1]} x {t.dtype.itemsize} B) "
                                 f"to be a multiple of 32 bytes (transpose.md)")
    rows, cols = extent(src)
    record(Op.VUNARY, "transpose", [(out, over(out, cols, rows))], [(src, over(src, rows, cols))], loc)


def fill_index(out: Tile, start) -> None:
    """out[0, k] = start + k over out's valid columns (PTO-ISA's TCI): a [1, cols] DT_INT32 tile; int32 wraps."""
    loc = vector_loc()
    if loc is None:
        return
    vec(out, "fill_index", "out", loc)
    if out.dtype is not INT32 or out.shape[0] != 1:
        raise ShapeError(f"{loc}: pl.fill_index fills one row of int32 (PTO-ISA's TCI), got {out!r} "
                         f"{list(out.shape)} {out.dtype}")
    record(Op.VDUP, "fill_index", [whole(out)], [], loc, {"scalar": scalar_of(INT32, start, "pl.fill_index", loc)})


__all__ = ["sum", "argmax", "argmin", "expand_max", "expand_min", "expand_mul", "expand_sub", "expand_div",
           "transpose", "fill_index", "reduce_op"]
