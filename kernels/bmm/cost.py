"""Analytic BMM time (seeds/000: T_total = max(T_MMAD, T_MTE2, T_MTE1, T_Fixpipe[, T_Reduce])), per branch.

Each branch's model counts what its kernel (kernels/bmm/<branch>.py) issues on the busiest core and costs it
with the emulator's rules and the same chip constants (pyto/emulator/timing.py, DESIGN section 5):

* a GM transfer holds its pipe for dma_setup_cycles + charged bytes / path bandwidth. Charged bytes: a
  region of full-width rows of the tensor is one contiguous burst; otherwise every row is a burst charged
  at least burst_min_bytes (seeds/000's dValue >= 128B). An Nd2Nz load of nd_num batches is nd_num regions.
* all cores' GM traffic (reads that miss L2, and writes) shares one chip-wide channel of gm_bytes_per_cycle;
  reads of a region already read or written (same tensor, batch, rectangle) hit L2 and share the L2 channel
  (when the live set fits L2). A core's transfers are paced by its share of those channels.
* a transfer completes path latency + GM (or L2) latency after it leaves its pipe; latency overlaps the next
  transfer (pipelining), so it only shows where nothing else can run: at the start (the cube waits for the
  first piece of its first tile) and at the end (the last piece's compute and the last stores).
* MMAD = ceil(m/16)*ceil(n/16)*ceil(k/k0)*cycles_per_step + mmad_head_cycles; L1 -> L0 at the path bandwidth;
  Fixpipe (L0C -> GM) is a GM transfer; a cross-pipe sync edge costs flag_latency_cycles; a vector op costs
  vector_head_cycles + 4 * elements / vector_bytes_per_cycle.

The seed's terms are each pipe's time on the critical path: its busy time plus the fill it must wait for
and the drain after it (T_MMAD = first piece in + MMAD busy + last store out; T_MTE2 = max(the core's own
transfer time, the chip-wide GM and L2 channel time) + the last piece's compute and stores; ...), so that
T_total = max(terms) as the seed writes it. StreamK's reduction runs after a barrier (sync_all): its term
is the cube phase's time plus the reduction's own.
"""
from __future__ import annotations

from dataclasses import dataclass

from pyto.chip import Chip

from .conditions import ACC_BYTES, FRACTAL, Problem, align_up, cdiv
from .tilings import (AswTiling, IterBatchTiling, MergeBatchTiling, SpecialTiling, StreamKTiling, Tiling,
                      ToMatmulTiling)

TERMS = ("MMAD", "MTE2", "MTE1", "FIXPIPE", "REDUCE", "VECTOR", "MTE3")


@dataclass(frozen=True)
class Estimate:
    """Each pipe's critical-path time in microseconds, T_total = the largest, and the work behind them."""

    t_mmad: float
    t_mte2: float
    t_mte1: float
    t_fixpipe: float
    t_reduce: float
    t_vector: float
    t_mte3: float
    t_total: float
    bottleneck: str      # one of TERMS
    flops: int           # 2*B*M*N*K
    bytes: int           # compulsory bytes: inputs once, output once
    gm_bytes: int        # GM traffic the plan causes (charged reads that miss L2 + writes)
    l2_bytes: int        # charged reads served by L2
    cores_used: int
    t_mte2_pipe: float = 0.0  # the busiest core's own MTE2 transfer time, without the chip-wide channels

    def terms(self) -> dict[str, float]:
        return dict(zip(TERMS, (self.t_mmad, self.t_mte2, self.t_mte1, self.t_fixpipe, self.t_reduce,
                                self.t_vector, self.t_mte3)))

    def __str__(self) -> str:
        parts = ", ".join(f"T_{k}={v:.3f}" for k, v in self.terms().items() if v > 0)
        return (f"T_total = {self.t_total:.3f} us (bottleneck {self.bottleneck}; {parts} us); "
                f"{self.flops} FLOP, GM traffic {self.gm_bytes} B (compulsory {self.bytes} B), L2 hits "
                f"{self.l2_bytes} B, {self.cores_used} cores")


def roofline_us(p: Problem, chip: Chip) -> float:
    """max(FLOPs / peak, compulsory bytes / GM bandwidth): no plan can beat it."""
    return max(p.flops / chip.peak_flops(p.dtype), p.compulsory_bytes / (chip.gm_bandwidth_gbs * 1e9)) * 1e6


# ---- charged bytes of a GM region (pl.load / pl.store: ops._bursts, timing.burst_bytes) ------------------
def region(chip: Chip, rows: float, cols: float, row_len: int, isz: int) -> float:
    """Charged bytes of rows x cols elements of a tensor whose rows hold row_len elements."""
    if rows <= 0 or cols <= 0:
        return 0.0
    if cols >= row_len:
        return max(rows * cols * isz, chip.burst_min_bytes)
    return rows * max(cols * isz, chip.burst_min_bytes)


def a_region(chip: Chip, p: Problem, r: float, kc: float) -> float:
    """A rows r (of M) x K columns kc, as stored: [.., M, K] (ND) or [.., K, M] (DN)."""
    return region(chip, kc, r, p.M, p.isz) if p.transpose_a else region(chip, r, kc, p.K, p.isz)


def b_region(chip: Chip, p: Problem, kc: float, c: float) -> float:
    """B K rows kc x columns c (of N), as stored: [.., K, N] (ND) or [.., N, K] (DN)."""
    return region(chip, c, kc, p.K, p.isz) if p.transpose_b else region(chip, kc, c, p.N, p.isz)


