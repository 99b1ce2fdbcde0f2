"""Low-precision element formats of the Ascend 950's cube and vector units, in PyPTO-Pro's names, numpy-vectorised.

Six formats (FORMATS, by name): DT_FP8E4M3FN, DT_FP8E5M2, DT_FP8E8M0, DT_FP4E2M1, DT_FP4E1M2 and DT_HF8 (HiFloat8).
Each is a frozen Format with ``decode(codes) -> float64`` (a 256- or 16-entry table) and
``encode(x, rounding=None, saturate=None) -> storage array`` (exact float64 rounding, then a table look-up).
The storage dtype is ml_dtypes' type where ml_dtypes has the format (float8_e4m3fn, float8_e5m2, float8_e8m0fnu,
float4_e2m1fn: one element per byte), uint8 codes otherwise (E1M2, HF8). Plus pack_fp4/unpack_fp4 (two 4-bit
elements per byte, as MXFP4 data sits in GM) and the MX helpers mx_scales_e8m0, mx_quantize, mx_dequant.

Conversion semantics follow the hardware as PyPTO-Pro documents it (docs/zh/pypto_pro/api/SIMD-API/operation/
vf_computation/type_conversion/astype.md, "饱和和不饱和模式说明" and "浮点转浮点的特殊约束"):
  * non-saturating (SaturateMode.OFF, the default): NaN -> NaN, +-inf -> +-inf; E4M3FN has no inf, so inf and
    overflow give NaN; E5M2 and HF8 overflow to +-inf.
  * saturating (SaturateMode.ON): overflow and +-inf -> +-max, NaN -> 0 (the default CTRL[50] = 0).
  * FP4 E2M1 / E1M2 have no inf or NaN: always saturating, +-inf -> +-max, NaN -> +0.
  * E8M0: +-inf or |x| beyond the maximum -> 0xFE, NaN -> 0xFF (NaN).
Where ml_dtypes' astype differs (E2M1: NaN -> a zero of the opposite sign; E8M0: overflow and inf -> NaN), these
codecs follow the hardware; tests/test_lowp.py checks both the agreement and each difference. Rounding is exact
from float64 (en_dtypes, PTO-ISA's golden-data library, rounds float64 through float32 first; from float32 inputs
its HF8, E1M2 and E8M0-trunc conversions equal these).

Rounding names: "rne" = round to nearest, ties to even (IEEE roundTiesToEven, PyPTO-Pro VFRoundMode.CAST_RINT);
"ta" = round to nearest, ties away from zero (the HiF8 paper's TA, CAST_ROUND, PTO-ISA ROUND_A);
"trunc" = toward zero (E8M0 only: keeps the input's exponent field). Each format lists what it accepts in
``roundings``, its default first.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Union

import ml_dtypes
import numpy as np

from .errors import ShapeError, UnsupportedError


def _ml(name: str) -> np.dtype:
    """ml_dtypes' dtype called `name`, or uint8 codes where this ml_dtypes is too old to have it (< 0.5)."""
    return np.dtype(getattr(ml_dtypes, name, np.uint8))


def _round_ta(y: np.ndarray) -> np.ndarray:
    f = np.floor(y)
    return f + (y - f >= 0.5)          # y - floor(y) is exact in float64, so the tie test is too


# Rounding of y = |x| / quantum >= 0 to an integer; every step is exact in float64 (quantum is a power of two).
_ROUND: dict[str, Callable[[np.ndarray], np.ndarray]] = {"rne": np.rint, "ta": _round_ta, "trunc": np.floor}


