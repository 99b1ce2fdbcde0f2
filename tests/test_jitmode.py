"""pyto/emulator/jitmode.py: a cold numba loop with little work runs as plain Python (nested loops too), the same
numbers as compiled; a large one, or PYTO_NUMBA=1, compiles; PYTO_NUMBA=0 is always Python."""
from __future__ import annotations

import numpy as np
import pytest
from numba.core.dispatcher import Dispatcher

from pyto.emulator import jitmode
from pyto.emulator.schedule import l2_replay, simulate


class _Cold:
    """A dispatcher that has not compiled and has no disk cache (numba's attributes jitmode reads)."""

    overloads: dict = {}
    py_func = staticmethod(lambda x: x + 1)

    class _cache:
        class _cache_file:
            @staticmethod
            def _load_index() -> dict:
                return {}


def test_cold_small_work_runs_python_until_the_limit(monkeypatch):
    monkeypatch.delenv("PYTO_NUMBA", raising=False)
    d = _Cold()
    assert jitmode.cold(d)
    small = jitmode.pick(d, 40, 100)
    assert small is not d and small(1) == 2
    assert jitmode.pick(d, 40, 100) is not d          # 80 items so far: still below the limit
    assert jitmode.pick(d, 40, 100) is d              # 120: it compiles now
    assert jitmode.compiling(d)
    monkeypatch.setenv("PYTO_NUMBA", "1")
    assert jitmode.pick(_Cold(), 1, 100).__class__ is _Cold
    monkeypatch.setenv("PYTO_NUMBA", "0")
    assert jitmode.pick(d, 10 ** 9, 100) is not d


def test_plain_replaces_nested_loops():
    """plain(simulate) calls _book, _push, _pop as Python too (none of them compiles)."""
    fn = jitmode.plain(simulate.simulate)
    g = fn.__wrapped__.__globals__
    assert g is not vars(simulate)
    assert not any(isinstance(v, Dispatcher) for v in g.values())
    assert g["_book"].__code__ is simulate._book.py_func.__code__


@pytest.mark.parametrize("n,width,distinct", [(1, 3, 1), (200, 6, 17), (3000, 2, 900)])
def test_plain_intern_rows_equals_the_compiled_loop(n, width, distinct):
    """intern_rows' int64 hash wraps in Python (numpy scalars) as compiled: the same numbering, no warning."""
    rng = np.random.default_rng(n)
    pool = rng.integers(-2 ** 40, 2 ** 40, (distinct, width))
    rows = np.ascontiguousarray(pool[rng.integers(0, distinct, n)])
    with np.errstate(over="raise"):
        ids, first = jitmode.plain(l2_replay.intern_rows)(rows)
    want_ids, want_first = l2_replay.intern_rows(rows)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_array_equal(first, want_first)
    # the numbering itself: first appearances in order (an independent check)
    _, order = np.unique(rows, axis=0, return_index=True)
    np.testing.assert_array_equal(np.sort(order), want_first[:len(order)])
