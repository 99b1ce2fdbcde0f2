"""PyPTO-Pro's synchronisation on pyto: cross-core events (modes and counters), sync_all's core types, flags' ids,
the bar_mte2 rule, and PyPTO-Pro's block numbering."""
import numpy as np
import pytest

import pyto
import pyto.language as pl
from pyto.testing import assert_close, matmul_bound
from pro_kernels import acc, gm_to_l0, l1_matmul_store, left, mat, matmul_tiles, reload_slot, right, two_phase, vec

RNG = np.random.default_rng(5)
M, N, K = 32, 64, 32


def _handover(wait: bool = True, mode=pl.CrossCoreSyncMode.INTRA_BLOCK):
    """Cube: C = A @ B, moved to both AIVs' UB (DualModeSplitM) and announced with set_cross_core; vector: wait,
    add 1, store its half. All tiles are make_tile tiles: only the cross-core event orders the hand-over."""
    @pl.jit
    def handover(a: pl.Tensor[[M, K], pl.DT_FP16], b: pl.Tensor[[K, N], pl.DT_FP16],
                 c: pl.Tensor[[M, N], pl.DT_FP32]):
        tiles = matmul_tiles(M, K, N)
        ac = tiles[4]
        half = pl.make_tile(vec([M // 2, N]), addr=0x0)
        out = pl.make_tile(vec([M // 2, N]), addr=0x4000)
        with pl.section_cube():
            gm_to_l0(tiles, a, b)
            pl.matmul(ac, tiles[2], tiles[3])
            pl.system.sync_src(set_pipe=pl.PipeType.M, wait_pipe=pl.PipeType.FIX, event_id=0)
            pl.system.sync_dst(set_pipe=pl.PipeType.M, wait_pipe=pl.PipeType.FIX, event_id=0)
            pl.move(half, ac, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM)
            pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=3, sync_mode=mode)
        with pl.section_vector():
            if wait:
                pl.system.wait_cross_core(pipe=pl.PipeType.V, event_id=3, sync_mode=mode)
            pl.add(out, half, 1.0)
            pl.system.bar_all()
            pl.store(c, out, [pl.get_subblock_idx() * (M // 2), 0])
    return handover


def test_cube_to_vector_hand_over_by_a_cross_core_event():
    a, b = RNG.standard_normal((M, K)).astype(np.float16), RNG.standard_normal((K, N)).astype(np.float16)
    c = np.zeros((M, N), np.float32)
    _handover()(a, b, c)
    ref = a.astype(np.float64) @ b.astype(np.float64) + 1.0
    # the vector's fp32 "+ 1" is one more term of the fp32 sum: matmul_bound with a bias of ones bounds it
    assert_close(c, ref, matmul_bound(a, b, np.float32, bias=np.ones(N)), "cube -> vector hand-over")


def test_a_missing_cross_core_wait_races():
    a = np.ones((M, K), np.float16)
    with pytest.raises(pyto.RaceError, match=r"RAW hazard detected at UB: UB tile 'half'.*\n  PIPE_FIX \(AIC of block "
                                             r"0\) write: .*pl\.move\(half, ac.*\n  PIPE_V \(AIV[01] of block 0\) read"):
        _handover(wait=False)(a, np.ones((K, N), np.float16), np.zeros((M, N), np.float32))


def test_unicast_on_the_aivs_side_pairs_with_intra_block():
    """UNICAST_BLOCK on an AIV is the same intra-block event as INTRA_BLOCK (backend_cce_ops.cpp: set/wait_intra_block
    for both), so the AIVs' UNICAST waits meet the AIC's INTRA_BLOCK set."""
    @pl.jit
    def k(a: pl.Tensor[[M, K], pl.DT_FP16], c: pl.Tensor[[M, N], pl.DT_FP32]):
        with pl.section_cube():
            pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=2)
        with pl.section_vector():
            pl.system.wait_cross_core(pipe=pl.PipeType.V, event_id=2, sync_mode=pl.CrossCoreSyncMode.UNICAST_BLOCK)
    k(np.zeros((M, K), np.float16), np.zeros((M, N), np.float32))


def _aiv_to_aic(sender: int, aic_event: int, aic_mode):
    @pl.jit
    def k(a: pl.Tensor[[16, 16], pl.DT_FP16]):
        with pl.section_vector():
            if pl.get_subblock_idx() == sender:
                pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=5)
        with pl.section_cube():
            pl.system.wait_cross_core(pipe=pl.PipeType.MTE1, event_id=aic_event, sync_mode=aic_mode)
    return k


def test_unicast_on_the_aic_names_one_aiv():
    """An AIC's UNICAST_BLOCK event e is AIV0's e for e < 16 and AIV1's e - 16 above (the ids 0..31 of the AIC side)."""
    x = np.zeros((16, 16), np.float16)
    uni = pl.CrossCoreSyncMode.UNICAST_BLOCK
    _aiv_to_aic(0, 5, uni)(x)
    _aiv_to_aic(1, 21, uni)(x)
    with pytest.raises(pyto.DeadlockError, match=r"cross-core event 5 \(AIV0->AIC, INTRA_BLOCK/UNICAST_BLOCK\): never "
                                                 r"set by a matching pl\.system\.set_cross_core"):
        _aiv_to_aic(1, 5, uni)(x)


def test_intra_block_on_the_aic_waits_for_both_aivs():
    x = np.zeros((16, 16), np.float16)
    with pytest.raises(pyto.DeadlockError, match=r"cross-core event 5 \(AIV1->AIC"):
        _aiv_to_aic(0, 5, pl.CrossCoreSyncMode.INTRA_BLOCK)(x)


def test_inter_subblock_orders_the_two_aivs_of_a_block():
    @pl.jit
    def k(x: pl.Tensor[[2, 16, 64], pl.DT_FP32], out: pl.Tensor[[16, 64], pl.DT_FP32]):
        t = pl.make_tile(vec([16, 64]), addr=0)
        with pl.section_cube():
            pass                                   # a mix kernel: the two AIVs of a block exist together
        with pl.section_vector():
            s = pl.get_subblock_idx()
            pl.load(t, x, [s, 0, 0])
            pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE3, event_id=0)
            pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE3, event_id=0)
            if s == 1:
                pl.system.wait_cross_core(pipe=pl.PipeType.MTE3, event_id=1,
                                          sync_mode=pl.CrossCoreSyncMode.INTER_SUBBLOCK)
            pl.store(out, t, [0, 0])
            if s == 0:
                pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=1,
                                         sync_mode=pl.CrossCoreSyncMode.INTER_SUBBLOCK)
    x = RNG.random((2, 16, 64), np.float32)
    out = np.zeros((16, 64), np.float32)
    k(x, out)
    np.testing.assert_array_equal(out, x[1])       # AIV1 stores after AIV0: its rows win


def test_more_than_15_pending_sets_is_a_sync_error():
    """The AIVs consume event 1 only after event 2, which the AIC sets after 16 sets of event 1."""
    @pl.jit
    def k(x: pl.Tensor[[16, 16], pl.DT_FP16]):
        with pl.section_cube():
            for _ in pl.range(16):
                pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=1)
            pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=2)
        with pl.section_vector():
            pl.system.wait_cross_core(pipe=pl.PipeType.V, event_id=2)
            for _ in pl.range(16):
                pl.system.wait_cross_core(pipe=pl.PipeType.V, event_id=1)
    with pytest.raises(pyto.SyncError, match=r"already has 15 sets waiting unconsumed"):
        k(np.zeros((16, 16), np.float16))


def _neighbours(wait: bool = True, skip_set_on=None, cube: bool = False):
    """Core i writes row i of a workspace, sets INTER_BLOCK event 3, waits for it, then reads row i + 1: every AIV of an
    AIV-only launch, or (cube) every AIC of a cube-only one."""
    mode = pl.CrossCoreSyncMode.INTER_BLOCK

    @pl.jit
    def k(x: pl.Tensor[[4, 64], pl.DT_FP32], out: pl.Tensor[[4, 64], pl.DT_FP32]):
        ws = pl.workspace([4, 64], pl.DT_FP32)
        t, u = pl.make_tile(vec([1, 64]), addr=0), pl.make_tile(vec([1, 64]), addr=0x100)
        with pl.section_vector():
            i = pl.get_block_idx()
            pl.load(t, x, [i, 0])
            pl.system.bar_all()
            pl.store(ws, t, [i, 0])
            if i != skip_set_on:
                pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=3, sync_mode=mode)
            if wait:
                pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=3, sync_mode=mode)
            pl.load(u, ws, [(i + 1) % 4, 0])
            pl.system.bar_all()
            pl.store(out, u, [i, 0])
    return k


