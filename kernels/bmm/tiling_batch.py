"""IterBatch and MergeBatch tilings: whole batches per core, one matmul each (IterBatch's L1 cases a-e and
its L0 pseudo-code) or b batches merged into one MMAD (MergeBatch steps 1-3)."""
from __future__ import annotations

import math

from pyto.chip import Chip
from pyto.errors import PlanError

from .conditions import ACC_BYTES, IterL1, Problem, align_down, align_up, cdiv
from .cost import estimate
from .tiling_cube import _balanced, cube_tiles
from .tilings import IterBatchTiling, MergeBatchTiling, bias_l1_bytes


# ---- IterBatch ----------------------------------------------------------------------------------------

def _small_side(s: int, l: int, kb: int, s_el: int, l_el: int, c_el: int, s_cap: int, l_cap: int, nbuf: int,
                p: Problem) -> tuple[int, int, int]:
    """The seed's else-branch: the smaller side whole (capped so one fractal remains on the other axes)."""
    al, ka = p.mn_align, p.k_align
    bs = min(s, s_cap, align_down(c_el // nbuf // al, al), align_down(s_el // nbuf // ka, al))
    l_cap = min(l_cap, align_down(l_el // (nbuf * ka), al))
    if nbuf == 1:                                    # case (a)
        bl = min(align_down(c_el // bs, al), l, l_cap)
        bk = min(align_down(s_el // bs, ka), align_down(l_el // bl, ka), kb)
    else:                                            # case (b); the seed's max() would overflow L0B or L0C
        bk = min(align_down(s_el // 2 // bs, ka), kb)
        bl = max(al, min(align_down(c_el // 2 // bs, al), align_down(l_el // 2 // bk, al), l, l_cap))
        bk = min(bk, align_down(l_el // 2 // bl, ka))
    return bs, bl, bk


def _seed_b_note(s: int, l: int, bk: int, s_el: int, l_el: int, c_el: int, p: Problem, names: str) -> str:
    """Where case (b)'s pseudo-code (the long side = max of its L0C and L0B bounds) does not fit two L0C or
    L0B copies, what the seed's number would be and why pyto takes the smaller bound; else ''."""
    al, ka = p.mn_align, p.k_align
    seed_k = min(align_down(s_el // 2 // s, ka), align_up(p.K, ka))
    c_term, b_term = align_down(c_el // 2 // s, al), align_down(l_el // 2 // max(seed_k, 1), al)
    seed_l = max(c_term, b_term)
    over = [f"{need} B of {buf} {cap} B" for need, buf, cap in
            ((2 * s * seed_l * ACC_BYTES, "L0C", c_el * ACC_BYTES),
             (2 * seed_l * seed_k * p.isz, "L0B" if names[1] == "N" else "L0A", l_el * p.isz)) if need > cap]
    if not over:
        return ""
    short, long_ = names
    return (f"; the seed's Base{long_} = max(L0C/2/4B/Base{short}, L0{'B' if long_ == 'N' else 'A'}/2/BaseK) = "
            f"max({c_term}, {b_term}) = {seed_l} would not fit two copies ({', '.join(over)}): pyto takes the "
            f"bounds' minimum, Base{long_} = {l}")


def _check_smallest(nc: int, n_cap: int, p: Problem, chip: Chip) -> None:
    """PlanError unless L0A, L0B and L0C hold `nc` copies of the else branch's smallest tiles (one fractal: 16
    rows or columns, k_align deep; fp32 in L0C) and, with a bias, BT one fractal's bias row: below them the
    branch's divisions would meet a tile side of 0 (a chip table with tiny legal L0 buffers)."""
    al, ka, isz = p.mn_align, p.k_align, p.isz
    copies = f"{nc} cop{'ies' if nc > 1 else 'y'}"
    for buf, need, tile in (("L0C", nc * al * al * ACC_BYTES, f"{al} x {al} fp32"),
                            ("L0A", nc * al * ka * isz, f"{al} x {ka} {p.dtype.name}"),
                            ("L0B", nc * ka * al * isz, f"{ka} x {al} {p.dtype.name}")):
        if chip.buffers[buf] < need:
            raise PlanError(f"iter_batch: {buf} {chip.buffers[buf]} B on {chip.name} holds no {copies} of the smallest "
                            f"tile ({tile}): needs {need} B")
    if n_cap < al:
        raise PlanError(f"iter_batch: BT {chip.buffers['BT']} B on {chip.name} holds no bias row of {al} fp32: needs "
                        f"{al * ACC_BYTES} B")


def iter_l0(m: int, n: int, k: int, pingpong: bool, p: Problem, chip: Chip) -> tuple[int, int, int, int, int, str]:
    """IterBatch L1->L0 tiles, the seed's pseudo-code for (a) (pingpong False) and (b) (True).

    Returns (BaseM, BaseN, BaseK, L0A/L0B copies, L0C copies, which branch). Divisions by L0A/L0B are in
    elements; "align" on a capacity bound is read as floor alignment, so every tile fits.
    """
    al, ka, isz = p.mn_align, p.k_align, p.isz
    mb, nb, kb = align_up(m, al), align_up(n, al), align_up(k, ka)
    a_el, b_el, c_el = chip.buffers["L0A"] // isz, chip.buffers["L0B"] // isz, chip.buffers["L0C"] // ACC_BYTES
    n_cap = align_down(chip.buffers["BT"] // ACC_BYTES, al) if p.bias else nb
    nc = 2 if pingpong else 1
    if mb * nb * nc <= c_el and a_el // mb >= ka and b_el // nb >= ka and nb <= n_cap:
        bk = min(align_down(a_el // mb, ka), align_down(b_el // nb, ka), kb)
        half = min(align_down(a_el // (2 * mb), ka), align_down(b_el // (2 * nb), ka), kb)
        how = f"L0C >= {nc}*M̄*N̄*4B: BaseM = M̄, BaseN = N̄, only K split"
        if pingpong and (2 * mb * bk > a_el or 2 * bk * nb > b_el) and half >= ka:
            # (b)'s "GM->L1->L0->Cube->L0C->GM 流水": with one L0 copy of BaseK the move and the cube cannot
            # overlap; two copies of the deepest BaseK that fits twice let MTE1 feed the cube while it works
            how += (f"; the seed's BaseK = min(L0A/M̄, L0B/N̄) = {bk} fits one L0A/L0B copy: pyto halves it to "
                    f"{half} for two, so MTE1 loads the next while the cube works ((b)'s pipeline)")
            bk = half
        l0 = 2 if 2 * mb * bk <= a_el and 2 * bk * nb <= b_el else 1     # double buffer where L0 has room
        return mb, nb, bk, l0, nc, how
    _check_smallest(nc, n_cap, p, chip)
    cap = (f"; with a bias, N̄ = {nb} > BT / 4B = {n_cap} columns (one BT load per tile): BaseN at most {n_cap}, so "
           f"the else branch" if nb > n_cap and mb * nb * nc <= c_el else "")
    if m < n:
        bm, bn, bk = _small_side(mb, nb, kb, a_el, b_el, c_el, mb, n_cap, nc, p)
        note = cap + (_seed_b_note(bm, bn, bk, a_el, b_el, c_el, p, "MN") if pingpong else "")
        return bm, bn, bk, nc, nc, "M < N: BaseM = align(M, 16), BaseN and BaseK from L0C, L0A, L0B" + note
    bn, bm, bk = _small_side(nb, mb, kb, b_el, a_el, c_el, n_cap, mb, nc, p)
    note = cap + (_seed_b_note(bn, bm, bk, b_el, a_el, c_el, p, "NM") if pingpong else "")
    return bm, bn, bk, nc, nc, "M >= N: BaseN = align(N, 16), BaseM and BaseK from L0C, L0A, L0B" + note


def _largest_divisor(k: int, upto: int, step: int) -> int:
    return next(d for d in range(align_down(upto, step), 0, -step) if k % d == 0)


def iter_tiling(p: Problem, chip: Chip, l1: IterL1) -> IterBatchTiling:
    """IterBatch tiling for the L1 case chosen by conditions.iter_l1.

    (a)/(b): the seed's L0 pseudo-code; both sides whole in L1 (l1_buffers copies). (c)/(d)/(e): the seed
    gives the entry condition and Step but no L0 rule ("同理，按各自容量预算计算 Step 与分块"): the split side
    streams through L1 once per output tile, so the tiles are the ASW core tiling (docs/bmm_branches.md §8.2.4: L0C double
    buffer, large tiles so that 1/M^t + 1/N^t is small: every extra tile row re-reads the streamed side) of
    one batch on one core, in the L1 the resident side leaves.
    """
    bpc = max(1, cdiv(p.batch, chip.aic))
    cores = max(1, min(p.batch, chip.aic))
    if l1.case in ("a", "b"):
        bm, bn, bk, l0b, l0cb, how = iter_l0(l1.m_l1, p.N, p.Kp, bpc > 1, p, chip)
        bm = min(bm, l1.m_l1)
        k_a = k_b = p.Kp
        streams = 0
        how = f"L0 ({'b' if bpc > 1 else 'a'} pseudo-code): {how} -> {bm}x{bn}x{bk}"
    else:
        # the tiles: the ASW core tiling's quick rule (cube_tiles) beside the resident side. Where the resident
        # side would be read by one output tile only, holding it saves no reads (and a held slab lands whole
        # ahead of the other side's pieces): streaming both sides, with the L1 it frees, is the other candidate
        # and T_total decides.
        a_in, b_in = l1.resident == "A", l1.resident == "B"
        tiles = cube_tiles(p.M, p.N, p.K, 1, p, chip, cores=1, a_in_l1=a_in, b_in_l1=b_in,
                           hold_copies=l1.l1_buffers, sharing=cores)
        held_note = ""
        if (a_in and cdiv(p.N, tiles[1]) == 1) or (b_in and cdiv(p.M, tiles[0]) == 1):
            both = cube_tiles(p.M, p.N, p.K, 1, p, chip, cores=1, sharing=cores)

            def as_tiling(res: str, tl: tuple) -> IterBatchTiling:
                return IterBatchTiling(l1.case, res, l1.step, l1.m_l1, p.Kp if res == "A" else tl[3],
                                       p.Kp if res == "B" else tl[3], tl[0], tl[1], tl[2],
                                       l1.l1_buffers if res else 1, tl[4], 2, 2, True, bpc, cores)
            if estimate(p, as_tiling("", both), chip).t_total < estimate(p, as_tiling(l1.resident, tiles),
                                                                          chip).t_total:
                tiles, a_in, b_in = both, False, False
                held_note = (f"the resident {l1.resident} would be read by one tile only: streamed with the other "
                             "side, faster by T_total; ")
        bm, bn, bk, k_l1, streams = tiles
        l0b = l0cb = 2
        k_a = p.Kp if a_in else k_l1
        k_b = p.Kp if b_in else k_l1
        held = {"A": f"A [{p.Mp}, {p.Kp}] held ({l1.l1_buffers} cop{'ies' if l1.l1_buffers > 1 else 'y'}), ",
                "B": f"B [{p.Kp}, {p.Np}] held ({l1.l1_buffers} copies), " if l1.l1_buffers > 1 else
                     f"B [{p.Kp}, {p.Np}] held, "}.get(l1.resident, "")
        if not (a_in or b_in):
            held = held_note
        how = (f"L0/L1 (ASW core tiling of one batch on one core): {held}the split side streamed per output tile "
               f"in K slices of {k_l1} ({streams} copies) -> {bm}x{bn}x{bk}")
    seed = (f"case ({l1.case}): resident {l1.resident or 'none'}, Step = {l1.step}, m_L1 = {l1.m_l1}, "
            f"seed k_L1 A/B = {l1.k_l1_a}/{l1.k_l1_b}" + (" (k_L1_b = min((L1 - M̄K̄*dtype)/(N̄*dtype), K))"
                                                          if l1.resident == "A" else ""))
    if l1.case not in ("a", "b"):
        seed += (f"; these size the seed's L1 budget (Step slabs); pyto's kernel streams the split side per output "
                 f"tile in K slices of {k_l1} instead (the seed gives no L0 rule for (c)-(e)), so Step and the "
                 f"seed's k_L1 describe the entry condition, not the kernel")
    notes = (seed, how)
    resident = l1.resident if l1.case in ("a", "b") or a_in or b_in else ""
    return IterBatchTiling(l1.case, resident, l1.step, l1.m_l1, k_a, k_b, bm, bn, bk,
                           l1.l1_buffers if resident else 1, streams, l0b, l0cb, True, bpc, cores, notes)


# ---- MergeBatch ---------------------------------------------------------------------------------------

def merge_tiling(p: Problem, chip: Chip) -> MergeBatchTiling:
    """MergeBatch steps 1-3. PlanError if not even b = 1 fits (L0C double buffer, k_L0, L1)."""
    C, b0, isz, ka = chip.aic, chip.merge_b0, p.isz, p.k_align
    mp, np_, kp = p.Mp, p.Np, p.Kp
    b_core, bpc = max(1, p.batch // C), max(1, cdiv(p.batch, C))
    b_i = math.isqrt(chip.buffers["L0C"] // (2 * mp * np_ * ACC_BYTES))
    ratio = 2 * p.M * p.N / (p.M + p.N)
    ridge = chip.ridge(p.dtype)
    b_ii = math.ceil(ridge / ratio) - 1 if ratio else b_i
    b_bt = chip.buffers["BT"] // (np_ * ACC_BYTES) if p.bias else b_i
    if min(b_i, b_bt) < 1:
        need = 2 * mp * np_ * ACC_BYTES
        raise PlanError(f"merge_batch: one batch's [M̄, N̄] fp32 tile double-buffered needs {need} B > L0C "
                        f"{chip.buffers['L0C']} B" if b_i < 1 else
                        f"merge_batch: bias row N̄*4B = {np_ * ACC_BYTES} B > BT {chip.buffers['BT']} B")
    # docs/bmm_branches.md §5.1.1: "2 组起步才能构成组间乒乓流水" -- at least two groups per core (b < batches per core)
    # wherever the core has the 2*b0 batches the home ground gives it
    b_grp = bpc - 1 if bpc >= 2 * b0 else bpc
    b_max = max(1, min(b_i, b_ii, b_core, b_grp, b_bt))
    divs = [d for d in range(b_max, 0, -1) if b_core % d == 0 and d >= min(b0, b_max)]
    first = divs[0] if divs else b_max
    notes = [f"Step 1: b_i = {b_i} (2*(b*{mp})*(b*{np_})*4B <= L0C), b_ii = {b_ii} (b*2MN/(M+N) = b*{ratio:.1f} "
             f"< R = {ridge:g}), b_core = {b_core}, at least two groups per core for the ping-pong: b <= {b_grp}"
             + (f", BT: b <= {b_bt}" if p.bias else "") + f" -> min = {b_max}; factor of b_core preferred: b = {first}"]
    for b in [first] + [x for x in range(b_max, 0, -1) if x != first]:
        k_l0 = min(align_down(min(chip.buffers["L0A"] // (2 * b * mp * isz),
                                  chip.buffers["L0B"] // (2 * b * np_ * isz)), ka), kp)
        if k_l0 < max(ka, chip.k_thr_bytes // isz):
            continue
        k_lo = min(k_l0, chip.dvalue_bytes // isz)
        l1 = chip.buffers["L1"] - bias_l1_bytes(b * np_, p)
        k_l1 = align_down(l1 // (2 * b * (mp + np_) * isz), k_l0)
        k_l1 = _balanced(kp, k_l1, k_l0) if k_l1 else 0
        if k_l1 < max(k_lo, k_l0):
            continue
        b_l1_max = l1 // (2 * (mp + np_) * k_l1 * isz)
        b_l1 = align_down(min(b_l1_max, max(b_core, b)), b)
        if b != first:
            notes.append(f"b = {first} leaves no k_L0 >= k_thr or k_L1 in L1; reduced to b = {b}")
        notes.append(f"Step 2: k_L0 = floor16(min(L0A/(2*b*M̄*dtype), L0B/(2*b*N̄*dtype))) = {k_l0} "
                     f"(>= k_thr = {chip.k_thr_bytes // isz}: the seed's 32B/dtype term read as the lower bound)")
        notes.append(f"Step 3: k_L1 = {k_l1} (fewest even K slices, multiples of k_L0, with 2*b*(M̄+N̄)*k_L1*dtype"
                     f" <= L1" + (f" less the bias rows' {chip.buffers['L1'] - l1} B" if p.bias else "")
                     + f", >= min(k_L0, 128B/dtype) = {k_lo}); b_L1 = min(b_L1_max = {b_l1_max}, b_core) "
                     f"rounded to a multiple of b = {b_l1} >= b")
        return MergeBatchTiling(b, b_l1, mp, np_, b * mp, b * np_, k_l0, k_l1, 2, 2, 2, bpc, cdiv(bpc, b),
                                cdiv(p.batch, bpc), tuple(notes))
    raise PlanError(f"merge_batch: even b = 1 leaves no k_L0 >= {ka} in L0A/L0B or no k_L1 in L1 "
                    f"(M̄ = {mp}, N̄ = {np_})")
