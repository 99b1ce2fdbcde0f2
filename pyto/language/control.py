"""Kernel structure and synchronisation: sections, loops, block ids, workspaces, flags, barriers."""
from __future__ import annotations

import builtins
import contextlib
from typing import Iterator

from ..errors import KernelError, ShapeError, SyncError
from ..ir import GMTensor, Instr, Op, Pipe, Role
from .tile import dtype_at
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
    """Code that runs on the AIC (cube core) of each block."""
    return _section("cube", caller_loc())


def section_vector():
    """Code that runs on each of the two AIVs (vector cores) of each block."""
    return _section("vector", caller_loc())


def range(start: int, stop: int = None, step: int = 1):  # noqa: A001 - the DSL's spelling
    """A static loop (unrolled at trace time): bounds must be Python ints."""
    if stop is None:
        start, stop = 0, start
    for v in (start, stop, step):
        if not isinstance(v, int) or isinstance(v, bool):
            raise KernelError(f"{caller_loc()}: pl.range bounds must be Python ints, got {v!r}")
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
    """0 or 1: which AIV of the block runs this code (0 on the AIC)."""
    tr = current()
    return 0 if tr.role is Role.AIC else int(tr.role) - 1


def workspace(shape, dtype) -> GMTensor:
    """GM scratch shared by all cores of the launch (the same tensor in every trace)."""
    tr = current()
    loc = caller_loc()
    if not (isinstance(shape, (tuple, list)) and len(shape) >= 2
            and all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape)):
        raise ShapeError(f"{loc}: workspace shape must be two or more positive Python ints, got {shape!r}")
    ws = tr.launch.workspace(tr.n_workspace, tuple(shape), dtype_at(dtype, loc), loc)
    tr.n_workspace += 1
    return ws


_AIC_PIPES = (Pipe.MTE1, Pipe.M, Pipe.FIX)
_AIV_PIPES = (Pipe.V, Pipe.MTE3)
_CORE_PIPES = {Role.AIC: (Pipe.MTE2, Pipe.MTE1, Pipe.M, Pipe.FIX, Pipe.S),
               Role.AIV0: (Pipe.MTE2, Pipe.V, Pipe.MTE3, Pipe.S)}


def _flag_role(src: Pipe, dst: Pipe, what: str, loc) -> Role:
    """The core (AIC, or the AIVs) whose pipes src and dst are: the section's, else the one that has them.
    Flags and barriers order pipes of one core; the cube and vector cores exchange through GM (sync_all)."""
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
                            f"order the pipes of one core, cube and vector exchange through GM and pl.sync_all()")
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
    """On `src_pipe`, after its earlier instructions: raise event (src, dst, id)."""
    _flag(Op.SET_FLAG, src_pipe, dst_pipe, event_id)


def wait_flag(src_pipe: Pipe, dst_pipe: Pipe, event_id: int) -> None:
    """On `dst_pipe`: wait until event (src, dst, id) is raised, then consume it."""
    _flag(Op.WAIT_FLAG, src_pipe, dst_pipe, event_id)


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
    """A barrier over every AIC and AIV of the launch (all earlier work of every core completes first)."""
    tr = current()
    loc = caller_loc()
    if tr.section is not None:
        raise KernelError(f"{loc}: pl.sync_all() joins every core; call it outside pl.section_*()")
    instr = Instr(Op.SYNC_ALL, Pipe.S, (), (), {}, loc, name="pl.sync_all")
    instr.core = tr.program.id
    tr.program.instrs.append(instr)
