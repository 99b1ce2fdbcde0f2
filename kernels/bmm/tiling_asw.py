"""ASW_Basic and ToMatmul tilings: the 2-D base-tile walk (base tiles, L1 full load, L2 blocks, swizzle
window) and the batch folds ToMatmul runs it on."""
from __future__ import annotations

import numpy as np

from pyto.chip import Chip
from pyto.errors import PlanError

from ..swizzle import l2_blocks
from .conditions import ACC_BYTES, Problem, align_up, asw_window, cdiv
from . import cost_asw_vec, memo
from .cost import RESOLUTION, estimate
from .cost_asw import asw_floor
from .memo import memoised
from .tiling_cube import _candidate_arrays, cube_candidates
from .tilings import AswTiling, ToMatmulTiling

FULL_LOAD_ROUNDS = 4  # docs/bmm_branches.md §8.2.5: the other side loops >= 4 rounds per core before a side is held in L1
# Base tiles whose estimates differ by less than cost.RESOLUTION are ranked by padding, then cores in use, then
# size (docs/bmm_branches.md §8.2.4: divide M, N; 1/M^t + 1/N^t small). Against a 1% band over benchmarks/bmm_planner.py's suite:
# ToMatmul as chosen 77.7% -> 82.5% of roofline, ASW_Basic forced 82.7% -> 85.3% (medians); simulated times 1.3%
# and 0.6% lower (geometric means).


# ---- ASW_Basic ----------------------------------------------------------------------------------------

def _l2_tiles(m: int, n: int, k: int, bm: int, bn: int, p: Problem, chip: Chip) -> tuple[int, int]:
    """mL2TileNum x nL2TileNum (pyto_kernels.swizzle.l2_blocks)."""
    return l2_blocks(m, n, k, bm, bn, p.isz, chip.l2_bytes)


def _asw_of(p: Problem, chip: Chip, batch: int, m: int, n: int, k: int, tiles: tuple, full_load: str,
            notes: tuple = ()) -> AswTiling:
    bm, bn, bk, k_l1, nbuf = tiles
    C = chip.aic
    tm, tn = cdiv(m, bm), cdiv(n, bn)
    tasks = batch * tm * tn
    ml2, nl2 = _l2_tiles(m, n, k, bm, bn, p, chip)
    split = tuple(d for d, c in (("B", batch), ("M", tm), ("N", tn)) if c > 1)
    bres = "".join(s for s, on in (("A", p.broadcast in ("a", "cross")), ("B", p.broadcast in ("b", "cross")))
                   if on)
    return AswTiling(batch, m, n, k, bm, bn, bk, k_l1, nbuf, 2, 2, tm, tn, tasks, cdiv(tasks, min(tasks, C)),
                     min(tasks, C), split, asw_window(chip), ml2, nl2, full_load, bres, notes)


