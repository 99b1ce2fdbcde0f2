"""Behaviour a mutation-testing pass found unpinned (each test kills a mutant that survived the rest of the
suite): GM write-after-read under auto-sync, the fp16 atomic add's two roundings, StreamK's fixed reduction
order, shape and bounds checks of the DSL, capacity padding, L2 recency, the flag latency's scope."""
import ml_dtypes
import numpy as np
import pytest

import pyto
import pyto.language as pl
from pyto_kernels.bmm.api import run_plan
from pyto_kernels.bmm.planner import parse_problem, plan
from pyto_kernels.bmm.tiling_streamk_special import stream_tiling

from bmm_helpers import CHIP
from test_timing import flag_after_load


@pl.kernel
def read_then_overwrite(x, out):
    t = pl.alloc(pl.UB, [16, 64], pl.DT_FP32)
    z = pl.alloc(pl.UB, [16, 64], pl.DT_FP32)
    with pl.section_vector():
        r = pl.get_block_idx() * 16    # an AIV-only kernel: each AIV is a block
        pl.load(t, x, [r, 0])          # MTE2 reads x
        pl.expands(z, 0.0)
        pl.store(x, z, [r, 0])         # MTE3 overwrites x: auto-sync waits for the load (GM WAR)
        pl.store(out, t, [r, 0])


def test_auto_sync_orders_a_gm_write_after_a_read_of_it():
    x = np.random.default_rng(0).random((32, 64)).astype(np.float32)
    x0, out = x.copy(), np.zeros_like(x)
    pyto.run(read_then_overwrite, x, out, blocks=2)
    assert np.array_equal(out, x0) and not x.any()


@pl.kernel
def atomic_fp16(a, b, out):
    from dsl_helpers import matmul_from_gm, matmul_tiles
    tiles = matmul_tiles(16, 32, 16, pl.DT_FP16)
    with pl.section_cube():
        matmul_from_gm(tiles, a, [0, 0], b, [0, 0])
        pl.store(out, tiles[-1], [0, 0], atomic=pl.AtomicType.AtomicAdd)


def test_an_atomic_fp16_add_rounds_the_incoming_value_first():
    """L0C holds 2049; fp16(2049) = 2048 arrives, 1 + 2048 = 2049 rounds to 2048 (one rounding of 2050 would
    give 2050)."""
    a = np.zeros((16, 32), np.float16)
    a[:, :2] = 1
    b = np.zeros((32, 16), np.float16)
    b[0, :], b[1, :] = 2048, 1
    out = np.ones((16, 16), np.float16)
    pyto.run(atomic_fp16, a, b, out)
    assert (out == 2048).all(), out[0, 0]


def test_stream_k_sums_the_segments_in_their_fixed_order():
    """Segment partials 2^25, 1, -2^25, 1 summed pairwise, (p0 + p2) + (p1 + p3), in fp32 give 2; in order 0, 1, 2,
    3 (or most others) 2^25 + 1 rounds the first one away."""
    ash, bsh = (1, 16, 27200), (1, 27200, 16)
    p = plan(ash, bsh, "bf16", override=None)
    assert p.branch == "stream_k" and p.tiling.grid_k == 4
    sk = p.tiling.single_core_k
    a, b = np.zeros(ash, np.float32), np.zeros(bsh, np.float32)
    for c, v in enumerate([2.0 ** 25, 1.0, -2.0 ** 25, 1.0]):
        a[0, 0, c * sk], b[0, c * sk, 0] = 1.0, v
    c, _ = run_plan(p, a.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16))
    assert float(c[0, 0, 0]) == 2.0


@pl.kernel
def mm_n(a, b, out, *, N):
    al, br = pl.alloc(pl.L0A, [32, 32], pl.DT_FP16), pl.alloc(pl.L0B, [32, 32], pl.DT_FP16)
    pl.matmul(pl.alloc(pl.L0C, [32, N], pl.DT_FP32), al, br)


@pl.kernel
def bad_view_end(a, b, out):
    pl.alloc(pl.L0C, [64, 64], pl.DT_FP32)[0:24, 0:16]


@pl.kernel
def column_offset_outside(a, b, out):
    pl.load(pl.alloc(pl.L1, [16, 16], pl.DT_FP16), a, [0, 32])


