"""The debug ops in the emulator (pyto/language/debug.py traces them): their data-pass steps and what a launch
prints.

Data pass (HANDLERS, joined into datapass.HANDLERS): a getval fills its Cell with the element as the schedule
reaches it, a setval writes its value (a constant, or an expression on earlier getvals, evaluated then), a
pto_assert on getval values checks its condition there (a KernelAssertionError stops the pass: no output is
written back), a dump_data copies its tile or GM region at that point. printf and trap need no step.

DebugLog: a launch's debug instructions in the order the schedule started them (the data pass's order; ties
broken as the event loop broke them). `render` gives what the device would print (PyPTO-Pro's printf and
dump_data go to the device log; pyto prints them on the host after the schedule, each line prefixed with its
core and simulated start time), `data_pass` wraps a full-mode pass: lines print after it, with getval values
filled in; a failed assertion first prints what ran before it. Timing mode renders a getval value as '?'.
"""
from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field
from typing import NamedTuple, Optional

import numpy as np

from ..errors import KernelAssertionError, TrapError
from ..ir import GMTensor, Instr, Op, core_name
from ..lazy import assertion_text, cells, evaluate, printf_text
from .data.datapath import convert, is_floating


class Dump(NamedTuple):
    """One pl.dump_data the launch ran (Report.dumps): its kernel line, core, simulated start cycle, label (the
    flag= text or ''), what it dumped ("'x_ub' Vec [16, 64] fp16 ND [0:16, 0:64]"), the window's shape, and the
    values (a numpy array of the element type, in the tile's own orientation) at that point of the program in
    full mode, None in timing mode."""

    loc: object
    core: str
    cycles: float
    label: str
    what: str
    shape: tuple
    data: Optional[np.ndarray]


# ---- data-pass steps ------------------------------------------------------------------------------------------
def _element(mem, acc):
    """(array, index) of the one element `acc` names (a tile's, or a GM tensor's in its [batch, rows, cols] view)."""
    r0, _, c0, _ = acc.rect
    if isinstance(acc.obj, GMTensor):
        return mem.gm_array(acc.obj), (acc.batch, r0, c0)
    return mem.tile(acc.obj), (r0, c0)


def _note_reads(binder, ins: Instr) -> None:
    for acc in ins.srcs:
        binder.origins.read(acc)
    for acc in ins.dsts:
        if not isinstance(acc.obj, GMTensor):
            binder.origins.wrote(acc)


def _getval(binder, ins: Instr) -> None:
    _note_reads(binder, ins)
    cell = ins.attrs["cell"]
    arr, at = _element(binder.mem, ins.srcs[0])

    def getval() -> None:
        cell.value = arr[at]
    binder.steps.append(getval)


def _setval(binder, ins: Instr) -> None:
    _note_reads(binder, ins)
    value = ins.attrs["value"]
    arr, at = _element(binder.mem, ins.dsts[0])
    if not cells(value):           # a constant, converted at trace time
        def setval_const() -> None:
            arr[at] = value
        binder.steps.append(setval_const)
        return

    def setval() -> None:
        arr[at] = convert(np.asarray(evaluate(value)), arr.dtype)
    binder.steps.append(setval)


def _assert(binder, ins: Instr) -> None:
    cond = ins.attrs["cond"]
    if not cells(cond):            # decided at trace time (a false one raised there)
        return

    def pto_assert() -> None:
        if not bool(evaluate(cond)):
            raise KernelAssertionError(assertion_text(ins.attrs, full=True), instr=ins)
    binder.steps.append(pto_assert)


def _dump(binder, ins: Instr) -> None:
    _note_reads(binder, ins)
    mem, a = binder.mem, ins.attrs
    slot, shape, t = a["slot"], a["shape"], a["transposed"]
    gm = isinstance(ins.srcs[0].obj, GMTensor)

    def dump_data() -> None:
        if gm:
            parts = [mem.gm_array(acc.obj)[acc.batch, acc.rect[0]:acc.rect[1], acc.rect[2]:acc.rect[3]]
                     for acc in ins.srcs]
            data = np.stack(parts).reshape(shape)
        else:
            view = mem.view(ins.srcs[0])      # (an Acc tile's queued MMADs summed first)
            data = np.array(view.T if t else view)
        slot.value = data
    binder.steps.append(dump_data)


def _nothing(binder, ins: Instr) -> None:
    """printf and trap: nothing to compute (printf's values are read after the pass, trap stops the launch at
    schedule time)."""


HANDLERS = {Op.GETVAL: _getval, Op.SETVAL: _setval, Op.ASSERT: _assert, Op.DUMP: _dump, Op.PRINTF: _nothing,
            Op.TRAP: _nothing}


