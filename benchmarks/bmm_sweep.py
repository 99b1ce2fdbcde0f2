"""The 2,000-case `pyto sweep` (benchmarks/sweep_2000.toml) on a Dask LocalCluster of 2 worker processes, timed,
and compared row for row with a serial run of a sample of its cases (or all of them: --sample 0).

Prints a table: each run's cases, rows, wall time, cases/s, CPU seconds per case (the workers' process time, or
this process's for the serial run: comparable when other work shares the machine, which wall time is not), the
load average during the run, and whether the rows are identical to the serial run's; then what the sweep found
(plan()'s branch against the fastest simulated one). The cluster's start-up is timed apart from the sweep.

Run: python benchmarks/bmm_sweep.py [--cases N] [--sample S] [--workers W] [--spec FILE] [--out FILE.parquet]
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import os as _os, sys as _sys  # noqa: E401 - blas_threads lives beside this script, which may be loaded by path
_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
import blas_threads  # noqa: E402,I001 - first: pins the BLAS thread count before numpy loads
from pyto_kernels.bmm.sweep import sweep
from pyto_kernels.bmm.sweep_io import read_rows
from pyto_kernels.bmm.sweep_spec import load_spec

SPEC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sweep_2000.toml")


def by_case(rows: list) -> dict:
    out: dict = {}
    for r in rows:
        out.setdefault(r["case"], []).append(r)
    return out


def findings(rows: list) -> list[str]:
    """plan()'s branch against the fastest simulated row, per case (the cases without an error)."""
    agree, regrets, errors = 0, [], 0
    cases = by_case(rows)
    for rs in cases.values():
        errors += any(r["error"] for r in rs)
        fastest = next((r for r in rs if r["fastest"]), None)
        model = next((r for r in rs if r["model_plan"] and r["simulated_us"] is not None), None)
        if fastest is None or model is None:
            continue
        agree += fastest["branch"] == model["branch"]
        regrets.append(model["simulated_us"] / fastest["simulated_us"] - 1)
    n = len(regrets)
    worst = max(regrets) if regrets else 0.0
    return [f"cases with an error row: {errors} of {len(cases)}",
            f"plan()'s branch is the fastest simulated branch in {agree}/{n} cases ({agree / max(n, 1):.1%}); "
            f"plan()'s plan vs the fastest row: median regret {statistics.median(regrets) if regrets else 0:.1%}, "
            f"within 0.5% in {sum(r <= 0.005 for r in regrets)}/{n}, worst {worst:.1%}"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default=SPEC)
    ap.add_argument("--cases", type=int, default=0, help="run the first N cases only (0: all)")
    ap.add_argument("--sample", type=int, default=200, help="serial cases to compare (spread over the sweep; 0: all)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=None, help="keep the cluster's rows in this .parquet/.csv (default: a temp file)")
    args = ap.parse_args()
    from dask.distributed import Client, LocalCluster

    cases = load_spec(args.spec)
    if args.cases:
        cases = cases[:args.cases]
    step = max(1, len(cases) // args.sample) if args.sample else 1
    sample = cases[::step][:args.sample] if args.sample else cases
    print(f"pyto sweep benchmark: {args.spec}, {len(cases)} cases; {blas_threads.describe()}")
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or os.path.join(tmp, "sweep.parquet")
        if os.path.exists(out):
            os.remove(out)
        t = time.perf_counter()
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
        start = time.perf_counter() - t
        try:
            cpu0 = sum(client.run(time.process_time).values())
            t = time.perf_counter()
            rows = sweep(cases, out, client=client)
            wall = time.perf_counter() - t
            cpu = sum(client.run(time.process_time).values()) - cpu0
            load = os.getloadavg()[1]           # the 5-minute average, as the run ends
        finally:
            client.close()
            cluster.close()
        on_disk = read_rows(out) == rows
        t, cpu0 = time.perf_counter(), time.process_time()
        serial = sweep(sample, workers=1)
        serial_wall, serial_cpu = time.perf_counter() - t, time.process_time() - cpu0
        serial_load = os.getloadavg()[1]
    got = by_case(rows)
    mine = [r for c in sample for r in got[c.id]]
    same = mine == serial
    differ = sum(a != b for a, b in zip(mine, serial)) + abs(len(mine) - len(serial))
    print(f"LocalCluster start-up ({args.workers} worker processes): {start:.1f} s")
    print(f"{'run':<28} {'cases':>6} {'rows':>7} {'wall s':>8} {'cases/s':>8} {'CPU s/case':>10} {'load':>5}  "
          f"identical to serial")
    print(f"{f'LocalCluster, {args.workers} workers':<28} {len(cases):>6} {len(rows):>7} {wall:>8.1f} "
          f"{len(cases) / wall:>8.2f} {cpu / len(cases):>10.3f} {load:>5.1f}  "
          f"{'yes' if same else f'NO ({differ} rows differ)'} (on the {len(sample)} "
          f"{'sampled ' if len(sample) < len(cases) else ''}cases); file read back identical: "
          f"{'yes' if on_disk else 'NO'}")
    what = "serial" if len(sample) == len(cases) else "serial (sample)"
    print(f"{what:<28} {len(sample):>6} {len(serial):>7} {serial_wall:>8.1f} "
          f"{len(sample) / serial_wall:>8.2f} {serial_cpu / len(sample):>10.3f} {serial_load:>5.1f}  -")
    print(f"cluster / serial: {(len(cases) / wall) / (len(sample) / serial_wall):.2f}x the cases per second "
          f"(on a {os.cpu_count()}-CPU machine; load: the 5-minute load average as each run ended)")
    for line in findings(rows):
        print(line)


if __name__ == "__main__":
    main()
