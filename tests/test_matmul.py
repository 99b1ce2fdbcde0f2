"""pyto_kernels.matmul (multi-core matmul on the emulator), its shared cube block and the swizzle policy.

Results are compared with a float64 numpy reference within `matmul_bound` (int8 exactly).
"""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pyto
from pyto_kernels import matmul
from pyto_kernels.matmul import default_tile_shapes, plan_matmul
from pyto_kernels.swizzle import Swizzle, TileGrid, asw_window
from pyto.errors import PlanError, ShapeError, TilingError
from pyto.testing import assert_close, matmul_bound
from pyto.tiling import cube_tile_shapes, reset_cube_tile_shapes

DTYPES = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp32": np.float32, "int8": np.int8}


@pytest.fixture(autouse=True)
def _no_default_tile_shapes():
    """Tests here choose their tile shapes; none leaks in from (or out to) other tests."""
    reset_cube_tile_shapes()
    yield
    reset_cube_tile_shapes()


def _operands(M, N, K, name, seed=0, bias=None):
    rng = np.random.default_rng(seed)
    dt = DTYPES[name]
    if name == "int8":
        a, b = rng.integers(-128, 128, (M, K)).astype(dt), rng.integers(-128, 128, (K, N)).astype(dt)
    else:
        a, b = rng.standard_normal((M, K)).astype(dt), rng.standard_normal((K, N)).astype(dt)
    if bias is None:
        bias_arr = None
    elif name == "int8":                # int8 matmuls take an integer bias (added in int32)
        bias_arr = rng.integers(-1000, 1000, bias).astype(np.int32)
    else:
        bias_arr = rng.standard_normal(bias).astype(np.float16)
    return a, b, bias_arr


def _check(c, a, b, bias=None):
    """c == a @ b (+ bias) within the bound of a cube matmul (the bias is one more exact fp32 term)."""
    if bias is not None:
        N = b.shape[1]
        a = np.concatenate([a.astype(np.float64), np.ones((a.shape[0], 1))], axis=1)
        b = np.concatenate([b.astype(np.float64), np.asarray(bias, np.float64).reshape(1, N)], axis=0)
    ref = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
    assert c.shape == ref.shape
    if c.dtype == np.int32:
        assert np.array_equal(c, ref.astype(np.int64).astype(np.int32))
    else:
        assert_close(c, ref, matmul_bound(a, b, c.dtype))


def _run(a, b, bias=None, *, transpose_a=False, transpose_b=False, **kw):
    """matmul on (optionally) DN-stored operands: a [K, M] with transpose_a, b [N, K] with transpose_b."""
    ga = np.ascontiguousarray(a.T) if transpose_a else a
    gb = np.ascontiguousarray(b.T) if transpose_b else b
    return matmul(ga, gb, bias, transpose_a=transpose_a, transpose_b=transpose_b, **kw)


# ---- swizzle -------------------------------------------------------------------------------------
@pytest.mark.parametrize("cores,window", [(32, 4), (24, 4), (20, 4), (16, 4), (9, 3), (8, 2), (7, 1), (1, 1)])
def test_asw_window_is_the_largest_divisor_up_to_sqrt(cores, window):
    assert asw_window(cores) == window
    assert Swizzle.asw(cores) == Swizzle(window, True)


def test_asw_window_of_the_chips():
    assert asw_window(pyto.load_chip("ascend950pr").aic) == 4      # C = 32 (docs/bmm_branches.md §2)
    assert asw_window(pyto.load_chip("atlas-a2").aic) == 4         # C = 24


def test_asw_snake_order():
    """Windows of W rows; inside, columns top to bottom; even windows forward, odd windows backward."""
    order = Swizzle(2, True).tiles(5, 3)
    assert order == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2),      # window 0: N forward
                     (2, 2), (3, 2), (2, 1), (3, 1), (2, 0), (3, 0),      # window 1: N backward
                     (4, 0), (4, 1), (4, 2)]                              # window 2 (a 1-row tail): forward


def test_identity_order_is_row_major():
    assert Swizzle.identity().tiles(2, 3) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]


def test_asw_wave_touches_w_rows_and_a_band_of_columns():
    """The 32 tiles running at once on 950 (one wave) span W = 4 rows of A and 32 / 4 = 8 columns of B."""
    order = Swizzle.asw(32).tiles(16, 16)
    for wave in range(0, len(order), 32):
        tiles = order[wave:wave + 32]
        assert len({m for m, _ in tiles}) == 4 and len({n for _, n in tiles}) == 8


