"""`pyto calibrate SWEEP`: fit the planner's free constants (fitted.py) to a sweep, judged on cases it did not see.

The fit, in two stages (numpy only):
1. Per branch (and apart on problems with a batch-1 side, where the model errs otherwise: the *_broadcast
   constants), a least-squares line through the sweep's rows, simulated ~ scale * T_total + overhead_us, on
   relative residuals (each row weighted by 1 / simulated: a 10% error weighs the same at 2 us as at 200 us),
   overhead_us >= 0 (a latency the model under-counts; a negative one is refitted with overhead 0). This is the
   model's systematic error per branch, which the planner's comparisons between branches inherit. Rows of every
   tiling count (the next-best ones too): more points on the same line.
2. A coordinate search over the decision constants for more agreement of the planner with the fastest simulated
   row of each case and less mean regret, a move kept only where neither gets worse and one gets better
   (_better): start from today's constants; try stage 1's lines as one move; then `resolution` and `override` on
   small grids, and per branch its scale times 0.85-1.15 (overhead kept); two rounds. Agreement is a step
   function of the constants (the planner compares, it does not add up), so it is searched, not differentiated;
   stage 1 gives the search a start with a physical meaning, and a constant the search does not move stays
   absent (today's).
   Every score replays plan() itself (fitted.using) on the case's shapes and looks the chosen (branch, tiling)
   up in the case's rows: the entry conditions, the price order and the override are the planner's own.

Cases, never rows, are split: held_out_fraction of them (by a seeded permutation of the case ids) are only
scored, before and after; the rest are fitted. A case's fastest row is its oracle; regret = the planner's row's
simulated time / the oracle's - 1; agreement: regret <= AGREE (0.5%, benchmarks/bmm_planner.py's).
"""
from __future__ import annotations

import datetime
import hashlib
import json
import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Optional

import numpy as np

from pyto.errors import CalibrationError, PytoError

from . import fitted
from .fitted import Fitted
from .planner import parse_problem, plan

AGREE = 0.005
SCALE_STEPS = (0.85, 0.9, 0.95, 1.05, 1.1, 1.15)
RESOLUTIONS = (0.0, 0.01, 0.02, 0.05, 0.08)
OVERRIDES = (0.0, 0.05, 0.1, 0.15, 0.25, 0.3)
ROUNDS = 2
MOVES = ("lines", "resolution", "override", "scale")   # what the search may move (fit(moves=...), --moves)


@dataclass(frozen=True)
class Score:
    """The planner against the fastest simulated row of each case."""

    cases: int
    agree: int
    median_regret: float
    worst_regret: float
    mean_regret: float
    unmatched: int = 0     # cases whose planned tiling has no row: scored by its branch's forced row

    @property
    def agreement(self) -> float:
        return self.agree / self.cases if self.cases else 0.0

    def cells(self) -> str:
        return (f"{self.agree:>4}/{self.cases:<4} {self.agreement:>7.1%} {self.median_regret:>8.1%} "
                f"{self.worst_regret:>8.1%} {self.mean_regret:>8.2%}")


@dataclass(frozen=True)
class Calibration:
    """A fit's result: the constants (`fitted`), stage 1's lines (`lines`: {(branch, broadcast): (scale,
    overhead_us, rows)}), the split, and the scores before (today's constants) and after, on the fitted and the
    held-out cases."""

    fitted: Fitted
    lines: dict
    fit_cases: tuple
    held_cases: tuple
    before_fit: Score
    after_fit: Score
    before_held: Score
    after_held: Score
    moves: tuple = ()      # the search's accepted moves, in order

    def table(self) -> str:
        """Before/after, fitted and held-out cases (what `pyto calibrate` prints)."""
        head = (f"{'':<22} {'agree':>9} {'rate':>7} {'median':>8} {'worst':>8} {'mean':>8}   (regret vs the fastest "
                f"simulated row)")
        out = [head]
        for name, s in (("fit cases, before", self.before_fit), ("fit cases, after", self.after_fit),
                        ("held-out, before", self.before_held), ("held-out, after", self.after_held)):
            out.append(f"{name:<22} {s.cells()}" + (f"  ({s.unmatched} scored by the forced row)"
                                                     if s.unmatched else ""))
        f = self.fitted
        named = ([f"{k} {getattr(f, k):g}" for k in ("resolution", "override") if getattr(f, k) is not None]
                 + [f"{k}.{b} {v:.4f}" for k in ("scale", "overhead_us", "scale_broadcast", "overhead_us_broadcast")
                    for b, v in getattr(f, k)])
        out.append("fitted constants: " + (", ".join(named) or "none (today's planner)")
                   + (f" (for {', '.join(f.dtypes)})" if f.dtypes else ""))
        out.append("stage 1 lines (simulated ~ scale * T_total + overhead_us): " + ", ".join(
            f"{b}{' (broadcast)' if bc else ''} {s:.4f} x + {o:.3f} us ({n} rows)"
            for (b, bc), (s, o, n) in sorted(self.lines.items())))
        return "\n".join(out)


