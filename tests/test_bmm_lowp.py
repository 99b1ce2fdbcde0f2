"""BMM on the 950's 8-bit floats (issue 21, the BMM entry point): FP8 E4M3FN x E5M2 and HF8 x HF8 into fp32, MXFP8
with E8M0 scales (bmm(a, b, scale_a=, scale_b=)), each forced through every branch that takes it, against float64
numpy products of the decoded (and scaled) inputs; the planner's capacity decisions at 1-byte elements and with the
scale buffers; every refusal with its named error.

Tolerance. An FP8 or HF8 value has at most 4 significant bits and lies within 2^-22 .. 2^16 (E4M3 2^-9 .. 448, E5M2
2^-16 .. 57344, HF8 2^-22 .. 2^15), so a product of two has at most 8 significant bits and lies within 2^-44 .. 2^32:
exact in fp32 (24 bits, normal from 2^-126). MX multiplies each element by a power of two; the inputs below keep
every scaled element and product inside fp32's normal range, so those are exact too. Only the fp32 accumulation of
K terms rounds, in whatever order the branch adds them (K steps in L0C, StreamK's partials in the workspace): each
term meets at most K roundings, so |C - ref| <= gamma_K * (|A| @ |B|), gamma_K = K u / (1 - K u), u = 2^-24
(pyto.testing.matmul_bound with worst_case=True, plus the one rounding of an fp32 result, which is none here)."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyto
from pyto import lowp
from pyto.errors import PlanError, ShapeError, UnsupportedError
from pyto.testing import matmul_bound
from pyto_kernels.bmm import bmm, legal_branches, plan

RNG = np.random.default_rng(2124)
E4, E5, E8 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float8_e8m0fnu
CUBE = ("asw_basic", "iter_batch", "merge_batch", "stream_k")      # the branches that take FP8 (not ToMatmul)


def check(c, a64, b64):
    """c (fp32) against the float64 product within the worst-case fp32 accumulation bound (module docstring)."""
    ref = a64 @ b64
    assert c.dtype == np.float32 and c.shape == ref.shape
    bound = matmul_bound(np.broadcast_to(a64, ref.shape[:-2] + a64.shape[-2:]),
                         np.broadcast_to(b64, ref.shape[:-2] + b64.shape[-2:]), np.float32, worst_case=True)
    assert np.all(np.abs(c - ref) <= bound), float(np.max(np.abs(c - ref) - bound))


def fp8(shape, dtype, scale=1.0):
    """Random normal values rounded to an FP8 type (ml_dtypes' cast), and their exact float64 values."""
    x = (RNG.standard_normal(shape) * scale).astype(dtype)
    return x, x.astype(np.float64)


# ---- FP8 and HF8 --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("branch", CUBE + (None,))
def test_fp8_e4m3_x_e5m2_on_every_branch(branch):
    """A mix of the two FP8 types (B broadcast over A's batch for all but MergeBatch, which merges equal batches),
    fp32 out: each forced branch and the planner's choice."""
    (a, a64), (b, b64) = fp8((4, 48, 160), E4), fp8((4, 160, 72), E5, 4.0)
    c = bmm(a, b, branch=branch)
    check(c, a64, b64)


def test_fp8_batch_broadcast_transposed_operands():
    """E5M2 A stored [K, M] (transpose_a) x E4M3 B of batch 1 (broadcast), K not a multiple of 32 (fractal padding)."""
    (a, a64), (b, b64) = fp8((3, 100, 40), E5), fp8((1, 40, 90), E4)
    at = np.ascontiguousarray(np.swapaxes(a, -1, -2))
    for branch in ("asw_basic", "iter_batch"):
        check(bmm(at, b, transpose_a=True, branch=branch), a64, b64)


def test_fp8_with_an_fp32_bias_and_streamk_atomic():
    """A per-batch fp32 bias (BT, fp32, on the first MMAD; StreamK's workspace mode adds it in the AIV reduction),
    and StreamK's atomic reduction: the bias one more exact term of the fp32 sum."""
    (a, a64), (b, b64) = fp8((3, 40, 256), E5), fp8((3, 256, 24), E4)
    bias = RNG.standard_normal((3, 1, 24)).astype(np.float32)
    ones = np.ones((3, 40, 1))
    for branch, reduce in (("asw_basic", "workspace"), ("stream_k", "workspace"), ("stream_k", "atomic")):
        c = bmm(a, b, bias, branch=branch, reduce=reduce)
        check(c, np.concatenate([a64, ones], -1), np.concatenate([b64, bias.astype(np.float64)], -2))


def hf8_inputs(shape):
    """HF8 codes of values drawn from a set HF8 holds exactly (+-m * 2^e, m in 1, 1.5, 1.25, 1.75, e in -6..6: at
    most 3 significant bits inside HF8's 3-mantissa-bit range), and those float64 values themselves: the reference
    never decodes through pyto.lowp (the round trip is asserted, so a wrong encoding fails here)."""
    m = RNG.choice([1.0, 1.25, 1.5, 1.75], shape) * RNG.choice([-1.0, 1.0], shape)
    x = m * np.exp2(RNG.integers(-6, 7, shape))
    codes = lowp.HF8.encode(x)
    assert codes.dtype == np.uint8 and np.array_equal(lowp.HF8.decode(codes), x)
    return codes, x


@pytest.mark.parametrize("branch", CUBE)
def test_hf8_codes_named_by_dtype(branch):
    """HF8 x HF8: uint8 codes, which only dtype='hf8' makes HF8 (a uint8 array is uint8 otherwise)."""
    (a, a64), (b, b64) = hf8_inputs((4, 40, 96)), hf8_inputs((4, 96, 64))
    check(bmm(a, b, dtype="hf8", branch=branch), a64, b64)


def test_fp8_k1_goes_to_the_cube_and_k0_to_specials_fill():
    """K = 1 (Special's AIV outer product cannot read FP8): the cube branches; K = 0: Special's fill, fp32 zeros or
    the bias."""
    (a, a64), (b, b64) = fp8((128, 8, 1), E4), fp8((128, 1, 16), E4)      # B >= 2 x AIV: only the dtype fails
    p = plan(a.shape, b.shape, "fp8e4m3fn")
    assert p.branch != "special"
    assert "Special K=1 (dtype)" in p.explain()
    check(bmm(a, b), a64, b64)
    with pytest.raises(PlanError, match=r"Special K=1 \(dtype\)"):
        plan(a.shape, b.shape, "fp8e4m3fn", branch="special")
    z = np.zeros((2, 8, 0), E5), np.zeros((2, 0, 16), E5)
    bias = RNG.standard_normal(16).astype(np.float32)
    assert plan(z[0].shape, z[1].shape, "fp8e5m2").branch == "special"
    c = bmm(*z, bias)
    assert c.dtype == np.float32 and np.array_equal(c, np.broadcast_to(bias, (2, 8, 16)))


def test_fp8_timing_mode_from_specs():
    """pyto.spec operands (the planner's figures without data): (None, report), the cube ran."""
    out, rep = bmm(pyto.spec((8, 256, 512), "fp8e4m3fn"), pyto.spec((8, 512, 256), "fp8e5m2"))
    assert out is None and rep.pipe_cycles["M"] > 0


# ---- MXFP8 --------------------------------------------------------------------------------------------------------
def mx_inputs(a_shape, b_shape, da=E4, db=E5):
    """MX-quantised A [.., M, K] and B [.., K, N] (pyto.lowp.mx_quantize, OCP scales; rows of A and columns of B
    spread over 2^-4..2^4), their logical E8M0 scales [.., M, K/32] / [.., K/32, N] and the float64 operands decoded
    independently: ml_dtypes' FP8 values times 2^(code - 127) per 32-element group of K."""
    A = RNG.standard_normal(a_shape) * np.exp2(RNG.integers(-4, 5, a_shape[:-1] + (1,)))
    B = RNG.standard_normal(b_shape) * np.exp2(RNG.integers(-4, 5, b_shape[:-2] + (1, b_shape[-1])))

    def quant(X, axis, fmt):
        flat = X.reshape((-1,) + X.shape[-2:])
        q, s = zip(*[lowp.mx_quantize(x, axis, fmt) for x in flat])
        return np.stack(q).reshape(X.shape), np.stack(s).reshape(X.shape[:-2] + np.stack(s).shape[1:])

    qa, sa = quant(A, 1, "fp8e4m3fn" if da is E4 else "fp8e5m2")
    qb, sb = quant(B, 0, "fp8e4m3fn" if db is E4 else "fp8e5m2")
    ea = sa.view(np.uint8).astype(np.int64) - 127
    eb = sb.view(np.uint8).astype(np.int64) - 127
    a64 = qa.astype(np.float64) * np.exp2(np.repeat(ea, 32, axis=-1))
    b64 = qb.astype(np.float64) * np.exp2(np.repeat(eb, 32, axis=-2))
    return qa, qb, sa, sb, a64, b64


@pytest.mark.parametrize("branch", ("asw_basic", "iter_batch", "stream_k", None))
def test_mxfp8_on_every_branch_that_takes_it(branch):
    """E4M3 x E5M2 with scales, M and N tails (not multiples of the base tiles), forced branches and the planner."""
    qa, qb, sa, sb, a64, b64 = mx_inputs((2, 72, 192), (2, 192, 100))
    check(bmm(qa, qb, scale_a=sa, scale_b=sb, branch=branch), a64, b64)


def test_mxfp8_broadcast_transposed_and_held():
    """B of batch 1 broadcast (the scales follow their operand's batch), A stored [K, M]; IterBatch holds the
    operands whole in L1 (case a: the scale slabs held beside them), StreamK splits K (segments of whole groups)."""
    qa, qb, sa, sb, a64, b64 = mx_inputs((3, 40, 256), (1, 256, 48), E5, E4)
    at = np.ascontiguousarray(np.swapaxes(qa, -1, -2))
    for branch in ("asw_basic", "iter_batch", "stream_k"):
        check(bmm(at, qb, scale_a=sa, scale_b=sb, transpose_a=True, branch=branch), a64, b64)
    assert plan(at.shape, qb.shape, "fp8e5m2", transpose_a=True, dtype_b="fp8e4m3fn", mx=True,
                branch="iter_batch").tiling.resident == "AB"


def test_mxfp8_merge_batch():
    """MergeBatch merges b >= 2 batches per MMAD, their scales stacked like their data (M, N multiples of 32: no
    padding between the batches), and with a broadcast B."""
    for a_shape, b_shape in (((128, 32, 64), (128, 64, 32)), ((70, 32, 192), (1, 192, 64))):
        qa, qb, sa, sb, a64, b64 = mx_inputs(a_shape, b_shape)
        assert plan(qa.shape, qb.shape, "fp8e4m3fn", dtype_b="fp8e5m2", mx=True, branch="merge_batch").tiling.b >= 2
        check(bmm(qa, qb, scale_a=sa, scale_b=sb, branch="merge_batch"), a64, b64)


def test_the_scales_are_applied():
    """Scales read wrongly would not pass: scale_b with its groups in the other order gives another product."""
    qa, qb, sa, sb, a64, b64 = mx_inputs((1, 32, 128), (1, 128, 32))
    c = bmm(qa, qb, scale_a=sa, scale_b=sb[:, ::-1, :].copy())
    assert not np.all(np.abs(c - a64 @ b64) <= matmul_bound(a64, b64, np.float32, worst_case=True))


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.integers(1, 3), m=st.integers(1, 80), n=st.integers(1, 80), k=st.integers(1, 6).map(lambda g: 32 * g),
       b_broadcast=st.booleans(), branch=st.sampled_from(["asw_basic", "iter_batch", "stream_k", None]))
