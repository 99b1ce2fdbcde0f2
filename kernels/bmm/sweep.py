"""`pyto sweep SPEC -o OUT`: every case of a spec run in timing mode, one row per (shape, branch, tiling).

A case (Case) is one problem: B, M, N, K, dtype, chip, the branches to run (() = every legal branch), which
tilings ("planner": each branch's own tiling, the branch forced; "candidates": tune.candidates' list, the
planner's tiling and the cost model's TOP next-best of each branch) and a batch-1 side ("a", "b" or "none").
The model's own plan (plan() as it decides, the override included) is a row too, unless a row of its branch
already has its tiling. run_case(case) -> rows is a pure function: serial, a process pool and Dask run the same
one, so their rows are identical (no wall-clock field). sweep() runs many, skips those already in the output
file (resume) and writes it atomically now and then (sweep_io).

Rows (COLUMNS, in this order; the schema is stable, new columns only ever appended):
  case            stable id: "BxMxNxK-dtype-chip[-bcA|-bcB][-branch+branch]-tilings" (Case.id)
  a_shape, b_shape  the operands' stored shapes, JSON lists
  B, M, N, K, dtype, chip, broadcast, tilings   the Case's
  branch          the row's branch; label: "the model's plan", "planner's tiling (forced)" or "next-best #i by T_total"
  model_plan      True on the row that is plan()'s plan
  tiling          the tiling's choices in one phrase (tune's brief)
  tiling_changes  JSON {field: value}: plan(..., branch=branch).with_tiling(**changes) rebuilds the row's plan ({}:
                  the forced plan itself; the model's plan row: plan() itself, whose tiling may leave the forced one's,
                  e.g. StreamK's grid_K beyond theta)
  simulated_us    the emulator's T_total in timing mode (pyto.spec operands, run_options(check=False))
  est_us          the cost model's T_total of this tiling; est_<TERM>_us each term (cost_pipes.TERMS)
  pipe_<PIPE>_us  the Report's busy time of each pipe on the busiest core (PIPES; 0 when it ran nothing)
  bottleneck, bound  the Report's (the busiest pipe; "<pipe>-bound", "GM-bandwidth-bound" or "latency-bound")
  roofline_us, roofline_fraction  cost.roofline_us and roofline_us / simulated_us
  seed_branch     the seed's decision without T_total: the first home ground by its order (Special, ToMatmul,
                  then the price of parallelism: MergeBatch, IterBatch, ASW_Basic, StreamK; MergeBatch and
                  IterBatch cost the same, so an overlap of theirs goes to MergeBatch, BRANCHES' order), ASW_Basic
                  on fewer cores when none holds (seed_branch_of; from plan().conditions, the entry conditions the
                  planner evaluates, before its T_total arbitration and override)
  seed_homes      every branch whose home ground holds, '+'-joined in that order ('' when none)
  model_branch    plan()'s choice
  fastest         True on the one row of the case with the least simulated_us (ties: the first, the model's plan
                  first, then BRANCHES' order)
  error, error_class  '' or what raised: a case that raises is one row (branch '' or the forced branch that
                  raised), a candidate whose simulation raises is its row with simulated_us empty
  pyto_version, chip_hash  pyto.__version__ and tune.chip_hash of the chip table
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional

import pyto
from pyto.chip import load_chip
from pyto.ir import Pipe

from . import tune
from .conditions import BRANCHES
from .cost import roofline_us
from .cost_pipes import TERMS
from .planner import PRICE, legal_branches, plan

TILINGS = ("planner", "candidates")
BROADCASTS = ("none", "a", "b")
PIPES = tuple(p.name for p in Pipe if p not in (Pipe.S, Pipe.ALL))   # the Report leaves the scalar pipe out
MODEL_PLAN = "the model's plan"

COLUMNS: tuple = (
    ("case", str), ("a_shape", str), ("b_shape", str), ("B", int), ("M", int), ("N", int), ("K", int),
    ("dtype", str), ("chip", str), ("broadcast", str), ("tilings", str), ("branch", str), ("label", str), ("model_plan", bool), ("tiling", str),
    ("tiling_changes", str), ("simulated_us", float), ("est_us", float),
    *((f"est_{t}_us", float) for t in TERMS), *((f"pipe_{p}_us", float) for p in PIPES),
    ("bottleneck", str), ("bound", str), ("roofline_us", float), ("roofline_fraction", float),
    ("seed_branch", str), ("seed_homes", str), ("model_branch", str), ("fastest", bool), ("error", str),
    ("error_class", str), ("pyto_version", str), ("chip_hash", str))
NAMES = tuple(n for n, _ in COLUMNS)
ERROR_CHARS = 2000      # an error's text is kept up to this length


@dataclass(frozen=True)
class Case:
    """One problem of a sweep: C[B, M, N] = A[B, M, K] @ B[B, K, N] (a batch-1 side with broadcast "a"/"b")."""

    B: int
    M: int
    N: int
    K: int
    dtype: str = "bf16"
    chip: str = "ascend950pr"
    branches: tuple = ()          # () = every legal branch
    tilings: str = "planner"      # TILINGS
    broadcast: str = "none"       # BROADCASTS

    def __post_init__(self) -> None:
        object.__setattr__(self, "branches", tuple(self.branches))     # a list given: hashable, one id

    @property
    def id(self) -> str:
        bc = "" if self.broadcast == "none" else f"-bc{self.broadcast.upper()}"
        br = f"-{'+'.join(self.branches)}" if self.branches else ""
        return f"{self.B}x{self.M}x{self.N}x{self.K}-{self.dtype}-{self.chip}{bc}{br}-{self.tilings}"

    def shapes(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(a_shape, b_shape) as stored: [B, M, K] and [B, K, N], the broadcast side's batch 1."""
        return ((1 if self.broadcast == "a" else self.B, self.M, self.K),
                (1 if self.broadcast == "b" else self.B, self.K, self.N))


