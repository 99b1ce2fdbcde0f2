"""Where the first stages of a timing-mode launch go, per instruction, and the floor under them (issue 22).

For each case the same launch is measured four ways (gc paused, as pyto.run pauses it; best of several runs; CPU
time of this process by default, since on a shared machine wall time varies twice over from run to run: --wall
for wall time):

    floor      the kernel's own Python: the same kernel function, block by block, with every pl op replaced by a
               do-nothing stand-in of the same signature (pl.alloc / ring .next() / views return stand-in tiles that
               keep only a shape and a valid shape, which the kernels' control flow reads); no tracer
    trace      pyto's tracer alone (pyto.emulator.run.trace_blocks): no auto-sync, encoding, schedule or checks
    signature  BlockCache.signature of every block's trace (a fresh cache, as a launch has)
    launch     the whole timing-mode launch, pyto.run(..., mode="timing") with checks, launch cache off

`ops` counts the instruction-recording calls the stand-ins saw: equal to `instrs` when the floor ran the kernel's
real control flow. The BMM cases are the launches `pyto_kernels.bmm.bmm` makes (captured at its pyto.run call).

Run: python benchmarks/trace_floor.py [--quick] [--repeat N] [--wall]
"""
from __future__ import annotations

import argparse
import builtins
import contextlib
import importlib
import time

import os as _os, sys as _sys  # noqa: E401 - blas_threads lives beside this script, which may be loaded by path
_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
import blas_threads  # noqa: E402,I001 - first: pins the BLAS thread count before numpy loads

import pyto
import pyto.language as pl
from pyto.chip import load_chip
from pyto.emulator.encode.blockcache import BlockCache
from pyto_kernels.bmm import bmm
from pyto_kernels.examples.matmul_pingpong import matmul_pingpong

_run = importlib.import_module("pyto.emulator.run")     # (pyto.emulator.run is also the function's name)


# ---- the launches ----------------------------------------------------------------------------------------------
class _Captured(Exception):
    """pyto.run's arguments, raised instead of running (how bmm's launch is taken apart)."""

    def __init__(self, kernel, arrays, kw):
        super().__init__("captured")
        self.launch = (kernel, arrays, kw)


def _bmm_launch(shape_a, shape_b, dtype: str, **kw) -> tuple:
    """(kernel, GM arrays, pyto.run keywords) of the launch bmm() makes for these operands (pyto.spec)."""
    real = pyto.run

    def capture(kernel, *arrays, **kwargs):
        raise _Captured(kernel, arrays, kwargs)
    pyto.run = capture
    try:
        bmm(pyto.spec(shape_a, dtype), pyto.spec(shape_b, dtype), report=True, **kw)
    except _Captured as c:
        return c.launch
    finally:
        pyto.run = real
    raise RuntimeError("bmm did not call pyto.run")


def _matmul_launch(M: int, N: int, K: int, blocks: int) -> tuple:
    specs = (pyto.spec((M, K), "fp16"), pyto.spec((K, N), "fp16"), pyto.spec((M, N), "fp16"))
    return matmul_pingpong, specs, dict(blocks=blocks, mode="timing", TM=128, TN=128, TK=64)


CASES = [  # (label, launch builder, in --quick)
    ("matmul 1 block 512x512x2048", lambda: _matmul_launch(512, 512, 2048, 1), True),
    ("matmul 32 blocks 2048^3", lambda: _matmul_launch(2048, 2048, 2048, 32), True),
    ("bmm 32x1024^3 bf16 (asw_basic)", lambda: _bmm_launch((32, 1024, 1024), (32, 1024, 1024), "bf16"), False),
    ("bmm 1x2048^3 bf16 (to_matmul)", lambda: _bmm_launch((1, 2048, 2048), (1, 2048, 2048), "bf16"), False),
    ("bmm 64x256^3 bf16 (iter_batch)", lambda: _bmm_launch((64, 256, 256), (64, 256, 256), "bf16"), False),
]


