"""Auto-sync (DESIGN section 4): the software synchronisation the framework inserts.

For every tile (and GM tensor within one program): a read after a write on another pipe waits for
that write; a write waits for earlier reads and writes on other pipes. On the M<->FIX edge of an
L0C tile no software sync is formed when either side carries a phase: the hardware unit_flag
decides (seeds/001). sync_all and pipe_barrier(ALL) order everything before against everything after.
"""
from __future__ import annotations

from ..ir import Buf, GMTensor, Instr, Op, Pipe

_MFIX = frozenset({Pipe.M, Pipe.FIX})


def _phase_exempt(obj, p: Pipe, q: Pipe, a: Instr, b: Instr) -> bool:
    return (getattr(obj, "buf", None) is Buf.L0C and p != q and {p, q} == _MFIX
            and (a.attrs.get("phase") is not None or b.attrs.get("phase") is not None))


def _ov(a: tuple, b: tuple) -> bool:
    return a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]


def _cov(a: tuple, b: tuple) -> bool:
    return a[0] <= b[0] and b[1] <= a[1] and a[2] <= b[2] and b[3] <= a[3]


class _Track:
    """Per object: recent writes and reads as (rect, batch, pipe, instr)."""

    __slots__ = ("writes", "reads", "gm_reads")

    def __init__(self):
        self.writes: list = []
        self.reads: list = []
        self.gm_reads: dict = {}   # GM: pipe -> last reading instr (conservative WAR)


def insert(instrs: list, data: bool = True) -> None:
    """Fill `instr.deps` for one program's instructions (program order).

    With `data=False` (auto_sync off: the kernel synchronises itself with flags) only the barrier
    edges of sync_all / pipe_barrier(ALL) are inserted.
    """
    tracks: dict = {}
    barrier = None
    after_barrier: set = set()
    last_on: dict = {}
    for ins in instrs:
        p = ins.pipe
        deps: dict = {}
        if ins.op in (Op.SYNC_ALL,) or (ins.op is Op.BARRIER and ins.attrs.get("pipe") is Pipe.ALL):
            for q, last in last_on.items():
                if q != p:
                    deps[q] = last
            ins.deps = list(deps.values())
            barrier, after_barrier = ins, set()
            last_on[p] = ins
            continue
        if barrier is not None and p not in after_barrier:
            after_barrier.add(p)
            if p != barrier.pipe:
                deps[barrier.pipe] = barrier
        if not data:
            ins.deps = [d for d in deps.values() if d is not ins]
            last_on[p] = ins
            continue
        for acc in ins.srcs:
            tr = tracks.get(id(acc.obj))
            if tr is None:
                continue
            for rect, batch, q, w in tr.writes:
                if q != p and batch == acc.batch and _ov(rect, acc.rect) and not _phase_exempt(acc.obj, p, q, ins, w):
                    if q not in deps or deps[q].index < w.index:
                        deps[q] = w
        exempt: set = set()   # entries this write is not synced with (phase): they stay tracked
        for acc in ins.dsts:
            tr = tracks.get(id(acc.obj))
            if tr is None:
                continue
            for rect, batch, q, o in tr.writes + tr.reads:
                if q != p and batch == acc.batch and _ov(rect, acc.rect):
                    if _phase_exempt(acc.obj, p, q, ins, o):
                        exempt.add(id(o))
                    elif q not in deps or deps[q].index < o.index:
                        deps[q] = o
            for q, o in tr.gm_reads.items():
                if q != p and (q not in deps or deps[q].index < o.index):
                    deps[q] = o
        # record this instruction's accesses
        for acc in ins.srcs:
            tr = tracks.setdefault(id(acc.obj), _Track())
            if isinstance(acc.obj, GMTensor):
                tr.gm_reads[p] = ins
            else:
                tr.reads = [e for e in tr.reads if not (e[2] == p and _cov(acc.rect, e[0]))]
                tr.reads.append((acc.rect, acc.batch, p, ins))
        for acc in ins.dsts:
            tr = tracks.setdefault(id(acc.obj), _Track())
            tr.writes = [e for e in tr.writes
                         if not (e[1] == acc.batch and _cov(acc.rect, e[0])) or id(e[3]) in exempt]
            tr.reads = [e for e in tr.reads
                        if not (e[1] == acc.batch and _cov(acc.rect, e[0])) or id(e[3]) in exempt]
            tr.writes.append((acc.rect, acc.batch, p, ins))
        ins.deps = [d for d in deps.values() if d is not ins]
        last_on[p] = ins
