"""pyto: a hardware-aware kernel DSL for Ascend NPUs, with a CPU emulator of the chip.

See README.md; `import pyto.language as pl` is what a kernel author writes with.
"""
from __future__ import annotations

from . import layout, progress
from .chip import Chip, load_chip, list_chips
from .dtypes import DType
from .errors import (AlignmentError, CapacityError, ChipError, ClobberedReadError, DeadlockError, OutOfBoundsError,
                     PlanError, PytoError, RaceError, ShapeError, SparsityError, TilingError, UninitializedReadError,
                     UnsupportedError, KernelError, SyncError, KernelAssertionError, TrapError, InputError, LoadError)
from .emulator import CompiledKernel, Spec, compile, run, run_options, spec
from .report import Report
from .tiling import CubeTileShapes, set_cube_tile_shapes, get_cube_tile_shapes, reset_cube_tile_shapes
from .alias import alias_pypto_pro
from .checker import CheckResult, check, check_file

__version__ = "0.1.0"

__all__ = ["layout", "Chip", "load_chip", "list_chips", "DType", "PytoError", "AlignmentError", "CapacityError",
           "DeadlockError", "OutOfBoundsError", "PlanError", "RaceError", "ShapeError", "SparsityError", "TilingError",
           "UninitializedReadError", "ClobberedReadError", "UnsupportedError", "KernelError", "SyncError", "ChipError",
           "KernelAssertionError", "TrapError", "InputError", "LoadError", "Spec", "run", "compile", "CompiledKernel",
           "run_options", "spec", "Report", "CubeTileShapes", "set_cube_tile_shapes", "get_cube_tile_shapes",
           "reset_cube_tile_shapes", "alias_pypto_pro", "progress", "check", "check_file", "CheckResult"]