def test_inter_block_events_order_every_aiv_of_the_launch():
    x = RNG.random((4, 64), np.float32)
    out = np.zeros_like(x)
    _neighbours()[None, 4](x, out)
    np.testing.assert_array_equal(out, np.roll(x, -1, axis=0))


def test_without_the_inter_block_wait_the_neighbours_race():
    x = np.ones((4, 64), np.float32)
    with pytest.raises(pyto.RaceError, match=r"RAW hazard detected at GM: GM tensor 'ws'.*\n  PIPE_MTE3 \(AIV \d\) write.*"
                                             r"\n  PIPE_MTE2 \(AIV \d\) read"):
        _neighbours(wait=False)[None, 4](x, np.zeros_like(x))


def test_an_inter_block_round_a_core_never_sets_deadlocks():
    x = np.ones((4, 64), np.float32)
    with pytest.raises(pyto.DeadlockError, match=r"cross-core event 3 \(INTER_BLOCK over every AIV of the launch\): 3 of "
                                                 r"the 4 sets its round needs were raised"):
        _neighbours(skip_set_on=2)[None, 4](x, np.zeros_like(x))


@pl.jit
def aic_neighbours(a: pl.Tensor[[64, 16], pl.DT_FP16], eye: pl.Tensor[[16, 16], pl.DT_FP16],
                   eye32: pl.Tensor[[16, 16], pl.DT_FP32], out: pl.Tensor[[64, 16], pl.DT_FP32]):
    """AIC i stores its 16 rows of A (A @ I) to a workspace, INTER_BLOCK over the AICs, then reads the next AIC's rows
    back through the cube (W @ I in fp32) into out: out's block i is A's block i + 1."""
    ws = pl.workspace([64, 16], pl.DT_FP32)
    tiles = matmul_tiles(16, 16, 16)
    w_l1 = pl.make_tile(mat([16, 16], pl.DT_FP32), addr=0x20000)
    e_l1 = pl.make_tile(mat([16, 16], pl.DT_FP32), addr=0x30000)
    w_l0a = pl.make_tile(left([16, 16], pl.DT_FP32), addr=0x8000)
    e_l0b = pl.make_tile(right([16, 16], pl.DT_FP32), addr=0x8000)
    ac2 = pl.make_tile(acc([16, 16]), addr=0x8000)
    with pl.section_cube():
        i = pl.get_block_idx()
        gm_to_l0(tiles, a, eye, (i * 16, 0))
        pl.matmul(tiles[4], tiles[2], tiles[3])
        pl.system.bar_all()
        pl.store(ws, tiles[4], [i * 16, 0])
        pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=1, sync_mode=pl.CrossCoreSyncMode.INTER_BLOCK)
        pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=1, sync_mode=pl.CrossCoreSyncMode.INTER_BLOCK)
        pl.load(w_l1, ws, [((i + 1) % 4) * 16, 0])
        pl.load(e_l1, eye32, [0, 0])
        l1_matmul_store(out, ac2, w_l0a, e_l0b, w_l1, e_l1, (i * 16, 0))


