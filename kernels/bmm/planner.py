"""plan(): docs/bmm_branches.md §3.6's BMM branch decision — reduce the problem, buy B, then M/N, then K — with explain().

Decision order (issue 6): Special (K = 0; K = 1 when the AIV path's conditions hold; empty output), then
ToMatmul (BatchA = 1 or BatchB = 1: compared by T_total with the BMM branch this order picks on the broadcast
problem), then MergeBatch / IterBatch (and ASW_Basic, whose home ground P >= C overlaps theirs: T_total), then
ASW_Basic, then StreamK; when no home ground holds, ASW_Basic on fewer cores (seed: 降核).
The entry conditions decide which branches are candidates; where home grounds overlap, docs/bmm_branches.md §3.7 gives the
overlap to the end-to-end latency model (主场之间存在重叠区 ... 由 T_total 仲裁), and every overlap is treated so.

Readings of docs/bmm_branches.md where it is ambiguous (details in the functions named):
- b_core is floor(B/C) in thresholds (MergeBatch 1 and 3, IterBatch 1) and ceil(B/C), the batches the
  busiest core runs, in IterBatch's L1 cases (a)-(e) (conditions.iter_l1).
- "BatchA = BatchB" means no broadcasting (BatchA = BatchB = B); on ToMatmul's broadcast comparison a
  batch-1 side expanded to B also counts. Capacity conditions use padded M̄, N̄, K̄.
- ToMatmul's home ground (a batch-1 side) overlaps those of the BMM branches on the broadcast problem, even
  when its fold is free ("无任何代价": no rearrangement, but the folded Matmul's tiles and order are not the
  BMM branches'), so it is compared by T_total with the branch this decision picks there (StreamK included,
  where P < C and K is long: the Matmul ToMatmul reuses would split K there). Measured (benchmarks/
  bmm_planner.py): taking a free fold outright lost 11% at [64,64,256]@[256,128] to IterBatch.
- ASW_Basic's condition 2 lists its typical entry paths (典型进入路径); its home ground is condition 1
  (P >= C), which overlaps MergeBatch/IterBatch whenever B >= C: T_total decides (conditions.asw_checks).
- Where the seed leaves a free choice inside a branch (ASW/ToMatmul base tiles, StreamK's mCnt x nCnt), the
  same T_total model picks it. The model never overrides an entry condition (they decide the candidates); the
  decision order is the seed's price of parallelism (PRICE), which decides between candidates whose T_total
  are within the model's resolution (cost.RESOLUTION).
- StreamK grid_K is the largest power of two <= blocksPerBatch meeting both inequalities: they only get
  harder as grid_K grows, so "the smallest" would always be 2, while the seed's table (6.8K -> 2,
  27K -> 4, 108K -> 8) needs the largest (tiling_streamk_special.stream_tiling).
- ASW_Basic condition 1 is evaluated at the smallest tile 16 x 16 (the most blocks), so it is exactly the
  negation of StreamK condition 1.
- MergeBatch step 1 adds b <= batches per core - 1 where the core has 2*b0 batches (condition 1's "2 组起步才能
  构成组间乒乓流水": two groups per core), and the bias row's BT width; step 3 budgets L1 less the bias rows.
- IterBatch (b) with both sides whole in L0: the seed's BaseK is halved when that gives two L0A/L0B copies
  ((b)'s pipeline); with a bias BaseN is at most BT/4B columns. Cases (c)-(e) give no L0 rule: the split
  side streams per output tile (tiling_batch.iter_tiling); Step and k_L1_b describe the entry condition.
- ASW_Basic's L1 full load ("单边无 batch 且该侧矩阵小 (如 M <= 256)"): the small side is one that fits one
  base tile's rows, the tile the kernel holds it as.
- An empty output (B*M*N = 0) is Special ("empty"). Overlaps (MergeBatch/IterBatch/ASW_Basic, ToMatmul/BMM)
  go to the smaller T_total; ties at the shared-bandwidth bound to the busiest core's
  shorter MTE2 time.
- T_total (cost.py) describes what the kernels do on the emulated chip: every transfer, burst and DMA
  setup, the chip-wide GM and L2 channels, latencies that show at the start and the end of a pipeline.

One step beyond the seed (pyto's choice, `override=None` turns it off): after the seed's decision, a legal
branch outside its home ground is taken when its T_total estimate is at least OVERRIDE (20%) below the
chosen branch's, a margin well beyond the model's error against the emulator (median 2.4%). The seed's
StreamK condition 1 counts P at 16 x 16 blocks, so a few long-K shapes with P >= C (e.g. 1 x 128 x 128 x
65536) never reach StreamK, which runs them twice as fast. Measured (benchmarks/bmm_planner.py and 80
held-out shapes): the suite's worst regret 31.5% -> 6.3%, the held-out shapes unchanged; a 10% margin
would take a wrong branch on held-out shapes. With half that margin, a StreamK plan takes a grid_K beyond
the seed's K >= grid_K^2*theta (K/grid_K >= 256 kept; stream_tiling(theta=False)): theta's safety factor
leaves memory-bound long-K shapes on 2-4 cores whose MTE2 ports carry all of B (1 x 48 x 80 x 12000:
grid_K 2 -> 8, emulated 5.63 -> 3.62 us). On 800 random problems (both steps, the same 20% margin) 90 plans
changed, 55 of them only StreamK's grid_K: none slower when emulated, geomean 1.51x (grid_K alone 1.44x).
The grid_K step compares one kernel with itself, one parameter apart, where the estimate errs less: on 600
random StreamK problems (B 1-4, M 16-128, N 16-128, K 4096-65536, bf16/fp16/fp32) a 10% margin changed 54
more plans, none slower when emulated, geomean 1.22x (2 x 32 x 32 x 16384: 4.51 -> 3.64 us); no margin
at all made 3 of them slower.

Fitted constants (fitted.py, `pyto calibrate`): per chip, the margin and a per-branch scale / overhead of the
T_total the decision compares (_pick, _override) may be fitted to a sweep; the package's file for the 950
(kernels/bmm/calibration/ascend950pr.toml) sets a 5% margin. PYTO_FITTED=none: the constants above alone.
"""
from __future__ import annotations

