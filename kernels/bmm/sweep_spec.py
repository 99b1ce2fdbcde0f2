"""A `pyto sweep` spec: the cases to run, from a TOML file of grids and random draws or a CSV of one case a row.

TOML (every key optional but at least one [[grid]] or random draw; top-level keys are the defaults a grid or a
random draw may set again for itself):

    dtypes    = ["bf16", "fp16"]        # default ["bf16"]
    chips     = ["ascend950pr"]         # names or .toml paths; default ["ascend950pr"]
    branches  = "all"                   # or a list of branches: each forced; default every legal branch
    tilings   = "planner"               # "planner": each branch's own tiling; "candidates": tune's candidate list
    broadcast = ["none"]                # "none", "a" (A has batch 1) or "b" (B has batch 1)

    [[grid]]                            # the cross product B x M x N x K x dtypes x chips x broadcast
    B = [1, 4]                          # a list of values, or a range:
    M = {start = 16, stop = 1024, num = 7, scale = "log"}   # num values start..stop (inclusive), scale "log"
    N = {start = 64, stop = 256, step = 64}                 # (default) or "linear"; or every step start..stop
    K = [256, 1024]                     # ranges may add align = 16: each value rounded to a multiple of it

    [random]                            # or [[random]] (several draws): n shapes, each crossed with dtypes, chips
    n = 100                             # and broadcast
    seed = 0
    B = {start = 1, stop = 64}          # a range drawn from (inclusive; scale "log" (default) or "linear";
    M = [64, 128, 256]                  # align) or a list of choices
    N = {start = 16, stop = 2048, align = 16}
    K = {start = 16, stop = 16384}

CSV: a header naming B, M, N, K, dtype, chip and optionally branch (empty: every legal branch), tilings and
broadcast; one case a row. A case that appears twice (the same id) runs once. A bad spec raises InputError naming
the file and the key (or the row and column), the value and what it takes.
"""
from __future__ import annotations

import csv
import math
import random as _random
from pathlib import Path
from typing import Iterable, Optional

from pyto.chip import load_chip
from pyto.dtypes import as_dtype
from pyto.errors import InputError, PytoError

from .conditions import BRANCHES
from .sweep import BROADCASTS, TILINGS, Case

try:
    import tomllib
except ModuleNotFoundError:     # Python < 3.11
    import tomli as tomllib

DIMS = ("B", "M", "N", "K")
DEFAULTS = {"dtypes": ["bf16"], "chips": ["ascend950pr"], "branches": "all", "tilings": "planner",
            "broadcast": ["none"]}
RANGE_KEYS = {"start", "stop", "num", "step", "scale", "align"}
SCALES = ("log", "linear")
DIM_MAX = 1 << 24       # a size beyond this is a typo, not a shape (a grid of them would never finish)


