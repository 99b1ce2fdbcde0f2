"""StreamK (kernels/bmm/stream_k.py) against a float64 numpy reference, its entry edges, its two reductions,
bitwise reproducibility, and its timing.

Each run goes plan(branch="stream_k", reduce=...) -> operands -> launch and is checked with
pyto_kernels.bmm.api.check (int8 exactly; floats within pyto.testing.matmul_bound with the bias as one more
term). Full mode on small shapes (grid_K = 2, forced); timing mode for K around the seed's thresholds.
"""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pyto
from pyto_kernels.bmm import stream_k
from pyto_kernels.bmm.api import check, run_plan
from pyto_kernels.bmm.common import operands
from pyto_kernels.bmm.cost import roofline_us
from pyto_kernels.bmm.planner import plan

from bmm_helpers import CHIP, NP, inputs as _inputs, ok, run_branch
REDUCE = ("workspace", "atomic")


def _run(a, b, bias=None, *, branch="stream_k", **kw):
    return run_branch(a, b, bias, branch=branch, **kw)


def _ok(*args, branch="stream_k", **kw):
    return ok(*args, branch=branch, **kw)


def _spec_run(a_shape, b_shape, dt="fp16", **kw):
    return _run(pyto.spec(a_shape, dt), pyto.spec(b_shape, dt), **kw)


# ---- against numpy ---------------------------------------------------------------------------------
@pytest.mark.parametrize("reduce", REDUCE)
@pytest.mark.parametrize("dt", list(NP))
def test_dtypes_match_numpy(dt, reduce):
    _, _, p = _ok((2, 40, 300), (2, 300, 50), dt, reduce=reduce, seed=len(dt))
    t = p.tiling
    assert t.reduce == reduce and t.grid_k == 2 and t.units == 2 * t.m_cnt * t.n_cnt * t.grid_k


@pytest.mark.parametrize("reduce", REDUCE)
@pytest.mark.parametrize("a_shape,b_shape", [
    ((3, 1, 333), (3, 333, 40)),      # M = 1
    ((3, 40, 333), (3, 333, 1)),      # N = 1
    ((2, 1, 70), (2, 70, 1)),         # M = N = 1, K not a multiple of 16
    ((2, 20, 33), (2, 33, 30)),       # K = 33: the smallest K split in two (two 16-aligned segments)
])
def test_degenerate_dims(a_shape, b_shape, reduce):
    _ok(a_shape, b_shape, "bf16", reduce=reduce)


@pytest.mark.parametrize("reduce", REDUCE)
@pytest.mark.parametrize("a_shape,b_shape", [
    ((1, 40, 300), (3, 300, 50)),           # BatchA = 1
    ((3, 40, 300), (300, 50)),              # BatchB = 1 (2-D B)
    ((2, 1, 20, 300), (1, 3, 300, 24)),     # cross broadcast
])
def test_broadcast_batches(a_shape, b_shape, reduce):
    _ok(a_shape, b_shape, "fp16", reduce=reduce)


@pytest.mark.parametrize("reduce", REDUCE)
@pytest.mark.parametrize("dt,bias_shape", [("fp16", (50,)), ("int8", (2, 1, 50)), ("fp32", (1, 50))])
def test_bias(dt, bias_shape, reduce):
    _ok((2, 40, 300), (2, 300, 50), dt, bias_shape=bias_shape, reduce=reduce)


def test_atomic_bias_row_fits_beside_the_l1_buffers():
    """The tiling counts the bias row's L1 slots beside its streamed buffers, so the kernel keeps them all
    (before, the tiling filled L1 with 4 buffers and the kernel had to halve them for the bias row)."""
    p = plan((2, 97, 513), (2, 513, 193), "fp16", CHIP, bias=True, branch="stream_k", reduce="atomic")
    assert p.buffer_use()["L1"] <= CHIP.buffers["L1"]
    assert stream_k.params_of(p.tiling, p.problem, CHIP, bias=True)["STAGES"] == p.tiling.l1_buffers
    _ok((2, 97, 513), (2, 513, 193), "fp16", bias_shape=(193,), reduce="atomic")


