"""Tails (set_validshape.md, subview.md, fillpad.md, tail_block_handling.md): loads, stores, vector ops and matmul
on valid regions with rows and columns that are not multiples of 16, stale bytes outside them, the uninitialised
read, the GM edge rule, valid shapes persisting across iterations, fillpad's modes and pad values. The documented
silent failures of tails are in tests/test_pro_silent_failures.py."""
import numpy as np
import pytest

import pyto
import pyto.language as pl
from pyto.testing import matmul_bound

RNG = np.random.default_rng(19)
F32_ULP_HALF = 2.0 ** -24        # fp32 unit roundoff: one rounding of an exact fp64 sum of two fp32 values


def f64(x):
    return np.asarray(x, np.float64)


# ---- vector tails: load, add, store over the valid region of each tile ------------------------------------------
@pl.kernel
def tail_add(x, y, z, *, TR: int, TC: int):
    R, C = x.shape
    ta = pl.alloc(pl.UB, [TR, TC], pl.DT_FP32)
    tb = pl.alloc(pl.UB, [TR, TC], pl.DT_FP32)
    tc = pl.alloc(pl.UB, [TR, TC], pl.DT_FP32)
    with pl.section_vector():
        if pl.get_block_idx() == 0:
            for r in pl.range(0, R, TR):
                for c in pl.range(0, C, TC):
                    shape = [pl.min(TR, R - r), pl.min(TC, C - c)]
                    for t in (ta, tb, tc):
                        pl.set_validshape(t, shape)
                    pl.load(ta, x, [r, c])
                    pl.load(tb, y, [r, c])
                    pl.add(tc, ta, tb)
                    pl.store(z, tc, [r, c])


def test_vector_tails_match_numpy():
    x, y = (RNG.standard_normal((37, 45)).astype(np.float32) for _ in range(2))   # tails of 5 rows, 13 cols
    z = np.zeros_like(x)
    pyto.run(tail_add, x, y, z, blocks=1, TR=16, TC=16)
    ref = f64(x) + f64(y)
    # one fp32 rounding of the exact sum: within half an ulp of it
    assert np.all(np.abs(z - ref) <= F32_ULP_HALF * np.abs(ref))


def test_a_tail_tile_past_the_gm_edge_is_out_of_bounds():
    """Without the valid shape the last tile's region runs past the tensor: an OutOfBoundsError naming it."""
    @pl.kernel
    def no_tail(x, z):
        t = pl.alloc(pl.UB, [16, 16], pl.DT_FP32)
        with pl.section_vector():
            if pl.get_block_idx() == 0:
                pl.load(t, x, [32, 0])
                pl.store(z, t, [32, 0])
    x = np.zeros((37, 16), np.float32)
    with pytest.raises(pyto.OutOfBoundsError, match=r"pl.load of the valid region \[16, 16\] of UB tile 't'.* runs "
                                                    r"past the edge of GM tensor 'x'.*rows 32:48.*\[5, 16\]"):
        pyto.run(no_tail, x, np.zeros_like(x), blocks=1)


# ---- stale bytes -----------------------------------------------------------------------------------------------
@pl.kernel
def stale(x, y, z, *, VR: int, VC: int):
    t = pl.alloc(pl.UB, [8, 16], pl.DT_FP32)
    with pl.section_vector():
        if pl.get_block_idx() == 0:
            pl.load(t, x, [0, 0])                 # the whole tile: x
            pl.set_validshape(t, [VR, VC])
            pl.load(t, y, [0, 0])                 # only the valid corner: y
            pl.set_validshape(t, [8, 16])
            pl.store(z, t, [0, 0])                # what the tile holds: y in the corner, x's stale bytes around it


def test_bytes_outside_the_valid_region_keep_what_they_held():
    x, y = RNG.standard_normal((8, 16)).astype(np.float32), RNG.standard_normal((8, 16)).astype(np.float32)
    z = np.zeros_like(x)
    pyto.run(stale, x, y, z, blocks=1, VR=5, VC=11)
    want = x.copy()
    want[:5, :11] = y[:5, :11]
    assert np.array_equal(z, want)


def test_reading_bytes_never_written_names_the_tile_and_region():
    @pl.kernel
    def unwritten(x, z):
        t = pl.alloc(pl.UB, [8, 16], pl.DT_FP32)
        with pl.section_vector():
            if pl.get_block_idx() == 0:
                pl.set_validshape(t, [5, 16])
                pl.load(t, x, [0, 0])
                pl.set_validshape(t, [8, 16])     # widened, but rows 5..7 were never written
                pl.store(z, t, [0, 0])
    x = np.ones((8, 16), np.float32)
    with pytest.raises(pyto.UninitializedReadError, match=r"pl.store .* reads UB tile 't'\[0:8, 0:16\] but part of it "
                                                           r"was never written \(6 of 16 32-byte blocks"):
        pyto.run(unwritten, x, np.zeros_like(x), blocks=1)


