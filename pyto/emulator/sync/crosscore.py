"""Cross-core pairing inside a block: data the AIC moves into an AIV's UB (L0C->UB) and data an AIV
moves into the AIC's L1 (UB->L1).

Each role's trace keeps the other roles' ops as markers at the place its own program meets them.
The AIC's n-th move into a UB tile pairs with the n-th marker of that move in each AIV's program
(issue 4: "the n-th move into a UB tile pairs with the vector code that follows it in that order").
An AIV's move into L1 goes into the AIC's order where that AIV met it: after the cube instructions its
own trace met before it (an AIV's code may differ from the other's by pl.get_subblock_idx(), so the AIC's
markers, traced like AIV0, cannot place AIV1's moves). Auto-sync then runs on each program with the real
moves spliced in, so the receiver waits for the move (RAW) and the next move waits for the receiver to be
done with the tile (WAR: the buffer's release back). These edges are part of happens-before.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import NamedTuple

from ...errors import KernelError
from ...ir import Op, Role

from . import autosync, mutex
from .deps import Deps

_CROSS = {("L0C", "UB"), ("UB", "L1")}
_MOVE = Op.MOVE


def cross_key(ins):
    """(path, destination allocation key) of a cross-core move into a pl.alloc tile (the only ones pyto pairs and
    orders itself: a make_tile / tile-group destination is the kernel's to order with cross-core events), None for
    any other instruction."""
    if ins.op is Op.MOVE and ins.attrs.get("path") in _CROSS and ins.dsts[0].obj.autosync:
        return ins.attrs["path"], ins.dsts[0].obj.key
    return None


def _spliced(prog, real: dict) -> list:
    """The program's own instructions with the paired real cross-core moves at their markers."""
    count: dict = {}
    extra: dict = {}
    for pos, marker in [pm for pm in prog.markers if pm[1].op is _MOVE]:
        key = cross_key(marker)
        if key is None:
            continue
        n = count.get(key, 0)
        count[key] = n + 1
        for ins in real.get(key, {}).get(n, ()):
            extra.setdefault(pos, []).append(ins)
    return _with(prog.instrs, extra)


def _with(instrs: list, extra: dict) -> list:
    """`instrs` with extra[i] (other cores' moves) placed before instruction i (at the end for len)."""
    if not extra:
        return instrs
    order: list = []
    start = 0
    for i in sorted(extra):
        order.extend(instrs[start:i])
        order.extend(extra[i])
        start = i
    order.extend(instrs[start:])
    return order


def _into_l1(ins) -> bool:
    return ins.op is Op.MOVE and ins.attrs.get("path") == ("UB", "L1")


def _first_difference(prog, aic, cube: list):
    """The first cube instruction `prog` (an AIV) met that is not the AIC's, or None when they agree."""
    seen = [m for _, m in prog.markers]
    for m, i in zip(seen, cube):
        if m.op is not aic.instrs[i].op or m.loc != aic.instrs[i].loc:
            return m
    if len(seen) != len(cube):
        return seen[len(cube)] if len(seen) > len(cube) else aic.instrs[cube[len(seen)]]
    return None


def _aic_order(aic, aivs: list) -> list:
    """The AIC's instructions with each AIV's moves into L1 spliced where that AIV's trace met them: after
    as many cube instructions and sync_alls as it had seen."""
    if not aivs:
        return aic.instrs
    cube = [i for i, ins in enumerate(aic.instrs) if ins.op is not Op.SYNC_ALL]
    syncs = [i for i, ins in enumerate(aic.instrs) if ins.op is Op.SYNC_ALL]
    extra: dict = {}
    for prog in aivs:
        moves = [i for i, ins in enumerate(prog.instrs) if ins.op is _MOVE and _into_l1(ins)]
        if not moves:
            continue
        bad = _first_difference(prog, aic, cube)
        if bad is not None:
            raise KernelError(f"{bad.loc}: {prog} traces the cube code differently from the AIC (around this "
                              f"line): cube instructions must not depend on pl.get_subblock_idx() outside "
                              f"pl.section_vector()")
        # a move at i has met the markers placed at or before i and the sync_alls before it
        placed = [pos for pos, _ in prog.markers]
        own_syncs = [i for i, ins in enumerate(prog.instrs) if ins.op is Op.SYNC_ALL]
        for i in moves:
            met, n_sync = bisect_right(placed, i), bisect_left(own_syncs, i)
            at = max(cube[met - 1] + 1 if met else 0, syncs[n_sync - 1] + 1 if n_sync else 0)
            extra.setdefault(at, []).append(prog.instrs[i])
    return _with(aic.instrs, extra)


class Synced(NamedTuple):
    """The sync stage's output for some programs: their dependencies, and an unpaired mutex_lock's SyncError text
    ('' if none), raised once the schedule has run (a deadlock it causes says more)."""

    deps: Deps
    unpaired: str


def insert_all(programs: list, auto_sync: bool, wait_blocks_core: bool = False) -> Synced:
    """Auto-sync every program given, with cross-core moves paired inside each block, and give each program its mutex
    tokens' dependencies (mutex.py). wait_blocks_core (A2/A3): a cross-core wait holds every later instruction of its
    core."""
    deps = Deps()
    unpaired = ""
    for prog in programs:
        unpaired = mutex.insert(prog.instrs, deps) or unpaired
    blocks: dict = {}
    for prog in programs:
        blocks.setdefault(prog.block, []).append(prog)
    spliced: list = []       # the cross-core moves: auto-synced in two programs' orders
    for progs in blocks.values():
        real: dict = {}
        if len(progs) > 1:
            for prog in progs:
                seen: dict = {}
                for ins in [ins for ins in prog.instrs if ins.op is _MOVE]:
                    key = cross_key(ins)
                    if key is not None:
                        n = seen.get(key, 0)
                        seen[key] = n + 1
                        real.setdefault(key, {}).setdefault(n, []).append(ins)
                        spliced.append(ins)
        aivs = [p for p in progs if p.role is not Role.AIC]
        for prog in sorted(progs, key=lambda p: p.role is not Role.AIC):
            if not auto_sync:
                order = prog.instrs
            elif prog.role is Role.AIC:
                order = _aic_order(prog, aivs)
            else:
                order = _spliced(prog, real)
            autosync.insert(order, prog.id, deps, data=auto_sync, wait_blocks_core=wait_blocks_core)
    # one order gives an instruction each dependency once, and never itself (autosync.insert)
    for ins in spliced:
        deps.dedup(ins)
    return Synced(deps, unpaired)
