"""The checked pass over a schedule: each instruction, in the order it started, gets its happens-before
and race checks and the uninitialised-read check. (The data path is a separate pass, datapass.DataPass:
the verdicts do not depend on the data.)

Blocks that share an encoding (blockcache.py) and whose waits were released by the same instructions
(relative to the block: the schedule's joins) have the same happens-before order, so the race checker
reaches the same verdict on their own buffers, with the same vector clocks. Such a block (a follower)
borrows the clocks of the first block like it (its leader) and is checked only where it touches GM
that some instruction of the launch writes: there another block may race with it. Its tiles'
uninitialised reads are its leader's. In a launch that stalls every block is checked in full.
"""
from __future__ import annotations

from operator import attrgetter
from typing import NamedTuple

import numpy as np

from ..errors import DeadlockError
from ..ir import GMTensor, Op, Role
from .memory import Initialised
from .sanitizer import Sanitizer

_OP = attrgetter("op")


class Span(NamedTuple):
    """One block of the launch: its first instruction index, encoding, programs, and whether auto-sync
    ran on these programs (a block that reused another's encoding has no dependencies attached yet)."""

    first: int
    code: object          # encode.BlockCode
    programs: list
    synced: bool


def _leaders(spans: list, sched) -> list:
    """Per block, the index of the block it follows (itself when it leads)."""
    if sched.deadlock or len(spans) < 2:
        return list(range(len(spans)))
    order, ptr, idx = sched.order, sched.join_ptr, sched.join_idx
    owner = np.repeat(order, np.diff(ptr[:len(order) + 1]))       # the instruction each join belongs to
    src = idx[:len(owner)]
    by = np.lexsort((src, owner))
    owner, src = owner[by], src[by]
    firsts = np.array([sp.first for sp in spans], np.int64)
    block_of_owner = np.searchsorted(firsts, owner, side="right") - 1
    block_of_src = np.searchsorted(firsts, src, side="right") - 1
    inside = block_of_owner == block_of_src                      # joins with other blocks order nothing here
    bounds = np.searchsorted(block_of_owner, np.arange(len(spans) + 1))
    seen: dict = {}
    out = []
    for b, (first, code, _, _) in enumerate(spans):
        lo, hi = bounds[b], bounds[b + 1]
        keep = inside[lo:hi]
        joins = np.stack([owner[lo:hi][keep] - first, src[lo:hi][keep] - first]).tobytes()
        out.append(seen.setdefault((id(code), joins), b))
    return out


def _tracked(ins, written: set) -> bool:
    """Whether `ins` touches a GM tensor some instruction writes (where blocks can race)."""
    for group in (ins.srcs, ins.dsts):
        for a in group:
            if id(a.obj) in written:
                return True
    return False


def _gm_uses(spans: list, leader: list, written: set) -> list:
    """Per block, the relative indices of (instructions touching GM that the launch writes, instructions
    reading a workspace, sync_alls): the only ones a follower visits itself. Found once per followed
    encoding, on its leader."""
    found: dict = {}
    followed = {id(sp.code) for b, sp in enumerate(spans) if leader[b] != b}
    for b, sp in enumerate(spans):
        if leader[b] == b and id(sp.code) in followed and id(sp.code) not in found:
            tracked, reads_ws, syncs = set(), set(), set()
            for k, ins in enumerate(ins for prog in sp.programs for ins in prog.instrs):
                if _tracked(ins, written):
                    tracked.add(k)
                elif any(isinstance(a.obj, GMTensor) and a.obj.workspace for a in ins.srcs):
                    reads_ws.add(k)
                elif ins.op is Op.SYNC_ALL:
                    syncs.add(k)
            found[id(sp.code)] = (tracked, reads_ws, syncs)
    return [found.get(id(sp.code)) for sp in spans]


def _positions(spans: list, leader: list, gm_of: list, order: np.ndarray, n: int):
    """The start positions the checked pass must visit: the leaders' and the followers' own GM uses."""
    need = np.zeros(n, bool)
    for b, sp in enumerate(spans):
        if leader[b] == b:
            need[sp.first:sp.first + sp.code.n] = True
        else:
            need[[sp.first + rel for rel in (*gm_of[b][0], *gm_of[b][1], *gm_of[b][2])]] = True
    return np.flatnonzero(need[order]).tolist()


def _check_reads(ins, init: Initialised, uninit: list, gm_only: bool) -> tuple:
    """Hold back an uninitialised read of `ins` (of GM only, for a follower); return the positions of the
    sources read uninitialised (the sanitizer's fresh reads)."""
    fresh = ()
    for k, acc in enumerate(ins.srcs):
        if not gm_only or isinstance(acc.obj, GMTensor):
            err = init.check_read(acc, ins)
            if err is not None:
                uninit.append(err)
                fresh += (k,)
    return fresh


