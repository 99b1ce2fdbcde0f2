"""PyPTO-Pro's elementwise tile vector ops (V pipe): binary ops with a tile or a scalar right-hand side, bitwise
ops, unary math, expands, cast with its RoundModes, compares into bit-packed UINT8 masks and select, the fused ops
and the part* ops over valid regions. Each op checks its operands (Vec tiles, one shape and dtype, the dtypes its
page lists: a ShapeError naming the tiles and the line) and records one V instruction; the numbers are
pyto/emulator/data/vector_effects.py's. Pages: docs/zh/pypto_pro/api/SIMD-API/operation/memory_vector_computation/
elementwise/*.md, math_functions/{expands,recip,rsqrt,exp}.md, type_conversion/cast.md, comparison/comparison.md,
selection/select.md, fused_vector_computation/*.md, composite_computation/*.md."""
from __future__ import annotations

from typing import Optional

from ..dtypes import DType
from ..errors import KernelError, ShapeError
from ..ir import Buf, Op, Pipe, Role
from .opcommon import emit, extent, region
from .tile import Tile, dtype_at
from .trace import caller_loc, current
from .types import RoundMode
from .vector import (ALL, BF16, FP16, FP32, INT8, INT32, INTS, UINT8, dtype_in, is_scalar, mask_bytes, over, record,
                     same, same_shape, scalar_of, vec, vector_loc, whole)

_ARITH = {  # op: (dtypes it takes, of pyto's; its page)
    "add": (ALL, "elementwise/add.md"), "sub": (ALL, "elementwise/sub.md"),
    "mul": (frozenset({INT32, FP16, BF16, FP32}), "elementwise/mul.md"),
    "div": (frozenset({INT32, FP16, FP32}), "elementwise/div.md"),
    "maximum": (ALL, "elementwise/maximum.md"), "minimum": (ALL, "elementwise/minimum.md"),
    "and_": (INTS, "elementwise/and_.md"),
}
_UNARY = {
    "neg": (frozenset({INT32, FP16, BF16, FP32}), "elementwise/neg.md"),
    "abs": (frozenset({FP16, FP32, INT8, INT32}), "elementwise/abs.md"),
    "exp": (frozenset({FP16, FP32}), "math_functions/exp.md"), "log": (frozenset({FP16, FP32}), "elementwise/log.md"),
    "sqrt": (frozenset({FP16, FP32}), "elementwise/sqrt.md"),
    "rsqrt": (frozenset({FP16, FP32}), "math_functions/rsqrt.md"),
    "recip": (frozenset({FP16, FP32}), "math_functions/recip.md"),
    "relu": (frozenset({FP16, FP32, INT32}), "elementwise/relu.md"),
}
_B16_B32 = frozenset({FP16, BF16, FP32, INT32})      # the fused pages' "b16, b32"


def _rhs(op: str, out: Tile, rhs, loc, scalar_ok: bool = True):
    """(source pair or None, scalar or None) of a tile-or-scalar right-hand side."""
    if is_scalar(rhs):
        if not scalar_ok:
            raise ShapeError(f"{loc}: pl.{op} takes a tile right-hand side, not the scalar {rhs!r}")
        return None, scalar_of(out.dtype, rhs, f"pl.{op}", loc)
    return vec(rhs, op, "rhs", loc, dn=True), None


def _elementwise(op: str, kind: str, out: Tile, srcs: list, loc, scalar=None, attrs: Optional[dict] = None,
                 dsts: Optional[list] = None, passes: int = 1, code: Op = Op.VBINARY) -> None:
    """Record an op over out's region, reading each source over the same rectangle."""
    rows, cols = extent(out)
    a = dict(attrs or {})
    if scalar is not None:
        a["scalar"] = scalar
        code = Op.VSCALAR
    record(code, kind, dsts or [whole(out)], [(s, over(s, rows, cols)) for s in srcs], loc, a, passes)


