"""Scheduling a launch: run the event loop (simulate.py) on its encoded instructions, and turn a stall
into a message that says what each blocked pipe waits for and where.

Each pipe of each core is a capacity-1 resource running its instructions in program order; waits
are auto-sync dependencies, unit_flag blocks (seeds/001), expert flags and sync_all.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..chip import Chip
from . import simulate as _sim
from ..ir import Pipe
from .encode import Encoded


@dataclass
class Schedule:
    """When each instruction ran, in which order, and what each start joined (for happens-before)."""

    cycles: float
    order: np.ndarray
    begin: np.ndarray
    end: np.ndarray
    join_ptr: np.ndarray
    join_idx: np.ndarray
    busy: dict            # (program name, Pipe) -> busy cycles
    gm_bytes: float
    l2_hit_bytes: float
    deadlock: str = ""    # why the launch stalled ("" when it ran to the end)
    overflow: str = ""    # a cross-core flag set more often than its counter holds ("" when none was)
    left_set: str = ""    # a cross-core flag set more often than it is waited for, at the end ("" when none)


def schedule(enc: Encoded, chip: Chip) -> Schedule:
    """Run all programs. A stall is returned as `deadlock` (the caller first checks what did run)."""
    a = enc.arrays
    fn = _sim.simulate if os.environ.get("PYTO_NUMBA", "1") != "0" else _sim.simulate.py_func
    (status, now, order, begin, end, join_ptr, join_idx, busy, qpos, flags) = fn(
        a["pipe_of"], a["q_ptr"], a["q_idx"], a["dep_ptr"], a["dep_idx"], a["uf_rid"], a["rg_ptr"], a["rg_blk"],
        a["uf_wait"],
        a["uf_set"], enc.n_flags, a["kind"], a["fkey"], enc.n_fkeys, enc.participants, a["occ"], a["lat"],
        a["gm_bytes"], a["l2_bytes"], chip.gm_bytes_per_cycle, chip.l2_bytes_per_cycle,
        float(chip.flag_latency_cycles))
    why = "" if status == 0 else _deadlock_report(enc, qpos, order, flags, now)
    busy_by = {key: float(busy[s]) for s, key in enumerate(enc.slots)}
    return Schedule(float(now), order, begin, end, join_ptr, join_idx, busy_by, float(a["gm_bytes"].sum()),
                    float(a["l2_bytes"].sum()), why, _cross_core_overflow(enc, begin, end, chip),
                    "" if why else _cross_core_left_set(enc))


def _cross_core_ids(enc: Encoded) -> list:
    """The name indices of the cross-core flag ops in `enc`."""
    return [k for k, name in enumerate(enc.names) if name in ("pl.cross_core_set_flag", "pl.cross_core_wait_flag")]


def _cross_core_left_set(enc: Encoded) -> str:
    """A launch that ran to the end with a cross-core flag queue holding sets no wait consumed (the next kernel's
    wait would pass at once, as with pl.set_flag): its last set, named, or ''."""
    ids = _cross_core_ids(enc)
    if not ids:
        return ""
    a = enc.arrays
    cross = np.isin(enc.name_i, ids)
    for k in np.unique(a["fkey"][cross]):
        mine = np.flatnonzero(cross & (a["fkey"] == k))
        sets = mine[a["kind"][mine] == 1]
        extra = len(sets) - int((a["kind"][mine] == 2).sum())
        if extra > 0:
            return (f"{enc.locs[enc.loc_i[int(sets[-1])]]}: pl.cross_core_set_flag is set {extra} more time(s) than "
                    f"the other side waits for it: the kernel ends with the cross-core flag still set; pair every "
                    f"set with a wait")
    return ""


def _cross_core_overflow(enc: Encoded, begin, end, chip: Chip) -> str:
    """REFERENCE: a cross-core flag counts its sets; more than chip.cross_core_flag_max of them waiting
    unconsumed hangs the chip. The first set that makes one too many, named, or ''."""
    ids = _cross_core_ids(enc)
    if not ids:
        return ""
    a = enc.arrays
    cross = np.isin(enc.name_i, ids)
    for k in np.unique(a["fkey"][cross]):
        mine = np.flatnonzero(cross & (a["fkey"] == k) & (end > 0))
        sets, waits = mine[a["kind"][mine] == 1], mine[a["kind"][mine] == 2]
        # pending after each set: sets raised so far (in raise order) minus waits that started before it
        raised = sets[np.argsort(end[sets], kind="stable")]
        pending = np.arange(1, len(raised) + 1) - np.searchsorted(np.sort(begin[waits]), end[raised], side="left")
        over = np.flatnonzero(pending > chip.cross_core_flag_max)
        if len(over):
            i = int(raised[over[0]])
            return (f"{enc.locs[enc.loc_i[i]]}: pl.cross_core_set_flag raises a cross-core flag that already has "
                    f"{chip.cross_core_flag_max} sets waiting unconsumed on {chip.name} (at most "
                    f"{chip.cross_core_flag_max}; one more hangs the chip)")
    return ""


def _deadlock_report(enc: Encoded, qpos, order, flags, now: float) -> str:
    a = enc.arrays
    q_ptr, q_idx, kind = a["q_ptr"], a["q_idx"], a["kind"]
    started = np.zeros(len(a["pipe_of"]), bool)
    started[order] = True
    heads = [(s, int(q_idx[qpos[s]])) for s in range(len(enc.slots)) if qpos[s] < q_ptr[s + 1]]
    arrived = sum(1 for _, i in heads if kind[i] == 3)
    lines = [f"deadlock at cycle {now:.0f}: no pipe of any core can progress "
             f"({int((~started).sum())} instructions left)"]
    for s, i in heads:
        prog, pipe = enc.slots[s]
        lines.append(f"  {prog} PIPE_{pipe.name}: {enc.locs[enc.loc_i[i]]}")
        lines.append(f"      waits for {_describe(enc, i, started, flags, arrived)}")
    return "\n".join(lines)


def _describe(enc: Encoded, i: int, started, flags, arrived: int) -> str:
    a = enc.arrays
    for d in a["dep_idx"][a["dep_ptr"][i]:a["dep_ptr"][i + 1]]:
        if not started[d]:
            return (f"{enc.names[enc.name_i[d]]} on PIPE_{Pipe(enc.pipe_i[d]).name} to finish (auto-sync), "
                    f"itself waiting: {enc.locs[enc.loc_i[d]]}")
    if a["uf_wait"][i] >= 0:
        r = a["uf_rid"][i]
        vals = flags[a["rg_blk"][a["rg_ptr"][r]:a["rg_ptr"][r + 1]]]
        val = int(a["uf_wait"][i])
        is_ = str(int(vals[0])) if (vals == vals[0]).all() else f"mixed ({int(vals.sum())} of {vals.size} set)"
        phase = ("AccPhase" if val == 0 else "STPhase") + (".Final" if a["uf_set"][i] >= 0 else ".Partial")
        why = "no matmul with AccPhase.Final set it" if val == 1 else "no store/move with STPhase.Final cleared it"
        return f"unit_flag({enc.region_names[r]}) == {val}, is {is_} ({phase} waits for {val}; {why})"
    cond = enc.waits.get(i, "")
    if a["kind"][i] == 3:
        return cond.format(arrived=arrived, participants=enc.participants)
    return cond or "an earlier instruction"
