"""plan(..., tune=True): the planner's candidates simulated in timing mode, the fastest taken, the result cached.

Candidates (one problem, one chip): the seed's plan (plan() as it decides, override included); for every legal
branch the planner's own tiling for it (the branch forced); and for each branch the TOP next-best tilings by the
planner's cost model (cost.estimate) among the choices its derivation ranks:
- asw_basic, to_matmul: the base tiles (base_m x base_n x base_k, k_l1, L1 copies) tiling_cube.cube_candidates
  enumerates and tiling_asw._asw_tiles ranks by T_total (ToMatmul: those of its folded matmul);
- stream_k: grid_K x mCnt x nCnt, the splits tiling_streamk_special.stream_tiling ranks by T_total (grid_K over
  every power of two up to blocksPerBatch, as its theta=False step does);
- merge_batch: b (batches merged per MMAD), the divisors of b_L1 (tiling_batch.merge_tiling takes the largest
  that fits; it ranks none by T_total, so these are ranked here by the same model);
- iter_batch, special: no ranked list (the L1 case fixes IterBatch's tiles, Special's UB tile is the largest that
  fits): one tiling each.
Each is run by run_plan on pyto.spec operands with pyto.run_options(check=False) (no race checks: timing only);
the fastest simulated time wins, ties to the seed's plan. Tuned results are kept in a JSON file per chip table and
pyto version (cache_path) under the user's cache directory: a second tune of a problem simulates nothing.
"""
from __future__ import annotations

import hashlib
import json
import os
import warnings
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Callable, Optional

import pyto
from pyto.chip import Chip
from pyto.dtypes import DType
from pyto.errors import PlanError

from .conditions import cdiv
from .tiling_cube import cube_candidates
from .tilings import AswTiling, MergeBatchTiling, StreamKTiling, ToMatmulTiling

TOP = 2           # next-best tilings per branch (by T_total) simulated beside the planner's own
CACHE_FORMAT = 1  # the cache file's layout; a file of another format is ignored


@dataclass(frozen=True)
class Candidate:
    """One simulated candidate: its branch, what it is, the tiling changes from the planner's forced plan of the
    branch (() for the planner's own; the seed's plan is `seed`), its T_total estimate and simulated time."""

    branch: str
    label: str
    changes: tuple          # ((field, value), ...) for Plan.with_tiling
    brief: str              # the tiling's choices in one phrase
    estimate_us: float
    simulated_us: Optional[float]     # None: the simulation raised (error says why)
    seed: bool = False
    error: str = ""


@dataclass(frozen=True)
class Tuning:
    """What tune=True simulated (`candidates`, in order), which was the seed's and which was chosen, and where
    the result came from (`cache`: the file read, '' when simulated now)."""

    candidates: tuple
    chosen: int
    cache: str = ""
    path: str = ""

    @property
    def seed(self) -> Candidate:
        return next(c for c in self.candidates if c.seed)

    def lines(self) -> list[str]:
        src = f"read from the tune cache {self.cache}" if self.cache else "simulated now"
        out = [f"Tuned (plan(tune=True), {src}): {len(self.candidates)} candidates simulated in timing mode "
               f"(pyto.spec operands, check=False), fastest first by simulated time:"]
        order = sorted(range(len(self.candidates)), key=lambda i: (self.candidates[i].simulated_us is None,
                                                                   self.candidates[i].simulated_us or 0.0))
        for i in order:
            c = self.candidates[i]
            sim = f"{c.simulated_us:10.3f} us" if c.simulated_us is not None else f"failed: {c.error}"
            tags = (["seed's choice"] if c.seed else []) + (["tuned choice"] if i == self.chosen else [])
            out.append(f"  {c.branch:<12} {c.label:<30} {c.brief:<44} estimate {c.estimate_us:10.3f} us  "
                       f"simulated {sim}" + (f"   <- {', '.join(tags)}" if tags else ""))
        s, t = self.seed, self.candidates[self.chosen]
        if t.seed:
            out.append(f"Seed vs tuned: the same ({s.branch}, {s.brief}): no simulated candidate is faster than "
                       f"the seed's {s.simulated_us:.3f} us")
        else:
            what = (f"another branch: {t.branch} instead of {s.branch}" if t.branch != s.branch else
                    f"the same branch ({s.branch}), another tiling: {t.brief} instead of {s.brief}")
            out.append(f"Seed vs tuned: they differ, {what}; simulated {t.simulated_us:.3f} us vs the seed's "
                       f"{s.simulated_us:.3f} us ({1 - t.simulated_us / s.simulated_us:.1%} less time, "
                       f"{s.simulated_us / t.simulated_us:.3f}x)")
        return out