def _arith(op: str):
    allowed, page = _ARITH[op]

    def fn(out: Tile, lhs: Tile, rhs, *, dim: Optional[int] = None) -> None:
        if dim is not None:
            from .vector_reduce import reduce_op
            return reduce_op(op, out, lhs, rhs, dim)
        loc = vector_loc()
        if loc is None:
            return
        vec(out, op, "out", loc, dn=True)
        vec(lhs, op, "lhs", loc, dn=True)
        tile, scalar = _rhs(op, out, rhs, loc)
        same(op, loc, out, lhs, *([tile] if tile is not None else []))
        dtype_in(op, out, allowed, page, loc)
        _elementwise(op, op, out, [lhs] + ([tile] if tile is not None else []), loc, scalar)
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = (f"out = lhs {op} rhs elementwise, rhs a tile (one shape and dtype for all three) or a scalar "
                  f"(rounded once to the tile's dtype; an int tile's must be an int of its range) ({page}). Floats "
                  f"compute in fp32 and round once to the dtype; ints wrap" + (
                      "; int division rounds toward zero (x / 0 saturates, 0 / 0 is 0: undefined on the hardware)"
                      if op == "div" else "") + (
                      "; with dim= (0 row-wise into a [rows, 1] DN tile, 1 column-wise into [1, cols]) it is the "
                      "reduction pl.maximum(out, src, tmp, dim=) (rhs the tmp tile)" if op in ("maximum", "minimum")
                      else "") + ".")
    if op not in ("maximum", "minimum"):
        def plain(out: Tile, lhs: Tile, rhs) -> None:
            fn(out, lhs, rhs)
        plain.__name__, plain.__qualname__, plain.__doc__ = op, op, fn.__doc__
        return plain
    return fn


add, sub, mul, div, maximum, minimum, and_ = (_arith(k) for k in
                                              ("add", "sub", "mul", "div", "maximum", "minimum", "and_"))


def _shift(op: str):
    def fn(out: Tile, lhs: Tile, rhs: Tile) -> None:
        loc = vector_loc()
        if loc is None:
            return
        tiles = [vec(t, op, n, loc) for t, n in ((out, "out"), (lhs, "lhs"), (rhs, "rhs"))]
        same(op, loc, *tiles)
        dtype_in(op, out, INTS, f"elementwise/{op}.md", loc)
        _elementwise(op, op, out, [lhs, rhs], loc)
    fn.__name__ = op
    fn.__doc__ = (f"out = lhs {'<<' if op == 'shl' else '>>'} rhs elementwise, rhs a tile of shift amounts "
                  f"(elementwise/{op}.md; int tiles" + (", arithmetic for signed, logical for unsigned" if op == "shr"
                                                         else "") +
                  "). A shift amount outside 0..bits-1 is undefined on the hardware; pyto gives 0 (shr of a negative "
                  "signed value: -1).")
    return fn


shl, shr = _shift("shl"), _shift("shr")


def xor(out: Tile, lhs: Tile, rhs: Tile, tmp: Tile) -> None:
    """out = lhs ^ rhs elementwise on int tiles; `tmp` (same shape and dtype) is the hardware's workspace: it must
    not overlap out, lhs or rhs, and holds the dtype's minimum afterwards (its content is undefined)
    (elementwise/xor.md)."""
    loc = vector_loc()
    if loc is None:
        return
    tiles = [vec(t, "xor", n, loc) for t, n in ((out, "out"), (lhs, "lhs"), (rhs, "rhs"), (tmp, "tmp"))]
    same("xor", loc, *tiles)
    dtype_in("xor", out, INTS, "elementwise/xor.md", loc)
    _no_overlap("xor", tmp, (out, lhs, rhs), loc)
    rows, cols = extent(out)
    _elementwise("xor", "xor", out, [lhs, rhs], loc, dsts=[whole(out), (tmp, over(tmp, rows, cols))])


def _no_overlap(op: str, tmp: Tile, others, loc) -> None:
    from ..ir import rect_overlaps
    for t in others:
        if t.store is tmp.store and rect_overlaps(t.rect, tmp.rect):
            raise ShapeError(f"{loc}: pl.{op} tmp {tmp!r} overlaps {t!r}: the workspace must be apart from the "
                             f"operands")


def _unary(op: str):
    allowed, page = _UNARY[op]

    def fn(out: Tile, src: Tile) -> None:
        loc = vector_loc()
        if loc is None:
            return
        vec(out, op, "out", loc, dn=True)
        vec(src, op, "src", loc, dn=True)
        same(op, loc, out, src)
        dtype_in(op, out, allowed, page, loc)
        _elementwise(op, op, out, [src], loc, code=Op.VUNARY)
    fn.__name__ = op
    fn.__doc__ = f"out = {op}(src) elementwise, one shape and dtype ({page}); numerics: vector_effects.py."
    return fn


neg, abs, exp, log, sqrt, rsqrt, recip, relu = (_unary(k) for k in  # noqa: A001 - the DSL's spelling
                                                ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "recip", "relu"))


