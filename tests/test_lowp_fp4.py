"""4-bit tiles and MXFP4 matmuls (issue 21, the FP4 part): pl.DT_FP4E2M1 / pl.DT_FP4E1M2 tiles at half a byte an
element (fractals 16 x 64), FP4 GM tensors as packed uint8 pairs (PyPTO-Pro's test_matmul_mx.py: element 2i in the low
nibble), and pl.matmul_mx / matmul_mx_acc on them with E8M0 scales, against a float64 reference that decodes the codes
with a decoder written here from the bit fields (and, for E2M1, ml_dtypes' float4_e2m1fn) and applies the scales;
every new rule's refusal; a hypothesis test over shapes; the M-pipe time of MXFP4 and MXFP8 against FP16 as the chip
table's rates predict.

Inputs: uniformly random 4-bit codes (all 16, as the device test draws them) and E8M0 scales in 118..136, so every
scaled element (at most 6 x 2^9) and every product is normal in fp32, hence exact: only the fp32 accumulation rounds
(matmul_bound on the dequantised float64 operands)."""
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyto
import pyto.language as pl
from mx_helpers import mx_k_loop, whole_mx_kernel
from pyto.testing import matmul_bound

RNG = np.random.default_rng(4242)
F2, F1 = pl.DT_FP4E2M1, pl.DT_FP4E1M2
E4, E5, E8 = pl.DT_FP8E4M3FN, pl.DT_FP8E5M2, pl.DT_FP8E8M0
MS = pl.MemorySpace
PAGE = r"matrix_computation/matmul_mx\.md"
PAIRS = [(F2, F2), (F2, F1), (F1, F2), (F1, F1)]
IDS = ["e2m1xe2m1", "e2m1xe1m2", "e1m2xe2m1", "e1m2xe1m2"]


def tt(shape, dtype, mem, **kw):
    return pl.TileType(shape=shape, dtype=dtype, target_memory=mem, **kw)


# ---- an independent decoder and packer ---------------------------------------------------------------------------
def decode_fp4(codes, dtype):
    """float64 values of 4-bit codes from their fields: sign bit 3; E2M1 exponent bits 2..1, mantissa bit 0, bias 1;
    E1M2 exponent bit 2, mantissa bits 1..0, bias 1; exponent 0 is subnormal (m / 2^mbits x 2^(1 - bias))."""
    c = np.asarray(codes).astype(np.int64)
    ebits, mbits = (2, 1) if dtype is F2 else (1, 2)
    e, m = (c >> mbits) & ((1 << ebits) - 1), c & ((1 << mbits) - 1)
    mag = np.where(e == 0, m / 2.0 ** mbits, (1 + m / 2.0 ** mbits) * 2.0 ** (e - 1))
    return np.where(c >> 3, -mag, mag)


def test_the_decoder_agrees_with_ml_dtypes_and_the_spec():
    codes = np.arange(16)
    assert np.array_equal(decode_fp4(codes, F2), codes.astype(np.uint8).view(ml_dtypes.float4_e2m1fn).astype(float))
    assert decode_fp4(codes[:8], F1).tolist() == [0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75]


def pack(codes):
    """(..., L) codes -> (..., L/2) bytes, element 2i in bits 0..3 (PyPTO-Pro test_matmul_mx.py _pack_fp4)."""
    c = np.asarray(codes, np.uint8)
    return (c[..., 0::2] | (c[..., 1::2] << 4)).astype(np.uint8)


