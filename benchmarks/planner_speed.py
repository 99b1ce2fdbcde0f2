"""plan()'s wall time over benchmarks/bmm_planner.py's suite and random held-out shapes: cold (the planner's
memo caches cleared before every call: the tiling search and the cost model run in full) and warm (the same
call again); and a dump of every choice (branch, tiling, estimate, alternatives, decision) for comparing two
trees (the memoised planner against the code it replaces).

Run: python benchmarks/planner_speed.py [--held-out N] [--seed S] [--json OUT] [--before BEFORE.json]
     python benchmarks/planner_speed.py --choices OUT.json [--random N]     # dump the choices
     python benchmarks/planner_speed.py --same A.json B.json                # compare two dumps
The "before" figures come from running this script on the old tree (PYTHONPATH pointing at a copy of it).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import time

import os as _os, sys as _sys  # noqa: E401 - blas_threads lives beside this script, which may be loaded by path
_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
import blas_threads  # noqa: E402,I001 - first: pins the BLAS thread count before numpy loads
from bmm_planner import held_out, suite  # noqa: E402

from pyto.errors import PytoError  # noqa: E402
from pyto_kernels.bmm import planner  # noqa: E402


def clear_caches() -> None:
    """Empty every memo the planner keeps (the old tree has _BUILT only; the new one pyto_kernels.bmm.memo too)."""
    built = getattr(planner, "_BUILT", None)
    if built is not None:
        built.clear()
    try:
        from pyto_kernels.bmm import memo
    except ImportError:
        return
    memo.clear()


def cases(n_held: int, seed: int) -> list[tuple]:
    """(label, a_shape, b_shape, dtype) of the suite and n_held held-out shapes."""
    return [c for c in suite(False)] + held_out(n_held, seed)


def time_plans(shapes: list[tuple]) -> dict:
    """Per shape: cold seconds (caches cleared first) and warm seconds (the same plan() again, best of 3)."""
    cold, warm = [], []
    planner.plan((8, 512, 512), (8, 512, 512), "fp16")       # imports and first-call costs out of the figures
    for _, a, b, dt in shapes:
        clear_caches()
        t = time.perf_counter()
        try:
            planner.plan(a, b, dt)
        except PytoError:
            pass
        cold.append(time.perf_counter() - t)
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            try:
                planner.plan(a, b, dt)
            except PytoError:
                pass
            best = min(best, time.perf_counter() - t)
        warm.append(best)
    return {"cold": cold, "warm": warm}


def bmm8() -> dict:
    """The issue's case, 8 x 512^3 fp16: cold and warm seconds (median of 5)."""
    cold, warm = [], []
    for _ in range(5):
        clear_caches()
        t = time.perf_counter()
        planner.plan((8, 512, 512), (8, 512, 512), "fp16")
        cold.append(time.perf_counter() - t)
        t = time.perf_counter()
        planner.plan((8, 512, 512), (8, 512, 512), "fp16")
        warm.append(time.perf_counter() - t)
    return {"cold": statistics.median(cold), "warm": statistics.median(warm)}


def random_problems(n: int, seed: int) -> list[tuple]:
    """n random problems over every kind the planner meets: plain BMMs, broadcast sides (A or B batch 1, cross
    broadcasts), plain matmuls, K from 0 to 64K, every dtype, a bias (of each kind), transposes."""
    rng = random.Random(seed)
    dim = lambda lo, hi: int(round(2 ** rng.uniform(lo, hi)))  # noqa: E731 - log-uniform sizes
    out = []
    for _ in range(n):
        kind = rng.choice(["bmm", "bmm", "b1", "a1", "cross", "matmul"])
        B, M, N = dim(0, 9), dim(0, 11), dim(0, 11)
        K = rng.choice([0, 1] + [dim(0, 16), dim(4, 12), dim(4, 12), dim(8, 16)] * 2)
        if kind == "matmul":
            a, b = (M, K), (K, N)
        elif kind == "b1":
            a, b = (B, M, K), (K, N)
        elif kind == "a1":
            a, b = (M, K), (B, K, N)
        elif kind == "cross":
            a, b = (B, 1, M, K), (1, rng.choice([2, 3]), K, N)
        else:
            a, b = (B, M, K), (B, K, N)
        ta, tb = rng.random() < 0.2, rng.random() < 0.2
        if ta:
            a = a[:-2] + (a[-1], a[-2])
        if tb:
            b = b[:-2] + (b[-1], b[-2])
        bias = rng.choice([False, False, True, (N,), (B, 1, N)])
        out.append((f"random {kind}", a, b, rng.choice(["fp16", "bf16", "fp32", "int8"]), bias, ta, tb))
    return out


