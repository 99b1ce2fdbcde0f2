"""MXFP4 through the BMM entry point (issue 21): `bmm(a, b, scale_a=, scale_b=, dtype="fp4e2m1")` on packed uint8
operands (PyPTO-Pro's FP4 GM tensors: element 2i in the low nibble of byte i along the stored last axis; A
[.., M, K/2] or [.., K, M/2] with transpose_a, B [.., K, N/2] or [.., N, K/2] with transpose_b), on every legal
forced branch, against a float64 reference written here: the codes decoded by ml_dtypes' float4_e2m1fn (E2M1) or from
their bit fields (E1M2), times 2^(scale - 127) per 32-element group of K; the planner's capacity decisions at half a
byte an element; the named refusals.

Inputs: uniformly random 4-bit codes (all 16) and E8M0 scales in 118..136, so every scaled element (at most 6 x 2^9)
and every product of two is normal in fp32, hence exact: only the fp32 accumulation rounds, within
pyto.testing.matmul_bound of the dequantised float64 operands."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyto
from pyto.testing import matmul_bound
from pyto_kernels.bmm import bmm, legal_branches, plan
from pyto_kernels.bmm.api import check, run_plan

E2, E1 = "fp4e2m1", "fp4e1m2"
PAIRS = [(E2, E2), (E2, E1), (E1, E2), (E1, E1)]
IDS = ["e2m1xe2m1", "e2m1xe1m2", "e1m2xe2m1", "e1m2xe1m2"]


# ---- an independent decoder, packer and reference ---------------------------------------------------------------
def decode(codes, dtype):
    """float64 values of 4-bit codes: E2M1 through ml_dtypes.float4_e2m1fn; E1M2 from its fields (sign bit 3,
    exponent bit 2, mantissa bits 1..0, bias 1; exponent 0 subnormal: m/4)."""
    c = np.asarray(codes, np.uint8)
    if dtype == E2:
        return c.view(ml_dtypes.float4_e2m1fn).astype(np.float64)
    e, m = (c >> 2) & 1, c & 3
    mag = np.where(e == 0, m / 4.0, 1 + m / 4.0)
    return np.where(c >> 3, -mag, mag)


def test_the_decoder_is_the_formats():
    codes = np.arange(16)
    assert decode(codes, E2).tolist() == [0, .5, 1, 1.5, 2, 3, 4, 6, -0.0, -.5, -1, -1.5, -2, -3, -4, -6]
    assert decode(codes, E1).tolist() == [0, .25, .5, .75, 1, 1.25, 1.5, 1.75, 0, -.25, -.5, -.75, -1, -1.25, -1.5,
                                          -1.75]


def pack(codes):
    """(..., L) codes -> (..., L/2) bytes, element 2i in bits 0..3 (test_matmul_mx.py's _pack_fp4)."""
    c = np.asarray(codes, np.uint8)
    return (c[..., 0::2] | (c[..., 1::2] << 4)).astype(np.uint8)


def e8m0(x):
    return np.asarray(x, np.uint8).view(ml_dtypes.float8_e8m0fnu)


def inputs(a_batch, b_batch, M, K, N, da, db, ta=False, tb=False, seed=0):
    """(a, b packed as stored, scale_a, scale_b, A and B dequantised in float64 [.., M, K] / [.., K, N])."""
    rng = np.random.default_rng(seed)
    qa, qb = rng.integers(0, 16, a_batch + (M, K)), rng.integers(0, 16, b_batch + (K, N))
    sa, sb = rng.integers(118, 137, a_batch + (M, K // 32)), rng.integers(118, 137, b_batch + (K // 32, N))
    a64 = decode(qa, da) * np.exp2(np.repeat(sa - 127.0, 32, axis=-1))
    b64 = decode(qb, db) * np.exp2(np.repeat(sb - 127.0, 32, axis=-2))
    a = pack(np.swapaxes(qa, -1, -2) if ta else qa)
    b = pack(np.swapaxes(qb, -1, -2) if tb else qb)
    return a, b, e8m0(sa), e8m0(sb), a64, b64


def assert_matches(c, a64, b64):
    """c (fp32) within the fp32 accumulation bound of the float64 product of the dequantised operands."""
    ref = a64 @ b64
    assert c.dtype == np.float32 and c.shape == ref.shape
    assert np.all(np.abs(c - ref) <= matmul_bound(a64, b64, np.float32)), np.max(np.abs(c - ref))


# ---- results on every legal branch -------------------------------------------------------------------------------
SHAPES = [  # (a_batch, b_batch, M, K, N, transpose_a, transpose_b)
    ((2,), (2,), 100, 192, 70, False, False),       # M, N tails
    ((2,), (2,), 128, 256, 96, False, True),        # B [N, K/2]: PyPTO-Pro's device test's B
    ((2,), (2,), 96, 128, 64, True, False),         # A [K, M/2] through Dn2Nz
    ((3,), (1,), 64, 256, 80, False, False),        # B broadcast
    ((1,), (2,), 48, 128, 128, True, True),         # A broadcast, both transposed
]


@pytest.mark.parametrize("da,db", PAIRS, ids=IDS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:5])) + f"-t{int(s[5])}{int(s[6])}")
def test_mxfp4_bmm_on_every_legal_branch(shape, da, db):
    ab, bb, M, K, N, ta, tb = shape
    a, b, sa, sb, a64, b64 = inputs(ab, bb, M, K, N, da, db, ta, tb)
    branches = legal_branches(a.shape, b.shape, da, dtype_b=db, mx=True, transpose_a=ta, transpose_b=tb)
    assert {"asw_basic", "iter_batch", "stream_k"} <= set(branches) and "merge_batch" not in branches
    for branch in branches:
        c, rep = bmm(a, b, scale_a=sa, scale_b=sb, dtype=(da, db), branch=branch, transpose_a=ta, transpose_b=tb,
                     report=True)
        assert_matches(c, a64, b64)
        assert rep.kernel == f"{branch}_mx_kernel"
        # the entry point's own check agrees (its decoder is pyto.lowp's)
        assert check(c, a, b, transpose_a=ta, transpose_b=tb, dtype=(da, db), scale_a=sa, scale_b=sb) == ""


