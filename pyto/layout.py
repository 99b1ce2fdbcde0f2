"""Fractal data formats of docs/fractal_formats.md, pure numpy: ND <-> Nz, Zz, Zn, Nn (and DN, the transposed ND), the
convolution format NHWC <-> NC1HWC0 (4.6), MX scales (5.1) and the 4:2 sparse index (5.2).

Naming ("大Y小x"): the capital letter orders the fractals among themselves, the small one the elements
inside a fractal; Z = row major, N = column major. Every conversion is the seed's
pad -> reshape -> transpose on the last two axes (leading batch axes pass through):

    Nz (..., M, N) -> (..., M1, M0, N1, N0) -> (..., N1, M1, M0, N0)
    Zz (..., M, K) -> (..., M1, M0, K1, K0) -> (..., M1, K1, M0, K0)
    Zn (..., K, N) -> (..., K1, K0, N1, N0) -> (..., K1, N1, N0, K0)
    Nn (..., K, N) -> (..., K1, K0, N1, N0) -> (..., N1, K1, N0, K0)

A ``fractal=(r, c)`` is always given as rows x cols of one fractal *of the ND matrix* (so for Zn/Nn it
is (K0, N0)). Defaults: Nz/Zz (16, 32B/itemsize); Zn/Nn (32B/itemsize, 16); L0C's Nz is L0C_FRACTAL.
Padding is with all-zero bits. Inverses take the original shape (trailing 2-D or full) and crop.
"""
from __future__ import annotations

import math
import re
from typing import Sequence

import ml_dtypes
import numpy as np

from .dtypes import as_dtype
from .errors import ShapeError, SparsityError

Fractal = tuple[int, int]

L0C_FRACTAL: Fractal = (16, 16)  # docs/fractal_formats.md §4.3: Nz in L0C is always 16x16 (fp32/int32 accumulators)
SCALE_A_FRACTAL: Fractal = (16, 2)  # docs/fractal_formats.md §5.1: scaleA [M, K/32], Zz, fractal M0 x K0 = 16 x 2
SCALE_B_FRACTAL: Fractal = (2, 16)  # docs/fractal_formats.md §5.1: scaleB [K/32, N], Nn, fractal K0 x N0 = 2 x 16
SPARSE_INDEX_FRACTAL: Fractal = (32, 16)  # docs/fractal_formats.md §5.2: like int8 B in Zn: K0 x N0 = 32 x 16
# MX scales are fp8_e8m0 in hardware. ml_dtypes >= 0.5 has float8_e8m0fnu; else raw uint8 bits.
# Layout functions only move bytes, so both uint8 and SCALE_DTYPE arrays are accepted and kept as given.
SCALE_DTYPE: np.dtype = np.dtype(getattr(ml_dtypes, "float8_e8m0fnu", np.uint8))

# format -> (order of the fractals, order inside a fractal): Z/z = row major, N/n = column major
_FORMATS = {"nz": ("N", "z"), "zz": ("Z", "z"), "zn": ("Z", "n"), "nn": ("N", "n")}


_FOUR_BIT = {"int4", "uint4", "fp4", "float4_e2m1fn"}   # ml_dtypes' 4-bit types take a byte each in numpy
_SUB_BYTE = re.compile(r"^u?(?:int|float)([26])(?:_|$)")   # int2, uint2, float6_e2m3fn, float6_e3m2fn


def _bit_width(dtype: object) -> int:
    """Bits per element of a pyto dtype name, a numpy / ml_dtypes dtype or an array."""
    if isinstance(dtype, np.ndarray):
        dtype = dtype.dtype
    if isinstance(dtype, str) and dtype.lower() in _FOUR_BIT:
        return 4
    try:
        return as_dtype(dtype).bits
    except ShapeError:
        pass
    try:
        d = np.dtype(dtype)
    except TypeError:
        raise ShapeError(f"cannot read a dtype from {dtype!r}") from None
    if d.name in _FOUR_BIT:
        return 4
    sub = _SUB_BYTE.match(d.name)        # ml_dtypes' 2- and 6-bit types: one element a numpy byte, as 4-bit ones
    return int(sub.group(1)) if sub else d.itemsize * 8


