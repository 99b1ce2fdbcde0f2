"""Kernel structure and synchronisation: sections, loops, block ids, workspaces, flags, barriers."""
from __future__ import annotations

import builtins
import contextlib
from typing import Iterator

from ..errors import KernelError, ShapeError, SyncError, UnsupportedError
from ..ir import CROSS_CORE, GMTensor, Instr, Op, Pipe, Role
from .tile import as_int, dtype_at
from .trace import caller_loc, current


@contextlib.contextmanager
def _section(kind: str, loc) -> Iterator[None]:
    tr = current()
    if tr.section is not None:
        raise KernelError(f"{loc}: pl.section_{kind}() inside pl.section_{tr.section}(); sections do not nest")
    tr.section = kind
    if kind == "vector":
        tr.launch.mark_vector(loc)
    try:
        yield
    finally:
        tr.section = None


def section_cube():
    """Code that runs on the AIC (cube core) of each block. Sections keep the source's program order: a
    pl.section_vector() after a loop of these sees what the whole loop left (put both inside the loop to hand
    results over tile by tile)."""
    return _section("cube", caller_loc())


def section_vector():
    """Code that runs on each of the two AIVs (vector cores) of each block: both run every line, so split
    the work (and the GM regions each stores) by pl.subblock_idx(); two AIVs storing one region race."""
    return _section("vector", caller_loc())


def range(start: int, stop: int = None, step: int = 1):  # noqa: A001 - the DSL's spelling
    """A static loop (unrolled at trace time), as Python's range: integer bounds (int or numpy integer); a
    step of 0 is a KernelError."""
    current()   # outside a @pl.kernel: KernelError, as for every pl op
    if stop is None:
        start, stop = 0, start
    bounds = [as_int(v) for v in (start, stop, step)]
    for v, i in zip((start, stop, step), bounds):
        if i is None:
            raise KernelError(f"{caller_loc()}: pl.range bounds must be integers, got {v!r}")
    start, stop, step = bounds
    if step == 0:
        raise KernelError(f"{caller_loc()}: pl.range step must not be 0")
    return builtins.range(start, stop, step)


def block_idx() -> int:
    """Index of this block (AI core group) in the launch."""
    return current().block


def block_num() -> int:
    """Number of blocks in the launch."""
    return current().launch.blocks


def subblock_idx() -> int:
    """0 or 1: which AIV of the block runs this code (0 on the AIC, and so in pl.section_cube() whichever
    trace runs it: every trace must see the cube code the AIC runs)."""
    tr = current()
    return 0 if tr.role is Role.AIC or tr.section == "cube" else int(tr.role) - 1


def has_dn2nz() -> bool:
    """Whether this launch's chip converts a DN operand to Nz on the way GM -> L1 (`pl.load(l1, gm,
    transpose=True)`, seeds/004 4.4: the Ascend 950PR/950DT only; chip table key formats.dn2nz). Where it does
    not, load the operand as it is stored and transpose it on the way to L0A/L0B (`pl.load(l0, l1_view,
    transpose=True)`). A trace-time constant, as the chip is (Ascend C kernels test the core's arch likewise)."""
    return current().chip.dn2nz


def workspace(shape, dtype) -> GMTensor:
    """GM scratch shared by all cores of the launch (the same tensor in every trace). `shape`: two or more
    positive ints. Its contents start uninitialised: a read before a write is an UninitializedReadError."""
    tr = current()
    loc = caller_loc()
    if not (isinstance(shape, (tuple, list)) and len(shape) >= 2
            and all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape)):
        raise ShapeError(f"{loc}: workspace shape must be two or more positive Python ints, got {shape!r}")
    ws = tr.launch.workspace(tr.n_workspace, tuple(shape), dtype_at(dtype, loc), loc)
    tr.n_workspace += 1
    return ws


_AIV_PIPES = (Pipe.V, Pipe.MTE3)
_CORE_PIPES = {Role.AIC: (Pipe.MTE2, Pipe.MTE1, Pipe.M, Pipe.FIX, Pipe.S),
               Role.AIV0: (Pipe.MTE2, Pipe.V, Pipe.MTE3, Pipe.S)}