import numbers
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Sequence

from pyto.chip import Chip, load_chip
from pyto.dtypes import DType, as_dtype
from pyto.errors import PlanError, ShapeError, UnsupportedError

from .conditions import (BRANCHES, MX_K_STEP, REDUCE_MODES, SEED_NAMES, BranchCheck, Problem, asw_checks, iter_checks,
                         iter_l1, lowp_matmul_check, lowp_vector_check, merge_checks, merge_fp4_check, merge_mx_check,
                         planning_chip,
                         special_checks, stream_checks, to_matmul_checks)
from . import fitted
from .cost import RESOLUTION, Estimate, estimate, roofline_us
from .tiling_asw import asw_tiling, to_matmul_folds, to_matmul_tiling
from .tiling_batch import iter_tiling, merge_tiling
from .tiling_streamk_special import special_tiling, stream_tiling
from .retile import retile
from .tilings import Tiling, check_fits, field_docs

SUPPORTED = (DType.fp16, DType.bf16, DType.fp32, DType.int8, DType.fp8e4m3fn, DType.fp8e5m2, DType.hf8,
             DType.fp4e2m1, DType.fp4e1m2)
FP8 = (DType.fp8e4m3fn, DType.fp8e5m2)      # the FP8 pair the cube mixes in any order (matmul_acc.md); MXFP8's too
FP4 = (DType.fp4e2m1, DType.fp4e1m2)        # MXFP4's pair, mixed in any order (matmul_mx.md); MX only


def mixable(a: DType, b: DType) -> bool:
    """Whether A and B may differ in dtype: FP8 E4M3FN / E5M2 (matmul_acc.md, matmul_mx.md) or FP4 E2M1 / E1M2
    (matmul_mx.md) in any mix; otherwise one dtype."""
    return a is b or (a in FP8 and b in FP8) or (a in FP4 and b in FP4)


def logical_dims(shape: Sequence[int], dtype: DType) -> tuple[int, ...]:
    """The matrix's elements per axis of an operand stored `shape`: an FP4 array is packed pairs along its last axis
    (PyPTO-Pro's FP4 tensors: element 2i in the low nibble of byte i), so that axis holds twice its length."""
    dims = tuple(shape)
    return dims[:-1] + (2 * dims[-1],) if dtype in FP4 and dims else dims


def _dims(shape: Sequence[int], name: str) -> tuple[int, ...]:
    try:
        dims = tuple(shape)
    except TypeError:
        raise ShapeError(f"{name}_shape must be a sequence of ints, got {shape!r}") from None
    for d in dims:
        if not isinstance(d, numbers.Integral) or isinstance(d, bool):
            raise ShapeError(f"{name}_shape {dims} has a non-integer size {d!r}")
        if d < 0:
            raise ShapeError(f"{name}_shape {dims} has a negative size {d}")
    if len(dims) < 2:
        raise ShapeError(f"{name}_shape {dims}: 1-D (or 0-D) operands are not supported; give a matrix "
                         f"(..., rows, cols)")
    return tuple(int(d) for d in dims)


