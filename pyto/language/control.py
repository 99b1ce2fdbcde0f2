"""Kernel structure: sections, loops, PyPTO-Pro's system variables (block and subblock ids), scalars, workspaces."""
from __future__ import annotations

import builtins
import contextlib
from typing import Iterator

from ..dtypes import FP4, LOW_PRECISION, DType
from ..errors import KernelError, ShapeError, UnsupportedError
from ..ir import GMTensor, Role
from .debug import Scalar, scalar_max, scalar_min
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
    else:
        tr.launch.uses_cube = True
    try:
        yield
    finally:
        tr.section = None


def section_cube():
    """Code that runs on the AIC (cube core) of each block (section_vector_section_cube.md). The cube and vector
    programs run concurrently, ordered only by the kernel's cross-core synchronisation."""
    return _section("cube", caller_loc())


def section_vector():
    """Code that runs on each AIV (vector core): both AIVs of a block run every line, so split the work (and the GM
    regions each stores) by pl.get_subblock_idx() or pl.get_block_idx(); two AIVs storing one region race."""
    return _section("vector", caller_loc())


def range(start: int, stop: int = None, step: int = 1):  # noqa: A001 - the DSL's spelling
    """A loop (range.md: "the only legal iterator"): its bounds are concrete at trace time in pyto (shapes, block
    ids, scalar parameters), so it is unrolled as Python's range. Integer bounds; a step of 0 is a KernelError."""
    current()   # outside a kernel: KernelError, as for every pl op
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


def _on_aiv(tr) -> bool:
    """Whether the code being traced runs on an AIV: a vector section, or outside sections on an AIV's trace."""
    return tr.section == "vector" or (tr.section is None and tr.role is not Role.AIC)


def get_block_idx() -> int:
    """This core's block index (get_block_idx.md): on the AIC the block, in [0, get_block_num()); on an AIV of a mix
    kernel the flattened AIV index 2 * block + subblock, in [0, 2 * get_block_num()); on an AIV-only kernel, where
    every AIV is a block of its own, that same flattened index, in [0, get_block_num())."""
    tr = current()
    if not _on_aiv(tr):
        return tr.block
    sub = 0 if tr.role is Role.AIC else int(tr.role) - 1      # (the AIC's trace walking vector code: AIV0's view)
    return 2 * tr.block + sub


def get_block_num() -> int:
    """The launch's block_dim (get_block_num.md): AI cores for a mix or cube kernel, AIVs for an AIV-only one."""
    return current().launch.block_dim


def get_subblock_idx() -> int:
    """0 or 1 on an AIV of a mix kernel (which of the block's two AIVs); 0 on the AIC and on an AIV-only kernel."""
    tr = current()
    if not _on_aiv(tr) or tr.launch.aiv_only or tr.role is Role.AIC:
        return 0
    return int(tr.role) - 1


def get_subblock_num() -> int:
    """1 on the AIC, 2 on an AIV of a mix kernel, 1 on an AIV-only kernel (get_subblock_num.md)."""
    tr = current()
    return 2 if _on_aiv(tr) and not tr.launch.aiv_only else 1


def has_dn2nz() -> bool:
    """pyto's extension: whether this launch's chip converts a DN operand to Nz on the way GM -> L1 (docs/fractal_formats.md §4.4:
    the Ascend 950PR/950DT only; chip table key formats.dn2nz), so an NZ Mat tile may be loaded with order=[1, 0].
    Where it does not, declare the Mat tile ZN (the operand as stored) and let the move into Left/Right transpose.
    A trace-time constant, as the chip is (Ascend C kernels test the core's arch likewise)."""
    return current().chip.dn2nz


def workspace(shape, dtype) -> GMTensor:
    """pyto's extension: GM scratch shared by all cores of the launch (the same tensor in every trace). `shape`: two
    or more positive ints. Its contents start uninitialised: a read before a write is an UninitializedReadError."""
    tr = current()
    loc = caller_loc()
    if not (isinstance(shape, (tuple, list)) and len(shape) >= 2
            and all(as_int(s) is not None and s > 0 for s in shape)):
        raise ShapeError(f"{loc}: workspace shape must be two or more positive ints, got {shape!r}")
    dt = dtype_at(dtype, loc)
    if dt in FP4:
        raise UnsupportedError(f"{loc}: a {dt!r} workspace is not built in pyto: FP4 GM tensors are MXFP4 inputs "
                               f"(packed pairs the caller passes), and nothing on chip writes FP4")
    ws = tr.launch.workspace(tr.n_workspace, tuple(int(s) for s in shape), dt, loc)
    tr.n_workspace += 1
    return ws


# ---- scalars (range.md, min/max/const) -----------------------------------------------------------------------
def min(a, b):  # noqa: A001 - the DSL's spelling
    """The smaller of two scalars (PyPTO-Pro rewrites the builtin min to this); of a value read by pl.getval, a
    pl.Scalar (debug.py)."""
    if isinstance(a, Scalar) or isinstance(b, Scalar):
        return scalar_min(a, b)
    return a if a <= b else b


def max(a, b):  # noqa: A001
    """The larger of two scalars (of a value read by pl.getval, a pl.Scalar)."""
    if isinstance(a, Scalar) or isinstance(b, Scalar):
        return scalar_max(a, b)
    return a if a >= b else b


def const(value, dtype=None):
    """A typed scalar constant: an int for an integer dtype, a float for a float one."""
    if dtype is None:
        return value
    loc = caller_loc()
    dt = dtype_at(dtype, loc)
    if dt in LOW_PRECISION:
        raise ShapeError(f"{loc}: pl.const of {dt!r}: FP8 and HF8 are not scalar types, nor is FP4 (Scalar.md)")
    return float(dt.np.type(value)) if dt.is_float else int(value)


__all__ = ["section_cube", "section_vector", "range", "get_block_idx", "get_block_num", "get_subblock_idx",
           "get_subblock_num", "has_dn2nz", "workspace", "min", "max", "const", "DType"]