def test_inter_block_events_over_the_aics():
    a = RNG.standard_normal((64, 16)).astype(np.float16)
    out = np.zeros((64, 16), np.float32)
    rep = aic_neighbours[None, 4](a, np.eye(16, dtype=np.float16), np.eye(16, dtype=np.float32), out)
    assert rep.blocks == 4
    np.testing.assert_array_equal(out, np.roll(a.astype(np.float32), -16, axis=0))    # exact: products by 0 and 1


def test_an_aiv_only_kernel_has_no_aic_to_pair_with():
    @pl.jit
    def k(x: pl.Tensor[[16, 16], pl.DT_FP16]):
        with pl.section_vector():
            pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=1)
    with pytest.raises(pyto.SyncError, match=r"this AIV-only kernel runs no AIC"):
        k(np.zeros((16, 16), np.float16))


# ---- sync_all ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("inside", [True, False])
def test_sync_all_orders_every_aiv_of_an_aiv_only_kernel(inside):
    x = RNG.random((4, 64), np.float32)
    out = np.zeros_like(x)
    two_phase(pl.SyncCoreType.AIV_ONLY, inside)[None, 4](x, out)
    np.testing.assert_array_equal(out, np.roll(x, -1, axis=0))


def test_sync_all_over_aivs_only_in_a_mix_kernel_is_not_built():
    x = np.zeros((4, 64), np.float32)
    with pytest.raises(pyto.UnsupportedError, match=r"a sync_all over AIV_ONLY cores of a kernel that runs both"):
        two_phase(pl.SyncCoreType.AIV_ONLY, True, cube=True)[None, 2](x, np.zeros_like(x))


