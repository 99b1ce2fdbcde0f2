"""Commands that kernels adds to `pyto` (entry point group ``pyto.commands``)."""
from __future__ import annotations

import argparse
import os
import sys

from pyto_kernels.bmm.conditions import BRANCHES

from pyto.errors import ShapeError


def register(sub: argparse._SubParsersAction) -> None:
    """Add the kernels' subcommands to the `pyto` parser."""
    register_plan(sub)
    register_bmm(sub)
    register_tune(sub)
    register_sweep(sub)
    register_calibrate(sub)


def plan_shapes(B: int, M: int, N: int, K: int, batch_a: int | None = None, batch_b: int | None = None,
                transpose_a: bool = False, transpose_b: bool = False) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Operand shapes for `pyto plan`: equal batches, a batch-1 side, or a cross broadcast BA x BB = B."""
    ba = B if batch_a is None else batch_a
    bb = B if batch_b is None else batch_b
    a_mat = (K, M) if transpose_a else (M, K)
    b_mat = (N, K) if transpose_b else (K, N)
    if ba == bb == B or (1 in (ba, bb) and max(ba, bb) == B):
        return (ba,) + a_mat, (bb,) + b_mat
    if ba * bb == B:
        return (ba, 1) + a_mat, (1, bb) + b_mat
    raise ShapeError(f"--batch-a {ba} and --batch-b {bb} do not give B = {B}: use equal batches, one side 1, "
                     f"or BA * BB = B (cross broadcast)")


def stored(shape: tuple[int, ...], dtype: str) -> tuple[int, ...]:
    """An operand's shape as bmm takes it: FP4's last axis packs two elements a byte (pyto.lowp.pack_fp4)."""
    return shape[:-1] + (shape[-1] // 2,) if dtype.startswith("fp4") else shape


def cmd_plan(args: argparse.Namespace) -> int:
    """Print the plan's explanation."""
    from pyto_kernels.bmm import plan
    a_shape, b_shape = plan_shapes(args.B, args.M, args.N, args.K, args.batch_a, args.batch_b,
                                   args.transpose_a, args.transpose_b)
    a_shape, b_shape = stored(a_shape, args.dtype), stored(b_shape, args.dtype)
    p = plan(a_shape, b_shape, dtype=args.dtype, chip=args.chip, bias=args.bias, transpose_a=args.transpose_a,
             transpose_b=args.transpose_b, branch=args.branch, reduce=args.reduce,
             override=None if args.seed_only else "fitted", mx=args.mx)
    print(p.explain())
    _reduce_note(p, args.reduce)
    return 0


def _reduce_note(p, reduce: str) -> None:
    """--reduce applies to StreamK only: say so when the plan is another branch."""
    if reduce != "workspace" and p.branch != "stream_k":
        print(f"note: --reduce {reduce} applies to StreamK; the plan is {p.branch}", file=sys.stderr)


def register_plan(sub: argparse._SubParsersAction) -> None:
    """`pyto plan B M N K ...`: choose a BMM branch (docs/bmm_branches.md §10) and explain every condition."""
    p = sub.add_parser("plan", help="choose a BMM branch (docs/bmm_branches.md §10) and explain the decision")
    _shared_args(p)
    p.set_defaults(func=cmd_plan)


def cmd_tune(args: argparse.Namespace) -> int:
    """Print the tuned plan's explanation (every candidate simulated, its time) and the chosen plan."""
    from pyto_kernels.bmm import plan
    a_shape, b_shape = plan_shapes(args.B, args.M, args.N, args.K, args.batch_a, args.batch_b,
                                   args.transpose_a, args.transpose_b)
    p = plan(a_shape, b_shape, dtype=args.dtype, chip=args.chip, bias=args.bias, transpose_a=args.transpose_a,
             transpose_b=args.transpose_b, branch=args.branch, reduce=args.reduce,
             override=None if args.seed_only else "fitted", tune=True, mx=args.mx)
    print(p.explain())
    c = p.tuning.candidates[p.tuning.chosen]
    print(f"\nchosen: {p.summary()}; simulated {c.simulated_us:,.3f} us ({c.brief})")
    _reduce_note(p, args.reduce)
    return 0


