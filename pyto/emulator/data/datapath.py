"""What the Fixpipe/MTE3 moves between tiles and the vector ops do to the data (full mode), as numpy: their
definition, and the conversion rule every op that changes a dtype follows (`convert`).

EFFECTS maps Op.MOVE and each vector op to its effect (the vector ops': vector_effects.py, with pyto's model of
the V unit's numerics). The cube path's ops (LOAD, STORE, MMAD) are defined by
the data pass's own handlers (datapass.HANDLERS: copies and products between views bound once, fused or per
MMAD), synchronisation ops do nothing to data (ir.SYNC_OPS); a test checks that each Op is in exactly one of
the three. Conversions to fp16/bf16 round to nearest even (fp32 -> fp16 by narrow.py's loop, numpy's cast bit for
bit; the others by the numpy/ml_dtypes casts), as Fixpipe and the vector unit do (the vector ops' own conversions,
with their RoundModes: vector_effects.py). datapass.py applies EFFECTS in schedule order.
"""
from __future__ import annotations

import numpy as np

from ...ir import Instr, Op
from .memory import Memory
from .narrow import fp16_into, to_fp16
from .vector_effects import vector

_F32, _F16 = np.dtype(np.float32), np.dtype(np.float16)


def convert(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Convert with round-to-nearest-even: float to narrower float by the cast itself (overflow to inf),
    float to integer by rint and saturation to the integer's range, NaN to 0 (as saturating float-to-int
    conversions do); integer to integer wraps (int32 MMAD)."""
    if x.dtype == dtype:
        return x
    if x.dtype == _F32 and dtype == _F16:
        return to_fp16(x)
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype.kind in "iu" and x.dtype.kind not in "iu":
            info = np.iinfo(dtype)
            return np.nan_to_num(np.clip(np.rint(x.astype(np.float64)), info.min, info.max), nan=0.0).astype(dtype)
        return x.astype(dtype)


def convert_into(x: np.ndarray, out: np.ndarray) -> None:
    """out[...] = convert(x, out.dtype), fp32 -> fp16 straight into `out` (no temporary)."""
    if x.dtype == _F32 and out.dtype == _F16:
        fp16_into(x, out)
    else:
        out[...] = convert(x, out.dtype)


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
        convert_into(np.maximum(part, 0) if ins.attrs.get("relu") else part, out)


EFFECTS = {
    Op.MOVE: _move,
    Op.VBINARY: vector, Op.VSCALAR: vector, Op.VUNARY: vector, Op.VCAST: vector, Op.VDUP: vector,
    Op.VREDUCE: vector, Op.VEXPAND: vector,
}