@dataclass(frozen=True, eq=False)
class Format:
    """One element format: its table of values and the rules that round a float into it (see the module doc)."""

    name: str                  # PyPTO-Pro's name, e.g. "DT_FP8E4M3FN"
    bits: int                  # 8 or 4 (a 4-bit element still takes a byte on the host until pack_fp4)
    storage: np.dtype          # host dtype of encode's result and what decode takes besides integer codes
    table: np.ndarray          # float64 value of every code, 2**bits entries (read-only)
    max: float                 # largest finite value
    min_normal: float          # smallest positive normal value
    min_subnormal: float       # smallest positive value (== min_normal for E8M0, which has no subnormals)
    emax: int                  # exponent of the largest binade (the OCP MX spec's emax_elem)
    has_inf: bool
    has_nan: bool
    roundings: tuple[str, ...]            # accepted rounding names, the default first
    saturations: tuple[bool, ...]         # accepted saturate values, the default first
    signed: bool                          # a sign bit (all but E8M0)
    single_zero: bool                     # no -0 (HF8)
    nan_mag: Optional[int]                # NaN code without the sign bit (None: no NaN)
    inf_mag: Optional[int]                # +inf code (None: no inf)
    quantum_exp: Callable[[np.ndarray], np.ndarray]  # floor(log2|x|) -> exponent of the rounding quantum there
    doc: str = ""

    def __repr__(self) -> str:
        return f"lowp.{self.name[3:]}"

    # ---- decode -----------------------------------------------------------------------------------------------
    def codes(self, a: object) -> np.ndarray:
        """uint8 codes of `a`: an array of this format's storage dtype, or integer codes 0 .. 2**bits - 1."""
        arr = np.asarray(a)
        if arr.dtype == self.storage and self._typed:
            return arr.view(np.uint8)
        if arr.dtype.kind not in "iu":
            raise ShapeError(f"{self.name}: decode takes integer codes or a {self.storage} array, got {arr.dtype}"
                             f" (encode turns floats into {self.name})")
        if arr.size and (arr.min() < 0 or arr.max() >= 1 << self.bits):
            bad = arr[(arr < 0) | (arr >= 1 << self.bits)].flat[0]
            raise ShapeError(f"{self.name}: code {bad} is not a {self.bits}-bit code (0..{(1 << self.bits) - 1})")
        return arr.astype(np.uint8)

    def decode(self, a: object) -> np.ndarray:
        """float64 values of codes (or of a storage array), same shape."""
        return self.table[self.codes(a)]

    # ---- encode -----------------------------------------------------------------------------------------------
    def encode(self, x: object, rounding: Optional[str] = None, saturate: Optional[bool] = None) -> np.ndarray:
        """Round floats to this format: an array of `storage` dtype, same shape.

        rounding: one of `roundings` (None: the first); saturate: one of `saturations` (None: the first)."""
        rounding = self.roundings[0] if rounding is None else rounding
        if rounding not in self.roundings:
            extra = " (HR, hybrid rounding, CAST_HYBRID, is not implemented)" if rounding == "hr" else ""
            raise UnsupportedError(f"{self.name}: rounding={rounding!r} is not supported{extra}; "
                                   f"it takes {', '.join(map(repr, self.roundings))}")
        saturate = self.saturations[0] if saturate is None else bool(saturate)
        if saturate not in self.saturations:
            raise UnsupportedError(f"{self.name} always saturates (no inf to overflow to): saturate=False is refused")
        x = _as_float64(x, self.name)
        a, neg, nan, inf = np.abs(x), np.signbit(x), np.isnan(x), np.isinf(x)
        fin = np.where(nan | inf, 0.0, a)
        e = np.frexp(fin)[1] - 1                                   # floor(log2 a) for a > 0, exact
        q = np.ldexp(1.0, self.quantum_exp(e))
        r = _ROUND[rounding](fin / q) * q
        big = inf | (r > self.max)
        r = np.clip(r, self._lowest, self.max)                    # E8M0 has no zero: below 2^-127 is 2^-127
        idx = np.minimum(np.searchsorted(self._pos_values, r), self._pos_values.size - 1)
        if not np.array_equal(self._pos_values[idx], r):
            raise AssertionError(f"{self.name}: rounding produced a value outside the table")  # a bug, not input
        code = self._pos_codes[idx]
        sign = np.where(neg, np.uint8(0x80 if self.bits == 8 else 0x08), np.uint8(0))
        if not self.signed:                                        # E8M0: negatives and zeros are NaN
            code = np.where((neg | (a == 0)) & ~inf, np.uint8(self.nan_mag), code)
            sign = np.zeros_like(sign)
        elif self.single_zero:                                     # HF8: -0 and tiny negatives are 0x00
            sign = np.where((r == 0) & ~inf, np.uint8(0), sign)
        code = code | sign
        if saturate:
            over = self._max_code | sign
        elif self.has_inf:
            over = np.uint8(self.inf_mag) | sign
        else:                                                      # E4M3FN: no inf
            over = np.uint8(self.nan_mag) | sign
        code = np.where(big, over, code)
        code = np.where(nan, self._nan_code(sign, saturate), code)
        out = code.astype(np.uint8)
        return out.view(self.storage) if self._typed else out

    def _nan_code(self, sign: np.ndarray, saturate: bool) -> np.ndarray:
        if not self.signed:
            return np.full_like(sign, self.nan_mag)                # E8M0: NaN -> 0xFF (astype.md), no option
        if saturate or self.nan_mag is None:
            return np.zeros_like(sign)                             # saturating mode and FP4: NaN -> +0
        if self.single_zero:
            return np.full_like(sign, self.nan_mag)                # HF8: the one NaN, 0x80
        return np.uint8(self.nan_mag) | sign                       # FP8: the sign is kept, as ml_dtypes does

    # ---- derived tables (set in __post_init__) ----------------------------------------------------------------
    def __post_init__(self) -> None:
        self.table.setflags(write=False)
        n = self.table.size
        codes = np.arange(n, dtype=np.uint8)
        pos = np.isfinite(self.table) & ~np.signbit(self.table)
        order = np.argsort(self.table[pos], kind="stable")
        pos_codes, pos_values = codes[pos][order], self.table[pos][order]
        if np.unique(pos_values).size != pos_values.size:
            raise AssertionError(f"{self.name}: two non-negative codes share a value")
        object.__setattr__(self, "_pos_codes", pos_codes)
        object.__setattr__(self, "_pos_values", pos_values)
        object.__setattr__(self, "_max_code", pos_codes[-1])
        object.__setattr__(self, "_lowest", pos_values[0])
        object.__setattr__(self, "_typed", self.storage != np.dtype(np.uint8))   # an ml_dtypes storage type


