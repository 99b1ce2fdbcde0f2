"""Blocks traced alike share auto-sync and encoding (pyto/emulator/encode/blockcache.py): a run with the
cache must schedule every instruction exactly as a run that auto-syncs and encodes every block."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pyto
import pyto.language as pl
from pyto.emulator.encode.blockcache import BlockCache
from pyto_kernels.examples.matmul_pingpong import matmul_pingpong
from bmm_helpers import inputs, run_branch
from dsl_helpers import matmul_from_gm, matmul_tiles
from test_vector import _two_stage_inputs, atomic_rows, split_k, two_stage


_GET = BlockCache.get


def _events(rep):
    """Per instruction: (core, pipe, name, begin, end), in launch order."""
    cores, pipes, names, _, core_i, pipe_i, name_i, _, begin, end = rep.events[:10]
    return [(cores[c], pipes[p], names[n], b, e) for c, p, n, b, e in zip(core_i, pipe_i, name_i, begin, end)]


def _both(run, monkeypatch, reuse=True):
    """(result with the cache, result with every block encoded on its own); `reuse`: whether some
    block must have reused another's encoding."""
    hits = []

    def counting_get(self, sig):
        code = _GET(self, sig)
        hits.append(code is not None)
        return code

    monkeypatch.setattr(BlockCache, "get", counting_get)
    cached = run()
    assert any(hits) == reuse, "no block reused another's encoding: the case does not exercise the cache"
    monkeypatch.setattr(BlockCache, "get", lambda self, sig: None)
    return cached, run()


def _same(a, b):
    (out_a, rep_a), (out_b, rep_b) = a, b
    assert rep_a.cycles == rep_b.cycles
    assert rep_a.gm_bytes == rep_b.gm_bytes and rep_a.l2_hit_bytes == rep_b.l2_hit_bytes
    assert _events(rep_a) == _events(rep_b)
    if out_a is not None:
        np.testing.assert_array_equal(out_a, out_b)


@pytest.mark.parametrize("mode", ["full", "timing"])
def test_matmul_with_edge_blocks(mode, monkeypatch):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((264, 130)).astype(np.float16)   # 5 x 3 tiles, edge rows and K
    b = rng.standard_normal((130, 192)).astype(np.float16)

    def run():
        out = np.zeros((264, 192), np.float16)
        args = (a, b, out) if mode == "full" else [pyto.spec(x.shape, "fp16") for x in (a, b, out)]
        rep = pyto.run(matmul_pingpong, *args, blocks=3, mode=mode, TM=64, TN=64, TK=32)
        return (out if mode == "full" else None), rep

    _same(*_both(run, monkeypatch))


@pytest.mark.parametrize("branch, a_shape, b_shape, reuse", [
    ("stream_k", (1, 64, 4096), (1, 4096, 64), True),    # blocks alike up to their workspace rows
    ("special", (6, 40, 1), (6, 1, 72), True),            # K = 1: both AIVs write the output
    ("iter_batch", (8, 64, 96), (8, 96, 80), True),
    ("merge_batch", (16, 16, 64), (16, 64, 16), True),
])
def test_bmm_branches(branch, a_shape, b_shape, reuse, monkeypatch):
    a, b, _ = inputs(a_shape, b_shape, "fp16", None, seed=3)

    def run():
        c, rep, _ = run_branch(a, b, branch=branch)
        return c, rep

    _same(*_both(run, monkeypatch, reuse))


def test_cross_block_workspace_and_atomics(monkeypatch):
    a, b, out = _two_stage_inputs(3)

    def run_two_stage():
        o = out.copy()
        rep = pyto.run(two_stage, a, b, o, blocks=3, TM=32, SYNC=True, SHIFT=1)
        return o, rep

    _same(*_both(run_two_stage, monkeypatch))   # the AIVs read another block's workspace rows
    rng = np.random.default_rng(2)
    x = rng.standard_normal((8, 32, 64)).astype(np.float32)

    def run_atomic():
        o = np.zeros((32, 64), np.float32)
        return o, pyto.run(atomic_rows, x, o, blocks=4, ATOMIC=True)

    _same(*_both(run_atomic, monkeypatch))
    a2 = rng.standard_normal((64, 256)).astype(np.float16)
    b2 = rng.standard_normal((256, 64)).astype(np.float16)

    def run_split_k():
        o = np.zeros((64, 64), np.float32)
        return o, pyto.run(split_k, a2, b2, o, blocks=4, KC=64)

    _same(*_both(run_split_k, monkeypatch))


