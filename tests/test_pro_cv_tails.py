"""Acc -> Vec with tails (move.md, "DualModeSplitM / DualModeSplitN 尾块处理"): a matmul + vector epilogue looping over
tiles whose last one is a tail (odd M, N of 33, N <= 16, M = 1), each AIV computing its share of the aligned-up
Acc as move.md says; and what an AIV that takes more than its share reads."""

import numpy as np
import pytest

import pyto
import pyto.language as pl
from pyto.testing import assert_close, matmul_bound, read_trace
from pro_kernels import acc, left, mat, right, vec

RNG = np.random.default_rng(29)
TILE, K = 128, 64
P = pl.PipeType
SPLIT_M, SPLIT_N = pl.AccToVecMode.DualModeSplitM, pl.AccToVecMode.DualModeSplitN


def share(valid: int, mode) -> tuple:
    """(AIV0's, AIV1's) rows (SplitM) or columns (SplitN) of a tail of `valid`, written out as move.md computes them:
    align up (to 2 / to 32), halve; AIV0 the first half (at most `valid`), AIV1 the rest."""
    aligned = (valid + 1) // 2 * 2 if mode is SPLIT_M else (valid + 31) // 32 * 32
    v0 = min(aligned // 2, valid)
    return v0, valid - v0


def test_the_share_rule_matches_move_md_examples():
    assert share(33, SPLIT_M) == (17, 16) and share(1, SPLIT_M) == (1, 0) and share(32, SPLIT_M) == (16, 16)
    assert share(33, SPLIT_N) == (32, 1) and share(65, SPLIT_N) == (48, 17) and share(10, SPLIT_N) == (10, 0)


def _epilogue(mode, wide_share: bool = False):
    """out = a @ b + r, tile by tile along M (SplitM: [TILE, N] tiles, a: [m, K]) or N (SplitN: [TILE, TILE] tiles, b:
    [K, n]), the last a tail: the cube sets the real valid shape, moves the Acc out with `mode` (the framework aligns
    it up), and each AIV sets its share on its tiles, adds its part of r and stores it. Tile groups under auto_mutex;
    cube and vector hand over by cross-core events (the vector side pre-credits, as ST datacopy/test_dual_mode_tail.py
    does). `wide_share`: AIV1 takes aligned/2 instead of the rest (the docs' misuse)."""
    split_m = mode is SPLIT_M
    n_fixed = TILE
    half = [TILE // 2, n_fixed] if split_m else [TILE, TILE // 2]

    @pl.jit(auto_mutex=True)
    def epilogue(a: pl.Tensor[[pl.DYNAMIC, K], pl.DT_FP16], b: pl.Tensor[[K, pl.DYNAMIC], pl.DT_FP16],
                 r: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP32],
                 out: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP32], total: pl.DT_INT32):
        dyn = dict(valid_shape=[-1, -1], compact=1)
        a_l1 = pl.make_tile_group(type=mat([TILE, K], **dyn), addrs=0x00000, mutex_ids=[0])
        b_l1 = pl.make_tile_group(type=mat([K, TILE], **dyn), addrs=0x20000, mutex_ids=[1])
        a_left = pl.make_tile_group(type=left([TILE, K]), addrs=0x0, mutex_ids=[2])
        b_right = pl.make_tile_group(type=right([K, TILE]), addrs=0x0, mutex_ids=[3])
        c_acc = pl.make_tile_group(type=acc([TILE, TILE], **dyn), addrs=0x0, mutex_ids=[4])
        part = pl.make_tile_group(type=vec(half, **dyn), addrs=0x00000, mutex_ids=[5])
        with pl.section_cube():
            if split_m:
                pl.load(b_l1.current(), b, [0, 0])
                pl.move(b_right.current(), b_l1.current())
            else:
                pl.load(a_l1.current(), a, [0, 0])
                pl.move(a_left.current(), a_l1.current())
            for i in pl.range(0, total, TILE):
                valid = pl.min(total - i, TILE)
                al, br, ac = a_left.current(), b_right.current(), c_acc.next()
                if split_m:
                    cur = a_l1.next()
                    pl.set_validshape(cur, [valid, K])
                    pl.set_validshape(al, [valid, K])
                    pl.load(cur, a, [i, 0])
                    pl.move(al, cur)
                    pl.set_validshape(ac, [valid, TILE])
                else:
                    cur = b_l1.next()
                    pl.set_validshape(cur, [K, valid])
                    pl.set_validshape(br, [K, valid])
                    pl.load(cur, b, [0, i])
                    pl.move(br, cur)
                    pl.set_validshape(ac, [TILE, valid])
                pl.matmul(ac, al, br)
                pl.system.wait_cross_core(pipe=P.FIX, event_id=1)
                pl.move(part.next(), ac, acc_to_vec_mode=mode)       # the framework aligns the Acc up itself
                pl.system.set_cross_core(pipe=P.FIX, event_id=0)
        with pl.section_vector():
            r_ub = pl.make_tile_group(type=vec(half, **dyn), addrs=0x10000, mutex_ids=[6])
            o_ub = pl.make_tile_group(type=vec(half, **dyn), addrs=0x20000, mutex_ids=[7])
            sub = pl.get_subblock_idx()
            pl.system.set_cross_core(pipe=P.MTE3, event_id=1)       # the first tile's UB is free
            for i in pl.range(0, total, TILE):
                valid = pl.min(total - i, TILE)
                aligned = (valid + 1) // 2 * 2 if split_m else (valid + 31) // 32 * 32
                v0 = pl.min(aligned // 2, valid)
                mine = v0 if sub == 0 else (aligned // 2 if wide_share else valid - v0)
                at = i + (0 if sub == 0 else v0)
                p, rt, o = part.next(), r_ub.next(), o_ub.next()
                pl.system.wait_cross_core(pipe=P.V, event_id=0)
                if mine > 0:
                    shape = [mine, n_fixed] if split_m else [TILE, mine]
                    offs = [at, 0] if split_m else [0, at]
                    for t in (p, rt, o):
                        pl.set_validshape(t, shape)
                    pl.load(rt, r, offs)
                    pl.add(o, p, rt)
                    pl.store(out, o, offs)
                if i + TILE < total:                                # (pyto: no set left unconsumed at the end)
                    pl.system.set_cross_core(pipe=P.MTE3, event_id=1)
    return epilogue


def _run(mode, total: int, room: int = 0, **kw):
    """Random a, b, r for `total` rows (SplitM) or columns (SplitN); r and out have `room` more beyond them."""
    split_m = mode is SPLIT_M
    m, n = (total, TILE) if split_m else (TILE, total)
    a = RNG.standard_normal((m, K)).astype(np.float16)
    b = RNG.standard_normal((K, n)).astype(np.float16)
    big = (m + room, n) if split_m else (m, n + room)
    r = RNG.standard_normal(big).astype(np.float32)
    out = np.full(big, np.nan, np.float32)
    _epilogue(mode, **kw)(a, b, r, out, total)
    return a, b, r, out


@pytest.mark.parametrize("mode,total", [(SPLIT_M, 289), (SPLIT_M, 288), (SPLIT_M, 257),
                                        (SPLIT_N, 289), (SPLIT_N, 288), (SPLIT_N, 266)],
                         ids=["M-tail33", "M-tail32", "M-tail1", "N-tail33", "N-tail32", "N-tail10"])
def test_matmul_epilogue_through_the_dual_modes_with_tails(mode, total):
    a, b, r, out = _run(mode, total)
    # the vector's fp32 "+ r" is one more term of the fp32 sum: matmul_bound with r as a bias bounds it
    assert_close(out, a.astype(np.float64) @ b.astype(np.float64) + r, matmul_bound(a, b, np.float32, bias=r),
                 f"{mode.name} epilogue over {total}")


@pytest.mark.parametrize("mode", [SPLIT_M, SPLIT_N], ids=["SplitM", "SplitN"])
def test_the_epilogue_in_timing_mode_with_a_trace(mode, tmp_path):
    total = 289
    m, n = (total, TILE) if mode is SPLIT_M else (TILE, total)
    rep = _epilogue(mode)(pyto.spec((m, K), "fp16"), pyto.spec((K, n), "fp16"), pyto.spec((m, n), "fp32"),
                          pyto.spec((m, n), "fp32"), total)
    assert rep.mode == "timing"
    path = tmp_path / "epilogue.json.gz"
    rep.save_trace(str(path))
    _, spans = read_trace(path)
    moves = [e for e in spans if e["name"].startswith("pl.move") and e["cat"] == "FIX"]
    assert len(moves) == 3             # one Acc -> Vec move per tile, the tail's too


@pytest.mark.parametrize("mode,cells", [(SPLIT_M, r"\[0:17, 0:128\] but part of it was never written \(16 of 272 32-byte"),
                                        (SPLIT_N, r"\[0:128, 0:32\] but part of it was never written \(384 of 512 32-byte")],
                         ids=["SplitM", "SplitN"])
def test_an_aiv_taking_the_aligned_half_reads_what_the_move_did_not_write(mode, cells):
    """M = 33: AIV1's share is 16 rows, not 17 (N = 33: 1 column, not 32). The hardware fills the rest of the half
    from Acc bytes outside the valid region (nothing defined); pyto leaves those UB bytes as they were, so the read
    of them is an UninitializedReadError naming the tile and how much of it was never written."""
    with pytest.raises(pyto.UninitializedReadError, match=r"pl\.add on PIPE_V of block 0 AIV1 reads UB tile 'part'"
                                                          + cells):
        _run(mode, 33, room=64, wide_share=True)


def test_an_aiv_taking_the_aligned_half_of_the_last_tile_runs_past_gm():
    """The same misuse where the tensor ends with the tile: AIV1's 17 rows reach past it (on hardware, a write past
    the tensor)."""
    with pytest.raises(pyto.OutOfBoundsError, match=r"pl\.load of the valid region \[17, 128\] of UB tile 'r_ub' at "
                                                    r"offset \[145, 0\] runs past the edge of GM tensor 'r' \[161, 128\]"):
        _run(SPLIT_M, 161, wide_share=True)


def test_split_n_needs_n_a_multiple_of_32_in_the_tile_shape():
    @pl.jit
    def kern(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        c = pl.make_tile(acc([32, 48]), addr=0x0)
        v = pl.make_tile(vec([32, 24]), addr=0x0)
        with pl.section_cube():
            pl.move(v, c, acc_to_vec_mode=SPLIT_N)
    with pytest.raises(pyto.AlignmentError, match=r"has N = 48 \(N/2 = 24\)"):
        kern(np.zeros((16, 16), np.float32))
