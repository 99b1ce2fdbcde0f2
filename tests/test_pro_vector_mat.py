"""pl.expands into a Mat (L1) tile (math_functions/expands.md: out in Vec or Mat): the AIC fills the tile's valid
region on MTE2 (vector_elementwise.expands), so a kernel can give L1 bytes it never loads a defined value.

Numbers: exact (a fill, then a product of small integers, exact in the fp32 / int32 accumulator). Timing: the
fill's MTE2 time is its bytes at the chip's GM->L1 rate (timing._fill).
"""
import numpy as np
import pytest

import pyto
import pyto.language as pl

CHIP = pyto.load_chip("ascend950pr")


@pl.kernel
def fill_then_load(a, b, out, *, FILL, ROWS: int):
    """out [32, N] = A' @ b, A' the [32, 32] L1 tile filled with FILL (or not filled: None) whose first ROWS rows are
    then loaded from a [ROWS, 32]."""
    N = b.shape[1]
    a_l1 = pl.alloc(pl.L1, [32, 32], a.dtype)
    b_l1 = pl.alloc(pl.L1, [32, N], b.dtype)
    a_l0 = pl.alloc(pl.L0A, [32, 32], a.dtype)
    b_l0 = pl.alloc(pl.L0B, [32, N], b.dtype)
    c = pl.alloc(pl.L0C, [32, N], a.dtype.acc)
    if FILL is not None:
        pl.expands(a_l1, FILL)
    pl.set_validshape(a_l1, [ROWS, 32])
    pl.load(a_l1, a, [0, 0])
    pl.set_validshape(a_l1, [32, 32])            # the whole tile: loaded rows and filled ones
    pl.load(b_l1, b, [0, 0])
    pl.move(a_l0, a_l1)
    pl.move(b_l0, b_l1)
    pl.matmul(c, a_l0, b_l0)
    pl.store(out, c, [0, 0])


@pytest.mark.parametrize("dt,acc,fill", [(np.float16, np.float32, 2.0), (np.float32, np.float32, -1.5),
                                         (np.int8, np.int32, 3)])
def test_the_rows_a_load_leaves_hold_the_fill(dt, acc, fill):
    rng = np.random.default_rng(7)
    rows, n = 20, 32
    a = rng.integers(-4, 5, (rows, 32)).astype(dt)
    b = rng.integers(-4, 5, (32, n)).astype(dt)
    out = np.zeros((32, n), acc)
    pyto.run(fill_then_load, a, b, out, FILL=fill, ROWS=rows)
    full = np.vstack([a.astype(np.float64), np.full((32 - rows, 32), fill, np.float64)])
    assert np.array_equal(out.astype(np.float64), full @ b.astype(np.float64))


def test_without_the_fill_the_rows_are_never_written():
    """The check the fill answers: the move reads the 16 rows (a whole row of fractals, the checked pass's cells)
    no load wrote."""
    a, b = np.ones((16, 32), np.float16), np.ones((32, 32), np.float16)
    with pytest.raises(pyto.UninitializedReadError, match=r"pl\.move.*L1 tile 'a_l1'"):
        pyto.run(fill_then_load, a, b, np.zeros((32, 32), np.float32), FILL=None, ROWS=16)
    out = np.zeros((32, 32), np.float32)
    pyto.run(fill_then_load, a, b, out, FILL=0.0, ROWS=16)
    assert np.array_equal(out, np.vstack([np.full((16, 32), 32.0), np.zeros((16, 32))]))


def test_the_fill_is_one_mte2_instruction_at_the_gm_to_l1_rate():
    a, b = np.ones((20, 32), np.float16), np.ones((32, 32), np.float16)
    reps = {}
    for fill in (None, 1.0):
        reps[fill] = pyto.run(fill_then_load, pyto.spec(a.shape, "fp16"), pyto.spec(b.shape, "fp16"),
                              pyto.spec((32, 32), "fp32"), FILL=fill, ROWS=20, mode="timing", chip=CHIP)
    off, on = reps[None], reps[1.0]
    assert on.instructions == off.instructions + 1
    fill_cycles = 32 * 32 * 2 / CHIP.path("GM", "L1").bytes_per_cycle
    assert on.pipe_cycles["MTE2"] - off.pipe_cycles["MTE2"] == pytest.approx(fill_cycles)
    assert on.gm_read_bytes == off.gm_read_bytes            # no GM traffic


@pl.kernel
def fill_valid_region(a, out):
    """Fill all of an L1 tile with 5, then its [16, 16] corner with 7 (its valid shape), and read it back through
    L0A x an identity."""
    t = pl.alloc(pl.L1, [32, 32], a.dtype)
    eye_l1 = pl.alloc(pl.L1, [32, 32], a.dtype)
    l0a, l0b = pl.alloc(pl.L0A, [32, 32], a.dtype), pl.alloc(pl.L0B, [32, 32], a.dtype)
    c = pl.alloc(pl.L0C, [32, 32], pl.DT_FP32)
    pl.expands(t, 5)
    pl.set_validshape(t, [16, 16])
    pl.expands(t, 7)
    pl.set_validshape(t, [32, 32])
    pl.load(eye_l1, a, [0, 0])
    pl.move(l0a, t)
    pl.move(l0b, eye_l1)
    pl.matmul(c, l0a, l0b)
    pl.store(out, c, [0, 0])


def test_the_fill_covers_the_valid_region_only():
    out = np.zeros((32, 32), np.float32)
    pyto.run(fill_valid_region, np.eye(32, dtype=np.float16), out)
    want = np.full((32, 32), 5.0)
    want[:16, :16] = 7.0
    assert np.array_equal(out, want)


@pl.kernel
def bad_fill(a, *, WHERE: str, VALUE=0):
    t = pl.alloc(pl.L1, [16, 16], a.dtype)
    l0a = pl.alloc(pl.L0A, [16, 16], a.dtype)
    if WHERE == "l0a":
        pl.expands(l0a, VALUE)
    elif WHERE == "vector":
        with pl.section_vector():
            pl.expands(t, VALUE)
    else:
        pl.expands(t, VALUE)


@pytest.mark.parametrize("where,value,error,match", [
    ("l0a", 0, pyto.ShapeError, r"test_pro_vector_mat\.py:\d+ pl\.expands\(l0a, VALUE\): pl\.expands out must be a Vec \(UB\) or "
             r"Mat \(L1\) tile, got L0A tile 'l0a'"),
    ("vector", 0, pyto.KernelError, r"pl\.expands is a cube op inside pl\.section_vector\(\)"),
    ("mat", 200, pyto.KernelError, r"pl\.expands on a int8 tile takes an integer in int8 range \[-128, 127\], got 200"),
])
def test_refusals_name_the_tile_and_line(where, value, error, match):
    with pytest.raises(error, match=match):
        pyto.run(bad_fill, np.zeros((16, 16), np.int8), WHERE=where, VALUE=value, mode="timing")
