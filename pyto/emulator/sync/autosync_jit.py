"""Auto-sync's tracking loop (autosync.py's `insert_reference`) compiled, on the flat tables of
autosync_table.py: the same dependencies in the same order, at tens of ns an instruction.

The reference keeps per-object dicts of entries; here each object has three linked lists in one
entry pool (its writes, its reads, its GM reads), scanned in insertion order as the dicts are, an
assignment to an existing key updating that entry in place as a dict assignment does. Instructions
are positions in the order; `rank` holds their `index`, by which the reference finds a unit's latest.
One function with the list operations written out: a call passing arrays costs a reference count
each (atomic), more than the work here.
"""
from __future__ import annotations

import numpy as np
from numba import njit

SET_FLAG, PIPE_BARRIER, BARRIER_ALL, CROSS_WAIT = 1, 2, 3, 4   # instruction kinds (autosync_table)
NO_TAG = -(1 << 62)   # write key (batch, rect); (batch, rect, tag) otherwise, tag 1 for True as in Python
_W, _R, _G = 0, 1, 2  # an object's lists: writes, reads, GM reads


@njit(cache=True, inline="always")
def _overlap(a0, a1, a2, a3, r0, r1, c0, c1):
    return a0 < r1 and r0 < a1 and a2 < c1 and c0 < a3


@njit(cache=True, inline="always")
def _exempt(pipe_a, pipe_b, phased_a, phased_b, pipe_m, pipe_fix):
    """The reference's _phase_exempt on an L0C tile: the M<->FIX edge with a phase on either side."""
    return (((pipe_a == pipe_m and pipe_b == pipe_fix) or (pipe_a == pipe_fix and pipe_b == pipe_m))
            and (phased_a or phased_b))


@njit(cache=True, inline="always")
def _unlink(e, ob, ls, head, tail, e_prev, e_next, free):
    """Take entry e out of object ob's list ls (doubly linked through e_prev/e_next) onto the free list;
    return the new free list head."""
    q, t = e_prev[e], e_next[e]
    if q == -1:
        head[ob, ls] = t
    else:
        e_next[q] = t
    if t == -1:
        tail[ob, ls] = q
    else:
        e_prev[t] = q
    e_next[e] = free
    return e


@njit(cache=True, inline="always")
def _keep_latest(u, p, val, lst, n, rank):
    """Per unit the latest position (by rank) found: record p for unit u (a new unit goes on the list); return
    the list's new length."""
    v = val[u]
    if v == -1:
        val[u] = p
        lst[n] = u
        return n + 1
    if rank[v] < rank[p]:
        val[u] = p
    return n