def test_sync_all_reserves_cross_core_events_11_to_14():
    x = np.zeros((4, 64), np.float32)
    with pytest.raises(pyto.SyncError, match=r"cross-core event 12 is one of the ids 11\.\.14 pl\.system\.sync_all uses"):
        two_phase(pl.SyncCoreType.MIX, True, cube=True, event=12)[None, 2](x, np.zeros_like(x))


def test_without_sync_all_the_neighbours_race():
    with pytest.raises(pyto.RaceError, match=r"GM: GM tensor 'ws'.*\n.*\(AIV \d\).*\n.*\(AIV \d\).*\n.*\n  fix: blocks "
                                             r"are ordered only by pl\.system\.sync_all\(core_type=pl\.SyncCoreType"
                                             r"\.AIV_ONLY\)"):
        two_phase(None, True)[None, 4](np.zeros((4, 64), np.float32), np.zeros((4, 64), np.float32))


# ---- flags, barriers ------------------------------------------------------------------------------------------
def _flagged(event_id):
    @pl.jit
    def k(x: pl.Tensor[[16, 64], pl.DT_FP32]):
        with pl.section_vector():
            pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=event_id)
            pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=event_id)
    return k


def test_event_ids_are_0_to_15_on_the_950_and_0_to_7_on_a2():
    x = np.zeros((16, 64), np.float32)
    _flagged(15)(x)
    with pytest.raises(pyto.SyncError, match=r"event_id 16 out of range 0\.\.15 on ascend950pr"):
        _flagged(16)(x)
    with pytest.raises(pyto.SyncError, match=r"event_id 8 out of range 0\.\.7 on atlas-a2"):
        pyto.run(_flagged(8), x, chip="atlas-a2")


def test_a_flag_set_twice_before_its_wait_is_a_sync_error():
    @pl.jit
    def k(x: pl.Tensor[[16, 64], pl.DT_FP32]):
        with pl.section_vector():
            pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=4)
            pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=4)
            pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=4)
            pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=4)
    with pytest.raises(pyto.SyncError, match=r"set again before a sync_dst consumed"):
        k(np.zeros((16, 64), np.float32))