# ---- the sweep's cases -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Case:
    id: str
    a_shape: tuple
    b_shape: tuple
    dtype: str
    chip: str
    rows: tuple            # ((branch, tiling, simulated_us, est_us), ...) of rows that ran
    best: float
    broadcast: bool = False     # a batch-1 side (Problem.broadcast != "none": the *_broadcast constants)


def _shape(v) -> tuple:
    return tuple(int(x) for x in (json.loads(v) if isinstance(v, str) else v))


def cases_of(rows: Iterable[dict]) -> dict:
    """{case id: _Case} of the rows that ran (simulated_us set, no error); a case none of whose rows ran is left
    out. CalibrationError when a row lacks a column the fit reads."""
    need = ("case", "a_shape", "b_shape", "dtype", "chip", "branch", "tiling", "simulated_us", "est_us")
    by: dict = {}
    for i, r in enumerate(rows):
        missing = [k for k in need if k not in r]
        if missing:
            raise CalibrationError(f"sweep row {i}: column(s) {', '.join(missing)} missing (a pyto sweep output "
                                   f"has them: kernels/bmm/sweep.py)")
        if r["simulated_us"] is None or r["est_us"] is None or r.get("error") or not r["branch"]:
            continue
        by.setdefault(r["case"], []).append(r)
    out = {}
    for cid, rs in by.items():
        r0 = rs[0]
        ran = tuple((r["branch"], r["tiling"], float(r["simulated_us"]), float(r["est_us"])) for r in rs)
        a, b = _shape(r0["a_shape"]), _shape(r0["b_shape"])
        try:
            bc = parse_problem(a, b, r0["dtype"]).broadcast != "none"
        except PytoError:       # replayed and scored as unmatched (_regret)
            bc = False
        out[cid] = _Case(cid, a, b, r0["dtype"], r0["chip"], ran, min(x[2] for x in ran), bc)
    return out


def split(case_ids: Iterable[str], held_out_fraction: float = 0.3, seed: int = 0) -> tuple[tuple, tuple]:
    """(fit ids, held-out ids): a seeded permutation of the sorted case ids, the first held_out_fraction held out
    (at least one of each when there are two or more cases and the fraction is in (0, 1))."""
    if not 0 <= held_out_fraction < 1:
        raise CalibrationError(f"held_out_fraction must be in [0, 1), got {held_out_fraction!r}")
    ids = sorted(set(case_ids))
    order = [ids[i] for i in np.random.default_rng(seed).permutation(len(ids))]
    n = int(round(held_out_fraction * len(ids)))
    if held_out_fraction > 0 and len(ids) >= 2:
        n = min(max(n, 1), len(ids) - 1)
    return tuple(sorted(order[n:])), tuple(sorted(order[:n]))


# ---- stage 1: a line per branch -------------------------------------------------------------------------

def fit_lines(cases: Iterable[_Case]) -> dict:
    """{(branch, broadcast): (scale, overhead_us, rows)}: simulated ~ scale * est + overhead on relative residuals,
    overhead >= 0, apart for problems with a batch-1 side (broadcast True) and without."""
    pts: dict = {}
    for c in cases:
        for b, _, sim, est in c.rows:
            if sim > 0 and est > 0:
                pts.setdefault((b, c.broadcast), []).append((est, sim))
    out = {}
    for b, xy in pts.items():
        est, sim = np.array(xy, dtype=np.float64).T
        # (scale * est + overhead - sim) / sim: columns est/sim and 1/sim against 1
        a = np.stack([est / sim, 1.0 / sim], axis=1)
        (s, o), *_ = np.linalg.lstsq(a, np.ones_like(sim), rcond=None)
        if len(xy) < 2 or o < 0 or s <= 0:
            s, o = float(np.sum(est / sim) / np.sum((est / sim) ** 2)), 0.0
        out[b] = (float(s), float(o), len(xy))
    return out


