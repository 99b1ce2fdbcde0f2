"""Timing mode at BMM scale: a 32-batch bf16 BMM with M = N = K = 4096 per batch (one batch per
block on the 950PR's 32 cores), planned and simulated without data. Prints the planner's branch, the
simulated time, the instruction count, wall time, instructions per second and peak memory.

Run: python benchmarks/timing_scale.py [B M N K] [--check] [--quick]
(--check keeps the race checks, which hold every instruction in memory; by default they are off for
this size: pyto.run_options(check=False).)
"""
from __future__ import annotations

import argparse
import resource
import time

import os as _os, sys as _sys  # noqa: E401 - blas_threads lives beside this script, which may be loaded by path
_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
import blas_threads  # noqa: E402,I001 - first: pins the BLAS thread count before numpy loads
import pyto
from pyto_kernels.bmm import bmm, plan


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
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    with pyto.run_options(check=check):
        _, rep = bmm(a, b, report=True)
    wall = time.perf_counter() - t
    rss = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
    print(f"BMM {B} x [{M}x{K}] @ [{K}x{N}] bf16 on ascend950pr: branch {p.branch}")
    print(rep.summary())
    print(f"\nwall {wall:.1f} s for {rep.instructions:,} instructions = {rep.instructions / wall:,.0f} instr/s; "
          f"peak memory +{rss:,.0f} MB ({rss * 2**20 / rep.instructions:,.0f} B/instruction); race checks "
          f"{'on' if check else 'off'}")
    print("target: under 60 s on this 2-core machine (for 32 x 4096^3)")


if __name__ == "__main__":
    main()
