"""IterBatch (kernels/bmm/iter_batch.py) against a float64 numpy reference, in each L1 case (a)-(e) of
docs/bmm_branches.md, and its timing (roofline, speed against MergeBatch).

Each run goes plan(branch="iter_batch") -> operands -> launch and is checked with pyto_kernels.bmm.api.check
(int8 exactly; floats within pyto.testing.matmul_bound with the bias as one more term). Cases (c)-(e) need
(M̄K̄ + K̄N̄)*dtype > L1 (or L1/2): full mode reaches them with a long K and thin M or N; the planner's own
home-ground shapes for each case run in timing mode.
"""
import pytest
from hypothesis import given, settings, strategies as st

import pyto
from pyto_kernels.bmm import iter_batch
from pyto_kernels.bmm.conditions import iter_checks, merge_checks
from pyto_kernels.bmm.planner import plan

from bmm_helpers import CHIP, NP, ok, run_branch


def _run(a, b, bias=None, *, branch="iter_batch", **kw):
    return run_branch(a, b, bias, branch=branch, **kw)


def _ok(*args, branch="iter_batch", **kw):
    return ok(*args, branch=branch, **kw)


def _bmk(B, M, N, K, ta=False, tb=False):
    """GM shapes of A and B for B x [M, K] @ [K, N], DN where transposed."""
    return (B, K, M) if ta else (B, M, K), (B, N, K) if tb else (B, K, N)


def _roofline_us(p) -> float:
    """max(FLOPs / peak, compulsory bytes / GM bandwidth) in microseconds."""
    pr = p.problem
    return max(pr.flops / CHIP.peak_flops(pr.dtype), pr.compulsory_bytes / (CHIP.gm_bandwidth_gbs * 1e9)) * 1e6


def _timing(shape, dt="fp16", branch="iter_batch"):
    B, M, N, K = shape
    _, rep, p = _run(pyto.spec((B, M, K), dt), pyto.spec((B, K, N), dt), branch=branch)
    return rep, p


# ---- against numpy ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", list(NP))
def test_dtypes_match_numpy(dt):
    """40 batches of 20x40 @ 40x24 on 32 cores (two batches on the first 8): case (b)."""
    _, _, p = _ok((40, 20, 40), (40, 40, 24), dt, seed=len(dt))
    assert (p.tiling.case, p.tiling.cores_used, p.tiling.batches_per_core) == ("b", 32, 2)


# (B, M, N, K, dtype, bias, transpose_a, transpose_b) -> (case, resident) of the forced tiling
CASES = [
    ((2, 30, 20, 300, "fp16", True, False, False), ("a", "AB")),
    ((40, 17, 9, 100, "bf16", False, True, True), ("b", "AB")),
    ((2, 20, 50, 2000, "fp32", True, False, True), ("c", "A")),       # B in K segments, unit_flag
    ((2, 50, 1, 4100, "bf16", False, True, False), ("c", "B")),       # A in M segments
    ((33, 14, 60, 1000, "fp32", True, False, False), ("d", "A")),     # (c) with ping-pong slots
    ((33, 60, 14, 1000, "fp32", False, False, True), ("d", "B")),
    ((33, 1, 1, 4100, "int8", True, False, False), ("d", "A")),
    ((2, 48, 20, 8200, "int8", True, True, False), ("e", "")),        # both sides in K segments
    ((2, 64, 64, 2048, "fp32", True, False, False), ("e", "")),       # the bias row shrinks k_L1 to fit L1
]