@memoised(4096, key=lambda p, chip, *a: (p, id(chip)) + a, keep=lambda p, chip, *a: chip)
def _asw_tiles(p: Problem, chip: Chip, batch: int, m: int, n: int, k: int, full_load: str) -> tuple:
    """The base tiles of an ASW tile walk: of every tile shape that fits (cube_candidates), the one the cost
    model (cost.estimate, the same model the planner arbitrates with) finds fastest; ties to less padding,
    then more cores in use, then the larger tile. The seed's ASW 4 leaves the choice to the balance of cube
    and move time."""
    where = dict(cores=chip.aic, a_in_l1=full_load == "A", b_in_l1=full_load == "B", held_twice=bool(full_load))
    if memo.enabled() and cost_asw_vec.supported(p, chip, full_load):
        # every candidate's T_total at once (cost_asw_vec: the same floats as estimate()), in cube_candidates'
        # order (its rows sorted), so the plain search's choice: the fastest, then within RESOLUTION of it the
        # least padding, most cores, largest tile, the first of equals
        cols = _candidate_arrays(m, n, k, batch, p, chip, **where)
        order = np.lexsort(cols[::-1])
        _, pad, area, *tiles = (c[order] for c in cols)
        times = cost_asw_vec.asw_t_totals(p, chip, batch, m, n, k, np.stack(tiles, axis=1), full_load)
        fastest = min(times.tolist())
        cores = np.minimum(batch * cdiv(m, tiles[0]) * cdiv(n, tiles[1]), chip.aic)
        band = np.flatnonzero(times <= fastest * (1 + RESOLUTION))
        best = band[np.lexsort((times[band], area[band], -cores[band], pad[band]))[0]]
        return tuple(int(c[best]) for c in tiles)
    cands = cube_candidates(m, n, k, batch, p, chip, **where)
    walks = [(_asw_of(p, chip, batch, m, n, k, tiles, full_load), pad, area, tiles) for (_, pad, area), tiles in cands]
    # estimated in the order of a lower bound on T_total (cost_asw.asw_floor), up to the first whose bound is
    # beyond RESOLUTION of the fastest so far: it and all after it are outside the band below (memo.disabled():
    # every one estimated, the plain search)
    floors = [asw_floor(t, p, chip) if memo.enabled() else 0.0 for t, *_ in walks]
    times: list = [None] * len(walks)
    fastest = float("inf")
    for i in sorted(range(len(walks)), key=floors.__getitem__):
        if floors[i] > fastest * (1 + RESOLUTION):
            break
        times[i] = estimate(p, walks[i][0], chip).t_total
        fastest = min(fastest, times[i])
    timed = [(e, pad, -t.cores_used, area, tiles) for e, (t, pad, area, tiles) in zip(times, walks) if e is not None]
    # within the model's resolution (RESOLUTION of the fastest) the tiles that pad least, then keep the most
    # cores busy, then the largest, win: what the seed asks of ASW besides the cube/move balance ("优先整除
    # M、N 减少尾块"; P >= C blocks before a larger tile; 1/M^t + 1/N^t small)
    return min((x for x in timed if x[0] <= fastest * (1 + RESOLUTION)), key=lambda x: (x[1], x[2], x[3], x[0]))[4]


