"""plan()'s wall time over benchmarks/bmm_planner.py's suite and random held-out shapes: cold (the planner's
memo caches cleared before every call: the tiling search and the cost model run in full) and warm (the same
call again); with --bmm, bmm() of 8 x 512^3 fp16 first and repeated against numpy; and a dump of every choice
(branch, tiling, estimate, alternatives, decision) for comparing two trees (the memoised planner against the
code it replaces).

Run: python benchmarks/planner_speed.py [--held-out N] [--seed S] [--json OUT] [--before BEFORE.json] [--bmm]
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


def _timed(fn) -> tuple[float, float]:
    """(wall s, CPU s) of fn() (a PytoError counts as done: the planner's answer)."""
    w, c = time.perf_counter(), time.process_time()
    try:
        fn()
    except PytoError:
        pass
    return time.perf_counter() - w, time.process_time() - c


def time_plans(shapes: list[tuple]) -> dict:
    """Per shape, wall and CPU seconds: cold (caches cleared first) and warm (the same plan() again, best of 3)."""
    out: dict = {"cold": [], "warm": [], "cold_cpu": [], "warm_cpu": []}
    planner.plan((8, 512, 512), (8, 512, 512), "fp16")       # imports and first-call costs out of the figures
    for _, a, b, dt in shapes:
        clear_caches()
        wall, cpu = _timed(lambda: planner.plan(a, b, dt))
        out["cold"].append(wall)
        out["cold_cpu"].append(cpu)
        wall, cpu = min(_timed(lambda: planner.plan(a, b, dt)) for _ in range(3))
        out["warm"].append(wall)
        out["warm_cpu"].append(cpu)
    return out


def bmm8() -> dict:
    """The issue's case, 8 x 512^3 fp16: cold and warm wall and CPU seconds (medians of 5)."""
    runs: dict = {"cold": [], "warm": [], "cold_cpu": [], "warm_cpu": []}
    for _ in range(5):
        clear_caches()
        for mode in ("cold", "warm"):
            wall, cpu = _timed(lambda: planner.plan((8, 512, 512), (8, 512, 512), "fp16"))
            runs[mode].append(wall)
            runs[mode + "_cpu"].append(cpu)
    return {k: statistics.median(v) for k, v in runs.items()}


def bmm_row() -> list[tuple]:
    """The issue's must-show, bmm() of 8 x 512^3 fp16 with data: (label, wall s, CPU s) of numpy's float32 matmul
    (best of 5), the first bmm() call of that shape in this process (numba's loops already loaded by a small
    bmm, as any session's second bmm finds them) and the same call repeated (best of 3: plan and launch cached)."""
    import numpy as np

    from pyto_kernels.bmm import bmm

    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((8, 512, 512)).astype(np.float16) for _ in range(2))
    a32, b32 = a.astype(np.float32), b.astype(np.float32)

    def best(fn, n: int) -> tuple[float, float]:
        out = []
        for _ in range(n):
            w, c = time.perf_counter(), time.process_time()
            fn()
            out.append((time.perf_counter() - w, time.process_time() - c))
        return min(out)
    bmm(np.ones((2, 64, 64), np.float16), np.ones((2, 64, 64), np.float16))
    ref = best(lambda: a32 @ b32, 5)
    clear_caches()
    first = best(lambda: bmm(a, b), 1)
    again = best(lambda: bmm(a, b), 3)
    return [("numpy float32 a @ b", *ref), ("bmm() first call", *first), ("bmm() repeated", *again)]


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
    if not then:
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
    ap.add_argument("--bmm", action="store_true", help="also bmm() of 8 x 512^3 fp16 against numpy (the must-show)")
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
    for clock, sfx in (("wall", ""), ("CPU", "_cpu")):
        what = f"plan() {clock} time (ms)"
        print(f"{what:<34} {'median':>10} {'total':>10}" if then is None else
              f"{what:<34} {'median was':>10} {'median':>10} {'speedup':>8} {'total was':>10} {'total':>10} "
              f"{'speedup':>8}")
        for part, label in (("suite", f"suite ({n_suite} shapes)"), ("held_out", f"held-out ({args.held_out} shapes)")):
            for mode in ("cold", "warm"):
                print(_row(f"{label}, {mode}", now[part][mode + sfx], then and then[part].get(mode + sfx)))
        for mode in ("cold", "warm"):
            was = then and then["bmm8"].get(mode + sfx)
            print(_row(f"8 x 512^3 fp16, {mode}", [now["bmm8"][mode + sfx]], was and [was]))
    print("cold: the planner's memo caches cleared before the call (the whole search runs); warm: the same call "
          "again (best of 3)")
    if args.bmm:
        rows = bmm_row()
        print(f"\n{'bmm() 8 x 512^3 fp16, with data':<34} {'wall ms':>10} {'x numpy':>8} {'CPU ms':>10} {'x numpy':>8}")
        for label, wall, cpu in rows:
            print(f"{label:<34} {wall * 1e3:>10.1f} {wall / rows[0][1]:>7.1f}x {cpu * 1e3:>10.1f} "
                  f"{cpu / rows[0][2]:>7.1f}x")
        print("targets (issue 22): first call <= 4x numpy, repeated <= 1.5x (wall, numpy with the BLAS threads above)")


if __name__ == "__main__":
    main()