# ---- valid shapes persist across iterations (and the pitfall of not resetting one) -----------------------------
@pl.kernel
def rows_in_order(x, z, *, ORDER: tuple, RESET: bool):
    t = pl.alloc(pl.UB, [8, 16], pl.DT_FP32)
    R = x.shape[0]
    with pl.section_vector():
        if pl.get_block_idx() == 0:
            for r in ORDER:
                if R - r < 8:
                    pl.set_validshape(t, [R - r, 16])
                elif RESET:
                    pl.set_validshape(t, [8, 16])
                pl.load(t, x, [r, 0])
                pl.store(z, t, [r, 0])


def test_a_valid_shape_persists_until_set_again():
    x = RNG.standard_normal((20, 16)).astype(np.float32)
    z = np.zeros_like(x)
    pyto.run(rows_in_order, x, z, blocks=1, ORDER=(16, 0, 8), RESET=True)
    assert np.array_equal(z, x)
    z = np.zeros_like(x)          # the pitfall: the tail's [4, 16] stays on the tile for the tiles after it
    pyto.run(rows_in_order, x, z, blocks=1, ORDER=(16, 0, 8), RESET=False)
    want = np.zeros_like(x)
    for r in (16, 0, 8):
        want[r:r + 4] = x[r:r + 4]
    assert np.array_equal(z, want)


def test_set_validshape_checks_its_shape_and_a_group_sets_every_slot():
    @pl.kernel
    def bad(x, *, SHAPE: tuple):
        g = pl.alloc(pl.UB, [8, 16], pl.DT_FP32, buffers=2)
        pl.set_validshape(g, list(SHAPE))
        assert g[0].valid_shape == g[1].valid_shape == SHAPE
    x = np.zeros((8, 16), np.float32)
    pyto.run(bad, x, blocks=1, SHAPE=(3, 5))
    for shape in ((0, 5), (9, 5), (3, 17)):
        with pytest.raises(pyto.ShapeError, match=r"valid shape .* rows and cols must be positive and at most"):
            pyto.run(bad, x, blocks=1, SHAPE=shape)


def test_a_static_valid_shape_and_views_clamp_to_it():
    @pl.jit
    def views(x: pl.Tensor[[8, 64], pl.DT_FP16]):
        t = pl.make_tile(pl.TileType([8, 64], pl.DT_FP16, pl.MemorySpace.Vec, valid_shape=[6, 40]), addr=0)
        assert t.valid_shape == (6, 40) and t.fixed
        assert t[2:6, 16:50].valid_shape == (4, 24)          # subview.md's example: min(4, 6-2) x min(34, 40-16)
        u = pl.make_tile(pl.TileType([8, 64], pl.DT_FP16, pl.MemorySpace.Vec), addr=0x400)
        sub = u[2:6, 16:50]                                   # a Vec view may end inside a 32 B block
        assert sub.shape == (4, 48) and sub.valid_shape == (4, 34)
        with pytest.raises(pyto.KernelError, match="static valid_shape"):
            pl.set_validshape(t, [4, 4])
    views(np.zeros((8, 64), np.float16))


# ---- fillpad -------------------------------------------------------------------------------------------------------
@pl.kernel
def fill(x, z, *, MODE_NAME: str, PAD_VALUE: int, SHAPE_OUT: tuple):
    MODE, PAD = pl.FillPadMode[MODE_NAME], pl.TilePad(PAD_VALUE)
    src = pl.alloc(pl.UB, [8, 8], x.dtype, pad=PAD if MODE is pl.FillPadMode.INPLACE else None)
    dst = src if MODE is pl.FillPadMode.INPLACE else pl.alloc(pl.UB, list(SHAPE_OUT), x.dtype, pad=PAD)
    with pl.section_vector():
        if pl.get_block_idx() == 0:
            pl.load(src, x, [0, 0])
            pl.set_validshape(src, [5, 7])
            pl.fillpad(dst, src, mode=MODE)
            if MODE is pl.FillPadMode.INPLACE:
                pl.set_validshape(dst, [8, 8])
            pl.store(z, dst, [0, 0])


@pytest.mark.parametrize("mode,shape_out", [(pl.FillPadMode.NORMAL, (8, 8)), (pl.FillPadMode.EXPAND, (8, 16)),
                                            (pl.FillPadMode.INPLACE, (8, 8))])
