"""Race detection by happens-before (vector clocks), independent of the simulated timing.

Threads are the pipes of one block (AIC: MTE2 MTE1 M FIX S; each AIV: MTE2 V MTE3 S). Every access
is stored with its epoch (thread, clock); a conflicting later access must have that epoch in its
vector clock, else it is a race (FastTrack). Across blocks the only order is pl.sync_all, so
conflicting GM accesses of two blocks in the same sync_all phase race. Reports follow mssanitizer's
style: hazard kind, buffer and region, both pipes with op and line.
"""
from __future__ import annotations

from typing import Optional

from ..errors import RaceError
from ..ir import Access, Buf, GMTensor, Instr, Pipe, Role, TileStore, rect_overlaps

_AIC = {Pipe.MTE2: 0, Pipe.MTE1: 1, Pipe.M: 2, Pipe.FIX: 3, Pipe.S: 4}
_AIV = {Pipe.MTE2: 0, Pipe.V: 1, Pipe.MTE3: 2, Pipe.S: 3}
N_AIC_THREADS = 5
N_THREADS = N_AIC_THREADS + 2 * 4


def thread_of(ins: Instr) -> int:
    """The instruction's thread within its block (0..12)."""
    role = ins.core % 3
    return _AIC[ins.pipe] if role == 0 else 5 + (role - 1) * 4 + _AIV[ins.pipe]




def _order(obj, e: tuple, ins: Instr, write: bool) -> tuple:
    """(first, second, hazard kind) of a history entry `e` and the access of `ins` that conflicts with it.

    Within a core, program order. Across cores there is none: the replay's order stands, except that a read
    of data nothing had written yet (`e`'s fresh) was meant to follow the write that provides it (a consumer
    without its flag runs ahead of its producer: a RAW, not a WAR). Two writes where the second also reads the
    region (an in-place op) are a RAW: its read is the telling half (the history may have kept only its write,
    which covers its read, when the schedule ran it before the earlier write)."""
    other, owrite, ofresh = e[8], e[6], e[9]
    if other.core != ins.core and write and not owrite and ofresh:
        first, second = ins, other
    elif other.index <= ins.index or other.core != ins.core:
        first, second = other, ins
    else:
        first, second = ins, other
    fw, sw = (owrite, write) if first is other else (write, owrite)
    if fw and sw:
        region = e[0]
        reads = any(a.obj is obj and a.batch == e[1] and rect_overlaps(a.rect, region) for a in second.srcs)
        return first, second, "RAW" if reads else "WAW"
    return first, second, "RAW" if fw else "WAR"


def _fix(first: Instr, second: Instr) -> str:
    """How to order `first` before `second`, in the DSL's words."""
    if first.core // 3 != second.core // 3:
        return ("blocks are ordered only by pl.sync_all() (or add into GM with store(..., atomic=\"add\")); put one "
                "between the two, or give each block its own region")
    if first.core != second.core:
        return ("order the two cores with pl.cross_core_set_flag(id, pipe) after the first and "
                "pl.cross_core_wait_flag(id, pipe) before the second (auto-sync does so for pl.move)")
    if first.pipe == second.pipe:
        return "one pipe runs in order: the two are ordered only through the pipes that feed them"
    f, s = f"pl.PIPE_{first.pipe.name}", f"pl.PIPE_{second.pipe.name}"
    return (f"pl.set_flag({f}, {s}, id) after {first.loc.file.rsplit('/', 1)[-1]}:{first.loc.line} and "
            f"pl.wait_flag({f}, {s}, id) before line {second.loc.line} (auto_sync=True inserts these)")


def _where(ins: Instr) -> str:
    role = Role(ins.core % 3).name
    return f"PIPE_{ins.pipe.name} ({role} of block {ins.core // 3})"


