"""The BMM planner (docs/bmm_branches.md): branch choice at and around every boundary, tilings, explain, errors, CLI."""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pyto
from pyto_kernels.bmm import Plan, bmm, legal_branches, plan
from pyto_kernels.bmm.conditions import BRANCHES, SEED_NAMES, Problem, merge_checks, parallel_blocks
from pyto_kernels.bmm.cost import RESOLUTION, roofline_us
from pyto_kernels.bmm.planner import OVERRIDE, PRICE, parse_problem
from pyto_kernels.bmm.tilings import field_docs
from pyto.cli import main
from pyto.errors import PlanError, ShapeError

P950, A2 = "ascend950pr", "atlas-a2"


def run(B: int, M: int, N: int, K: int, chip: str = P950, **kw) -> Plan:
    return plan((B, M, K), (B, K, N), chip=chip, **kw)


def check(p: Plan, label: str):
    return next(c for bc in p.conditions for c in bc.checks if c.label == label)


def home(p: Plan, branch: str) -> bool:
    return next(bc.home for bc in p.conditions if bc.branch == branch)


def tiling_value(t: object, name: str):
    return getattr(t, name, None)


# (id, chip, B, M, N, K, branch, {tiling field: value}, {condition label: holds}). A tuple of branches: home grounds
# overlap and T_total picks among them (test_overlap_decided_by_t_total; test_overlap_choice_matches_the_emulator);
# the tiling fields are then those of the first, forced. OVERLAP: MergeBatch, IterBatch and ASW_Basic all hold.
OVERLAP = ("merge_batch", "iter_batch", "asw_basic")
ITER_ASW = ("iter_batch", "asw_basic")
TABLE = [
    # MergeBatch: b_core = 2*b0 (B = 4C vs 4C - 1)
    ("merge b_core=4", P950, 128, 64, 64, 1024, OVERLAP, {}, {"MergeBatch 1": True}),
    ("merge b_core=3", P950, 127, 64, 64, 1024, "iter_batch", {"case": "b"}, {"MergeBatch 1": False}),
    # the L0C limit 2*(b0 M̄)(b0 N̄)*4B <= L0C: M̄N̄ = 8192 holds, N̄ = 144 fails. Where MergeBatch holds, IterBatch
    # does too: the overlap goes to T_total (test_merge_overlap_decided_by_t_total checks these shapes' choice);
    # the rows check the condition edges (emulated: within 1-2% of each other, close calls either way)
    ("merge L0C edge", P950, 128, 64, 128, 512, OVERLAP, {}, {"MergeBatch 2": True}),
    ("merge L0C over", P950, 128, 64, 129, 512, ITER_ASW, {}, {"MergeBatch 2": False}),
    # the 480KB per-core amount: 4*(64K + 64K)*2 >= 491520 <=> K >= 480
    ("merge 480KB holds", P950, 128, 64, 64, 480, OVERLAP, {}, {"MergeBatch 3": True}),
    ("merge 480KB fails", P950, 128, 64, 64, 479, "iter_batch", {"case": "b"}, {"MergeBatch 3": False}),
    # the 16KB tile: max(MK, KN)*2 >= 16384 <=> K >= 256 at M = N = 32
    ("merge 16KB holds", P950, 512, 32, 32, 256, OVERLAP, {}, {"MergeBatch 4": True}),
    ("merge 16KB fails", P950, 512, 32, 32, 255, "iter_batch", {}, {"MergeBatch 4": False,
                                                                     "MergeBatch 3": True}),
    # IterBatch 2: B mod C == 0 or >= minCoreNum (26 of 32)
    ("iter mod 25", P950, 57, 256, 256, 256, "asw_basic", {}, {"IterBatch 2": False}),
    ("iter mod 26", P950, 58, 256, 256, 256, "iter_batch", {"case": "b"}, {"IterBatch 2": True}),
    ("iter mod 0", P950, 64, 256, 256, 256, "iter_batch", {"case": "b"}, {"IterBatch 2": True}),
    # IterBatch 3: (M+N)*K*2 <= L1 <=> K <= 819 at M = 64, N = 256 -> (a); above -> (c) A resident
    ("iter case a", P950, 32, 64, 256, 816, "iter_batch", {"case": "a", "resident": "AB"}, {"IterBatch 3a": True}),
    ("iter case c", P950, 32, 64, 256, 832, "iter_batch", {"case": "c", "resident": "A", "step": 2,
                                                           "unit_flag": True}, {"IterBatch 3a": False}),
    ("iter case b", P950, 64, 128, 128, 512, "iter_batch", {"case": "b", "l1_buffers": 2}, {"IterBatch 3b": True}),
    ("iter case d", P950, 64, 128, 128, 528, "iter_batch", {"case": "d", "resident": "A", "step": 2},
     {"IterBatch 3b": False}),
    ("iter case e", P950, 32, 1024, 1024, 1024, ITER_ASW, {"case": "e", "step": 8}, {"IterBatch 3e": True}),
    ("iter Step too fine", P950, 32, 64, 2048, 8192, "asw_basic", {}, {"IterBatch 4 (e)": False}),
    # P vs C: P = 2*4*4 = 32 -> ASW; 2*4*3 = 24 < 32 -> StreamK
    ("P = C", P950, 2, 64, 64, 8192, "asw_basic", {}, {"ASW_Basic 1": True, "StreamK 1": False}),
    ("P < C", P950, 2, 64, 48, 8192, "stream_k", {"grid_k": 2}, {"ASW_Basic 1": False, "StreamK 1": True}),
    # grid_K at K = 6800, 27200, 108800 (theta = 1700): the largest power of two that holds
    ("grid_K none", P950, 2, 16, 16, 6799, "asw_basic", {}, {"StreamK 2 (grid_K=2)": False}),
    ("grid_K 2", P950, 2, 16, 16, 6800, "stream_k", {"grid_k": 2}, {"StreamK 2 (grid_K=2)": True}),
    ("grid_K 2 top", P950, 2, 16, 16, 27199, "stream_k", {"grid_k": 2}, {"StreamK 2 (grid_K=4)": False}),
    ("grid_K 4", P950, 2, 16, 16, 27200, "stream_k", {"grid_k": 4}, {"StreamK 2 (grid_K=4)": True}),
    ("grid_K 4 top", P950, 2, 16, 16, 108799, "stream_k", {"grid_k": 4}, {"StreamK 2 (grid_K=8)": False}),
    ("grid_K 8", P950, 2, 16, 16, 108800, "stream_k", {"grid_k": 8, "blocks_per_batch": 16},
     {"StreamK 2 (grid_K=8)": True}),
    ("grid_K 8 B=4", P950, 4, 16, 16, 108800, "stream_k", {"grid_k": 8, "blocks_per_batch": 8}, {}),
    # Special: K = 0; K = 1 with B >= 2 x AIV (128) and the batch in UB
    ("special K=0", P950, 8, 64, 64, 0, "special", {"mode": "fill"}, {"Special K=0": True}),
    ("special K=1", P950, 128, 64, 64, 1, "special", {"mode": "outer"}, {"Special K=1 (ii)": True}),
    ("special K=1 few", P950, 100, 64, 64, 1, "asw_basic", {}, {"Special K=1 (ii)": False}),
    ("special K=1 UB", P950, 128, 360, 360, 1, "iter_batch", {}, {"Special K=1 (iii)": False}),
    ("special K=1 UB ok", P950, 128, 350, 350, 1, "special", {"mode": "outer"}, {"Special K=1 (iii)": True}),
    # the same shapes on Atlas A2 (C = 24, minCoreNum = 20, L0C = 128KB, AIV = 48)
    ("A2 b_core=5", A2, 127, 64, 64, 1024, "merge_batch", {"b": 2}, {"MergeBatch 1": True}),
    ("A2 b_core=4", A2, 96, 64, 64, 1024, OVERLAP, {}, {"MergeBatch 1": True}),
    ("A2 b_core=3", A2, 95, 64, 64, 1024, "iter_batch", {}, {"MergeBatch 1": False}),
    ("A2 L0C over", A2, 128, 64, 128, 512, "asw_basic", {}, {"MergeBatch 2": False}),
    ("A2 480KB holds", A2, 128, 64, 64, 479, ("merge_batch", "asw_basic"), {}, {"MergeBatch 3": True}),
    ("A2 480KB b_core=4", A2, 96, 64, 64, 479, "iter_batch", {}, {"MergeBatch 3": False}),
    ("A2 mod 10", A2, 58, 256, 256, 256, "asw_basic", {}, {"IterBatch 2": False}),
    ("A2 mod 19", A2, 43, 256, 256, 256, "asw_basic", {}, {"IterBatch 2": False}),
    ("A2 mod 20", A2, 44, 256, 256, 256, "iter_batch", {"case": "b"}, {"IterBatch 2": True}),
    ("A2 case a", A2, 24, 64, 256, 816, ITER_ASW, {"case": "a"}, {}),
    ("A2 case c", A2, 24, 64, 256, 832, ITER_ASW, {"case": "c"}, {}),
    ("A2 P = C", A2, 2, 64, 48, 8192, "asw_basic", {}, {"StreamK 1": False}),
    ("A2 P < C", A2, 2, 64, 32, 8192, "stream_k", {"grid_k": 2}, {"StreamK 1": True}),
    ("A2 grid_K B=4", A2, 4, 16, 16, 108800, "stream_k", {"grid_k": 4, "blocks_per_batch": 6}, {}),
    ("A2 special K=1", A2, 100, 64, 64, 1, "special", {"mode": "outer"}, {"Special K=1 (ii)": True}),
    ("A2 special few", A2, 95, 64, 64, 1, "iter_batch", {}, {"Special K=1 (ii)": False}),
]