def _parts(launch: tuple) -> tuple:
    """(kernel, GM tensors, static params, chip, blocks) as pyto.run's compile step makes them."""
    kernel, arrays, kw = launch
    kw = dict(kw)
    chip = load_chip(kw.pop("chip", "ascend950pr"))
    blocks = kw.pop("blocks", 1)
    kw.pop("mode", None)
    arrays, params = kernel.bind(arrays, kw)
    return kernel, _run._gm_tensors(kernel, arrays), _run._check_params(kernel, params), chip, blocks


# ---- the floor: the kernel with do-nothing pl ops ----------------------------------------------------------------
class _Tile:
    """A stand-in tile: a shape and a valid shape (what the kernels' control flow reads), views by slicing."""

    __slots__ = ("shape", "valid")

    def __init__(self, shape: tuple, valid=None):
        self.shape, self.valid = shape, valid

    @property
    def valid_shape(self) -> tuple:
        return self.shape if self.valid is None else self.valid

    def __getitem__(self, idx) -> "_Tile":
        sr, sc = idx
        rows, cols = self.shape
        a0, b0 = sr.start or 0, rows if sr.stop is None else sr.stop
        a1, b1 = sc.start or 0, cols if sc.stop is None else sc.stop
        v = self.valid
        return _Tile((b0 - a0, b1 - a1), None if v is None else (min(b0, v[0]) - a0, min(b1, v[1]) - a1))

    def next(self) -> "_Tile":
        return self

    current = previous = next


class _Group:
    """A stand-in tile group: the ring cursor."""

    def __init__(self, tiles: list):
        self.tiles, self.i = tiles, len(tiles) - 1

    def next(self) -> _Tile:
        self.i = (self.i + 1) % len(self.tiles)
        return self.tiles[self.i]

    def current(self) -> _Tile:
        return self.tiles[self.i]

    def previous(self) -> _Tile:
        return self.tiles[(self.i - 1) % len(self.tiles)]

    def __getitem__(self, i: int) -> _Tile:
        return self.tiles[i]

    def __len__(self) -> int:
        return len(self.tiles)


class _Floor:
    """The stand-ins, installed on pyto.language (and pl.system) for the duration of a `with`."""

    def __init__(self, chip, blocks: int):
        self.chip, self.blocks, self.block, self.ops = chip, blocks, 0, 0

    def _op(self, *args, **kwargs) -> None:          # an op that records one instruction
        self.ops += 1

    @staticmethod
    def _none(*args, **kwargs) -> None:
        return None

    def alloc(self, buffer, shape, dtype, *, layout=None, buffers: int = 1, name=None, pad=None):
        tiles = [_Tile(tuple(shape)) for _ in builtins.range(buffers)]
        return _Group(tiles) if buffers > 1 else tiles[0]

    @staticmethod
    def set_validshape(tile, shape) -> None:
        shape = tuple(shape)
        tile.valid = None if shape == tile.shape else shape

    @contextlib.contextmanager
    def installed(self):
        ops = {name: self._op for name in ("load", "move", "matmul", "matmul_acc", "matmul_mx", "matmul_mx_acc",
                                           "store", "load_tile", "store_tile")}
        ops.update(alloc=self.alloc, set_validshape=self.set_validshape, range=builtins.range,
                   get_block_idx=lambda: self.block, get_block_num=lambda: self.blocks,
                   section_cube=contextlib.nullcontext, section_vector=contextlib.nullcontext,
                   has_dn2nz=lambda: bool(self.chip.dn2nz))
        system = {"set_mm_layout_transform": self._none, "sync_all": self._op}
        saved = [(pl, k, getattr(pl, k)) for k in ops] + [(pl.system, k, getattr(pl.system, k)) for k in system]
        for k, v in ops.items():
            setattr(pl, k, v)
        for k, v in system.items():
            setattr(pl.system, k, v)
        try:
            yield self
        finally:
            for mod, k, v in saved:
                setattr(mod, k, v)


def floor(kernel, tensors: list, params: dict, chip, blocks: int) -> int:
    """Run the kernel's Python for every block under the stand-ins; the recording calls it made."""
    f = _Floor(chip, blocks)
    with f.installed():
        for b in builtins.range(blocks):
            f.block = b
            kernel.fn(*tensors, **params)
    return f.ops


