"""Error classes of pyto (docs/design.md §6). Every error a user can see is a PytoError subclass.

Messages name the kernel's own source line where one is known (``loc``), not pyto internals.
"""
from __future__ import annotations


class PytoError(Exception):
    """Base class of every error pyto raises on purpose."""


class CapacityError(PytoError):
    """An on-chip buffer would overflow: names buffer, bytes asked, bytes in use, capacity, line."""

    def __init__(self, msg: str, *, buffer: str = "", asked: int = 0, in_use: int = 0,
                 capacity: int = 0, loc: str = "", at=None, what: str = ""):
        super().__init__(msg)
        self.buffer, self.asked, self.in_use, self.capacity, self.loc = buffer, asked, in_use, capacity, loc
        self.at, self.what = at, what      # where the refused range was asked for (an address map's), and its holder


class AlignmentError(PytoError):
    """An offset, size or address breaks an alignment rule (which rule, the value, the alignment)."""


class TilingError(PytoError):
    """A cube tile-shape rule of docs/tile_shapes.md §6 is broken; ``rule`` names it."""

    def __init__(self, msg: str, *, rule: str = ""):
        super().__init__(msg)
        self.rule = rule


class DeadlockError(PytoError):
    """Nothing can progress: every blocked pipe, what it waits for, and its source line."""


class RaceError(PytoError):
    """Two conflicting accesses not ordered by happens-before (RAW/WAR/WAW)."""


class UninitializedReadError(PytoError):
    """A buffer region read before anything wrote it."""


class ClobberedReadError(UninitializedReadError):
    """A tile read whose bytes were last written, in happens-before order, through another tile that is not a view
    of the same storage (tiles that overlap in a buffer): names both tiles, their ranges and lines."""


class OutOfBoundsError(PytoError):
    """A GM or tile access outside its shape."""


class ShapeError(PytoError):
    """User shapes or dtypes that do not fit the operation."""


class SparsityError(ShapeError):
    """A 4:2 sparse operand breaks the 4:2 rule (seeds/004 §5.2): a group of 4 along K with more than 2 non-zeros, or
    an index pair the cube's selection table does not hold; names the group, the values and the rule."""


class PlanError(PytoError):
    """No legal plan, or a forced branch whose structural preconditions fail."""


class UnsupportedError(PytoError):
    """A data path, dtype or feature this chip does not have."""


class KernelError(PytoError):
    """Misuse of the DSL itself: an op outside a kernel or in the wrong section, bad static params."""


class KernelAssertionError(PytoError):
    """A pl.pto_assert whose condition is false: names the kernel line, the core, the condition and the values
    (checked at trace time on trace-time values, in full mode's data pass on values read by pl.getval).
    ``instr``: the assertion's instruction, when the data pass raised it."""

    def __init__(self, msg: str, *, instr=None):
        super().__init__(msg)
        self.instr = instr


class TrapError(KernelError):
    """A pl.trap() the launch reached: the kernel aborts there (names the line, the core and the cycle)."""


class SyncError(PytoError):
    """Misuse of explicit synchronisation: a flag set twice without a wait, an event id out of range."""


class ChipError(PytoError):
    """A chip that is not known, or a chip table (TOML) that is missing a key, ill-typed or unreadable."""


__all__ = [
    "PytoError", "CapacityError", "AlignmentError", "TilingError", "DeadlockError", "RaceError",
    "UninitializedReadError", "ClobberedReadError", "OutOfBoundsError", "ShapeError", "SparsityError", "PlanError", "UnsupportedError", "KernelError", "SyncError",
    "KernelAssertionError", "TrapError",
    "ChipError", "CalibrationError",
]


class CalibrationError(PytoError):
    """A fitted-constants file (pyto calibrate; pyto_kernels.bmm.fitted) that is unreadable, of another format, or
    whose key is missing, unknown or out of range (names the file and the key); or a sweep it cannot fit."""


class InputError(PytoError):
    """pyto check: a kernel's inputs cannot be made from its annotations and the values given; names the parameter
    and the flag (or pyto.check keyword) that would give it."""


class LoadError(PytoError):
    """pyto check: a kernel file could not be imported (not found, a syntax error, its module code raised)."""
