"""`import pyto.language as pl`: PyPTO-Pro's kernel language (`import pypto_pro.language as pl`), executable on
pyto's emulator (docs/design.md §3). After `pyto.alias_pypto_pro()`, `import pypto_pro.language as pl` is this
module.

The names, by kind (PyPTO-Pro's docs/zh/pypto_pro/api/SIMD-API/ has a page per name):
- kernels and launch: jit, Tensor, Ptr, Tile, DYNAMIC, STATIC; pyto's extension: kernel (static Python parameters)
- types: DT_FP16, DT_BF16, DT_FP32, DT_INT8, DT_INT32 (the other DT_* are named, not built), MemorySpace,
  TileType, TensorLayout with ND, DN, NZ, ZN, ZZ, NN, PipeType, AccPhase, STPhase, AccToVecMode, AtomicType,
  ReluPreMode, CrossCoreSyncMode, SyncCoreType, SyncAllMode, TilePad, FillPadMode, RoundMode, QuantMode
- tiles: make_tile, make_tile_group; pyto's extension: alloc (the next free address), L1 L0A L0B L0C UB BT FB
- data movement: load, load_tile, store, store_tile, move, insert (not built yet)
- cube: matmul, matmul_acc
- vector (the vector-side issue aligns these with PyPTO-Pro's): add sub mul div maximum minimum adds muls exp abs
  sqrt rsqrt relu ln reciprocal cast copy duplicate sum expand_add expand_sub expand_mul expand_div
- control and system variables: section_cube, section_vector, range, get_block_idx, get_block_num,
  get_subblock_idx, get_subblock_num, min, max, const; pyto's extensions: workspace, has_dn2nz
- synchronisation: system.sync_src / sync_dst, system.bar_m / bar_mte1 / bar_mte2 / bar_mte3 / bar_fix / bar_v /
  bar_all, system.mutex_lock / mutex_unlock, system.set_cross_core / wait_cross_core, system.sync_all,
  system.set_mm_layout_transform
"""
from __future__ import annotations

from . import system
from .control import (const, get_block_idx, get_block_num, get_subblock_idx, get_subblock_num, has_dn2nz, max, min,
                      range, section_cube, section_vector, workspace)
from .cube import matmul, matmul_acc
from .jit import DYNAMIC, STATIC, JitKernel, Ptr, Tensor, TilingKeyField, jit
from .movement import load, load_tile, store, store_tile
from .onchip import insert, move
from .tile import Tile, TileGroup, TileType, alloc, make_tile, make_tile_group
from .trace import Kernel, kernel
from .types import *  # noqa: F401,F403 - the names PyPTO-Pro's kernels are written with
from .types import __all__ as _TYPES
from .vector import (abs, add, adds, cast, copy, div, duplicate, exp, expand_add, expand_div, expand_mul, expand_sub,
                     ln, maximum, minimum, mul, muls, reciprocal, relu, rsqrt, sqrt, sub, sum)

__all__ = [*_TYPES, "system", "const", "get_block_idx", "get_block_num", "get_subblock_idx", "get_subblock_num",
           "has_dn2nz", "max", "min", "range", "section_cube", "section_vector", "workspace", "matmul", "matmul_acc",
           "DYNAMIC", "STATIC", "JitKernel", "Ptr", "Tensor", "TilingKeyField", "jit", "insert", "load",
           "load_tile", "move", "store", "store_tile", "Tile", "TileGroup", "TileType", "alloc", "make_tile",
           "make_tile_group", "Kernel", "kernel", "abs", "add", "adds", "cast", "copy", "div", "duplicate", "exp",
           "expand_add", "expand_div", "expand_mul", "expand_sub", "ln", "maximum", "minimum", "mul", "muls",
           "reciprocal", "relu", "rsqrt", "sqrt", "sub", "sum"]
