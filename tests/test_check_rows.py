"""The checked pass's record of a launch (pyto/emulator/check/rows.py): each block's accesses as integer rows, made
when the block is encoded, from which the messages' Instr and Access records are rebuilt. Every instruction rebuilt
from the rows is the traced one (op, pipe, core, index, line, name, accesses: the same objects, rectangles and
batches; the byte-level accesses of overlapping tiles and GM views as lower.py lowers them), whether its block kept
its own rows or shares an earlier block's encoding; a block whose tiles differ from its model's keeps its own."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pyto
from pyto.emulator.check import rows as rows_mod
from pyto.emulator.check.overlap import ByteAccess, ByteAccesses, ByteSpace, with_bytes
from pyto.emulator.data.gmviews import GMFootprint
from pyto.ir import GMTensor
from pyto_kernels.examples.matmul_pingpong import matmul_pingpong

from bmm_helpers import inputs, run_branch
from pro_kernels import overlapping_pair
from test_pro_cv_gm import _workspace_kernel
from test_vector import _two_stage_inputs, atomic_rows, two_stage

RNG = np.random.default_rng(7)


def _recorded(fn, monkeypatch) -> tuple:
    """Run fn (a launch, or several); return the last launch's LaunchRows and its blocks' traced programs, as the
    record was made (before the checks: also when the launch is refused)."""
    seen: list = []
    real = rows_mod.LaunchRows.add

    def add(self, first, programs, code):
        if not seen or seen[-1][0] is not self:
            seen.append((self, []))
        seen[-1][1].append(list(programs))
        return real(self, first, programs, code)

    monkeypatch.setattr(rows_mod.LaunchRows, "add", add)
    try:
        with pyto.run_options(cache=False):
            fn()
    except pyto.PytoError:
        pass
    assert seen, "no checked launch was recorded"
    return seen[-1]


def _same_access(got, want) -> None:
    assert type(got) is type(want), (got, want)
    if type(want.obj) is ByteSpace:          # one per (core, buffer), made afresh by each lowering
        assert (got.obj.core, got.obj.buf) == (want.obj.core, want.obj.buf)
    else:
        assert got.obj is want.obj, (got, want)
    assert got.rect == want.rect and got.batch == want.batch, (got, want)
    if type(want) in (ByteAccess, GMFootprint):
        assert got.of.obj is want.of.obj and got.of.rect == want.of.rect


def _check_launch(launch, blocks: list) -> None:
    """Every instruction of the launch rebuilt from its rows equals the traced one."""
    instrs = rows_mod.Instrs(launch.blocks, launch.tables)
    traced = [ins for progs in blocks for prog in progs for ins in prog.instrs]
    assert len(instrs) == len(traced)
    overlap = any(rec.model is None and rec.a_kind is not None for rec in launch.blocks)
    lowerings = [ByteAccesses() for _ in blocks]
    block_of = np.repeat(np.arange(len(blocks)), [sum(len(p.instrs) for p in progs) for progs in blocks])
    for i, want in enumerate(traced):
        got = instrs[i]
        assert (got.op, got.pipe, got.core, got.index, got.name) == (want.op, want.pipe, want.core, want.index,
                                                                      want.name)
        assert got.loc is want.loc
        assert (got.attrs.get("atomic") == "add") == (bool(want.dsts) and want.attrs.get("atomic") == "add")
        assert (got.attrs.get("phase") is not None) == (want.attrs.get("phase") is not None)
        for g, w in ((got.srcs, want.srcs), (got.dsts, want.dsts)):
            assert len(g) == len(w)
            for a, b in zip(g, w):
                _same_access(a, b)
        srcs, dsts = instrs.accesses(i)
        if overlap:
            by = lowerings[block_of[i]]
            lowered = (with_bytes(want.srcs, by), with_bytes(want.dsts, by))
        else:
            lowered = (want.srcs, want.dsts)
        for g, w in zip((srcs, dsts), lowered):
            assert len(g) == len(w), (want, g, w)
            for a, b in zip(g, w):
                _same_access(a, b)


def _launches():
    a16 = RNG.standard_normal((64, 256)).astype(np.float16)
    b16 = RNG.standard_normal((256, 64)).astype(np.float16)
    ab, bb, _ = inputs((4, 96, 64), (4, 64, 80), "fp16", None, seed=3)
    return {
        "pingpong, 4 blocks alike": lambda: pyto.run(matmul_pingpong, a16, b16, np.zeros((64, 64), np.float16),
                                                     blocks=4, TM=32, TN=32, TK=64),
        "two stages, cross-block race": lambda: pyto.run(two_stage, *_two_stage_inputs(3), blocks=3, TM=32,
                                                         SYNC=False, SHIFT=1),
        "atomic adds": lambda: pyto.run(atomic_rows, np.ones((8, 8, 40), np.float32), np.zeros((8, 40), np.float32),
                                        blocks=4, ATOMIC=True),
        "asw_basic": lambda: run_branch(ab, bb, branch="asw_basic"),
        "merge_batch": lambda: run_branch(ab, bb, branch="merge_batch"),
        "stream_k": lambda: run_branch(ab, bb, branch="stream_k"),
        "GM view of a workspace": lambda: _workspace_kernel()(
            RNG.standard_normal((64, 128)).astype(np.float16), np.zeros(64 * 128 + 64 * 256, np.float16),
            np.zeros((64, 128), np.float16)),
        "timing mode, specs": lambda: pyto.run(matmul_pingpong, pyto.spec((128, 256), "fp16"),
                                               pyto.spec((256, 128), "fp16"), pyto.spec((128, 128), "fp16"),
                                               blocks=8, TM=32, TN=32, TK=64, mode="timing"),
    }


@pytest.mark.parametrize("case", list(_launches()))
def test_every_instruction_is_rebuilt_from_the_rows(case, monkeypatch):
    launch, blocks = _recorded(_launches()[case], monkeypatch)
    if case == "GM view of a workspace":       # its accesses through the view are followed onto the root
        assert any(rec.a_kind is not None for rec in launch.blocks)
    if "alike" in case or "specs" in case:
        assert any(rec.model is not None for rec in launch.blocks), "no block shared another's rows"
    _check_launch(launch, blocks)


def test_blocks_alike_keep_only_their_gm_moves(monkeypatch):
    """8 blocks of one encoding: one keeps its rows, the others their tile objects and GM moves, a small part of
    the rows; their rows expand to what their own walk gives."""
    launch, blocks = _recorded(_launches()["timing mode, specs"], monkeypatch)
    models = [rec for rec in launch.blocks if rec.model is None]
    followers = [rec for rec in launch.blocks if rec.model is not None]
    assert len(models) == 1 and len(followers) == 7
    assert all(rec.nbytes() * 5 < models[0].nbytes() and rec.shift is not None for rec in followers)
    for rec, progs in zip(launch.blocks, blocks):
        if rec.model is None:
            continue
        alone = rows_mod.BlockRows(rec.first, rec.code, progs)
        alone.own(progs, launch.tables, False)
        for got, want in zip(rec.rows(), alone.rows()):
            np.testing.assert_array_equal(got, want)


def test_a_followers_rows_read_back_alike_in_each_form(monkeypatch):
    """A follower's GM rows kept as a shift per tensor, as indices into distinct moves, or as rectangles: each
    form gives the same rows, all of them or any ascending selection (the checked pass takes a follower's GM
    rows only)."""
    launch, _ = _recorded(_launches()["timing mode, specs"], monkeypatch)
    rec = next(r for r in launch.blocks if r.model is not None)
    want = rec.rows()
    model = rec.model
    gm = model.gm_rows
    moved = np.stack([want[2][gm] - model.a_batch[gm], want[1][gm, 0] - model.a_rect[gm, 0],
                      want[1][gm, 2] - model.a_rect[gm, 2]], axis=1)
    shift = rec.shift
    moves, which = rows_mod._distinct_rows(moved)
    np.testing.assert_array_equal(moves[which], moved)
    forms = {"shift": {}, "moves": dict(shift=None, g_moves=moves, g_move=which.astype(np.uint8)),
             "rects": dict(shift=None, g_rect=want[1][gm], g_batch=want[2][gm])}
    rng = np.random.default_rng(1)
    m = len(want[0])
    for name, fields in forms.items():
        for k, v in fields.items():
            setattr(rec, k, v)
        try:
            for sel in (None, np.flatnonzero(rng.random(m) < 0.3), gm[rng.random(len(gm)) < 0.5], gm[:0]):
                got = rec.rows(sel)
                for g, w in zip(got, want):
                    np.testing.assert_array_equal(g, w if sel is None else w[sel], err_msg=name)
        finally:
            rec.shift, rec.g_move, rec.g_moves, rec.g_rect, rec.g_batch = shift, None, None, None, None


def test_a_block_whose_tile_differs_keeps_its_own_rows(monkeypatch):
    """A tile at another address than in the model block (what the check's messages name): no sharing."""
    launch, blocks = _recorded(_launches()["timing mode, specs"], monkeypatch)
    model, progs = launch.blocks[0], blocks[1]
    rec = rows_mod.BlockRows(launch.blocks[1].first, model.code, progs)
    store = next(a.obj for prog in progs for ins in prog.instrs for a in ins.dsts if type(a.obj) is not GMTensor)
    assert rec.share(model, progs, launch.tables)
    store.addr += 512
    try:
        assert not rows_mod.BlockRows(launch.blocks[1].first, model.code, progs).share(model, progs, launch.tables)
    finally:
        store.addr -= 512


@settings(max_examples=12, deadline=None, derandomize=True)
@given(st.integers(0, 64), st.integers(1, 8), st.integers(0, 64), st.integers(1, 8))
def test_overlapping_tiles_are_rebuilt_with_their_bytes(a_blk, a_rows, b_blk, b_rows):
    """Two tiles placed at random addresses (some overlap, some are one storage): the byte-level accesses the
    rows keep are those overlap.with_bytes makes of the traced instructions."""
    ax, bx = a_blk * 32, b_blk * 32
    k = overlapping_pair(ax, a_rows, bx, b_rows)
    with pytest.MonkeyPatch.context() as mp:
        launch, blocks = _recorded(lambda: k(RNG.random((8, 64), np.float32), np.zeros((8, 64), np.float32)), mp)
    overlap = ax < bx + b_rows * 256 and bx < ax + a_rows * 256 and (ax, a_rows) != (bx, b_rows)  # (else one store)
    assert any(rec.a_kind is not None for rec in launch.blocks) == overlap
    _check_launch(launch, blocks)
