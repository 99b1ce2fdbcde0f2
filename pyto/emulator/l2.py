"""L2 cache model: which GM reads are served by L2 (capacity and LRU from the chip table).

GM accesses of all programs are replayed in an approximate global order (programs advance in
step: each program's k-th GM access before anyone's (k+1)-th), which stands for cores running
concurrently. A read hits when the same region (tensor, batch, rectangle) is resident; writes
allocate too (write-back), so data stored and read back hits. Partial overlaps count as misses: a
simplification that only understates hits.
"""
from __future__ import annotations

from collections import OrderedDict

from ..chip import Chip
from ..ir import GMTensor, Op
from .timing import burst_bytes


def l2_hits(programs: list, chip: Chip) -> dict:
    """Instruction index -> bytes of its GM read served by L2."""
    streams = [[ins for ins in p.instrs if ins.op in (Op.LOAD, Op.STORE)
                and any(isinstance(a.obj, GMTensor) for a in ins.srcs + ins.dsts)] for p in programs]
    lru: OrderedDict = OrderedDict()
    used = 0
    hits: dict = {}
    depth = max((len(s) for s in streams), default=0)
    for k in range(depth):
        for s in streams:
            if k >= len(s):
                continue
            ins = s[k]
            read = isinstance(ins.srcs[0].obj, GMTensor)
            acc = ins.srcs[0] if read else ins.dsts[0]
            key = (acc.obj.uid, acc.batch, acc.rect)
            nbytes = burst_bytes(chip, ins.attrs)
            if key in lru:
                lru.move_to_end(key)
                if read:
                    hits[ins.index] = nbytes
                continue
            lru[key] = nbytes
            used += nbytes
            while used > chip.l2_bytes and lru:
                _, b = lru.popitem(last=False)
                used -= b
    return hits
