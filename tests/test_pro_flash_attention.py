"""Flash-attention forward in PyPTO-Pro's spelling (kernels/examples/flash_attention_pro.py) on 4 and 8 blocks,
query and KV tails: against float64 with a bound derived from the op chain, in timing mode with a trace, and the
mistakes it is built to show (a skipped rescale fails the bound, a missing cross-core wait races, a missing set
deadlocks, a missing flag before the store races)."""

import ml_dtypes
import numpy as np
import pytest

import pyto
import pyto.language as pl
from pyto.testing import UNIT_ROUNDOFF, assert_close, assert_deadlock, assert_race, matmul_bound, read_trace
from pyto_kernels.examples.flash_attention_pro import SCALE, TD, TKV, TS, build, flash_attention_pro

BF16 = ml_dtypes.bfloat16
U32 = UNIT_ROUNDOFF[pl.DT_FP32]
KERNELS = {np.float16: flash_attention_pro, BF16: build(dtype=pl.DT_BF16)}


def f64(x) -> np.ndarray:
    return np.asarray(x, np.float64)


def gamma(n: int) -> float:
    """Higham's gamma_n for fp32: a sum of n terms, in any order, is within gamma_n * sum|terms|."""
    return n * U32 / (1 - n * U32)


def inputs(S: int, N: int, dt, seed: int):
    """q of twice the scale of k and v: scores x = SCALE q k^T of a few units, a peaked softmax whose row maxima
    fall in different KV blocks (so the online rescale matters)."""
    rng = np.random.default_rng(seed)
    q = (2.0 * rng.standard_normal((S, TD))).astype(dt)
    k = rng.standard_normal((N, TD)).astype(dt)
    v = rng.standard_normal((N, TD)).astype(dt)
    return q, k, v, np.zeros((S, TD), dt)


def reference(q, k, v):
    """float64 softmax(SCALE q k^T) v of the kernel's own (rounded) inputs, the softmax A and the scores x."""
    x = SCALE * (f64(q) @ f64(k).T)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    a = e / e.sum(axis=1, keepdims=True)
    return a @ f64(v), a, x