def fractal_shape(dtype: object) -> Fractal:
    """docs/fractal_formats.md §4.1: one fractal is 16 x K0 with K0 = 32 bytes of elements, by bit width: 32-bit 8, 16-bit 16,
    8-bit 32, 4-bit 64 (any type of that width: uint8 and fp8 like int8). Other widths have no fractal: the
    seed's 4.5 example builds its 'half' input as float64 (a Python list times a float16 array), so as
    written it needs a cast to float16 (or fractal=)."""
    bits = _bit_width(dtype)
    if bits not in (4, 8, 16, 32):
        raise ShapeError(f"docs/fractal_formats.md §4.1 sets the fractal by bit width (32/16/8/4-bit: 16 x 8/16/32/64); "
                         f"{dtype} is {bits}-bit: cast it (e.g. astype(np.float16)) or "
                         f"give fractal=(rows, cols)")
    return (16, 256 // bits)


def _default_fractal(fmt: str, dtype: object) -> Fractal:
    r, c = fractal_shape(dtype)
    return (c, r) if _FORMATS[fmt][1] == "n" else (r, c)  # Zn/Nn: (K0, N0) with N0 = 16


def _check_fractal(fractal: object) -> Fractal:
    try:
        r, c = fractal  # type: ignore[misc]
    except (TypeError, ValueError):
        raise ShapeError(f"fractal must be a pair (rows, cols) of ints, got {fractal!r}") from None
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (r, c)):
        raise ShapeError(f"fractal must be a pair (rows, cols) of ints, got {fractal!r}")
    r, c = int(r), int(c)
    if r <= 0 or c <= 0:
        raise ShapeError(f"fractal must be positive, got {fractal!r}")
    return r, c


def _as_matrix(x: object, what: str) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim < 2:
        raise ShapeError(f"{what} needs an array with at least 2 dims (..., rows, cols), got shape {x.shape}")
    return x


def _as_shape(shape: object) -> tuple[int, ...]:
    try:
        shape = tuple(int(s) for s in shape)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise ShapeError(f"shape must be a sequence of ints, got {shape!r}") from None
    if len(shape) < 2 or min(shape) < 0:
        raise ShapeError(f"shape must have at least 2 non-negative dims (..., rows, cols), got {shape}")
    return shape


def _perm(nbatch: int, fmt: str) -> tuple[int, ...]:
    """Transpose of (..., R1, r, C1, c) giving the format's (..., block, block, inner, inner) order."""
    b = nbatch
    block, inner = _FORMATS[fmt]
    blocks = (b, b + 2) if block == "Z" else (b + 2, b)
    inners = (b + 1, b + 3) if inner == "z" else (b + 3, b + 1)
    return tuple(range(b)) + blocks + inners


