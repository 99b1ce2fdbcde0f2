"""Pin the BLAS thread count before numpy loads (OpenBLAS / MKL / OpenMP read it at import), so numpy's side of
a ratio does not vary with how many threads OpenBLAS happens to take; `describe()` says what is in force.

    import blas_threads  # first, before numpy (benchmarks/*.py do)

PYTO_BENCH_THREADS sets the count (default: every core of the machine).
"""
import os

THREADS = int(os.environ.get("PYTO_BENCH_THREADS", os.cpu_count() or 1))
for _var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = str(THREADS)


def describe() -> str:
    """'BLAS threads: 2 (OPENBLAS_NUM_THREADS=2 ...)': the pinned count, for the table's header."""
    return f"BLAS threads: {THREADS} (OPENBLAS/MKL/OMP_NUM_THREADS={THREADS}; PYTO_BENCH_THREADS to change)"
