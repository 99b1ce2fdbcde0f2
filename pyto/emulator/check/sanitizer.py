"""Race detection by happens-before (vector clocks), independent of the simulated timing.

Threads are the pipes of one block (AIC: MTE2 MTE1 M FIX S; each AIV: MTE2 V MTE3 S). Every access
is stored with its epoch (thread, clock); a conflicting later access must have that epoch in its
vector clock, else it is a race (FastTrack). Across blocks the only order is pl.system.sync_all, so
conflicting GM accesses of two blocks in the same sync_all phase race. The checks run in checkcore.py;
this module names what they found. Reports follow mssanitizer's style: hazard kind, buffer and region,
both pipes with op and line.
"""
from __future__ import annotations

from ...errors import RaceError
from ...ir import Access, Buf, Instr, Pipe, Role, TileStore, core_name, rect_overlaps
from .overlap import ByteSpace


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


def _fix(first: Instr, second: Instr, aiv_only: bool) -> str:
    """How to order `first` before `second`, in the DSL's words."""
    if first.core // 3 != second.core // 3 or (aiv_only and first.core != second.core):
        how = "pl.system.sync_all(core_type=pl.SyncCoreType.AIV_ONLY)" if aiv_only else "pl.system.sync_all()"
        return (f"blocks are ordered only by {how} or an INTER_BLOCK cross-core event (or add into GM with "
                f"pl.store(..., atomic=pl.AtomicType.AtomicAdd)); put one between the two, or give each block its "
                f"own region")
    if first.core != second.core:
        return (f"order the two cores with pl.system.set_cross_core(pipe=pl.PipeType.{first.pipe.name}, event_id=...) "
                f"after the first and pl.system.wait_cross_core(pipe=pl.PipeType.{second.pipe.name}, event_id=...) "
                f"before the second")
    if first.pipe == second.pipe:
        return (f"two writes on one pipe complete in any order unless a barrier is between them: "
                f"pl.system.bar_{first.pipe.name.lower()}() after line {first.loc.line} (load.md: a second load into a "
                f"tile no one read first needs bar_mte2)")
    f, s = f"pl.PipeType.{first.pipe.name}", f"pl.PipeType.{second.pipe.name}"
    return (f"pl.system.sync_src(set_pipe={f}, wait_pipe={s}, event_id=...) after "
            f"{first.loc.file.rsplit('/', 1)[-1]}:{first.loc.line} and pl.system.sync_dst(set_pipe={f}, wait_pipe={s}, "
            f"event_id=...) before line {second.loc.line}, or a tile group with mutex ids under auto_mutex")


def _where(ins: Instr, aiv_only: bool) -> str:
    if aiv_only:
        return f"PIPE_{ins.pipe.name} ({core_name(ins.core, True)})"
    return f"PIPE_{ins.pipe.name} ({Role(ins.core % 3).name} of block {ins.core // 3})"


def _byte_tiles(obj, acc: Access, e: tuple, other_accesses) -> str:
    """Which tiles a race on a buffer's bytes is between: this access's and the other instruction's, by name."""
    lo, hi = max(acc.rect[2], e[0][2]), min(acc.rect[3], e[0][3])
    others = [a.of.obj for group in (other_accesses or ()) for a in group
              if a.obj is obj and a.rect[2] < hi and lo < a.rect[3]]
    mine = acc.of.obj
    names = [f"{mine!r} ({mine.where()})"] + [f"{o!r} ({o.where()})" for o in others[:1] if o is not mine]
    return f"{obj.buf.name}: bytes [{lo:#x}, {hi:#x}) of {obj!r}, shared by " + " and ".join(names)