def _flag_role(src: Pipe, dst: Pipe, what: str, loc) -> Role:
    """The core (AIC, or the AIVs) whose pipes src and dst are: the section's, else the one that has them.
    Flags and barriers order pipes of one core; the cube and vector cores order each other with cross-core
    flags, cross-core moves or sync_all."""
    tr = current()
    if tr.section is not None:
        role = Role.AIC if tr.section == "cube" else Role.AIV0
    else:
        role = Role.AIV0 if src in _AIV_PIPES or dst in _AIV_PIPES else Role.AIC
    for p in (src, dst):
        if p not in _CORE_PIPES[role]:
            core = "AIC (cube core)" if role is Role.AIC else "AIV (vector core)"
            raise SyncError(f"{loc}: {what} on PIPE_{p.name}: the {core} has no such pipe (its pipes: "
                            f"{', '.join('PIPE_' + q.name for q in _CORE_PIPES[role])}); flags and barriers "
                            f"order the pipes of one core: between cube and vector use pl.cross_core_set_flag / "
                            f"pl.cross_core_wait_flag or pl.sync_all()")
    return role


def _flag(op: Op, src: Pipe, dst: Pipe, event_id: int) -> None:
    tr = current()
    loc = caller_loc()
    for p in (src, dst):
        if not isinstance(p, Pipe) or p is Pipe.ALL:
            raise KernelError(f"{loc}: flags connect two pipes (pl.PIPE_MTE2, ...), got {p!r}")
    if not isinstance(event_id, int) or not 0 <= event_id < tr.chip.event_ids:
        raise SyncError(f"{loc}: event id {event_id!r} out of range 0..{tr.chip.event_ids - 1}")
    if src == dst:
        raise SyncError(f"{loc}: a flag connects two different pipes, got {src.name} -> {dst.name}")
    pipe = src if op is Op.SET_FLAG else dst
    name = "pl.set_flag" if op is Op.SET_FLAG else "pl.wait_flag"
    tr.emit(Instr(op, pipe, (), (), {"key": (src, dst, event_id)}, loc, name=name), _flag_role(src, dst, name, loc))


def set_flag(src_pipe: Pipe, dst_pipe: Pipe, event_id: int) -> None:
    """On `src_pipe`, after its earlier instructions: raise event (src, dst, id). `event_id` is 0 to the
    chip's event count - 1 (8 on the bundled chips); pair every set with a wait_flag (a flag left set at the
    end is a SyncError). Used with pyto.run(..., auto_sync=False)."""
    _flag(Op.SET_FLAG, src_pipe, dst_pipe, event_id)


def wait_flag(src_pipe: Pipe, dst_pipe: Pipe, event_id: int) -> None:
    """On `dst_pipe`: wait until event (src, dst, id) is raised, then consume it."""
    _flag(Op.WAIT_FLAG, src_pipe, dst_pipe, event_id)


_ROLE_NAME = {Role.AIC: "AIC", Role.AIV0: "AIV0", Role.AIV1: "AIV1"}


def _cross_core_queues(op: Op, flag_id: int, mode: int, tr) -> list:
    """The flag queues (src role, dst role) a cross-core set feeds or a wait takes one from, as keys.

    mode 2 (an AIC and its two AIVs): the AIC's set reaches each AIV; an AIV's set reaches the AIC, whose
    wait goes on once both AIVs have set (one from each). mode 1 (the two AIVs of a block): a set reaches
    the other AIV."""
    if tr.section == "cube":
        me, others = Role.AIC, ([Role.AIV0, Role.AIV1] if mode == 2 else [])
    else:
        me = tr.role if tr.role is not Role.AIC else Role.AIV0      # (traced as a marker on the AIC)
        others = [Role.AIC] if mode == 2 else [Role.AIV1 if me is Role.AIV0 else Role.AIV0]
    pairs = [(me, o) for o in others] if op is Op.SET_FLAG else [(o, me) for o in others]
    return [(CROSS_CORE, flag_id, mode, _ROLE_NAME[s], _ROLE_NAME[d]) for s, d in pairs]


