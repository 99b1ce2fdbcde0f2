"""StreamK and Special tilings: grid_K cores sharing one output block along K (then an AIV reduction), and
the AIV path for K = 0 / K = 1 (UB tiles of C)."""
from __future__ import annotations

import math

from pyto.chip import Chip
from pyto.errors import PlanError

from .conditions import FRACTAL_BYTES, Problem, align_down, align_up, cdiv, grid_k_ok
from .cost import estimate
from .tiling_cube import cube_tiles
from .tilings import SpecialTiling, StreamKTiling, _special_ub, stream_counts


# ---- StreamK ------------------------------------------------------------------------------------------

def _pow2_floor(x: int) -> int:
    return 1 << (x.bit_length() - 1) if x >= 1 else 0


def stream_tiling(p: Problem, chip: Chip, reduce: str = "workspace", forced: bool = False,
                  theta: bool = True) -> StreamKTiling:
    """StreamK: grid_K = the largest power of two <= blocksPerBatch meeting condition 2, then mCnt x nCnt.

    theta=False (pyto's step beyond the seed, taken by the planner only when T_total says it pays; see
    planner._override): condition 2 keeps K/grid_K >= 256 but drops K >= grid_K^2*theta, and T_total picks
    grid_K among the powers of two up to that cap together with mCnt x nCnt. theta's safety factor (alpha ~ 10
    on T_MMAD/core >= alpha*T_Reduce) caps a memory-bound case at a few cores whose MTE2 ports then carry all of
    B; the model measures the reduction it guards against."""
    C, al, ka = chip.aic, p.mn_align, p.k_align
    bpb = C // p.batch
    g_max, g = 0, 2
    while g <= bpb:
        g_max = g if grid_k_ok(p, chip, g, theta) else g_max
        g *= 2
    fallback = not g_max
    if fallback:
        if not forced:
            raise PlanError(f"stream_k: no grid_K in 2..blocksPerBatch = {bpb} meets condition 2")
        g_max = 2
    if p.K < 2 * ka:
        raise PlanError(f"stream_k: K = {p.K} < 2*{ka} cannot be split into two K segments")
    cands = []
    for mc in range(1, cdiv(p.M, al) + 1):
        for nc in range(1, cdiv(p.N, al) + 1):
            room = bpb // (mc * nc)
            if room < 2:
                break
            gg = min(g_max, _pow2_floor(room))
            sm, sn = align_up(cdiv(p.M, mc), al), align_up(cdiv(p.N, nc), al)
            if (mc - 1) * sm >= p.M or (nc - 1) * sn >= p.N:
                continue                # the aligned blocks cover M (N) with fewer: the last would be empty
            cands.append((mc, nc, gg))
            while not theta and gg > 2:     # beyond the seed: smaller grid_K are candidates too
                gg //= 2
                cands.append((mc, nc, gg))
    if not cands:
        cands = [(1, 1, g_max)]
    # mCnt x nCnt: the seed wants factors of blocksPerBatch and every core busy, but narrow blocks cost burst
    # efficiency (rows under 128B) and re-reads: the cost model arbitrates, ties to more cores, then the seed's
    # factor preference, then square blocks
    best, best_key = None, None
    for mc, nc, gg in cands:
        t = _stream_of(p, chip, mc, nc, gg, g_max, bpb, reduce, fallback, theta)
        sm, sn = t.single_m, t.single_n
        key = (round(estimate(p, t, chip).t_total, 6), -t.units, bpb % (mc * nc) != 0, -mc * nc,
               abs(math.log(sm / sn)))
        if best_key is None or key < best_key:
            best, best_key = t, key
    return best


