"""FP8 and HF8 matmuls (issue 21, the FP8 / HF8 part): pl.matmul / pl.matmul_acc on FP8 E4M3FN / E5M2 (any mix) and
HF8 x HF8 operands into FP32 (PyPTO-Pro matrix_computation/matmul_acc.md), in a PyPTO-Pro style kernel GM -> Mat ->
Left/Right -> Acc -> GM with M, N and K tails, against a float64 reference of the decoded inputs; the refused pairs,
chips and vector ops with their messages; the MMAD time against the chip table's rates."""
import math

import ml_dtypes
import numpy as np
import pytest

import pyto
import pyto.language as pl
from pyto import lowp
from pyto.testing import matmul_bound
from pro_kernels import acc, left, mat, right, vec

RNG = np.random.default_rng(21)
TM, TN, TK = 32, 32, 64
E4, E5, HF = pl.DT_FP8E4M3FN, pl.DT_FP8E5M2, pl.DT_HF8
FORMAT = {E4: lowp.FP8E4M3FN, E5: lowp.FP8E5M2, HF: lowp.HF8}


def lowp_matmul(M, K, N, da, db, out=pl.DT_FP32):
    """C [M, N] fp32 = A [M, K] (da) @ B [K, N] (db): TM x TN output tiles, a K loop of TK (matmul, then matmul_acc),
    each tile's valid shape set for the M, N and K tails; L1 and L0 double-buffered under auto_mutex."""
    @pl.jit(auto_mutex=True)
    def kern(a: pl.Tensor[[M, K], da], b: pl.Tensor[[K, N], db], c: pl.Tensor[[M, N], out]):
        a_l1 = pl.make_tile_group(type=mat([TM, TK], da, valid_shape=[-1, -1]), addrs=0x00000, mutex_ids=[0, 1])
        b_l1 = pl.make_tile_group(type=mat([TK, TN], db, valid_shape=[-1, -1]), addrs=0x10000, mutex_ids=[2, 3])
        a_left = pl.make_tile_group(type=pl.TileType(shape=[TM, TK], dtype=da, target_memory=pl.MemorySpace.Left,
                                                     valid_shape=[-1, -1]), addrs=[0x0, 0x4000], mutex_ids=[4, 5])
        b_right = pl.make_tile_group(type=pl.TileType(shape=[TK, TN], dtype=db, target_memory=pl.MemorySpace.Right,
                                                      valid_shape=[-1, -1]), addrs=[0x0, 0x4000], mutex_ids=[6, 7])
        c_acc = pl.make_tile_group(type=acc([TM, TN], valid_shape=[-1, -1]), addrs=0x0, mutex_ids=[8])
        with pl.section_cube():
            for i in pl.range(0, M, TM):
                for j in pl.range(0, N, TN):
                    m, n = pl.min(TM, M - i), pl.min(TN, N - j)
                    ac = c_acc.current()
                    pl.set_validshape(ac, [m, n])
                    for k in pl.range(0, K, TK):
                        kk = pl.min(TK, K - k)
                        x, y, al, br = a_l1.next(), b_l1.next(), a_left.next(), b_right.next()
                        pl.set_validshape(x, [m, kk])
                        pl.set_validshape(al, [m, kk])
                        pl.set_validshape(y, [kk, n])
                        pl.set_validshape(br, [kk, n])
                        pl.load(x, a, [i, k])
                        pl.load(y, b, [k, j])
                        pl.move(al, x)
                        pl.move(br, y)
                        if k == 0:
                            pl.matmul(ac, al, br)
                        else:
                            pl.matmul_acc(ac, ac, al, br)
                    pl.store(c, ac, [i, j])
    return kern


def _operand(dt, shape, scale=1.0):
    """Random values rounded to dt: its storage array (ml_dtypes FP8, HF8 uint8 codes) and the decoded float64."""
    codes = FORMAT[dt].encode(RNG.standard_normal(shape) * scale)
    return codes, FORMAT[dt].decode(codes)


# ---- results ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("da,db", [(E4, E4), (E4, E5), (E5, E4), (HF, HF)], ids=["e4m3xe4m3", "e4m3xe5m2",
                                                                                 "e5m2xe4m3", "hf8xhf8"])