@pytest.mark.parametrize("reduce", REDUCE)
@pytest.mark.parametrize("ta,tb", [(True, False), (False, True), (True, True)])
def test_transposes(ta, tb, reduce):
    a_shape, b_shape = (2, 300, 40) if ta else (2, 40, 300), (2, 50, 300) if tb else (2, 300, 50)
    _ok(a_shape, b_shape, "fp16", bias_shape=(50,), transpose_a=ta, transpose_b=tb, reduce=reduce)


@pytest.mark.parametrize("a_shape,b_shape", [((3, 40, 100), (3, 100, 72)), ((2, 20, 64), (2, 64, 40))])
def test_int8_edge_tile_stores_the_fractals_its_mmads_wrote(a_shape, b_shape):
    """An int8 tile's L0C view is trimmed to 32 columns, but a tile with 8 valid columns (N = 72 or 40: 32 + 8)
    has MMADs that write only its first 16-column fractal. The workspace store takes those fractals
    (block.as_computed), not the whole view: its STPhase.Final would wait forever for the unit flags of the
    fractal no MMAD wrote (a DeadlockError), as Fixpipe would on the chip."""
    _, _, p = _ok(a_shape, b_shape, "int8", reduce="workspace")
    assert p.tiling.base_n % 32 == 0 and (b_shape[-1] % p.tiling.base_n) % 32 == 8


@pytest.mark.parametrize("reduce", REDUCE)
def test_empty_blocks_are_skipped(reduce):
    """The planner no longer deals blocks past N (they idle their cores), but the kernel still skips them:
    N = 130 in n_cnt = 8 blocks of 32 columns, blocks 5..7 past N, their units do nothing."""
    a, b, bias = _inputs((1, 17, 512), (1, 512, 130), "fp16", bias_shape=(130,))
    p = plan(a.shape, b.shape, "fp16", CHIP, bias=True, branch="stream_k", reduce=reduce)
    assert (p.tiling.n_cnt - 1) * p.tiling.single_n < 130 and (p.tiling.m_cnt - 1) * p.tiling.single_m < 17
    t = dataclasses.replace(p.tiling, m_cnt=1, n_cnt=8, single_m=32, single_n=32, base_m=32, base_n=32,
                            units=16, cores_used=16, rounds=1)
    ops = operands(p.problem, a, b, bias)
    stream_k.launch(dataclasses.replace(p, tiling=t), ops, mode="full")
    assert not check(ops.out, a, b, bias)


# ---- the two reductions ----------------------------------------------------------------------------
@pytest.mark.parametrize("dt", ["fp16", "fp32"])
def test_workspace_mode_is_bitwise_reproducible(dt):
    a, b, bias = _inputs((2, 40, 300), (2, 300, 50), dt, bias_shape=(50,), seed=3)
    c1, _, p = _run(a, b, bias)
    c2, _, _ = _run(a, b, bias)
    assert p.tiling.reduce == "workspace" and p.tiling.grid_k == 2
    assert np.array_equal(c1.view(np.uint8), c2.view(np.uint8))


def test_atomic_mode_equals_workspace_within_fp32_rounding():
    """The two reductions add the same grid_K fp32 partials (and the bias) in different orders: they differ
    by at most a few fp32 roundings of the sum of magnitudes; int8 (int32 adds) is exact."""
    a, b, bias = _inputs((2, 40, 300), (2, 300, 50), "fp32", bias_shape=(50,), seed=4)
    ws, _, p = _run(a, b, bias)
    at, _, _ = _run(a, b, bias, reduce="atomic")
    g = p.tiling.grid_k
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) + np.abs(bias.astype(np.float64))
    assert np.all(np.abs(ws.astype(np.float64) - at) <= 2 * (g + 1) * 2.0 ** -24 * mag)
    a8, b8, bias8 = _inputs((2, 40, 300), (2, 300, 50), "int8", bias_shape=(50,), seed=4)
    ws8, _, _ = _run(a8, b8, bias8)
    at8, _, _ = _run(a8, b8, bias8, reduce="atomic")
    assert np.array_equal(ws8, at8)


