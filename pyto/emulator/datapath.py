"""What each instruction does to the data (full mode), as numpy: the definition of every op, and the
data pass that applies them in schedule order.

EFFECTS maps each Op to its effect; a test checks it covers all of Op. Conversions to fp16/bf16
round to nearest even (numpy/ml_dtypes casts), as Fixpipe and the vector unit do. DataPass binds
each instruction once to the arrays it touches (the cube path's loads, MMADs and stores with their
views resolved; any other op through EFFECTS), so computing another set of inputs is only the copies
and the arithmetic.
"""
from __future__ import annotations

from functools import partial
from typing import Callable, Optional

import numpy as np

from ..dtypes import DType
from ..ir import Buf, GMTensor, Instr, Op
from .memory import Memory, region_view
from .origins import Origins


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


def _cast(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
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


def _store(ins: Instr, mem: Memory) -> None:
    src, dst = ins.srcs[0], ins.dsts[0]
    a = ins.attrs
    gm = mem.gm_array(dst.obj)
    block = mem.view(src)[:a["vr"], :a["vc"]]
    region = gm[a["batch"], a["r0"]:a["r0"] + a["vr"], a["c0"]:a["c0"] + a["vc"]]
    if a.get("atomic") == "add":
        acc = np.float32 if region.dtype.kind == "f" else np.int64
        region[...] = _cast(region.astype(acc) + block.astype(acc), region.dtype)
    else:
        region[...] = _cast(block, region.dtype)


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
        out[...] = _cast(part, out.dtype)


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
_UNARY = {"exp": np.exp, "abs": np.abs, "sqrt": np.sqrt, "relu": lambda x: np.maximum(x, 0), "ln": np.log,
          "reciprocal": lambda x: np.float32(1) / x, "rsqrt": lambda x: np.float32(1) / np.sqrt(x)}
_SCALAR = {"adds": np.add, "muls": np.multiply}
_REDUCE = {"max": np.max, "sum": np.sum}
_EXPAND = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}


