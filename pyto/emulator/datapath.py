"""What the Fixpipe/MTE3 moves between tiles and the vector ops do to the data (full mode), as numpy: their
definition, and the conversion rule every op that changes a dtype follows (`convert`).

EFFECTS maps Op.MOVE and each vector op to its effect. The cube path's ops (LOAD, STORE, MMAD) are defined by
the data pass's own handlers (datapass.HANDLERS: copies and products between views bound once, fused or per
MMAD), synchronisation ops do nothing to data (ir.SYNC_OPS); a test checks that each Op is in exactly one of
the three. Conversions to fp16/bf16 round to nearest even (numpy/ml_dtypes casts), as Fixpipe and the vector
unit do. datapass.py applies EFFECTS in schedule order.
"""
from __future__ import annotations

import numpy as np

from ..ir import Instr, Op
from .memory import Memory


def convert(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Convert with round-to-nearest-even: float to narrower float by the cast itself (overflow to inf),
    float to integer by rint and saturation to the integer's range, NaN to 0 (as saturating float-to-int
    conversions do); integer to integer wraps (int32 MMAD)."""
    if x.dtype == dtype:
        return x
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype.kind == "i" and x.dtype.kind != "i":
            info = np.iinfo(dtype)
            return np.nan_to_num(np.clip(np.rint(x.astype(np.float64)), info.min, info.max), nan=0.0).astype(dtype)
        return x.astype(dtype)


def is_floating(dtype: np.dtype) -> bool:
    """fp16, bf16, fp32 (numpy kind "f" or ml_dtypes' bfloat16)."""
    return dtype.kind == "f" or dtype.name == "bfloat16"


def _move(ins: Instr, mem: Memory) -> None:
    src = mem.view(ins.srcs[0])
    for i, dst in enumerate(ins.dsts):
        part = src
        split = ins.attrs.get("split")
        if split is not None:
            rect = [r for r in split if r is not None][i]
            s = ins.srcs[0].rect
            part = src[rect[0] - s[0]:rect[1] - s[0], rect[2] - s[2]:rect[3] - s[2]]
        out = mem.view(dst)
        out[...] = convert(np.maximum(part, 0) if ins.attrs.get("relu") else part, out.dtype)


_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
           "maximum": np.maximum, "minimum": np.minimum}
_UNARY = {"copy": lambda x: x, "exp": np.exp, "abs": np.abs, "sqrt": np.sqrt, "relu": lambda x: np.maximum(x, 0), "ln": np.log,
          "reciprocal": lambda x: np.float32(1) / x, "rsqrt": lambda x: np.float32(1) / np.sqrt(x)}
_SCALAR = {"adds": np.add, "muls": np.multiply}
_REDUCE = {"maximum": np.max, "sum": np.sum}
_EXPAND = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}


def _f32(x: np.ndarray) -> np.ndarray:
    """Vector units compute fp16/bf16 in fp32 and round on write."""
    return x.astype(np.float32) if is_floating(x.dtype) else x


def _vector(ins: Instr, mem: Memory) -> None:
    kind = ins.attrs["kind"]
    out = mem.view(ins.dsts[0])
    srcs = [_f32(mem.view(s)) for s in ins.srcs]
    with np.errstate(all="ignore"):
        if ins.op is Op.VBINARY:
            res = _BINARY[kind](srcs[0], srcs[1])
        elif ins.op is Op.VSCALAR:
            res = _SCALAR[kind](srcs[0], srcs[0].dtype.type(ins.attrs["scalar"]))
        elif ins.op is Op.VUNARY:
            res = _UNARY[kind](srcs[0])
        elif ins.op is Op.VCAST:
            res = srcs[0]
        elif ins.op is Op.VDUP:
            res = np.full(out.shape, ins.attrs["scalar"], dtype=np.int32 if out.dtype.kind == "i" else np.float32)
        elif ins.op is Op.VREDUCE:
            res = _REDUCE[kind](srcs[0], axis=1, keepdims=True)
        else:
            res = _EXPAND[kind](srcs[0], srcs[1])
    if kind == "div" and out.dtype.kind in "iu":
        res = np.trunc(res)      # integer division rounds toward zero, as C's (the float quotient is exact enough)
    out[...] = convert(np.asarray(res), out.dtype)
    if len(ins.dsts) > 1:    # a reduction's scratch: undefined after it (NaN, the integer minimum in an int tile,
        scratch = mem.view(ins.dsts[1])          # so a kernel reading it sees garbage)
        scratch[...] = np.nan if is_floating(scratch.dtype) else np.iinfo(scratch.dtype).min


EFFECTS = {
    Op.MOVE: _move,
    Op.VBINARY: _vector, Op.VSCALAR: _vector, Op.VUNARY: _vector, Op.VCAST: _vector, Op.VDUP: _vector,
    Op.VREDUCE: _vector, Op.VEXPAND: _vector,
}