def _as_float64(x: object, who: str) -> np.ndarray:
    """x as float64 (exact from every float and ml_dtypes type, and integers to 2^53); else ShapeError."""
    arr = np.asarray(x)
    if arr.dtype.kind in "fiuV":
        try:
            return arr.astype(np.float64)
        except (TypeError, ValueError):
            pass
    raise ShapeError(f"{who}: takes real numbers, got an array of {arr.dtype}")


# ---- value tables -----------------------------------------------------------------------------------------------

def _minifloat_table(ebits: int, mbits: int, bias: int, specials: str) -> np.ndarray:
    """1 sign, ebits exponent, mbits mantissa bits, IEEE-754 style (exponent field 0: subnormals).
    specials: "ieee" (top exponent: inf / NaN), "fn" (only S.1..1.1..1 is NaN), "none" (all finite)."""
    c = np.arange(1 << (1 + ebits + mbits))
    s, e, m = c >> (ebits + mbits), (c >> mbits) & ((1 << ebits) - 1), c & ((1 << mbits) - 1)
    mag = np.where(e == 0, np.ldexp(m.astype(np.float64), 1 - bias - mbits),
                   np.ldexp((m + (1 << mbits)).astype(np.float64), e - bias - mbits))
    top = e == (1 << ebits) - 1
    if specials == "ieee":
        mag = np.where(top, np.where(m == 0, np.inf, np.nan), mag)
    elif specials == "fn":
        mag = np.where(top & (m == (1 << mbits) - 1), np.nan, mag)
    return np.where(s == 1, -mag, mag)


def _e8m0_table() -> np.ndarray:
    """Unsigned, 8 exponent bits, bias 127, no mantissa: code c is 2^(c - 127); 0xFF is NaN; no zero, no inf."""
    t = np.ldexp(1.0, np.arange(256) - 127)
    t[255] = np.nan
    return t


# HiFloat8: sign | dot (prefix code) | exponent (Dot bits, sign-magnitude, implicit top magnitude bit) | mantissa.
_HIF8_WIDTH = np.array([3] * 4 + [2] * 4 + [1] * 8 + [0] * 7)     # mantissa bits at |E| = 0..22


