"""The L2 replay of l2.py over integer arrays, compiled with numba: the same LRU, written-region index and hit
accounting as `l2.hits_reference`, with regions, keys and instruction indices numbered from 0 beforehand
(l2.py's `l2_hits` numbers a list of streams; l2_streams.py the accesses the Encoder adds block by block).

The LRU is a doubly linked list over key numbers (head the least recently used). A written region is its
region number's entry (the key that wrote it last, its write sequence number in its tensor and batch); the
index of 16-row bands is one run of a pool per (tensor, batch, band), sized beforehand by the writes that can
add to it, holding region numbers with lazy deletion (an entry is live while its region is written and the
entry is of the region's current write epoch; a scan compacts the run). `replay.py_func` is the same loop in
plain Python (PYTO_NUMBA=0 selects it).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .. import jitmode

WRITTEN_SCAN = 64     # written regions a read looks among (those on its rows' 16-row bands), most recent first
BAND = 16             # rows of one band of the written-region index


def in_step_order(prog: np.ndarray, phase: np.ndarray) -> np.ndarray:
    """The replay order of accesses listed stream by stream (`prog` the stream, nondecreasing; `phase` each
    access's sync_all phase, nondecreasing within a stream): phase by phase, the streams in step within a
    phase (each stream's k-th access of the phase before any (k+1)-th, streams in order), as l2._in_step."""
    n = len(prog)
    if n == 0:
        return np.zeros(0, np.int64)
    at = np.arange(n)
    new = np.ones(n, bool)
    new[1:] = (prog[1:] != prog[:-1]) | (phase[1:] != phase[:-1])
    k = at - np.maximum.accumulate(np.where(new, at, 0))     # position within its stream's run of the phase
    return np.lexsort((prog, k, phase))


def band_index(rid: np.ndarray, read: np.ndarray, book: np.ndarray, rects: np.ndarray) -> tuple:
    """The band index's layout: (per region, its bands as a CSR (ptr, band numbers), per band the start of its
    run in the pool and, last, the pool's size). Only regions of a (tensor, batch) that some access writes have
    bands (a read of any other finds nothing written); a band's run holds at most one entry per write on it."""
    return jitmode.pick(_band_index, len(rid), jitmode.ACCESSES)(rid, read, book, rects)


@njit(cache=True)
def _band_index(rid, read, book, rects):
    n_regions = len(book)
    n_books = 0
    for r in range(n_regions):
        n_books = max(n_books, book[r] + 1)
    writes = np.zeros(n_regions, np.int64)      # writes per region: the most entries it adds to each band
    booked = np.zeros(n_books, np.bool_)
    for t in range(len(rid)):
        if not read[t] and rid[t] >= 0:
            writes[rid[t]] += 1
            booked[book[rid[t]]] = True
    rb_ptr = np.zeros(n_regions + 1, np.int64)
    for r in range(n_regions):
        cnt = 0
        if booked[book[r]]:
            cnt = max((rects[r, 1] - 1) // BAND - rects[r, 0] // BAND + 1, 0)
        rb_ptr[r + 1] = rb_ptr[r] + cnt
    keys = np.empty((rb_ptr[n_regions], 2), np.int64)       # (tensor and batch, band) of each region's bands
    for r in range(n_regions):
        b0 = rects[r, 0] // BAND
        for x in range(rb_ptr[r], rb_ptr[r + 1]):
            keys[x, 0] = book[r]
            keys[x, 1] = b0 + x - rb_ptr[r]
    rb_ids, first = intern_rows(keys)
    band_start = np.zeros(len(first) + 1, np.int64)
    for r in range(n_regions):
        for x in range(rb_ptr[r], rb_ptr[r + 1]):
            band_start[rb_ids[x] + 1] += writes[r]
    for bd in range(len(first)):
        band_start[bd + 1] += band_start[bd]
    return rb_ptr, rb_ids, band_start


def replay_arrays(prog: np.ndarray, phase: np.ndarray, index: np.ndarray, kid: np.ndarray, rid: np.ndarray,
                  nbytes: np.ndarray, read: np.ndarray, book: np.ndarray, rects: np.ndarray, n_keys: int,
                  n_index: int, capacity: float) -> tuple:
    """The hits of accesses listed stream by stream: per access its stream, sync_all phase, instruction number
    (< n_index), key number (< n_keys), region number (-1: none), bytes, is_read; per region its (tensor,
    batch) number and rectangle. Returns (instruction numbers in order of their first hit, bytes served by L2,
    filler instruction numbers)."""
    order = in_step_order(prog, phase)
    index, kid, rid, book = (np.ascontiguousarray(x, np.int64) for x in (index, kid, rid, book))
    nbytes, read = np.ascontiguousarray(nbytes, np.float64), np.ascontiguousarray(read, np.bool_)
    rects = np.ascontiguousarray(rects, np.int64).reshape(-1, 4)
    rb_ptr, rb_ids, band_start = band_index(rid, read, book, rects)
    fn = jitmode.pick(replay, len(index), jitmode.ACCESSES)
    return fn(order, index, kid, rid, nbytes, read, book, rects, rb_ptr, rb_ids, band_start, n_keys, n_index,
              float(capacity))


@njit(cache=True)
def _inside(r, rects, book, wkey, wseq, wep, rb_ptr, rb_ids, band_start, blen, pool_rid, pool_ep, stamp, query,
            cands, pieces, hosts):
    """l2._Written.inside for region r: the number of hosts written to `hosts` (0: not covered)."""
    lo, hi = rb_ptr[r], rb_ptr[r + 1]
    if lo == hi:
        return 0
    nc = 0
    for x in range(lo, hi):
        bd = rb_ids[x]
        s = band_start[bd]
        w = 0
        for j in range(s, s + blen[bd]):         # compact the band's run to its live entries
            q = pool_rid[j]
            if wkey[q] >= 0 and pool_ep[j] == wep[q]:
                pool_rid[s + w] = q
                pool_ep[s + w] = pool_ep[j]
                w += 1
        blen[bd] = w
        if w == 0:
            return 0            # a band of the read's rows holds nothing written: not covered
        for j in range(s, s + w):
            q = pool_rid[j]
            if stamp[q] != query:
                stamp[q] = query
                cands[nc] = q
                nc += 1
    # the m newest, newest first (sequence numbers are distinct within a tensor and batch): a selection of m <= 64
    # (np.argsort would compile numba's quicksort, seconds on a first run)
    m = min(nc, WRITTEN_SCAN)
    top = np.empty(m, np.int64)
    prev = wseq[cands[0]] if nc else 0
    for j in range(m):
        best = -1
        for x in range(nc):
            q = cands[x]
            if (j == 0 or wseq[q] < prev) and (best < 0 or wseq[q] > wseq[best]):
                best = q
        top[j] = best
        prev = wseq[best]
    r0, r1, c0, c1 = rects[r, 0], rects[r, 1], rects[r, 2], rects[r, 3]
    for j in range(m):
        w = top[j]
        if rects[w, 0] <= r0 and r1 <= rects[w, 1] and rects[w, 2] <= c0 and c1 <= rects[w, 3]:
            hosts[0] = wkey[w]
            return 1
    got = 0
    for oldest_first in (False, True):      # newest first, then oldest first (a bool, not two literals: one compile)
        got = _pieces(r0, r1, c0, c1, top, rects, wkey, pieces, hosts, oldest_first)
        if got:
            break
    return got


@njit(cache=True)
def _pieces(r0, r1, c0, c1, top, rects, wkey, pieces, hosts, oldest_first):
    """l2._Written._pieces over `top` (reversed if oldest_first): the number of hosts, 0 if no cover."""
    need = (r1 - r0) * (c1 - c0)
    n = 0
    m = len(top)
    for j in range(m):
        w = top[m - 1 - j] if oldest_first else top[j]
        a0, a1 = max(r0, rects[w, 0]), min(r1, rects[w, 1])
        b0, b1 = max(c0, rects[w, 2]), min(c1, rects[w, 3])
        if a0 < a1 and b0 < b1:
            free = True
            for p in range(n):
                if not (a1 <= pieces[p, 0] or pieces[p, 1] <= a0 or b1 <= pieces[p, 2] or pieces[p, 3] <= b0):
                    free = False
                    break
            if free:
                pieces[n, 0], pieces[n, 1], pieces[n, 2], pieces[n, 3] = a0, a1, b0, b1
                hosts[n] = wkey[w]
                n += 1
                need -= (a1 - a0) * (b1 - b0)
                if need == 0:
                    return n
    return 0


@njit(cache=True, inline="always")
def _to_end(k, head, tail, prv, nxt):
    """Move resident key k to the most recent end of the LRU list (doubly linked through prv/nxt); return the
    new (head, tail)."""
    if k != tail:
        p, q = prv[k], nxt[k]
        if p >= 0:
            nxt[p] = q
        else:
            head = q
        prv[q] = p
        prv[k], nxt[k] = tail, -1
        nxt[tail] = k
        tail = k
    return head, tail


@njit(cache=True)
def replay(order, index, kid, rid, nbytes, read, book, rects, rb_ptr, rb_ids, band_start, n_keys, n_index,
           capacity):
    """l2.hits_reference over numbered accesses taken in `order` (replay_arrays says what each array is)."""
    n_regions = len(book)
    n_books = 0
    for r in range(n_regions):
        n_books = max(n_books, book[r] + 1)
    # the LRU: a doubly linked list of key numbers, and each resident key's bytes, region, allocating access
    prv = np.full(n_keys, -1, np.int64)
    nxt = np.full(n_keys, -1, np.int64)
    resident = np.zeros(n_keys, np.bool_)
    e_bytes = np.zeros(n_keys, np.float64)
    e_rid = np.full(n_keys, -1, np.int64)
    e_idx = np.zeros(n_keys, np.int64)
    head = tail = -1
    used = 0.0
    # the written regions: per region the key that wrote it last (-1: not written), its sequence number, epoch
    wkey = np.full(n_regions, -1, np.int64)
    wseq = np.zeros(n_regions, np.int64)
    wep = np.zeros(n_regions, np.int64)
    bseq = np.zeros(n_books, np.int64)
    n_bands = len(band_start) - 1
    blen = np.zeros(max(n_bands, 0), np.int64)
    pool_rid = np.empty(band_start[-1], np.int64)
    pool_ep = np.empty(band_start[-1], np.int64)
    stamp = np.full(n_regions, -1, np.int64)
    cands = np.empty(n_regions, np.int64)
    pieces = np.empty((WRITTEN_SCAN, 4), np.int64)
    hosts = np.empty(WRITTEN_SCAN, np.int64)
    query = 0
    # the hits per instruction number, and the order of first hits
    seen = np.zeros(n_index, np.bool_)
    h_bytes = np.zeros(n_index, np.float64)
    h_fill = np.zeros(n_index, np.int64)
    h_order = np.empty(n_index, np.int64)
    nh = 0
    for t in order:
        i, k, r, nb, rd = index[t], kid[t], rid[t], nbytes[t], read[t]
        filler = -1
        nhost = 0
        if resident[k]:
            head, tail = _to_end(k, head, tail, prv, nxt)
            if rd:
                filler = e_idx[k]
            elif r >= 0:                   # (re)written: the latest write of the region, also after a read of it
                _add_written(r, k, book, wkey, wseq, wep, bseq, rb_ptr, rb_ids, band_start, blen, pool_rid, pool_ep)
        else:
            if rd and r >= 0 and rb_ptr[r] < rb_ptr[r + 1]:       # a region with bands: something may cover it
                query += 1
                nhost = _inside(r, rects, book, wkey, wseq, wep, rb_ptr, rb_ids, band_start, blen, pool_rid,
                                pool_ep, stamp, query, cands, pieces, hosts)
            if nhost:
                for x in range(nhost):
                    h = hosts[x]
                    if not resident[h]:
                        raise KeyError("a written region's key is not in L2 (keys and regions disagree)")
                    head, tail = _to_end(h, head, tail, prv, nxt)
                    filler = max(filler, e_idx[h])
            else:
                resident[k] = True
                prv[k], nxt[k] = tail, -1
                if tail >= 0:
                    nxt[tail] = k
                else:
                    head = k
                tail = k
                e_bytes[k], e_rid[k], e_idx[k] = nb, r, i
                used += nb
                if r >= 0 and not rd:
                    _add_written(r, k, book, wkey, wseq, wep, bseq, rb_ptr, rb_ids, band_start, blen, pool_rid,
                                 pool_ep)
                while used > capacity and head >= 0:
                    o = head
                    head = nxt[o]
                    if head >= 0:
                        prv[head] = -1
                    else:
                        tail = -1
                    resident[o] = False
                    used -= e_bytes[o]
                    if e_rid[o] >= 0:
                        wkey[e_rid[o]] = -1          # dropped from the written regions
                continue
        if rd or nhost:
            if seen[i]:
                h_bytes[i] += nb
                h_fill[i] = max(h_fill[i], filler)
            else:
                seen[i] = True
                h_bytes[i], h_fill[i] = nb, filler
                h_order[nh] = i
                nh += 1
    out = h_order[:nh].copy()
    return out, h_bytes[out], h_fill[out]


@njit(cache=True)
def _add_written(r, k, book, wkey, wseq, wep, bseq, rb_ptr, rb_ids, band_start, blen, pool_rid, pool_ep):
    """l2._Written.add: region r written by key k (a new sequence number; onto its bands if not written)."""
    b = book[r]
    bseq[b] += 1
    if wkey[r] < 0:
        wep[r] += 1
        for x in range(rb_ptr[r], rb_ptr[r + 1]):
            bd = rb_ids[x]
            j = band_start[bd] + blen[bd]
            pool_rid[j] = r
            pool_ep[j] = wep[r]
            blen[bd] += 1
    wkey[r] = k
    wseq[r] = bseq[b]


@njit(cache=True)
def intern_rows(rows):
    """Number the distinct rows of a 2-D int64 array in order of first appearance (an open-addressing hash
    table): (each row's number, the first row of each number)."""
    n, w = rows.shape
    size = 2
    while size < 2 * n:
        size *= 2
    mask = size - 1
    table = np.full(size, -1, np.int64)
    ids = np.empty(n, np.int64)
    first = np.empty(n, np.int64)
    m = 0
    for i in range(n):
        h = 1469598103934665603
        for c in range(w):
            h = (h ^ rows[i, c]) * 1099511628211
        h = (h ^ (h >> 33)) * -49064778989728563      # a 64-bit finaliser (murmur3's; wraps)
        h ^= h >> 33
        slot = h & mask
        while True:
            e = table[slot]
            if e < 0:
                table[slot] = m
                first[m] = i
                ids[i] = m
                m += 1
                break
            j = first[e]
            same = True
            for c in range(w):
                if rows[j, c] != rows[i, c]:
                    same = False
                    break
            if same:
                ids[i] = e
                break
            slot = (slot + 1) & mask
    return ids, first[:m].copy()