class Sanitizer:
    """Vector clocks per thread, access history per buffer object.

    A thread's clock is a list that is never changed once made (each instruction makes a new one), so
    instructions keep theirs without a copy. The snapshot of instruction j is (block, its clocks, its
    sync_all phase, its thread)."""

    def __init__(self, nblocks: int, tracked_gm: set, vector: bool = True):
        # a launch without vector-side instructions has the AIC's threads only: shorter clocks to join
        width = N_THREADS if vector else N_AIC_THREADS
        self.vc = [[[0] * width for _ in range(width)] for _ in range(nblocks)]
        self.epoch = [[0] * N_THREADS for _ in range(nblocks)]
        self.snap: dict = {}
        self.history: dict = {}     # (buffer object, batch) -> entries (objects hashed by identity)
        self.tracked_gm = tracked_gm
        self.race: Optional[tuple] = None   # the race to report so far: (order key, what _report needs)

    def first_race(self, note: str = "") -> RaceError:
        """The race whose later access comes first in program order (with an unordered load, the first read of
        it, not whichever access the simulated timing met first), with `note` (e.g. a flag left set)."""
        return RaceError(self._report(*self.race[1]) + (f"\n  note: {note}" if note else ""))

    def _found(self, obj, acc: Access, e: tuple, ins: Instr, write: bool) -> None:
        """Keep the race if it comes first: by its later access in program order, then the latest earlier access
        (a store racing a K loop's matmuls names the last one, the Final), then RAW, WAR, WAW."""
        first, second, kind = _order(obj, e, ins, write)
        key = (second.index, -first.index, ("RAW", "WAR", "WAW").index(kind))
        if self.race is None or key < self.race[0]:
            self.race = (key, (obj, acc, e, ins, write))

    def begin(self, ins: Instr, joins: list, keep: bool, fresh: tuple = ()) -> tuple:
        """`ins` starts after the instructions in `joins` (its sync sources): advance its clock, check its
        accesses (`fresh`: the positions of its sources that read data nothing has written yet). Returns its
        (vector clock, sync_all phase)."""
        b, t = ins.core // 3, thread_of(ins)
        vc = own = self.vc[b][t]
        ep = self.epoch[b][t]
        for j in joins:
            s = self.snap.get(j.index)
            if s is not None and s[0] == b:
                other, u = s[1], s[3]
                # clocks only grow, so a thread that already knows u's clock of j knows all j knew
                if other[u] > vc[u]:
                    vc = [x if x >= y else y for x, y in zip(vc, other)]
                if s[2] > ep:
                    ep = s[2]
        if vc is own:
            vc = vc.copy()      # no join changed it: the new clock is still a new list
        vc[t] += 1
        self.vc[b][t] = clocks = vc
        self.epoch[b][t] = ep
        for k, acc in enumerate(ins.srcs):
            self._access(ins, acc, False, b, t, clocks, ep, False, k in fresh)
        if ins.dsts:
            atomic = ins.attrs.get("atomic") == "add"
            for acc in ins.dsts:
                self._access(ins, acc, True, b, t, clocks, ep, atomic)
        if keep:
            self.snap[ins.index] = (b, clocks, ep, t)
        return clocks, ep

    def check_gm(self, ins: Instr, clocks: list, ep: int, fresh: tuple = ()) -> None:
        """Check the GM accesses of `ins` as if it ran with vector clock `clocks` in phase `ep` (a block
        whose clocks are another's, see replay.py)."""
        b, t = ins.core // 3, thread_of(ins)
        for k, acc in enumerate(ins.srcs):
            if isinstance(acc.obj, GMTensor):
                self._access(ins, acc, False, b, t, clocks, ep, False, k in fresh)
        atomic = ins.attrs.get("atomic") == "add"
        for acc in ins.dsts:
            if isinstance(acc.obj, GMTensor):
                self._access(ins, acc, True, b, t, clocks, ep, atomic)

    def pass_barrier(self, ins: Instr, n: int) -> None:
        """Every core reached sync_all `ins`: its thread (and all who wait on it) enter phase `n`."""
        self.epoch[ins.core // 3][thread_of(ins)] = n

    def _access(self, ins: Instr, acc: Access, write: bool, b: int, t: int, clocks: list, ep: int,
                atomic: bool, fresh: bool = False) -> None:
        """Check one access against the object's history (clocks: this thread's vector clock, ep: its
        sync_all phase), then record it. Entries it covers and that happen before it are dropped in the
        same pass (a later access ordered after this write is ordered after them; a read of the same thread
        stands for its earlier reads); the history is copied only from the first entry dropped on (GM
        histories grow long)."""
        obj = acc.obj
        if type(obj) is GMTensor and id(obj) not in self.tracked_gm:
            return
        rect, batch = acc.rect, acc.batch
        key = (obj, batch)    # accesses to different batches of a tensor never overlap
        hist = self.history.get(key)
        if hist is None:
            hist = self.history[key] = []
        r0, r1, c0, c1 = rect
        kept = None           # the entries that stay, once one is dropped
        for k, e in enumerate(hist):
            (e0, e1, f0, f1), _, eb, et, eclock, eep, ewrite, eatomic, _, _ = e
            ordered = eb == b and eclock <= clocks[et]     # by the block's own happens-before
            if ((write or ewrite) and e0 < r1 and r0 < e1 and f0 < c1 and c0 < f1 and not (atomic and eatomic)
                    and eep == ep and not ordered):        # a sync_all between orders any two
                self._found(obj, acc, e, ins, write)
            # only an entry that happens before this access is covered by it (a follower's deferred check,
            # replay.py, meets entries of later phases); an atomic add covers only atomic adds: a later
            # atomic add is not checked against it, so the plain accesses it follows stay to be checked
            before = ordered or eep < ep
            if (before and r0 <= e0 and e1 <= r1 and c0 <= f0 and f1 <= c1
                    and (eatomic if atomic else (write or (eb == b and et == t and not ewrite)))):
                if kept is None:
                    kept = hist[:k]
                continue
            if kept is not None:
                kept.append(e)
        if kept is not None:
            hist = self.history[key] = kept
        hist.append((rect, batch, b, t, clocks[t], ep, write, atomic, ins, fresh))

    @staticmethod
    def _report(obj, acc: Access, e: tuple, ins: Instr, write: bool) -> str:
        first, second, kind = _order(obj, e, ins, write)
        fw, sw = kind != "WAR", kind != "RAW"
        r0, r1, c0, c1 = (max(acc.rect[0], e[0][0]), min(acc.rect[1], e[0][1]),
                          max(acc.rect[2], e[0][2]), min(acc.rect[3], e[0][3]))
        if isinstance(obj, TileStore):
            where = f"{obj.buf.name}: {obj!r}[{r0}:{r1}, {c0}:{c1}]"
        else:
            where = f"GM: {obj!r}" + (f" batch {acc.batch}" if acc.batch else "") + f" [{r0}:{r1}, {c0}:{c1}]"
        lines = [f"Potential {kind} hazard detected at {where}",
                 f"  {_where(first)} {'write' if fw else 'read'}: {first.loc}",
                 f"  {_where(second)} {'write' if sw else 'read'}: {second.loc}",
                 "  the two accesses are not ordered by any synchronisation (auto-sync, flag, unit_flag, "
                 "sync_all)"]
        phases = [i.attrs.get("phase") for i in (first, second)]
        m_fix = {first.pipe, second.pipe} == {Pipe.M, Pipe.FIX} and first.core == second.core
        if (isinstance(obj, TileStore) and obj.buf is Buf.L0C and m_fix and any(p is not None for p in phases)
                and not all(p is not None for p in phases)):
            lines.append("  hint: one side carries a phase and the other does not; with a phase no software "
                         "sync is inserted on the M<->FIX edge, so both sides need AccPhase/STPhase (seeds/001)")
        else:
            lines.append("  fix: " + _fix(first, second))
            if kind == "WAR" and first.core != second.core:
                # two cores have no program order: the replay ran the read first; it may be meant to see the write
                how = ("a pl.sync_all() after the write and before the read" if first.core // 3 != second.core // 3
                       else "set the flag after the write, on its pipe, and wait for it before the read")
                lines.append(f"  (two cores have no program order: if the read is meant to see this write, it is a "
                             f"RAW: {how})")
        return "\n".join(lines)