def _floating(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype.name == "bfloat16"


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
    out[...] = _cast(np.asarray(res), out.dtype)
    if len(ins.dsts) > 1:    # a reduction's scratch: undefined after it (NaN, so a kernel reading it sees garbage)
        scratch = mem.view(ins.dsts[1])
        if _floating(scratch.dtype):
            scratch[...] = np.nan


def _nothing(ins: Instr, mem: Memory) -> None:
    return None


EFFECTS = {
    Op.LOAD: _load, Op.STORE: _store, Op.MOVE: _move, Op.MMAD: _mmad,
    Op.VBINARY: _vector, Op.VSCALAR: _vector, Op.VUNARY: _vector, Op.VCAST: _vector, Op.VDUP: _vector,
    Op.VREDUCE: _vector, Op.VEXPAND: _vector,
    Op.SET_FLAG: _nothing, Op.WAIT_FLAG: _nothing, Op.BARRIER: _nothing, Op.SYNC_ALL: _nothing,
}


class _Binder:
    """Binds a data pass's steps in the schedule's order: the cube path's loads, MMADs and stores as copies
    and products between resolved views, any other op through EFFECTS; with Origins (origins.py) an MMAD
    reads a copied operand at its source and copies nobody reads are left out."""

    def __init__(self, mem: Memory, inputs: set):
        self.mem, self.origins = mem, Origins(inputs)
        self.steps: list = []
        self.copies: set = set()      # indices of the steps that are elidable copies

    def add(self, ins: Instr) -> None:
        if ins.op in _NO_DATA:
            return
        if ins.op is Op.LOAD:
            self._load(ins)
        elif ins.op is Op.MMAD:
            self._mmad(ins)
        else:
            for acc in ins.srcs:
                self.origins.read(acc)
            for acc in ins.dsts:
                if not isinstance(acc.obj, GMTensor):
                    self.origins.wrote(acc)
            self.steps.append(self._store(ins) if ins.op is Op.STORE else partial(EFFECTS[ins.op], ins, self.mem))

    def finish(self) -> list:
        """The steps to run: all but the copies nothing reads (a copy's step is made only now, when it runs)."""
        needed = self.origins.needed
        return [f() if i in self.copies else f for i, f in enumerate(self.steps)
                if i not in self.copies or i in needed]

    def _copy(self, make: Callable[[], Callable[[], None]]) -> int:
        """Add an elidable copy; `make` builds its step if it turns out to be needed."""
        self.copies.add(len(self.steps))
        self.steps.append(make)
        return len(self.steps) - 1

    def _load(self, ins: Instr) -> None:
        mem, origins = self.mem, self.origins
        dst, a = ins.dsts[0], ins.attrs
        if "batch" not in a:          # tile -> tile: L1 -> L0A/L0B/BT
            src = ins.srcs[0]
            t = bool(a.get("transpose"))
            if src.obj.dtype is dst.obj.dtype and dst.obj.buf in _L0AB:
                step = self._copy(lambda: partial(np.copyto, mem.bound(dst), _oriented(mem.bound(src), t)))
                origins.tile_copy(dst, src, t, step)
                return
            origins.read(src)
            origins.wrote(dst)
            out, block = mem.bound(dst), mem.bound(src)
            view = block.T if t else block
            self.steps.append(partial(np.copyto, out, view) if view.dtype == out.dtype else partial(_load, ins, mem))
            return
        d = dst.rect
        parts = a.get("parts", ((a["batch"], d),))
        t = bool(a["transpose"])
        h, w = (a["vc"], a["vr"]) if t else (a["vr"], a["vc"])       # the block's shape in the tile
        if len(parts) == 1 and (h, w) == (d[1] - d[0], d[3] - d[2]):  # covers dst: nothing to zero-fill
            tensor = ins.srcs[0].obj
            region = (parts[0][0], a["r0"], a["r0"] + a["vr"], a["c0"], a["c0"] + a["vc"], t)
            step = self._copy(lambda: partial(np.copyto, mem.bound(dst), _gm_block(mem, tensor, region)))
            if dst.obj.buf is Buf.L1 and tensor in mem.tensors:
                origins.gm_copy(dst, tensor, region, step)
            else:
                origins.wrote(dst, step)
            return
        origins.wrote(dst)
        out = mem.bound(dst)
        pieces = []                   # (view of the destination, GM block)
        for src, (batch, rect) in zip(ins.srcs, parts):
            block = _gm_block(mem, src.obj, (batch, a["r0"], a["r0"] + a["vr"], a["c0"], a["c0"] + a["vc"], t))
            r, c = rect[0] - d[0], rect[2] - d[2]
            pieces.append((out[r:r + block.shape[0], c:c + block.shape[1]], block))

        def load_clipped() -> None:
            out[...] = 0
            for view, block in pieces:
                view[...] = block
        self.steps.append(load_clipped)

    def _store(self, ins: Instr) -> Callable[[], None]:
        mem = self.mem
        src, a = ins.srcs[0], ins.attrs
        if a.get("atomic") == "add":
            return partial(_store, ins, mem)
        store, pending = src.obj, mem.pending
        key = id(store)
        r0, _, c0, _ = src.rect
        block = mem.tile(store)[r0:r0 + a["vr"], c0:c0 + a["vc"]]
        region = mem.gm_array(ins.dsts[0].obj)[a["batch"], a["r0"]:a["r0"] + a["vr"], a["c0"]:a["c0"] + a["vc"]]

        def store_block() -> None:
            if key in pending:
                mem.flush(store)
            region[...] = _cast(block, region.dtype)
        return store_block

    def _operand(self, acc) -> tuple:
        """An MMAD operand: (view, region spec of a widened input or None), read at its source where origins
        allow, else the tile."""
        at = self.origins.operand(acc)
        if at is None:
            self.origins.read(acc)
            return self.mem.bound(acc), None
        if at[0] == "tile":
            return _oriented(self.mem.bound(at[1]), at[2]), None
        _, tensor, (batch, r0, r1, c0, c1, t) = at
        self.mem.widened.add(id(tensor))
        spec = (self.mem.wide(tensor), batch, r0, r1, c0, c1, t)
        return region_view(spec), spec

    def _mmad(self, ins: Instr) -> None:
        """_mmad with its operand views resolved."""
        mem = self.mem
        dst, at = ins.dsts[0], ins.attrs
        wide = np.float64 if at["dtype"] is DType.int8 else np.float32
        (a, sa), (b, sb) = self._operand(ins.srcs[0]), self._operand(ins.srcs[1])
        for acc in ins.srcs[2:]:          # the bias, and L0C itself when accumulating
            self.origins.read(acc)
        self.origins.wrote(dst)
        out = mem.bound(dst)
        bias = mem.bound(ins.srcs[2]) if at["bias"] else 0
        store, pending, queue = dst.obj, mem.pending, mem.queue_product
        key = id(store)
        if at["accumulate"]:
            def mmad_acc() -> None:
                if not queue(dst, a, b, wide, False, sa, sb):
                    if key in pending:
                        mem.flush(store)
                    queue(dst, a, b, wide, True, sa, sb)
            self.steps.append(mmad_acc)
            return

        def mmad() -> None:
            if key in pending:
                mem.flush(store)
            out[...] = bias
            queue(dst, a, b, wide, True, sa, sb)
        self.steps.append(mmad)


_NO_DATA = (Op.SET_FLAG, Op.WAIT_FLAG, Op.BARRIER, Op.SYNC_ALL)
_L0AB = (Buf.L0A, Buf.L0B)


def _oriented(view: np.ndarray, transpose: bool) -> np.ndarray:
    return view.T if transpose else view


def _gm_block(mem: Memory, tensor, region: tuple) -> np.ndarray:
    """The view of a GM region (batch, r0, r1, c0, c1, transposed) of the staged tensor, as the tile gets it."""
    batch, r0, r1, c0, c1, t = region
    block = mem.gm_array(tensor)[batch, r0:r1, c0:c1]
    return block.T if t else block


class DataPass:
    """Full mode's data pass over a checked schedule: every instruction's effect, in the order the schedule
    started them (`order`: instruction indices), bound once to its arrays (_Binder); each call computes one
    set of inputs and writes the outputs (the tensors in `written`) back into them."""

    def __init__(self, instrs: list, order, tensors: list, written: set):
        self.mem, self.written = Memory(tensors), written
        binder = _Binder(self.mem, {id(t) for t in tensors if id(t) not in written})
        for i in order:
            binder.add(instrs[i])
        self.steps = binder.finish()

    def __call__(self, arrays: list) -> None:
        self.mem.stage(arrays)
        for step in self.steps:
            step()
        self.mem.commit(arrays, self.written)