def _extents(total: int, tile: int) -> list[tuple[int, int]]:
    """[(extent, count)]: the full tiles and the tail of `total` cut into `tile`s."""
    if total <= 0 or tile <= 0:
        return []
    full, tail = divmod(total, tile)
    out = [(tile, full)] if full else []
    return out + ([(tail, 1)] if tail else [])


def _pieces(k_len: int, align: int, base_k: int, pieces: int) -> list[int]:
    """The K widths block._stream_l1 / held_ab load a step of k_len in (0 pieces: one load of the slot)."""
    k_all = align_up(k_len, align)
    step = align_up(cdiv(k_all, max(1, pieces)), base_k)
    return [min(step, k_all - kp) for kp in range(0, k_all, step)]


class _Work:
    """The busiest core's pipes (busy cycles), the chip-wide channel bytes, and the pipeline's fill/drain."""

    def __init__(self, p: Problem, chip: Chip, cores: int, write_pipe: str = "FIXPIPE"):
        self.p, self.chip, self.cores, self.write_pipe = p, chip, max(1, cores), write_pipe
        self.cyc = dict.fromkeys(TERMS, 0.0)
        self.gm_read = self.gm_write = self.l2_read = 0.0
        self.core_gm = self.core_l2 = 0.0   # the busiest core's own charged bytes from GM / from L2
        self.head = 0.0                     # cycles before the cube can start (first pieces in, first MTE1)
        self.tail_load = 0.0                # cycles after the last transfer in until the end
        self.tail_mmad = 0.0                # cycles after the last MMAD until the end
        self.tail_fix = 0.0                 # cycles after the last store leaves Fixpipe
        self.serial = 0.0                   # cycles of a phase after a barrier (StreamK's reduction)
        # rings of L1 slots: a slot is refilled only after the cube has read it, so each pass around a ring of
        # `stages` slots costs (transfer + latency + the cube's time on it + two sync edges) / stages per slot
        self.rings: list[tuple[float, float, float, float, int]] = []   # (slots, xfers, bytes, cube, stages)
        self.l0c_ring = 0.0                 # the cube's time bound by L0C slots waiting for Fixpipe (see l0c)
        self.phased = 0.0                   # the channels' time when every core walks the same phases at once
        self.first_phase = self.first_port = 0.0   # a load every core makes first, alone (an L1 full load)
        self.first_gm = self.first_l2 = 0.0        # its chip-wide GM and L2 bytes (out of the channel terms)
        self.tail_store = 0.0               # the last tile's (group's) Fixpipe cycles, inside tail_load

    # -- costs of single instructions (cycles) --
    def share(self, l2: bool = False) -> float:
        """Bytes per cycle one core gets when every core moves data at once."""
        chan = self.chip.l2_bytes_per_cycle if l2 else self.chip.gm_bytes_per_cycle
        return chan / self.cores

    def xfer(self, charged: float, src: str = "GM", dst: str = "L1") -> float:
        """Pipe cycles of one GM transfer of `charged` bytes on its own: setup + bytes at the path's rate (the
        chip-wide channels are booked separately, see finish)."""
        return self.chip.dma_setup_cycles + charged / self.chip.path(src, dst).bytes_per_cycle

    def lat(self, src: str = "GM", dst: str = "L1", l2: bool = False) -> float:
        """Completion latency of a GM transfer after it leaves its pipe."""
        far = self.chip.l2_latency_cycles if l2 else self.chip.gm_latency_cycles
        return self.chip.path(src, dst).latency + far

    def mmad_cycles(self, m: int, n: int, k: int) -> float:
        cps = self.chip.cube_cycles_per_step[self.p.dtype.name]
        return cdiv(m, FRACTAL) * cdiv(n, FRACTAL) * cdiv(k, self.p.k0) * cps + self.chip.mmad_head_cycles

    def mte1_cycles(self, a_bytes: float, b_bytes: float) -> float:
        return a_bytes / self.chip.path("L1", "L0A").bytes_per_cycle + b_bytes / self.chip.path("L1", "L0B").bytes_per_cycle

    def vec_cycles(self, elems: float) -> float:
        return self.chip.vector_head_cycles + elems * ACC_BYTES / self.chip.vector_bytes_per_cycle

    # -- accumulation (kept for direct use) --
    def mmad(self, count: float, m: int, n: int, k: int, bk: int) -> None:
        """count tiles of m x n accumulated over k in MMADs of depth bk."""
        if k <= 0 or count <= 0:
            return
        full, tail = divmod(k, bk)
        self.cyc["MMAD"] += count * (full * self.mmad_cycles(m, n, bk) + (self.mmad_cycles(m, n, tail) if tail else 0))

    def load(self, count: float, rows: float, row_bytes: float, gm_frac: float = 1.0, dst: str = "L1") -> None:
        """count GM -> L1 (or UB) transfers of `rows` rows of `row_bytes` each (not full width)."""
        charged = rows * max(row_bytes, self.chip.burst_min_bytes)
        self.cyc["MTE2"] += count * self.xfer(charged, "GM", dst)

    def ring(self, slots: float, xfers: float, charged: float, cube: float, stages: int) -> None:
        """A ring of `stages` L1 slots filled `slots` times on the busiest core: `xfers` transfers of `charged`
        bytes in all, the cube busy `cube` cycles on them."""
        if slots > 0:
            self.rings.append((slots, xfers, charged, cube, max(1, stages)))

    def l0c(self, tiles: float, mmad: float, fix: float, stages: int, unit_flag: bool) -> None:
        """L0C slots: a tile's first MMAD into a slot waits for the previous tile's Fixpipe there -- until it
        has left the pipe with unit_flag, until its write has landed (its latency too) with software sync."""
        if tiles <= stages:
            return
        wait = 0.0 if unit_flag else self.lat("L0C", "GM")
        per = (mmad + fix + wait + 2 * self.chip.flag_latency_cycles) / max(1, stages)
        self.l0c_ring = max(self.l0c_ring, tiles * per)

    def bytes_in(self, charged: float, hit: float) -> None:
        """The busiest core's charged read bytes, `hit` of them from L2."""
        self.core_gm += charged - hit
        self.core_l2 += hit

    def traffic(self, unique: float, total: float, live: float) -> float:
        """Book chip-wide reads of one operand: the first read of each region from GM, repeats from L2 when
        the live set fits L2. Returns the fraction of the reads served by GM."""
        total = max(total, unique)
        if live <= self.chip.l2_bytes:
            self.gm_read += unique
            self.l2_read += total - unique
            return unique / total if total else 1.0
        self.gm_read += total
        return 1.0

    def finish(self) -> Estimate:
        p, chip, c = self.p, self.chip, self.cyc
        us = 1e6 / chip.clock_hz
        gm_chan = (self.gm_read + self.gm_write - self.first_gm) / chip.gm_bytes_per_cycle
        l2_chan = (self.l2_read - self.first_l2) / chip.l2_bytes_per_cycle
        mte2_pipe = c["MTE2"]
        t = dict.fromkeys(TERMS, 0.0)
        if c["MMAD"] > 0 or mte2_pipe > 0:
            # the core's own transfers vs the chip-wide GM and L2 channels all cores share
            # (the GM channel's reads here; reads and writes together below: the last stores are in it)
            load = self.first_phase + max(mte2_pipe - self.first_port, l2_chan, self.phased,
                                          (self.gm_read - self.first_gm) / chip.gm_bytes_per_cycle)
            core = self.core_gm + self.core_l2
            if self.rings and core > 0:
                rate = min(chip.path("GM", "L1").bytes_per_cycle, core / max(load, 1.0))
                hit = self.core_l2 / core
                lat = hit * self.lat(l2=True) + (1 - hit) * self.lat()
                for slots, xfers, charged, cube, stages in self.rings:
                    per = (xfers * chip.dma_setup_cycles + charged / rate + slots * (lat + 2 * chip.flag_latency_cycles)
                           + cube) / stages
                    load = max(load, per)
            t["MTE2"] = load + self.tail_load
            if self.gm_read >= self.gm_write:
                # the whole GM channel, its last stores included: after the last read, the last piece's latency
                # and compute, then the stores' own latency (their channel time is in gm_chan)
                t["MTE2"] = max(t["MTE2"], self.first_phase + gm_chan + self.tail_load - self.tail_store)
            t["MMAD"] = self.head + max(c["MMAD"], self.l0c_ring) + self.tail_mmad if c["MMAD"] else 0.0
            t["MTE1"] = self.head + c["MTE1"] + self.tail_mmad if c["MTE1"] else 0.0
        fix = c["FIXPIPE"] if self.write_pipe == "FIXPIPE" else c["MTE3"]
        write = max(fix, gm_chan if self.gm_read < self.gm_write else 0.0)
        t[self.write_pipe] = self.head + write + self.tail_fix if write else 0.0
        t["VECTOR"] = self.head + c["VECTOR"] + self.tail_fix if c["VECTOR"] else 0.0
        if self.serial:
            cube = max(t.values())
            t["REDUCE"] = cube + self.serial
        t = {k: v * us for k, v in t.items()}
        bottleneck = max(TERMS, key=lambda k: t[k])
        return Estimate(t["MMAD"], t["MTE2"], t["MTE1"], t["FIXPIPE"], t["REDUCE"], t["VECTOR"], t["MTE3"],
                        t[bottleneck], bottleneck, p.flops, p.compulsory_bytes,
                        round(self.gm_read + self.gm_write), round(self.l2_read), self.cores, mte2_pipe * us)


