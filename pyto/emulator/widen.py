"""Exact widening of cube operands for the data path: fp16 -> fp32 by table (numpy's fp16 cast converts
element by element, ~5x slower), every other dtype by numpy's own cast."""
from __future__ import annotations

import numpy as np
from numba import njit

_FP16_TO_FP32 = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)


@njit(cache=True)
def _gather(table, idx, out):
    for i in range(idx.size):
        out[i] = table[idx[i]]


def widen(x: np.ndarray, wide: type) -> np.ndarray:
    """`x` as a new array of dtype `wide`, value for value (every fp16, bf16 and int8 value is exact in fp32 or
    float64)."""
    if x.dtype == np.float16 and wide is np.float32:
        x = np.ascontiguousarray(x)
        out = np.empty(x.shape, np.float32)
        _gather(_FP16_TO_FP32, x.view(np.uint16).reshape(-1), out.reshape(-1))
        return out
    return x.astype(wide)