def expands(out: Tile, scalar) -> None:
    """Fill out's region (its valid region) with `scalar` (math_functions/expands.md: out in Vec or Mat): for a
    float tile rounded once to its dtype (beyond its range: inf), for an int tile an integer of its dtype's range
    (a KernelError otherwise).

    A Vec tile is filled on V by each AIV. A Mat (L1) tile is filled by the cube side: the AIC, on MTE2 (the page
    names the V pipe for the op as a whole; L1 is not the vector unit's, and what fills L1 with a constant on
    Ascend is MTE2, as Ascend C's InitConstValue into A1/B1 does). Its cost is the region's bytes at the GM->L1
    path's rate (timing.py), with no GM traffic: a kernel uses it to give L1 bytes it never loads a defined value
    (kernels/bmm/merge_batch.py's bias row between batches)."""
    if isinstance(out, Tile) and out.buffer is Buf.L1:
        _expands_mat(out, scalar)
        return
    loc = vector_loc()
    if loc is None:
        return
    if isinstance(out, Tile) and out.buffer is not Buf.UB:
        raise ShapeError(f"{loc}: pl.expands out must be a Vec (UB) or Mat (L1) tile, got {out!r} in "
                         f"{out.buffer.name} (math_functions/expands.md)")
    vec(out, "expands", "out", loc, dn=True)
    record(Op.VDUP, "expands", [whole(out)], [], loc, {"scalar": scalar_of(out.dtype, scalar, "pl.expands", loc)})


def _expands_mat(out: Tile, scalar) -> None:
    """pl.expands into a Mat tile: one MTE2 instruction of the AIC over out's valid region (expands' docstring)."""
    tr = current()
    loc = caller_loc()
    if not tr.is_aic:
        tr.cube_marker(Op.VDUP, "pl.expands", loc)      # an AIV's trace: the AIC's trace checks and records it
        return
    rows, cols = extent(out)
    attrs = {"scalar": scalar_of(out.dtype, scalar, "pl.expands", loc), "kind": "expands", "t": (out.t,),
             "elems": rows * cols, "width": out.dtype.itemsize}
    emit(Op.VDUP, Pipe.MTE2, Role.AIC, (), (region(out),), attrs, loc, "pl.expands", (out,), tr=tr)


# ---- cast ------------------------------------------------------------------------------------------------------
#: the conversions pyto builds: PTO-ISA A5 TCvt.hpp's castData pairs among pyto's dtypes (fp32 -> fp32 rounds to an
#: integral value: the source's "FP32 to FP32 - Applies rounding mode without type conversion")
CASTS = {FP32: (FP16, BF16, INT32, FP32), FP16: (FP32, INT32, INT8, UINT8), BF16: (FP32, FP16, INT32),
         INT32: (FP32, UINT8), INT8: (FP16, INT32), UINT8: (FP16,)}


def round_mode(mode, src: DType, dst: DType, op: str, loc) -> str:
    """The RoundMode's name as the data pass takes it. What each does (PTO-ISA A5 TCvt.hpp TCVT_IMPL): CAST_RINT
    round to nearest, ties to even; CAST_ROUND to nearest, ties away from zero (RoundAType, ROUND_A); CAST_FLOOR
    toward -inf; CAST_CEIL toward +inf; CAST_TRUNC toward zero; CAST_ODD round to odd, fp32 -> fp16 only (other
    pairs compile to no conversion at all: a KernelError here); CAST_NONE is not in that switch and takes its
    default, CAST_RINT. A widening conversion is exact whatever the mode."""
    if not isinstance(mode, RoundMode):
        raise KernelError(f"{loc}: pl.{op} mode must be a pl.RoundMode (CAST_NONE, CAST_RINT, CAST_ROUND, "
                          f"CAST_FLOOR, CAST_CEIL, CAST_TRUNC, CAST_ODD), got {mode!r}")
    if mode is RoundMode.CAST_ODD and (src, dst) != (FP32, FP16):
        raise KernelError(f"{loc}: pl.{op} mode=CAST_ODD rounds fp32 -> fp16 only (type_conversion/cast.md; PTO-ISA "
                          f"skips the conversion for other pairs, leaving the output stale), got {src} -> {dst}")
    return "CAST_RINT" if mode is RoundMode.CAST_NONE else mode.value


