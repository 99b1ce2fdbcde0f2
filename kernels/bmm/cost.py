"""Analytic BMM time (seeds/000: T_total = max(T_MMAD, T_MTE2, T_MTE1, T_Fixpipe[, T_Reduce])), per branch.

The same first-principles costs as the emulator, from the same chip constants: an MMAD costs
ceil(m/16)*ceil(n/16)*ceil(k/k0) steps * cube_cycles_per_step + mmad_head_cycles; a transfer holds its
pipe for bytes / bandwidth, each contiguous row charged at least burst_min_bytes (the dValue >= 128B rule),
and its latency overlaps the next transfer, except that a GM transfer below min_tile_bytes exposes the
fraction (1 - bytes / min_tile) of its path latency (seeds/000's 16KB rule); each pipe pays its start-up
latency once. Per-core bandwidth is the path's, capped by the chip-wide GM (or L2) bandwidth shared by the
active cores. Each term is the busiest core's.
GM bandwidth is shared by reads and writes (seed: 读写共享): the chip-wide term, (GM reads + writes) / W_GM,
and the L2 term, L2 reads / W_L2, are booked on MTE2 (or on the writing pipe when writes dominate).
Repeated reads of data whose live set fits L2 are L2 hits; first reads always come from GM.
"""
from __future__ import annotations

from dataclasses import dataclass

from pyto.chip import Chip

from .conditions import ACC_BYTES, FRACTAL, Problem, cdiv
from .tilings import (AswTiling, IterBatchTiling, MergeBatchTiling, SpecialTiling, StreamKTiling, Tiling,
                      ToMatmulTiling)

TERMS = ("MMAD", "MTE2", "MTE1", "FIXPIPE", "REDUCE", "VECTOR", "MTE3")


@dataclass(frozen=True)
class Estimate:
    """Each pipe's busy time in microseconds, T_total = the largest, and the work behind them."""

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
    gm_bytes: int        # GM traffic the plan causes (reads + writes)
    l2_bytes: int        # reads served by L2
    cores_used: int
    t_mte2_pipe: float = 0.0  # the busiest core's own MTE2 time (transfers, latency), without the chip-wide term

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


