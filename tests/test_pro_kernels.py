"""PyPTO-Pro kernels on pyto, modelled on PyPTO-Pro's documented examples (issue 18's "Must show"): each runs its
body unmodified, computes numpy's numbers, and each documented misuse becomes its named error."""
import numpy as np
import pytest

import pyto
import pyto.language as pl
from pro_kernels import KS, K1, M1, N1, TILE, acc, gm_to_l0, grouped_matmul, k_split, left, make_tile_add, \
    manual_mutex, mat, matmul_tiles, right

RNG = np.random.default_rng(18)


def _fp16(*shape):
    return RNG.standard_normal(shape).astype(np.float16)


def _ref(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


def _matmul_tol(k: int) -> float:
    """fp16 inputs are exact in fp32 products; the fp32 sum of k terms of |a b| ~ 1 errs below k * 2^-24 * sum|ab|
    (a deterministic bound, loose on random signs): with standard normal inputs, sum|ab| <= 4 k comfortably."""
    return k * 2.0 ** -24 * 4 * k


def test_tile_groups_under_auto_mutex_compute_the_matmul():
    a, b = _fp16(M1, K1), _fp16(K1, N1)
    c = np.zeros((M1, N1), np.float32)
    rep = grouped_matmul()[None, 1](a, b, c)
    assert isinstance(rep, pyto.Report) and rep.mode == "full"
    np.testing.assert_allclose(c, _ref(a, b), rtol=0, atol=_matmul_tol(K1))


def test_the_same_kernel_without_auto_mutex_races():
    a, b = _fp16(M1, K1), _fp16(K1, N1)
    c = np.zeros((M1, N1), np.float32)
    with pytest.raises(pyto.RaceError, match=r"RAW hazard .*L1 tile 'a_l1\[0\]'.*\n.*PIPE_MTE2.*pl\.load\(cur_a"):
        grouped_matmul(auto_mutex=False)[None, 1](a, b, c)
    assert not c.any()                      # nothing written back on an error


def test_k_split_loop_with_phases_and_the_layout_transform():
    a, b = _fp16(TILE, KS), _fp16(KS, TILE)
    c = np.zeros((TILE, TILE), np.float32)
    k_split()(a, b, c)
    np.testing.assert_allclose(c, _ref(a, b), rtol=0, atol=_matmul_tol(KS))


@pytest.mark.parametrize("kw, rule", [
    (dict(transform=False), r"set_mm_layout_transform\(enabled=True\) is not in force"),
    (dict(fractal=512), r"whose fractal is 512.*fractal=1024")])
def test_k_split_without_its_board_rules_is_reported(kw, rule):
    a, b = _fp16(TILE, KS), _fp16(KS, TILE)
    with pytest.raises(pyto.KernelError, match=rule):
        k_split(**kw)(a, b, np.zeros((TILE, TILE), np.float32))


def test_k_split_rule_is_the_950s():
    """Atlas A2 has no layout-transform register: the same K split without it is fine there."""
    a, b = _fp16(TILE, KS), _fp16(KS, TILE)
    c = np.zeros((TILE, TILE), np.float32)
    pyto.run(k_split(transform=False), a, b, c, chip="atlas-a2")
    np.testing.assert_allclose(c, _ref(a, b), rtol=0, atol=_matmul_tol(KS))


def test_make_tile_kernel_synchronised_by_flags():
    a, b = _fp16(64, 128), _fp16(64, 128)
    out = np.zeros((64, 128), np.float16)
    make_tile_add()(a, b, out)
    # fp16 + fp16 rounded once to fp16: within half an fp16 ulp of the exact sum
    exact = a.astype(np.float64) + b.astype(np.float64)
    assert np.all(np.abs(out - exact) <= np.spacing(np.abs(exact).astype(np.float16)).astype(np.float64) / 2 + 1e-12)


@pytest.mark.parametrize("drop, first, second", [("sync_in", "PIPE_MTE2", "PIPE_V"),
                                                 ("sync_out", "PIPE_V", "PIPE_MTE3")])
def test_make_tile_kernel_missing_a_flag_races(drop, first, second):
    a, b = _fp16(64, 128), _fp16(64, 128)
    with pytest.raises(pyto.RaceError, match=rf"RAW hazard .*\n  {first} .*\n  {second} "):
        make_tile_add(**{drop: False})(a, b, np.zeros((64, 128), np.float16))


def test_manual_mutex_kernel():
    a, b = RNG.random((64, 64), np.float32), RNG.random((64, 64), np.float32)
    out = np.zeros((64, 64), np.float32)
    manual_mutex()(a, b, out)
    np.testing.assert_array_equal(out, (a + b).astype(np.float32))   # one fp32 add: exactly numpy's


def test_second_lock_of_a_held_id_on_the_same_pipe_deadlocks():
    a = np.ones((64, 64), np.float32)
    with pytest.raises(pyto.DeadlockError, match=r"PIPE_MTE2: .*mutex_lock.*\n.*mutex id 0 .*which this pipe holds "
                                                 r"itself.*queued behind this instruction"):
        manual_mutex("double")(a, a, np.zeros_like(a))


def test_an_unpaired_lock_at_the_end_is_a_sync_error():
    a = np.ones((64, 64), np.float32)
    with pytest.raises(pyto.SyncError, match=r"mutex_lock of mutex id 2 on PIPE_MTE3 is never unlocked"):
        manual_mutex("unpaired")(a, a, np.zeros_like(a))


# ---- docs/cube_phase.md §6's three misuse cases (phase.md's 错误案例), PyPTO-Pro's spelling ------------------------------------
def _phase_case(mat_phase, store_phase, loops: int):
    @pl.jit
    def phase_case(a: pl.Tensor[[TILE, TILE], pl.DT_FP16], b: pl.Tensor[[TILE, TILE], pl.DT_FP16],
                   c: pl.Tensor[[TILE, TILE], pl.DT_FP32]):
        tiles = matmul_tiles(TILE, TILE, TILE, groups=True)
        al, br, ac = tiles[2:]
        with pl.section_cube():
            for _ in pl.range(loops):
                gm_to_l0(tiles, a, b, barriers=False)
                pl.matmul(ac, al, br, phase=mat_phase)
                pl.store(c, ac, [0, 0], phase=store_phase)
    return phase_case


def test_seed001_case1_partial_matmul_then_final_store_deadlocks():
    a = _fp16(TILE, TILE)
    with pytest.raises(pyto.DeadlockError, match=r"PIPE_FIX: .*pl\.store.*\n.*unit_flag\(L0C tile 'ac'.*\) == 1, is 0"):
        _phase_case(pl.AccPhase.Partial, pl.STPhase.Final, 1)(a, a, np.zeros((TILE, TILE), np.float32))


def test_seed001_case2_phased_matmul_then_unphased_store_races():
    a = _fp16(TILE, TILE)
    with pytest.raises(pyto.RaceError, match=r"L0C tile 'ac'.*\n  PIPE_M .*\n  PIPE_FIX .*\n.*\n  hint: one side "
                                             r"carries a phase"):
        _phase_case(pl.AccPhase.Final, None, 1)(a, a, np.zeros((TILE, TILE), np.float32))


def test_seed001_case3_final_matmul_partial_store_in_a_loop_deadlocks():
    a = _fp16(TILE, TILE)
    with pytest.raises(pyto.DeadlockError, match=r"PIPE_M: .*pl\.matmul.*\n.*unit_flag\(L0C tile 'ac'.*\) == 0, is 1"):
        _phase_case(pl.AccPhase.Final, pl.STPhase.Partial, 2)(a, a, np.zeros((TILE, TILE), np.float32))


def test_phase_unspecified_is_no_phase():
    """AccPhase/STPhase.Unspecified (PyPTO-Pro's default) mean software sync: auto_mutex orders M and FIX."""
    a, b = _fp16(TILE, TILE), _fp16(TILE, TILE)
    c = np.zeros((TILE, TILE), np.float32)
    _phase_case(pl.AccPhase.Unspecified, pl.STPhase.Unspecified, 2)(a, b, c)
    np.testing.assert_allclose(c, _ref(a, b), rtol=0, atol=_matmul_tol(TILE))


# ---- the accumulator a previous tile left -------------------------------------------------------------------------
@pl.jit
def stale_accumulator(a: pl.Tensor[[64, 64], pl.DT_FP16], b: pl.Tensor[[64, 64], pl.DT_FP16],
                      c: pl.Tensor[[2, 64, 64], pl.DT_FP32]):
    """Two "tiles" into one Acc tile: the first with matmul, the second wrongly with matmul_acc (PyPTO-Pro's negative
    test bad_matmul_acc_reuses_stale_accumulator): the second result carries the first."""
    tiles = matmul_tiles(64, 64, 64, groups=True)
    al, br, ac = tiles[2:]
    with pl.section_cube():
        gm_to_l0(tiles, a, b, barriers=False)
        pl.matmul(ac, al, br)
        pl.store(c, ac, [0, 0, 0])
        pl.matmul_acc(ac, ac, al, br)
        pl.store(c, ac, [1, 0, 0])


def test_matmul_acc_on_a_stale_accumulator_adds_to_it():
    a, b = _fp16(64, 64), _fp16(64, 64)
    c = np.zeros((2, 64, 64), np.float32)
    stale_accumulator(a, b, c)
    p = _ref(a, b)
    np.testing.assert_allclose(c[0], p, rtol=0, atol=_matmul_tol(64))
    np.testing.assert_allclose(c[1], 2 * p, rtol=0, atol=3 * _matmul_tol(64))     # the old value plus the product
    # and exactly what the hardware's fp32 accumulator holds: the second is the first plus the same product, in fp32
    np.testing.assert_array_equal(c[1], (c[0] + c[0]).astype(np.float32))


# ---- multi-core ---------------------------------------------------------------------------------------------------
BLOCKS, ROWS = 8, 64


@pl.jit
def strided_rows(a: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP16], b: pl.Tensor[[64, 64], pl.DT_FP16],
                 c: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32]):
    """Row tiles of C = A @ B dealt round robin: tile t to block t mod get_block_num()."""
    a_l1 = pl.make_tile_group(type=mat([ROWS, 64]), addrs=0x00000, mutex_ids=[0, 1])
    b_l1 = pl.make_tile_group(type=mat([64, 64]), addrs=0x10000, mutex_ids=[2])
    al = pl.make_tile_group(type=left([ROWS, 64]), addrs=0x0, mutex_ids=[3])
    br = pl.make_tile_group(type=right([64, 64]), addrs=0x0, mutex_ids=[4]).current()
    ac = pl.make_tile_group(type=acc([ROWS, 64]), addrs=0x0, mutex_ids=[5, 6])
    with pl.section_cube():
        pl.load(b_l1.current(), b, [0, 0])
        pl.move(br, b_l1.current())
        for t in pl.range(pl.get_block_idx(), a.shape[0] // ROWS, pl.get_block_num()):
            cur = a_l1.next()
            pl.load(cur, a, [t * ROWS, 0])
            left_t = al.current()
            pl.move(left_t, cur)
            out = ac.next()
            pl.matmul(out, left_t, br)
            pl.store(c, out, [t * ROWS, 0])


def test_eight_blocks_striding_with_get_block_idx():
    tiles = 19                                   # not a multiple of 8: blocks get 3 or 2 tiles
    a, b = _fp16(tiles * ROWS, 64), _fp16(64, 64)
    c = np.zeros((tiles * ROWS, 64), np.float32)
    rep = strided_rows[None, BLOCKS](a, b, c)
    assert rep.blocks == BLOCKS
    np.testing.assert_allclose(c, _ref(a, b), rtol=0, atol=_matmul_tol(64))


def test_every_block_striding_from_zero_duplicates_stores_and_races():
    """The bug the block index mapping exists to avoid: every block doing every tile stores each twice, a race."""
    @pl.jit
    def everyone(a: pl.Tensor[[128, 64], pl.DT_FP16], b: pl.Tensor[[64, 64], pl.DT_FP16],
                 c: pl.Tensor[[128, 64], pl.DT_FP32]):
        a_l1, b_l1, al, br, ac = matmul_tiles(64, 64, 64, groups=True)
        with pl.section_cube():
            pl.load(b_l1, b, [0, 0])
            pl.move(br, b_l1)
            for t in pl.range(0, 2):
                pl.load(a_l1, a, [t * 64, 0])
                pl.move(al, a_l1)
                pl.matmul(ac, al, br)
                pl.store(c, ac, [t * 64, 0])
    a, b = _fp16(128, 64), _fp16(64, 64)
    with pytest.raises(pyto.RaceError, match=r"WAW hazard detected at GM: GM tensor 'c'.*\n.*block 0.*\n.*block 1"):
        everyone[None, 2](a, b, np.zeros((128, 64), np.float32))
