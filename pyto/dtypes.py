"""The data types pyto knows, in the hardware's names, and their numpy counterparts.

The 8-bit floats of the 950's cube (PyPTO-Pro DataType.md: DT_FP8E4M3FN, DT_FP8E5M2, DT_HF8) are storage and
cube-input types only: loads and moves copy their bytes, `pl.matmul` multiplies them into fp32 (cube.py), and
nothing else computes on them (Scalar.md: "存储和张量计算专用类型", no scalar expressions; the vector ops' dtype
sets leave them out). FP8 is stored as ml_dtypes' float8_e4m3fn / float8_e5m2; HF8 (HiFloat8, which ml_dtypes does
not have) as uint8 codes, as pyto.lowp stores it. DT_FP8E8M0 (the MX scale, ml_dtypes' float8_e8m0fnu) is storage
only too, and a cube input only as pl.matmul_mx's scale_a / scale_b (language/cube_mx.py). So a numpy array's dtype
names its DType, except that a uint8 array is DType.uint8 unless something declares it HF8 (a `pl.Tensor[[...], pl.DT_HF8]` annotation or a
`pyto.spec(shape, "hf8")`): `as_dtype(np.uint8)` is DType.uint8.

The 4-bit floats DT_FP4E2M1 and DT_FP4E1M2 (pl.matmul_mx's MXFP4 data) take half a byte: `itemsize` is
Fraction(1, 2) and `bits` 4, and sizes are `nbytes(count)` (a ShapeError for an odd count: two elements share a
byte). On the host an FP4 GM tensor is what PyPTO-Pro's device tests pass (test_matmul_mx.py): a uint8 array of
packed pairs, element 2i in the low nibble and 2i + 1 in the high one along the last axis (pyto.lowp.pack_fp4), so
a logical [M, K] tensor is a [M, K/2] uint8 array, declared FP4 by its annotation (`pl.Tensor[[M, K // 2],
pl.DT_FP4E2M1]`, as matmul_mx.md writes it) or `pyto.spec(shape, "fp4e2m1")`. On chip an FP4 tile holds one
4-bit code per element (uint8 0..15) at packed size (tile.py). Like FP8, FP4 is storage and cube input only.
"""
from __future__ import annotations

import enum
from fractions import Fraction

import ml_dtypes
import numpy as np

from .errors import ShapeError


class DType(enum.Enum):
    """A tile or tensor element type: value = (name, itemsize, numpy dtype)."""

    __hash__ = object.__hash__   # members are singletons: identity hashing (C) for the tracer's and planner's dicts

    fp16 = ("fp16", 2, np.dtype(np.float16))
    bf16 = ("bf16", 2, np.dtype(ml_dtypes.bfloat16))
    fp32 = ("fp32", 4, np.dtype(np.float32))
    int8 = ("int8", 1, np.dtype(np.int8))
    int32 = ("int32", 4, np.dtype(np.int32))
    uint8 = ("uint8", 1, np.dtype(np.uint8))    # the vector compare ops' bit-packed masks (and byte data)
    fp8e4m3fn = ("fp8e4m3fn", 1, np.dtype(ml_dtypes.float8_e4m3fn))   # OCP FP8 E4M3 (finite + NaN)
    fp8e5m2 = ("fp8e5m2", 1, np.dtype(ml_dtypes.float8_e5m2))         # OCP FP8 E5M2
    hf8 = ("hf8", 1, np.dtype(np.uint8))        # HiFloat8: uint8 codes (pyto.lowp.HF8), numpy has no such type
    fp8e8m0 = ("fp8e8m0", 1, np.dtype(ml_dtypes.float8_e8m0fnu))    # OCP MX E8M0 scale: 2^(c-127), 0xFF NaN
    fp4e2m1 = ("fp4e2m1", Fraction(1, 2), np.dtype(np.uint8))   # OCP MX FP4 E2M1: packed pairs in GM, a code a slot
    fp4e1m2 = ("fp4e1m2", Fraction(1, 2), np.dtype(np.uint8))   # Ascend FP4 E1M2 (pyto.lowp.FP4E1M2), likewise

    # itemsize, bits, np, is_float and acc are plain attributes set below: they are read on every traced
    # instruction, and Enum's own `value` property is slow on that path.
    itemsize: "int | Fraction"   # bytes per element: Fraction(1, 2) for the 4-bit floats (sizes: nbytes)
    bits: int
    gm_itemsize: int             # bytes per element of a GM tensor's shape: 1 for FP4 (its shape counts packed pairs)
    np: "np.dtype"
    is_float: bool
    acc: "DType"   # the L0C accumulation type of a cube input: int32 for int8 (and uint8), fp32 otherwise (FP8, HF8)

    def __repr__(self) -> str:
        return f"pl.DT_{self.name.upper()}"

    def nbytes(self, count: int) -> int:
        """Bytes of `count` elements; ShapeError for an odd count of a 4-bit type (half a byte is not addressable)."""
        if self.bits == 4 and count % 2:
            raise ShapeError(f"{count} {self.name} elements are {count / 2:g} bytes: 4-bit elements go two to a byte, "
                             f"so a 4-bit extent must be an even number of elements")
        return count * self.bits // 8

    __str__ = lambda self: self.name  # noqa: E731