# ---- what a launch prints -------------------------------------------------------------------------------------
def _dump_text(data: Optional[np.ndarray]) -> str:
    if data is None:
        return "  (timing mode: no data)"
    shown = data.astype(np.float32) if is_floating(data.dtype) else data
    body = np.array2string(shown, max_line_width=120)
    return "\n".join("  " + line for line in body.splitlines())


@dataclass
class Output:
    """What one run printed (Report.printed: each printf or dump_data entry, in simulated order) and dumped."""

    printed: list = field(default_factory=list)
    dumps: list = field(default_factory=list)


class DebugLog:
    """A launch's debug instructions (Launch.debug) with the schedule's start order and times (module docstring)."""

    def __init__(self, instrs: list, sched, aiv_only: bool):
        self.aiv_only = aiv_only
        self.begin = sched.begin
        rank = np.full(len(sched.begin), -1, np.int64)
        rank[sched.order] = np.arange(len(sched.order))
        self.rank = {id(ins): int(rank[ins.index]) for ins in instrs if rank[ins.index] >= 0}
        # the debug instructions that started, as printed: by start cycle, then core, then start order
        self.ran = sorted((ins for ins in instrs if id(ins) in self.rank),
                          key=lambda ins: (float(sched.begin[ins.index]), ins.core, self.rank[id(ins)]))
        self.holders = [ins.attrs["cell"] for ins in instrs if ins.op is Op.GETVAL] + \
                       [ins.attrs["slot"] for ins in instrs if ins.op is Op.DUMP]

    def where(self, ins: Instr) -> str:
        """'block 3 AIV1 @ 1,234 cycles' (an AIV-only kernel's AIVs are 'AIV 5')."""
        return f"{core_name(ins.core, self.aiv_only)} @ {float(self.begin[ins.index]):,.0f} cycles"

    def _prefix(self, ins: Instr) -> str:
        loc = f" {ins.loc.file.rsplit('/', 1)[-1]}:{ins.loc.line}" if ins.attrs.get("show_loc") else ""
        return f"[{self.where(ins)}]{loc}"

    def render(self, full: bool, until: Optional[Instr] = None) -> Output:
        """What the launch prints and dumps (only what started before `until`, when given)."""
        out = Output()
        last = self.rank[id(until)] if until is not None else len(self.begin)
        for ins in self.ran:
            if self.rank[id(ins)] >= last:
                continue
            if ins.op is Op.PRINTF:
                out.printed.append(f"{self._prefix(ins)} {printf_text(ins.attrs, full)}")
            elif ins.op is Op.DUMP:
                a = ins.attrs
                data = a["slot"].value if full else None
                head = f"{self._prefix(ins)} {a['label']}\n" if a["label"] else ""
                out.printed.append(f"{head}{self._prefix(ins)} dump_data {a['what']}\n{_dump_text(data)}")
                out.dumps.append(Dump(ins.loc, core_name(ins.core, self.aiv_only), float(self.begin[ins.index]),
                                      a["label"] or "", a["what"], a["shape"], data))
        return out

    def check_trap(self) -> None:
        """TrapError for the first pl.trap() the schedule started, after printing what ran before it."""
        for ins in self.ran:
            if ins.op is Op.TRAP:
                emit(self.render(False, until=ins).printed)
                raise TrapError(f"{ins.loc}: pl.trap() on {self.where(ins)}: the kernel aborts here (trap.md: an "
                                f"unconditional abort, for debugging; the device reports an AI core exception and "
                                f"the launch fails)")

    @contextlib.contextmanager
    def data_pass(self):
        """Around one full-mode data pass: yields the Output, filled and printed when the pass has run; a failed
        assertion prints what ran before it and raises its KernelAssertionError with core and cycle."""
        for h in self.holders:
            h.value = None
        out = Output()
        try:
            yield out
        except KernelAssertionError as e:
            ins = getattr(e, "instr", None)
            if ins is None:
                raise
            emit(self.render(True, until=ins).printed)
            raise KernelAssertionError(f"{ins.loc}: pl.pto_assert failed on {self.where(ins)}: "
                                       f"{assertion_text(ins.attrs, full=True)}", instr=ins) from None
        done = self.render(True)
        out.printed[:], out.dumps[:] = done.printed, done.dumps
        emit(out.printed)


@contextlib.contextmanager
def data_pass(log: Optional[DebugLog]):
    """DebugLog.data_pass, or an empty Output when the launch has no debug ops."""
    if log is None:
        yield Output()
        return
    with log.data_pass() as out:
        yield out


def emit(printed: list) -> None:
    """Print a run's entries on stdout (sys.stdout as it is now: redirect_stdout and capsys capture them)."""
    for entry in printed:
        print(entry, file=sys.stdout)


__all__ = ["HANDLERS", "DebugLog", "Dump", "Output", "data_pass", "emit"]