def _prod(xs: Sequence[int]) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def parse_problem(a_shape: Sequence[int], b_shape: Sequence[int], dtype: object = "bf16", bias: object = False,
                  transpose_a: bool = False, transpose_b: bool = False, *, dtype_b: object = None,
                  mx: bool = False) -> Problem:
    """Problem from operand shapes with numpy.matmul batch broadcasting; ShapeError on anything else.

    bias: False, True (a bias of unknown shape: counted as one row, so the roofline stays a lower bound)
    or the bias's shape ([N], [1, N] or [..., 1, N]), which says how many distinct rows it has. dtype_b: B's dtype
    where it differs from A's (FP8 E4M3FN x E5M2 or FP4 E2M1 x E1M2, in either order). mx: MX (A, B FP8 or FP4 with
    E8M0 scales; K % 64). Shapes are as stored: an FP4 operand's last axis counts packed bytes (logical_dims)."""
    a, b = _dims(a_shape, "a"), _dims(b_shape, "b")
    dt = as_dtype(dtype)
    dtb = dt if dtype_b is None else as_dtype(dtype_b)
    a, b = logical_dims(a, dt), logical_dims(b, dtb)
    M, Ka = (a[-1], a[-2]) if transpose_a else (a[-2], a[-1])
    Kb, N = (b[-1], b[-2]) if transpose_b else (b[-2], b[-1])
    if Ka != Kb:
        raise ShapeError(f"K mismatch: A {a}{' (transpose_a)' if transpose_a else ''} has K = {Ka}, "
                         f"B {b}{' (transpose_b)' if transpose_b else ''} has K = {Kb}")
    ba, bb = a[:-2], b[:-2]
    n = max(len(ba), len(bb))
    pa, pb = (1,) * (n - len(ba)) + ba, (1,) * (n - len(bb)) + bb
    for i, (x, y) in enumerate(zip(pa, pb)):
        if x != y and 1 not in (x, y):
            raise ShapeError(f"batch dims {ba} of A and {bb} of B do not broadcast (dim {i - n}: {x} vs {y})")
    shape = tuple(y if x == 1 else x for x, y in zip(pa, pb))
    if dt not in SUPPORTED:
        raise ShapeError(f"dtype {dt.name} is not supported by bmm; use one of {', '.join(d.name for d in SUPPORTED)}")
    if not mixable(dt, dtb):
        raise ShapeError(f"a and b must have one dtype, or be FP8 E4M3FN / E5M2 (matmul_acc.md) or FP4 E2M1 / E1M2 "
                         f"(matmul_mx.md) in any mix; got {dt.name} and {dtb.name}")
    if mx and not (dt in FP8 + FP4 and dtb in FP8 + FP4):
        raise ShapeError(f"MX bmm (scale_a / scale_b) takes MXFP8 operands (FP8 E4M3FN / E5M2) or MXFP4 ones (FP4 "
                         f"E2M1 / E1M2), each pair in any mix (matmul_mx.md); got {dt.name} and {dtb.name}")
    if dt in FP4 and not mx:
        raise ShapeError(f"FP4 ({dt.name}{' x ' + dtb.name if dtb is not dt else ''}) is a cube input of the MX matmul "
                         f"only (matmul_mx.md): give its E8M0 scales (bmm scale_a= / scale_b=, plan mx=True)")
    if mx and Ka % MX_K_STEP:
        raise ShapeError(f"MX bmm needs K % {MX_K_STEP} == 0 (matmul_mx.md: K必须为64的倍数; one E8M0 scale per 32 "
                         f"elements of K, read in pairs), got K = {Ka}")
    a_bc = any(x == 1 and y != 1 for x, y in zip(pa, pb))
    b_bc = any(y == 1 and x != 1 for x, y in zip(pa, pb))
    kind = "cross" if a_bc and b_bc else "a" if a_bc else "b" if b_bc else "none"
    shaped = isinstance(bias, (tuple, list))
    rows = _prod(_dims(bias, "bias")[:-1]) if shaped and len(bias) >= 2 else 1
    return Problem(_prod(ba), _prod(bb), _prod(shape), shape, M, N, Ka, dt, True if shaped else bool(bias),
                   bool(transpose_a), bool(transpose_b), kind, rows, None if dtb is dt else dtb, bool(mx))


def _structural(branch: str, p: Problem, chip: Chip) -> None:
    """PlanError when a forced branch cannot compute this problem correctly (not a performance threshold)."""
    empty = p.batch * p.M * p.N == 0
    if branch == "special":
        if not (empty or p.K in (0, 1)):
            raise PlanError(f"special needs K = 0 or K = 1 (or an empty output); here K = {p.K}")
        if p.K == 1 and not empty and p.lowp:
            raise PlanError(f"special fails {lowp_vector_check('Special K=1 (dtype)', p)}")
        return
    if empty or p.K == 0:
        raise PlanError(f"{branch} runs the cube and needs K >= 1 and a non-empty output; here B = {p.batch}, "
                        f"M = {p.M}, N = {p.N}, K = {p.K} (use special)")
    if branch == "to_matmul" and not (p.batch_a == 1 or p.batch_b == 1):
        raise PlanError(f"to_matmul needs BatchA = 1 or BatchB = 1; here BatchA = {p.batch_a}, BatchB = {p.batch_b}")
    if branch == "to_matmul" and p.lowp:
        raise PlanError(f"to_matmul fails {lowp_matmul_check(p)}")
    if branch == "merge_batch" and p.fp4:
        raise PlanError(f"merge_batch fails {merge_fp4_check(p)}")
    if branch == "merge_batch" and p.mx and not merge_mx_check(p).holds:
        raise PlanError(f"merge_batch fails {merge_mx_check(p)}")
    if branch == "merge_batch" and not (p.same_batch or min(p.batch_a, p.batch_b) == 1):
        raise PlanError(f"merge_batch needs BatchA = BatchB = B (or a batch-1 side broadcast to B) to merge batch i "
                        f"of A with batch i of B; here BatchA = {p.batch_a}, BatchB = {p.batch_b}, B = {p.batch}")
    if branch == "stream_k" and p.K < 2 * p.k_align:
        raise PlanError(f"stream_k needs K >= 2*{p.k_align} to split K between cores; here K = {p.K}")


_BUILT: OrderedDict = OrderedDict()    # (branch, problem, chip, forced, reduce, theta) -> (tiling or PlanError, chip)
_BUILT_MAX = 4096
_BUILT_LOCK = threading.Lock()


def _build(branch: str, p: Problem, chip: Chip, *, forced: bool, reduce: str = "workspace",
           theta: bool = True) -> Tiling:
    """The branch's tiling; PlanError naming the failed precondition or the buffer that overflows.

    Memoised: a tiling is a pure function of the problem, the chip and the options, and a planner researcher's
    sweep (every branch forced on every shape, each forced plan re-deciding and estimating the others) asks for
    the same ones many times. Chips are keyed by identity (load_chip returns one object per name)."""
    key = (branch, p, id(chip), forced, reduce, theta)
    with _BUILT_LOCK:          # planning from several threads: one thread's eviction between another's steps
        hit = _BUILT.get(key)
        if hit is not None:
            _BUILT.move_to_end(key)
    if hit is None:
        try:
            hit = (_build_tiling(branch, p, chip, forced=forced, reduce=reduce, theta=theta), chip)
        except PlanError as e:
            hit = (e, chip)
        with _BUILT_LOCK:
            _BUILT[key] = hit
            if len(_BUILT) > _BUILT_MAX:
                _BUILT.popitem(last=False)
    if isinstance(hit[0], PlanError):
        raise PlanError(str(hit[0]))
    return hit[0]


