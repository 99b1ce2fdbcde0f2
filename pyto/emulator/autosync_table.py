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

from typing import NamedTuple

import numpy as np

from ..ir import Buf, GMTensor, Op, Pipe, is_cross_core
from .autosync_jit import BARRIER_ALL, CROSS_WAIT, PIPE_BARRIER, SET_FLAG


class Tables(NamedTuple):
    """autosync_jit.run's arguments after (core, data, wait_blocks_core)."""
    keys: np.ndarray        # per position: its key
    rank: np.ndarray        # per position: orders two instructions of one unit (position, or index if foreign)
    k_kind: np.ndarray      # per key: 0, or SET_FLAG, PIPE_BARRIER, BARRIER_ALL, CROSS_WAIT
    k_unit: np.ndarray
    k_phased: np.ndarray
    k_s0: np.ndarray        # per key: its sources are access rows k_s0..k_s1, its destinations k_s1..k_d1
    k_s1: np.ndarray
    k_d1: np.ndarray
    a_obj: np.ndarray
    a_batch: np.ndarray
    a_rect: np.ndarray
    o_gm: np.ndarray        # per relevant object: a GM tensor, an L0C tile, its whole rectangle
    o_l0c: np.ndarray
    o_full: np.ndarray
    u_core: np.ndarray      # per unit
    u_pipe: np.ndarray
    n_entries: int          # accesses of relevant objects: a bound on the entries tracked at once


def keys_of(order: list) -> tuple:
    """(key per position, the first instruction of each key, the intern table). The hot loop of auto-sync
    in Python: a move (one source, one destination) has a tuple of its own shape, the others a list's."""
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
        else:          # (starts with a str: never equal to a move's)
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
    if op is Op.SET_FLAG:
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
    return {o for o in written if len(units[o]) > 1}


def tables(order: list, core: int) -> Tables:
    """The tables of `order` (program `core`'s order, see autosync.insert)."""
    keys, reps, intern = keys_of(order)
    keys = np.array(keys, np.int64)
    relevant = _relevant(reps)
    gm_keys = [kid for kid, ins in enumerate(reps)
               if any(a.obj in relevant and type(a.obj) is GMTensor for a in (*ins.srcs, *ins.dsts))]
    if gm_keys:       # a relevant GM tensor's accesses: their positions go into the key
        for i in np.flatnonzero(np.isin(keys, gm_keys)).tolist():
            ins = order[i]
            where = tuple((a.batch, a.rect) for a in (*ins.srcs, *ins.dsts)
                          if a.obj in relevant and type(a.obj) is GMTensor)
            t = (GMTensor, int(keys[i]), where)
            kid = intern.get(t)
            if kid is None:
                kid = intern[t] = len(reps)
                reps.append(ins)
            keys[i] = kid
    units: dict = {}
    objs: dict = {}
    o_rows: list = []
    k_kind, k_unit, k_phased, k_s0, k_s1, k_d1 = [], [], [], [], [], []
    a_obj, a_batch, a_rect = [], [], []
    for ins in reps:
        k_kind.append(_kind(ins))
        k_unit.append(units.setdefault((ins.core, ins.pipe), len(units)))
        k_phased.append(ins.attrs.get("phase") is not None)
        k_s0.append(len(a_obj))
        for side, group in enumerate((ins.srcs, ins.dsts)):
            for a in group:
                o = a.obj
                if o not in relevant:
                    continue
                oid = objs.get(o)
                if oid is None:
                    oid = objs[o] = len(o_rows)
                    gm = type(o) is GMTensor
                    o_rows.append((gm, not gm and o.buf is Buf.L0C,
                                   (-1, -1, -1, -1) if gm else (0, o.shape[0], 0, o.shape[1])))
                a_obj.append(oid)
                a_batch.append(a.batch)
                a_rect.append(a.rect)
            if side == 0:
                k_s1.append(len(a_obj))
        k_d1.append(len(a_obj))
    k_nacc = np.array(k_d1, np.int64) - np.array(k_s0, np.int64)
    u_core = np.array([c for c, _ in units], np.int64)
    rank = np.arange(len(keys), dtype=np.int64)
    foreign = [kid for kid, ins in enumerate(reps) if ins.core != core]
    if foreign:        # another core's instructions: ordered among their unit by index (crosscore.py splices)
        for i in np.flatnonzero(np.isin(keys, foreign)).tolist():
            rank[i] = order[i].index
    return Tables(
        keys, rank, np.array(k_kind, np.int64), np.array(k_unit, np.int64), np.array(k_phased, np.bool_),
        np.array(k_s0, np.int64), np.array(k_s1, np.int64), np.array(k_d1, np.int64),
        np.array(a_obj, np.int64), np.array(a_batch, np.int64), np.array(a_rect, np.int64).reshape(-1, 4),
        np.array([r[0] for r in o_rows], np.bool_), np.array([r[1] for r in o_rows], np.bool_),
        np.array([r[2] for r in o_rows], np.int64).reshape(-1, 4),
        u_core, np.array([int(p) for _, p in units], np.int64),
        int(k_nacc[keys].sum()) if len(keys) else 0)