def test_one_dtype_names_both_and_the_planner_picks():
    a, b, sa, sb, a64, b64 = inputs((2,), (2,), 64, 128, 64, E2, E2)
    assert_matches(bmm(a, b, scale_a=sa, scale_b=sb, dtype=E2), a64, b64)


def test_the_check_fails_on_a_wrong_result():
    """Nibbles swapped in A (element 2i read as 2i+1) give another product, which the reference tells apart."""
    a, b, sa, sb, a64, b64 = inputs((1,), (1,), 64, 128, 64, E2, E1)
    swapped = ((a >> 4) | (a << 4)).astype(np.uint8)
    c = bmm(swapped, b, scale_a=sa, scale_b=sb, dtype=(E2, E1))
    assert not np.all(np.abs(c - a64 @ b64) <= matmul_bound(a64, b64, np.float32))
    assert check(c, a, b, dtype=(E2, E1), scale_a=sa, scale_b=sb) != ""


def test_plan_and_run_plan_take_the_stored_shapes():
    """plan() on the packed arrays' shapes plans the logical problem; run_plan runs it; timing mode on pyto.spec."""
    a, b, sa, sb, a64, b64 = inputs((2,), (2,), 64, 256, 96, E1, E2, tb=True)
    p = plan(a.shape, b.shape, E1, dtype_b=E2, mx=True, transpose_b=True)
    assert (p.problem.M, p.problem.K, p.problem.N) == (64, 256, 96)
    assert "fp4e1m2 x fp4e2m1 (MX)" in p.summary()
    c, _ = run_plan(p, a, b, scale_a=sa, scale_b=sb)
    assert_matches(c, a64, b64)
    out, rep = bmm(pyto.spec(a.shape, E1), pyto.spec(b.shape, E2), scale_a=pyto.spec(sa.shape, "fp8e8m0"),
                   scale_b=pyto.spec(sb.shape, "fp8e8m0"), transpose_b=True)
    assert out is None and rep.pipe_cycles["M"] > 0