# ---- measuring ---------------------------------------------------------------------------------------------------
CLOCK = time.process_time       # main(wall=True): time.perf_counter


def best_of(fn, n: int) -> float:
    times = []
    for _ in builtins.range(n):
        with _run._gc_paused():
            t = CLOCK()
            fn()
            times.append(CLOCK() - t)
    return min(times)


def measure(launch: tuple, repeat: int) -> dict:
    kernel, tensors, params, chip, blocks = _parts(launch)
    ops = floor(kernel, tensors, params, chip, blocks)
    t_floor = best_of(lambda: floor(kernel, tensors, params, chip, blocks), repeat)
    traced: list = []

    def trace() -> None:
        traced[:] = list(_run.trace_blocks(kernel, tensors, params, chip, blocks))
    t_trace = best_of(trace, repeat)
    n = sum(len(p.instrs) for progs in traced for p in progs)

    def signature() -> None:
        cache = BlockCache()
        for progs in traced:
            cache.signature(progs)
    t_sig = best_of(signature, repeat)
    k, arrays, kw = launch
    with pyto.run_options(cache=False):
        reps: list = []
        t_launch = best_of(lambda: reps.append(pyto.run(k, *arrays, **kw)), repeat)
    assert reps[-1].instructions == n, (reps[-1].instructions, n)
    return dict(n=n, ops=ops, floor=t_floor, trace=t_trace, sig=t_sig, launch=t_launch)


def main(quick: bool = False, repeat: int = 3, wall: bool = False) -> None:
    global CLOCK
    CLOCK = time.perf_counter if wall else time.process_time
    print(blas_threads.describe())
    print(f"clock: {'wall (perf_counter)' if wall else 'CPU time of this process (process_time)'}, best of {repeat}")
    print(f"load: {open('/proc/loadavg').read().split()[:3]}" if _os.path.exists("/proc/loadavg") else "")
    pyto.run(matmul_pingpong, *(pyto.spec(s, "fp16") for s in ((32, 32), (32, 32), (32, 32))), mode="timing",
             TM=32, TN=32, TK=32)      # compile the event loop first
    head = (f"{'case':<32} {'instrs':>7} {'ops':>7} | {'us/instr:':<9} {'floor':>6} {'trace':>6} {'sig':>6} "
            f"{'launch':>6} | {'instr/s:':<8} {'floor':>10} {'trace':>9} {'sig':>9} {'launch':>9} | {'trace/floor':>11}")
    print(head)
    print("-" * len(head))
    for label, build, in_quick in CASES:
        if quick and not in_quick:
            continue
        r = measure(build(), repeat)
        n = r["n"]
        us = {k: r[k] / n * 1e6 for k in ("floor", "trace", "sig", "launch")}
        print(f"{label:<32} {n:>7,} {r['ops']:>7,} | {'':<9} {us['floor']:>6.2f} {us['trace']:>6.2f} "
              f"{us['sig']:>6.2f} {us['launch']:>6.2f} | {'':<8} {n / r['floor']:>10,.0f} {n / r['trace']:>9,.0f} "
              f"{n / r['sig']:>9,.0f} {n / r['launch']:>9,.0f} | {r['trace'] / r['floor']:>10.1f}x")
    print("\nfloor = the kernel's own Python with do-nothing pl ops (no tracer); trace = pyto's tracer alone;")
    print("sig = BlockCache.signature over every block (a launch of one block skips it); launch = the whole")
    print("timing-mode pyto.run with checks, cache off (trace + signature + auto-sync + encode + schedule + checks).")
    print("ops = instruction-recording calls the floor's stand-ins saw (= instrs: the floor ran the real control flow).")
    print("Issue 22's target: >= 1,000,000 instr/s (1 us/instr) for the whole launch on the example matmul,")
    print(">= 600,000 on the BMM kernels.")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the two example-matmul cases only")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs (default 3)")
    ap.add_argument("--wall", action="store_true", help="wall time instead of this process's CPU time")
    args = ap.parse_args()
    main(quick=args.quick, repeat=args.repeat, wall=args.wall)