def _build_tiling(branch: str, p: Problem, chip: Chip, *, forced: bool, reduce: str, theta: bool = True) -> Tiling:
    _structural(branch, p, chip)
    if branch == "special":
        t = special_tiling(p, chip)
    elif branch == "to_matmul":
        errors = []
        for fold in to_matmul_folds(p):
            try:
                t = to_matmul_tiling(p, chip, fold)
                break
            except PlanError as e:
                errors.append(str(e))
        else:
            raise PlanError("to_matmul: no fold fits: " + "; ".join(errors))
    elif branch == "merge_batch":
        t = merge_tiling(p, chip)
    elif branch == "iter_batch":
        l1 = iter_l1(p, chip, efficiency=not forced)[0]
        if l1 is None:
            raise PlanError(f"iter_batch: no L1 case (a)-(e) fits one batch (M̄ = {p.Mp}, N̄ = {p.Np}, "
                            f"K̄ = {p.Kp}) in L1 {chip.buffers['L1']} B")
        t = iter_tiling(p, chip, l1)
        from .iter_batch import params_for     # the kernel's own L1 fit (held tiles padded to its balanced base
        params_for(t, p, chip)                 # tiles, the bias row): legal only where the kernel runs
    elif branch == "asw_basic":
        t = asw_tiling(p, chip)
    elif branch == "stream_k":
        t = stream_tiling(p, chip, reduce, forced, theta)
    else:
        raise PlanError(f"unknown branch {branch!r}; branches are {', '.join(BRANCHES)}")
    check_fits(branch, t, p, chip)
    return t


@dataclass(frozen=True)
class Plan:
    """The chosen branch, its tiling and estimate, and every condition the decision read."""

    branch: str
    tiling: Tiling
    estimate: Estimate
    problem: Problem
    chip: str
    conditions: tuple[BranchCheck, ...]
    decision: tuple[str, ...]
    alternatives: tuple[tuple[str, float | None, str], ...]   # (branch, T_total us when forced, or why illegal)
    forced: bool = False
    chip_spec: Chip | None = field(default=None, repr=False, compare=False)
    tuning: object = field(default=None, repr=False, compare=False)   # tune.Tuning with tune=True, else None

    def buffer_use(self) -> dict[str, int]:
        """Bytes the tiling holds in each on-chip buffer (tile x buffer count)."""
        return self.tiling.buffer_bytes(self.problem)

    def with_tiling(self, **changes) -> "Plan":
        """This plan with some tiling fields set by the caller (a researcher's own tiling): values checked, capacity
        re-checked, T_total re-estimated, the change recorded in the decision; run it with pyto_kernels.bmm.run_plan.
        Only choices may be set (retile.FIXED lists the rest: problem sizes, counts that follow); what follows is
        recomputed: ASW (asw_basic; to_matmul's matmul fields pass through) tile counts, tasks and tasks per core from
        base tiles and cores_used; MergeBatch's merged tile, groups, batches per core and cores from b and
        batches_per_core or cores_used; IterBatch's batches per core from cores_used; StreamK's block, K segment,
        units, cores, rounds and workspace from grid_k, m_cnt, n_cnt, reduce."""
        chip = self.chip_spec or load_chip(self.chip)
        t = retile(self.tiling, self.problem, chip, changes)
        check_fits(self.branch, t, self.problem, chip)
        note = "tiling set by the caller: " + ", ".join(f"{k} = {v!r}" for k, v in changes.items())
        t = replace(t, derivation=(f"the planner's derivation, before the caller set {', '.join(changes)}:",)
                    + t.derivation)
        return replace(self, tiling=t, estimate=estimate(self.problem, t, chip), decision=self.decision + (note,),
                       forced=True)

    def summary(self) -> str:
        """One line: the problem, the chip, the chosen branch (forced or not) and its T_total estimate."""
        p = self.problem
        shape = ", ".join(map(str, p.batch_shape + (p.M, p.N)))
        return (f"BMM plan on {self.chip}: C[{shape}] = A @ B{' + bias' if p.bias else ''} (K = {p.K}, "
                f"{p.dtype_text}) -> {self.branch}{' (forced)' if self.forced else ''}, estimate "
                f"{self.estimate.t_total:,.3f} us")

    def explain(self) -> str:
        """The decision in words: problem and chip numbers, every entry condition with its numbers (held or not),
        the decision steps, the tiling with its derivation, buffer use, the estimate and every branch forced."""
        return _explain(self)


# docs/bmm_branches.md §3.5's price of parallelism: reduce the problem (ToMatmul), then B (free), then M/N (cheap), then K
PRICE = {"to_matmul": 0, "merge_batch": 1, "iter_batch": 1, "asw_basic": 2, "stream_k": 3}
OVERRIDE = 0.2      # a branch outside its home ground must be estimated this much faster (module docstring)


