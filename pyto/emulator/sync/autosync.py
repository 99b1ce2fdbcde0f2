"""Auto-sync (docs/design.md §4.2): the software synchronisation the framework inserts.

For every tile (and GM tensor within one program): a read after a write on another pipe waits for
that write; a write waits for earlier reads and writes on other pipes. On the M<->FIX edge of an
L0C tile no software sync is formed when either side carries a phase: the hardware unit_flag
decides (docs/cube_phase.md §3). sync_all and bar_all order everything before against everything after; mutex tokens are mutex.py's.

A program's order may include another core's instructions (cross-core moves, see crosscore.py):
they take part in the tracking, and the dependencies found for them are added to theirs.
"""
from __future__ import annotations

import numpy as np

from ...ir import Buf, GMTensor, Instr, Op, Pipe, is_cross_core, rect_covers
from . import autosync_jit, autosync_table
from .deps import Deps
from .. import jitmode

REFERENCE = False     # True: `insert` runs insert_reference, the plain algorithm (tests compare the two)
SMALL = 24            # shorter orders run insert_reference: the tables' fixed cost is more than its loop

_MFIX = frozenset({Pipe.M, Pipe.FIX})
_L0C = Buf.L0C


def _phase_exempt(obj, a: Instr, b: Instr) -> bool:
    return (getattr(obj, "buf", None) is Buf.L0C and a.pipe != b.pipe and {a.pipe, b.pipe} == _MFIX
            and (a.attrs.get("phase") is not None or b.attrs.get("phase") is not None))




class _Track:
    """Per object: recent writes keyed by (batch, rect) and reads keyed by (unit, batch, rect), each
    entry (rect, batch, unit, instr); unit = (core, pipe). GM reads keep only each unit's latest."""

    __slots__ = ("writes", "reads", "gm_reads")

    def __init__(self):
        self.writes: dict = {}
        self.reads: dict = {}
        self.gm_reads: dict = {}   # GM: unit -> last reading instr (conservative WAR)


def _later(deps: dict, unit, o: Instr) -> None:
    if unit not in deps or deps[unit].index < o.index:
        deps[unit] = o


def insert(order: list, core: int, deps: Deps, data: bool = True, wait_blocks_core: bool = False) -> None:
    """Add to `deps` the auto-sync dependencies of the instructions of program `core`, given in program order: those
    insert_reference adds, in its order, by its loop compiled on flat tables (autosync_jit.py)."""
    if REFERENCE or len(order) < SMALL:
        insert_reference(order, core, deps, data, wait_blocks_core)
        return
    t = autosync_table.tables(order)
    run = jitmode.pick(autosync_jit.run, len(order), jitmode.ORDER)
    ptr, found = run(t.keys, t.rank, core, data, wait_blocks_core, int(Pipe.M), int(Pipe.FIX), *t[2:])
    if not len(found):
        return
    waits = list(map(order.__getitem__, found.tolist()))
    bounds = ptr.tolist()
    add = deps.add
    for i in np.flatnonzero(ptr[1:] != ptr[:-1]).tolist():
        add(order[i], waits[bounds[i]:bounds[i + 1]])


def insert_reference(order: list, core: int, deps: Deps, data: bool = True, wait_blocks_core: bool = False) -> None:
    """Add to `deps` the auto-sync dependencies of the instructions of program `core`, given in program order.

    `order` may hold other cores' instructions at the place this program meets them. With
    `data=False` (auto_sync off: the kernel synchronises itself with flags) only the barrier edges
    of sync_all / bar_all are inserted. With `wait_blocks_core` (A2/A3) a cross-core wait holds
    every later instruction of the core, as a barrier does for what follows it.
    """
    tracks: dict = {}
    barrier = None
    after_barrier: set = set()
    last_on: dict = {}
    issued: dict = {}      # unit -> its instructions since its last flag set, mutex unlock or barrier
    for ins in order:
        own = ins.core == core
        unit = (ins.core, ins.pipe)
        if own and (ins.op is Op.SET_FLAG or ins.op is Op.MUTEX_UNLOCK
                    or (ins.op is Op.BARRIER and ins.attrs.get("pipe") is not Pipe.ALL)):
            # a flag is raised (a barrier passed) once the pipe's earlier work has completed, its data landed
            # a latency after the pipe let it go: it waits for each instruction in flight on its own pipe
            deps.add(ins, issued.pop(unit, ()))
        elif own:
            issued.setdefault(unit, []).append(ins)
        waits: dict = {}
        if own and (ins.op is Op.SYNC_ALL or (ins.op is Op.BARRIER and ins.attrs.get("pipe") is Pipe.ALL)):
            for u, last in last_on.items():
                if u != unit:
                    waits[u] = last
            deps.add(ins, waits.values())
            barrier, after_barrier = ins, set()
            last_on[unit] = ins
            continue
        if own and barrier is not None and unit not in after_barrier:
            after_barrier.add(unit)
            if ins.pipe != barrier.pipe:
                waits[(core, barrier.pipe)] = barrier
        if data:
            _data_deps(ins, unit, tracks, waits, core)
        if waits:
            deps.add(ins, [d for d in waits.values() if d is not ins])
        if own:
            last_on[unit] = ins
            if wait_blocks_core and ins.op is Op.WAIT_FLAG and is_cross_core(ins.attrs["key"]):
                barrier, after_barrier = ins, {unit}