# ---- one output tile through block.accumulate -------------------------------------------------------------
@dataclass
class _Tile:
    """What one output tile costs on its core (cycles, charged bytes) and its first/last pieces."""

    xfers: float = 0.0        # GM -> L1 transfers
    mte2: float = 0.0         # MTE2 pipe cycles at the core's share of the channel
    a_bytes: float = 0.0      # charged bytes of A streamed
    b_bytes: float = 0.0
    mte1: float = 0.0
    mmad: float = 0.0
    first_in: float = 0.0     # MTE2 cycles of the first piece of A and B
    first_l0: float = 0.0     # MTE1 of the first L0 step
    last_cube: float = 0.0    # MTE1 + MMAD of the L0 steps in the last piece
    store: float = 0.0        # charged bytes of the store
    store_cyc: float = 0.0    # Fixpipe cycles of the store
    steps: float = 0.0        # L1 steps (each a slot of the streamed ring)
    cons: float = 0.0         # the cube's time on each step, summed (max of its MTE1 and MMAD)

    def add(self, o: "_Tile", n: float) -> None:
        for f in ("xfers", "mte2", "a_bytes", "b_bytes", "mte1", "mmad", "store", "store_cyc", "steps", "cons"):
            setattr(self, f, getattr(self, f) + n * getattr(o, f))