def _stream_of(p: Problem, chip: Chip, mc: int, nc: int, g: int, g_max: int, bpb: int, reduce: str,
               fallback: bool, theta: bool = True) -> StreamKTiling:
    C = chip.aic
    n = stream_counts(p, chip, mc, nc, g, reduce)
    sm, sn, sck, units = n["single_m"], n["single_n"], n["single_core_k"], n["units"]
    bm, bn, bk, k_l1, nbuf = cube_tiles(sm, sn, sck, 1, p, chip, cores=1)
    if fallback:    # docs/bmm_branches.md §7.2.4: then "该 case 不宜 StreamK"; a forced or overriding plan splits K in two anyway
        cap = (f"grid_K: no power of two in 2..blocksPerBatch = floor({C}/{p.batch}) = {bpb} meets condition 2 "
               f"(docs/bmm_branches.md §7.2.4: not a StreamK case); this plan (forced, or the override's) takes the smallest split, 2")
    elif theta:
        cap = (f"grid_K: largest power of two <= blocksPerBatch = floor({C}/{p.batch}) = {bpb} with K/grid_K >= "
               f"{chip.streamk_min_k_per_core} and K >= grid_K^2*theta: {g_max}")
    else:
        cap = (f"grid_K beyond the seed: K >= grid_K^2*theta dropped, K/grid_K >= {chip.streamk_min_k_per_core} kept: "
               f"powers of two up to {g_max} (<= blocksPerBatch = floor({C}/{p.batch}) = {bpb}) are candidates")
    rounds = n["rounds"]
    notes = (cap,
             f"mCnt x nCnt = {mc} x {nc} (of the splits leaving grid_K >= 2 and no empty block, the fastest by "
             f"T_total; B*grid_K*mCnt*nCnt = {units} units on {n['cores_used']} cores"
             + (f" in {rounds} rounds" if rounds > 1 else "") + f") -> grid_K = {g}, singleCoreK = ceil(K/grid_K) "
             f"aligned = {sck}",
             f"per-core block {sm}x{sn}, base tiles {bm}x{bn}x{bk}, k_L1 = {k_l1}; reduce = {reduce}")
    return StreamKTiling(g, mc, nc, bpb, sm, sn, sck, bm, bn, bk, k_l1, nbuf, 2, 2, reduce, units, n["cores_used"],
                         n["rounds"], n["workspace_bytes"], n["reduce_chunk"], notes)


# ---- Special ------------------------------------------------------------------------------------------

def special_tiling(p: Problem, chip: Chip) -> SpecialTiling:
    """The AIV tiling: UB tiles of rows x cols, two copies, spread over the vector cores."""
    if p.batch * p.M * p.N == 0:
        return SpecialTiling("empty", 0, 0, 0, 0, 0, 0, ("empty output: nothing to do",))
    if p.K > 1:
        raise PlanError(f"special: K = {p.K}; the AIV path needs K = 0 or K = 1")
    mode, ub, nbuf = ("fill" if p.K == 0 else "outer"), chip.buffers["UB"], 2
    cols = p.N
    step = FRACTAL_BYTES
    while cols > step and nbuf * _special_ub(mode, 1, cols, p) > ub:
        cols = align_down(cols // 2, step) or step
    lo, hi = 1, p.M
    while lo < hi:                                   # most rows whose double buffer fits UB
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if nbuf * _special_ub(mode, mid, cols, p) <= ub else (lo, mid - 1)
    rows = cdiv(p.M, cdiv(p.M, lo))                  # balanced row tiles
    return _special_of(p, chip, mode, rows, cols)


def _special_of(p: Problem, chip: Chip, mode: str, rows: int, cols: int) -> SpecialTiling:
    ub, nbuf = chip.buffers["UB"], 2
    units = p.batch * cdiv(p.M, rows) * cdiv(p.N, cols)
    used = min(units, chip.aiv)
    per = cdiv(units, used)
    # more than two copies when UB has room, up to one per tile the AIV runs: a small tile's transfers are
    # latency bound, and each extra copy keeps one more tile's loads in flight
    nbuf = max(nbuf, min(per, ub // max(1, _special_ub(mode, rows, cols, p))))
    notes = (f"{mode}: UB tile {rows}x{cols}, {nbuf} copies = "
             f"{nbuf * _special_ub(mode, rows, cols, p)} B <= UB {ub} B (two, or up to one per tile an AIV runs "
             f"when they fit); {units} tiles over {used} AIVs",)
    return SpecialTiling(mode, rows, cols, nbuf, units, per, used, notes)