class _Work:
    """Cycles of the busiest core per pipe, and chip-wide bytes, accumulated by the branch models."""

    def __init__(self, p: Problem, chip: Chip, cores: int, write_pipe: str = "FIXPIPE"):
        self.p, self.chip, self.cores, self.write_pipe = p, chip, max(1, cores), write_pipe
        self.cyc = dict.fromkeys(TERMS, 0.0)
        self.gm_read = self.gm_write = self.l2_read = 0.0
        self.reduce_s = self.serial_s = 0.0
        self._started: set[str] = set()

    def _start(self, pipe: str, latency: float) -> None:
        """The first transfer on a pipe waits its full latency; later ones overlap it."""
        if pipe not in self._started:
            self._started.add(pipe)
            self.cyc[pipe] += latency

    def _gm(self, pipe: str, path_bpc: float, latency: float, count: float, rows: float, row_bytes: float,
            gm_frac: float) -> None:
        exposed = latency * max(0.0, 1.0 - rows * row_bytes / self.chip.min_tile_bytes)
        self.cyc[pipe] += count * (self._charged(rows, row_bytes) * self._bw(path_bpc, gm_frac) + exposed)
        self._start(pipe, latency + self.chip.gm_latency_cycles)

    def _bw(self, path_bpc: float, gm_frac: float = 1.0) -> float:
        """Cycles per byte on a core's path, mixing GM and L2 sources by gm_frac."""
        gm = min(path_bpc, self.chip.gm_bytes_per_cycle / self.cores)
        l2 = min(path_bpc, self.chip.l2_bytes_per_cycle / self.cores)
        return gm_frac / gm + (1 - gm_frac) / l2

    def _charged(self, rows: float, row_bytes: float) -> float:
        return rows * max(row_bytes, self.chip.burst_min_bytes)

    def mmad(self, count: float, m: int, n: int, k: int, bk: int) -> None:
        """count tiles of m x n accumulated over k in MMADs of depth bk."""
        if k <= 0 or count <= 0:
            return
        cps = self.chip.cube_cycles_per_step[self.p.dtype.name]

        def one(kk: int) -> float:
            return cdiv(m, FRACTAL) * cdiv(n, FRACTAL) * cdiv(kk, self.p.k0) * cps + self.chip.mmad_head_cycles
        full, tail = divmod(k, bk)
        self.cyc["MMAD"] += count * (full * one(bk) + (one(tail) if tail else 0))

    def load(self, count: float, rows: float, row_bytes: float, gm_frac: float, dst: str = "L1") -> None:
        """count GM/L2 -> L1 (or UB) transfers of `rows` contiguous rows each."""
        path = self.chip.path("GM", dst)
        self._gm("MTE2", path.bytes_per_cycle, path.latency, count, rows, row_bytes, gm_frac)

    def l1_to_l0(self, count: float, a_bytes: float, b_bytes: float) -> None:
        pa, pb = self.chip.path("L1", "L0A"), self.chip.path("L1", "L0B")
        self.cyc["MTE1"] += count * (a_bytes / pa.bytes_per_cycle + b_bytes / pb.bytes_per_cycle)
        self._start("MTE1", max(pa.latency, pb.latency))

    def store(self, count: float, rows: float, row_bytes: float, src: str = "L0C") -> None:
        """count L0C -> GM (Fixpipe) or UB -> GM (MTE3) stores."""
        path = self.chip.path(src, "GM")
        self._gm("FIXPIPE" if src == "L0C" else "MTE3", path.bytes_per_cycle, path.latency, count, rows, row_bytes,
                 1.0)

    def traffic(self, unique: float, total: float, live: float) -> float:
        """Book chip-wide reads; repeats are L2 hits when the live set fits L2. Returns the GM fraction."""
        total = max(total, unique)
        if live <= self.chip.l2_bytes:
            self.gm_read += unique
            self.l2_read += total - unique
            return unique / total if total else 1.0
        self.gm_read += total
        return 1.0

    def a_tile(self, r: int, c: int, full_k: bool) -> tuple[float, float]:
        """(rows, row bytes) of an A tile of r rows (M) x c columns (K) as stored (ND or DN)."""
        isz, p = self.p.isz, self.p
        if p.transpose_a:
            return (1, r * c * isz) if r >= p.M else (c, r * isz)
        return (1, r * c * isz) if full_k else (r, c * isz)

    def b_tile(self, c: int, r: int, full_k: bool) -> tuple[float, float]:
        """(rows, row bytes) of a B tile of c rows (K) x r columns (N)."""
        isz, p = self.p.isz, self.p
        if p.transpose_b:
            return (1, r * c * isz) if full_k else (r, c * isz)
        return (1, r * c * isz) if r >= p.N else (c, r * isz)

    def finish(self) -> Estimate:
        p, chip = self.p, self.chip
        us = 1e6 / chip.clock_hz
        if p.bias:
            self.gm_read += p.batch * p.N * p.isz
        t = {k: v * us for k, v in self.cyc.items()}
        pipe_mte2 = t["MTE2"]
        t["REDUCE"] = self.reduce_s * 1e6
        shared = max((self.gm_read + self.gm_write) / (chip.gm_bandwidth_gbs * 1e9),
                     self.l2_read / (chip.l2_bandwidth_gbs * 1e9)) * 1e6
        pipe = "MTE2" if self.gm_read >= self.gm_write else self.write_pipe
        t[pipe] = max(t[pipe], shared)
        t["MTE2"] += self.serial_s * 1e6
        bottleneck = max(TERMS, key=lambda k: t[k])
        return Estimate(t["MMAD"], t["MTE2"], t["MTE1"], t["FIXPIPE"], t["REDUCE"], t["VECTOR"], t["MTE3"],
                        t[bottleneck], bottleneck, p.flops, p.compulsory_bytes,
                        round(self.gm_read + self.gm_write), round(self.l2_read), self.cores, pipe_mte2)


def _inputs(p: Problem) -> float:
    return (p.batch_a * p.M * p.K + p.batch_b * p.K * p.N) * p.isz


