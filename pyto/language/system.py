"""`pl.system`: PyPTO-Pro's synchronisation (docs/zh/pypto_pro/api/SIMD-API/operation/synchronization/), each call
one instruction on the pipe it names, on the core its section runs on (outside sections: the core whose pipes they
are). What each orders is docs/design.md §4's; the emulator turns it into waits in the scheduler and happens-before
edges in the race checker.

    sync_src / sync_dst        a flag from one pipe to another of the same core (event ids 0..chip.event_ids-1)
    bar_m ... bar_all, bar_v   a pipe barrier: later instructions wait for the pipe's (all pipes') earlier ones
    mutex_lock / mutex_unlock  a buffer-id token (ids 0..31) taken and given back on a pipe
    set_cross_core / wait_cross_core   a counter between the cores of a block (modes 1, 2, 3), or an event over every
                               AIC or every AIV of the launch (mode 0)
    sync_all                   a barrier over every core of the launch's kind (core_type)
    set_mm_layout_transform    Fixpipe's drain direction for a K-split accumulation (a trace-time switch)
"""
from __future__ import annotations

from ..errors import KernelError, SyncError, UnsupportedError
from ..ir import CROSS_CORE, Instr, Op, Pipe, Role
from .tile import as_int
from .trace import caller_loc, current
from .types import CrossCoreSyncMode, SyncAllMode, SyncCoreType

_AIV_PIPES = (Pipe.V, Pipe.MTE3)
_CORE_PIPES = {Role.AIC: (Pipe.MTE2, Pipe.MTE1, Pipe.M, Pipe.FIX, Pipe.S),
               Role.AIV0: (Pipe.MTE2, Pipe.V, Pipe.MTE3, Pipe.S)}
_ROLE_NAME = {Role.AIC: "AIC", Role.AIV0: "AIV0", Role.AIV1: "AIV1"}
#: cross-core event ids pl.system.sync_all uses itself (set_cross_core_wait_cross_core.md)
SYNC_ALL_EVENT_IDS = range(11, 15)


def _core_of(pipes: tuple, what: str, loc) -> Role:
    """The core (AIC, or the AIVs) `pipes` belong to: the section's, else the one that has them. Flags and barriers
    order pipes of one core; cores order each other with cross-core events or sync_all."""
    tr = current()
    if tr.section is not None:
        role = Role.AIC if tr.section == "cube" else Role.AIV0
    else:
        role = Role.AIV0 if any(p in _AIV_PIPES for p in pipes) else Role.AIC
    for p in pipes:
        if p not in _CORE_PIPES[role]:
            core = "AIC (cube core)" if role is Role.AIC else "AIV (vector core)"
            raise SyncError(f"{loc}: {what} on PipeType.{p.name}: the {core} has no such pipe (its pipes: "
                            f"{', '.join('PipeType.' + q.name for q in _CORE_PIPES[role])}); flags and barriers "
                            f"order the pipes of one core: between cube and vector use pl.system.set_cross_core / "
                            f"wait_cross_core or pl.system.sync_all()")
    return role


def _pipe(p, what: str, loc, allow_all: bool = False) -> Pipe:
    if not isinstance(p, Pipe) or (p is Pipe.ALL and not allow_all):
        raise KernelError(f"{loc}: {what} takes a pipe (pl.PipeType.MTE2, ...), got {p!r}")
    return p


def _flag(op: Op, set_pipe, wait_pipe, event_id) -> None:
    tr = current()
    loc = caller_loc()
    name = "pl.system.sync_src" if op is Op.SET_FLAG else "pl.system.sync_dst"
    src, dst = _pipe(set_pipe, f"{name} set_pipe", loc), _pipe(wait_pipe, f"{name} wait_pipe", loc)
    e = as_int(event_id)
    if e is None or not 0 <= e < tr.chip.event_ids:
        raise SyncError(f"{loc}: {name} event_id {event_id!r} out of range 0..{tr.chip.event_ids - 1} on "
                        f"{tr.chip.name}")
    if src == dst:
        raise SyncError(f"{loc}: {name} connects two different pipes (set_pipe != wait_pipe), got {src.name} twice")
    pipe = src if op is Op.SET_FLAG else dst
    tr.emit(Instr(op, pipe, (), (), {"key": (src, dst, e)}, loc, name=name), _core_of((src, dst), name, loc))


def sync_src(*, set_pipe: Pipe, wait_pipe: Pipe, event_id: int) -> None:
    """On `set_pipe`, once its earlier instructions have completed: raise event (set_pipe, wait_pipe, event_id).
    Pair every sync_src with a sync_dst (a flag left set at the end is a SyncError); an id is set again only after
    its wait consumed it (sync_src_sync_dst.md)."""
    _flag(Op.SET_FLAG, set_pipe, wait_pipe, event_id)