@pytest.mark.parametrize("M,K,N", [(40, 100, 56), (32, 64, 32), (7, 33, 45)])
def test_lowp_matmul_matches_the_decoded_float64_product(da, db, M, K, N):
    a, a64 = _operand(da, (M, K))
    b, b64 = _operand(db, (K, N))
    c = np.zeros((M, N), np.float32)
    rep = lowp_matmul(M, K, N, da, db)(a, b, c)
    ref = a64 @ b64
    # every FP8 / HF8 value and product is exact in fp32: only the fp32 accumulation rounds (matmul_bound's term)
    assert np.all(np.abs(c - ref) <= matmul_bound(a64, b64, np.float32))
    assert rep.pipe_cycles["M"] > 0


def test_both_accumulation_orders_agree_with_the_reference():
    """run_options(accumulate="per_mmad") (the hardware's order, operands decoded per MMAD) as well as the fused one."""
    M, K, N = 40, 100, 56
    a, a64 = _operand(HF, (M, K))
    b, b64 = _operand(HF, (K, N))
    c = np.zeros((M, N), np.float32)
    with pyto.run_options(accumulate="per_mmad"):
        lowp_matmul(M, K, N, HF, HF)(a, b, c)
    assert np.all(np.abs(c - a64 @ b64) <= matmul_bound(a64, b64, np.float32))


def test_hf8_extremes_are_exact():
    """HF8's smallest and largest magnitudes (2^-22, 2^15): with one nonzero term per output each result is exact."""
    M = K = N = 32
    a64 = np.diag(np.where(np.arange(K) % 2, 2.0 ** 15, 2.0 ** -22))
    b64 = np.eye(K) * 2.0 ** -3
    a, b = lowp.HF8.encode(a64), lowp.HF8.encode(b64)
    assert np.array_equal(lowp.HF8.decode(a), a64)
    c = np.zeros((M, N), np.float32)
    lowp_matmul(M, K, N, HF, HF)(a, b, c)
    assert np.array_equal(c, a64 @ b64)


def test_a_dt_hf8_tensor_takes_uint8_codes_only():
    kern = lowp_matmul(32, 32, 32, HF, HF)
    c = np.zeros((32, 32), np.float32)
    with pytest.raises(pyto.ShapeError, match=r"parameter 'a' is annotated pl.Tensor\[\[32, 32\], pl.DT_HF8\] but got "
                                              r"a fp16 tensor \(an HF8 tensor is a uint8 array of its codes"):
        kern(np.zeros((32, 32), np.float16), np.zeros((32, 32), np.uint8), c)
    assert pyto.dtypes.as_dtype(np.uint8) is pyto.dtypes.DType.uint8


# ---- refusals -----------------------------------------------------------------------------------------------------
def _pair(da, db, dst=pl.DT_FP32, chip="ascend950pr"):
    @pl.jit(arch=chip)
    def k(x: pl.Tensor[[16, 32], pl.DT_FP16]):
        al = pl.make_tile(left([32, 32], da), addr=0)
        br = pl.make_tile(right([32, 32], db), addr=0)
        ac = pl.make_tile(pl.TileType(shape=[32, 32], dtype=dst, target_memory=pl.MemorySpace.Acc), addr=0)
        with pl.section_cube():
            pl.matmul(ac, al, br)
    return lambda: k(np.zeros((16, 32), np.float16))


@pytest.mark.parametrize("da,db", [(HF, E4), (E5, HF), (E4, pl.DT_FP16), (pl.DT_INT8, E4), (pl.DT_BF16, HF)])
def test_pairs_matmul_acc_md_does_not_list_are_refused(da, db):
    with pytest.raises(pyto.ShapeError, match=rf"test_lowp_matmul\.py:\d+ .*pl.matmul operands differ in dtype: "
                                              rf"{da.name} x {db.name} is not a pair the cube takes "
                                              rf"\(matrix_computation/matmul_acc\.md"):
        _pair(da, db)()


@pytest.mark.parametrize("dt", [E4, HF])
def test_fp8_and_hf8_accumulate_in_fp32(dt):
    with pytest.raises(pyto.ShapeError, match=rf"{dt.name} x {dt.name} operands accumulate in fp32, but .* is int32"):
        _pair(dt, dt, dst=pl.DT_INT32)()


