"""The scheduler's event loop over flat arrays, compiled with numba (STYLE 7: SimPy's heap, made fast).

Each pipe runs its instructions in program order, one at a time. An instruction starts when its
pipe is free and its waits hold: auto-sync dependencies (completion), unit_flag blocks (docs/cube_phase.md §7),
expert flags, sync_all. It holds its pipe for `occ` cycles (longer if the shared GM/L2 channel is
busy) and completes `lat` cycles after leaving it. The channels are booked first come, first served in the
order transfers start (one that waits a flag latency past its issue books then, not at issue). At equal times completions come first, so a pipe
issuing again sees the flags they set. unit_flag and flag updates happen when an instruction leaves
its pipe. An L2 hit (l2.py decides them before the schedule) lands no earlier than the access that brought
its data into L2 (a request merged into a fill in flight), and with a miss's latency if that access has not
begun yet. When nothing runs and nothing can start, the loop stops and the caller reports a deadlock.

A unit_flag region that shares no 512-byte block with another (a matmul's L0C tile, as a rule) keeps one flag
value and setter for all its blocks: its blocks are only ever set together, so a wait, a join and a set cost one
step, not one per block (a BMM's 256 blocks per tile), and its blocks' flags are written out at the end.

`simulate.py_func` is the same loop in plain Python: the reference (PYTO_NUMBA=0 selects it).
"""
from __future__ import annotations

import numpy as np
from numba import njit


_PRIO = 48    # an event's heap key: priority << _PRIO | sequence number (sequence numbers stay below 2**48)


@njit(cache=True)
def _push(ht, hk, hi, n, t, key, i):
    """Binary heap ordered by (time, key), key = priority << _PRIO | sequence: insert, return the new size.
    (Entries move into the hole rather than swap.)"""
    k = n
    while k > 0:
        parent = (k - 1) >> 1
        pt = ht[parent]
        if pt < t or (pt == t and hk[parent] <= key):
            break
        ht[k], hk[k], hi[k] = pt, hk[parent], hi[parent]
        k = parent
    ht[k], hk[k], hi[k] = t, key, i
    return n + 1


@njit(cache=True)
def _pop(ht, hk, hi, n):
    """Remove the smallest entry (moved to index n-1), return the new size."""
    n -= 1
    t0, k0, i0 = ht[0], hk[0], hi[0]
    t, key, it = ht[n], hk[n], hi[n]
    k = 0
    while True:
        c = 2 * k + 1
        if c >= n:
            break
        if c + 1 < n and (ht[c + 1] < ht[c] or (ht[c + 1] == ht[c] and hk[c + 1] < hk[c])):
            c += 1
        if ht[c] < t or (ht[c] == t and hk[c] < key):
            ht[k], hk[k], hi[k] = ht[c], hk[c], hi[c]
            k = c
        else:
            break
    ht[k], hk[k], hi[k] = t, key, it
    ht[n], hk[n], hi[n] = t0, k0, i0
    return n


@njit(cache=True)
def _wake(head, nxt, waiting, work, nw, t):
    """Move every pipe waiting on target `t` to the work stack; return the new stack size."""
    while head[t] >= 0:
        q = head[t]
        head[t] = nxt[q]
        waiting[q] = False
        work[nw] = q
        nw += 1
    return nw


@njit(cache=True)
def _book(ii, pp, start, occ, lat, gm_bytes, l2_bytes, fill, started, begin, end, busy_cycles, chan, gm_per_cycle,
          l2_per_cycle, miss_extra, ht, hk, hi, nh, seq):
    """Instruction ii starts on pipe pp at `start`: book the chip-wide GM and L2 channels (chan: when each is
    free), set its begin and end, push its pipe-free and completion events. Returns (heap size, seq)."""
    free = start + occ[ii]
    if gm_bytes[ii] > 0:
        ch = chan[0] if chan[0] > start else start
        chan[0] = ch + gm_bytes[ii] / gm_per_cycle
        if chan[0] > free:
            free = chan[0]
    if l2_bytes[ii] > 0:
        ch = chan[1] if chan[1] > start else start
        chan[1] = ch + l2_bytes[ii] / l2_per_cycle
        if chan[1] > free:
            free = chan[1]
    begin[ii] = start
    end[ii] = free + lat[ii]
    started[ii] = True
    f = fill[ii]
    if f >= 0:      # an L2 hit: on data whose fill is in flight it lands with the fill; before the
        land = end[f] if started[f] else end[ii] + miss_extra    # fill has begun, it misses itself
        if land > end[ii]:
            end[ii] = land
            lat[ii] = land - free     # (the landing the trace shows)
    busy_cycles[pp] += free - start
    seq += 1
    nh = _push(ht, hk, hi, nh, free, (1 << _PRIO) | seq, ii)
    seq += 1
    nh = _push(ht, hk, hi, nh, end[ii], seq, ii)
    return nh, seq