def test_race_still_found_in_a_reused_block(monkeypatch):
    """The race checker follows the dependencies a reused encoding gives each block."""
    a, b, out = _two_stage_inputs(3)
    with pytest.raises(pyto.errors.RaceError):
        pyto.run(two_stage, a, b, out.copy(), blocks=3, TM=32, SYNC=False, SHIFT=1)


@pl.kernel
def store_then_reload(a, b, out, *, TM: int):
    """Block i stores a @ b at rows 2i TM of out and reads back rows (2i + i % 2) TM: its own store
    for even i (auto-sync orders the read after it), a region no one writes for odd i (no wait)."""
    K, N = a.shape[1], b.shape[1]
    tiles = matmul_tiles(TM, K, N, a.dtype)
    c_l0c = tiles[-1]
    r_l1 = pl.alloc(pl.L1, [TM, N], out.dtype)
    with pl.section_cube():
        i = pl.get_block_idx()
        matmul_from_gm(tiles, a, [0, 0], b, [0, 0])
        pl.store(out, c_l0c, [2 * i * TM, 0])
        pl.load(r_l1, out, [(2 * i + i % 2) * TM, 0])


def test_blocks_differing_only_in_gm_overlap_are_not_shared(monkeypatch):
    """Where one pipe reads what another wrote in GM, the overlap is part of the block's structure."""
    specs = (pyto.spec((32, 64), "fp16"), pyto.spec((64, 32), "fp16"), pyto.spec((8 * 32, 32), "fp16"))

    def run():
        with pyto.run_options(check=False):
            return None, pyto.run(store_then_reload, *specs, blocks=4, mode="timing", TM=32)

    cached, plain = _both(run, monkeypatch)
    _same(cached, plain)
    begin = {core: b for core, pipe, name, b, _ in _events(plain[1]) if pipe == "MTE2" and b > 0}
    assert begin["block 0 AIC"] > begin["block 1 AIC"], "the even block's read-back waits for its store"


# ---- the race check of blocks alike (pyto/emulator/check/replay.py) ----------------------------------------
EXPECTED = {"pingpong": "ok", "two_stage_sync": "ok", "two_stage_race": "RaceError", "atomic": "ok",
            "plain_store_race": "RaceError", "split_k": "ok", "store_then_reload": "ok"}


def _verdict(fn):
    try:
        return "ok", fn()
    except pyto.errors.PytoError as e:
        return type(e).__name__, None


@pytest.mark.parametrize("case", ["pingpong", "two_stage_sync", "two_stage_race", "atomic", "plain_store_race",
                                  "split_k", "store_then_reload"])
def test_followers_get_the_verdict_of_checking_every_block(case, monkeypatch):
    """A block that borrows its leader's clocks is judged as if checked in full: same verdict, same data."""
    rng = np.random.default_rng(4)
    a16 = rng.standard_normal((64, 256)).astype(np.float16)
    b16 = rng.standard_normal((256, 64)).astype(np.float16)
    ta, tb, tout = _two_stage_inputs(3)
    x = rng.standard_normal((8, 32, 64)).astype(np.float32)
    runs = {
        "pingpong": lambda o: pyto.run(matmul_pingpong, a16, b16, o, blocks=4, TM=32, TN=32, TK=64),
        "two_stage_sync": lambda o: pyto.run(two_stage, ta, tb, o, blocks=3, TM=32, SYNC=True, SHIFT=1),
        "two_stage_race": lambda o: pyto.run(two_stage, ta, tb, o, blocks=3, TM=32, SYNC=False, SHIFT=1),
        "atomic": lambda o: pyto.run(atomic_rows, x, o, blocks=4, ATOMIC=True),
        "plain_store_race": lambda o: pyto.run(atomic_rows, x, o, blocks=4, ATOMIC=False),
        "split_k": lambda o: pyto.run(split_k, a16, b16, o, blocks=4, KC=64),
        "store_then_reload": lambda o: pyto.run(store_then_reload, a16[:32, :64], b16[:64, :32], o, blocks=4, TM=32),
    }
    outs = {"pingpong": lambda: np.zeros((64, 64), np.float16), "two_stage_sync": tout.copy,
            "two_stage_race": tout.copy, "atomic": lambda: np.zeros((32, 64), np.float32),
            "plain_store_race": lambda: np.zeros((32, 64), np.float32),
            "split_k": lambda: np.zeros((64, 64), np.float32),
            "store_then_reload": lambda: np.zeros((256, 32), np.float16)}
    import pyto.emulator.check.replay as replay_mod
    real = replay_mod._leaders
    followed = []

    def counting(spans, sched):
        leaders = real(spans, sched)
        followed.append(sum(lead != b for b, lead in enumerate(leaders)))
        return leaders

    def run():
        o = outs[case]()
        verdict, _ = _verdict(lambda: runs[case](o))
        return verdict, o

    monkeypatch.setattr(replay_mod, "_leaders", counting)
    shared = run()
    monkeypatch.setattr(replay_mod, "_leaders", lambda spans, sched: list(range(len(spans))))
    full = run()
    assert shared[0] == full[0] == EXPECTED[case], (case, shared[0], full[0])
    np.testing.assert_array_equal(shared[1], full[1])
    if case not in ("two_stage_race", "two_stage_sync", "store_then_reload"):
        assert sum(followed) > 0, f"{case}: no block followed another; the case does not exercise the sharing"


