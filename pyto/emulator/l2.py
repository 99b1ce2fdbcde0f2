"""L2 cache model: which GM reads are served by L2 (capacity and LRU from the chip table).

GM accesses of all programs are replayed in an approximate global order (programs advance in
step: each program's k-th GM access before anyone's (k+1)-th), which stands for cores running
concurrently. A read hits when the same region (tensor, batch, rectangle) is resident; writes
allocate too (write-back), so data stored and read back hits. Partial overlaps count as misses: a
simplification that only understates hits.
"""
from __future__ import annotations

from collections import OrderedDict


def l2_hits(streams: list, capacity: int) -> dict:
    """Instruction index -> bytes of its GM read served by L2.

    `streams`: per program, its GM accesses in program order as (index, region key, bytes, is_read).
    """
    lru: OrderedDict = OrderedDict()
    used = 0
    hits: dict = {}
    depth = max((len(s) for s in streams), default=0)
    for k in range(depth):
        for s in streams:
            if k >= len(s):
                continue
            index, key, nbytes, read = s[k]
            if key in lru:
                lru.move_to_end(key)
                if read:
                    hits[index] = nbytes
                continue
            lru[key] = nbytes
            used += nbytes
            while used > capacity and lru:
                _, b = lru.popitem(last=False)
                used -= b
    return hits