@njit(cache=True)
def _room(join_idx, n_join, extra):
    """join_idx, or a copy of its first n_join entries grown, with room for `extra` more."""
    if n_join + extra <= join_idx.shape[0]:
        return join_idx
    grown = np.empty(2 * join_idx.shape[0] + extra, np.int64)
    for q in range(n_join):     # (a slice copy's shape check compiles numba's error text: seconds)
        grown[q] = join_idx[q]
    return grown


@njit(cache=True)
def _solo_regions(rg_ptr, rg_blk, n_flags):
    """Which unit_flag regions share no block with another (nor list one twice), and their state: (solo, flag
    value, last setter): such a region's blocks are only ever set together, so one value stands for them all."""
    n_regions = rg_ptr.shape[0] - 1
    uses = np.zeros(max(n_flags, 1), np.int64)
    for j in range(rg_blk.shape[0]):
        uses[rg_blk[j]] += 1
    solo = np.zeros(max(n_regions, 0), np.bool_)
    for r in range(n_regions):
        solo[r] = rg_ptr[r + 1] > rg_ptr[r]
        for j in range(rg_ptr[r], rg_ptr[r + 1]):
            if uses[rg_blk[j]] != 1:
                solo[r] = False
                break
    return solo, np.zeros(max(n_regions, 0), np.int8), np.full(max(n_regions, 0), -1, np.int64)


