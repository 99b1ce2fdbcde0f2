"""MXFP8 matmuls (issue 21, the MX part): pl.matmul_mx / pl.matmul_mx_acc on FP8 E4M3FN / E5M2 elements with E8M0
scales (PyPTO-Pro matrix_computation/matmul_mx.md, matmul_mx_acc.md), in a PyPTO-Pro style K-loop kernel GM -> Mat ->
Left/Right and GM scales -> Mat (ZZ / NN) -> ScaleLeft/ScaleRight, against a float64 reference of the dequantised
inputs; every rule's refusal with its message; a hypothesis test over shapes; the MMAD time against the table's rate.

Inputs are real MX quantisations of random float matrices (pyto.lowp.mx_quantize, OCP MX scales), with rows (A) and
columns (B) spread over 2^-4..2^4, so the scales lie near 2^-12..2^4: every scaled element (an FP8 value times a
power of two) and every product is normal in fp32, hence exact, and only the fp32 accumulation rounds (matmul_bound's
term on the dequantised float64 operands)."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyto
import pyto.language as pl
from mx_helpers import mx_k_loop, whole_mx_kernel
from pyto import lowp
from pyto.testing import matmul_bound

RNG = np.random.default_rng(2121)
E4, E5, E8 = pl.DT_FP8E4M3FN, pl.DT_FP8E5M2, pl.DT_FP8E8M0
MS = pl.MemorySpace
FMT = {E4: "fp8e4m3fn", E5: "fp8e5m2"}


def tt(shape, dtype, mem, **kw):
    return pl.TileType(shape=shape, dtype=dtype, target_memory=mem, **kw)


def mx_matmul(M, K, N, da, db, *, phases=True, transposed_scales=False):
    """C [M, N] fp32 = MX(A [M, K] da, scale_a) @ MX(B [K, N] db, scale_b): T x T output tiles (M/N tails by valid
    shapes), a K loop of T (matmul_mx, then matmul_mx_acc), every ring double-buffered under auto_mutex, each ScaleLeft
    / ScaleRight slot at its Left / Right slot's address >> 4. GM scales [M, K/64, 2] and [K/64, N, 2] (matmul_mx.md),
    or with `transposed_scales` [K/64, M, 2] and [N, K/64, 2] loaded with order=[1, 0]."""
    P = K // 64
    sa_shape, sb_shape = ([P, M, 2], [N, P, 2]) if transposed_scales else ([M, P, 2], [P, N, 2])

    def load_scales(xs, ys, scale_a, scale_b, mi, ni, ki):
        if transposed_scales:
            pl.load(xs, scale_a, [ki // 64, mi, 0], order=[1, 0])
            pl.load(ys, scale_b, [ni, ki // 64, 0], order=[1, 0])
        else:
            pl.load(xs, scale_a, [mi, ki // 64, 0], order=[0, 1])
            pl.load(ys, scale_b, [ki // 64, ni, 0])
    return mx_k_loop(M, K, N, da, db, shapes=([M, K], [K, N], sa_shape, sb_shape), phases=phases,
                     load_a=lambda x, a, mi, ki: pl.load(x, a, [mi, ki]),
                     load_b=lambda y, b, ni, ki: pl.load(y, b, [ki, ni]), load_scales=load_scales)


def pack_scale_a(s, transposed=False):
    """Logical scale_a [M, G] -> GM [M, G/2, 2] (a reshape), or [G/2, M, 2]: the pair of groups 2p, 2p+1 last."""
    m, g = s.shape
    packed = s.reshape(m, g // 2, 2)
    return np.ascontiguousarray(packed.transpose(1, 0, 2) if transposed else packed)


def pack_scale_b(s, transposed=False):
    """Logical scale_b [G, N] -> GM [G/2, N, 2] (the pair along K last), or [N, G/2, 2]."""
    g, n = s.shape
    packed = s.reshape(g // 2, 2, n).transpose(0, 2, 1)
    return np.ascontiguousarray(packed.transpose(1, 0, 2) if transposed else packed)


def mx_inputs(M, K, N, da, db):
    """MX-quantised random A and B (module docstring): codes, logical scales, and the dequantised float64 operands
    decoded independently of pyto's data path (lowp's tables and 2^(e - 127))."""
    A = RNG.standard_normal((M, K)) * np.exp2(RNG.integers(-4, 5, (M, 1)))
    B = RNG.standard_normal((K, N)) * np.exp2(RNG.integers(-4, 5, (1, N)))
    qa, sa = lowp.mx_quantize(A, 1, FMT[da])
    qb, sb = lowp.mx_quantize(B, 0, FMT[db])
    ea = sa.view(np.uint8).astype(np.int64) - 127
    eb = sb.view(np.uint8).astype(np.int64) - 127
    a64 = lowp.as_format(FMT[da]).decode(qa) * np.exp2(np.repeat(ea, 32, axis=1))
    b64 = lowp.as_format(FMT[db]).decode(qb) * np.exp2(np.repeat(eb, 32, axis=0))
    assert np.array_equal(a64, lowp.mx_dequant(qa, sa, 1)) and np.array_equal(b64, lowp.mx_dequant(qb, sb, 0))
    return qa, qb, sa, sb, a64, b64


def _check(c, a64, b64):
    ref = a64 @ b64
    assert np.all(np.abs(c - ref) <= matmul_bound(a64, b64, np.float32))


# ---- results ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("da,db", [(E4, E4), (E4, E5), (E5, E4), (E5, E5)],
                         ids=["e4m3xe4m3", "e4m3xe5m2", "e5m2xe4m3", "e5m2xe5m2"])
@pytest.mark.parametrize("M,K,N", [(100, 192, 72), (64, 64, 64), (13, 128, 130)])
def test_mxfp8_matmul_matches_the_dequantised_float64_product(da, db, M, K, N):
    qa, qb, sa, sb, a64, b64 = mx_inputs(M, K, N, da, db)
    c = np.zeros((M, N), np.float32)
    rep = mx_matmul(M, K, N, da, db)(qa, qb, pack_scale_a(sa), pack_scale_b(sb), c)
    _check(c, a64, b64)
    assert rep.pipe_cycles["M"] > 0 and rep.pipe_cycles["MTE1"] > 0


def test_the_scales_matter_and_go_with_their_groups():
    """A scale layout read wrongly, or ignored, does not pass: swapping scale_b's pair order changes the result."""
    M, K, N = 64, 128, 64
    qa, qb, sa, sb, a64, b64 = mx_inputs(M, K, N, E4, E5)
    c = np.zeros((M, N), np.float32)
    swapped = pack_scale_b(sb)[:, :, ::-1].copy()
    mx_matmul(M, K, N, E4, E5)(qa, qb, pack_scale_a(sa), swapped, c)
    assert not np.all(np.abs(c - a64 @ b64) <= matmul_bound(a64, b64, np.float32))


