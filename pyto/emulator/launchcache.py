"""pyto.run's launch cache (as Triton's and JAX's compile caches): a launch of the same kernel code with the same
static parameters, GM shapes and dtypes, chip, block count and mode reuses the checked launch, so a repeated
full-mode run is the data pass alone and a repeated timing run costs nothing.

The key holds what tracing reads: the kernel object and its code (a redefined or edited function is a new key),
its closure's cells, the static parameters, each GM argument's shape, storage dtype and broadcast axes, the chip
table (a table edited on disk loads as a new Chip), blocks, auto_sync, check, the cube tile shapes and
max_block_instructions in force. A kernel must trace the same for the same key (as pyto.compile requires: no reads
of mutable globals that change between runs); `pyto.run_options(cache=False)` turns the cache off for a block.
Only launches that passed every check are kept; a failing one is traced again each time. Memory is bounded: at
most MAX_ENTRIES launches and MAX_INSTRUCTIONS instructions in all (least recently used first out); a launch of
more instructions than MAX_ENTRY_INSTRUCTIONS is not kept.
"""
from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from typing import Any, Optional

import numpy as np

MAX_ENTRIES = 32
MAX_INSTRUCTIONS = 400_000
MAX_ENTRY_INSTRUCTIONS = 200_000

_LOCK = threading.Lock()
_ENTRIES: "OrderedDict[tuple, tuple]" = OrderedDict()     # key -> (compiled launch, instructions, pinned objects)
_STATS = {"hits": 0, "misses": 0}


class _Unkeyable(Exception):
    """A static parameter with no stable key (an object compared by identity only): the launch is not cached."""


def _frozen(v: Any) -> Any:
    """A hashable stand-in for a static parameter's value, equal exactly when the values are."""
    if v is None or isinstance(v, (bool, int, float, str, bytes, np.integer, np.floating, np.bool_)):
        return (type(v).__name__, v)
    if isinstance(v, (tuple, list)):
        return (type(v).__name__, tuple(_frozen(x) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple(sorted((str(k), _frozen(x)) for k, x in v.items())))
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return (type(v), tuple((f.name, _frozen(getattr(v, f.name))) for f in dataclasses.fields(v)))
    by_identity = type(v).__hash__ is object.__hash__      # equal only to itself: a mutable object may have changed
    if by_identity and not (isinstance(v, type) or callable(v)):
        raise _Unkeyable
    try:
        hash(v)
    except TypeError:
        raise _Unkeyable from None
    return ("obj", v)


def _arg_key(a: Any) -> tuple:
    from .admission import broadcast_axes
    if isinstance(a, np.ndarray):
        return ("array", a.shape, a.dtype.str, a.dtype.name, broadcast_axes(a))
    shape, dtype = getattr(a, "shape", None), getattr(a, "dtype", None)
    return ("spec", tuple(shape) if shape is not None else None, str(dtype))


def key(kernel, arrays: list, params: dict, chip, blocks: int, auto_sync: bool, check: bool, mode: str,
        settings: dict) -> Optional[tuple]:
    """The launch's key, or None when one of its parts has none (then it is not cached)."""
    from ..tiling import get_cube_tile_shapes
    fn = kernel.fn
    cells = tuple(id(c.cell_contents) if _has(c) else None for c in (getattr(fn, "__closure__", None) or ()))
    try:
        frozen = tuple(sorted((k, _frozen(v)) for k, v in params.items()))
    except _Unkeyable:
        return None
    tiles = get_cube_tile_shapes()
    return (id(kernel), id(fn.__code__), cells, frozen, tuple(_arg_key(a) for a in arrays), id(chip), blocks,
            auto_sync, check, mode, settings.get("max_block_instructions"), repr(tiles))


def _has(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:          # an empty cell
        return False
    return True


def get(k: Optional[tuple]):
    """The cached launch of key `k` (None: not there), marked most recently used."""
    if k is None:
        return None
    with _LOCK:
        entry = _ENTRIES.get(k)
        if entry is None:
            _STATS["misses"] += 1
            return None
        _ENTRIES.move_to_end(k)
        _STATS["hits"] += 1
        return entry[0]


def put(k: Optional[tuple], compiled, instructions: int, pinned: tuple) -> None:
    """Keep `compiled` under `k` (with the objects whose ids the key holds, so that they stay theirs), evicting
    the least recently used past the bounds."""
    if k is None or instructions > MAX_ENTRY_INSTRUCTIONS:
        return
    with _LOCK:
        _ENTRIES[k] = (compiled, instructions, pinned)
        _ENTRIES.move_to_end(k)
        while len(_ENTRIES) > MAX_ENTRIES or sum(e[1] for e in _ENTRIES.values()) > MAX_INSTRUCTIONS:
            _ENTRIES.popitem(last=False)


def clear() -> None:
    """Drop every cached launch (and the counts)."""
    with _LOCK:
        _ENTRIES.clear()
        _STATS.update(hits=0, misses=0)


def stats() -> dict:
    """{"entries", "instructions", "hits", "misses"} of the cache now."""
    with _LOCK:
        return {"entries": len(_ENTRIES), "instructions": sum(e[1] for e in _ENTRIES.values()), **_STATS}