def race_error(obj, acc: Access, e: tuple, ins: Instr, write: bool, note: str = "",
               other_accesses: tuple = (), aiv_only: bool = False) -> RaceError:
    """The RaceError of access `acc` (to `obj`) of `ins` and history entry `e` (rect, batch, block, thread,
    clock, phase, write, atomic, instruction, fresh), with `note` (e.g. a flag left set). `other_accesses`: the
    other instruction's (sources, destinations) as lowered, to name the other tile of a race on bytes."""
    first, second, kind = _order(obj, e, ins, write)
    fw, sw = kind != "WAR", kind != "RAW"
    r0, r1, c0, c1 = (max(acc.rect[0], e[0][0]), min(acc.rect[1], e[0][1]),
                      max(acc.rect[2], e[0][2]), min(acc.rect[3], e[0][3]))
    if isinstance(obj, ByteSpace):
        where = _byte_tiles(obj, acc, e, other_accesses)
    elif isinstance(obj, TileStore):
        where = f"{obj.buf.name}: {obj!r}[{r0}:{r1}, {c0}:{c1}]"
    else:
        where = f"GM: {obj!r}" + (f" batch {acc.batch}" if acc.batch else "") + f" [{r0}:{r1}, {c0}:{c1}]"
        through = getattr(acc, "of", None)         # a GM view's footprint on its root (gmviews.py)
        if through is not None:
            where += f" (through view '{through.obj.name}' [{through.rect[0]}:{through.rect[1]}, " \
                     f"{through.rect[2]}:{through.rect[3]}])"
    lines = [f"Potential {kind} hazard detected at {where}",
             f"  {_where(first, aiv_only)} {'write' if fw else 'read'}: {first.loc}",
             f"  {_where(second, aiv_only)} {'write' if sw else 'read'}: {second.loc}",
             "  the two accesses are not ordered by any synchronisation (auto-sync, mutex, flag, unit_flag, "
             "cross-core event, sync_all)"]
    phases = [i.attrs.get("phase") for i in (first, second)]
    m_fix = {first.pipe, second.pipe} == {Pipe.M, Pipe.FIX} and first.core == second.core
    if (isinstance(obj, TileStore) and obj.buf is Buf.L0C and m_fix and any(p is not None for p in phases)
            and not all(p is not None for p in phases)):
        lines.append("  hint: one side carries a phase and the other does not; with a phase no software "
                     "sync is inserted on the M<->FIX edge, so both sides need AccPhase/STPhase (docs/cube_phase.md §4.1)")
    elif kind == "WAR" and first.core != second.core and first.core // 3 == second.core // 3 and not aiv_only:
        # two cores of a block have no program order: the replay ran the read first, but a cross-core hand-over
        # (the writer producing what the reader consumes) is the usual intent, so its fix comes first
        w, r = second, first
        name = lambda i: f"{i.loc.file.rsplit('/', 1)[-1]}:{i.loc.line}"  # noqa: E731
        lines.append(f"  fix: if the read is meant to see this write (a hand-over, RAW): "
                     f"pl.system.set_cross_core(pipe=pl.PipeType.{w.pipe.name}, event_id=...) after {name(w)} and "
                     f"pl.system.wait_cross_core(pipe=pl.PipeType.{r.pipe.name}, event_id=...) before {name(r)}; if "
                     f"the write must wait until the read is done (WAR): set_cross_core on {r.pipe.name} after "
                     f"{name(r)} and wait_cross_core on {w.pipe.name} before {name(w)}")
    else:
        lines.append("  fix: " + _fix(first, second, aiv_only))
        if kind == "WAR" and first.core != second.core:
            # two cores have no program order: the replay ran the read first; it may be meant to see the write
            how = ("a pl.system.sync_all() after the write and before the read"
                   if first.core // 3 != second.core // 3 or aiv_only
                   else "set_cross_core after the write, on its pipe, and wait_cross_core before the read")
            lines.append(f"  (two cores have no program order: if the read is meant to see this write, it is a "
                         f"RAW: {how})")
    return RaceError("\n".join(lines) + (f"\n  note: {note}" if note else ""))
