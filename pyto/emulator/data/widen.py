"""Exact widening of cube operands for the data path: fp16 and bf16 -> fp32 by table (numpy's casts from
them convert element by element, ~5x slower), FP8 E4M3FN / E5M2 by their 256-entry tables, HF8's uint8 codes by
pyto.lowp's HiFloat8 table and FP4's one-code-an-element uint8 codes by its E2M1 / E1M2 table (the dtype must be
named: their numpy dtype is uint8), every other dtype by numpy's own cast. Every FP8, HF8 and FP4 value is exact
in fp32 (E4M3 2^-9..448, E5M2 2^-16..57344, HF8 2^-22..2^15, FP4 0.25..6, at most 3 significand bits after the
leading one; NaN and inf stay NaN and inf)."""
from __future__ import annotations

from typing import Optional

import ml_dtypes
import numpy as np
from numba import njit

from ...dtypes import DType
from ...lowp import FP4E1M2, FP4E2M1, HF8

_EVERY = np.arange(1 << 16, dtype=np.uint16)
_EVERY8 = np.arange(1 << 8, dtype=np.uint8)
_TABLES = {np.dtype(np.float16): _EVERY.view(np.float16).astype(np.float32),
           np.dtype(ml_dtypes.bfloat16): _EVERY.view(ml_dtypes.bfloat16).astype(np.float32),
           np.dtype(ml_dtypes.float8_e4m3fn): _EVERY8.view(ml_dtypes.float8_e4m3fn).astype(np.float32),
           np.dtype(ml_dtypes.float8_e5m2): _EVERY8.view(ml_dtypes.float8_e5m2).astype(np.float32)}
#: uint8 codes whose numpy dtype says nothing: the DType names the table (FP4's 16 values are exact in fp32 too)
_CODE_TABLES = {DType.hf8: HF8.table, DType.fp4e2m1: FP4E2M1.table, DType.fp4e1m2: FP4E1M2.table}
_CODE_TABLES32 = {d: t.astype(np.float32) for d, t in _CODE_TABLES.items()}
_BITS = {1: np.uint8, 2: np.uint16}


@njit(cache=True)
def _gather(table, src, dst):
    """dst[i, j] = table[src[i, j]] (any strides)."""
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            dst[i, j] = table[src[i, j]]


def widen_into(x: np.ndarray, out: np.ndarray, dtype: Optional[DType] = None) -> None:
    """out[...] = x, value for value (every fp16, bf16, FP8, HF8 and int8 value is exact in fp32 or float64);
    `out` may be a transposed or strided view. `dtype`: the DType x holds, needed for HF8 (uint8 codes, whose
    numpy dtype says nothing); otherwise x's numpy dtype says it."""
    if dtype in _CODE_TABLES and x.dtype == np.uint8:
        if out.dtype == np.float32:
            _gather(_CODE_TABLES32[dtype], x, out)
        else:
            out[...] = _CODE_TABLES[dtype][x]
        return
    table = _TABLES.get(x.dtype) if out.dtype == np.float32 else None
    if table is None:
        out[...] = x
    else:
        _gather(table, x.view(_BITS[x.dtype.itemsize]), out)


def widen(x: np.ndarray, wide: type, dtype: Optional[DType] = None) -> np.ndarray:
    """`x` as a new array of dtype `wide`, value for value (`dtype` as widen_into's)."""
    out = np.empty(x.shape, wide)
    widen_into(x, out, dtype)
    return out
