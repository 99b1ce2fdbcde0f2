"""Planner quality and branch efficiency on a suite of BMM shapes (timing mode on the emulated 950PR).

For every shape: the planner's plan simulated as planned, every legal branch forced and simulated, the best one; then
the agreement rate, the median and worst regret (planner's simulated time / best - 1), the planner's
estimate against the simulated time of its branch, and each
branch's simulated time as a fraction of the roofline max(FLOPs / peak, compulsory bytes / GM BW).
Targets (issue 7): agreement >= 90 %, median regret <= 5 %, home-ground branches >= 80 % of roofline
where the shape allows: where the roofline is at least ALLOWS = 4 times the latency no kernel hides (a first
GM read and a last GM write), since time >= roofline + that latency.

With --fitted FILE (a `pyto calibrate` output; "package": the package's file for the chip) every shape is also planned
with those fitted constants (pyto_kernels.bmm.fitted) and that plan simulated: the agreement and regret before
(today's constants, no file) and after calibration, side by side, and the shapes whose choice the file changes.
Fit the file on a sweep of other shapes (another seed) than the --held-out ones it is judged on.

Run: python benchmarks/bmm_planner.py [--quick] [--chip NAME] [--held-out N [--seed S] [--tune]] [--fitted FILE]
     python benchmarks/bmm_planner.py --held-out N --seed S --spec-out SPEC.csv   (the shapes as a pyto sweep spec)
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from typing import Optional

import os as _os, sys as _sys  # noqa: E401 - blas_threads lives beside this script, which may be loaded by path
_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
import blas_threads  # noqa: E402,I001 - first: pins the BLAS thread count before numpy loads
import pyto
from pyto_kernels.bmm import bmm, fitted, legal_branches, plan, run_plan


# A kernel's time is at least its roofline plus the latency it cannot hide (first read, last write): it
# can reach 80% of roofline only where the roofline is at least 4x that latency.
ALLOWS = 4


def suite(quick: bool) -> list:
    """(label, a_shape, b_shape, dtype): home grounds of every branch and their edges."""
    s = []
    for B, M, N, K in [(8, 64, 64, 0), (4, 100, 30, 0), (256, 32, 32, 1), (512, 16, 48, 1), (200, 64, 64, 1)]:
        s.append(("special", (B, M, K), (B, K, N), "fp16"))
    for B, M, N, K in [(16, 256, 256, 512), (64, 64, 128, 256), (8, 512, 512, 256), (32, 100, 200, 300)]:
        s.append(("to_matmul B=1", (B, M, K), (K, N), "bf16"))
        s.append(("to_matmul A=1", (M, K), (B, K, N), "bf16"))
    for B, M, N, K in [(256, 32, 32, 256), (512, 16, 16, 512), (128, 32, 48, 128), (1024, 16, 32, 64),
                       (256, 48, 48, 512), (320, 32, 32, 1024), (640, 16, 16, 256), (128, 64, 32, 512)]:
        s.append(("merge_batch", (B, M, K), (B, K, N), "bf16"))
    for B, M, N, K in [(32, 256, 256, 512), (64, 128, 256, 256), (32, 512, 512, 512), (96, 256, 128, 384),
                       (64, 200, 300, 256), (32, 384, 384, 1024), (128, 128, 128, 512), (32, 1024, 1024, 256)]:
        s.append(("iter_batch", (B, M, K), (B, K, N), "bf16"))
    for B, M, N, K in [(1, 2048, 2048, 1024), (2, 1024, 1024, 1024), (4, 512, 1024, 512), (1, 1000, 3000, 512),
                       (8, 512, 512, 1024), (3, 768, 768, 768), (1, 4096, 1024, 256), (2, 2048, 512, 2048)]:
        s.append(("asw_basic", (B, M, K), (B, K, N), "bf16"))
    for B, M, N, K in [(2, 1, 64, 2048), (4, 256, 16, 1024)]:
        s.append(("asw_basic cross", (B, 1, M, K), (1, 2, K, N), "bf16"))
    for B, M, N, K in [(1, 64, 64, 8192), (1, 32, 64, 32768), (2, 32, 32, 16384), (1, 16, 16, 131072),
                       (1, 48, 80, 12000), (1, 64, 32, 30000), (3, 32, 32, 8192), (1, 16, 64, 65536)]:
        s.append(("stream_k", (B, M, K), (B, K, N), "bf16"))
    for B, M, N, K in [(64, 128, 128, 128), (16, 512, 256, 512), (2, 128, 128, 4096), (1, 128, 128, 8192)]:
        s.append(("edges", (B, M, K), (B, K, N), "fp16"))
    for B, M, N, K in [(64, 64, 64, 256), (8, 1024, 512, 512)]:
        s.append(("int8", (B, M, K), (B, K, N), "int8"))
        s.append(("fp32", (B, M, K), (B, K, N), "fp32"))
    # the L1 cases and edges the lists above miss: ToMatmul fold_n (A too big for L1), IterBatch (c) and (d),
    # MergeBatch in fp16, StreamK grid_K = 4 and 8, ragged ASW tiles, a larger K = 0 fill
    s += [("to_matmul fold_n", (1024, 2048), (8, 2048, 256), "bf16"),
          ("iter_batch c", (32, 64, 2048), (32, 2048, 256), "bf16"),
          ("iter_batch d", (64, 128, 528), (64, 528, 128), "bf16"),
          ("merge_batch", (1024, 32, 512), (1024, 512, 32), "fp16"),
          ("stream_k g4", (2, 32, 30000), (2, 30000, 32), "fp16"),
          ("stream_k g8", (2, 16, 120000), (2, 120000, 16), "fp16"),
          ("asw_basic", (4, 1000, 1000), (4, 1000, 1000), "bf16"),
          ("special", (64, 256, 0), (64, 0, 256), "fp16")]
    return s[::4] if quick else s


def simulate(a_shape, b_shape, dtype, chip, branch):
    a, b = pyto.spec(a_shape, dtype), pyto.spec(b_shape, dtype)
    _, rep = bmm(a, b, chip=chip, branch=branch, report=True)
    return rep


def roofline_cycles(a_shape, b_shape, dtype, chip) -> float:
    p = plan(a_shape, b_shape, dtype, chip).problem
    c = pyto.load_chip(chip)
    isz = pyto.dtypes.as_dtype(dtype).itemsize
    osz = 4 if dtype == "int8" else isz
    flops = 2.0 * p.batch * p.M * p.N * p.K
    compulsory = (p.batch_a * p.M * p.K + p.batch_b * p.K * p.N) * isz + p.batch * p.M * p.N * osz
    return max(flops / (c.peak_flops(dtype) / c.clock_hz), compulsory / c.gm_bytes_per_cycle)


def latency_floor_cycles(chip) -> float:
    """The latency no kernel hides: its first GM read must land before any compute, its last GM write
    lands after all of it (the fastest read and write paths of the chip; a read misses L2, a write lands
    in it)."""
    c = pyto.load_chip(chip)
    read = min(c.path("GM", dst).latency for dst in ("L1", "UB") if c.has_path("GM", dst))
    write = min(c.path(src, "GM").latency for src in ("L0C", "UB") if c.has_path(src, "GM"))
    return read + write + 2 * c.dma_setup_cycles + c.gm_latency_cycles + c.l2_write_latency_cycles


def held_out(n: int, seed: int) -> list:
    """n random shapes (fixed seed) the planner was not tuned on: plain, B-broadcast and A-broadcast BMMs with
    B >= 32 (where ToMatmul, MergeBatch, IterBatch and ASW_Basic overlap), bf16."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        kind = rng.choice(["bmm", "bmm", "b1", "a1"])
        B, M = rng.choice([32, 48, 64, 96, 128]), rng.choice([48, 64, 100, 128, 200, 256, 384, 512])
        N, K = rng.choice([48, 64, 128, 200, 256, 384, 512]), rng.choice([128, 256, 300, 512, 768, 1024])
        a, b = {"bmm": ((B, M, K), (B, K, N)), "b1": ((B, M, K), (K, N)), "a1": ((M, K), (B, K, N))}[kind]
        out.append((f"held-out {kind}", a, b, "bf16"))
    return out


