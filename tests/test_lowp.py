"""pyto.lowp: the low-precision element codecs (FP8 E4M3FN/E5M2/E8M0, FP4 E2M1/E1M2, HiFloat8), 4-bit packing and
the MX helpers. Every table and conversion is checked against ml_dtypes where it has the format, else against a
brute-force float64 search over the decoded table (and against en_dtypes, PTO-ISA's golden-data library, when
it is installed); the documented differences from ml_dtypes are checked one by one."""
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pyto import lowp
from pyto.errors import ShapeError, UnsupportedError

ML = {"DT_FP8E4M3FN": "float8_e4m3fn", "DT_FP8E5M2": "float8_e5m2", "DT_FP8E8M0": "float8_e8m0fnu",
      "DT_FP4E2M1": "float4_e2m1fn"}
# The value one step past the largest finite one (where overflow starts counting as a rounding candidate).
PAST_MAX = {"DT_FP8E4M3FN": 480.0, "DT_FP8E5M2": 65536.0, "DT_FP8E8M0": 2.0 ** 128, "DT_FP4E2M1": 8.0,
            "DT_FP4E1M2": 2.0, "DT_HF8": 49152.0}


def ml_dtype(name):
    """ml_dtypes' own type for the format (pyproject requires ml_dtypes >= 0.5, which has all four)."""
    return np.dtype(getattr(ml_dtypes, ML[name]))


