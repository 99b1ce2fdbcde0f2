"""Compiled or plain Python: which version of a numba loop a launch runs.

Each loop the emulator compiles with numba (@njit(cache=True)) is also a plain Python function, its py_func: the
reference the tests compare the compiled loop with, numerically the same. A loop's first call in a process
compiles it (1-5 s each, ~15 s for them all) unless numba's disk cache has it, while a small launch runs the same
loops in Python in a fraction of a second. So a cold loop (not compiled in this process, no disk cache) runs as
Python while the work it has run so far in this process stays below `limit` items (about a second of Python, less
than its compile), nested loops included; any other call runs the compiled loop (compiling it, and caching it on
disk, the first time). A first `pyto bmm` on a fresh install thus compiles nothing; a large launch (or many
small ones) compiles what it needs, once.

PYTO_NUMBA=0: always Python; PYTO_NUMBA=1: always compiled; unset: as above.
"""
from __future__ import annotations

import functools
import os
import sys
import types
from typing import Callable

import numpy as np

# below these many items a cold loop runs as Python (each about a second of Python, less than the loop's compile)
SCHEDULE = 30_000         # the scheduler's event loop: instructions
INSTRUCTIONS = 200_000    # the checked pass, the lowering's cells: instructions
ACCESSES = 100_000        # L2 replay: GM accesses (regions and rows interned: rows)
ORDER = 20_000            # auto-sync: instructions (the programs' orders, summed)

_CACHED: dict = {}        # id(dispatcher) -> (dispatcher, bool): whether numba's disk cache had it (read once)
_PYTHON: dict = {}        # id(dispatcher) -> (dispatcher, items it has run as Python in this process)
_COMPILE: dict = {}       # id(dispatcher) -> dispatcher: picked cold, to compile (progress.py says so meanwhile)


def mode() -> str:
    """'python', 'compiled' or 'auto' (PYTO_NUMBA)."""
    flag = os.environ.get("PYTO_NUMBA", "")
    return "python" if flag == "0" else "compiled" if flag == "1" else "auto"


def cold(d) -> bool:
    """Whether calling dispatcher `d` would compile it: nothing compiled in this process and nothing in numba's disk
    cache for it (numba's own index; an unreadable one counts as cached)."""
    if d.overloads:
        return False
    hit = _CACHED.get(id(d))
    if hit is None or hit[0] is not d:
        try:
            cached = bool(d._cache._cache_file._load_index())
        except Exception:       # numba's private layout changed, or no cache: assume compiled code is at hand
            cached = True
        hit = _CACHED[id(d)] = (d, cached)
    return not hit[1]


def pick(d, work: int, limit: int) -> Callable:
    """The version of dispatcher `d` to call for `work` items: its plain-Python function (nested loops too) where
    PYTO_NUMBA=0, or where it is cold and its Python work in this process, this call's included, stays below
    `limit`; else the dispatcher itself."""
    m = mode()
    if m == "python":
        return plain(d)
    if m == "auto" and cold(d):
        spent = _PYTHON.get(id(d), (d, 0))[1] + work
        if spent < limit:
            _PYTHON[id(d)] = (d, spent)
            return plain(d)
        _COMPILE[id(d)] = d
    return d


def compiling(d) -> bool:
    """Whether `d` was picked to compile and has not compiled yet (for progress.py's note)."""
    return _COMPILE.get(id(d)) is d and not d.overloads


def plain(d) -> Callable:
    """Dispatcher `d` as plain Python, the dispatchers it calls too (so that none of them compiles): its py_func
    rebound to a copy of its module's globals in which every dispatcher is replaced by its own plain version.
    Built per call (a copy of a module's names: microseconds), so a name patched in the module is seen. numpy's
    int64 scalars wrap on overflow as the compiled loop's do (intern_rows' hash): the warning is silenced."""
    fn = _plain(d, {})

    @functools.wraps(fn)
    def run(*args):
        with np.errstate(over="ignore"):
            return fn(*args)
    return run


def _plain(d, done: dict) -> Callable:
    f = d.py_func
    g = _globals(f.__module__, done)
    return types.FunctionType(f.__code__, g, f.__name__, f.__defaults__, f.__closure__)


def _globals(module: str, done: dict) -> dict:
    g = done.get(module)
    if g is None:
        from numba.core.dispatcher import Dispatcher
        g = done[module] = dict(vars(sys.modules[module]))
        for name, v in list(g.items()):
            if isinstance(v, Dispatcher):
                g[name] = _plain(v, done)
    return g


__all__ = ["cold", "compiling", "mode", "pick", "plain"]
