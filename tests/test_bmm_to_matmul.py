"""ToMatmul (kernels/bmm/to_matmul.py) against a float64 numpy reference: every fold, at the edges of its
conditions (BatchA = 1 or BatchB = 1; M/N/K off the 16 grid, M = 1, N = 1, K = 1; DN operands; bias
shapes; broadcast batch dims), the free view really free, A really resident, and the roofline.

Results are checked with pyto_kernels.bmm.api.check: int8 exactly, floats within pyto.testing.matmul_bound.
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
from pyto_kernels.bmm.to_matmul import batched_params, is_view, to_matmul_kernel
from bmm_helpers import stored
from pyto.errors import PlanError

CHIP = pyto.load_chip("ascend950pr")
DTYPES = ["fp16", "bf16", "fp32", "int8"]


def _run(a_shape, b_shape, dt="fp16", bias_shape=None, *, ta=False, tb=False, seed=0, fold=None):
    """Force to_matmul on logical shapes a [.., M, K], b [.., K, N]; check vs numpy; return (c, rep, plan)."""
    a, b, bias = random_inputs(stored(a_shape, ta), stored(b_shape, tb), dt, bias_shape, seed=seed)
    p = plan(a.shape, b.shape, dt, CHIP, bias=False if bias is None else tuple(bias.shape), transpose_a=ta,
             transpose_b=tb, branch="to_matmul")
    if fold is not None:
        assert p.tiling.fold == fold, p.tiling
    c, rep = bmm(a, b, bias, branch="to_matmul", transpose_a=ta, transpose_b=tb, report=True)
    why = check(c, a, b, bias, transpose_a=ta, transpose_b=tb)
    assert not why, f"{a_shape} @ {b_shape} {dt} bias {bias_shape} ta={ta} tb={tb} ({p.tiling.fold}): {why}"
    assert c.dtype == (np.int32 if dt == "int8" else a.dtype)
    assert rep.time_us >= roofline_us(p.problem, CHIP) * (1 - 1e-9)
    return c, rep, p


# ---- each fold ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", DTYPES)
def test_fold_m_is_a_free_view_through_the_matmul_kernel(dt):
    _, rep, p = _run((3, 37, 70), (70, 45), dt, (45,), fold="fold_m")
    assert rep.kernel == "matmul_kernel"          # [B*M, K] @ [K, N]: kernels/matmul.py on reshaped arrays
    assert p.tiling.free


@pytest.mark.parametrize("a_shape,b_shape,bias_shape,ta,fold,view", [
    ((3, 40, 60), (60, 50), (50,), False, "fold_m", True),
    ((3, 40, 60), (1, 60, 50), (3, 1, 50), False, "fold_m", False),    # a bias per batch: no [B*M, K] view
    ((3, 40, 60), (60, 50), None, True, "fold_m", False),              # DN A: batch and M not adjacent
    ((40, 60), (60, 50), None, False, "plain", True),
    ((40, 60), (5, 60, 50), None, False, "a_resident", False),
])
def test_the_plan_counts_the_cores_the_kernel_runs(a_shape, b_shape, bias_shape, ta, fold, view):
    """The tiling the plan explains is the one that runs: its cores_used is the launch's block count, and its
    fold is free exactly where the kernel runs a [B*M, K] view."""
    _, rep, p = _run(a_shape, b_shape, "fp16", bias_shape, ta=ta, fold=fold)
    assert p.tiling.matmul.cores_used == rep.blocks, (p.tiling.matmul, rep.blocks)
    assert (rep.kernel == "matmul_kernel") == view
    assert p.tiling.free == (view or fold == "a_resident")


@pytest.mark.parametrize("dt", DTYPES)
def test_a_resident_holds_a_in_l1(dt):
    """A held when each core's tiles would stream more rows of A than A has and holding is not slower by
    T_total (beyond the model's resolution): here several tiles per core of a 32-row A."""
    _, rep, p = _run((32, 48), (96, 48, 200), dt, (96, 1, 200), fold="a_resident")
    assert rep.kernel == "to_matmul_kernel" and p.tiling.matmul.full_load == "A"
    ops = operands(p.problem, pyto.spec((32, 48), dt), pyto.spec((96, 48, 200), dt), pyto.spec((96, 1, 200), "fp32"))
    blocks, params = batched_params(p, ops)
    assert params["HOLD_M"] >= 32 and params["HOLD_STAGES"] == 1 and blocks == rep.blocks


def test_a_resident_streams_a_with_one_tile_per_core():
    """One tile per core: holding A whole would read no fewer bytes (each core reads its tile's rows of A, the
    rest come from L2 for the other cores), so A streams with the tile like ASW_Basic's."""
    _, rep, p = _run((29, 50), (4, 50, 33), "fp16", (4, 1, 33), fold="a_resident")
    assert p.tiling.matmul.full_load == "" and p.tiling.matmul.tasks_per_core == 1


def test_a_resident_reads_less_than_streaming_a():
    """Held A is read once per core; streamed, once per output tile (timing mode, several tiles per core)."""
    p = plan((32, 64), (128, 64, 256), "fp16", branch="to_matmul")
    assert p.tiling.fold == "a_resident"
    ops = operands(p.problem, pyto.spec((32, 64), "fp16"), pyto.spec((128, 64, 256), "fp16"))
    blocks, params = batched_params(p, ops)
    args = (ops.a, ops.b, ops.bias, ops.out)
    held = pyto.run(to_matmul_kernel, *args, blocks=blocks, mode="timing", **params)
    streamed = pyto.run(to_matmul_kernel, *args, blocks=blocks, mode="timing", **dict(params, HOLD_M=0))
    assert params["HOLD_M"] and held.gm_read_bytes < streamed.gm_read_bytes


def test_fold_n_runs_the_broadcast_problem():
    """A too big for L1 (M̄K̄*dtype > 512KB): the broadcast BMM, A streamed (no rearrangement pass)."""
    _, rep, p = _run((300, 440), (2, 440, 20), "fp32", (20,), fold="fold_n")
    assert p.problem.Mp * p.problem.Kp * 4 > CHIP.buffers["L1"]
    assert rep.kernel == "to_matmul_kernel"


def test_plain_matmul_and_dn_operands():
    _run((45, 70), (70, 33), "bf16", (1, 33), ta=True, tb=True, fold="plain")
    _run((1, 45, 70), (1, 70, 33), "fp16", fold="plain")


def test_fold_m_not_free_dn_a_or_batched_bias():
    """DN A or a bias per batch: no [B*M, K] view; the batched walk with B shared by every batch."""
    _, rep, p = _run((3, 40, 50), (50, 30), "fp16", ta=True, fold="fold_m")
    assert rep.kernel == "to_matmul_kernel"
    _, rep, _ = _run((3, 40, 50), (50, 30), "int8", (3, 1, 30), fold="fold_m")
    assert rep.kernel == "to_matmul_kernel"


def test_broadcast_batch_dims_and_int8_bias_beyond_fp32():
    _run((2, 3, 17, 40), (1, 1, 40, 33), "fp16", (3, 1, 33))        # BatchB = 1, 2-D batch shape
    _run((17, 40), (2, 3, 40, 33), "bf16", (2, 1, 1, 33))           # BatchA = 1, 2-D batch shape
    a, b, _ = random_inputs((3, 20, 40), (40, 24), "int8", seed=5)
    bias = (np.arange(24, dtype=np.int64) * 123_456_789 % 2**30).astype(np.int32)   # not exact in fp32
    c = bmm(a, b, bias, branch="to_matmul")
    assert np.array_equal(c, (a.astype(np.int64) @ b + bias).astype(np.int32))


def test_edges_m1_n1_k1():
    _run((4, 1, 50), (50, 40), "fp16")              # M = 1
    _run((60, 30), (3, 30, 1), "fp32")              # N = 1
    _run((3, 20, 1), (1, 35), "bf16", (35,))        # K = 1 (forced: the planner would take Special)
    _run((1, 1), (5, 1, 1), "int8", (1,))           # everything 1


def test_to_matmul_needs_a_batch_1_side():
    with pytest.raises(PlanError, match="BatchA = 1 or BatchB = 1"):
        plan((2, 3, 4, 5), (2, 3, 5, 6), "fp16", branch="to_matmul")
    with pytest.raises(PlanError, match="BatchA = 1 or BatchB = 1"):      # cross broadcast: neither side is 1
        plan((2, 1, 4, 5), (1, 3, 5, 6), "fp16", branch="to_matmul")


def test_planner_picks_to_matmul_for_a_free_fold():
    p = plan((8, 256, 512), (512, 256), "fp16")
    assert p.branch == "to_matmul" and p.tiling.fold == "fold_m"
    a, b, _ = random_inputs((8, 256, 512), (512, 256), "fp16")
    ops = operands(p.problem, a, b)
    assert is_view(p, ops)


def test_timing_mode_at_a_larger_size():
    a, b = pyto.spec((16, 256, 1024), "bf16"), pyto.spec((1024, 512), "bf16")
    c, rep = bmm(a, b, branch="to_matmul")
    p = plan(a.shape, b.shape, "bf16")
    assert c is None and rep.mode == "timing"
    roof = roofline_us(p.problem, CHIP)
    assert roof <= rep.time_us <= 2 * roof


# ---- property test: shapes inside and at the edges of ToMatmul's condition ---------------------------
@settings(max_examples=14)
@given(batch=st.sampled_from([(1,), (3,), (2, 2)]), M=st.integers(1, 70), N=st.integers(1, 70), K=st.integers(1, 90),
       dt=st.sampled_from(DTYPES), side=st.sampled_from(["a", "b"]), ta=st.booleans(), tb=st.booleans(),
       bias=st.sampled_from([None, "n", "1n", "b1n"]))
def test_to_matmul_property(batch, M, N, K, dt, side, ta, tb, bias):
    """side 'a': A carries the batch (BatchB = 1, fold_m); side 'b': B does (BatchA = 1, a_resident)."""
    a_shape = (batch + (M, K)) if side == "a" else (M, K)
    b_shape = (K, N) if side == "a" else (batch + (K, N))
    bias_shape = {None: None, "n": (N,), "1n": (1, N), "b1n": batch + (1, N)}[bias]
    fold = "plain" if math.prod(batch) == 1 else ("fold_m" if side == "a" else "a_resident")
    _run(a_shape, b_shape, dt, bias_shape, ta=ta, tb=tb, seed=M * 31 + N, fold=fold)
