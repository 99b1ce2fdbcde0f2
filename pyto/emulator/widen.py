"""Exact widening of cube operands for the data path: fp16 and bf16 -> fp32 by table (numpy's casts from
them convert element by element, ~5x slower), every other dtype by numpy's own cast."""
from __future__ import annotations

import ml_dtypes
import numpy as np
from numba import njit

_EVERY = np.arange(1 << 16, dtype=np.uint16)
_TABLES = {np.dtype(np.float16): _EVERY.view(np.float16).astype(np.float32),
           np.dtype(ml_dtypes.bfloat16): _EVERY.view(ml_dtypes.bfloat16).astype(np.float32)}


@njit(cache=True)
def _gather(table, src, dst):
    """dst[i, j] = table[src[i, j]] (any strides)."""
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            dst[i, j] = table[src[i, j]]


def widen_into(x: np.ndarray, out: np.ndarray) -> None:
    """out[...] = x, value for value (every fp16, bf16 and int8 value is exact in fp32 or float64); `out`
    may be a transposed or strided view."""
    table = _TABLES.get(x.dtype) if out.dtype == np.float32 else None
    if table is None:
        out[...] = x
    else:
        _gather(table, x.view(np.uint16), out)


def widen(x: np.ndarray, wide: type) -> np.ndarray:
    """`x` as a new array of dtype `wide`, value for value."""
    out = np.empty(x.shape, wide)
    widen_into(x, out)
    return out
