"""Scheduling a launch: run the event loop (simulate.py) on its encoded instructions, and turn a stall
into a message that says what each blocked pipe waits for and where.

Each pipe of each core is a capacity-1 resource running its instructions in program order; waits
are auto-sync dependencies, unit_flag blocks (docs/cube_phase.md §7), expert flags and sync_all.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...chip import Chip
from .. import jitmode
from . import simulate as _sim
from ...ir import Pipe
from ..encode.encode import ROUND_WAIT, Encoded


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
    left_set: str = ""    # a flag set more often than it is waited for, at the end ("" when none)


def schedule(enc: Encoded, chip: Chip) -> Schedule:
    """Run all programs. A stall is returned as `deadlock` (the caller first checks what did run)."""
    a = enc.arrays
    fn = jitmode.pick(_sim.simulate, len(a["pipe_of"]), jitmode.SCHEDULE)
    (status, now, order, begin, end, join_ptr, join_idx, busy, qpos, flags) = fn(
        a["pipe_of"], a["q_ptr"], a["q_idx"], a["dep_ptr"], a["dep_idx"], a["uf_rid"], a["rg_ptr"], a["rg_blk"],
        a["uf_wait"],
        a["uf_set"], enc.n_flags, a["kind"], a["fkey"], a["fneed"], a["fspan"], enc.n_fkeys, enc.participants,
        a["occ"], a["lat"],
        a["gm_bytes"], a["l2_bytes"], a["fill"], chip.gm_bytes_per_cycle, chip.l2_bytes_per_cycle,
        float(chip.flag_latency_cycles), float(chip.gm_latency_cycles - chip.l2_latency_cycles))
    why = "" if status == 0 else _deadlock_report(enc, qpos, order, flags, now)
    left = "" if why else (_left_set(enc) or _unit_flag_left(enc, flags, begin, end))
    busy_by = {key: float(busy[s]) for s, key in enumerate(enc.slots)}
    return Schedule(float(now), order, begin, end, join_ptr, join_idx, busy_by, float(a["gm_bytes"].sum()),
                    float(a["l2_bytes"].sum()), why, _cross_core_overflow(enc, begin, end, chip), left)


_CROSS_CORE_OPS = ("pl.system.set_cross_core", "pl.system.wait_cross_core")


def _queues(enc: Encoded, cross_core: bool):
    """Per flag queue (sync_src events, or cross-core events): the indices of its sets and of its waits."""
    a = enc.arrays
    flag = (a["kind"] == 1) | (a["kind"] == 2)
    ids = [k for k, name in enumerate(enc.names) if name in _CROSS_CORE_OPS]
    cross = np.isin(enc.name_i, ids) if ids else np.zeros(len(flag), bool)
    flag &= cross if cross_core else ~cross
    rounds = set(np.unique(a["fkey"][a["kind"] == ROUND_WAIT]).tolist())   # INTER_BLOCK events: no queue to pair
    for k in np.unique(a["fkey"][flag]):
        if int(k) in rounds:
            continue
        mine = np.flatnonzero(flag & (a["fkey"] == k))
        yield mine[a["kind"][mine] == 1], mine[a["kind"][mine] == 2]


def _left_set(enc: Encoded) -> str:
    """A launch that ran to the end with a flag queue holding sets no wait consumed: the next kernel's first
    wait on it would pass at once (mssanitizer's synccheck reports it). Its last set, named, or ''."""
    for cross_core in (False, True):
        for sets, waits in _queues(enc, cross_core):
            extra = len(sets) - len(waits)
            if extra > 0:
                i = int(sets[-1])
                who = "the other side waits" if cross_core else "it is waited"
                return (f"{enc.locs[enc.loc_i[i]]}: {enc.names[enc.name_i[i]]} on {enc.cores[enc.core_i[i]]} is set "
                        f"{extra} more time(s) than {who} for: the kernel ends with the flag still set; pair "
                        f"every set with a wait")
    return ""


def _region_blocks(a: dict, r: int):
    return a["rg_blk"][a["rg_ptr"][r]:a["rg_ptr"][r + 1]]


def _unit_flag_left(enc: Encoded, flags, begin, end) -> str:
    """A launch that ran to the end with an L0C unit_flag at 1: a matmul's AccPhase.Final result that no
    STPhase.Final read; the next matmul on that buffer waits for 0 forever (docs/cube_phase.md §4.2: the last write of an L0C
    buffer uses AccPhase.Final, the last read STPhase.Final). The last instruction that set it, named, or ''."""
    left = flags[:enc.n_flags] != 0
    if not left.any():
        return ""
    a = enc.arrays
    setters = _touching(enc, np.flatnonzero(a["uf_set"] == 1), left)
    i = int(setters[np.argmax(end[setters])])
    text = (f"{enc.locs[enc.loc_i[i]]}: {enc.names[enc.name_i[i]]} with AccPhase.Final on {enc.cores[enc.core_i[i]]} "
            f"leaves unit_flag({enc.region_names[a['uf_rid'][i]]}) at 1 when the kernel ends: no store/move with "
            f"STPhase.Final read that result after it, and the next matmul on this L0C would wait for 0 forever "
            f"(docs/cube_phase.md §4.2: the last read of an L0C buffer uses STPhase.Final)")
    # a Final read later in program order that ran before this matmul: the flag was still 1 from an earlier Final
    # result that only STPhase.Partial reads took, so it read that one
    blocks = np.zeros_like(left)
    blocks[_region_blocks(a, a["uf_rid"][i])] = True
    readers = _touching(enc, np.flatnonzero(a["uf_set"] == 0), blocks)
    early = readers[(readers > i) & (enc.core_i[readers] == enc.core_i[i]) & (begin[readers] < begin[i])]
    if len(early):
        j = int(early[0])
        text += (f"; the {enc.names[enc.name_i[j]]} with STPhase.Final at {enc.locs[enc.loc_i[j]]}, after it in program "
                 f"order, ran before it: the flag was still 1 from an earlier AccPhase.Final result that only "
                 f"STPhase.Partial reads took (give the last read of that result STPhase.Final)")
    return text


def _cross_core_overflow(enc: Encoded, begin, end, chip: Chip) -> str:
    """docs/chips.md §5: a cross-core flag counts its sets; more than chip.cross_core_flag_max of them waiting
    unconsumed hangs the chip. The first set that makes one too many, named, or ''."""
    for sets, waits in _queues(enc, cross_core=True):
        sets, waits = sets[end[sets] > 0], waits[end[waits] > 0]
        # pending after each set: sets raised so far (in raise order) minus waits that started before it
        raised = sets[np.argsort(end[sets], kind="stable")]
        pending = np.arange(1, len(raised) + 1) - np.searchsorted(np.sort(begin[waits]), end[raised], side="left")
        over = np.flatnonzero(pending > chip.cross_core_flag_max)
        if len(over):
            i = int(raised[over[0]])
            return (f"{enc.locs[enc.loc_i[i]]}: pl.system.set_cross_core raises a cross-core event that already has "
                    f"{chip.cross_core_flag_max} sets waiting unconsumed on {chip.name} (at most "
                    f"{chip.cross_core_flag_max}: set_cross_core_wait_cross_core.md; one more hangs the chip)")
    return ""


def _deadlock_report(enc: Encoded, qpos, order, flags, now: float) -> str:
    a = enc.arrays
    q_ptr, q_idx, kind = a["q_ptr"], a["q_idx"], a["kind"]
    started = np.zeros(len(a["pipe_of"]), bool)
    started[order] = True
    heads = [(s, int(q_idx[qpos[s]])) for s in range(len(enc.slots)) if qpos[s] < q_ptr[s + 1]]
    dep_ptr, dep_idx = a["dep_ptr"], a["dep_idx"]
    arrived = sum(1 for _, i in heads if kind[i] == 3 and started[dep_idx[dep_ptr[i]:dep_ptr[i + 1]]].all())
    lines = [f"deadlock at cycle {now:.0f}: no pipe of any core can progress "
             f"({int((~started).sum())} instructions left)"]
    for s, i in heads:
        prog, pipe = enc.slots[s]
        lines.append(f"  {prog} PIPE_{pipe.name}: {enc.locs[enc.loc_i[i]]}")
        lines.append(f"      waits for {_describe(enc, i, started, flags, arrived)}")
    return "\n".join(lines)


# why an instruction waits for another's completion, when the other is not a data access auto-sync ordered
_HELD_BY = {"pl.system.wait_cross_core": "a cross-core wait holds every pipe of its core on this chip "
                                          "(cross_core_wait_blocks_core: A2/A3)",
            "pl.system.sync_all": "pl.system.sync_all orders all that follows",
            **{f"pl.system.bar_{p}": "the barrier orders all that follows"
               for p in ("m", "mte1", "mte2", "mte3", "fix", "v", "all")}}


def _describe(enc: Encoded, i: int, started, flags, arrived: int) -> str:
    a = enc.arrays
    cond = enc.waits.get(i, "")
    for d in a["dep_idx"][a["dep_ptr"][i]:a["dep_ptr"][i + 1]]:
        if not started[d]:
            name = enc.names[enc.name_i[d]]
            if cond.startswith("mutex"):
                where = f"{enc.cores[enc.core_i[d]]} PIPE_{Pipe(enc.pipe_i[d]).name}"
                if d == i:
                    return (f"{cond}, whose last holder never gives it back (its mutex_lock has no mutex_unlock, or "
                            f"is blocked itself)")
                if a["pipe_of"][d] == a["pipe_of"][i]:
                    return (f"{cond}, which this pipe holds itself and gives back only at {name}, "
                            f"{enc.locs[enc.loc_i[d]]}, queued behind this instruction: a second lock of an id its "
                            f"pipe holds deadlocks the pipe (mutex_lock_mutex_unlock.md)")
                return (f"{cond}, held by {name} on {where} ({enc.locs[enc.loc_i[d]]}), which has not given it back: "
                        f"{_held(enc, int(d), started)}")
            return (f"{name} on PIPE_{Pipe(enc.pipe_i[d]).name} to finish ({_HELD_BY.get(name, 'auto-sync')}), "
                    f"itself waiting: {enc.locs[enc.loc_i[d]]}")
    if a["uf_wait"][i] >= 0:
        r = a["uf_rid"][i]
        vals = flags[_region_blocks(a, r)]
        val = int(a["uf_wait"][i])
        is_ = str(int(vals[0])) if (vals == vals[0]).all() else f"mixed ({int(vals.sum())} of {vals.size} set)"
        phase = ("AccPhase" if val == 0 else "STPhase") + (".Final" if a["uf_set"][i] >= 0 else ".Partial")
        j = _first_release(enc, i, val, started, flags)
        if j is not None:
            why = (f"the {enc.names[enc.name_i[j]]} that would {'set' if val == 1 else 'clear'} it, "
                   f"{enc.locs[enc.loc_i[j]]}, has not run: {_held(enc, j, started)}")
        else:
            why = "no matmul with AccPhase.Final set it" if val == 1 else "no store/move with STPhase.Final cleared it"
        if val == 0 and not (vals == vals[0]).all():
            # part of the region still holds a result: name the last read of those blocks that ran, a Partial one
            still = np.zeros(len(flags), bool)
            still[_region_blocks(a, r)[vals != 0]] = True
            reads = _touching(enc, np.flatnonzero((a["uf_wait"] == 1) & started), still)
            reads = reads[enc.core_i[reads] == enc.core_i[i]]
            if len(reads):
                k = int(reads[-1])
                why += (f"; the blocks still set were last read by the {enc.names[enc.name_i[k]]} at "
                        f"{enc.locs[enc.loc_i[k]]}, with STPhase.{'Final' if a['uf_set'][k] == 0 else 'Partial'}: "
                        f"a Final read must cover the whole region the next matmul writes")
        return f"unit_flag({enc.region_names[r]}) == {val}, is {is_} ({phase} waits for {val}; {why})"
    if a["kind"][i] == 3:
        text = cond.format(arrived=arrived, participants=enc.participants)
        calls = np.bincount(enc.core_i[a["kind"] == 3], minlength=len(enc.cores))
        most = int(calls.max())
        short = [f"{name} ({int(calls[c])})" for c, name in enumerate(enc.cores) if calls[c] < most]
        if short:
            text += (f"; calls of pl.system.sync_all per core differ: {most} on most, fewer on "
                     f"{', '.join(short[:6])}{' ...' if len(short) > 6 else ''} (every core of the launch must reach "
                     f"each one: a sync_all under `if pl.get_block_idx()` or `pl.get_subblock_idx()` hangs the chip)")
        return text
    if a["kind"][i] == ROUND_WAIT:
        raised = int(((a["kind"] == 1) & (a["fkey"] == a["fkey"][i]) & started).sum())
        return (f"{cond.split(':')[0]}: {raised} of the {int(a['fneed'][i])} sets its round needs were raised (each of "
                f"the {int(a['fspan'][i])} cores must set it once a round before any of their waits goes on)")
    if a["kind"][i] == 2:
        queued = np.flatnonzero((a["kind"] == 1) & (a["fkey"] == a["fkey"][i]) & ~started)
        if len(queued):
            j = int(queued[0])
            return (f"{cond.split(':')[0]}: its {enc.names[enc.name_i[j]]}, {enc.locs[enc.loc_i[j]]}, has not run: "
                    f"{_held(enc, j, started)}")
    return cond or "an earlier instruction"


def _first_release(enc: Encoded, i: int, val: int, started, flags) -> "int | None":
    """The first instruction not yet started on i's core that sets unit_flag `val` on a block i waits for that is
    not `val` yet (one touching only blocks already right would not free i; it may come after i in program order,
    on another pipe)."""
    a = enc.arrays
    blocks = _region_blocks(a, a["uf_rid"][i])
    wrong = np.zeros(enc.n_flags, bool)
    wrong[blocks[flags[blocks] != val]] = True
    cand = _touching(enc, np.flatnonzero((a["uf_set"] == val) & ~started & (enc.core_i == enc.core_i[i])), wrong)
    return int(cand[0]) if len(cand) else None


def _held(enc: Encoded, j: int, started) -> str:
    """Why instruction j, not started, has not run: blocked itself at the head of its pipe, or queued behind."""
    a = enc.arrays
    s = int(a["pipe_of"][j])
    queue = a["q_idx"][a["q_ptr"][s]:a["q_ptr"][s + 1]]
    head = queue[~started[queue]]
    if len(head) and int(head[0]) == j:
        return f"it is blocked itself at the head of {_pipe_of(enc, j)} (below)"
    return f"it is queued on {_pipe_of(enc, j)} behind a blocked instruction"


def _touching(enc: Encoded, cand: np.ndarray, blocks: np.ndarray) -> np.ndarray:
    """The phased instructions of `cand` (ascending) whose unit_flag region has a block marked in `blocks`."""
    a = enc.arrays
    lo, hi = a["rg_ptr"][a["uf_rid"][cand]], a["rg_ptr"][a["uf_rid"][cand] + 1]
    lens = hi - lo
    # every candidate's blocks, flattened: position k of candidate c is rg_blk[lo[c] + k]
    within = np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens)
    touches = blocks[a["rg_blk"][np.repeat(lo, lens) + within]]
    return cand[np.unique(np.repeat(np.arange(len(cand)), lens)[touches])]


def _pipe_of(enc: Encoded, j: int) -> str:
    return f"{enc.cores[enc.core_i[j]]} PIPE_{Pipe(enc.pipe_i[j]).name}"