def test_a_wait_nothing_sets_deadlocks_naming_the_event():
    @pl.jit
    def k(x: pl.Tensor[[16, 64], pl.DT_FP32]):
        with pl.section_vector():
            pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=6)
    with pytest.raises(pyto.DeadlockError, match=r"PIPE_V: .*sync_dst.*\n.*event \(PipeType\.MTE2->PipeType\.V, "
                                                 r"event_id 6\): never set by a matching pl\.system\.sync_src"):
        k(np.zeros((16, 64), np.float32))


@pytest.mark.parametrize("read_between, barrier", [(True, False), (False, True), (True, True)])
def test_a_tile_reloaded_after_a_read_or_a_barrier(read_between, barrier):
    a = RNG.random((64, 64), np.float32)
    out = np.zeros((32, 64), np.float32)
    reload_slot(read_between, barrier)(a, out)
    np.testing.assert_array_equal(out, a[32:] + np.float32(1.0))


# ---- block numbering ----------------------------------------------------------------------------------------------
def test_block_ids_of_a_mix_kernel():
    seen = []

    @pl.jit
    def k(x: pl.Tensor[[16, 16], pl.DT_FP16]):
        with pl.section_cube():
            seen.append(("cube", pl.get_block_idx(), pl.get_block_num(), pl.get_subblock_idx(),
                         pl.get_subblock_num()))
        with pl.section_vector():
            seen.append(("vec", pl.get_block_idx(), pl.get_block_num(), pl.get_subblock_idx(), pl.get_subblock_num()))
        seen.append(("core", pl.get_block_idx() // pl.get_subblock_num()))
    k[None, 3](np.zeros((16, 16), np.float16))
    vec_seen = {v for v in seen if v[0] == "vec"}
    assert {v for v in seen if v[0] == "cube"} == {("cube", b, 3, 0, 1) for b in range(3)}
    assert vec_seen >= {("vec", 2 * b + s, 3, s, 2) for b in range(3) for s in range(2)}
    assert {v for v in seen if v[0] == "core"} == {("core", b) for b in range(3)}


def test_block_ids_of_an_aiv_only_kernel():
    seen = {}

    @pl.jit
    def k(x: pl.Tensor[[16, 16], pl.DT_FP16]):
        with pl.section_vector():     # (pyto traces block 0 once to learn the kernel's kind: the last trace stands)
            seen[pl.get_block_idx()] = (pl.get_block_num(), pl.get_subblock_idx(), pl.get_subblock_num())
        t = pl.make_tile(vec([16, 16], pl.DT_FP16), addr=0)
        with pl.section_vector():
            pl.load(t, x, [0, 0])
    rep = k[None, 5](np.zeros((16, 16), np.float16))
    assert seen == {i: (5, 0, 1) for i in range(5)}
    assert rep.blocks == 5 and sorted(rep.core_cycles) == [f"AIV {i}" for i in range(5)]


def test_block_dim_limits():
    @pl.jit
    def vec_only(x: pl.Tensor[[16, 16], pl.DT_FP16]):
        t = pl.make_tile(vec([16, 16], pl.DT_FP16), addr=0)
        with pl.section_vector():
            pl.load(t, x, [0, 0])

    x = np.zeros((16, 16), np.float16)
    vec_only[None, 64](x)                                    # 64 AIVs: an AIV-only kernel counts AIVs
    with pytest.raises(pyto.UnsupportedError, match=r"blocks=65: ascend950pr has 64 AIVs \(an AIV-only kernel's"):
        vec_only[None, 65](x)
    with pytest.raises(pyto.UnsupportedError, match=r"blocks=33: ascend950pr has 32 AI cores"):
        _handover()[None, 33](np.zeros((M, K), np.float16), np.zeros((K, N), np.float16), np.zeros((M, N), np.float32))