# ---- candidates ------------------------------------------------------------------------------------------

def _brief(t) -> str:
    if isinstance(t, ToMatmulTiling):
        return f"fold {t.fold}, " + _brief(t.matmul)
    if isinstance(t, AswTiling):
        return (f"base {t.base_m}x{t.base_n}x{t.base_k}, k_l1 {t.k_l1}, L1 x{t.l1_buffers}"
                + (f", {t.full_load} in L1" if t.full_load else ""))
    if isinstance(t, StreamKTiling):
        return f"grid_K {t.grid_k}, mCnt x nCnt {t.m_cnt}x{t.n_cnt}, base {t.base_m}x{t.base_n}x{t.base_k}"
    if isinstance(t, MergeBatchTiling):
        return f"b {t.b}, b_L1 {t.b_l1}, base {t.base_m}x{t.base_n}x{t.base_k}"
    names = [f for f in ("case", "resident", "base_m", "base_n", "base_k", "rows", "cols", "mode") if hasattr(t, f)]
    return ", ".join(f"{f} {getattr(t, f)!r}" for f in names)


def _same(t) -> tuple:
    """A tiling's fields without its derivation (two candidates with equal keys run the same kernel)."""
    return tuple((f.name, _same(getattr(t, f.name)) if hasattr(getattr(t, f.name), "__dataclass_fields__")
                  else getattr(t, f.name)) for f in fields(t) if f.name != "derivation")