def _asw(t: AswTiling, p: Problem, chip: Chip, w: _Work | None = None) -> _Work:
    """Each core walks its tiles; A and B tiles stream in k_L1 slices (a full-load side comes once)."""
    w = w or _Work(p, chip, t.cores_used)
    isz, k = p.isz, t.k
    bm, bn = min(t.base_m, t.m), min(t.base_n, t.n)
    per, nk1 = t.tasks_per_core, cdiv(k, t.k_l1)
    a_total = (t.cores_used * t.m if t.full_load == "A" else t.tasks * bm) * k * isz
    b_total = (t.cores_used * t.n if t.full_load == "B" else t.tasks * bn) * k * isz
    in_flight = min(t.batch, cdiv(t.cores_used, t.tiles_m * t.tiles_n))
    live = in_flight * (cdiv(t.tiles_m, t.l2_tiles_m) * bm + cdiv(t.tiles_n, t.l2_tiles_n) * bn) * k * isz
    frac = w.traffic(_inputs(p), a_total + b_total, live)
    seg = k / nk1
    if t.full_load == "A":
        w.load(1, *w.a_tile(t.m, k, True), frac)
    else:
        w.load(per * nk1, *w.a_tile(bm, seg, nk1 == 1), frac)
    if t.full_load == "B":
        w.load(1, *w.b_tile(k, t.n, True), frac)
    else:
        w.load(per * nk1, *w.b_tile(seg, bn, nk1 == 1), frac)
    w.mmad(per, t.base_m, t.base_n, k, t.base_k)
    w.l1_to_l0(per * cdiv(k, t.base_k), t.base_m * t.base_k * isz, t.base_k * t.base_n * isz)
    w.store(per, *((1, bm * bn * p.out_isz) if bn >= t.n else (bm, bn * p.out_isz)))
    w.gm_write += t.batch * t.m * t.n * p.out_isz
    return w


def _to_matmul(t: ToMatmulTiling, p: Problem, chip: Chip) -> _Work:
    """The folded matmul, plus the rearrangement / scatter passes it needs before and after."""
    w = _asw(t.matmul, p, chip)
    extra = t.rearrange_bytes + t.scatter_bytes
    w.gm_read += extra / 2
    w.gm_write += extra / 2
    w.serial_s += extra / (chip.gm_bandwidth_gbs * 1e9)
    return w


def _iter(t: IterBatchTiling, p: Problem, chip: Chip) -> _Work:
    """Each core runs batches_per_core matmuls; the split side of (c)(d)(e) is re-read per output tile row."""
    w = _Work(p, chip, t.cores_used)
    isz, bpc = p.isz, t.batches_per_core
    M, N, K = p.M, p.N, p.K
    tm, tn = cdiv(min(M, t.m_l1), t.base_m) * cdiv(M, t.m_l1), cdiv(N, t.base_n)
    if t.resident == "AB":
        loads = [(1, w.a_tile(M, K, True), M * K), (1, w.b_tile(K, N, True), K * N)]
    elif t.resident == "A":
        kb = K / t.step
        loads = [(1, w.a_tile(M, K, True), M * K), (tm * t.step, w.b_tile(kb, N, False), tm * K * N)]
    elif t.resident == "B":
        ma = M / t.step
        loads = [(t.step, w.a_tile(ma, K, True), M * K), (1, w.b_tile(K, N, True), K * N)]
    else:
        kk, bm, bn = K / t.step, min(t.base_m, M), min(t.base_n, N)
        reps = tm * tn
        loads = [(reps * t.step, w.a_tile(bm if reps > 1 else M, kk, False), (tn if reps > 1 else 1) * M * K),
                 (reps * t.step, w.b_tile(kk, bn if reps > 1 else N, False), (tm if reps > 1 else 1) * K * N)]
    total = p.batch * sum(e for *_, e in loads) * isz
    frac = w.traffic(_inputs(p), total, t.cores_used * (M * K + K * N) * isz)
    for count, (rows, row_bytes), _ in loads:
        w.load(bpc * count, rows, row_bytes, frac)
    w.mmad(bpc * tm * tn, t.base_m, t.base_n, K, t.base_k)
    w.l1_to_l0(bpc * tm * tn * cdiv(K, t.base_k), t.base_m * t.base_k * isz, t.base_k * t.base_n * isz)
    bn = min(t.base_n, N)
    w.store(bpc * tm * tn, min(t.base_m, M), bn * p.out_isz)
    w.gm_write += p.batch * M * N * p.out_isz
    return w


def _merge(t: MergeBatchTiling, p: Problem, chip: Chip) -> _Work:
    """b_L1 batches per L1 load (ndNum), b per merged MMAD; cross terms (b-1)/b are computed and dropped."""
    w = _Work(p, chip, t.cores_used)
    isz, bpc = p.isz, t.batches_per_core
    M, N, K = p.M, p.N, p.K
    l1_groups, ks = cdiv(bpc, t.b_l1), cdiv(K, t.k_l1)
    kk = K / ks
    total = p.batch * (M * K + K * N) * isz
    frac = w.traffic(_inputs(p), total, (M * K if p.batch_a == 1 else 0) + (K * N if p.batch_b == 1 else 0))
    a_rows, a_row = w.a_tile(M, kk, ks == 1)
    b_rows, b_row = w.b_tile(kk, N, ks == 1)
    w.load(l1_groups * ks, t.b_l1 * a_rows, a_row, frac)
    w.load(l1_groups * ks, t.b_l1 * b_rows, b_row, frac)
    w.mmad(t.groups_per_core, t.base_m, t.base_n, K, t.base_k)
    w.l1_to_l0(t.groups_per_core * cdiv(K, t.base_k), t.base_m * t.base_k * isz, t.base_k * t.base_n * isz)
    w.store(t.groups_per_core, t.b * M, N * p.out_isz)
    w.gm_write += p.batch * M * N * p.out_isz
    return w


