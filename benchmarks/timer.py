"""The benchmarks' wall-clock timer: the best of n runs (the least disturbed by the shared machine)."""
from __future__ import annotations

import time
from typing import Callable


def best_of(fn: Callable[[], object], n: int = 3) -> float:
    """The least wall time of `n` calls of fn, in seconds."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)
