"""The checked pass's loop over integer arrays, compiled with numba: happens-before by vector clocks,
race checks against per-buffer access histories (FastTrack), the uninitialised-read masks, and the
followers' GM checks at sync_all phase ends (replay.py says what each is for; lower.py makes the arrays).

It returns the numbers to name what it found by: the race whose later access comes first in program order
(then the latest earlier access, then RAW, WAR, WAW; among equal keys the first met, so the order of the
checks is part of the verdict) and the first uninitialised read in start order. replay.py builds the
messages from the Instr records. `check.py_func` is the same loop in plain Python (PYTO_NUMBA=0).

A history entry is one row of an arena: _R0.._C1 its rectangle, _B/_T block and thread, _CLK that
thread's clock, _EP sync_all phase, _W write, _AT atomic add, _INS instruction, _FRESH a read of data
nothing had written. A history is a run of rows; it moves to the arena's end when it outgrows its room.
Vector clocks are rows of one table: block b's thread t at b * 13 + t, then one row per kept snapshot.
"""
from __future__ import annotations

import numpy as np
from numba import njit

_R0, _R1, _C0, _C1, _B, _T, _CLK, _EP, _W, _AT, _INS, _FRESH = range(12)
N_FIELDS = 12
# the race record: found, its order key (3), instruction, write, access, then the entry (N_FIELDS)
RACE_FIELDS = 7 + N_FIELDS


@njit(cache=True)
def _race_key(E, k, i, write, h, core, start, nsrc, hist, rect):
    """(second, -first, kind) of entry E[k] and access of instruction i conflicting with it (sanitizer._order;
    kind 0 RAW, 1 WAR, 2 WAW)."""
    o, owrite, ofresh = E[k, _INS], E[k, _W] != 0, E[k, _FRESH] != 0
    if core[o] != core[i] and write and not owrite and ofresh:
        first, second = i, o
    elif o <= i or core[o] != core[i]:
        first, second = o, i
    else:
        first, second = i, o
    if first == o:
        fw, sw = owrite, write
    else:
        fw, sw = write, owrite
    if fw and sw:
        kind = 2
        for a in range(start[second], start[second] + nsrc[second]):     # an in-place op: its read tells
            if (hist[a] == h and rect[a, 0] < E[k, _R1] and E[k, _R0] < rect[a, 1] and rect[a, 2] < E[k, _C1]
                    and E[k, _C0] < rect[a, 3]):
                kind = 0
                break
    else:
        kind = 0 if fw else 1
    return second, -first, kind


@njit(cache=True)
def _found(race, E, k, i, write, a, h, core, start, nsrc, hist, rect):
    """Keep the race of entry E[k] and access `a` of instruction i if it comes first (the module's order)."""
    k0, k1, k2 = _race_key(E, k, i, write, h, core, start, nsrc, hist, rect)
    if race[0] == 0 or (k0, k1, k2) < (race[1], race[2], race[3]):
        race[0], race[1], race[2], race[3] = 1, k0, k1, k2
        race[4], race[5], race[6] = i, write, a
        for x in range(N_FIELDS):
            race[7 + x] = E[k, x]


@njit(cache=True)
def _move(E, hstart, hcap, h, n, top):
    """Move history h (n entries) to the arena's end (`top`) with room for 2n (at least 4); return the arena,
    grown if it had to be."""
    cap = max(4, 2 * n)
    if top + cap > E.shape[0]:
        bigger = np.empty((max(2 * E.shape[0], top + cap), N_FIELDS), np.int64)
        for k in range(top):
            for x in range(N_FIELDS):
                bigger[k, x] = E[k, x]
        E = bigger
    s = hstart[h]
    for k in range(n):
        for x in range(N_FIELDS):
            E[top + k, x] = E[s + k, x]
    hstart[h], hcap[h] = top, cap
    return E