def sync_dst(*, set_pipe: Pipe, wait_pipe: Pipe, event_id: int) -> None:
    """On `wait_pipe`: wait until event (set_pipe, wait_pipe, event_id) is raised, then consume it. Never raised:
    DeadlockError, naming the event."""
    _flag(Op.WAIT_FLAG, set_pipe, wait_pipe, event_id)


def _barrier(pipe: Pipe, name: str) -> None:
    tr = current()
    loc = caller_loc()
    if pipe is Pipe.ALL:
        role = Role.AIV0 if (tr.section == "vector" or (tr.section is None and not tr.is_aic)) else Role.AIC
        run_on = Pipe.S
    else:
        role = _core_of((pipe,), name, loc)
        run_on = pipe
    tr.emit(Instr(Op.BARRIER, run_on, (), (), {"pipe": pipe}, loc, name=name), role)


def bar_m() -> None:
    """The M pipe's later instructions wait for its earlier ones to complete (barrier.md)."""
    _barrier(Pipe.M, "pl.system.bar_m")


def bar_mte1() -> None:
    """The MTE1 pipe's later instructions wait for its earlier ones to complete."""
    _barrier(Pipe.MTE1, "pl.system.bar_mte1")


def bar_mte2() -> None:
    """The MTE2 pipe's later instructions wait for its earlier ones to complete: needed between two loads into one
    tile with no read between them (load.md, "Tile地址复用与流水同步": a same-pipe WAW, which auto_mutex does not
    order; without it the checked pass reports the RaceError)."""
    _barrier(Pipe.MTE2, "pl.system.bar_mte2")


def bar_mte3() -> None:
    """The MTE3 pipe's later instructions wait for its earlier ones to complete."""
    _barrier(Pipe.MTE3, "pl.system.bar_mte3")


def bar_fix() -> None:
    """The FIX pipe's later instructions wait for its earlier ones to complete."""
    _barrier(Pipe.FIX, "pl.system.bar_fix")


def bar_v() -> None:
    """The V pipe's later instructions wait for its earlier ones to complete."""
    _barrier(Pipe.V, "pl.system.bar_v")


def bar_all() -> None:
    """Every pipe of the core waits for all the core's earlier instructions to complete."""
    _barrier(Pipe.ALL, "pl.system.bar_all")


# ---- mutexes -------------------------------------------------------------------------------------------------
def _mutex(op: Op, pipe, mutex_id, mode, max_mutex_id, mutex_ids) -> None:
    tr = current()
    loc = caller_loc()
    name = "pl.system.mutex_lock" if op is Op.MUTEX_LOCK else "pl.system.mutex_unlock"
    p = _pipe(pipe, name, loc)
    i = as_int(mutex_id)
    if i is None or not 0 <= i <= 31:
        raise SyncError(f"{loc}: {name} mutex_id {mutex_id!r} out of range 0..31")
    if mode != 0:
        raise UnsupportedError(f"{loc}: {name} mode={mode!r} is not built (mode 0 only)")
    if mutex_ids is not None and i not in [as_int(x) for x in mutex_ids]:
        raise SyncError(f"{loc}: {name} mutex_id {i} is not among its candidate mutex_ids {list(mutex_ids)}")
    del max_mutex_id          # pyto's ids are concrete at trace time: the candidate range is not needed
    tr.emit(Instr(op, p, (), (), {"mutex_id": i}, loc, name=name), _core_of((p,), name, loc))


def mutex_lock(*, pipe: Pipe, mutex_id: int, mode: int = 0, max_mutex_id: int = 2, mutex_ids=None) -> None:
    """Take buffer-id token `mutex_id` (0..31) on `pipe`: the pipe waits until the id's previous holder on another
    pipe (in this core's program order) has given it back (mutex_lock_mutex_unlock.md). A second lock of an id this
    same pipe holds deadlocks the pipe (DeadlockError); a lock never unlocked is a SyncError at the end."""
    _mutex(Op.MUTEX_LOCK, pipe, mutex_id, mode, max_mutex_id, mutex_ids)


def mutex_unlock(*, pipe: Pipe, mutex_id: int, mode: int = 0, max_mutex_id: int = 2, mutex_ids=None) -> None:
    """Give back token `mutex_id` on `pipe` once the pipe's earlier instructions have completed; it must be the pipe
    that locked it."""
    _mutex(Op.MUTEX_UNLOCK, pipe, mutex_id, mode, max_mutex_id, mutex_ids)


