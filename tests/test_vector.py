"""Vector side and cross-core (issue 4): Flash Attention, vector-only and two-stage kernels, atomics,
UB capacity, chip data paths, every vector op against numpy, and the L0C->UB split modes."""
import math
import re
import warnings
import zlib

import ml_dtypes
import numpy as np
import pytest

import pyto
import pyto.language as pl
from dsl_helpers import line_of, matmul_from_gm, matmul_tiles
from pyto_kernels.examples.flash_attention import flash_attention
from pyto.testing import assert_close, assert_deadlock, assert_race, matmul_bound

BF16 = ml_dtypes.bfloat16
U32 = 2.0 ** -24                                     # fp32 unit roundoff
# unit roundoff u (half an ulp at 1.0), mantissa bits p (with the hidden bit), smallest normal exponent
FMT = {np.dtype(np.float16): (2.0 ** -11, 11, -14), np.dtype(BF16): (2.0 ** -8, 8, -126),
       np.dtype(np.float32): (2.0 ** -24, 24, -126)}


def gamma(n: int) -> float:
    """Higham's gamma_n = n u / (1 - n u) for fp32: the worst-case error factor of n-term summation."""
    return n * U32 / (1 - n * U32)


def f64(x) -> np.ndarray:
    return np.asarray(x, np.float64)


def ulp(x: np.ndarray, dt) -> np.ndarray:
    """The spacing of `dt` at |x| (subnormal spacing below the smallest normal)."""
    _, p, emin = FMT[np.dtype(dt)]
    ax = np.abs(f64(x))
    e = np.floor(np.log2(np.where(ax > 0, ax, 1.0)))
    return 2.0 ** (np.maximum(np.where(ax > 0, e, emin), emin) - (p - 1))


_line = line_of


# =====================================================================================================
# Flash Attention
# =====================================================================================================
def fa_reference(q, k, v, scale):
    """float64 softmax(scale * q k^T) v of the (already rounded) inputs, and the softmax matrix."""
    s = scale * (f64(q) @ f64(k).T)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    a = e / e.sum(axis=1, keepdims=True)
    return a @ f64(v), a, s


