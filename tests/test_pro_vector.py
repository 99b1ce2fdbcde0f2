"""PyPTO-Pro's tile vector ops on pyto: each op against an independent numpy float64 reference in every dtype it
takes, with the tolerance the dtype justifies (one rounding to the output: half an ulp; exact where the hardware is
exact), the numerics model vector_effects.py documents (chunked row sums, two-rounding fused ops, RoundModes), and
PyPTO-Pro's dim convention (dim=0 row-wise into a [rows, 1] DN tile)."""
import ml_dtypes
import numpy as np
import pytest

import pyto
import pyto.language as pl
from pyto.testing import assert_close

BF16 = ml_dtypes.bfloat16
PL = {np.dtype(np.float16): pl.DT_FP16, np.dtype(BF16): pl.DT_BF16, np.dtype(np.float32): pl.DT_FP32,
      np.dtype(np.int8): pl.DT_INT8, np.dtype(np.int32): pl.DT_INT32, np.dtype(np.uint8): pl.DT_UINT8}
# unit roundoff u, mantissa bits p (with the hidden bit), smallest normal exponent
FMT = {np.dtype(np.float16): (2.0 ** -11, 11, -14), np.dtype(BF16): (2.0 ** -8, 8, -126),
       np.dtype(np.float32): (2.0 ** -24, 24, -126)}
F16, F32, I8, I32, U8 = np.float16, np.float32, np.int8, np.int32, np.uint8
R, C = 8, 40                     # 40 columns: not a multiple of the 32-byte UB row


def f64(x) -> np.ndarray:
    return np.asarray(x, np.float64)


def ulp(x, dt) -> np.ndarray:
    """The spacing of `dt` at |x| (the subnormal spacing below the smallest normal)."""
    _, p, emin = FMT[np.dtype(dt)]
    ax = np.abs(f64(x))
    e = np.floor(np.log2(np.where(ax > 0, ax, 1.0)))
    return 2.0 ** (np.maximum(np.where(ax > 0, e, emin), emin) - (p - 1))


def half_ulp(exact, dt) -> np.ndarray:
    """One correct rounding of `exact` to dt: at most half its spacing there."""
    return 0.5 * ulp(exact, dt)


def values_of(dt) -> np.ndarray:
    """Every finite value of a 16-bit float dtype, ascending, as float64: an independent rounding table."""
    with np.errstate(invalid="ignore"):
        v = np.arange(2 ** 16, dtype=np.uint32).astype(np.uint16).view(dt).astype(np.float64)
    return np.unique(v[np.isfinite(v)])


def round_table(x, dt, mode="CAST_RINT") -> np.ndarray:
    """x (float64) rounded to a 16-bit float dtype by `mode`, from the table of its values: the neighbours below
    and above, then the mode's pick. A finite x past the range gives the largest value (TCVT's saturation; a
    rounding to nearest of a value inside the rounding range is the same)."""
    t = values_of(dt)
    x = np.clip(f64(x), t[0], t[-1])
    i = np.clip(np.searchsorted(t, x, side="right") - 1, 0, len(t) - 2)
    lo, hi = t[i], t[i + 1]
    exact = (x == lo) | (x == hi)
    mid = (lo + hi) / 2
    lo_odd = (lo.astype(dt).view(np.uint16) & 1) == 1
    if mode == "CAST_RINT":
        pick = np.where(x < mid, lo, np.where(x > mid, hi, np.where(lo_odd, hi, lo)))
    elif mode == "CAST_ROUND":
        pick = np.where(x < mid, lo, np.where(x > mid, hi, np.where(np.abs(lo) > np.abs(hi), lo, hi)))
    elif mode == "CAST_FLOOR":
        pick = lo
    elif mode == "CAST_CEIL":
        pick = hi
    elif mode == "CAST_TRUNC":
        pick = np.where(x >= 0, lo, hi)
    else:   # CAST_ODD: toward zero, then the odd one of the two neighbours where inexact
        pick = np.where(lo_odd, lo, hi)
    return np.where(exact, np.where(x == lo, lo, hi), pick)