# ---- scoring: the planner replayed -----------------------------------------------------------------------

def _chosen(c: _Case, fit: Fitted) -> tuple[str, str]:
    from .tune import _brief
    with fitted.using(replace(fit, chip=c.chip)):      # plan()'s default override: the fitted margin, as it applies
        p = plan(c.a_shape, c.b_shape, c.dtype, c.chip)
    return p.branch, _brief(p.tiling)


def _regret(c: _Case, fit: Fitted) -> tuple[float, bool]:
    """(regret, matched): the planner's plan's row; its branch's row of least estimate when its tiling has none."""
    try:
        b, brief = _chosen(c, fit)
    except PytoError:
        return float("inf"), False
    hit = [sim for br, t, sim, _ in c.rows if br == b and t == brief]
    if hit:
        return hit[0] / c.best - 1, True
    same = sorted((est, sim) for br, _, sim, est in c.rows if br == b)
    return (same[0][1] / c.best - 1 if same else float("inf")), False


def score(cases: Iterable[_Case], fit: Fitted) -> Score:
    """The planner with these constants on these cases."""
    res = [_regret(c, fit) for c in cases]
    if not res:
        return Score(0, 0, 0.0, 0.0, 0.0)
    regs = [r for r, _ in res]
    finite = [r for r in regs if r != float("inf")] or [0.0]
    return Score(len(regs), sum(r <= AGREE for r in regs), statistics.median(regs), max(regs),
                 sum(finite) / len(finite), sum(not m for _, m in res))


def _better(a: Score, b: Score) -> bool:
    """a strictly better than b, on both counts: agreement no lower and mean regret no higher, one of them strictly
    (float noise aside). A move that buys agreement with more regret elsewhere is refused: the planner's worst cases
    are what a researcher trusting it pays for."""
    eps = 1e-9
    return (a.agree >= b.agree and a.mean_regret <= b.mean_regret + eps
            and (a.agree > b.agree or a.mean_regret < b.mean_regret - eps))


# ---- stage 2: the search ---------------------------------------------------------------------------------

def _with(fit: Fitted, **kw) -> Fitted:
    for k in ("scale", "overhead_us", "scale_broadcast", "overhead_us_broadcast"):
        if k in kw and isinstance(kw[k], dict):
            kw[k] = tuple(sorted(kw[k].items()))
    return replace(fit, **kw)


def _lines_fit(chip: str, lines: dict) -> Fitted:
    """Stage 1's lines as constants: the plain ones where they differ from today's (scale 1, overhead 0), the
    broadcast ones where they differ from what the plain ones give."""
    plain = {b: v for (b, bc), v in lines.items() if not bc}
    scale = {b: s for b, (s, _, _) in plain.items() if abs(s - 1) > 1e-9}
    over = {b: o for b, (_, o, _) in plain.items() if o > 1e-6}
    bscale = {b: s for (b, bc), (s, _, _) in lines.items() if bc and abs(s - scale.get(b, 1.0)) > 1e-9}
    bover = {b: o for (b, bc), (_, o, _) in lines.items() if bc and abs(o - over.get(b, 0.0)) > 1e-6}
    return _with(Fitted(chip), scale=scale, overhead_us=over, scale_broadcast=bscale, overhead_us_broadcast=bover)


def search(cases: list, lines: dict, chip: str, rounds: int = ROUNDS, log=None,
           moves_allowed: tuple = MOVES) -> tuple[Fitted, tuple]:
    """Stage 2 (module docstring): the constants and the accepted moves (each also given to `log`, when set);
    moves_allowed: which of MOVES it may make ("lines": stage 1's lines as one move; "scale": each branch's scale)."""
    bad = [m for m in moves_allowed if m not in MOVES]
    if bad:
        raise CalibrationError(f"unknown move(s) {', '.join(map(repr, bad))}; the moves are {', '.join(MOVES)}")
    best = Fitted(chip)
    best_s = score(cases, best)
    moves = []

    def attempt(cand: Fitted, what: str) -> None:
        nonlocal best, best_s
        s = score(cases, cand)
        if _better(s, best_s):
            best, best_s = cand, s
            moves.append(f"{what}: agreement {s.agree}/{s.cases}, mean regret {s.mean_regret:.2%}")
            if log is not None:
                log(moves[-1])

    if "lines" in moves_allowed:
        attempt(_lines_fit(chip, lines), "stage 1 lines")
    for _ in range(rounds):
        before = best
        for r in RESOLUTIONS if "resolution" in moves_allowed else ():
            attempt(replace(best, resolution=r), f"resolution {r:g}")
        for o in OVERRIDES if "override" in moves_allowed else ():
            attempt(replace(best, override=o), f"override {o:g}")
        for b, bc in sorted(lines) if "scale" in moves_allowed else ():
            name = "scale_broadcast" if bc else "scale"
            scale = dict(getattr(best, name))
            base = scale.get(b, dict(best.scale).get(b, 1.0) if bc else 1.0)
            for f in SCALE_STEPS:
                attempt(_with(best, **{name: {**scale, b: base * f}}), f"{name}.{b} {base * f:.4f}")
        if best == before:
            break
    return best, tuple(moves)


