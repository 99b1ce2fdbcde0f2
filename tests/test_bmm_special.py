"""Special (kernels/bmm/special.py): K = 0 (bias or zeros), K = 1 (outer product on the AIVs) and empty
outputs, against a float64 numpy reference (int8 exactly): dtypes, bias shapes, DN operands, broadcast
batches, M/N off the 32-element grid, M = 1, N = 1; the UB fit; every AIV used; the roofline.
"""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pyto
from pyto_kernels.bmm import bmm, plan
from pyto_kernels.bmm.api import check, random_inputs
from pyto_kernels.bmm.common import operands
from pyto_kernels.bmm.cost import roofline_us
from pyto_kernels.bmm.special import fit, ub_bytes
from bmm_helpers import stored
from pyto.errors import PlanError

CHIP = pyto.load_chip("ascend950pr")
DTYPES = ["fp16", "bf16", "fp32", "int8"]


def _run(a_shape, b_shape, dt="fp16", bias_shape=None, *, ta=False, tb=False, seed=0, bias=None):
    """Force special on logical shapes a [.., M, K], b [.., K, N]; check vs numpy; return (c, rep, plan)."""
    a, b, rnd_bias = random_inputs(stored(a_shape, ta), stored(b_shape, tb), dt, bias_shape, seed=seed)
    bias = rnd_bias if bias is None else bias
    p = plan(a.shape, b.shape, dt, CHIP, bias=bias is not None, transpose_a=ta, transpose_b=tb, branch="special")
    c, rep = bmm(a, b, bias, branch="special", transpose_a=ta, transpose_b=tb, report=True)
    why = check(c, a, b, bias, transpose_a=ta, transpose_b=tb)
    assert not why, f"{a_shape} @ {b_shape} {dt} bias {bias_shape} ta={ta} tb={tb}: {why}"
    assert c.dtype == (np.int32 if dt == "int8" else a.dtype)
    assert rep.time_us >= roofline_us(p.problem, CHIP) * (1 - 1e-9)
    return c, rep, p


# ---- K = 0 ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", DTYPES)
def test_k0_writes_zeros(dt):
    c, rep, p = _run((3, 37, 0), (3, 0, 45), dt)
    assert p.tiling.mode == "fill" and rep.kernel == "special_fill_kernel"
    assert not c.any()


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("bias_shape", [(45,), (1, 45), (3, 1, 45)])
def test_k0_writes_the_bias(dt, bias_shape):
    c, _, _ = _run((3, 37, 0), (3, 0, 45), dt, bias_shape)
    assert c.shape == (3, 37, 45)


def test_k0_is_chosen_by_the_planner_and_fills_every_output_even_if_not_zeroed():
    a, b, bias = random_inputs((2, 20, 0), (2, 0, 70), "bf16", (2, 1, 70))
    assert plan(a.shape, b.shape, "bf16", bias=True).branch == "special"
    c = bmm(a, b, bias)
    assert np.array_equal(c.astype(np.float32), np.broadcast_to(bias.astype(np.float32), (2, 20, 70)))


# ---- K = 1 ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", DTYPES)
def test_k1_outer_product(dt):
    _, rep, p = _run((3, 37, 1), (3, 1, 45), dt, (3, 1, 45))
    assert p.tiling.mode == "outer" and rep.kernel == "special_outer_kernel"


@pytest.mark.parametrize("ta,tb", [(True, False), (False, True), (True, True)])
def test_k1_dn_operands(ta, tb):
    _run((2, 30, 1), (2, 1, 50), "fp16", (50,), ta=ta, tb=tb)


def test_k1_broadcast_batches():
    _run((4, 17, 1), (1, 33), "bf16", (33,))                  # BatchB = 1
    _run((17, 1), (4, 1, 33), "fp32")                        # BatchA = 1
    _run((2, 1, 17, 1), (1, 3, 1, 33), "fp16", (3, 1, 33))   # cross broadcast


def test_k1_edges_and_int8_bias_beyond_fp32():
    _run((5, 1, 1), (5, 1, 1), "fp16")                       # M = N = 1
    _run((2, 1, 1), (2, 1, 300), "fp32", (300,))             # M = 1, N off the 32 grid
    _run((2, 70, 1), (2, 1, 1), "bf16")                      # N = 1
    bias = (np.arange(3 * 40, dtype=np.int64).reshape(3, 1, 40) * 987_654_321 % 2**31).astype(np.int32)
    _run((3, 20, 1), (3, 1, 40), "int8", bias=bias)          # int32 arithmetic: exact where fp32 is not