@pytest.mark.parametrize("shape,case", CASES, ids=[f"{c[0]}{c[1]}-{s[4]}" for s, c in CASES])
def test_each_l1_case_matches_numpy(shape, case):
    B, M, N, K, dt, bias, ta, tb = shape
    a_shape, b_shape = _bmk(B, M, N, K, ta, tb)
    _, _, p = _ok(a_shape, b_shape, dt, (B, 1, N) if bias else None, seed=B + K, transpose_a=ta, transpose_b=tb)
    t = p.tiling
    assert t.case == case[0]
    # a resident side read by one output tile only may stream with the other side instead (iter_tiling: it
    # saves no reads, and T_total decides)
    across = {"A": -(-shape[2] // t.base_n), "B": -(-shape[1] // t.base_m)}.get(case[1], 0)
    assert t.resident == case[1] or (t.resident == "" and across == 1), (t, across)
    params, _ = iter_batch.kernel_params(p)
    assert params["UNIT_FLAG"]        # every case: an L0C slot is free once Fixpipe has read it (see iter_batch.py)
    assert bool(params["HOLD_M"]) == ("A" in t.resident) and bool(params["HOLD_N"]) == ("B" in t.resident)


@pytest.mark.parametrize("a_shape,b_shape", [
    ((3, 1, 33), (3, 33, 40)),        # M = 1
    ((3, 50, 33), (3, 33, 1)),        # N = 1
    ((3, 20, 1), (3, 1, 30)),         # K = 1
    ((40, 1, 1), (40, 1, 1)),         # M = N = K = 1, two batches on some cores
])
def test_degenerate_dims(a_shape, b_shape):
    _ok(a_shape, b_shape, "fp16")


@pytest.mark.parametrize("dt", ["fp16", "int8"])
@pytest.mark.parametrize("bias_shape", [(36, 1, 40), (40,), (1, 40)])
def test_bias(dt, bias_shape):
    _ok((36, 24, 50), (36, 50, 40), dt, bias_shape, seed=3)


@pytest.mark.parametrize("a_shape,b_shape", [
    ((1, 40, 70), (36, 70, 50)),            # BatchA = 1: A broadcast (held once per core)
    ((36, 40, 70), (70, 50)),               # BatchB = 1 (2-D B)
    ((4, 1, 20, 33), (1, 3, 33, 40)),       # cross broadcast: A (4, 1), B (1, 3) -> (4, 3)
    ((2, 1, 3, 17, 24), (5, 1, 24, 20)),    # two-level batch, broadcast on both sides
])
def test_broadcast_batches(a_shape, b_shape):
    _ok(a_shape, b_shape, "bf16", (b_shape[-1],), seed=9)


def test_broadcast_side_is_loaded_once_per_core():
    """Case (b) with BatchA = 1: held_a keeps the same slab across batches, so each core reads A once
    (rows of 128B, so the GM bytes the report counts are not inflated by the burst minimum)."""
    B, M, N, K = 64, 32, 64, 64
    _, rep, p = _ok((1, M, K), (B, K, N), "fp16")
    assert p.tiling.case == "b"
    isz = 2
    assert rep.gm_read_bytes == p.tiling.cores_used * M * K * isz + B * K * N * isz


@settings(max_examples=12, deadline=None)
@given(dt=st.sampled_from(list(NP)), batch=st.sampled_from([1, 3, 40]), m=st.integers(1, 60),
       n=st.integers(1, 60), k=st.integers(1, 120), bias=st.booleans(), ta=st.booleans(), tb=st.booleans(),
       seed=st.integers(0, 2**16))
def test_hypothesis_small_shapes(dt, batch, m, n, k, bias, ta, tb, seed):
    a_shape, b_shape = _bmk(batch, m, n, k, ta, tb)
    _ok(a_shape, b_shape, dt, (batch, 1, n) if bias else None, seed, transpose_a=ta, transpose_b=tb)


def test_forced_outside_its_home_ground():
    """B = 5 < C (IterBatch condition 1 fails; ASW_Basic's ground): five cores, one batch each."""
    _, _, p = _ok((5, 100, 70), (5, 70, 90), "fp16", (90,))
    assert not iter_checks(p.problem, CHIP)[0].home and p.tiling.cores_used == 5


# ---- timing ------------------------------------------------------------------------------------------
HOME = [((32, 32, 32, 256), "fp16", "a"), ((64, 16, 16, 256), "fp16", "b"), ((32, 16, 32, 4096), "fp32", "c"),
        ((32, 32, 16, 4096), "fp32", "c"), ((64, 16, 32, 2048), "fp32", "d"), ((64, 32, 16, 2048), "fp32", "d"),
        ((32, 32, 32, 4096), "fp32", "e"), ((32, 256, 256, 512), "bf16", "a"), ((64, 128, 128, 512), "int8", "b")]


@pytest.mark.parametrize("shape,dt,case", HOME)
def test_home_ground_cases_respect_the_roofline(shape, dt, case):
    """Where the planner itself picks IterBatch, in each L1 case: timing mode, T >= the roofline."""
    B, M, N, K = shape
    chosen = plan((B, M, K), (B, K, N), dt, CHIP)
    assert chosen.branch == "iter_batch" and chosen.tiling.case == case, chosen.explain()
    rep, p = _timing(shape, dt)
    assert rep.time_us >= _roofline_us(p) * (1 - 1e-9)


@pytest.mark.parametrize("shape", [(256, 48, 32, 256), (256, 64, 32, 256)])
def test_home_ground_beats_merge_batch(shape):
    """Where the planner picks IterBatch and MergeBatch is legal (b >= 2 merged), IterBatch is faster:
    merging wastes (b-1)/b of the cube and its larger last group is an extra tail, with nothing to gain
    on the GM side (measured 10.78 vs 11.29 us and 12.40 vs 13.06 us)."""
    B, M, N, K = shape
    assert plan((B, M, K), (B, K, N), "fp16", CHIP).branch == "iter_batch"
    it, _ = _timing(shape)
    merge, mp = _timing(shape, branch="merge_batch")
    assert mp.tiling.b >= 2 and not merge_checks(mp.problem, CHIP).home
    assert it.cycles < merge.cycles, (it.time_us, merge.time_us)


def test_explain_says_where_case_b_leaves_the_seeds_base_n():
    """Case (b)'s pseudo-code takes the long side as max(L0C bound, L0B bound); where that overflows two L0C
    copies pyto takes the smaller bound, and explain shows both numbers (a planner-research review)."""
    p = plan((64, 200, 100), (64, 100, 300), "fp16", branch="iter_batch")
    t = p.tiling
    assert (t.case, t.base_m, t.base_n) == ("b", 208, 144)
    assert 2 * t.base_m * t.base_n * 4 <= CHIP.buffers["L0C"] < 2 * 208 * 256 * 4
    text = p.explain()
    assert "the seed's BaseN = max(L0C/2/4B/BaseM, L0B/2/BaseK) = max(144, 256) = 256 would not fit" in text
    assert "pyto takes the bounds' minimum, BaseN = 144" in text
    assert "b_core = ceil(B/C) = 2 (the busiest core's batches): several batches per core [yes]" in text


def test_legal_only_where_the_kernels_own_l1_fit_holds():
    """The tiling's L1 budget leaves out the held tiles' padding to the kernel's balanced base tiles; with the bias
    row now two ND rows (not 32 KB of fractal) a tiling fitted exactly and the kernel then refused it at launch (a
    fuzz find): iter_batch is legal only where its kernel's L1 fit holds, and the planner picks another branch."""
    from pyto_kernels.bmm import bmm
    from pyto_kernels.bmm.planner import legal_branches
    from bmm_helpers import check, inputs
    a, b, bias = inputs((5, 16, 257), (458, 257), "fp32", (1, 458), seed=3)
    assert "iter_batch" not in legal_branches(a.shape, b.shape, "fp32", "atlas-a2", bias=bias.shape, transpose_b=True)
    assert not check(bmm(a, b, bias=bias, chip="atlas-a2", transpose_b=True), a, b, bias, transpose_b=True)
    _ok((1, 127, 621), (2, 621, 76), "fp32", (1, 76))        # the bias row's smaller budget: it fits now


def test_condition_4_reads_the_seeds_pieces_of_k_over_step():
    """docs/bmm_branches.md §6.1.4: every piece of a Step split >= min_TileSize with dValue >= 128 B, the pieces being
    K/Step long. K = 241 in Step = 4: 60.25 rows of fp16 A, a dValue of 120.5 B, fails; the aligned 80-row slab L1
    holds passed it (a docs/bmm_branches.md audit's find; pyto's slabs even end in a 1-row piece)."""
    p = plan((32, 1024, 241), (32, 241, 2048), "fp16", CHIP)
    four = next(c for bc in p.conditions for c in bc.checks if c.label == "IterBatch 4 (e)")
    assert not four.holds and "dValue A 120 B" in four.text, four.text
    assert p.branch != "iter_batch"