def _knobs(t, p, chip: Chip) -> list[dict]:
    """The choices the planner's derivation ranks for this tiling, as with_tiling changes (module docstring)."""
    if isinstance(t, (AswTiling, ToMatmulTiling)):
        a = t.matmul if isinstance(t, ToMatmulTiling) else t
        cands = cube_candidates(a.m, a.n, a.k, a.batch, p, chip, cores=chip.aic, a_in_l1=a.full_load == "A",
                                b_in_l1=a.full_load == "B", held_twice=bool(a.full_load))
        return [dict(base_m=bm, base_n=bn, base_k=bk, k_l1=k_l1, l1_buffers=nbuf)
                for _, (bm, bn, bk, k_l1, nbuf) in cands]
    if isinstance(t, StreamKTiling):
        out, al = [], p.mn_align
        g = 2
        while g <= t.blocks_per_batch:
            for mc in range(1, cdiv(p.M, al) + 1):
                for nc in range(1, cdiv(p.N, al) + 1):
                    if mc * nc * g > t.blocks_per_batch:
                        break
                    out.append(dict(grid_k=g, m_cnt=mc, n_cnt=nc))
            g *= 2
        return out
    if isinstance(t, MergeBatchTiling):
        return [dict(b=d, b_l1=d * (t.b_l1 // d)) for d in range(1, t.b_l1 + 1) if t.b_l1 % d == 0]
    return []


def candidates(seed, forced: Callable[[str], object], branches: list, chip: Chip, top: int = TOP) -> list:
    """[(label, changes, plan, is_seed)]: the seed's plan, each branch's forced plan and its `top` next-best
    tilings by T_total, duplicates (the same tiling) dropped, the seed's kept."""
    out, seen = [("seed's plan", (), seed, True)], {(seed.branch, _same(seed.tiling))}
    for b in branches:
        try:
            fp = forced(b)
        except PlanError:
            continue
        key = (b, _same(fp.tiling))
        if key not in seen:
            seen.add(key)
            out.append(("planner's tiling (forced)", (), fp, False))
        ranked = []
        for ch in (_knobs(fp.tiling, fp.problem, chip) if top > 0 else ()):
            try:
                alt = fp.with_tiling(**ch)
            except PlanError:
                continue
            k = (b, _same(alt.tiling))
            if k not in seen:
                ranked.append((alt.estimate.t_total, k, ch, alt))
        ranked.sort(key=lambda x: x[0])
        for i, (_, k, ch, alt) in enumerate(x for x in ranked if x[1] not in seen):
            if i >= top or k in seen:
                break
            seen.add(k)
            out.append((f"next-best #{i + 1} by T_total", tuple(ch.items()), alt, False))
    return out


def simulate(p, a_shape, b_shape, bias) -> float:
    """The plan's simulated time (us) in timing mode on operands of these stored shapes, without the race checks.
    bias: False, True (one row per batch) or its shape."""
    return simulate_report(p, a_shape, b_shape, bias).time_us


def simulate_report(p, a_shape, b_shape, bias=False):
    """simulate()'s emulator Report (pyto sweep keeps each pipe's time, the bottleneck and the bound)."""
    from .api import run_plan
    pr = p.problem
    bias_spec = None
    if bias is not False and bias is not None:
        shape = tuple(bias) if isinstance(bias, (tuple, list)) else tuple(pr.batch_shape) + (1, pr.N)
        bias_spec = pyto.spec(shape, DType.int32 if pr.dtype is DType.int8 else pr.dtype)
    with pyto.run_options(check=False):
        a, b = pyto.spec(tuple(a_shape), pr.dtype), pyto.spec(tuple(b_shape), pr.dtype)
        return run_plan(p, a, b, bias_spec)[1]


# ---- the file cache --------------------------------------------------------------------------------------

def cache_dir() -> Path:
    """$PYTO_CACHE_DIR, else $XDG_CACHE_HOME/pyto, else ~/.cache/pyto."""
    if os.environ.get("PYTO_CACHE_DIR"):
        return Path(os.environ["PYTO_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pyto"


def chip_hash(chip: Chip) -> str:
    """sha256 of the chip table's bytes (its TOML file); of the Chip's fields when it was built in code."""
    try:
        data = Path(chip.source).read_bytes()
    except (OSError, TypeError):
        data = repr(chip).encode()
    return hashlib.sha256(data).hexdigest()


def cache_path(chip: Chip) -> Path:
    """One JSON file per chip table content and pyto version."""
    name = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in chip.name)
    return cache_dir() / f"tune-{name}-{chip_hash(chip)[:16]}-pyto{pyto.__version__}.json"


def problem_key(a_shape, b_shape, dtype, bias, transpose_a, transpose_b, reduce, override, branch) -> str:
    bias = list(bias) if isinstance(bias, (tuple, list)) else bool(bias)
    return json.dumps([list(a_shape), list(b_shape), str(dtype), bias, bool(transpose_a), bool(transpose_b), reduce,
                       override, branch, TOP])


def _read(path: Path, chip: Chip) -> dict:
    """The cache file's problems, or {} (a missing file; a corrupt one with a warning)."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        warnings.warn(f"pyto tune: ignoring the unreadable tune cache {path} ({e}); tuning again", stacklevel=4)
        return {}
    ok = (isinstance(doc, dict) and doc.get("format") == CACHE_FORMAT and doc.get("pyto") == pyto.__version__
          and doc.get("chip_hash") == chip_hash(chip) and isinstance(doc.get("problems"), dict))
    if not ok:
        warnings.warn(f"pyto tune: ignoring the tune cache {path}: not a format-{CACHE_FORMAT} file of pyto "
                      f"{pyto.__version__} for this chip table; tuning again", stacklevel=4)
        return {}
    return doc["problems"]


def _write(path: Path, chip: Chip, problems: dict) -> None:
    doc = {"format": CACHE_FORMAT, "pyto": pyto.__version__, "chip": chip.name, "chip_hash": chip_hash(chip),
           "chip_source": str(chip.source), "problems": problems}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(doc, indent=1))
        os.replace(tmp, path)
    except OSError as e:        # a read-only cache: the tuned plan is still returned
        warnings.warn(f"pyto tune: cannot write the tune cache {path} ({e})", stacklevel=4)


def _entry(t: Tuning) -> dict:
    return {"chosen": t.chosen, "candidates": [
        {"branch": c.branch, "label": c.label, "changes": [list(x) for x in c.changes], "brief": c.brief,
         "estimate_us": c.estimate_us, "simulated_us": c.simulated_us, "seed": c.seed, "error": c.error}
        for c in t.candidates]}


def _from_entry(e: dict) -> Tuning:
    cands = tuple(Candidate(c["branch"], c["label"], tuple((k, v) for k, v in c["changes"]), c["brief"],
                            float(c["estimate_us"]), None if c["simulated_us"] is None else float(c["simulated_us"]),
                            bool(c["seed"]), c.get("error", "")) for c in e["candidates"])
    chosen = int(e["chosen"])
    if not 0 <= chosen < len(cands) or sum(c.seed for c in cands) != 1:
        raise ValueError("chosen index out of range or not exactly one seed candidate")
    return Tuning(cands, chosen)


# ---- tune ------------------------------------------------------------------------------------------------

def tune(seed, forced: Callable[[str], object], branches: list, chip: Chip, key: str, shapes: tuple):
    """The plan of the fastest simulated candidate (ties: the seed's), with its Tuning; read from or written to
    the cache file. shapes: (a_shape, b_shape, bias) as plan() was given them."""
    path = cache_path(chip)
    problems = _read(path, chip)
    hit = problems.get(key)
    if hit is not None:
        try:
            t = _from_entry(hit)
            c = t.candidates[t.chosen]
            p = seed if c.seed else forced(c.branch)
            if c.changes:
                p = p.with_tiling(**dict(c.changes))
            return _finish(seed, p, replace(t, cache=str(path), path=str(path)))
        except (KeyError, TypeError, ValueError, PlanError, StopIteration) as e:
            warnings.warn(f"pyto tune: ignoring a corrupt entry of the tune cache {path} ({type(e).__name__}: "
                          f"{e}); tuning again", stacklevel=3)
    cands, plans = [], []
    for label, changes, p, is_seed in candidates(seed, forced, branches, chip):
        try:
            sim, err = simulate(p, *shapes), ""
        except pyto.PytoError as e:
            sim, err = None, f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
        cands.append(Candidate(p.branch, label, changes, _brief(p.tiling), p.estimate.t_total, sim, is_seed, err))
        plans.append(p)
    ran = [i for i, c in enumerate(cands) if c.simulated_us is not None]
    if not ran:
        raise PlanError("tune=True: every candidate's simulation failed: "
                        + "; ".join(f"{c.branch}: {c.error}" for c in cands))
    best = min(ran, key=lambda i: (cands[i].simulated_us, not cands[i].seed))
    if cands[0].simulated_us is not None and cands[0].simulated_us <= cands[best].simulated_us:
        best = 0            # ties: the seed's choice
    t = Tuning(tuple(cands), best, "", str(path))
    problems = _read(path, chip)        # (another process may have added problems meanwhile)
    problems[key] = _entry(t)
    _write(path, chip, problems)
    return _finish(seed, plans[best], t)


def _finish(seed, p, t: Tuning):
    c = t.candidates[t.chosen]
    note = (f"tune=True: {len(t.candidates)} candidates simulated; the fastest, {c.branch} ({c.label}, "
            f"{c.simulated_us:.3f} us), " + ("is the seed's plan" if c.seed else
                                              f"replaces the seed's {t.seed.branch} ({t.seed.simulated_us:.3f} us)"))
    if c.seed:
        return replace(seed, decision=seed.decision + (note,), tuning=t)
    return replace(seed, branch=p.branch, tiling=p.tiling, estimate=p.estimate, decision=seed.decision + (note,),
                   tuning=t)