def fit(rows: Iterable[dict], held_out_fraction: float = 0.3, seed: int = 0, chip: Optional[str] = None,
        rounds: int = ROUNDS, log=None, moves: tuple = MOVES) -> Calibration:
    """Fit the planner's free constants to a sweep's rows (module docstring), one chip (`chip`, or the rows' only
    one); scored before and after on the held-out cases. log: a callable given each accepted move (progress).
    moves: the constants the search may move (MOVES; e.g. ("lines",) keeps the seed's margins)."""
    cases = cases_of(rows)
    chips = sorted({c.chip for c in cases.values()})
    if chip is None:
        if len(chips) != 1:
            raise CalibrationError(f"the sweep has cases on {len(chips)} chips ({', '.join(chips) or 'none ran'}); "
                                   f"name one (chip=, --chip): the constants are fitted per chip")
        chip = chips[0]
    cases = {k: c for k, c in cases.items() if c.chip == chip}
    if len(cases) < 2:
        raise CalibrationError(f"the sweep has {len(cases)} case(s) that ran on {chip}: a fit needs two or more "
                               f"(some to fit, some held out)")
    fit_ids, held_ids = split(cases, held_out_fraction, seed)
    train, held = [cases[i] for i in fit_ids], [cases[i] for i in held_ids]
    lines = fit_lines(train)
    got, made = search(train, lines, chip, rounds, log, tuple(moves))
    if not got.empty:       # the constants hold for the dtypes they were fitted on (fitted.for_problem)
        got = replace(got, dtypes=tuple(sorted({c.dtype for c in train})))
    today = Fitted(chip)
    return Calibration(got, lines, fit_ids, held_ids, score(train, today), score(train, got), score(held, today),
                       score(held, got), made)


def provenance(cal: Calibration, sweep_paths: "str | Path | list", rows: int, held_out_fraction: float,
               seed: int) -> Fitted:
    """The fitted constants with their [sweep] and [agreement] tables and a version (date + the sweeps' hash)."""
    paths = [Path(x) for x in (sweep_paths if isinstance(sweep_paths, (list, tuple)) else [sweep_paths])]
    digests = [hashlib.sha256(x.read_bytes()).hexdigest() for x in paths]
    digest = digests[0] if len(digests) == 1 else hashlib.sha256(",".join(digests).encode()).hexdigest()
    today = datetime.date.today().isoformat()
    sweep = {"file": ", ".join(x.name for x in paths), "sha256": ", ".join(digests),
             "cases": len(cal.fit_cases) + len(cal.held_cases), "rows": rows, "fit_cases": len(cal.fit_cases),
             "held_out_cases": len(cal.held_cases), "held_out_fraction": held_out_fraction, "seed": seed,
             "date": today}
    agree = {"held_out_before": cal.before_held.agreement, "held_out_after": cal.after_held.agreement,
             "held_out_median_regret_before": cal.before_held.median_regret,
             "held_out_median_regret_after": cal.after_held.median_regret,
             "held_out_worst_regret_before": cal.before_held.worst_regret,
             "held_out_worst_regret_after": cal.after_held.worst_regret,
             "fit_before": cal.before_fit.agreement, "fit_after": cal.after_fit.agreement}
    agree = {k: (v if v != float("inf") else 1e9) for k, v in agree.items()}
    return replace(cal.fitted, version=f"{today}.{digest[:8]}", meta={"sweep": sweep, "agreement": agree})


__all__ = ["AGREE", "Calibration", "Score", "cases_of", "fit", "fit_lines", "provenance", "score", "search", "split"]
