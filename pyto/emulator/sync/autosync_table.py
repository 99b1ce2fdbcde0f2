"""One program's order as the flat tables auto-sync's compiled loop (autosync_jit.py) reads.

Each instruction becomes a key: what auto-sync reads of it (op, pipe, core, phase, a barrier's pipe,
whether a wait is cross-core, and per access the object and its rectangle; tiles' accesses carry
batch -1, the tracer's). Keys are interned, so the per-instruction cost is one tuple and one dict
look-up, and the tables hold one row per distinct key.

A GM tensor's position is left out of the key unless the tensor is *relevant*: written by one unit
(core, pipe) and touched by another. Only then can it form a dependency (a dependency joins two
units on one object, one side writing), so the others (inputs only read, outputs written by one
pipe) are left out of the tables altogether, tiles alike.
"""
from __future__ import annotations

from operator import attrgetter
from typing import NamedTuple

import numpy as np

from ...ir import Buf, GMTensor, Op, Pipe, is_cross_core
from .autosync_jit import BARRIER_ALL, CROSS_WAIT, PIPE_BARRIER, SET_FLAG

_INDEX = attrgetter("index")


class Tables(NamedTuple):
    """autosync_jit.run's arguments after (core, data, wait_blocks_core, pipe_m, pipe_fix)."""
    keys: np.ndarray        # per position: its key
    rank: np.ndarray        # per position: the instruction's index (the reference orders a unit's by it)
    kt: np.ndarray          # per key: kind (0, SET_FLAG, ...), unit, phased, and its sources are the access
                            # rows s0..s1, its destinations s1..d1
    at: np.ndarray          # per access of a relevant object: object, batch, rectangle (r0, r1, c0, c1)
    ot: np.ndarray          # per relevant object: GM tensor, L0C tile, its whole rectangle
    ut: np.ndarray          # per unit: core, pipe
    n_entries: int          # accesses of relevant objects: a bound on the entries tracked at once


def keys_of(order: list) -> tuple:
    """(key per position, the first instruction of each key, the intern table). The hot loop of auto-sync
    in Python: one source and one destination (moves), or two and one (vector ops, matmuls), make a tuple of
    their own length; the others a list first."""
    intern: dict = {}
    reps: list = []
    keys: list = []
    get, append = intern.get, keys.append
    gm, barrier, wait = GMTensor, Op.BARRIER, Op.WAIT_FLAG
    for ins in order:
        op = ins.op
        srcs, dsts = ins.srcs, ins.dsts
        if len(srcs) == 1 and len(dsts) == 1 and op is not barrier and op is not wait:
            s, d = srcs[0], dsts[0]
            so, do = s.obj, d.obj
            t = (op, ins.pipe, ins.core, ins.attrs.get("phase"), so, None if type(so) is gm else s.rect,
                 do, None if type(do) is gm else d.rect)
        elif len(srcs) == 2 and len(dsts) == 1 and op is not barrier and op is not wait:   # vector, matmul
            s, s2, d = srcs[0], srcs[1], dsts[0]
            so, so2, do = s.obj, s2.obj, d.obj
            t = (op, ins.pipe, ins.core, ins.attrs.get("phase"), so, None if type(so) is gm else s.rect,
                 so2, None if type(so2) is gm else s2.rect, do, None if type(do) is gm else d.rect)
        else:          # (starts with a str: never equal to the tuples above)
            attrs = ins.attrs
            k = ["", op, ins.pipe, ins.core, attrs.get("phase")]
            if op is barrier:
                k.append(attrs.get("pipe"))
            elif op is wait:
                k.append(is_cross_core(attrs.get("key")))
            for a in srcs:
                o = a.obj
                k.append(o)
                if type(o) is not gm:
                    k.append(a.rect)
            k.append(None)
            for a in dsts:
                o = a.obj
                k.append(o)
                if type(o) is not gm:
                    k.append(a.rect)
            t = tuple(k)
        kid = get(t)
        if kid is None:
            kid = intern[t] = len(reps)
            reps.append(ins)
        append(kid)
    return keys, reps, intern


def _kind(ins) -> int:
    op = ins.op
    if op is Op.SET_FLAG or op is Op.MUTEX_UNLOCK:    # (released once its pipe's earlier work has completed)
        return SET_FLAG
    if op is Op.BARRIER:
        return BARRIER_ALL if ins.attrs.get("pipe") is Pipe.ALL else PIPE_BARRIER
    if op is Op.SYNC_ALL:
        return BARRIER_ALL
    if op is Op.WAIT_FLAG and is_cross_core(ins.attrs.get("key")):
        return CROSS_WAIT
    return 0


def _relevant(reps: list) -> set:
    """The objects one unit writes and another touches."""
    units: dict = {}
    written: set = set()
    for ins in reps:
        unit = (ins.core, ins.pipe)
        for a in ins.srcs:
            units.setdefault(a.obj, set()).add(unit)
        for a in ins.dsts:
            units.setdefault(a.obj, set()).add(unit)
            written.add(a.obj)
    return {o for o in written if len(units[o]) > 1 and o.autosync}


def tables(order: list) -> Tables:
    """The tables of one program's order (autosync.insert)."""
    keys, reps, intern = keys_of(order)
    keys = np.array(keys, np.int64)
    relevant = _relevant(reps)
    gm = {o for o in relevant if type(o) is GMTensor}
    gm_keys = [kid for kid, ins in enumerate(reps) if any(a.obj in gm for a in (*ins.srcs, *ins.dsts))] if gm else ()
    if gm_keys:       # a relevant GM tensor's accesses: their positions go into the key
        for i in np.flatnonzero(np.isin(keys, gm_keys)).tolist():
            ins = order[i]
            where = tuple((a.batch, a.rect) for a in (*ins.srcs, *ins.dsts) if a.obj in gm)
            t = (GMTensor, int(keys[i]), where)
            kid = intern.get(t)
            if kid is None:
                kid = intern[t] = len(reps)
                reps.append(ins)
            keys[i] = kid
    units: dict = {}
    objs: dict = {}
    kt: list = []
    at: list = []
    ot: list = []
    for ins in reps:
        s0 = len(at)
        for a in ins.srcs:
            if a.obj in relevant:
                at.append((_object(a.obj, objs, ot), a.batch, *a.rect))
        s1 = len(at)
        for a in ins.dsts:
            if a.obj in relevant:
                at.append((_object(a.obj, objs, ot), a.batch, *a.rect))
        kt.append((_kind(ins), units.setdefault((ins.core, ins.pipe), len(units)),
                   ins.attrs.get("phase") is not None, s0, s1, len(at)))
    kt = np.array(kt, np.int64).reshape(-1, 6)
    rank = np.fromiter(map(_INDEX, order), np.int64, len(order))
    return Tables(keys, rank, kt, np.array(at, np.int64).reshape(-1, 6), np.array(ot, np.int64).reshape(-1, 6),
                  np.array([(c, int(p)) for c, p in units], np.int64).reshape(-1, 2),
                  int((kt[:, 5] - kt[:, 3])[keys].sum()) if len(keys) else 0)


def _object(o, objs: dict, ot: list) -> int:
    """o's row in the object table, added on first sight."""
    oid = objs.get(o)
    if oid is None:
        oid = objs[o] = len(ot)
        gm = type(o) is GMTensor
        ot.append((gm, not gm and o.buf is Buf.L0C, *((-1, -1, -1, -1) if gm else (0, o.shape[0], 0, o.shape[1]))))
    return oid
