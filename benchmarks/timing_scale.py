"""Timing mode at BMM scale: a 32-batch bf16 BMM with M = N = K = 4096 per batch (one batch per
block on the 950PR's 32 cores), planned and simulated without data. Prints the planner's branch, the
simulated time, the instruction count, wall time, instructions per second and peak host memory: the
resident set's peak over the resident set before the launch (VmHWM after /proc/self/clear_refs on Linux, else
ru_maxrss's growth), in all and per instruction.

Run: python benchmarks/timing_scale.py [B M N K] [--check] [--quick]
(--check keeps the race and uninitialised-read checks, which keep each block's accesses as integer rows until
the schedule is done (pyto/emulator/check/rows.py); by default they are off for this size:
pyto.run_options(check=False). The launch cache is off: every run traces.)
"""
from __future__ import annotations

import argparse
import resource
import time
from typing import Optional

import os as _os, sys as _sys  # noqa: E401 - blas_threads lives beside this script, which may be loaded by path
_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
import blas_threads  # noqa: E402,I001 - first: pins the BLAS thread count before numpy loads
import pyto
from pyto_kernels.bmm import bmm, plan


def _status(key: str) -> Optional[int]:
    """A /proc/self/status figure in bytes, or None where there is none."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key))
    except (OSError, StopIteration):
        return None


def _peak_from_here() -> tuple:
    """(a function giving the resident peak's growth since this call in bytes, how it is measured)."""
    rss = _status("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")                   # VmHWM from here
    except OSError:
        rss = None
    if rss is not None:
        return (lambda: _status("VmHWM") - rss), "VmHWM over VmRSS before the launch"
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return (lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss0), "ru_maxrss growth"


def main() -> None:
    print(blas_threads.describe())
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sizes", nargs="*", type=int, metavar="B M N K", help="default 32 4096 4096 4096")
    ap.add_argument("--check", action="store_true", help="keep the race checks (every instruction in memory)")
    ap.add_argument("--quick", action="store_true", help="a small 32 x 1024^3 schedule")
    args = ap.parse_args()
    if args.sizes and len(args.sizes) != 4:
        ap.error("give four sizes: B M N K")
    B, M, N, K = args.sizes or ((32, 1024, 1024, 1024) if args.quick else (32, 4096, 4096, 4096))
    check = args.check
    a, b = pyto.spec((B, M, K), "bf16"), pyto.spec((B, K, N), "bf16")
    p = plan(a.shape, b.shape, "bf16", "ascend950pr")
    with pyto.run_options(check=check, cache=False):      # warm-up: imports and numba's cached loops
        bmm(pyto.spec((2, 128, 256), "bf16"), pyto.spec((2, 256, 128), "bf16"), report=True)
    peak, how = _peak_from_here()
    t = time.perf_counter()
    with pyto.run_options(check=check, cache=False):
        _, rep = bmm(a, b, report=True)
    wall = time.perf_counter() - t
    grown = peak()
    print(f"BMM {B} x [{M}x{K}] @ [{K}x{N}] bf16 on ascend950pr: branch {p.branch}")
    print(rep.summary())
    n = rep.instructions
    print("\n| checks | instructions | wall (s) | instr/s | peak host memory | B/instruction |")
    print("|---|---|---|---|---|---|")
    print(f"| {'on' if check else 'off'} | {n:,} | {wall:.1f} | {n / wall:,.0f} | +{grown / 2**20:,.0f} MiB | "
          f"{grown / n:,.0f} |")
    print(f"(peak: {how}; issue 22's target for 32 x 4096^3 with checks: <= 10 s, <= 300 B/instruction)")


if __name__ == "__main__":
    main()