def bound(q, k, v):
    """(reference, per-element bound on |kernel - reference|) for the kernel's op chain.

    The inputs are the same in both, so their rounding is no error. u is the unit roundoff of the input/output
    dtype (fp16 2^-11, bf16 2^-8), u32 = 2^-24; row i, key j; A the exact softmax, O = A V, nb the KV blocks.
      1. Scores. S = q k^T on the cube in fp32: |dS| <= matmul_bound(q, k^T, fp32) (D = TD products, exact in fp32
         for fp16/bf16). x = fl(SCALE * S): SCALE an fp32 immediate and one rounding, 2 u32 |x|. So |dx_ij| <=
         delta_i = max_j (SCALE |dS_ij| + 2 u32 |x_ij|).
      2. Weights perturbed alike in numerator and denominator: p = exp(fl(x - m_j)) against the running max m_j
         (max is exact; the subtraction u32 |x - m_j| <= u32 spread_i in the exponent; exp within 2 u32, the
         hardware's allowance: pyto's is within u32), then scaled by each later block's alpha = exp(fl(m_old -
         m_new)) (the exponents' errors telescope to <= u32 spread_i, each exp within 2 u32). o and l take the
         same alpha tile, and the row sum the same fp32 p as the cast, so key j's weight is exp(c_ij) times the
         exact one in both, |c_ij| <= g_i = delta_i + u32 (2 spread_i + 2 nb + 2). A softmax whose weights move by
         factors in [e^-g, e^g] moves each normalised weight by a factor in [e^-2g, e^2g]: |dO| <= expm1(2 g) A|V|.
      3. P rounded to the dtype before the PV matmul, the numerator only: <= u A|V| (normal p); a p below the
         smallest normal (fp16: 2^-14) is off by <= half the subnormal spacing, and l >= 1 (the row's maximum
         enters as exp(0) = 1 and later alphas are exp(0) = 1), so these add <= sub sum_j |V_j|.
      4. P V on the cube per KV block: matmul_bound(A_b, V_b, fp32) in normalised terms (the error is relative to
         sum p |V|, and alpha and 1/l scale both alike).
      5. fp32 on the vector unit: the row sum over <= TKV keys (gamma_TKV relative, all terms >= 0), then per
         later block l = alpha l + rowsum and o = alpha o + pv, two roundings each (2 nb u32 for l, 2 nb u32 for
         o), and o / l (u32): eps32 = gamma_TKV + 4 nb u32 + u32, relative to A|V|.
      6. The output rounded to the dtype: u |O| + half its smallest subnormal; (1 + u) on the rest covers the
         rounding of the perturbed value.
    Products of two of these relative errors (O(u^2), below u = 5e-4 of the bound for fp16) are left out. Terms 3
    and 6 dominate (expm1(2 g) and eps32 are ~1e-5 here). Measured (the cases below): the worst |error| / bound
    is 0.3-0.6; a kernel that skips o's rescale by alpha, or the tail KV block, exceeds it hundreds of times.
    """
    dt = np.dtype(q.dtype)
    u = UNIT_ROUNDOFF[pyto.dtypes.as_dtype(dt)]
    sub = float(ml_dtypes.finfo(dt).smallest_subnormal) / 2
    o, a, x = reference(q, k, v)
    N = k.shape[0]
    nb = -(-N // TKV)
    av = a @ np.abs(f64(v))
    delta = (SCALE * matmul_bound(q, k.T, np.float32) + 2 * U32 * np.abs(x)).max(axis=1, keepdims=True)
    spread = x.max(axis=1, keepdims=True) - x.min(axis=1, keepdims=True)
    g = delta + U32 * (2 * spread + 2 * nb + 2)
    pv = sum(matmul_bound(a[:, b:b + TKV], v[b:b + TKV], np.float32) for b in range(0, N, TKV))
    eps32 = gamma(TKV) + 4 * nb * U32 + U32
    err_o = (np.expm1(2 * g) + u + eps32) * av + pv + sub * np.abs(f64(v)).sum(axis=0, keepdims=True)
    return o, (1 + u) * err_o + u * np.abs(o) + sub


# (blocks, S, N, dtype): S tails of 1 row (AIV1 gets none), 8, 41 (odd: 21 + 20 rows) and 52; KV tails of 8 and 2,
# N below one block, N a multiple of TKV
CASES = [(4, 257, 200, np.float16), (4, 200, 384, np.float16), (8, 449, 50, np.float16),
         (8, 500, 256, np.float16), (4, 233, 130, BF16)]


@pytest.mark.parametrize("blocks,S,N,dt", CASES, ids=[f"{b}blk-S{s}-N{n}-{np.dtype(d).name}" for b, s, n, d in CASES])
def test_flash_attention_matches_float64(blocks, S, N, dt):
    q, k, v, out = inputs(S, N, dt, seed=S + N)
    KERNELS[dt][None, blocks](q, k, v, out)
    ref, tol = bound(q, k, v)
    assert_close(out, ref, tol, f"flash_attention_pro S={S} N={N} on {blocks} blocks")
    if N > TKV:     # the online rescale ran: some rows' maxima lie beyond the first KV block, some inside it
        first = (f64(q) @ f64(k).T).argmax(axis=1) < TKV
        assert first.any() and not first.all()


def test_the_bound_rejects_a_dropped_kv_block():
    """The attention without the 8-key tail block (or the first block) is far outside the bound."""
    q, k, v, _ = inputs(257, 200, np.float16, seed=457)
    ref, tol = bound(q, k, v)
    for keep in (slice(0, 192), slice(TKV, 200)):
        wrong, _, _ = reference(q, k[keep], v[keep])
        assert (np.abs(wrong - ref) > tol).mean() > 0.3


def test_skipping_the_alpha_rescale_fails_the_bound():
    q, k, v, out = inputs(257, 200, np.float16, seed=457)
    build(rescale=False)[None, 4](q, k, v, out)
    ref, tol = bound(q, k, v)
    with pytest.raises(AssertionError, match="elements beyond the bound"):
        assert_close(out, ref, tol)
    assert (np.abs(f64(out) - ref) / tol).max() > 100


def test_timing_mode_with_a_trace(tmp_path):
    S, N, blocks = 449, 200, 8
    specs = [pyto.spec((S, TD), "fp16"), pyto.spec((N, TD), "fp16"), pyto.spec((N, TD), "fp16"),
             pyto.spec((S, TD), "fp16")]
    rep = flash_attention_pro[None, blocks](*specs)
    assert rep.mode == "timing" and rep.cycles > 0
    rep.save_trace(str(tmp_path / "fa.json.gz"))
    cores, spans = read_trace(tmp_path / "fa.json.gz")
    assert len(spans) == rep.instructions
    pipes = {}
    for e in spans:
        pipes.setdefault(cores[e["pid"]].split()[-1], set()).add(e["cat"])
    assert {"MTE2", "MTE1", "M", "FIX"} <= pipes["AIC"]
    assert {"V", "MTE3"} <= pipes["AIV0"] and {"V", "MTE3"} <= pipes["AIV1"]
    q_tiles, kv_tiles = -(-S // TS), -(-N // TKV)
    fix = [e for e in spans if e["cat"] == "FIX" and e["name"].startswith("pl.move")]
    assert len(fix) == 2 * q_tiles * kv_tiles                     # S and PV out of Acc, each tile and block
    inserts = [e for e in spans if e["cat"] == "MTE3" and e["name"].startswith("pl.insert")]
    assert len(inserts) == (2 * q_tiles - 1) * kv_tiles           # the 1-row tail tile: AIV1 has no rows
    assert {cores[e["pid"]].split()[1] for e in spans} == {str(b) for b in range(blocks)}
    q, k, v, out = inputs(S, N, np.float16, seed=1)
    assert flash_attention_pro[None, blocks](q, k, v, out).cycles == rep.cycles     # timing does not see data


def test_a_missing_wait_for_the_scores_is_a_race():
    q, k, v, out = inputs(200, 130, np.float16, seed=2)
    e = assert_race(build(wait_scores=False), q, k, v, out, blocks=4)
    msg = str(e)
    assert "UB tile 's_vec'" in msg and "PIPE_FIX (AIC of block" in msg and "PIPE_V (AIV" in msg, msg
    assert "pl.move(sv, sa, acc_to_vec_mode=SPLIT_M" in msg and "set_cross_core" in msg, msg


def test_a_missing_set_of_the_probabilities_deadlocks():
    q, k, v, out = inputs(200, 130, np.float16, seed=3)
    e = assert_deadlock(build(set_probs=False), q, k, v, out, blocks=4)
    msg = str(e)
    assert "pl.system.wait_cross_core(pipe=P_.MTE1, event_id=P_READY)" in msg, msg
    assert "never set by a matching pl.system.set_cross_core" in msg, msg


def test_a_missing_flag_before_the_store_is_a_race():
    q, k, v, out = inputs(200, 130, np.float16, seed=4)
    e = assert_race(build(store_flag=False), q, k, v, out, blocks=4)
    msg = str(e)
    assert "UB tile 'o_out'" in msg and "pl.cast(o_out, ov" in msg and "pl.store(out, o_out" in msg, msg
    assert "sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3" in msg, msg