def test_order_1_0_scale_loads_and_per_mmad_accumulation():
    """GM scales [K/64, M, 2] / [N, K/64, 2] loaded with order=[1, 0]; no phases; the hardware's MMAD order."""
    M, K, N = 80, 256, 96
    qa, qb, sa, sb, a64, b64 = mx_inputs(M, K, N, E5, E4)
    c = np.zeros((M, N), np.float32)
    with pyto.run_options(accumulate="per_mmad"):
        mx_matmul(M, K, N, E5, E4, phases=False, transposed_scales=True)(
            qa, qb, pack_scale_a(sa, True), pack_scale_b(sb, True), c)
    _check(c, a64, b64)


def test_an_e8m0_nan_scale_gives_nan():
    """Scale 0xFF is E8M0's NaN (lowp.FP8E8M0, 2^(c-127) otherwise): the rows it scales come out NaN."""
    M = K = N = 64
    qa, qb, sa, sb, a64, b64 = mx_inputs(M, K, N, E4, E4)
    sa = sa.copy()
    sa.view(np.uint8)[3, 1] = 0xFF
    c = np.zeros((M, N), np.float32)
    mx_matmul(M, K, N, E4, E4)(qa, qb, pack_scale_a(sa), pack_scale_b(sb), c)
    assert np.isnan(c[3]).all() and not np.isnan(np.delete(c, 3, axis=0)).any()