def fa_bound(q, k, v, scale, BN):
    """Per-element bound on |flash_attention - fa_reference| (first order in the roundoffs).

    The reference takes the same fp16/bf16 inputs, so input rounding is not an error here. With u the
    unit roundoff of the input dtype, A the exact softmax and O = A V, the kernel's errors are:
      1. P rounded to the input dtype before the PV matmul: p_j (1 + d_j), |d_j| <= u, while the row
         sum l uses the fp32 p. Rescaling by alpha = exp(m_old - m_new) multiplies p_j and its error
         alike, so O picks up sum_j A_j d_j V_j:  |.| <= u (A |V|).  (fp16 only: a p below 2^-14 is
         subnormal and gets an absolute error <= 2^-25 instead; after division by l >= 1 (the row
         max contributes exp(0) = 1) that adds <= 2^-25 sum_j |V_j|.)
      2. The result rounded to the output dtype: <= u |O| (+ 2^-25 for fp16 subnormal outputs).
      3. S = Q K^T accumulated in fp32 over D products: |dS_ij| <= scale gamma_D (|q_i| . |k_j|), plus
         2 x 2^-24 |s_ij| for the SCALE multiply on the vector unit (SCALE itself is an fp32 immediate,
         and the product is rounded). Softmax moves by dA_j = A_j (dS_j - sum_k A_k dS_k), so O moves
         by <= 2 max_j |dS_ij| (A |V|)_i  =: eps_S (A |V|).
      4. The rest is fp32 arithmetic on the vector unit and in the PV accumulation: s - m and exp
         (relative error of p <= 2^-24 |s - m| + 2 ulp), the row sums and the PV dot products (BN
         terms each: gamma_BN), and per KV block the rescale multiplies and adds of l and o, then the
         final division. Lumped as eps32 = 2^-24 (max|s - m| + 2 BN + 6 nblocks + 8) relative to A |V|.
    Total: (1 + u) [ (u + eps_S + eps32) (A |V|) + sub_p ] + u |O| + sub_out; the (1 + u) covers the
    output rounding of the already perturbed value. Terms 1 and 2 dominate (eps_S, eps32 ~ 1e-5 here).
    Measured: the worst err/bound over 20 seeds of 4 shapes was 0.39-0.66 (fp16 and bf16), and a
    kernel that skips any one rescale step (of o, of l, or the update of m) exceeds it 75-2900 times.
    """
    dt = np.dtype(q.dtype)
    u = FMT[dt][0]
    ref, a, s = fa_reference(q, k, v, scale)
    av = a @ np.abs(f64(v))
    D, N = q.shape[1], k.shape[0]
    ds = scale * gamma(D) * (np.abs(f64(q)) @ np.abs(f64(k)).T) + 2 * U32 * np.abs(s)
    eps_s = 2 * ds.max(axis=1, keepdims=True)
    spread = (s.max(axis=1, keepdims=True) - s.min(axis=1, keepdims=True))
    eps32 = U32 * (spread + 2 * BN + 6 * (N // BN) + 8)
    sub = 2.0 ** -25 if dt == np.dtype(np.float16) else 0.0
    sub_p = sub * np.abs(f64(v)).sum(axis=0, keepdims=True)
    return ref, (1 + u) * ((u + eps_s + eps32) * av + sub_p) + u * np.abs(ref) + sub + 1e-300


def fa_inputs(M, N, D, dt, seed):
    rng = np.random.default_rng(seed)
    q = (2.0 * rng.standard_normal((M, D))).astype(dt)    # scores of a few units: a peaked softmax
    k = rng.standard_normal((N, D)).astype(dt)
    v = rng.standard_normal((N, D)).astype(dt)
    return q, k, v, np.zeros((M, D), dt)


FA_SIZES = [  # M, N, D, BN, DK, SCALE
    (32, 64, 32, 32, None, None),        # 2 KV blocks, one QK matmul (AccPhase.Final) per block
    (64, 192, 64, 64, 32, 0.1),          # 3 KV blocks, QK over D in two chunks (Partial, Final)
]


@pytest.mark.parametrize("dt", [np.float16, BF16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("M,N,D,BN,DK,SCALE", FA_SIZES)
def test_flash_attention_matches_float64(dt, M, N, D, BN, DK, SCALE):
    q, k, v, out = fa_inputs(M, N, D, dt, seed=M + N + D)
    scale = 1.0 / math.sqrt(D) if SCALE is None else SCALE
    params = dict(M=M, N=N, D=D, BN=BN, SCALE=SCALE, **({} if DK is None else {"DK": DK}))
    rep = pyto.run(flash_attention, q, k, v, out, **params)
    ref, bound = fa_bound(q, k, v, scale, BN)
    assert_close(out, ref, bound, f"flash_attention {np.dtype(dt).name} M={M} N={N} D={D} BN={BN}")
    # the online rescale really happened: some rows have their max outside the first KV block
    s = f64(q) @ f64(k).T
    assert (s.argmax(axis=1) >= BN).any() and (s.argmax(axis=1) < BN).any()
    assert {"M", "FIX", "V", "MTE3", "MTE2", "MTE1"} <= set(rep.pipe_cycles)


def test_flash_attention_misuse_move_without_phase_races():
    q, k, v, out = fa_inputs(32, 64, 32, np.float16, seed=1)
    e = assert_race(flash_attention, q, k, v, out, M=32, N=64, D=32, BN=32, MODE=1)
    msg = str(e)
    mm = _line(flash_attention, "pl.matmul(s_l0c, q_l0a")
    mv = _line(flash_attention, "# misuse: no phase")
    assert "L0C" in msg and "'s_l0c'" in msg, msg
    assert "PIPE_M " in msg and "PIPE_FIX " in msg, msg
    assert f"flash_attention.py:{mm}" in msg and f"flash_attention.py:{mv}" in msg, msg
    assert "phase" in msg


@pytest.mark.parametrize("N", [64, 96])
def test_flash_attention_misuse_partial_only_deadlocks(N):
    q, k, v, out = fa_inputs(32, N, 32, np.float16, seed=2)
    e = assert_deadlock(flash_attention, q, k, v, out, M=32, N=N, D=32, BN=32, MODE=2)
    msg = str(e)
    mm = _line(flash_attention, "pl.matmul(s_l0c, q_l0a")
    assert "unit_flag(L0C tile 's_l0c'" in msg and "== 0, is 1" in msg, msg
    assert "AccPhase.Final" in msg and "STPhase.Final" in msg, msg
    assert f"flash_attention.py:{mm}" in msg and "PIPE_M" in msg, msg


def test_flash_attention_partial_only_with_one_kv_block_leaves_the_flag_set():
    """With one KV block no matmul waits on the flag the Partial moves leave at 1, so there is no deadlock in
    this launch, but the next matmul on that L0C would hang: a SyncError at the end (it passed before a
    unit_flag audit), and the caller's output is untouched."""
    q, k, v, out = fa_inputs(32, 32, 32, np.float16, seed=3)
    with pytest.raises(pyto.SyncError, match=r"leaves unit_flag\(L0C tile '[so]_l0c'.* at 1 when the kernel ends") as e:
        pyto.run(flash_attention, q, k, v, out, M=32, N=32, D=32, BN=32, MODE=2)
    lines = [_line(flash_attention, "pl.matmul(s_l0c, q_l0a"), _line(flash_attention, "pl.matmul(o_l0c, p_l0a")]
    assert any(f"flash_attention.py:{n} " in str(e.value) for n in lines), e.value
    assert not out.any()
    pyto.run(flash_attention, q, k, v, out, M=32, N=32, D=32, BN=32)
    ref, bound = fa_bound(q, k, v, 1 / math.sqrt(32), 32)
    assert_close(out, ref, bound)


def test_flash_attention_needs_950_paths():
    q, k, v, out = fa_inputs(32, 64, 32, np.float16, seed=4)
    with pytest.raises(pyto.UnsupportedError, match="L0C->UB"):
        pyto.run(flash_attention, q, k, v, out, M=32, N=64, D=32, BN=32, chip="atlas-a2")
    assert not out.any()


# =====================================================================================================
# A vector-only kernel on all AIVs of several blocks
# =====================================================================================================
@pl.kernel
def scaled_add(x, y, out, *, ALPHA: float, TILE: int):
    """out = ALPHA * x + y over [B, N], rows dealt in TILE-row tiles to every AIV of the launch (an AIV-only
    kernel: each AIV is a block of its own, get_block_num() counts AIVs)."""
    B, N = x.shape
    x_ub = pl.alloc(pl.UB, [TILE, N], x.dtype)
    y_ub = pl.alloc(pl.UB, [TILE, N], x.dtype)
    with pl.section_vector():
        n_aiv = pl.get_block_num()
        aiv = pl.get_block_idx()
        for r in pl.range(aiv * TILE, B, n_aiv * TILE):
            for t in (x_ub, y_ub):                      # the last tile: only the rows inside B
                pl.set_validshape(t, [min(TILE, B - r), N])
            pl.load(x_ub, x, [r, 0])
            pl.load(y_ub, y, [r, 0])
            pl.mul(x_ub, x_ub, ALPHA)
            pl.add(x_ub, x_ub, y_ub)
            pl.store(out, x_ub, [r, 0])


@pytest.mark.parametrize("dt", [np.float32, np.float16], ids=["fp32", "fp16"])
def test_vector_only_scaled_add_matches_numpy_and_reports_pipes(dt):
    rng = np.random.default_rng(5)
    B, N, blocks = 100, 72, 6                     # 6 AIVs; 100 rows: the last tile's valid shape is its 4 rows
    x = rng.standard_normal((B, N)).astype(dt)
    y = rng.standard_normal((B, N)).astype(dt)
    out = np.zeros_like(x)
    rep = pyto.run(scaled_add, x, y, out, blocks=blocks, ALPHA=1.5, TILE=8)
    # two roundings (ALPHA*x, then + y), each <= u relative: |err| <= u |1.5 x| (1 + u) + u |ref|
    u = FMT[np.dtype(dt)][0]
    ref = 1.5 * f64(x) + f64(y)
    bound = u * 1.5 * np.abs(f64(x)) * (1 + u) + u * np.abs(ref)
    assert_close(out, ref, bound + 1e-300, "scaled_add")
    for pipe in ("V", "MTE2", "MTE3"):
        assert rep.pipe_cycles.get(pipe, 0) > 0, rep.summary()
    for pipe in ("M", "MTE1", "FIX"):
        assert rep.pipe_cycles.get(pipe, 0) == 0
    aivs = [c for c in rep.core_pipe_cycles if "AIV" in c]
    assert len(aivs) == blocks and rep.blocks == blocks, rep.core_pipe_cycles
    assert all(rep.core_pipe_cycles[c].get("V", 0) > 0 for c in aivs)


# =====================================================================================================
# Two stages through a GM workspace: AIC matmul -> sync_all -> AIV post-processing
# =====================================================================================================
@pl.kernel
def two_stage(a, b, out, *, TM: int, SYNC: bool, SHIFT: int):
    """Block i's AIC computes rows [i TM, (i+1) TM) of a @ b into a workspace; after sync_all the AIVs
    of block i apply relu to the tile of block (i + SHIFT) % blocks, each AIV half of its rows."""
    Mt, K = a.shape
    N = b.shape[1]
    R = TM // 2
    ws = pl.workspace([Mt, N], pl.DT_FP32)
    tiles = matmul_tiles(TM, K, N, a.dtype)
    c_l0c = tiles[-1]
    x_ub = pl.alloc(pl.UB, [R, N], pl.DT_FP32)
    with pl.section_cube():
        m0 = pl.get_block_idx() * TM
        matmul_from_gm(tiles, a, [m0, 0], b, [0, 0])
        pl.store(ws, c_l0c, [m0, 0])
    if SYNC:
        pl.system.sync_all()
    with pl.section_vector():
        block = pl.get_block_idx() // pl.get_subblock_num()         # on an AIV get_block_idx() is 2 block + sub
        r0 = ((block + SHIFT) % pl.get_block_num()) * TM + pl.get_subblock_idx() * R
        pl.load(x_ub, ws, [r0, 0])
        pl.relu(x_ub, x_ub)
        pl.store(out, x_ub, [r0, 0])


def _two_stage_inputs(blocks, TM=32, K=64, N=48, seed=6):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((blocks * TM, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    return a, b, np.zeros((blocks * TM, N), np.float32)


@pytest.mark.parametrize("shift", [0, 1])
def test_two_stage_workspace_with_sync_all(shift):
    a, b, out = _two_stage_inputs(blocks=3)
    pyto.run(two_stage, a, b, out, blocks=3, TM=32, SYNC=True, SHIFT=shift)
    # relu is exact and 1-Lipschitz, so the matmul's bound carries over
    assert_close(out, np.maximum(f64(a) @ f64(b), 0), matmul_bound(a, b, np.float32))


@pytest.mark.parametrize("shift", [0, 1])
def test_two_stage_workspace_without_sync_all_races(shift):
    a, b, out = _two_stage_inputs(blocks=3)
    e = assert_race(two_stage, a, b, out, blocks=3, TM=32, SYNC=False, SHIFT=shift)
    msg = str(e)
    assert "GM tensor 'ws'" in msg, msg
    assert "PIPE_FIX" in msg and "PIPE_MTE2" in msg and "AIC" in msg and "AIV" in msg, msg
    assert f"test_vector.py:{_line(two_stage, 'pl.store(ws, c_l0c')}" in msg, msg
    assert f"test_vector.py:{_line(two_stage, 'pl.load(x_ub, ws')}" in msg, msg


# =====================================================================================================
# Atomic accumulation into GM
# =====================================================================================================
@pl.kernel
def atomic_rows(x, out, *, ATOMIC: bool):
    """Every AIV of the launch (an AIV-only kernel: blocks counts AIVs) adds its slice x[aiv] ([R, C]) into out
    ([R, C])."""
    _, R, C = x.shape
    x_ub = pl.alloc(pl.UB, [R, C], x.dtype)
    with pl.section_vector():
        aiv = pl.get_block_idx()
        pl.load(x_ub, x, [aiv, 0, 0])
        pl.store(out, x_ub, [0, 0], atomic=pl.AtomicType.AtomicAdd if ATOMIC else pl.AtomicType.AtomicNone)


@pytest.mark.parametrize("dt,blocks", [(np.float32, 8), (ml_dtypes.bfloat16, 4)])     # blocks: AIVs
def test_atomic_add_from_ub_sums_all_aivs(dt, blocks):
    """Every AIV's slice lands in GM, in whatever order the atomics run. fp32: n fp32 additions, |err| <= gamma_n
    sum |terms|. bf16 (ml_dtypes: numpy kind 'V', not 'f') adds as a float, each fp32 sum rounded to bf16 once
    (unit roundoff 2^-8): a helper found bf16 summed as integers (1.25 + 0.5 gave 1.0)."""
    rng = np.random.default_rng(7)
    R, C = 8, 40
    x = rng.standard_normal((blocks, R, C)).astype(dt)
    out0 = rng.standard_normal((R, C)).astype(dt)
    out = out0.copy()
    pyto.run(atomic_rows, x, out, blocks=blocks, ATOMIC=True)
    terms = np.concatenate([f64(out0)[None], f64(x)])
    per_add = gamma(len(terms)) if dt == np.float32 else len(terms) * 2.0 ** -8
    assert_close(out, terms.sum(axis=0), per_add * np.abs(terms).sum(axis=0), f"{np.dtype(dt).name} atomic add")


def test_plain_store_from_several_blocks_races():
    x = np.ones((4, 8, 40), np.float32)
    out = np.zeros((8, 40), np.float32)
    e = assert_race(atomic_rows, x, out, blocks=4, ATOMIC=False)
    assert "WAW" in str(e) and "GM" in str(e)


@pl.kernel
def split_k(a, b, out, *, KC: int):
    """Split-K on the cube: block i multiplies a[:, i KC:(i+1) KC] @ b[i KC:(i+1) KC, :] and adds it into out."""
    M = a.shape[0]
    N = b.shape[1]
    tiles = matmul_tiles(M, KC, N, a.dtype)
    c_l0c = tiles[-1]
    with pl.section_cube():
        k0 = pl.get_block_idx() * KC
        matmul_from_gm(tiles, a, [0, k0], b, [k0, 0])
        pl.store(out, c_l0c, [0, 0], atomic=pl.AtomicType.AtomicAdd)


def test_atomic_add_from_l0c_split_k():
    rng = np.random.default_rng(8)
    blocks, M, N, KC = 4, 32, 48, 32
    a = rng.standard_normal((M, blocks * KC)).astype(np.float16)
    b = rng.standard_normal((blocks * KC, N)).astype(np.float16)
    out = np.zeros((M, N), np.float32)
    pyto.run(split_k, a, b, out, blocks=blocks, KC=KC)
    # the K products are summed in fp32 in some order (within blocks, then atomically across them);
    # matmul_bound holds for any order of the additions
    assert_close(out, f64(a) @ f64(b), matmul_bound(a, b, np.float32), "split-K atomic add")


# =====================================================================================================
# UB capacity (per AIV) and chip data paths
# =====================================================================================================
@pl.kernel
def ub_fill(x, out, *, ROWS: int, COLS: int, EXTRA: int, BUFFERS: int):
    """Allocate ROWS x COLS fp32 of UB (x BUFFERS), then EXTRA more fp32 columns, and use the first."""
    big = pl.alloc(pl.UB, [ROWS, COLS], pl.DT_FP32, buffers=BUFFERS)
    if EXTRA:
        pl.alloc(pl.UB, [1, EXTRA], pl.DT_FP32)
    with pl.section_vector():
        pl.expands(big.current()[0:1, 0:8], 1.0)


def _ub_run(chip, **kw):
    """Two AIVs (ub_fill is AIV-only: blocks counts AIVs), each allocating its own UB."""
    x = np.zeros((2, 8), np.float32)
    return pyto.run(ub_fill, x, x.copy(), chip=chip, blocks=2, **kw)


def test_ub_exactly_full_fits_per_aiv():
    # 248 x 256 x 4 B = 253952 B = the whole UB of ONE AIV: each AIV has its own, so this fits
    _ub_run("ascend950pr", ROWS=248, COLS=256, EXTRA=0, BUFFERS=1)


@pytest.mark.parametrize("chip,kw,asked,in_use,cap", [
    ("ascend950pr", dict(ROWS=248, COLS=256, EXTRA=8, BUFFERS=1), 32, 253952, 253952),
    ("ascend950pr", dict(ROWS=128, COLS=256, EXTRA=0, BUFFERS=2), 262144, 0, 253952),
    ("atlas-a2", dict(ROWS=248, COLS=256, EXTRA=0, BUFFERS=1), 253952, 0, 196608),
])
def test_ub_overflow_names_ub_and_numbers(chip, kw, asked, in_use, cap):
    with pytest.raises(pyto.CapacityError) as ei:
        _ub_run(chip, **kw)
    e, msg = ei.value, str(ei.value)
    assert (e.buffer, e.asked, e.in_use, e.capacity) == ("UB", asked, in_use, cap)
    assert "UB" in msg and str(asked) in msg and str(cap) in msg and chip in msg, msg
    assert "test_vector.py:" in msg and "pl.alloc(pl.UB" in msg, msg


@pl.kernel
def l0c_to_ub(a, b, out, *, MODE: int, WHO: int = -1):
    """a @ b on the cube, moved to the AIVs by AccToVecMode MODE (0 SplitM, 1 SplitN, 2 Vec0, 3 Vec1);
    in the single modes AIV WHO stores it (default: the one that received it)."""
    M, K = a.shape
    N = b.shape[1]
    mode = [pl.AccToVecMode.DualModeSplitM, pl.AccToVecMode.DualModeSplitN,
            pl.AccToVecMode.SingleModeVec0, pl.AccToVecMode.SingleModeVec1][MODE]
    ub_shape = [[M // 2, N], [M, N // 2], [M, N], [M, N]][MODE]
    tiles = matmul_tiles(M, K, N, a.dtype)
    c_l0c = tiles[-1]
    c_ub = pl.alloc(pl.UB, ub_shape, pl.DT_FP32)
    with pl.section_cube():
        matmul_from_gm(tiles, a, [0, 0], b, [0, 0], phase=pl.AccPhase.Final)
        pl.move(c_ub, c_l0c, acc_to_vec_mode=mode, phase=pl.STPhase.Final)
    with pl.section_vector():
        sub = pl.get_subblock_idx()
        if MODE == 0:
            pl.store(out, c_ub, [sub * (M // 2), 0])
        elif MODE == 1:
            pl.store(out, c_ub, [0, sub * (N // 2)])
        elif sub == (MODE - 2 if WHO < 0 else WHO):
            pl.store(out, c_ub, [0, 0])


@pytest.mark.parametrize("mode", [0, 1, 2, 3], ids=["SplitM", "SplitN", "Vec0", "Vec1"])
def test_l0c_to_ub_modes(mode):
    rng = np.random.default_rng(9)
    M, K, N = 32, 32, 64
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    out = np.zeros((M, N), np.float32)
    pyto.run(l0c_to_ub, a, b, out, MODE=mode)
    assert_close(out, f64(a) @ f64(b), matmul_bound(a, b, np.float32))
    if mode >= 2:   # a single mode fills one AIV's UB only: the other AIV reads garbage
        with pytest.raises(pyto.UninitializedReadError, match=r"c_ub.*\(256 of 256 32-byte blocks uninitialised\)"):
            pyto.run(l0c_to_ub, a, b, out, MODE=mode, WHO=3 - mode)


@pl.kernel
def l0c_to_ub_shape(a, out, *, M: int, N: int, UM: int, UN: int, SPLIT_N: bool):
    c_l0c = pl.alloc(pl.L0C, [M, N], pl.DT_FP32)
    c_ub = pl.alloc(pl.UB, [UM, UN], pl.DT_FP32)
    mode = pl.AccToVecMode.DualModeSplitN if SPLIT_N else pl.AccToVecMode.DualModeSplitM
    with pl.section_cube():
        pl.move(c_ub, c_l0c, acc_to_vec_mode=mode, phase=pl.STPhase.Final)


@pytest.mark.parametrize("M,N,UM,UN,split_n,match", [
    (17, 32, 8, 32, False, "DualModeSplitM needs an even M"),
    (17, 32, 9, 32, False, "DualModeSplitM needs an even M"),
    (32, 32, 32, 32, False, "gives each AIV a [16, 32] tile"),
    (32, 17, 32, 8, True, "N/2 columns, which must sit on L0C's 16-column fractal grid"),
    (32, 48, 32, 24, True, "has N = 48 (N/2 = 24)"),
])
def test_l0c_to_ub_split_shape_errors(M, N, UM, UN, split_n, match):
    """Halves of odd M, or of an N whose half cuts a 16-column fractal, are refused (an error-message helper
    found N = 48 split into two 24-column halves accepted)."""
    x = np.zeros((2, 2), np.float32)
    cls = pyto.AlignmentError if split_n else pyto.ShapeError
    with pytest.raises(cls, match=re.escape(match)) as ei:
        pyto.run(l0c_to_ub_shape, x, x.copy(), M=M, N=N, UM=UM, UN=UN, SPLIT_N=split_n)
    assert "test_vector.py:" in str(ei.value)


@pl.kernel
def ub_to_l1(x, out):
    x_ub = pl.alloc(pl.UB, [16, 32], pl.DT_FP16)
    x_l1 = pl.alloc(pl.L1, [32, 32], pl.DT_FP16)
    with pl.section_vector():
        pl.load(x_ub, x)
        r = pl.get_block_idx() * 16                  # AIV-only: blocks=2 AIVs, one AI core's L1
        pl.move(x_l1[r:r + 16, :], x_ub)


def test_a2_has_no_l0c_to_ub_nor_ub_to_l1():
    rng = np.random.default_rng(10)
    a = rng.standard_normal((32, 32)).astype(np.float16)
    out = np.zeros((32, 32), np.float32)
    with pytest.raises(pyto.UnsupportedError) as ei:
        pyto.run(l0c_to_ub, a, a.copy(), out, MODE=0, chip="atlas-a2")
    msg = str(ei.value)
    assert "L0C->UB" in msg and "atlas-a2" in msg and f"test_vector.py:{_line(l0c_to_ub, 'pl.move(c_ub, c_l0c')}" in msg
    x = np.zeros((16, 32), np.float16)
    with pytest.raises(pyto.UnsupportedError) as ei:
        pyto.run(ub_to_l1, x, x.copy(), blocks=2, chip="atlas-a2")
    msg = str(ei.value)
    assert "UB->L1" in msg and "atlas-a2" in msg and f"test_vector.py:{_line(ub_to_l1, 'pl.move(x_l1[')}" in msg
    pyto.run(ub_to_l1, x, x.copy(), blocks=2)   # the same kernel is fine on 950


@pl.kernel
def two_aivs_into_l1(x, out, *, SAME_ROWS: bool):
    """Both AIVs (an AIV-only kernel on blocks=2 AIVs, which share one AI core's L1) move their UB tile into one
    L1 tile: their own rows, or (a bug) the same rows."""
    x_ub = pl.alloc(pl.UB, [16, 32], pl.DT_FP16)
    x_l1 = pl.alloc(pl.L1, [32, 32], pl.DT_FP16)
    with pl.section_vector():
        r = 0 if SAME_ROWS else pl.get_block_idx() * 16
        pl.load(x_ub, x)
        pl.move(x_l1[r:r + 16, :], x_ub)


def test_two_aivs_writing_the_same_l1_rows_race():
    x = np.ones((16, 32), np.float16)
    pyto.run(two_aivs_into_l1, x, x.copy(), blocks=2, SAME_ROWS=False)
    e = assert_race(two_aivs_into_l1, x, x.copy(), blocks=2, SAME_ROWS=True)
    assert "WAW" in str(e) and "x_l1" in str(e) and "(AIV 0)" in str(e) and "(AIV 1)" in str(e)   # AIV-only: each AIV a block


# =====================================================================================================
# Cross-core flags (docs/chips.md §5: CrossCoreSetFlag / CrossCoreWaitFlag; docs/design.md §4.7 happens-before)
# =====================================================================================================
@pl.kernel
def cube_to_vector(a, b, out, *, FLAG: bool, TM: int):
    """The AIC puts C = a @ b of its rows in a workspace and raises event 0 for its AIVs (INTRA_BLOCK); each AIV
    waits, then writes relu of half those rows to out. No sync_all: the flag orders the two sides."""
    M, K = a.shape
    N, R = b.shape[1], TM // 2
    ws = pl.workspace([M, N], pl.DT_FP32)
    tiles = matmul_tiles(TM, K, N, a.dtype)
    c_l0c = tiles[-1]
    x = pl.alloc(pl.UB, [R, N], pl.DT_FP32)
    m0 = (pl.get_block_idx() // pl.get_subblock_num()) * TM     # the block, on the AIC's trace and the AIVs'
    with pl.section_cube():
        matmul_from_gm(tiles, a, [m0, 0], b, [0, 0])
        pl.store(ws, c_l0c, [m0, 0])
        if FLAG:
            pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0)
    with pl.section_vector():
        if FLAG:
            pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=0)
        r0 = m0 + pl.get_subblock_idx() * R
        pl.load(x, ws, [r0, 0])
        pl.relu(x, x)
        pl.store(out, x, [r0, 0])


def _cube_to_vector_inputs():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((64, 48)).astype(np.float16)
    b = rng.standard_normal((48, 32)).astype(np.float16)
    return a, b, np.zeros((64, 32), np.float32)


def test_cross_core_flag_orders_the_cube_before_its_aivs():
    a, b, out = _cube_to_vector_inputs()
    rep = pyto.run(cube_to_vector, a, b, out, blocks=2, FLAG=True, TM=32)
    ref = np.maximum(f64(a) @ f64(b), 0)
    assert_close(out, ref, matmul_bound(a, b, np.float32))
    # the AIVs' loads start after the store's data has landed (the set waits for it on FIX)
    cores, pipes, names, locs, core_i, pipe_i, name_i, loc_i, begin, end = rep.events[:10]
    store = [i for i in range(len(begin)) if names[name_i[i]] == "pl.store" and cores[core_i[i]] == "block 0 AIC"][0]
    loads = [i for i in range(len(begin)) if names[name_i[i]] == "pl.load" and "AIV" in cores[core_i[i]]
             and cores[core_i[i]].startswith("block 0")]
    assert min(begin[i] for i in loads) >= end[store]


@pytest.mark.parametrize("mode", ["full", "timing"])
def test_without_the_cross_core_flag_the_workspace_races(mode):
    a, b, out = _cube_to_vector_inputs()
    args = (a, b, out) if mode == "full" else tuple(pyto.spec(x.shape, x.dtype) for x in (a, b, out))
    with pytest.raises(pyto.RaceError, match="GM tensor 'ws'"):
        pyto.run(cube_to_vector, *args, blocks=2, FLAG=False, TM=32, mode=mode)


@pl.kernel
def vector_to_cube(a, b, out, *, BOTH: bool):
    """Each AIV scales its half of a's rows into a workspace and raises event 3 for the AIC (INTRA_BLOCK); the AIC
    waits for both (BOTH=False: only AIV0 raises it), then multiplies the workspace by b."""
    M, K = a.shape
    N, R = b.shape[1], M // 2
    ws = pl.workspace([M, K], a.dtype)
    x = pl.alloc(pl.UB, [R, K], a.dtype)
    tiles = matmul_tiles(M, K, N, a.dtype)
    c_l0c = tiles[-1]
    with pl.section_vector():
        r0 = pl.get_subblock_idx() * R
        pl.load(x, a, [r0, 0])
        pl.mul(x, x, 2.0)
        pl.store(ws, x, [r0, 0])
        if BOTH or pl.get_subblock_idx() == 0:
            pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=3)
    with pl.section_cube():
        pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=3)
        matmul_from_gm(tiles, ws, [0, 0], b, [0, 0])
        pl.store(out, c_l0c, [0, 0])


def test_the_aic_waits_for_both_aivs_flags():
    rng = np.random.default_rng(6)
    a = rng.standard_normal((32, 32)).astype(np.float16)
    b = rng.standard_normal((32, 16)).astype(np.float16)
    out = np.zeros((32, 16), np.float32)
    pyto.run(vector_to_cube, a, b, out, BOTH=True)
    assert_close(out, 2 * f64(a) @ f64(b), matmul_bound(2 * f64(a), b, np.float32))
    e = assert_deadlock(vector_to_cube, a, b, np.zeros((32, 16), np.float32), BOTH=False)
    assert ("cross-core event 3 (AIV1->AIC, INTRA_BLOCK/UNICAST_BLOCK)" in str(e)
            and "never set by a matching pl.system.set_cross_core" in str(e)), str(e)


@pl.kernel
def aiv_to_aiv(x, out, *, FLAG: bool, MIX: bool = True):
    """AIV0 adds 1 to x into a workspace and raises event 5 for AIV1 (INTER_SUBBLOCK); AIV1 copies it to out.
    INTER_SUBBLOCK pairs the two AIVs of a mix kernel's block: the (empty) cube section makes it one; without it
    (MIX=False) the kernel is AIV-only, every AIV a block of its own, and the mode has no partner."""
    ws = pl.workspace(list(x.shape), x.dtype)
    u = pl.alloc(pl.UB, list(x.shape), x.dtype)
    if MIX:
        with pl.section_cube():
            pass
    with pl.section_vector():
        if pl.get_subblock_idx() == 0:
            pl.load(u, x, [0, 0])
            pl.add(u, u, 1.0)
            pl.store(ws, u, [0, 0])
            if FLAG:
                pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=5,
                                         sync_mode=pl.CrossCoreSyncMode.INTER_SUBBLOCK)
        else:
            if FLAG:
                pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=5,
                                          sync_mode=pl.CrossCoreSyncMode.INTER_SUBBLOCK)
            pl.load(u, ws, [0, 0])
            pl.store(out, u, [0, 0])


def test_mode_1_orders_the_two_aivs():
    x = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    out = np.zeros_like(x)
    pyto.run(aiv_to_aiv, x, out, FLAG=True)
    assert np.array_equal(out, x + 1)
    with pytest.raises(pyto.SyncError, match=r"test_vector\.py:\d+ .*INTER_SUBBLOCK pairs the two AIVs of a mix "
                                              r"kernel's block; in an AIV-only kernel"):
        pyto.run(aiv_to_aiv, x, np.zeros_like(x), blocks=2, FLAG=True, MIX=False)
    assert_race(aiv_to_aiv, x, np.zeros_like(x), FLAG=False)


@pl.kernel
def too_many_sets(a, out):
    """The AIC raises cross-core event 0 sixteen times before raising event 1, which the AIVs wait for first."""
    c = pl.alloc(pl.UB, [16, 16], pl.DT_FP32)
    with pl.section_cube():
        for _ in pl.range(16):
            pl.system.set_cross_core(pipe=pl.PipeType.S, event_id=0)
        pl.system.set_cross_core(pipe=pl.PipeType.S, event_id=1)
    with pl.section_vector():
        pl.system.wait_cross_core(pipe=pl.PipeType.S, event_id=1)
        for _ in pl.range(16):
            pl.system.wait_cross_core(pipe=pl.PipeType.S, event_id=0)
        pl.expands(c, 1.0)
        pl.store(out, c, [16 * pl.get_subblock_idx(), 0])


def test_more_than_15_pending_cross_core_sets_hang_the_chip():
    a, out = np.zeros((32, 16), np.float32), np.zeros((32, 16), np.float32)
    with pytest.raises(pyto.SyncError, match="15 sets waiting unconsumed"):
        pyto.run(too_many_sets, a, out)
    assert not out.any()


def _cross_core_misuse(call):
    @pl.kernel
    def misuse(a, out):
        call()
    return misuse


@pytest.mark.parametrize("call,err,text", [
    (lambda: pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0), pyto.KernelError,
     r"pl\.system\.set_cross_core runs on one side of the block: call it inside pl\.section_cube"),
    (lambda: _in_cube(lambda: pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=16)), pyto.SyncError,
     r"set_cross_core event_id 16 out of range 0\.\.15"),
    (lambda: _in_cube(lambda: pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0,
                                                       sync_mode=pl.CrossCoreSyncMode.INTER_BLOCK)),
     pyto.SyncError, r"set_cross_core on block 0 AIC is set 1 more time\(s\) than the other side waits for"),
    (lambda: _in_cube(lambda: pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0,
                                                       sync_mode=pl.CrossCoreSyncMode.INTER_SUBBLOCK)),
     pyto.SyncError, "INTER_SUBBLOCK syncs the two AIVs"),
    (lambda: _in_cube(lambda: pl.system.wait_cross_core(pipe=pl.PipeType.V, event_id=0)), pyto.SyncError,
     r"wait_cross_core on PipeType\.V: the AIC \(cube core\) has no such pipe"),
])
def test_cross_core_flag_misuse_names_the_line(call, err, text):
    with pytest.raises(err, match=text) as ei:
        pyto.run(_cross_core_misuse(call), np.zeros((16, 16), np.float32), np.zeros((16, 16), np.float32))
    assert "test_vector.py:" in str(ei.value)


def _in_cube(call):
    with pl.section_cube():
        call()


# ---- cross-core moves that depend on pl.get_subblock_idx() ------------------------------------------------
@pl.kernel
def one_aiv_moves(x, b, out, *, FIRST: int):
    """AIV FIRST fills half of p_l1 before the cube reads it; the other AIV overwrites its own half after:
    the cube sees rows from x for the late half (each AIV's move is placed where that AIV met it)."""
    h_ub = pl.alloc(pl.UB, [16, 32], pl.DT_FP16)
    p_l1 = pl.alloc(pl.L1, [32, 32], pl.DT_FP16)
    b_l1 = pl.alloc(pl.L1, [32, 32], pl.DT_FP16)
    p_l0a = pl.alloc(pl.L0A, [32, 32], pl.DT_FP16)
    b_l0b = pl.alloc(pl.L0B, [32, 32], pl.DT_FP16)
    c = pl.alloc(pl.L0C, [32, 32], pl.DT_FP32)
    late = 16 * (1 - FIRST)
    with pl.section_cube():
        pl.load(p_l1[late:late + 16, :], x, [late, 0])
    with pl.section_vector():
        pl.load(h_ub, b, [16 * pl.get_subblock_idx(), 0])
        if pl.get_subblock_idx() == FIRST:
            pl.move(p_l1[16 * FIRST:16 * FIRST + 16, :], h_ub)
    with pl.section_cube():
        pl.load(b_l1, b)
        pl.move(b_l0b, b_l1)
        pl.move(p_l0a, p_l1)
        pl.matmul(c, p_l0a, b_l0b)
        pl.store(out, c)
    with pl.section_vector():
        if pl.get_subblock_idx() != FIRST:
            pl.move(p_l1[late:late + 16, :], h_ub)


@pytest.mark.parametrize("first", [0, 1])
def test_each_aivs_move_into_l1_is_placed_where_that_aiv_made_it(first):
    rng = np.random.default_rng(first)
    x = rng.standard_normal((32, 32)).astype(np.float16)
    b = rng.standard_normal((32, 32)).astype(np.float16)
    out = np.zeros((32, 32), np.float32)
    pyto.run(one_aiv_moves, x, b, out, FIRST=first)
    p = f64(x).copy()
    p[16 * first:16 * first + 16] = f64(b)[16 * first:16 * first + 16]
    assert_close(out, p @ f64(b), matmul_bound(p, b, np.float32))


@pl.kernel
def cube_branch_on_subblock(a, b, out):
    """Cube code reading pl.get_subblock_idx() (0 on the AIC): every trace must see the move it makes."""
    tiles = matmul_tiles(32, 32, 32, pl.DT_FP16)
    c = tiles[-1]
    u = pl.alloc(pl.UB, [16, 32], pl.DT_FP32)
    with pl.section_cube():
        matmul_from_gm(tiles, a, [0, 0], b, [0, 0], phase=pl.AccPhase.Final)
        if pl.get_subblock_idx() == 0:
            pl.move(u, c, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM, phase=pl.STPhase.Final)
    with pl.section_vector():
        pl.store(out, u, [16 * pl.get_subblock_idx(), 0])


def test_subblock_idx_is_0_in_cube_code_in_every_trace():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((32, 32)).astype(np.float16)
    b = rng.standard_normal((32, 32)).astype(np.float16)
    out = np.zeros((32, 32), np.float32)
    pyto.run(cube_branch_on_subblock, a, b, out)
    assert_close(out, f64(a) @ f64(b), matmul_bound(a, b, np.float32))


@pl.kernel
def cube_code_on_an_outside_subblock(x, out):
    sub = pl.get_subblock_idx()               # outside the sections: 1 in AIV1's trace
    h_ub = pl.alloc(pl.UB, [16, 32], pl.DT_FP16)
    p_l1 = pl.alloc(pl.L1, [32, 32], pl.DT_FP16)
    with pl.section_cube():
        if sub == 0:
            pl.load(p_l1, x, [0, 0])
    with pl.section_vector():
        pl.load(h_ub, x, [16 * pl.get_subblock_idx(), 0])
        pl.move(p_l1[16 * pl.get_subblock_idx():16 * pl.get_subblock_idx() + 16, :], h_ub)


def test_cube_code_that_differs_between_traces_is_named_when_moves_need_it():
    x = np.ones((32, 32), np.float16)
    with pytest.raises(pyto.KernelError, match=r"test_vector\.py:\d+.*AIV1 traces the cube code differently"):
        pyto.run(cube_code_on_an_outside_subblock, x, x.copy())


@pl.kernel
def both_aivs_write_l1_rows(x, eye, out, *, FIRST: int):
    """AIV FIRST moves both halves of L, then raises event 5 (INTER_SUBBLOCK); the other AIV waits and rewrites the
    top half: the cube reads the later write, and must wait for both AIVs' moves (nothing orders them in
    the AIC's own order but the flag)."""
    u = pl.alloc(pl.UB, [16, 16], pl.DT_FP32)
    big = pl.alloc(pl.L1, [32, 16], pl.DT_FP32)
    e_l1 = pl.alloc(pl.L1, [16, 16], pl.DT_FP32)
    e_l0 = pl.alloc(pl.L0B, [16, 16], pl.DT_FP32)
    a_l0 = pl.alloc(pl.L0A, [32, 16], pl.DT_FP32)
    c = pl.alloc(pl.L0C, [32, 16], pl.DT_FP32)
    with pl.section_vector():
        v = pl.get_subblock_idx()
        pl.load(u, x, [16 * v, 0])
        if v == FIRST:
            pl.move(big[0:16, :], u)
            pl.move(big[16:32, :], u)
            pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=5, sync_mode=pl.CrossCoreSyncMode.INTER_SUBBLOCK)
        else:
            pl.system.wait_cross_core(pipe=pl.PipeType.MTE3, event_id=5, sync_mode=pl.CrossCoreSyncMode.INTER_SUBBLOCK)
            pl.move(big[0:16, :], u)
    with pl.section_cube():
        pl.load(e_l1, eye)
        pl.move(e_l0, e_l1)
        pl.move(a_l0, big)
        pl.matmul(c, a_l0, e_l0)
        pl.store(out, c)


@pytest.mark.parametrize("first", [0, 1])
def test_the_cube_waits_for_both_aivs_moves_into_the_same_rows(first):
    x = np.concatenate([np.full((16, 16), 1.0), np.full((16, 16), 2.0)]).astype(np.float32)
    out = np.zeros((32, 16), np.float32)
    pyto.run(both_aivs_write_l1_rows, x, np.eye(16, dtype=np.float32), out, FIRST=first)
    assert np.all(out[:16] == x[16 * (1 - first)]) and np.all(out[16:] == x[16 * first])


@pl.kernel
def wait_on_another_pipe(x, out):
    """AIV1 waits for AIV0's event (INTER_SUBBLOCK) on PipeType.S, then loads what AIV0 stored: on A2/A3 the wait
    holds every pipe of the AIV (ordered); on 950 it holds only S, so the MTE2 load races with AIV0's store. The
    empty cube section makes it a mix kernel (INTER_SUBBLOCK pairs the two AIVs of a block)."""
    ws = pl.workspace([16, 16], pl.DT_FP32)
    u = pl.alloc(pl.UB, [16, 16], pl.DT_FP32)
    with pl.section_cube():
        pass
    with pl.section_vector():
        if pl.get_subblock_idx() == 0:
            pl.load(u, x)
            pl.store(ws, u)
            pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=1, sync_mode=pl.CrossCoreSyncMode.INTER_SUBBLOCK)
        else:
            pl.system.wait_cross_core(pipe=pl.PipeType.S, event_id=1, sync_mode=pl.CrossCoreSyncMode.INTER_SUBBLOCK)
            pl.load(u, ws)
            pl.store(out, u)


def test_a_cross_core_wait_holds_the_whole_core_on_a2_only():
    x = np.arange(256, dtype=np.float32).reshape(16, 16)
    out = np.zeros_like(x)
    pyto.run(wait_on_another_pipe, x, out, chip="atlas-a2")
    assert np.array_equal(out, x)
    assert_race(wait_on_another_pipe, x, np.zeros_like(x), chip="ascend950pr")


@pl.kernel
def shifted_in_place(x, out, *, SHIFT: int):
    t = pl.alloc(pl.UB, [16, 64], pl.DT_FP32)
    with pl.section_vector():
        pl.load(t, x, [pl.get_block_idx() * 16, 0])        # AIV-only: blocks=2 AIVs, 16 rows each
        pl.mul(t[:, SHIFT:SHIFT + 32], t[:, 0:32], 2.0)
        pl.store(out, t, [pl.get_block_idx() * 16, 0])


def test_a_vector_op_over_a_shifted_overlap_of_its_source_is_refused():
    """In place (the same view) or apart: a shifted overlap's result depends on the hardware's repeat order
    (a kernel-author review found it behaved like a copy)."""
    x = np.arange(32 * 64, dtype=np.float32).reshape(32, 64)
    out = np.zeros_like(x)
    pyto.run(shifted_in_place, x, out, blocks=2, SHIFT=0)              # in place
    assert np.array_equal(out[:, :32], 2 * x[:, :32]) and np.array_equal(out[:, 32:], x[:, 32:])
    pyto.run(shifted_in_place, x, out, blocks=2, SHIFT=32)             # apart
    assert np.array_equal(out[:, 32:], 2 * x[:, :32])
    with pytest.raises(pyto.ShapeError, match=r"test_vector\.py:\d+ .*over its source rows 0:16, columns 0:32"):
        pyto.run(shifted_in_place, x, out, blocks=2, SHIFT=8)


@pl.kernel
def cross_core_extra_set(x, out, *, EXTRA: bool):
    """Each AIV raises cross-core event 2 for the AIC once (EXTRA: twice); the AIC waits once."""
    u = pl.alloc(pl.UB, [16, 32], pl.DT_FP32)
    with pl.section_vector():
        sub = pl.get_subblock_idx()
        pl.load(u, x, [16 * sub, 0])
        pl.store(out, u, [16 * sub, 0])
        pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=2)
        if EXTRA:
            pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=2)
    with pl.section_cube():
        pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=2)