# ---- entry conditions: P vs C, grid_K thresholds ----------------------------------------------------
@pytest.mark.parametrize("M,branch", [(47, "stream_k"), (48, "stream_k"), (49, "asw_basic")])
def test_parallelism_gap_edge(M, branch):
    """P = B*ceil(M/16)*ceil(N/16): (2, 48, 80) -> P = 30 < C = 32 (StreamK); M = 49 -> P = 40 (ASW_Basic)."""
    p = plan((2, M, 8000), (2, 8000, 80), "fp16", CHIP, override=None)
    assert p.branch == branch


@pytest.mark.parametrize("K,grid_k", [(6799, None), (6800, 2), (27199, 2), (27200, 4), (108799, 4), (108800, 8)])
def test_grid_k_thresholds(K, grid_k):
    """K >= grid_K^2 * theta (theta = 1700): 6.8K for 2, 27.2K for 4, 108.8K for 8 (the seed's grid_K)."""
    p = plan((2, 16, K), (2, K, 16), "fp16", CHIP, override=None)
    if grid_k is None:
        assert p.branch != "stream_k"
    else:
        assert p.branch == "stream_k" and p.tiling.grid_k == grid_k


def test_grid_k_beyond_theta_when_the_model_says_it_pays():
    """[1,48,12000] @ [12000,80]: the seed's theta allows grid_K = 2 (K < 4^2*1700), so two cores' MTE2 ports carry
    all of B; the planner takes grid_K = 8 (estimated 37% faster), which the emulator confirms, and says why."""
    a, b = (1, 48, 12000), (1, 12000, 80)
    seed, wide = plan(a, b, "bf16", CHIP, override=None), plan(a, b, "bf16", CHIP)
    assert seed.branch == wide.branch == "stream_k" and seed.tiling.grid_k == 2 < wide.tiling.grid_k
    assert "K >= grid_K^2*theta dropped" in wide.explain() and "theta dropped" not in seed.explain()
    t_seed = run_plan(seed, pyto.spec(a, "bf16"), pyto.spec(b, "bf16"))[1].time_us
    t_wide = run_plan(wide, pyto.spec(a, "bf16"), pyto.spec(b, "bf16"))[1].time_us
    assert t_wide < 0.8 * t_seed, (t_wide, t_seed)
    # where the seed's grid_K is already the model's best, nothing changes
    assert plan((2, 16, 120000), (2, 120000, 16), "fp16", CHIP).tiling.grid_k == 8


def test_grid_k_beyond_theta_takes_half_the_branch_margin():
    """[2,32,16384] @ [16384,32]: grid_K 4 is estimated 18% below the seed's 2 (less than the 20% a branch
    needs, more than the 10% a grid_K needs); the planner takes it, and it emulates ~20% faster. With
    override=0.4 (a 20% grid_K margin) the seed's grid_K stays."""
    a, b = (2, 32, 16384), (2, 16384, 32)
    seed, wide, strict = (plan(a, b, "bf16", CHIP, override=o) for o in (None, 0.2, 0.4))
    assert (seed.tiling.grid_k, wide.tiling.grid_k, strict.tiling.grid_k) == (2, 4, 2)
    assert 0.1 <= 1 - wide.estimate.t_total / seed.estimate.t_total < 0.2
    t_seed = run_plan(seed, pyto.spec(a, "bf16"), pyto.spec(b, "bf16"))[1].time_us
    t_wide = run_plan(wide, pyto.spec(a, "bf16"), pyto.spec(b, "bf16"))[1].time_us
    assert t_wide < 0.85 * t_seed, (t_wide, t_seed)


