"""ASW_Basic (kernels/bmm/asw_basic.py) against a float64 numpy reference, its swizzle order, and its timing.

Each run goes plan(branch="asw_basic") -> operands -> launch, and is checked with pyto_kernels.bmm.api.check
(int8 exactly; floats within pyto.testing.matmul_bound with the bias as one more term). Small shapes run
in full mode; the large ones (L2 tiling, speed relations) in timing mode.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pyto
from pyto_kernels.bmm import asw_basic
from pyto_kernels.bmm.api import check
from pyto_kernels.bmm.common import operands
from pyto_kernels.bmm.cost import roofline_us
from pyto_kernels.bmm.planner import plan
from pyto_kernels.swizzle import Swizzle

from bmm_helpers import CHIP, NP, inputs as _inputs, ok, run_branch


def _run(a, b, bias=None, *, branch="asw_basic", **kw):
    return run_branch(a, b, bias, branch=branch, **kw)


def _ok(*args, branch="asw_basic", **kw):
    return ok(*args, branch=branch, **kw)


# ---- against numpy ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", list(NP))
@pytest.mark.parametrize("a_shape,b_shape", [((2, 40, 70), (2, 70, 50)),       # no multiple of 16
                                             ((3, 33, 16), (3, 16, 100))])
def test_dtypes_match_numpy(dt, a_shape, b_shape):
    _, _, p = _ok(a_shape, b_shape, dt, seed=len(dt))
    assert p.branch == "asw_basic" and p.tiling.cores_used == min(32, p.tiling.tasks)


@pytest.mark.parametrize("a_shape,b_shape", [
    ((4, 1, 33), (4, 33, 70)),        # M = 1
    ((4, 50, 33), (4, 33, 1)),        # N = 1
    ((2, 20, 1), (2, 1, 30)),         # K = 1 (Special's home, still computable here)
    ((3, 1, 17), (3, 17, 1)),         # M = N = 1
])
def test_degenerate_dims(a_shape, b_shape):
    _ok(a_shape, b_shape, "fp16")


@pytest.mark.parametrize("a_shape,b_shape", [
    ((1, 40, 70), (6, 70, 50)),           # BatchA = 1: A broadcast
    ((6, 40, 70), (70, 50)),              # BatchB = 1 (2-D B)
    ((4, 1, 20, 33), (1, 3, 33, 40)),     # cross broadcast: A (4, 1), B (1, 3) -> (4, 3)
    ((2, 1, 3, 17, 24), (5, 1, 24, 20)),  # two-level batch, broadcast on both sides
])
def test_broadcast_batches(a_shape, b_shape):
    _, _, p = _ok(a_shape, b_shape, "bf16")
    if p.problem.broadcast == "cross":
        assert p.tiling.broadcast_resident == "AB"


@pytest.mark.parametrize("dt", ["fp16", "int8"])
@pytest.mark.parametrize("bias_shape", [(50,), (1, 50), (3, 1, 50)])
def test_bias(dt, bias_shape):
    _ok((3, 40, 70), (3, 70, 50), dt, bias_shape=bias_shape)


def test_bias_broadcast_over_cross_batches():
    _ok((4, 1, 20, 33), (1, 3, 33, 40), "fp32", bias_shape=(1, 3, 1, 40))


@pytest.mark.parametrize("dt", ["fp16", "int8"])
@pytest.mark.parametrize("ta,tb", [(True, False), (False, True), (True, True)])
def test_transposes(dt, ta, tb):
    a_shape, b_shape = (2, 70, 40) if ta else (2, 40, 70), (2, 50, 70) if tb else (2, 70, 50)
    _ok(a_shape, b_shape, dt, bias_shape=(50,), transpose_a=ta, transpose_b=tb)


def _gm_reads(a_shape, b_shape, dt, **overrides):
    """GM bytes read by asw_basic_kernel in timing mode with the planner's parameters, some overridden."""
    p = plan(a_shape, b_shape, dt, CHIP, branch="asw_basic")
    ops = operands(p.problem, pyto.spec(a_shape, dt), pyto.spec(b_shape, dt))
    params = {**asw_basic.params_of(p.tiling, p.problem, CHIP), **overrides}
    rep = pyto.run(asw_basic.asw_basic_kernel, ops.a, ops.b, ops.bias, ops.out, chip=CHIP,
                   blocks=p.tiling.cores_used, mode="timing", **params)
    return rep.gm_read_bytes, p


def test_l1_full_load_of_a_shared_small_a():
    """BatchA = 1, A one base tile tall, >= 4 rounds per core: A is held in L1, loaded once per core."""
    _, _, p = _ok((1, 30, 40), (128, 40, 60), "fp16")
    assert p.tiling.full_load == "A" and p.tiling.tasks >= 4 * 32
    held, _ = _gm_reads((1, 30, 40), (128, 40, 60), "fp16")
    streamed, _ = _gm_reads((1, 30, 40), (128, 40, 60), "fp16", FULL_LOAD_A=False)
    a_bytes = 30 * 40 * 2
    assert streamed - held >= (p.tiling.tasks - p.tiling.cores_used) * a_bytes     # one load per core, not per tile


