"""Full mode's data pass: every instruction's effect in the order the schedule started them, bound once to the
arrays it touches, so that computing another set of inputs is only the copies and the arithmetic (pyto.compile's
CompiledKernel calls it per input set).

The cube path's ops are defined here (HANDLERS: LOAD, STORE, MMAD, as copies and products between resolved
views), and pl.fillpad (VFILLPAD); MOVE and the vector ops by datapath.EFFECTS; sync ops have no data effect. An MMAD's accumulation
follows one of ACCUMULATE, chosen per call (pyto.run_options(accumulate=...)):

* "fused" (the default): the products a K loop queues on one L0C view are summed by one fp32 matmul of depth
  n*k when the view is next read (Memory.view/flush), then added to what L0C held (the bias, zero, or an
  earlier value). fp16/bf16 products are exact in fp32 and the sum is fp32, as on the cube; only the order of
  the fp32 additions differs from the hardware's, within pyto.testing.matmul_bound of the exact result.
* "per_mmad": the hardware's order. A matmul initialises L0C from the bias table (or zero), a matmul_acc
  keeps it; then each MMAD computes its own [m, k] @ [k, n] chunk as one fp32 matmul of its operands (the
  model of one instruction: exact fp16/bf16 products, the chunk's own sum in fp32) and adds it to L0C,
  rounding to fp32 after every instruction. int8 accumulates exactly in int32 (wrapping) either way. FP8 and
  HF8 operands are decoded exactly to fp32 (widen.py) and then accumulate as fp16 ones do: their products are
  exact in fp32 too. MX operands (pl.matmul_mx) are decoded and scaled by their groups' E8M0 powers of two into
  fp32 first (_scaled), then the same.

Both concern L0C only: partials a split-K or Stream-K kernel reduces across blocks (in a GM workspace, or
Fixpipe's atomic add) are added as the kernel's own instructions say, in either mode.
"""
from __future__ import annotations

from functools import partial
from typing import Callable, Optional

import numpy as np

from ...dtypes import DType
from ...ir import SYNC_OPS, Access, Buf, GMTensor, Instr, Op
from ...layout import check_sparse_index, expand_4_2, unpack_sparse_index
from ...lowp import MX_GROUP
from .datapath import EFFECTS, convert, convert_into, is_floating
from ..debugpass import HANDLERS as DEBUG_HANDLERS
from .memory import Memory, add_into, region_view
from .origins import Origins
from .widen import widen, widen_into

ACCUMULATE = ("fused", "per_mmad")     # the L0C accumulation orders a data pass can follow (module docstring)


