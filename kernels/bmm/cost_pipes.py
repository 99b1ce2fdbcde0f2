"""The cost model's machinery: Estimate (each pipe's critical-path time), the charged bytes of a GM region,
and _Work, the busiest core's pipe cycles and the chip-wide GM/L2 channels that finish() turns into an Estimate."""
from __future__ import annotations

from dataclasses import dataclass

from pyto.chip import Chip

from .conditions import ACC_BYTES, FRACTAL, Problem, cdiv

TERMS = ("MMAD", "MTE2", "MTE1", "FIXPIPE", "REDUCE", "VECTOR", "MTE3")
# each term in the emulator Report's pipe names (REDUCE: StreamK's AIV reduction, over the AIVs' pipes)
TERM_PIPES = {"MMAD": "M", "MTE2": "MTE2", "MTE1": "MTE1", "FIXPIPE": "FIX", "REDUCE": "AIV", "VECTOR": "V",
              "MTE3": "MTE3"}


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

    def versus(self, report) -> str:
        """A table of this estimate against an emulator Report of the same plan: T_total, then each term
        (critical-path us) beside its pipe's busy time on the busiest core (us), in the Report's pipe names; last
        the estimate's bottleneck beside what bounds the emulated run (Report.bound: a pipe, or latency)."""
        us = 1.0 / (report.clock_ghz * 1e3)
        rows = [f"{'':<10} {'estimate us':>12} {'emulated us':>12}",
                f"{'T_total':<10} {self.t_total:>12.3f} {report.time_us:>12.3f}  "
                f"({self.t_total / report.time_us - 1:+.1%})" if report.time_us else ""]
        for term, t in self.terms().items():
            pipe = TERM_PIPES[term]
            busy = report.pipe_cycles.get(pipe)
            if t > 0 or busy:
                emu = f"{busy * us:>12.3f}" if busy is not None else f"{'-':>12}"
                rows.append(f"{pipe:<10} {t:>12.3f} {emu}" + ("  (term REDUCE: the AIVs' MTE2/V/MTE3)"
                                                            if term == "REDUCE" else ""))
        # the estimate names the term with the longest critical path; the emulator says whether its busiest pipe
        # bounds the run or, below pyto.report.SATURATED, latency does
        rows.append(f"bottleneck: estimate {TERM_PIPES[self.bottleneck]} (longest critical path), emulated "
                    f"{report.bound} (busiest pipe {report.bottleneck} at {report.busiest_share:.0%} of T_total)")
        return "\n".join(rows)

    def __str__(self) -> str:
        parts = ", ".join(f"T_{k}={v:.3f}" for k, v in self.terms().items() if v > 0)
        return (f"T_total = {self.t_total:.3f} us (bottleneck {self.bottleneck}; {parts} us); "
                f"{self.flops} FLOP, GM traffic {self.gm_bytes} B (compulsory {self.bytes} B), L2 hits "
                f"{self.l2_bytes} B, {self.cores_used} cores")


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


_RATES: dict = {}       # id(chip) -> (chip, {(src, dst): PathSpec}): the paths the model has asked a chip for


def _rates(chip: Chip) -> dict:
    """The chip's paths looked up so far ((src, dst) -> PathSpec), kept per chip object (held beside it, so its id
    is not reused while the entry lives)."""
    hit = _RATES.get(id(chip))
    if hit is None or hit[0] is not chip:
        if len(_RATES) > 64:
            _RATES.clear()
        hit = _RATES[id(chip)] = (chip, {})
    return hit[1]


def _rate(chip: Chip, src: str, dst: str, known: dict | None = None):
    """chip.path(src, dst), remembered in `known` (default: the chip's _rates)."""
    known = _rates(chip) if known is None else known
    spec = known.get((src, dst))
    if spec is None:
        spec = known[(src, dst)] = chip.path(src, dst)
    return spec