@settings(max_examples=30)
@given(st.integers(1, 12), st.integers(1, 12), st.integers(1, 6), st.booleans(), st.integers(1, 9))
def test_swizzle_visits_every_tile_once_and_assign_partitions(m_tiles, n_tiles, window, snake, blocks):
    order = Swizzle(window, snake).tiles(m_tiles, n_tiles)
    assert sorted(order) == [(m, n) for m in range(m_tiles) for n in range(n_tiles)]
    parts = [Swizzle.assign(order, blocks, i) for i in range(blocks)]
    assert sorted(t for p in parts for t in p) == sorted(order)
    assert all(p == order[i::blocks] for i, p in enumerate(parts))      # round robin


def test_tile_grid_tails_and_coords():
    grid = TileGrid(100, 70, 32, 32, Swizzle(2, True))
    assert (grid.m_tiles, grid.n_tiles, grid.count) == (4, 3, 12)
    assert grid.actual_shape((3, 2)) == (4, 6) and grid.actual_shape((0, 0)) == (32, 32)
    assert grid.offset((3, 2)) == (96, 64)
    assert [grid.block_coord(t) for t in range(grid.count)] == grid.order()
    assert grid.for_block(5, 1) == grid.order()[1::5]


# ---- matmul against numpy -----------------------------------------------------------------------
SHAPES = [(17, 33, 70), (48, 64, 96), (1, 1, 1), (1, 40, 50), (40, 1, 50), (33, 20, 1)]


@pytest.mark.parametrize("name", list(DTYPES))
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_matmul_matches_numpy(name, M, N, K):
    a, b, _ = _operands(M, N, K, name, seed=M + N + K)
    c = matmul(a, b)
    assert c.dtype == (np.int32 if name == "int8" else DTYPES[name])
    _check(c, a, b)