def register_tune(sub: argparse._SubParsersAction) -> None:
    """`pyto tune B M N K ...`: simulate the planner's candidates, take the fastest (cached per chip table)."""
    p = sub.add_parser("tune", help="simulate the legal BMM branches and the planner's top tilings, take the fastest",
                       description="Simulate in timing mode every legal BMM branch with the planner's tiling and the "
                                   "cost model's next-best tilings of each, print every candidate's time and the "
                                   "fastest plan. Results are cached per chip table and pyto version under "
                                   "$PYTO_CACHE_DIR (default $XDG_CACHE_HOME/pyto or ~/.cache/pyto).")
    _shared_args(p)
    p.set_defaults(func=cmd_tune)


def count(text: str) -> int:
    """argparse type: a non-negative int (a size, a batch, a seed)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"{v} is negative")
    return v


def writable_file(path: str) -> str:
    """argparse type: a file path that can be written (checked before a long run, not after it, by opening it
    for appending; a file this creates is removed again)."""
    existed = os.path.exists(path)
    try:
        with open(path, "a"):
            pass
    except OSError as e:
        raise argparse.ArgumentTypeError(f"cannot write {path!r}: {e.strerror or e}") from None
    if not existed:
        os.remove(path)
    return path


def _shared_args(p: argparse.ArgumentParser) -> None:
    """The problem arguments `pyto plan` and `pyto bmm` share."""
    for dim, what in (("B", "batch size"), ("M", "rows of A and C"), ("N", "columns of the right operand and C"),
                      ("K", "the reduction length")):
        p.add_argument(dim, type=count, help=f"{what}: C[B, M, N] = A[B, M, K] @ right[B, K, N]")
    p.add_argument("--batch-a", type=count, default=None, help="BatchA (default B)")
    p.add_argument("--batch-b", type=count, default=None, help="BatchB (default B)")
    p.add_argument("--dtype", default="bf16", choices=("fp16", "bf16", "fp32", "int8", "fp8e4m3fn", "fp8e5m2", "hf8",
                                                       "fp4e2m1", "fp4e1m2"),
                   help="default bf16 (the 8-bit floats and FP4 (with --mx): the 950, fp32 out)")
    p.add_argument("--chip", default="ascend950pr", help="chip name or .toml path (default ascend950pr)")
    p.add_argument("--bias", action="store_true", help="add a bias [B, 1, N]")
    p.add_argument("--mx", action="store_true", help="MXFP8 / MXFP4: E8M0 scales, one per 32 elements of K (K % 64 "
                                                      "== 0; --dtype fp8e4m3fn, fp8e5m2, fp4e2m1 or fp4e1m2; no --bias)")
    p.add_argument("--transpose-a", action="store_true", help="A stored (B, K, M)")
    p.add_argument("--transpose-b", action="store_true", help="B stored (B, N, K)")
    p.add_argument("--branch", default=None, choices=BRANCHES,
                   help="force a branch (only its structural preconditions are checked)")
    p.add_argument("--reduce", default="workspace", choices=("workspace", "atomic"), help="StreamK reduction")
    p.add_argument("--seed-only", action="store_true",
                   help="docs/bmm_branches.md §10's decision alone (no branch outside its home ground and no StreamK grid_K "
                        "above the theta cap, however much faster)")


def cmd_bmm(args: argparse.Namespace) -> int:
    """Plan, run on the emulator, check against numpy; exit 0 when the check passes (or in timing mode)."""
    import pyto
    from pyto_kernels.bmm import plan
    from pyto import progress
    from pyto_kernels.bmm.api import compare, random_inputs, random_mx_inputs, run_plan
    from pyto_kernels.bmm import footprint
    from pyto_kernels.bmm.cost import roofline_us
    from pyto_kernels.bmm.planner import parse_problem
    from pyto.dtypes import DType, as_dtype

    if args.no_race_check and not args.timing:
        print("pyto bmm: --no-race-check applies to --timing runs (full mode checks while it computes)",
              file=sys.stderr)
        return 2
    a_el, b_el = plan_shapes(args.B, args.M, args.N, args.K, args.batch_a, args.batch_b,
                             args.transpose_a, args.transpose_b)
    a_shape, b_shape = stored(a_el, args.dtype), stored(b_el, args.dtype)     # (FP4: packed pairs)
    batch_shape = parse_problem(a_shape, b_shape, args.dtype, False, args.transpose_a, args.transpose_b,
                                mx=args.mx).batch_shape
    bias_shape = tuple(batch_shape) + (1, args.N)
    p = plan(a_shape, b_shape, dtype=args.dtype, chip=args.chip, bias=bias_shape if args.bias else False,
             transpose_a=args.transpose_a, transpose_b=args.transpose_b, branch=args.branch, reduce=args.reduce,
             override=None if args.seed_only else "fitted", mx=args.mx)
    print(p.summary() if args.quiet else p.explain())
    _reduce_note(p, args.reduce)
    pr, dt = p.problem, as_dtype(args.dtype)
    int8 = dt is DType.int8
    bias_dt = DType.int32 if int8 else pr.out_dtype        # (an fp32 bias for the 8-bit floats)
    scales = {}        # MX: the E8M0 scales [B.., M, K/32] and [B.., K/32, N]
    if args.timing:
        a, b = pyto.spec(a_shape, dt), pyto.spec(b_shape, dt)
        bias = pyto.spec(bias_shape, bias_dt) if args.bias else None
        if args.mx:
            scales = dict(scale_a=pyto.spec(a_shape[:-2] + (args.M, args.K // 32), DType.fp8e8m0),
                          scale_b=pyto.spec(b_shape[:-2] + (args.K // 32, args.N), DType.fp8e8m0))
    else:
        # the host-memory check before the inputs are made: a CapacityError (exit 1) naming the estimate, the
        # memory available and what to do (pyto_kernels.bmm.footprint, pyto/emulator/admission.py)
        footprint.admit(p, pyto.spec(a_shape, dt), pyto.spec(b_shape, dt),
                        pyto.spec(bias_shape, bias_dt) if args.bias else None,
                        mode="full", caller=True, verify=True)
        a, b, bias = random_inputs(a_shape, b_shape, dt, bias_shape if args.bias else None, seed=args.seed)
        if args.mx:
            a, b, sa, sb = random_mx_inputs(a_el, b_el, dt, seed=args.seed, transpose_a=args.transpose_a,
                                            transpose_b=args.transpose_b)
            scales = dict(scale_a=sa, scale_b=sb)
    with progress.shown(), pyto.run_options(check=not args.no_race_check):   # progress: on a terminal only
        c, rep = run_plan(p, a, b, bias, **scales)
        if not args.timing:
            progress.phase("comparing with numpy")
            cmp = compare(c, a, b, bias, transpose_a=args.transpose_a, transpose_b=args.transpose_b,
                          dtype=dt if dt in (DType.hf8, DType.fp4e2m1, DType.fp4e1m2) else None,
                          **scales)       # (HF8's uint8 codes and FP4's packed pairs, named)
    chip = p.chip_spec or pyto.load_chip(p.chip)
    roof = roofline_us(pr, chip)
    if args.quiet:
        print(rep.headline())
    else:
        print("\nRun on the emulator:")
        print(rep.summary())
        print(f"  roofline    max(FLOPs/peak, compulsory bytes/W_GM) = {roof:,.3f} us; simulated {rep.time_us:,.3f} "
              f"us = {roof / rep.time_us:.1%} of roofline speed" if rep.time_us else f"  roofline    {roof:,.3f} us")
        print(f"  estimate    {p.estimate.t_total:,.3f} us (planner, {p.branch})")
    status = 0
    if args.timing:
        print("check: skipped (timing mode: no data)")
    else:
        what = "exact int32" if int8 else "float64 numpy within matmul_bound"
        figures = cmp.figures()      # max |error|, the bound there, the worst ratio ('' for an exact int8 pass)
        if not cmp.why:
            print(f"check: PASS ({what})" + (f": {figures}" if figures else ""))
        else:
            print(f"check: FAIL ({what}): {cmp.why}" + (f"; {figures}" if figures else ""))
        status = 0 if not cmp.why else 1
    if args.trace:      # after the check: a trace that cannot be written does not hide its verdict
        large = rep.trace_warning(args.trace)     # '' unless the file will be large (estimated from the events)
        if large:
            print(f"pyto bmm: {large}", file=sys.stderr)
        try:
            with progress.shown():
                progress.phase("writing the trace")
                rep.save_trace(args.trace)
        except pyto.PytoError as e:
            print(f"pyto bmm: {e}", file=sys.stderr)
            return 2
        print(f"trace: written to {args.trace} (Chrome / Perfetto trace-event JSON"
              f"{', gzip' if args.trace.endswith('.gz') else ''})")
    return status


def register_bmm(sub: argparse._SubParsersAction) -> None:
    """`pyto bmm B M N K ...`: plan, run on the emulator and check against numpy."""
    p = sub.add_parser("bmm", help="run a BMM on the emulator (planned branch), check it against numpy",
                       description="Make random inputs, plan the BMM (docs/bmm_branches.md's branches), run the branch kernel "
                                   "on the emulator, print the plan, the report and the check against numpy. Exit "
                                   "1 if the check fails or pyto refuses the problem, 2 for bad arguments.")
    _shared_args(p)
    p.add_argument("--trace", default=None, metavar="FILE", type=writable_file,
                   help="write a Chrome/Perfetto trace of the run (FILE.json.gz: gzip-compressed, ~1/20 the size)")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="print only the plan's summary, the report's headline and the check line")
    p.add_argument("--timing", action="store_true", help="timing mode: shapes only, no data, no check")
    p.add_argument("--no-race-check", action="store_true",
                   help="with --timing: skip the race and uninitialised-read checks (a little faster; the "
                        "memory is about the same)")
    p.add_argument("--seed", type=count, default=0, help="random seed of the inputs (default 0)")
    p.set_defaults(func=cmd_bmm)


def cmd_sweep(args: argparse.Namespace) -> int:
    """Run a sweep spec into OUT (skipping the cases already there) and/or plot a sweep's 2-D slices."""
    from pyto_kernels.bmm.sweep import sweep
    from pyto_kernels.bmm.sweep_io import read_rows

    if args.source and args.spec:
        print("pyto sweep: give a SPEC to run or --from FILE to plot, not both", file=sys.stderr)
        return 2
    if args.source:
        if not args.plot:
            print("pyto sweep: --from FILE plots a sweep: give --plot DIR", file=sys.stderr)
            return 2
        rows = read_rows(args.source)
    elif not args.spec or not args.out:
        print("pyto sweep: give a SPEC and -o OUT.parquet|OUT.csv (or --from FILE --plot DIR)", file=sys.stderr)
        return 2
    else:
        rows = sweep(args.spec, args.out, workers=args.workers, scheduler=args.scheduler)
        cases = {}
        for r in rows:
            cases.setdefault(r["case"], []).append(r)
        agree = sum(any(r["fastest"] and r["branch"] == r["model_branch"] for r in rs) for rs in cases.values())
        ran = sum(any(r["fastest"] for r in rs) for rs in cases.values())
        errors = sum(bool(r["error"]) for r in rows)
        print(f"pyto sweep: {len(cases)} cases, {len(rows)} rows ({errors} with an error) in {args.out}; plan()'s "
              f"branch is the fastest simulated one in {agree}/{ran} cases")
    if args.plot:
        from pyto_kernels.bmm.sweep_plot import parse_slice, plot
        axes = args.axes.split(",") if args.axes else None
        if axes is not None and len(axes) != 2:
            print(f"pyto sweep: --axes takes X,Y (two of B, M, N, K), got {args.axes!r}", file=sys.stderr)
            return 2
        for path in plot(rows, args.plot, parse_slice(args.slice or []), axes):
            print(f"plot: {path}")
    return 0


