"""A researcher's own tiling (Plan.with_tiling): which fields may be set, which values they take, what follows.

A tiling mixes choices (tile sizes, buffer counts, grid_K, ...) with numbers that follow from the problem or
from other fields (tile counts, a StreamK core's K segment, ...). Only choices may be set: a number that follows
is recomputed from them (tilings' `rederived`), because the kernels read it as given; setting one alone ran a
kernel on part of the output or part of K (found by a planner-research review). Values are checked here, so a
bad one is a PlanError naming the field rather than an error deep inside the kernel.
"""
from __future__ import annotations

from dataclasses import fields, replace
from typing import Optional

from pyto.chip import Chip
from pyto.errors import PlanError

from .conditions import REDUCE_MODES, Problem
from .tilings import AswTiling, IterBatchTiling, MergeBatchTiling, SpecialTiling, StreamKTiling, Tiling, ToMatmulTiling

_PROBLEM = "follows from the problem"
# per tiling type: the fields that follow from the problem or from other fields, and what to set instead
FIXED: dict = {
    AswTiling: dict(batch=_PROBLEM, m=_PROBLEM, n=_PROBLEM, k=_PROBLEM, tiles_m="set base_m", tiles_n="set base_n",
                    tasks="set base_m / base_n", tasks_per_core="set cores_used",
                    split="the planner's record of the task space", broadcast_resident=_PROBLEM),
    ToMatmulTiling: dict(fold=_PROBLEM, mm_batch=_PROBLEM, mm_m=_PROBLEM, mm_n=_PROBLEM, mm_k=_PROBLEM,
                         rearrange_bytes=_PROBLEM, scatter_bytes=_PROBLEM,
                         matmul="set its fields (base_m, k_l1, ...) directly"),
    MergeBatchTiling: dict(m_pad=_PROBLEM, n_pad=_PROBLEM, base_m="set b", base_n="set b",
                           groups_per_core="set b or batches_per_core"),
    IterBatchTiling: dict(case="the L1 case of the problem; set resident / k_l1_a / k_l1_b",
                          step="the planner's record of case (c)-(e)", m_l1=_PROBLEM,
                          batches_per_core="set cores_used"),
    StreamKTiling: dict(blocks_per_batch=_PROBLEM, single_m="set m_cnt", single_n="set n_cnt",
                        single_core_k="set grid_k", units="set grid_k / m_cnt / n_cnt",
                        rounds="set grid_k / m_cnt / n_cnt", workspace_bytes="set reduce",
                        reduce_chunk="follows from the block and UB"),
    SpecialTiling: dict(mode=_PROBLEM, units="set rows / cols", units_per_aiv="set rows / cols / aiv_used"),
}
ALIGNED = ("base_m", "base_n")     # multiples of 16 (32 for int8): tilings.py's convention, the kernels' fractals
ENUMS = dict(reduce=REDUCE_MODES, full_load=("", "A", "B"), resident=("AB", "A", "B", ""))
# IterBatch's streamed slices: the planner budgets stream_buffers copies, the kernel runs max(2, stream_buffers)
# (fewer if L1 is short), so a caller's value below 2 would change nothing
LOWEST = {"stream_buffers": 2}


def retile(t: Tiling, p: Problem, chip: Chip, changes: dict, batches: Optional[dict] = None) -> Tiling:
    """`t` with `changes` (choices only), checked and with what follows recomputed; PlanError naming the field.
    `batches`: each side's batch count as the kernel sees it (ToMatmul's folds view a batched A as one matrix)."""
    if isinstance(t, ToMatmulTiling):
        mine = {k: v for k, v in changes.items() if k in _names(t)}
        _check(t, mine, chip, p)
        inner = {k: v for k, v in changes.items() if k not in mine}
        one = t.fold in ("plain", "fold_m")         # fold_m: A [B, M, K] is one [B*M, K] matrix, B has no batch
        seen = {"A": 1, "B": 1 if one else t.mm_batch}
        return replace(t, **mine, matmul=retile(t.matmul, p, chip, inner, seen)) if inner else replace(t, **mine)
    _check(t, changes, chip, p, batches)
    out = replace(t, **changes)
    out = out.rederived(p, chip, set(changes)) if hasattr(out, "rederived") else out
    _check_result(out, p, chip)
    return out


