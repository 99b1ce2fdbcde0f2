"""The checked pass over a schedule: each instruction, in the order it started, gets its happens-before
and race checks and the uninitialised-read check. (The data path is a separate pass, datapass.DataPass:
the verdicts do not depend on the data.) This module decides what is visited and with which clocks; the
walk itself runs over integer arrays (rows.py keeps each block's accesses as rows from the time it is encoded,
lower.py lays out those the pass visits, checkcore.py checks them) and the messages are made from Instr records
rebuilt from the rows (rows.Instrs; sanitizer.race_error, memory.Initialised.error).

Blocks that share an encoding (blockcache.py) and whose waits were released by the same instructions
(relative to the block: the schedule's joins) have the same happens-before order, so the race checker
reaches the same verdict on their own buffers, with the same vector clocks. Such a block (a follower)
borrows the clocks of the first block like it (its leader) and is checked only where it touches GM
that some instruction of the launch writes: there another block may race with it. Its tiles'
uninitialised reads are its leader's. In a launch that stalls every block is checked in full.
"""
from __future__ import annotations

import numpy as np

from ...errors import DeadlockError
from ...ir import TileStore
from . import checkcore
from .. import jitmode
from ..encode.encode import ROUND_WAIT
from .lower import Lowering, deps, threads
from ..data.memory import Initialised
from .overlap import clobbered
from .rows import Instrs, LaunchRows
from .sanitizer import race_error


def _launch_wide(spans: list) -> bool:
    """Whether blocks order each other by more than sync_all: INTER_BLOCK events (launch-wide clocks, no followers)."""
    return any((sp.code.arrays["kind"] == ROUND_WAIT).any() for sp in spans)


def _leaders(spans: list, sched) -> list:
    """Per block, the index of the block it follows (itself when it leads; every block leads when blocks order
    each other by INTER_BLOCK events)."""
    if sched.deadlock or len(spans) < 2 or _launch_wide(spans):
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
    for b, sp in enumerate(spans):
        first, code = sp.first, sp.code
        lo, hi = bounds[b], bounds[b + 1]
        keep = inside[lo:hi]
        joins = np.stack([owner[lo:hi][keep] - first, src[lo:hi][keep] - first]).tobytes()
        out.append(seen.setdefault((id(code), joins), b))
    return out


def _follower_uses(spans: list, lead: np.ndarray, uses: np.ndarray, sync: np.ndarray, n: int) -> tuple:
    """Per instruction of a follower: (it touches GM the launch writes, it reads a workspace and does not,
    it is visited: one of those or a sync_all), read off the first leader of its encoding at the same place;
    the only instructions a follower visits itself."""
    tracked, reads, visit = np.zeros(n, np.bool_), np.zeros(n, np.bool_), np.zeros(n, np.bool_)
    model: dict = {}
    for b, sp in enumerate(spans):
        if lead[b]:
            model.setdefault(id(sp.code), sp.first)
    for b, sp in enumerate(spans):
        if not lead[b]:
            f, s, m = model[id(sp.code)], sp.first, sp.code.n
            u = uses[f:f + m]
            tracked[s:s + m], reads[s:s + m] = u == 1, u == 2
            visit[s:s + m] = (u != 0) | sync[f:f + m]
    return tracked, reads, visit