@pytest.mark.parametrize("pad", [pl.TilePad.zero, pl.TilePad.max, pl.TilePad.min])
@pytest.mark.parametrize("np_dt", [np.int32, np.float32], ids=["int32", "fp32"])
def test_fillpad_keeps_the_valid_region_and_pads_the_rest(mode, shape_out, pad, np_dt):
    x = np.full((8, 8), -99, np_dt)            # fillpad.md's example: [5, 7] valid in an [8, 8] tile
    x[:5, :7] = np.arange(35).reshape(5, 7)
    z = np.zeros(shape_out, np_dt)
    pyto.run(fill, x, z, blocks=1, MODE_NAME=mode.name, PAD_VALUE=int(pad), SHAPE_OUT=shape_out)
    if pad is pl.TilePad.zero:
        value = 0
    elif np_dt == np.float32:                  # PTO-ISA's pad table: +-inf for floats
        value = np.inf if pad is pl.TilePad.max else -np.inf
    else:
        value = np.iinfo(np_dt).max if pad is pl.TilePad.max else np.iinfo(np_dt).min
    want = np.full(shape_out, value, np_dt)
    want[:5, :7] = x[:5, :7]
    assert np.array_equal(z, want)


@pl.kernel
def bad_fill(x, *, CASE: str):
    src = pl.alloc(pl.UB, [8, 8], pl.DT_FP32)
    nopad = pl.alloc(pl.UB, [8, 8], pl.DT_FP32)
    padded = pl.alloc(pl.UB, [8, 8], pl.DT_FP32, pad=pl.TilePad.zero)
    wide = pl.alloc(pl.UB, [8, 16], pl.DT_FP32, pad=pl.TilePad.zero)
    with pl.section_vector():
        if CASE == "nopad":
            pl.fillpad(nopad, src)
        elif CASE == "inplace":
            pl.fillpad(padded, src, mode=pl.FillPadMode.INPLACE)
        else:
            pl.fillpad(wide, src)


@pytest.mark.parametrize("case,err,match", [
    ("nopad", pyto.KernelError, "declares none"),
    ("inplace", pyto.ShapeError, "INPLACE needs out and src at the same addresses"),
    ("shape", pyto.ShapeError, "NORMAL needs out and src of one shape"),
])
def test_fillpad_needs_a_pad_and_its_mode_s_shapes_and_addresses(case, err, match):
    with pytest.raises(err, match=match):
        pyto.run(bad_fill, np.zeros((8, 8), np.float32), blocks=1, CASE=case)


# ---- matmul with tails -------------------------------------------------------------------------------------------
@pl.kernel
def tail_matmul(a, b, c, *, T: int):
    M, K = a.shape
    N = b.shape[1]
    a1 = pl.alloc(pl.L1, [T, T], pl.DT_FP16)
    b1 = pl.alloc(pl.L1, [T, T], pl.DT_FP16)
    a0 = pl.alloc(pl.L0A, [T, T], pl.DT_FP16)
    b0 = pl.alloc(pl.L0B, [T, T], pl.DT_FP16)
    c0 = pl.alloc(pl.L0C, [T, T], pl.DT_FP32)
    with pl.section_cube():
        pl.set_validshape(a1, [M, K])
        pl.set_validshape(a0, [M, K])
        pl.set_validshape(b1, [K, N])
        pl.set_validshape(b0, [K, N])
        pl.set_validshape(c0, [M, N])
        pl.load(a1, a, [0, 0])
        pl.load(b1, b, [0, 0])
        pl.move(a0, a1)
        pl.move(b0, b1)
        pl.matmul(c0, a0, b0)
        pl.store(c, c0, [0, 0])


@pytest.mark.parametrize("m,k,n", [(20, 24, 18), (7, 33, 45), (48, 17, 1)])
def test_matmul_with_tails_matches_numpy(m, k, n):
    a = RNG.standard_normal((m, k)).astype(np.float16)
    b = RNG.standard_normal((k, n)).astype(np.float16)
    c = np.zeros((m, n), np.float32)
    rep = pyto.run(tail_matmul, a, b, c, blocks=1, T=48)
    ref = f64(a) @ f64(b)
    assert np.all(np.abs(c - ref) <= matmul_bound(a, b, np.float32))
    assert rep.pipe_cycles["M"] > 0


def test_matmul_valid_k_must_agree():
    @pl.kernel
    def k_differs(a):
        a0 = pl.alloc(pl.L0A, [16, 32], pl.DT_FP16)
        b0 = pl.alloc(pl.L0B, [32, 16], pl.DT_FP16)
        c0 = pl.alloc(pl.L0C, [16, 16], pl.DT_FP32)
        pl.set_validshape(a0, [16, 20])
        pl.set_validshape(b0, [24, 16])
        pl.matmul(c0, a0, b0)
    with pytest.raises(pyto.ShapeError, match=r"valid K differs: .* \[16, 20\], .* \[24, 16\]"):
        pyto.run(k_differs, np.zeros((16, 16), np.float16))