def _pick(cands: list[tuple[str, Tiling]], p: Problem, chip: Chip, lines: list[str], what: str) -> tuple[str, Tiling]:
    """An overlap of home grounds: the smallest analytic T_total, where it is clear. Candidates within the model's
    RESOLUTION of the fastest are not ordered by it: among them the seed's price order decides (the cheaper
    parallelism), then T_total, then the busiest core's shorter MTE2 pipe time (a tie at the shared-bandwidth
    bound: fewer, larger transfers). With fitted constants (fitted.for_chip) the times compared are the calibrated
    ones and the resolution is the fitted one."""
    fit = fitted.for_problem(chip, p)
    res = RESOLUTION if fit.resolution is None else fit.resolution
    ests = [(b, t, estimate(p, t, chip)) for b, t in cands]
    ests = [(b, t, e, fit.time(b, e.t_total, p.broadcast != "none")) for b, t, e in ests]
    fastest = min(x[3] for x in ests)
    close = [x for x in ests if x[3] <= fastest * (1 + res)]
    b, t, e, _ = min(close, key=lambda x: (PRICE[x[0]], x[3], x[2].t_mte2_pipe))
    if len(ests) > 1:
        cal = "" if fit.empty else f" (calibrated: fitted constants {fit.version})"
        lines.append(f"   overlap ({what}): T_total decides{cal}: " + ", ".join(f"{x} {tt:.3f} us"
                                                                           for x, _, _, tt in ests)
                     + (f" (within {res:.0%} of the fastest, the seed's price order, then T_total: "
                        + ", ".join(x[0] for x in close) + ")" if len(close) > 1 else "")
                     + f" -> {b}")
    else:
        lines.append(f"   -> {b}")
    return b, t


def _buy(p: Problem, chip: Chip, expanded: bool, reduce: str, lines: list[str]
         ) -> tuple[str, Tiling, dict[str, BranchCheck]]:
    """Buy parallelism by price: B (MergeBatch / IterBatch), then M/N (ASW_Basic), then K (StreamK)."""
    mc = merge_checks(p, chip, expanded)
    homes: list[tuple[str, Tiling]] = []
    if mc.home:
        try:
            homes.append(("merge_batch", merge_tiling(p, chip)))
        except PlanError as e:
            mc = replace(mc, home=False, note=f"steps 1-3 give no tiling: {e}")
    ic, l1 = iter_checks(p, chip, expanded)
    if ic.home:
        try:
            homes.append(("iter_batch", iter_tiling(p, chip, l1)))
        except PlanError as e:          # L0 buffers too small for its tiles (a chip table's)
            ic = replace(ic, home=False, note=f"no L0 tiling: {e}")
    ac = asw_checks(p, chip, mc.home, ic.home)
    sc = stream_checks(p, chip)
    checks = {"merge_batch": mc, "iter_batch": ic, "asw_basic": ac, "stream_k": sc}
    held = lambda c: "holds" if c.home else "fails"  # noqa: E731
    lines.append(f"3. buy B (free): MergeBatch {held(mc)}, IterBatch {held(ic)}")
    if homes:
        if ac.home:   # B >= C: ASW_Basic's home ground holds too, an overlap like any other
            lines.append("   ASW_Basic 1 holds as well (P >= C): its home ground overlaps")
            homes.append(("asw_basic", asw_tiling(p, chip)))
        b, t = _pick(homes, p, chip, lines, " / ".join(SEED_NAMES[x] for x, _ in homes))
        return b, t, checks
    lines.append(f"4. buy M/N (cheap): ASW_Basic {held(ac)}")
    if ac.home:
        return "asw_basic", asw_tiling(p, chip), checks
    lines.append(f"5. buy K (expensive): StreamK {held(sc)}")
    if sc.home:
        return "stream_k", stream_tiling(p, chip, reduce), checks
    lines.append("   no home ground holds: ASW_Basic on fewer cores (docs/bmm_branches.md §8.2.1: 降核, idle cores accepted)")
    return "asw_basic", asw_tiling(p, chip), checks


def _decide(p: Problem, chip: Chip, reduce: str) -> tuple[str, Tiling, tuple[BranchCheck, ...], list[str]]:
    sp, tm = special_checks(p, chip), to_matmul_checks(p, chip)
    lines: list[str] = []
    if sp.home:
        why = ("the output is empty" if p.batch * p.M * p.N == 0 else "K = 0" if p.K == 0 else
               "K = 1, B >= 2 x AIV and one batch fits UB")
        lines.append(f"1. reduce the problem: Special holds ({why}) -> special")
        cube = p.K >= 1 and p.batch * p.M * p.N > 0
        rest = _buy(p, chip, False, reduce, [])[2] if cube else {}
        return "special", _build("special", p, chip, forced=False), _ordered(sp, tm, rest), lines
    lines.append("1. reduce the problem: Special fails")
    if not tm.home:
        one = tm.checks[0].holds        # a batch-1 side, but 8-bit floats: the BMM branches take it broadcast
        lines.append("2. ToMatmul fails (" + ("ToMatmul dtype: kernels/matmul.py takes no 8-bit floats; the BMM "
                                               "branches on the broadcast problem)" if one else
                                               "neither side has batch 1)"))
        b, t, rest = _buy(p, chip, one, reduce, lines)
        return b, t, _ordered(sp, tm, rest), lines
    t_mm = _build("to_matmul", p, chip, forced=False)
    if t_mm.free:
        lines.append(f"2. ToMatmul holds and its fold '{t_mm.fold}' is free; its home ground overlaps those of the BMM "
                     "branches on the broadcast problem (batch-1 side expanded to B), so T_total decides")
    else:
        moved = t_mm.rearrange_bytes + t_mm.scatter_bytes
        cost = (f"the seed's fold would move {moved} B to rearrange (pyto's kernel runs it as the broadcast problem "
                "instead, without that pass)" if moved else
                "the bias differs between batches, so A's rows do not fold under one bias row (pyto's kernel runs "
                "the batches apart, sharing B)")
        lines.append(f"2. ToMatmul holds but fold '{t_mm.fold}' is not free: {cost}; the seed compares it with the BMM "
                     "branches on the broadcast problem (batch-1 side expanded to B)")
    b, t, rest = _buy(p, chip, True, reduce, lines)
    b, t = _pick([("to_matmul", t_mm), (b, t)], p, chip, lines, "ToMatmul vs BMM")
    return b, t, _ordered(sp, tm, rest), lines


