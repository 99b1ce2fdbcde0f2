"""The event loop: the numba build and its plain-Python reference agree; streaming timing runs agree
with checked ones; each Op has exactly one data definition."""
import numpy as np
import pytest

import pyto
from pyto.testing import matmul_bound
from pyto_kernels.examples.matmul_pingpong import matmul_pingpong
from pyto.emulator.data.datapass import HANDLERS
from pyto.emulator.data.datapath import EFFECTS
from pyto.ir import SYNC_OPS, Op

import test_emulator_phases as phases


def test_every_op_has_exactly_one_data_definition():
    """The data pass's own handlers (the cube path's LOAD, STORE, MMAD), datapath.EFFECTS (MOVE, vector ops) and
    the sync ops (no data effect) split Op between them: each op is defined once."""
    for op in Op:
        owners = [name for name, table in (("HANDLERS", HANDLERS), ("EFFECTS", EFFECTS), ("SYNC_OPS", SYNC_OPS))
                  if op in table]
        assert len(owners) == 1, (op, owners)


def _runs(monkeypatch, flag):
    monkeypatch.setenv("PYTO_NUMBA", flag)
    a, b, out = np.ones((96, 200), np.float16), np.ones((200, 80), np.float16), np.zeros((96, 80), np.float16)
    rep = pyto.run(matmul_pingpong, a, b, out, blocks=3, TM=32, TN=48, TK=32)
    return rep, out


def test_numba_and_python_reference_schedules_agree(monkeypatch):
    fast, out_fast = _runs(monkeypatch, "1")
    ref, out_ref = _runs(monkeypatch, "0")
    assert fast.cycles == ref.cycles and fast.pipe_cycles == ref.pipe_cycles
    assert np.array_equal(fast.events[-2], ref.events[-2]) and np.array_equal(fast.events[-1], ref.events[-1])
    assert np.array_equal(out_fast, out_ref)


@pytest.mark.parametrize("flag", ["1", "0"])
def test_both_builds_report_the_same_deadlock(monkeypatch, flag):
    monkeypatch.setenv("PYTO_NUMBA", flag)
    with pytest.raises(pyto.DeadlockError, match=r"== 1, is 0"):
        pyto.run(phases.misuse1, *phases._inputs(32, 32, 32))


def test_streaming_timing_run_matches_the_checked_one():
    specs = (pyto.spec((300, 700), "bf16"), pyto.spec((700, 260), "bf16"), pyto.spec((300, 260), "bf16"))
    checked = pyto.run(matmul_pingpong, *specs, mode="timing", blocks=5, TM=64, TN=64, TK=64)
    streamed = pyto.run(matmul_pingpong, *specs, mode="timing", blocks=5, check=False, TM=64, TN=64, TK=64)
    assert streamed.cycles == checked.cycles and streamed.instructions == checked.instructions
    assert streamed.l2_hit_bytes == checked.l2_hit_bytes


def test_streaming_still_detects_deadlock_but_not_races():
    a, b, out = phases._inputs(32, 32, 64)
    with pytest.raises(pyto.DeadlockError):
        pyto.run(phases.misuse3, a, b, out, mode="timing", check=False, K_SQ=64, TILE_SQ=32)
    with pytest.raises(pyto.SyncError, match="leaves unit_flag"):     # race unchecked; the flag left at 1 is
        pyto.run(phases.misuse2, a, b, out, mode="timing", check=False, K_SQ=64, TILE_SQ=32)   # the schedule's
    with pytest.raises(pyto.RaceError):
        pyto.run(phases.misuse2, a, b, out, mode="timing", K_SQ=64, TILE_SQ=32)
    with pytest.raises(pyto.KernelError, match="timing"):
        pyto.run(phases.misuse2, a, b, out, check=False, K_SQ=64, TILE_SQ=32)


def test_run_options_reach_library_calls():
    a, b, out = phases._inputs(32, 32, 64)
    specs = [pyto.spec(x.shape, x.dtype) for x in (a, b, out)]
    with pyto.run_options(check=False):
        with pytest.raises(pyto.SyncError, match="leaves unit_flag"):             # race not checked
            pyto.run(phases.misuse2, *specs, mode="timing", K_SQ=64, TILE_SQ=32)
        with pytest.raises(pyto.RaceError):
            pyto.run(phases.misuse2, a, b, out, K_SQ=64, TILE_SQ=32)               # full mode always checks
    with pytest.raises(pyto.RaceError):
        pyto.run(phases.misuse2, *specs, mode="timing", K_SQ=64, TILE_SQ=32)       # default restored


def test_run_options_outside_with_warns_and_changes_nothing():
    """Called as a statement it cannot apply (an error-message helper's case ran 30,000 instructions past a
    20,000 limit): it warns, and the defaults stay."""
    from pyto.emulator.run import _THREAD
    before = dict(_THREAD.values)
    with pytest.warns(RuntimeWarning, match="outside a `with` block"):
        pyto.run_options(max_block_instructions=20000)
        import gc
        gc.collect()
    assert _THREAD.values == before


def test_runs_in_several_threads_at_once_do_not_mix():
    """Each thread traces under its own tracer and run_options (a sweep with a thread pool got other threads'
    instructions: spurious races, uninitialised reads and assertion errors)."""
    from concurrent.futures import ThreadPoolExecutor

    def job(seed):
        rng = np.random.default_rng(seed)
        a = rng.standard_normal((256, 1024)).astype(np.float16)
        b = rng.standard_normal((1024, 256)).astype(np.float16)
        out = np.zeros((256, 256), np.float16)
        with pyto.run_options(check=seed % 2 == 0):
            spec = pyto.run(matmul_pingpong, pyto.spec(a.shape, "fp16"), pyto.spec(b.shape, "fp16"),
                            pyto.spec(out.shape, "fp16"), mode="timing", blocks=2, TM=64, TN=64, TK=64)
        pyto.run(matmul_pingpong, a, b, out, blocks=2, TM=64, TN=64, TK=64)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        return spec.cycles, bool(np.all(np.abs(out - ref) <= matmul_bound(a, b, np.float16)))

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(job, range(8)))
    assert all(ok for _, ok in results) and len({c for c, _ in results}) == 1


def test_run_options_can_be_entered_again():
    """One run_options object used twice, nested: each exit restores what its enter replaced (a review found
    the outer settings leaked)."""
    from pyto.emulator.run import _THREAD
    before = dict(_THREAD.values)
    opts = pyto.run_options(check=False)
    with opts:
        with opts:
            assert _THREAD.values["check"] is False
        assert _THREAD.values["check"] is False
    assert _THREAD.values == before


def test_cube_tile_shapes_blocks_are_per_thread():
    """A `with cube_tile_shapes(...)` block sets this thread's default only; other threads see the process-wide
    one (set_cube_tile_shapes), and this thread sees it again after the block."""
    import threading
    seen = []
    outside = pyto.get_cube_tile_shapes()
    with pyto.tiling.cube_tile_shapes([16, 16], [16, 16], [16, 16]) as ts:
        t = threading.Thread(target=lambda: seen.append(pyto.get_cube_tile_shapes()))
        t.start()
        t.join()
        assert pyto.get_cube_tile_shapes() is ts
    assert seen == [outside] and pyto.get_cube_tile_shapes() is outside and ts is not outside