def register_sweep(sub: argparse._SubParsersAction) -> None:
    """`pyto sweep SPEC -o OUT`: every case of a spec in timing mode, one row per shape x branch x tiling."""
    p = sub.add_parser("sweep", help="simulate a TOML/CSV spec of BMM shapes: one row per shape x branch x tiling",
                       description="Run every case of SPEC (a .toml of grids and random draws, or a .csv of one case "
                                   "a row: docs in pyto_kernels.bmm.sweep_spec) in timing mode and write one row per "
                                   "(shape, branch, tiling) to OUT (.parquet needs pyarrow, .csv the stdlib; columns: "
                                   "pyto_kernels.bmm.sweep). Cases already in OUT are skipped (resume). A local "
                                   "process pool by default, a Dask cluster with --scheduler (pip install "
                                   "'pyto[sweep]'). --plot DIR draws each 2-D slice: the winning branch and its "
                                   "margin beside the seed's home grounds (pip install 'pyto[plot]').")
    p.add_argument("spec", nargs="?", default=None, help="the spec file (.toml or .csv)")
    p.add_argument("-o", "--out", default=None, help="the output file (.parquet or .csv), appended to")
    p.add_argument("--workers", type=count, default=None, help="local worker processes (default: the CPUs; 1: serial)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS", help="a Dask scheduler (tcp://host:8786)")
    p.add_argument("--plot", default=None, metavar="DIR", help="write a PNG per 2-D slice into DIR")
    p.add_argument("--from", dest="source", default=None, metavar="FILE", help="plot this sweep file (no run)")
    p.add_argument("--slice", action="append", metavar="COL=VALUE",
                   help="fix a column for the plot (B, M, N, K, dtype, chip, broadcast, tilings); repeat or join with commas")
    p.add_argument("--axes", default=None, metavar="X,Y", help="the plot's axes (default: the two dims that vary)")
    p.set_defaults(func=cmd_sweep)


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Fit the planner's free constants to a sweep, print the before/after table, write the fitted file."""
    from pyto_kernels.bmm import calibrate, fitted
    from pyto_kernels.bmm.sweep_io import read_rows

    if args.install and args.out:
        print("pyto calibrate: give -o FILE or --install, not both", file=sys.stderr)
        return 2
    rows = [r for path in args.sweep for r in read_rows(path)]
    cal = calibrate.fit(rows, args.held_out, args.seed, chip=args.chip, moves=tuple(args.moves.split(",")))
    print(f"pyto calibrate: {', '.join(args.sweep)}: {len(cal.fit_cases)} cases fitted, {len(cal.held_cases)} "
          f"held out (--held-out {args.held_out:g}, --seed {args.seed}); chip {cal.fitted.chip}")
    print(cal.table())
    got = calibrate.provenance(cal, args.sweep, len(rows), args.held_out, args.seed)
    path = fitted.package_path(got.chip) if args.install else args.out
    if path is None:
        print("nothing written: -o FILE writes the constants (the planner reads them with PYTO_FITTED=FILE); "
              "--install writes the package's file for this chip, which the planner reads by default")
        return 0
    print(f"wrote {fitted.write(got, path)}" + ("" if args.install else f" (use it: PYTO_FITTED={path})"))
    return 0