def _stream(t: StreamKTiling, p: Problem, chip: Chip) -> _Work:
    """grid_K cores per output block; partials go to a GM workspace (AIVs sum them) or are atomically added."""
    w = _Work(p, chip, t.cores_used)
    isz, M, N = p.isz, p.M, p.N
    sm, sn, sck = min(t.single_m, M), min(t.single_n, N), min(t.single_core_k, p.K)
    tm, tn = cdiv(sm, t.base_m), cdiv(sn, t.base_n)
    bm, bn = min(t.base_m, sm), min(t.base_n, sn)
    nk1 = cdiv(sck, t.k_l1)
    total = t.units * tm * tn * (bm + bn) * sck * isz
    frac = w.traffic(_inputs(p), total, t.cores_used * (sm + sn) * sck * isz)
    per = t.rounds * tm * tn
    w.load(per * nk1, *w.a_tile(bm, sck / nk1, False), frac)
    w.load(per * nk1, *w.b_tile(sck / nk1, bn, False), frac)
    w.mmad(per, t.base_m, t.base_n, sck, t.base_k)
    w.l1_to_l0(per * cdiv(sck, t.base_k), t.base_m * t.base_k * isz, t.base_k * t.base_n * isz)
    out = p.batch * M * N
    part = out * t.grid_k * (ACC_BYTES if t.reduce == "workspace" else p.out_isz)
    w.store(per, bm, bn * (ACC_BYTES if t.reduce == "workspace" else p.out_isz))
    w.gm_write += part
    gm_s = chip.gm_bandwidth_gbs * 1e9
    if t.reduce == "workspace":
        w.gm_read += part
        w.gm_write += out * p.out_isz
        aivs = t.cores_used * chip.aiv_per_aic
        elems = out * t.grid_k / aivs
        vec = elems * ACC_BYTES / chip.vector_bytes_per_cycle + cdiv(round(elems), t.reduce_chunk) * (
            t.grid_k + 1) * chip.vector_head_cycles
        w.reduce_s = (2 * part + out * p.out_isz) / gm_s + vec / chip.clock_hz
    else:
        w.reduce_s = part / gm_s
    return w


def _special(t: SpecialTiling, p: Problem, chip: Chip) -> _Work:
    """AIV tiles: fill writes bias or zeros; outer reads an A column and a B row, casts, multiplies, writes."""
    w = _Work(p, chip, t.aiv_used, write_pipe="MTE3")
    if t.mode == "empty":
        return w
    isz, per = p.isz, t.units_per_aiv
    out_row = t.cols * p.out_isz
    w.store(per, 1 if t.cols >= p.N else t.rows, out_row * (t.rows if t.cols >= p.N else 1), src="UB")
    w.gm_write += p.batch * p.M * p.N * p.out_isz
    elems = t.rows * t.cols
    if t.mode == "fill":
        w.cyc["VECTOR"] += per * (chip.vector_head_cycles + elems * ACC_BYTES / chip.vector_bytes_per_cycle)
        if p.bias:
            w.load(per, 1, t.cols * isz, 1.0, dst="UB")
        return w
    w.traffic(_inputs(p), _inputs(p), 0)
    w.load(per, 1, t.rows * isz, 1.0, dst="UB")
    w.load(per, 1, t.cols * isz, 1.0, dst="UB")
    ops = (t.rows, t.cols, elems, elems)              # cast A, cast B, multiply, cast out
    w.cyc["VECTOR"] += per * sum(chip.vector_head_cycles + e * ACC_BYTES / chip.vector_bytes_per_cycle for e in ops)
    return w


_MODELS = {AswTiling: _asw, ToMatmulTiling: _to_matmul, IterBatchTiling: _iter, MergeBatchTiling: _merge,
           StreamKTiling: _stream, SpecialTiling: _special}


def estimate(p: Problem, tiling: Tiling, chip: Chip) -> Estimate:
    """The analytic time of running `tiling` on `p` (branch given by the tiling's type)."""
    return _MODELS[type(tiling)](tiling, p, chip).finish()
