"""The vector examples in PyPTO-Pro's spelling (kernels/examples/softmax.py, layernorm.py) on several AIVs with
row and column tails: against float64 with bounds derived from each op chain, in timing mode with a trace, and
the refusals their docstrings promise. Measured: the worst |error| / bound is 0.9-1.0 in fp16 and bf16 (the output's
final rounding dominates, as it should), 0.04-0.2 in fp32; a softmax over one column too many or too few, a
sample variance or a missing beta exceed it."""
import ml_dtypes
import numpy as np
import pytest

import pyto
import pyto.language as pl
from pyto.testing import UNIT_ROUNDOFF, assert_close, read_trace
from pyto_kernels.examples.layernorm import EPS, layernorm_kernel
from pyto_kernels.examples.softmax import MAX_COLS, ROWS, softmax_kernel

BF16 = ml_dtypes.bfloat16
U32 = UNIT_ROUNDOFF[pl.DT_FP32]
PL = {np.float16: pl.DT_FP16, BF16: pl.DT_BF16, np.float32: pl.DT_FP32}

# (AIVs, rows, cols, dtype): row tails of 11, 3 (fewer rows than AIVs: some have none), 1 and 13; column counts
# of 37, 1, 200, MAX_COLS and 129 (none a multiple of 16 but the full width); AIVs with 2 and 3 blocks each
CASES = [(4, 75, 37, np.float16), (4, 3, 200, np.float16), (2, 97, MAX_COLS, np.float16), (3, 1, 1, np.float32),
         (8, 141, 129, BF16), (4, 61, 37, np.float32)]
IDS = [f"{a}aiv-{r}x{c}-{np.dtype(d).name}" for a, r, c, d in CASES]


def f64(x) -> np.ndarray:
    return np.asarray(x, np.float64)


def gamma(n: int) -> float:
    """Higham's gamma_n for fp32: a sum of n terms, in any order, is within gamma_n * sum|terms|."""
    return n * U32 / (1 - n * U32)


def rounding(y: np.ndarray, dt) -> np.ndarray:
    """The final rounding of a value |y| to the output dtype: half an ulp (u |y|) or, below the smallest normal,
    half the subnormal spacing; nothing for fp32 output (the fp32 chain's bound already ends there)."""
    if np.dtype(dt) == np.float32:
        return np.zeros_like(y)
    u = UNIT_ROUNDOFF[pyto.dtypes.as_dtype(dt)]
    return u * np.abs(y) + float(ml_dtypes.finfo(dt).smallest_subnormal) / 2


