"""Bounded memo caches for the planner's pure functions: the cost model's estimates, the ranked base-tile
candidates and the ASW tile search's choice.

Why: one plan() asks for the same ones several times (its decision, then every branch forced for explain()'s
alternatives, ToMatmul's folds over the same walk, StreamK's grid_K beyond theta), and a sweep or a bmm() per
problem asks again.

Keys: everything the function reads. The Problem (frozen, hashed by value: shapes, dtypes, bias, transposes,
MX) and the tilings (by value; their derivation text is not compared and not read by the model) by value; the
Chip by identity (load_chip returns one object per table version; the entry holds the chip, so its id cannot
be reused while the entry lives). The fitted constants (fitted.py) are read only by the decision between
branches (planner._pick, _override), never by what is memoised here (T_total itself is never fitted), so they
are not in the keys; tests/test_planner_speed.py checks plans with and without the caches under fitted
constants too. Each cache is an LRU of at most `size` entries; errors are not kept.

`disabled()` runs a block with every cache off (and the tile searches' fast paths off: the ASW search's bound and
its vectorised model, cost_asw_vec, and cube_tiles' least-row shortcut: the plain model, evaluated for every
candidate one at a time); `clear()` empties them.
"""
from __future__ import annotations

import contextlib
import functools
import threading
from collections import OrderedDict
from typing import Callable, Iterator

_CACHES: list["Memo"] = []
_OFF = 0                   # > 0 inside disabled()
_LOCK = threading.Lock()


class Memo:
    """One LRU cache of at most `size` entries (thread-safe)."""

    def __init__(self, name: str, size: int):
        self.name, self.size = name, size
        self._data: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0
        _CACHES.append(self)

    def get(self, key, default=None):
        with self._lock:
            hit = self._data.get(key, default)
            if hit is not default:
                self._data.move_to_end(key)
                self.hits += 1
            else:
                self.misses += 1
            return hit

    def put(self, key, value) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.hits = self.misses = 0


def enabled() -> bool:
    """False inside disabled()."""
    return _OFF == 0


def memoised(size: int, key: Callable[..., tuple], keep: Callable[..., object] = lambda *a, **k: None,
             copy: Callable = lambda v: v):
    """Decorator: cache fn's result under key(*args, **kw) (plus whatever keep(*args, **kw) returns held beside
    it: the Chip whose id is in the key); copy(value) is what a hit returns (a fresh list for a caller to own)."""
    def wrap(fn):
        cache = Memo(f"{fn.__module__}.{fn.__qualname__}", size)
        miss = object()

        @functools.wraps(fn)
        def cached(*args, **kw):
            if _OFF:
                return fn(*args, **kw)
            k = key(*args, **kw)
            hit = cache.get(k, miss)
            if hit is miss:
                value = fn(*args, **kw)
                cache.put(k, (value, keep(*args, **kw)))
                return copy(value)
            return copy(hit[0])
        cached.cache = cache
        cached.uncached = fn
        return cached
    return wrap


def clear() -> None:
    """Empty every cache."""
    for c in _CACHES:
        c.clear()


def stats() -> dict[str, tuple[int, int, int]]:
    """{cache: (entries, hits, misses)}."""
    return {c.name: (len(c), c.hits, c.misses) for c in _CACHES}


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Within the block, nothing is memoised or read from a cache, and the tile searches evaluate every candidate
    with the scalar model."""
    global _OFF
    with _LOCK:
        _OFF += 1
    try:
        yield
    finally:
        with _LOCK:
            _OFF -= 1


__all__ = ["Memo", "clear", "disabled", "enabled", "memoised", "stats"]