@njit(cache=True)
def check(positions, order, join_ptr, join_idx, blk, thr, core, sync, leader, first, dep_ptr, dep_idx,
          slot, n_slots, f_tracked, f_reads, parties, n_blocks, width, dma, glob,
          start, nsrc, nacc, atomic, hist, obj, rect, cell, stride, cells, gm, tracked, masked, ncells, relaxed,
          mask_size, n_hist):
    """Visit `positions` of the start order (replay.py). Returns (race record, uninit record): the race
    record is RACE_FIELDS ints, race[0] = 0 when none; the uninit record (found, instruction, access,
    cells unwritten, cells read) is the first uninitialised read in start order.

    Two writes of one DMA thread (`dma`: the MTE2 pipes) to a `relaxed` object (a tile only the kernel's own sync
    orders) are ordered only if the later one knows the earlier completed (`sdone`: per clock row, the latest clock
    of its own thread it knows completed, through a barrier's or another thread's edge): program order on the pipe
    is not enough (PyPTO-Pro's bar_mte2 rule, load.md).

    `glob`: the launch orders blocks by more than sync_all (INTER_BLOCK events): the clocks are launch-wide (a column
    per block's thread, `width` = blocks x 13) and joins across blocks count; otherwise a clock has a block's threads
    only and other blocks are ordered by sync_all phases alone."""
    gmul = 13 if glob else 0                              # a thread's column: block * gmul + thread
    live = n_blocks * 13
    clk = np.zeros((live + n_slots, width), np.int64)     # vector clocks: live rows, then snapshots
    sdone = np.zeros(live + n_slots, np.int64)            # per row: its own thread's clock known completed
    ep_of = np.zeros(live + n_slots, np.int64)            # their sync_all phases
    snap_b = np.empty(n_slots, np.int64)                  # a snapshot's block (-1: not taken yet) and thread
    for x in range(n_slots):
        snap_b[x] = -1
    snap_t = np.zeros(n_slots, np.int64)
    m = len(hist)
    fresh = np.zeros(m, np.bool_)
    mask = np.zeros(mask_size, np.bool_)
    unset = np.empty(len(ncells), np.int64)              # per object, its cells not written yet
    for x in range(len(ncells)):
        unset[x] = ncells[x]
    hstart = np.zeros(n_hist, np.int64)
    hlen = np.zeros(n_hist, np.int64)
    hcap = np.zeros(n_hist, np.int64)
    top = np.int64(0)                                     # the arena's first free row
    E = np.empty((max(64, 8 * n_hist), N_FIELDS), np.int64)
    race = np.zeros(RACE_FIELDS, np.int64)
    uninit = np.zeros(5, np.int64)
    seen = np.zeros(3 * n_blocks + 3, np.int64)     # sync_alls started, per core
    deferred = np.empty(len(order) + 1, np.int64)  # followers' tracked GM accesses of this phase (instructions)
    n_def = 0
    work_a = np.empty(m + 1, np.int64)             # the accesses to check now, in order: whose clocks, whose
    work_row = np.empty(m + 1, np.int64)
    work_i = np.empty(m + 1, np.int64)
    phase = 0
    n_pos = len(positions)
    for p in range(n_pos + 1):
        n_work = 0
        flush = p == n_pos                          # at the end, the last phase's deferred checks
        i = lb = -1
        if p < n_pos:
            i = order[positions[p]]
            lb = blk[i]
            if sync[i]:
                c = core[i]
                seen[c] += 1
                if leader[lb] == lb:
                    ep_of[(c // 3) * 13 + thr[i]] = seen[c]
                done = seen[parties[0]]
                for c in parties:
                    done = min(done, seen[c])
                if done > phase:  # check the followers' accesses of the phase that ended, before any of the next
                    phase = done
                    flush = True
        if flush:   # each with the clocks of its leader's instruction at the same place
            for d in range(n_def):
                f = deferred[d]
                row = live + slot[first[leader[blk[f]]] + f - first[blk[f]]]
                for a in range(start[f], start[f] + nacc[f]):
                    if gm[obj[a]]:
                        work_a[n_work], work_row[n_work], work_i[n_work] = a, row, f
                        n_work += 1
            n_def = 0
        leads = i >= 0 and leader[lb] == lb
        if i >= 0 and (leads or f_tracked[i] or f_reads[i]):     # uninitialised reads (a follower's: of GM)
            for a in range(start[i], start[i] + nsrc[i]):
                o = obj[a]
                if (leads or gm[o]) and masked[o] and unset[o] > 0:
                    cnt = 0
                    for r in range(cells[a, 0], cells[a, 1]):
                        base = cell[a] + r * stride[a]
                        for x in range(base + cells[a, 2], base + cells[a, 3]):
                            if not mask[x]:
                                cnt += 1
                    if cnt:
                        fresh[a] = True
                        if uninit[0] == 0:
                            size = max(cells[a, 1] - cells[a, 0], 0) * max(cells[a, 3] - cells[a, 2], 0)
                            uninit[0], uninit[1], uninit[2], uninit[3], uninit[4] = 1, i, a, cnt, size
        if i >= 0 and not leads and f_tracked[i]:
            deferred[n_def] = i
            n_def += 1
        if leads:   # begin: join the clocks of the instructions it waited for (auto-sync, then the schedule's)
            row = (core[i] // 3) * 13 + thr[i]
            b = core[i] // 3
            me = b * gmul + thr[i]
            ep = ep_of[row]
            pos = positions[p]
            for q in range(2):
                lo, hi = (dep_ptr[i], dep_ptr[i + 1]) if q == 0 else (join_ptr[pos], join_ptr[pos + 1])
                for jj in range(lo, hi):
                    s = slot[dep_idx[jj] if q == 0 else join_idx[jj]]
                    if s >= 0 and (snap_b[s] == b or glob):
                        u = snap_b[s] * gmul + snap_t[s]
                        if me < width and clk[live + s, me] > sdone[row]:
                            sdone[row] = clk[live + s, me]
                        # clocks only grow, so a thread that already knows u's clock of j knows all j knew
                        if clk[live + s, u] > clk[row, u]:
                            for x in range(width):
                                if clk[live + s, x] > clk[row, x]:
                                    clk[row, x] = clk[live + s, x]
                        if ep_of[live + s] > ep:
                            ep = ep_of[live + s]
            clk[row, me] += 1
            ep_of[row] = ep
            for a in range(start[i], start[i] + nacc[i]):
                work_a[n_work], work_row[n_work], work_i[n_work] = a, row, i
                n_work += 1
        # each access against its history, then recorded. Entries it covers and that happen before it are
        # dropped in the same pass (a later access ordered after this write is ordered after them; a read of
        # the same thread stands for its earlier reads)
        for w in range(n_work):
            a, row = work_a[w], work_row[w]
            o = obj[a]
            if gm[o] and not tracked[o]:
                continue
            ii = work_i[w]
            b, t = core[ii] // 3, thr[ii]
            tc = b * gmul + t                                # its clock column
            ep = ep_of[row]
            write = a >= start[ii] + nsrc[ii]
            at = write and atomic[ii]
            h = hist[a]
            r0, r1, c0, c1 = rect[a, 0], rect[a, 1], rect[a, 2], rect[a, 3]
            s = hstart[h]
            keep_to = s
            for k in range(s, s + hlen[h]):
                e0, e1, f0, f1 = E[k, _R0], E[k, _R1], E[k, _C0], E[k, _C1]
                eb, et, ewrite, eatomic, eep = E[k, _B], E[k, _T], E[k, _W] != 0, E[k, _AT] != 0, E[k, _EP]
                ordered = (eb == b or glob) and E[k, _CLK] <= clk[row, eb * gmul + et]   # by happens-before
                if ordered and et == t and eb == b and write and ewrite and dma[t] and relaxed[o]:
                    ordered = E[k, _CLK] <= sdone[row]             # one DMA pipe's writes: a barrier between
                if ((write or ewrite) and e0 < r1 and r0 < e1 and f0 < c1 and c0 < f1 and not (at and eatomic)
                        and eep == ep and not ordered):            # a sync_all between orders any two
                    _found(race, E, k, ii, write, a, h, core, start, nsrc, hist, rect)
                # only an entry that happens before this access is covered by it (a follower's deferred check
                # meets entries of later phases); an atomic add covers only atomic adds: a later atomic add is
                # not checked against it, so the plain accesses it follows stay to be checked
                if ((ordered or eep < ep) and r0 <= e0 and e1 <= r1 and c0 <= f0 and f1 <= c1
                        and (eatomic if at else (write or (eb == b and et == t and not ewrite)))):
                    continue
                if keep_to != k:
                    for x in range(N_FIELDS):
                        E[keep_to, x] = E[k, x]
                keep_to += 1
            n = keep_to - s
            if n == hcap[h]:         # full: move the history to the arena's end, with twice the room
                E = _move(E, hstart, hcap, h, n, top)
                s = top
                top += hcap[h]
            k = s + n
            E[k, _R0], E[k, _R1], E[k, _C0], E[k, _C1] = r0, r1, c0, c1
            E[k, _B], E[k, _T], E[k, _CLK], E[k, _EP] = b, t, clk[row, tc], ep
            E[k, _W], E[k, _AT], E[k, _INS], E[k, _FRESH] = write, at, ii, (not write) and fresh[a]
            hlen[h] = n + 1
        if i >= 0 and (leads or f_tracked[i]):
            if leads and slot[i] >= 0:
                s = slot[i]
                row = (core[i] // 3) * 13 + thr[i]
                for x in range(width):
                    clk[live + s, x] = clk[row, x]
                ep_of[live + s], snap_b[s], snap_t[s] = ep_of[row], core[i] // 3, thr[i]
                sdone[live + s] = sdone[row]
            for a in range(start[i] + nsrc[i], start[i] + nacc[i]):      # its writes initialise
                o = obj[a]
                if masked[o] and unset[o] > 0:
                    for r in range(cells[a, 0], cells[a, 1]):
                        base = cell[a] + r * stride[a]
                        for x in range(base + cells[a, 2], base + cells[a, 3]):
                            if not mask[x]:
                                mask[x] = True
                                unset[o] -= 1
    return race, uninit