def asw_tiling(p: Problem, chip: Chip, *, batch: int | None = None, m: int | None = None, n: int | None = None,
               full_load: str | None = None) -> AswTiling:
    """ASW_Basic tiling of `batch` x [m, K] @ [K, n] (defaults: the problem's own); full_load None = decide."""
    batch, m, n, k = p.batch if batch is None else batch, p.M if m is None else m, p.N if n is None else n, p.K
    C, isz, notes = chip.aic, p.isz, []
    bm, bn, bk, k_l1, nbuf = _asw_tiles(p, chip, batch, m, n, k, "")
    tasks = batch * cdiv(m, bm) * cdiv(n, bn)
    notes.append(f"base tiles {bm}x{bn}x{bk}: 2*{bm}*{bn}*4B = {2 * bm * bn * ACC_BYTES} B <= L0C "
                 f"{chip.buffers['L0C']} B, 2*{bm}*{bk}*{isz} <= L0A, 2*{bk}*{bn}*{isz} <= L0B; "
                 f"P = {batch}*{cdiv(m, bm)}*{cdiv(n, bn)} = {tasks} tiles for C = {C}")
    decided = full_load is None
    if decided:
        full_load = ""
        for side, rows, shared in (("A", m, p.batch_a == 1), ("B", n, p.batch_b == 1)):
            whole = align_up(rows, p.mn_align) * align_up(k, p.k_align) * isz
            base = bm if side == "A" else bn
            rounds = cdiv(tasks, C)
            if shared and batch > 1 and 2 * whole <= chip.buffers["L1"] and rounds >= FULL_LOAD_ROUNDS \
                    and not full_load:
                if align_up(rows, p.mn_align) <= base:
                    full_load = side
                    notes.append(f"L1 full load of {side}: no batch, {rows} rows fit one base tile, 2*{whole} B <= "
                                 f"L1, {rounds} >= {FULL_LOAD_ROUNDS} rounds per core")
                else:
                    notes.append(f"no L1 full load of {side}: 2*{whole} B <= L1 and {rounds} rounds per core, but "
                                 f"its {rows} rows exceed one base tile ({base}); pyto reads the seed's 'small side' "
                                 f"as one base tile's rows (the kernel holds it as that tile's operand)")
    if full_load:
        whole = (align_up(m if full_load == "A" else n, p.mn_align)) * align_up(k, p.k_align) * isz
        if whole > chip.buffers["L1"]:
            raise PlanError(f"full load of {full_load}: {whole} B > L1 {chip.buffers['L1']} B")
        try:
            bm, bn, bk, k_l1, nbuf = _asw_tiles(p, chip, batch, m, n, k, full_load)
        except PlanError as e:
            if not decided:
                raise
            # the held side is padded to each candidate's base_k, more than the k_align the test above used
            notes.append(f"no tile fits beside the whole {full_load} held in L1 (K padded to base_k): streamed "
                         f"instead ({e})")
            full_load = ""
    tm, tn = cdiv(m, bm), cdiv(n, bn)
    tasks = batch * tm * tn
    ml2, nl2 = _l2_tiles(m, n, k, bm, bn, p, chip)
    ws = (m * k + k * n) * isz
    notes.append(f"L2: one batch's A + B = {ws} B {'<=' if ml2 * nl2 == 1 else '>'} L2 {chip.l2_bytes} B -> "
                 f"mL2TileNum x nL2TileNum = {ml2} x {nl2}" + (" (diagonal core assignment per block)"
                                                               if ml2 * nl2 > 1 else ""))
    split = tuple(d for d, c in (("B", batch), ("M", tm), ("N", tn)) if c > 1)
    shared = [f"{'B[K,N]' if d == 'M' else 'A[M,K]'} shared by {tm if d == 'M' else tn} tiles"
              for d in split if d in "MN"]
    notes.append(f"split {'x'.join(split) or 'nothing'}" + (": " + ", ".join(shared) + " (repeats hit L2)"
                                                            if shared else ""))
    bres = "".join(s for s, on in (("A", p.broadcast in ("a", "cross")), ("B", p.broadcast in ("b", "cross")))
                   if on)
    return AswTiling(batch, m, n, k, bm, bn, bk, k_l1, nbuf, 2, 2, tm, tn, tasks, cdiv(tasks, min(tasks, C)),
                     min(tasks, C), split, asw_window(chip), ml2, nl2, full_load, bres, tuple(notes))


# ---- ToMatmul -----------------------------------------------------------------------------------------

def to_matmul_folds(p: Problem) -> tuple[str, ...]:
    """The folds docs/bmm_branches.md §4.2 offers for this problem, in order of preference."""
    if p.batch_a == 1 and p.batch_b == 1:
        return ("plain",)
    if p.batch_b == 1:
        return ("fold_m",)
    if p.batch_a == 1:
        return ("a_resident", "fold_n")
    return ()