def _hif8_table() -> np.ndarray:
    """All 256 codes from their fields (the HF8 doc below); the dot prefix is read from bits 6..3."""
    c = np.arange(256)
    d4 = (c >> 3) & 0xF
    dot = np.select([d4 >= 12, d4 >= 8, d4 >= 4, d4 >= 2, d4 == 1], [4, 3, 2, 1, 0], -1)   # -1: denormal
    plen = np.where(d4 >= 4, 2, np.where(d4 >= 2, 3, 4))                                     # prefix length
    w = 7 - plen - np.maximum(dot, 0)                                                        # mantissa bits
    em = (c >> w) & ((1 << np.maximum(dot, 0)) - 1)                                          # exponent field
    top = np.where(dot > 0, 1 << (np.maximum(dot, 1) - 1), 0)           # its top bit: the exponent's sign
    mag = np.where(dot > 0, top | (em & (top - 1)), 0)                  # that bit read as the implicit 1
    exp = np.where((dot > 0) & (em & top != 0), -mag, mag)
    v = np.ldexp(1.0 + (c & ((1 << w) - 1)) / np.exp2(w), exp)
    mv = c & 7                                                          # denormal: 2^(Mv - 23), Mv = 0 zero
    v = np.where(dot < 0, np.where(mv > 0, np.ldexp(1.0, mv - 23), 0.0), v)
    t = np.where(c >> 7 == 1, -v, v)
    t[0x80], t[0x6F], t[0xEF] = np.nan, np.inf, -np.inf
    return t


def _ieee_quantum(emin: int, mbits: int) -> Callable[[np.ndarray], np.ndarray]:
    return lambda e: np.maximum(e, emin) - mbits


def _hif8_quantum(e: np.ndarray) -> np.ndarray:
    ec = np.clip(e, -22, 15)          # below 2^-22 the step to 0 is 2^-22; above 2^15 everything overflows
    return ec - _HIF8_WIDTH[np.abs(ec)]


def _fmt(name, bits, storage, table, emax, min_normal, **kw) -> Format:
    fin = table[np.isfinite(table)]
    return Format(name=name, bits=bits, storage=storage, table=table, max=float(fin.max()),
                  min_normal=min_normal, min_subnormal=float(fin[fin > 0].min()), emax=emax,
                  has_inf=bool(np.isinf(table).any()), has_nan=bool(np.isnan(table).any()), **kw)


FP8E4M3FN = _fmt(
    "DT_FP8E4M3FN", 8, _ml("float8_e4m3fn"), _minifloat_table(4, 3, 7, "fn"), 8, 2.0 ** -6,
    roundings=("rne",), saturations=(False, True), signed=True, single_zero=False, nan_mag=0x7F, inf_mag=None,
    quantum_exp=_ieee_quantum(-6, 3),
    doc="OCP OFP8 E4M3 (FN: finite + NaN): bias 7; max 448 (S.1111.110), min normal 2^-6, min subnormal 2^-9; "
        "NaN S.1111.111 (0x7F/0xFF), no inf; +-0. PyPTO-Pro: FP32 -> FP8E4M3FN only CAST_RINT.")
FP8E5M2 = _fmt(
    "DT_FP8E5M2", 8, _ml("float8_e5m2"), _minifloat_table(5, 2, 15, "ieee"), 15, 2.0 ** -14,
    roundings=("rne",), saturations=(False, True), signed=True, single_zero=False, nan_mag=0x7E, inf_mag=0x7C,
    quantum_exp=_ieee_quantum(-14, 2),
    doc="OCP OFP8 E5M2 (IEEE-754 style): bias 15; max 57344, min normal 2^-14, min subnormal 2^-16; "
        "inf S.11111.00 (0x7C/0xFC), NaN S.11111.{01,10,11} (encode gives 0x7E, as ml_dtypes); +-0.")
FP8E8M0 = _fmt(
    "DT_FP8E8M0", 8, _ml("float8_e8m0fnu"), _e8m0_table(), 127, 2.0 ** -127,
    roundings=("rne", "trunc"), saturations=(True,), signed=False, single_zero=True, nan_mag=0xFF, inf_mag=None,
    quantum_exp=lambda e: np.clip(e, -127, 127),
    doc="OCP MX E8M0 scale: unsigned, bias 127, code c = 2^(c-127) (PyPTO-Pro DataType.md: 2^(e-127)); "
        "0x00 = 2^-127 (no zero), 0xFE = 2^127, 0xFF NaN, no inf. rne: nearest power of two, a tie 1.5*2^e going "
        "up (as ml_dtypes); trunc: 2^floor(log2 x) (the exponent field, as en_dtypes). Zero and negatives -> NaN.")