def _to_fractal(x: object, fmt: str, fractal: object = None) -> np.ndarray:
    """pad -> reshape (..., R1, r, C1, c) -> transpose to the format's order (docs/fractal_formats.md §4.5 formulas)."""
    x = _as_matrix(x, f"nd_to_{fmt}")
    r, c = _check_fractal(fractal) if fractal is not None else _default_fractal(fmt, x.dtype)
    *batch, R, C = x.shape
    R1, C1 = -(-R // r), -(-C // c)
    xp = np.zeros((*batch, R1 * r, C1 * c), dtype=x.dtype)  # pad with zero bits (safe for fp8_e8m0 too)
    xp[..., :R, :C] = x
    y = xp.reshape(*batch, R1, r, C1, c).transpose(_perm(len(batch), fmt))
    return np.ascontiguousarray(y)


def _from_fractal(y: object, fmt: str, shape: object) -> np.ndarray:
    """Inverse of _to_fractal: undo the transpose, merge the fractal axes, crop the padding to ``shape``."""
    y = np.asarray(y)
    if y.ndim < 4:
        raise ShapeError(f"{fmt}_to_nd needs an array of at least 4 dims (..., Y1, X1, y0, x0), got {y.shape}")
    shape = _as_shape(shape)
    b = y.ndim - 4
    perm = _perm(b, fmt)
    x = y.transpose(np.argsort(perm))  # (..., R1, r, C1, c)
    *batch, R1, r, C1, c = x.shape
    R, C = shape[-2:]
    if len(shape) > 2 and tuple(shape[:-2]) != tuple(batch):
        raise ShapeError(f"{fmt} array of shape {y.shape} has batch dims {tuple(batch)}, shape {shape} asks "
                         f"for {shape[:-2]}")
    if (-(-R // r), -(-C // c)) != (R1, C1):
        raise ShapeError(f"{fmt} array of shape {y.shape} holds {R1}x{C1} fractals of {r}x{c}, "
                         f"not the {-(-R // r)}x{-(-C // c)} a ({R}, {C}) matrix needs")
    return np.ascontiguousarray(x.reshape(*batch, R1 * r, C1 * c)[..., :R, :C])


def nd_to_nz(x: object, fractal: object = None) -> np.ndarray:
    """docs/fractal_formats.md §4.3/4.5: (..., M, N) -> pad -> (..., M1, M0, N1, N0) -> transpose -> (..., N1, M1, M0, N0)."""
    return _to_fractal(x, "nz", fractal)


def nz_to_nd(y: object, shape: Sequence[int]) -> np.ndarray:
    """Inverse of nd_to_nz: (..., N1, M1, M0, N0) -> (..., M, N), padding cropped to ``shape``."""
    return _from_fractal(y, "nz", shape)


def nd_to_zz(x: object, fractal: object = None) -> np.ndarray:
    """docs/fractal_formats.md §4.1: (..., M, K) -> pad -> (..., M1, M0, K1, K0) -> transpose -> (..., M1, K1, M0, K0)."""
    return _to_fractal(x, "zz", fractal)


def zz_to_nd(y: object, shape: Sequence[int]) -> np.ndarray:
    """Inverse of nd_to_zz: (..., M1, K1, M0, K0) -> (..., M, K)."""
    return _from_fractal(y, "zz", shape)


def nd_to_zn(x: object, fractal: object = None) -> np.ndarray:
    """docs/fractal_formats.md §4.2: (..., K, N) -> pad -> (..., K1, K0, N1, N0) -> transpose -> (..., K1, N1, N0, K0); N0 = 16."""
    return _to_fractal(x, "zn", fractal)


def zn_to_nd(y: object, shape: Sequence[int]) -> np.ndarray:
    """Inverse of nd_to_zn: (..., K1, N1, N0, K0) -> (..., K, N)."""
    return _from_fractal(y, "zn", shape)


def nd_to_nn(x: object, fractal: object = None) -> np.ndarray:
    """docs/fractal_formats.md §5.1: (..., K, N) -> pad -> (..., K1, K0, N1, N0) -> transpose -> (..., N1, K1, N0, K0)."""
    return _to_fractal(x, "nn", fractal)


def nn_to_nd(y: object, shape: Sequence[int]) -> np.ndarray:
    """Inverse of nd_to_nn: (..., N1, K1, N0, K0) -> (..., K, N)."""
    return _from_fractal(y, "nn", shape)


def nd_to_dn(x: object) -> np.ndarray:
    """docs/fractal_formats.md §4.4: DN is ND stored column major: the physical array is x with its last two axes swapped."""
    return np.ascontiguousarray(np.swapaxes(_as_matrix(x, "nd_to_dn"), -1, -2))


def _check_nd(x: np.ndarray, shape: object, what: str) -> np.ndarray:
    shape = _as_shape(shape)
    if (x.shape[-2:] if len(shape) == 2 else x.shape) != shape:
        raise ShapeError(f"{what}: the array (as ND {x.shape}) does not match shape {shape}")
    return x


def dn_to_nd(y: object, shape: Sequence[int] | None = None) -> np.ndarray:
    """Inverse of nd_to_dn: swap the last two axes back (checked against ``shape`` if given)."""
    x = np.ascontiguousarray(np.swapaxes(_as_matrix(y, "dn_to_nd"), -1, -2))
    return x if shape is None else _check_nd(x, shape, "dn_to_nd")


def nhwc_to_nc1hwc0(x: object) -> np.ndarray:
    """docs/fractal_formats.md §4.6: NHWC split along C into C1 = ceil(C / C0) parts of C0 = 32 bytes of elements (the last
    part zero-padded to C0), the parts laid out one after another: (N, H, W, C) -> (N, C1, H, W, C0)."""
    x = np.asarray(x)
    if x.ndim != 4:
        raise ShapeError(f"nhwc_to_nc1hwc0 needs an (N, H, W, C) array, got shape {x.shape}")
    c0 = fractal_shape(x.dtype)[1]
    N, H, W, C = x.shape
    C1 = -(-C // c0)
    xp = np.zeros((N, H, W, C1 * c0), dtype=x.dtype)
    xp[..., :C] = x
    return np.ascontiguousarray(xp.reshape(N, H, W, C1, c0).transpose(0, 3, 1, 2, 4))


def nc1hwc0_to_nhwc(y: object, shape: Sequence[int]) -> np.ndarray:
    """Inverse of nhwc_to_nc1hwc0: (N, C1, H, W, C0) -> (N, H, W, C) of ``shape``, padding cropped."""
    y = np.asarray(y)
    shape = _as_shape(shape)
    if y.ndim != 5 or len(shape) != 4:
        raise ShapeError(f"nc1hwc0_to_nhwc needs an (N, C1, H, W, C0) array and an (N, H, W, C) shape, got "
                         f"{y.shape} and {shape}")
    N, C1, H, W, c0 = y.shape
    if (N, H, W) != shape[:3] or C1 != -(-shape[3] // c0):
        raise ShapeError(f"NC1HWC0 array of shape {y.shape} does not hold an NHWC tensor of shape {shape}")
    return np.ascontiguousarray(y.transpose(0, 2, 3, 1, 4).reshape(N, H, W, C1 * c0)[..., :shape[3]])


def to_format(x: object, fmt: str, fractal: object = None) -> np.ndarray:
    """ND -> ``fmt`` in 'nd', 'dn', 'nz', 'zz', 'zn', 'nn' (case-insensitive), by the functions above;
    'nc1hwc0' takes an NHWC tensor."""
    fmt = str(fmt).lower()
    if fmt == "nd":
        return np.ascontiguousarray(_as_matrix(x, "to_format"))
    if fmt == "dn":
        return nd_to_dn(x)
    if fmt == "nc1hwc0":
        return nhwc_to_nc1hwc0(x)
    if fmt not in _FORMATS:
        raise ShapeError(f"unknown format {fmt!r}; pyto knows nd, dn, {', '.join(_FORMATS)}, nc1hwc0")
    return _to_fractal(x, fmt, fractal)


def from_format(y: object, fmt: str, shape: Sequence[int]) -> np.ndarray:
    """``fmt`` -> ND of ``shape``: the inverse of to_format."""
    fmt = str(fmt).lower()
    if fmt == "nd":
        return np.ascontiguousarray(_check_nd(_as_matrix(y, "from_format"), shape, "from_format"))
    if fmt == "dn":
        return dn_to_nd(y, shape)
    if fmt == "nc1hwc0":
        return nc1hwc0_to_nhwc(y, shape)
    if fmt not in _FORMATS:
        raise ShapeError(f"unknown format {fmt!r}; pyto knows nd, dn, {', '.join(_FORMATS)}, nc1hwc0")
    return _from_fractal(y, fmt, shape)


def padded_shape(shape: Sequence[int], dtype: object = None, *, fractal: object = None,
                 fmt: str = "nz") -> tuple[int, ...]:
    """(..., R, C) padded to whole fractals of format `fmt` (default fractal: Nz/Zz 16 x K0, Zn/Nn K0 x 16):
    M=40, K=56 half -> (48, 64)."""
    shape = _as_shape(shape)
    if fractal is None and dtype is None:
        raise ShapeError("padded_shape needs a dtype or a fractal")
    if str(fmt).lower() not in _FORMATS:
        raise ShapeError(f"unknown format {fmt!r}; fractal formats are {', '.join(_FORMATS)}")
    r, c = _check_fractal(fractal) if fractal is not None else _default_fractal(str(fmt).lower(), dtype)
    return (*shape[:-2], -(-shape[-2] // r) * r, -(-shape[-1] // c) * c)


def fractal_count(shape: Sequence[int], dtype: object = None, *, fractal: object = None, fmt: str = "nz") -> int:
    """Number of fractals in the whole tensor (batch dims included): M=40, K=56 half -> 3 x 4 = 12."""
    p = padded_shape(shape, dtype, fractal=fractal, fmt=fmt)
    r, c = _check_fractal(fractal) if fractal is not None else _default_fractal(str(fmt).lower(), dtype)
    return math.prod(p[:-2]) * (p[-2] // r) * (p[-1] // c)


# ---- MX quantisation scales (docs/fractal_formats.md §5.1) -------------------------------------------------------

def _as_scales(s: object, what: str) -> np.ndarray:
    s = _as_matrix(s, what)
    if s.dtype not in (np.dtype(np.uint8), SCALE_DTYPE):
        raise ShapeError(f"{what}: MX scales are fp8_e8m0: give uint8 bits or {SCALE_DTYPE}, got {s.dtype}")
    return s


def scale_a_to_zz(s: object) -> np.ndarray:
    """docs/fractal_formats.md §5.1: scaleA (..., M, K/32) -> Zz (..., M1, K1, 16, 2)."""
    return _to_fractal(_as_scales(s, "scale_a_to_zz"), "zz", SCALE_A_FRACTAL)


def zz_to_scale_a(y: object, shape: Sequence[int]) -> np.ndarray:
    """Inverse of scale_a_to_zz: (..., M1, K1, 16, 2) -> (..., M, K/32)."""
    return _from_fractal(_as_scales(y, "zz_to_scale_a"), "zz", shape)


def scale_b_to_nn(s: object) -> np.ndarray:
    """docs/fractal_formats.md §5.1: scaleB (..., K/32, N) -> Nn (..., N1, K1, 16, 2)."""
    return _to_fractal(_as_scales(s, "scale_b_to_nn"), "nn", SCALE_B_FRACTAL)


def nn_to_scale_b(y: object, shape: Sequence[int]) -> np.ndarray:
    """Inverse of scale_b_to_nn: (..., N1, K1, 16, 2) -> (..., K/32, N)."""
    return _from_fractal(_as_scales(y, "nn_to_scale_b"), "nn", shape)


# ---- 4:2 structured sparsity (docs/fractal_formats.md §5.2) ------------------------------------------------------
# An index is 2 bits (0..2), one per element of the dense (K/2, N) B. Unpacked, pyto holds one index per
# uint8. Packed (the hardware's 128-byte fractal), 4 indices that are consecutive along the last axis
# share a byte, the first in the lowest bits: byte = i0 | i1 << 2 | i2 << 4 | i3 << 6.

def pack_2bit(idx: object) -> np.ndarray:
    """Pack 2-bit values 4 per uint8 along the last axis (element j in bits 2j..2j+1); length % 4 == 0."""
    a = np.asarray(idx)
    if a.ndim < 1 or a.shape[-1] % 4 or (a.size and (a.min() < 0 or a.max() > 3)):
        raise ShapeError(f"pack_2bit needs values 0..3 and a last axis divisible by 4, got shape {a.shape}")
    q = a.astype(np.uint8).reshape(*a.shape[:-1], -1, 4)
    return (q[..., 0] | q[..., 1] << 2 | q[..., 2] << 4 | q[..., 3] << 6).astype(np.uint8)


def unpack_2bit(packed: object) -> np.ndarray:
    """Inverse of pack_2bit: (..., L) uint8 -> (..., 4 L) uint8 values 0..3."""
    p = np.asarray(packed, dtype=np.uint8)
    return ((p[..., None] >> np.array([0, 2, 4, 6], np.uint8)) & 3).reshape(*p.shape[:-1], -1)


def sparse_index_to_zn(idx: object, *, packed: bool = False) -> np.ndarray:
    """docs/fractal_formats.md §5.2: index (..., K/2, N) -> Zn (..., K1, N1, 16, 32) like int8 B; packed: (..., 16, 8) bytes."""
    i = _as_matrix(idx, "sparse_index_to_zn")
    if i.dtype.kind not in "iu" or (i.size and (i.min() < 0 or i.max() > 2)):
        raise ShapeError(f"sparse_index_to_zn needs integer indices in {{0, 1, 2}} (docs/fractal_formats.md §5.2), got "
                         f"{i.dtype} values {int(i.min()) if i.size else ''}..{int(i.max()) if i.size else ''}")
    y = _to_fractal(i.astype(np.uint8), "zn", SPARSE_INDEX_FRACTAL)
    return pack_2bit(y) if packed else y


def zn_to_sparse_index(y: object, shape: Sequence[int]) -> np.ndarray:
    """Inverse of sparse_index_to_zn; a last axis of 8 is read as packed, of 32 as one index per byte."""
    y = np.asarray(y)
    if y.ndim >= 4 and y.shape[-1] == 8:
        y = unpack_2bit(y)
    if y.ndim < 4 or y.shape[-2:] != (16, 32):
        raise ShapeError(f"a Zn sparse index ends in (16, 32), or (16, 8) packed; got shape {y.shape}")
    out = _from_fractal(y, "zn", shape)
    if out.size and out.max() > 2:
        raise ShapeError(f"sparse index values must be in {{0, 1, 2}} (docs/fractal_formats.md §5.2), found {int(out.max())}")
    return out


def densify_4_2(b: object) -> tuple[np.ndarray, np.ndarray]:
    """docs/fractal_formats.md §5.2: (..., K, N) with <= 2 nonzeros per 4 along K -> dense (..., K/2, N), index (..., K/2, N).

    Per group of 4: index 0 = place of the first nonzero among elements 0..2, index 1 = place of the
    second nonzero among elements 1..3. Where a slot has no nonzero it points at a zero: index 0 -> 0
    (only nonzero at 3, or none); index 1 -> the element after the first (only one nonzero, at 0..2).
    """
    b = _as_matrix(b, "densify_4_2")
    *batch, K, N = b.shape
    if K % 4:
        raise ShapeError(f"densify_4_2 needs K divisible by 4, got K={K}")
    g = b.reshape(*batch, K // 4, 4, N)
    nz = g != 0
    count = nz.sum(axis=-2)
    if (count > 2).any():
        pos = np.argwhere(count > 2)[0]
        raise SparsityError(f"4:2 sparsity broken: group of K rows {4 * pos[-2]}..{4 * pos[-2] + 3} (column "
                         f"{pos[-1]}{', batch ' + str(tuple(pos[:-2])) if batch else ''}) has {count[tuple(pos)]} nonzeros")
    first = nz.argmax(axis=-2)
    second = (nz & (np.cumsum(nz, axis=-2) == 2)).argmax(axis=-2)
    p = np.where((count >= 1) & (first <= 2), first, 0)
    q = np.where(count == 2, second, np.where((count == 1) & (first == 3), 3, p + 1))
    sel = np.stack([p, q], axis=-2)  # (..., K/4, 2, N)
    dense = np.take_along_axis(g, sel, axis=-2).reshape(*batch, K // 2, N)
    idx = np.stack([p, q - 1], axis=-2).astype(np.uint8).reshape(*batch, K // 2, N)
    return dense, idx


def expand_4_2(dense: object, idx: object) -> np.ndarray:
    """Inverse of densify_4_2: put dense (..., K/2, N) back at the places idx names -> (..., K, N)."""
    d, i = _as_matrix(dense, "expand_4_2"), np.asarray(idx)
    if d.shape != i.shape or d.shape[-2] % 2:
        raise ShapeError(f"expand_4_2 needs dense and index of one shape with K/2 even, got {d.shape}, {i.shape}")
    *batch, K2, N = d.shape
    check_sparse_index(i, "expand_4_2")
    pos = i.reshape(*batch, K2 // 2, 2, N).astype(np.intp) + np.array([0, 1]).reshape(2, 1)
    out = np.zeros((*batch, K2 // 2, 4, N), dtype=d.dtype)
    np.put_along_axis(out, pos, d.reshape(*batch, K2 // 2, 2, N), axis=-2)
    return out.reshape(*batch, 2 * K2, N)


def check_sparse_index(idx: object, what: str = "the 4:2 sparse index") -> None:
    """SparsityError unless every group's pair (i0, i1) of `idx` (..., K/2, N) is one of the six the cube selects
    by (MmadWithSparse.md's table 2: 0 <= i0 <= i1 <= 2, places i0 and 1 + i1 of the group's 4). The table's
    (1, 0) and (2, 0) rows pick one element twice ("X/X"), (2, 1) and the code 3 are not in it: pyto refuses them."""
    i = np.asarray(idx)
    if i.ndim < 2 or i.shape[-2] % 2:
        raise ShapeError(f"{what} is (..., K/2, N) with K/2 even (two indices per group of 4), got shape {i.shape}")
    pairs = i.reshape(*i.shape[:-2], i.shape[-2] // 2, 2, i.shape[-1]).astype(np.int64)
    bad = (pairs[..., 0, :] > pairs[..., 1, :]) | (pairs.max(axis=-2, initial=0) > 2) | (pairs.min(axis=-2, initial=0) < 0)
    if bad.any():
        at = np.argwhere(bad)[0]
        g, n = int(at[-2]), int(at[-1])
        i0, i1 = (int(v) for v in pairs[(*at[:-2], g, slice(None), n)])
        raise SparsityError(f"{what}: group {g} (dense rows {2 * g}, {2 * g + 1}; original K rows {4 * g}..{4 * g + 3}) "
                            f"of column {n}{', batch ' + str(tuple(int(v) for v in at[:-2])) if at.size > 2 else ''} "
                            f"has the index pair ({i0}, {i1}): the cube selects places i0 and 1 + i1 with "
                            f"0 <= i0 <= i1 <= 2 (seeds/004 §5.2, MmadWithSparse.md table 2); pyto.layout.densify_4_2 "
                            f"makes valid ones")


def pack_sparse_index(idx: object) -> np.ndarray:
    """docs/fractal_formats.md §5.2's uint8 of four 2-bit indices: index (..., K/2, N), values 0..2 -> (..., K/8, N) bytes,
    each holding 4 indices consecutive along K, the first in the lowest bits (LoadDataWithSparse.md's "逆序": the
    indices 1 2 0 1 are the byte 1 0 2 1 written high to low). The Zn fractals of these bytes, 8 x 16 (128 B), are
    sparse_index_to_zn(idx, packed=True): nd_to_zn(pack_sparse_index(idx), fractal=(8, 16))."""
    i = _as_matrix(idx, "pack_sparse_index")
    if i.shape[-2] % 4:
        raise ShapeError(f"pack_sparse_index needs K/2 divisible by 4 (4 indices a byte), got {i.shape[-2]}")
    return np.ascontiguousarray(np.swapaxes(pack_2bit(np.swapaxes(i, -1, -2)), -1, -2))


def unpack_sparse_index(packed: object) -> np.ndarray:
    """Inverse of pack_sparse_index: (..., K/8, N) uint8 -> (..., K/2, N) indices 0..3."""
    p = _as_matrix(packed, "unpack_sparse_index")
    return np.ascontiguousarray(np.swapaxes(unpack_2bit(np.swapaxes(p, -1, -2)), -1, -2))