@njit(cache=True)
def simulate(pipe_of, q_ptr, q_idx, dep_ptr, dep_idx, uf_rid, rg_ptr, rg_blk, uf_wait, uf_set, n_flags,
             kind, fkey, fneed, fspan, n_fkeys, n_participants, occ, lat, gm_bytes, l2_bytes, fill,
             gm_per_cycle, l2_per_cycle, flag_lat, miss_extra):
    """Run every pipe to the end or to a deadlock.

    kind: 0 plain, 1 set_flag, 2 wait_flag, 3 sync_all, 4 a round wait (an INTER_BLOCK event: it waits until its
    flag key has had fneed sets, consumes none, and joins the last fspan of them). A phased instruction's unit_flag
    blocks are
    region uf_rid[i]: rg_blk[rg_ptr[r]:rg_ptr[r + 1]]. Returns (status 0 ok / 1 deadlock, end
    time, order, begin, end, join_ptr, join_idx, busy per pipe, next position per pipe, flags).
    """
    n = pipe_of.shape[0]
    n_pipes = q_ptr.shape[0] - 1
    # targets a pipe can wait on: instruction i -> i, unit_flag block b -> n + b, flag key -> n + n_flags + k
    n_targets = n + n_flags + n_fkeys + 1
    barrier_t = n + n_flags + n_fkeys
    head = np.full(n_targets, -1, np.int64)
    nxt = np.full(n_pipes, -1, np.int64)
    waiting = np.zeros(n_pipes, np.bool_)
    qpos = q_ptr[:-1].copy()
    busy = np.zeros(n_pipes, np.bool_)
    busy_cycles = np.zeros(n_pipes, np.float64)
    done = np.zeros(n, np.bool_)
    started = np.zeros(n, np.bool_)
    begin = np.zeros(n, np.float64)
    end = np.zeros(n, np.float64)
    order = np.empty(n, np.int64)
    n_order = 0
    flags = np.zeros(max(n_flags, 1), np.int8)
    setter = np.full(max(n_flags, 1), -1, np.int64)
    join_ptr = np.zeros(n + 1, np.int64)
    join_idx = np.empty(n + 16, np.int64)
    n_join = 0
    # expert flags: per key a FIFO of setting instructions (each set is consumed by one wait)
    fq = np.empty(n + 1, np.int64)
    fq_head = np.zeros(max(n_fkeys, 1), np.int64)
    fq_tail = np.zeros(max(n_fkeys, 1), np.int64)
    fq_base = np.zeros(max(n_fkeys, 1) + 1, np.int64)
    for i in range(n):
        if kind[i] == 1:
            fq_base[fkey[i] + 1] += 1
    for k in range(max(n_fkeys, 1)):
        fq_base[k + 1] += fq_base[k]
    for k in range(max(n_fkeys, 1)):
        fq_head[k] = fq_base[k]
        fq_tail[k] = fq_base[k]
    # a region none other shares a block with keeps its blocks' state once: they are always alike
    solo, r_flag, r_setter = _solo_regions(rg_ptr, rg_blk, n_flags)
    shared = 0
    for r in range(len(solo)):
        if not solo[r]:
            shared += 1
    mark = np.full(n if shared else 1, -1, np.int64)     # (only shared regions' joins dedupe their setters)
    arrived = np.empty(max(n_participants, 1), np.int64)
    n_arrived = 0
    is_arrived = np.zeros(n, np.bool_)
    cap = 2 * n + 2
    ht = np.empty(cap, np.float64)
    hk = np.empty(cap, np.int64)
    hi = np.empty(cap, np.int64)
    nh = np.int64(0)           # (not the literal 0: one compiled _push / _pop / _book, not two or three)
    one = np.int64(1)          # (likewise for _room)
    seq = np.int64(0)
    work = np.empty(2 * n_pipes + 8, np.int64)
    nw = 0
    for p in range(n_pipes):
        work[nw] = p
        nw += 1
    now = 0.0
    chan = np.zeros(2, np.float64)      # when the chip-wide GM and L2 channels are free
    finished = 0
    while True:
        while nw > 0:
            nw -= 1
            p = work[nw]
            if busy[p] or qpos[p] == q_ptr[p + 1] or waiting[p]:
                continue
            i = q_idx[qpos[p]]
            target = -1
            for j in range(dep_ptr[i], dep_ptr[i + 1]):
                if not done[dep_idx[j]]:
                    target = dep_idx[j]
                    break
            if target < 0 and uf_wait[i] >= 0:
                r = uf_rid[i]
                if solo[r]:
                    if r_flag[r] != uf_wait[i]:
                        target = n + rg_blk[rg_ptr[r]]
                else:
                    for j in range(rg_ptr[r], rg_ptr[r + 1]):
                        if flags[rg_blk[j]] != uf_wait[i]:
                            target = n + rg_blk[j]
                            break
            if target < 0 and kind[i] == 2 and fq_head[fkey[i]] == fq_tail[fkey[i]]:
                target = n + n_flags + fkey[i]
            if target < 0 and kind[i] == 4 and fq_tail[fkey[i]] - fq_base[fkey[i]] < fneed[i]:
                target = n + n_flags + fkey[i]
            if target >= 0:
                waiting[p] = True
                nxt[p] = head[target]
                head[target] = p
                continue
            starts = 1
            if kind[i] == 3:
                if not is_arrived[i]:
                    is_arrived[i] = True
                    arrived[n_arrived] = i
                    n_arrived += 1
                if n_arrived < n_participants:
                    waiting[p] = True
                    nxt[p] = head[barrier_t]
                    head[barrier_t] = p
                    continue
                starts = n_arrived
                n_arrived = 0
                while head[barrier_t] >= 0:  # everyone else waiting at the barrier leaves its list
                    q = head[barrier_t]
                    head[barrier_t] = nxt[q]
                    waiting[q] = False
            for s in range(starts):
                ii = i if kind[i] != 3 else arrived[s]
                pp = pipe_of[ii]
                busy[pp] = True
                waiting[pp] = False
                qpos[pp] += 1
                order[n_order] = ii
                n_order += 1
                # joins: who set the unit_flag blocks awaited, and the set_flag a wait consumes
                join_ptr[n_order - 1] = n_join
                if uf_wait[ii] >= 0 and solo[uf_rid[ii]]:     # one setter for all its blocks
                    w = r_setter[uf_rid[ii]]
                    if w >= 0:
                        join_idx = _room(join_idx, n_join, one)
                        join_idx[n_join] = w
                        n_join += 1
                elif uf_wait[ii] >= 0:
                    r = uf_rid[ii]
                    join_idx = _room(join_idx, n_join, np.int64(rg_ptr[r + 1] - rg_ptr[r]))
                    for j in range(rg_ptr[r], rg_ptr[r + 1]):
                        w = setter[rg_blk[j]]
                        if w >= 0 and mark[w] != ii:
                            mark[w] = ii
                            join_idx[n_join] = w
                            n_join += 1
                if kind[ii] == 2:
                    join_idx = _room(join_idx, n_join, one)
                    k = fkey[ii]
                    join_idx[n_join] = fq[fq_head[k]]
                    n_join += 1
                    fq_head[k] += 1
                elif kind[ii] == 4:      # the sets of its round, in the order they were raised
                    join_idx = _room(join_idx, n_join, np.int64(fspan[ii]))   # (int32 columns)
                    k = fkey[ii]
                    for q in range(fq_base[k] + fneed[ii] - fspan[ii], fq_base[k] + fneed[ii]):
                        join_idx[n_join] = fq[q]
                        n_join += 1
                join_ptr[n_order] = n_join
                start = now
                if kind[ii] == 2 or kind[ii] == 4:   # a wait sees its sets a flag latency after them
                    for q in range(join_ptr[n_order - 1], n_join):
                        w = join_idx[q]
                        if end[w] + flag_lat > start:
                            start = end[w] + flag_lat
                for j in range(dep_ptr[ii], dep_ptr[ii + 1]):
                    d = dep_idx[j]
                    if pipe_of[d] != pp and end[d] + flag_lat > start:
                        start = end[d] + flag_lat
                if start > now and (gm_bytes[ii] > 0 or l2_bytes[ii] > 0):
                    # a flag latency away: it books the channels when it starts (a begin event), so a transfer
                    # that starts sooner but is issued after it goes first
                    begin[ii] = start
                    seq += 1
                    nh = _push(ht, hk, hi, nh, start, (2 << _PRIO) | seq, ii)
                else:
                    nh, seq = _book(ii, pp, start, occ, lat, gm_bytes, l2_bytes, fill, started, begin, end,
                                    busy_cycles, chan, gm_per_cycle, l2_per_cycle, miss_extra, ht, hk, hi, nh, seq)
        if nh == 0:
            break
        nh = _pop(ht, hk, hi, nh)
        now, prio, i = ht[nh], hk[nh] >> _PRIO, hi[nh]
        fired = -1
        if prio == 2:
            nh, seq = _book(i, pipe_of[i], now, occ, lat, gm_bytes, l2_bytes, fill, started, begin, end, busy_cycles,
                            chan, gm_per_cycle, l2_per_cycle, miss_extra, ht, hk, hi, nh, seq)
        elif prio == 0:
            done[i] = True
            finished += 1
            fired = i
        else:
            p = pipe_of[i]
            busy[p] = False
            work[nw] = p
            nw += 1
            if uf_set[i] >= 0 and solo[uf_rid[i]]:
                r = uf_rid[i]
                r_flag[r] = uf_set[i]
                r_setter[r] = i
                nw = _wake(head, nxt, waiting, work, nw, n + rg_blk[rg_ptr[r]])   # (its waits wait on its first block)
            elif uf_set[i] >= 0:
                r = uf_rid[i]
                for j in range(rg_ptr[r], rg_ptr[r + 1]):
                    flags[rg_blk[j]] = uf_set[i]
                    setter[rg_blk[j]] = i
                    nw = _wake(head, nxt, waiting, work, nw, n + rg_blk[j])
            if kind[i] == 1:
                k = fkey[i]
                fq[fq_tail[k]] = i
                fq_tail[k] += 1
                fired = n + n_flags + k
        if fired >= 0:
            nw = _wake(head, nxt, waiting, work, nw, fired)
    for r in range(len(solo)):
        if solo[r]:
            for j in range(rg_ptr[r], rg_ptr[r + 1]):
                flags[rg_blk[j]] = r_flag[r]
    status = 0 if finished == n else 1
    return (status, now, order[:n_order], begin, end, join_ptr[:n_order + 1], join_idx[:n_join], busy_cycles,
            qpos, flags)
