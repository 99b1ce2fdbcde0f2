"""The ASW_Basic and ToMatmul cost models: each core walks its base tiles (A or B held in L1 on a full load)."""
from __future__ import annotations

from pyto.chip import Chip

from .block import m_trim
from .conditions import FRACTAL, Problem, align_up, cdiv
from .cost_pipes import _Work, a_region, b_region
from .cost_tile import _Tile, _acc_tile, _bias, _biggest, _extents, _finish_tiles, _pieces, _tiles
from .tilings import AswTiling, ToMatmulTiling


def _reuse(p: Problem, t: AswTiling) -> tuple[float, float]:
    """How many tiles read each region of A and of B (the same rectangle: an L2 hit after the first)."""
    per_b = t.batch
    ra = t.tiles_n * (per_b / p.batch_a if p.batch_a < per_b else 1)
    rb = t.tiles_m * (per_b / p.batch_b if p.batch_b < per_b else 1)
    return max(1.0, ra), max(1.0, rb)


def _asw(t: AswTiling, p: Problem, chip: Chip, *, pieces: int | None = None) -> _Work:
    """ASW_Basic / ToMatmul / matmul: each core walks its base tiles (asw_walk + block.accumulate); A (or B)
    held in L1 when full_load; streamed slices in l1_pieces_for pieces."""
    from .asw_basic import l1_pieces_for, params_of
    w = _Work(p, chip, t.cores_used, l0_buffers=t.l0_buffers)
    pieces = l1_pieces_for(t.base_m, t.base_n, t.base_k, t.k_l1, p.dtype, chip) if pieces is None else pieces
    hold_a, hold_b = t.full_load == "A", t.full_load == "B"
    classes = _tiles(t.m, t.n, t.base_m, t.base_n)
    n_tiles = sum(c for *_, c in classes)
    ra, rb = _reuse(p, t)
    in_flight = min(t.batch, cdiv(t.cores_used, t.tiles_m * t.tiles_n))
    # what L2 must keep for the repeats to hit: the re-read side(s) of the batches in flight (a broadcast side,
    # batch 1, is one copy); a side each region of which is read once only streams through
    a_live = (1 if p.batch_a == 1 else in_flight) * cdiv(t.tiles_m, t.l2_tiles_m) * t.base_m if ra > 1 else 0
    b_live = (1 if p.batch_b == 1 else in_flight) * cdiv(t.tiles_n, t.l2_tiles_n) * t.base_n if rb > 1 else 0
    live = (a_live + b_live) * t.k * p.isz
    if t.tasks_per_core == 1:
        # one round: the tiles that share a region run at once and walk K together, so a repeat comes one K
        # step after the first read: L2 holds the cores' slabs in flight, not whole K extents
        live = min(live, t.cores_used * (t.base_m + t.base_n) * t.k_l1 * 2 * p.isz)
    fits = live <= chip.l2_bytes
    # L2 share of the streamed bytes: all but the first read of each region
    fa = (1 - 1 / ra) if fits else 0.0
    fb = (1 - 1 / rb) if fits else 0.0
    tiles = []
    for r, c, cnt in classes:
        tl = _acc_tile(w, r, c, t.k, base_m=t.base_m, base_n=t.base_n, base_k=t.base_k, k_l1=t.k_l1,
                       pieces=pieces, stream_a=not hold_a, stream_b=not hold_b)
        tiles.append((tl, cnt))
    avg = _Tile()
    for tl, cnt in tiles:
        avg.add(tl, cnt / n_tiles)
    tot_a = t.batch * sum(tl.a_bytes * cnt for tl, cnt in tiles)
    tot_b = t.batch * sum(tl.b_bytes * cnt for tl, cnt in tiles)
    per = t.tasks_per_core
    w.traffic(tot_a / ra, tot_a, live)
    w.traffic(tot_b / rb, tot_b, live)
    w.bytes_in(per * (avg.a_bytes + avg.b_bytes), per * (fa * avg.a_bytes + fb * avg.b_bytes))
    held = 0.0
    if hold_a or hold_b:
        rows = align_up(t.m, t.base_m) if hold_a else align_up(t.n, t.base_n)
        k_pad = align_up(t.k, t.base_k)
        hb = a_region(chip, p, min(rows, p.M), min(k_pad, p.K)) if hold_a else b_region(chip, p, min(k_pad, p.K),
                                                                                      min(rows, p.N))
        holds = 1 if (p.batch_a == 1 if hold_a else p.batch_b == 1) else per
        held = w.xfer(hb)
        w.cyc["MTE2"] += holds * held
        w.traffic(hb, holds * t.cores_used * hb, hb)
        w.bytes_in(holds * hb, (holds - 1) * hb)
        if holds == 1:
            # every core loads the same slab at the start, before its first tile: one core's read from GM, the
            # others' from L2, all at once -- a phase of its own ahead of the tile stream
            w.first_phase = max(held, hb / chip.gm_bytes_per_cycle, (t.cores_used - 1) * hb / chip.l2_bytes_per_cycle)
            w.first_port, w.first_gm, w.first_l2 = held, hb, (t.cores_used - 1) * hb
        w.head = max(held, w.first_phase) + w.lat() + chip.flag_latency_cycles + tiles[0][0].first_l0
    big = _biggest(tiles)
    _finish_tiles(w, per, big, big, chip.flag_latency_cycles)
    stages = params_of(t, p, chip, bias=p.bias)["STAGES"]
    w.ring(per * big.steps, per * big.xfers, per * (big.a_bytes + big.b_bytes), per * big.cons, stages)
    w.gm_write += t.batch * sum(tl.store * cnt for tl, cnt in tiles)     # charged: short rows cost the burst minimum
    _bias(w, p, per, t.base_n)
    tasks = t.batch * n_tiles
    if per > 1:
        # rounds of tiles, every core on one at a time: a full round's traffic can outlast the cube's time on its
        # tile while the last round (only the tasks left over) is the cube's, so the cube waits per round
        n_last = tasks - (per - 1) * t.cores_used
        gm = (w.gm_read + w.gm_write - w.first_gm) / tasks / chip.gm_bytes_per_cycle     # channel cycles per tile
        l2 = (w.l2_read - w.first_l2) / tasks / chip.l2_bytes_per_cycle
        full = max(t.cores_used * gm, t.cores_used * l2, avg.mte2)
        last = max(n_last * gm, n_last * l2, avg.mte2)
        w.rounds = w.first_phase + (per - 1) * max(big.mmad, full) + max(big.mmad, last)
    return w