def write_spec(cases: list, chip: str, path: str) -> None:
    """The shapes as a `pyto sweep` CSV spec (one case a row; a batch-1 side as broadcast a/b), to fit the planner's
    constants on shapes this benchmark draws (pyto sweep SPEC -o OUT, then pyto calibrate OUT)."""
    import csv
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["B", "M", "N", "K", "dtype", "chip", "broadcast"])
        for _, a, b, dtype in cases:
            if len(a) == 2:                 # A has batch 1
                (M, K), (B, _, N), bc = a, b, "a"
            elif len(b) == 2:
                (B, M, K), (_, N), bc = a, b, "b"
            else:
                (B, M, K), (_, _, N), bc = a, b, "none"
            w.writerow([B, M, N, K, dtype, chip, bc])


def tuned(a_shape, b_shape, dtype, chip) -> tuple:
    """(simulated cycles of plan(tune=True)'s plan, the tune's wall seconds), tuned afresh (an empty cache dir)."""
    before = os.environ.get("PYTO_CACHE_DIR")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["PYTO_CACHE_DIR"] = cache
        try:
            t = time.perf_counter()
            p = plan(a_shape, b_shape, dtype, chip, tune=True)
            wall = time.perf_counter() - t
        finally:
            if before is None:
                del os.environ["PYTO_CACHE_DIR"]
            else:
                os.environ["PYTO_CACHE_DIR"] = before
    return run_plan(p, pyto.spec(a_shape, dtype), pyto.spec(b_shape, dtype))[1].cycles, wall