def data(rows: int, cols: int, dt, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (3.0 * rng.standard_normal((rows, cols))).astype(dt)


# ---- softmax --------------------------------------------------------------------------------------------------
def softmax_bound(x):
    """(float64 softmax of the kernel's own input, per-element bound on |kernel - it|).

    The widening cast is exact. In fp32: the row max is exact; x - m is one rounding, u32 |x - m| <= u32 spread in
    the exponent; exp within 2 u32 (a hardware unit's allowance; pyto's model is within u32). So every weight is
    exp(c_j) times the exact one, |c_j| <= g = u32 spread + 2 u32, and a softmax whose weights move by factors in
    [e^-g, e^g] moves each normalised weight by a factor in [e^-2g, e^2g]. The row sum of positive terms adds
    gamma_cols relative, the division u32. Then one rounding to the output dtype."""
    xd = f64(x)
    e = np.exp(xd - xd.max(axis=1, keepdims=True))
    y = e / e.sum(axis=1, keepdims=True)
    spread = xd.max(axis=1, keepdims=True) - xd.min(axis=1, keepdims=True)
    rel = np.expm1(2 * (U32 * spread + 2 * U32)) + gamma(x.shape[1]) + U32
    err32 = rel * y
    return y, err32 + rounding(y + err32, x.dtype)


@pytest.mark.parametrize("aivs,rows,cols,dt", CASES, ids=IDS)
def test_softmax_matches_float64(aivs, rows, cols, dt):
    x = data(rows, cols, dt, seed=rows * cols)
    y = np.full_like(x, np.nan)                  # every element must be written
    softmax_kernel(PL[dt])[None, aivs](x, y)
    ref, tol = softmax_bound(x)
    assert_close(y, ref, tol, f"softmax {rows}x{cols} {np.dtype(dt).name} on {aivs} AIVs")


def test_the_softmax_bound_rejects_a_stale_or_missing_column():
    """A row softmax that takes one column too many (a stale pad) or too few is far outside the bound."""
    x = data(75, 37, np.float16, seed=1)
    ref, tol = softmax_bound(x)
    for wrong in (np.concatenate([x, x[:, :1]], axis=1), x[:, :-1]):
        w, _ = softmax_bound(wrong)
        assert (np.abs(w[:, :36] - ref[:, :36]) > tol[:, :36]).mean() > 0.5


# ---- layernorm ------------------------------------------------------------------------------------------------
def layernorm_bound(x, g, b, eps: float = EPS):
    """(float64 layernorm of the kernel's own inputs, per-element bound on |kernel - it|).

    First order in the roundoffs, absolute errors per step of the kernel's fp32 chain (n = cols, c = x - mean):
      mean: a sum over n (gamma_n sum|x|), / n (u32):       dm <= gamma_n sum|x| / n + u32 |mean|
      c_j = fl(x_j - mean):                                 e_j <= dm + u32 (|c_j| + dm)
      c_j^2 (u32), their sum (gamma_n), / n, + eps (u32 each):
                                                            dv <= (sum 2|c_j| e_j + (u32 + gamma_n) sum c_j^2) / n
                                                                  + 2 u32 (var + eps)
      r = rsqrt(var + eps): 2 u32 relative (pyto's model u32) plus the input's dv / (2 (var + eps))
      y_j = fl(fl(c_j r) gamma_j) + beta_j: |g| (|r| e_j + |c_j r| (dr / r)) + u32 (2 |c_j r g| + |y_j|)
    then the rounding to the output dtype. gamma and beta are the kernel's own (rounded) inputs, widened exactly."""
    xd, gd, bd = f64(x), f64(g), f64(b)
    n = x.shape[1]
    mean = xd.mean(axis=1, keepdims=True)
    c = xd - mean
    var = (c * c).mean(axis=1, keepdims=True)
    r = 1.0 / np.sqrt(var + eps)
    y = c * r * gd + bd
    dm = gamma(n) * np.abs(xd).sum(axis=1, keepdims=True) / n + U32 * np.abs(mean)
    e = dm + U32 * (np.abs(c) + dm)
    dv = ((2 * np.abs(c) * e).sum(axis=1, keepdims=True) + (U32 + gamma(n)) * (c * c).sum(axis=1, keepdims=True)) / n \
        + 2 * U32 * (var + eps)
    dr_rel = 2 * U32 + dv / (2 * (var + eps))
    err32 = np.abs(gd) * (r * e + np.abs(c) * r * dr_rel) + U32 * (2 * np.abs(c * r * gd) + np.abs(y))
    return y, err32 + rounding(np.abs(y) + err32, x.dtype)


def affine(cols: int, dt, seed: int):
    rng = np.random.default_rng(seed)
    return rng.uniform(0.5, 2.0, (1, cols)).astype(dt), rng.standard_normal((1, cols)).astype(dt)


@pytest.mark.parametrize("aivs,rows,cols,dt", CASES, ids=IDS)
def test_layernorm_matches_float64(aivs, rows, cols, dt):
    x = (data(rows, cols, dt, seed=rows + cols).astype(np.float64) + 5.0).astype(dt)      # a mean to take out
    g, b = affine(cols, dt, seed=cols)
    y = np.full_like(x, np.nan)
    layernorm_kernel(PL[dt])[None, aivs](x, g, b, y)
    ref, tol = layernorm_bound(x, g, b)
    assert_close(y, ref, tol, f"layernorm {rows}x{cols} {np.dtype(dt).name} on {aivs} AIVs")


def test_the_layernorm_bound_rejects_the_sample_variance_and_a_missing_beta():
    x = data(75, 37, np.float16, seed=2)
    g, b = affine(37, np.float16, seed=3)
    ref, tol = layernorm_bound(x, g, b)
    xd = f64(x)
    c = xd - xd.mean(axis=1, keepdims=True)
    sample = c / np.sqrt((c * c).sum(axis=1, keepdims=True) / 36 + EPS) * f64(g) + f64(b)
    assert (np.abs(sample - ref) > tol).mean() > 0.3
    assert (np.abs(ref - f64(b) - ref) > tol).mean() > 0.9


def test_layernorm_eps_is_a_kernel_parameter():
    x = np.zeros((5, 20), np.float32) + np.float32(1.0)           # var = 0: y = beta whatever eps
    x[:, ::2] += np.float32(1e-3)
    g, b = affine(20, np.float32, seed=4)
    y1, y2 = np.zeros_like(x), np.zeros_like(x)
    layernorm_kernel(pl.DT_FP32, 1e-5)[None, 2](x, g, b, y1)
    layernorm_kernel(pl.DT_FP32, 1.0)[None, 2](x, g, b, y2)
    for y, eps in ((y1, 1e-5), (y2, 1.0)):
        ref, tol = layernorm_bound(x, g, b, eps)
        assert_close(y, ref, tol, f"layernorm eps={eps}")
    assert not np.allclose(y1, y2)


# ---- timing mode, refusals ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("example", ["softmax", "layernorm"])
def test_in_timing_mode_with_a_trace(example, tmp_path):
    """Shapes only: the same schedule as the data run; every AIV with rows loads, computes and stores, and the
    double-buffered load of the next block overlaps the vector work on the current one."""
    aivs, rows, cols = 4, 141, 129
    blocks = -(-rows // ROWS)
    if example == "softmax":
        kernel, shapes = softmax_kernel(pl.DT_FP16), [(rows, cols), (rows, cols)]
    else:
        kernel, shapes = layernorm_kernel(pl.DT_FP16), [(rows, cols), (1, cols), (1, cols), (rows, cols)]
    rep = kernel[None, aivs](*[pyto.spec(s, "fp16") for s in shapes])
    assert rep.mode == "timing" and rep.cycles > 0
    rep.save_trace(str(tmp_path / f"{example}.json.gz"))
    cores, spans = read_trace(tmp_path / f"{example}.json.gz")
    assert len(spans) == rep.instructions
    loads = [e for e in spans if "pl.load(xs" in e["args"]["line"]]
    stores = [e for e in spans if "pl.store(y" in e["args"]["line"]]
    assert len(loads) == len(stores) == blocks
    assert {cores[e["pid"]] for e in loads} == {cores[e["pid"]] for e in stores} and \
        len({cores[e["pid"]] for e in loads}) == aivs
    for pid in {e["pid"] for e in loads}:       # double buffering: a core's 2nd load is issued before its 1st store
        mine = sorted((e["ts"] for e in loads if e["pid"] == pid))
        if len(mine) > 1:
            assert mine[1] < min(e["ts"] for e in stores if e["pid"] == pid)
    inputs = [data(*s, np.float16, seed=5) for s in shapes]
    assert kernel[None, aivs](*inputs).cycles == rep.cycles         # timing does not see data


def test_refusals_name_the_limit():
    with pytest.raises(pyto.ShapeError, match=r"softmax_kernel computes fp16, bf16 or fp32 tensors, not pl\.DT_INT8"):
        softmax_kernel(pl.DT_INT8)
    x = np.zeros((4, MAX_COLS + 1), np.float16)
    with pytest.raises(pyto.KernelError, match=rf"softmax\.py:\d+ .*softmax rows are 1\.\.{MAX_COLS} wide \(one tile\), "
                                               rf"x has {MAX_COLS + 1} columns"):
        softmax_kernel(pl.DT_FP16)[None, 2](x, np.zeros_like(x))
    x = np.zeros((4, 8), np.float16)
    g, b = affine(9, np.float16, seed=6)
    with pytest.raises(pyto.KernelError, match=r"layernorm\.py:\d+ .*gamma \[1, 9\] and beta \[1, 9\] must be \[1, 8\]"):
        layernorm_kernel(pl.DT_FP16)[None, 2](x, g, b, np.zeros_like(x))
