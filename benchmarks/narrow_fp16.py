"""fp32 -> fp16 narrowing (Fixpipe's rounding of fp16 outputs in full mode): numpy's cast against pyto's compiled
loop (pyto/emulator/data/narrow.py) on 2M elements, wall time best of 7; `--exhaustive` also compares the two on
all 2^32 float32 bit patterns (about a minute) and prints how many differ (0: the loop is numpy's cast).

Run: python benchmarks/narrow_fp16.py [--exhaustive]
"""
from __future__ import annotations

import argparse
import time

import os as _os, sys as _sys  # noqa: E401 - blas_threads lives beside this script, which may be loaded by path
_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
import blas_threads  # noqa: E402,I001 - first: pins the BLAS thread count before numpy loads
from timer import best_of  # noqa: E402
import numpy as np

from pyto.emulator.data import narrow


def exhaustive(chunk: int = 1 << 26) -> int:
    """How many of the 2^32 float32 bit patterns the loop narrows to other bits than numpy's cast."""
    bad = 0
    got = np.empty((1, chunk), np.uint16)
    with np.errstate(over="ignore"):
        for start in range(0, 1 << 32, chunk):
            bits = np.arange(start, start + chunk, dtype=np.uint64).astype(np.uint32).reshape(1, -1)
            narrow._fp16_bits(bits, got)
            bad += int(np.count_nonzero(got != bits.view(np.float32).astype(np.float16).view(np.uint16)))
    return bad


def main(full: bool) -> None:
    print(blas_threads.describe())
    x = np.random.default_rng(0).standard_normal((2048, 1024)).astype(np.float32)
    out = np.empty(x.shape, np.float16)
    narrow.fp16_into(x, out)              # compiled (or loaded from numba's cache) before timing
    cast = best_of(lambda: np.copyto(out, x), 7)
    loop = best_of(lambda: narrow._fp16_bits(x.view(np.uint32), out.view(np.uint16)), 7)
    print(f"{'2M fp32 -> fp16':<20} numpy cast {cast * 1e3:7.2f} ms   pyto loop {loop * 1e3:7.2f} ms   "
          f"{cast / loop:5.1f}x faster")
    if full:
        t = time.perf_counter()
        bad = exhaustive()
        print(f"all 2^32 float32 bit patterns: {bad} differ from numpy's cast ({time.perf_counter() - t:.0f} s)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--exhaustive", action="store_true", help="compare on all 2^32 float32 bit patterns")
    main(ap.parse_args().exhaustive)