# ---- capacity at half a byte an element ---------------------------------------------------------------------------
def test_iter_batch_holds_both_operands_at_4_bits_where_mxfp8_streams_one():
    """A [256, 1024] and B [1024, 256]: 512 KB at 8 bits exceed MXFP8's data budget (L1 x 32/33 = 507904 B), so
    IterBatch's case (a) fails and it streams K (case c); at 4 bits they are 256 KB plus 16 KB of scales (1/16 of
    FP4's bytes) within L1 x 16/17 = 492544 B: both held whole (a)."""
    dims = ((1, 256, 1024), (1, 1024, 256))
    p8 = plan(*dims, "fp8e4m3fn", mx=True, branch="iter_batch")
    p4 = plan((1, 256, 512), (1, 1024, 128), E2, mx=True, branch="iter_batch")
    assert (p8.tiling.case, p4.tiling.case, p4.tiling.resident) == ("c", "a", "AB")
    assert "IterBatch 3a: " in p8.explain() and "= 524288 B <= L1 507904 B [no]" in p8.explain()
    assert "= 262144 B <= L1 492544 B [yes]  -> holds" in p4.explain() and "L1 x 16/17" in p4.explain()
    data4 = (256 * 1024 + 1024 * 256) // 2
    assert p4.buffer_use()["L1"] == data4 + data4 // 16
    assert p8.buffer_use()["L1"] < 2 * data4        # MXFP8 holds less than both operands' 512 KB
    a, b, sa, sb, a64, b64 = inputs((1,), (1,), 256, 1024, 256, E2, E2)
    assert_matches(run_plan(p4, a, b, scale_a=sa, scale_b=sb)[0], a64, b64)


def test_tiles_are_whole_64_element_fractals():
    """MXFP4's M / N tiles are multiples of 64 (its 16 x 64 fractals pad both axes to 64) and K tiles of 64; L0A /
    L0B at half a byte an element, their scale spans 1/16 of them (addr(scale) = addr(data) >> 4)."""
    p = plan((4, 200, 384), (4, 768, 100), E2, mx=True)
    t = p.tiling
    assert p.problem.mn_align == 64 and p.problem.k0 == 64
    assert t.base_m % 64 == 0 and t.base_n % 64 == 0 and t.base_k % 64 == 0
    use = p.buffer_use()
    assert use["L0A"] == t.l0_buffers * t.base_m * t.base_k // 2 and use["L0A_MX"] == use["L0A"] // 16


# ---- refusals -------------------------------------------------------------------------------------------------------
def test_merge_batch_is_excluded_by_a_named_entry_condition():
    a, b, sa, sb, *_ = inputs((64,), (64,), 64, 128, 64, E2, E2)
    p = plan(a.shape, b.shape, E2, mx=True)
    assert "MergeBatch FP4: " in p.explain() and "nd_num" in p.explain()
    with pytest.raises(pyto.PlanError, match=r"merge_batch fails MergeBatch FP4: fp4e2m1 \(MX\) inputs: the merged "
                                             r"load is one pl.load with nd_num"):
        bmm(a, b, scale_a=sa, scale_b=sb, dtype=E2, branch="merge_batch")


def test_the_errors():
    a, b, sa, sb, *_ = inputs((1,), (1,), 64, 128, 64, E2, E2)
    with pytest.raises(pyto.ShapeError, match=r"FP4 \(fp4e2m1\) is a cube input of the MX matmul only"):
        bmm(a, b, dtype=E2)
    with pytest.raises(pyto.ShapeError, match=r"a and b must have one dtype \(or be FP8 E4M3FN / E5M2, or FP4 E2M1 / "
                                              r"E1M2, in any mix\)"):
        bmm(a, np.zeros((1, 128, 64), ml_dtypes.float8_e4m3fn), scale_a=sa, scale_b=sb, dtype=(E2, "fp8e4m3fn"))
    with pytest.raises(pyto.ShapeError, match=r"dtype=fp4e2m1 names a's elements, but a is stored as fp32 \(fp4e2m1 is "
                                              r"stored as uint8"):
        bmm(a.astype(np.float32), b, scale_a=sa, scale_b=sb, dtype=E2)
    with pytest.raises(pyto.ShapeError, match=r"scale_b has shape \[1, 4, 64\].*\(M = 64, K = 128, N = 128\) need "
                                              r"scale_b \[\*b_batch, K/32, N\] = \[1, 4, 128\]"):
        bmm(a, np.concatenate([b, b], -1), scale_a=sa, scale_b=sb, dtype=E2)   # B read as N = 128
    with pytest.raises(pyto.ShapeError, match=r"K mismatch: A \(1, 64, 128\) has K = 128, B \(1, 64, 64\) has K = 64"):
        bmm(a, b[:, :64], scale_a=sa, scale_b=sb, dtype=E2)
    with pytest.raises(pyto.ShapeError, match=r"dtype= takes one dtype or a pair"):
        bmm(a, b, scale_a=sa, scale_b=sb, dtype=(E2, E2, E2))
    with pytest.raises(pyto.UnsupportedError, match=r"chip atlas-a2 has no MX cube|atlas-a2's cube has no fp4e2m1"):
        plan(a.shape, b.shape, E2, mx=True, chip="atlas-a2")