def _acc_tile(w: _Work, rows: int, cols: int, k_len: int, *, base_m: int, base_n: int, base_k: int, k_l1: int,
              pieces: int, stream_a: bool = True, stream_b: bool = True,
              out_row: int | None = None, out_isz: int | None = None) -> _Tile:
    """One tile of rows x cols over k_len of K (block.accumulate + store_tile).

    out_row / out_isz: the stored tensor's row length and item size (default the output [.., M, N]).
    """
    p, chip = w.p, w.chip
    align = max(FRACTAL, p.k0)
    mt = min(base_m, align_up(rows, FRACTAL))
    nt = min(base_n, align_up(cols, align))
    if pieces <= 0:
        a_r, b_c = min(base_m, p.M), min(base_n, p.N)
    else:
        a_r, b_c = min(mt, rows), min(nt, cols)
    t = _Tile()
    steps = _extents(k_len, k_l1)                   # the full L1 steps and the tail
    k1 = 0
    for si, (kl, cnt) in enumerate(steps):
        ws = [k_l1] if pieces <= 0 else _pieces(kl, align, base_k, pieces)
        mte2 = nx = ab_sum = bb_sum = 0.0
        first_cyc = None
        kp = 0
        for kw in ws:
            kc = max(0, min(kw, kl - kp)) if pieces > 0 else min(kw, kl)
            ab = a_region(chip, p, a_r, kc) if stream_a else 0.0
            bb = b_region(chip, p, kc, b_c) if stream_b else 0.0
            cyc = (w.xfer(ab) if stream_a else 0.0) + (w.xfer(bb) if stream_b else 0.0)
            nx += int(stream_a) + int(stream_b)
            mte2 += cyc
            ab_sum += ab
            bb_sum += bb
            first_cyc = cyc if first_cyc is None else first_cyc
            kp += kw
        l0 = []                                     # (kt, count) of the L0 steps in this L1 step
        full, tail = divmod(kl, base_k)
        if full:
            l0.append((base_k, full))
        if tail:
            l0.append((align_up(tail, align), 1))
        m1 = sum(c * w.mte1_cycles(mt * kt * p.isz, kt * nt * p.isz) for kt, c in l0)
        mm = sum(c * w.mmad_cycles(mt, nt, kt) for kt, c in l0)
        t.xfers += cnt * nx
        t.mte2 += cnt * mte2
        t.a_bytes += cnt * ab_sum
        t.b_bytes += cnt * bb_sum
        t.mte1 += cnt * m1
        t.mmad += cnt * mm
        t.steps += cnt
        t.cons += cnt * max(m1, mm)
        if si == 0:
            t.first_in = first_cyc or 0.0
            kt0 = l0[0][0]
            t.first_l0 = w.mte1_cycles(mt * kt0 * p.isz, kt0 * nt * p.isz)
        # the L0 steps of the last piece follow the last transfer
        last_w = ws[-1] if pieces > 0 else kl
        share = min(1.0, last_w / max(1, kl))
        kt_l = l0[-1][0]
        t.last_cube = share * mm + w.mte1_cycles(mt * kt_l * p.isz, kt_l * nt * p.isz)
        k1 += cnt * kl
    row_len = p.N if out_row is None else out_row
    isz = p.out_isz if out_isz is None else out_isz
    t.store = region(chip, rows, cols, row_len, isz)
    t.store_cyc = w.xfer(t.store, "L0C", "GM")
    return t


def _tiles(m: int, n: int, bm: int, bn: int) -> list[tuple[int, int, int]]:
    """[(rows, cols, count)] of the tile classes of an m x n grid of bm x bn tiles."""
    return [(r, c, cm * cn) for r, cm in _extents(m, bm) for c, cn in _extents(n, bn)]


def _biggest(tiles: list) -> _Tile:
    """The costliest tile class: tiles are dealt round robin, and a core's share of a batch is often the same
    tile position batch after batch, so the busiest core may run only full tiles."""
    return max((tl for tl, _ in tiles), key=lambda tl: (max(tl.mmad, tl.mte2, tl.mte1), tl.mmad + tl.mte2))


def _finish_tiles(w: _Work, per_core: float, avg: _Tile, last: _Tile, sync: float) -> None:
    """Book a core's tiles: `per_core` tiles like `avg`, the last like `last`; fill and drain."""
    w.cyc["MTE2"] += per_core * avg.mte2
    w.cyc["MTE1"] += per_core * avg.mte1
    w.cyc["MMAD"] += per_core * avg.mmad
    w.cyc["FIXPIPE"] += per_core * avg.store_cyc
    store_lat = w.lat("L0C", "GM")
    w.tail_fix = store_lat
    w.tail_mmad = sync + last.store_cyc + store_lat
    w.tail_load = w.lat() + sync + last.last_cube + sync + last.store_cyc + store_lat
    w.tail_store = last.store_cyc
    w.head = w.head or (last.first_in + w.lat() + sync + last.first_l0 + sync)


# ---- the branches -------------------------------------------------------------------------------------
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
    w = _Work(p, chip, t.cores_used)
    pieces = l1_pieces_for(t.base_m, t.base_n, t.base_k, t.k_l1, p.dtype, chip) if pieces is None else pieces
    hold_a, hold_b = t.full_load == "A", t.full_load == "B"
    classes = _tiles(t.m, t.n, t.base_m, t.base_n)
    n_tiles = sum(c for *_, c in classes)
    ra, rb = _reuse(p, t)
    in_flight = min(t.batch, cdiv(t.cores_used, t.tiles_m * t.tiles_n))
    live = in_flight * (cdiv(t.tiles_m, t.l2_tiles_m) * t.base_m + cdiv(t.tiles_n, t.l2_tiles_n) * t.base_n) * t.k * p.isz
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
    return w


def _bias(w: _Work, p: Problem, per_core: float, cols: int) -> None:
    """The bias row of each tile: GM -> L1 (one short row) -> BT."""
    if not p.bias:
        return
    row = region(w.chip, 1, min(cols, p.N), p.N, ACC_BYTES)
    w.cyc["MTE2"] += per_core * w.xfer(row)
    w.cyc["MTE1"] += per_core * min(cols, p.N) * ACC_BYTES / w.chip.path("L1", "BT").bytes_per_cycle
    w.gm_read += p.batch * p.N * ACC_BYTES