@pytest.mark.parametrize("name,chip,B,M,N,K,branch,fields,conds", TABLE, ids=[r[0] for r in TABLE])
def test_branch_table(name, chip, B, M, N, K, branch, fields, conds):
    p = run(B, M, N, K, chip, override=None)        # the seed's decision alone
    if isinstance(branch, tuple):
        assert p.branch in branch and all(home(p, b) for b in branch), p.explain()
        assert any(f"overlap ({' / '.join(SEED_NAMES[b] for b in branch)}): T_total decides" in x
                   for x in p.decision), p.explain()
    else:
        assert p.branch == branch, p.explain()
    t = run(B, M, N, K, chip, branch=branch[0]).tiling if isinstance(branch, tuple) else p.tiling
    for f, v in fields.items():
        assert tiling_value(t, f) == v, (f, t)
    for label, holds in conds.items():
        assert check(p, label).holds == holds, str(check(p, label))
    assert_fits(p)
    assert p.branch in legal_branches((B, M, K), (B, K, N), chip=chip)


def assert_fits(p: Plan) -> None:
    """Every buffer within capacity; tile sizes on the fractal grid."""
    chip = pyto.load_chip(p.chip)
    for buf, used in p.buffer_use().items():
        assert used <= chip.buffers[buf], (buf, used, p.tiling)
    assert_grid(p.tiling, p.problem)


