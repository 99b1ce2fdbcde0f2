"""The event loop's shortcut for unit_flag regions that share no block with another (simulate._solo_regions: one
flag value and setter per region instead of one per 512-byte block) schedules exactly as the per-block state
does: the same begin/end, order, joins, busy cycles and final flags, and the same deadlock and left-set
messages, compiled and in plain Python."""
import importlib

import numpy as np
import pytest

import pyto
import pyto.errors
from pyto.emulator.schedule import simulate
from pyto_kernels.bmm import bmm

import test_emulator_phases as phases

_run = importlib.import_module("pyto.emulator.run")
_SOLO = simulate._solo_regions.py_func


def _no_solo(rg_ptr, rg_blk, n_flags):
    """_solo_regions as if every region shared a block: the per-block path for all."""
    solo, flag, setter = _SOLO(rg_ptr, rg_blk, n_flags)
    return np.zeros_like(solo), flag, setter


def _schedule(monkeypatch, launch, per_block: bool):
    """(Schedule, the launch's error text or '') with the shortcut (compiled) or per block (plain Python)."""
    got = []
    real = _run.schedule

    def keep(enc, chip):
        got.append(real(enc, chip))
        return got[-1]

    with monkeypatch.context() as m:
        m.setattr(_run, "schedule", keep)
        m.setenv("PYTO_NUMBA", "0" if per_block else "1")
        if per_block:
            m.setattr(simulate, "_solo_regions", _no_solo)
        try:
            launch()
            err = ""
        except pyto.errors.PytoError as e:
            err = f"{type(e).__name__}: {e}"
    return got[-1], err


def _same(s, t) -> None:
    assert s.cycles == t.cycles and s.busy == t.busy
    for k in ("order", "begin", "end", "join_ptr", "join_idx"):
        assert np.array_equal(getattr(s, k), getattr(t, k)), k
    assert (s.deadlock, s.left_set, s.overflow) == (t.deadlock, t.left_set, t.overflow)


def _bmm():
    with pyto.run_options(cache=False):
        bmm(pyto.spec((2, 128, 256), "bf16"), pyto.spec((2, 256, 192), "bf16"), report=True)


def _phase(kernel, *shape, **params):
    return lambda: pyto.run(kernel, *phases._inputs(*shape), **params)


def _staged():
    pyto.run(phases.staged_store_out, *phases._inputs(32, 64, 32))


def _half_cleared():
    a = np.ones((32, 32), np.float16)
    pyto.run(phases.half_cleared, a, a.copy(), np.zeros((32, 32), np.float32), np.zeros((32, 32), np.float32))


def _final_read_runs_early():
    a = np.ones((32, 32), np.float16)
    pyto.run(phases.final_read_runs_early, a, a.copy(), np.zeros((32, 32), np.float32), np.zeros((32, 32), np.float32))


LAUNCHES = {
    "bmm": _bmm,                                                       # solo L0C tiles, ping-pong
    "k_loop": _phase(phases.k_loop, 32, 32, 256, K_TOTAL=256, TILE_K=64),
    "misuse1": _phase(phases.misuse1, 32, 32, 32),                    # a deadlock on a solo region
    "misuse2": _phase(phases.misuse2, 32, 32, 64, K_SQ=64, TILE_SQ=32),
    "staged": _staged,                                                 # sub-regions of one tile: per block
    "half_cleared": _half_cleared,                                     # a deadlock on overlapping regions
    "final_read_runs_early": _final_read_runs_early,                   # a flag left set
}


@pytest.mark.parametrize("name", list(LAUNCHES))
def test_solo_regions_schedule_as_per_block_state(monkeypatch, name):
    fast, err_fast = _schedule(monkeypatch, LAUNCHES[name], per_block=False)
    ref, err_ref = _schedule(monkeypatch, LAUNCHES[name], per_block=True)
    _same(fast, ref)
    assert err_fast == err_ref


def test_solo_regions_are_those_sharing_no_block():
    """Regions 0 and 1 share block 5; region 2 lists block 7 twice; region 3 is empty; region 4 is alone."""
    rg_ptr = np.array([0, 3, 5, 7, 7, 9], np.int64)
    rg_blk = np.array([4, 5, 6, 5, 8, 7, 7, 9, 10], np.int64)
    for fn in (simulate._solo_regions, simulate._solo_regions.py_func):
        solo, flag, setter = fn(rg_ptr, rg_blk, 11)
        assert solo.tolist() == [False, False, False, False, True]
        assert flag.tolist() == [0] * 5 and setter.tolist() == [-1] * 5
