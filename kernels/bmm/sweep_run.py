"""sweep()'s executors: the cases not yet in the output file, through sweep.run_case, serially, on a local process
pool (spawn: the default) or on a Dask distributed cluster; the output rewritten atomically every FLUSH_S seconds
and at the end, so a sweep killed at any point resumes from its last write.

Every executor runs the same pure run_case on the same Case, so the rows are the same whichever ran them; the file
and the returned rows are in the spec's case order (rows of cases the file held but the spec does not name stay,
first).
"""
from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Iterator, Optional

from pyto import progress as _progress
from pyto.errors import InputError, UnsupportedError

from . import sweep as _sweep
from .sweep_io import check_format, read_rows, write_rows
from .sweep_spec import cases_of

FLUSH_S = 10.0           # seconds between writes of the output file
INSTALL = "pip install 'pyto[sweep]'"


def default_workers() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:      # not Linux
        return max(1, os.cpu_count() or 1)


def run(spec_or_cases, out=None, *, workers: Optional[int] = None, scheduler: Optional[str] = None, client=None,
        progress: bool = True) -> list[dict]:
    """sweep.sweep(): see its docstring and this module's."""
    cases = cases_of(spec_or_cases)
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise InputError(f"sweep: workers must be a positive int, got {workers!r}")
    if scheduler is not None and client is not None:
        raise InputError("sweep: give a Dask scheduler address or a client, not both")
    if out is not None:
        check_format(out)
    old = read_rows(out) if out is not None and Path(out).exists() else []
    done = {r["case"] for r in old}
    todo = [c for c in cases if c.id not in done]
    new: dict[str, list] = {}
    order = {c.id: i for i, c in enumerate(cases)}
    mine = [r for r in old if r["case"] not in order]

    def ordered() -> list:
        rows = {c: [] for c in order}
        for r in old:
            if r["case"] in order:
                rows[r["case"]].append(r)
        for cid, rs in new.items():
            rows[cid] = rs
        return [r for c in order for r in rows[c]]

    with _progress.shown(progress):
        _progress.task(f"sweep {_progress.bar(0, len(todo))}")
        last = time.monotonic()
        try:
            for rows in _results(todo, workers, scheduler, client):
                new[rows[0]["case"]] = rows
                _progress.task(f"sweep {_progress.bar(len(new), len(todo))}")
                if out is not None and time.monotonic() - last >= FLUSH_S:
                    write_rows(out, mine + ordered())
                    last = time.monotonic()
        finally:        # a kill (KeyboardInterrupt) or a failed write keeps the cases done so far
            if out is not None and new:
                write_rows(out, mine + ordered())
    if out is not None and not Path(out).exists():
        write_rows(out, mine + ordered())       # nothing to run: still an output file with every column
    return ordered()


def _results(todo: list, workers: Optional[int], scheduler: Optional[str], client) -> Iterator[list]:
    """Each case's rows as it finishes."""
    if not todo:
        return
    if scheduler is not None or client is not None:
        yield from _dask(todo, scheduler, client)
        return
    n = min(workers or default_workers(), len(todo))
    if n == 1:
        for case in todo:
            _progress.phase(case.id)
            yield _sweep.run_case(case)
        return
    _progress.phase(f"{n} worker processes")
    with ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_sweep.run_case, case) for case in todo]
        try:
            for f in as_completed(futures):
                yield f.result()
        finally:
            for f in futures:
                f.cancel()


def _dask(todo: list, scheduler: Optional[str], client) -> Iterator[list]:
    try:
        from dask.distributed import Client, as_completed as dask_completed
    except ImportError as e:
        raise UnsupportedError(f"pyto sweep on a Dask cluster needs dask.distributed, which is not installed: "
                               f"{INSTALL} (or run on the local process pool: no --scheduler)") from e
    own = client is None
    if own:
        try:
            client = Client(scheduler, timeout="20s")
        except (OSError, TimeoutError) as e:
            raise InputError(f"sweep: cannot reach the Dask scheduler at {scheduler!r}: {e}") from None
    futures = client.map(_sweep.run_case, todo, pure=False)
    _progress.phase("Dask cluster")
    try:
        for _, rows in dask_completed(futures, with_results=True):
            yield rows
    finally:
        client.cancel(futures)
        if own:
            client.close()