def assert_grid(t: object, prob: Problem) -> None:
    for name, value, _ in field_docs(t):
        if dataclasses.is_dataclass(value):
            assert_grid(value, prob)
        elif name in ("base_m", "base_n", "m_pad", "n_pad", "single_m", "single_n", "m_l1"):
            assert value % prob.mn_align == 0 and value % 16 == 0, (name, value)
        elif name in ("base_k", "k_l1", "k_l1_a", "k_l1_b", "single_core_k"):
            assert value % prob.k_align == 0 and value >= prob.k_align, (name, value)
    k_l1 = getattr(t, "k_l1", None)
    if k_l1 is not None:
        assert k_l1 % t.base_k == 0, t
    if getattr(t, "case", "") in ("c", "d", "e") and t.resident != "B":
        assert min(t.k_l1_a, t.k_l1_b) % t.base_k == 0, t


def test_merge_numbers_substituted():
    p = run(128, 64, 64, 512)
    assert str(check(p, "MergeBatch 3")) == ("MergeBatch 3: b_core*(MK+KN)*dtype = 4*(64*512 + 512*64)*2 = 524288 B "
                                             ">= min_DatamountPerCore 491520 B  -> holds")
    assert "2*(2*64)*(2*64)*4 = 131072 B <= L0C 262144 B" in check(p, "MergeBatch 2").text
    assert "64.0 < R/b0 = 607.5/2 = 303.8" in check(p, "MergeBatch 5").text
    t = run(128, 64, 64, 512, branch="merge_batch").tiling
    assert "b_i = 2" in t.derivation[0] and "b_ii = 9" in t.derivation[0]


def test_overlap_decided_by_t_total():
    """Where home grounds overlap, T_total decides; estimates within the model's RESOLUTION of the fastest do not
    order the emulated times, and among them the seed's price of parallelism decides (B before M/N)."""
    for shape in ((128, 64, 64, 1024), (128, 64, 128, 1024), (256, 32, 32, 512), (128, 64, 128, 512),
                  (128, 64, 64, 480), (512, 32, 32, 256), (32, 512, 512, 512), (58, 256, 256, 256)):
        p = run(*shape)
        cands = [b for b in ("merge_batch", "iter_batch", "asw_basic") if home(p, b)]
        assert home(p, "asw_basic") and len(cands) >= 2, p.explain()
        line = next(x for x in p.decision if "T_total decides" in x)
        est = {b: run(*shape, branch=b).estimate for b in cands}
        for b, e in est.items():
            assert f"{b} {e.t_total:.3f} us" in line
        fastest = min(e.t_total for e in est.values())
        close = [b for b in cands if est[b].t_total <= fastest * (1 + RESOLUTION)]
        assert p.branch == min(close, key=lambda b: (PRICE[b], est[b].t_total, est[b].t_mte2_pipe)), line


@pytest.mark.parametrize("a,b,dt", [((32, 512, 512), (32, 512, 512), "bf16"),     # ASW_Basic by 2.8%
                                    ((32, 256, 512), (32, 512, 256), "bf16"),     # IterBatch by 2.2%
                                    ((58, 256, 256), (58, 256, 256), "bf16"),     # IterBatch by 4.9%
                                    ((64, 64, 256), (256, 128), "bf16"),          # free fold vs IterBatch: 11%
                                    ((100, 300), (32, 300, 200), "bf16")])        # ToMatmul vs IterBatch: 20%
def test_overlap_choice_matches_the_emulator(a, b, dt):
    """In an overlap the planner's branch is the fastest candidate when each is forced and emulated (within 0.5%,
    the planner benchmark's agreement band)."""
    p = plan(a, b, dt)
    times = {}
    for br in legal_branches(a, b, dt):
        with pyto.run_options(check=False):
            times[br] = bmm(pyto.spec(a, dt), pyto.spec(b, dt), branch=br, report=True)[1].time_us
    assert times[p.branch] <= 1.005 * min(times.values()), (p.branch, times)


@pytest.mark.parametrize("shape,b,groups", [((128, 64, 128, 512), 2, 2), ((128, 64, 64, 1024), 2, 2),
                                            ((512, 32, 32, 256), 4, 4),
                                            ((512, 16, 16, 512), 8, 2), ((130, 16, 16, 256), 4, 2)])
