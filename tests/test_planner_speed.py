"""The planner's speed-ups change no choice: plans with the memo caches, the tile search's bound (memo.py,
cost_asw.asw_floor) and the vectorised ASW model (cost_asw_vec) equal the plain model's bit for bit; the
vectorised base-tile enumeration (and cube_tiles' least row of it) equals a one-at-a-time reference; the
vectorised T_total equals estimate()'s on every candidate; the bound bounds; the caches are bounded and keyed on the chip. (Not timed: the speed is shown
by benchmarks/planner_speed.py.)"""
from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyto.chip import load_chip
from pyto.errors import PlanError, PytoError
from pyto_kernels.bmm import cost_asw_vec, fitted, memo, planner
from pyto_kernels.bmm.conditions import ACC_BYTES, FRACTAL, align_down, align_up, cdiv
from pyto_kernels.bmm.cost import estimate
from pyto_kernels.bmm.cost_asw import asw_floor
from pyto_kernels.bmm.tiling_asw import _asw_of
from pyto_kernels.bmm.tiling_cube import _first_candidate, cube_candidates
from pyto_kernels.bmm.tilings import bias_l1_bytes

CHIPS = ("ascend950pr", "atlas-a2")


@st.composite
def problems(draw):
    """(a_shape, b_shape, dtype, bias, transpose_a, transpose_b, {dtype_b, mx}): every kind the planner meets,
    the 8-bit floats (an E4M3FN x E5M2 mix, MX) too."""
    kind = draw(st.sampled_from(["bmm", "b1", "a1", "matmul", "cross"]))
    B = draw(st.integers(1, 300))
    M, N = draw(st.integers(1, 1500)), draw(st.integers(1, 1500))
    K = draw(st.one_of(st.integers(0, 2), st.integers(3, 4096), st.integers(4096, 40000)))
    a, b = {"bmm": ((B, M, K), (B, K, N)), "b1": ((B, M, K), (K, N)), "a1": ((M, K), (B, K, N)),
            "matmul": ((M, K), (K, N)), "cross": ((B, 1, M, K), (1, 2, K, N))}[kind]
    ta, tb = draw(st.booleans()), draw(st.booleans())
    a = a[:-2] + (a[-1], a[-2]) if ta else a
    b = b[:-2] + (b[-1], b[-2]) if tb else b
    bias = draw(st.sampled_from([False, True, (N,), (B, 1, N)]))
    dt = draw(st.sampled_from(["fp16", "bf16", "fp32", "int8", "fp8e4m3fn", "fp8e5m2", "hf8"]))
    low = dict(dtype_b=draw(st.sampled_from([None, "fp8e4m3fn", "fp8e5m2"])), mx=draw(st.booleans())) \
        if dt.startswith("fp8") else {}
    return a, b, dt, bias, ta, tb, low


def exact(plan) -> tuple:
    """Everything a Plan says, floats by repr (every bit), the tilings' derivation text included."""
    def walk(x):
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            return tuple((f.name, walk(getattr(x, f.name))) for f in dataclasses.fields(x)
                         if f.name not in ("chip_spec", "tuning"))
        if isinstance(x, float):
            return repr(x)
        if isinstance(x, (tuple, list)):
            return tuple(walk(v) for v in x)
        return x
    return walk(plan)


def plan_or_error(*args, **kw):
    try:
        return exact(planner.plan(*args, **kw))
    except PytoError as e:
        return f"{type(e).__name__}: {e}"


def plain(*args, **kw):
    """The plan without any memo (nor the planner's own tiling cache) and with every tile candidate estimated."""
    planner._BUILT.clear()
    with memo.disabled():
        return plan_or_error(*args, **kw)


def fast(*args, **kw):
    """The plan from empty caches, then again from warm ones (both must be the plain one)."""
    planner._BUILT.clear()
    memo.clear()
    cold = plan_or_error(*args, **kw)
    planner._BUILT.clear()           # the memo caches alone serve the second
    return cold, plan_or_error(*args, **kw)


@settings(max_examples=25)         # the plain model estimates every candidate: ~0.2 s a problem
@given(problems(), st.sampled_from(CHIPS))
def test_memoised_plans_are_the_plain_models(prob, chip):
    a, b, dt, bias, ta, tb, low = prob
    kw = dict(dtype=dt, chip=chip, bias=bias, transpose_a=ta, transpose_b=tb, **low)
    want = plain(a, b, **kw)
    cold, warm = fast(a, b, **kw)
    assert cold == want
    assert warm == want


@pytest.mark.parametrize("a,b,dt", [((8, 512, 512), (8, 512, 512), "fp16"), ((32, 64, 2048), (32, 2048, 256), "bf16"),
                                    ((384, 300), (128, 300, 512), "bf16"), ((1, 16, 65536), (1, 65536, 64), "bf16")])