def _cast_pair(op: str, src: DType, dst: DType, loc) -> None:
    if dst not in CASTS.get(src, ()):
        pairs = "; ".join(f"{s} -> {', '.join(d.name for d in ds)}" for s, ds in CASTS.items())
        raise ShapeError(f"{loc}: pl.{op} from {src} to {dst} is not a conversion pyto builds (TCVT's pairs among "
                         f"pyto's dtypes: {pairs})")


def cast(out: Tile, src: Tile, *, mode=RoundMode.CAST_ROUND) -> None:
    """out = src converted to out's dtype, rounded by `mode` (default CAST_ROUND: to nearest, ties away from zero;
    see round_mode), same shape (type_conversion/cast.md). Narrowing float conversions saturate a finite value
    beyond the range to the largest finite one (TCVT's default saturation); float -> int saturates (NaN gives 0),
    except fp16 -> int8 / uint8, which wrap (TCVT turns saturation off there); int32 -> uint8 saturates."""
    loc = vector_loc()
    if loc is None:
        return
    vec(out, "cast", "out", loc, dn=True)
    vec(src, "cast", "src", loc, dn=True)
    same_shape("cast", loc, out, src)
    _cast_pair("cast", src.dtype, out.dtype, loc)
    m = round_mode(mode, src.dtype, out.dtype, "cast", loc)
    _elementwise("cast", "cast", out, [src], loc, attrs={"mode": m}, code=Op.VCAST)


def _fused_cast(op: str, base: str, lhs_dtypes, page: str, passes: int, relu: bool):
    def fn(out: Tile, lhs: Tile, rhs: Tile, *, target_type, mode=RoundMode.CAST_ROUND) -> None:
        loc = vector_loc()
        if loc is None:
            return
        tiles = [vec(t, op, n, loc) for t, n in ((out, "out"), (lhs, "lhs"), (rhs, "rhs"))]
        same(op, loc, lhs, rhs)
        same_shape(op, loc, *tiles)
        dtype_in(op, lhs, lhs_dtypes, page, loc, " lhs")
        want = dtype_at(target_type, loc)
        if want is not out.dtype:
            raise ShapeError(f"{loc}: pl.{op} target_type={want!r} but out {out!r} is {out.dtype}")
        if want is not lhs.dtype:
            _cast_pair(op, lhs.dtype, want, loc)
        m = round_mode(mode, lhs.dtype, want, op, loc)
        rows, cols = extent(out)
        _elementwise(op, op, out, [lhs, rhs], loc, attrs={"mode": m, "base": base, "relu": relu},
                     dsts=[whole(out), (lhs, over(lhs, rows, cols))], passes=passes, code=Op.VCAST)
    fn.__name__ = op
    fn.__doc__ = (f"out = cast({'relu(' if relu else ''}lhs {base} rhs{')' if relu else ''}, target_type, mode) "
                  f"({page}): PyPTO-Pro emits {passes} PTO instructions and keeps the intermediate in `lhs`, which "
                  f"holds it afterwards (the page: lhs is overwritten).")
    return fn


add_relu_cast = _fused_cast("add_relu_cast", "add", frozenset({FP16, FP32}),
                            "fused_vector_computation/add_relu_cast.md", 3, True)
sub_relu_cast = _fused_cast("sub_relu_cast", "sub", frozenset({FP16, FP32}),
                            "fused_vector_computation/sub_relu_cast.md", 3, True)
mul_cast = _fused_cast("mul_cast", "mul", frozenset({INT32, FP16, BF16, FP32}),
                       "fused_vector_computation/mul_cast.md", 2, False)


# ---- compare and select -----------------------------------------------------------------------------------------
def _compare(op: str):
    def fn(out: Tile, lhs: Tile, rhs) -> None:
        loc = vector_loc()
        if loc is None:
            return
        vec(out, op, "out", loc)
        vec(lhs, op, "lhs", loc)
        if out.dtype is not UINT8:
            raise ShapeError(f"{loc}: pl.{op} writes a bit-packed mask into a DT_UINT8 tile (comparison/"
                             f"comparison.md), but out {out!r} is {out.dtype}")
        if out.shape != lhs.shape:
            raise ShapeError(f"{loc}: pl.{op} mask {out!r} {list(out.shape)} must have lhs {lhs!r}'s shape "
                             f"{list(lhs.shape)} (comparison/comparison.md)")
        tile, scalar = _rhs(op, lhs, rhs, loc)
        if tile is not None:
            vec(tile, op, "rhs", loc)
            same(op, loc, lhs, tile)
        rows, cols = extent(out)
        a = {"cmp": op, "cols": cols}
        srcs = [(lhs, over(lhs, rows, cols))] + ([] if tile is None else [(tile, over(tile, rows, cols))])
        if scalar is not None:
            a["scalar"] = scalar
        record(Op.VSCALAR if scalar is not None else Op.VBINARY, op, [(out, mask_bytes(out, rows, cols))], srcs,
               loc, a)
    fn.__name__ = op
    fn.__doc__ = (f"out = (lhs {dict(eq='==', ne='!=', lt='<', le='<=', gt='>', ge='>=')[op]} rhs) as a bit-packed "
                  f"mask (comparison/comparison.md): out is a DT_UINT8 tile of lhs's shape; row r's predicate bits go "
                  f"LSB-first into its first ceil(cols / 8) bytes (pyto's packing: the page calls it target-defined; "
                  f"only pl.select reads it), the rest of the row is left as it was. rhs: a tile or a scalar.")
    return fn