def mx_inputs(M, K, N, da, db):
    """(A codes [M, K], B codes [K, N], scale_a [M, K/32], scale_b [K/32, N] E8M0 codes, A and B dequantised)."""
    qa, qb = RNG.integers(0, 16, (M, K)), RNG.integers(0, 16, (K, N))
    sa, sb = RNG.integers(118, 137, (M, K // 32)), RNG.integers(118, 137, (K // 32, N))
    a64 = decode_fp4(qa, da) * np.exp2(np.repeat(sa - 127, 32, axis=1))
    b64 = decode_fp4(qb, db) * np.exp2(np.repeat(sb - 127, 32, axis=0))
    return qa, qb, sa.astype(np.uint8).view(ml_dtypes.float8_e8m0fnu), sb.astype(np.uint8).view(
        ml_dtypes.float8_e8m0fnu), a64, b64


def pack_scale_a(s):
    m, g = s.shape
    return np.ascontiguousarray(s.reshape(m, g // 2, 2))


def pack_scale_b(s):
    g, n = s.shape
    return np.ascontiguousarray(s.reshape(g // 2, 2, n).transpose(0, 2, 1))


def check(c, a64, b64):
    assert np.all(np.abs(c - a64 @ b64) <= matmul_bound(a64, b64, np.float32))


# ---- an MXFP4 K-loop kernel (PyPTO-Pro's test_matmul_mx.py, pyto's spelling) ---------------------------------------
def mxfp4_matmul(M, K, N, da, db, *, b_nk=True, a_km=False, phases=True):
    """C [M, N] fp32 = MX(A, scale_a) @ MX(B, scale_b). A is GM [M, K/2] packed (with a_km: A transposed, [K, M/2],
    loaded with order=[1, 0] into the NZ Mat tile: a Dn2Nz); B is GM [N, K/2] packed (B transposed, loaded with
    order=[1, 0] into a ZN Mat tile, as the device test stores it) or with b_nk=False [K, N/2] packed along N into an
    NZ Mat tile (matmul_mx.md's example). Offsets on the packed axis count bytes."""
    P = K // 64
    a_shape = [K, M // 2] if a_km else [M, K // 2]
    b_shape = [N, K // 2] if b_nk else [K, N // 2]

    def load_a(x, a, mi, ki):
        if a_km:
            pl.load(x, a, [ki, mi // 2], order=[1, 0])
        else:
            pl.load(x, a, [mi, ki // 2])

    def load_b(y, b, ni, ki):
        if b_nk:
            pl.load(y, b, [ni, ki // 2], order=[1, 0])
        else:
            pl.load(y, b, [ki, ni // 2])

    def load_scales(xs, ys, scale_a, scale_b, mi, ni, ki):
        pl.load(xs, scale_a, [mi, ki // 64, 0])
        pl.load(ys, scale_b, [ki // 64, ni, 0])
    # PyPTO-Pro's FP4 kernels set the logical row-major stride
    return mx_k_loop(M, K, N, da, db, shapes=(a_shape, b_shape, [M, P, 2], [P, N, 2]), load_a=load_a, load_b=load_b,
                     load_scales=load_scales, b_layout=pl.ZN if b_nk else pl.NZ, a_stride=[M, 1] if a_km else [K, 1],
                     phases=phases)


def run_mxfp4(M, K, N, da, db, b_nk=True, a_km=False, **kw):
    qa, qb, sa, sb, a64, b64 = mx_inputs(M, K, N, da, db)
    c = np.zeros((M, N), np.float32)
    a = pack(qa.T) if a_km else pack(qa)
    b = pack(qb.T) if b_nk else pack(qb)
    rep = mxfp4_matmul(M, K, N, da, db, b_nk=b_nk, a_km=a_km, **kw)(a, b, pack_scale_a(sa), pack_scale_b(sb), c)
    return c, a64, b64, rep


# ---- results ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("da,db", PAIRS, ids=IDS)
@pytest.mark.parametrize("M,K,N", [(100, 192, 72), (64, 64, 64), (13, 128, 130)])
def test_mxfp4_matmul_matches_the_dequantised_float64_product(da, db, M, K, N):
    c, a64, b64, rep = run_mxfp4(M, K, N, da, db)
    check(c, a64, b64)
    assert rep.pipe_cycles["M"] > 0


@pytest.mark.parametrize("da,db", [(F2, F1), (F1, F1)], ids=["e2m1xe1m2", "e1m2xe1m2"])
def test_b_packed_along_n_and_per_mmad_accumulation(da, db):
    """matmul_mx.md's form of B, GM [K, N/2] packed along N into an NZ Mat tile; no phases; the hardware's order."""
    with pyto.run_options(accumulate="per_mmad"):
        c, a64, b64, _ = run_mxfp4(80, 256, 128, da, db, b_nk=False, phases=False)
    check(c, a64, b64)


def test_a_transposed_by_a_dn2nz_load():
    """A stored transposed, GM [K, M/2] packed along M, loaded with order=[1, 0] into the NZ Mat tile (Dn2Nz)."""
    c, a64, b64, _ = run_mxfp4(128, 128, 64, F1, F2, a_km=True)
    check(c, a64, b64)


def test_a_transposing_move_of_fp4_into_left_is_refused():
    @pl.jit
    def k1(x: pl.Tensor[[16, 32], pl.DT_FP16]):
        a_zn = pl.make_tile(tt([64, 64], F2, MS.Mat, layout=pl.ZN), addr=0)
        al = pl.make_tile(tt([64, 64], F2, MS.Left), addr=0)
        with pl.section_cube():
            pl.move(al, a_zn)
    with pytest.raises(pyto.UnsupportedError, match=r"Mat \(ZN\) -> Left with transpose \(LoadDataWithTranspose\) of "
                                                    r"pl.DT_FP4E2M1 is not built in pyto"):
        k1(np.zeros((16, 32), np.float16))


def test_the_nibble_order_and_the_scales_matter():
    """Swapped nibbles in A, or scale_b's pair order swapped, do not pass: the data path reads what the layout says."""
    M, K, N = 64, 128, 64
    qa, qb, sa, sb, a64, b64 = mx_inputs(M, K, N, F2, F1)
    kern = mxfp4_matmul(M, K, N, F2, F1)
    for a, sbp in ((pack(qa[:, ::-1])[:, ::-1].copy(), pack_scale_b(sb)),
                   (pack(qa), pack_scale_b(sb)[:, :, ::-1].copy())):
        c = np.zeros((M, N), np.float32)
        kern(a, pack(qb.T), pack_scale_a(sa), sbp, c)
        assert not np.all(np.abs(c - a64 @ b64) <= matmul_bound(a64, b64, np.float32))


# ---- 4-bit tiles: sizes, capacity, where they live ----------------------------------------------------------------
def place(*tiletypes_and_addrs, size=None):
    @pl.jit
    def k1(x: pl.Tensor[[16, 32], pl.DT_FP16]):
        for t, addr in tiletypes_and_addrs:
            pl.make_tile(t(), addr=addr, size=size)
    return lambda: k1(np.zeros((16, 32), np.float16))


def allocs(*specs):
    """A kernel that pl.allocs (buffer, shape, dtype) tiles one after the other (charged at their padded size)."""
    @pl.jit
    def k1(x: pl.Tensor[[16, 32], pl.DT_FP16]):
        for buf, shape, dt in specs:
            pl.alloc(buf, shape, dt)
    return lambda: k1(np.zeros((16, 32), np.float16))


def test_an_fp4_tile_takes_half_a_byte_an_element():
    """[256, 512] FP4 = 65536 B fills Left (64 KB) exactly; at 8 bits the same tile needs 131072 B."""
    assert pyto.load_chip("ascend950pr").capacity("L0A") == 65536
    allocs((pl.L0A, [256, 512], F2))()
    allocs((pl.L0A, [128, 512], F1), (pl.L0A, [128, 512], F2))()          # two halves fit too
    with pytest.raises(pyto.CapacityError, match=r"L0A overflow on ascend950pr: .* \[256, 512\] fp8e4m3fn .* asks "
                                                 r"131072 B, 0 B already in use, capacity 65536 B"):
        allocs((pl.L0A, [256, 512], E4))()


def test_one_element_over_is_a_capacity_error_naming_the_buffer():
    """[256, 513] FP4 pads to whole 64-column fractals, 73728 B > L0A's 65536: CapacityError with the numbers; so is
    any tile after a full L0A."""
    with pytest.raises(pyto.CapacityError, match=r"L0A overflow on ascend950pr: .* \[256, 513\] fp4e1m2 \(padded "
                                                 r"256x576\) asks 73728 B, 0 B already in use, capacity 65536 B") as e:
        allocs((pl.L0A, [256, 513], F1))()
    assert (e.value.buffer, e.value.asked, e.value.capacity) == ("L0A", 73728, 65536)
    with pytest.raises(pyto.CapacityError, match=r"L0A overflow on ascend950pr: .* \[64, 64\] fp4e2m1 .* asks 2048 B, "
                                                 r"65536 B already in use, capacity 65536 B"):
        allocs((pl.L0A, [256, 512], F2), (pl.L0A, [64, 64], F2))()


def test_fp4_fractals_are_16_by_64():
    """A view of an FP4 Mat tile sits on its 16 x 64 grid: a column offset of 32 (a whole 8-bit fractal) is off it."""
    @pl.jit
    def k1(x: pl.Tensor[[16, 32], pl.DT_FP16]):
        t = pl.make_tile(tt([64, 128], F2, MS.Mat), addr=0)
        t[16:32, 64:128]
        t[:, 32:96]
    with pytest.raises(pyto.AlignmentError, match=r"column offset 32 is off the fractal grid \(multiples of 64 for L1 "
                                                  r"NZ fp4e2m1\)"):
        k1(np.zeros((16, 32), np.float16))


def test_an_odd_element_count_is_refused_by_name():
    with pytest.raises(pyto.ShapeError, match=r"1 fp4e2m1 elements are 0.5 bytes: 4-bit elements go two to a byte"):
        place((lambda: tt([1, 1], F2, MS.Mat), 0), size=None)()
    with pytest.raises(pyto.ShapeError, match=r"3 fp4e1m2 elements are 1.5 bytes"):
        F1.nbytes(3)
    assert F1.nbytes(64) == 32 and F1.itemsize * 8 == F1.bits == 4


@pytest.mark.parametrize("mem,what", [(MS.Vec, "pl.MemorySpace.Vec"), (MS.Acc, "pl.MemorySpace.Acc"),
                                      (MS.Bias, "pl.MemorySpace.Bias")])
def test_fp4_lives_in_mat_left_and_right_only(mem, what):
    with pytest.raises(pyto.UnsupportedError, match=rf"a pl.DT_FP4E2M1 tile in {what} is not built in pyto: FP4 is "
                                                    rf"storage and an MX cube input only \(matmul_mx.md"):
        place((lambda: tt([16, 64], F2, mem), 0))()


def test_fp4_vec_tiles_scalars_and_casts_are_refused():
    with pytest.raises(pyto.UnsupportedError, match=r"a pl.DT_FP4E1M2 tile in pl.MemorySpace.Vec is not built"):
        place((lambda: tt([16, 64], F1, MS.Vec), 0))()

    @pl.jit
    def k1(x: pl.Tensor[[16, 32], pl.DT_FP16]):
        pl.const(1.0, pl.DT_FP4E2M1)
    with pytest.raises(pyto.ShapeError, match=r"pl.const of pl.DT_FP4E2M1: .* not scalar types"):
        k1(np.zeros((16, 32), np.float16))

    @pl.jit
    def k2(x: pl.Tensor[[16, 32], pl.DT_FP16]):
        v = pl.alloc(pl.UB, [16, 64], pl.DT_FP16)
        w = pl.alloc(pl.UB, [16, 64], pl.DT_FP4E2M1)
        pl.cast(w, v)
    with pytest.raises(pyto.UnsupportedError, match=r"a pl.DT_FP4E2M1 tile in pl.MemorySpace.Vec is not built"):
        k2(np.zeros((16, 32), np.float16))


def test_plain_matmul_on_fp4_points_to_matmul_mx():
    @pl.jit
    def k1(x: pl.Tensor[[16, 32], pl.DT_FP16]):
        al = pl.make_tile(tt([64, 64], F2, MS.Left), addr=0)
        br = pl.make_tile(tt([64, 64], F2, MS.Right), addr=0)
        ac = pl.make_tile(tt([64, 64], pl.DT_FP32, MS.Acc), addr=0)
        with pl.section_cube():
            pl.matmul(ac, al, br)
    with pytest.raises(pyto.ShapeError, match=r"FP4 data is a cube input of the MX matmul only \(pl.matmul_mx"):
        k1(np.zeros((16, 32), np.float16))


# ---- GM: packed tensors, byte offsets -----------------------------------------------------------------------------
def load_one(gm_shape, tile_shape, offsets, order=None, layout=pl.NZ, valid=None, dtype=F2):
    @pl.jit
    def k1(a: pl.Tensor[gm_shape, dtype]):
        x = pl.make_tile(tt(tile_shape, dtype, MS.Mat, layout=layout, valid_shape=valid), addr=0)
        with pl.section_cube():
            pl.load(x, a, offsets, order=order)
    return lambda: k1(np.zeros(gm_shape, np.uint8))


def test_an_fp4_tensor_is_a_uint8_array_of_pairs_declared_fp4():
    """[64, 64] elements are a [64, 32] uint8 array; another dtype is refused by the annotation."""
    load_one([64, 32], [64, 64], [0, 0])()

    @pl.jit
    def k1(a: pl.Tensor[[64, 32], F2]):
        pass
    with pytest.raises(pyto.ShapeError, match=r"annotated pl.Tensor\[\[64, 32\], pl.DT_FP4E2M1\] but got a fp16"):
        k1(np.zeros((64, 32), np.float16))
    assert pyto.dtypes.as_dtype(np.uint8) is pl.DT_UINT8      # only a declaration makes uint8 bytes FP4


@pytest.mark.parametrize("order", [None, [1, 0]])
def test_an_fp4_load_reads_half_a_byte_an_element(order):
    """A [64, 128] FP4 Mat tile from a [64, 64]-byte tensor (or [128, 64] transposed, a Dn2Nz) reads 4096 B of GM,
    half what the same FP8 load reads; the load's burst is a row of 64 bytes (all rows one burst when whole)."""
    def gm_read(dt, gm_shape):
        @pl.jit
        def k1(a: pl.Tensor[gm_shape, dt]):
            x = pl.make_tile(tt([64, 128], dt, MS.Mat), addr=0)
            with pl.section_cube():
                pl.load(x, a, [0, 0], order=order)
        return pyto.run(k1, pyto.spec(gm_shape, dt.name), mode="timing", check=False).gm_read_bytes
    fp4_shape = [64, 64] if order is None else [128, 32]
    fp8_shape = [64, 128] if order is None else [128, 64]
    assert gm_read(F2, fp4_shape) == 4096 and gm_read(E4, fp8_shape) == 8192


def test_an_fp4_load_past_the_packed_edge_is_out_of_bounds():
    with pytest.raises(pyto.OutOfBoundsError, match=r"the FP4 tensor's last axis counts bytes, two elements each"):
        load_one([64, 32], [64, 64], [0, 16])()      # bytes 16..48 of a 32-byte row


def test_an_odd_extent_along_the_packed_axis_is_refused():
    with pytest.raises(pyto.ShapeError, match=r"reads 63 FP4 elements along the last axis of .* the extent along it "
                                              r"must be even"):
        load_one([64, 32], [64, 64], [0, 0], valid=[64, 63])()


def test_load_tile_and_strides_other_than_row_major_are_refused():
    @pl.jit
    def k1(a: pl.Tensor[[64, 32], F2]):
        x = pl.make_tile(tt([64, 64], F2, MS.Mat), addr=0)
        with pl.section_cube():
            pl.load_tile(x, a, [0, 0])
    with pytest.raises(pyto.UnsupportedError, match=r"pl.load_tile of the FP4 tensor .* counts packed bytes"):
        k1(np.zeros((64, 32), np.uint8))

    @pl.jit
    def k2(a: pl.Tensor[[64, 32], F2]):
        with pl.section_cube():
            pl.set_stride(a, [128, 1])
    with pytest.raises(pyto.UnsupportedError, match=r"pl.set_stride on the FP4 tensor .* \[64, 1\]"):
        k2(np.zeros((64, 32), np.uint8))


def test_fp4_pointers_views_workspaces_dumps_and_nd_rows_are_refused_by_name():
    a = np.zeros((64, 32), np.uint8)

    @pl.jit
    def k1(p: pl.Ptr[F2]):
        pass
    with pytest.raises(pyto.UnsupportedError, match=r"parameter 'p' .* an FP4 pointer is not built: two elements "
                                                    r"share a byte"):
        k1(a)

    @pl.jit
    def k2(t: pl.Tensor[[64, 32], F2]):
        pl.make_tensor(t, [32, 32])
    with pytest.raises(pyto.UnsupportedError, match=r"pl.make_tensor of the FP4 tensor .* is not built"):
        k2(a)

    @pl.jit
    def k3(t: pl.Tensor[[64, 32], F2]):
        pl.workspace([64, 32], F2)
    with pytest.raises(pyto.UnsupportedError, match=r"a pl.DT_FP4E2M1 workspace is not built in pyto"):
        k3(a)

    @pl.jit
    def k4(t: pl.Tensor[[64, 32], F2]):
        pl.dump_data(t)
    with pytest.raises(pyto.UnsupportedError, match=r"pl.dump_data of the FP4 tensor .* is not built"):
        k4(a)
    with pytest.raises(pyto.UnsupportedError, match=r"a pl.DT_FP4E1M2 tile of layout ND is not built in pyto"):
        place((lambda: tt([1, 64], F1, MS.Mat, layout=pl.ND), 0))()


# ---- shapes (hypothesis) ------------------------------------------------------------------------------------------
def fb(shape, dt):
    """make_tile's size= for a cube tile as pyto pads it (tile.padded_of: CeilAlign 16, 32 at 8 bits, 64 at 4)."""
    a = {4: 64, 8: 32}.get(dt.bits, 16)
    return -(-shape[0] // a) * a * (-(-shape[1] // a) * a) * dt.bits // 8


def sfb(shape, layout):
    """make_tile's size= for an E8M0 scale tile in whole 16 x 2 (ZZ) / 2 x 16 (NN) fractals."""
    r, c = (16, 2) if layout == "ZZ" else (2, 16)
    return -(-shape[0] // r) * r * (-(-shape[1] // c) * c)


def one_mx_traced(m, k, n, da, db):
    """One MX MMAD on make_tile tiles, nothing loaded (the rules are checked when traced)."""
    @pl.jit
    def k1(x: pl.Tensor[[16, 32], pl.DT_FP16]):
        al = pl.make_tile(tt([m, k], da, MS.Left), addr=0x0, size=fb([m, k], da))
        br = pl.make_tile(tt([k, n], db, MS.Right), addr=0x0, size=fb([k, n], db))
        sal = pl.make_tile(tt([m, k // 32], E8, MS.ScaleLeft), addr=0x0, size=sfb([m, k // 32], "ZZ"))
        sbr = pl.make_tile(tt([k // 32, n], E8, MS.ScaleRight), addr=0x0, size=sfb([k // 32, n], "NN"))
        ac = pl.make_tile(tt([m, n], pl.DT_FP32, MS.Acc), addr=0, size=fb([m, n], pl.DT_FP32))
        with pl.section_cube():
            pl.matmul_mx(ac, al, br, sal, sbr)
    return lambda: k1(np.zeros((16, 32), np.float16))


@settings(max_examples=16, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(1, 64), n=st.integers(1, 32).map(lambda h: 2 * h), groups=st.integers(1, 6),
       da=st.sampled_from([F2, F1]), db=st.sampled_from([F2, F1]))
def test_shapes(m, n, groups, da, db):
    """One MXFP4 MMAD [m, 32g] x [32g, n] through GM -> Mat -> L0 (whole tiles; B packed along N, so n even): K a
    multiple of 64 matches the reference, any other K is refused by the K rule."""
    k = 32 * groups
    if k % 64:
        with pytest.raises(pyto.ShapeError, match=rf"K = {k} .* is not a multiple of 64"):
            one_mx_traced(m, k, n, da, db)()
        return
    k1 = whole_mx_kernel(m, k, n, da, db, k // 2, n // 2)
    qa, qb, sa, sb, a64, b64 = mx_inputs(m, k, n, da, db)
    c = np.zeros((m, n), np.float32)
    k1(pack(qa), pack(qb), pack_scale_a(sa), pack_scale_b(sb), c)
    check(c, a64, b64)


# ---- cube time: MXFP4 and MXFP8 against FP16, as the chip table predicts --------------------------------------------
def one_mmad_kernel(m, k, n, da, db):
    """A kernel of one MMAD [m, k] x [k, n] on make_tile tiles: pl.matmul for FP16, pl.matmul_mx for MX data."""
    mx = da not in (pl.DT_FP16,)

    @pl.jit
    def kern(c: pl.Tensor[[m, n], pl.DT_FP32]):
        al = pl.make_tile(tt([m, k], da, MS.Left), addr=0x4000 if mx else 0, size=fb([m, k], da))
        br = pl.make_tile(tt([k, n], db, MS.Right), addr=0x4000 if mx else 0, size=fb([k, n], db))
        ac = pl.make_tile(tt([m, n], pl.DT_FP32, MS.Acc), addr=0, size=fb([m, n], pl.DT_FP32))
        with pl.section_cube():
            if mx:
                sal = pl.make_tile(tt([m, k // 32], E8, MS.ScaleLeft), addr=0x400, size=sfb([m, k // 32], "ZZ"))
                sbr = pl.make_tile(tt([k // 32, n], E8, MS.ScaleRight), addr=0x400, size=sfb([k // 32, n], "NN"))
                pl.matmul_mx(ac, al, br, sal, sbr)
            else:
                pl.matmul(ac, al, br)
    return kern


@pytest.mark.parametrize("m,k,n", [(64, 256, 64), (128, 256, 128), (16, 64, 48)])
def test_the_m_pipe_time_ratio_is_the_chip_tables(m, k, n):
    """M-pipe cycles of one MMAD: ceil(m/16) ceil(n/16) ceil(k/k0) steps at the table's cycles per step plus the head,
    k0 = 16 (FP16), 32 (MXFP8, cube.mxfp8_cycles_per_step), 64 (MXFP4, cube.mxfp4_cycles_per_step); the ratios to
    FP16 are those of the predictions, exactly."""
    chip = pyto.load_chip("ascend950pr")

    def cycles(da, db):
        return pyto.run(one_mmad_kernel(m, k, n, da, db), pyto.spec((m, n), "fp32"), mode="timing",
                        check=False).pipe_cycles["M"]

    def predicted(key, k0):
        return math.ceil(m / 16) * math.ceil(n / 16) * math.ceil(k / k0) * chip.cube_cycles_per_step[key] \
            + chip.mmad_head_cycles

    t16, t8, t4 = cycles(pl.DT_FP16, pl.DT_FP16), cycles(E4, E5), cycles(F2, F1)
    p16, p8, p4 = predicted("fp16", 16), predicted("mxfp8", 32), predicted("fp4e2m1", 64)
    assert (t16, t8, t4) == (p16, p8, p4)
    assert t8 / t16 == p8 / p16 and t4 / t16 == p4 / p16
    assert t4 < t8 < t16


def test_the_table_gives_mxfp4_twice_mxfp8s_peak():
    """Huawei Connect 2025: MXFP8 1 PFLOPS, MXFP4 2 PFLOPS; the table's rates at its clock give 0.97 and 1.94."""
    chip = pyto.load_chip("ascend950pr")
    assert chip.peak_flops(F2) == chip.peak_flops(F1) == 2 * chip.peak_flops(E4)
    assert 0.9e15 < chip.peak_flops(E4) < 1.1e15
    assert "fp4e2m1" not in pyto.load_chip("atlas-a2").cube_cycles_per_step


def test_mxfp4_needs_the_table_rate(tmp_path):
    """A 950 table without cube.mxfp4_cycles_per_step has no MXFP4 cube: UnsupportedError naming the key."""
    chip = pyto.load_chip("ascend950pr")
    text = open(chip.source, encoding="utf-8").read()
    bad = tmp_path / "nofp4.toml"
    lines = [ln for ln in text.splitlines() if not ln.startswith("mxfp4_cycles_per_step")]
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    kern = one_mmad_kernel(64, 128, 64, F2, F2)
    with pytest.raises(pyto.UnsupportedError, match=r"pl.matmul_mx on MXFP4 operands: chip .* gives no "
                                                    r"cube.mxfp4_cycles_per_step"):
        pyto.run(kern, pyto.spec((64, 64), "fp32"), mode="timing", check=False, chip=pyto.load_chip(bad))
