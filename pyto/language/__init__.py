"""`import pyto.language as pl`: PyPTO-Pro's kernel language (`import pypto_pro.language as pl`), executable on
pyto's emulator (docs/design.md §3). After `pyto.alias_pypto_pro()`, `import pypto_pro.language as pl` is this
module.

The names, by kind (PyPTO-Pro's docs/zh/pypto_pro/api/SIMD-API/ has a page per name):
- kernels and launch: jit, Tensor, Ptr, Tile, DYNAMIC, STATIC; pyto's extension: kernel (static Python parameters)
- types: DT_FP16, DT_BF16, DT_FP32, DT_INT8, DT_INT32, DT_UINT8, DT_FP8E4M3FN, DT_FP8E5M2, DT_HF8 (the 8-bit floats:
  storage and matmul inputs only), DT_FP8E8M0 (matmul_mx's scales), DT_FP4E2M1, DT_FP4E1M2 (MXFP4's data, half a byte;
  the other DT_* are named, not built), MemorySpace,
  TileType, TensorLayout with ND, DN, NZ, ZN, ZZ, NN, PipeType, AccPhase, STPhase, AccToVecMode, AtomicType,
  ReluPreMode, CrossCoreSyncMode, SyncCoreType, SyncAllMode, TilePad, FillPadMode, RoundMode, QuantMode
- tiles: make_tile, make_tile_group; pyto's extension: alloc (the next free address), L1 L0A L0B L0C UB BT FB
- tails: set_validshape, fillpad
- GM views: Ptr, addptr, make_ptr, make_tensor, set_stride
- data movement: load, load_tile, store, store_tile, move, insert
- cube: matmul, matmul_acc, matmul_mx, matmul_mx_acc (MXFP8 and MXFP4); pyto's extension (Atlas A2/A3):
  the 4:2 sparse matmul move_sparse, matmul_sparse, matmul_sparse_acc (cube_sparse.py)
- debugging and element access: printf, pto_assert, dump_data, trap, getval, setval (and tile[i, j])
- vector (memory_vector_computation/): add sub mul div maximum minimum (tile or scalar rhs) and_ shl shr xor, neg abs
  exp log sqrt rsqrt recip relu, expands, cast(mode=), add_relu_cast sub_relu_cast mul_cast, eq ne lt le gt ge
  (bit-packed UINT8 masks) and select, add_relu sub_relu addc mul_add_dst fused_mul_add fused_mul_add_relu axpy,
  partadd partmax partmin partmul, sum maximum minimum argmax argmin (dim=0 row-wise into a [rows, 1] DN tile,
  dim=1 column-wise), expand_max expand_min expand_mul expand_sub expand_div, transpose, fill_index; named, not
  built (UnsupportedError): gather gatherb gathermask scatter mrgsort mrgsort2 sort32 histogram quant dequant
  set_mask_count set_mask_norm set_vec_mask reset_mask vector_function Vf
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
from .cube_mx import matmul_mx, matmul_mx_acc
from .cube_sparse import matmul_sparse, matmul_sparse_acc, move_sparse
from .debug import dump_data, getval, printf, pto_assert, setval, trap
from .gmview import addptr, make_ptr, make_tensor, set_stride
from .jit import DYNAMIC, STATIC, JitKernel, Ptr, Tensor, TilingKeyField, jit
from .movement import load, load_tile, store, store_tile
from .onchip import insert, move
from .tails import fillpad, set_validshape
from .tile import Tile, TileGroup, TileType, alloc, make_tile, make_tile_group
from .trace import Kernel, kernel
from .types import *  # noqa: F401,F403 - the names PyPTO-Pro's kernels are written with
from .types import __all__ as _TYPES
from .vector_elementwise import (abs, add, add_relu, add_relu_cast, addc, and_, axpy, cast, div, eq, exp, expands,
                                 fused_mul_add, fused_mul_add_relu, ge, gt, le, log, lt, maximum, minimum, mul,
                                 mul_add_dst, mul_cast, ne, neg, partadd, partmax, partmin, partmul, recip, relu, rsqrt,
                                 select, shl, shr, sqrt, sub, sub_relu, sub_relu_cast, xor)
from .vector_reduce import (argmax, argmin, expand_div, expand_max, expand_min, expand_mul, expand_sub, fill_index, sum,
                            transpose)
from .block_names import *  # noqa: F401,F403 - row_sum, col_expand_mul, ...: PyPTO-Pro's block-op names
from .block_names import __all__ as _BLOCK_NAMES
from .types import UnbuiltNamespace
from .vector_unbuilt import (Vf, dequant, gather, gatherb, gathermask, histogram, mrgsort, mrgsort2, quant, reset_mask,
                             scatter, set_mask_count, set_mask_norm, set_vec_mask, sort32, vector_function)

_VECTOR = ["add", "sub", "mul", "div", "maximum", "minimum", "and_", "shl", "shr", "xor", "expands", "neg", "abs", "exp",
           "log", "sqrt", "rsqrt", "recip", "relu", "cast", "add_relu_cast", "sub_relu_cast", "mul_cast", "eq", "ne",
           "lt", "le", "gt", "ge", "select", "add_relu", "sub_relu", "addc", "mul_add_dst", "fused_mul_add",
           "fused_mul_add_relu", "axpy", "partadd", "partmax", "partmin", "partmul", "transpose", "sum", "argmax",
           "argmin", "expand_max", "expand_min", "expand_mul", "expand_sub", "expand_div", "fill_index"]
_VECTOR_UNBUILT = ["gather", "gatherb", "gathermask", "scatter", "mrgsort", "mrgsort2", "sort32", "histogram", "quant",
                   "dequant", "set_mask_count", "set_mask_norm", "set_vec_mask", "reset_mask", "vector_function", "Vf"]

__all__ = [*_TYPES, "dump_data", "getval", "printf", "pto_assert", "setval", "trap", "system", "const", "get_block_idx", "get_block_num", "get_subblock_idx", "get_subblock_num",
           "has_dn2nz", "max", "min", "range", "section_cube", "section_vector", "workspace", "matmul", "matmul_acc",
           "matmul_mx", "matmul_mx_acc", "matmul_sparse", "matmul_sparse_acc", "move_sparse",
           "DYNAMIC", "STATIC", "JitKernel", "Ptr", "Tensor", "TilingKeyField", "jit", "addptr", "make_ptr",
           "make_tensor", "set_stride", "insert", "load",
           "load_tile", "move", "store", "store_tile", "Tile", "TileGroup", "TileType", "alloc", "make_tile",
           "make_tile_group", "fillpad", "set_validshape", "Kernel", "kernel",
           *_VECTOR, *_VECTOR_UNBUILT, *_BLOCK_NAMES, "simt", "pipeline"]

simt = UnbuiltNamespace("simt", "SIMT: thread-level functions on the vector cores")
pipeline = UnbuiltNamespace("pipeline", "the automatic cube/vector preload pipeline")