eq, ne, lt, le, gt, ge = (_compare(k) for k in ("eq", "ne", "lt", "le", "gt", "ge"))


def select(out: Tile, mask: Tile, lhs: Tile, rhs, tmp: Tile) -> None:
    """out = lhs where the mask bit is set, else rhs (a tile or a scalar) (selection/select.md). `mask` comes from
    pl.eq/ne/lt/le/gt/ge (a DT_UINT8 tile of lhs's shape); `tmp` is a compatibility argument the op neither reads
    nor writes."""
    loc = vector_loc()
    if loc is None:
        return
    for t, n in ((out, "out"), (mask, "mask"), (lhs, "lhs"), (tmp, "tmp")):
        vec(t, "select", n, loc)
    if mask.dtype is not UINT8 or mask.shape != lhs.shape:
        raise ShapeError(f"{loc}: pl.select mask must be a DT_UINT8 tile of lhs's shape {list(lhs.shape)} (made by "
                         f"pl.eq/ne/lt/le/gt/ge), got {mask!r} {list(mask.shape)} {mask.dtype}")
    tile, scalar = _rhs("select", out, rhs, loc)
    same("select", loc, out, lhs, *([vec(tile, "select", "rhs", loc)] if tile is not None else []))
    dtype_in("select", out, ALL if tile is not None else ALL - {BF16}, "selection/select.md", loc,
             "" if tile is not None else " with a scalar rhs")
    rows, cols = extent(out)
    srcs = [(mask, mask_bytes(mask, rows, cols)), (lhs, over(lhs, rows, cols))]
    if tile is not None:
        srcs.append((tile, over(tile, rows, cols)))
    a = {"cols": cols}
    if scalar is not None:
        a["scalar"] = scalar
    record(Op.VSCALAR if scalar is not None else Op.VBINARY, "select", [whole(out)], srcs, loc, a)


# ---- fused ops ---------------------------------------------------------------------------------------------------
def _fused(op: str, n_in: int, allowed, page: str, passes: int = 1, clobber: bool = False, doc: str = ""):
    def fn(out: Tile, *ins: Tile) -> None:
        loc = vector_loc()
        if loc is None:
            return
        if len(ins) != n_in:
            raise KernelError(f"{loc}: pl.{op} takes out and {n_in} input tiles, got {len(ins)}")
        tiles = [vec(out, op, "out", loc)] + [vec(t, op, f"input {i + 1}", loc) for i, t in enumerate(ins)]
        same(op, loc, *tiles)
        dtype_in(op, out, allowed, page, loc)
        rows, cols = extent(out)
        dsts = [whole(out)] + ([(ins[0], over(ins[0], rows, cols))] if clobber else [])
        srcs = list(ins) + ([out] if op in ("mul_add_dst", "fused_mul_add", "fused_mul_add_relu") else [])
        _elementwise(op, op, out, srcs, loc, dsts=dsts, passes=passes)
    fn.__name__ = op
    fn.__doc__ = f"{doc} ({page})."
    return fn


add_relu = _fused("add_relu", 2, frozenset({FP16, FP32, INT32}), "fused_vector_computation/add_relu.md", 2, True,
                  "out = relu(lhs + rhs): PyPTO-Pro emits TADD into lhs, then TRELU, so lhs holds lhs + rhs afterwards")
sub_relu = _fused("sub_relu", 2, frozenset({FP16, FP32}), "fused_vector_computation/sub_relu.md", 2, True,
                  "out = relu(lhs - rhs): TSUB into lhs, then TRELU, so lhs holds lhs - rhs afterwards")