def test_merge_step1_b_leaves_two_groups(shape, b, groups):
    """Step 1's b = min(b_i, b_ii, b_core) as a factor of b_core, and (docs/bmm_branches.md §5.1.1: "2 组起步才能构成组间乒乓
    流水") smaller than the core's batches on the home ground, so at least two groups ping-pong."""
    t = run(*shape, branch="merge_batch").tiling
    assert (t.b, t.groups_per_core) == (b, groups)


def test_to_matmul_meets_stream_k_on_its_home_ground():
    """B = 1 (a free 'plain' fold) with P < C and a long K: StreamK's home ground, where the BMM branch compared with
    ToMatmul is StreamK and T_total decides (emulated: StreamK 5.0 us vs ToMatmul 6.6 us on 64x64x8192 bf16)."""
    p = plan((1, 64, 8192), (1, 8192, 64))
    assert home(p, "to_matmul") and home(p, "stream_k")
    line = next(x for x in p.decision if "ToMatmul vs BMM" in x)
    est = {b: plan((1, 64, 8192), (1, 8192, 64), branch=b).estimate.t_total for b in ("to_matmul", "stream_k")}
    assert p.branch == min(est, key=est.get) == "stream_k"
    assert all(f"{b} {t:.3f} us" in line for b, t in est.items())
    q = plan((1, 512, 4096), (1, 4096, 512))        # P >= C: StreamK's home ground fails, the free fold wins
    assert q.branch == "to_matmul" and not home(q, "stream_k")


def test_merge_r_over_b0_limit():
    """Condition 5 flips at 2MN/(M+N) = R/b0; with a smaller R it binds inside the L0C limit."""
    chip = pyto.load_chip(P950)
    ok = merge_checks(parse_problem((128, 303, 64), (128, 64, 303)), chip).checks[4]
    bad = merge_checks(parse_problem((128, 304, 64), (128, 64, 304)), chip).checks[4]
    assert ok.holds and not bad.holds
    low_r = dataclasses.replace(chip, R=100.0)                  # R/b0 = 50
    assert home(plan((128, 48, 1024), (128, 1024, 48), chip=low_r), "merge_batch")
    p = plan((128, 64, 1024), (128, 1024, 64), chip=low_r)
    assert not check(p, "MergeBatch 5").holds and p.branch == "iter_batch"
    t = plan((128, 32, 1024), (128, 1024, 32), chip=low_r, branch="merge_batch").tiling
    assert t.b <= 3                                             # b_ii = ceil(100/32) - 1 = 3


def test_iter_l0_pseudocode_case_a():
    p = run(32, 128, 128, 128)
    t = p.tiling
    # the seed's BaseM = M̄, BaseN = N̄, BaseK = min(L0A/M̄, L0B/N̄, K̄); two L0A/L0B copies when they fit
    assert (t.case, t.base_m, t.base_n, t.base_k, t.l0_buffers) == ("a", 128, 128, 128, 2)


def test_iter_case_c_k_l1_b():
    """The seed's k_L1_b = (L1 - 64*2048*2) / (256*2) = 512 gives Step = 4 and is the L1 budget of B's slices;
    the kernel streams them per output tile, double-buffered, no deeper than that."""
    p = run(32, 64, 256, 2048)
    t = p.tiling
    assert (t.case, t.step) == ("c", 4)
    assert "seed k_L1 A/B = 2048/512" in t.derivation[0]
    assert t.k_l1_b % t.base_k == 0 and t.stream_buffers >= 2
    # N = 256 is one output tile wide, so the resident A would be read by that tile only: holding it saves no
    # reads, and streaming both sides (deeper K slices in the L1 A would have taken) is faster by T_total
    # (emulated 27.34 vs 27.62 us)
    assert t.resident == "" and t.base_n == 256 and "read by one tile only" in t.derivation[1]
    held = run(32, 64, 1024, 2048).tiling           # N = 1024: two tiles share the resident A
    assert (held.case, held.resident) == ("c", "A") and held.base_n * 2 == 1024
    assert held.k_l1_b <= 256                       # the seed's k_L1_b = (L1 - 64*2048*2) / (1024*2) = 256


def test_asw_window_and_split():
    p = run(8, 512, 512, 1024)
    t = p.tiling
    assert p.branch == "asw_basic" and t.window == 4 and "B" in t.split and t.cores_used == 32
    assert run(2, 512, 512, 1024, A2).tiling.window == 4       # C = 24: divisors <= 4
    six = dataclasses.replace(pyto.load_chip(P950), aic=30)
    assert plan((8, 512, 1024), (8, 1024, 512), chip=six).tiling.window == 5


def test_asw_l2_tiling_when_working_set_exceeds_l2():
    p = plan((1, 16384, 8192), (2, 8192, 16384), branch="asw_basic")
    assert p.tiling.l2_tiles_m * p.tiling.l2_tiles_n > 1


def test_cross_broadcast_goes_to_asw():
    p = plan((4, 1, 256, 256), (1, 8, 256, 256))
    assert p.problem.broadcast == "cross" and p.problem.batch == 32 and p.branch == "asw_basic"
    assert p.tiling.broadcast_resident == "AB"
    assert "cross broadcast (yes)" in check(p, "ASW_Basic 2").text


