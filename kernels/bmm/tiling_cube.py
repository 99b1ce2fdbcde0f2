"""The base-tile search the cube branches share (docs/bmm_branches.md §8.2.4): baseM x baseN x baseK that fit L0A/L0B/L0C
double buffered, the L1 K depth k_L1 and the L1 buffer count, ranked by a quick cube-vs-move key."""
from __future__ import annotations

from pyto.chip import Chip
from pyto.errors import PlanError

from .conditions import ACC_BYTES, FRACTAL, Problem, align_down, align_up, cdiv
from .memo import memoised
from .tilings import bias_l1_bytes


def _base_k(bm: int, bn: int, kp: int, p: Problem, chip: Chip) -> int:
    """baseK from L0A/L0B with double buffering, inner axis aligned to 256B, else 128B, else k0 (docs/bmm_branches.md §8.2.4)."""
    raw = min(chip.buffers["L0A"] // (2 * bm * p.isz), chip.buffers["L0B"] // (2 * bn * p.isz))
    for a in (2 * chip.dvalue_bytes // p.isz, chip.dvalue_bytes // p.isz, p.k_align):
        if raw >= a and a % p.k_align == 0:
            return min(align_down(raw, a), kp)
    return 0


def _balanced(k: int, cap: int, step: int) -> int:
    """The L1 K depth: as few segments as `cap` allows, split evenly (multiples of `step`)."""
    return align_up(cdiv(k, cdiv(k, cap)), step)


def _k_l1(rows: int, bk: int, kp: int, budget: int, p: Problem) -> tuple[int, int, int]:
    """(base_k, k_L1, buffers): the deepest K multiple of bk whose double buffer of `rows` (A rows + B cols)
    fits the L1 budget; 4 buffers when they fit too (docs/bmm_branches.md §8.2.4: "余量充足时开 4 buffer")."""
    while bk >= p.k_align:
        s = budget // (2 * rows * bk * p.isz) if rows else cdiv(kp, bk)
        if s >= 1:
            k_l1 = _balanced(kp, s * bk, bk)
            return bk, k_l1, 4 if 4 * rows * k_l1 * p.isz <= budget else 2
        bk = align_down(bk // 2, p.k_align)
    return 0, 0, 0


def _candidates_key(m, n, k, batch, p, chip, *, cores, a_in_l1=False, b_in_l1=False, hold_copies=1, sharing=None,
                    held_twice=False) -> tuple:
    return (m, n, k, batch, p, id(chip), cores, a_in_l1, b_in_l1, hold_copies, sharing, held_twice)


@memoised(2048, key=_candidates_key, keep=lambda *a, **kw: a[5], copy=list)
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
    al, isz = p.mn_align, p.isz
    mp, np_, kp = align_up(m, al), align_up(n, al), align_up(k, p.k_align)
    l0c = chip.buffers["L0C"] // (2 * ACC_BYTES)
    cap_m = min(mp, align_down(chip.buffers["L0A"] // (2 * p.k_align * isz), al))
    cap_n = min(np_, align_down(chip.buffers["L0B"] // (2 * p.k_align * isz), al))
    if p.bias:
        cap_n = min(cap_n, align_down(chip.buffers["BT"] // ACC_BYTES, al))
    gm = chip.path("GM", "L1")
    cps, head = chip.cube_cycles_per_step[p.dtype.name], chip.mmad_head_cycles
    out = []
    for bm in range(al, cap_m + 1, al):
        for bn in range(al, cap_n + 1, al):
            if bm * bn > l0c:
                break
            bk = _base_k(bm, bn, kp, p, chip)
            if not bk:
                continue
            # a held side is a whole number of base tiles over K padded to base_k (block.held_ab's slab)
            held = ((align_up(m, bm) * align_up(k, bk) if a_in_l1 else 0)
                    + (align_up(n, bn) * align_up(k, bk) if b_in_l1 else 0)) * isz
            if held_twice and 2 * held > chip.buffers["L1"]:
                continue
            budget = chip.buffers["L1"] - hold_copies * held
            rows = (0 if a_in_l1 else bm) + (0 if b_in_l1 else bn)
            bk, k_l1, nbuf = _k_l1(rows, bk, kp, budget - bias_l1_bytes(bn, p), p)
            if not k_l1:
                continue
            tasks = batch * cdiv(m, bm) * cdiv(n, bn)
            active = min(tasks, cores) if sharing is None else sharing
            bw = min(gm.bytes_per_cycle, chip.l2_bytes_per_cycle / active)
            cube = cdiv(bm, FRACTAL) * cdiv(bn, FRACTAL) * cdiv(k, p.k0) * cps + cdiv(k, bk) * head
            move = rows * k * isz / bw + 2 * cdiv(k, k_l1) * gm.latency
            key = (cdiv(tasks, cores) * max(cube, move), cdiv(m, bm) * bm * cdiv(n, bn) * bn, -bm * bn)
            out.append((key, (bm, bn, bk, k_l1, nbuf)))
    if not out:
        held = " and ".join(s for s, on in (("A", a_in_l1), ("B", b_in_l1)) if on)
        held = f"{held} held whole in L1 x {hold_copies}" if held else "no side held whole in L1"
        raise PlanError(f"no cube tile of {m}x{n}x{k} fits L1 {chip.buffers['L1']} B ({held}) / L0A / L0B / L0C on "
                        f"{chip.name}")
    return sorted(out)


def cube_tiles(m: int, n: int, k: int, batch: int, p: Problem, chip: Chip, *, cores: int,
               a_in_l1: bool = False, b_in_l1: bool = False, hold_copies: int = 1,
               sharing: int | None = None) -> tuple[int, int, int, int, int]:
    """(base_m, base_n, base_k, k_l1, l1_buffers): the best of `cube_candidates` by its quick key."""
    return cube_candidates(m, n, k, batch, p, chip, cores=cores, a_in_l1=a_in_l1, b_in_l1=b_in_l1,
                           hold_copies=hold_copies, sharing=sharing)[0][1]