def evaluate(cases: list, chip: str, floor: float, tune: Optional[list] = None, fit: Optional[fitted.Fitted] = None,
             after: Optional[list] = None) -> tuple:
    """Print a row per shape; return (regrets, agreements, roofline shares per branch, |estimate errors|): the planner
    with today's constants (no fitted file). `tune`: a list to append (tuned plan's regret against the best of this
    benchmark's runs, tune wall s) to. `fit`: fitted constants to plan with as well, appending (regret, agreed,
    branch today, branch fitted, label) to `after`."""
    regrets, agree, eff, est_err = [], 0, {}, []
    print(f"{'label':<18} {'A':<18} {'B':<18} {'dt':<5} {'planner':<12} {'best':<12} {'regret':>7}  "
          f"{'% roofline (planner)':>8}  {'est err':>7}  times per branch (us)")
    for label, a_shape, b_shape, dtype in cases:
        with fitted.using(fitted.Fitted(pyto.load_chip(chip).name)):     # today's constants
            planned = plan(a_shape, b_shape, dtype, chip)
        chosen = planned.branch
        times = {}
        for br in legal_branches(a_shape, b_shape, dtype, chip):
            try:
                times[br] = simulate(a_shape, b_shape, dtype, chip, br).cycles
            except pyto.PytoError as e:
                times[br] = None
                print(f"    {br} failed on {a_shape} @ {b_shape}: {type(e).__name__}: {str(e)[:120]}")
        ok = {k: v for k, v in times.items() if v is not None}
        # the planner's own plan: its branch with its tiling (which may leave the forced branch's, e.g. StreamK's
        # grid_K beyond theta), run as planned
        mine = run_plan(planned, pyto.spec(a_shape, dtype), pyto.spec(b_shape, dtype))[1].cycles
        forced_best = min(ok, key=ok.get)       # (the chosen branch's forced run may have failed: not in ok)
        regret = mine / min(mine, ok[forced_best]) - 1
        best = chosen if mine < ok[forced_best] else forced_best
        agree += (chosen == best) or regret <= 0.005
        regrets.append(regret)
        roof = roofline_cycles(a_shape, b_shape, dtype, chip)
        home = {bc.branch: bc.home for bc in planned.conditions}
        for br, cyc in {**ok, chosen: mine}.items():       # the planner's branch as planned
            eff.setdefault(br, []).append((roof / cyc, br == chosen, roof >= ALLOWS * floor, home.get(br, False)))
        clock = pyto.load_chip(chip).clock_ghz * 1e3
        per = "  ".join(f"{k}={v / clock:.1f}" for k, v in ok.items())
        err = planned.estimate.t_total / (mine / clock) - 1
        est_err.append(abs(err))
        extra = ""
        if fit is not None:
            with fitted.using(fit):
                cal = plan(a_shape, b_shape, dtype, chip)
            same = cal.branch == chosen and cal.tiling == planned.tiling
            theirs = mine if same else run_plan(cal, pyto.spec(a_shape, dtype), pyto.spec(b_shape, dtype))[1].cycles
            oracle = min(mine, theirs, ok[forced_best])      # one oracle for both plans: all this shape's runs
            after.append((mine / oracle - 1, theirs / oracle - 1, chosen, cal.branch, f"{a_shape} @ {b_shape}"))
            extra = "  fitted: " + ("the same plan" if same else f"{cal.branch} {theirs / clock:.1f} "
                                    f"({after[-1][1]:+.1%} vs {after[-1][0]:+.1%})")
        if tune is not None:
            cyc, wall = tuned(a_shape, b_shape, dtype, chip)
            tune.append((cyc / (oracle if fit is not None else min(mine, ok[forced_best])) - 1, wall))
            extra += f"  tuned {cyc / clock:.1f} ({tune[-1][0]:+.1%}, {wall:.1f} s)"
        print(f"{label:<18} {str(a_shape):<18} {str(b_shape):<18} {dtype:<5} {chosen:<12} {best:<12} "
              f"{regret:>6.1%}  {roof / mine:>8.1%}  {err:>+7.1%}  {per}" + (f"  (planned {mine / clock:.1f})"
                                                                               if mine != ok.get(chosen) else "")
              + extra)
    return regrets, agree, eff, est_err