def _to_matmul(t: ToMatmulTiling, p: Problem, chip: Chip) -> _Work:
    """The folded matmul: every fold runs an ASW tile walk (the view for plain / fold_m, the batched walk with
    A broadcast otherwise); fold_n is run as the broadcast problem, so no rearrangement pass is paid."""
    return _asw(t.matmul, p, chip)


def _iter(t: IterBatchTiling, p: Problem, chip: Chip) -> _Work:
    """Each core runs batches_per_core matmuls with the kernel's own parameters (iter_batch.params_for): held
    slabs per batch in HOLD_PIECES loads (a ring of HOLD_STAGES slots), the other side streamed per tile."""
    from .iter_batch import params_for
    from pyto.errors import PlanError
    w = _Work(p, chip, t.cores_used)
    isz, bpc = p.isz, t.batches_per_core
    M, N, K = p.M, p.N, p.K
    try:
        q = params_for(t, p, chip)[0]
    except PlanError:                     # the kernel would not fit: cost the tiling as it stands
        q = dict(BASE_M=t.base_m, BASE_N=t.base_n, BASE_K=t.base_k, K_L1=max(t.k_l1_a, t.k_l1_b),
                 HOLD_M=align_up(M, t.base_m) if t.resident in ("AB", "A") else 0,
                 HOLD_N=align_up(N, t.base_n) if t.resident in ("AB", "B") else 0, HOLD_STAGES=t.l1_buffers,
                 STAGES=max(1, t.stream_buffers), L1_PIECES=1, HOLD_PIECES=1)
    bm, bn, bk, k_l1 = q["BASE_M"], q["BASE_N"], q["BASE_K"], q["K_L1"]
    hold_a, hold_b = bool(q["HOLD_M"]), bool(q["HOLD_N"])
    stream = not (hold_a and hold_b)
    pieces, hp = q["L1_PIECES"], q["HOLD_PIECES"]
    k_l1 = k_l1 if stream else align_up(K, bk)
    tm, tn = cdiv(M, bm), cdiv(N, bn)
    classes = _tiles(M, N, bm, bn)
    tiles = [(_acc_tile(w, r, c, K, base_m=bm, base_n=bn, base_k=bk, k_l1=k_l1, pieces=pieces,
                        stream_a=not hold_a, stream_b=not hold_b), cnt) for r, c, cnt in classes]
    per_batch = _Tile()
    for tl, cnt in tiles:
        per_batch.add(tl, cnt)
    # held slabs: loaded once per batch in hold pieces (A's and B's interleaved)
    held_cyc = held_bytes = first_held = held_x = 0.0
    if hold_a or hold_b:
        for i, kw in enumerate(_pieces(align_up(K, bk), max(FRACTAL, p.k0), bk, hp)):
            kc = max(0, min(kw, K - i * kw))
            piece = (a_region(chip, p, M, kc) if hold_a else 0.0), (b_region(chip, p, kc, N) if hold_b else 0.0)
            cyc = sum(w.xfer(b) for b in piece if b)
            held_cyc += cyc
            held_bytes += sum(piece)
            held_x += sum(1 for b in piece if b)
            if i == 0:
                first_held = cyc
    # L2: the streamed side is re-read by every tile row (B) / column (A) of its batch: the same regions
    ra = tn if not hold_a else 1
    rb = tm if not hold_b else 1
    bc_a = p.batch / p.batch_a if p.batch_a < p.batch else 1
    bc_b = p.batch / p.batch_b if p.batch_b < p.batch else 1
    live = t.cores_used * (M * K + K * N) * isz
    tot_a = p.batch * per_batch.a_bytes
    tot_b = p.batch * per_batch.b_bytes
    held_a_b = a_region(chip, p, M, K) if hold_a else 0.0
    held_b_b = b_region(chip, p, K, N) if hold_b else 0.0
    w.traffic(tot_a / ra / bc_a + p.batch_a * held_a_b, tot_a + p.batch * held_a_b, live)
    w.traffic(tot_b / rb / bc_b + p.batch_b * held_b_b, tot_b + p.batch * held_b_b, live)
    fa, fb = 1 - 1 / ra, 1 - 1 / rb
    held_per_core = bpc if not ((hold_a and p.batch_a == 1) or (hold_b and p.batch_b == 1)) else 1
    # every core runs the same walk over its own batch at the same time, so the chip-wide channels see the
    # walk's phases together: the first row of tiles reads the streamed side from GM (first touch), later rows
    # from L2. Per tile, the cores' GM bytes share the GM channel and their L2 bytes the L2 channel; the
    # phases add up instead of overlapping as in ASW_Basic's mixed task order.
    by_class = {(r, c): tl for (tl, _), (r, c, _) in zip(tiles, classes)}
    seen_a: set = set()
    seen_b: set = set()
    phased = 0.0
    cores = t.cores_used
    for i, m0 in enumerate(range(0, M, bm)):
        cols = list(range(0, N, bn))
        for j, n0 in enumerate(cols if i % 2 == 0 else cols[::-1]):
            tl = by_class[(min(bm, M - m0), min(bn, N - n0))]
            g = h = 0.0
            for key, seen, nbytes, shared in ((m0, seen_a, tl.a_bytes, bc_a > 1), (n0, seen_b, tl.b_bytes, bc_b > 1)):
                if not nbytes:
                    continue
                if key in seen:
                    h += nbytes
                else:                       # a broadcast side's first touch is one core's; the rest hit L2
                    g += nbytes / cores if shared else nbytes
                    h += nbytes - nbytes / cores if shared else 0.0
                    seen.add(key)
            if i == 0 and j == 0:
                shared = (hold_a and bc_a > 1) or (hold_b and bc_b > 1)
                g += held_bytes / cores if shared else held_bytes
                h += held_bytes - held_bytes / cores if shared else 0.0
            g += tl.store
            phased += max(cores * g / chip.gm_bytes_per_cycle, cores * h / chip.l2_bytes_per_cycle,
                          tl.mte2 + (held_cyc if i == 0 and j == 0 else 0.0))
    w.phased = bpc * phased
    w.cyc["MTE2"] += bpc * per_batch.mte2 + held_per_core * held_cyc
    w.bytes_in(bpc * (per_batch.a_bytes + per_batch.b_bytes) + held_per_core * held_bytes,
               bpc * (fa * per_batch.a_bytes + fb * per_batch.b_bytes))
    w.cyc["MTE1"] += bpc * per_batch.mte1
    w.cyc["MMAD"] += bpc * per_batch.mmad
    w.cyc["FIXPIPE"] += bpc * per_batch.store_cyc
    if stream:
        w.ring(bpc * per_batch.steps, bpc * per_batch.xfers, bpc * (per_batch.a_bytes + per_batch.b_bytes),
               bpc * per_batch.cons, q["STAGES"])
    if held_per_core > 1:
        w.ring(held_per_core, held_per_core * held_x, held_per_core * held_bytes,
               held_per_core * max(per_batch.mmad, per_batch.mte1), q["HOLD_STAGES"])
    n_t = tm * tn
    w.l0c(bpc * n_t, per_batch.mmad / n_t, per_batch.store_cyc / n_t, q.get("L0C_STAGES", t.l0c_buffers),
          q.get("UNIT_FLAG", t.unit_flag))
    last = tiles[-1][0]
    sync = chip.flag_latency_cycles
    w.tail_fix = w.lat("L0C", "GM")
    w.tail_mmad = sync + last.store_cyc + w.tail_fix
    if stream:
        w.tail_load = w.lat() + 2 * sync + last.last_cube + last.store_cyc + w.tail_fix
        w.tail_store = last.store_cyc
        first = (first_held if hold_a or hold_b else 0.0) + tiles[0][0].first_in
    else:
        # the last batch's slab pieces: the cube finishes the last piece's share of every tile after it lands
        share = per_batch.mmad / max(1, hp) + tiles[-1][0].first_l0
        w.tail_load = w.lat() + 2 * sync + share + last.store_cyc + w.tail_fix
        w.tail_store = last.store_cyc
        first = first_held
    w.head = first + w.lat() + sync + tiles[0][0].first_l0 + sync
    w.gm_write += p.batch * per_batch.store
    _bias(w, p, bpc * tm * tn, bn)
    return w