# ---- cross-core events ---------------------------------------------------------------------------------------
def _cross_core_queues(op: Op, event: int, mode: CrossCoreSyncMode, tr, loc) -> list:
    """The flag queues (keys) a cross-core set feeds, or a wait takes one set from each of.

    The AIC and its AIVs share the intra-block events (modes 2 and 3: `backend_cce_ops.cpp` emits set/wait_intra_block
    for both): AIV k's event e is the AIC's e + 16 k. Mode 2 from the AIC sets e for both AIVs and its wait takes
    one from each; mode 3 from the AIC names one AIV (ids 0..31). Mode 1 is the two AIVs' own events."""
    aic = tr.section == "cube" or (tr.section is None and tr.is_aic)
    me = Role.AIC if aic else (tr.role if tr.role is not Role.AIC else Role.AIV0)
    if mode is CrossCoreSyncMode.INTER_SUBBLOCK:
        if aic:
            raise SyncError(f"{loc}: CrossCoreSyncMode.INTER_SUBBLOCK syncs the two AIVs of a block; the AIC uses "
                            f"INTRA_BLOCK or UNICAST_BLOCK")
        if tr.launch.aiv_only:
            raise SyncError(f"{loc}: CrossCoreSyncMode.INTER_SUBBLOCK pairs the two AIVs of a mix kernel's block; in an "
                            f"AIV-only kernel every AIV is a block of its own (get_subblock_num() is 1)")
        other = Role.AIV1 if me is Role.AIV0 else Role.AIV0
        pairs = [(me, other)] if op is Op.SET_FLAG else [(other, me)]
        space, ids = "subblock", [event]
    else:
        if aic:
            if mode is CrossCoreSyncMode.UNICAST_BLOCK:
                if not 0 <= event < 32:
                    raise SyncError(f"{loc}: a UNICAST_BLOCK event on the AIC is 0..31 (0..15 AIV0's, 16..31 AIV1's), "
                                    f"got {event}")
                aivs = [Role.AIV0 if event < 16 else Role.AIV1]
                event %= 16
            else:
                aivs = [Role.AIV0, Role.AIV1]
            pairs = [(me, v) for v in aivs] if op is Op.SET_FLAG else [(v, me) for v in aivs]
        else:
            if tr.launch.aiv_only:
                raise SyncError(f"{loc}: CrossCoreSyncMode.{mode.name} pairs an AIV with its AIC, but this AIV-only "
                                f"kernel runs no AIC; order AIVs with pl.system.sync_all(core_type="
                                f"pl.SyncCoreType.AIV_ONLY)")
            pairs = [(me, Role.AIC)] if op is Op.SET_FLAG else [(Role.AIC, me)]
        space, ids = "intra", [event]
    return [(CROSS_CORE, e, space, _ROLE_NAME[s], _ROLE_NAME[d]) for s, d in pairs for e in ids]


def _cross_core(op: Op, pipe, event_id, sync_mode) -> None:
    tr = current()
    loc = caller_loc()
    name = "pl.system.set_cross_core" if op is Op.SET_FLAG else "pl.system.wait_cross_core"
    p = _pipe(pipe, name, loc)
    if not isinstance(sync_mode, CrossCoreSyncMode):
        m = as_int(sync_mode)
        if m is None or m not in (0, 1, 2, 3):
            raise SyncError(f"{loc}: {name} sync_mode must be a pl.CrossCoreSyncMode (0..3), got {sync_mode!r}")
        sync_mode = CrossCoreSyncMode(m)
    e = as_int(event_id)
    top = 32 if (sync_mode is CrossCoreSyncMode.UNICAST_BLOCK and tr.section == "cube") else 16
    if e is None or not 0 <= e < top:
        raise SyncError(f"{loc}: {name} event_id {event_id!r} out of range 0..{top - 1}")
    if tr.section is None:
        raise KernelError(f"{loc}: {name} runs on one side of the block: call it inside pl.section_cube() or "
                          f"pl.section_vector()")
    role = _core_of((p,), name, loc)
    tr.launch.note_cross_core(e % 16, loc)
    if sync_mode is CrossCoreSyncMode.INTER_BLOCK:
        _inter_block(op, p, e, tr, role, loc, name)
        return
    for key in _cross_core_queues(op, e, sync_mode, tr, loc):
        tr.emit(Instr(op, p, (), (), {"key": key}, loc, name=name), role)


def _inter_block(op: Op, pipe: Pipe, event: int, tr, role: Role, loc, name: str) -> None:
    """INTER_BLOCK (mode 0): one event over every core of the side's kind in the launch (every AIC, or every AIV).
    Each set counts once on the launch-wide event; a core's k-th wait goes on once every one of the n cores has
    set it k times, and takes nothing away (Ascend C's CrossCoreSetFlag mode 0: "直到所有的AIC核都执行到
    CrossCoreSetFlag时，CrossCoreWaitFlag后续的指令才会执行"). `need` is the sets that k-th wait needs, k x n."""
    launch = tr.launch
    kind = "AIC" if role is Role.AIC else "AIV"
    key = (CROSS_CORE, event, "block", kind, "all")
    attrs = {"key": key}
    if op is Op.WAIT_FLAG:
        if role is Role.AIC:
            parties = launch.blocks
        else:
            parties = launch.block_dim if launch.aiv_only else 2 * launch.blocks
        rounds = tr.inter_block_waits.get(key, 0) + 1
        tr.inter_block_waits[key] = rounds
        attrs["need"], attrs["parties"] = rounds * parties, parties
    tr.emit(Instr(op, pipe, (), (), attrs, loc, name=name), role)