class _Work:
    """The busiest core's pipes (busy cycles), the chip-wide channel bytes, and the pipeline's fill/drain."""

    def __init__(self, p: Problem, chip: Chip, cores: int, write_pipe: str = "FIXPIPE", l0_buffers: int = 2):
        self.p, self.chip, self.cores, self.write_pipe = p, chip, max(1, cores), write_pipe
        self._rate = _rates(chip)           # the chip's path bandwidths and latencies, looked up once per chip
        self._cps = chip.cube_cycles_per_step.get(p.dtype.name)
        self.l0_single = l0_buffers == 1    # one L0A/L0B copy: each MTE1 load and its MMAD run one after the other
        self.cyc = dict.fromkeys(TERMS, 0.0)
        self.gm_read = self.gm_write = self.l2_read = 0.0
        self.core_gm = self.core_l2 = 0.0   # the busiest core's own charged bytes from GM / from L2
        self.head = 0.0                     # cycles before the cube can start (first pieces in, first MTE1)
        self.head_read = 0.0                # the part of head spent moving the first pieces (GM channel time)
        self.tail_load = 0.0                # cycles after the last transfer in until the end
        self.tail_mmad = 0.0                # cycles after the last MMAD until the end
        self.tail_fix = 0.0                 # cycles after the last store leaves Fixpipe
        self.serial = 0.0                   # cycles of a phase after a barrier (StreamK's reduction)
        self.serial_gm = 0.0                # GM bytes that phase moves (in serial, not the channel terms)
        self.serial_l2 = 0.0                # L2 bytes that phase reads (likewise)
        # rings of L1 slots: a slot is refilled only after the cube has read it, so each pass around a ring of
        # `stages` slots costs (transfer + latency + the cube's time on it + two sync edges) / stages per slot
        self.rings: list[tuple[float, float, float, float, int]] = []   # (slots, xfers, bytes, cube, stages)
        self.l0c_ring = 0.0                 # the cube's time bound by L0C slots waiting for Fixpipe (see l0c)
        self.l0_chain = 0.0                 # the cube's time with single L0A/L0B buffers: each MTE1 load waits for
                                            # the MMAD before it and each MMAD for its load, so the two add up
        self.phased = 0.0                   # the channels' time when every core walks the same phases at once
        self.phased_read = 0.0              # the same without the stores: the pace of the cores' reads
        self.first_phase = self.first_port = 0.0   # a load every core makes first, alone (an L1 full load)
        self.first_gm = self.first_l2 = 0.0        # its chip-wide GM and L2 bytes (out of the channel terms)
        self.tail_store = 0.0               # the last tile's (group's) Fixpipe cycles, inside tail_load
        self.tail_ring = 0.0                # the part of tail_load a ring's bound already holds: the last slot's
                                            # latency and the cube's time on it
        self.rounds = 0.0                   # the cube's time when rounds of tiles wait for the chip-wide channels
                                            # (the first pieces' wait is inside it: no head)

    # -- costs of single instructions (cycles) --
    def share(self, l2: bool = False) -> float:
        """Bytes per cycle one core gets when every core moves data at once."""
        chan = self.chip.l2_bytes_per_cycle if l2 else self.chip.gm_bytes_per_cycle
        return chan / self.cores

    def xfer(self, charged: float, src: str = "GM", dst: str = "L1") -> float:
        """Pipe cycles of one GM transfer of `charged` bytes on its own: setup + bytes at the path's rate (the
        chip-wide channels are booked separately, see finish)."""
        return self.chip.dma_setup_cycles + charged / _rate(self.chip, src, dst, self._rate).bytes_per_cycle

    def lat(self, src: str = "GM", dst: str = "L1", l2: bool = False) -> float:
        """Completion latency of a GM transfer after it leaves its pipe."""
        if dst == "GM":      # a write lands in L2 (write-back)
            return _rate(self.chip, src, dst, self._rate).latency + self.chip.l2_write_latency_cycles
        far = self.chip.l2_latency_cycles if l2 else self.chip.gm_latency_cycles
        return _rate(self.chip, src, dst, self._rate).latency + far

    def mmad_cycles(self, m: int, n: int, k: int) -> float:
        cps = self._cps if self._cps is not None else self.chip.cube_cycles_per_step[self.p.dtype.name]
        return cdiv(m, FRACTAL) * cdiv(n, FRACTAL) * cdiv(k, self.p.k0) * cps + self.chip.mmad_head_cycles

    def mte1_cycles(self, a_bytes: float, b_bytes: float) -> float:
        return (a_bytes / _rate(self.chip, "L1", "L0A", self._rate).bytes_per_cycle
                + b_bytes / _rate(self.chip, "L1", "L0B", self._rate).bytes_per_cycle)

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

    def stagger_stores(self, store_bytes: float, store_cyc: float) -> None:
        """The GM channel serves transfers in the order they are issued (each pipe has one on it at a time), so
        the cores' walks are staggered: the last core's tail (latency, last MMADs, its store of `store_bytes`)
        runs while the channel still carries the other cores' last stores."""
        others = (self.cores - 1) * store_bytes / self.chip.gm_bytes_per_cycle
        self.tail_store = min(self.tail_load - self.tail_fix, others + store_cyc)

    def bytes_in(self, charged: float, hit: float) -> None:
        """The busiest core's charged read bytes, `hit` of them from L2."""
        self.core_gm += charged - hit
        self.core_l2 += hit

    def bias_reads(self) -> None:
        """Book the bias rows the kernels read (each batch's row): its distinct rows (p.bias_rows) from GM, the
        repeats of a shared bias from L2."""
        p = self.p
        if p.bias:
            unique = p.bias_rows * p.N * ACC_BYTES
            self.traffic(unique, p.batch * p.N * ACC_BYTES, unique)

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
        gm_chan = (self.gm_read + self.gm_write - self.first_gm - self.serial_gm) / chip.gm_bytes_per_cycle
        l2_chan = (self.l2_read - self.first_l2 - self.serial_l2) / chip.l2_bytes_per_cycle
        mte2_pipe = c["MTE2"]
        t = dict.fromkeys(TERMS, 0.0)
        if c["MMAD"] > 0 or mte2_pipe > 0:
            # the core's own transfers vs the chip-wide GM and L2 channels all cores share
            # (the GM channel's reads here; reads and writes together below: the last stores are in it)
            load = self.first_phase + max(mte2_pipe - self.first_port, l2_chan, self.phased,
                                          (self.gm_read - self.first_gm) / chip.gm_bytes_per_cycle)
            core = self.core_gm + self.core_l2
            if self.rings and core > 0:
                # the pace of this core's reads: its share of the channels' read time (stores go between)
                reads = self.first_phase + max(mte2_pipe - self.first_port, l2_chan, self.phased_read,
                                               (self.gm_read - self.first_gm) / chip.gm_bytes_per_cycle)
                rate = min(chip.path("GM", "L1").bytes_per_cycle, core / max(reads, 1.0))
                hit = self.core_l2 / core
                lat = hit * self.lat(l2=True) + (1 - hit) * self.lat()
                tail = self.tail_load
                for slots, xfers, charged, cube, stages in self.rings:
                    per = (xfers * chip.dma_setup_cycles + charged / rate + slots * (lat + 2 * chip.flag_latency_cycles)
                           + cube) / stages
                    if per + self.tail_load - self.tail_ring / stages > load + tail:
                        load, tail = per, self.tail_load - self.tail_ring / stages
            else:
                tail = self.tail_load
            t["MTE2"] = load + tail
            if self.gm_read >= self.gm_write - self.serial_gm:
                # the whole GM channel, its last stores included: after the last read, the last piece's latency
                # and compute, then the stores' own latency (their channel time is in gm_chan)
                t["MTE2"] = max(t["MTE2"], self.first_phase + gm_chan + self.tail_load - self.tail_store)
            t["MMAD"] = (max(self.head + max(c["MMAD"], self.l0c_ring, self.l0_chain), self.rounds) + self.tail_mmad
                         if c["MMAD"] else 0.0)
            t["MTE1"] = self.head + c["MTE1"] + self.tail_mmad if c["MTE1"] else 0.0
        fix = c["FIXPIPE"] if self.write_pipe == "FIXPIPE" else c["MTE3"]
        write = self.head + fix
        if self.gm_read < self.gm_write - self.serial_gm and gm_chan > 0:
            # more stores than reads: the whole GM channel, whose reads began with the first pieces of the head
            write = max(write, self.head - self.head_read + gm_chan)
        t[self.write_pipe] = write + self.tail_fix if fix or write > self.head else 0.0
        t["VECTOR"] = self.head + c["VECTOR"] + self.tail_fix if c["VECTOR"] else 0.0
        if self.serial:
            cube = max(t.values())
            t["REDUCE"] = cube + self.serial
        t = {k: v * us for k, v in t.items()}
        bottleneck = max(TERMS, key=lambda k: t[k])
        return Estimate(t["MMAD"], t["MTE2"], t["MTE1"], t["FIXPIPE"], t["REDUCE"], t["VECTOR"], t["MTE3"],
                        t[bottleneck], bottleneck, p.flops, p.compulsory_bytes,
                        round(self.gm_read + self.gm_write), round(self.l2_read), self.cores, mte2_pipe * us)