def _names(t: Tiling) -> set:
    return {f.name for f in fields(t)} - {"derivation"}


def _check(t: Tiling, changes: dict, chip: Chip, p: Problem, batches: Optional[dict] = None) -> None:
    kind = type(t).__name__
    names = _names(t)
    unknown = sorted(set(changes) - names)
    if unknown:
        raise PlanError(f"{kind} has no field(s) {', '.join(unknown)}; its fields: {', '.join(sorted(names))}")
    fixed = FIXED.get(type(t), {})
    for k, v in changes.items():
        if k in fixed:
            raise PlanError(f"{kind}.{k} is not a choice: {fixed[k]} (what follows is recomputed)")
        old = getattr(t, k)
        if k in ENUMS and v not in ENUMS[k]:
            raise PlanError(f"{kind}.{k} must be one of {ENUMS[k]}, got {v!r}")
        if isinstance(old, bool):
            if not isinstance(v, bool):
                raise PlanError(f"{kind}.{k} must be True or False, got {v!r}")
        elif isinstance(old, int):
            low = LOWEST.get(k, 1)
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                raise PlanError(f"{kind}.{k} must be an int >= {low}, got {v!r}")
    for k in ALIGNED:
        if k in changes and changes[k] % p.mn_align:
            raise PlanError(f"{kind}.{k} must be a multiple of {p.mn_align} ({p.dtype}'s fractal), got {changes[k]}")
    side = changes.get("full_load")
    count = (batches or {"A": p.batch_a, "B": p.batch_b}).get(side, 1) if side else 1
    if count != 1:
        raise PlanError(f"{kind}.full_load = {side!r}: only a side without batches is loaded into L1 once "
                        f"(docs/bmm_branches.md §8.2.5: 单边无 batch); {side} has {count} batches")
    for k in ("base_k", "k_l1"):
        if p.mx and k in changes and changes[k] % p.k_align:
            raise PlanError(f"{kind}.{k} must be a multiple of {p.k_align} under MX (two E8M0 scale groups: "
                            f"matmul_mx.md's K % 64), got {changes[k]}")
    new = {f: changes.get(f, getattr(t, f, None)) for f in ("base_k", "k_l1", "cores_used")}
    if new["base_k"] and new["k_l1"] and new["k_l1"] % new["base_k"]:
        raise PlanError(f"{kind}: k_l1 = {new['k_l1']} must be a multiple of base_k = {new['base_k']} (one L1 slot "
                        f"feeds whole MMADs)")
    if new["cores_used"] and new["cores_used"] > chip.aic:
        raise PlanError(f"{kind}: cores_used = {new['cores_used']} exceeds the {chip.aic} AI cores of {chip.name}")


def _check_result(t: Tiling, p: Problem, chip: Chip) -> None:
    """What only the recomputed tiling shows: MergeBatch's b_L1 a multiple of b, no empty StreamK block,
    Special's AIVs within the chip."""
    kind = type(t).__name__
    if isinstance(t, MergeBatchTiling) and t.b_l1 % t.b:
        raise PlanError(f"{kind}: b_l1 = {t.b_l1} must be a multiple of b = {t.b} (docs/bmm_branches.md §5.2.3); set b_l1 too")
    if isinstance(t, StreamKTiling) and ((t.m_cnt - 1) * t.single_m >= p.M or (t.n_cnt - 1) * t.single_n >= p.N):
        raise PlanError(f"{kind}: m_cnt x n_cnt = {t.m_cnt} x {t.n_cnt} leaves an output block empty (blocks of "
                        f"{t.single_m} x {t.single_n}, aligned, on M = {p.M}, N = {p.N}); use fewer")
    if isinstance(t, SpecialTiling) and not 1 <= t.aiv_used <= chip.aiv:
        raise PlanError(f"{kind}: aiv_used = {t.aiv_used} must be 1..{chip.aiv} (the AIVs of {chip.name})")