@pytest.mark.parametrize("K,grid_k", [(6800, 2), (27200, 4), (108800, 8)])
def test_grid_k_runs_in_timing_mode(K, grid_k):
    for reduce in REDUCE:
        _, rep, p = _spec_run((2, 16, K), (2, K, 16), reduce=reduce)
        assert p.tiling.grid_k == grid_k and rep.blocks == p.tiling.cores_used == 2 * grid_k
        assert rep.time_us >= roofline_us(p.problem, CHIP) * (1 - 1e-9)


# ---- property test -----------------------------------------------------------------------------------
@settings(max_examples=12, deadline=None)
@given(dt=st.sampled_from(list(NP)), m=st.integers(1, 60), n=st.integers(1, 60), k=st.integers(64, 400),
       batch=st.sampled_from([((2,), (2,)), ((1,), (3,)), ((3,), (1,)), ((2, 1), (1, 2))]),
       bias=st.booleans(), ta=st.booleans(), tb=st.booleans(), reduce=st.sampled_from(REDUCE),
       seed=st.integers(0, 2**16))
def test_hypothesis_small_shapes(dt, m, n, k, batch, bias, ta, tb, reduce, seed):
    (ab, bb) = batch
    a_shape = ab + ((k, m) if ta else (m, k))
    b_shape = bb + ((n, k) if tb else (k, n))
    _ok(a_shape, b_shape, dt, bias_shape=(n,) if bias else None, seed=seed, transpose_a=ta, transpose_b=tb,
        reduce=reduce)


# ---- timing: roofline and speed on its home ground ----------------------------------------------------
@pytest.mark.parametrize("a_shape,b_shape,dt,tb", [((3, 40, 7000), (3, 7000, 40), "fp16", False),
                                                   ((2, 32, 30000), (2, 30000, 32), "bf16", False),
                                                   ((2, 64, 9000), (2, 64, 9000), "int8", True),
                                                   ((8, 256, 512), (8, 512, 256), "fp32", False)])
@pytest.mark.parametrize("reduce", REDUCE)
def test_timing_respects_the_roofline(a_shape, b_shape, dt, tb, reduce):
    _, rep, p = _run(pyto.spec(a_shape, dt), pyto.spec(b_shape, dt), transpose_b=tb, reduce=reduce)
    assert rep.time_us >= roofline_us(p.problem, CHIP) * (1 - 1e-9)


HOME = [((2, 16, 120000), (2, 120000, 16)),    # grid_K = 8
        ((2, 32, 30000), (2, 30000, 32)),      # grid_K = 4
        ((3, 40, 7000), (3, 7000, 40))]        # grid_K = 2


@pytest.mark.parametrize("a_shape,b_shape", HOME)
def test_home_ground_beats_asw_basic(a_shape, b_shape):
    """Where the planner picks StreamK, ASW_Basic forced on the same shape is slower (timing mode)."""
    assert plan(a_shape, b_shape, "fp16", CHIP).branch == "stream_k"
    _, sk, _ = _spec_run(a_shape, b_shape)
    _, asw, _ = _spec_run(a_shape, b_shape, branch="asw_basic")
    assert sk.cycles < asw.cycles, (sk.cycles, asw.cycles)


def test_home_ground_grid_k_2_bandwidth_bound():
    """grid_K = 2 on a skinny shape: the planner's mCnt x nCnt now comes from T_total, which avoids the 16-column
    blocks whose 32B rows each cost the 128B burst minimum (they made StreamK lose to ASW_Basic here)."""
    a_shape, b_shape = (4, 32, 7000), (4, 7000, 32)
    assert plan(a_shape, b_shape, "fp16", CHIP).branch == "stream_k"
    _, sk, _ = _spec_run(a_shape, b_shape)
    _, asw, _ = _spec_run(a_shape, b_shape, branch="asw_basic")
    assert sk.cycles < asw.cycles, (sk.cycles, asw.cycles)


