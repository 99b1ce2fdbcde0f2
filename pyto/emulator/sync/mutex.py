"""Mutex tokens (docs/design.md §4.4, model (1)): the dependencies PyPTO-Pro's buffer-id locks give, per program.

PyPTO-Pro lowers auto_mutex to a `get_buf(pipe, id)` before each op on a tile-group slot with mutex ids and a
`rls_buf(pipe, id)` after it (`_call_parser._emit_auto_mutex`); `pl.system.mutex_lock` / `mutex_unlock` are the same
instructions written by hand. A pipe taking an id waits until the id's previous holder, in this core's program
order, gave it back: so each acquire depends on the previous acquire's release when that was on another pipe. On
the same pipe nothing is waited for (the pipe runs in order: PyPTO-Pro's bar_mte2 rule, load.md), except that a
second lock of an id the pipe still holds waits for its own later unlock, queued behind it: a deadlock, as on the
chip ("two get_buf(pipe, same_id) on the same pipe hang the hardware"); and a lock waiting for a holder that is never
unlocked waits for good (its deadlock is the report; an unpaired lock nobody waits for is a SyncError at the end).
An op that carries auto_mutex ids holds
them for exactly its own execution: its release is its completion. A manual unlock releases once the pipe's earlier
instructions have completed (auto-sync gives it those dependencies, as a set_flag's).
"""
from __future__ import annotations

from ...errors import SyncError
from ...ir import Instr, Op
from .deps import Deps


class _Hold:
    """One acquire of an id: its pipe, the instruction whose completion releases it (None: a manual lock whose unlock
    is not met yet), and the acquires on other pipes waiting for that release."""

    __slots__ = ("pipe", "lock", "release", "waiters")

    def __init__(self, pipe, lock: Instr, release):
        self.pipe, self.lock, self.release, self.waiters = pipe, lock, release, []


def insert(instrs: list, deps: Deps) -> str:
    """Add to `deps` the mutex dependencies of one program's instructions (in program order). An unlock of an id its pipe does not
    hold is a SyncError; a manual lock left unpaired at the end is returned as the text of one ('' if none), for the
    caller to raise once the schedule has run (a deadlock it causes says more)."""
    last: dict = {}       # id -> its latest _Hold
    open_: dict = {}      # (pipe, id) -> the manual _Holds not unlocked yet, oldest first
    for ins in instrs:
        op = ins.op
        if op is Op.MUTEX_UNLOCK:
            i = ins.attrs["mutex_id"]
            held = open_.get((ins.pipe, i))
            if not held:
                raise SyncError(f"{ins.loc}: pl.system.mutex_unlock of mutex id {i} on PIPE_{ins.pipe.name}, which "
                                f"that pipe does not hold (lock and unlock pair on the same pipe)")
            h = held.pop(0)
            h.release = ins
            for w in h.waiters:
                deps.add(w, (ins,))
            continue
        if op is Op.MUTEX_LOCK:
            ids, manual = (ins.attrs["mutex_id"],), True
        else:
            ids, manual = ins.attrs.get("mutex", ()), False
            if not ids:
                continue
        for i in ids:
            prev = last.get(i)
            if prev is not None:
                if prev.release is None:                 # a manual lock not unlocked yet (on any pipe)
                    prev.waiters.append(ins)
                elif prev.pipe is not ins.pipe:
                    deps.add(ins, (prev.release,))
            h = _Hold(ins.pipe, ins, None if manual else ins)
            last[i] = h
            if manual:
                open_.setdefault((ins.pipe, i), []).append(h)
    unpaired = ""
    for (pipe, i), held in open_.items():
        for h in held:
            for w in h.waiters:      # waits for a release that never comes: blocked for good (a self-dependency)
                deps.add(w, (w,))
            unpaired = unpaired or (f"{h.lock.loc}: pl.system.mutex_lock of mutex id {i} on PIPE_{pipe.name} is never "
                                    f"unlocked: pair every mutex_lock with a mutex_unlock on the same pipe")
    return unpaired
