"""The base-tile search the cube branches share (docs/bmm_branches.md §8.2.4): baseM x baseN x baseK that fit L0A/L0B/L0C
double buffered, the L1 K depth k_L1 and the L1 buffer count, ranked by a quick cube-vs-move key."""
from __future__ import annotations

import numpy as np

from pyto.chip import Chip
from pyto.errors import PlanError

from .conditions import ACC_BYTES, FRACTAL, Problem, align_down, align_up, cdiv
from . import memo
from .memo import memoised
from .tilings import bias_l1_bytes


def _base_k(bm: np.ndarray, bn: np.ndarray, kp: int, p: Problem, chip: Chip) -> np.ndarray:
    """baseK from L0A/L0B with double buffering, inner axis aligned to 256B, else 128B, else k0 (docs/bmm_branches.md
    §8.2.4); 0 where none fits. Element-wise over arrays of base_m, base_n."""
    raw = np.minimum(chip.buffers["L0A"] // (2 * bm * p.isz), chip.buffers["L0B"] // (2 * bn * p.isz))
    out, chosen = np.zeros_like(raw), np.zeros(raw.shape, bool)
    for a in (2 * chip.dvalue_bytes // p.isz, chip.dvalue_bytes // p.isz, p.k_align):
        if a % p.k_align == 0:
            take = ~chosen & (raw >= a)
            out = np.where(take, np.minimum(raw // a * a, kp), out)
            chosen |= take
    return out


def _balanced(k, cap, step):
    """The L1 K depth: as few segments as `cap` allows, split evenly (multiples of `step`); ints or arrays."""
    return align_up(cdiv(k, cdiv(k, cap)), step)


def _k_l1(rows, bk: np.ndarray, kp: int, budget: np.ndarray, p: Problem) -> tuple[np.ndarray, ...]:
    """(base_k, k_L1, buffers): the deepest K multiple of bk (halved until one fits) whose double buffer of `rows`
    (A rows + B cols) fits the L1 budget; 4 buffers when they fit too (docs/bmm_branches.md §8.2.4: "余量充足时开 4
    buffer"); (0, 0, 0) where none fits. Element-wise over arrays."""
    ka, isz = p.k_align, p.isz
    out_bk, out_kl1, out_nbuf = np.zeros_like(bk), np.zeros_like(bk), np.zeros_like(bk)
    done = np.zeros(bk.shape, bool)
    bk = bk.copy()
    while True:
        live = ~done & (bk >= ka)
        if not live.any():
            return out_bk, out_kl1, out_nbuf
        safe = np.where(live, bk, 1)
        s = budget // (2 * rows * safe * isz) if np.all(rows) else np.where(rows > 0, budget // np.maximum(
            2 * rows * safe * isz, 1), cdiv(kp, safe))
        hit = live & (s >= 1)
        k_l1 = _balanced(kp, np.where(hit, s * safe, 1), safe)
        out_bk = np.where(hit, bk, out_bk)
        out_kl1 = np.where(hit, k_l1, out_kl1)
        out_nbuf = np.where(hit, np.where(4 * rows * k_l1 * isz <= budget, 4, 2), out_nbuf)
        done |= hit
        bk = np.where(live & ~hit, bk // 2 // ka * ka, bk)


def _candidates_key(m, n, k, batch, p, chip, *, cores, a_in_l1=False, b_in_l1=False, hold_copies=1, sharing=None,
                    held_twice=False) -> tuple:
    return (m, n, k, batch, p, id(chip), cores, a_in_l1, b_in_l1, hold_copies, sharing, held_twice)


# 256 entries: each a list of up to ~1,000 candidates (~100 KB)
@memoised(256, key=_candidates_key, keep=lambda *a, **kw: a[5], copy=list)
def cube_candidates(m: int, n: int, k: int, batch: int, p: Problem, chip: Chip, *, cores: int,
                    a_in_l1: bool = False, b_in_l1: bool = False, hold_copies: int = 1,
                    sharing: int | None = None, held_twice: bool = False
                    ) -> list[tuple[tuple, tuple[int, int, int, int, int]]]:
    """Every (key, (base_m, base_n, base_k, k_l1, l1_buffers)) whose tiles fit L0A/L0B/L0C (double buffered)
    and L1; key: a quick figure of merit, rounds x max(cube, move) per tile, then padding, then size.

    docs/bmm_branches.md §8.2.4: M^t N^t 4B DB <= L0C; 1/M^t + 1/N^t small (cube bound); divide M, N (few tail tiles).
    a_in_l1 / b_in_l1: that side is held whole in L1 (hold_copies copies), not streamed; held_twice: the held
    slab must fit L1 twice (the L1 full load's rule, docs/bmm_branches.md §8.2.5: MK*dtype*2 <= L1). sharing: cores loading
    at the same time (default min(tasks, cores)). The bias row's two L1 slots are reserved.
    """
    cols = _candidate_arrays(m, n, k, batch, p, chip, cores=cores, a_in_l1=a_in_l1, b_in_l1=b_in_l1,
                             hold_copies=hold_copies, sharing=sharing, held_twice=held_twice)
    return sorted(zip(zip(*(c.tolist() for c in cols[:3])), zip(*(c.tolist() for c in cols[3:]))))


@memoised(1024, key=_candidates_key, keep=lambda *a, **kw: a[5])
def _first_candidate(m: int, n: int, k: int, batch: int, p: Problem, chip: Chip, **kw) -> tuple:
    """cube_candidates(...)[0][1] without the list: the lexicographic least (key, tiles) row of the arrays."""
    cols = _candidate_arrays(m, n, k, batch, p, chip, **kw)
    i = np.lexsort(cols[::-1])[0]
    return tuple(int(c[i]) for c in cols[3:])


def _candidate_arrays(m: int, n: int, k: int, batch: int, p: Problem, chip: Chip, *, cores: int,
                      a_in_l1: bool = False, b_in_l1: bool = False, hold_copies: int = 1,
                      sharing: int | None = None, held_twice: bool = False) -> tuple[np.ndarray, ...]:
    """cube_candidates' rows as columns (key: merit, padding, -size; tiles: base_m, base_n, base_k, k_l1,
    l1_buffers), unsorted; PlanError when none fits."""
    al, isz = p.mn_align, p.isz
    mp, np_, kp = align_up(m, al), align_up(n, al), align_up(k, p.k_align)
    l0c = chip.buffers["L0C"] // (2 * ACC_BYTES)
    cap_m = min(mp, align_down(chip.buffers["L0A"] // (2 * p.k_align * isz), al))
    cap_n = min(np_, align_down(chip.buffers["L0B"] // (2 * p.k_align * isz), al))
    if p.bias:
        cap_n = min(cap_n, align_down(chip.buffers["BT"] // ACC_BYTES, al))
    gm = chip.path("GM", "L1")
    cps, head = chip.cube_cycles_per_step[p.dtype.name], chip.mmad_head_cycles
    # every (base_m, base_n) at once: a grid of int64 (exact: the sizes are far below 2**53), the float key from
    # the same operations in the same order as one at a time
    bm, bn = np.meshgrid(np.arange(al, cap_m + 1, al, dtype=np.int64), np.arange(al, cap_n + 1, al, dtype=np.int64),
                         indexing="ij")
    bm, bn = bm.ravel(), bn.ravel()
    fit = bm * bn <= l0c
    bm, bn = bm[fit], bn[fit]
    bk = _base_k(bm, bn, kp, p, chip)
    ok = bk > 0
    bm, bn, bk = bm[ok], bn[ok], bk[ok]
    # a held side is a whole number of base tiles over K padded to base_k (block.held_ab's slab)
    held = ((align_up(m, bm) * align_up(k, bk) if a_in_l1 else 0)
            + (align_up(n, bn) * align_up(k, bk) if b_in_l1 else 0)) * isz + np.zeros_like(bm)
    if held_twice:
        ok = 2 * held <= chip.buffers["L1"]
        bm, bn, bk, held = bm[ok], bn[ok], bk[ok], held[ok]
    budget = chip.buffers["L1"] - hold_copies * held
    rows = (0 if a_in_l1 else bm) + (0 if b_in_l1 else bn) + np.zeros_like(bm)
    bias = np.array([bias_l1_bytes(int(x), p) for x in bn], np.int64) if p.bias else 0
    bk, k_l1, nbuf = _k_l1(rows, bk, kp, budget - bias, p)
    ok = k_l1 > 0
    bm, bn, bk, k_l1, nbuf, rows = bm[ok], bn[ok], bk[ok], k_l1[ok], nbuf[ok], rows[ok]
    tasks = batch * cdiv(m, bm) * cdiv(n, bn)
    active = np.minimum(tasks, cores) if sharing is None else sharing
    bw = np.minimum(gm.bytes_per_cycle, chip.l2_bytes_per_cycle / active)
    cube = cdiv(bm, FRACTAL) * cdiv(bn, FRACTAL) * cdiv(k, p.k0) * cps + cdiv(k, bk) * head
    move = rows * k * isz / bw + 2 * cdiv(k, k_l1) * gm.latency
    if not len(bm):
        held = " and ".join(s for s, on in (("A", a_in_l1), ("B", b_in_l1)) if on)
        held = f"{held} held whole in L1 x {hold_copies}" if held else "no side held whole in L1"
        raise PlanError(f"no cube tile of {m}x{n}x{k} fits L1 {chip.buffers['L1']} B ({held}) / L0A / L0B / L0C on "
                        f"{chip.name}")
    return (cdiv(tasks, cores) * np.maximum(cube, move), cdiv(m, bm) * bm * cdiv(n, bn) * bn, -bm * bn,
            bm, bn, bk, k_l1, nbuf)


def cube_tiles(m: int, n: int, k: int, batch: int, p: Problem, chip: Chip, *, cores: int,
               a_in_l1: bool = False, b_in_l1: bool = False, hold_copies: int = 1,
               sharing: int | None = None) -> tuple[int, int, int, int, int]:
    """(base_m, base_n, base_k, k_l1, l1_buffers): the best of `cube_candidates` by its quick key."""
    if memo.enabled():
        return _first_candidate(m, n, k, batch, p, chip, cores=cores, a_in_l1=a_in_l1, b_in_l1=b_in_l1,
                                hold_copies=hold_copies, sharing=sharing)
    return cube_candidates(m, n, k, batch, p, chip, cores=cores, a_in_l1=a_in_l1, b_in_l1=b_in_l1,
                           hold_copies=hold_copies, sharing=sharing)[0][1]
