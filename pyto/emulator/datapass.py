"""Full mode's data pass: every instruction's effect (datapath.EFFECTS) in the order the schedule started
them, bound once to the arrays it touches, so that computing another set of inputs is only the copies and
the arithmetic (pyto.compile's CompiledKernel calls it per input set)."""
from __future__ import annotations

from functools import partial
from typing import Callable

import numpy as np

from ..dtypes import DType
from ..ir import Buf, GMTensor, Instr, Op
from .datapath import EFFECTS, convert
from .memory import Memory, region_view
from .origins import Origins


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
            self.steps.append(partial(np.copyto, out, view) if view.dtype == out.dtype else partial(EFFECTS[Op.LOAD], ins, mem))
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
        if a.get("atomic") == "add" or a.get("relu"):
            return partial(EFFECTS[Op.STORE], ins, mem)
        store, pending = src.obj, mem.pending
        key = id(store)
        r0, _, c0, _ = src.rect
        block = mem.tile(store)[r0:r0 + a["vr"], c0:c0 + a["vc"]]
        region = mem.gm_array(ins.dsts[0].obj)[a["batch"], a["r0"]:a["r0"] + a["vr"], a["c0"]:a["c0"] + a["vc"]]

        def store_block() -> None:
            if key in pending:
                mem.flush(store)
            region[...] = convert(block, region.dtype)
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


_NO_DATA = (Op.SET_FLAG, Op.WAIT_FLAG, Op.BARRIER, Op.SYNC_ALL, Op.MUTEX_LOCK, Op.MUTEX_UNLOCK)
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