class _Binder:
    """Binds a data pass's steps in the schedule's order: the cube path's loads, MMADs and stores (HANDLERS) as
    copies and products between resolved views, MOVE and the vector ops through EFFECTS; with Origins
    (origins.py) an MMAD reads a copied operand at its source and copies nobody reads are left out. Each MMAD's
    fused step has a per-MMAD twin's arguments in `twins`."""

    def __init__(self, mem: Memory, inputs: set):
        self.mem, self.origins = mem, Origins(inputs)
        self.steps: list = []
        self.copies: set = set()      # indices of the steps that are elidable copies
        self.twins: dict = {}         # fused MMAD step -> the arguments of its per-MMAD step (_per_mmad)
        self.expanded: dict = {}      # (shape, dtype) -> the buffer sparse MMADs expand their B into (_expanded)

    def add(self, ins: Instr) -> None:
        if ins.op in SYNC_OPS:
            return
        handler = HANDLERS.get(ins.op)
        if handler is not None:
            handler(self, ins)
            return
        for acc in ins.srcs:
            self.origins.read(acc)
        for acc in ins.dsts:
            if not isinstance(acc.obj, GMTensor):
                self.origins.wrote(acc)
        self.steps.append(partial(EFFECTS[ins.op], ins, self.mem))

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
        """GM -> L1/UB: the destination's valid region (its Access), copied; nothing else of the tile is written
        (stale bytes stay, pl.load's tail rule); nd_num parts: each its part. L1 -> L0A/L0B/BT: a copy of the
        view, transposed when asked."""
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
            view = block.T if t else block      # Mat -> Bias widens fp16/bf16 to fp32 (exact)
            self.steps.append(partial(np.copyto, out, view) if view.dtype == out.dtype else partial(widen_into, view, out))
            return
        d = dst.rect
        parts = a.get("parts", ((a["batch"], d),))
        t = bool(a["transpose"])
        h, w = (a["vc"], a["vr"]) if t else (a["vr"], a["vc"])       # the block's shape in the tile
        if len(parts) == 1 and (h, w) == (d[1] - d[0], d[3] - d[2]):  # covers dst: nothing to zero-fill
            tensor = ins.srcs[0].obj
            region = (parts[0][0], a["r0"], a["r0"] + a["vr"], a["c0"], a["c0"] + a["vc"], t)
            step = self._copy(lambda: partial(np.copyto, mem.bound(dst), _gm_block(mem, tensor, region)))
            if dst.obj.buf is Buf.L1 and tensor in mem.tensors:      # the whole tile, or a piece of it
                origins.gm_copy(dst, tensor, region, step)
            else:
                origins.wrote(dst, step)
            return
        origins.wrote(dst)
        out = mem.bound(dst)
        pieces = []                   # (view of the destination, GM block): nd_num parts, each covered whole
        for src, (batch, rect) in zip(ins.srcs, parts):
            block = _gm_block(mem, src.obj, (batch, a["r0"], a["r0"] + a["vr"], a["c0"], a["c0"] + a["vc"], t))
            r, c = rect[0] - d[0], rect[2] - d[2]
            pieces.append((out[r:r + block.shape[0], c:c + block.shape[1]], block))

        def load_parts() -> None:
            for view, block in pieces:
                view[...] = block
        self.steps.append(load_parts)

    def _store(self, ins: Instr) -> None:
        """L0C -> GM (Fixpipe: ReLU if asked, conversion to the tensor's dtype, round to nearest even) or UB -> GM
        (MTE3) of the valid region; with atomic add, Fixpipe converts first and the atomic unit adds in the
        tensor's type (an fp16 or bf16 sum rounds the incoming block, then the sum: two roundings, as on the
        device; integers add in int64 and wrap)."""
        mem = self.mem
        src, a = ins.srcs[0], ins.attrs
        self.origins.read(src)
        store, pending = src.obj, mem.pending
        key = id(store)
        r0, _, c0, _ = src.rect
        block = mem.tile(store)[r0:r0 + a["vr"], c0:c0 + a["vc"]]
        region = mem.gm_array(ins.dsts[0].obj)[a["batch"], a["r0"]:a["r0"] + a["vr"], a["c0"]:a["c0"] + a["vc"]]
        relu, atomic = bool(a.get("relu")), a.get("atomic") == "add"
        if not relu and not atomic:
            def store_block() -> None:
                if key in pending:
                    mem.flush(store)
                convert_into(block, region)
            self.steps.append(store_block)
            return
        floating = is_floating(region.dtype)
        wide = np.float32 if floating else np.int64

        def store_fixpipe() -> None:
            if key in pending:
                mem.flush(store)
            out = np.maximum(block, 0) if relu else block
            if not atomic:
                convert_into(out, region)
                return
            incoming = convert(out, region.dtype).astype(wide) if floating else out.astype(wide)
            region[...] = convert(region.astype(wide) + incoming, region.dtype)
        self.steps.append(store_fixpipe)

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
        """dst (+)= a @ b (+ bias) with its operand views resolved. The fused step queues the product on the L0C
        view (Memory.queue_product) to be summed with the rest of its K loop when the view is next read; its
        per-MMAD twin computes it at once (module docstring)."""
        mem = self.mem
        dst, at = ins.dsts[0], ins.attrs
        wide = np.float64 if at["dtype"] is DType.int8 else np.float32
        (a, sa), (b, sb) = self._operand(ins.srcs[0]), self._operand(ins.srcs[1])
        if at["dtype"] is DType.hf8:      # HF8 x HF8: uint8 codes, decoded (exactly) to fp32 before the MMAD
            a, b = self._decoded(a, sa), self._decoded(b, sb)
        if "mx" in at:                    # MX: srcs 2, 3 are the E8M0 scales, applied into fp32 operands
            a = self._scaled(a, mem.bound(ins.srcs[2]), 1, at["mx"][0])
            b = self._scaled(b, mem.bound(ins.srcs[3]), 0, at["mx"][1])
            sa = sb = None
        if "sparse" in at:                # 4:2 sparse: b is the dense half, srcs[2] its index; expanded to [K, N]
            b, sb = self._expanded(b, mem.bound(ins.srcs[2]), ins), None
        for acc in ins.srcs[2:]:          # the bias, and L0C itself when accumulating
            self.origins.read(acc)
        self.origins.wrote(dst)
        out = mem.bound(dst)
        qdst, a_tail, b_tail = dst, a, b      # what the fused step queues
        if (a.shape[0], a.shape[1], b.shape[1]) != (at["m"], at.get("sparse", at["k"]), at["n"]):
            # a tail MMAD (valid M/K/N smaller than its tiles): the fused step multiplies the valid operands
            # zero-padded to the tiles' shapes and queues the product on the tiles' L0C rectangle (zero past the
            # valid rows and columns, so the stale values there stay), which is the arithmetic, and so the bits,
            # of the same MMAD over zero-padded tiles; the per-MMAD twin computes the valid region alone
            r0, _, c0, _ = dst.rect
            qdst = Access(dst.obj, (r0, r0 + at["m"], c0, c0 + at["n"]))
            a_tail = np.zeros((at["m"], at["k"]), a.dtype)
            b_tail = np.zeros((at["k"], at["n"]), b.dtype)
            a_in, b_in = a_tail[:a.shape[0], :a.shape[1]], b_tail[:b.shape[0], :b.shape[1]]
            a_src, b_src = a, b
            sa = sb = None
            pad = self._pad_step(a_in, a_src, b_in, b_src)
        else:
            pad = None
        bias = mem.bound(ins.srcs[2]) if at["bias"] else 0
        store, pending, queue = dst.obj, mem.pending, mem.queue_product
        key = id(store)
        qa, qb = a_tail, b_tail
        if at["accumulate"]:
            def mmad_acc() -> None:
                if pad is not None:
                    pad()
                if not queue(qdst, qa, qb, wide, False, sa, sb):
                    if key in pending:
                        mem.flush(store)
                    queue(qdst, qa, qb, wide, True, sa, sb)
            step = mmad_acc
        else:
            def mmad() -> None:
                if key in pending:
                    mem.flush(store)
                out[...] = bias
                if pad is not None:
                    pad()
                queue(qdst, qa, qb, wide, True, sa, sb)
            step = mmad
        self.steps.append(step)
        self.twins[step] = (out, a, b, bias, at["accumulate"], wide)


    def _decoded(self, view: np.ndarray, spec: Optional[tuple]) -> np.ndarray:
        """An HF8 operand as fp32: a widened input's region is decoded already (Memory.stage); a tile's codes are
        decoded into a buffer of their own by a step just before the MMAD's (so both accumulation orders read it).
        FP8 operands need no such step: their numpy dtype says what they are, and widening decodes them."""
        if spec is not None:
            return view
        buf = np.empty(view.shape, np.float32)
        self.steps.append(partial(widen_into, view, buf, DType.hf8))
        return buf

    def _scaled(self, view: np.ndarray, scales: np.ndarray, axis: int, dtype: DType) -> np.ndarray:
        """An MX operand of `dtype` as fp32 (pl.matmul_mx): each element decoded (FP8 by its numpy dtype, FP4's
        uint8 codes by `dtype`'s table; a widened input's region is decoded already) and multiplied by
        2^(scale - 127) of its 32-element group along K (`axis`), in float64 (exact) and rounded once to fp32 (exact
        while the scaled value is normal in fp32); scale 0xFF is NaN. A step just before the MMAD's writes it (both
        accumulation orders read it)."""
        buf = np.empty(view.shape, np.float32)

        def scale_step() -> None:
            codes = scales.view(np.uint8)
            f = np.where(codes == 255, np.nan, np.ldexp(1.0, codes.astype(np.int32) - 127))
            with np.errstate(over="ignore", under="ignore", invalid="ignore"):
                buf[...] = widen(view, np.float64, dtype) * np.repeat(f, MX_GROUP, axis=axis)
        self.steps.append(scale_step)
        return buf

    def _expanded(self, dense: np.ndarray, packed: np.ndarray, ins: Instr) -> np.ndarray:
        """A 4:2 sparse MMAD's B (pl.matmul_sparse): the dense [K/2, N] put back at the places its index names, zeros
        elsewhere -> [K, N] (pyto.layout.expand_4_2 of the unpacked [K/8, N] index bytes); an index pair outside the
        cube's table is a SparsityError naming the MMAD. A step just before the MMAD's writes it, into a buffer all
        sparse MMADs of its shape share (the MMAD's product copies its operands when it is queued or computed)."""
        shape = (2 * dense.shape[0], dense.shape[1])
        buf = self.expanded.get((shape, dense.dtype))
        if buf is None:
            buf = self.expanded[(shape, dense.dtype)] = np.empty(shape, dense.dtype)

        def expand_step() -> None:
            idx = unpack_sparse_index(packed)
            check_sparse_index(idx, f"{ins.loc}: {ins.name or 'the sparse MMAD'}'s index")
            buf[...] = expand_4_2(dense, idx)
        self.steps.append(expand_step)
        return buf

    def _fillpad(self, ins: Instr) -> None:
        """pl.fillpad: out[0:vr, 0:vc] = src's valid region (its bits, when the dtypes differ in name only), the pad
        value over the rest of out (INPLACE: the region is out's own and stays)."""
        mem, a = self.mem, ins.attrs
        src, dst = ins.srcs[0], ins.dsts[0]
        self.origins.read(src)
        self.origins.wrote(dst)
        out, block = mem.bound(dst), mem.bound(src)
        vr, vc, value, inplace = a["vr"], a["vc"], a["value"], a["inplace"]
        if block.dtype != out.dtype:
            block = block.view(out.dtype)

        def fillpad() -> None:
            if not inplace:
                out[:vr, :vc] = block
            out[vr:, :] = value
            out[:vr, vc:] = value
        self.steps.append(fillpad)


    @staticmethod
    def _pad_step(a_in: np.ndarray, a_src: np.ndarray, b_in: np.ndarray, b_src: np.ndarray) -> Callable[[], None]:
        """Copy a tail MMAD's valid operands into the corners of its zero-padded buffers."""
        def pad() -> None:
            np.copyto(a_in, a_src)
            np.copyto(b_in, b_src)
        return pad