@pytest.mark.parametrize("name", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("bias_shape", ["N", "1N"])
def test_matmul_bias(name, bias_shape):
    M, N, K = 37, 70, 90
    a, b, bias = _operands(M, N, K, name, seed=5, bias=(N,) if bias_shape == "N" else (1, N))
    _check(matmul(a, b, bias), a, b, bias)


@pytest.mark.parametrize("name", ["fp16", "fp32", "int8"])
@pytest.mark.parametrize("ta,tb", [(True, False), (False, True), (True, True)])
def test_matmul_transposed_operands(name, ta, tb):
    a, b, _ = _operands(45, 50, 75, name, seed=7)
    _check(_run(a, b, transpose_a=ta, transpose_b=tb), a, b)


def test_matmul_transposed_with_bias_and_tile_shapes():
    a, b, bias = _operands(70, 90, 100, "bf16", seed=8, bias=(90,))
    ts = pyto.CubeTileShapes(32, 32, 32, 64, 32, 32)
    _check(_run(a, b, bias, transpose_a=True, transpose_b=True, tile_shapes=ts, blocks=3), a, b, bias)


@pytest.mark.parametrize("blocks", [1, 3, 7])
def test_matmul_several_blocks(blocks):
    a, b, _ = _operands(100, 90, 130, "fp16", seed=blocks)
    c, rep = matmul(a, b, tile_shapes=pyto.CubeTileShapes(32, 32, 32, 64, 32, 32), blocks=blocks, report=True)
    _check(c, a, b)
    assert rep.blocks == blocks


def test_matmul_default_blocks_is_min_of_cores_and_tiles():
    a, b, _ = _operands(64, 96, 40, "fp16")
    _, rep = matmul(a, b, tile_shapes=pyto.CubeTileShapes(32, 32, 32, 32, 32, 32), report=True)
    assert rep.blocks == 2 * 3


@pytest.mark.parametrize("name", ["fp16", "int8"])
def test_matmul_on_atlas_a2(name):
    a, b, bias = _operands(130, 70, 200, name, seed=11, bias=(70,))
    c, rep = matmul(a, b, bias, chip="atlas-a2", report=True)
    _check(c, a, b, bias)
    assert rep.chip == "atlas-a2" and rep.blocks <= 24


def test_unit_flag_and_software_sync_agree():
    a, b, _ = _operands(64, 64, 200, "fp16", seed=12)
    ts = pyto.CubeTileShapes(32, 32, 32, 64, 32, 32)
    c1 = matmul(a, b, tile_shapes=ts, unit_flag=True)
    c2 = matmul(a, b, tile_shapes=ts, unit_flag=False)
    assert np.array_equal(c1, c2)
    _check(c1, a, b)


def test_identity_and_asw_orders_give_the_same_result():
    a, b, _ = _operands(100, 120, 64, "fp16", seed=9)
    ts = pyto.CubeTileShapes(16, 16, 32, 64, 16, 16)
    plan = plan_matmul(100, 120, 64, "fp16", "ascend950pr", ts)
    assert plan.blocks == 32 and (plan.params["WINDOW"], plan.params["SNAKE"]) == (4, True)
    c_asw = matmul(a, b, tile_shapes=ts)
    assert np.array_equal(c_asw, matmul(a, b, tile_shapes=ts, swizzle="identity"))
    _check(c_asw, a, b)
    with pytest.raises(ShapeError, match="swizzle"):
        matmul(a, b, swizzle="zigzag")


# ---- tile shapes (docs/tile_shapes.md §6) --------------------------------------------------------------------
def test_tile_shapes_from_set_cube_tile_shapes():
    """mL1 x nL1 tiles of 2 x 2 L0 tiles; K <= kL1 holds them in L1, K > kL1 streams kL1-deep slices."""
    with cube_tile_shapes([32, 64], [32, 128], [32, 64]):
        for K in (100, 300):
            a, b, _ = _operands(100, 110, K, "fp16", seed=K)
            c, rep = matmul(a, b, report=True)
            _check(c, a, b)
            assert rep.blocks == 2 * 2


def test_broken_tile_shapes_raise_tiling_error():
    with pytest.raises(TilingError) as e:
        pyto.set_cube_tile_shapes([32, 48], [32, 64], [32, 64])           # mL1 % mL0 != 0
    assert e.value.rule == "divisible_m"
    a, b, _ = _operands(32, 32, 32, "fp16")
    with cube_tile_shapes([32, 32], [24, 24], [32, 32]):                  # fine without a dtype ...
        with pytest.raises(TilingError) as e:
            matmul(a, b)                                                  # ... but 24 fp16 is 48 B
    assert e.value.rule == "align_k"
    with pytest.raises(TilingError) as e:
        matmul(a, b, chip="atlas-a2", tile_shapes=pyto.CubeTileShapes(256, 256, 32, 32, 256, 256))
    assert e.value.rule == "l0c_capacity"                                 # 256 KB > A2's 128 KB L0C
    with pytest.raises(TilingError) as e:
        matmul(a, b, np.zeros(32, np.float16), chip="atlas-a2",
               tile_shapes=pyto.CubeTileShapes(16, 16, 32, 32, 512, 512))
    assert e.value.rule == "bt_capacity"


@pytest.mark.parametrize("chip", ["ascend950pr", "atlas-a2", "atlas-a3"])
@pytest.mark.parametrize("name", list(DTYPES))
@pytest.mark.parametrize("M,N,K", [(4096, 4096, 4096), (1, 5000, 300), (300, 7, 10), (1, 1, 1)])
def test_default_tile_rule_is_legal_and_double_buffers(chip, name, M, N, K):
    spec = pyto.load_chip(chip)
    dt = pyto.DType[name]
    ts = default_tile_shapes(M, N, K, dt, chip, bias=name != "int8", transpose_a=True)   # checks docs/tile_shapes.md §6
    assert ts.mL0 == ts.mL1 and ts.nL0 == ts.nL1 and ts.kL1 % ts.kL0 == 0
    assert 2 * ts.mL0 * ts.nL0 * 4 <= spec.buffers["L0C"]
    assert 2 * ts.mL0 * ts.kL0 * dt.itemsize <= spec.buffers["L0A"]
    assert 2 * ts.nL0 * ts.kL0 * dt.itemsize <= spec.buffers["L0B"]
    assert (ts.kL0 * dt.itemsize) % 32 == 0 and ts.mL0 % 16 == 0


# ---- L1 full load (docs/bmm_branches.md §8.2.5) -------------------------------------------------------------
def test_l1_full_load_of_a_small_a():
    """A (32 x 64) held in L1: loaded once per core instead of once per tile; same result bit for bit."""
    a, b, _ = _operands(32, 512, 64, "fp16", seed=13)
    ts = pyto.CubeTileShapes(32, 32, 32, 64, 32, 32)
    plan = plan_matmul(32, 512, 64, pyto.DType.fp16, "ascend950pr", ts, blocks=4)
    assert plan.full_load == "A" and plan.params["HOLD_M"] == 32        # 16 N tiles / 4 cores >= 4 rounds
    c_full, rep_full = matmul(a, b, tile_shapes=ts, blocks=4, report=True)
    c_stream, rep_stream = matmul(a, b, tile_shapes=ts, blocks=4, full_load=False, report=True)
    _check(c_full, a, b)
    assert np.array_equal(c_full, c_stream)
    tiles_per_core = 16 // 4
    assert rep_stream.instructions - rep_full.instructions == 4 * (tiles_per_core - 1)  # A loads saved
    a_bytes = a.nbytes
    assert rep_stream.gm_read_bytes - rep_full.gm_read_bytes == pytest.approx(4 * (tiles_per_core - 1) * a_bytes)


def test_l1_full_load_not_taken_with_few_rounds_or_a_large_a():
    ts = pyto.CubeTileShapes(32, 32, 32, 64, 32, 32)
    assert plan_matmul(32, 96, 64, "fp16", "ascend950pr", ts, blocks=1).full_load == ""     # 3 rounds < 4
    assert plan_matmul(32, 512, 64, "fp16", "ascend950pr", ts, blocks=8).full_load == ""    # 2 per core
    big_k = 8192                                      # 32 x 8192 x 2B x 2 = 1 MB > L1
    assert plan_matmul(32, 512, big_k, "fp16", "ascend950pr", ts, blocks=4).full_load == ""
    # forced, the error gives the held bytes against half of L1 (it said "does not fit ... or base_m is not a
    # multiple of 16" whichever failed)
    with pytest.raises(PlanError, match=r"A held is 524,288 B \(32 x 8192 fp16\), more than half of L1 "
                                        r"\(262,144 of 524,288 B on ascend950pr\)$"):
        plan_matmul(32, 512, big_k, "fp16", "ascend950pr", ts, blocks=4, full_load="A")


@pytest.mark.parametrize("din,dout", [("fp16", "int8"), ("fp16", "int32"), ("int8", "fp16"), ("int8", "fp32")])
def test_an_out_dtype_fixpipe_cannot_write_is_refused_before_the_run(din, dout):
    """docs/tile_shapes.md §6.9 constrains the out dtype only with split-K; without it an out dtype the accumulator cannot be
    written as (no Fixpipe quantisation in pyto) is refused by the planner, naming the conversions there are
    (it failed inside the kernel's store: a docs/tile_shapes.md audit's find)."""
    ts = pyto.set_cube_tile_shapes([32, 32], [32, 64], [32, 32], dtype=din, out_dtype=dout)
    with pytest.raises(pyto.UnsupportedError, match=rf"out_dtype {dout} with {din} inputs: .* as "
                                                    rf"{'int32' if din == 'int8' else 'fp32/fp16/bf16'} \(Fixpipe"):
        plan_matmul(64, 64, 64, din, "ascend950pr", ts)


@pytest.mark.parametrize("opt", [dict(a_format="NZ"), dict(out_format="NZ"), dict(scale=True)])
def test_tile_shapes_for_nz_operands_or_a_scale_are_refused(opt):
    """pyto_kernels.matmul reads and writes ND and has no Fixpipe scale: tile shapes checked for NZ operands or a scale
    describe another matmul (they ran, as ND, after NZ rules had been applied: a docs/tile_shapes.md audit's find)."""
    ts = pyto.set_cube_tile_shapes([32, 32], [32, 64], [32, 32], dtype="fp16", **opt)
    with pytest.raises(pyto.UnsupportedError, match=rf"tile shapes set with .*{list(opt)[0]}.* ND"):
        plan_matmul(64, 64, 64, "fp16", "ascend950pr", ts)


def test_an_automatic_full_load_that_leaves_no_room_streams_both():
    """A legal tiling whose A + B slots fill L1: the full load of a small A that the planner takes by itself would
    crowd out B's streamed slot; it streams both instead (it raised PlanError, a docs/tile_shapes.md audit's find);
    forcing the full load still says it does not fit."""
    ts = pyto.set_cube_tile_shapes([64, 64], [64, 1024], [192, 192], dtype="fp16", chip="ascend950pr")
    plan = plan_matmul(64, 24576, 2048, "fp16", "ascend950pr", ts)
    assert plan.full_load == "" and plan.params["HOLD_M"] == 0
    with pytest.raises(PlanError, match="with full load A do not fit L1"):
        plan_matmul(64, 24576, 2048, "fp16", "ascend950pr", ts, full_load="A")
    a, b, _ = _operands(64, 960, 2048, "fp16", seed=21)
    c = matmul(a, b, tile_shapes=ts, blocks=1)
    assert_close(c, a.astype(np.float64) @ b.astype(np.float64), matmul_bound(a, b, np.float16))


@pytest.mark.parametrize("ta,tb", [(False, False), (True, True)])
def test_l1_full_load_of_b_and_transposed(ta, tb):
    a, b, bias = _operands(200, 20, 50, "fp16", seed=14, bias=(20,))
    ts = pyto.CubeTileShapes(16, 16, 32, 64, 32, 32)
    plan = plan_matmul(200, 20, 50, "fp16", "ascend950pr", ts, blocks=2, bias_dtype="fp16")
    assert plan.full_load == "B"
    _check(_run(a, b, bias, transpose_a=ta, transpose_b=tb, tile_shapes=ts, blocks=2), a, b, bias)
    a2, b2, _ = _operands(40, 512, 64, "fp16", seed=15)
    _check(_run(a2, b2, transpose_a=ta, transpose_b=tb, tile_shapes=ts, blocks=3, full_load="A"), a2, b2)


def test_forced_full_load_that_does_not_fit_is_a_plan_error():
    a, b, _ = _operands(32, 32, 32, "fp16")
    with pytest.raises(PlanError, match="half of L1"):
        matmul(np.zeros((256, 1024), np.float16), np.zeros((1024, 32), np.float16), full_load="A")
    with pytest.raises(ShapeError, match="full_load"):
        matmul(a, b, full_load="C")


# ---- split-K ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["fp16", "int8"])
def test_split_k_adds_segments_atomically(name):
    a, b, bias = _operands(40, 40, 300, name, seed=16, bias=(40,))
    ts = pyto.CubeTileShapes(32, 32, 32, 64, 32, 32, enable_split_k=True)
    plan = plan_matmul(40, 40, 300, name, "ascend950pr", ts)
    assert plan.params["GRID_K"] == 5 and plan.blocks == 4 * 5
    c = matmul(a, b, bias, tile_shapes=ts)
    assert c.dtype == (np.int32 if name == "int8" else np.float32)        # docs/tile_shapes.md §6.9 split-K out dtypes
    _check(c, a, b, bias)
    with pytest.raises(PlanError, match="split-K"):
        matmul(a, b, tile_shapes=ts, full_load="A")


# ---- errors and modes ---------------------------------------------------------------------------
def test_bad_inputs_raise_shape_error():
    a, b, _ = _operands(8, 8, 8, "fp16")
    with pytest.raises(ShapeError, match="2-D"):
        matmul(a[0], b)
    with pytest.raises(ShapeError, match="differ in K"):
        matmul(a, b[:5])
    with pytest.raises(ShapeError, match="share one of"):
        matmul(a.astype(np.int32), b.astype(np.int32))
    with pytest.raises(ShapeError, match="share one of"):
        matmul(a, b.astype(np.float32))
    with pytest.raises(ShapeError, match="bias"):
        matmul(a, b, np.zeros(9, np.float16))
    with pytest.raises(ShapeError, match="bias"):
        matmul(a, b, np.zeros((2, 8), np.float16))
    with pytest.raises(ShapeError, match="bias"):
        matmul(a, b, np.zeros(8, np.int32))
    with pytest.raises(ShapeError, match="empty"):
        matmul(a[:, :0], b[:0])
    with pytest.raises(ShapeError, match="dtype"):
        matmul(a.astype(np.float64), b)


@pytest.mark.parametrize("bias_dtype", [np.int32, np.int8])
def test_int8_bias_goes_through_bt_as_int32(bias_dtype):
    a, b, _ = _operands(40, 50, 70, "int8", seed=21)
    bias = np.random.default_rng(22).integers(-100, 100, 50).astype(bias_dtype)
    if bias_dtype is np.int32:
        bias *= 10_000_000             # beyond fp32's exact integers: the bias must stay int32 all the way
    c = matmul(a, b, bias)
    assert c.dtype == np.int32
    assert np.array_equal(c, (a.astype(np.int64) @ b.astype(np.int64) + bias).astype(np.int32))


def test_int8_bias_must_be_an_integer():
    a, b, _ = _operands(8, 8, 8, "int8")
    with pytest.raises(ShapeError, match="bias"):
        matmul(a, b, np.zeros(8, np.float16))


def test_timing_mode_with_specs_respects_the_roofline():
    M, N, K = 1024, 1024, 1024
    c, rep = matmul(pyto.spec((M, K), "fp16"), pyto.spec((K, N), "fp16"), report=True)
    assert c is None and rep.mode == "timing" and rep.blocks == 32
    chip = pyto.load_chip("ascend950pr")
    roofline_s = max(2 * M * N * K / chip.peak_flops("fp16"), 2 * (M * K + K * N + M * N) / 1.6e12)
    assert rep.time_us * 1e-6 >= roofline_s
    assert rep.achieved_flops > 0.3 * rep.peak_flops


def test_inputs_are_left_untouched_and_read_only_inputs_work():
    a, b, _ = _operands(20, 30, 40, "fp16")
    a0, b0 = a.copy(), b.copy()
    a.flags.writeable = False
    _check(matmul(a, b), a0, b0)
    assert np.array_equal(a, a0) and np.array_equal(b, b0)


# ---- property test ------------------------------------------------------------------------------
@settings(max_examples=15)
@given(st.integers(1, 100), st.integers(1, 100), st.integers(1, 150), st.sampled_from(list(DTYPES)),
       st.booleans(), st.booleans(), st.booleans(), st.sampled_from([None, 1, 3]),
       st.sampled_from(["ascend950pr", "atlas-a2"]))
def test_matmul_property(M, N, K, name, ta, tb, with_bias, blocks, chip):
    a, b, bias = _operands(M, N, K, name, seed=M * 7 + N, bias=(N,) if with_bias else None)
    _check(_run(a, b, bias, transpose_a=ta, transpose_b=tb, chip=chip, blocks=blocks), a, b, bias)


# ---- L2 tiling (docs/bmm_branches.md §8.2.3) -------------------------------------------------------------------
def _small_l2(nbytes: int):
    import dataclasses
    return dataclasses.replace(pyto.load_chip("ascend950pr"), l2_bytes=nbytes)


def test_l2_blocks_rule():
    from pyto_kernels.swizzle import l2_blocks
    assert l2_blocks(1024, 1024, 256, 128, 256, 2, 1 << 30) == (1, 1)          # A + B fit: no L2 tiling
    ml2, nl2 = l2_blocks(4096, 2048, 1024, 128, 256, 2, 4 << 20)
    tm, tn = 4096 // 128, 2048 // 256
    assert ml2 * nl2 > 1
    # each block's A rows and B columns fit L2
    assert (-(-tm // ml2) * 128 + -(-tn // nl2) * 256) * 1024 * 2 <= 4 << 20


def test_l2_tiled_matmul_matches_numpy():
    chip = _small_l2(256 << 10)          # A + B = 512 KB do not fit: the grid is walked in L2 blocks
    a, b, _ = _operands(512, 520, 256, "bf16", seed=5)
    ts = default_tile_shapes(512, 520, 256, "bf16", chip)
    plan = plan_matmul(512, 520, 256, "bf16", chip, ts)
    assert plan.params["L2_M"] * plan.params["L2_N"] > 1, plan.describe()
    _check(matmul(a, b, chip=chip), a, b)


def test_l2_tiling_saves_gm_traffic_when_the_working_set_exceeds_l2():
    chip = _small_l2(4 << 20)            # A + B = 12 MB, L2 4 MB, 16 rounds of tiles per core
    a, b = pyto.spec((4096, 1024), "bf16"), pyto.spec((1024, 2048), "bf16")
    _, tiled = matmul(a, b, chip=chip, report=True)
    _, plain = matmul(a, b, chip=chip, report=True, l2_tiles=(1, 1))
    assert tiled.gm_bytes < 0.9 * plain.gm_bytes, (tiled.gm_bytes, plain.gm_bytes)
    assert tiled.l2_hit_rate > plain.l2_hit_rate
    assert tiled.cycles <= plain.cycles


@pytest.mark.parametrize("bad", [5, (0, 1), (1, 2, 3), (1.5, 1)])
def test_bad_l2_tiles_raise_shape_error(bad):
    a, b, _ = _operands(64, 64, 64, "fp16")
    with pytest.raises(ShapeError, match="l2_tiles"):
        matmul(a, b, l2_tiles=bad)