def test_a_cross_core_flag_left_set_at_the_end_is_a_sync_error():
    x = np.ones((32, 32), np.float32)
    pyto.run(cross_core_extra_set, x, np.zeros_like(x), EXTRA=False)
    with pytest.raises(pyto.SyncError, match=r"test_vector\.py:\d+ .*pl\.system\.set_cross_core on block 0 AIV\d is "
                                              r"set 1 more time\(s\) than the other side waits for"):
        pyto.run(cross_core_extra_set, x, np.zeros_like(x), EXTRA=True)


@pl.kernel
def no_sync_rows(x, out, *, LEFT_SET: bool):
    """auto_sync off and no flags between the load, two V ops and the store: every pipe starts at once."""
    t = pl.alloc(pl.UB, [16, 64], pl.DT_FP32)
    m = pl.alloc(pl.UB, [16, 64], pl.DT_FP32)
    with pl.section_vector():
        r = pl.get_block_idx() * 16                      # AIV-only: blocks=2 AIVs, 16 rows each
        pl.load(t, x, [r, 0])
        if LEFT_SET:
            pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
        pl.mul(m, t, 2.0)
        pl.add(m, m, 1.0)
        pl.store(out, m, [r, 0])


@pytest.mark.parametrize("left_set", [False, True])
def test_a_race_report_names_the_first_hazard_in_program_order_and_the_fix(left_set):
    """Every pipe starts at cycle 0, so the store met the load first in simulated order; the report names the
    first unordered read (mul after the load) and the flag pair that orders it, and a sync_src never waited
    for (an onboarding helper's kernels: the report pointed at the store and never at the unmatched flag)."""
    x, out = np.ones((32, 64), np.float32), np.zeros((32, 64), np.float32)
    e = assert_race(no_sync_rows, x, out, blocks=2, auto_sync=False, LEFT_SET=left_set)
    msg = str(e)
    assert "RAW" in msg and f"test_vector.py:{_line(no_sync_rows, 'pl.load(t, x')}" in msg, msg
    assert f"test_vector.py:{_line(no_sync_rows, 'pl.mul(m, t')}" in msg, msg
    assert ("fix: pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=...) after "
            "test_vector.py:") in msg, msg
    left = _line(no_sync_rows, "pl.system.sync_src(set_pipe=pl.PipeType.MTE2")
    assert ("note: " in msg and f"test_vector.py:{left}" in msg
            and "set 1 more time(s) than it is waited for" in msg) == left_set, msg


@pl.kernel
def ub_transposed_load(x, out):
    t = pl.alloc(pl.UB, [16, 16], x.dtype)
    with pl.section_vector():
        pl.load(t, x, order=[1, 0])


def test_gm_to_ub_has_no_transposing_path():
    """Dn2Nz (order=[1, 0] into an NZ L1 tile) is GM->L1's; into UB it is refused, not done silently."""
    x = np.zeros((16, 16), np.float16)
    with pytest.raises(pyto.UnsupportedError, match=r"test_vector\.py:\d+.*GM->UB is a plain MTE2 copy"):
        pyto.run(ub_transposed_load, x, x.copy())