def test_l1_full_load_of_b_with_bias_and_transpose():
    _, _, p = _ok((130, 20, 64), (1, 40, 64), "bf16", bias_shape=(40,), transpose_b=True)
    assert p.tiling.full_load == "B"


# ---- swizzle: ASW window snake, L2 blocks, diagonal assignment --------------------------------------
def test_l2_order_visits_every_tile_once_and_stays_in_its_block():
    sw = Swizzle.asw(32)
    order = sw.tiles_l2(10, 7, 2, 2)                    # blocks of 5 x 4 tiles
    assert sorted(order) == [(m, n) for m in range(10) for n in range(7)]
    blocks = [(m // 5, n // 4) for m, n in order]
    assert blocks == sorted(blocks, key=blocks.index)   # one block finished before the next starts
    assert [blocks[i] for i in sorted({blocks.index(b) for b in blocks})] == [(0, 0), (0, 1), (1, 1), (1, 0)]


def test_l2_block_windows_are_diagonal():
    """Inside an L2 block the W tasks that start together read W different A rows and W different B columns."""
    order = Swizzle.asw(32).tiles_l2(8, 8, 1, 2)        # blocks of 8 x 4 tiles, W = 4
    first = order[:4]
    assert len({m for m, _ in first}) == 4 and len({n for _, n in first}) == 4
    assert Swizzle.asw(32).tiles_l2(8, 8) == Swizzle.asw(32).tiles(8, 8)   # no L2 tiling: plain window snake


def test_l2_tiling_in_full_mode_matches_numpy():
    """The kernel with forced L2 blocks (2 x 2) and a 2-row window on a small problem."""
    a, b, bias = _inputs((2, 70, 40), (2, 40, 90), "fp16", bias_shape=(90,))
    out = np.zeros((2, 70, 90), np.float16)
    params = dict(BASE_M=16, BASE_N=32, BASE_K=32, K_L1=32, WINDOW=2, L2_M=2, L2_N=2, BIAS=True)
    pyto.run(asw_basic.asw_basic_kernel, a, b, bias.reshape(1, 1, 90), out, chip=CHIP, blocks=5, **params)
    assert not check(out, a, b, bias)


def test_l2_tiling_from_the_planner_in_timing_mode():
    """One batch's A + B exceed L2 (128MB): the tiling cuts N into L2 blocks; the kernel walks them."""
    a, b = pyto.spec((1, 256, 140000), "fp16"), pyto.spec((1, 140000, 256), "fp16")
    _, rep, p = _run(a, b)
    t = p.tiling
    assert t.l2_tiles_m * t.l2_tiles_n > 1
    assert rep.time_us >= roofline_us(p.problem, CHIP) * (1 - 1e-9)


# ---- property test -----------------------------------------------------------------------------------
@settings(max_examples=12, deadline=None)
@given(dt=st.sampled_from(list(NP)), m=st.integers(1, 70), n=st.integers(1, 70), k=st.integers(1, 90),
       batch=st.sampled_from([((2,), (2,)), ((1,), (3,)), ((3,), (1,)), ((2, 1), (1, 2))]),
       bias=st.booleans(), ta=st.booleans(), tb=st.booleans(), seed=st.integers(0, 2**16))
def test_hypothesis_small_shapes(dt, m, n, k, batch, bias, ta, tb, seed):
    (ab, bb) = batch
    a_shape = ab + ((k, m) if ta else (m, k))
    b_shape = bb + ((n, k) if tb else (k, n))
    _ok(a_shape, b_shape, dt, bias_shape=(n,) if bias else None, seed=seed, transpose_a=ta, transpose_b=tb)


# ---- timing: roofline and speed on its home ground ----------------------------------------------------
@pytest.mark.parametrize("a_shape,b_shape,dt", [((8, 256, 512), (8, 512, 256), "fp16"),
                                                ((16, 128, 256), (16, 256, 128), "bf16"),
                                                ((4, 1, 128, 256), (1, 8, 256, 128), "fp16"),
                                                ((2, 1024, 2048), (2, 2048, 1024), "int8"),
                                                ((4, 512, 1024), (4, 1024, 512), "fp32")])
def test_timing_respects_the_roofline(a_shape, b_shape, dt):
    _, rep, p = _run(pyto.spec(a_shape, dt), pyto.spec(b_shape, dt))
    assert rep.time_us >= roofline_us(p.problem, CHIP) * (1 - 1e-9)


@pytest.mark.parametrize("a_shape,b_shape", [((8, 256, 512), (8, 512, 256)),
                                             ((4, 512, 1024), (4, 1024, 512)),
                                             ((4, 1, 128, 256), (1, 8, 256, 128))])
def test_home_ground_beats_stream_k(a_shape, b_shape):
    """Where the planner picks ASW_Basic, StreamK forced on the same shape is slower (timing mode)."""
    a, b = pyto.spec(a_shape, "fp16"), pyto.spec(b_shape, "fp16")
    assert plan(a_shape, b_shape, "fp16", CHIP).branch == "asw_basic"
    _, asw, _ = _run(a, b)
    _, sk, _ = _run(a, b, branch="stream_k")
    assert asw.cycles < sk.cycles, (asw.cycles, sk.cycles)
