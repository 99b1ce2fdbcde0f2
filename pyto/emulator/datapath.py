"""What each instruction does to the data (full mode), as numpy: the definition of every op.

EFFECTS maps each Op to its effect; a test checks it covers all of Op. Conversions to fp16/bf16
round to nearest even (numpy/ml_dtypes casts), as Fixpipe and the vector unit do. datapass.py applies
them in schedule order (the cube path's loads, MMADs and stores bound to their arrays once).
"""
from __future__ import annotations

import numpy as np

from ..dtypes import DType
from ..ir import Instr, Op
from .memory import Memory


def _load(ins: Instr, mem: Memory) -> None:
    dst = ins.dsts[0]
    out = mem.view(dst)
    a = ins.attrs
    if "batch" in a:  # from GM: clip to the tensor, zero-fill the rest of the tile (fractal padding)
        out[...] = 0
        d = dst.rect
        for src, (batch, rect) in zip(ins.srcs, a.get("parts", ((a["batch"], d),))):
            block = mem.gm_array(src.obj)[batch, a["r0"]:a["r0"] + a["vr"], a["c0"]:a["c0"] + a["vc"]]
            if a["transpose"]:
                block = block.T
            r, c = rect[0] - d[0], rect[2] - d[2]
            out[r:r + block.shape[0], c:c + block.shape[1]] = block
        return
    block = mem.view(ins.srcs[0])
    if a.get("transpose"):
        block = block.T
    out[...] = block.astype(out.dtype) if block.dtype != out.dtype else block


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


def _floating(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype.name == "bfloat16"


def _store(ins: Instr, mem: Memory) -> None:
    src, dst = ins.srcs[0], ins.dsts[0]
    a = ins.attrs
    gm = mem.gm_array(dst.obj)
    block = mem.view(src)[:a["vr"], :a["vc"]]
    if a.get("relu"):
        block = np.maximum(block, 0)
    region = gm[a["batch"], a["r0"]:a["r0"] + a["vr"], a["c0"]:a["c0"] + a["vc"]]
    if a.get("atomic") == "add":
        # Fixpipe converts to the destination's type first; the atomic unit adds in that type (an fp16 or bf16
        # sum rounds the incoming block, then the sum: two roundings, as on the device)
        acc = np.float32 if _floating(region.dtype) else np.int64
        incoming = convert(block, region.dtype).astype(acc) if _floating(region.dtype) else block.astype(acc)
        region[...] = convert(region.astype(acc) + incoming, region.dtype)
    else:
        region[...] = convert(block, region.dtype)


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


def _mmad(ins: Instr, mem: Memory) -> None:
    """dst (+)= a @ b (+ bias). Products are queued on the L0C tile and summed in one BLAS call when
    the tile is next read (Memory.view flushes): a K loop of n MMADs costs one matmul of depth n*k.
    fp16/bf16 products are exact in fp32 and the sum is fp32, as on the cube; only the order of the
    fp32 additions differs from the hardware's (within the fp32 accumulation bound)."""
    a_acc, b_acc, dst = ins.srcs[0], ins.srcs[1], ins.dsts[0]
    wide = np.float64 if ins.attrs["dtype"] is DType.int8 else np.float32   # int8: exact in float64
    a, b = mem.view(a_acc), mem.view(b_acc)
    if ins.attrs["accumulate"] and mem.queue_product(dst, a, b, wide):
        return
    out = mem.view(dst)   # flushes anything queued on this tile
    if ins.attrs["accumulate"]:
        mem.queue_product(dst, a, b, wide, start=True)
        return
    out[...] = mem.view(ins.srcs[2]) if ins.attrs["bias"] else 0
    mem.queue_product(dst, a, b, wide, start=True)


_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
           "maximum": np.maximum, "minimum": np.minimum}
_UNARY = {"copy": lambda x: x, "exp": np.exp, "abs": np.abs, "sqrt": np.sqrt, "relu": lambda x: np.maximum(x, 0), "ln": np.log,
          "reciprocal": lambda x: np.float32(1) / x, "rsqrt": lambda x: np.float32(1) / np.sqrt(x)}
_SCALAR = {"adds": np.add, "muls": np.multiply}
_REDUCE = {"maximum": np.max, "sum": np.sum}
_EXPAND = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}


def _f32(x: np.ndarray) -> np.ndarray:
    """Vector units compute fp16/bf16 in fp32 and round on write."""
    return x.astype(np.float32) if _floating(x.dtype) else x


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
        scratch[...] = np.nan if _floating(scratch.dtype) else np.iinfo(scratch.dtype).min


def _nothing(ins: Instr, mem: Memory) -> None:
    return None


EFFECTS = {
    Op.LOAD: _load, Op.STORE: _store, Op.MOVE: _move, Op.MMAD: _mmad,
    Op.VBINARY: _vector, Op.VSCALAR: _vector, Op.VUNARY: _vector, Op.VCAST: _vector, Op.VDUP: _vector,
    Op.VREDUCE: _vector, Op.VEXPAND: _vector,
    Op.SET_FLAG: _nothing, Op.WAIT_FLAG: _nothing, Op.BARRIER: _nothing, Op.SYNC_ALL: _nothing,
    Op.MUTEX_LOCK: _nothing, Op.MUTEX_UNLOCK: _nothing,
}