def _merge(t: MergeBatchTiling, p: Problem, chip: Chip) -> _Work:
    """b batches per merged MMAD; each K slice of a group comes in L1_PIECES Nd2Nz loads per operand (ndNum = b;
    one load per batch for a broadcast side); cross terms (b-1)/b are computed and dropped."""
    from .merge_batch import params_for
    w = _Work(p, chip, t.cores_used)
    isz, bpc = p.isz, t.batches_per_core
    M, N, K = p.M, p.N, p.K
    align = max(FRACTAL, p.k0)
    q = params_for(t, p, chip)[0]
    pieces = q["L1_PIECES"]
    a_nd, b_nd = p.batch_a == p.batch, p.batch_b == p.batch
    groups = _extents(bpc, t.b)                       # [(batches in the group, count)]
    sync = chip.flag_latency_cycles
    tot = dict(mte2=0.0, mte1=0.0, mmad=0.0, fix=0.0, a=0.0, b=0.0, x=0.0, steps=0.0, cons=0.0)
    last = dict(cube=0.0, store=0.0, first=0.0, first_l0=0.0)
    for ng, cnt in groups:
        g = dict(mte2=0.0, mte1=0.0, mmad=0.0, fix=0.0, a=0.0, b=0.0, x=0.0, steps=0.0, cons=0.0)
        first = None
        for k1 in range(0, K, t.k_l1):
            kl = min(t.k_l1, K - k1)
            ws = _pieces(kl, align, t.base_k, pieces)
            kp = 0
            for kw in ws:
                kc = max(0, min(kw, K - k1 - kp))
                ab, bb = a_region(chip, p, M, kc), b_region(chip, p, kc, N)
                cyc = (w.xfer(ng * ab) if a_nd else ng * w.xfer(ab)) + (w.xfer(ng * bb) if b_nd else ng * w.xfer(bb))
                g["mte2"] += cyc
                g["a"] += ng * ab
                g["b"] += ng * bb
                g["x"] += (1 if a_nd else ng) + (1 if b_nd else ng)
                first = cyc if first is None else first
                kp += kw
            cube_last = s1 = s2 = 0.0
            for kk in range(k1, k1 + kl, t.base_k):
                kt = min(t.base_k, align_up(K - kk, align))
                m1 = w.mte1_cycles(ng * t.m_pad * kt * isz, kt * ng * t.n_pad * isz)
                mm = w.mmad_cycles(ng * t.m_pad, ng * t.n_pad, kt)
                g["mte1"] += m1
                g["mmad"] += mm
                s1 += m1
                s2 += mm
                if kk >= k1 + kl - ws[-1]:
                    cube_last += mm
            g["steps"] += 1
            g["cons"] += max(s1, s2)
            cube_last += w.mte1_cycles(ng * t.m_pad * t.base_k * isz, t.base_k * ng * t.n_pad * isz)
        st = w.xfer(region(chip, M, N, N, p.out_isz), "L0C", "GM")
        g["fix"] += ng * st
        for k in tot:
            tot[k] += cnt * g[k]
        last.update(cube=cube_last, store=ng * st, first=first or 0.0,
                    first_l0=w.mte1_cycles(ng * t.m_pad * t.base_k * isz, t.base_k * ng * t.n_pad * isz))
        if "head" not in last:
            last["head"] = (first or 0.0, last["first_l0"])
    w.cyc["MTE2"] += tot["mte2"]
    w.cyc["MTE1"] += tot["mte1"]
    w.cyc["MMAD"] += tot["mmad"]
    w.cyc["FIXPIPE"] += tot["fix"]
    w.ring(tot["steps"], tot["x"], tot["a"] + tot["b"], tot["cons"], q["L1_STAGES"])
    n_groups = sum(cnt for _, cnt in groups)
    w.l0c(n_groups, tot["mmad"] / n_groups, tot["fix"] / n_groups, q["L0C_STAGES"], unit_flag=False)
    unique_a = p.batch_a * a_region(chip, p, M, K) * (tot["a"] / max(1.0, bpc * a_region(chip, p, M, K)))
    unique_b = p.batch_b * b_region(chip, p, K, N) * (tot["b"] / max(1.0, bpc * b_region(chip, p, K, N)))
    live = (M * K if p.batch_a == 1 else 0) + (K * N if p.batch_b == 1 else 0)
    w.traffic(unique_a, tot["a"] * p.batch / bpc, live)
    w.traffic(unique_b, tot["b"] * p.batch / bpc, live)
    w.bytes_in(tot["a"] + tot["b"], 0.0)
    w.tail_fix = w.lat("L0C", "GM")
    w.tail_mmad = sync + last["store"] + w.tail_fix
    w.tail_load = w.lat() + 2 * sync + last["cube"] + last["store"] + w.tail_fix
    w.tail_store = last["store"]
    h_first, h_l0 = last["head"]
    w.head = h_first + w.lat() + sync + h_l0 + sync
    w.gm_write += p.batch * M * N * p.out_isz
    if p.bias:
        w.cyc["MTE2"] += bpc * w.xfer(region(chip, 1, N, N, ACC_BYTES))
        w.gm_read += p.batch * N * ACC_BYTES
    return w