HANDLERS = {Op.LOAD: _Binder._load, Op.STORE: _Binder._store, Op.MMAD: _Binder._mmad,   # the ops defined here
            Op.VFILLPAD: _Binder._fillpad}
HANDLERS.update(DEBUG_HANDLERS)      # getval, setval, pto_assert, dump_data (debugpass.py); printf, trap: none
_L0AB = (Buf.L0A, Buf.L0B)


def _oriented(view: np.ndarray, transpose: bool) -> np.ndarray:
    return view.T if transpose else view


def _gm_block(mem: Memory, tensor, region: tuple) -> np.ndarray:
    """The view of a GM region (batch, r0, r1, c0, c1, transposed) of the staged tensor, as the tile gets it."""
    batch, r0, r1, c0, c1, t = region
    block = mem.gm_array(tensor)[batch, r0:r1, c0:c1]
    return block.T if t else block


def _per_mmad(out: np.ndarray, a: np.ndarray, b: np.ndarray, bias, accumulate: bool, wide: type,
              scratch: dict) -> Callable[[], None]:
    """An MMAD step in the hardware's order: L0C from the bias (or zero) unless accumulating, then + this
    instruction's chunk, one `wide` matmul of its operands widened into C-ordered buffers (so the sum within the
    chunk is what numpy gives `a.astype(f32) @ b.astype(f32)`), rounded into L0C's fp32 (int32: wraps). The
    buffers are shared by the steps of one shape (`scratch`): steps run one at a time."""
    key = (a.shape, b.shape, wide)
    if key not in scratch:
        scratch[key] = (np.empty(a.shape, wide), np.empty(b.shape, wide), np.empty((a.shape[0], b.shape[1]), wide))
    wa, wb, chunk = scratch[key]

    def mmad_step() -> None:
        widen_into(a, wa)
        widen_into(b, wb)
        np.matmul(wa, wb, out=chunk)
        if not accumulate:
            out[...] = bias
        add_into(out, chunk)
    return mmad_step