def seed_branch_of(conditions) -> tuple[str, list[str]]:
    """(seed_branch, home grounds in the seed's order) from a Plan's conditions (module docstring)."""
    order = {"special": -1, **PRICE}
    homes = sorted((c.branch for c in conditions if c.home), key=lambda b: (order[b], BRANCHES.index(b)))
    return (homes[0] if homes else "asw_basic"), homes


def run_case(case: Case) -> list[dict]:
    """The case's rows (module docstring); never raises: what raises becomes a row with its error."""
    try:
        rows = _rows(case)
    except Exception as e:      # noqa: BLE001 - a sweep reports every failure as a row (issue 23)
        rows = [_error_row(case, e)]
    ran = [i for i, r in enumerate(rows) if r["simulated_us"] is not None]
    if ran:
        rows[min(ran, key=lambda i: rows[i]["simulated_us"])]["fastest"] = True
    return rows


def _rows(case: Case) -> list[dict]:
    if case.tilings not in TILINGS:
        raise pyto.InputError(f"case {case.id}: tilings {case.tilings!r} is not one of {', '.join(TILINGS)}")
    chip = load_chip(case.chip)
    a_shape, b_shape = case.shapes()
    kw = dict(dtype=case.dtype, chip=chip)
    seed = plan(a_shape, b_shape, **kw)
    seed_branch, homes = seed_branch_of(seed.conditions)
    common = dict(_case_fields(case), seed_branch=seed_branch, seed_homes="+".join(homes), model_branch=seed.branch,
                  chip_hash=tune.chip_hash(chip))
    forced = lambda b: plan(a_shape, b_shape, branch=b, **kw)  # noqa: E731
    rows, ok = [], []
    for b in case.branches or legal_branches(a_shape, b_shape, **kw):
        try:
            forced(b)
            ok.append(b)
        except pyto.PytoError as e:     # a branch the case asks for that cannot run here: its row says why
            rows.append(_error_row(case, e, branch=b, common=common))
    if not ok and not rows:
        raise pyto.PlanError(f"case {case.id}: no legal branch")
    top = tune.TOP if case.tilings == "candidates" else 0
    cands = [c for c in tune.candidates(seed, forced, ok, chip, top=top) if c[2].branch in ok]
    roof = roofline_us(seed.problem, chip)
    for label, changes, p, is_seed in cands:
        row = dict(common, branch=p.branch, label=MODEL_PLAN if is_seed else label, model_plan=is_seed,
                   tiling=tune._brief(p.tiling), tiling_changes=json.dumps(dict(changes), sort_keys=True),
                   est_us=p.estimate.t_total, roofline_us=roof,
                   **{f"est_{t}_us": v for t, v in p.estimate.terms().items()})
        try:
            rep = tune.simulate_report(p, a_shape, b_shape, False)
        except Exception as e:      # noqa: BLE001 - this candidate's row carries the error
            row.update(error=_text(e), error_class=type(e).__name__)
        else:
            us = 1.0 / (rep.clock_ghz * 1e3)
            row.update(simulated_us=rep.time_us, bottleneck=rep.bottleneck, bound=rep.bound,
                       roofline_fraction=roof / rep.time_us if rep.time_us else None,
                       **{f"pipe_{n}_us": rep.pipe_cycles.get(n, 0.0) * us for n in PIPES})
        rows.append(_complete(row))
    return rows


def _case_fields(case: Case) -> dict:
    a_shape, b_shape = case.shapes()
    return dict(case=case.id, a_shape=json.dumps(list(a_shape)), b_shape=json.dumps(list(b_shape)), B=case.B,
                M=case.M, N=case.N, K=case.K, dtype=case.dtype, chip=case.chip, broadcast=case.broadcast,
                tilings=case.tilings, pyto_version=pyto.__version__)


def _text(e: BaseException) -> str:
    return (str(e) or repr(e))[:ERROR_CHARS]


def _error_row(case: Case, e: BaseException, branch: str = "", common: Optional[dict] = None) -> dict:
    base = common if common is not None else _case_fields(case)
    if common is None:
        try:
            base["chip_hash"] = tune.chip_hash(load_chip(case.chip))
        except Exception:       # noqa: BLE001 - the chip itself may be what failed
            pass
    return _complete(dict(base, branch=branch, error=_text(e), error_class=type(e).__name__))


def _complete(row: dict) -> dict:
    """Every column, in COLUMNS order: '' for a missing text, False for a flag, None for a number."""
    empty = {str: "", bool: False, int: None, float: None}
    return {n: row.get(n, empty[t]) for n, t in COLUMNS}


def sweep(spec_or_cases, out=None, workers: Optional[int] = None, scheduler: Optional[str] = None,
          client=None, progress: bool = True) -> list[dict]:
    """Run a sweep (a spec path, a parsed TOML dict or Cases) and return its rows in case order; with `out`
    (.parquet or .csv) skip the cases already there and write every row to it (sweep_run)."""
    from .sweep_run import run
    return run(spec_or_cases, out, workers=workers, scheduler=scheduler, client=client, progress=progress)


__all__ = ["Case", "COLUMNS", "NAMES", "PIPES", "TILINGS", "BROADCASTS", "run_case", "seed_branch_of", "sweep"]
