"""Scheduling a launch: encode its programs as flat arrays, run the event loop (simulate.py), and
turn a stall into a DeadlockError that says what each blocked pipe waits for and where.

Each pipe of each core is a capacity-1 resource running its instructions in program order; waits
are auto-sync dependencies, unit_flag blocks (seeds/001), expert flags and sync_all.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..chip import Chip
from ..errors import SyncError
from ..ir import AccPhase, Instr, Op, STPhase
from . import simulate as _sim
from .l2 import l2_hits
from .timing import cost

_KIND = {Op.SET_FLAG: 1, Op.WAIT_FLAG: 2, Op.SYNC_ALL: 3}


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


def unit_flag_access(ins: Instr):
    """(L0C access, value awaited, value set on leaving the pipe or -1) for a phased instruction."""
    phase = ins.attrs.get("phase")
    if phase is None:
        return None
    if isinstance(phase, AccPhase):
        return ins.dsts[0], 0, 1 if phase is AccPhase.Final else -1
    return ins.srcs[0], 1, 0 if phase is STPhase.Final else -1


class _Blocks:
    """Global ids of the 512-byte unit_flag blocks of L0C views (Nz: a 16x16 fp32 fractal is 1 KB)."""

    def __init__(self, block_bytes: int):
        self.block_bytes, self.base, self.total = block_bytes, {}, 0

    def of(self, acc) -> np.ndarray:
        store, (r0, r1, c0, c1) = acc.obj, acc.rect
        rows1 = store.padded[0] // 16
        per = 16 * 16 * store.dtype.itemsize // self.block_bytes
        if id(store) not in self.base:
            self.base[id(store)] = self.total
            self.total += rows1 * (store.padded[1] // 16) * per
        fr = np.arange(r0 // 16, -(-r1 // 16))
        fc = np.arange(c0 // 16, -(-c1 // 16))
        frac = (fc[:, None] * rows1 + fr[None, :]).ravel()
        return self.base[id(store)] + (frac[:, None] * per + np.arange(per)[None, :]).ravel()


@dataclass
class Schedule:
    """When each instruction ran, in which order, and what each start joined (for happens-before)."""

    cycles: float
    order: np.ndarray
    begin: np.ndarray
    end: np.ndarray
    join_ptr: np.ndarray
    join_idx: np.ndarray
    busy: dict
    gm_bytes: float
    l2_hit_bytes: float
    gm_read_bytes: float
    deadlock: str = ""    # why the launch stalled ("" when it ran to the end)


def _csr(lists) -> tuple:
    ptr = np.zeros(len(lists) + 1, np.int64)
    for i, x in enumerate(lists):
        ptr[i + 1] = ptr[i] + len(x)
    flat = np.fromiter((v for x in lists for v in x), np.int64, count=int(ptr[-1]))
    return ptr, flat


def schedule(programs: list, instrs: list, chip: Chip) -> Schedule:
    """Run all programs. A stall is returned as `deadlock` (the caller first checks what did run)."""
    for prog in programs:
        check_flag_pairs(prog)
    n = len(instrs)
    slots: dict = {}
    queues: list = []
    pipe_of = np.empty(n, np.int64)
    for prog in programs:
        for ins in prog.instrs:
            key = (ins.core, ins.pipe)
            if key not in slots:
                slots[key] = len(queues)
                queues.append([])
            pipe_of[ins.index] = slots[key]
            queues[slots[key]].append(ins.index)
    q_ptr, q_idx = _csr(queues)
    dep_ptr, dep_idx = _csr([[d.index for d in ins.deps] for ins in instrs])
    blocks = _Blocks(chip.unit_flag_block_bytes)
    uf_lists, uf_wait, uf_set = [], np.full(n, -1, np.int8), np.full(n, -1, np.int8)
    kind, fkey, fkeys = np.zeros(n, np.int8), np.zeros(n, np.int64), {}
    hits = l2_hits(programs, chip)
    occ, lat, gmb, l2b = (np.zeros(n) for _ in range(4))
    gm_read = 0.0
    for ins in instrs:
        i = ins.index
        uf = unit_flag_access(ins)
        uf_lists.append(blocks.of(uf[0]) if uf else ())
        if uf:
            uf_wait[i], uf_set[i] = uf[1], uf[2]
        kind[i] = _KIND.get(ins.op, 0)
        if kind[i] in (1, 2):
            fkey[i] = fkeys.setdefault((ins.core, ins.attrs["key"]), len(fkeys))
        c = cost(chip, ins, hits.get(i, 0.0))
        occ[i], lat[i], gmb[i], l2b[i] = c
        if ins.op is Op.LOAD and c.gm_bytes + c.l2_bytes:
            gm_read += c.gm_bytes + c.l2_bytes
    uf_ptr, uf_blk = _csr(uf_lists)
    participants = sum(1 for p in programs if any(ins.op is Op.SYNC_ALL for ins in p.instrs))
    fn = _sim.simulate if os.environ.get("PYTO_NUMBA", "1") != "0" else _sim.simulate.py_func
    (status, now, order, begin, end, join_ptr, join_idx, busy, qpos, flags) = fn(
        pipe_of, q_ptr, q_idx, dep_ptr, dep_idx, uf_ptr, uf_blk, uf_wait, uf_set, blocks.total, kind, fkey,
        len(fkeys), participants, occ, lat, gmb, l2b, chip.gm_bytes_per_cycle, chip.l2_bytes_per_cycle,
        float(chip.flag_latency_cycles))
    why = "" if status == 0 else _deadlock_report(programs, instrs, slots, q_ptr, q_idx, qpos,
                                                  set(order.tolist()), flags, blocks, now)
    busy_by = {key: float(busy[s]) for key, s in slots.items()}
    return Schedule(float(now), order, begin, end, join_ptr, join_idx, busy_by, float(gmb.sum()),
                    float(l2b.sum()), gm_read, why)


def _deadlock_report(programs, instrs, slots, q_ptr, q_idx, qpos, started, flags, blocks, now) -> str:
    left = len(instrs) - len(started)
    lines = [f"deadlock at cycle {now:.0f}: no pipe of any core can progress ({left} instructions left)"]
    names = {p.id: str(p) for p in programs}
    arrived = sum(1 for s in slots.values() if qpos[s] < q_ptr[s + 1]
                  and instrs[q_idx[qpos[s]]].op is Op.SYNC_ALL)
    participants = sum(1 for p in programs if any(ins.op is Op.SYNC_ALL for ins in p.instrs))
    for (core, pipe), s in slots.items():
        if qpos[s] == q_ptr[s + 1]:
            continue
        ins = instrs[q_idx[qpos[s]]]
        lines.append(f"  {names[core]} PIPE_{pipe.name}: {ins.loc}")
        lines.append(f"      waits for {_describe_wait(ins, started, flags, blocks, arrived, participants)}")
    return "\n".join(lines)


def _describe_wait(ins: Instr, started: set, flags, blocks: _Blocks, arrived: int, participants: int) -> str:
    for d in ins.deps:
        if d.index not in started:
            return f"{d.name} on PIPE_{d.pipe.name} to finish (auto-sync), itself waiting: {d.loc}"
    uf = unit_flag_access(ins)
    if uf is not None:
        acc, val, _ = uf
        vals = flags[blocks.of(acc)]
        if (vals != val).any():
            r0, r1, c0, c1 = acc.rect
            phase = ins.attrs["phase"]
            is_ = str(int(vals[0])) if (vals == vals[0]).all() else f"mixed ({int(vals.sum())} of {vals.size} set)"
            why = ("no matmul with AccPhase.Final set it" if val == 1
                   else "no store/move with STPhase.Final cleared it")
            return (f"unit_flag(L0C tile '{acc.obj.name}'[{r0}:{r1}, {c0}:{c1}]) == {val}, is {is_} "
                    f"({type(phase).__name__}.{phase.name} waits for {val}; {why})")
    if ins.op is Op.WAIT_FLAG:
        return f"event {_flag_name(ins)}: never set by a matching pl.set_flag"
    if ins.op is Op.SYNC_ALL:
        return f"pl.sync_all: {arrived} of {participants} cores arrived"
    return "an earlier instruction"


def _flag_name(ins: Instr) -> str:
    s, d, e = ins.attrs["key"]
    return f"({s.name}->{d.name}, id {e})"
