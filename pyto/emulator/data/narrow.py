"""fp32 -> fp16 narrowing for the data path, bit for bit numpy's cast and 2-4x faster.

numpy converts float32 to float16 one element at a time in C (npy_floatbits_to_halfbits: ~6 ns an element on the
2-core machine); Fixpipe's rounding of every fp16 output tile goes through it. `fp16_into` does the same on the
bits in a numba loop: round to nearest even; |x| >= 65520 to inf; below half the smallest subnormal (2^-25) to
a signed zero; NaN keeps the top 10 bits of its significand (0x7c01 if they are all zero), quiet bit not forced,
as numpy's software rule does. tests/test_narrow.py compares it with numpy's cast over every exponent and the
rounding boundaries; `benchmarks/narrow_fp16.py --exhaustive` over all 2^32 float32 bit patterns.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .. import jitmode

COLD_NUMPY = 1 << 20    # while cold (no numba cache, not compiled yet), numpy's cast for this many elements in all


@njit(cache=True)
def _fp16_bits(src, dst):
    """dst[i, j] = the fp16 bits of float32 bits src[i, j] (any strides)."""
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            f = src[i, j]
            sign = (f >> np.uint32(16)) & np.uint32(0x8000)
            a = f & np.uint32(0x7fffffff)
            if a >= np.uint32(0x7f800000):                    # inf, NaN
                h = np.uint32(0x7c00) + ((a & np.uint32(0x007fffff)) >> np.uint32(13))
                if a > np.uint32(0x7f800000) and h == np.uint32(0x7c00):
                    h = np.uint32(0x7c01)                     # a NaN whose payload is below fp16's: still NaN
            elif a >= np.uint32(0x38800000):                  # fp16 normal range (rounding may carry to inf)
                r = a - np.uint32(0x38000000)
                h = (r + np.uint32(0x0fff) + ((r >> np.uint32(13)) & np.uint32(1))) >> np.uint32(13)
                if h > np.uint32(0x7c00):
                    h = np.uint32(0x7c00)
            elif a < np.uint32(0x33000000):                   # below half the smallest subnormal: zero
                h = np.uint32(0)
            else:                                             # an fp16 subnormal
                shift = np.uint32(126) - (a >> np.uint32(23))
                m = (a & np.uint32(0x007fffff)) | np.uint32(0x00800000)
                h = m >> shift
                rem = m & ((np.uint32(1) << shift) - np.uint32(1))
                half = np.uint32(1) << (shift - np.uint32(1))
                if rem > half or (rem == half and (h & np.uint32(1)) == np.uint32(1)):
                    h += np.uint32(1)
            dst[i, j] = np.uint16(sign | h)


def fp16_into(x: np.ndarray, out: np.ndarray) -> None:
    """out[...] = x.astype(float16) for a float32 `x` and a float16 `out` of its shape (either may be a strided
    view), the same bits as numpy's cast."""
    # where jitmode would run the loop as Python (PYTO_NUMBA=0, or cold and little work so far), numpy's cast instead:
    # the same bits, far faster than the loop's Python, and nothing compiles
    if x.ndim != 2 or x.shape != out.shape or jitmode.pick(_fp16_bits, x.size, COLD_NUMPY) is not _fp16_bits:
        with np.errstate(over="ignore", invalid="ignore"):
            out[...] = x.astype(np.float16)
        return
    _fp16_bits(x.view(np.uint32), out.view(np.uint16))


def to_fp16(x: np.ndarray) -> np.ndarray:
    """x.astype(float16) for a float32 `x`, by fp16_into."""
    out = np.empty(x.shape, np.float16)
    fp16_into(x, out)
    return out