def test_mx_shapes(batch, m, n, k, b_broadcast, branch):
    """MX BMM over shapes, K a multiple of 32 (one scale group): K % 64 == 0 computes the scaled product on the
    branch (when legal there), any other K is the ShapeError naming the rule."""
    qa, qb, sa, sb, a64, b64 = mx_inputs((batch, m, k), (1 if b_broadcast else batch, k, n))
    if k % 64:
        with pytest.raises(ShapeError, match=r"K % 64 == 0"):
            bmm(qa, qb, scale_a=sa, scale_b=sb, branch=branch)
        return
    if branch is not None and branch not in legal_branches(qa.shape, qb.shape, "fp8e4m3fn", dtype_b="fp8e5m2",
                                                           mx=True):
        with pytest.raises(PlanError):
            plan(qa.shape, qb.shape, "fp8e4m3fn", dtype_b="fp8e5m2", mx=True, branch=branch)
        return
    check(bmm(qa, qb, scale_a=sa, scale_b=sb, branch=branch), a64, b64)


# ---- the planner's capacity decisions --------------------------------------------------------------------------
def test_l1_capacity_at_one_byte_and_with_the_scales():
    """IterBatch with one 256 x K x 256 batch per core: (M̄K̄ + K̄N̄)*dtype <= L1 decides whether both operands stay
    whole in L1 (case a). K = 768 fits at 1 byte (384 KB) but not at 2 (768 KB); K = 1024 fits FP8 exactly (512 KB)
    but not MXFP8, whose scales add 1/32 (16 KB): the plans differ, and each plan's buffer_use() stays in the chip's
    buffers with the scale bytes counted."""
    chip = pyto.load_chip("ascend950pr")
    a_shape, b_shape = (32, 256, 768), (32, 768, 256)
    p8 = plan(a_shape, b_shape, "fp8e4m3fn", branch="iter_batch")
    p16 = plan(a_shape, b_shape, "bf16", branch="iter_batch")
    both = (256 * 768 + 768 * 256)
    assert p8.tiling.resident == "AB" and p8.buffer_use()["L1"] == both * 1
    assert p16.tiling.resident != "AB" and p16.buffer_use()["L1"] < both * 2
    a_shape, b_shape = (32, 256, 1024), (32, 1024, 256)
    q8 = plan(a_shape, b_shape, "fp8e4m3fn", branch="iter_batch")
    qmx = plan(a_shape, b_shape, "fp8e4m3fn", branch="iter_batch", mx=True)
    assert q8.tiling.resident == "AB" and q8.buffer_use()["L1"] == chip.buffers["L1"]
    assert qmx.tiling.resident != "AB"
    use = qmx.buffer_use()
    for buf in ("L1", "L0A", "L0B", "L0A_MX", "L0B_MX"):
        assert use[buf] <= chip.buffers[buf]
    assert use["L0A_MX"] == use["L0A"] // 16 and use["L0B_MX"] == use["L0B"] // 16   # addr(scale) = addr(data) >> 4
    assert "MX: tilings derived on L1" in qmx.explain()