def _cross_core(op: Op, flag_id: int, pipe: Pipe, mode: int) -> None:
    tr = current()
    loc = caller_loc()
    name = "pl.cross_core_set_flag" if op is Op.SET_FLAG else "pl.cross_core_wait_flag"
    if tr.section is None:
        raise KernelError(f"{loc}: {name} runs on one side of the block: call it inside pl.section_cube() or "
                          f"pl.section_vector()")
    if not isinstance(flag_id, int) or isinstance(flag_id, bool) or not 0 <= flag_id < tr.chip.cross_core_flag_ids:
        raise SyncError(f"{loc}: cross-core flag id {flag_id!r} out of range 0..{tr.chip.cross_core_flag_ids - 1}")
    if mode in (0, 4):
        what = "all AICs or all AIVs of the launch" if mode == 0 else "an AIC and one AIV"
        raise UnsupportedError(f"{loc}: cross-core flag mode {mode} ({what}) is not modelled; mode 2 pairs an "
                               f"AIC with its AIVs, mode 1 the two AIVs, and pl.sync_all() is the launch-wide "
                               f"barrier")
    if mode not in (1, 2):
        raise SyncError(f"{loc}: cross-core flag mode must be 1 (the two AIVs) or 2 (the AIC and its AIVs), "
                        f"got {mode!r}")
    if mode == 1 and tr.section == "cube":
        raise SyncError(f"{loc}: cross-core flag mode 1 syncs the two AIVs of a block; the AIC uses mode 2")
    if not isinstance(pipe, Pipe) or pipe is Pipe.ALL:
        raise KernelError(f"{loc}: {name} takes the pipe it runs on (pl.PIPE_FIX, pl.PIPE_MTE2, ...), got {pipe!r}")
    role = _flag_role(pipe, pipe, name, loc)
    for key in _cross_core_queues(op, flag_id, mode, tr):
        tr.emit(Instr(op, pipe, (), (), {"key": key}, loc, name=name), role)


def cross_core_set_flag(flag_id: int, pipe: Pipe, mode: int = 2) -> None:
    """CrossCoreSetFlag: on `pipe`, after its earlier instructions, raise cross-core flag `flag_id` for the
    other side of `mode` (2: from the AIC to each of its AIVs, or from an AIV to the AIC; 1: to the other AIV).
    A counter per flag: at most chip.cross_core_flag_max sets may wait unconsumed (more hangs the chip:
    SyncError). Orders what came before it on `pipe` before what follows the matching wait."""
    _cross_core(Op.SET_FLAG, flag_id, pipe, mode)


def cross_core_wait_flag(flag_id: int, pipe: Pipe, mode: int = 2) -> None:
    """CrossCoreWaitFlag: `pipe` waits for (and consumes) a set of cross-core flag `flag_id` from the other
    side of `mode`; the AIC in mode 2 waits for both its AIVs. On A2/A3 the wait holds every pipe of the
    core, on 950 only `pipe` (chip.cross_core_wait_blocks_core). Never set: DeadlockError at once."""
    _cross_core(Op.WAIT_FLAG, flag_id, pipe, mode)


def pipe_barrier(pipe: Pipe) -> None:
    """Wait for earlier instructions of `pipe` (all pipes of the core with PIPE_ALL) to finish."""
    tr = current()
    loc = caller_loc()
    if not isinstance(pipe, Pipe):
        raise KernelError(f"{loc}: pl.pipe_barrier takes a pipe (pl.PIPE_ALL, pl.PIPE_V, ...), got {pipe!r}")
    role = (_flag_role(pipe, pipe, "pl.pipe_barrier", loc) if pipe is not Pipe.ALL
            else (Role.AIV0 if tr.section == "vector" else Role.AIC))
    run_on = Pipe.S if pipe is Pipe.ALL else pipe
    tr.emit(Instr(Op.BARRIER, run_on, (), (), {"pipe": pipe}, loc, name="pl.pipe_barrier"), role)


def sync_all() -> None:
    """A barrier over every AIC and AIV of the launch (all earlier work of every core completes first). Call it
    outside pl.section_*(), on every core the same number of times (one that never reaches it deadlocks)."""
    tr = current()
    loc = caller_loc()
    if tr.section is not None:
        raise KernelError(f"{loc}: pl.sync_all() joins every core; call it outside pl.section_*()")
    instr = Instr(Op.SYNC_ALL, Pipe.S, (), (), {}, loc, name="pl.sync_all")
    instr.core = tr.program.id
    tr.program.instrs.append(instr)