def _plain(x):
    """JSON-able, exact: floats as repr (every bit), dataclasses as dicts."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: _plain(getattr(x, f.name)) for f in dataclasses.fields(x)
                if f.name not in ("chip_spec", "tuning")}
    if isinstance(x, float):
        return repr(x)
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if hasattr(x, "name") and not isinstance(x, str):     # DType
        return x.name
    return x


def choices(problems: list[tuple]) -> list:
    """Every plan as exact JSON (or the error it raises), caches cleared before each."""
    out = []
    for label, a, b, dt, *rest in problems:
        bias, ta, tb = rest if rest else (False, False, False)
        clear_caches()
        try:
            p = planner.plan(a, b, dt, bias=bias, transpose_a=ta, transpose_b=tb)
            out.append([label, a, b, dt, _plain(bias), ta, tb, _plain(p)])
        except PytoError as e:
            out.append([label, a, b, dt, _plain(bias), ta, tb, f"{type(e).__name__}: {e}"])
    return out


def same(path_a: str, path_b: str) -> int:
    """Compare two choice dumps entry by entry; print the differences; the number of differing entries."""
    with open(path_a) as f:
        xs = json.load(f)
    with open(path_b) as f:
        ys = json.load(f)
    if len(xs) != len(ys):
        print(f"{len(xs)} entries vs {len(ys)}")
        return max(len(xs), len(ys))
    bad = 0
    for x, y in zip(xs, ys):
        for p, q in ((x[7], y[7]), (y[7], x[7])):   # a Problem field one tree added, at its default, is no change
            if isinstance(p, dict) and isinstance(q, dict):
                for k in set(p["problem"]) - set(q["problem"]):
                    if p["problem"][k] in (None, False):
                        del p["problem"][k]
        if x != y:
            bad += 1
            if bad <= 10:
                print(f"differs: {x[:7]}")
                if isinstance(x[7], dict) and isinstance(y[7], dict):
                    for k in x[7]:
                        if x[7][k] != y[7].get(k):
                            print(f"   {k}: {str(x[7][k])[:200]}\n   {' ' * len(k)}  {str(y[7].get(k))[:200]}")
                else:
                    print(f"   {str(x[7])[:200]}\n   {str(y[7])[:200]}")
    plans = sum(isinstance(x[7], dict) for x in xs)
    print(f"{len(xs)} problems ({plans} plans, {len(xs) - plans} errors): {len(xs) - bad} identical, {bad} differ")
    return bad


def _row(label: str, now: list, then: list | None) -> str:
    med, tot = statistics.median(now) * 1e3, sum(now) * 1e3
    if then is None:
        return f"{label:<34} {med:>10.2f} {tot:>10.0f}"
    mb, tb = statistics.median(then) * 1e3, sum(then) * 1e3
    return f"{label:<34} {mb:>10.2f} {med:>10.2f} {mb / med:>7.1f}x {tb:>10.0f} {tot:>10.0f} {tb / tot:>7.1f}x"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--held-out", type=int, default=100)
    ap.add_argument("--seed", type=int, default=7, help="the held-out shapes' seed (bmm_planner.held_out)")
    ap.add_argument("--json", help="write the timings here (to give as --before on another tree)")
    ap.add_argument("--before", help="timings of the old tree (its --json): a before/after table")
    ap.add_argument("--choices", help="write every plan's choices here instead of timing")
    ap.add_argument("--random", type=int, default=200, help="random problems in --choices (with the suite)")
    ap.add_argument("--same", nargs=2, metavar=("A", "B"), help="compare two --choices dumps")
    args = ap.parse_args()
    if args.same:
        raise SystemExit(1 if same(*args.same) else 0)
    if args.choices:
        probs = cases(0, args.seed) + random_problems(args.random, args.seed)
        with open(args.choices, "w") as f:
            json.dump(choices(probs), f)
        print(f"{len(probs)} problems' choices -> {args.choices}")
        return
    print(blas_threads.describe())
    shapes = cases(args.held_out, args.seed)
    n_suite = len(suite(False))
    times = time_plans(shapes)
    now = {"suite": {k: v[:n_suite] for k, v in times.items()},
           "held_out": {k: v[n_suite:] for k, v in times.items()}, "bmm8": bmm8()}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(now, f)
    then = None
    if args.before:
        with open(args.before) as f:
            then = json.load(f)
    head = (f"{'plan() wall time (ms)':<34} {'median':>10} {'total':>10}" if then is None else
            f"{'plan() wall time (ms)':<34} {'median was':>10} {'median':>10} {'speedup':>8} {'total was':>10} "
            f"{'total':>10} {'speedup':>8}")
    print(head)
    for part, label in (("suite", f"suite ({n_suite} shapes)"), ("held_out", f"held-out ({args.held_out} shapes)")):
        for mode in ("cold", "warm"):
            print(_row(f"{label}, {mode}", now[part][mode], then and then[part][mode]))
    for mode in ("cold", "warm"):
        print(_row(f"8 x 512^3 fp16, {mode}", [now["bmm8"][mode]], then and [then["bmm8"][mode]]))
    print("cold: the planner's memo caches cleared before the call (the whole search runs); warm: the same call "
          "again (best of 3)")


if __name__ == "__main__":
    main()