def _data_deps(ins: Instr, unit, tracks: dict, deps: dict, core: int) -> None:
    """Dependencies of `ins` on earlier accesses. Another core's instruction spliced into this
    program only syncs with this program's own instructions: two foreign moves (say both AIVs
    writing one L1 tile) get no edge here that no hardware mechanism would provide."""
    foreign = ins.core != core
    found = {} if foreign else deps
    for acc in ins.srcs:
        tr = tracks.get(acc.obj)
        if tr is None or not tr.writes:
            continue
        rect, batch = acc.rect, acc.batch
        l0c = getattr(acc.obj, "buf", None) is _L0C
        for erect, ebatch, u, w in tr.writes.values():
            if (u != unit and ebatch == batch and erect[0] < rect[1] and rect[0] < erect[1] and erect[2] < rect[3]
                    and rect[2] < erect[3] and not (l0c and _phase_exempt(acc.obj, ins, w))):
                last = found.get(u)      # _later, inline: the hottest loop of auto-sync
                if last is None or last.index < w.index:
                    found[u] = w
    exempt: set = set()   # entries this write is not synced with (phase): they stay tracked
    for acc in ins.dsts:
        tr = tracks.get(acc.obj)
        if tr is None:
            continue
        rect, batch = acc.rect, acc.batch
        l0c = getattr(acc.obj, "buf", None) is _L0C
        for entries in (tr.writes, tr.reads):
            for erect, ebatch, u, o in entries.values():
                if (u != unit and ebatch == batch and erect[0] < rect[1] and rect[0] < erect[1]
                        and erect[2] < rect[3] and rect[2] < erect[3]):
                    if l0c and _phase_exempt(acc.obj, ins, o):
                        exempt.add(id(o))
                    else:
                        last = found.get(u)
                        if last is None or last.index < o.index:
                            found[u] = o
        for u, o in tr.gm_reads.items():
            if u != unit:
                _later(found, u, o)
    if foreign:
        for u, o in found.items():
            if u[0] == core:
                _later(deps, u, o)
    phased = ins.attrs.get("phase") is not None    # (on L0C: a phased entry never stands for one without)
    for acc in ins.srcs:
        if not acc.obj.autosync:        # a make_tile / tile-group tile, or a jit kernel's GM: the kernel's to sync
            continue
        tr = tracks.get(acc.obj)
        if tr is None:
            tr = tracks[acc.obj] = _Track()
        if isinstance(acc.obj, GMTensor):
            tr.gm_reads[unit] = ins
        else:
            tr.reads[(unit, acc.batch, acc.rect, phased)] = (acc.rect, acc.batch, unit, ins)
    for acc in ins.dsts:
        if not acc.obj.autosync:
            continue
        tr = tracks.get(acc.obj)
        if tr is None:
            tr = tracks[acc.obj] = _Track()
        rect, batch = acc.rect, acc.batch
        if isinstance(acc.obj, GMTensor):
            # GM regions are rarely rewritten: drop only the same region (other covered entries stay
            # tracked, which can only add a dependency that holds anyway), not a scan of every store
            tr.writes.pop((batch, rect), None)
        elif phased and acc.obj.buf is _L0C:
            # a phased L0C write retires only phased entries: an access without a phase on the other
            # side of M<->FIX is not synced with it (unit_flag decides), so it still waits for the
            # earlier accesses without a phase, which stay tracked
            _retire(tr, batch, rect, lambda e: e[3].attrs.get("phase") is not None and id(e[3]) not in exempt)
            tr.writes[(batch, rect, True)] = (rect, batch, unit, ins)
            continue
        elif foreign:
            # another core's move spliced into this order (crosscore.py) waits for this program's accesses
            # it conflicts with and follows its own core's, but nothing orders it after a third core's
            # (the other AIV): it retires only the first two, and is kept apart from the third's
            mine = (core, ins.core)
            _retire(tr, batch, rect, lambda e: e[2][0] in mine and id(e[3]) not in exempt)
            tr.writes[(batch, rect, ins.core)] = (rect, batch, unit, ins)
            continue
        elif not exempt and rect == (0, acc.obj.shape[0], 0, acc.obj.shape[1]):
            tr.writes.clear()          # the whole tile is rewritten: every earlier entry is covered
            tr.reads.clear()
        else:
            _retire(tr, batch, rect, lambda e: id(e[3]) not in exempt)
        tr.writes[(batch, rect)] = (rect, batch, unit, ins)


def _retire(tr: _Track, batch: int, rect: tuple, may) -> None:
    """Drop the entries a write of `rect` covers and `may(entry)` lets it retire: a later access ordered
    after the write is ordered after them."""
    for entries in (tr.writes, tr.reads):
        dead = [k for k, e in entries.items() if e[1] == batch and rect_covers(rect, e[0]) and may(e)]
        for k in dead:
            del entries[k]
