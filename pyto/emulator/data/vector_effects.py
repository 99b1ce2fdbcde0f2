"""What each tile vector op does to the data (full mode), as numpy over the op's operand rectangles: the
definition of PyPTO-Pro's vector ops on pyto, and pyto's model of how the V unit computes them.

The numerics model (sources: PTO-ISA's A5 implementations, include/pto/npu/a5/*.hpp, where they show it; pyto's
choice, stated, where nothing does):
- fp16 / bf16 / fp32 arithmetic (add sub mul div max min neg abs relu, the expands, compare) is IEEE's: computed
  in fp32 and rounded once to the tile's dtype (to nearest even; overflow is inf). fp32 holds 2p + 2 bits of
  fp16's and bf16's p, so this is the correctly rounded fp16 / bf16 result, not a double rounding.
- sqrt and recip are correctly rounded; exp, log and rsqrt are pyto's model of an accurate unit: the float64
  function rounded to fp32, then to the dtype (within half a dtype ulp plus 2^-24 relative). The hardware's own
  approximations are not published: a kernel must not depend on their last fp32 bit.
- Integer ops are exact and wrap (two's complement); int division rounds toward zero (x / 0 saturates, 0 / 0 is
  0: undefined on the hardware); abs / neg of the minimum wrap to it; a shift by a negative amount or by the
  width or more gives 0 (shr of a negative signed value: -1).
- The fused ops: addc rounds (a + b) before + c and mul_add_dst the product before the add (PyPTO-Pro emits two
  instructions); fused_mul_add, fused_mul_add_relu and axpy round once (float64 result, rounded to the dtype).
- sum(dim=0), TROWSUM: each row in 256-byte chunks (64 fp32 / 128 fp16 lanes, the last chunk zero-padded); each
  chunk's lanes summed (vcadd: pyto rounds the exact sum once to the dtype) and the chunk sums added in order in
  the dtype. sum(dim=1), TCOLSUM: dst = row 0; then dst += (row 2j+1 + row 2j+2), in the dtype; an odd last row
  added alone. max / min / argmax / argmin are exact (argmax / argmin: the first index of a tie).
- cast: RoundMode as vector_elementwise.round_mode says; narrowing float conversions saturate finite values
  beyond the range to the largest finite one (TCVT's saturation on; inf and NaN pass through), float -> int
  saturates (NaN to 0) except fp16 -> int8 / uint8, which wrap (saturation off there; NaN and inf give 0).
- compare: row r's bits LSB-first into the first ceil(cols / 8) bytes of mask row r; select reads them back.
"""
from __future__ import annotations

import numpy as np

from ...ir import Instr, Op
from ...lazy import evaluate
from .memory import Memory

_F32 = np.dtype(np.float32)


def is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype.name == "bfloat16"


# ---- rounding ---------------------------------------------------------------------------------------------------
def _bits(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.uint16 if dtype.itemsize == 2 else np.uint32)