def compare_table(after: list, tune: Optional[list] = None) -> list:
    """Lines: the planner's agreement and regret with today's constants and with the fitted ones (one oracle per
    shape: the fastest of every run of it), plan(tune=True)'s with its wall time, and the choices the file changes."""
    def row(name: str, regs: list, wall: str = "") -> str:
        agree = sum(r <= 0.005 for r in regs)
        return (f"  {name:<34} {agree:>4}/{len(regs):<4} {agree / len(regs):>7.1%} {statistics.median(regs):>+9.1%} "
                f"{max(regs):>+9.1%} {statistics.fmean(regs):>+9.2%}  {wall}")
    out = [f"  {'':<34} {'agree':>9} {'rate':>7} {'median':>9} {'worst':>9} {'mean':>9}  (regret)",
           row("planner, today's constants", [x[0] for x in after]),
           row("planner, fitted constants", [x[1] for x in after])]
    if tune:
        walls = [w for _, w in tune]
        out.append(row("plan(tune=True)", [r for r, _ in tune],
                       f"wall per shape median {statistics.median(walls):.2f} s, worst {max(walls):.2f} s"))
    moved = [x for x in after if x[2] != x[3]]
    out.append(f"  branch changed by the fitted file on {len(moved)}/{len(after)} shapes"
               + "".join(f"\n    {lab}: {a} -> {b} (regret {ra:+.1%} -> {rb:+.1%})"
                         for ra, rb, a, b, lab in moved[:40]))
    return out


