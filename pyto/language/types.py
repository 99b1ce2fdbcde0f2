"""The names PyPTO-Pro's kernels are written with: data types, memory spaces, layouts, pipes and the enums of
its ops (`pypto_pro/language/__init__.py`'s exports; docs/zh/pypto_pro/api/SIMD-API/basic_data_structures/).

Each names a concept pyto already has, so there is one object per concept: `pl.DT_FP16` is pyto's fp16,
`pl.MemorySpace.Mat` is the L1 buffer (`pl.L1`, pyto's extension spelling), `pl.PipeType.MTE2` the MTE2 pipe.
A name PyPTO-Pro has for something pyto does not build yet is an `Unbuilt` placeholder: using it raises
UnsupportedError naming it (never a silent stand-in).
"""
from __future__ import annotations

import enum

from ..dtypes import DType
from ..errors import UnsupportedError
from ..ir import AccPhase, AccToVecMode, Buf, Pipe, STPhase


class Unbuilt:
    """A PyPTO-Pro name pyto does not execute yet. Any use (as a dtype, memory space, ...) is an
    UnsupportedError naming it and what it is for."""

    def __init__(self, name: str, what: str):
        self.name, self.what = name, what

    def refuse(self, where: str = "") -> UnsupportedError:
        at = f"{where}: " if where else ""
        return UnsupportedError(f"{at}pl.{self.name} ({self.what}) is not built in pyto yet")

    def __repr__(self) -> str:
        return f"pl.{self.name}"


class UnbuiltNamespace:
    """A PyPTO-Pro namespace pyto does not execute (pl.simt, pl.pipeline). A module that only names it still
    imports: its attributes are namespaces too, a call outside a kernel makes a placeholder (a decorator's or a
    config's: `@pl.simt.function(max_threads=64)`, `pipeline=pl.pipeline.PipelineConfig(preload=2)`), and what it
    decorates raises UnsupportedError when called. Any call while a kernel is traced is an UnsupportedError."""

    def __init__(self, name: str, what: str):
        self._name, self._what = name, what

    def __getattr__(self, attr: str) -> "UnbuiltNamespace":
        if attr.startswith("__"):
            raise AttributeError(attr)
        return UnbuiltNamespace(f"{self._name}.{attr}", self._what)

    def refuse(self, where: str = "") -> UnsupportedError:
        at = f"{where}: " if where else ""
        return UnsupportedError(f"{at}pl.{self._name} ({self._what}) is not built in pyto yet")

    def __call__(self, *args, **kwargs):
        from .trace import tracing
        if tracing():
            raise self.refuse()
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], UnbuiltNamespace):
            fn, refuse = args[0], self.refuse

            def refusing(*a, **k):
                raise refuse(f"'{getattr(fn, '__name__', fn)}'")
            refusing.__name__ = getattr(fn, "__name__", "refusing")
            refusing.__wrapped__ = fn
            return refusing
        return UnbuiltNamespace(f"{self._name}(...)", self._what)

    def __repr__(self) -> str:
        return f"pl.{self._name}"


# ---- data types (DataType.md): pyto's six (UINT8 for the compare ops' bit-packed masks), the 8-bit floats of the
# cube (FP8 E4M3FN / E5M2 and HiFloat8: storage and pl.matmul inputs only, pyto/dtypes.py), the rest named -----------
DT_FP16, DT_BF16, DT_FP32, DT_INT8, DT_INT32 = DType.fp16, DType.bf16, DType.fp32, DType.int8, DType.int32
DT_UINT8 = DType.uint8
DT_FP8E4M3FN, DT_FP8E5M2, DT_HF8 = DType.fp8e4m3fn, DType.fp8e5m2, DType.hf8
DT_FP8E8M0 = DType.fp8e8m0          # the MX scale (pl.matmul_mx's scale_a / scale_b; storage only)
DT_FP4E2M1, DT_FP4E1M2 = DType.fp4e2m1, DType.fp4e1m2    # MXFP4's data (pl.matmul_mx; storage only, half a byte)
_UNBUILT_DTYPES = {
    "DT_BOOL": "bool", "DT_INT4": "4-bit int", "DT_INT16": "16-bit int", "DT_INT64": "64-bit int",
    "DT_UINT4": "4-bit unsigned", "DT_UINT16": "16-bit unsigned",
    "DT_UINT32": "32-bit unsigned", "DT_UINT64": "64-bit unsigned", "DT_FP4": "4-bit float",
    "DT_HF4": "HiFloat4"}
globals().update({name: Unbuilt(name, f"the {what} data type") for name, what in _UNBUILT_DTYPES.items()})