class DataPass:
    """Full mode's data pass over a checked schedule: every instruction's effect, in the order the schedule
    started them (`order`: instruction indices), bound once to its arrays (_Binder); each call computes one
    set of inputs in one of ACCUMULATE's orders and writes the outputs (the tensors in `written`) back into
    them. The per-MMAD steps are made on the first call that asks for them."""

    def __init__(self, instrs: list, order, tensors: list, written: set, broadcast: Optional[dict] = None):
        self.mem, self.written = Memory(tensors, broadcast), written     # broadcast: inputs staged compact (memory.py)
        binder = _Binder(self.mem, {id(t) for t in tensors if id(t) not in written})
        for i in order:
            binder.add(instrs[i])
        self.steps = binder.finish()
        self._twins = binder.twins
        self._per_mmad_steps = None

    def __call__(self, arrays: list, accumulate: str = "fused") -> None:
        steps = self.steps
        if accumulate != "fused":
            if accumulate != "per_mmad":
                raise ValueError(f"accumulate must be one of {ACCUMULATE}, got {accumulate!r}")
            if self._per_mmad_steps is None:
                twins, scratch = self._twins, {}
                self._per_mmad_steps = [_per_mmad(*twins[s], scratch) if s in twins else s for s in steps]
            steps = self._per_mmad_steps
        self.mem.stage(arrays)
        for step in steps:
            step()
        self.mem.commit(arrays, self.written)