def same(a, b):
    """Equal as float64 values, NaN where NaN, and the same sign of zero."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a.shape == b.shape and np.array_equal(np.isnan(a), np.isnan(b))
            and np.array_equal(a[~np.isnan(a)], b[~np.isnan(b)])
            and np.array_equal(np.signbit(a[~np.isnan(a)]), np.signbit(b[~np.isnan(b)])))


def positives(fmt):
    t = fmt.table
    return np.unique(t[np.isfinite(t) & (t >= 0)])


def probe(fmt, n=3000, seed=0):
    """Floats that exercise a format: every value, every tie and its two neighbours, the overflow boundary,
    the underflow end, random magnitudes over the whole range and beyond; both signs; +-0, +-inf, NaN."""
    rng = np.random.default_rng(seed)
    pos = positives(fmt)
    mids = (pos[:-1] + pos[1:]) / 2
    top = PAST_MAX[fmt.name]
    omid = (fmt.max + top) / 2
    edge = np.array([omid, top, fmt.max * 1.0001, fmt.max * 4, 1e300, fmt.min_subnormal / 2,
                     fmt.min_subnormal / 4, fmt.min_subnormal * 0.75, 1e-300, 5e-324])
    ties = np.concatenate([mids, edge[:1]])
    lo, hi = math.log2(fmt.min_subnormal) - 4, math.log2(fmt.max) + 2
    rand = np.exp2(rng.uniform(lo, hi, n))
    x = np.concatenate([pos, ties, np.nextafter(ties, 0), np.nextafter(ties, np.inf), edge, rand])
    return np.concatenate([x, -x, [0.0, -0.0, np.inf, -np.inf, np.nan]])


def lookup(fmt, mags):
    """Codes of non-negative table values (the table's own index, no rounding)."""
    pos = positives(fmt)
    codes = np.array([int(np.flatnonzero((fmt.table == v) & ~np.signbit(fmt.table))[0]) for v in pos])
    return codes[np.searchsorted(pos, mags)]


def brute(fmt, x, tie, saturate):
    """encode by exhaustive search: the nearest of the finite non-negative values and the one past max;
    tie "even": the candidate with an even code (the mantissa's last bit 0), "ta": the larger magnitude."""
    x = np.asarray(x, np.float64)
    cand = np.append(positives(fmt), PAST_MAX[fmt.name])
    a = np.minimum(np.abs(np.where(np.isfinite(x), x, 0)), 2 * cand[-1])   # beyond: all candidates equally far
    d = np.abs(a[:, None] - cand[None, :])
    best = d == d.min(axis=1, keepdims=True)
    if tie == "ta":                                           # the last (largest) of the nearest
        pick = best.shape[1] - 1 - np.argmax(best[:, ::-1], axis=1)
    else:                                                     # of two nearest, the one with an even code
        even = np.append(lookup(fmt, cand[:-1]) & 1, (lookup(fmt, cand[-2:-1]) + 1) & 1) == 0
        tied = best.sum(axis=1) > 1
        pick = np.where(tied, np.argmax(best & even[None, :], axis=1), np.argmax(best, axis=1))
    over = (pick == cand.size - 1) | np.isinf(x)
    mag = np.minimum(cand[pick], fmt.max)
    code = lookup(fmt, mag).astype(np.uint8)
    sbit = 0x80 if fmt.bits == 8 else 0x08
    neg = np.signbit(x) & ~((mag == 0) & fmt.single_zero)
    code = np.where(neg, code | sbit, code)
    if saturate:
        code = np.where(over, lookup(fmt, [fmt.max])[0] | np.where(np.signbit(x), sbit, 0), code)
        return np.where(np.isnan(x), 0, code).astype(np.uint8)
    past = fmt.inf_mag if fmt.has_inf else fmt.nan_mag        # E4M3FN overflows to NaN (no inf)
    code = np.where(over, past | np.where(np.signbit(x), sbit, 0), code)
    return np.where(np.isnan(x), fmt.nan_mag, code).astype(np.uint8)


# ---- registry ------------------------------------------------------------------------------------------------

def test_registry_names_bits_and_storage():
    assert list(lowp.FORMATS) == ["DT_FP8E4M3FN", "DT_FP8E5M2", "DT_FP8E8M0", "DT_FP4E2M1", "DT_FP4E1M2", "DT_HF8"]
    for f in lowp.FORMATS.values():
        assert f.table.shape == (1 << f.bits,) and f.table.dtype == np.float64 and not f.table.flags.writeable
        assert lowp.as_format(f.name) is f and lowp.as_format(f.name[3:].lower()) is f
    for name in ML:
        assert lowp.FORMATS[name].storage == ml_dtype(name)
        assert lowp.as_format(ml_dtype(name)) is lowp.FORMATS[name]
    assert lowp.FP4E1M2.storage == lowp.HF8.storage == np.uint8
    assert [f.bits for f in lowp.FORMATS.values()] == [8, 8, 8, 4, 4, 8]


@pytest.mark.parametrize("name", ML)
def test_limits_match_ml_dtypes_finfo(name):
    f, fi = lowp.FORMATS[name], ml_dtypes.finfo(ml_dtype(name))
    assert (f.max, f.min_normal, f.min_subnormal) == (float(fi.max), float(fi.tiny), float(fi.smallest_subnormal))
    assert f.has_inf == bool(np.isinf(np.array([np.inf]).astype(ml_dtype(name)).astype(float))[0])
    assert f.emax == {"DT_FP8E4M3FN": 8, "DT_FP8E5M2": 15, "DT_FP8E8M0": 127, "DT_FP4E2M1": 2}[name]


# ---- decode: the tables ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ML)
def test_table_equals_ml_dtypes_for_every_code(name):
    f = lowp.FORMATS[name]
    codes = np.arange(1 << f.bits, dtype=np.uint8)
    assert same(f.decode(codes), codes.view(ml_dtype(name)).astype(np.float64))
    assert same(f.decode(codes.view(ml_dtype(name))), f.decode(codes))       # storage arrays decode too


def test_e1m2_table_is_opbase_float4_e1m2():
    """hicann/opbase opdev/float4_e1m2.h: sign bit 3, exponent bit 2, mantissa bits 1..0, bias 1, no inf/NaN."""
    mags = [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75]
    assert same(lowp.FP4E1M2.table, mags + [-m for m in mags])
    f = lowp.FP4E1M2
    assert (f.max, f.min_normal, f.min_subnormal, f.emax, f.has_inf, f.has_nan) == (1.75, 1, 0.25, 0, False, False)


def test_hif8_table_structure_is_the_papers():
    """arXiv 2409.16626: normals give 7 exponents with a 3-bit mantissa, 8 with 2 bits, 16 with 1 bit; denormals 7
    more binades, 38 in all; one zero; every special value. opbase hifloat8.h: 0x00 zero, 0x80 NaN, 0x6F inf."""
    t = lowp.HF8.table
    assert np.flatnonzero(t == 0).tolist() == [0x00]
    assert np.flatnonzero(np.isnan(t)).tolist() == [0x80]
    assert np.flatnonzero(np.isposinf(t)).tolist() == [0x6F] and np.flatnonzero(np.isneginf(t)).tolist() == [0xEF]
    c = np.arange(1, 0x80)
    assert same(t[c | 0x80], -t[c])                                          # sign-magnitude
    pos = t[1:0x80][np.isfinite(t[1:0x80])]
    assert pos.size == 126 and np.unique(pos).size == 126
    binade = np.floor(np.log2(pos)).astype(int)
    assert sorted(set(binade)) == list(range(-22, 16))                        # 38 binades
    count = {e: int((binade == e).sum()) for e in range(-22, 16)}
    # the values of a binade are 2^e (1 + k / 2^w), k = 0 .. 2^w - 1
    for e, n in count.items():
        w = int(math.log2(n)) if e != 15 else 1
        assert np.array_equal(np.sort(pos[binade == e]), np.ldexp(1 + np.arange(n) / 2 ** w, e))
    assert [e for e, n in count.items() if n == 8] == list(range(-3, 4))                          # 7 x 3 bits
    assert [e for e, n in count.items() if n == 4] == [-7, -6, -5, -4, 4, 5, 6, 7]                 # 8 x 2 bits
    assert [e for e, n in count.items() if n == 2] + [15] == list(range(-15, -7)) + list(range(8, 16))  # 16 x 1
    assert count[15] == 1                                   # 2^15 (0x6E); 1.5 * 2^15's code is inf (0x6F)
    assert [e for e, n in count.items() if n == 1 and e < 0] == list(range(-22, -15))              # 7 denormal
    assert (lowp.HF8.max, lowp.HF8.min_subnormal, lowp.HF8.min_normal) == (2.0 ** 15, 2.0 ** -22, 2.0 ** -15)
    spot = {0x01: 2.0 ** -22, 0x07: 2.0 ** -16, 0x08: 1.0, 0x09: 1.125, 0x10: 2.0, 0x18: 0.5, 0x20: 4.0,
            0x30: 0.25, 0x6E: 32768.0, 0x7F: 1.5 * 2 ** -15}
    assert {k: t[k] for k in spot} == spot


# ---- round trips ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(lowp.FORMATS))
def test_every_code_round_trips(name):
    f = lowp.FORMATS[name]
    codes = np.arange(1 << f.bits, dtype=np.uint8)
    v = f.decode(codes)
    back = f.codes(f.encode(v))
    ok = ~np.isnan(v)
    assert np.array_equal(back[ok], codes[ok])                                # encode(decode(c)) == c
    assert same(f.decode(f.encode(v)), v)                                     # decode(encode(decode(c)))
    if True in f.saturations and f.signed:                    # saturating: +-inf -> +-max, NaN -> 0
        assert same(f.decode(f.encode(v, saturate=True)), np.where(np.isnan(v), 0.0, np.clip(v, -f.max, f.max)))


# ---- encode against ml_dtypes ---------------------------------------------------------------------------------

@pytest.mark.parametrize("src", [np.float64, np.float32])
@pytest.mark.parametrize("name", ML)
def test_encode_equals_ml_dtypes_astype(name, src):
    f, dt = lowp.FORMATS[name], ml_dtype(name)
    with np.errstate(over="ignore"):
        x = probe(f).astype(src)
        ref = x.astype(dt).view(np.uint8)
    ours = f.codes(f.encode(x))
    assert ours.dtype == np.uint8 and f.encode(x).dtype == f.storage
    # where the hardware's rules (PyPTO-Pro astype.md) and ml_dtypes' differ, pyto follows the hardware:
    if name == "DT_FP4E2M1":        # NaN: ml_dtypes gives a zero of the opposite sign; the hardware gives +0
        differ = np.isnan(x)
        assert np.all(ours[differ] == 0) and set(ref[differ]) <= {0x0, 0x8} and 0x8 in set(ref[differ])
    elif name == "DT_FP8E8M0":      # +-inf and |x| beyond 2^127: ml_dtypes NaN, the hardware 0xFE
        differ = np.isinf(x) | (np.abs(x.astype(np.float64)) >= 1.5 * 2.0 ** 127)
        assert np.all(ours[differ] == 0xFE) and np.all(ref[differ] == 0xFF)
    else:
        differ = np.zeros(x.shape, bool)
    assert np.array_equal(ours[~differ], ref[~differ]), x[~differ][ours[~differ] != ref[~differ]][:8]


@pytest.mark.parametrize("name", ["DT_FP8E4M3FN", "DT_FP8E5M2"])
def test_fp8_saturating_mode(name):
    """SaturateMode.ON (astype.md table 6): overflow and +-inf -> +-max, NaN -> 0; otherwise ml_dtypes' rounding."""
    f, dt = lowp.FORMATS[name], ml_dtype(name)
    x = probe(f)
    ref = np.where(np.isnan(x), 0.0, np.clip(x, -f.max, f.max)).astype(dt).view(np.uint8)
    assert np.array_equal(f.codes(f.encode(x, saturate=True)), ref)
    assert np.array_equal(f.codes(f.encode(x, saturate=True)), brute(f, x, "even", True))
    assert np.array_equal(f.codes(f.encode(x)), brute(f, x, "even", False))


def test_overflow_thresholds():
    e4, e5 = lowp.FP8E4M3FN, lowp.FP8E5M2
    assert e4.decode(e4.encode([464.0, np.nextafter(464.0, 1e9), -1e9])).tolist()[0] == 448.0
    assert np.isnan(e4.decode(e4.encode([np.nextafter(464.0, 1e9), np.inf]))).all()     # no inf: NaN
    assert e5.decode(e5.encode([np.nextafter(61440.0, 0), 61440.0, -np.inf])).tolist() == [57344.0, np.inf, -np.inf]


def test_e8m0_encoding_rules():
    f = lowp.FP8E8M0
    x = np.array([1.0, 1.4, 1.5, 3.0, 6.0, 2.0 ** -127, 2.0 ** -128, 2.0 ** -140, 1e-320, 2.0 ** 127])
    assert f.codes(f.encode(x)).tolist() == [127, 127, 128, 129, 130, 0, 0, 0, 0, 254]
    assert f.codes(f.encode(x, rounding="trunc")).tolist() == [127, 127, 127, 128, 129, 0, 0, 0, 0, 254]
    special = [0.0, -0.0, -1.0, np.nan, np.inf, -np.inf, 1.5 * 2.0 ** 127, -1e300]
    assert f.codes(f.encode(special)).tolist() == [255, 255, 255, 255, 254, 254, 254, 254]
    y = np.exp2(np.random.default_rng(1).uniform(-126, 127, 2000))
    assert np.array_equal(f.decode(f.encode(y, rounding="trunc")), np.exp2(np.floor(np.log2(y))))


# ---- encode by brute force: E1M2 and HiFloat8 ---------------------------------------------------------------

@pytest.mark.parametrize("rounding", ["rne", "ta"])
@pytest.mark.parametrize("name", ["DT_FP4E1M2", "DT_FP4E2M1"])
def test_fp4_encode_is_the_nearest_value(name, rounding):
    f = lowp.FORMATS[name]
    x = probe(f)
    ours = f.codes(f.encode(x, rounding=rounding))
    assert np.array_equal(ours, brute(f, x, "even" if rounding == "rne" else "ta", True))
    assert f.codes(f.encode([np.nan, -np.nan, np.inf, -np.inf])).tolist() == [0, 0, 7, 15]  # astype.md: FP4


def test_hif8_encode_is_the_nearest_value_ties_away():
    f = lowp.HF8
    x = probe(f)
    assert np.array_equal(f.codes(f.encode(x)), brute(f, x, "ta", False))
    assert np.array_equal(f.codes(f.encode(x, saturate=True)), brute(f, x, "ta", True))
    pos = positives(f)
    mids = (pos[:-1] + pos[1:]) / 2
    assert np.array_equal(f.decode(f.encode(mids)), pos[1:])                 # every tie goes away from zero
    assert np.array_equal(f.decode(f.encode(-mids)), -pos[1:])
    assert f.decode(f.encode([40959.99, 40960.0, 2.0 ** -23, np.nextafter(2.0 ** -23, 0), -0.0])).tolist() == \
        [32768.0, np.inf, 2.0 ** -22, 0.0, 0.0]
    assert f.codes(f.encode([-0.0, -1e-30, np.nan])).tolist() == [0x00, 0x00, 0x80]
    assert f.codes(f.encode([np.nan, np.inf, -1e6], saturate=True)).tolist() == [0x00, 0x6E, 0xEE]


_magnitudes = st.builds(lambda s, e, m: s * m * 2.0 ** e, st.sampled_from([-1.0, 1.0]),
                        st.integers(-26, 17), st.floats(1.0, 2.0, exclude_max=True))


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.one_of(_magnitudes, st.floats(-1e6, 1e6, allow_nan=False), st.sampled_from([0.0, -0.0])))
def test_hif8_encode_property(x):
    """encode(x) is a nearest representable value of x (ties away from zero), found among all 256 codes."""
    f = lowp.HF8
    got = f.codes(f.encode(np.array([x])))
    assert got.tolist() == brute(f, [x], "ta", False).tolist()
    v = f.table[got[0]]
    finite = f.table[np.isfinite(f.table)]
    if abs(x) < 40960:
        assert abs(v - x) == np.min(np.abs(finite - x))
    else:
        assert v == math.copysign(math.inf, x)
    assert f.codes(f.encode(f.decode(got))).tolist() == got.tolist()