def test_mx_k_tiles_are_whole_scale_pairs():
    """Every K tile of an MX plan (base_k, k_l1, StreamK's segment) is a multiple of 64, and a researcher's tiling
    (Plan.with_tiling) must keep it so."""
    for branch in ("asw_basic", "iter_batch", "stream_k"):
        t = plan((1, 32, 4096 + 64), (1, 4096 + 64, 32), "fp8e4m3fn", branch=branch, mx=True).tiling
        for f in ("base_k", "k_l1", "single_core_k"):
            if hasattr(t, f):
                assert getattr(t, f) % 64 == 0, (branch, f, getattr(t, f))
    p = plan((2, 64, 256), (2, 256, 64), "fp8e4m3fn", mx=True, branch="asw_basic")
    assert p.with_tiling(base_k=128, k_l1=256).tiling.base_k == 128
    with pytest.raises(PlanError, match=r"base_k must be a multiple of 64 under MX"):
        p.with_tiling(base_k=32)


# ---- refusals -------------------------------------------------------------------------------------------------
def test_named_entry_conditions_exclude_the_branches_that_cannot():
    """ToMatmul (kernels/matmul.py's tile rules take no FP8) and MergeBatch under MX with padding rows between its
    merged batches (M not a multiple of 32): PlanError naming the condition, and the condition in explain()."""
    a_shape, b_shape = (4, 64, 128), (1, 128, 64)
    with pytest.raises(PlanError, match=r"ToMatmul dtype"):
        plan(a_shape, b_shape, "fp8e4m3fn", branch="to_matmul")
    assert "ToMatmul dtype" in plan(a_shape, b_shape, "hf8").explain()
    assert "to_matmul" not in legal_branches(a_shape, b_shape, "fp8e5m2")
    with pytest.raises(PlanError, match=r"MergeBatch MX: MX inputs: M = 40, M̄ = 64"):
        plan((64, 40, 64), (64, 64, 32), "fp8e4m3fn", branch="merge_batch", mx=True)
    assert "MergeBatch MX" in plan((64, 40, 64), (64, 64, 32), "fp8e4m3fn", mx=True).explain()