def test_to_matmul_folds():
    assert run(1, 512, 512, 512).tiling.fold == "plain"
    p = plan((8, 64, 64), (64, 64))
    assert (p.branch, p.tiling.fold, p.tiling.mm_m) == ("to_matmul", "fold_m", 512)
    p = plan((32, 64), (128, 64, 256), branch="to_matmul")  # many tiles per core: holding A reads less, not slower
    assert (p.branch, p.tiling.fold, p.tiling.matmul.full_load) == ("to_matmul", "a_resident", "A")
    p = plan((64, 64), (8, 64, 64))                 # 1 tile per core: each core streams its rows of A
    assert (p.branch, p.tiling.fold, p.tiling.matmul.full_load) == ("to_matmul", "a_resident", "")
    p = plan((1, 2048, 4096), (64, 4096, 256))     # A = 16MB > L1: fold_n vs the broadcast BMM branches
    assert any("compares it with the BMM branches" in x for x in p.decision)
    assert any("ToMatmul vs BMM" in x for x in p.decision)
    t = plan((1, 2048, 4096), (64, 4096, 256), branch="to_matmul").tiling
    assert t.fold == "fold_n" and t.rearrange_bytes == 2 * 64 * 4096 * 256 * 2


def test_special_tilings():
    p = run(256, 128, 256, 1)
    t = p.tiling
    assert (t.mode, t.rows, t.cols, t.ub_buffers, t.aiv_used, t.units_per_aiv) == ("outer", 64, 256, 2, 64, 8)
    e = plan((3, 0, 5), (3, 5, 4))
    assert e.branch == "special" and e.tiling.mode == "empty" and e.estimate.t_total == 0


def test_explain_lists_every_branch_and_numbers():
    text = run(128, 64, 64, 512).explain()
    for b in BRANCHES:
        assert f"[{b}]" in text
    for needle in ("MergeBatch 1", "IterBatch 3b", "ASW_Basic 2", "StreamK 2", "Special K=1 (iii)",
                   "ToMatmul 1", "524288 B >= min_DatamountPerCore 491520 B", "T_total decides", "Roofline"):
        assert needle in text, needle
    merged = plan((128, 64, 1024), (128, 1024, 128), "fp32", branch="merge_batch").explain()
    assert "Chosen branch: merge_batch" in merged and "b_L1" in merged and "forced by the caller" in merged
    assert "not evaluated" in run(8, 64, 64, 0).explain()


def test_forced_branch_and_preconditions():
    p = run(128, 64, 64, 512, branch="asw_basic")
    assert p.forced and p.branch == "asw_basic" and "forced" in p.decision[0]
    assert legal_branches((128, 64, 512), (128, 512, 64)) == ["merge_batch", "iter_batch", "asw_basic", "stream_k"]
    cases = [((2, 1, 64, 64), (1, 3, 64, 64), "merge_batch", "BatchA = BatchB"),
             ((4, 64, 64), (4, 64, 64), "special", "K = 0 or K = 1"),
             ((4, 64, 64), (4, 64, 64), "to_matmul", "BatchA = 1 or BatchB = 1"),
             ((4, 64, 16), (4, 16, 64), "stream_k", "K >= 2*16"),
             ((4, 64, 0), (4, 0, 64), "asw_basic", "use special"),
             ((4, 2048, 64), (4, 64, 2048), "merge_batch", "L0C"),
             ((2, 20000, 64), (2, 64, 20000), "iter_batch", "no L1 case"),
             ((4, 64, 64), (4, 64, 64), "bogus", "unknown branch")]
    for a, b, branch, why in cases:
        with pytest.raises(PlanError, match=re.escape(why)):
            plan(a, b, branch=branch)


def test_every_legal_branch_can_be_forced():
    for a, b in (((128, 64, 512), (128, 512, 64)), ((64, 64), (8, 64, 64)), ((256, 64, 1), (256, 1, 64))):
        for branch in legal_branches(a, b):
            p = plan(a, b, branch=branch)
            assert p.branch == branch
            assert_fits(p)


@pytest.mark.parametrize("a,b,kw,why", [
    ((4, 64, 32), (4, 16, 64), {}, "K mismatch"),
    ((3, 64, 32), (4, 32, 64), {}, "do not broadcast"),
    ((4, 64, 32), (4, 32, 64), {"dtype": "int32"}, "not supported"),
    ((4, 64, 32), (4, 32, 64), {"dtype": "fp64"}, "unknown dtype"),
    ((4, -1, 32), (4, 32, 64), {}, "negative"),
    ((32,), (32, 64), {}, "1-D"),
    ((4, 64, 32), (4, 64, 32), {"transpose_b": False}, "K mismatch"),
])
def test_bad_input(a, b, kw, why):
    with pytest.raises(ShapeError, match=why):
        plan(a, b, **kw)


def test_transposes_read_k_from_the_right_axis():
    p = plan((4, 32, 64), (4, 48, 32), transpose_a=True, transpose_b=True)
    assert (p.problem.M, p.problem.N, p.problem.K) == (64, 48, 32)