FP4E2M1 = _fmt(
    "DT_FP4E2M1", 4, _ml("float4_e2m1fn"), _minifloat_table(2, 1, 1, "none"), 2, 1.0,
    roundings=("rne", "ta"), saturations=(True,), signed=True, single_zero=False, nan_mag=None, inf_mag=None,
    quantum_exp=_ieee_quantum(0, 1),
    doc="OCP MX FP4 E2M1: bias 1; values 0, 0.5, 1, 1.5, 2, 3, 4, 6 (codes 0..7, sign bit 3); max 6, "
        "min normal 1, min subnormal 0.5; no inf/NaN. PyPTO-Pro: BF16 -> FP4 takes CAST_RINT and CAST_ROUND.")
FP4E1M2 = _fmt(
    "DT_FP4E1M2", 4, np.dtype(np.uint8), _minifloat_table(1, 2, 1, "none"), 0, 1.0,
    roundings=("rne", "ta"), saturations=(True,), signed=True, single_zero=False, nan_mag=None, inf_mag=None,
    quantum_exp=_ieee_quantum(0, 2),
    doc="FP4 E1M2 (Ascend; not in the OCP MX spec): bit 3 sign, bit 2 exponent, bits 1..0 mantissa, bias 1 "
        "(hicann/opbase include/nnopbase/opdev/float4_e1m2.h). Codes 0..7: 0, 0.25, 0.5, 0.75 (subnormal, m/4), "
        "1, 1.25, 1.5, 1.75 (1 + m/4); max 1.75, min normal 1, min subnormal 0.25; no inf/NaN; +-0.")
HF8 = _fmt(
    "DT_HF8", 8, np.dtype(np.uint8), _hif8_table(), 15, 2.0 ** -15,
    roundings=("ta",), saturations=(False, True), signed=True, single_zero=True, nan_mag=0x80, inf_mag=0x6F,
    quantum_exp=_hif8_quantum,
    doc="HiFloat8 (Luo et al., 'Ascend HiFloat8 Format for Deep Learning', arXiv 2409.16626). Bits: sign | dot "
        "| exponent | mantissa. Dot prefix (bits 6..): 11 -> 4, 10 -> 3, 01 -> 2, 001 -> 1, 0001 -> 0, 0000 -> "
        "denormal. Dot = D >= 1: D exponent bits, sign-magnitude (top bit the sign), the magnitude's top bit "
        "implicit 1, so D=1: E=+-1, D=2: +-[2,3], D=3: +-[4,7], D=4: +-[8,15]; D=0: E=0. Mantissa 3 bits "
        "(|E|<=3), 2 (4..7), 1 (8..15); value (-1)^S 2^E (1 + M/2^w). Denormal: 3 bits Mv, value 2^(Mv-23) "
        "(2^-22..2^-16), Mv=0 is zero. 31 + 7 = 38 binades. Specials (hicann/opbase opdev/hifloat8.h): 0x00 "
        "the only zero, 0x80 the only NaN, 0x6F/0xEF +-inf (E=15, M=1), so max 0x6E = 2^15 = 32768, min "
        "positive 0x01 = 2^-22, min normal 2^-15. Rounding TA (ties away from zero: PTO-ISA TCvt.hpp uses "
        "ROUND_A for FP32/FP16 -> HF8; opbase's BitsFromFp32 'TA rounding'); overflow -> +-inf from 40960 "
        "(the midpoint of 2^15 and 1.5*2^15) unless saturating; below 2^-23 -> 0.")

FORMATS: dict[str, Format] = {f.name: f for f in (FP8E4M3FN, FP8E5M2, FP8E8M0, FP4E2M1, FP4E1M2, HF8)}
#: The MX element formats of PyPTO-Pro's matmul_mx: MXFP8 (E4M3, E5M2) and MXFP4 (E2M1, E1M2).
MX_ELEMENTS = (FP8E4M3FN, FP8E5M2, FP4E2M1, FP4E1M2)
MX_GROUP = 32   # one E8M0 scale per 32 consecutive elements along K (matmul_mx.md, the OCP MX block size)