def test_memoised_plans_under_fitted_constants(a, b, dt):
    """The fitted constants move the decision between branches, which reads no memoised value: with them the
    memoised plan is still the plain one (and the fit does change this decision's inputs)."""
    fit = fitted.Fitted("ascend950pr", resolution=0.2, override=0.05,
                        scale=(("asw_basic", 1.5), ("stream_k", 0.5)), overhead_us=(("iter_batch", 3.0),))
    with fitted.using(fit):
        want = plain(a, b, dt)
        assert fast(a, b, dt) == (want, want)
    memo.clear()
    assert plan_or_error(a, b, dt) == plain(a, b, dt)


def test_memo_keyed_on_the_chip_object():
    """A chip table edited in memory (another Chip object) is not served the first chip's cached plans."""
    chip = load_chip("ascend950pr")
    small = dataclasses.replace(chip, buffers={**chip.buffers, "L1": chip.buffers["L1"] // 4})
    memo.clear()
    big = plan_or_error((8, 512, 512), (8, 512, 512), "fp16", chip=chip)
    assert plan_or_error((8, 512, 512), (8, 512, 512), "fp16", chip=small) == plain((8, 512, 512), (8, 512, 512),
                                                                                    "fp16", chip=small) != big


def test_memo_caches_are_bounded():
    cache = memo.Memo("test", 5)
    for i in range(12):
        cache.put(i, i)
    assert len(cache) == 5 and cache.get(11) == 11 and cache.get(0) is None
    memo.clear()
    assert all(n == 0 for n, _, _ in memo.stats().values())


def reference_candidates(m, n, k, batch, p, chip, *, cores, a_in_l1=False, b_in_l1=False, hold_copies=1,
                         sharing=None, held_twice=False):
    """tiling_cube.cube_candidates one (base_m, base_n) at a time, as it was written before its vectorisation."""
    def base_k(bm, bn, kp):
        raw = min(chip.buffers["L0A"] // (2 * bm * p.isz), chip.buffers["L0B"] // (2 * bn * p.isz))
        for a in (2 * chip.dvalue_bytes // p.isz, chip.dvalue_bytes // p.isz, p.k_align):
            if raw >= a and a % p.k_align == 0:
                return min(align_down(raw, a), kp)
        return 0

    def k_l1_of(rows, bk, kp, budget):
        while bk >= p.k_align:
            s = budget // (2 * rows * bk * p.isz) if rows else cdiv(kp, bk)
            if s >= 1:
                k_l1 = align_up(cdiv(kp, cdiv(kp, s * bk)), bk)
                return bk, k_l1, 4 if 4 * rows * k_l1 * p.isz <= budget else 2
            bk = align_down(bk // 2, p.k_align)
        return 0, 0, 0

    al, isz = p.mn_align, p.isz
    mp, np_, kp = align_up(m, al), align_up(n, al), align_up(k, p.k_align)
    l0c = chip.buffers["L0C"] // (2 * ACC_BYTES)
    cap_m = min(mp, align_down(chip.buffers["L0A"] // (2 * p.k_align * isz), al))
    cap_n = min(np_, align_down(chip.buffers["L0B"] // (2 * p.k_align * isz), al))
    if p.bias:
        cap_n = min(cap_n, align_down(chip.buffers["BT"] // ACC_BYTES, al))
    gm = chip.path("GM", "L1")
    cps, head = chip.cube_cycles_per_step[p.dtype.name], chip.mmad_head_cycles
    out = []
    for bm in range(al, cap_m + 1, al):
        for bn in range(al, cap_n + 1, al):
            if bm * bn > l0c:
                break
            bk = base_k(bm, bn, kp)
            if not bk:
                continue
            held = ((align_up(m, bm) * align_up(k, bk) if a_in_l1 else 0)
                    + (align_up(n, bn) * align_up(k, bk) if b_in_l1 else 0)) * isz
            if held_twice and 2 * held > chip.buffers["L1"]:
                continue
            rows = (0 if a_in_l1 else bm) + (0 if b_in_l1 else bn)
            bk, k_l1, nbuf = k_l1_of(rows, bk, kp, chip.buffers["L1"] - hold_copies * held - bias_l1_bytes(bn, p))
            if not k_l1:
                continue
            tasks = batch * cdiv(m, bm) * cdiv(n, bn)
            active = min(tasks, cores) if sharing is None else sharing
            bw = min(gm.bytes_per_cycle, chip.l2_bytes_per_cycle / active)
            cube = cdiv(bm, FRACTAL) * cdiv(bn, FRACTAL) * cdiv(k, p.k0) * cps + cdiv(k, bk) * head
            move = rows * k * isz / bw + 2 * cdiv(k, k_l1) * gm.latency
            out.append(((cdiv(tasks, cores) * max(cube, move), cdiv(m, bm) * bm * cdiv(n, bn) * bn, -bm * bn),
                        (bm, bn, bk, k_l1, nbuf)))
    return sorted(out)


HOLDS = [dict(), dict(a_in_l1=True, held_twice=True), dict(b_in_l1=True, hold_copies=2), dict(sharing=3),
         dict(a_in_l1=True, b_in_l1=True)]


@given(problems(), st.sampled_from(CHIPS), st.sampled_from(HOLDS), st.sampled_from([1, 32]), st.booleans())
def test_vectorised_candidates_equal_the_reference(prob, chip, hold, cores, one_batch):
    a, b, dt, bias, ta, tb, low = prob
    try:
        p = planner.parse_problem(a, b, dt, bias, ta, tb, **low)
        planner.plan(a, b, dt, chip, bias, ta, tb, **low)    # a problem the planner refuses on this chip: no search
    except PytoError:
        return
    spec = load_chip(chip)
    args = (p.M, p.N, p.K, 1 if one_batch else p.batch, p, spec)
    try:
        want = reference_candidates(*args, cores=cores, **hold)
    except ZeroDivisionError:
        return
    with memo.disabled():
        if not want:
            with pytest.raises(PlanError, match="no cube tile"):
                cube_candidates(*args, cores=cores, **hold)
            return
        got = cube_candidates(*args, cores=cores, **hold)
    assert got == want
    assert _first_candidate.uncached(*args, cores=cores, **hold) == want[0][1]     # cube_tiles' fast path
    assert [type(x) for key, tiles in got for x in key + tiles] == [type(x) for key, tiles in want for x in key + tiles]


@given(problems(), st.sampled_from(CHIPS), st.sampled_from(["", "A", "B"]))
def test_asw_floor_bounds_every_candidate(prob, chip, full_load):
    """asw_floor <= T_total on every base-tile candidate of an ASW walk (streamed, or a side held in L1)."""
    a, b, dt, bias, ta, tb, low = prob
    try:
        p = planner.parse_problem(a, b, dt, bias, ta, tb, **low)
        planner.plan(a, b, dt, chip, bias, ta, tb, **low)    # a problem the planner refuses on this chip: no search
    except PytoError:
        return
    if p.K == 0 or p.batch * p.M * p.N == 0:
        return
    spec = load_chip(chip)
    try:
        cands = cube_candidates(p.M, p.N, p.K, p.batch, p, spec, cores=spec.aic, a_in_l1=full_load == "A",
                                b_in_l1=full_load == "B", held_twice=bool(full_load))
    except PlanError:
        return
    for _, tiles in cands[::max(1, len(cands) // 40)]:
        t = _asw_of(p, spec, p.batch, p.M, p.N, p.K, tiles, full_load)
        assert asw_floor(t, p, spec) <= estimate(p, t, spec).t_total


@given(problems(), st.sampled_from(CHIPS), st.booleans(), st.sampled_from(["", "A", "B"]))
def test_vectorised_asw_times_equal_the_model(prob, chip, folded, full_load):
    """cost_asw_vec.asw_t_totals equals estimate(...).t_total bit for bit on the base-tile candidates of an ASW
    walk (the problem's own, or ToMatmul's folded [B*M, K] x [K, N]; streamed, or A or B held in L1)."""
    a, b, dt, bias, ta, tb, low = prob
    try:
        p = planner.parse_problem(a, b, dt, bias, ta, tb, **low)
        planner.plan(a, b, dt, chip, bias, ta, tb, **low)    # a problem the planner refuses on this chip: no search
    except PytoError:
        return
    spec = load_chip(chip)
    if not cost_asw_vec.supported(p, spec, full_load) or p.batch * p.M * p.N == 0:
        return
    batch, m = (1, p.batch * p.M) if folded else (p.batch, p.M)
    try:
        cands = cube_candidates(m, p.N, p.K, batch, p, spec, cores=spec.aic, a_in_l1=full_load == "A",
                                b_in_l1=full_load == "B", held_twice=bool(full_load))
    except PlanError:
        return
    tiles = [t for _, t in cands[::max(1, len(cands) // 60)]]
    want = [estimate(p, _asw_of(p, spec, batch, m, p.N, p.K, t, full_load), spec).t_total for t in tiles]
    got = cost_asw_vec.asw_t_totals(p, spec, batch, m, p.N, p.K, tiles, full_load).tolist()
    assert [repr(x) for x in got] == [repr(x) for x in want]