@settings(max_examples=8)
@given(groups=st.integers(1, 6), m=st.integers(1, 80), n=st.integers(1, 40).map(lambda h: 2 * h))
def test_shapes(groups, m, n):
    """K = 32 * groups: a multiple of 64 computes on the planner's branch, any other K is the named ShapeError."""
    K = 32 * groups
    a, b, sa, sb, a64, b64 = inputs((1,), (1,), m, K, n, E2, E1)
    if K % 64:
        with pytest.raises(pyto.ShapeError, match=rf"MX needs K % 64 == 0 .* got K = {K}"):
            bmm(a, b, scale_a=sa, scale_b=sb, dtype=(E2, E1))
        return
    assert_matches(bmm(a, b, scale_a=sa, scale_b=sb, dtype=(E2, E1)), a64, b64)


def test_cli_bmm_and_plan_on_mxfp4(capsys):
    """`pyto bmm --dtype fp4e1m2 --mx`: MX-quantised random inputs packed as stored, run and checked; `pyto plan`
    shows the FP4 entry condition; FP4 without --mx exits 1 naming the rule."""
    from pyto.cli import main
    assert main(["bmm", "2", "40", "48", "128", "--dtype", "fp4e1m2", "--mx", "--transpose-b", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "fp4e1m2 (MX)" in out and "_mx_kernel on ascend950pr" in out
    assert "check: PASS (float64 numpy within matmul_bound)" in out
    assert main(["plan", "64", "64", "64", "128", "--dtype", "fp4e2m1", "--mx"]) == 0
    assert "MergeBatch FP4: " in capsys.readouterr().out
    assert main(["bmm", "1", "32", "32", "64", "--dtype", "fp4e2m1", "--quiet"]) == 1
    assert "FP4 (fp4e2m1) is a cube input of the MX matmul only" in capsys.readouterr().err


def test_k_zero_is_special_s_fill():
    """K = 0 (a multiple of 64): no MMAD, Special writes fp32 zeros."""
    a, b = np.zeros((2, 64, 0), np.uint8), np.zeros((2, 0, 32), np.uint8)
    sa, sb = e8m0(np.zeros((2, 64, 0))), e8m0(np.zeros((2, 0, 64)))
    p = plan(a.shape, b.shape, E2, mx=True)
    c = bmm(a, b, scale_a=sa, scale_b=sb, dtype=E2)
    assert p.branch == "special" and c.shape == (2, 64, 64) and c.dtype == np.float32 and not c.any()


@pytest.mark.parametrize("full_load", ["A", "B"])
def test_asw_full_load_holds_an_fp4_operand_and_its_scales(full_load):
    """ASW_Basic's L1 full load (a caller's tiling, Plan.with_tiling): the held FP4 slab and its E8M0 scales."""
    M, N = (64, 256) if full_load == "A" else (256, 64)
    a, b, sa, sb, a64, b64 = inputs((1,), (1,), M, 512, N, E1, E2)
    p = plan(a.shape, b.shape, E1, dtype_b=E2, mx=True, branch="asw_basic")
    q = p.with_tiling(full_load=full_load, **{"base_m" if full_load == "A" else "base_n": 64})
    assert q.tiling.full_load == full_load
    assert_matches(run_plan(q, a, b, scale_a=sa, scale_b=sb)[0], a64, b64)