def _ordered(sp: BranchCheck, tm: BranchCheck, rest: dict[str, BranchCheck]) -> tuple[BranchCheck, ...]:
    return (sp, tm) + tuple(rest[b] for b in ("merge_batch", "iter_batch", "asw_basic", "stream_k") if b in rest)


def _alternatives(p: Problem, chip: Chip, reduce: str) -> tuple[tuple[str, float | None, str], ...]:
    out = []
    for b in BRANCHES:
        try:
            out.append((b, estimate(p, _build(b, p, chip, forced=True, reduce=reduce), chip).t_total, ""))
        except PlanError as e:
            out.append((b, None, str(e)))
    return tuple(out)


def plan(a_shape: Sequence[int], b_shape: Sequence[int], dtype: object = "bf16", chip: object = "ascend950pr",
         bias: object = False, transpose_a: bool = False, transpose_b: bool = False, branch: str | None = None,
         *, reduce: str = "workspace", override: "float | str | None" = "fitted", tune: bool = False,
         dtype_b: object = None, mx: bool = False) -> Plan:
    """Choose a BMM branch and its tiling for A @ B (numpy.matmul broadcasting), or force `branch`.

    bias: False, True, or the bias's shape (which sets the bias bytes of the roofline; see parse_problem).
    reduce: StreamK's reduction, "workspace" (deterministic, default) or "atomic".
    override: the fraction by which a legal branch outside its home ground (or, for StreamK, by half of it, a
    grid_K beyond the theta cap) must be estimated faster than the seed's decision to be taken instead (module
    docstring); None: the seed's decision alone; "fitted" (the default): the chip's fitted margin (fitted.py), OVERRIDE
    (20%) without one.
    tune: simulate (timing mode) the legal branches and the cost model's next-best tilings of each (only the
    forced branch's when `branch` is given), return the fastest, its candidates and times in explain(); cached
    in a file per chip table and pyto version (pyto_kernels.bmm.tune).
    dtype_b: B's dtype where it differs from A's (FP8 E4M3FN x E5M2, FP4 E2M1 x E1M2). Shapes are as stored: an
    MXFP4 operand's last axis counts packed bytes (A [.., M, K/2], B [.., K, N/2], or [.., N, K/2] with transpose_b).
    mx: MXFP8 / MXFP4 with E8M0 scales (K % 64 == 0): the
    tilings are derived on conditions.planning_chip (the buffers less what the scales take), the capacity checked
    on the chip with the scales counted. 8-bit float inputs need a chip whose cube takes them (the 950).
    """
    p = parse_problem(a_shape, b_shape, dtype, bias, transpose_a, transpose_b, dtype_b=dtype_b, mx=mx)
    if isinstance(override, str):
        if override != "fitted":
            raise PlanError(f"override must be None, a fraction in [0, 1) or 'fitted', got {override!r}")
        margin = fitted.for_problem(load_chip(chip), p).override
        override = OVERRIDE if margin is None else margin
    if tune:
        if p.lowp:
            raise UnsupportedError(f"plan(..., tune=True) on {p.dtype.name} inputs is not built (the tuner's "
                                   f"candidates are launched with one dtype and no scales); plan without tune")
        return _tuned(a_shape, b_shape, dtype, chip, bias, transpose_a, transpose_b, branch, reduce, override)
    real = load_chip(chip)
    _fits_gm(p, real)
    has_cube(p, real)
    spec = planning_chip(p, real)
    if reduce not in REDUCE_MODES:
        raise PlanError(f"reduce must be one of {REDUCE_MODES}, got {reduce!r}")
    if branch is not None:
        if branch not in BRANCHES:
            raise PlanError(f"unknown branch {branch!r}; branches are {', '.join(BRANCHES)}")
        t = _build(branch, p, spec, forced=True, reduce=reduce)
        lines = [f"branch '{branch}' forced by the caller: only its structural preconditions were checked"]
        try:
            _, _, checks, _ = _decide(p, spec, reduce)
        except PlanError as e:      # the planner's own choice cannot be built: the forced branch still runs
            checks = ()
            lines.append(f"(the planner's own decision failed on this shape: {e})")
        chosen = branch
    else:
        chosen, t, checks, lines = _decide(p, spec, reduce)
        check_fits(chosen, t, p, spec)
    alternatives = _alternatives(p, spec, reduce)
    if branch is None and override is not None:
        chosen, t = _override(chosen, t, alternatives, override, p, spec, reduce, lines)
    if spec is not real:       # MX: the tiling on the real buffers, its scales counted (tilings._cube_use)
        check_fits(chosen, t, p, real)
        per = int(32 * p.isz)       # data bytes per E8M0 scale byte: 32 (MXFP8), 16 (MXFP4: two elements a byte)
        lines.append(f"MX: tilings derived on L1 {spec.buffers['L1']} B (L1 x {per}/{per + 1}: each data byte brings "
                     f"1/{per} B of E8M0 scales), L0A {spec.buffers['L0A']} B, L0B {spec.buffers['L0B']} B (16 x ScaleLeft / "
                     f"ScaleRight {real.buffers['L0A_MX']} / {real.buffers['L0B_MX']} B: addr(scale) = addr(data) >> 4)")
    return Plan(chosen, t, estimate(p, t, spec), p, real.name, checks, tuple(lines), alternatives,
                branch is not None, real)