def register_calibrate(sub: argparse._SubParsersAction) -> None:
    """`pyto calibrate SWEEP`: fit the planner's free constants (pyto_kernels.bmm.fitted) to a sweep."""
    p = sub.add_parser("calibrate", help="fit the BMM planner's free constants to a sweep; before/after agreement",
                       description="Fit the planner's free constants (per-branch scale and overhead of the T_total "
                                   "it compares, the overlap resolution, the override margin; never a chip table's "
                                   "figures) to a `pyto sweep` output, on part of its cases, and print the "
                                   "planner's agreement with the fastest simulated row and its regret before and "
                                   "after, on the fitted and the held-out cases (pyto_kernels.bmm.calibrate).")
    p.add_argument("sweep", nargs="+", help="pyto sweep outputs (.parquet or .csv), fitted together")
    p.add_argument("-o", "--out", default=None, type=writable_file, help="write the fitted constants (TOML) here")
    p.add_argument("--install", action="store_true",
                   help="write the package's versioned file for the chip (the planner's default)")
    p.add_argument("--held-out", type=float, default=0.3, help="fraction of the cases held out (default 0.3)")
    p.add_argument("--seed", type=int, default=0, help="the split's random seed (default 0)")
    p.add_argument("--chip", default=None, help="the chip to fit (needed when the sweep has several)")
    p.add_argument("--moves", default="lines,resolution,override,scale",
                   help="what the search may move, comma-separated (default: all of lines,resolution,override,scale)")
    p.set_defaults(func=cmd_calibrate)
