"""Event-driven execution of all programs of a launch (SimPy style: one heap of timed events).

Each pipe of each core is a capacity-1 resource running its instructions in program order. An
instruction starts when its pipe is free and its waits hold: auto-sync dependencies, unit_flag
blocks (seeds/001), expert flags, sync_all. Data effects happen at start, flag updates at completion.
When nothing runs and nothing can start but work is left, DeadlockError says what each pipe awaits.
"""
from __future__ import annotations

import heapq
from collections import deque

import numpy as np

from ..errors import DeadlockError, SyncError  # noqa: F401
from ..ir import AccPhase, Buf, Instr, Op, Role, STPhase


class UnitFlags:
    """One bit per 512-byte block of each L0C tile store, all 0 at start, and who set each block last."""

    def __init__(self, block_bytes: int):
        self.block_bytes = block_bytes
        self.flags: dict = {}
        self.setter: dict = {}
        self._cache: dict = {}

    def blocks(self, acc) -> np.ndarray:
        """Physical 512B blocks of an L0C view: Nz fractal (fr, fc) of 16x16 x 4B spans 1024B."""
        key = (id(acc.obj), acc.rect)
        ids = self._cache.get(key)
        if ids is None:
            store, (r0, r1, c0, c1) = acc.obj, acc.rect
            rows1 = store.padded[0] // 16
            per = 16 * 16 * store.dtype.itemsize // self.block_bytes
            fr = np.arange(r0 // 16, -(-r1 // 16))
            fc = np.arange(c0 // 16, -(-c1 // 16))
            frac = (fc[:, None] * rows1 + fr[None, :]).ravel()
            ids = (frac[:, None] * per + np.arange(per)[None, :]).ravel()
            self._cache[key] = ids
            if id(store) not in self.flags:
                n = rows1 * (store.padded[1] // 16) * per
                self.flags[id(store)] = np.zeros(n, dtype=np.int8)
                self.setter[id(store)] = np.full(n, -1, dtype=np.int64)
        return ids

    def holds(self, acc, value: int) -> bool:
        ids = self.blocks(acc)
        return bool((self.flags[id(acc.obj)][ids] == value).all())

    def value(self, acc) -> str:
        ids = self.blocks(acc)
        vals = self.flags[id(acc.obj)][ids]
        return str(int(vals[0])) if (vals == vals[0]).all() else f"mixed ({int(vals.sum())} of {vals.size} set)"

    def set(self, acc, value: int, ins: Instr) -> None:
        ids = self.blocks(acc)
        self.flags[id(acc.obj)][ids] = value
        self.setter[id(acc.obj)][ids] = ins.index

    def setters(self, acc) -> set:
        ids = self.blocks(acc)
        return {int(i) for i in np.unique(self.setter[id(acc.obj)][ids]) if i >= 0}


def unit_flag_wait(ins: Instr):
    """(L0C access, value awaited) for an instruction carrying a phase, else None."""
    phase = ins.attrs.get("phase")
    if phase is None:
        return None
    if isinstance(phase, AccPhase):
        return ins.dsts[0], 0
    return ins.srcs[0], 1


def check_flag_pairs(program) -> None:
    """synccheck: in program order, an event may not be set again before a wait_flag on it (undefined
    on the hardware, whatever the timing)."""
    pending: dict = {}
    for ins in program.instrs:
        if ins.op is Op.SET_FLAG:
            first = pending.get(ins.attrs["key"])
            if first is not None:
                raise SyncError(f"{ins.loc}: event {_flag_name(ins)} set again before a wait_flag consumed the "
                                f"set at {first.loc} (undefined on the hardware)")
            pending[ins.attrs["key"]] = ins
        elif ins.op is Op.WAIT_FLAG:
            pending.pop(ins.attrs["key"], None)


class Scheduler:
    """Runs the programs; calls `on_start(ins, joins)` (sanitizer + data) and times with `timing`."""

    def __init__(self, programs: list, instrs: list, chip, timing, on_start, sanitizer):
        self.programs, self.instrs, self.chip = programs, instrs, chip
        self.timing, self.on_start, self.san = timing, on_start, sanitizer
        self.done = np.zeros(len(instrs), dtype=bool)
        self.begin = np.zeros(len(instrs), dtype=np.float64)
        self.end = np.zeros(len(instrs), dtype=np.float64)
        self.queues: dict = {}
        for prog in programs:
            check_flag_pairs(prog)
            for ins in prog.instrs:
                self.queues.setdefault((prog.id, ins.pipe), deque()).append(ins)
        self.busy: dict = {k: False for k in self.queues}
        self.uf = UnitFlags(chip.unit_flag_block_bytes)
        self.flags: dict = {}          # (program, key) -> deque of setting instrs not yet consumed
        self.waiters: dict = {}
        self.heap: list = []
        self.seq = 0
        self.now = 0.0
        self.barrier_n = 0
        self.barrier_arrived: list = []
        self.participants = sum(1 for p in programs if any(i.op is Op.SYNC_ALL for i in p.instrs))
        self.busy_cycles: dict = {}
        self.finished = 0

    # ---- waits ---------------------------------------------------------------------------
    def _blocker(self, ins: Instr):
        """None if `ins` may start now, else a hashable key of what it waits for."""
        for d in ins.deps:
            if not self.done[d.index]:
                return ("i", d.index)
        w = unit_flag_wait(ins)
        if w is not None and not self.uf.holds(*w):
            return ("u", id(w[0].obj))
        if ins.op is Op.WAIT_FLAG and not self.flags.get((ins.core, ins.attrs["key"])):
            return ("f", ins.core, ins.attrs["key"])
        if ins.op is Op.SYNC_ALL:
            return ("b", self.barrier_n)
        return None

    def _joins(self, ins: Instr) -> list:
        joins = list(ins.deps)
        w = unit_flag_wait(ins)
        if w is not None:
            joins += [self.instrs[i] for i in self.uf.setters(w[0])]
        if ins.op is Op.WAIT_FLAG:
            joins.append(self.flags[(ins.core, ins.attrs["key"])].popleft())
        return joins

    # ---- the loop ------------------------------------------------------------------------
    def _try(self, key) -> None:
        if self.busy[key]:
            return
        q = self.queues[key]
        if not q:
            return
        ins = q[0]
        b = self._blocker(ins)
        if b is not None:
            if b[0] == "b":
                self._arrive(ins)
            else:
                self.waiters.setdefault(b, []).append(key)
            return
        q.popleft()
        self._start(ins, key)

    def _start(self, ins: Instr, key, joins=None) -> None:
        self.busy[key] = True
        self.on_start(ins, self._joins(ins) if joins is None else joins)
        start = self.now
        lat = self.chip.flag_latency_cycles
        for d in ins.deps:
            if d.pipe != ins.pipe and self.end[d.index] + lat > start:
                start = self.end[d.index] + lat
        free, end = self.timing.cost(ins, start)
        self.begin[ins.index] = start
        self.end[ins.index] = end
        self.busy_cycles[key] = self.busy_cycles.get(key, 0.0) + (free - start)
        # at equal times completions go first, so a pipe issuing again sees the flags they set
        self.seq += 1
        heapq.heappush(self.heap, (free, 1, self.seq, ins.index, key))
        self.seq += 1
        heapq.heappush(self.heap, (end, 0, self.seq, ins.index, key))

    def _arrive(self, ins: Instr) -> None:
        if any(a is ins for a, _ in self.barrier_arrived):
            return
        self.barrier_arrived.append((ins, (ins.core, ins.pipe)))
        if len(self.barrier_arrived) == self.participants:
            arrived, self.barrier_arrived = self.barrier_arrived, []
            self.barrier_n += 1
            for a, key in arrived:
                self.queues[key].popleft()
                self.san.pass_barrier(a, self.barrier_n)
                self._start(a, key)

    def _wake(self, b) -> list:
        return self.waiters.pop(b, [])

    def _complete(self, idx: int, key) -> list:
        """`ins` is complete: instructions waiting on it (auto-sync) may start."""
        self.done[idx] = True
        self.finished += 1
        return self._wake(("i", idx))

    def _release(self, idx: int, key) -> list:
        """`ins` has left its pipe (its L0C access is over): update unit_flag and flags, issue the next one."""
        ins = self.instrs[idx]
        self.busy[key] = False
        wake = [key]
        phase = ins.attrs.get("phase")
        if phase is AccPhase.Final:
            self.uf.set(ins.dsts[0], 1, ins)
            wake += self._wake(("u", id(ins.dsts[0].obj)))
        elif phase is STPhase.Final:
            self.uf.set(ins.srcs[0], 0, ins)
            wake += self._wake(("u", id(ins.srcs[0].obj)))
        if ins.op is Op.SET_FLAG:
            self.flags.setdefault((ins.core, ins.attrs["key"]), deque()).append(ins)
            wake += self._wake(("f", ins.core, ins.attrs["key"]))
        return wake

    def run(self) -> float:
        for key in self.queues:
            self._try(key)
        total = len(self.instrs)
        while self.heap:
            t, release, _, idx, key = heapq.heappop(self.heap)
            self.now = t
            for k in (self._release(idx, key) if release else self._complete(idx, key)):
                self._try(k)
        if self.finished < total:
            raise DeadlockError(self._deadlock_report())
        return self.now

    # ---- reporting -----------------------------------------------------------------------
    def _deadlock_report(self) -> str:
        lines = [f"deadlock at cycle {self.now:.0f}: no pipe of any core can progress "
                 f"({len(self.instrs) - self.finished} instructions left)"]
        for (core, pipe), q in self.queues.items():
            if not q:
                continue
            ins = q[0]
            prog = self.programs[[p.id for p in self.programs].index(core)]
            lines.append(f"  {prog} PIPE_{pipe.name}: {ins.loc}")
            lines.append(f"      waits for {self._describe_wait(ins)}")
        return "\n".join(lines)

    def _describe_wait(self, ins: Instr) -> str:
        for d in ins.deps:
            if not self.done[d.index]:
                return f"{d.name} on PIPE_{d.pipe.name} to finish (auto-sync), itself waiting: {d.loc}"
        w = unit_flag_wait(ins)
        if w is not None and not self.uf.holds(*w):
            acc, val = w
            r0, r1, c0, c1 = acc.rect
            phase = ins.attrs["phase"]
            why = ("no matmul with AccPhase.Final set it" if val == 1
                   else "no store/move with STPhase.Final cleared it")
            return (f"unit_flag(L0C tile '{acc.obj.name}'[{r0}:{r1}, {c0}:{c1}]) == {val}, is "
                    f"{self.uf.value(acc)} ({type(phase).__name__}.{phase.name} waits for {val}; {why})")
        if ins.op is Op.WAIT_FLAG:
            return f"event {_flag_name(ins)}: never set by a matching pl.set_flag"
        if ins.op is Op.SYNC_ALL:
            return (f"pl.sync_all #{self.barrier_n}: {len(self.barrier_arrived)} of {self.participants} cores "
                    f"arrived")
        return "an earlier instruction"


def _flag_name(ins: Instr) -> str:
    s, d, e = ins.attrs["key"]
    return f"({s.name}->{d.name}, id {e})"