@pytest.mark.parametrize("chip", ["atlas-a2", "atlas-a3"])
@pytest.mark.parametrize("dt", [E4, E5, HF])
def test_a_chip_without_an_fp8_rate_refuses(chip, dt):
    with pytest.raises(pyto.UnsupportedError, match=rf"pl.matmul on pl.DT_{dt.name.upper()} operands: chip {chip}'s "
                                                    rf"cube has no {dt.name} mode"):
        _pair(dt, dt, chip=chip)()


@pytest.mark.parametrize("dt", [E4, E5, HF])
def test_the_vector_ops_refuse_8_bit_floats(dt):
    @pl.jit
    def k(x: pl.Tensor[[16, 32], dt]):
        t = pl.make_tile(vec([16, 32], dt), addr=0)
        u = pl.make_tile(vec([16, 32], dt), addr=0x1000)
        with pl.section_vector():
            pl.load(t, x, [0, 0])
            pl.add(u, t, t)
    x = FORMAT[dt].encode(np.zeros((16, 32)))
    with pytest.raises(pyto.ShapeError, match=rf"pl.add takes .* tiles .*, not {dt.name}"):
        k(x)

    @pl.jit
    def e(x: pl.Tensor[[16, 32], dt]):
        t = pl.make_tile(vec([16, 32], dt), addr=0)
        with pl.section_vector():
            pl.expands(t, 1.0)
    with pytest.raises(pyto.ShapeError, match=r"pl.expands on a .* tile: FP8 and HF8 are storage-only types"):
        e(x)


def test_fp8_and_hf8_move_as_bytes():
    """GM -> Vec -> GM copies the codes unchanged (the data path is bytes)."""
    for dt in (E4, E5, HF):
        @pl.jit(auto_mutex=True)
        def k(x: pl.Tensor[[16, 32], dt], y: pl.Tensor[[16, 32], dt]):
            t = pl.make_tile_group(type=vec([16, 32], dt), addrs=0, mutex_ids=[0]).current()
            with pl.section_vector():
                pl.load(t, x, [0, 0])
                pl.store(y, t, [0, 0])
        x, _ = _operand(dt, (16, 32))
        y = np.zeros_like(x)
        k(x, y)
        assert np.array_equal(y.view(np.uint8), x.view(np.uint8))