def to_matmul_tiling(p: Problem, chip: Chip, fold: str) -> ToMatmulTiling:
    """One fold's tiling: the folded matmul shape, its rearrangement traffic and an ASW-style 2-D tiling."""
    B, M, N, K, isz = p.batch, p.M, p.N, p.K, p.isz
    if fold == "plain":
        mm = (1, M, N, 0, 0, "no batch: a plain matmul")
    elif fold == "fold_m" and not p.transpose_a and p.bias_rows == 1:
        mm = (1, B * M, N, 0, 0, "BatchB = 1: A [B, M, K] viewed as [B*M, K]")
    elif fold == "fold_m":
        # not a free view: the seed rewrites a DN A as ND first; the kernel (to_matmul.py) runs the batched walk
        # instead, B shared by every batch (re-read through L2): its tiles are B batches of [M, K] @ [K, N]
        why = "A is DN (batch and M not adjacent)" if p.transpose_a else \
            f"the bias differs between batches ({p.bias_rows} rows)"
        mm = (B, M, N, 2 * B * M * K * isz if p.transpose_a else 0, 0,
              f"BatchB = 1, but {why}: no [B*M, K] view; run as B batches sharing B (re-reads hit L2)")
    elif fold == "a_resident":
        if p.Mp * p.Kp * isz > chip.buffers["L1"]:
            raise PlanError(f"to_matmul a_resident: M̄K̄*dtype = {p.Mp * p.Kp * isz} B > L1 {chip.buffers['L1']} B")
        mm = (B, M, N, 0, 0, "BatchA = 1, M̄K̄*dtype <= L1: A held in every core's L1, cores share B's batches")
    elif fold == "fold_n":
        # the seed folds B to [K, B*N] (a transpose pass) and scatters the [M, B*N] output; the kernel runs the
        # broadcast problem instead (to_matmul.py), the same result without either pass: its tiles are those of
        # B batches of [M, K] @ [K, N], and the passes' bytes are recorded as what the fold would have moved
        mm = (B, M, N, 0 if p.transpose_b else 2 * B * K * N * isz, 2 * B * M * N * p.out_isz,
              "BatchA = 1: B [B, K, N] folded to [K, B*N]" + (" (DN B is already [B*N, K])" if p.transpose_b
                                                               else " by a transpose pass")
              + ", output [M, B*N] scattered to [B, M, N]; run as the broadcast problem (A's batch broadcast to "
              "B, A re-read through L2), which moves neither")
    else:
        raise PlanError(f"unknown fold {fold!r}")
    batch, m, n, rearr, scat, how = mm
    asw = asw_tiling(p, chip, batch=batch, m=m, n=n, full_load="")
    notes = [how]
    if fold == "a_resident":
        # docs/bmm_branches.md §4.2 prefers A held in every core's L1 (it fits twice, beside B's double buffer): taken when it
        # reads less than streaming -- each core's tiles would stream tasks_per_core * base_m rows of A, more
        # than A's M rows -- and is not slower by T_total beyond RESOLUTION (a held slab lands whole before the
        # first tile, all cores reading it at once; with one tile per core, or M split into tiles, each core
        # streaming just its rows reads less).
        whole = align_up(M, p.mn_align) * align_up(K, p.k_align) * isz
        streamed = asw.tasks_per_core * min(asw.base_m, M)
        held, why = None, ""
        if 2 * whole > chip.buffers["L1"]:
            why = f"2*{whole} B > L1"
        elif streamed <= M:
            why = f"{asw.tasks_per_core} tiles per core stream {streamed} <= M = {M} rows of A"
        else:
            try:
                held = asw_tiling(p, chip, batch=batch, m=m, n=n, full_load="A")
            except PlanError:           # no base tile leaves the padded slab within half of L1
                why = "no base tile keeps A's slab, padded to whole tiles, within half of L1"
            if held is not None:
                wrap = lambda a: ToMatmulTiling(fold, batch, m, n, K, rearr, scat, a)  # noqa: E731
                t_held, t_str = estimate(p, wrap(held), chip).t_total, estimate(p, wrap(asw), chip).t_total
                if t_held > t_str * (1 + RESOLUTION):     # within the model's resolution the seed's preference holds
                    why = f"holding A is slower by T_total ({t_held:.3f} vs {t_str:.3f} us streamed)"
                    held = None
        if held is not None:
            asw = held
            notes.append(f"A held in L1: 2*{whole} B <= L1 and {asw.tasks_per_core} tiles per core would stream "
                         f"{streamed} > M = {M} rows of A")
        else:
            notes.append(f"A not held ({why}): each core streams its tiles' rows of A, shared through L2")
    return ToMatmulTiling(fold, batch, m, n, K, rearr, scat, asw, tuple(notes))