def has_cube(p: Problem, chip: Chip) -> None:
    """UnsupportedError naming the chip when its cube cannot take the problem's 8-bit float inputs (no FP8 / HF8
    rate in its table) or, for MX, has no ScaleLeft / ScaleRight buffers (Atlas A2/A3: matmul_acc.md and
    matmul_mx.md list FP8/HF8 and MX matmuls for the Ascend 950 only)."""
    for d in {p.dtype, p.b_dtype}:
        if p.lowp and not chip.has_cube(d):
            raise UnsupportedError(f"bmm on {d.name} inputs: chip {chip.name}'s cube has no {d.name} mode (its table "
                                   f"{chip.source} gives no cube rate for it; PyPTO-Pro's matmul_acc.md lists FP8 / HF8 "
                                   f"matmuls for the Ascend 950); use ascend950pr")
    if p.mx and not ("L0A_MX" in chip.buffers and "L0B_MX" in chip.buffers):
        raise UnsupportedError(f"MX bmm: chip {chip.name} has no MX cube (its table {chip.source} has no ScaleLeft / "
                               f"ScaleRight buffers, L0A_MX / L0B_MX; matmul_mx.md: Ascend 950 only); use ascend950pr")


def _tuned(a_shape, b_shape, dtype, chip, bias, transpose_a, transpose_b, branch, reduce, override) -> Plan:
    """plan(..., tune=True): the seed's plan, then pyto_kernels.bmm.tune over the legal branches."""
    from . import tune
    kw = dict(dtype=dtype, chip=load_chip(chip), bias=bias, transpose_a=transpose_a, transpose_b=transpose_b,
              reduce=reduce)
    seed = plan(a_shape, b_shape, branch=branch, override=override, **kw)
    branches = [branch] if branch is not None else legal_branches(a_shape, b_shape, dtype, kw["chip"], bias,
                                                                    transpose_a, transpose_b)
    forced = lambda b: plan(a_shape, b_shape, branch=b, **kw)  # noqa: E731
    fit = fitted.for_problem(kw["chip"], seed.problem)   # the seed's plan depends on the fitted constants: the entry
    decided = override if fit.empty else [override, list(fit.key)]
    key = tune.problem_key(a_shape, b_shape, as_dtype(dtype).name, bias, transpose_a, transpose_b, reduce, decided,
                           branch)
    return tune.tune(seed, forced, branches, kw["chip"], key, (a_shape, b_shape, bias))


def _fits_gm(p: Problem, chip: Chip) -> None:
    """PlanError when A, B, the bias and C together exceed the chip's GM: no kernel can hold them (and the
    planner's sums over tiles would run for a problem no chip can store)."""
    if p.compulsory_bytes > chip.gm_bytes:
        raise PlanError(f"A, B{', bias' if p.bias else ''} and C need {p.compulsory_bytes:,} B of GM; {chip.name} has "
                        f"{chip.gm_bytes:,} B")


def _override(chosen: str, t: Tiling, alternatives: tuple, margin: float, p: Problem, chip: Chip, reduce: str,
              lines: list[str]) -> tuple[str, Tiling]:
    """The seed's decision, or a legal branch estimated at least `margin` faster; then, for StreamK, a grid_K
    beyond the seed's theta estimated at least margin / 2 faster (module docstring). With fitted constants the
    branches' times are the calibrated ones (fitted.for_chip); the grid_K step compares StreamK with itself, raw."""
    if not 0 <= margin < 1:
        raise PlanError(f"override must be None or a fraction in [0, 1), got {margin!r}")
    ests = {b: est for b, est, _ in alternatives if est is not None}
    if not ests.get(chosen):     # not legal when forced, or nothing to do (an empty output)
        return chosen, t
    fit = fitted.for_problem(chip, p)
    ests = {b: fit.time(b, est, p.broadcast != "none") for b, est in ests.items()}
    step = lambda: len([x for x in lines if x[:1].isdigit()]) + 1  # noqa: E731
    fastest = min(ests, key=ests.get)
    gain = 1 - ests[fastest] / ests[chosen]
    if fastest != chosen and gain >= margin:
        lines.append(f"{step()}. beyond the seed: {fastest} (outside its home ground) is "
                     f"{'estimated' if fit.empty else f'calibrated (fitted {fit.version})'} at "
                     f"{ests[fastest]:.3f} us, {gain:.0%} below {chosen}'s {ests[chosen]:.3f} us (pyto takes a branch "
                     f"{margin:.0%} or more faster; override=None keeps the seed's choice) -> {fastest}")
        chosen, t = fastest, _build(fastest, p, chip, forced=True, reduce=reduce)
    if chosen == "stream_k":
        try:
            wide = _build("stream_k", p, chip, forced=True, reduce=reduce, theta=False)
        except PlanError:
            return chosen, t
        now, then = estimate(p, t, chip).t_total, estimate(p, wide, chip).t_total
        if wide.grid_k != t.grid_k and now > 0 and 1 - then / now >= margin / 2:
            lines.append(f"{step()}. beyond the seed: StreamK with grid_K = {wide.grid_k} (K >= grid_K^2*theta "
                         f"dropped) is estimated at {then:.3f} us, {1 - then / now:.0%} below grid_K = {t.grid_k}'s "
                         f"{now:.3f} us (override=None keeps the seed's grid_K) -> grid_K = {wide.grid_k}")
            t = wide
    return chosen, t


