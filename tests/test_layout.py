"""Fractal formats of docs/fractal_formats.md (pyto.layout): worked examples, index formulas, round trips, errors."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pyto import layout as L
from pyto.dtypes import DType
from pyto.errors import PytoError, ShapeError

DTYPES = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp32": np.float32, "int8": np.int8}


def _pad(x, r, c):
    M, N = x.shape[-2:]
    out = np.zeros((*x.shape[:-2], -(-M // r) * r, -(-N // c) * c), x.dtype)
    out[..., :M, :N] = x
    return out


# ---- fractal sizes --------------------------------------------------------------------------------

@pytest.mark.parametrize("dt, frac", [("fp16", (16, 16)), ("bf16", (16, 16)), ("fp32", (16, 8)),
                                      ("int32", (16, 8)), ("int8", (16, 32))])
def test_fractal_shape_512_bytes(dt, frac):
    d = DType[dt]
    for spec in (d, dt, d.np):
        assert L.fractal_shape(spec) == frac
    assert frac[0] * frac[1] * d.itemsize == 512
    assert L.fractal_shape("half") == (16, 16) and L.L0C_FRACTAL == (16, 16)


def test_two_and_six_bit_types_have_no_fractal():
    """ml_dtypes' 2- and 6-bit types take a numpy byte each, as its 4-bit ones (read as 4-bit): they are 2- and 6-bit,
    widths docs/fractal_formats.md §4.1 gives no fractal (they were given the 8-bit 16 x 32 one: a fractal-format audit's find).
    (ml_dtypes before 0.5 has none of them; its 4-bit types are checked either way.)"""
    for name in ("int2", "uint2", "float6_e2m3fn", "float6_e3m2fn"):
        d = getattr(ml_dtypes, name, None)
        if d is not None:
            with pytest.raises(ShapeError, match="sets the fractal by bit width"):
                L.fractal_shape(d)
    assert L.fractal_shape(ml_dtypes.int4) == (16, 64) and L.fractal_shape("uint8") == (16, 32)


def test_fractal_count_and_padded_shape_seed_example():
    # docs/fractal_formats.md §4.5: M=40, K=56 half -> padded to 48 x 64, 3 x 4 fractals in L1
    assert L.padded_shape((40, 56), "fp16") == (48, 64)
    assert L.fractal_count((40, 56), "fp16") == 12
    assert L.nd_to_nz(np.zeros((40, 56), np.float16)).shape == (4, 3, 16, 16)
    assert L.fractal_count((2, 3, 40, 56), DType.fp16) == 72  # batch dims count too
    assert L.padded_shape((40, 56), "int8") == (48, 64) and L.fractal_count((40, 56), "int8") == 6
    assert L.fractal_count((40, 56), fractal=L.L0C_FRACTAL) == 12
    assert L.padded_shape((17, 9), "fp32") == (32, 16)


# ---- docs/fractal_formats.md §4.5 worked example ------------------------------------------------------------------

def test_nz_worked_example_20x28_half():
    x = np.arange(560).reshape(20, 28).astype(np.float16)
    y = L.nd_to_nz(x)
    assert y.shape == (2, 2, 16, 16) and y.dtype == np.float16  # N1 x M1 fractals of M0 x N0
    np.testing.assert_array_equal(y[0, 0, 0], np.arange(16))
    np.testing.assert_array_equal(y[0, 0, 1], np.arange(28, 44))
    np.testing.assert_array_equal(y[0, 0, 2], np.arange(56, 72))
    np.testing.assert_array_equal(y[0, 1, 4:], 0)  # rows 20..31 are padding
    np.testing.assert_array_equal(y[1, 0, 0], list(range(16, 28)) + [0] * 4)  # fractal [1,0]: cols 16..31
    np.testing.assert_array_equal(y[0, 1, 0], np.arange(16 * 28, 16 * 28 + 16))  # fractal [0,1]: row 16
    # the seed's own pseudo-code, verbatim
    seed = np.pad(x, [[0, 12], [0, 4]]).reshape((2, 16, 2, 16)).transpose((2, 0, 1, 3))
    np.testing.assert_array_equal(y, seed)
    np.testing.assert_array_equal(L.nz_to_nd(y, (20, 28)), x)


# ---- element mapping against independent index formulas -------------------------------------------

def _check_mapping(fmt, x, frac):
    """y[...] == xpad[...] per the seed's formula of each format, by explicit indices."""
    r, c = frac
    xp = _pad(x, r, c)
    y = L.to_format(x, fmt, frac)
    R1, C1 = xp.shape[-2] // r, xp.shape[-1] // c
    for i1 in range(R1):
        for j1 in range(C1):
            block = xp[..., i1 * r:(i1 + 1) * r, j1 * c:(j1 + 1) * c]
            got = {"nz": lambda: y[..., j1, i1, :, :],             # y[n1, m1, m0, n0] = xp[m1*M0+m0, n1*N0+n0]
                   "zz": lambda: y[..., i1, j1, :, :],             # y[m1, k1, m0, k0] = xp[m1*M0+m0, k1*K0+k0]
                   "zn": lambda: np.swapaxes(y[..., i1, j1, :, :], -1, -2),  # y[k1, n1, n0, k0]
                   "nn": lambda: np.swapaxes(y[..., j1, i1, :, :], -1, -2),  # y[n1, k1, n0, k0]
                   }[fmt]()
            np.testing.assert_array_equal(got, block)
    # and one scalar, spelled out
    if fmt == "nz":
        m, n = xp.shape[-2] - 1, xp.shape[-1] - 1
        assert y[..., n // c, m // r, m % r, n % c].tolist() == xp[..., m, n].tolist()
    if fmt == "zn":
        k, n = xp.shape[-2] - 1, xp.shape[-1] - 1
        assert y[..., k // r, n // c, n % c, k % r].tolist() == xp[..., k, n].tolist()


@pytest.mark.parametrize("fmt", ["nz", "zz", "zn", "nn"])
@pytest.mark.parametrize("dt", list(DTYPES))
def test_mapping_each_format_default_fractal(fmt, dt):
    x = (np.arange(2 * 37 * 45) % 101).reshape(2, 37, 45).astype(DTYPES[dt])
    f = L.fractal_shape(dt)
    frac = f if fmt in ("nz", "zz") else f[::-1]  # Zn/Nn: K0 x N0 with N0 = 16
    y = L.to_format(x, fmt)
    assert y.shape[-2:] == ((frac[0], frac[1]) if fmt[1] == "z" else (frac[1], frac[0]))
    assert y.shape[-1] * y.shape[-2] * x.itemsize == 512
    np.testing.assert_array_equal(y, L.to_format(x, fmt, frac))
    _check_mapping(fmt, x, frac)


def test_zn_int8_shape_and_l0c_override():
    x = np.ones((70, 20), np.int8)  # K=70, N=20: K1=3 (K0=32), N1=2 (N0=16)
    assert L.nd_to_zn(x).shape == (3, 2, 16, 32)
    assert L.nd_to_nn(x).shape == (2, 3, 16, 32)
    assert L.nd_to_zz(x).shape == (5, 1, 16, 32)
    acc = np.arange(20 * 20, dtype=np.float32).reshape(20, 20)
    assert L.nd_to_nz(acc).shape == (3, 2, 16, 8)                  # L1 Nz for fp32: 16 x 8
    y = L.nd_to_nz(acc, fractal=L.L0C_FRACTAL)                     # L0C Nz: 16 x 16
    assert y.shape == (2, 2, 16, 16)
    np.testing.assert_array_equal(L.nz_to_nd(y, (20, 20)), acc)


def test_dn_is_transposed_nd():
    x = np.arange(2 * 3 * 5).reshape(2, 3, 5)
    y = L.nd_to_dn(x)
    assert y.shape == (2, 5, 3) and y.flags.c_contiguous
    np.testing.assert_array_equal(y.ravel()[:3], [0, 5, 10])  # column major: first a column of x[0]
    np.testing.assert_array_equal(L.dn_to_nd(y, (3, 5)), x)
    np.testing.assert_array_equal(L.from_format(L.to_format(x, "DN"), "dn", (2, 3, 5)), x)
    with pytest.raises(ShapeError):
        L.dn_to_nd(y, (5, 3))


# ---- round trips (hypothesis) ---------------------------------------------------------------------

shapes = st.tuples(st.lists(st.integers(1, 3), max_size=2), st.integers(1, 40), st.integers(1, 40))


@given(shapes, st.sampled_from(list(DTYPES)), st.sampled_from(["nd", "dn", "nz", "zz", "zn", "nn"]),
       st.booleans(), st.randoms(use_true_random=False))
def test_round_trip(shape, dt, fmt, full_shape, rnd):
    batch, R, C = shape
    x = np.array([rnd.randint(-100, 100) for _ in range(int(np.prod(batch)) * R * C)])
    x = x.reshape(*batch, R, C).astype(DTYPES[dt])
    y = L.to_format(x, fmt)
    back = L.from_format(y, fmt, x.shape if full_shape else (R, C))
    assert back.dtype == x.dtype and back.shape == x.shape
    np.testing.assert_array_equal(back, x)
    if fmt in ("nz", "zz", "zn", "nn"):
        f = L.fractal_shape(dt)
        f = f if fmt in ("nz", "zz") else f[::-1]  # Zn/Nn fractals are K0 x 16 in the ND matrix
        assert y.size * x.itemsize == 512 * L.fractal_count(x.shape, fractal=f)


@given(st.integers(1, 40), st.integers(1, 40), st.integers(1, 20), st.integers(1, 20),
       st.sampled_from(["nz", "zz", "zn", "nn"]))
def test_round_trip_any_fractal(R, C, r, c, fmt):
    x = np.arange(R * C, dtype=np.int32).reshape(R, C)
    y = L.to_format(x, fmt, (r, c))
    assert y.size == L.fractal_count((R, C), fractal=(r, c)) * r * c
    np.testing.assert_array_equal(L.from_format(y, fmt, (R, C)), x)
    _check_mapping(fmt, x, (r, c))


# ---- MX scales (docs/fractal_formats.md §5.1) --------------------------------------------------------------------

def test_scale_a_zz_16x2():
    s = (np.arange(20 * 3) % 250).astype(np.uint8).reshape(20, 3)  # scaleA [M=20, K/32=3]
    y = L.scale_a_to_zz(s)
    assert y.shape == (2, 2, 16, 2) and y.dtype == np.uint8        # M1 x K1 fractals of 16 x 2
    np.testing.assert_array_equal(y[0, 0, 1], s[1, 0:2])
    np.testing.assert_array_equal(y[1, 1, 0], [s[16, 2], 0])
    np.testing.assert_array_equal(L.zz_to_scale_a(y, (20, 3)), s)


def test_scale_b_nn_2x16():
    s = (np.arange(3 * 20) % 250).astype(np.uint8).reshape(3, 20)  # scaleB [K/32=3, N=20]
    y = L.scale_b_to_nn(s)
    assert y.shape == (2, 2, 16, 2)                                # N1 x K1 fractals, inner N0 x K0
    for n in range(20):
        for k in range(3):
            assert y[n // 16, k // 2, n % 16, k % 2] == s[k, n]
    np.testing.assert_array_equal(L.nn_to_scale_b(y, (3, 20)), s)


def test_scale_dtype_e8m0_kept_bitwise():
    assert L.SCALE_DTYPE.itemsize == 1
    s = np.array([[1.0, 2.0, 0.5], [4.0, 8.0, 0.25]]).astype(L.SCALE_DTYPE)
    y = L.scale_a_to_zz(s)
    assert y.dtype == L.SCALE_DTYPE and (y.view(np.uint8)[0, 0, 2:] == 0).all()  # zero-bit padding
    np.testing.assert_array_equal(L.zz_to_scale_a(y, s.shape).view(np.uint8), s.view(np.uint8))
    with pytest.raises(ShapeError, match="fp8_e8m0"):
        L.scale_b_to_nn(np.ones((2, 16), np.float32))


# ---- 4:2 sparse index (docs/fractal_formats.md §5.2) -------------------------------------------------------------

def test_densify_rule_per_group():
    cols = {  # group of 4 along K -> (dense pair, index pair)
        (1, 0, 0, 0): ((1, 0), (0, 0)), (0, 2, 0, 0): ((2, 0), (1, 1)), (0, 0, 3, 0): ((3, 0), (2, 2)),
        (0, 0, 0, 4): ((0, 4), (0, 2)), (0, 0, 0, 0): ((0, 0), (0, 0)), (5, 6, 0, 0): ((5, 6), (0, 0)),
        (5, 0, 0, 6): ((5, 6), (0, 2)), (0, 5, 6, 0): ((5, 6), (1, 1)), (0, 0, 5, 6): ((5, 6), (2, 2)),
        (0, 5, 0, 6): ((5, 6), (1, 2)), (5, 0, 6, 0): ((5, 6), (0, 1)),
    }
    b = np.array(list(cols), np.int8).T  # (K=4, N=11)
    dense, idx = L.densify_4_2(b)
    assert dense.shape == idx.shape == (2, 11) and dense.dtype == np.int8 and idx.dtype == np.uint8
    for n, (d, i) in enumerate(cols.values()):
        assert tuple(dense[:, n]) == d and tuple(idx[:, n]) == i
    np.testing.assert_array_equal(L.expand_4_2(dense, idx), b)


@given(st.integers(1, 3), st.integers(1, 6), st.integers(1, 20), st.randoms(use_true_random=False))
def test_densify_round_trip(batch, groups, N, rnd):
    b = np.zeros((batch, groups, 4, N), np.int8)
    for i in np.ndindex(batch, groups, N):
        for p in rnd.sample(range(4), rnd.randint(0, 2)):
            b[i[0], i[1], p, i[2]] = rnd.choice([-3, -1, 1, 7])
    b = b.reshape(batch, groups * 4, N)
    dense, idx = L.densify_4_2(b)
    assert idx.max(initial=0) <= 2
    np.testing.assert_array_equal(L.expand_4_2(dense, idx), b)


def test_densify_rejects_three_nonzeros():
    b = np.zeros((8, 3), np.int8)
    b[4:7, 2] = 1
    with pytest.raises(ShapeError, match="rows 4..7.*column 2.*3 nonzeros"):
        L.densify_4_2(b)
    with pytest.raises(ShapeError):
        L.densify_4_2(np.zeros((6, 3), np.int8))


def test_sparse_index_zn_and_packing():
    idx = (np.arange(40 * 20) % 3).astype(np.uint8).reshape(40, 20)  # (K/2=40, N=20)
    y = L.sparse_index_to_zn(idx)
    assert y.shape == (2, 2, 16, 32)                  # like int8 B: K1 x N1 fractals of N0 x K0
    np.testing.assert_array_equal(y, L.nd_to_zn(idx.view(np.int8)).view(np.uint8))
    p = L.sparse_index_to_zn(idx, packed=True)
    assert p.shape == (2, 2, 16, 8) and p[0, 0].nbytes == 128  # 128-byte fractal
    k = np.arange(4)
    assert p[0, 0, 0, 0] == sum(int(idx[j, 0]) << (2 * j) for j in k)  # element j in bits 2j..2j+1
    np.testing.assert_array_equal(L.zn_to_sparse_index(y, (40, 20)), idx)
    np.testing.assert_array_equal(L.zn_to_sparse_index(p, (40, 20)), idx)
    np.testing.assert_array_equal(L.unpack_2bit(L.pack_2bit(y)), y)
    assert L.pack_2bit(np.array([1, 2, 0, 3])).tolist() == [1 | 2 << 2 | 0 << 4 | 3 << 6]


# ---- errors ---------------------------------------------------------------------------------------

def test_seed_example_as_written_is_float64_and_says_to_cast():
    """docs/fractal_formats.md §4.5 builds its 'half' input as data * np.ones(..., dtype="float16") from a Python list, which
    numpy makes float64: pyto names the width and the cast instead of guessing a fractal."""
    data = [i for i in range(20 * 28)]
    tensor_a = (data * np.ones((20 * 28), dtype="float16")).reshape(20, 28)
    with pytest.raises(ShapeError, match="64-bit: cast it"):
        L.nd_to_nz(tensor_a)
    np.testing.assert_array_equal(L.nd_to_nz(tensor_a.astype(np.float16)), L.nd_to_nz(np.arange(560.0).reshape(
        20, 28).astype(np.float16)))


@pytest.mark.parametrize("dtype,k0", [(np.uint8, 32), (ml_dtypes.float8_e4m3fn, 32), (np.uint16, 16), ("int4", 64),
                                      (ml_dtypes.int4, 64), (np.int32, 8), (np.float16, 16)])
def test_fractal_by_bit_width(dtype, k0):
    """docs/fractal_formats.md §4.1: K0 by bit width (32/16/8/4-bit: 8/16/32/64), whatever the type of that width."""
    assert L.fractal_shape(dtype) == (16, k0)
    x = np.arange(3 * 70).reshape(3, 70).astype(dtype)
    assert L.nd_to_nz(x).shape == (-(-70 // k0), 1, 16, k0)
    assert L.padded_shape((20, 70), dtype, fmt="zn") == (-(-20 // k0) * k0, 80)


@settings(max_examples=30)
@given(n=st.integers(1, 2), h=st.integers(1, 3), w=st.integers(1, 3), c=st.integers(1, 70),
       dt=st.sampled_from([np.float16, np.float32, np.int8]))
def test_nc1hwc0_element_by_element(n, h, w, c, dt):
    """docs/fractal_formats.md §4.6: C split into C1 = ceil(C / C0) parts of C0 = 32 bytes, the last zero-padded, laid out
    (N, C1, H, W, C0); checked element by element, and the inverse crops the padding."""
    x = (np.arange(n * h * w * c) % 120).reshape(n, h, w, c).astype(dt)
    y = L.to_format(x, "NC1HWC0")
    c0 = 32 // np.dtype(dt).itemsize
    assert y.shape == (n, -(-c // c0), h, w, c0) and y.dtype == x.dtype
    for idx in np.ndindex(*y.shape):
        i, c1, hh, ww, k = idx
        ch = c1 * c0 + k
        assert y[idx] == (x[i, hh, ww, ch] if ch < c else 0)
    np.testing.assert_array_equal(L.from_format(y, "nc1hwc0", x.shape), x)


@pytest.mark.parametrize("call", [
    lambda: L.nd_to_nz(np.zeros(5, np.float16)),                  # 1-D
    lambda: L.nd_to_zz(np.float16(1)),                            # 0-D
    lambda: L.nd_to_zn(np.zeros((4, 4), np.float64)),             # dtype pyto does not know
    lambda: L.fractal_shape("fp64"),
    lambda: L.fractal_shape(np.float64),
    lambda: L.nd_to_nz(np.zeros((4, 4), np.float16), fractal=(16.5, 16)),   # not ints
    lambda: L.sparse_index_to_zn(np.full((2, 2), 3, np.uint8)),             # 2-bit, but the index is 0..2
    lambda: L.nc1hwc0_to_nhwc(np.zeros((1, 2, 3, 3, 16), np.float16), (1, 3, 3, 40)),   # needs C1 = 3
    lambda: L.nd_to_nz(np.zeros((4, 4), np.float16), fractal=(0, 16)),
    lambda: L.nd_to_nz(np.zeros((4, 4), np.float16), fractal="ab"),
    lambda: L.nz_to_nd(np.zeros((16, 16), np.float16), (16, 16)),          # not a fractal array
    lambda: L.nz_to_nd(np.zeros((2, 2, 16, 16), np.float16), (40, 28)),    # needs 3 M fractals
    lambda: L.nz_to_nd(np.zeros((2, 2, 16, 16), np.float16), (20, 10)),    # needs 1 N fractal
    lambda: L.zz_to_nd(np.zeros((3, 1, 1, 16, 16), np.float16), (2, 16, 16)),  # batch mismatch
    lambda: L.zn_to_nd(np.zeros((1, 1, 16, 16)), (16,)),
    lambda: L.to_format(np.zeros((4, 4)), "nhwc"),
    lambda: L.padded_shape((4, 4)),
    lambda: L.zn_to_sparse_index(np.zeros((1, 1, 16, 16), np.uint8), (16, 16)),
    lambda: L.sparse_index_to_zn(np.full((4, 4), 5, np.uint8)),
    lambda: L.expand_4_2(np.zeros((2, 3)), np.array([[2] * 3, [0] * 3], np.uint8)),  # places 2, 1
])
def test_errors_are_shape_errors(call):
    with pytest.raises(ShapeError) as e:
        call()
    assert isinstance(e.value, PytoError) and str(e.value)
