"""Each BMM branch's tiling (docs/bmm_branches.md "实现方案") as a frozen dataclass a kernel can run, and its buffer footprint.

Conventions every tiling follows: base_m/base_n are multiples of 16 (32 for int8), base_k and every L1 K
depth a multiple of max(16, k0); the last tile along any axis may be a tail (min with the real size).
`buffer_bytes(p)` gives the bytes each buffer holds (tile x buffer count); `check_fits` enforces capacity.
The derivations: tiling_cube (the base-tile search the cube branches share), tiling_asw (ASW_Basic,
ToMatmul), tiling_batch (IterBatch, MergeBatch), tiling_streamk_special (StreamK, Special).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Union

from pyto.chip import Chip
from pyto.errors import PlanError
from pyto.tiling import bias_row_bytes

from .conditions import ACC_BYTES, FRACTAL, FRACTAL_BYTES, MX_GROUP, Problem, align_down, align_up, cdiv, real_chip


def doc(text: str):
    """A dataclass field with its meaning, printed by Plan.explain()."""
    return field(metadata={"doc": text})


def _derivation():
    return field(default=(), compare=False, repr=False)


def _cube_use(t, p: Problem, l1: int) -> dict[str, int]:
    """Bytes per buffer of a cube tiling: the given L1 bytes, L0A/L0B/L0C tiles x copies, the bias row in BT.
    MX: L1 also holds the data tiles' E8M0 scales (1/32 of their bytes: [rows, k/32] per [rows, k] tile; MXFP4's
    half-byte elements: 1/16), and ScaleLeft / ScaleRight the span addr(data) >> 4 of the L0A / L0B slots
    (block.alloc_buffers). Bytes are ints (MXFP4's tiles are whole 64-element fractals)."""
    use = {"L1": l1 + bias_l1_bytes(t.base_n, p), "L0A": t.l0_buffers * t.base_m * t.base_k * p.isz,
           "L0B": t.l0_buffers * t.base_k * t.base_n * p.isz,
           "L0C": t.l0c_buffers * t.base_m * t.base_n * ACC_BYTES}
    if p.mx:
        use["L1"] += l1 // int(MX_GROUP * p.isz)
        use["L0A_MX"], use["L0B_MX"] = use["L0A"] // 16, use["L0B"] // 16
    if p.bias:
        use["BT"] = t.base_n * ACC_BYTES
    return {k: int(v) for k, v in use.items()}


def bias_l1_bytes(bn: int, p: Problem) -> int:
    """L1 the kernels' bias row takes: pyto.tiling.bias_row_bytes of [1, base_n] at 4 bytes an element (fp32/int32,
    the widest bias)."""
    return bias_row_bytes(bn, ACC_BYTES) if p.bias else 0


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

    def rederived(self, p: Problem, chip: Chip, given: set) -> "AswTiling":
        """The counts that follow from the tile sizes (tiles_m, tiles_n, tasks, cores_used, tasks_per_core)
        recomputed on `chip`, except those in `given` (set by the caller)."""
        tm, tn = -(-self.m // self.base_m), -(-self.n // self.base_n)
        tasks = self.batch * tm * tn
        used = min(tasks, self.cores_used if "cores_used" in given else chip.aic)
        counts = dict(tiles_m=tm, tiles_n=tn, tasks=tasks, cores_used=used, tasks_per_core=-(-tasks // max(used, 1)))
        return replace(self, **{k: v for k, v in counts.items() if k not in given})

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

    def rederived(self, p: Problem, chip: Chip, given: set) -> "MergeBatchTiling":
        """The merged tile (base_m = b*M̄, base_n = b*N̄), batches per core (from cores_used when that is set),
        groups per core and the cores the batches then take."""
        bpc = -(-p.batch // self.cores_used) if "cores_used" in given and "batches_per_core" not in given \
            else self.batches_per_core
        return replace(self, base_m=self.b * self.m_pad, base_n=self.b * self.n_pad, batches_per_core=bpc,
                       groups_per_core=-(-bpc // self.b), cores_used=-(-p.batch // bpc))

    def buffer_bytes(self, p: Problem) -> dict[str, int]:
        return _cube_use(self, p, self.l1_buffers * self.b_l1 * (self.m_pad + self.n_pad) * self.k_l1 * p.isz)


@dataclass(frozen=True)
class IterBatchTiling:
    """IterBatch: each core runs whole batches one after another as ordinary matmuls."""

    case: str = doc("L1 case of docs/bmm_branches.md §6.1.3: a, b, c, d or e")
    resident: str = doc("'AB' both whole in L1; 'A'/'B' that side whole; '' both split along K")
    step: int = doc("Step: segments the split side is loaded in (1 for a/b)")
    m_l1: int = doc("rows of A per L1 load (M̄ unless B is resident and A is split along M)")
    k_l1_a: int = doc("K depth of A's L1 load")
    k_l1_b: int = doc("K depth of B's L1 load")
    base_m: int = doc("BaseM")
    base_n: int = doc("BaseN")
    base_k: int = doc("BaseK (divides the split side's K depth)")
    l1_buffers: int = doc("copies of the resident side(s): 2 when consecutive batches ping-pong in L1 (b, d), else 1")
    stream_buffers: int = doc("copies of the streamed K slices the planner budgets (c, d, e; 0 when nothing streams); "
                              "the kernel runs max(2, this) when L1 has room")
    l0_buffers: int = doc("L0A/L0B copies")
    l0c_buffers: int = doc("L0C copies")
    unit_flag: bool = doc("Fixpipe uses unit_flag (docs/bmm_branches.md §6.2.3 asks for it; every case uses it: an L0C slot is "
                          "free once Fixpipe has read it, not once the write has landed in GM)")
    batches_per_core: int = doc("ceil(B / C): core c takes batches c, c + C, c + 2C, ...")
    cores_used: int = doc("min(B, C)")
    derivation: tuple = _derivation()

    def rederived(self, p: Problem, chip: Chip, given: set) -> "IterBatchTiling":
        """Batches per core from cores_used (core c takes batches c, c + cores_used, ...)."""
        return replace(self, batches_per_core=-(-p.batch // self.cores_used))

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

    def rederived(self, p: Problem, chip: Chip, given: set) -> "StreamKTiling":
        """What follows from grid_k, m_cnt and n_cnt (the per-core block, singleCoreK, units, cores, rounds,
        workspace, reduce chunk) recomputed, except those in `given` (set by the caller)."""
        return replace(self, **stream_counts(p, chip, self.m_cnt, self.n_cnt, self.grid_k, self.reduce))

    def buffer_bytes(self, p: Problem) -> dict[str, int]:
        use = _cube_use(self, p, self.l1_buffers * (self.base_m + self.base_n) * self.k_l1 * p.isz)
        use["UB"] = _reduce_ub(self.reduce_chunk, p) if self.reduce == "workspace" else 0
        return use


@dataclass(frozen=True)
class ToMatmulTiling:
    """ToMatmul: the batch folded away, then one ASW-style matmul."""

    fold: str = doc("'plain' (no batch), 'fold_m' (A viewed [B*M, K]), 'a_resident' (A held in every core's "
                    "L1, cores share B's batches), 'fold_n' (B rearranged [K, B*N], output scattered)")
    mm_batch: int = doc("batches of the underlying matmul (B for a_resident, fold_n and a fold_m that is no view, "
                        "else 1)")
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
        """The fold costs nothing: no bytes rearranged or scattered, and a fold_m is a [B*M, K] view (a bias that
        differs between batches keeps the batches apart)."""
        return self.rearrange_bytes == 0 and self.scatter_bytes == 0 and not (self.fold == "fold_m"
                                                                              and self.mm_batch > 1)

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

    def rederived(self, p: Problem, chip: Chip, given: set) -> "SpecialTiling":
        """The tile count from rows / cols, and each AIV's share (aiv_used as given, else min(units, AIVs))."""
        if self.mode == "empty":
            return self
        units = p.batch * cdiv(p.M, self.rows) * cdiv(p.N, self.cols)
        used = self.aiv_used if "aiv_used" in given else min(units, chip.aiv)
        return replace(self, units=units, aiv_used=used, units_per_aiv=cdiv(units, max(1, used)))


Tiling = Union[AswTiling, MergeBatchTiling, IterBatchTiling, StreamKTiling, ToMatmulTiling, SpecialTiling]


def field_docs(tiling: object) -> list[tuple[str, object, str]]:
    """(name, value, meaning) of each field a kernel reads."""
    return [(f.name, getattr(tiling, f.name), f.metadata.get("doc", "")) for f in fields(tiling)
            if f.name != "derivation"]


def check_fits(branch: str, tiling: Tiling, p: Problem, chip: Chip) -> None:
    """PlanError naming the buffer, the bytes needed and the capacity when a tiling overflows one. MX: on the chip
    itself (conditions.real_chip), the scales counted, also when given the planning chip the tiling was derived on
    (its buffers are already less the scales' share)."""
    chip = real_chip(chip)
    for buf, need in tiling.buffer_bytes(p).items():
        if need > chip.buffers[buf]:
            raise PlanError(f"{branch} tiling does not fit {buf}: needs {need} B, capacity {chip.buffers[buf]} B "
                            f"({tiling})")


# ---- UB of the AIV stages: StreamK's reduction, Special's tiles ---------------------------------------

def stream_counts(p: Problem, chip: Chip, mc: int, nc: int, g: int, reduce: str) -> dict:
    """A StreamK tiling's fields that follow from mCnt x nCnt x grid_K on `chip`."""
    al, ka = p.mn_align, p.k_align
    sm, sn = align_up(-(-p.M // mc), al), align_up(-(-p.N // nc), al)
    units = p.batch * mc * nc * g
    cores = min(units, chip.aic)
    ws = cores * max(chip.streamk_workspace_per_core, sm * sn * ACC_BYTES) + chip.streamk_workspace_extra
    chunk = min(align_down(chip.buffers["UB"] // (3 * ACC_BYTES + p.out_isz), FRACTAL_BYTES),
                align_up(sm * sn, FRACTAL * FRACTAL))
    return dict(single_m=sm, single_n=sn, single_core_k=align_up(-(-p.K // g), ka), units=units, cores_used=cores,
                rounds=-(-units // chip.aic), workspace_bytes=ws if reduce == "workspace" else 0, reduce_chunk=chunk)


def _reduce_ub(chunk: int, p: Problem) -> int:
    """UB of the AIV reduction: two partial chunks (ping-pong), the fp32 sum, the cast output."""
    return chunk * (3 * ACC_BYTES + p.out_isz)


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