def as_format(f: Union[Format, str, np.dtype, type]) -> Format:
    """A Format from itself, its name ('DT_HF8', 'hf8', 'fp8e4m3fn'), or an ml_dtypes storage dtype."""
    if isinstance(f, Format):
        return f
    if isinstance(f, str):
        key = f.upper() if f.upper().startswith("DT_") else "DT_" + f.upper()
        if key in FORMATS:
            return FORMATS[key]
        raise ShapeError(f"unknown low-precision format {f!r}; pyto.lowp knows {', '.join(FORMATS)}")
    try:
        dt = np.dtype(f)
    except TypeError:
        raise ShapeError(f"cannot read a low-precision format from {f!r}") from None
    hits = [g for g in FORMATS.values() if g.storage == dt and g._typed]
    if not hits:
        raise ShapeError(f"{dt} is not the storage dtype of one format (uint8 codes need the format named)")
    return hits[0]


# ---- 4-bit packing ------------------------------------------------------------------------------------------------
# PyPTO-Pro matmul_mx.md: "MXFP4尾数在GM中以两个4 bit元素打包为一个字节" (two 4-bit elements per byte in GM, the ND
# tensor's last axis halved); the nibble order is not stated there. PTO-ISA's golden scripts
# (tests/npu/a5/src/st/testcase/tmatmul_mx/gen_data.py pack_two_fp4) put element 2i in the low nibble and 2i+1 in
# the high nibble, along the row-major last axis; pyto does the same (and so does pyto.layout.pack_2bit).

def pack_fp4(codes: object) -> np.ndarray:
    """(..., L) 4-bit codes (integers 0..15 or a float4_e2m1fn array) -> (..., L/2) uint8, byte = c[2i] | c[2i+1] << 4."""
    arr = np.asarray(codes)
    if arr.dtype == FP4E2M1.storage and FP4E2M1._typed:
        c = arr.view(np.uint8)
    elif arr.dtype.kind in "iu" and (arr.size == 0 or (arr.min() >= 0 and arr.max() <= 15)):
        c = arr.astype(np.uint8)
    else:
        raise ShapeError(f"pack_fp4 takes 4-bit codes (integers 0..15) or a {FP4E2M1.storage} array, got "
                         f"{arr.dtype}" + (f" values {arr.min()}..{arr.max()}" if arr.dtype.kind in "iu" else ""))
    if c.ndim < 1 or c.shape[-1] % 2:
        raise ShapeError(f"pack_fp4 needs a last axis of even length (two elements a byte), got shape {c.shape}")
    return (c[..., 0::2] | (c[..., 1::2] << 4)).astype(np.uint8)


def unpack_fp4(packed: object, fmt: Union[Format, str, None] = None) -> np.ndarray:
    """Inverse of pack_fp4: (..., L) uint8 -> (..., 2L) codes, as `fmt`'s storage dtype if given (else uint8)."""
    p = np.asarray(packed)
    if p.dtype != np.uint8:
        raise ShapeError(f"unpack_fp4 takes packed uint8 bytes, got {p.dtype}")
    out = np.stack([p & 0x0F, p >> 4], axis=-1).reshape(*p.shape[:-1], -1)
    if fmt is None:
        return out
    f = as_format(fmt)
    if f.bits != 4:
        raise ShapeError(f"unpack_fp4: {f.name} is not a 4-bit format")
    return out.view(f.storage) if f._typed else out


# ---- MX (microscaling) ----------------------------------------------------------------------------------------
# OCP Microscaling Formats (MX) v1.0 §6.3, as its reference code computes it (microsoft/microxcaling mx/mx_ops.py
# _shared_exponents / _quantize_mx): shared_exp = floor(log2(max |x| of the group)) - emax_elem, an all-zero group
# taking max = 2^-126 (FP32_MIN_NORMAL); above 127 the scale is NaN, below -127 it is -127. Elements are
# x / 2^shared_exp rounded to the element format with saturation (normals beyond max clamp to max).

