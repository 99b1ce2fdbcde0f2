"""Where a timing-mode launch's time goes after tracing: appending each block's encoding (Encoder.add), joining
the blocks and replaying the L2 model (Encoder.finish), the event loop with its messages (scheduler.schedule)
and the report (run._report), in CPU microseconds per instruction, next to the whole launch's instructions/s.

Each launch runs once to warm up (numba's loops loaded), then `--runs` times; the best run is shown. CPU time
(time.process_time), not wall time: the 2-core machine is shared, and wall time varies twice over.

Run: python benchmarks/schedule_stages.py [--runs N] [--big]   (--big adds 32 x 4096^3: ~4M instructions, ~1 min)
"""
from __future__ import annotations

import argparse
import importlib
import time

import os as _os, sys as _sys  # noqa: E401 - blas_threads lives beside this script, which may be loaded by path
_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
import blas_threads  # noqa: E402,I001 - first: pins the BLAS thread count before numpy loads
import pyto
from pyto.emulator.encode import encode
from pyto_kernels.bmm import bmm
from pyto_kernels.examples.matmul_pingpong import matmul_pingpong

_run = importlib.import_module("pyto.emulator.run")
STAGES = ("add", "finish", "schedule", "report")
_spent: dict = {}


def _timed(name: str, fn):
    def timed(*args):
        t = time.process_time()
        try:
            return fn(*args)
        finally:
            _spent[name] = _spent.get(name, 0.0) + time.process_time() - t
    return timed


def _hook() -> None:
    encode.Encoder.add = _timed("add", encode.Encoder.add)
    encode.Encoder.finish = _timed("finish", encode.Encoder.finish)
    _run.schedule = _timed("schedule", _run.schedule)
    _run._report = _timed("report", _run._report)


def _bmm(size: int):
    a = pyto.spec((32, size, size), "bf16")
    return lambda: bmm(a, a, report=True)[1]


def _matmul(size: int):
    s = pyto.spec((size, size), "fp16")
    return lambda: pyto.run(matmul_pingpong, s, s, s, mode="timing", blocks=32)


def measure(launch, runs: int) -> tuple:
    """(instructions, wall s, CPU s, {stage: CPU s}) of the best of `runs` launches (by CPU time)."""
    best = None
    for _ in range(runs):
        _spent.clear()
        w, c = time.perf_counter(), time.process_time()
        with pyto.run_options(cache=False):
            rep = launch()
        got = (rep.instructions, time.perf_counter() - w, time.process_time() - c, dict(_spent))
        if best is None or got[2] < best[2]:
            best = got
    return best


def main() -> None:
    print(blas_threads.describe())
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--big", action="store_true", help="also 32 x bf16 4096^3 (one run)")
    args = ap.parse_args()
    _hook()
    cases = [("example matmul, 32 blocks fp16 2048^3", _matmul(2048), args.runs),
             ("BMM 32 x bf16 1024^3", _bmm(1024), args.runs), ("BMM 32 x bf16 2048^3", _bmm(2048), args.runs)]
    if args.big:
        cases.append(("BMM 32 x bf16 4096^3 (checks on)", _bmm(4096), 1))
    _bmm(256)(), _matmul(512)()       # numba's loops loaded (or compiled) before anything is timed
    head = f"{'launch':40s} {'instructions':>12s} {'instr/s CPU':>12s} {'wall':>8s}  " + \
        "  ".join(f"{s + ' us/i':>13s}" for s in STAGES) + "  share"
    print(head)
    print("-" * len(head))
    for name, launch, runs in cases:
        n, wall, cpu, spent = measure(launch, runs)
        stages = "  ".join(f"{spent.get(s, 0.0) / n * 1e6:13.3f}" for s in STAGES)
        share = sum(spent.values()) / cpu
        print(f"{name:40s} {n:12,d} {n / cpu:12,.0f} {wall:7.2f}s  {stages}  {share:5.1%}", flush=True)
    print("share: the four stages' part of the launch's CPU time (the rest: tracing, auto-sync, encoding, checks)")


if __name__ == "__main__":
    main()