def set_cross_core(*, pipe: Pipe, event_id: int, sync_mode=CrossCoreSyncMode.INTRA_BLOCK) -> None:
    """On `pipe`, once its earlier instructions have completed, add 1 to cross-core event `event_id` of the other side
    of `sync_mode` (set_cross_core_wait_cross_core.md); INTER_BLOCK: of every core of this side's kind in the launch.
    At most chip.cross_core_flag_max (15) sets may be pending on a core's event: one more is a SyncError (it hangs
    the chip)."""
    _cross_core(Op.SET_FLAG, pipe, event_id, sync_mode)


def wait_cross_core(*, pipe: Pipe, event_id: int, sync_mode=CrossCoreSyncMode.INTRA_BLOCK) -> None:
    """`pipe` waits while cross-core event `event_id` is 0, then subtracts 1 (the AIC in INTRA_BLOCK mode waits for one
    set from each AIV); INTER_BLOCK: a core's k-th wait goes on once every core of its kind has set the event k times.
    A wait no set ever meets is a DeadlockError naming the event."""
    _cross_core(Op.WAIT_FLAG, pipe, event_id, sync_mode)


# ---- sync_all ------------------------------------------------------------------------------------------------
def sync_all(workspaces=None, *, core_type=SyncCoreType.MIX, mode=SyncAllMode.HARD) -> None:
    """A barrier over every core of the launch (sync_all.md): each core's earlier work completes before any core goes
    on. Inside a section it is that side's instruction (the cube's in section_cube, each AIV's in section_vector):
    every core `core_type` names must call it as often. core_type must match the kernel: MIX for a kernel with both
    sides, AIV_ONLY for an AIV-only kernel (MIX there syncs cube cores that do not exist: a device error, SyncError),
    AIC_ONLY for a cube-only kernel. It uses cross-core events 11..14 itself: a kernel that also sets or waits on
    them is a SyncError. SOFT mode (GM polling) behaves as HARD here; its workspaces are checked for kind."""
    tr = current()
    loc = caller_loc()
    if not isinstance(core_type, SyncCoreType):
        raise KernelError(f"{loc}: sync_all core_type must be a pl.SyncCoreType, got {core_type!r}")
    if not isinstance(mode, SyncAllMode):
        raise KernelError(f"{loc}: sync_all mode must be a pl.SyncAllMode, got {mode!r}")
    if mode is SyncAllMode.HARD and workspaces:
        raise KernelError(f"{loc}: a HARD sync_all takes no workspaces (sync_all.md)")
    if mode is SyncAllMode.SOFT and not workspaces:
        raise KernelError(f"{loc}: a SOFT sync_all needs its workspaces (a GM tensor and a Vec and/or Mat tile)")
    tr.launch.note_sync_all(core_type, loc)
    if tr.section is not None and (tr.section == "cube") != tr.is_aic:
        return            # the other side's call: its own traces record it
    instr = Instr(Op.SYNC_ALL, Pipe.S, (), (), {"core_type": core_type}, loc, name="pl.system.sync_all")
    instr.core = tr.program.id
    tr.program.instrs.append(instr)


def set_mm_layout_transform(*, enabled: bool) -> None:
    """Fixpipe drains L0C along N while enabled (set_mm_layout_transform.md): a K-split accumulation with phases needs
    it on before the K loop and off after the store (pl.matmul_acc checks it). A register write: pyto charges it no
    time. Left on when the kernel ends: KernelError."""
    tr = current()
    loc = caller_loc()
    if not isinstance(enabled, bool):
        raise KernelError(f"{loc}: set_mm_layout_transform(enabled=) takes True or False, got {enabled!r}")
    if tr.is_aic:
        tr.mm_layout_transform = loc if enabled else None


def dcci(*args, **kwargs) -> None:
    """Data-cache clean and invalidate: pyto models no data cache in front of GM."""
    current()
    raise UnsupportedError(f"{caller_loc()}: pl.system.dcci is not built in pyto (no data cache is modelled)")


__all__ = ["sync_src", "sync_dst", "bar_m", "bar_mte1", "bar_mte2", "bar_mte3", "bar_fix", "bar_v", "bar_all",
           "mutex_lock", "mutex_unlock", "set_cross_core", "wait_cross_core", "sync_all", "set_mm_layout_transform",
           "dcci", "SYNC_ALL_EVENT_IDS"]