# ---- timing -------------------------------------------------------------------------------------------------------
def test_fp8_mmad_time_against_fp16_is_what_the_table_predicts():
    """M-pipe cycles of one [64, 256] x [256, 64] MMAD in FP8 and in FP16: ceil(m/16) ceil(n/16) ceil(k/k0) steps at
    the table's cycles per step (k0 = 32 B / itemsize: 32 for FP8, 16 for FP16) plus the head."""
    chip = pyto.load_chip("ascend950pr")
    m, k, n = 64, 256, 64

    def one_mmad(dt):
        @pl.jit
        def kern(c: pl.Tensor[[m, n], pl.DT_FP32]):
            al = pl.make_tile(left([m, k], dt), addr=0)
            br = pl.make_tile(right([k, n], dt), addr=0)
            ac = pl.make_tile(acc([m, n]), addr=0)
            with pl.section_cube():
                pl.matmul(ac, al, br)
        return pyto.run(kern, pyto.spec((m, n), "fp32"), mode="timing", check=False).pipe_cycles["M"]

    def predicted(dt):
        d = pyto.dtypes.as_dtype(dt)
        steps = math.ceil(m / 16) * math.ceil(n / 16) * math.ceil(k / (32 // d.itemsize))
        return steps * chip.cube_cycles_per_step[d.name] + chip.mmad_head_cycles

    fp8, fp16 = one_mmad(E4), one_mmad(pl.DT_FP16)
    assert fp8 == predicted(E4) and fp16 == predicted(pl.DT_FP16)
    assert fp8 / fp16 == pytest.approx(predicted(E4) / predicted(pl.DT_FP16), rel=1e-12)
    assert one_mmad(HF) == predicted(HF)
    assert chip.peak_flops("fp8e4m3fn") == pytest.approx(2 * chip.peak_flops("fp16") * chip.cube_cycles_per_step["fp16"]
                                                         / chip.cube_cycles_per_step["fp8e4m3fn"])


@pytest.mark.parametrize("dt", [E4, HF])
def test_cast_and_element_access_refuse_8_bit_floats(dt):
    """pl.cast builds no FP8 / HF8 conversion (not built: TCVT has some, cast.md); getval.md / setval.md exclude them."""
    @pl.jit
    def cast(x: pl.Tensor[[16, 32], pl.DT_FP32]):
        t = pl.make_tile(vec([16, 32], pl.DT_FP32), addr=0)
        u = pl.make_tile(vec([16, 32], dt), addr=0x1000)
        with pl.section_vector():
            pl.cast(u, t, mode=pl.RoundMode.CAST_RINT)
    with pytest.raises(pyto.ShapeError, match=rf"pl.cast from fp32 to {dt.name} is not a conversion pyto builds"):
        cast(np.zeros((16, 32), np.float32))

    @pl.jit
    def get(x: pl.Tensor[[16, 32], dt]):
        t = pl.make_tile(vec([16, 32], dt), addr=0)
        with pl.section_vector():
            pl.getval(t, 0)
    with pytest.raises(pyto.ShapeError, match=r"pl.getval on .* container: pl.getval.md does not support FP8E4M3FN, "
                                              r"FP8E5M2 or HF8"):
        get(FORMAT[dt].encode(np.zeros((16, 32))))


def test_the_chip_rules_take_the_8_bit_rates(tmp_path):
    """cube.fp8_cycles_per_step / hf8_cycles_per_step are optional keys with the other rates' rule."""
    src = pyto.load_chip("ascend950pr").source
    text = open(src, encoding="utf-8").read()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("fp8_cycles_per_step = 1 ", "fp8_cycles_per_step = 0 "), encoding="utf-8")
    with pytest.raises(pyto.ChipError, match=r"key 'cube.fp8_cycles_per_step' must be a positive finite number"):
        pyto.load_chip(bad)
    none = tmp_path / "none.toml"
    none.write_text("\n".join(line for line in text.splitlines() if not line.startswith(("fp8_", "hf8_"))),
                    encoding="utf-8")
    chip = pyto.load_chip(none)
    assert not chip.has_cube(pyto.dtypes.DType.hf8) and chip.has_cube(pyto.dtypes.DType.fp16)


# ---- a @pl.kernel's GM dtypes declared (Kernel.declare) -------------------------------------------------------------
@pl.kernel
def _alloc_matmul(a, b, c):
    M, K = a.shape
    N = b.shape[1]
    dt = pl.DT_HF8
    a_l1, b_l1 = pl.alloc(pl.L1, [M, K], dt), pl.alloc(pl.L1, [K, N], dt)
    a_l0a, b_l0b = pl.alloc(pl.L0A, [M, K], dt), pl.alloc(pl.L0B, [K, N], dt)
    c_l0c = pl.alloc(pl.L0C, [M, N], pl.DT_FP32)
    with pl.section_cube():
        pl.load(a_l1, a)
        pl.load(b_l1, b)
        pl.move(a_l0a, a_l1)
        pl.move(b_l0b, b_l1)
        pl.matmul(c_l0c, a_l0a, b_l0b)
        pl.store(c, c_l0c)


def test_a_declared_pl_kernel_reads_uint8_as_hf8():
    """Kernel.declare names a @pl.kernel's GM dtypes (numpy has no HF8): its uint8 arrays are HF8 codes, the product
    is the decoded one's; undeclared, the same bytes are uint8 and the HF8 tiles refuse them; one object per dtypes."""
    a, a64 = _operand(HF, (32, 64))
    b, b64 = _operand(HF, (64, 32))
    k = _alloc_matmul.declare((HF, HF, None))
    assert k is _alloc_matmul.declare((HF, HF, None)) and k.gm_dtypes() == [HF, HF, None]
    assert _alloc_matmul.gm_dtypes() == [None, None, None]
    c = np.zeros((32, 32), np.float32)
    pyto.run(k, a, b, c)
    assert np.all(np.abs(c - a64 @ b64) <= matmul_bound(a64, b64, np.float32))
    with pytest.raises(pyto.ShapeError, match="pl.load does not convert: GM tensor 'a' .* is uint8, L1 tile 'a_l1' is hf8"):
        pyto.run(_alloc_matmul, a, b, np.zeros((32, 32), np.float32))
    with pytest.raises(pyto.KernelError, match="takes 3 GM tensors, declare\\(\\) got 2"):
        _alloc_matmul.declare((HF, HF))
    with pytest.raises(pyto.KernelError, match="declares its GM dtypes by its annotations"):
        lowp_matmul(32, 64, 32, HF, HF).declare((HF, HF, None))
