"""Emulator speed: full mode vs numpy's float32 matmul on the same shapes (same run), first launch
(pyto.run: trace, sync, schedule, checks and data; measured with the launch cache off), the same pyto.run again
(the launch cache's: the data pass alone), a compiled launch called again on new inputs (pyto.compile: the data
pass alone); and instructions per second in timing mode (cache off).

Run: python benchmarks/emulator_speed.py [--quick]
"""
from __future__ import annotations

import argparse

import os as _os, sys as _sys  # noqa: E401 - blas_threads lives beside this script, which may be loaded by path
_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
import blas_threads  # noqa: E402,I001 - first: pins the BLAS thread count before numpy loads
from timer import best_of  # noqa: E402
import numpy as np

import pyto
from pyto_kernels.examples.matmul_pingpong import matmul_pingpong

CASES = [  # (label, M, N, K, blocks, TM, TN, TK)
    ("1 block 512x512x2048", 512, 512, 2048, 1, 128, 128, 64),
    ("1 block 512x512x2048, 128x256x64", 512, 512, 2048, 1, 128, 256, 64),
    ("32 blocks 2048^3", 2048, 2048, 2048, 32, 128, 128, 64),
    ("32 blocks 2048^3, 128x256x64", 2048, 2048, 2048, 32, 128, 256, 64),
]


def main(quick: bool = False) -> None:
    print(blas_threads.describe())
    rng = np.random.default_rng(0)
    pyto.run(matmul_pingpong, np.ones((32, 32), np.float16), np.ones((32, 32), np.float16),
             np.zeros((32, 32), np.float16), TM=32, TN=32, TK=32)  # compile the event loop first
    print(f"{'case':<38} {'instrs':>8} {'numpy s':>9} {'run s':>8} {'ratio':>7} {'again s':>8} {'ratio':>7} "
          f"{'call s':>8} {'ratio':>7} "
          f"{'timing s':>9} {'instr/s':>9} {'unchecked s':>12} {'instr/s':>9}")
    for label, M, N, K, blocks, tm, tn, tk in CASES[:2] if quick else CASES:
        a = rng.standard_normal((M, K)).astype(np.float16)
        b = rng.standard_normal((K, N)).astype(np.float16)
        out = np.zeros((M, N), np.float16)
        a32, b32 = a.astype(np.float32), b.astype(np.float32)
        kw = dict(blocks=blocks, TM=tm, TN=tn, TK=tk)
        with pyto.run_options(cache=False):
            emu = best_of(lambda: pyto.run(matmul_pingpong, a, b, out, **kw), 1 if blocks > 1 else 3)
        pyto.run(matmul_pingpong, a, b, out, **kw)                 # into the launch cache
        again = best_of(lambda: pyto.run(matmul_pingpong, a, b, out, **kw))
        compiled = pyto.compile(matmul_pingpong, a, b, out, **kw)
        call = best_of(lambda: compiled(a, b, out))
        ref = best_of(lambda: a32 @ b32, 5)
        specs = (pyto.spec(a.shape, "fp16"), pyto.spec(b.shape, "fp16"), pyto.spec(out.shape, "fp16"))
        reps = []
        with pyto.run_options(cache=False):
            tim = best_of(lambda: reps.append(pyto.run(matmul_pingpong, *specs, mode="timing", **kw)))
        with pyto.run_options(check=False, cache=False):
            fast = best_of(lambda: pyto.run(matmul_pingpong, *specs, mode="timing", **kw))
        n = reps[-1].instructions
        print(f"{label:<38} {n:>8,} {ref:>9.4f} {emu:>8.3f} {emu / ref:>6.1f}x {again:>8.3f} {again / ref:>6.1f}x "
              f"{call:>8.3f} {call / ref:>6.1f}x "
              f"{tim:>9.3f} {n / tim:>9,.0f} {fast:>12.3f} {n / fast:>9,.0f}")
    print("\nrun = pyto.run in full mode, everything (trace, auto-sync, schedule, race checks, data);")
    print("again = the same pyto.run repeated: the launch cache's checked launch, its data pass alone;")
    print("call = a pyto.compile'd launch computing new inputs of the same shapes (the data pass alone);")
    print("ratio = that wall time / numpy float32 matmul wall time on the same shapes (issue 22: <= 3x for a first launch);")
    print("instr/s = timing-mode instructions per second, tracing and race checks included (issue 22: >= 1,000,000);")
    print("unchecked = the same with pyto.run_options(check=False): no race or uninitialised-read checks.")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the two 1-block cases only")
    main(quick=ap.parse_args().quick)