def main() -> None:
    print(blas_threads.describe())
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--chip", default="ascend950pr")
    ap.add_argument("--held-out", type=int, default=0, metavar="N",
                    help="also N random shapes the planner was not tuned on (a few seconds each)")
    ap.add_argument("--seed", type=int, default=1, help="the held-out shapes' random seed (default 1)")
    ap.add_argument("--tune", action="store_true",
                    help="on the held-out shapes also plan(tune=True): its regret and wall time per shape")
    ap.add_argument("--fitted", default=None, metavar="FILE",
                    help="also plan with these fitted constants (a pyto calibrate output; 'package': the package's "
                         "file for the chip): agreement and regret before/after calibration")
    ap.add_argument("--spec-out", default=None, metavar="FILE",
                    help="write the --held-out N shapes (--seed S) as a pyto sweep CSV spec to FILE and stop")
    args = ap.parse_args()
    if args.spec_out:
        write_spec(held_out(args.held_out, args.seed), args.chip, args.spec_out)
        print(f"wrote {args.spec_out}: {args.held_out} held-out shapes (seed {args.seed}) as a pyto sweep spec")
        return
    fit = None
    if args.fitted:
        name = pyto.load_chip(args.chip).name
        fit = fitted.read(fitted.package_path(name) if args.fitted == "package" else args.fitted)
        if fit.chip != name:
            raise SystemExit(f"--fitted {args.fitted} was fitted on {fit.chip}, not {name}")
        print(f"fitted constants: {args.fitted} (version {fit.version}; {fit.meta.get('sweep', {})})")
    floor = latency_floor_cycles(args.chip)
    t0 = time.time()
    cases = suite(args.quick)
    s_after = [] if fit is not None else None
    regrets, agree, eff, est_err = evaluate(cases, args.chip, floor, fit=fit, after=s_after)
    n = len(cases)
    print(f"\n{n} shapes in {time.time() - t0:.0f} s")
    print(f"agreement (planner's branch is the fastest legal one, within 0.5%): {agree}/{n} = {agree / n:.1%} "
          f"(target >= 90%)")
    print(f"regret: median {statistics.median(regrets):.1%} (target <= 5%), worst {max(regrets):.1%}")
    print(f"planner's estimate vs the emulator (est err, the chosen branch): median |error| "
          f"{statistics.median(est_err):.1%}, worst {max(est_err):.1%}")
    fmt = (lambda xs: f"median {statistics.median(xs):.1%} min {min(xs):.1%} (n={len(xs)})" if xs else "-")
    print("\nfraction of roofline per branch (when the planner chose it | when forced):")
    for br, vals in sorted(eff.items()):
        chosen = [v for v, c, *_ in vals if c]
        forced = [v for v, c, *_ in vals if not c]
        print(f"  {br:<12} chosen: {fmt(chosen):<36} forced: {fmt(forced)}")
    print(f"\nwhere the shape allows 80% (roofline >= {ALLOWS} x the {floor:.0f}-cycle latency floor of a first GM "
          f"read and a last GM write), chosen on its home ground (target >= 80%) | chosen outside it (the planner's "
          f"override):")
    for br, vals in sorted(eff.items()):
        print(f"  {br:<12} home: {fmt([v for v, c, big, h in vals if c and big and h]):<36} "
              f"outside: {fmt([v for v, c, big, h in vals if c and big and not h])}")
    if fit is not None:
        print(f"\nsuite, before/after calibration ({args.fitted}):")
        print("\n".join(compare_table(s_after)))
    if args.held_out:
        print(f"\nheld-out shapes (random, seed {args.seed}; not used to tune the planner):")
        tune = [] if args.tune else None
        h_after = [] if fit is not None else None
        h_regrets, h_agree, _, h_err = evaluate(held_out(args.held_out, args.seed), args.chip, floor, tune, fit,
                                                h_after)
        m = len(h_regrets)
        print(f"held-out: agreement {h_agree}/{m} = {h_agree / m:.1%}, regret median "
              f"{statistics.median(h_regrets):.1%}, worst {max(h_regrets):.1%}; estimate median |error| "
              f"{statistics.median(h_err):.1%}, worst {max(h_err):.1%}")
        if tune:
            t_reg, walls = [r for r, _ in tune], [w for _, w in tune]
            t_agree = sum(r <= 0.005 for r in t_reg)
            print(f"held-out, plan(tune=True): agreement {t_agree}/{m} = {t_agree / m:.1%} (against the fastest of "
                  f"this benchmark's runs: every legal branch forced, and the seed's plan), regret median "
                  f"{statistics.median(t_reg):+.1%}, worst {max(t_reg):+.1%}; tune wall time per shape median "
                  f"{statistics.median(walls):.1f} s, worst {max(walls):.1f} s")
        if fit is not None:
            print(f"\nheld-out ({m} shapes, seed {args.seed}), before/after calibration ({args.fitted}):")
            print("\n".join(compare_table(h_after, tune)))


if __name__ == "__main__":
    main()