# ---- options and errors -------------------------------------------------------------------------------------

def test_rounding_and_saturation_options_are_checked():
    with pytest.raises(UnsupportedError, match="'ta'"):
        lowp.HF8.encode([1.0], rounding="rne")
    with pytest.raises(UnsupportedError, match="HR.*not implemented"):
        lowp.HF8.encode([1.0], rounding="hr")
    with pytest.raises(UnsupportedError, match="always saturates"):
        lowp.FP4E2M1.encode([1.0], saturate=False)
    with pytest.raises(UnsupportedError, match="'rne'"):
        lowp.FP8E4M3FN.encode([1.0], rounding="ta")
    assert [f.roundings[0] for f in lowp.FORMATS.values()] == ["rne", "rne", "rne", "rne", "rne", "ta"]


def test_decode_refuses_floats_bad_codes_and_other_formats():
    with pytest.raises(ShapeError, match="encode turns floats"):
        lowp.FP8E4M3FN.decode(np.array([1.0]))
    with pytest.raises(ShapeError, match="code 16 is not a 4-bit code"):
        lowp.FP4E1M2.decode([3, 16])
    with pytest.raises(ShapeError, match="float8_e5m2"):
        lowp.FP8E4M3FN.decode(np.zeros(2, ml_dtype("DT_FP8E5M2")))
    with pytest.raises(ShapeError, match="unknown low-precision format"):
        lowp.as_format("fp8e4m3")
    with pytest.raises(ShapeError, match="real numbers"):
        lowp.HF8.encode(np.array(["a"]))
    assert lowp.HF8.decode([[8, 16]]).tolist() == [[1.0, 2.0]]