def _launch_tail(a, b, tail_k=None):
    """stream_k_kernel on (a, b) with the planner's parameters and TAIL_K = tail_k (None: the planner's):
    (output, report, the planner's TAIL_K, base_k)."""
    p = plan(a.shape, b.shape, a.dtype if isinstance(a, pyto.Spec) else pyto.dtypes.as_dtype(a.dtype), CHIP)
    assert p.branch == "stream_k"
    ops = operands(p.problem, a, b)
    params = stream_k.params_of(p.tiling, p.problem, CHIP)
    planned = params["TAIL_K"]
    if tail_k is not None:
        params["TAIL_K"] = tail_k
    mode = "timing" if isinstance(a, pyto.Spec) else "full"
    rep = pyto.run(stream_k.stream_k_kernel, ops.a, ops.b, ops.bias, ops.out, chip=CHIP,
                   blocks=p.tiling.cores_used, mode=mode, **params)
    return ops.out, rep, planned, p.tiling.base_k


def test_tail_pieces_shorten_the_drain():
    """The last L1 step in TAIL_K pieces: the K segment's end (on the reduction's critical path) no longer waits
    for a whole k_L1 step of MTE1 + MMAD after its load lands, and the planner's half-base_k pieces end it
    sooner than base_k pieces (timing mode on a home-ground shape). base_k pieces issue the same MMADs in the
    same order as no pieces (the same bits); half-base_k MMADs split the fp32 sums elsewhere (within tolerance)."""
    a, b, _ = _inputs((1, 32, 4096), (1, 4096, 48), "fp16", seed=5)
    planned, _, tail_k, base_k = _launch_tail(a, b)
    assert tail_k == base_k // 2
    whole, _, _, _ = _launch_tail(a, b, base_k)
    without, _, _, _ = _launch_tail(a, b, 0)
    assert np.array_equal(whole.view(np.uint8), without.view(np.uint8))
    for c in (planned, whole, without):
        assert not check(c, a, b, None)
    sa, sb = pyto.spec((1, 32, 32768), "bf16"), pyto.spec((1, 32768, 64), "bf16")
    _, half, tail_k, base_k = _launch_tail(sa, sb)
    _, whole = _launch_tail(sa, sb, base_k)[:2]
    _, slow = _launch_tail(sa, sb, 0)[:2]
    assert half.cycles < whole.cycles < slow.cycles - 200, (half.cycles, whole.cycles, slow.cycles)


def test_no_drain_pieces_when_a_core_runs_several_units():
    """With grid_K forced past what one round holds, a core runs several units and the next one's loads hide
    each drain: TAIL_K is 0 there (pieces only cost: a reviewer measured 2-3.7% slower with them)."""
    p = plan((2, 64, 16384), (2, 16384, 128), "fp16", CHIP).with_tiling(grid_k=16)
    assert p.tiling.rounds > 1 and stream_k.params_of(p.tiling, p.problem, CHIP)["TAIL_K"] == 0
    one = plan((1, 32, 32768), (1, 32768, 64), "bf16", CHIP)
    assert one.tiling.rounds == 1 and stream_k.params_of(one.tiling, one.problem, CHIP)["TAIL_K"] == one.tiling.base_k // 2


def test_bmm_takes_the_reduction_mode():
    """bmm(..., reduce="atomic") runs StreamK's AtomicAdd variant, as `pyto bmm --reduce atomic` does."""
    from pyto_kernels.bmm import bmm
    a, b, _ = _inputs((2, 40, 300), (2, 300, 50), "fp32", seed=6)
    c, atomic = bmm(a, b, branch="stream_k", reduce="atomic", report=True)
    assert not check(c, a, b, None)
    _, workspace = bmm(a, b, branch="stream_k", report=True)
    # fp32 out: the atomic variant adds straight into C after zeroing it (no workspace reduction pass)
    assert atomic.instructions != workspace.instructions and atomic.gm_write_bytes != workspace.gm_write_bytes
    with pytest.raises(pyto.PlanError, match="reduce must be one of"):
        bmm(a, b, reduce="tree")