def test_cli_plan(capsys):
    assert main(["plan", "128", "64", "128", "1024", "--dtype", "fp32"]) == 0
    out = capsys.readouterr().out
    chosen = plan((128, 64, 1024), (128, 1024, 128), "fp32").branch     # MergeBatch / IterBatch / ASW within 1%
    assert f"Chosen branch: {chosen}" in out and "[stream_k]" in out
    assert main(["plan", "8", "64", "64", "64", "--batch-a", "1", "--chip", "atlas-a2", "--bias"]) == 0
    out = capsys.readouterr().out
    assert "Chosen branch: to_matmul" in out and "on atlas-a2" in out and "+ bias" in out
    assert main(["plan", "8", "64", "64", "64", "--batch-a", "2", "--batch-b", "4"]) == 0
    assert "broadcast cross" in capsys.readouterr().out
    assert main(["plan", "4", "64", "64", "64", "--branch", "stream_k", "--reduce", "atomic"]) == 0
    assert "reduce = atomic" in capsys.readouterr().out
    assert main(["plan", "8", "64", "64", "64", "--batch-a", "3"]) == 1
    assert "ShapeError" in capsys.readouterr().err
    assert main(["plan", "8", "64", "64", "64", "--branch", "merge_batch", "--batch-a", "2", "--batch-b", "4"]) == 1
    assert "PlanError" in capsys.readouterr().err
    assert main(["plan", "2", "64", "64", "16384", "--dtype", "fp16"]) == 0
    assert "Chosen branch: stream_k" in capsys.readouterr().out          # beyond the seed (override)
    assert main(["plan", "2", "64", "64", "16384", "--dtype", "fp16", "--seed-only"]) == 0
    assert "Chosen branch: asw_basic" in capsys.readouterr().out         # docs/bmm_branches.md §10 alone


# ---- properties ---------------------------------------------------------------------------------------

batch_dims = st.lists(st.sampled_from([1, 1, 2, 3, 4, 8, 33]), max_size=2)


@given(ba=batch_dims, bb=batch_dims, M=st.integers(1, 700), N=st.integers(1, 700),
       K=st.one_of(st.integers(0, 3000), st.integers(3000, 120000)),
       dtype=st.sampled_from(["fp16", "bf16", "fp32", "int8"]), chip=st.sampled_from([P950, A2]),
       ta=st.booleans(), tb=st.booleans(), bias=st.booleans())
def test_random_shapes_plan_legal_and_above_roofline(ba, bb, M, N, K, dtype, chip, ta, tb, bias):
    a = tuple(ba) + ((K, M) if ta else (M, K))
    b = tuple(bb) + ((N, K) if tb else (K, N))
    try:
        np.broadcast_shapes(tuple(ba), tuple(bb))
    except ValueError:
        with pytest.raises(ShapeError):
            plan(a, b, dtype, chip, bias, ta, tb)
        return
    p = plan(a, b, dtype, chip, bias, ta, tb)
    assert p.branch in legal_branches(a, b, dtype, chip, bias, ta, tb)
    assert p.estimate.t_total >= roofline_us(p.problem, pyto.load_chip(chip)) * (1 - 1e-9)
    assert p.estimate.t_total == max(p.estimate.terms().values())
    assert_fits(p)
    assert p.problem.batch_shape == np.broadcast_shapes(tuple(ba), tuple(bb))
    if parallel_blocks(p.problem) and K >= 1:
        assert p.branch != "special" or K == 1


def test_a_branch_estimated_far_faster_outside_its_home_ground_is_taken():
    """StreamK condition 1 counts P at 16 x 16 blocks: [2, 64, 16384] @ [2, 16384, 64] has P = 32 = C, so the seed
    gives it to ASW_Basic; StreamK is estimated 42% faster and emulates 12.1 vs 7.8 us: pyto takes it (OVERRIDE,
    a planner-research review found it); override=None keeps the seed's decision."""
    a, b = (2, 64, 16384), (2, 16384, 64)
    seed = plan(a, b, "fp16", override=None)
    taken = plan(a, b, "fp16")
    assert (seed.branch, taken.branch) == ("asw_basic", "stream_k")
    assert any("beyond the seed: stream_k (outside its home ground)" in x for x in taken.decision), taken.explain()
    assert taken.estimate.t_total <= (1 - OVERRIDE) * seed.estimate.t_total
    times = {br: bmm(pyto.spec(a, "fp16"), pyto.spec(b, "fp16"), branch=br, report=True)[1].cycles
             for br in ("asw_basic", "stream_k")}
    assert times["stream_k"] < times["asw_basic"], times
    # a gain below the margin keeps the seed's choice: MergeBatch estimated 11% faster than IterBatch here
    near = plan((160, 8, 64), (160, 64, 8), "fp16")
    assert near.branch == "iter_batch" and not any("beyond the seed" in x for x in near.decision)
    with pytest.raises(PlanError, match="override must be None or a fraction"):
        plan(a, b, "fp16", override=1.5)