# ---- 4-bit packing ------------------------------------------------------------------------------------------

def test_pack_fp4_low_nibble_first():
    """PTO-ISA tmatmul_mx/gen_data.py pack_two_fp4: element 2i in bits 0..3, element 2i+1 in bits 4..7."""
    assert lowp.pack_fp4([[1, 2, 3, 4]]).tolist() == [[0x21, 0x43]]
    c = np.random.default_rng(2).integers(0, 16, (3, 5, 8))
    p = lowp.pack_fp4(c)
    assert p.dtype == np.uint8 and p.shape == (3, 5, 4)
    for idx in np.ndindex(p.shape):
        assert p[idx] == c[idx[:-1] + (2 * idx[-1],)] + 16 * c[idx[:-1] + (2 * idx[-1] + 1,)]
    assert np.array_equal(lowp.unpack_fp4(p), c)
    x = np.random.default_rng(3).normal(size=(4, 64)) * 3
    e = lowp.FP4E2M1.encode(x)
    assert np.array_equal(lowp.pack_fp4(e), lowp.pack_fp4(lowp.FP4E2M1.codes(e)))
    back = lowp.unpack_fp4(lowp.pack_fp4(e), lowp.FP4E2M1)
    assert back.dtype == lowp.FP4E2M1.storage and same(lowp.FP4E2M1.decode(back), lowp.FP4E2M1.decode(e))