def asw_floor(t: AswTiling, p: Problem, chip: Chip) -> float:
    """A lower bound (us) on estimate(p, t, chip).t_total for an ASW walk, for the tile search to skip tilings
    that cannot be within cost.RESOLUTION of the fastest (tiling_asw._asw_tiles).

    Why it bounds: T_total >= the MMAD, MTE2 and MTE1 terms, each at least the busiest core's busy cycles on
    that pipe, tasks_per_core x the costliest tile class's (_biggest: the largest of its MMAD, MTE2, MTE1),
    which is at least any class's MMAD and MTE2 busy cycles. For the largest class (min(m, base_m) x min(n,
    base_n)): MMAD >= ceil(m_t/16) ceil(n_t/16) ceil(K/k0) cycles per step + one head per base_k step (the L0
    steps cover K); MTE2 >= one DMA setup per streamed GM piece (the pieces _acc_tile cuts each L1 step in) +
    the streamed rows' K extent at the GM -> L1 path's rate (charged bytes are never below the bytes)."""
    from .asw_basic import l1_pieces_for
    align = max(FRACTAL, p.k0)
    rows, cols = min(t.m, t.base_m), min(t.n, t.base_n)
    mt = min(t.base_m, align_up(rows, m_trim(p.isz, p.transpose_a and not chip.dn2nz)))
    nt = min(t.base_n, align_up(cols, align))
    mmad = (cdiv(mt, FRACTAL) * cdiv(nt, FRACTAL) * cdiv(t.k, p.k0) * chip.cube_cycles_per_step[p.dtype.name]
            + cdiv(t.k, t.base_k) * chip.mmad_head_cycles)
    stream_a, stream_b = t.full_load != "A", t.full_load != "B"
    pieces = l1_pieces_for(t.base_m, t.base_n, t.base_k, t.k_l1, p.dtype, chip)
    xfers = (stream_a + stream_b) * sum(c * len(_pieces(kl, align, t.base_k, pieces))
                                        for kl, c in _extents(t.k, t.k_l1))
    streamed = ((min(mt, rows) if stream_a else 0) + (min(nt, cols) if stream_b else 0)) * t.k * p.isz
    mte2 = xfers * chip.dma_setup_cycles + streamed / chip.path("GM", "L1").bytes_per_cycle
    return t.tasks_per_core * max(mmad, mte2) * 1e6 / chip.clock_hz * (1 - 1e-9)   # (1 - 1e-9): rounding's room


def _to_matmul(t: ToMatmulTiling, p: Problem, chip: Chip) -> _Work:
    """The folded matmul: every fold runs an ASW tile walk (the view for plain / fold_m, the batched walk with
    A broadcast otherwise); fold_n is run as the broadcast problem, so no rearrangement pass is paid."""
    return _asw(t.matmul, p, chip)