def test_k1_home_ground_is_planned_and_uses_every_aiv():
    B = 2 * CHIP.aiv                                         # seed: B >= 2 x AIV, one batch fits UB
    a, b, bias = random_inputs((B, 16, 1), (B, 1, 24), "fp16", (24,))
    p = plan(a.shape, b.shape, "fp16", bias=True)
    assert p.branch == "special"
    c, rep = bmm(a, b, bias, report=True)
    assert not check(c, a, b, bias)
    lc = fit(p, operands(p.problem, a, b, bias))
    assert lc.aivs == CHIP.aiv and lc.blocks == CHIP.aic == math.ceil(lc.aivs / 2)
    assert rep.blocks == lc.aivs            # an AIV-only kernel: its block_dim counts AIVs


# ---- empty outputs -------------------------------------------------------------------------------------
@pytest.mark.parametrize("a_shape,b_shape", [((0, 5, 3), (0, 3, 7)), ((2, 0, 3), (2, 3, 7)), ((2, 5, 3), (2, 3, 0)),
                                             ((0, 5, 0), (0, 0, 7))])
def test_empty_output_runs_nothing(a_shape, b_shape):
    a, b, _ = random_inputs(a_shape, b_shape, "fp16")
    c, rep = bmm(a, b, report=True)
    assert c.shape == np.matmul(a, b).shape and c.dtype == np.float16
    assert rep.instructions == 0 and rep.cycles == 0


# ---- UB fit, timing, errors ----------------------------------------------------------------------------
@pytest.mark.parametrize("dt,bias", [("fp16", True), ("int8", True), ("fp32", False)])
@pytest.mark.parametrize("K", [0, 1])
def test_ub_fit_and_aiv_split(dt, bias, K):
    """The kernel's own UB allocation fits one AIV; tiles cover the output; the AIV-only launch's block_dim is the
    AIVs used (on ceil(AIVs / 2) AI cores)."""
    a_shape, b_shape = (8, 300, K), (8, K, 5000)
    specs = [pyto.spec(a_shape, dt), pyto.spec(b_shape, dt), pyto.spec((8, 1, 5000), "fp32") if bias else None]
    p = plan(a_shape, b_shape, dt, bias=bias, branch="special")
    ops = operands(p.problem, *specs)
    lc = fit(p, ops)
    assert lc.ub == ub_bytes(lc.mode, lc.rows, lc.cols, p.problem.dtype, ops.out_dtype, bias, lc.buffers)
    assert lc.ub <= CHIP.buffers["UB"] and lc.rows <= p.tiling.rows
    assert lc.units == 8 * math.ceil(300 / lc.rows) * math.ceil(5000 / lc.cols)
    assert lc.aivs == min(lc.units, CHIP.aiv) and lc.blocks == math.ceil(lc.aivs / 2)
    _, rep = bmm(*specs, branch="special")
    roof = roofline_us(p.problem, CHIP)
    assert rep.blocks == lc.aivs and roof <= rep.time_us <= 1.5 * roof      # the output write dominates


def test_special_needs_k_0_or_1():
    with pytest.raises(PlanError, match="K = 0 or K = 1"):
        plan((2, 8, 2), (2, 2, 8), "fp16", branch="special")


# ---- property test: K in {0, 1} with everything else varied ---------------------------------------------
@settings(max_examples=15)
@given(batch=st.sampled_from([(1,), (3,), (2, 2)]), bcast=st.sampled_from(["none", "a", "b"]), M=st.integers(1, 70),
       N=st.integers(1, 90), K=st.sampled_from([0, 1]), dt=st.sampled_from(DTYPES), ta=st.booleans(),
       tb=st.booleans(), bias=st.sampled_from([None, "n", "1n", "b1n"]))
def test_special_property(batch, bcast, M, N, K, dt, ta, tb, bias):
    a_shape = ((1,) * len(batch) if bcast == "a" else batch) + (M, K)
    b_shape = ((1,) * len(batch) if bcast == "b" else batch) + (K, N)
    bias_shape = {None: None, "n": (N,), "1n": (1, N), "b1n": batch + (1, N)}[bias]
    _run(a_shape, b_shape, dt, bias_shape, ta=ta, tb=tb, seed=M * 97 + N)