def replay(launch: LaunchRows, sched, blocks: int, init: Initialised, overlap: bool = False) -> set:
    """Check each instruction of the launch (`launch`: its blocks' records, rows.py) in the order it started, then
    report a stall; return the ids of the GM tensors the launch writes. `overlap`: some tiles share bytes
    (overlap.py follows them).

    An uninitialised read is held back until the end: if it is half of a race, the race is reported
    whichever access the simulation happened to run first; a read of another tile's bytes (ClobberedReadError)
    is reported before a read of bytes nothing wrote.
    """
    spans = launch.blocks
    n = int(spans[-1].first + spans[-1].n) if spans else 0
    glob = _launch_wide(spans)
    leader = _leaders(spans, sched)
    lead = np.array([lb == b for b, lb in enumerate(leader)], np.bool_)
    first = np.array([sp.first for sp in spans], np.int64)
    blk = np.repeat(np.arange(len(spans), dtype=np.int32), [sp.code.n for sp in spans])
    core, thr, sync = threads(spans)
    leader_ins = lead[blk]
    low = Lowering(launch, n)
    low.add_leaders(np.flatnonzero(lead))
    uses = low.leaders_walked()     # 1: touches GM the leaders write, 2: reads a workspace
    followed = not lead.all()
    if followed:
        f_tracked, f_reads, f_visit = _follower_uses(spans, lead, uses, sync, n)
        low.add_followers(np.flatnonzero(~lead), f_tracked | f_reads)
        visit = leader_ins | f_visit
    else:
        f_tracked = f_reads = np.zeros(n, np.bool_)
        visit = leader_ins
    acc = low.finish(init)
    dep_ptr, dep_idx = deps(spans, lead, n)
    # the leaders' instructions whose clocks are kept: those others wait for, and (for followers) GM uses
    keep = np.zeros(n, np.bool_)
    keep[dep_idx] = True
    keep[sched.join_idx] = True
    if followed:
        keep |= uses == 1
    keep &= leader_ins
    slot = np.where(keep, np.cumsum(keep) - 1, -1).astype(np.int32)
    del keep, leader_ins, uses
    parties = np.unique(core[sync])                # the cores every sync_all joins
    # a launch without vector-side instructions has the AIC's threads only: shorter clocks to join
    width = 13 if any(sp.vector for sp in spans) else 5
    if glob:                                       # launch-wide clocks: a column per block's thread
        width = 13 * max(blocks, 1)
    order = sched.order
    positions = np.flatnonzero(visit[order])
    del visit
    fn = jitmode.pick(checkcore.check, len(order), jitmode.INSTRUCTIONS)
    race, un = fn(positions, np.asarray(order, np.int64), np.asarray(sched.join_ptr, np.int64),
                  np.asarray(sched.join_idx, np.int64), blk, thr, core, sync, np.array(leader, np.int64), first,
                  dep_ptr, dep_idx, slot, int((slot >= 0).sum()), f_tracked, f_reads, parties, max(blocks, 1), width,
                  _DMA_THREADS, glob, *acc)
    instrs = Instrs(spans, launch.tables)
    if race[0]:
        raise _race(instrs, low, acc, race, sched.left_set, init.aiv_only)
    if overlap:
        shared = _shared_tiles(launch, n)
        clobber = clobbered(instrs, order[shared[order]].tolist())
        if clobber is not None:
            raise clobber
    if un[0]:
        i, a, unwritten, cells = (int(x) for x in un[1:])
        raise init.error(low.access(instrs, i, a - int(acc.start[i])), instrs[i], unwritten, cells)
    if sched.deadlock:
        raise DeadlockError(sched.deadlock)
    return low.written


def _shared_tiles(launch: LaunchRows, n: int) -> np.ndarray:
    """Per instruction, whether it names a tile whose bytes overlap another's (the only ones `clobbered` reads)."""
    objects = launch.tables.objects
    shared = np.array([type(o) is TileStore and o.shared for o in objects], np.bool_)
    out = np.zeros(n, np.bool_)
    for blk in launch.blocks:
        own = blk.own_rows
        mine = shared[blk.gobj[own.a_obj]]
        if mine.any():
            owner = np.repeat(np.arange(blk.n, dtype=np.int64), own.nacc)
            out[blk.first + owner[mine]] = True
    return out


def _race(instrs: Instrs, low: Lowering, acc, race: np.ndarray, note: str, aiv_only: bool = False):
    """The RaceError of checkcore's race record."""
    i, write, a = int(race[4]), bool(race[5]), int(race[6])
    ins = instrs[i]
    access = low.access(instrs, i, a - int(acc.start[i]))
    e = [int(x) for x in race[7:]]
    other = instrs[e[10]]
    entry = (tuple(e[:4]), access.batch, e[4], e[5], e[6], e[7], bool(e[8]), bool(e[9]), other, bool(e[11]))
    return race_error(access.obj, access, entry, ins, write, note, instrs.accesses(e[10]), aiv_only)


# the MTE2 threads of a block's clock (lower.py's thread table: the AIC's MTE2, AIV0's, AIV1's): two writes of one
# such pipe to the same bytes of a tile only the kernel syncs are unordered without a barrier (bar_mte2, load.md)
_DMA_THREADS = np.zeros(13, np.bool_)
_DMA_THREADS[[0, 5, 9]] = True