def _nearest_even(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """float64 x rounded once, to nearest even, to a float dtype (bf16 through fp32 rounded to odd: one rounding)."""
    if dtype.name != "bfloat16":
        return x.astype(dtype)
    f = x.astype(np.float32)
    inexact = np.isfinite(f) & (f.astype(np.float64) != x)
    toward0 = inexact & ((f.astype(np.float64) > x) == (x > 0))
    b = f.view(np.uint32).copy()
    b[toward0] -= np.uint32(1)                      # the fp32 neighbour toward zero (|f| > 0 there)
    b[inexact] |= np.uint32(1)                      # then the last bit set: round to odd
    return b.view(np.float32).astype(dtype)


def _neighbour(y: np.ndarray, up: np.ndarray) -> np.ndarray:
    """The next float of y's dtype toward +inf where `up`, toward -inf elsewhere (y finite)."""
    bt = _bits(y.dtype)
    b = y.view(bt).astype(np.int64)
    sign = b >> (8 * y.dtype.itemsize - 1)
    mag = b & ~(np.int64(1) << (8 * y.dtype.itemsize - 1))
    zero = mag == 0
    away = (sign == 0) == up                           # moving away from zero
    nb = np.where(away, b + 1, b - 1)
    nb = np.where(zero, np.where(up, 1, (1 << (8 * y.dtype.itemsize - 1)) + 1), nb)   # +-0 -> the smallest subnormal
    return nb.astype(bt).view(y.dtype)


def round_float(x: np.ndarray, dtype: np.dtype, mode: str, saturate: bool) -> np.ndarray:
    """float64 x (exact source values) converted to a float dtype by `mode`; `saturate`: a finite x beyond the
    range gives the largest finite value instead of inf."""
    with np.errstate(all="ignore"):
        y = _nearest_even(x, dtype)
        if mode not in ("CAST_RINT",):
            yd = y.astype(np.float64)
            fin = np.isfinite(x)
            inexact = fin & (yd != x)
            if mode == "CAST_ODD":
                z = _directed(y, yd, x, inexact, "CAST_TRUNC")
                b = z.view(_bits(dtype)).copy()
                fz = np.isfinite(z.astype(np.float64)) & inexact
                b[fz] |= 1
                y = b.view(dtype)
            elif mode == "CAST_ROUND":
                other = _neighbour(np.where(np.isfinite(yd), y, np.zeros_like(y)), x > yd)
                od = other.astype(np.float64)
                tie = inexact & np.isfinite(yd) & (np.abs(od - x) == np.abs(yd - x)) & (np.abs(od) > np.abs(yd))
                y = np.where(tie, other, y)
            else:
                y = _directed(y, yd, x, inexact, mode)
        if saturate:
            big = np.isfinite(x) & ~np.isfinite(y.astype(np.float64))
            if big.any():
                top = np.array(np.finfo(np.float32).max if dtype == _F32 else _max_of(dtype), dtype)
                y = np.where(big, np.where(x > 0, top, -top), y)
        return y.astype(dtype)


def _max_of(dtype: np.dtype) -> float:
    import ml_dtypes
    return float(ml_dtypes.finfo(dtype).max)


def _directed(y: np.ndarray, yd: np.ndarray, x: np.ndarray, inexact: np.ndarray, mode: str) -> np.ndarray:
    """RNE result y moved to the floor / ceil / truncation of x where it is on the wrong side."""
    if mode == "CAST_TRUNC":
        want_up = x < 0
    elif mode == "CAST_CEIL":
        want_up = np.ones(x.shape, bool)
    else:
        want_up = np.zeros(x.shape, bool)
    wrong = inexact & np.where(want_up, yd < x, yd > x)
    safe = np.where(np.isfinite(yd), yd, np.sign(yd) * _limit(y.dtype)).astype(y.dtype)
    step = _neighbour(safe, want_up)
    fixed = np.where(np.isfinite(yd), step, safe)        # an RNE overflow to inf: the largest finite is the floor
    return np.where(wrong, fixed, y)


def _limit(dtype: np.dtype) -> float:
    return float(np.finfo(dtype).max) if dtype.kind == "f" else _max_of(dtype)


def round_int(x: np.ndarray, dtype: np.dtype, mode: str, wrap: bool) -> np.ndarray:
    """float64 x to an integer dtype: rounded by `mode`, then saturated (NaN to 0) or, `wrap`, taken modulo 2^bits
    (NaN and inf to 0)."""
    with np.errstate(all="ignore"):
        if mode == "CAST_ROUND":
            r = np.where(x >= 0, np.floor(x + 0.5), np.ceil(x - 0.5))
        else:
            r = {"CAST_RINT": np.rint, "CAST_FLOOR": np.floor, "CAST_CEIL": np.ceil, "CAST_TRUNC": np.trunc}[mode](x)
        info = np.iinfo(dtype)
        if wrap:
            r = np.where(np.isfinite(r), r, 0.0)
            return np.mod(r, 2.0 ** (8 * dtype.itemsize)).astype(np.int64).astype(dtype)
        return np.nan_to_num(np.clip(r, info.min, info.max), nan=0.0).astype(dtype)


def cast(x: np.ndarray, dtype: np.dtype, mode: str) -> np.ndarray:
    """The vector unit's conversion of x to `dtype` (module docstring)."""
    if is_float(dtype):
        if x.dtype == dtype == _F32:                  # TCVT fp32 -> fp32: an integral value by the mode
            return round_int_float(x.astype(np.float64), mode).astype(_F32)
        return round_float(x.astype(np.float64), dtype, mode, saturate=x.dtype.itemsize >= dtype.itemsize or
                           x.dtype.name == "bfloat16")
    if is_float(x.dtype):
        return round_int(x.astype(np.float64), dtype, mode, wrap=x.dtype == np.float16 and dtype.itemsize == 1)
    info = np.iinfo(dtype)
    return np.clip(x.astype(np.int64), info.min, info.max).astype(dtype)


def round_int_float(x: np.ndarray, mode: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        if mode == "CAST_ROUND":
            return np.where(x >= 0, np.floor(x + 0.5), np.ceil(x - 0.5))
        return {"CAST_RINT": np.rint, "CAST_FLOOR": np.floor, "CAST_CEIL": np.ceil, "CAST_TRUNC": np.trunc,
                "CAST_ODD": np.rint}[mode](x)


def write(out: np.ndarray, res: np.ndarray) -> None:
    """An arithmetic result into the tile: floats rounded once to nearest even (overflow to inf), ints wrap."""
    with np.errstate(all="ignore"):
        if is_float(out.dtype):
            out[...] = res if res.dtype == out.dtype else (
                _nearest_even(res, out.dtype) if res.dtype == np.float64 else res.astype(out.dtype))
        else:
            out[...] = res.astype(np.int64).astype(out.dtype) if res.dtype.kind == "f" else res.astype(out.dtype)


def wide(x: np.ndarray) -> np.ndarray:
    """The compute type of an operand: fp32 for fp16 / bf16 / fp32, int64 for ints (exact; written back wrapping)."""
    return x.astype(np.float32) if is_float(x.dtype) else x.astype(np.int64)


def _scalar(attrs: dict, like: np.ndarray):
    return like.dtype.type(attrs["scalar"])


# ---- the ops ------------------------------------------------------------------------------------------------------
def _shift(a: np.ndarray, s: np.ndarray, left: bool, dtype: np.dtype) -> np.ndarray:
    bits = 8 * dtype.itemsize
    ok = (s >= 0) & (s < bits)
    sc = np.where(ok, s, 0)
    if left:
        return np.where(ok, (a << sc), 0)
    signed_fill = np.where(a < 0, -1, 0) if dtype.kind == "i" else 0
    return np.where(ok, a >> sc, signed_fill)


def _int_div(a: np.ndarray, b: np.ndarray, dtype: np.dtype) -> np.ndarray:
    with np.errstate(all="ignore"):
        q = np.trunc(a.astype(np.float64) / b.astype(np.float64))
    info = np.iinfo(dtype)
    return np.nan_to_num(np.clip(q, info.min, info.max), nan=0.0).astype(np.int64)


def _binary(kind: str, a: np.ndarray, b, dtype: np.dtype) -> np.ndarray:
    if kind == "add":
        return a + b
    if kind == "sub":
        return a - b
    if kind == "mul":
        return a * b
    if kind == "div":
        return a / b if is_float(dtype) else _int_div(a, np.asarray(b), dtype)
    if kind == "maximum":
        return np.maximum(a, b)
    if kind == "minimum":
        return np.minimum(a, b)
    if kind == "and_":
        return a & b
    if kind == "xor":
        return a ^ b
    if kind in ("shl", "shr"):
        return _shift(a, np.asarray(b), kind == "shl", dtype)
    raise KeyError(kind)


def _elementwise(ins: Instr, out: list, src: list) -> None:
    a = ins.attrs
    kind, o = a["kind"], out[0]
    rhs = wide(src[1]) if len(src) > 1 else _scalar(a, wide(src[0]))
    write(o, _binary(kind, wide(src[0]), rhs, o.dtype))
    if kind == "xor":                        # the workspace: undefined after (the dtype's minimum)
        out[1][...] = np.iinfo(out[1].dtype).min


def _through_fp32(fn):
    return lambda x: fn(x.astype(np.float64)).astype(np.float32)


_UNARY = {
    "neg": np.negative, "abs": np.abs, "relu": lambda x: np.maximum(x, x.dtype.type(0)), "move": lambda x: x,
    "sqrt": _through_fp32(np.sqrt), "recip": _through_fp32(lambda x: 1.0 / x), "exp": _through_fp32(np.exp),
    "log": _through_fp32(np.log), "rsqrt": _through_fp32(lambda x: 1.0 / np.sqrt(x)),
}


def _unary(ins: Instr, out: list, src: list) -> None:
    kind = ins.attrs["kind"]
    if kind == "move":
        out[0][...] = src[0]
        return
    if kind == "transpose":
        out[0][...] = src[0].T
        return
    write(out[0], _UNARY[kind](wide(src[0])))


def _fill(ins: Instr, out: list, src: list) -> None:
    a, o = ins.attrs, out[0]
    if a["kind"] == "fill_index":
        write(o, a["scalar"] + np.arange(o.size, dtype=np.int64).reshape(o.shape))
    else:
        o[...] = np.array(a["scalar"]).astype(o.dtype)


def _cast(ins: Instr, out: list, src: list) -> None:
    a = ins.attrs
    if "base" not in a:
        out[0][...] = cast(src[0], out[0].dtype, a["mode"])
        return
    lhs = out[1] if len(out) > 1 else out[0]
    inter = np.empty_like(src[0])
    write(inter, _binary(a["base"], wide(src[0]), wide(src[1]), inter.dtype))
    if a["relu"]:
        inter = np.maximum(inter, inter.dtype.type(0))
    lhs[...] = inter                          # PyPTO-Pro keeps the intermediate in lhs
    out[0][...] = inter if out[0].dtype == inter.dtype else cast(inter, out[0].dtype, a["mode"])


def _compare(ins: Instr, out: list, src: list) -> None:
    a = ins.attrs
    x = wide(src[0])
    y = wide(src[1]) if len(src) > 1 else _scalar(a, x)
    bits = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
            "ge": np.greater_equal}[a["kind"]](x, y)
    out[0][...] = np.packbits(bits, axis=1, bitorder="little")


def _select(ins: Instr, out: list, src: list) -> None:
    a, o = ins.attrs, out[0]
    bits = np.unpackbits(src[0], axis=1, count=a["cols"], bitorder="little").astype(bool)
    rhs = src[2] if len(src) > 2 else np.array(a["scalar"]).astype(o.dtype)
    o[...] = np.where(bits, src[1], rhs)


def _fused(ins: Instr, out: list, src: list) -> None:
    kind, o = ins.attrs["kind"], out[0]
    if kind in ("add_relu", "sub_relu"):
        inter = np.empty_like(src[0])
        write(inter, _binary(kind[:3], wide(src[0]), wide(src[1]), inter.dtype))
        if len(out) > 1:
            out[1][...] = inter               # TADD / TSUB into lhs, then TRELU
        o[...] = np.maximum(inter, inter.dtype.type(0))
        return
    if kind in ("addc", "mul_add_dst"):
        first = np.empty_like(o)
        write(first, _binary("add" if kind == "addc" else "mul", wide(src[0]), wide(src[1]), o.dtype))
        write(o, wide(first) + wide(src[2]))
        return
    # fused: one rounding of the exact result
    if kind == "axpy":
        x, acc = src[0], src[1]
        res = np.float64(ins.attrs["scalar"]) * x.astype(np.float64) + acc.astype(np.float64)
    else:
        f = [s.astype(np.float64) if is_float(o.dtype) else s.astype(np.int64) for s in src]
        res = f[0] * f[2] + f[1]                          # lhs * out + rhs; relu(out * a + b)
        if kind == "fused_mul_add_relu":
            res = np.maximum(res, 0)
    write(o, res)


def _part(ins: Instr, out: list, src: list) -> None:
    a, o = ins.attrs, out[0]
    full, small = src[a["full"]], src[1 - a["full"]]
    o[...] = full
    r, c = small.shape
    write(o[:r, :c], _binary(a["base"], wide(src[0][:r, :c]), wide(src[1][:r, :c]), o.dtype))


def _row_sum(x: np.ndarray) -> np.ndarray:
    rows, cols = x.shape
    if not is_float(x.dtype):
        return x.astype(np.int64).sum(axis=1, keepdims=True)
    lanes = 256 // x.dtype.itemsize
    n = -(-cols // lanes)
    pad = np.zeros((rows, n * lanes), np.float64)
    pad[:, :cols] = x
    chunks = _nearest_even(pad.reshape(rows, n, lanes).sum(axis=2), x.dtype)
    acc = chunks[:, :1].copy()
    for k in range(1, n):                          # one step per 256-byte chunk, vectorised over the rows
        acc = _nearest_even(acc.astype(np.float64) + chunks[:, k:k + 1].astype(np.float64), x.dtype)
    return acc


def _col_sum(x: np.ndarray) -> np.ndarray:
    if not is_float(x.dtype):
        return x.astype(np.int64).sum(axis=0, keepdims=True)
    rnd = lambda v: _nearest_even(v, x.dtype).astype(np.float64)      # noqa: E731
    acc = x[:1].astype(np.float64)
    rows = x.shape[0]
    j = 1
    while j + 1 < rows:                             # dst += (row j + row j+1), as TCOLSUM pairs them
        acc = rnd(acc + rnd(x[j:j + 1].astype(np.float64) + x[j + 1:j + 2].astype(np.float64)))
        j += 2
    if j < rows:
        acc = rnd(acc + x[j:j + 1].astype(np.float64))
    return acc


def _reduce(ins: Instr, out: list, src: list) -> None:
    a, x = ins.attrs, src[0]
    axis = 1 - a["dim"]
    kind = a["kind"]
    if kind == "sum":
        res = _row_sum(x) if a["dim"] == 0 else _col_sum(x)
    elif kind in ("maximum", "minimum"):
        res = (np.max if kind == "maximum" else np.min)(x, axis=axis, keepdims=True)
    else:
        res = (np.argmax if kind == "argmax" else np.argmin)(wide(x), axis=axis)
        res = np.expand_dims(res, axis)
    write(out[0], np.asarray(res))


def _expand(ins: Instr, out: list, src: list) -> None:
    a = ins.attrs
    write(out[0], _binary(a["base"], wide(src[0]), wide(src[1]), out[0].dtype))


_BY_KIND = {
    **{k: _elementwise for k in ("add", "sub", "mul", "div", "maximum", "minimum", "and_", "shl", "shr", "xor")},
    **{k: _unary for k in (*_UNARY, "transpose")},
    "expands": _fill, "fill_index": _fill,
    **{k: _cast for k in ("cast", "add_relu_cast", "sub_relu_cast", "mul_cast")},
    **{k: _compare for k in ("eq", "ne", "lt", "le", "gt", "ge")}, "select": _select,
    **{k: _fused for k in ("add_relu", "sub_relu", "addc", "mul_add_dst", "fused_mul_add", "fused_mul_add_relu",
                           "axpy")},
    **{k: _part for k in ("partadd", "partmax", "partmin", "partmul")},
    **{k: _reduce for k in ("sum", "argmax", "argmin")},
    **{k: _expand for k in ("expand_max", "expand_min", "expand_mul", "expand_sub", "expand_div")},
}


def vector(ins: Instr, mem: Memory) -> None:
    """Apply one vector instruction: each operand's view (transposed for a DN tile), then the op's effect."""
    t = ins.attrs["t"]
    nd = len(ins.dsts)
    if not isinstance(ins.attrs.get("scalar", 0), (int, float)):     # a pl.getval value, read now
        ins = Instr(ins.op, ins.pipe, ins.srcs, ins.dsts, {**ins.attrs, "scalar": evaluate(ins.attrs["scalar"])},
                    ins.loc, ins.core, ins.index)
    views = [mem.view(acc) for acc in (*ins.dsts, *ins.srcs)]
    views = [v.T if tr else v for v, tr in zip(views, t)]
    fn = _BY_KIND[ins.attrs["kind"]]
    if ins.op is Op.VREDUCE:
        fn = _reduce
    with np.errstate(all="ignore"):
        fn(ins, views[:nd], views[nd:])