def _ub(shape, dt, addr: int, dn: bool = False):
    """A Vec tile at `addr` (an ND [1, rows] store read as a DN [rows, 1] column when `dn`)."""
    rows, cols = (shape[1], shape[0]) if dn else shape
    per = 32 // dt.itemsize
    size = rows * (-(-cols // per) * per) * dt.itemsize
    tt = pl.TileType(list(shape), dt, pl.MemorySpace.Vec, layout=pl.DN if dn else None)
    return pl.make_tile(tt, addr=addr, size=size), size


@pl.kernel
def vop(x0, x1, x2, out, *, OP: str, CALL: str, DN: tuple = (False, False, False, False), SCALAR: float = 0.0,
        MODE: str = "CAST_RINT", DIM: int = 0, OUT2: bool = False):
    """One vector op on AIV 0: x0..x2 and out loaded into Vec tiles (a DN operand through its ND [1, rows] view at
    the same address), pl.<OP> called as CALL says, out (and x0 when OUT2: the op writes it too) stored back."""
    gms = (x0, x1, x2, out)
    addr, nd, view = 0, [], []
    for g, dn in zip(gms, DN):
        shape = tuple(g.shape)
        t, size = _ub(shape, g.dtype, addr)
        nd.append(t)
        view.append(_ub(shape[::-1], g.dtype, addr, dn=True)[0] if dn else t)
        addr += -(-size // 1024) * 1024
    a, b, c, o = view
    fn = getattr(pl, OP)
    mode = getattr(pl.RoundMode, MODE)
    with pl.section_vector():
        if pl.get_block_idx() == 0:
            for t, g in zip(nd, gms):
                pl.load(t, g)
            pl.system.bar_all()
            {"un": lambda: fn(o, a), "bin": lambda: fn(o, a, b), "bins": lambda: fn(o, a, SCALAR),
             "fill": lambda: fn(o, SCALAR), "fused": lambda: fn(o, a, b), "addc": lambda: fn(o, a, b, c),
             "cast": lambda: fn(o, a, mode=mode), "red": lambda: fn(o, a, b, dim=DIM),
             "expand": lambda: fn(o, a, b, dim=DIM), "xor": lambda: fn(o, a, b, c),
             "fcast": lambda: fn(o, a, b, target_type=o.dtype, mode=mode)}[CALL]()
            pl.system.bar_all()
            pl.store(out, nd[3])
            if OUT2:
                pl.store(x0, nd[0])


def run(op, call, a, b=None, c=None, out=None, **kw):
    """Run pl.<op> on the arrays; returns out (and x0 when OUT2)."""
    b = np.zeros_like(a) if b is None else b
    c = np.zeros_like(a) if c is None else c
    out = np.zeros_like(a) if out is None else out
    pyto.run(vop, a, b, c, out, OP=op, CALL=call, **kw)
    return out


RNG = np.random.default_rng(20261201)


def data(dt, shape=(R, C), lo=-3.0, hi=3.0, rng=RNG) -> np.ndarray:
    if np.dtype(dt).kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, int(info.max) + 1, shape, dtype=np.int64).astype(dt)
    return rng.uniform(lo, hi, shape).astype(dt)


def nonzero(dt, shape=(R, C)) -> np.ndarray:
    """Magnitudes in [0.5, 3], random sign (divisors)."""
    return (RNG.uniform(0.5, 3.0, shape) * RNG.choice([-1, 1], shape)).astype(dt)


def wrap(x, dt) -> np.ndarray:
    """Integer x (int64) taken modulo 2^bits into dt, as two's complement."""
    bits = 8 * np.dtype(dt).itemsize
    return np.mod(np.asarray(x, np.int64), 2 ** bits).astype(np.uint64).astype(dt)


# ---- binary and scalar ops ---------------------------------------------------------------------------------------
FLOAT_BINARY = {"add": (np.add, (F16, BF16, F32)), "sub": (np.subtract, (F16, BF16, F32)),
                "mul": (np.multiply, (F16, BF16, F32)), "div": (np.divide, (F16, F32)),
                "maximum": (np.maximum, (F16, BF16, F32)), "minimum": (np.minimum, (F16, BF16, F32))}


@pytest.mark.parametrize("op", list(FLOAT_BINARY))
@pytest.mark.parametrize("scalar", [False, True], ids=["tile", "scalar"])
def test_float_binary_ops_round_once(op, scalar):
    ref_fn, dts = FLOAT_BINARY[op]
    for dt in dts:
        a, b = data(dt), nonzero(dt)
        s = -0.375                       # exact in every float dtype
        got = run(op, "bins", a, SCALAR=s) if scalar else run(op, "bin", a, b)
        exact = ref_fn(f64(a), s if scalar else f64(b))
        bound = 0.0 if op in ("maximum", "minimum") else half_ulp(exact, dt)
        assert_close(got, exact, bound, f"pl.{op} {np.dtype(dt).name}")


INT_BINARY = {"add": (np.add, (I8, U8, I32)), "sub": (np.subtract, (I8, U8, I32)), "mul": (np.multiply, (I32,)),
              "maximum": (np.maximum, (I8, U8, I32)), "minimum": (np.minimum, (I8, U8, I32)),
              "and_": (np.bitwise_and, (I8, U8, I32))}


@pytest.mark.parametrize("op", list(INT_BINARY))
def test_int_binary_ops_are_exact_and_wrap(op):
    ref_fn, dts = INT_BINARY[op]
    for dt in dts:
        a, b = data(dt), data(dt)
        got = run(op, "bin", a, b)
        assert np.array_equal(got, wrap(ref_fn(a.astype(np.int64), b.astype(np.int64)), dt)), (op, dt)
        s = int(np.iinfo(dt).max) // 3
        got = run(op, "bins", a, SCALAR=s)
        assert np.array_equal(got, wrap(ref_fn(a.astype(np.int64), s), dt)), (op, dt, "scalar")


def test_int_div_rounds_toward_zero_and_int_scalars_need_the_dtype_range():
    a = np.tile(np.array([7, -7, 3, -3, 1, 2 ** 31 - 1, 0, 5], np.int32), (R, C // 8))
    b = np.tile(np.array([2, 2, 2, 2, 3, 2, 0, 0], np.int32), (R, C // 8))
    got = run("div", "bin", a, b)
    assert np.array_equal(got[:, :8], np.tile(np.array([3, -3, 1, -1, 0, 2 ** 30 - 1, 0, 2 ** 31 - 1]), (R, 1)))
    with pytest.raises(pyto.KernelError, match=r"test_pro_vector\.py:\d+ .*int8 range \[-128, 127\], got 300"):
        run("add", "bins", data(I8), SCALAR=300)
    with pytest.raises(pyto.KernelError, match=r"int32 range .* got 1\.5"):
        run("add", "bins", data(I32), SCALAR=1.5)


def test_shifts_and_xor():
    for dt in (I8, U8, I32):
        bits = 8 * np.dtype(dt).itemsize
        a = data(dt)
        s = RNG.integers(0, bits, (R, C)).astype(dt)
        left = run("shl", "bin", a, s)
        assert np.array_equal(left, wrap(a.astype(np.int64) << s.astype(np.int64), dt)), dt
        right = run("shr", "bin", a, s)            # arithmetic for signed dtypes, logical for unsigned
        assert np.array_equal(right, (a.astype(np.int64) >> s.astype(np.int64)).astype(dt)), dt
        b = data(dt)
        tmp = data(dt)
        got = run("xor", "xor", a, b, tmp)
        assert np.array_equal(got, a ^ b), dt
    a = np.array([[1, -8, 5, -1] * 10] * R, np.int32)
    s = np.array([[32, 40, -1, 33] * 10] * R, np.int32)           # outside 0..31: pyto's documented 0 / -1
    assert np.array_equal(run("shl", "bin", a, s), np.zeros_like(a))
    assert np.array_equal(run("shr", "bin", a, s)[0, :4], [0, -1, 0, -1])


# ---- unary ---------------------------------------------------------------------------------------------------------
def test_exact_unary_ops():
    for op, fn, dts in (("neg", np.negative, (F16, BF16, F32, I32)), ("abs", np.abs, (F16, F32, I8, I32)),
                        ("relu", lambda x: np.maximum(x, 0), (F16, F32, I32))):
        for dt in dts:
            a = data(dt)
            want = fn(a.astype(np.int64)) if np.dtype(dt).kind == "i" else fn(f64(a))
            got = run(op, "un", a)
            assert np.array_equal(f64(got), f64(wrap(want, dt) if np.dtype(dt).kind == "i" else want)), (op, dt)


@pytest.mark.parametrize("op", ["exp", "log", "sqrt", "rsqrt", "recip"])
@pytest.mark.parametrize("dt", [F16, F32], ids=["fp16", "fp32"])
def test_math_ops_against_float64(op, dt):
    """sqrt and recip are correctly rounded (half an ulp); exp, log, rsqrt are pyto's model of an accurate unit:
    the float64 function rounded to fp32, then to the dtype: half a dtype ulp plus half an fp32 ulp (for fp32
    itself half an ulp, plus 2^-50 relative for the float64 function's own error)."""
    a = data(dt, lo=-4.0, hi=4.0) if op == "exp" else (np.abs(data(F32)) + 0.125).astype(dt)
    ref = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
           "recip": lambda x: 1 / x}[op](f64(a))
    got = run(op, "un", a)
    if op in ("sqrt", "recip"):
        bound = half_ulp(ref, dt)
    elif dt is F32:
        bound = half_ulp(ref, F32) + 2.0 ** -50 * np.abs(ref)
    else:
        bound = half_ulp(ref, dt) + half_ulp(ref, F32)
    assert_close(got, ref, bound, f"pl.{op} {np.dtype(dt).name}")


def test_expands_and_fill_index():
    for dt, v in ((F16, 65519.999), (BF16, 1 + 2 ** -8 + 2 ** -30), (F32, 0.1), (I8, -128), (U8, 255), (I32, 7)):
        got = run("expands", "fill", data(dt), SCALAR=v)
        want = round_table(v, dt) if dt in (F16, BF16) else np.asarray(v).astype(dt)
        assert np.all(f64(got) == f64(want)), (dt, got[0, 0], want)
    assert f64(run("expands", "fill", data(F16), SCALAR=65520.0))[0, 0] == np.inf      # past the range: inf
    row = np.zeros((1, 40), np.int32)
    got = run("fill_index", "fill", row, out=row.copy(), SCALAR=2 ** 31 - 3)
    assert np.array_equal(got[0], wrap(2 ** 31 - 3 + np.arange(40), I32))


# ---- cast ----------------------------------------------------------------------------------------------------------
MODES = ["CAST_RINT", "CAST_ROUND", "CAST_FLOOR", "CAST_CEIL", "CAST_TRUNC"]


def _ties(dt) -> np.ndarray:
    """fp32 values at and around halfway points of dt, both signs, and ones past its range."""
    t = values_of(dt)
    t = t[(np.abs(t) > 0) & (np.abs(t) < 3e38)]
    pick = RNG.choice(len(t) - 1, 120)
    lo, hi = t[pick], t[pick + 1]
    mid = (lo + hi) / 2
    x = np.concatenate([mid, lo + (hi - lo) * 0.25, lo + (hi - lo) * 0.75, [70000.0, -1e5, 3.0e38]])
    x = x[np.abs(x) < 3.3e38].astype(np.float32)
    return x[: (len(x) // 40) * 40].reshape(-1, 40)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dt", [F16, BF16], ids=["fp16", "bf16"])
def test_cast_fp32_to_16_bit_floats_by_each_mode(dt, mode):
    """CAST_RINT ties to even, CAST_ROUND ties away from zero, FLOOR / CEIL / TRUNC toward -inf / +inf / 0; a
    finite value past the range saturates to the largest (TCVT's saturation): against a table of every value."""
    x = _ties(dt)
    got = run("cast", "cast", x, out=np.zeros(x.shape, dt), MODE=mode)
    want = round_table(f64(x), dt, mode)
    assert np.array_equal(f64(got), want), (mode, f64(got)[f64(got) != want][:4], want[f64(got) != want][:4])


def test_cast_odd_and_none():
    x = _ties(F16)
    got = run("cast", "cast", x, out=np.zeros(x.shape, F16), MODE="CAST_ODD")
    assert np.array_equal(f64(got), round_table(f64(x), F16, "CAST_ODD"))
    none = run("cast", "cast", x, out=np.zeros(x.shape, F16), MODE="CAST_NONE")     # TCVT's default: RINT
    assert np.array_equal(f64(none), round_table(f64(x), F16, "CAST_RINT"))
    with pytest.raises(pyto.KernelError, match=r"CAST_ODD rounds fp32 -> fp16 only .* got fp32 -> bf16"):
        run("cast", "cast", x, out=np.zeros(x.shape, BF16), MODE="CAST_ODD")


def fp32_pick(x, mode) -> np.ndarray:
    """x (float64, exact integers here) rounded to fp32 by `mode`, from its two fp32 neighbours."""
    c = x.astype(np.float32).astype(np.float64)
    lo = np.where(c <= x, c, np.nextafter(c.astype(np.float32), np.float32(-np.inf)).astype(np.float64))
    hi = np.where(c >= x, c, np.nextafter(c.astype(np.float32), np.float32(np.inf)).astype(np.float64))
    mid = (lo + hi) / 2
    lo_odd = (lo.astype(np.float32).view(np.uint32) & 1) == 1
    pick = {"CAST_RINT": np.where(x < mid, lo, np.where(x > mid, hi, np.where(lo_odd, hi, lo))),
            "CAST_ROUND": np.where(x < mid, lo, np.where(x > mid, hi, np.where(np.abs(lo) > np.abs(hi), lo, hi))),
            "CAST_FLOOR": lo, "CAST_CEIL": hi, "CAST_TRUNC": np.where(x >= 0, lo, hi)}[mode]
    return np.where(lo == x, x, pick)


def _int_ref(x, dt, mode, wrap_=False):
    x = f64(x)
    r = {"CAST_RINT": np.rint, "CAST_FLOOR": np.floor, "CAST_CEIL": np.ceil, "CAST_TRUNC": np.trunc,
         "CAST_ROUND": lambda v: np.sign(v) * np.floor(np.abs(v) + 0.5)}[mode](x)
    if wrap_:
        return wrap(np.where(np.isfinite(r), r, 0).astype(np.int64), dt)
    info = np.iinfo(dt)
    return np.where(np.isnan(r), 0, np.clip(r, info.min, info.max)).astype(dt)


@pytest.mark.parametrize("mode", MODES)
def test_cast_floats_to_ints(mode):
    """fp32 / fp16 / bf16 -> int32 saturate (NaN to 0); fp16 -> int8 / uint8 wrap (TCVT turns saturation off)."""
    x = np.concatenate([np.array([2.5, 1.5, -2.5, -1.5, 0.7, -0.7, 3e9, -3e9, np.nan, np.inf]),
                        RNG.uniform(-300, 300, 30)]).reshape(1, 40)
    for src in (F32, F16, BF16):
        with np.errstate(over="ignore"):
            xs = x.astype(src)
        got = run("cast", "cast", xs, out=np.zeros(xs.shape, I32), MODE=mode)
        assert np.array_equal(got, _int_ref(xs, I32, mode)), (src, mode)
    with np.errstate(over="ignore"):
        xs = np.nan_to_num(x, nan=0.0, posinf=0.0).astype(F16)
    for dst in (I8, U8):
        got = run("cast", "cast", xs, out=np.zeros(xs.shape, dst), MODE=mode)
        assert np.array_equal(got, _int_ref(xs, dst, mode, wrap_=True)), (dst, mode)


def test_cast_widening_and_integer_pairs_are_exact():
    for src, dst in ((F16, F32), (BF16, F32), (I8, F16), (U8, F16), (I8, I32), (BF16, F16)):
        x = data(src, lo=-60000.0, hi=60000.0) if src is not BF16 else data(src, lo=-1e4, hi=1e4)
        got = run("cast", "cast", x, out=np.zeros(x.shape, dst), MODE="CAST_RINT")
        assert np.array_equal(f64(got), f64(x)), (src, dst)
    x = np.array([[-5, 0, 77, 255, 256, 2 ** 31 - 1, -2 ** 31, 3] * 5], np.int32)
    got = run("cast", "cast", x, out=np.zeros(x.shape, U8), MODE="CAST_RINT")       # int32 -> uint8 saturates
    assert np.array_equal(got, np.clip(x, 0, 255).astype(U8))
    x = np.array([[2 ** 24 + 1, -(2 ** 24 + 3), 2 ** 30 + 65, 2 ** 30 + 64, -(2 ** 25 + 2), 7, 0, -1] * 5],
                 np.int32)                                     # int32 -> fp32 by the mode: ties and inexact ones
    for mode in MODES:
        got = run("cast", "cast", x, out=np.zeros(x.shape, F32), MODE=mode)
        assert np.array_equal(f64(got), fp32_pick(f64(x), mode)), mode
    f = np.array([[2.5, -2.5, 0.5, 1.25, -0.75, 1e9, 3.5, -3.5] * 5], np.float32)   # fp32 -> fp32: integral
    assert np.array_equal(run("cast", "cast", f, out=np.zeros_like(f), MODE="CAST_ROUND")[0, :8],
                          [3, -3, 1, 1, -1, 1e9, 4, -4])
    assert np.array_equal(run("cast", "cast", f, out=np.zeros_like(f), MODE="CAST_RINT")[0, :8],
                          [2, -2, 0, 1, -1, 1e9, 4, -4])


# ---- compare and select --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op,fn", [("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
                                   ("gt", np.greater), ("ge", np.greater_equal)])
def test_compare_packs_bits_and_select_reads_them(op, fn):
    for dt in (F16, BF16, F32, I8, U8, I32):
        a = data(dt, lo=-2, hi=2).astype(dt)
        b = np.where(RNG.random((R, C)) < 0.3, a, data(dt, lo=-2, hi=2)).astype(dt)   # some equal pairs
        mask = run(op, "bin", a, b, out=np.zeros((R, C), U8))
        bits = fn(f64(a), f64(b))
        assert np.array_equal(mask[:, :5], np.packbits(bits, axis=1, bitorder="little")), (op, dt)
        s = 1 if np.dtype(dt).kind in "iu" else 0.5
        mask_s = run(op, "bins", a, out=np.zeros((R, C), U8), SCALAR=s)
        assert np.array_equal(mask_s[:, :5], np.packbits(fn(f64(a), s), axis=1, bitorder="little")), (op, dt)


@pl.kernel
def cmp_select(a, b, out, *, OP: str, SCALAR_RHS: bool = False):
    """out = select(a OP b, a, b (or the scalar 7)), the mask in a DT_UINT8 tile of a's shape (comparison.md)."""
    ta, tb, to = (pl.alloc(pl.UB, list(a.shape), a.dtype) for _ in range(3))
    mask = pl.alloc(pl.UB, list(a.shape), pl.DT_UINT8)
    tmp = pl.alloc(pl.UB, list(a.shape), a.dtype)
    with pl.section_vector():
        if pl.get_block_idx() == 0:
            pl.load(ta, a)
            pl.load(tb, b)
            getattr(pl, OP)(mask, ta, tb)
            pl.select(to, mask, ta, 7 if SCALAR_RHS else tb, tmp)
            pl.store(out, to)


@pytest.mark.parametrize("dt", [F16, BF16, F32, I8, U8, I32])
def test_select_by_a_compare_mask(dt):
    a, b = data(dt, lo=-3, hi=3), data(dt, lo=-3, hi=3)
    out = np.zeros_like(a)
    pyto.run(cmp_select, a, b, out, OP="gt")
    assert np.array_equal(f64(out), np.where(f64(a) > f64(b), f64(a), f64(b)))        # = max(a, b), exactly
    if dt is not BF16:                       # a scalar rhs takes no bf16 (select.md)
        pyto.run(cmp_select, a, b, out, OP="le", SCALAR_RHS=True)
        assert np.array_equal(f64(out), np.where(f64(a) <= f64(b), f64(a), 7.0))


# ---- fused ops -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["add_relu", "sub_relu"])
def test_add_relu_and_sub_relu_round_once_and_leave_the_sum_in_lhs(op):
    for dt in ((F16, F32, I32) if op == "add_relu" else (F16, F32)):
        a, b = data(dt), data(dt)
        if np.dtype(dt).kind == "i":
            a, b = (a // 4).astype(dt), (b // 4).astype(dt)
        lhs = a.copy()
        got = run(op, "fused", lhs, b, OUT2=True)
        exact = (np.add if op == "add_relu" else np.subtract)(f64(a), f64(b))
        bound = 0 if np.dtype(dt).kind == "i" else half_ulp(exact, dt)
        assert_close(got, np.maximum(exact, 0), bound, f"{op} {np.dtype(dt).name}")
        assert_close(lhs, exact, bound, f"{op}'s lhs")           # the page: lhs is overwritten by the sum


def test_addc_and_mul_add_dst_round_twice_fused_ones_once():
    """addc rounds a + b, then + c; mul_add_dst rounds the product, then the sum (two instructions): each rounding
    at most u relative. fused_mul_add / fused_mul_add_relu / axpy round the exact result once."""
    for dt in (F16, BF16, F32):
        u = FMT[np.dtype(dt)][0]
        a, b, c = data(dt), data(dt), data(dt)
        got = run("addc", "addc", a, b, c)
        ab = f64(a) + f64(b)
        assert_close(got, ab + f64(c), u * np.abs(ab) * (1 + u) + u * np.abs(ab + f64(c)) + 1e-300, "addc")
        o = data(dt)
        got = run("mul_add_dst", "fused", a, b, out=o.copy())
        p = f64(a) * f64(b)
        assert_close(got, p + f64(o), u * np.abs(p) * (1 + u) + u * np.abs(p + f64(o)) + 1e-300, "mul_add_dst")
        got = run("fused_mul_add", "fused", a, b, out=o.copy())
        exact = f64(a) * f64(o) + f64(b)
        assert_close(got, exact, half_ulp(exact, dt) + 2.0 ** -52 * np.abs(exact), "fused_mul_add")
        got = run("fused_mul_add_relu", "fused", a, b, out=o.copy())
        exact = np.maximum(f64(o) * f64(a) + f64(b), 0)
        assert_close(got, exact, half_ulp(exact, dt) + 2.0 ** -52 * np.abs(exact), "fused_mul_add_relu")
    a, o = data(F16), data(F32)
    got = run("axpy", "bins", a, out=o.copy(), SCALAR=0.1)            # fp16 src into fp32 out; alpha = half(0.1)
    exact = f64(np.float16(0.1)) * f64(a) + f64(o)
    assert_close(got, exact, half_ulp(exact, F32) + 2.0 ** -52 * np.abs(exact), "axpy")


@pytest.mark.parametrize("op", ["add_relu_cast", "sub_relu_cast", "mul_cast"])
def test_fused_casts(op):
    a, b = data(F32), data(F32)
    lhs = a.copy()
    got = run(op, "fcast", lhs, b, out=np.zeros((R, C), F16), MODE="CAST_RINT", OUT2=True)
    base = {"add_relu_cast": np.add, "sub_relu_cast": np.subtract, "mul_cast": np.multiply}[op](f64(a), f64(b))
    inter = base.astype(np.float32)                          # the fp32 intermediate, correctly rounded
    if op != "mul_cast":
        inter = np.maximum(inter, 0)
    assert np.array_equal(lhs, inter)                        # kept in lhs
    assert np.array_equal(got, inter.astype(F16))


def test_part_ops_with_equal_regions_are_the_ops():
    for op, fn in (("partadd", np.add), ("partmax", np.maximum), ("partmin", np.minimum), ("partmul", np.multiply)):
        for dt in (F16, F32, I32):
            a, b = data(dt), data(dt)
            if np.dtype(dt).kind == "i":
                got = run(op, "bin", a, b)
                assert np.array_equal(got, wrap(fn(a.astype(np.int64), b.astype(np.int64)), dt)), op
            else:
                exact = fn(f64(a), f64(b))
                assert_close(run(op, "bin", a, b), exact, half_ulp(exact, dt), op)


@pl.kernel
def part_tail(a, b, out, *, OP: str, R1: int, C1: int):
    """pl.<OP>(out, a, b) with b's valid shape [R1, C1] (partadd.md's tail case)."""
    ta, tb, to = (pl.alloc(pl.UB, list(a.shape), a.dtype) for _ in range(3))
    with pl.section_vector():
        if pl.get_block_idx() == 0:
            pl.load(ta, a)
            pl.set_validshape(tb, [R1, C1])
            pl.load(tb, b)
            getattr(pl, OP)(to, ta, tb)
            pl.store(out, to)


@pytest.mark.parametrize("op,fn", [("partadd", np.add), ("partmax", np.maximum)])
def test_part_ops_copy_the_full_source_outside_the_smaller_one(op, fn):
    a, b = data(F32), data(F32)
    out = np.zeros_like(a)
    pyto.run(part_tail, a, b[:5, :24], out, OP=op, R1=5, C1=24)
    want = f64(a).copy()
    want[:5, :24] = fn(f64(a)[:5, :24], f64(b)[:5, :24])
    assert_close(out, want, half_ulp(want, F32), op)


# ---- reductions and expands ----------------------------------------------------------------------------------------
def gamma(n: int, u: float) -> float:
    return n * u / (1 - n * u)


@pytest.mark.parametrize("dt", [F16, F32, I32], ids=["fp16", "fp32", "int32"])
@pytest.mark.parametrize("cols", [40, 300])
def test_row_and_column_sums(dt, cols):
    """dim=0 into a [rows, 1] DN tile: each 256-byte chunk summed, the chunk sums added in the dtype: k chunks give
    at most gamma_k(u) sum|a|. dim=1 into [1, cols]: rows added pairwise in the dtype: gamma_rows(u) sum|a|.
    int32: exact, wrapping."""
    a = data(dt, shape=(R, cols)) if dt is not I32 else (data(I32, shape=(R, cols)) // 8).astype(I32)
    tmp = np.zeros_like(a)
    rows = run("sum", "red", a, tmp, out=np.zeros((1, R), dt), DN=(False, False, False, True), DIM=0)[0]
    colsum = run("sum", "red", a, tmp, out=np.zeros((1, cols), dt), DIM=1)[0]
    if dt is I32:
        assert np.array_equal(rows, wrap(a.astype(np.int64).sum(1), I32))
        assert np.array_equal(colsum, wrap(a.astype(np.int64).sum(0), I32))
        return
    u = FMT[np.dtype(dt)][0]
    k = -(-cols * np.dtype(dt).itemsize // 256)
    assert_close(rows, f64(a).sum(1), gamma(k, u) * np.abs(f64(a)).sum(1) + 2.0 ** -50 * np.abs(f64(a)).sum(1),
                 "sum dim=0")
    assert_close(colsum, f64(a).sum(0), gamma(R, u) * np.abs(f64(a)).sum(0), "sum dim=1")


@pytest.mark.parametrize("op", ["maximum", "minimum", "argmax", "argmin"])
def test_max_min_arg_reductions_are_exact(op):
    for dt in (F16, F32, I32, I8):
        if op.startswith("arg") and dt in (I32, I8):
            continue                              # argmax dim=0 takes fp16 / fp32 only
        a = data(dt)
        out_dt = I32 if op.startswith("arg") else dt
        fn = {"maximum": np.max, "minimum": np.min, "argmax": np.argmax, "argmin": np.argmin}[op]
        row = run(op, "red", a, np.zeros_like(a), out=np.zeros((1, R), out_dt), DN=(False, False, False, True))[0]
        col = run(op, "red", a, np.zeros_like(a), out=np.zeros((1, C), out_dt), DIM=1)[0]
        assert np.array_equal(f64(row), f64(fn(f64(a), axis=1))), (op, dt)
        assert np.array_equal(f64(col), f64(fn(f64(a), axis=0))), (op, dt)


@pytest.mark.parametrize("op,fn", [("expand_max", np.maximum), ("expand_min", np.minimum), ("expand_mul", np.multiply),
                                   ("expand_sub", np.subtract), ("expand_div", np.divide)])
def test_expands_broadcast_a_dn_column_or_a_row(op, fn):
    for dt in (F16, BF16, F32):
        a = data(dt)
        col, row = nonzero(dt, (1, R)), nonzero(dt, (1, C))
        got0 = run(op, "expand", a, col, DN=(False, True, False, False), DIM=0)
        exact0 = fn(f64(a), f64(col).T)
        got1 = run(op, "expand", a, row, DIM=1)
        exact1 = fn(f64(a), f64(row))
        exact_op = op in ("expand_max", "expand_min")
        assert_close(got0, exact0, 0 if exact_op else half_ulp(exact0, dt), f"{op} dim=0")
        assert_close(got1, exact1, 0 if exact_op else half_ulp(exact1, dt), f"{op} dim=1")


def test_transpose():
    for dt in (F16, F32, I8, I32):
        a = data(dt, shape={1: (32, 32), 2: (16, 32), 4: (8, 16)}[np.dtype(dt).itemsize])
        got = run("transpose", "un", a, out=np.zeros(a.shape[::-1], dt))
        assert np.array_equal(got, a.T), dt


# ---- errors --------------------------------------------------------------------------------------------------------
@pl.kernel
def misuse(x, out, *, CASE: str):
    t = pl.alloc(pl.UB, [8, 64], pl.DT_FP32)
    t16 = pl.alloc(pl.UB, [8, 64], pl.DT_FP16)
    small = pl.alloc(pl.UB, [8, 32], pl.DT_FP32)
    col_nd = pl.alloc(pl.UB, [8, 1], pl.DT_FP32)
    col = pl.alloc(pl.UB, [8, 1], pl.DT_FP32, layout=pl.DN)
    i32 = pl.alloc(pl.UB, [8, 64], pl.DT_INT32)
    m = pl.alloc(pl.UB, [8, 64], pl.DT_FP32)
    with pl.section_vector():
        {"shape": lambda: pl.add(t, t, small), "dtype": lambda: pl.add(t, t, t16),
         "exp_int": lambda: pl.exp(i32, i32),
         "expand_nd": lambda: pl.expand_mul(t, t, col_nd), "dim": lambda: pl.sum(col, t, m, dim=2),
         "tmp": lambda: pl.sum(col, t, small), "cast_pair": lambda: pl.cast(t16, i32),
         "mask": lambda: pl.gt(t, t, t), "gather": lambda: pl.gather(t, t, i32, t),
         "vf": lambda: pl.Vf.add(t, t, t), "dn_elementwise": lambda: pl.add(col, col, col_nd)}[CASE]()


@pytest.mark.parametrize("case,err,text", [
    ("shape", pyto.ShapeError, r"pl\.add operands differ: UB tile 't' .*\[8, 64\] fp32 vs UB tile 'small' .*\[8, 32\]"),
    ("dtype", pyto.ShapeError, r"pl\.add operands differ: .*fp32 vs UB tile 't16' .*fp16"),
    ("exp_int", pyto.ShapeError, r"pl\.exp takes fp16, fp32 tiles \(.*math_functions/exp\.md\), not int32"),
    ("expand_nd", pyto.ShapeError, r"pl\.expand_mul\(dim=0\) scalar .*'col_nd'.* layout=pl\.DN"),
    ("dim", pyto.KernelError, r"pl\.sum dim must be 0 .* or 1 .*, got 2"),
    ("tmp", pyto.ShapeError, r"pl\.sum tmp must be a Vec tile of src's shape and dtype \[8, 64\] fp32"),
    ("cast_pair", pyto.ShapeError, r"pl\.cast from int32 to fp16 is not a conversion pyto builds"),
    ("mask", pyto.ShapeError, r"pl\.gt writes a bit-packed mask into a DT_UINT8 tile"),
    ("gather", pyto.UnsupportedError, r"pl\.gather \(gather by index\) is not built in pyto yet"),
    ("vf", pyto.UnsupportedError, r"pl\.Vf\.add \(a register-level vf op\) is not built in pyto yet"),
    ("dn_elementwise", pyto.ShapeError, r"pl\.add mixes layouts: UB tile 'col' \(DN view\) is DN, UB tile 'col_nd' is ND"),
])
def test_misuse_names_the_tiles_and_the_line(case, err, text):
    x = np.zeros((8, 64), np.float32)
    with pytest.raises(err, match=rf"test_pro_vector\.py:\d+ .*{text}"):
        pyto.run(misuse, x, x.copy(), CASE=case)


def test_ops_outside_the_pages_dtypes_are_refused():
    for op, call, dt, name in (("div", "bin", BF16, "bf16"), ("mul", "bin", I8, "int8"), ("exp", "un", BF16, "bf16"),
                               ("relu", "un", BF16, "bf16"), ("neg", "un", I8, "int8"), ("and_", "bin", F32, "fp32")):
        with pytest.raises(pyto.ShapeError, match=rf"test_pro_vector\.py:\d+ .*pl\.{op} takes .*\.md\), not {name}"):
            run(op, call, data(dt), data(dt))


def test_old_spellings_are_gone_and_pro_names_are_exported():
    for old in ("adds", "ln", "reciprocal", "duplicate", "expand_add", "copy"):      # (muls: a Pro block name)
        assert not hasattr(pl, old), old
    for name in ("and_", "xor", "shl", "shr", "select", "eq", "recip", "log", "expands", "partmul", "fill_index",
                 "transpose", "argmin", "expand_max", "gathermask", "mrgsort2", "set_vec_mask", "vector_function"):
        assert name in pl.__all__ and callable(getattr(pl, name)), name


def test_a_vector_function_is_refused_when_called():
    @pl.vector_function
    def helper(src, dst):
        pass

    @pl.kernel
    def uses_vf(x, out):
        t = pl.alloc(pl.UB, [8, 64], pl.DT_FP32)
        with pl.section_vector():
            helper(t, t)

    x = np.zeros((8, 64), np.float32)
    with pytest.raises(pyto.UnsupportedError, match=r"pl\.vector_function \(the register-level vf function 'helper'\)"):
        pyto.run(uses_vf, x, x.copy())


# ---- cost ------------------------------------------------------------------------------------------------------------
def test_v_cost_counts_each_pto_instruction_and_the_largest_operand():
    chip = pyto.load_chip("ascend950pr")
    one = chip.vector_head_cycles + R * C * 4 / chip.vector_bytes_per_cycle
    a = data(F32)
    for op, call, passes, kw in (("add", "bin", 1, {}), ("add_relu", "fused", 2, {}), ("gt", "bin", 1, {}),
                                 ("add_relu_cast", "fcast", 3, {})):
        out = np.zeros((R, C), U8 if op == "gt" else (F16 if op == "add_relu_cast" else F32))
        arrays = (a, a.copy(), a.copy(), out)
        rep = pyto.run(vop, *arrays, OP=op, CALL=call, **kw)
        assert rep.pipe_cycles["V"] == pytest.approx(passes * one), op


# ---- kernels other tests share, and the ported cases of the old op set ---------------------------------------------
@pl.kernel
def cast_kernel(x, out):
    """out = cast(x) to out's dtype by CAST_RINT on AIV 0 (AIV-only)."""
    x_ub = pl.alloc(pl.UB, list(x.shape), x.dtype)
    o_ub = pl.alloc(pl.UB, list(x.shape), out.dtype)
    with pl.section_vector():
        if pl.get_block_idx() == 0:
            pl.load(x_ub, x)
            pl.cast(o_ub, x_ub, mode=pl.RoundMode.CAST_RINT)
            pl.store(out, o_ub)


def test_a_float_scalar_is_rounded_once_to_the_tiles_dtype():
    """A scalar argument has the tile's type: pl.expands(fp16, 65519.999) is 65504 (not inf through fp32), and
    pl.mul(fp16, 0.1) multiplies by half(0.1); a bf16 scalar is rounded once (1 + 2^-8 + 2^-30 -> 1 + 2^-7)."""
    x = np.full((R, C), 3.0, F16)
    assert np.all(run("expands", "fill", x, SCALAR=65519.999) == F16(65504))
    assert np.all(run("mul", "bins", x, SCALAR=0.1) == (np.float32(3.0) * np.float32(F16(0.1))).astype(F16))
    assert np.all(f64(run("expands", "fill", np.zeros((R, C), BF16), SCALAR=1 + 2 ** -8 + 2 ** -30)) == 1 + 2 ** -7)


@pl.kernel
def row_sum_tmp(x, out, s_out, *, BUSY: bool):
    """Row sums of x with `u` as pl.sum's tmp while MTE3 may still be storing u (BUSY: no MTE3 -> V wait by hand):
    sum.md says dim=0 neither reads nor writes tmp, so that is no race and u keeps its content."""
    t = pl.make_tile(pl.TileType([16, 64], pl.DT_FP32, pl.MemorySpace.Vec), addr=0)
    u = pl.make_tile(pl.TileType([16, 64], pl.DT_FP32, pl.MemorySpace.Vec), addr=0x1000)
    s = pl.make_tile(pl.TileType([16, 1], pl.DT_FP32, pl.MemorySpace.Vec, layout=pl.DN), addr=0x2000)
    s_nd = pl.make_tile(pl.TileType([1, 16], pl.DT_FP32, pl.MemorySpace.Vec), addr=0x2000)
    with pl.section_vector():
        r = pl.get_block_idx() * 16
        pl.load(t, x, [r, 0])
        pl.system.bar_all()
        pl.mul(u, t, 3.0)
        pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.store(out, u, [r, 0])
        if not BUSY:
            pl.system.sync_src(set_pipe=pl.PipeType.MTE3, wait_pipe=pl.PipeType.V, event_id=0)
            pl.system.sync_dst(set_pipe=pl.PipeType.MTE3, wait_pipe=pl.PipeType.V, event_id=0)
        pl.sum(s, t, u, dim=0)
        pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=1)
        pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=1)
        pl.store(s_out, s_nd, [0, r])


@pytest.mark.parametrize("busy", [False, True])
def test_a_reduction_leaves_its_tmp_alone(busy):
    x = np.random.default_rng(5).random((32, 64)).astype(np.float32)
    out, sums = np.zeros_like(x), np.zeros((1, 32), np.float32)
    pyto.run(row_sum_tmp, x, out, sums, blocks=2, BUSY=busy)
    assert np.array_equal(out, 3 * x)
    assert_close(sums[0], f64(x).sum(1), gamma(1, 2.0 ** -24) * f64(x).sum(1) + 2.0 ** -50 * f64(x).sum(1))


@pl.kernel
def outer_product(col, row, out):
    """out = col * row on AIV 0: a ones tile times the row down the columns, then each row by its column element
    (col given as a [1, M] row, read as a [M, 1] DN column)."""
    M, N = out.shape
    c_nd = pl.make_tile(pl.TileType([1, M], pl.DT_FP32, pl.MemorySpace.Vec), addr=0)
    c_dn = pl.make_tile(pl.TileType([M, 1], pl.DT_FP32, pl.MemorySpace.Vec, layout=pl.DN), addr=0)
    r_ub = pl.make_tile(pl.TileType([1, N], pl.DT_FP32, pl.MemorySpace.Vec), addr=0x400)
    o_ub = pl.make_tile(pl.TileType([M, N], pl.DT_FP32, pl.MemorySpace.Vec), addr=0x800)
    with pl.section_vector():
        if pl.get_block_idx() == 0:
            pl.load(c_nd, col)
            pl.load(r_ub, row)
            pl.expands(o_ub, 1.0)
            pl.system.bar_all()
            pl.expand_mul(o_ub, o_ub, r_ub, dim=1)
            pl.expand_mul(o_ub, o_ub, c_dn, dim=0)
            pl.system.bar_all()
            pl.store(out, o_ub)


def test_expand_along_rows_and_columns_gives_an_outer_product():
    col, row = RNG.standard_normal((1, 24)).astype(np.float32), RNG.standard_normal((1, 40)).astype(np.float32)
    out = np.zeros((24, 40), np.float32)
    pyto.run(outer_product, col, row, out)
    assert np.array_equal(out, (col.T * row).astype(np.float32))        # one rounding: fp32's own product