# ---- the rules (cube_mx.py's module docstring), each its own error -------------------------------------------------
def padded(shape, r, c, isz=1):
    """make_tile's size= for a tile padded to whole r x c fractals (make_tile.md: the default is elements x bytes)."""
    return -(-shape[0] // r) * r * (-(-shape[1] // c) * c) * isz


def one_mx(*, da=E4, db=E5, dst=pl.DT_FP32, m=32, k=64, n=32, sa_shape=None, sb_shape=None, sa_addr=0x0,
           sb_addr=0x0, a_addr=0x0, b_addr=0x0, chip="ascend950pr", acc_is_dst=True, op="mx"):
    """A kernel of one MX MMAD on make_tile tiles (nothing loaded: the rules are checked when traced)."""
    sa_shape = sa_shape or [m, k // 32]
    sb_shape = sb_shape or [k // 32, n]

    @pl.jit(arch=chip)
    def k1(x: pl.Tensor[[16, 32], pl.DT_FP16]):
        al = pl.make_tile(tt([m, k], da, MS.Left), addr=a_addr, size=fractal_bytes([m, k], da))
        br = pl.make_tile(tt([k, n], db, MS.Right), addr=b_addr, size=fractal_bytes([k, n], db))
        sal = pl.make_tile(tt(sa_shape, E8, MS.ScaleLeft), addr=sa_addr, size=padded(sa_shape, 16, 2))
        sbr = pl.make_tile(tt(sb_shape, E8, MS.ScaleRight), addr=sb_addr, size=padded(sb_shape, 2, 16))
        ac = pl.make_tile(tt([m, n], dst, MS.Acc), addr=0, size=padded([m, n], 16, 16, 4))
        other = pl.make_tile(tt([m, n], dst, MS.Acc), addr=0x10000, size=padded([m, n], 16, 16, 4))
        with pl.section_cube():
            if op == "mx":
                pl.matmul_mx(ac, al, br, sal, sbr)
            else:
                pl.matmul_mx_acc(ac, ac if acc_is_dst else other, al, br, sal, sbr)
    return lambda: k1(np.zeros((16, 32), np.float16))


def fractal_bytes(shape, dt):
    """Bytes of a Left / Right tile padded as pyto pads it (tile.padded_of: 32 for 8-bit types, 64 for 4-bit)."""
    bits = getattr(dt, "bits", 8)
    a = {8: 32, 4: 64}.get(bits, 32)
    return padded(shape, a, a) * bits // 8


PAGE = r"matrix_computation/matmul_mx\.md"


def test_a_well_formed_mx_mmad_traces():
    rep = pyto.run(_traced_ok(), pyto.spec((16, 32), "fp16"), mode="timing", check=False)
    assert rep.pipe_cycles["M"] > 0


def _traced_ok():
    @pl.jit
    def k1(x: pl.Tensor[[16, 32], pl.DT_FP16]):
        al = pl.make_tile(tt([32, 64], E4, MS.Left), addr=0x2000)
        br = pl.make_tile(tt([64, 32], E5, MS.Right), addr=0x4000)
        sal = pl.make_tile(tt([32, 2], E8, MS.ScaleLeft), addr=0x200)
        sbr = pl.make_tile(tt([2, 32], E8, MS.ScaleRight), addr=0x400)
        ac = pl.make_tile(tt([32, 32], pl.DT_FP32, MS.Acc), addr=0)
        with pl.section_cube():
            pl.matmul_mx(ac, al, br, sal, sbr)
    return k1


def test_dst_must_be_fp32():
    with pytest.raises(pyto.ShapeError, match=rf"pl.matmul_mx dst_tile .* must be DT_FP32 \({PAGE}.*got int32"):
        one_mx(dst=pl.DT_INT32)()


@pytest.mark.parametrize("da,db", [(pl.DT_FP16, E5), (E4, pl.DT_HF8), (pl.DT_INT8, pl.DT_INT8)])
def test_the_operands_are_mx_elements(da, db):
    bad, what = (da, "lhs_tile") if da not in (E4, E5) else (db, "rhs_tile")
    with pytest.raises(pyto.ShapeError, match=rf"pl.matmul_mx {what} .* is {bad.name}: the MX matmul takes MXFP8 "
                                              rf"elements \(DT_FP8E4M3FN, DT_FP8E5M2\) or MXFP4 ones \(DT_FP4E2M1, "
                                              rf"DT_FP4E1M2\), any pair within a group \({PAGE}\)"):
        one_mx(da=da, db=db)()


@pytest.mark.parametrize("da,db", [(E4, pl.DT_FP4E2M1), (pl.DT_FP4E1M2, E5)])
def test_mxfp8_and_mxfp4_do_not_mix(da, db):
    g = ("MXFP8", "MXFP4") if da in (E4, E5) else ("MXFP4", "MXFP8")
    with pytest.raises(pyto.ShapeError, match=rf"pl.matmul_mx mixes groups: lhs_tile .* is {da.name} \({g[0]}\), "
                                              rf"rhs_tile .* is {db.name} \({g[1]}\); {PAGE}: MXFP8与MXFP4不能混合使用"):
        one_mx(da=da, db=db, k=128)()


@pytest.mark.parametrize("k", [32, 96, 160])
def test_k_must_be_a_multiple_of_64(k):
    with pytest.raises(pyto.ShapeError, match=rf"pl.matmul_mx K = {k} \(lhs_tile .*, rhs_tile .*\) is not a multiple "
                                              rf"of 64 \({PAGE}: K必须为64的倍数\)"):
        one_mx(k=k)()


def test_the_shapes_must_chain():
    @pl.jit
    def k1(x: pl.Tensor[[16, 32], pl.DT_FP16]):
        al = pl.make_tile(tt([32, 64], E4, MS.Left), addr=0)
        br = pl.make_tile(tt([128, 32], E4, MS.Right), addr=0)
        sal = pl.make_tile(tt([32, 2], E8, MS.ScaleLeft), addr=0)
        sbr = pl.make_tile(tt([4, 32], E8, MS.ScaleRight), addr=0)
        ac = pl.make_tile(tt([32, 32], pl.DT_FP32, MS.Acc), addr=0)
        with pl.section_cube():
            pl.matmul_mx(ac, al, br, sal, sbr)
    with pytest.raises(pyto.ShapeError, match=r"pl.matmul_mx shapes do not chain: .*\[32, 64\] @ rhs_tile .*\[128, "
                                              r"32\]"):
        k1(np.zeros((16, 32), np.float16))


@pytest.mark.parametrize("which,shape,want", [("scale_a", [32, 4], r"\[M, K/32\] = \[32, 2\]"),
                                              ("scale_a", [16, 2], r"\[M, K/32\] = \[32, 2\]"),
                                              ("scale_b", [2, 16], r"\[K/32, N\] = \[2, 32\]"),
                                              ("scale_b", [4, 32], r"\[K/32, N\] = \[2, 32\]")])
def test_the_scale_shapes_are_the_mx_groups(which, shape, want):
    kw = {"sa_shape": shape} if which == "scale_a" else {"sb_shape": shape}
    with pytest.raises(pyto.ShapeError, match=rf"pl.matmul_mx {which} .* has shape {re_list(shape)}, but lhs_tile "
                                              rf".* need {which} {want} \({PAGE}: one E8M0 scale per 32 K elements"):
        one_mx(**kw)()


def re_list(xs):
    return r"\[" + ", ".join(map(str, xs)) + r"\]"


@pytest.mark.parametrize("which,kw,got,data", [("scale_a", {"a_addr": 0x2000, "sa_addr": 0x0}, "0x0", "0x2000"),
                                               ("scale_a", {"a_addr": 0x0, "sa_addr": 0x20}, "0x20", "0x0"),
                                               ("scale_b", {"b_addr": 0x8000, "sb_addr": 0x400}, "0x400", "0x8000")])
def test_the_scale_address_is_the_data_address_shifted_by_4(which, kw, got, data):
    dname = "lhs_tile" if which == "scale_a" else "rhs_tile"
    want = f"{int(data, 16) >> 4:#x}"
    with pytest.raises(pyto.KernelError, match=rf"pl.matmul_mx {which} .* is at {got}, but {dname} .* is at {data}, so "
                                               rf"the cube reads {which} at {data} >> 4 = {want} \({PAGE}: "
                                               rf"addr\({which}\) = addr\({dname}\) >> 4 is mandatory"):
        one_mx(**kw)()


def test_the_scale_tiles_hold_e8m0_in_zz_and_nn():
    x = np.zeros((16, 32), np.float16)

    def place(tt_):
        @pl.jit
        def k1(x: pl.Tensor[[16, 32], pl.DT_FP16]):
            pl.make_tile(tt_(), addr=0)
        return lambda: k1(x)
    with pytest.raises(pyto.ShapeError, match=r"pl.MemorySpace.ScaleLeft tiles hold E8M0 MX scales \(pl.DT_FP8E8M0"):
        place(lambda: tt([32, 2], pl.DT_FP16, MS.ScaleLeft))()
    with pytest.raises(pyto.ShapeError, match=r"layout NN is not legal for pl.MemorySpace.ScaleLeft tiles"):
        place(lambda: tt([32, 2], E8, MS.ScaleLeft, layout=pl.NN))()
    with pytest.raises(pyto.ShapeError, match=r"an E8M0 Mat tile is an MX scale tile, layout pl.ZZ .* or pl.NN"):
        place(lambda: tt([32, 2], E8, MS.Mat))()
    with pytest.raises(pyto.ShapeError, match=r"Mat layout ZZ is for E8M0 MX scale tiles only"):
        place(lambda: tt([32, 32], pl.DT_FP16, MS.Mat, layout=pl.ZZ))()
    with pytest.raises(pyto.UnsupportedError, match=r"an E8M0 \(pl.DT_FP8E8M0\) tile in pl.MemorySpace.Vec is not "
                                                    r"built"):
        place(lambda: tt([32, 32], E8, MS.Vec))()


def test_a_zz_scale_moves_to_scale_left_only():
    @pl.jit
    def k1(x: pl.Tensor[[16, 32], pl.DT_FP16]):
        s_l1 = pl.make_tile(tt([2, 32], E8, MS.Mat, layout=pl.ZZ), addr=0, size=512)
        s_r = pl.make_tile(tt([2, 32], E8, MS.ScaleRight), addr=0)
        with pl.section_cube():
            pl.move(s_r, s_l1)
    with pytest.raises(pyto.ShapeError, match=r"pl.MemorySpace.ScaleRight takes E8M0 scales from a NN Mat tile "
                                              r"\(move.md; matmul_mx.md: scale_a ZZ, scale_b NN\), got a ZZ one"):
        k1(np.zeros((16, 32), np.float16))


@pytest.mark.parametrize("chip", ["atlas-a2", "atlas-a3"])
def test_atlas_chips_have_no_scale_buffers(chip):
    with pytest.raises(pyto.UnsupportedError, match=rf"pl.MemorySpace.ScaleLeft \(the MX scale buffer L0A_MX\) does "
                                                    rf"not exist on chip {chip}"):
        one_mx(chip=chip)()


def test_matmul_mx_acc_accumulates_in_place_and_not_from_nothing():
    with pytest.raises(pyto.ShapeError, match=r"pl.matmul_mx_acc accumulates in place: acc_tile must be dst_tile "
                                              r"\(matrix_computation/matmul_mx_acc\.md\)"):
        one_mx(op="acc", acc_is_dst=False)()
    with pytest.raises(pyto.UninitializedReadError):
        one_mx(op="acc")()


def test_the_scale_load_takes_the_pair_axis_whole():
    M, K, N = 64, 64, 64

    @pl.jit
    def k1(s: pl.Tensor[[M, 1, 2], E8], t: pl.Tensor[[M, 2], E8]):
        xs = pl.make_tile(tt([M, 2], E8, MS.Mat, layout=pl.ZZ), addr=0)
        with pl.section_cube():
            pl.load(xs, s, [0, 0, 1])
    s = np.zeros((M, 1, 2), lowp.FP8E8M0.storage)
    with pytest.raises(pyto.ShapeError, match=r"the offset on the pair axis of .* must be 0, got 1"):
        k1(s, np.zeros((M, 2), lowp.FP8E8M0.storage))

    @pl.jit
    def k2(s: pl.Tensor[[M, 1, 2], E8], t: pl.Tensor[[M, 2], E8]):
        xs = pl.make_tile(tt([M, 2], E8, MS.Mat, layout=pl.ZZ), addr=0)
        with pl.section_cube():
            pl.load(xs, t, [0, 0])
    with pytest.raises(pyto.UnsupportedError, match=r"takes a 3-D DT_FP8E8M0 tensor whose last axis is the physical "
                                                    r"pair axis of length 2"):
        k2(s, np.zeros((M, 2), lowp.FP8E8M0.storage))
    del K, N


def test_e8m0_is_storage_only():
    @pl.jit
    def k1(x: pl.Tensor[[16, 32], pl.DT_FP16]):
        pl.const(1.0, pl.DT_FP8E8M0)
    with pytest.raises(pyto.ShapeError, match=r"pl.const of pl.DT_FP8E8M0: FP8 and HF8 are not scalar types"):
        k1(np.zeros((16, 32), np.float16))
    assert pyto.dtypes.as_dtype(lowp.FP8E8M0.storage) is pl.DT_FP8E8M0 and pl.DT_FP8E8M0.itemsize == 1


# ---- shapes (hypothesis) ------------------------------------------------------------------------------------------
@settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(1, 64), n=st.integers(1, 64), groups=st.integers(1, 8), da=st.sampled_from([E4, E5]),
       db=st.sampled_from([E4, E5]))
def test_shapes(m, n, groups, da, db):
    """One MX MMAD [m, 32g] x [32g, n] through GM -> Mat -> L0 (whole tiles): K a multiple of 64 matches the
    reference, any other K is refused by the K rule."""
    k = 32 * groups
    if k % 64:
        with pytest.raises(pyto.ShapeError, match=rf"K = {k} .* is not a multiple of 64"):
            one_mx(da=da, db=db, m=m, k=k, n=n)()
        return
    k1 = whole_mx_kernel(m, k, n, da, db, k, n)
    qa, qb, sa, sb, a64, b64 = mx_inputs(m, k, n, da, db)
    c = np.zeros((m, n), np.float32)
    k1(qa, qb, pack_scale_a(sa), pack_scale_b(sb), c)
    _check(c, a64, b64)


# ---- timing and the chip table ------------------------------------------------------------------------------------
def test_mxfp8_mmad_time_against_fp16_is_what_the_table_predicts():
    """M-pipe cycles of one [64, 256] x [256, 64] MX MMAD (FP8 elements) and of the same FP16 pl.matmul:
    ceil(m/16) ceil(n/16) ceil(k/k0) steps at the table's cycles per step (k0 = 32 for FP8, 16 for FP16) plus the
    head; the MX step runs at cube.mxfp8_cycles_per_step (Huawei Connect 2025: FP8 and MXFP8 both 1 PFLOPS)."""
    chip = pyto.load_chip("ascend950pr")
    m, k, n = 64, 256, 64

    @pl.jit
    def mx(c: pl.Tensor[[m, n], pl.DT_FP32]):
        al = pl.make_tile(tt([m, k], E4, MS.Left), addr=0x4000)
        br = pl.make_tile(tt([k, n], E5, MS.Right), addr=0x4000)
        sal = pl.make_tile(tt([m, k // 32], E8, MS.ScaleLeft), addr=0x400)
        sbr = pl.make_tile(tt([k // 32, n], E8, MS.ScaleRight), addr=0x400)
        ac = pl.make_tile(tt([m, n], pl.DT_FP32, MS.Acc), addr=0)
        with pl.section_cube():
            pl.matmul_mx(ac, al, br, sal, sbr)

    @pl.jit
    def fp16(c: pl.Tensor[[m, n], pl.DT_FP32]):
        al = pl.make_tile(tt([m, k], pl.DT_FP16, MS.Left), addr=0)
        br = pl.make_tile(tt([k, n], pl.DT_FP16, MS.Right), addr=0)
        ac = pl.make_tile(tt([m, n], pl.DT_FP32, MS.Acc), addr=0)
        with pl.section_cube():
            pl.matmul(ac, al, br)

    def cycles(kern):
        return pyto.run(kern, pyto.spec((m, n), "fp32"), mode="timing", check=False).pipe_cycles["M"]

    def predicted(key, k0):
        return math.ceil(m / 16) * math.ceil(n / 16) * math.ceil(k / k0) * chip.cube_cycles_per_step[key] \
            + chip.mmad_head_cycles

    t_mx, t16 = cycles(mx), cycles(fp16)
    assert t_mx == predicted("mxfp8", 32) and t16 == predicted("fp16", 16)
    assert t_mx / t16 == pytest.approx(predicted("mxfp8", 32) / predicted("fp16", 16), rel=1e-12)
    assert t_mx < t16


def test_the_chip_rules_take_the_scale_buffers(tmp_path):
    """buffers.L0A_MX / L0B_MX are optional (a table without them has no MX cube), with the buffer rule's checks;
    the 950's are MemorySpace.md's 4 KB."""
    chip = pyto.load_chip("ascend950pr")
    assert chip.capacity("L0A_MX") == chip.capacity("L0B_MX") == 4096
    assert chip.capacity("L0A_MX") == chip.capacity("L0A") >> 4      # the >> 4 address map covers L0A exactly
    assert "L0A_MX" not in pyto.load_chip("atlas-a2").buffers
    text = open(chip.source, encoding="utf-8").read()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("L0A_MX = 4096 ", "L0A_MX = 100 "), encoding="utf-8")
    with pytest.raises(pyto.ChipError, match=r"key 'buffers.L0A_MX' must be a multiple of 32 B"):
        pyto.load_chip(bad)