def _groups(x: np.ndarray, axis: int, group: int, who: str) -> np.ndarray:
    if not -x.ndim <= axis < x.ndim:
        raise ShapeError(f"{who}: axis {axis} is out of range for shape {x.shape}")
    k = x.shape[axis]
    if k % group:
        raise ShapeError(f"{who}: the K axis ({axis}) has length {k}, not a multiple of the MX group {group}")
    xm = np.moveaxis(x, axis, -1)
    return xm.reshape(*xm.shape[:-1], k // group, group)


def _mx_element(fmt: Union[Format, str], who: str) -> Format:
    f = as_format(fmt)
    if f not in MX_ELEMENTS:
        raise UnsupportedError(f"{who}: {f.name} is not an MX element format (matmul_mx takes "
                               f"{', '.join(g.name for g in MX_ELEMENTS)})")
    return f


def mx_scales_e8m0(x: object, axis: int, fmt: Union[Format, str], group: int = MX_GROUP) -> np.ndarray:
    """The E8M0 scale of every `group` elements of x along `axis` for element format `fmt` (E8M0 storage array,
    x's shape with that axis divided by `group`)."""
    f = _mx_element(fmt, "mx_scales_e8m0")
    g = _groups(_as_float64(x, "mx_scales_e8m0"), axis, group, "mx_scales_e8m0")
    amax = np.max(np.abs(g), axis=-1)                             # NaN propagates
    bad = ~np.isfinite(amax)
    amax = np.where(amax == 0, 2.0 ** -126, np.where(bad, 1.0, amax))
    shared = np.frexp(amax)[1] - 1 - f.emax                       # floor(log2 amax) - emax, exact
    code = np.where(bad | (shared > 127), 255, np.maximum(shared, -127) + 127).astype(np.uint8)
    code = np.moveaxis(code, -1, axis)
    return code.view(FP8E8M0.storage) if FP8E8M0._typed else code


def _expand(scales: np.ndarray, axis: int, shape: tuple, group: int, who: str) -> np.ndarray:
    want = list(shape)
    want[axis] = shape[axis] // group
    if scales.shape != tuple(want) or shape[axis] % group:
        raise ShapeError(f"{who}: data of shape {tuple(shape)} along axis {axis} needs scales of shape "
                         f"{tuple(want)} (one per {group}), got {scales.shape}")
    return np.repeat(scales, group, axis=axis)


def mx_quantize(x: object, axis: int, fmt: Union[Format, str], group: int = MX_GROUP,
                rounding: Optional[str] = None) -> tuple[np.ndarray, np.ndarray]:
    """x -> (elements in `fmt`'s storage dtype, E8M0 scales) per the OCP MX spec (saturating elements)."""
    f = _mx_element(fmt, "mx_quantize")
    xf = _as_float64(x, "mx_quantize")
    scales = mx_scales_e8m0(xf, axis, f, group)
    s = _expand(FP8E8M0.decode(scales), axis, xf.shape, group, "mx_quantize")
    return f.encode(xf / s, rounding=rounding, saturate=True), scales


def mx_dequant(elems: object, scales: object, axis: int, fmt: Union[Format, str, None] = None,
               group: int = MX_GROUP) -> np.ndarray:
    """float64 elems x 2^(scale - 127), each scale repeated over its `group` elements along `axis`.

    elems: a storage array (its format read from the dtype, or `fmt` for uint8 codes) or float values already
    decoded; scales: an E8M0 storage array or uint8 codes."""
    e = np.asarray(elems)
    typed = [f for f in MX_ELEMENTS if f._typed and f.storage == e.dtype]
    if fmt is not None:
        vals = _mx_element(fmt, "mx_dequant").decode(e)
    elif typed:
        vals = typed[0].decode(e)
    elif e.dtype.kind == "f":
        vals = e.astype(np.float64)
    else:
        raise ShapeError(f"mx_dequant: {e.dtype} codes do not say their format; pass fmt=")
    s = FP8E8M0.decode(scales)
    ax = axis % vals.ndim if vals.ndim else axis
    return vals * _expand(s, ax, vals.shape, group, "mx_dequant")