def test_on_chip_race_of_blocks_alike_is_reported():
    """docs/cube_phase.md §6.2 on three blocks alike: the leader's L0C race is found (the followers share it)."""
    from test_emulator_phases import _inputs, misuse2
    with pytest.raises(pyto.errors.RaceError, match="L0C"):
        pyto.run(misuse2, *_inputs(32, 32, 64), blocks=3, K_SQ=64, TILE_SQ=32)


@settings(max_examples=15)
@given(m=st.integers(1, 200), n=st.integers(1, 200), k=st.integers(1, 160), blocks=st.integers(2, 6),
       tiles=st.sampled_from([(32, 32, 32), (64, 32, 64), (32, 64, 32), (64, 64, 64)]),
       branch=st.sampled_from(["iter_batch", "asw_basic", "merge_batch", "stream_k"]), batch=st.integers(1, 8))
def test_sharing_never_changes_a_run(m, n, k, blocks, tiles, branch, batch):
    """Random matmuls and BMM branches: with and without shared encodings and race checks, every
    instruction runs at the same time and the results are the same."""
    import pyto.emulator.check.replay as replay_mod
    tm, tn, tk = tiles
    rng = np.random.default_rng(m * 7 + n)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    ab, bb, _ = inputs((batch, m, k), (batch, k, n), "fp16", None, seed=m)

    def runs():
        out = np.zeros((m, n), np.float16)
        rep = pyto.run(matmul_pingpong, a, b, out, blocks=blocks, TM=tm, TN=tn, TK=tk)
        try:
            c, rep_b, _ = run_branch(ab, bb, branch=branch)
        except pyto.errors.PlanError:
            c, rep_b = None, None
        return out, rep, c, rep_b

    real_get, real_leaders = BlockCache.get, replay_mod._leaders
    shared = runs()
    BlockCache.get = lambda self, sig: None
    replay_mod._leaders = lambda spans, sched: list(range(len(spans)))
    try:
        plain = runs()
    finally:
        BlockCache.get, replay_mod._leaders = real_get, real_leaders
    _same((shared[0], shared[1]), (plain[0], plain[1]))
    if shared[3] is not None:
        _same((shared[2], shared[3]), (plain[2], plain[3]))


@pl.kernel
def read_next_rows(a, out, *, TM: int):
    """An AIV-only kernel (each AIV a block of its own, two to an AI core): AI core i's AIVs copy a's rows i TM
    into a workspace, TM / 2 rows each, then (after sync_all) read back rows (i+1) TM: the last AI core's AIVs read
    rows no block wrote."""
    K = a.shape[1]
    ws = pl.workspace([(pl.get_block_num() + 2) * (TM // 2), K], a.dtype)
    x_ub = pl.alloc(pl.UB, [TM // 2, K], a.dtype)
    with pl.section_vector():
        r = pl.get_block_idx() * (TM // 2)
        pl.load(x_ub, a, [r, 0])
        pl.store(ws, x_ub, [r, 0])
    pl.system.sync_all(core_type=pl.SyncCoreType.AIV_ONLY)
    with pl.section_vector():
        pl.load(x_ub, ws, [r + TM, 0])
        pl.store(out, x_ub, [r, 0])


def test_uninitialised_gm_read_of_a_follower_is_found(monkeypatch):
    """Blocks alike but for GM position: only the last block reads unwritten workspace rows."""
    import pyto.emulator.check.replay as replay_mod
    real = replay_mod._leaders
    followed = []

    def recording(spans, sched):
        followed.append(real(spans, sched))
        return followed[-1]

    monkeypatch.setattr(replay_mod, "_leaders", recording)
    a = np.ones((3 * 32, 64), np.float32)
    with pytest.raises(pyto.errors.UninitializedReadError, match="GM tensor 'ws'"):
        pyto.run(read_next_rows, a, np.zeros_like(a), blocks=6, TM=32)
    assert followed and followed[-1][2] != 2, "the last block should follow an earlier one"