@njit(cache=True)
def run(keys, rank, core, data, wait_blocks_core, pipe_m, pipe_fix, kt, at, ot, ut, n_entries):
    """The dependencies of each position of the order: (ptr, deps), deps[ptr[i]:ptr[i + 1]] the
    positions position i waits for, in the reference's order (see autosync_table for the tables)."""
    n = keys.shape[0]
    k_kind, k_unit, k_phased, k_s0, k_s1, k_d1 = kt[:, 0], kt[:, 1], kt[:, 2] != 0, kt[:, 3], kt[:, 4], kt[:, 5]
    a_obj, a_batch, a_rect = at[:, 0], at[:, 1], at[:, 2:]
    o_gm, o_l0c, o_full = ot[:, 0] != 0, ot[:, 1] != 0, ot[:, 2:]
    u_core, u_pipe = ut[:, 0], ut[:, 1]
    n_units = u_core.shape[0]
    n_objs = max(o_gm.shape[0], 1)
    cap = n_entries + 1
    e_r0 = np.empty(cap, np.int64)          # the entry pool
    e_r1 = np.empty(cap, np.int64)
    e_c0 = np.empty(cap, np.int64)
    e_c1 = np.empty(cap, np.int64)
    e_batch = np.empty(cap, np.int64)
    e_unit = np.empty(cap, np.int64)
    e_pos = np.empty(cap, np.int64)
    e_tag = np.empty(cap, np.int64)         # writes: the key's tag; reads: phased (0/1)
    e_prev = np.empty(cap, np.int64)
    e_next = np.empty(cap, np.int64)
    free = -1                               # freed entries, chained by e_next
    top = 0
    head = np.full((n_objs, 3), -1, np.int64)
    tail = np.full((n_objs, 3), -1, np.int64)
    exempt = np.empty(cap, np.int64)

    ptr = np.zeros(n + 1, np.int64)
    # at most n_units dependencies an instruction, and each one popped from issued once: the bound, as pages
    # are touched only where written
    out = np.empty(n * (n_units + 1) + 1, np.int32)
    m = 0
    dval = np.full(n_units, -1, np.int64)    # deps: unit -> position, units in insertion order in dlist
    dlist = np.empty(n_units, np.int64)
    fval = np.full(n_units, -1, np.int64)    # found, likewise
    flist = np.empty(n_units, np.int64)
    lo_val = np.full(n_units, -1, np.int64)  # last_on, likewise
    lo_list = np.empty(n_units, np.int64)
    lo_n = 0
    iss_head = np.full(n_units, -1, np.int64)   # issued: a chain of positions per unit
    iss_tail = np.full(n_units, -1, np.int64)
    iss_next = np.full(max(n, 1), -1, np.int64)
    barrier = -1
    after = np.zeros(n_units, np.bool_)

    for i in range(n):
        k = keys[i]
        unit = k_unit[k]
        kind = k_kind[k]
        own = u_core[unit] == core
        if own and (kind == SET_FLAG or kind == PIPE_BARRIER):
            p = iss_head[unit]
            while p != -1:
                out[m] = p
                m += 1
                p = iss_next[p]
            iss_head[unit] = -1
            iss_tail[unit] = -1
        elif own:
            if iss_tail[unit] == -1:
                iss_head[unit] = i
            else:
                iss_next[iss_tail[unit]] = i
            iss_tail[unit] = i
        if own and kind == BARRIER_ALL:
            for j in range(lo_n):
                u = lo_list[j]
                if u != unit:
                    out[m] = lo_val[u]
                    m += 1
            barrier = i
            after[:] = False
            if lo_val[unit] == -1:
                lo_list[lo_n] = unit
                lo_n += 1
            lo_val[unit] = i
            ptr[i + 1] = m
            continue
        dn = 0
        if own and barrier != -1 and not after[unit]:
            after[unit] = True
            bu = k_unit[keys[barrier]]
            if u_pipe[unit] != u_pipe[bu]:
                dval[bu] = barrier
                dlist[0] = bu
                dn = 1
        if data:
            # ---- scans: the earlier entries this instruction conflicts with, the latest of each unit into
            # found (the reference's _later); those a write on L0C does not sync with (phase) into exempt
            fn = 0
            n_ex = 0
            ph = k_phased[k]
            s1 = k_s1[k]
            for a in range(k_s0[k], k_d1[k]):
                ob = a_obj[a]
                dst = a >= s1
                batch = a_batch[a]
                r0, r1, c0, c1 = a_rect[a, 0], a_rect[a, 1], a_rect[a, 2], a_rect[a, 3]
                l0c = o_l0c[ob]
                for lst in range(3 if dst else 1):
                    e = head[ob, lst]
                    while e != -1:
                        u = e_unit[e]
                        if u != unit and (lst == _G or (e_batch[e] == batch and _overlap(
                                e_r0[e], e_r1[e], e_c0[e], e_c1[e], r0, r1, c0, c1))):
                            p = e_pos[e]
                            if lst != _G and l0c and _exempt(u_pipe[unit], u_pipe[u], ph, k_phased[keys[p]],
                                                             pipe_m, pipe_fix):
                                if dst:
                                    seen = False
                                    for j in range(n_ex):
                                        if exempt[j] == p:
                                            seen = True
                                            break
                                    if not seen:
                                        exempt[n_ex] = p
                                        n_ex += 1
                            else:
                                fn = _keep_latest(u, p, fval, flist, fn, rank)
                        e = e_next[e]
            for j in range(fn):      # found -> deps (for another core's instruction: this core's units only)
                u = flist[j]
                p = fval[u]
                fval[u] = -1
                if not own and u_core[u] != core:
                    continue
                dn = _keep_latest(u, p, dval, dlist, dn, rank)
            # ---- updates: reads, then writes retiring what they cover
            phi = 1 if ph else 0
            for a in range(k_s0[k], k_d1[k]):
                ob = a_obj[a]
                dst = a >= s1
                batch = a_batch[a]
                r0, r1, c0, c1 = a_rect[a, 0], a_rect[a, 1], a_rect[a, 2], a_rect[a, 3]
                tag = NO_TAG
                if not dst:
                    lst = _G if o_gm[ob] else _R
                    e = head[ob, lst]
                    while e != -1 and not (e_unit[e] == unit and (lst == _G or (
                            e_tag[e] == phi and e_batch[e] == batch and e_r0[e] == r0 and e_r1[e] == r1
                            and e_c0[e] == c0 and e_c1[e] == c1))):
                        e = e_next[e]
                    if e != -1:
                        e_pos[e] = i
                        continue
                    tag = phi
                else:
                    lst = _W
                    mode = -1
                    if o_gm[ob]:        # GM: only the same region retires
                        e = head[ob, _W]
                        while e != -1:
                            if (e_tag[e] == NO_TAG and e_batch[e] == batch and e_r0[e] == r0 and e_r1[e] == r1
                                    and e_c0[e] == c0 and e_c1[e] == c1):
                                free = _unlink(e, ob, _W, head, tail, e_prev, e_next, free)
                                break
                            e = e_next[e]
                    elif ph and o_l0c[ob]:
                        mode, tag = 1, 1
                    elif not own:
                        mode, tag = 2, u_core[unit]
                    elif (n_ex == 0 and o_full[ob, 0] == r0 and o_full[ob, 1] == r1 and o_full[ob, 2] == c0
                          and o_full[ob, 3] == c1):
                        for ls in range(2):      # the whole tile: every entry is covered
                            e = head[ob, ls]
                            while e != -1:
                                t = e_next[e]
                                e_next[e] = free
                                free = e
                                e = t
                            head[ob, ls] = -1
                            tail[ob, ls] = -1
                    else:
                        mode = 0
                    if mode >= 0:      # retire the covered entries mode lets go: 0 all, 1 phased, 2 two cores'
                        for ls in range(2):
                            e = head[ob, ls]
                            while e != -1:
                                nxt = e_next[e]
                                if (e_batch[e] == batch and r0 <= e_r0[e] and e_r1[e] <= r1 and c0 <= e_c0[e]
                                        and e_c1[e] <= c1):
                                    ok = True
                                    if mode == 1:
                                        ok = k_phased[keys[e_pos[e]]]
                                    elif mode == 2:
                                        c = u_core[e_unit[e]]
                                        ok = c == core or c == u_core[unit]
                                    if ok:
                                        for j in range(n_ex):
                                            if exempt[j] == e_pos[e]:
                                                ok = False
                                                break
                                    if ok:
                                        free = _unlink(e, ob, ls, head, tail, e_prev, e_next, free)
                                e = nxt
                    e = head[ob, _W]
                    while e != -1 and not (e_tag[e] == tag and e_batch[e] == batch and e_r0[e] == r0
                                           and e_r1[e] == r1 and e_c0[e] == c0 and e_c1[e] == c1):
                        e = e_next[e]
                    if e != -1:        # the key is tracked: its value is replaced where it stands
                        e_unit[e] = unit
                        e_pos[e] = i
                        continue
                if free != -1:
                    e = free
                    free = e_next[e]
                else:
                    e = top
                    top += 1
                e_r0[e], e_r1[e], e_c0[e], e_c1[e] = r0, r1, c0, c1
                e_batch[e] = batch
                e_unit[e] = unit
                e_pos[e] = i
                e_tag[e] = tag
                t = tail[ob, lst]
                e_prev[e] = t
                e_next[e] = -1
                if t == -1:
                    head[ob, lst] = e
                else:
                    e_next[t] = e
                tail[ob, lst] = e
        for j in range(dn):
            u = dlist[j]
            if dval[u] != i:
                out[m] = dval[u]
                m += 1
            dval[u] = -1
        if own:
            if lo_val[unit] == -1:
                lo_list[lo_n] = unit
                lo_n += 1
            lo_val[unit] = i
            if wait_blocks_core and kind == CROSS_WAIT:
                barrier = i
                after[:] = False
                after[unit] = True
        ptr[i + 1] = m
    return ptr, out[:m].copy()