for _d in DType:
    _d.itemsize, _d.np = _d.value[1], _d.value[2]
    _d.bits = int(_d.itemsize * 8)
    _d.gm_itemsize = max(1, int(_d.itemsize))
    _d.is_float = _d.value[0] in ("fp16", "bf16", "fp32", "fp8e4m3fn", "fp8e5m2", "hf8", "fp8e8m0", "fp4e2m1",
                                  "fp4e1m2")
for _d in DType:
    _d.acc = DType.int32 if _d in (DType.int8, DType.uint8) else DType.fp32
del _d

#: The 8-bit float types: storage and cube inputs only (module docstring), K0 = 32 like int8 in every fractal. E8M0
#: is one too, but only as pl.matmul_mx's scales (never a cube operand of its own: cube.OPERANDS leaves it out).
LOW_PRECISION = frozenset({DType.fp8e4m3fn, DType.fp8e5m2, DType.hf8, DType.fp8e8m0, DType.fp4e2m1, DType.fp4e1m2})
#: The 4-bit floats (MXFP4's data): half a byte an element, K0 = 64 in every fractal (seeds/004 §2: 16 x 64)
FP4 = frozenset({DType.fp4e2m1, DType.fp4e1m2})

#: The types Fixpipe writes an L0C accumulator out as (a store / move out of L0C converts once).
FIXPIPE_OUT = {DType.fp32: (DType.fp32, DType.fp16, DType.bf16), DType.int32: (DType.int32,)}

_ALIASES = {"u8": "uint8", "float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32",
            "float8_e4m3fn": "fp8e4m3fn", "e4m3": "fp8e4m3fn", "float8_e5m2": "fp8e5m2", "e5m2": "fp8e5m2",
            "hifloat8": "hf8", "float8_e8m0fnu": "fp8e8m0", "e8m0": "fp8e8m0", "float4_e2m1fn": "fp4e2m1",
            "e2m1": "fp4e2m1", "e1m2": "fp4e1m2"}
#: numpy dtype -> DType: uint8 is DType.uint8 (HF8's codes and FP4's packed pairs are uint8 too: only a declaration
#: makes them HF8 or FP4)
_BY_NP = {d.np: d for d in DType if d is not DType.hf8 and d not in FP4}


def stored_as(declared: DType, got: DType) -> bool:
    """Whether an array of dtype `got` holds `declared`'s elements: the same numpy storage (so an HF8 tensor is a
    uint8 array of its codes and an FP4 one a uint8 array of packed pairs, module docstring)."""
    return got is declared or got.np == declared.np


def as_dtype(x: object) -> DType:
    """DType from a DType, a name ('fp16', 'bfloat16', 'hf8', ...), a numpy dtype or an array; ShapeError otherwise.
    A uint8 numpy dtype is DType.uint8 (never hf8: HF8 is named, module docstring)."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        name = _ALIASES.get(x.lower(), x.lower())
        if name in DType.__members__:
            return DType[name]
        raise ShapeError(f"unknown dtype {x!r}; pyto knows {', '.join(DType.__members__)}")
    try:
        npd = np.dtype(x if isinstance(x, (type, np.dtype)) else getattr(x, "dtype", x))
    except TypeError:
        raise ShapeError(f"cannot read a dtype from {x!r}") from None
    d = _BY_NP.get(npd)
    if d is not None:
        return d
    raise ShapeError(f"dtype {npd} is not supported; pyto knows {', '.join(DType.__members__)}")