def test_pack_fp4_errors():
    with pytest.raises(ShapeError, match="even length"):
        lowp.pack_fp4([1, 2, 3])
    with pytest.raises(ShapeError, match="0..15"):
        lowp.pack_fp4([1, 16])
    with pytest.raises(ShapeError, match="0..15"):
        lowp.pack_fp4(np.array([0.5, 1.0]))
    with pytest.raises(ShapeError, match="not a 4-bit format"):
        lowp.unpack_fp4(np.zeros(2, np.uint8), "hf8")


# ---- MX -----------------------------------------------------------------------------------------------------

def scales_by_loop(x, axis, fmt, group=32):
    """OCP MX / microxcaling, one group at a time: floor(log2(max|x|)) - emax, zero -> 2^-126, clamp to E8M0."""
    xm = np.moveaxis(np.asarray(x, np.float64), axis, -1)
    out = np.empty(xm.shape[:-1] + (xm.shape[-1] // group,), np.uint8)
    for idx in np.ndindex(out.shape):
        g = xm[idx[:-1]][idx[-1] * group:(idx[-1] + 1) * group]
        amax = float(np.max(np.abs(g)))
        if not math.isfinite(amax):
            out[idx] = 255
            continue
        shared = math.frexp(amax if amax else 2.0 ** -126)[1] - 1 - fmt.emax
        out[idx] = 255 if shared > 127 else max(shared, -127) + 127
    return np.moveaxis(out, -1, axis)


@pytest.mark.parametrize("fmt", lowp.MX_ELEMENTS, ids=lambda f: f.name)
def test_mx_scales_and_exact_round_trip(fmt):
    rng = np.random.default_rng(4)
    m, k = 3, 128
    # elements from the format's table, each group holding one value of the top binade; scales 2^(s - 127)
    codes = rng.integers(0, 1 << fmt.bits, (m, k))
    vals = np.where(np.isfinite(fmt.table[codes]), fmt.table[codes], 0.0)
    vals[:, ::32] = fmt.max * rng.choice([-1, 1], (m, k // 32))
    s = rng.integers(90, 170, (m, k // 32))
    x = vals * np.repeat(np.exp2(s - 127.0), 32, axis=1)
    for axis, xx in ((1, x), (0, x.T)):
        sc = lowp.mx_scales_e8m0(xx, axis, fmt)
        assert sc.dtype == lowp.FP8E8M0.storage and sc.shape == ((m, k // 32) if axis else (k // 32, m))
        assert np.array_equal(lowp.FP8E8M0.codes(sc), s if axis else s.T)
        assert np.array_equal(lowp.FP8E8M0.codes(sc), scales_by_loop(xx, axis, fmt))
        el, sc2 = lowp.mx_quantize(xx, axis, fmt)
        assert np.array_equal(lowp.FP8E8M0.codes(sc2), lowp.FP8E8M0.codes(sc))
        assert same(lowp.mx_dequant(el, sc2, axis, fmt), xx)                   # exact
        assert same(fmt.decode(el), vals if axis else vals.T)


@pytest.mark.parametrize("fmt", lowp.MX_ELEMENTS, ids=lambda f: f.name)
def test_mx_scales_of_random_data(fmt):
    rng = np.random.default_rng(5)
    x = rng.normal(size=(4, 96)) * np.exp2(rng.integers(-60, 60, (4, 1)))
    x[0, :32] = 0.0                                              # an all-zero group
    x[1, 32] = np.inf
    x[2, 64] = np.nan
    x[3, :32] *= 2.0 ** 200                                      # a scale beyond E8M0: NaN
    codes = lowp.FP8E8M0.codes(lowp.mx_scales_e8m0(x, 1, fmt))
    assert np.array_equal(codes, scales_by_loop(x, 1, fmt))
    assert codes[0, 0] == max(-126 - fmt.emax, -127) + 127 and codes[1, 1] == codes[2, 2] == codes[3, 0] == 255
    el, sc = lowp.mx_quantize(x, 1, fmt)
    deq = lowp.mx_dequant(el, sc, 1, fmt)
    ok = np.repeat(lowp.FP8E8M0.codes(sc) != 255, 32, axis=1)
    assert np.isnan(deq[~ok]).all()
    scale = np.repeat(lowp.FP8E8M0.decode(sc), 32, axis=1)
    # each element is the nearest value (ties to even, saturating) of x / scale, found by exhaustive search
    assert np.array_equal(fmt.codes(el)[ok], brute(fmt, (x / scale)[ok], "even", True))
    assert same(deq[ok], fmt.decode(el)[ok] * scale[ok])


def test_mx_matmul_reference():
    """dequant(A) @ dequant(B) with A [M, K] scaled along K (axis 1) and B [K, N] along K (axis 0), MXFP8 E4M3 x
    E5M2, against a loop over K applying 2^(e - 127) per 32 as PTO-ISA's tmatmul_mx golden does."""
    rng = np.random.default_rng(6)
    m, k, n = 4, 64, 5
    a_el, sa = lowp.mx_quantize(rng.normal(size=(m, k)), 1, lowp.FP8E4M3FN)
    b_el, sb = lowp.mx_quantize(rng.normal(size=(k, n)), 0, lowp.FP8E5M2)
    assert sa.shape == (m, k // 32) and sb.shape == (k // 32, n)
    got = lowp.mx_dequant(a_el, sa, 1) @ lowp.mx_dequant(b_el, sb, 0)
    a, b = lowp.FP8E4M3FN.decode(a_el), lowp.FP8E5M2.decode(b_el)
    ea, eb = lowp.FP8E8M0.codes(sa).astype(int), lowp.FP8E8M0.codes(sb).astype(int)
    ref = np.zeros((m, n))
    for i in range(k):
        ref += np.outer(a[:, i] * 2.0 ** (ea[:, i // 32] - 127), b[i, :] * 2.0 ** (eb[i // 32, :] - 127))
    np.testing.assert_allclose(got, ref, rtol=1e-13, atol=0)


def test_mx_shape_errors():
    x = np.ones((2, 48))
    with pytest.raises(ShapeError, match="not a multiple of the MX group 32"):
        lowp.mx_scales_e8m0(x, 1, lowp.FP8E4M3FN)
    el, sc = lowp.mx_quantize(np.ones((2, 64)), 1, "fp4e2m1")
    with pytest.raises(ShapeError, match=r"needs scales of shape \(2, 2\)"):
        lowp.mx_dequant(el, sc[:, :1], 1)
    with pytest.raises(ShapeError, match="pass fmt="):
        lowp.mx_dequant(lowp.FP4E2M1.codes(el), sc, 1)
    with pytest.raises(ShapeError, match="axis 2 is out of range"):
        lowp.mx_scales_e8m0(x, 2, lowp.FP8E4M3FN)
    with pytest.raises(UnsupportedError, match="DT_HF8 is not an MX element format"):
        lowp.mx_quantize(np.ones((2, 64)), 1, lowp.HF8)


# ---- en_dtypes (PTO-ISA's golden-data library), when installed -------------------------------------------------

def test_against_en_dtypes_when_installed():
    ed = pytest.importorskip("en_dtypes")
    for f, t in ((lowp.HF8, ed.hifloat8), (lowp.FP4E1M2, ed.float4_e1m2)):
        codes = np.arange(1 << f.bits, dtype=np.uint8)
        assert same(f.table, codes.view(t).astype(np.float64))
        with np.errstate(over="ignore"):     # float32 inputs: en_dtypes rounds float64 through float32 first
            x = probe(f).astype(np.float32)
        assert np.array_equal(f.codes(f.encode(x)), x.astype(t).view(np.uint8))
    y = np.exp2(np.random.default_rng(7).uniform(-126, 127, 1000)).astype(np.float32)
    assert np.array_equal(lowp.FP8E8M0.codes(lowp.FP8E8M0.encode(y, rounding="trunc")),
                          y.astype(ed.float8_e8m0).view(np.uint8))