# ---- memory spaces (MemorySpace.md) ----------------------------------------------------------------------
class MemorySpace:
    """Where a tile lives: the buffers pyto models (DDR = GM, Vec = UB, Mat = L1, Left = L0A, Right = L0B,
    Acc = L0C, Bias = the bias table BT, Scaling = the fixpipe buffer FB, ScaleLeft / ScaleRight = the MX scale
    domains L0A_MX / L0B_MX paired with L0A / L0B: pl.matmul_mx's E8M0 scales, the 950 only)."""

    DDR = Buf.GM
    Vec = Buf.UB
    Mat = Buf.L1
    Left = Buf.L0A
    Right = Buf.L0B
    Acc = Buf.L0C
    Bias = Buf.BT
    Scaling = Buf.FB
    ScaleLeft = Buf.L0A_MX
    ScaleRight = Buf.L0B_MX
    SparseIndex = Buf.L0B_SP      # pyto's extension: the 4:2 sparse index beside Right (Atlas A2/A3; cube_sparse.py)


L1, L0A, L0B, L0C, UB, BT, FB = Buf.L1, Buf.L0A, Buf.L0B, Buf.L0C, Buf.UB, Buf.BT, Buf.FB


class TensorLayout(str, enum.Enum):
    """A tile's (or GM tensor's) element order (docs/fractal_formats.md §3): ND row-major, DN column-major, NZ / ZN / ZZ / NN the
    fractal formats (the big letter the order of fractals, the small one the order inside a fractal). A str enum:
    it compares equal to its name."""

    ND = "ND"
    DN = "DN"
    NZ = "NZ"
    ZN = "ZN"
    ZZ = "ZZ"
    NN = "NN"

    def __repr__(self) -> str:
        return f"pl.{self.value}"

    __str__ = __repr__


ND, DN, NZ, ZN, ZZ, NN = (TensorLayout[n] for n in ("ND", "DN", "NZ", "ZN", "ZZ", "NN"))

#: PyPTO-Pro's pipes are pyto's: pl.PipeType.MTE2 is the MTE2 pipe.
PipeType = Pipe


# ---- op enums (op_attr_types.h) --------------------------------------------------------------------------
class AtomicType(enum.Enum):
    """pl.store(..., atomic=): overwrite (AtomicNone) or add element-wise into GM (AtomicAdd)."""
    AtomicNone = "AtomicNone"
    AtomicAdd = "AtomicAdd"


class ReluPreMode(enum.Enum):
    """pl.store / pl.move out of L0C with relu_pre_mode=NormalRelu: Fixpipe's ReLU before the conversion."""
    NormalRelu = "NormalRelu"


class CrossCoreSyncMode(enum.IntEnum):
    """set_cross_core / wait_cross_core modes (set_cross_core_wait_cross_core.md): 0 every AIC or every AIV of the
    launch, 1 the two AIVs of a block, 2 the AIC and both its AIVs, 3 the AIC and one AIV."""
    INTER_BLOCK = 0
    INTER_SUBBLOCK = 1
    INTRA_BLOCK = 2
    UNICAST_BLOCK = 3


class SyncCoreType(enum.Enum):
    """Which cores pl.system.sync_all joins."""
    AIV_ONLY = "AIV_ONLY"
    AIC_ONLY = "AIC_ONLY"
    MIX = "MIX"


class SyncAllMode(enum.Enum):
    """pl.system.sync_all's mechanism: HARD (FFTS signals) or SOFT (GM polling through workspaces)."""
    HARD = "HARD"
    SOFT = "SOFT"


class TilePad(enum.IntEnum):
    """A TileType's pad value for pl.fillpad: none, zero, the dtype's max or min."""
    null = 0
    zero = 1
    max = 2
    min = 3


class FillPadMode(enum.Enum):
    NORMAL = "NORMAL"
    EXPAND = "EXPAND"
    INPLACE = "INPLACE"


class RoundMode(enum.Enum):
    """pl.cast rounding modes."""
    CAST_NONE = "CAST_NONE"
    CAST_RINT = "CAST_RINT"
    CAST_ROUND = "CAST_ROUND"
    CAST_FLOOR = "CAST_FLOOR"
    CAST_CEIL = "CAST_CEIL"
    CAST_TRUNC = "CAST_TRUNC"
    CAST_ODD = "CAST_ODD"


class QuantMode(enum.Enum):
    SYM = "SYM"
    ASYM = "ASYM"


__all__ = ["Unbuilt", "DT_FP16", "DT_BF16", "DT_FP32", "DT_INT8", "DT_INT32", "DT_UINT8", "DT_FP8E4M3FN", "DT_FP8E5M2",
           "DT_HF8", "DT_FP8E8M0", "DT_FP4E2M1", "DT_FP4E1M2", *_UNBUILT_DTYPES, "MemorySpace",
           "L1", "L0A", "L0B", "L0C", "UB", "BT", "FB", "TensorLayout", "ND", "DN", "NZ", "ZN", "ZZ", "NN",
           "PipeType", "AccPhase", "STPhase", "AccToVecMode", "AtomicType", "ReluPreMode", "CrossCoreSyncMode",
           "SyncCoreType", "SyncAllMode", "TilePad", "FillPadMode", "RoundMode", "QuantMode"]
