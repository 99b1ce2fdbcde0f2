"""The ASW walk's T_total (cost_asw._asw, then _Work.finish) for many base tiles at once, with numpy: the tile
search's inner loop (tiling_asw._asw_tiles) without a Python walk per candidate.

Same floats as the scalar model: every value is computed by the same operations in the same order, in float64
(integers in int64, exact: far below 2**53, converted where the scalar model mixes them with floats); a class of
tiles or an L1 step a candidate lacks is skipped with np.where, never added as a zero. Covers a walk streaming
both sides or holding one in L1 (full_load), of a non-MX problem with whole-byte elements; `supported` says when,
the scalar model runs otherwise. tests/test_planner_speed.py checks it against cost.estimate(...).t_total bit for bit.
"""
from __future__ import annotations

import numpy as np

from pyto.chip import Chip
from pyto.tiling import bias_row_bytes

from .block import m_trim
from .conditions import ACC_BYTES, FRACTAL, Problem
from .cost_pipes import _rate


def supported(p: Problem, chip: Chip, full_load: str) -> bool:
    """The walks this module models: not MX, whole-byte elements, a cube rate."""
    return (not p.mx and isinstance(p.isz, int) and p.K > 0
            and chip.cube_cycles_per_step.get(p.dtype.name) is not None)