def test_mx_errors():
    qa, qb, sa, sb, _, _ = mx_inputs((1, 32, 128), (1, 128, 32))
    with pytest.raises(ShapeError, match=r"K % 64 == 0.*K = 96"):
        bmm(qa[..., :96], qb[:, :96], scale_a=sa[..., :3], scale_b=sb[:, :3])
    with pytest.raises(ShapeError, match=r"K % 64"):
        plan((32, 96), (96, 32), "fp8e4m3fn", mx=True)
    with pytest.raises(ShapeError, match=r"scale_b has shape \[1, 4, 16\].*\[1, 4, 32\]"):
        bmm(qa, qb, scale_a=sa, scale_b=sb[..., :16])
    with pytest.raises(ShapeError, match=r"scale_a has shape \[1, 4, 32\].*\[\*a_batch, M, K/32\]"):
        bmm(qa, qb, scale_a=np.swapaxes(sa, -1, -2).copy(), scale_b=sb)
    with pytest.raises(ShapeError, match=r"scale_a must be E8M0"):
        bmm(qa, qb, scale_a=sa.view(np.uint8), scale_b=sb)
    with pytest.raises(ShapeError, match=r"both scale_a and scale_b"):
        bmm(qa, qb, scale_a=sa)
    with pytest.raises(UnsupportedError, match=r"bias"):
        bmm(qa, qb, np.zeros(32, np.float32), scale_a=sa, scale_b=sb)
    with pytest.raises(ShapeError, match=r"MXFP8"):
        plan((32, 64), (64, 32), "hf8", mx=True)


