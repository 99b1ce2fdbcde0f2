"""`import pyto.language as pl`: everything a kernel author writes (DESIGN section 3)."""
from __future__ import annotations

from ..dtypes import DType
from ..ir import AccPhase, AccToVecMode, Buf, Pipe, STPhase
from .control import (block_idx, block_num, cross_core_set_flag, cross_core_wait_flag, has_dn2nz, pipe_barrier,
                      range, section_cube, section_vector, set_flag, subblock_idx, sync_all, wait_flag, workspace)
from .ops import load, matmul, matmul_acc, move, store
from .tile import Ring, Tile, alloc
from .trace import Kernel, kernel
from .vector import (abs, add, adds, cast, copy, div, duplicate, exp, expand_add, expand_div, expand_mul, expand_sub,
                     ln, maximum, minimum, mul, muls, reciprocal, relu, rsqrt, sqrt, sub, sum)

fp16, bf16, fp32, int8, int32 = DType.fp16, DType.bf16, DType.fp32, DType.int8, DType.int32
L1, L0A, L0B, L0C, UB, BT, FB = Buf.L1, Buf.L0A, Buf.L0B, Buf.L0C, Buf.UB, Buf.BT, Buf.FB
ND, DN, NZ, ZZ, ZN = "ND", "DN", "NZ", "ZZ", "ZN"
PIPE_MTE2, PIPE_MTE1, PIPE_M, PIPE_FIX = Pipe.MTE2, Pipe.MTE1, Pipe.M, Pipe.FIX
PIPE_V, PIPE_MTE3, PIPE_S, PIPE_ALL = Pipe.V, Pipe.MTE3, Pipe.S, Pipe.ALL