@pl.kernel
def int8_into_fp32(a, b, out):
    al, br = pl.alloc(pl.L0A, [32, 32], pl.DT_INT8), pl.alloc(pl.L0B, [32, 32], pl.DT_INT8)
    pl.matmul(pl.alloc(pl.L0C, [32, 32], pl.DT_FP32), al, br)


_F16 = (np.ones((32, 32), np.float16), np.ones((32, 32), np.float16), np.zeros((32, 32), np.float32))


@pytest.mark.parametrize("kernel,args,err,match,kw", [
    (mm_n, _F16, pyto.ShapeError, "do not chain", dict(N=48)),
    (bad_view_end, _F16, pyto.AlignmentError, "fractal grid", {}),
    (column_offset_outside, _F16, pyto.OutOfBoundsError, "outside GM tensor 'a'", {}),
    (int8_into_fp32, (np.ones((32, 32), np.int8), np.ones((32, 32), np.int8), np.zeros((32, 32), np.int32)),
     pyto.ShapeError, "accumulate in", {}),
])
def test_dsl_shape_and_bounds_checks(kernel, args, err, match, kw):
    with pytest.raises(err, match=match):
        pyto.run(kernel, *args, **kw)


@pl.kernel
def padded_then_too_big(a, b, out, *, BUF: str, ROWS: int, COLS: int, DT: str):
    buf = {"L1": pl.L1, "UB": pl.UB}[BUF]
    pl.alloc(buf, [ROWS, COLS], DT)
    pl.alloc(buf, [10 ** 6, 16], DT)


@pytest.mark.parametrize("buf,rows,cols,dt,charged", [
    ("L1", 16, 16, "int8", 32 * 32),          # docs/tile_shapes.md §6.4's CeilAlign to 32 for int8
    ("UB", 16, 17, "fp16", 16 * 32 * 2),      # ND rows padded to 32 B
])
def test_capacity_charges_the_padded_size(buf, rows, cols, dt, charged):
    with pytest.raises(pyto.CapacityError) as ei:
        pyto.run(padded_then_too_big, *_F16, BUF=buf, ROWS=rows, COLS=cols, DT=dt)
    assert ei.value.in_use == charged


def test_l2_is_least_recently_used():
    from pyto.emulator.schedule.l2 import l2_hits

    def read(i, k):
        return (i, k, (0, 0, (16 * k, 16 * k + 16, 0, 16)), 100, True, 0)

    hits = l2_hits([[read(0, 1), read(1, 2), read(2, 1), read(3, 3), read(4, 1)]], capacity=200)
    assert 2 in hits and 4 in hits     # region 2 is evicted for 3, not region 1 (just reused)


def test_stream_k_beyond_theta_keeps_k_per_core_at_least_256():
    t = stream_tiling(parse_problem((1, 16, 1024), (1, 1024, 16), "fp16"), CHIP, forced=True, theta=False)
    assert 1024 / t.grid_k >= 256, t.grid_k


def test_a_set_flag_pays_no_flag_latency_on_its_own_pipe():
    """The set waits for its pipe's load to land (no flag latency there); the wait sees it one flag latency
    later; the MTE1 load follows."""
    a = np.ones((32, 32), np.float16)
    rep = pyto.run(flag_after_load, a, a.copy(), auto_sync=False, BARRIER=False)
    pipes, pipe_i, begin, end = rep.events[1], rep.events[5], rep.events[8], rep.events[9]
    gm_load = int(np.flatnonzero(pipe_i == pipes.index("MTE2"))[0])
    l1_load = int(np.flatnonzero(pipe_i == pipes.index("MTE1"))[-1])
    assert begin[l1_load] - end[gm_load] <= CHIP.flag_latency_cycles + 2 * CHIP.scalar_cycles + 1e-9


def test_a_chip_rate_of_zero_is_refused(tmp_path):
    src = pyto.load_chip("ascend950pr").source
    p = tmp_path / "zero.toml"
    p.write_text(open(src).read().replace("gm_bandwidth_gbs = 1600", "gm_bandwidth_gbs = 0", 1))
    with pytest.raises(pyto.ChipError, match="gm_bandwidth_gbs.*positive"):
        pyto.load_chip(p)