def test_a_researcher_runs_and_estimates_a_tiling_of_their_own():
    """Plan.with_tiling re-checks capacity and re-estimates; run_plan runs it (correct numbers); estimate.versus
    lays the estimate beside the emulator's pipes in one vocabulary (planner-research review)."""
    from pyto_kernels.bmm import run_plan
    from pyto_kernels.bmm.api import check as check_result, random_inputs
    a, b, _ = random_inputs((8, 64, 128), (8, 128, 96), "fp16")
    p = plan(a.shape, b.shape, "fp16", branch="asw_basic")
    q = p.with_tiling(base_m=16, base_k=32)
    assert (q.tiling.base_m, q.tiling.base_k) == (16, 32) and q.forced
    assert (q.tiling.tiles_m, q.tiling.tasks) == (4, 8 * 4 * q.tiling.tiles_n)      # recomputed from base_m
    assert q.decision[-1] == "tiling set by the caller: base_m = 16, base_k = 32"
    assert q.estimate.t_total != p.estimate.t_total
    c, rep = run_plan(q, a, b)
    assert not check_result(c, a, b)
    table = q.estimate.versus(rep)
    assert table.splitlines()[1].startswith("T_total") and "\nM " in table and "bottleneck: estimate" in table
    with pytest.raises(PlanError, match="has no field.* base_q"):
        p.with_tiling(base_q=3)
    with pytest.raises(PlanError, match="does not fit L1"):
        p.with_tiling(k_l1=1 << 20)


def test_a_problem_beyond_the_chips_gm_is_refused_and_one_that_fits_is_planned():
    """A, B and C must fit the chip's GM (950PR: 128 GB); the largest that fit are planned at once (the
    MergeBatch cost walked K one slice at a time: 1 x 1 x 1 x 3e10 took 80 s before its K slices were counted)."""
    with pytest.raises(PlanError, match=r"A, B and C need 4,000,000,000,002 B of GM; ascend950pr has "
                                        r"137,438,953,472 B"):
        plan((1, 1, 10 ** 12), (1, 10 ** 12, 1), "bf16")
    with pytest.raises(PlanError, match="of GM; atlas-a2 has 68,719,476,736 B"):
        legal_branches((1, 1, 2 * 10 ** 10), (1, 2 * 10 ** 10, 1), "bf16", "atlas-a2")
    p = plan((1, 1, 3 * 10 ** 10), (1, 3 * 10 ** 10, 1), "bf16")
    assert p.problem.compulsory_bytes <= pyto.load_chip("ascend950pr").gm_bytes and p.estimate.t_total > 0
    merge = dict((b, t) for b, t, _ in p.alternatives)["merge_batch"]
    assert merge is not None and merge > p.estimate.t_total


