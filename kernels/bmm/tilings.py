"""Each BMM branch's tiling (seeds/000 "实现方案") as a frozen dataclass a kernel can run, and its derivation.

Conventions every tiling follows: base_m/base_n are multiples of 16 (32 for int8), base_k and every L1 K
depth a multiple of max(16, k0); the last tile along any axis may be a tail (min with the real size).
`buffer_bytes(p)` gives the bytes each buffer holds (tile x buffer count); `check_fits` enforces capacity.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Union

from pyto.chip import Chip
from pyto.errors import PlanError

from .conditions import (ACC_BYTES, FRACTAL, FRACTAL_BYTES, IterL1, Problem, align_down, align_up, asw_window,
                         cdiv, grid_k_ok)

FULL_LOAD_ROUNDS = 4  # seed ASW 5: the other side loops >= 4 rounds per core before a side is held in L1
TILE_TIE = 0.01       # base tiles whose estimates differ by less than this are ranked by padding, then size


def doc(text: str):
    """A dataclass field with its meaning, printed by Plan.explain()."""
    return field(metadata={"doc": text})


def _derivation():
    return field(default=(), compare=False, repr=False)


def _cube_use(t, p: Problem, l1: int) -> dict[str, int]:
    """Bytes per buffer of a cube tiling: the given L1 bytes, L0A/L0B/L0C tiles x copies, the bias row in BT."""
    use = {"L1": l1 + bias_l1_bytes(t.base_n, p), "L0A": t.l0_buffers * t.base_m * t.base_k * p.isz,
           "L0B": t.l0_buffers * t.base_k * t.base_n * p.isz,
           "L0C": t.l0c_buffers * t.base_m * t.base_n * ACC_BYTES}
    if p.bias:
        use["BT"] = t.base_n * ACC_BYTES
    return use


@dataclass(frozen=True)
class AswTiling:
    """ASW_Basic (also ToMatmul's matmul): output tiles of base_m x base_n dealt round-robin in swizzle order."""

    batch: int = doc("batches in the task space (1 for a folded matmul)")
    m: int = doc("rows of each batch's matmul")
    n: int = doc("columns of each batch's matmul")
    k: int = doc("reduction length")
    base_m: int = doc("rows of one L0A / L0C tile")
    base_n: int = doc("columns of one L0B / L0C tile")
    base_k: int = doc("K of one L0A/L0B tile (one MMAD)")
    k_l1: int = doc("K depth of one L1 load (a multiple of base_k)")
    l1_buffers: int = doc("copies of the streamed L1 tiles (2, or 4 when L1 has room)")
    l0_buffers: int = doc("copies of the L0A and L0B tiles")
    l0c_buffers: int = doc("copies of the L0C tile")
    tiles_m: int = doc("ceil(m / base_m)")
    tiles_n: int = doc("ceil(n / base_n)")
    tasks: int = doc("batch * tiles_m * tiles_n output tiles")
    tasks_per_core: int = doc("ceil(tasks / cores_used): tile t goes to core t mod cores_used")
    cores_used: int = doc("min(tasks, C)")
    split: tuple = doc("dimensions split between cores (B, M, N)")
    window: int = doc("ASW window W: W tile-rows of M walked along N in a snake, odd windows backwards")
    l2_tiles_m: int = doc("mL2TileNum: L2 blocks along M (1 when the working set fits L2)")
    l2_tiles_n: int = doc("nL2TileNum: L2 blocks along N")
    full_load: str = doc("'A' or 'B': that matrix is loaded into L1 once per core and stays; '' otherwise")
    broadcast_resident: str = doc("sides whose batches are broadcast (reused from L2): 'A', 'B', 'AB' or ''")
    derivation: tuple = _derivation()

    def buffer_bytes(self, p: Problem) -> dict[str, int]:
        isz = p.isz
        a_rows = 0 if self.full_load == "A" else self.base_m
        b_cols = 0 if self.full_load == "B" else self.base_n
        resident = {"A": align_up(self.m, p.mn_align), "B": align_up(self.n, p.mn_align)}.get(self.full_load, 0)
        return _cube_use(self, p, self.l1_buffers * (a_rows + b_cols) * self.k_l1 * isz
                         + resident * align_up(self.k, p.k_align) * isz)


@dataclass(frozen=True)
class MergeBatchTiling:
    """MergeBatch: b batches merged into one [b*M̄, K] @ [K, b*N̄] MMAD; the diagonal blocks are the output."""

    b: int = doc("b_L0: batches merged per MMAD (each batch padded to m_pad rows / n_pad columns)")
    b_l1: int = doc("b_L1: batches per L1 load (a multiple of b)")
    m_pad: int = doc("M̄: rows of one batch block inside the merged tile")
    n_pad: int = doc("N̄: columns of one batch block")
    base_m: int = doc("b * m_pad: rows of the merged L0A / L0C tile")
    base_n: int = doc("b * n_pad: columns of the merged L0B / L0C tile")
    base_k: int = doc("k_L0: K of one merged MMAD")
    k_l1: int = doc("k_L1: K depth of one L1 load (a multiple of base_k)")
    l1_buffers: int = doc("L1 copies (double buffer)")
    l0_buffers: int = doc("L0A/L0B copies (double buffer)")
    l0c_buffers: int = doc("L0C copies (double buffer)")
    batches_per_core: int = doc("ceil(B / C): core c takes batches [c*bpc, (c+1)*bpc)")
    groups_per_core: int = doc("ceil(batches_per_core / b) merged MMAD groups, the last may be partial")
    cores_used: int = doc("ceil(B / batches_per_core)")
    derivation: tuple = _derivation()

    def buffer_bytes(self, p: Problem) -> dict[str, int]:
        return _cube_use(self, p, self.l1_buffers * self.b_l1 * (self.m_pad + self.n_pad) * self.k_l1 * p.isz)


@dataclass(frozen=True)
class IterBatchTiling:
    """IterBatch: each core runs whole batches one after another as ordinary matmuls."""

    case: str = doc("L1 case of seeds/000 IterBatch 3: a, b, c, d or e")
    resident: str = doc("'AB' both whole in L1; 'A'/'B' that side whole; '' both split along K")
    step: int = doc("Step: segments the split side is loaded in (1 for a/b)")
    m_l1: int = doc("rows of A per L1 load (M̄ unless B is resident and A is split along M)")
    k_l1_a: int = doc("K depth of A's L1 load")
    k_l1_b: int = doc("K depth of B's L1 load")
    base_m: int = doc("BaseM")
    base_n: int = doc("BaseN")
    base_k: int = doc("BaseK (divides the split side's K depth)")
    l1_buffers: int = doc("copies of the resident side(s): 2 when consecutive batches ping-pong in L1 (b, d), else 1")
    stream_buffers: int = doc("copies of the streamed K slices (c, d, e; 0 when nothing streams)")
    l0_buffers: int = doc("L0A/L0B copies")
    l0c_buffers: int = doc("L0C copies")
    unit_flag: bool = doc("Fixpipe uses unit_flag (seed case c asks for it; every case uses it: an L0C slot is "
                          "free once Fixpipe has read it, not once the write has landed in GM)")
    batches_per_core: int = doc("ceil(B / C): core c takes batches c, c + C, c + 2C, ...")
    cores_used: int = doc("min(B, C)")
    derivation: tuple = _derivation()

    def buffer_bytes(self, p: Problem) -> dict[str, int]:
        a_held, b_held = self.resident in ("AB", "A"), self.resident in ("AB", "B")
        held = (p.Mp * p.Kp if a_held else 0) + (p.Kp * p.Np if b_held else 0)
        streamed = (0 if a_held else self.base_m * self.k_l1_a) + (0 if b_held else self.k_l1_b * self.base_n)
        return _cube_use(self, p, (self.l1_buffers * held + self.stream_buffers * streamed) * p.isz)


@dataclass(frozen=True)
class StreamKTiling:
    """StreamK: each output block is computed by grid_k cores on K segments, then reduced."""

    grid_k: int = doc("grid_K: cores sharing one output block along K")
    m_cnt: int = doc("mCnt: output blocks per batch along M")
    n_cnt: int = doc("nCnt: output blocks per batch along N")
    blocks_per_batch: int = doc("blocksPerBatch = floor(C / B)")
    single_m: int = doc("rows of one core's output block")
    single_n: int = doc("columns of one core's output block")
    single_core_k: int = doc("singleCoreK: K segment of one core; core c of a group takes [c*sck, (c+1)*sck)")
    base_m: int = doc("rows of one L0A / L0C tile")
    base_n: int = doc("columns of one L0B / L0C tile")
    base_k: int = doc("K of one MMAD")
    k_l1: int = doc("K depth of one L1 load")
    l1_buffers: int = doc("L1 copies")
    l0_buffers: int = doc("L0A/L0B copies")
    l0c_buffers: int = doc("L0C copies")
    reduce: str = doc("'workspace' (fp32 partials to GM, AIVs sum them: deterministic) or 'atomic'")
    units: int = doc("B * m_cnt * n_cnt * grid_k work units (batch, m-block, n-block, k-segment)")
    cores_used: int = doc("min(units, C); unit u goes to core u mod C")
    rounds: int = doc("ceil(units / C)")
    workspace_bytes: int = doc("GM workspace: cores * max(256x256x4B, block) + the inter-core area")
    reduce_chunk: int = doc("fp32 elements one AIV sums per UB pass")
    derivation: tuple = _derivation()

    def buffer_bytes(self, p: Problem) -> dict[str, int]:
        use = _cube_use(self, p, self.l1_buffers * (self.base_m + self.base_n) * self.k_l1 * p.isz)
        use["UB"] = _reduce_ub(self.reduce_chunk, p) if self.reduce == "workspace" else 0
        return use


@dataclass(frozen=True)
class ToMatmulTiling:
    """ToMatmul: the batch folded away, then one ASW-style matmul."""

    fold: str = doc("'plain' (no batch), 'fold_m' (A viewed [B*M, K]), 'a_resident' (A held in every core's "
                    "L1, cores share B's batches), 'fold_n' (B rearranged [K, B*N], output scattered)")
    mm_batch: int = doc("batches of the underlying matmul (B for a_resident and fold_n, else 1)")
    mm_m: int = doc("rows of the underlying matmul")
    mm_n: int = doc("columns of the underlying matmul")
    mm_k: int = doc("K of the underlying matmul")
    rearrange_bytes: int = doc("GM bytes read + written to rearrange an input before the matmul (the seed's fold_n; "
                               "the kernel runs the broadcast problem instead and does not move them)")
    scatter_bytes: int = doc("GM bytes read + written to scatter the output after the matmul (idem)")
    matmul: AswTiling = doc("the underlying matmul's tiling")
    derivation: tuple = _derivation()

    @property
    def free(self) -> bool:
        return self.rearrange_bytes == 0 and self.scatter_bytes == 0

    def buffer_bytes(self, p: Problem) -> dict[str, int]:
        return self.matmul.buffer_bytes(p)


@dataclass(frozen=True)
class SpecialTiling:
    """Special: the AIV path. K=0 fills C with bias or zeros; K=1 computes C = A ⊙ B row tile by row tile."""

    mode: str = doc("'empty' (nothing to write), 'fill' (K = 0) or 'outer' (K = 1)")
    rows: int = doc("rows of one UB tile of C")
    cols: int = doc("columns of one UB tile of C")
    ub_buffers: int = doc("UB copies (ping-pong)")
    units: int = doc("B * ceil(M/rows) * ceil(N/cols) UB tiles")
    units_per_aiv: int = doc("ceil(units / AIV): unit u goes to AIV u mod aiv_used")
    aiv_used: int = doc("vector cores used")
    derivation: tuple = _derivation()

    def buffer_bytes(self, p: Problem) -> dict[str, int]:
        return {"UB": self.ub_buffers * _special_ub(self.mode, self.rows, self.cols, p)}


Tiling = Union[AswTiling, MergeBatchTiling, IterBatchTiling, StreamKTiling, ToMatmulTiling, SpecialTiling]


def field_docs(tiling: object) -> list[tuple[str, object, str]]:
    """(name, value, meaning) of each field a kernel reads."""
    return [(f.name, getattr(tiling, f.name), f.metadata.get("doc", "")) for f in fields(tiling)
            if f.name != "derivation"]


def check_fits(branch: str, tiling: Tiling, p: Problem, chip: Chip) -> None:
    """PlanError naming the buffer, the bytes needed and the capacity when a tiling overflows one."""
    for buf, need in tiling.buffer_bytes(p).items():
        if need > chip.buffers[buf]:
            raise PlanError(f"{branch} tiling does not fit {buf}: needs {need} B, capacity {chip.buffers[buf]} B "
                            f"({tiling})")


# ---- the 2-D cube tiling shared by ASW_Basic, ToMatmul and StreamK -----------------------------------

def bias_l1_bytes(bn: int, p: Problem) -> int:
    """L1 the kernels' bias row takes: two slots of [1, base_n] fp32/int32, padded to 16 rows (pl.alloc)."""
    return 2 * FRACTAL * align_up(bn, FRACTAL) * ACC_BYTES if p.bias else 0


def _base_k(bm: int, bn: int, kp: int, p: Problem, chip: Chip) -> int:
    """baseK from L0A/L0B with double buffering, inner axis aligned to 256B, else 128B, else k0 (seed ASW 4)."""
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
    fits the L1 budget; 4 buffers when they fit too (seed ASW 4: "余量充足时开 4 buffer")."""
    while bk >= p.k_align:
        s = budget // (2 * rows * bk * p.isz) if rows else cdiv(kp, bk)
        if s >= 1:
            k_l1 = _balanced(kp, s * bk, bk)
            return bk, k_l1, 4 if 4 * rows * k_l1 * p.isz <= budget else 2
        bk = align_down(bk // 2, p.k_align)
    return 0, 0, 0


def cube_candidates(m: int, n: int, k: int, batch: int, p: Problem, chip: Chip, *, cores: int,
                    a_in_l1: bool = False, b_in_l1: bool = False, hold_copies: int = 1,
                    sharing: int | None = None, held_twice: bool = False
                    ) -> list[tuple[tuple, tuple[int, int, int, int, int]]]:
    """Every (key, (base_m, base_n, base_k, k_l1, l1_buffers)) whose tiles fit L0A/L0B/L0C (double buffered)
    and L1; key: a quick figure of merit, rounds x max(cube, move) per tile, then padding, then size.

    seed ASW 4: M^t N^t 4B DB <= L0C; 1/M^t + 1/N^t small (cube bound); divide M, N (few tail tiles).
    a_in_l1 / b_in_l1: that side is held whole in L1 (hold_copies copies), not streamed; held_twice: the held
    slab must fit L1 twice (the L1 full load's rule, seed ASW 5: MK*dtype*2 <= L1). sharing: cores loading
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
        raise PlanError(f"no cube tile of {m}x{n}x{k} fits L1 {chip.buffers['L1']} B (held sides: "
                        f"{'A' if a_in_l1 else ''}{'B' if b_in_l1 else ''} x {hold_copies}) / L0A / L0B / L0C on "
                        f"{chip.name}")
    return sorted(out)


def cube_tiles(m: int, n: int, k: int, batch: int, p: Problem, chip: Chip, *, cores: int,
               a_in_l1: bool = False, b_in_l1: bool = False, hold_copies: int = 1,
               sharing: int | None = None) -> tuple[int, int, int, int, int]:
    """(base_m, base_n, base_k, k_l1, l1_buffers): the best of `cube_candidates` by its quick key."""
    return cube_candidates(m, n, k, batch, p, chip, cores=cores, a_in_l1=a_in_l1, b_in_l1=b_in_l1,
                           hold_copies=hold_copies, sharing=sharing)[0][1]


def _l2_tiles(m: int, n: int, k: int, bm: int, bn: int, p: Problem, chip: Chip) -> tuple[int, int]:
    """mL2TileNum x nL2TileNum: fewest L2 blocks whose A rows + B columns fit L2, ties to the smaller tail."""
    tm, tn, isz, l2 = cdiv(m, bm), cdiv(n, bn), p.isz, chip.l2_bytes
    if (m * k + k * n) * isz <= l2:
        return 1, 1
    best, best_key = (tm, tn), None
    for ml2 in range(1, tm + 1):
        rest = l2 - cdiv(tm, ml2) * bm * k * isz
        cols = rest // (k * bn * isz) if rest > 0 else 0
        if cols < 1:
            continue
        nl2 = cdiv(tn, min(cols, tn))
        key = (ml2 * nl2, ml2 * cdiv(tm, ml2) - tm + nl2 * cdiv(tn, nl2) - tn)
        if best_key is None or key < best_key:
            best, best_key = (ml2, nl2), key
    return best


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


def _asw_tiles(p: Problem, chip: Chip, batch: int, m: int, n: int, k: int, full_load: str) -> tuple:
    """The base tiles of an ASW tile walk: of every tile shape that fits (cube_candidates), the one the cost
    model (cost.estimate, the same model the planner arbitrates with) finds fastest; ties to less padding,
    then the larger tile. The seed's ASW 4 leaves the choice to the balance of cube and move time."""
    from .cost import estimate
    cands = cube_candidates(m, n, k, batch, p, chip, cores=chip.aic, a_in_l1=full_load == "A",
                            b_in_l1=full_load == "B", held_twice=bool(full_load))
    timed = [(estimate(p, _asw_of(p, chip, batch, m, n, k, tiles, full_load), chip).t_total, pad, area, tiles)
             for (_, pad, area), tiles in cands]
    fastest = min(x[0] for x in timed)
    # within the model's resolution (TILE_TIE of the fastest) the tiles that pad least, then the largest, win:
    # what the seed asks of ASW 4 besides the cube/move balance ("优先整除 M、N 减少尾块")
    return min((x for x in timed if x[0] <= fastest * (1 + TILE_TIE)), key=lambda x: (x[1], x[2], x[0]))[3]


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
    if full_load is None:
        full_load = ""
        for side, rows, shared in (("A", m, p.batch_a == 1), ("B", n, p.batch_b == 1)):
            whole = align_up(rows, p.mn_align) * align_up(k, p.k_align) * isz
            base = bm if side == "A" else bn
            rounds = cdiv(tasks, C)
            if shared and batch > 1 and align_up(rows, p.mn_align) <= base and 2 * whole <= chip.buffers["L1"] \
                    and rounds >= FULL_LOAD_ROUNDS and not full_load:
                full_load = side
                notes.append(f"L1 full load of {side}: no batch, {rows} rows fit one base tile, 2*{whole} B <= "
                             f"L1, {rounds} >= {FULL_LOAD_ROUNDS} rounds per core")
    if full_load:
        whole = (align_up(m if full_load == "A" else n, p.mn_align)) * align_up(k, p.k_align) * isz
        if whole > chip.buffers["L1"]:
            raise PlanError(f"full load of {full_load}: {whole} B > L1 {chip.buffers['L1']} B")
        bm, bn, bk, k_l1, nbuf = _asw_tiles(p, chip, batch, m, n, k, full_load)
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
        if pingpong and (2 * mb * bk > a_el or 2 * bk * nb > b_el) and half >= ka:
            # (b)'s "GM->L1->L0->Cube->L0C->GM 流水": with one L0 copy of BaseK the move and the cube cannot
            # overlap; two copies of the deepest BaseK that fits twice let MTE1 feed the cube while it works
            bk = half
        l0 = 2 if 2 * mb * bk <= a_el and 2 * bk * nb <= b_el else 1     # double buffer where L0 has room
        return mb, nb, bk, l0, nc, f"L0C >= {nc}*M̄*N̄*4B: BaseM = M̄, BaseN = N̄, only K split"
    if m < n:
        bm, bn, bk = _small_side(mb, nb, kb, a_el, b_el, c_el, mb, n_cap, nc, p)
        return bm, bn, bk, nc, nc, "M < N: BaseM = align(M, 16), BaseN and BaseK from L0C, L0A, L0B"
    bn, bm, bk = _small_side(nb, mb, kb, b_el, a_el, c_el, n_cap, mb, nc, p)
    return bm, bn, bk, nc, nc, "M >= N: BaseN = align(N, 16), BaseM and BaseK from L0C, L0A, L0B"


def _largest_divisor(k: int, upto: int, step: int) -> int:
    return next(d for d in range(align_down(upto, step), 0, -step) if k % d == 0)


def iter_tiling(p: Problem, chip: Chip, l1: IterL1) -> IterBatchTiling:
    """IterBatch tiling for the L1 case chosen by conditions.iter_l1.

    (a)/(b): the seed's L0 pseudo-code; both sides whole in L1 (l1_buffers copies). (c)/(d)/(e): the seed
    gives the entry condition and Step but no L0 rule ("同理，按各自容量预算计算 Step 与分块"): the split side
    streams through L1 once per output tile, so the tiles are the ASW core tiling (seed ASW 4: L0C double
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
        from .cost import estimate
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
    notes = (f"case ({l1.case}): resident {l1.resident or 'none'}, Step = {l1.step}, m_L1 = {l1.m_l1}, "
             f"seed k_L1 A/B = {l1.k_l1_a}/{l1.k_l1_b}" + (" (k_L1_b = min((L1 - M̄K̄*dtype)/(N̄*dtype), K))"
                                                            if l1.resident == "A" else ""), how)
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
    b_ii = math.ceil(chip.R / ratio) - 1 if ratio else b_i
    b_bt = chip.buffers["BT"] // (np_ * ACC_BYTES) if p.bias else b_i
    if min(b_i, b_bt) < 1:
        need = 2 * mp * np_ * ACC_BYTES
        raise PlanError(f"merge_batch: one batch's [M̄, N̄] fp32 tile double-buffered needs {need} B > L0C "
                        f"{chip.buffers['L0C']} B" if b_i < 1 else
                        f"merge_batch: bias row N̄*4B = {np_ * ACC_BYTES} B > BT {chip.buffers['BT']} B")
    # seed condition 1: "2 组起步才能构成组间乒乓流水" -- at least two groups per core (b < batches per core)
    # wherever the core has the 2*b0 batches the home ground gives it
    b_grp = bpc - 1 if bpc >= 2 * b0 else bpc
    b_max = max(1, min(b_i, b_ii, b_core, b_grp, b_bt))
    divs = [d for d in range(b_max, 0, -1) if b_core % d == 0 and d >= min(b0, b_max)]
    first = divs[0] if divs else b_max
    notes = [f"Step 1: b_i = {b_i} (2*(b*{mp})*(b*{np_})*4B <= L0C), b_ii = {b_ii} (b*2MN/(M+N) = b*{ratio:.1f} "
             f"< R = {chip.R:g}), b_core = {b_core}, at least two groups per core for the ping-pong: b <= {b_grp}"
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
                     f" <= L1, >= min(k_L0, 128B/dtype) = {k_lo}); b_L1 = min(b_L1_max = {b_l1_max}, b_core) "
                     f"rounded to a multiple of b = {b_l1} >= b")
        return MergeBatchTiling(b, b_l1, mp, np_, b * mp, b * np_, k_l0, k_l1, 2, 2, 2, bpc, cdiv(bpc, b),
                                cdiv(p.batch, bpc), tuple(notes))
    raise PlanError(f"merge_batch: even b = 1 leaves no k_L0 >= {ka} in L0A/L0B or no k_L1 in L1 "
                    f"(M̄ = {mp}, N̄ = {np_})")


# ---- StreamK ------------------------------------------------------------------------------------------

def _reduce_ub(chunk: int, p: Problem) -> int:
    """UB of the AIV reduction: two partial chunks (ping-pong), the fp32 sum, the cast output."""
    return chunk * (3 * ACC_BYTES + p.out_isz)


def _pow2_floor(x: int) -> int:
    return 1 << (x.bit_length() - 1) if x >= 1 else 0


def stream_tiling(p: Problem, chip: Chip, reduce: str = "workspace", forced: bool = False) -> StreamKTiling:
    """StreamK: grid_K = the largest power of two <= blocksPerBatch meeting condition 2, then mCnt x nCnt."""
    C, al, ka = chip.aic, p.mn_align, p.k_align
    bpb = C // p.batch
    g_max, g = 0, 2
    while g <= bpb:
        g_max = g if grid_k_ok(p, chip, g) else g_max
        g *= 2
    if not g_max:
        if not forced:
            raise PlanError(f"stream_k: no grid_K in 2..blocksPerBatch = {bpb} meets condition 2")
        g_max = 2
    if p.K < 2 * ka:
        raise PlanError(f"stream_k: K = {p.K} < 2*{ka} cannot be split into two K segments")
    from .cost import estimate
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
    if not cands:
        cands = [(1, 1, g_max)]
    # mCnt x nCnt: the seed wants factors of blocksPerBatch and every core busy, but narrow blocks cost burst
    # efficiency (rows under 128B) and re-reads: the cost model arbitrates, ties to more cores, then the seed's
    # factor preference, then square blocks
    best, best_key = None, None
    for mc, nc, gg in cands:
        t = _stream_of(p, chip, mc, nc, gg, g_max, bpb, reduce, forced)
        sm, sn = t.single_m, t.single_n
        key = (round(estimate(p, t, chip).t_total, 6), -t.units, bpb % (mc * nc) != 0, -mc * nc,
               abs(math.log(sm / sn)))
        if best_key is None or key < best_key:
            best, best_key = t, key
    return best


def _stream_of(p: Problem, chip: Chip, mc: int, nc: int, g: int, g_max: int, bpb: int, reduce: str,
               forced: bool) -> StreamKTiling:
    C, al, ka = chip.aic, p.mn_align, p.k_align
    sm, sn = align_up(cdiv(p.M, mc), al), align_up(cdiv(p.N, nc), al)
    sck = align_up(cdiv(p.K, g), ka)
    bm, bn, bk, k_l1, nbuf = cube_tiles(sm, sn, sck, 1, p, chip, cores=1)
    units = p.batch * mc * nc * g
    cores = min(units, C)
    ws = cores * max(chip.streamk_workspace_per_core, sm * sn * ACC_BYTES) + chip.streamk_workspace_extra
    chunk = min(align_down(chip.buffers["UB"] // (3 * ACC_BYTES + p.out_isz), FRACTAL_BYTES),
                align_up(sm * sn, FRACTAL * FRACTAL))
    notes = (f"grid_K: largest power of two <= blocksPerBatch = floor({C}/{p.batch}) = {bpb} with K/grid_K >= "
             f"{chip.streamk_min_k_per_core} and K >= grid_K^2*theta: {g_max}" + (" (forced)" if forced else ""),
             f"mCnt x nCnt = {mc} x {nc} (of the splits leaving grid_K >= 2 and no empty block, the fastest by "
             f"T_total; B*grid_K*mCnt*nCnt = {units} cores) -> grid_K = {g}, singleCoreK = ceil(K/grid_K) "
             f"aligned = {sck}",
             f"per-core block {sm}x{sn}, base tiles {bm}x{bn}x{bk}, k_L1 = {k_l1}; reduce = {reduce}")
    return StreamKTiling(g, mc, nc, bpb, sm, sn, sck, bm, bn, bk, k_l1, nbuf, 2, 2, reduce, units, cores,
                         cdiv(units, C), ws if reduce == "workspace" else 0, chunk, notes)


# ---- ToMatmul -----------------------------------------------------------------------------------------

def to_matmul_folds(p: Problem) -> tuple[str, ...]:
    """The folds seeds/000 offers for this problem, in order of preference."""
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
    elif fold == "fold_m":
        mm = (1, B * M, N, 2 * B * M * K * isz if p.transpose_a else 0, 0,
              "BatchB = 1: A [B, M, K] viewed as [B*M, K]" + (" after rewriting DN A as ND" if p.transpose_a else ""))
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
        # seeds/000 prefers A held in every core's L1 (it fits twice, beside B's double buffer): taken when it
        # reads less than streaming -- each core's tiles would stream tasks_per_core * base_m rows of A, more
        # than A's M rows -- and is not slower by T_total beyond TILE_TIE (a held slab lands whole before the
        # first tile, all cores reading it at once; with one tile per core, or M split into tiles, each core
        # streaming just its rows reads less).
        from .cost import estimate
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
                if t_held > t_str * (1 + TILE_TIE):     # within the model's resolution the seed's preference holds
                    why = f"holding A is slower by T_total ({t_held:.3f} vs {t_str:.3f} us streamed)"
                    held = None
        if held is not None:
            asw = held
            notes.append(f"A held in L1: 2*{whole} B <= L1 and {asw.tasks_per_core} tiles per core would stream "
                         f"{streamed} > M = {M} rows of A")
        else:
            notes.append(f"A not held ({why}): each core streams its tiles' rows of A, shared through L2")
    return ToMatmulTiling(fold, batch, m, n, K, rearr, scat, asw, tuple(notes))


# ---- Special ------------------------------------------------------------------------------------------

def _a32(n: int) -> int:
    return align_up(n, FRACTAL_BYTES)


def _special_ub(mode: str, rows: int, cols: int, p: Problem) -> int:
    """UB bytes of one tile: fill = output (+ bias row); outer = A column, B row, fp32 product, output."""
    bias = _a32(cols * p.isz) if p.bias else 0
    out = rows * _a32(cols * p.out_isz)
    if mode == "fill":
        return out + bias
    if mode == "outer":
        return _a32(rows * p.isz) + _a32(cols * p.isz) + rows * _a32(cols * ACC_BYTES) + out + bias
    return 0


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