def load_spec(path: "str | Path") -> list[Case]:
    """The cases of a spec file (.toml or .csv), in file order, duplicates dropped."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise InputError(f"sweep spec {path}: cannot read it ({e.strerror or e})") from None
    if path.suffix.lower() == ".csv":
        return _unique(_csv_cases(text, path))
    if path.suffix.lower() != ".toml":
        raise InputError(f"sweep spec {path}: the suffix must be .toml (grids, random draws) or .csv (one case a "
                         f"row), got {path.suffix or 'none'!r}")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"sweep spec {path}: not valid TOML: {e}") from None
    return _unique(toml_cases(doc, path))


def toml_cases(doc: dict, path: "str | Path" = "<spec>") -> list[Case]:
    """The cases of a parsed TOML spec (module docstring); `path` names the file in errors."""
    where = _Where(path)
    unknown = set(doc) - set(DEFAULTS) - {"grid", "random"}
    if unknown:
        where.fail(sorted(unknown)[0], "is not a spec key; the keys are "
                   + ", ".join(sorted(set(DEFAULTS) | {"grid", "random"})))
    top = {k: doc.get(k, v) for k, v in DEFAULTS.items()}
    grids = _tables(doc, "grid", where)
    draws = _tables(doc, "random", where)
    if not grids and not draws:
        where.fail("grid", "no [[grid]] or [random] table: the spec gives no shapes")
    cases: list[Case] = []
    for i, g in enumerate(grids):
        at = f"grid[{i}]"
        opts = _options(g, top, where, at)
        dims = {d: _values(g, d, where, at) for d in DIMS}
        extra = set(g) - set(DIMS) - set(DEFAULTS)
        if extra:
            where.fail(f"{at}.{sorted(extra)[0]}", "is not a grid key; a grid has B, M, N, K and may set "
                       + ", ".join(DEFAULTS))
        shapes = [(b, m, n, k) for b in dims["B"] for m in dims["M"] for n in dims["N"] for k in dims["K"]]
        cases += _cross(shapes, opts)
    for i, r in enumerate(draws):
        at = f"random[{i}]" if isinstance(doc.get("random"), list) else "random"
        opts = _options(r, top, where, at)
        extra = set(r) - set(DIMS) - set(DEFAULTS) - {"n", "seed"}
        if extra:
            where.fail(f"{at}.{sorted(extra)[0]}", "is not a random key; a random draw has n, seed, B, M, N, K and "
                       "may set " + ", ".join(DEFAULTS))
        n = _int(r.get("n"), where, f"{at}.n", lo=1)
        seed = _int(r.get("seed", 0), where, f"{at}.seed", lo=0)
        draw = {d: _sampler(r, d, where, at) for d in DIMS}
        rng = _random.Random(seed)
        shapes = [tuple(draw[d](rng) for d in DIMS) for _ in range(n)]
        cases += _cross(shapes, opts)
    return cases


def _csv_cases(text: str, path: Path) -> list[Case]:
    where = _Where(path)
    reader = csv.DictReader(text.splitlines())
    head = [h.strip() for h in (reader.fieldnames or [])]
    need = ["B", "M", "N", "K", "dtype", "chip"]
    optional = ["branch", "tilings", "broadcast"]
    for col in need:
        if col not in head:
            where.fail(col, f"is a required column; the header is {head or 'empty'} (columns: "
                       f"{', '.join(need)}[, {', '.join(optional)}])")
    for col in head:
        if col not in need + optional:
            where.fail(col, f"is not a column; the columns are {', '.join(need)}[, {', '.join(optional)}]")
    cases = []
    for row_no, raw in enumerate(reader, start=2):
        row = {(k or "").strip(): (v or "").strip() for k, v in raw.items() if k is not None}
        if not any(row.values()):
            continue
        at = lambda col: f"row {row_no}, column {col}"  # noqa: E731
        dims = [_int(_cell_int(row.get(d, ""), where, at(d)), where, at(d), lo=0) for d in DIMS]
        dtype = _dtype(row.get("dtype", ""), where, at("dtype"))
        chip = _chip(row.get("chip", ""), where, at("chip"))
        branch = row.get("branch", "")
        if branch and branch not in BRANCHES:
            where.fail(at("branch"), f"= {branch!r} is not a branch; the branches are {', '.join(BRANCHES)} "
                       "(empty: every legal branch)")
        tilings = row.get("tilings", "") or DEFAULTS["tilings"]
        if tilings not in TILINGS:
            where.fail(at("tilings"), f"= {tilings!r}; tilings is one of {', '.join(TILINGS)}")
        bc = row.get("broadcast", "") or "none"
        if bc not in BROADCASTS:
            where.fail(at("broadcast"), f"= {bc!r}; broadcast is one of {', '.join(BROADCASTS)}")
        cases.append(Case(*dims, dtype=dtype, chip=chip, branches=(branch,) if branch else (), tilings=tilings,
                          broadcast=bc))
    if not cases:
        where.fail("rows", "the CSV has a header but no cases")
    return cases


# ---- pieces ----------------------------------------------------------------------------------------------

class _Where:
    """Names the spec file in every error."""

    def __init__(self, path: "str | Path"):
        self.path = str(path)

    def fail(self, key: str, what: str) -> None:
        raise InputError(f"sweep spec {self.path}: {key} {what}")


def _tables(doc: dict, key: str, where: _Where) -> list[dict]:
    v = doc.get(key, [])
    v = [v] if isinstance(v, dict) else v
    if not isinstance(v, list) or not all(isinstance(t, dict) for t in v):
        where.fail(key, f"must be a table or an array of tables ([[{key}]]), got {type(v).__name__}")
    return v


def _options(t: dict, top: dict, where: _Where, at: str) -> dict:
    """dtypes, chips, branches, tilings, broadcast of a grid or draw (its own, else the spec's), checked."""
    get = lambda k: t.get(k, top[k])  # noqa: E731
    key = lambda k: f"{at}.{k}" if k in t else k  # noqa: E731
    dtypes = [_dtype(d, where, f"{key('dtypes')}[{i}]") for i, d in enumerate(_list(get("dtypes"), where,
                                                                                     key("dtypes")))]
    chips = [_chip(c, where, f"{key('chips')}[{i}]") for i, c in enumerate(_list(get("chips"), where,
                                                                                  key("chips")))]
    branches = get("branches")
    if branches == "all":
        branches = ()
    else:
        branches = tuple(_list(branches, where, key("branches")))
        for i, b in enumerate(branches):
            if b not in BRANCHES:
                where.fail(f"{key('branches')}[{i}]", f"= {b!r} is not a branch; the branches are "
                           f"{', '.join(BRANCHES)} (or \"all\")")
    tilings = get("tilings")
    if tilings not in TILINGS:
        where.fail(key("tilings"), f"= {tilings!r}; tilings is one of {', '.join(TILINGS)}")
    bcs = _list(get("broadcast"), where, key("broadcast"))
    for i, b in enumerate(bcs):
        if b not in BROADCASTS:
            where.fail(f"{key('broadcast')}[{i}]", f"= {b!r}; broadcast is one of {', '.join(BROADCASTS)}")
    return dict(dtypes=dtypes, chips=chips, branches=branches, tilings=tilings, broadcast=bcs)


def _cross(shapes: Iterable[tuple], o: dict) -> list[Case]:
    return [Case(*s, dtype=d, chip=c, branches=o["branches"], tilings=o["tilings"], broadcast=bc)
            for s in shapes for d in o["dtypes"] for c in o["chips"] for bc in o["broadcast"]]


def _list(v, where: _Where, key: str) -> list:
    v = [v] if isinstance(v, str) else v
    if not isinstance(v, list) or not v or not all(isinstance(x, str) for x in v):
        where.fail(key, f"must be a non-empty list of strings, got {v!r}")
    return v


def _dtype(name, where: _Where, key: str) -> str:
    if not isinstance(name, str) or not name:
        where.fail(key, f"must be a dtype name (bf16, fp16, fp32, int8), got {name!r}")
    try:
        return as_dtype(name).name
    except PytoError as e:
        where.fail(key, f"= {name!r}: {e}")


def _chip(name, where: _Where, key: str) -> str:
    if not isinstance(name, str) or not name:
        where.fail(key, f"must be a chip name or a .toml path, got {name!r}")
    try:
        load_chip(name)
    except PytoError as e:
        where.fail(key, f"= {name!r}: {e}")
    return name


def _cell_int(text: str, where: _Where, key: str) -> int:
    try:
        return int(text)
    except ValueError:
        where.fail(key, f"= {text!r} is not an integer")


def _int(v, where: _Where, key: str, lo: int = 0) -> int:
    if v is None:
        where.fail(key, "is missing")
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= DIM_MAX:
        where.fail(key, f"= {v!r} must be an integer in [{lo}, {DIM_MAX}]")
    return v


def _range(t: dict, where: _Where, key: str, need_count: bool) -> tuple:
    """(start, stop, scale, align) of a range table, checked."""
    extra = set(t) - RANGE_KEYS
    if extra:
        where.fail(f"{key}.{sorted(extra)[0]}", f"is not a range key; a range has {', '.join(sorted(RANGE_KEYS))}")
    start = _int(t.get("start"), where, f"{key}.start")
    stop = _int(t.get("stop"), where, f"{key}.stop")
    if stop < start:
        where.fail(f"{key}.stop", f"= {stop} is below start = {start}")
    scale = t.get("scale", "log" if not need_count or "num" in t else "linear")
    if scale not in SCALES:
        where.fail(f"{key}.scale", f"= {scale!r}; scale is one of {', '.join(SCALES)}")
    if scale == "log" and start < 1:
        where.fail(f"{key}.start", f"= {start}: a log range starts at 1 or more")
    align = _int(t.get("align", 1), where, f"{key}.align", lo=1)
    return start, stop, scale, align


def _values(g: dict, d: str, where: _Where, at: str) -> list[int]:
    """A grid axis: a list of sizes, or a range {start, stop, num | step, scale, align}."""
    key = f"{at}.{d}"
    v = g.get(d)
    if v is None:
        where.fail(key, "is missing: a grid gives B, M, N and K")
    if isinstance(v, int) and not isinstance(v, bool):
        v = [v]
    if isinstance(v, list):
        if not v:
            where.fail(key, "is an empty list")
        return [_int(x, where, f"{key}[{i}]") for i, x in enumerate(v)]
    if not isinstance(v, dict):
        where.fail(key, f"must be a list of sizes or a range table, got {v!r}")
    start, stop, scale, align = _range(v, where, key, need_count=True)
    if ("num" in v) == ("step" in v):
        where.fail(key, "a grid range gives exactly one of num (how many values) and step")
    if "step" in v:
        if scale == "log" and "scale" in v:
            where.fail(f"{key}.scale", "= 'log' with step: a stepped range is linear (use num for a log one)")
        vals = list(range(start, stop + 1, _int(v["step"], where, f"{key}.step", lo=1)))
    else:
        num = _int(v["num"], where, f"{key}.num", lo=1)
        if num == 1:
            vals = [start]
        elif scale == "log":
            r = math.log(stop / start)
            vals = [start * math.exp(r * i / (num - 1)) for i in range(num)]
        else:
            vals = [start + (stop - start) * i / (num - 1) for i in range(num)]
    out = sorted({max(align, round(x / align) * align) if align > 1 else round(x) for x in vals})
    return out


def _sampler(r: dict, d: str, where: _Where, at: str):
    """A random draw's axis: rng -> size, from a list of choices or a range {start, stop, scale, align}."""
    key = f"{at}.{d}"
    v = r.get(d)
    if v is None:
        where.fail(key, "is missing: a random draw gives B, M, N and K")
    if isinstance(v, list):
        if not v:
            where.fail(key, "is an empty list")
        choices = [_int(x, where, f"{key}[{i}]") for i, x in enumerate(v)]
        return lambda rng: rng.choice(choices)
    if not isinstance(v, dict):
        where.fail(key, f"must be a list of choices or a range table, got {v!r}")
    if "num" in v or "step" in v:
        where.fail(f"{key}.{'num' if 'num' in v else 'step'}", "belongs to a grid range; a random range has "
                   "start, stop, scale, align")
    start, stop, scale, align = _range(v, where, key, need_count=False)

    def draw(rng: _random.Random) -> int:
        x = (math.exp(rng.uniform(math.log(start), math.log(stop))) if scale == "log" and stop > start
             else rng.uniform(start, stop))
        x = min(stop, max(start, round(x)))
        return max(align, round(x / align) * align) if align > 1 else x
    return draw


def _unique(cases: list[Case]) -> list[Case]:
    seen: dict[str, Case] = {}
    for c in cases:
        seen.setdefault(c.id, c)
    return list(seen.values())


def cases_of(spec: "str | Path | Iterable[Case] | dict", where: Optional[str] = None) -> list[Case]:
    """The cases of a spec file, a parsed TOML dict or an iterable of Case (sweep()'s argument)."""
    if isinstance(spec, (str, Path)):
        return load_spec(spec)
    if isinstance(spec, dict):
        return _unique(toml_cases(spec, where or "<dict>"))
    cases = list(spec)
    for c in cases:
        if not isinstance(c, Case):
            raise InputError(f"sweep: a case must be a pyto_kernels.bmm.sweep.Case, got {type(c).__name__}")
    return _unique(cases)