def _cdiv(a, b):
    return -(-a // b)


def _align_up(x, a):
    return _cdiv(x, a) * a


def _region(chip: Chip, rows, cols, row_len: int, isz: int) -> np.ndarray:
    """cost_pipes.region over arrays (int64 rows/cols): charged bytes as float64."""
    burst = chip.burst_min_bytes
    whole = np.maximum(rows * cols * isz, burst)
    part = rows * np.maximum(cols * isz, burst)
    out = np.where(cols >= row_len, whole, part).astype(np.float64)
    return np.where((rows <= 0) | (cols <= 0), 0.0, out)


def _a_region(chip: Chip, p: Problem, r, kc) -> np.ndarray:
    return _region(chip, kc, r, p.M, p.isz) if p.transpose_a else _region(chip, r, kc, p.K, p.isz)


def _b_region(chip: Chip, p: Problem, kc, c) -> np.ndarray:
    return _region(chip, c, kc, p.K, p.isz) if p.transpose_b else _region(chip, kc, c, p.N, p.isz)


class _Pipes:
    """The chip constants the model reads, looked up once."""

    def __init__(self, p: Problem, chip: Chip):
        self.setup = chip.dma_setup_cycles
        self.gm_l1 = _rate(chip, "GM", "L1")
        self.l0c_gm = _rate(chip, "L0C", "GM")
        self.l0a = _rate(chip, "L1", "L0A").bytes_per_cycle
        self.l0b = _rate(chip, "L1", "L0B").bytes_per_cycle
        self.cps = chip.cube_cycles_per_step[p.dtype.name]
        self.head = chip.mmad_head_cycles
        self.k0 = p.k0

    def xfer(self, charged):
        return self.setup + charged / self.gm_l1.bytes_per_cycle

    def mte1(self, a_bytes, b_bytes):
        return a_bytes / self.l0a + b_bytes / self.l0b

    def mmad(self, m, n, k):
        return _cdiv(m, FRACTAL) * _cdiv(n, FRACTAL) * _cdiv(k, self.k0) * self.cps + self.head


def _tile(pp: _Pipes, p: Problem, chip: Chip, rows, cols, k: int, bm, bn, bk, kl1, pieces, hold: str) -> dict:
    """cost_tile._acc_tile of one tile class (rows x cols over all of K, pieces >= 1, the side `hold` names held
    in L1, not streamed) for every candidate: its _Tile's fields as float64 arrays."""
    full_s, tail_s = np.divmod(k, kl1)
    steps = ((full_s, full_s > 0), (1, tail_s > 0))        # the full L1 steps (kl = k_l1), then the tail
    n = len(bm)
    # both kinds of L1 step at once (stacked: full, then tail); a step a candidate lacks gets any valid extent
    kl = np.concatenate([np.where(full_s > 0, kl1, 1), np.where(tail_s > 0, tail_s, 1)])
    two = lambda a: np.concatenate([a, a])  # noqa: E731
    one = _l1_step(pp, p, chip, two(rows), two(cols), kl, two(bm), two(bn), two(bk), two(pieces), hold)
    z = np.zeros(n)
    t = {f: z for f in ("xfers", "mte2", "a_bytes", "b_bytes", "mte1", "mmad", "steps", "cons")}
    first_in = first_l0 = last_cube = z
    seen = np.zeros(n, bool)                     # an earlier L1 step exists (si > 0)
    for i, (cnt, on) in enumerate(steps):
        x = {f: v[i * n:(i + 1) * n] for f, v in one.items()}
        new = {"xfers": t["xfers"] + cnt * x["nx"], "mte2": t["mte2"] + cnt * x["mte2"],
               "a_bytes": t["a_bytes"] + cnt * x["ab_sum"], "b_bytes": t["b_bytes"] + cnt * x["bb_sum"],
               "mte1": t["mte1"] + cnt * x["m1"], "mmad": t["mmad"] + cnt * x["mm"], "steps": t["steps"] + cnt,
               "cons": t["cons"] + cnt * np.maximum(x["m1"], x["mm"])}
        t = {f: np.where(on, new[f], t[f]) for f in t}
        first = on & ~seen
        first_in = np.where(first, x["first_cyc"], first_in)
        first_l0 = np.where(first, x["first_l0"], first_l0)
        last_cube = np.where(on, x["last_cube"], last_cube)
        seen |= on
    t.update(first_in=first_in, first_l0=first_l0, last_cube=last_cube)
    t["store"] = _region(chip, rows, cols, p.N, p.out_isz)
    t["store_cyc"] = chip.dma_setup_cycles + t["store"] / pp.l0c_gm.bytes_per_cycle
    return t


def _l1_step(pp: _Pipes, p: Problem, chip: Chip, rows, cols, kl, bm, bn, bk, pieces, hold: str) -> dict:
    """One L1 step of kl along K of a rows x cols tile (cost_tile._acc_tile's loop body): its GM pieces'
    transfers, cycles and charged bytes, its L0 steps' MTE1 and MMAD cycles, its first and last pieces."""
    isz = p.isz
    align = max(FRACTAL, p.k0)
    mt = np.minimum(bm, _align_up(rows, m_trim(isz, p.transpose_a and not chip.dn2nz)))
    nt = np.minimum(bn, _align_up(cols, align))
    a_r, b_c = np.minimum(mt, rows), np.minimum(nt, cols)
    z = np.zeros(len(bm))
    k_all = _align_up(kl, align)
    step = _align_up(_cdiv(k_all, np.maximum(1, pieces)), bk)
    n_pc = _cdiv(k_all, step)
    mte2 = nx = ab_sum = bb_sum = first_cyc = z
    for j in range(int(n_pc.max())):
        live = j < n_pc
        kp = j * step
        kw = np.minimum(step, k_all - kp)
        kc = np.maximum(0, np.minimum(kw, kl - kp))
        ab = _a_region(chip, p, a_r, kc) if hold != "A" else z
        bb = _b_region(chip, p, kc, b_c) if hold != "B" else z
        cyc = (pp.xfer(ab) if hold != "A" else 0.0) + (pp.xfer(bb) if hold != "B" else 0.0)
        nx = np.where(live, nx + (2 if not hold else 1), nx)
        mte2 = np.where(live, mte2 + cyc, mte2)
        ab_sum = np.where(live, ab_sum + ab, ab_sum)
        bb_sum = np.where(live, bb_sum + bb, bb_sum)
        if j == 0:
            first_cyc = cyc
    last_w = k_all - (n_pc - 1) * step
    full0, tail0 = np.divmod(kl, bk)
    kt_t = _align_up(tail0, align)
    has_f, has_t = full0 > 0, tail0 > 0
    m1_f = full0 * pp.mte1(mt * bk * isz, bk * nt * isz)
    m1_t = 1 * pp.mte1(mt * kt_t * isz, kt_t * nt * isz)
    m1 = np.where(has_f, np.where(has_t, 0 + m1_f + m1_t, 0 + m1_f), 0 + m1_t)
    mm_f = full0 * pp.mmad(mt, nt, bk)
    mm_t = 1 * pp.mmad(mt, nt, kt_t)
    mm = np.where(has_f, np.where(has_t, 0 + mm_f + mm_t, 0 + mm_f), 0 + mm_t).astype(np.float64)
    kt0 = np.where(has_f, bk, kt_t)
    share = np.minimum(1.0, last_w / np.maximum(1, kl))
    kt_l = np.where(has_t, kt_t, bk)
    return dict(nx=nx, mte2=mte2, ab_sum=ab_sum, bb_sum=bb_sum, m1=m1, mm=mm, first_cyc=first_cyc,
                first_l0=pp.mte1(mt * kt0 * isz, kt0 * nt * isz),
                last_cube=share * mm + pp.mte1(mt * kt_l * isz, kt_l * nt * isz))


def _l2_blocks(m: int, n: int, k: int, bm, bn, isz: int, l2_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """swizzle.l2_blocks for every candidate (A + B exceed L2): over a grid candidates x mL2TileNum, the fewest
    blocks whose A rows + B columns fit L2, ties to the smaller tails, then to the smaller mL2TileNum (its loop's
    first); (tiles_m, tiles_n) where none fits. Integers throughout."""
    tm, tn = _cdiv(m, bm), _cdiv(n, bn)
    ml2 = np.arange(1, int(tm.max()) + 1, dtype=np.int64)[None, :]
    tm2, tn2, bm2, bn2 = tm[:, None], tn[:, None], bm[:, None], bn[:, None]
    rest = l2_bytes - _cdiv(tm2, ml2) * bm2 * k * isz
    cols = np.where(rest > 0, rest // (k * bn2 * isz), 0)
    ok = (cols >= 1) & (ml2 <= tm2)
    nl2 = _cdiv(tn2, np.maximum(1, np.minimum(cols, tn2)))
    k1 = ml2 * nl2
    k2 = ml2 * _cdiv(tm2, ml2) - tm2 + nl2 * _cdiv(tn2, nl2) - tn2        # >= 0, < tm + tn
    key = np.where(ok, k1 * (2 * (tm2 + tn2) + 1) + k2, np.iinfo(np.int64).max)
    best = np.argmin(key, axis=1)                                          # the first of the smallest
    found = ok[np.arange(len(bm)), best]
    rows = np.arange(len(bm))
    return np.where(found, ml2[0, best], tm), np.where(found, nl2[rows, best], tn)


def _stages(p: Problem, chip: Chip, m: int, n: int, k: int, bm, bn, bk, kl1, nbuf, hold: str) -> np.ndarray:
    """asw_basic.params_of(...)["STAGES"]: l1_buffers halved until l1_use (the streamed slots, the held slab, the
    bias row) fits L1."""
    dt = p.dtype
    a = 32 if dt.bits == 8 else 16
    used1 = (0 if hold == "A" else _align_up(bm, a) * _align_up(kl1, a) * dt.itemsize,
             0 if hold == "B" else _align_up(kl1, a) * _align_up(bn, a) * dt.itemsize)
    k_pad = _align_up(k, bk)
    slab = (_align_up(_align_up(m, bm), a) * _align_up(k_pad, a) * dt.itemsize if hold == "A" else
            _align_up(k_pad, a) * _align_up(_align_up(n, bn), a) * dt.itemsize if hold == "B" else 0)
    bias = np.array([bias_row_bytes(int(x), dt.acc.itemsize) for x in bn], np.int64) if p.bias else 0
    st = nbuf.copy()
    while True:
        over = (st > 1) & (st * used1[0] + st * used1[1] + slab + bias > chip.buffers["L1"])
        if not over.any():
            return st
        st = np.where(over, st // 2, st)


def asw_t_totals(p: Problem, chip: Chip, batch: int, m: int, n: int, k: int, tiles: "list[tuple] | np.ndarray",
                 full_load: str = "") -> np.ndarray:
    """estimate(p, tiling_asw._asw_of(p, chip, batch, m, n, k, t, full_load), chip).t_total for every t =
    (base_m, base_n, base_k, k_l1, l1_buffers) in `tiles` (see `supported`)."""
    arr = np.array(tiles, np.int64).reshape(-1, 5)
    bm, bn, bk, kl1, nbuf = arr.T
    pp = _Pipes(p, chip)
    C, isz, sync = chip.aic, p.isz, chip.flag_latency_cycles
    tm, tn = _cdiv(m, bm), _cdiv(n, bn)
    tasks = batch * tm * tn
    cores = np.minimum(tasks, C)
    per = _cdiv(tasks, np.minimum(tasks, C))
    if (m * k + k * n) * isz <= chip.l2_bytes:
        ml2 = nl2 = np.ones(len(bm), np.int64)
    else:
        # candidates in chunks of a grid of at most ~256K mL2TileNum values (a long M has thousands of tile rows)
        step = max(1, (1 << 18) // int(_cdiv(m, bm).max()))
        parts = [_l2_blocks(m, n, k, bm[i:i + step], bn[i:i + step], isz, chip.l2_bytes)
                 for i in range(0, len(bm), step)]
        ml2, nl2 = np.concatenate([a for a, _ in parts]), np.concatenate([b for _, b in parts])
    steps = np.maximum(1, kl1 // bk)
    pieces = np.maximum(1, np.minimum(steps, np.minimum(bm, bn) * kl1 * isz // (2 * chip.min_tile_bytes)))
    # _reuse
    ra = np.maximum(1.0, tn * (batch / p.batch_a if p.batch_a < batch else 1))
    rb = np.maximum(1.0, tm * (batch / p.batch_b if p.batch_b < batch else 1))
    in_flight = np.minimum(batch, _cdiv(cores, tm * tn))
    a_live = np.where(ra > 1, (1 if p.batch_a == 1 else in_flight) * _cdiv(tm, ml2) * bm, 0)
    b_live = np.where(rb > 1, (1 if p.batch_b == 1 else in_flight) * _cdiv(tn, nl2) * bn, 0)
    live = (a_live + b_live) * k * isz
    live = np.where(per == 1, np.minimum(live, cores * (bm + bn) * kl1 * 2 * isz), live)
    fits = live <= chip.l2_bytes
    fa = np.where(fits, 1 - 1 / ra, 0.0)
    fb = np.where(fits, 1 - 1 / rb, 0.0)
    # the tile classes in _tiles' order: (full rows, full cols), (full, tail), (tail, full), (tail, tail)
    fm, tlm = np.divmod(m, bm)
    fn, tln = np.divmod(n, bn)
    # the four classes of every candidate through _tile at once (stacked: class-major), then split
    shape = []
    for r, cm in ((bm, fm), (tlm, np.ones_like(bm))):
        for c, cn in ((bn, fn), (tln, np.ones_like(bn))):
            on = (cm > 0) & (r > 0) & (cn > 0) & (c > 0)
            shape.append((np.where(on, r, 1), np.where(on, c, 1), cm * cn, on))
    shape = [x for x in shape if x[3].any()]          # a class no candidate has
    n_c, rep = len(bm), len(shape)
    stacked = _tile(pp, p, chip, np.concatenate([x[0] for x in shape]), np.concatenate([x[1] for x in shape]), k,
                    *(np.tile(a, rep) for a in (bm, bn, bk, kl1, pieces)), full_load)
    classes = [({f: v[i * n_c:(i + 1) * n_c] for f, v in stacked.items()}, cnt, on)
               for i, (_, _, cnt, on) in enumerate(shape)]
    n_tiles = tm * tn
    z = np.zeros(len(bm))
    avg = dict.fromkeys(("a_bytes", "b_bytes", "mte2"), z)
    sum_a = sum_b = sum_store = np.zeros(len(bm), np.int64) + 0.0
    started = np.zeros(len(bm), bool)
    for tl, cnt, on in classes:
        frac = cnt / n_tiles
        for f in avg:
            avg[f] = np.where(on, avg[f] + frac * tl[f], avg[f])
        # Python's sum(): 0 + x0 + x1 ... (0 + x is x)
        sum_a = np.where(on, np.where(started, sum_a + tl["a_bytes"] * cnt, tl["a_bytes"] * cnt), sum_a)
        sum_b = np.where(on, np.where(started, sum_b + tl["b_bytes"] * cnt, tl["b_bytes"] * cnt), sum_b)
        sum_store = np.where(on, np.where(started, sum_store + tl["store"] * cnt, tl["store"] * cnt), sum_store)
        started |= on
    # _biggest: the first class of the largest (max(mmad, mte2, mte1), mmad + mte2)
    big = None
    for tl, _, on in classes:
        k1 = np.maximum(np.maximum(tl["mmad"], tl["mte2"]), tl["mte1"])
        k2 = tl["mmad"] + tl["mte2"]
        if big is None:
            big, b1, b2, bon = dict(tl), k1, k2, on.copy()
            continue
        take = on & (~bon | (k1 > b1) | ((k1 == b1) & (k2 > b2)))
        big = {f: np.where(take, tl[f], big[f]) for f in big}
        b1, b2, bon = np.where(take, k1, b1), np.where(take, k2, b2), bon | take
    tot_a, tot_b = batch * sum_a, batch * sum_b
    gm_read = l2_read = z
    for unique, total in ((tot_a / ra, tot_a), (tot_b / rb, tot_b)):     # _Work.traffic
        total = np.maximum(total, unique)
        gm_read = np.where(live <= chip.l2_bytes, gm_read + unique, gm_read + total)
        l2_read = np.where(live <= chip.l2_bytes, l2_read + (total - unique), l2_read)
    core_gm = 0.0 + (per * (avg["a_bytes"] + avg["b_bytes"]) - per * (fa * avg["a_bytes"] + fb * avg["b_bytes"]))
    core_l2 = 0.0 + per * (fa * avg["a_bytes"] + fb * avg["b_bytes"])
    lat_gm = pp.gm_l1.latency + chip.gm_latency_cycles
    cyc_mte2 = first_phase = first_port = first_gm = first_l2 = head = 0.0
    if full_load:                                       # the held slab (cost_asw._asw's hold_a / hold_b)
        hold_a = full_load == "A"
        rows = _align_up(m, bm) if hold_a else _align_up(n, bn)
        k_pad = np.minimum(_align_up(k, bk), p.K)
        hb = _a_region(chip, p, np.minimum(rows, p.M), k_pad) if hold_a else _b_region(chip, p, k_pad,
                                                                                         np.minimum(rows, p.N))
        holds = 1 if (p.batch_a == 1 if hold_a else p.batch_b == 1) else per
        held = pp.xfer(hb)
        cyc_mte2 = cyc_mte2 + holds * held
        total = np.maximum(holds * cores * hb, hb)                   # _Work.traffic(hb, holds*cores*hb, hb)
        gm_read = np.where(hb <= chip.l2_bytes, gm_read + hb, gm_read + total)
        l2_read = np.where(hb <= chip.l2_bytes, l2_read + (total - hb), l2_read)
        core_gm = core_gm + (holds * hb - (holds - 1) * hb)
        core_l2 = core_l2 + (holds - 1) * hb
        once = holds == 1 if not isinstance(holds, int) else np.full(len(bm), True)
        first_phase = np.where(once, np.maximum(np.maximum(held, hb / chip.gm_bytes_per_cycle),
                                                (cores - 1) * hb / chip.l2_bytes_per_cycle), 0.0)
        first_port, first_gm = np.where(once, held, 0.0), np.where(once, hb, 0.0)
        first_l2 = np.where(once, (cores - 1) * hb, 0.0)
        first_l0 = classes[0][0]["first_l0"]
        for tl, _, on in classes[::-1]:                 # the first class present
            first_l0 = np.where(on, tl["first_l0"], first_l0)
        head = np.maximum(held, first_phase) + lat_gm + sync + first_l0
    # _finish_tiles
    cyc_mte2 = cyc_mte2 + per * big["mte2"]
    cyc_mte1 = 0.0 + per * big["mte1"]
    cyc_mmad = 0.0 + per * big["mmad"]
    cyc_fix = 0.0 + per * big["store_cyc"]
    store_lat = pp.l0c_gm.latency + chip.l2_write_latency_cycles
    tail_fix = store_lat
    tail_mmad = sync + big["store_cyc"] + store_lat
    tail_load = lat_gm + sync + big["last_cube"] + sync + big["store_cyc"] + store_lat
    tail_ring = lat_gm + sync + big["last_cube"] + sync
    tail_store = big["store_cyc"]
    if not full_load:
        head = big["first_in"] + lat_gm + sync + big["first_l0"] + sync
    stages = np.maximum(1, _stages(p, chip, m, n, k, bm, bn, bk, kl1, nbuf, full_load))
    slots, xfers = per * big["steps"], per * big["xfers"]
    charged, cube = per * (big["a_bytes"] + big["b_bytes"]), per * big["cons"]
    gm_write = 0.0 + batch * sum_store
    if p.bias:                                                            # _bias
        cols = np.minimum(bn, p.N)
        row = _region(chip, np.ones_like(bn), cols, p.N, ACC_BYTES)
        cyc_mte2 = cyc_mte2 + per * pp.xfer(row)
        cyc_mte1 = cyc_mte1 + per * cols * ACC_BYTES / _rate(chip, "L1", "BT").bytes_per_cycle
        unique = p.bias_rows * p.N * ACC_BYTES
        total = max(p.batch * p.N * ACC_BYTES, unique)
        if unique <= chip.l2_bytes:
            gm_read, l2_read = gm_read + unique, l2_read + (total - unique)
        else:
            gm_read = gm_read + total
    gm_bpc, l2_bpc = chip.gm_bytes_per_cycle, chip.l2_bytes_per_cycle
    tasks_f = batch * n_tiles
    n_last = tasks_f - (per - 1) * cores
    gm = (gm_read + gm_write - first_gm) / tasks_f / gm_bpc
    l2 = (l2_read - first_l2) / tasks_f / l2_bpc
    full = np.maximum(np.maximum(cores * gm, cores * l2), avg["mte2"])
    last = np.maximum(np.maximum(n_last * gm, n_last * l2), avg["mte2"])
    rounds = np.where(per > 1, first_phase + (per - 1) * np.maximum(big["mmad"], full) + np.maximum(big["mmad"], last),
                      0.0)
    # _Work.finish (phased, phased_read, serial, serial_gm, serial_l2, head_read, l0c_ring, l0_chain are 0.0)
    us = 1e6 / chip.clock_hz
    gm_chan = (gm_read + gm_write - first_gm - 0.0) / gm_bpc
    l2_chan = (l2_read - first_l2 - 0.0) / l2_bpc
    gm_reads = (gm_read - first_gm) / gm_bpc
    load = first_phase + np.maximum(np.maximum(np.maximum(cyc_mte2 - first_port, l2_chan), 0.0), gm_reads)
    core = core_gm + core_l2
    reads = load            # phased_read = phased = 0.0: the same max
    rate = np.minimum(pp.gm_l1.bytes_per_cycle, core / np.maximum(reads, 1.0))
    safe = np.where(core > 0, core, 1.0)
    hit = core_l2 / safe
    lat = hit * (pp.gm_l1.latency + chip.l2_latency_cycles) + (1 - hit) * lat_gm
    ring = (xfers * chip.dma_setup_cycles + charged / np.where(core > 0, rate, 1.0)
            + slots * (lat + 2 * sync) + cube) / stages
    ring_tail = tail_load - tail_ring / stages
    take = (core > 0) & (ring + tail_load - tail_ring / stages > load + tail_load)
    load, tail = np.where(take, ring, load), np.where(take, ring_tail, tail_load)
    t_mte2 = load + tail
    t_mte2 = np.where(gm_read >= gm_write - 0.0, np.maximum(t_mte2, first_phase + gm_chan + tail_load - tail_store),
                      t_mte2)
    t_mmad = np.where(cyc_mmad != 0, np.maximum(head + np.maximum(np.maximum(cyc_mmad, 0.0), 0.0), rounds)
                      + tail_mmad, 0.0)
    t_mte1 = np.where(cyc_mte1 != 0, head + cyc_mte1 + tail_mmad, 0.0)
    write = head + cyc_fix
    write = np.where((gm_read < gm_write - 0.0) & (gm_chan > 0), np.maximum(write, head - 0.0 + gm_chan), write)
    t_fix = np.where((cyc_fix != 0) | (write > head), write + tail_fix, 0.0)
    return np.maximum(np.maximum(np.maximum(t_mmad * us, t_mte2 * us), t_mte1 * us), t_fix * us)