def test_with_tiling_recomputes_what_follows_for_stream_k_and_merge_batch():
    """A StreamK tiling's block, K segment, units and cores follow grid_k / m_cnt / n_cnt, and a MergeBatch
    tiling's merged tile follows b (only ASW tilings were recomputed before): the researcher's tiling runs as
    the planner's own would, and matches numpy."""
    from pyto_kernels.bmm import run_plan
    from pyto_kernels.bmm.api import check as check_result, random_inputs
    a, b = (1, 48, 12000), (1, 12000, 80)
    seed = plan(a, b, "bf16", override=None)
    wide = plan(a, b, "bf16")                   # the planner's grid_K beyond theta (see test_bmm_stream_k)
    mine = seed.with_tiling(grid_k=wide.tiling.grid_k, m_cnt=wide.tiling.m_cnt, n_cnt=wide.tiling.n_cnt)
    for f in ("single_m", "single_n", "single_core_k", "units", "cores_used", "rounds", "workspace_bytes"):
        assert getattr(mine.tiling, f) == getattr(wide.tiling, f), f
    assert mine.tiling.cores_used == wide.tiling.grid_k * wide.tiling.m_cnt * wide.tiling.n_cnt
    x, y, _ = random_inputs((1, 40, 3000), (1, 3000, 24), "fp16")
    p = plan(x.shape, y.shape, "fp16", branch="stream_k")
    c, rep = run_plan(p.with_tiling(grid_k=4), x, y)
    assert not check_result(c, x, y) and rep.blocks == 4 * p.tiling.m_cnt * p.tiling.n_cnt
    m = plan((256, 32, 512), (256, 512, 32), "fp16", branch="merge_batch")
    half = m.with_tiling(b=m.tiling.b // 2, b_l1=m.tiling.b_l1 // 2)
    assert (half.tiling.base_m, half.tiling.base_n) == (half.tiling.b * m.tiling.m_pad, half.tiling.b * m.tiling.n_pad)
    assert half.tiling.groups_per_core == -(-m.tiling.batches_per_core // half.tiling.b)


def test_with_tiling_takes_choices_only_checks_values_and_keeps_the_plan_consistent():
    """A planner-research review found settings that ran a kernel on half the batches (MergeBatch cores_used) or part
    of K (StreamK single_core_k) without an error, raw ZeroDivisionErrors, values accepted and failing deep in a
    kernel, estimates ignoring a core count, and ToMatmul refusing its matmul's fields."""
    from pyto_kernels.bmm import run_plan
    from pyto_kernels.bmm.api import check as check_result, random_inputs
    a, b, _ = random_inputs((128, 32, 48), (128, 48, 32), "fp16")
    m = plan(a.shape, b.shape, "fp16", branch="merge_batch").with_tiling(cores_used=16)
    assert (m.tiling.cores_used, m.tiling.batches_per_core) == (16, 8)
    c, rep = run_plan(m, a, b)
    assert not check_result(c, a, b) and rep.blocks == 16
    x, y, _ = random_inputs((8, 256, 512), (8, 512, 256), "fp16")
    asw = plan(x.shape, y.shape, "fp16", branch="asw_basic")
    q = asw.with_tiling(cores_used=16)
    assert q.tiling.tasks_per_core == -(-asw.tiling.tasks // 16) and q.estimate.t_total > asw.estimate.t_total
    it = plan((32, 256, 512), (32, 512, 256), "bf16", branch="iter_batch").with_tiling(cores_used=16)
    assert it.tiling.batches_per_core == 2
    tm = plan((16, 128, 256), (256, 128), "bf16", branch="to_matmul")
    t64 = tm.with_tiling(base_m=64)
    assert t64.tiling.matmul.base_m == 64 and t64.tiling.matmul.tiles_m == -(-tm.tiling.matmul.m // 64)
    sk = plan((1, 48, 12000), (1, 12000, 80), "bf16", branch="stream_k")
    for bad, text in [(dict(single_core_k=256), "single_core_k is not a choice: set grid_k"),
                      (dict(grid_k=0), "grid_k must be an int >= 1"), (dict(reduce="bogus"), "reduce must be one of"),
                      (dict(k_l1=sk.tiling.base_k + 16), "must be a multiple of base_k"),
                      (dict(base_k=0), "base_k must be an int >= 1")]:
        with pytest.raises(PlanError, match=text):
            sk.with_tiling(**bad)
    for bad, text in [(dict(cores_used=64), "exceeds the 32 AI cores"), (dict(full_load="X"), "full_load must be one"),
                      (dict(m=100), "m is not a choice"), (dict(tiles_m=4), "tiles_m is not a choice: set base_m")]:
        with pytest.raises(PlanError, match=text):
            asw.with_tiling(**bad)
    assert "the planner's derivation, before the caller set cores_used" in q.explain()


@pytest.mark.parametrize("call,match", [
    (lambda: plan((100, 1000, 256), (100, 1000, 17), "int8", transpose_a=True).with_tiling(full_load="A"),
     "only a side without batches"),
    (lambda: plan((2, 1, 262144), (1, 262144, 100), "bf16", bias=True).with_tiling(m_cnt=2),
     "leaves an output block empty"),
    (lambda: plan((64, 16, 15), (64, 15, 48), "fp32", chip="atlas-a2").with_tiling(base_n=24),
     "base_n must be a multiple of 16"),
    (lambda: plan((512, 17, 15), (512, 17, 16), "fp16", chip="atlas-a3", transpose_a=True).with_tiling(b=8),
     "b_l1 = 21 must be a multiple of b = 8"),
])
def test_with_tiling_refuses_what_the_kernels_cannot_run(call, match):
    """An explain-audit helper's cases: each was accepted and its estimate beat the roofline or counted work
    the kernel would not do."""
    with pytest.raises(pyto.PlanError, match=match):
        call()


def test_special_with_tiling_recounts_its_tiles():
    q = plan((256, 16, 1), (1, 1, 48), "fp16", bias=(48,)).with_tiling(rows=1)
    assert (q.tiling.units, q.tiling.aiv_used, q.tiling.units_per_aiv) == (256 * 16, 64, 64)
    assert q.estimate.t_total >= roofline_us(q.problem, pyto.load_chip("ascend950pr"))


def test_a_stream_k_outside_condition_2_says_so():
    """blocksPerBatch = 0 (B > C): the override's grid_K = 2 is named a departure, with units, cores and rounds."""
    p = plan((1, 100, 12000), (31, 12000, 48), "fp32", chip="atlas-a3")
    text = p.explain()
    if p.branch == "stream_k":
        assert "no power of two in 2..blocksPerBatch = floor(24/31) = 0 meets condition 2" in text
        assert f"on {p.tiling.cores_used} cores in {p.tiling.rounds} rounds" in text
    assert "(forced)" not in text


def test_with_tiling_full_load_follows_the_fold():
    """fold_m views A [B, M, K] as one [B*M, K] matrix: its full load is legal (a review found the batch check
    refusing it by the outer problem's batches)."""
    q = plan((8, 64, 256), (1, 256, 128), "fp16", branch="to_matmul")
    assert q.tiling.fold == "fold_m" and q.with_tiling(full_load="A").tiling.matmul.full_load == "A"


def test_planning_from_threads_shares_the_memo_safely():
    from concurrent.futures import ThreadPoolExecutor
    import pyto_kernels.bmm.planner as planner
    shapes = [((b, 64, 256), (b, 256, 64)) for b in range(1, 41)]
    with ThreadPoolExecutor(4) as pool:
        branches = list(pool.map(lambda ab: plan(*ab, "bf16").branch, shapes))
    assert branches == [plan(*ab, "bf16").branch for ab in shapes] and len(planner._BUILT) <= planner._BUILT_MAX
