"""The BMM problem record and docs/bmm_branches.md's branch entry conditions, each written out with its numbers.

Capacity conditions use the fractal-padded sizes M̄ = CeilAlign(M, 16), N̄, K̄ = CeilAlign(K, k0), because
on-chip buffers are charged at the padded size (docs/tile_shapes.md §6.4); thresholds on data amounts (min_Datamount,
min_TileSize, R) use the raw sizes, as the seed writes them. Every chip number comes from the Chip.

Element sizes: `Problem.isz` is the inputs' (1 byte for int8 and the 950's 8-bit floats: K0 = 32, M/N tiles of 32),
`out_isz` the output's (fp32 for the 8-bit floats, int32 for int8); MX aligns K to 64 (`k_align`) and derives its
tilings on `planning_chip`, the buffers less what the E8M0 scales take. MXFP4's elements are half a byte (`isz` is
Fraction(1, 2), so every byte count of its capacity conditions is exact): K0 = 64 and M/N tiles of 64 (its fractals
16 x 64 padded to whole 64-element fractals on both axes, pyto.language.tile.padded_of).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from pyto.chip import Chip
from pyto.dtypes import FP4, LOW_PRECISION, DType

BRANCHES = ("to_matmul", "special", "merge_batch", "iter_batch", "asw_basic", "stream_k")
REDUCE_MODES = ("workspace", "atomic")     # StreamK's reduction: GM workspace + AIVs (deterministic), or AtomicAdd
SEED_NAMES = {"to_matmul": "ToMatmul (可转 Matmul)", "special": "Special (特殊分支)",
              "merge_batch": "MergeBatch", "iter_batch": "IterBatch", "asw_basic": "ASW_Basic",
              "stream_k": "StreamK"}
FRACTAL = 16        # cube fractal rows/cols, the same on every Ascend chip pyto models (docs/fractal_formats.md §4.1)
FRACTAL_BYTES = 32  # bytes of one fractal row: k0 = 32B / itemsize (docs/design.md §5)
ACC_BYTES = 4       # L0C accumulates fp32 / int32
MX_GROUP = 32       # MX: one E8M0 scale per 32 elements of K (matmul_mx.md)
MX_K_STEP = 64      # MX: K, and every K tile, a multiple of 64 (two scale groups: the scale tiles' 16 x 2 fractals)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def align_up(x: int, a: int) -> int:
    return cdiv(x, a) * a


def align_down(x: int, a: int) -> int:
    return x // a * a


@dataclass(frozen=True)
class Problem:
    """One BMM call: C[batch_shape, M, N] = A @ B (+ bias), after numpy.matmul batch broadcasting."""

    batch_a: int                 # product of A's batch dims (BatchA)
    batch_b: int                 # product of B's batch dims (BatchB)
    batch: int                   # product of the broadcast batch dims (B)
    batch_shape: tuple[int, ...]
    M: int
    N: int
    K: int
    dtype: DType
    bias: bool = False
    transpose_a: bool = False    # A stored (..., K, M) (DN)
    transpose_b: bool = False    # B stored (..., N, K) (DN)
    broadcast: str = "none"      # "none" | "a" | "b" (that side's batch dims broadcast) | "cross" (both)
    bias_rows: int = 1           # distinct bias rows read: 1 for a bias [N] or [1, N], B for [B, 1, N]
    dtype_b: DType | None = None  # B's dtype where it differs from A's (an FP8 or FP4 mix), else None
    mx: bool = False             # MX (MXFP8, MXFP4): A and B carry E8M0 scales, one per 32 elements of K (K % 64 == 0)

    @property
    def isz(self) -> int:
        """Bytes per input element: Fraction(1, 2) for MXFP4 (byte counts stay exact)."""
        return self.dtype.itemsize

    @property
    def fp4(self) -> bool:
        """MXFP4 inputs (E2M1 / E1M2 in any mix): half a byte an element, packed pairs in GM."""
        return self.dtype in FP4

    @property
    def b_dtype(self) -> DType:
        """B's element type (A's unless an FP8 or FP4 mix)."""
        return self.dtype_b or self.dtype

    @property
    def dtype_text(self) -> str:
        """The input types as explain() names them: 'bf16', 'fp8e4m3fn x fp8e5m2', '... (MX)'."""
        return self.dtype.name + (f" x {self.dtype_b.name}" if self.dtype_b else "") + (" (MX)" if self.mx else "")

    @property
    def lowp(self) -> bool:
        """Low-precision float inputs (FP8, HF8; MXFP8, MXFP4): storage and cube types only, no vector op reads them."""
        return self.dtype in LOW_PRECISION

    @property
    def out_dtype(self) -> DType:
        """The output type: int8 writes its int32 accumulator, the 8-bit floats their fp32 one (matmul_acc.md:
        FP8 / HF8 -> FP32; Fixpipe has no 8-bit float output), the others their own type."""
        return self.dtype.acc if self.dtype is DType.int8 or self.lowp else self.dtype

    @property
    def out_isz(self) -> int:
        """Output element size (out_dtype's)."""
        return self.out_dtype.itemsize

    @property
    def k0(self) -> int:
        return FRACTAL_BYTES // self.isz

    @property
    def mn_align(self) -> int:
        """M/N tile alignment: 16, or 32 for int8 and the 8-bit floats, 64 for FP4 (docs/tile_shapes.md §6.4 CeilAlign
        rules: K0 along either axis)."""
        return 2 * FRACTAL if self.isz == 1 else 4 * FRACTAL if self.isz < 1 else FRACTAL

    @property
    def k_align(self) -> int:
        """K tile alignment: a multiple of both 16 and k0; MX: of 64 (MX_K_STEP)."""
        return MX_K_STEP if self.mx else max(FRACTAL, self.k0)

    @property
    def Mp(self) -> int:
        return align_up(self.M, self.mn_align)

    @property
    def Np(self) -> int:
        return align_up(self.N, self.mn_align)

    @property
    def Kp(self) -> int:
        return align_up(self.K, self.k_align)

    @property
    def same_batch(self) -> bool:
        """No broadcasting: BatchA = BatchB = B, batch i of A meets batch i of B."""
        return self.batch_a == self.batch_b == self.batch

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.M * self.N * self.K

    @property
    def compulsory_bytes(self) -> int:
        """Bytes any implementation must move: every input once (the bias as its bias_rows rows, in the
        output's type: int32 for int8), the output once."""
        reads = (self.batch_a * self.M * self.K + self.batch_b * self.K * self.N) * self.isz   # (MXFP4: K even)
        bias = self.bias_rows * self.N * self.out_isz if self.bias else 0
        return int(reads + bias + self.scale_bytes + self.batch * self.M * self.N * self.out_isz)

    @property
    def scale_bytes(self) -> int:
        """MX: the E8M0 scales' bytes in GM, [.., M, K/32] and [.., K/32, N] (0 without MX)."""
        return (self.batch_a * self.M + self.batch_b * self.N) * (self.K // MX_GROUP) if self.mx else 0


_MX_CHIPS: dict = {}      # id(chip) -> (chip, its MX planning chip): one object per table, as load_chip keeps them


def planning_chip(p: Problem, chip: Chip) -> Chip:
    """The chip the tilings are derived on: `chip`, or for MX the buffer sizes the data may take so that its E8M0
    scales fit beside it: L1 * 32/33 (a data tile [rows, k] in L1 brings its scales [rows, k/32], whole 16 x 2 / 2 x 16
    fractals since rows % 32 == 0 and k % 64 == 0: 1/32 byte a data byte; rounded down to whole KB), L0A min(L0A,
    16 x ScaleLeft) and L0B min(L0B, 16 x ScaleRight) (addr(scale) = addr(data) >> 4, matmul_mx.md: L0A bytes [0, a)
    need ScaleLeft bytes [0, a/16)). MXFP4: a data byte holds two elements, so it brings 1/16 B of scales: L1 * 16/17
    (the L0 rule is on addresses, the same). The kernels run on `chip` itself; check_fits there counts the scale bytes
    (tilings._cube_use)."""
    if not p.mx:
        return chip
    per = int(MX_GROUP * p.isz)          # data bytes per scale byte: 32 (MXFP8), 16 (MXFP4)
    hit = _MX_CHIPS.get((id(chip), per))
    if hit is None or hit[0] is not chip:
        from dataclasses import replace
        buf = dict(chip.buffers)
        buf["L1"] = align_down(buf["L1"] * per // (per + 1), 1024)     # (a whole number of KB)
        buf["L0A"] = min(buf["L0A"], 16 * buf["L0A_MX"])
        buf["L0B"] = min(buf["L0B"], 16 * buf["L0B_MX"])
        hit = (chip, replace(chip, buffers=buf))
        _MX_CHIPS[(id(chip), per)] = hit
        _REAL_CHIPS[id(hit[1])] = hit
    return hit[1]


_REAL_CHIPS: dict = {}    # id(MX planning chip) -> (chip, planning chip)


def real_chip(chip: Chip) -> Chip:
    """The chip a planning chip (`planning_chip`) was derived from, or `chip` itself: capacity is checked there with
    the E8M0 scales counted (tilings.check_fits), not on the reduced buffers a second time."""
    hit = _REAL_CHIPS.get(id(chip))
    return hit[0] if hit is not None and hit[1] is chip else chip


@dataclass(frozen=True)
class Check:
    """One entry condition of the seed with the numbers substituted."""

    label: str
    text: str
    holds: bool

    def __str__(self) -> str:
        return f"{self.label}: {self.text}  -> {'holds' if self.holds else 'fails'}"


@dataclass(frozen=True)
class BranchCheck:
    """A branch's entry conditions and whether its home ground (all of them together) holds."""

    branch: str
    home: bool
    checks: tuple[Check, ...]
    note: str = ""


def _kb(n: float) -> str:
    return f"{float(n):.0f} B"       # (float: MXFP4's byte counts are Fractions)


def _yn(ok: bool) -> str:
    """Marks one part of a compound condition."""
    return "[yes]" if ok else "[no]"


def special_checks(p: Problem, chip: Chip) -> BranchCheck:
    """Special: K = 0 (write bias or zeros), K = 1 on the AIV path when batch and UB allow; empty output."""
    ub, aiv = chip.buffers["UB"], chip.aiv
    per = (p.M + p.N) * p.isz + p.M * p.N * p.out_isz
    empty = p.batch * p.M * p.N == 0
    cs = (Check("Special 0", f"output B*M*N = {p.batch}*{p.M}*{p.N} = {p.batch * p.M * p.N} elements, needs 0 "
                             "(an empty output: nothing to compute; pyto's reading)", empty),
          Check("Special K=0", f"K = {p.K}, needs K = 0 (no computation: C = bias or 0 written by the AIVs)",
                p.K == 0),
          Check("Special K=1 (i)", f"K = {p.K}, needs K = 1 (C = A ⊙ B: no accumulation depth, the cube would "
                                   "waste 15/16)", p.K == 1),
          Check("Special K=1 (ii)", f"B = {p.batch} >= 2 x AIV = 2*{aiv} = {2 * aiv} (UB ping-pong)",
                p.batch >= 2 * aiv),
          Check("Special K=1 (iii)", f"per-batch inputs + output (M + N)*dtype + M*N*out = ({p.M} + {p.N})*{p.isz}"
                                     f" + {p.M}*{p.N}*{p.out_isz} = {_kb(per)} <= UB {_kb(ub)}", per <= ub))
    if p.lowp:
        cs += (lowp_vector_check("Special K=1 (dtype)", p),)
    home = empty or p.K == 0 or all(c.holds for c in cs[2:])
    return BranchCheck("special", home, cs)


def lowp_vector_check(label: str, p: Problem) -> Check:
    """The K = 1 AIV path reads A and B in UB and casts them to fp32: FP8 / HF8 have no vector op (pyto.dtypes:
    storage and cube types only), so 8-bit float inputs take the cube (the check fails for them)."""
    return Check(label, f"A, B are {p.dtype.name}{'/' + p.b_dtype.name if p.dtype_b else ''}: the AIV path casts A "
                        "and B in UB, and the vector unit has no FP8/HF8 op (storage and cube types only): the cube "
                        "takes K = 1", not p.lowp)


def lowp_matmul_check(p: Problem) -> Check:
    """ToMatmul's view folds run kernels/matmul.py, whose tile rules (pyto.tiling.CubeTileShapes) take fp16, bf16,
    fp32 and int8 only: 8-bit float inputs (and MX) fail here and run on the BMM branches, which read a batch-1 side
    through the broadcast batch offsets (ASW_Basic's walk, the one ToMatmul's batched folds use too)."""
    return Check("ToMatmul dtype", f"{p.dtype.name}{' (MX)' if p.mx else ''} inputs: kernels/matmul.py's tile rules "
                                   "(pyto.tiling) take fp16, bf16, fp32, int8 only; the BMM branches run the "
                                   "broadcast batch-1 side instead", not p.lowp)


def to_matmul_checks(p: Problem, chip: Chip) -> BranchCheck:
    """ToMatmul: BatchA = 1 or BatchB = 1 (the home ground); the further checks say which fold the tiling
    (tiling_asw.to_matmul_tiling) can take, not whether ToMatmul holds."""
    l1 = chip.buffers["L1"]
    a_bytes = p.Mp * p.Kp * p.isz
    cs = [Check("ToMatmul 1", f"BatchA = {p.batch_a}, BatchB = {p.batch_b}: BatchA = 1 or BatchB = 1",
                p.batch_a == 1 or p.batch_b == 1)]
    if p.lowp:
        cs.append(lowp_matmul_check(p))
    if p.batch_b == 1 and p.batch_a > 1:
        cs.append(Check("ToMatmul BatchB=1 (which fold)", "A [B, M, K] is ND with batch and M adjacent, so it "
                        f"views as [B*M, K] for free (fold_m; transpose_a = {p.transpose_a}: a DN A cannot, and is "
                        f"folded otherwise)", not p.transpose_a))
    if p.batch_a == 1 and p.batch_b > 1:
        cs.append(Check("ToMatmul BatchA=1 (which fold)", f"A resident in L1 (a_resident, else A is broadcast: "
                        f"fold_n): M̄K̄*dtype = {p.Mp}*{p.Kp}*{p.isz} = {_kb(a_bytes)} <= L1 {_kb(l1)}",
                        a_bytes <= l1))
    return BranchCheck("to_matmul", cs[0].holds and not p.lowp, tuple(cs))


def _batch_relation(p: Problem, expanded: bool) -> tuple[bool, str]:
    """docs/bmm_branches.md §5.1.1 "BatchA = BatchB": the batch shapes match (no broadcast); with `expanded`, a batch-1 side
    broadcast up to B also counts (docs/bmm_branches.md §4.2: "将 BatchA==1 扩展到 BatchA==BatchB")."""
    ok = p.same_batch or (expanded and min(p.batch_a, p.batch_b) == 1)
    how = " (batch-1 side broadcast to B)" if expanded and not p.same_batch else ""
    return ok, f"BatchA = BatchB = B ({p.batch_a}, {p.batch_b}, {p.batch}){how}"


def merge_checks(p: Problem, chip: Chip, expanded: bool = False) -> BranchCheck:
    """MergeBatch conditions 1-5 (b0 = chip.merge_b0)."""
    b0, C, l0c = chip.merge_b0, chip.aic, chip.buffers["L0C"]
    ridge = chip.ridge(p.dtype)
    b_core = p.batch // C
    rel, rel_text = _batch_relation(p, expanded)
    l0c_need = 2 * (b0 * p.Mp) * (b0 * p.Np) * ACC_BYTES
    amount = b_core * (p.M * p.K + p.K * p.N) * p.isz
    tile = max(p.M * p.K, p.K * p.N) * p.isz
    ratio = 2 * p.M * p.N / (p.M + p.N) if p.M + p.N else 0.0
    cs = (Check("MergeBatch 1", f"{rel_text} {_yn(rel)} and b_core = floor(B/C) = floor({p.batch}/{C}) = "
                                f"{b_core} >= 2*b0 = {2 * b0} {_yn(b_core >= 2 * b0)}", rel and b_core >= 2 * b0),
          Check("MergeBatch 2", f"2*(b0*M̄)*(b0*N̄)*4B = 2*({b0}*{p.Mp})*({b0}*{p.Np})*4 = {_kb(l0c_need)} "
                                f"<= L0C {_kb(l0c)}", l0c_need <= l0c),
          Check("MergeBatch 3", f"b_core*(MK+KN)*dtype = {b_core}*({p.M}*{p.K} + {p.K}*{p.N})*{p.isz} = "
                                f"{_kb(amount)} >= min_DatamountPerCore {_kb(chip.min_datamount_per_core)}",
                amount >= chip.min_datamount_per_core),
          Check("MergeBatch 4", f"max(MK, KN)*dtype = max({p.M * p.K}, {p.K * p.N})*{p.isz} = {_kb(tile)} "
                                f">= min_TileSize {_kb(chip.min_tile_bytes)}", tile >= chip.min_tile_bytes),
          Check("MergeBatch 5", f"2MN/(M+N) = 2*{p.M}*{p.N}/({p.M}+{p.N}) = {ratio:.1f} < R/b0 = "
                                f"{ridge:g}/{b0} = {ridge / b0:.1f}" + ("" if p.dtype.itemsize == 2 else
                                f" (R for {p.dtype}: the seed's BF16/FP16 R scaled by peak FLOP per GM byte)"),
                ratio < ridge / b0))
    if p.mx:
        cs += (merge_mx_check(p),)
    if p.fp4:
        cs += (merge_fp4_check(p),)
    return BranchCheck("merge_batch", all(c.holds for c in cs), cs)


def merge_fp4_check(p: Problem) -> Check:
    """MergeBatch under MXFP4: a group's batches arrive in one GM -> L1 load with nd_num parts (merge_batch.py), and
    pl.load of an FP4 tensor takes no nd_num (its packed rows: pyto.language.movement), so MXFP4 does not merge."""
    return Check("MergeBatch FP4", f"{p.dtype_text} inputs: the merged load is one pl.load with nd_num = b parts, "
                                   "which FP4's packed GM rows do not take (pl.load of FP4: nd_num = 1 only)",
                 not p.fp4)


def merge_mx_check(p: Problem) -> Check:
    """MergeBatch under MX: the merged tiles stack b batches' rows padded to M̄ (columns to N̄), and the MMAD reads
    the padding rows of every batch but the last. In the E8M0 scale tiles no load writes those rows (the GM scales
    have M rows a batch; pyto's checker reports the read as an UninitializedReadError) and pl.expands takes no
    8-bit type to fill them, so MX merges only batches without padding: M = M̄ and N = N̄ (multiples of 32)."""
    return Check("MergeBatch MX", f"MX inputs: M = {p.M}, M̄ = {p.Mp}, N = {p.N}, N̄ = {p.Np}: needs M = M̄ and N = N̄ "
                                  "(no padding rows or columns between merged batches, whose scales no load writes)",
                 p.M == p.Mp and p.N == p.Np)


@dataclass(frozen=True)
class IterL1:
    """The IterBatch L1 case (a)-(e) that holds, with what it keeps in L1."""

    case: str          # "a" .. "e"
    resident: str      # "AB" (both whole), "A" or "B" (that side whole), "" (both split along K)
    step: int          # Step of (c)(d)(e); 1 for (a)(b)
    m_l1: int          # rows of A per L1 load (M̄ unless B is resident and A is split along M)
    k_l1_a: int        # K depth of A's L1 load
    k_l1_b: int        # K depth of B's L1 load
    l1_buffers: int    # 2 when batches ping-pong in L1 ((b), (d)), else 1


def _dvalue(inner_is_split: bool, split_len: int, full_len: int, isz: int) -> int:
    return (split_len if inner_is_split else full_len) * isz


def iter_l1(p: Problem, chip: Chip, efficiency: bool = True) -> tuple[IterL1 | None, list[Check]]:
    """IterBatch condition 3 (L1 cases a-e, first that holds) and condition 4 (Step efficiency for c/d/e).

    b_core in (a)-(e) is the number of batches the busiest core runs, ceil(B/C): the cases ask whether one
    core keeps one batch or ping-pongs several. With efficiency=False condition 4 is not applied (forced).
    """
    L1, ka, isz = chip.buffers["L1"], p.k_align, p.isz
    a_all, b_all = p.Mp * p.Kp * isz, p.Kp * p.Np * isz
    bpc = max(1, cdiv(p.batch, chip.aic))
    multi = bpc > 1
    mt, dv = chip.min_tile_bytes, chip.dvalue_bytes
    checks: list[Check] = []
    found: IterL1 | None = None

    def take(cand: IterL1 | None) -> None:
        nonlocal found
        if found is None and cand is not None:
            found = cand

    bc = f"b_core = ceil(B/C) = {bpc} (the busiest core's batches)"
    one, several = f"{bc}: one batch per core", f"{bc}: several batches per core"
    fit = a_all + b_all <= L1
    ok = not multi and fit
    checks.append(Check("IterBatch 3a", f"{one} {_yn(not multi)} and (M̄K̄ + K̄N̄)*dtype = ({p.Mp}*{p.Kp} + "
                                        f"{p.Kp}*{p.Np})*{isz} = {_kb(a_all + b_all)} <= L1 {_kb(L1)} {_yn(fit)}",
                        ok))
    take(IterL1("a", "AB", 1, p.Mp, p.Kp, p.Kp, 1) if ok else None)
    fit = 2 * (a_all + b_all) <= L1
    ok = multi and fit
    checks.append(Check("IterBatch 3b", f"{several} {_yn(multi)} and 2(M̄K̄ + K̄N̄)*dtype = "
                                        f"{_kb(2 * (a_all + b_all))} <= L1 {_kb(L1)} {_yn(fit)}", ok))
    take(IterL1("b", "AB", 1, p.Mp, p.Kp, p.Kp, 2) if ok else None)

    for case, budget, applies, nbuf in (("c", L1, not multi, 1), ("d", L1 // 2, multi, 2)):
        big = a_all + b_all > budget
        # A resident, B split along K into Step segments of k rows; B resident, A split along M.
        k_b = align_down(min((budget - a_all) // (p.Np * isz), p.Kp), ka) if budget > a_all else 0
        m_a = align_down(min((budget - b_all) // (p.Kp * isz), p.Mp), p.mn_align) if budget > b_all else 0
        opts = []
        # condition 4 reads each of the Step pieces as the seed writes them, K/Step (M/Step) rows: not the
        # aligned slab L1 holds, which is longer and leaves a shorter last piece
        if 0 < k_b < p.Kp:
            st = cdiv(p.K, k_b)
            tile, d = p.K / st * p.N * isz, _dvalue(p.transpose_b, p.K / st, p.N, isz)
            opts.append(("A", st, tile, d, IterL1(case, "A", st, p.Mp, p.Kp, k_b, nbuf)))
        if 0 < m_a < p.Mp:
            st = cdiv(p.M, m_a)
            tile, d = p.M / st * p.K * isz, _dvalue(p.transpose_a, p.M / st, p.K, isz)
            opts.append(("B", st, tile, d, IterL1(case, "B", st, m_a, p.Kp, p.Kp, nbuf)))
        cap_ok = applies and big and bool(opts)
        bud = "L1" if case == "c" else "L1/2"
        text = (f"{one if case == 'c' else several} {_yn(applies)}, (M̄K̄ + K̄N̄)*dtype = "
                f"{_kb(a_all + b_all)} > {bud} {_kb(budget)} {_yn(big)}, ")
        parts = []
        for s, st, *_, cand in opts:
            if s == "A":
                used = a_all + p.Np * cand.k_l1_b * isz
                parts.append(f"(M̄K̄ + K̄N̄/Step)*dtype = {a_all} + {p.Np}*{cand.k_l1_b}*{isz} = {_kb(used)} <= "
                             f"{bud} with k_L1_b = {cand.k_l1_b}, Step = ceil(K/k_L1_b) = {st}")
            else:
                used = b_all + cand.m_l1 * p.Kp * isz
                parts.append(f"(M̄K̄/Step + K̄N̄)*dtype = {cand.m_l1}*{p.Kp}*{isz} + {b_all} = {_kb(used)} <= "
                             f"{bud} with m_L1 = {cand.m_l1}, Step = ceil(M/m_L1) = {st}")
        text += " or ".join(parts) + f" {_yn(bool(opts))}" if parts else f"no Step > 1 fits {_yn(False)}"
        checks.append(Check(f"IterBatch 3{case}", text, cap_ok))
        if cap_ok:
            for s, st, tile, d, cand in sorted(opts, key=lambda o: o[1]):
                eff = tile >= mt and d >= dv
                checks.append(Check(f"IterBatch 4 ({case}, {s} resident)",
                                    f"split tile {_kb(tile)} >= {_kb(mt)} and dValue {_kb(d)} >= {_kb(dv)}", eff))
                take(cand if eff or not efficiency else None)

    # (e): both sides split along K, Step >= 2 segments of k rows; single L1 copy as the seed writes it.
    k_e = align_down(L1 // ((p.Mp + p.Np) * isz), ka)
    k_e = min(k_e, align_up(cdiv(p.K, 2), ka))
    ok = k_e >= ka and p.Kp > ka
    step = cdiv(p.K, k_e) if k_e else 0
    checks.append(Check("IterBatch 3e", f"(M̄*K/Step + K/Step*N̄)*dtype = ({p.Mp} + {p.Np})*{k_e}*{isz} = "
                                        f"{_kb((p.Mp + p.Np) * k_e * isz)} <= L1 {_kb(L1)} with K/Step = {k_e} "
                                        f"aligned, Step = {step} >= 2", ok))
    if ok:
        kk = p.K / step          # condition 4 on each piece of K/Step rows (the seed's), not the aligned slab
        ta, tb = p.M * kk * isz, kk * p.N * isz
        da, db = _dvalue(not p.transpose_a, kk, p.M, isz), _dvalue(p.transpose_b, kk, p.N, isz)
        eff = min(ta, tb) >= mt and min(da, db) >= dv
        checks.append(Check("IterBatch 4 (e)", f"tiles A {_kb(ta)}, B {_kb(tb)} >= {_kb(mt)} and dValue A "
                                               f"{_kb(da)}, B {_kb(db)} >= {_kb(dv)}", eff))
        take(IterL1("e", "", step, p.Mp, k_e, k_e, 1) if eff or not efficiency else None)
    return found, checks


def iter_checks(p: Problem, chip: Chip, expanded: bool = False) -> tuple[BranchCheck, IterL1 | None]:
    """IterBatch conditions 1-4."""
    C = chip.aic
    rel, rel_text = _batch_relation(p, expanded)
    b_core, rem = p.batch // C, p.batch % C
    l1, l1_checks = iter_l1(p, chip)
    cs = [Check("IterBatch 1", f"{rel_text} {_yn(rel)} and b_core = floor(B/C) = floor({p.batch}/{C}) = "
                               f"{b_core} >= 1 {_yn(b_core >= 1)}", rel and b_core >= 1),
          Check("IterBatch 2", f"B mod C = {p.batch} mod {C} = {rem}: == 0 or >= minCoreNum {chip.min_core_num}",
                rem == 0 or rem >= chip.min_core_num)]
    cs += l1_checks
    cs.append(Check("IterBatch 3+4", f"first L1 case that holds (with its Step efficiency): "
                                     f"{'(' + l1.case + ')' if l1 else 'none'}", l1 is not None))
    return BranchCheck("iter_batch", cs[0].holds and cs[1].holds and l1 is not None, tuple(cs)), l1


def parallel_blocks(p: Problem) -> int:
    """P = B * ceil(M/16) * ceil(N/16): independent output blocks at the smallest cube tile."""
    return p.batch * cdiv(p.M, FRACTAL) * cdiv(p.N, FRACTAL)


def asw_checks(p: Problem, chip: Chip, merge_home: bool, iter_home: bool) -> BranchCheck:
    """ASW_Basic condition 1 (P >= C at the smallest tile that fits L0C) and 2 (its entry path).

    Condition 2 is what docs/bmm_branches.md §8.1.2 calls the typical entry paths (典型进入路径): B < C, or B >= C where MergeBatch and
    IterBatch fail (the fallback), or a cross broadcast. Where B >= C and a B branch holds as well, the home grounds
    overlap and, as for every overlap (主场之间存在重叠区 ... 由 T_total 仲裁), T_total decides; so the home ground
    is condition 1, and condition 2 names the path (it holds on every path, the overlap included)."""
    C, P = chip.aic, parallel_blocks(p)
    tile = FRACTAL * FRACTAL * ACC_BYTES
    c1 = Check("ASW_Basic 1", f"P = B*ceil(M/M^t)*ceil(N/N^t) at M^t = N^t = 16 (16*16*4B = {tile} B <= L0C "
                              f"{chip.buffers['L0C']} B) = {p.batch}*{cdiv(p.M, FRACTAL)}*{cdiv(p.N, FRACTAL)} = "
                              f"{P} >= C = {C}", P >= C and tile <= chip.buffers["L0C"])
    b_home = merge_home or iter_home
    paths = [f"B = {p.batch} < C = {C}" + (" (yes)" if p.batch < C else " (no)"),
             f"B >= C and MergeBatch, IterBatch both fail ({'yes' if p.batch >= C and not b_home else 'no'})",
             f"B >= C overlapping a B branch's home ground, T_total decides ({'yes' if p.batch >= C and b_home else 'no'})",
             f"cross broadcast ({'yes' if p.broadcast == 'cross' else 'no'})"]
    c2 = Check("ASW_Basic 2", "entry path: " + " or ".join(paths), c1.holds)
    return BranchCheck("asw_basic", c1.holds, (c1, c2))


def grid_k_ok(p: Problem, chip: Chip, g: int, theta: bool = True) -> bool:
    """StreamK condition 2 for one grid_K: K/grid_K >= 256 and K >= grid_K^2 * theta (the second dropped with
    theta=False: the planner's step beyond the seed)."""
    return p.K / g >= chip.streamk_min_k_per_core and (not theta or p.K >= g * g * chip.streamk_theta)


def stream_checks(p: Problem, chip: Chip) -> BranchCheck:
    """StreamK condition 1 (P < C) and condition 2 for grid_K = 2, 4, 8, ... up to blocksPerBatch."""
    C, P = chip.aic, parallel_blocks(p)
    c1 = Check("StreamK 1", f"P = B*ceil(M/16)*ceil(N/16) = {p.batch}*{cdiv(p.M, FRACTAL)}*{cdiv(p.N, FRACTAL)}"
                            f" = {P} < C = {C}", P < C)
    bpb = C // p.batch if p.batch else 0
    cs = [c1]
    g = 2
    while g <= bpb:
        per, sq = p.K / g >= chip.streamk_min_k_per_core, p.K >= g * g * chip.streamk_theta
        cs.append(Check(f"StreamK 2 (grid_K={g})", f"K/grid_K = {p.K}/{g} = {p.K / g:.0f} >= "
                        f"{chip.streamk_min_k_per_core} {_yn(per)} and K = {p.K} >= grid_K^2*theta = {g}^2*"
                        f"{chip.streamk_theta:g} = {g * g * chip.streamk_theta:.0f} {_yn(sq)}", per and sq))
        g *= 2
    if bpb < 2:
        cs.append(Check("StreamK 2", f"blocksPerBatch = floor(C/B) = floor({C}/{p.batch}) = {bpb} < 2: "
                                     "no grid_K >= 2 to try", False))
    home = c1.holds and any(c.holds for c in cs[1:])
    return BranchCheck("stream_k", home, tuple(cs))


def asw_window(chip: Chip) -> int:
    """W = max{d | d divides C, d <= floor(sqrt(C))} (docs/bmm_branches.md §8.2.2)."""
    r = math.isqrt(chip.aic)
    return max(d for d in range(1, r + 1) if chip.aic % d == 0)