def test_a2_and_a3_refuse_fp8_hf8_and_mx():
    """Atlas A2/A3 have no FP8/HF8 cube and no scale buffers: UnsupportedError naming the chip."""
    for chip in ("atlas-a2", "atlas-a3"):
        for dt in ("fp8e4m3fn", "hf8"):
            with pytest.raises(UnsupportedError, match=rf"chip {chip}'s cube has no {dt}"):
                plan((64, 64), (64, 64), dt, chip=chip)
        with pytest.raises(UnsupportedError, match=rf"chip {chip}"):
            bmm(pyto.spec((64, 64), "fp8e4m3fn"), pyto.spec((64, 64), "fp8e4m3fn"), chip=chip,
                scale_a=pyto.spec((64, 2), "fp8e8m0"), scale_b=pyto.spec((2, 64), "fp8e8m0"))


def test_dtype_errors():
    """An FP8 with a non-FP8 partner, HF8 with FP8, and dtype='hf8' on an array that is not uint8 codes."""
    a, _ = fp8((32, 64), E4)
    with pytest.raises(ShapeError, match=r"one dtype"):
        bmm(a, np.ones((64, 32), np.float16))
    with pytest.raises(ShapeError, match=r"one dtype"):
        bmm(pyto.spec((32, 64), "hf8"), pyto.spec((64, 32), "fp8e4m3fn"))
    with pytest.raises(ShapeError, match=r"dtype=hf8 names a's elements"):
        bmm(a, a.T.copy(), dtype="hf8")


def test_run_plan_and_api_check_on_lowp():
    """run_plan of an MX plan with the scales, and of an HF8 plan on uint8 codes; api.check decodes and scales the
    inputs itself (its own float64 reference) and refuses a result one group's scale off."""
    from pyto_kernels.bmm import run_plan
    from pyto_kernels.bmm.api import check as api_check
    qa, qb, sa, sb, a64, b64 = mx_inputs((2, 64, 128), (2, 128, 40))
    p = plan(qa.shape, qb.shape, "fp8e4m3fn", dtype_b="fp8e5m2", mx=True)
    c, rep = run_plan(p, qa, qb, scale_a=sa, scale_b=sb)
    check(c, a64, b64)
    assert api_check(c, qa, qb, scale_a=sa, scale_b=sb) == ""
    off = sb.copy()
    off.view(np.uint8)[0, 1, 0] += 1          # one group of B's first column twice as large
    assert api_check(c, qa, qb, scale_a=sa, scale_b=off) != ""
    with pytest.raises(ShapeError, match=r"run_plan"):
        run_plan(p, qa, qb)                    # the plan is MX, the call is not
    (a, a64), (b, b64) = hf8_inputs((2, 32, 64)), hf8_inputs((2, 64, 32))
    c, _ = run_plan(plan(a.shape, b.shape, "hf8"), a, b)
    check(c, a64, b64)
    assert api_check(c, a, b, dtype="hf8") == ""


def test_cli_bmm_on_fp8_and_hf8(capsys):
    """`pyto bmm --dtype fp8e5m2 / hf8`: planned, run and checked against float64 (HF8's codes decoded); the A2 chip
    refuses with the named error (exit 1)."""
    from pyto.cli import main
    assert main(["bmm", "2", "40", "48", "128", "--dtype", "fp8e5m2", "--bias", "--quiet"]) == 0
    assert main(["bmm", "2", "40", "48", "96", "--dtype", "hf8", "--batch-b", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.count("check: PASS (float64 numpy within matmul_bound)") == 2
    assert main(["bmm", "1", "32", "32", "64", "--dtype", "fp8e4m3fn", "--chip", "atlas-a2", "--quiet"]) == 1
    assert "chip atlas-a2's cube has no fp8e4m3fn mode" in capsys.readouterr().err


def test_cli_bmm_mx(capsys):
    """`pyto bmm --mx`: random MX-quantised inputs (api.random_mx_inputs), the scales through run_plan and the check;
    K % 64 refused by name."""
    from pyto.cli import main
    assert main(["bmm", "2", "40", "48", "128", "--dtype", "fp8e4m3fn", "--mx", "--transpose-a", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "(MX)" in out and "_mx_kernel on ascend950pr" in out
    assert "check: PASS (float64 numpy within matmul_bound)" in out
    assert main(["bmm", "1", "32", "32", "96", "--dtype", "fp8e4m3fn", "--mx", "--quiet"]) == 1
    assert "K % 64 == 0" in capsys.readouterr().err