def _check_deferred(san: Sanitizer, deferred: list, block_of: list, leader: list, first: list,
                    clocks_of: dict) -> None:
    """The followers' GM checks of one sync_all phase, after the leaders' accesses of that phase and before
    any of the next: accesses of two blocks are ordered only by sync_all phases, so within a phase the order
    of the checks between blocks does not matter (within a block it is the start order); checked after a
    later phase, an entry of this phase could already be covered by a later write and gone."""
    for ins, fresh in deferred:
        b = block_of[ins.index]
        san.check_gm(ins, *clocks_of[leader[b]][ins.index - first[b]], fresh)
    deferred.clear()


def replay(instrs: list, sched, blocks: int, init: Initialised, spans: list) -> set:
    """Check each instruction in the order it started, then report a stall; return the ids of the GM
    tensors the launch writes.

    An uninitialised read is held back until the end: if it is half of a race, the race is reported
    whichever access the simulation happened to run first.
    """
    leader = _leaders(spans, sched)
    leads = [sp for b, sp in enumerate(spans) if leader[b] == b]
    for sp in leads:
        if not sp.synced:
            sp.code.attach_deps(sp.programs)     # the race checker follows each instruction's dependencies
    # a follower's instructions are its leader's, up to GM position: the leaders name every tensor written
    written = {id(a.obj) for sp in leads for prog in sp.programs for ins in prog.instrs for a in ins.dsts
               if isinstance(a.obj, GMTensor)}
    keep = {d.index for sp in leads for prog in sp.programs for ins in prog.instrs for d in ins.deps}
    keep.update(int(j) for j in sched.join_idx)
    san = Sanitizer(blocks, written, vector=any(prog.role is not Role.AIC for sp in spans for prog in sp.programs))
    first = [sp.first for sp in spans]
    block_of = np.repeat(np.arange(len(spans)), [sp.code.n for sp in spans]).tolist()
    gm_of = _gm_uses(spans, leader, written)
    clocks_of: dict = {}      # leader block -> {relative index: (clocks, phase)} of its tracked GM accesses
    followed = any(lead != b for b, lead in enumerate(leader))   # else no one borrows those clocks
    deferred: list = []       # followers' tracked GM accesses of the current sync_all phase, in start order
    barriers_seen: dict = {}
    # the cores every sync_all joins; once all have started the n-th, phase n-1 is over (all of its work
    # has completed, so every leader clock of that phase is recorded)
    parties = {prog.block * 3 + int(prog.role) for sp in spans for prog in sp.programs
               if Op.SYNC_ALL in map(_OP, prog.instrs)}     # (a C-level scan: every instruction of the launch)
    phase = 0
    uninit: list = []
    order, ptr, idx = sched.order.tolist(), sched.join_ptr.tolist(), sched.join_idx.tolist()
    for pos in _positions(spans, leader, gm_of, sched.order, len(instrs)):
        i = order[pos]
        ins = instrs[i]
        b = block_of[i]
        if ins.op is Op.SYNC_ALL:
            n = barriers_seen[ins.core] = barriers_seen.get(ins.core, 0) + 1
            if leader[b] == b:
                san.pass_barrier(ins, n)
            done = min(barriers_seen.get(c, 0) for c in parties)
            if done > phase:      # check the followers' accesses of the phase that ended, before any of the next
                phase = done
                _check_deferred(san, deferred, block_of, leader, first, clocks_of)
        if leader[b] != b:    # a follower: only its GM uses are its own to check
            tracked, reads_ws, _ = gm_of[b]
            rel = i - first[b]
            fresh = _check_reads(ins, init, uninit, gm_only=True) if rel in tracked or rel in reads_ws else ()
            if rel in tracked:
                deferred.append((ins, fresh))
                for acc in ins.dsts:
                    init.mark_written(acc)
            continue
        joins = ins.deps
        if ptr[pos + 1] > ptr[pos]:
            joins = joins + [instrs[j] for j in idx[ptr[pos]:ptr[pos + 1]]]
        fresh = _check_reads(ins, init, uninit, gm_only=False)
        seen = san.begin(ins, joins, i in keep, fresh)
        if followed and _tracked(ins, written):
            clocks_of.setdefault(b, {})[i - first[b]] = seen
        for acc in ins.dsts:
            init.mark_written(acc)
    _check_deferred(san, deferred, block_of, leader, first, clocks_of)
    if san.race is not None:
        raise san.first_race(sched.left_set)
    if uninit:
        raise uninit[0]
    if sched.deadlock:
        raise DeadlockError(sched.deadlock)
    return written