def legal_branches(a_shape: Sequence[int], b_shape: Sequence[int], dtype: object = "bf16",
                   chip: object = "ascend950pr", bias: object = False, transpose_a: bool = False,
                   transpose_b: bool = False, *, dtype_b: object = None, mx: bool = False) -> list[str]:
    """Branches that can be forced on this problem (their structural preconditions hold and a tiling fits)."""
    p = parse_problem(a_shape, b_shape, dtype, bias, transpose_a, transpose_b, dtype_b=dtype_b, mx=mx)
    real = load_chip(chip)
    _fits_gm(p, real)
    has_cube(p, real)
    spec = planning_chip(p, real)
    out = []
    for b in BRANCHES:
        try:
            check_fits(b, _build(b, p, spec, forced=True), p, real)
            out.append(b)
        except PlanError:
            pass
    return out


# ---- explain --------------------------------------------------------------------------------------------

def _yn(x: bool) -> str:
    return "yes" if x else "no"


def _tiling_lines(t: object, indent: str = "  ") -> list[str]:
    lines = [f"{indent}{type(t).__name__}:"]
    for name, value, meaning in field_docs(t):
        if hasattr(value, "__dataclass_fields__"):
            lines += _tiling_lines(value, indent + "    ")
            continue
        lines.append(f"{indent}  {name} = {value}   # {meaning}")
    lines += [f"{indent}  derivation: {d}" for d in getattr(t, "derivation", ())]
    return lines


def _explain(plan: Plan) -> str:
    p, c = plan.problem, plan.chip_spec or load_chip(plan.chip)
    out = [f"BMM plan on {c.name}: C[{', '.join(map(str, p.batch_shape + (p.M, p.N)))}] = A @ B"
           f"{' + bias' if p.bias else ''}, dtype {p.dtype_text}, transpose_a {_yn(p.transpose_a)}, "
           f"transpose_b {_yn(p.transpose_b)}",
           f"Problem: BatchA = {p.batch_a}, BatchB = {p.batch_b}, B = {p.batch} (batch shape {p.batch_shape}, "
           f"broadcast {p.broadcast}), M = {p.M}, N = {p.N}, K = {p.K}; padded M̄ = {p.Mp}, N̄ = {p.Np}, "
           f"K̄ = {p.Kp}; dtype = {p.isz} B, output {p.out_isz} B",
           f"Chip: C = {c.aic} AIC, AIV = {c.aiv}, L1 = {c.buffers['L1']} B, L0A = {c.buffers['L0A']} B, "
           f"L0B = {c.buffers['L0B']} B, L0C = {c.buffers['L0C']} B, UB = {c.buffers['UB']} B, BT = "
           f"{c.buffers['BT']} B, L2 = {c.l2_bytes} B at {c.l2_bandwidth_gbs:g} GB/s, W_GM = "
           f"{c.gm_bandwidth_gbs:g} GB/s, R = {c.R:g}, min_TileSize = {c.min_tile_bytes} B, "
           f"min_DatamountPerCore = {c.min_datamount_per_core} B, minCoreNum = {c.min_core_num}, "
           f"b0 = {c.merge_b0}, k_thr = {c.k_thr_bytes} B, dValue = {c.dvalue_bytes} B, theta = "
           f"{c.streamk_theta:g}", "", "Entry conditions (docs/bmm_branches.md), branch by branch:"]
    shown = {bc.branch for bc in plan.conditions}
    for bc in plan.conditions:
        out.append(f"[{bc.branch}] {SEED_NAMES[bc.branch]}: home ground {'holds' if bc.home else 'does not hold'}")
        out += [f"  {ck}" for ck in bc.checks]
        if bc.note:
            out.append(f"  note: {bc.note}")
    for b in BRANCHES:
        if b not in shown:
            out.append(f"[{b}] {SEED_NAMES[b]}: not evaluated (K = 0 or an empty output: no cube work)")
    out += ["", "Decision:"] + [f"  {line}" for line in plan.decision]
    out += ["", f"Chosen branch: {plan.branch} ({SEED_NAMES[plan.branch]})", "Tiling:"] + _tiling_lines(plan.tiling)
    use = plan.buffer_use()
    out.append("Buffers: " + ", ".join(f"{k} {v}/{c.buffers[k]} B" for k, v in use.items()))
    out.append(f"Estimate: {plan.estimate}")
    out.append(f"Roofline max(FLOPs/peak, bytes/W_GM) = {roofline_us(p, c):.3f} us")
    out.append("Every branch forced (for reference): " + "; ".join(
        f"{b} {t:.3f} us" if t is not None else f"{b} not legal ({why})" for b, t, why in plan.alternatives))
    if plan.tuning is not None:
        out += [""] + plan.tuning.lines()
    return "\n".join(out)


__all__ = ["Plan", "Problem", "plan", "legal_branches", "parse_problem"]