addc = _fused("addc", 3, _B16_B32, "fused_vector_computation/addc.md", 1, False,
              "out = a + b + c, (a + b) rounded to the dtype before + c (two roundings)")
mul_add_dst = _fused("mul_add_dst", 2, frozenset({INT32, FP16, BF16, FP32}), "fused_vector_computation/mul_add_dst.md",
                     2, False, "out = lhs * rhs + out: TMUL then TADD, the product rounded to the dtype before the add")
fused_mul_add = _fused("fused_mul_add", 2, _B16_B32, "composite_computation/fused_mul_add.md", 1, False,
                       "out = lhs * out + rhs, fused: one rounding of the exact result (pyto's model)")
fused_mul_add_relu = _fused("fused_mul_add_relu", 2, _B16_B32, "fused_vector_computation/fused_mul_add_relu.md", 1,
                            False, "out = relu(out * a + b), fused: one rounding (pyto's model)")


def axpy(out: Tile, src: Tile, alpha) -> None:
    """out = alpha * src + out (composite_computation/axpy.md): fp16 or fp32 tiles of one shape, or src fp16 into
    an fp32 out; alpha is rounded once to src's dtype. Fused: one rounding of the exact result (pyto's model)."""
    loc = vector_loc()
    if loc is None:
        return
    vec(out, "axpy", "out", loc)
    vec(src, "axpy", "src", loc)
    same_shape("axpy", loc, out, src)
    if (src.dtype, out.dtype) not in ((FP16, FP16), (FP32, FP32), (FP16, FP32)):
        raise ShapeError(f"{loc}: pl.axpy takes fp16 or fp32 tiles of one dtype, or an fp16 src into an fp32 out "
                         f"(composite_computation/axpy.md), got src {src.dtype}, out {out.dtype}")
    _elementwise("axpy", "axpy", out, [src, out], loc, scalar=scalar_of(src.dtype, alpha, "pl.axpy alpha", loc))


# ---- part* over valid regions --------------------------------------------------------------------------------------
_PART = {"partadd": "add", "partmax": "maximum", "partmin": "minimum", "partmul": "mul"}


def _part(op: str):
    def fn(out: Tile, src0: Tile, src1: Tile) -> None:
        loc = vector_loc()
        if loc is None:
            return
        tiles = [vec(t, op, n, loc) for t, n in ((out, "out"), (src0, "src0"), (src1, "src1"))]
        same(op, loc, *tiles)
        dtype_in(op, out, ALL, f"fused_vector_computation/{op}.md", loc)
        eo, e0, e1 = extent(out), extent(src0), extent(src1)
        if e0 != eo and e1 != eo:
            raise ShapeError(f"{loc}: pl.{op} needs one source's valid shape equal to out's {list(eo)}: src0 "
                             f"{src0!r} is {list(e0)}, src1 {src1!r} {list(e1)} (fused_vector_computation/{op}.md)")
        small = e1 if e0 == eo else e0
        if small[0] > eo[0] or small[1] > eo[1]:
            raise ShapeError(f"{loc}: pl.{op}'s smaller source valid shape {list(small)} exceeds out's {list(eo)}")
        srcs = [(src0, over(src0, *e0)), (src1, over(src1, *e1))]
        record(Op.VBINARY, op, [(out, region(out))], srcs, loc, {"base": _PART[op], "full": 0 if e0 == eo else 1})
    fn.__name__ = op
    fn.__doc__ = (f"out = src0 {_PART[op]} src1 where both sources are valid; where only the source whose valid "
                  f"shape is out's is, a copy of it (fused_vector_computation/{op}.md): physical shapes equal, at "
                  f"most one source with a smaller valid_shape.")
    return fn


partadd, partmax, partmin, partmul = (_part(k) for k in ("partadd", "partmax", "partmin", "partmul"))

__all__ = ["add", "sub", "mul", "div", "maximum", "minimum", "and_", "shl", "shr", "xor", "neg", "abs", "exp", "log",
           "sqrt", "rsqrt", "recip", "relu", "expands", "cast", "add_relu_cast", "sub_relu_cast", "mul_cast", "eq",
           "ne", "lt", "le", "gt", "ge", "select", "add_relu", "sub_relu", "addc", "mul_add_dst", "fused_mul_add",
           "fused_mul_add_relu", "axpy", "partadd", "partmax", "partmin", "partmul", "CASTS", "round_mode"]