def _stream(t: StreamKTiling, p: Problem, chip: Chip) -> _Work:
    """grid_K cores per output block (stream_k.py): each unit's K segment through block.accumulate, its partial
    block to the workspace (or atomically added); then, after sync_all, the AIVs sum the partials."""
    from .asw_basic import l1_pieces_for
    from .stream_k import params_of, part_buffers, reduce_chunk
    w = _Work(p, chip, t.cores_used)
    isz, M, N, K = p.isz, p.M, p.N, p.K
    sm, sn, sck = t.single_m, t.single_n, t.single_core_k
    pieces = l1_pieces_for(t.base_m, t.base_n, t.base_k, t.k_l1, p.dtype, chip)
    atomic = t.reduce == "atomic"
    ws_row, ws_isz = (N, ACC_BYTES) if atomic else (sn, ACC_BYTES)    # the fp32 target / workspace rows
    # the unit blocks (rows, cols) that exist, and the K segment lengths
    blocks = [(min(sm, M - mi * sm), min(sn, N - ni * sn)) for mi in range(t.m_cnt) for ni in range(t.n_cnt)
              if M - mi * sm > 0 and N - ni * sn > 0]
    segs = [min(sck, K - c * sck) for c in range(t.grid_k) if K - c * sck > 0]
    units = []
    for r, c in blocks:
        for kl in segs:
            tl = _Tile()
            for rr, cc, cnt in _tiles(r, c, t.base_m, t.base_n):
                one = _acc_tile(w, rr, cc, kl, base_m=t.base_m, base_n=t.base_n, base_k=t.base_k, k_l1=t.k_l1,
                                pieces=pieces, out_row=ws_row, out_isz=ws_isz)
                tl.add(one, cnt)
                tl.first_in, tl.first_l0, tl.last_cube = one.first_in, one.first_l0, one.last_cube
            units.append(tl)
    n_units = len(units) * p.batch
    avg = _Tile()
    for tl in units:
        avg.add(tl, 1 / len(units))
    per = cdiv(n_units, t.cores_used)
    big = _biggest([(u, 1) for u in units])
    # L2: each A rows x K-segment region is read by the n blocks of its row, each B region by the m blocks
    ra = max(1.0, len([1 for _ in range(t.n_cnt)]) * (p.batch / p.batch_a if p.batch_a < p.batch else 1))
    rb = max(1.0, t.m_cnt * (p.batch / p.batch_b if p.batch_b < p.batch else 1))
    tot_a, tot_b = p.batch * sum(u.a_bytes for u in units), p.batch * sum(u.b_bytes for u in units)
    live = t.cores_used * (sm + sn) * sck * isz
    w.traffic(tot_a / ra, tot_a, live)
    w.traffic(tot_b / rb, tot_b, live)
    w.bytes_in(per * (avg.a_bytes + avg.b_bytes), per * ((1 - 1 / ra) * avg.a_bytes + (1 - 1 / rb) * avg.b_bytes))
    _finish_tiles(w, per, big, big, chip.flag_latency_cycles)
    stages = params_of(t, p, chip, bias=p.bias)["STAGES"]
    w.ring(per * big.steps, per * big.xfers, per * (big.a_bytes + big.b_bytes), per * big.cons, stages)
    out = p.batch * M * N
    part = p.batch * sum(u.store for u in units)          # charged bytes of the partial blocks
    w.gm_write += part
    # the reduction on the AIVs after sync_all (workspace), or the zero / cast passes around the atomic adds
    aivs = t.cores_used * chip.aiv_per_aic
    rows, cols = reduce_chunk(t, p, chip, t.cores_used, bias=p.bias)
    cast = p.out_isz != ACC_BYTES
    if atomic:
        chunks = p.batch * cdiv(M, rows) * cdiv(N, cols)
        per_aiv = cdiv(chunks, aivs)
        w.gm_write += out * ACC_BYTES                        # the zeroed target
        zero = per_aiv * w.xfer(region(chip, rows, cols, N, ACC_BYTES), "UB", "GM")
        serial = zero + w.lat("UB", "GM") + chip.flag_latency_cycles
        if cast:
            w.gm_read += out * ACC_BYTES
            w.gm_write += out * p.out_isz
            ld = w.xfer(region(chip, rows, cols, N, ACC_BYTES), "GM", "UB")
            stv = w.xfer(region(chip, rows, cols, N, p.out_isz), "UB", "GM")
            serial += per_aiv * max(ld, stv, w.vec_cycles(rows * cols)) + w.lat("GM", "UB", l2=True) \
                + w.lat("UB", "GM") + ld + stv
        w.serial = serial
    else:
        chunks = p.batch * sum(cdiv(r, rows) * cdiv(c, cols) for r, c in blocks)
        per_aiv = cdiv(chunks, aivs)
        g = len(segs)
        w.gm_read += 0.0
        w.l2_read += part                                    # the partials were just written: L2 hits
        w.gm_write += out * p.out_isz
        ld = w.xfer(region(chip, rows, cols, sn, ACC_BYTES), "GM", "UB")
        stv = w.xfer(region(chip, rows, min(cols, N), N, p.out_isz), "UB", "GM")
        vec = (g - 1) * w.vec_cycles(rows * cols) + (w.vec_cycles(rows * cols) if cast else 0) + \
            (2 * w.vec_cycles(rows * cols) if p.bias else 0)
        per_chunk = max(g * ld, vec, stv)
        depth = part_buffers(t.grid_k)
        w.serial = (chip.flag_latency_cycles + per_aiv * per_chunk + w.lat("GM", "UB", l2=True) * (1 + per_aiv // max(1, depth))
                    + vec / max(1, per_aiv) + stv + w.lat("UB", "GM"))
    return w


def _special(t: SpecialTiling, p: Problem, chip: Chip) -> _Work:
    """AIV tiles (special.py): fill writes bias or zeros; outer reads an A column and a B row, multiplies, writes."""
    w = _Work(p, chip, t.aiv_used, write_pipe="MTE3")
    if t.mode == "empty":
        return w
    per = t.units_per_aiv
    rows, cols = t.rows, min(t.cols, p.N)
    st = w.xfer(region(chip, rows, cols, p.N, p.out_isz), "UB", "GM")
    w.cyc["MTE3"] += per * st
    w.gm_write += t.units * region(chip, rows, cols, p.N, p.out_isz)
    w.tail_fix = w.lat("UB", "GM")
    sync = chip.flag_latency_cycles
    elems = rows * align_up(cols, FRACTAL)
    if t.mode == "fill":
        w.cyc["VECTOR"] += chip.vector_head_cycles + elems * ACC_BYTES / chip.vector_bytes_per_cycle
        w.head = w.cyc["VECTOR"] + sync
        if p.bias:
            w.cyc["MTE2"] += w.xfer(region(chip, 1, cols, p.N, ACC_BYTES), "GM", "UB")
            w.gm_read += p.batch * p.N * ACC_BYTES
            w.head += w.cyc["MTE2"] + w.lat("GM", "UB") + sync
        return w
    a_b = region(chip, 1, rows, p.M, p.isz)
    b_b = region(chip, 1, cols, p.N, p.isz)
    ld = w.xfer(a_b, "GM", "UB") + w.xfer(b_b, "GM", "UB") + (w.xfer(region(chip, 1, cols, p.N, ACC_BYTES), "GM", "UB")
                                                           if p.bias else 0.0)
    w.cyc["MTE2"] += per * ld
    w.gm_read += p.batch * (p.M + p.N) * p.isz + (p.batch * p.N * ACC_BYTES if p.bias else 0)
    cast_in = p.isz != ACC_BYTES
    ops = [elems, elems] + ([rows, cols] if cast_in else []) + ([elems] if p.out_isz != ACC_BYTES else []) + \
        ([elems] if p.bias else [])
    vec = sum(w.vec_cycles(e) for e in ops)
    w.cyc["VECTOR"] += per * vec
    # each tile waits for its loads (latency) unless enough copies keep the next tiles' loads in flight
    rounds = cdiv(per, max(1, t.ub_buffers))
    w.head = ld + w.lat("GM", "UB") + sync + vec + sync
    w.cyc["MTE3"] += (rounds - 1) * (w.lat("GM", "UB"))
    return w


_MODELS = {AswTiling: _asw, ToMatmulTiling: _to_matmul, IterBatchTiling: _iter, MergeBatchTiling: _merge,
           StreamKTiling: _stream, SpecialTiling: _special}


def estimate(p: Problem, tiling: Tiling, chip: Chip) -> Estimate:
    """The analytic time of running `tiling` on `p` (branch given by the tiling's type)."""
    return _MODELS[type(tiling)](tiling, p, chip).finish()
