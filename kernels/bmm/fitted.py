"""The planner's fitted constants: the free numbers of its branch decision that no chip table documents.

What is fitted (and nothing else: the chip tables' figures, with their sources, are never fitted):
- ``scale.<branch>`` and ``overhead_us.<branch>``: the branch's calibrated time, scale * T_total + overhead_us,
  which is what the planner compares where branches compete (planner._pick: overlapping home grounds;
  planner._override: a branch outside its home ground). ``scale_broadcast.<branch>`` and
  ``overhead_us_broadcast.<branch>`` replace them on problems with a batch-1 side (Problem.broadcast != "none"),
  where the model's error differs (e.g. MergeBatch on a broadcast problem runs ~6% slower than modelled).
  T_total (cost.estimate) itself is never changed: it stays the model of what the kernel issues, shown as such in
  explain().
- ``resolution``: estimates closer than this (relative) are not ordered by the model in an overlap (planner._pick;
  default cost.RESOLUTION). The tile ranking inside a branch (tiling_asw) keeps cost.RESOLUTION.
- ``dtypes``: the input dtypes the constants were fitted on (pyto calibrate writes the sweep's); a problem of
  another dtype is planned without them (for_problem). Absent: every dtype.
- ``override``: the margin by which a branch outside its home ground must be faster (default planner.OVERRIDE),
  applied when plan()'s ``override`` is left at its default, "fitted".

Where the constants come from, per chip (``for_chip``): the file $PYTO_FITTED names, when it is for that chip
(PYTO_FITTED=none: no file at all, today's planner); else the package's versioned file
kernels/bmm/calibration/<chip>.toml (written by ``pyto calibrate ... --install``); else none. A constant that is
absent keeps today's value, so with no file the planner's decisions are exactly today's. The file
(format FORMAT, TOML):

    format = 1
    chip = "ascend950pr"
    version = "2026-12-01.1"
    [fitted]                   # every key optional
    dtypes = ["bf16", "fp16"]
    resolution = 0.03
    override = 0.2
    [fitted.scale]
    stream_k = 0.93
    [fitted.overhead_us]
    stream_k = 0.4
    [fitted.scale_broadcast]   # on problems with a batch-1 side
    merge_batch = 1.06
    [sweep]                    # provenance, not read by the planner: files, sha256, cases, rows, split, seed, date
"""
from __future__ import annotations

import contextlib
import math
import os
import threading
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

from pyto.chip import Chip
from pyto.dtypes import as_dtype
from pyto.errors import CalibrationError, PytoError

from .conditions import BRANCHES

FORMAT = 1
PACKAGE_DIR = Path(__file__).with_name("calibration")
ENV = "PYTO_FITTED"
DOC = "kernels/bmm/fitted.py"
_PER_BRANCH = ("scale", "overhead_us", "scale_broadcast", "overhead_us_broadcast")
_TOP = {"format", "chip", "version", "fitted", "sweep", "agreement"}


@dataclass(frozen=True)
class Fitted:
    """One chip's fitted constants; a field that is None (a dict without the branch) keeps today's value."""

    chip: str
    resolution: Optional[float] = None
    override: Optional[float] = None
    scale: tuple = ()              # ((branch, factor), ...) sorted by branch
    overhead_us: tuple = ()        # ((branch, us), ...) sorted by branch
    scale_broadcast: tuple = ()    # the same two on problems with a batch-1 side (module docstring)
    overhead_us_broadcast: tuple = ()
    dtypes: tuple = ()             # the input dtypes fitted on (names, sorted); () = every dtype
    version: str = ""
    source: str = field(default="", compare=False)   # the file read ("" when none)
    meta: dict = field(default_factory=dict, compare=False, repr=False)   # [sweep] and [agreement], as read

    @property
    def key(self) -> tuple:
        """What the planner's decision depends on (for a cache keyed by it)."""
        return (self.resolution, self.override, self.scale, self.overhead_us, self.scale_broadcast,
                self.overhead_us_broadcast, self.dtypes)

    @property
    def empty(self) -> bool:
        return self.key[:-1] == (None, None, (), (), (), ())

    def time(self, branch: str, t_total: float, broadcast: bool = False) -> float:
        """The branch's calibrated time (us) from its T_total estimate (broadcast: the problem has a batch-1 side);
        t_total itself without a fitted constant."""
        s, o = dict(self.scale).get(branch), dict(self.overhead_us).get(branch)
        if broadcast:
            s = dict(self.scale_broadcast).get(branch, s)
            o = dict(self.overhead_us_broadcast).get(branch, o)
        if s is None and o is None:
            return t_total
        return t_total * (1.0 if s is None else s) + (0.0 if o is None else o)

    def to_toml(self) -> str:
        """The file's text (for_chip reads it back to an equal Fitted)."""
        out = [f"format = {FORMAT}", f"chip = {_q(self.chip)}", f"version = {_q(self.version)}", "", "[fitted]"]
        if self.dtypes:
            out.append("dtypes = [" + ", ".join(_q(d) for d in self.dtypes) + "]")
        out += [f"{k} = {_num(v)}" for k, v in (("resolution", self.resolution), ("override", self.override))
                if v is not None]
        for name in _PER_BRANCH:
            if getattr(self, name):
                out += ["", f"[fitted.{name}]"] + [f"{b} = {_num(v)}" for b, v in getattr(self, name)]
        for table in ("sweep", "agreement"):
            if self.meta.get(table):
                out += ["", f"[{table}]"] + [f"{k} = {_q(v) if isinstance(v, str) else _num(v)}"
                                             for k, v in self.meta[table].items()]
        return "\n".join(out) + "\n"


def _q(s: str) -> str:
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _num(v) -> str:
    return repr(int(v)) if isinstance(v, (bool, int)) and not isinstance(v, bool) else repr(float(v))


def _bad(path: object, key: str, why: str) -> CalibrationError:
    return CalibrationError(f"fitted constants file {path}: {key}: {why} (the format: {DOC})")


def _number(path, key: str, v, lo: float, hi: float) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise _bad(path, key, f"must be a finite number, got {v!r}")
    if not lo <= v < hi:
        raise _bad(path, key, f"{v!r} is outside [{lo:g}, {hi:g})")
    return float(v)


def parse(doc: dict, path: object = "<text>") -> Fitted:
    """A Fitted from a TOML document; CalibrationError naming the key that is missing, unknown or out of range."""
    for k in doc:
        if k not in _TOP:
            raise _bad(path, k, f"unknown key (the keys are {', '.join(sorted(_TOP))})")
    if doc.get("format") != FORMAT:
        raise _bad(path, "format", f"must be {FORMAT}, got {doc.get('format')!r}")
    chip = doc.get("chip")
    if not isinstance(chip, str) or not chip:
        raise _bad(path, "chip", f"must name the chip the constants were fitted on, got {chip!r}")
    fit = doc.get("fitted", {})
    if not isinstance(fit, dict):
        raise _bad(path, "fitted", "must be a table")
    kw: dict = {}
    for k, v in fit.items():
        if k == "resolution":
            kw[k] = _number(path, "fitted.resolution", v, 0.0, 0.5)
        elif k == "override":
            kw[k] = _number(path, "fitted.override", v, 0.0, 1.0)
        elif k == "dtypes":
            if not isinstance(v, list) or not v or not all(isinstance(d, str) for d in v):
                raise _bad(path, "fitted.dtypes", f"must be a list of dtype names, got {v!r}")
            for d in v:
                try:
                    as_dtype(d)
                except (TypeError, ValueError, KeyError, PytoError):
                    raise _bad(path, "fitted.dtypes", f"{d!r} is not a dtype name") from None
            kw[k] = tuple(sorted(set(v)))
        elif k in _PER_BRANCH:
            if not isinstance(v, dict):
                raise _bad(path, f"fitted.{k}", "must be a table of branch = number")
            vals = []
            for b, x in v.items():
                if b not in BRANCHES:
                    raise _bad(path, f"fitted.{k}.{b}", f"unknown branch (branches: {', '.join(BRANCHES)})")
                lo, hi = (1e-3, 1e3) if k.startswith("scale") else (0.0, 1e6)
                vals.append((b, _number(path, f"fitted.{k}.{b}", x, lo, hi)))
            kw[k] = tuple(sorted(vals))
        else:
            raise _bad(path, f"fitted.{k}", "unknown key (fitted keys: dtypes, resolution, override, "
                       + ", ".join(_PER_BRANCH) + ")")
    meta = {t: dict(doc[t]) for t in ("sweep", "agreement") if isinstance(doc.get(t), dict)}
    return Fitted(chip, version=str(doc.get("version", "")), source=str(path), meta=meta, **kw)


def read(path: "str | Path") -> Fitted:
    """The fitted constants in a file; CalibrationError when it cannot be read or is not a valid one."""
    try:
        doc = tomllib.loads(Path(path).read_text())
    except OSError as e:
        raise CalibrationError(f"fitted constants file {path}: cannot read it ({e})") from None
    except tomllib.TOMLDecodeError as e:
        raise CalibrationError(f"fitted constants file {path}: not TOML ({e}; the format: {DOC})") from None
    return parse(doc, path)


def write(fit: Fitted, path: "str | Path") -> Path:
    """Write the file (its directory made); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(fit.to_toml())
    return path


def package_path(chip_name: str) -> Path:
    """The package's versioned file for a chip (pyto calibrate --install writes it)."""
    return PACKAGE_DIR / f"{chip_name}.toml"


_LOCK = threading.Lock()
_READ: dict = {}                    # (path, mtime_ns, size) -> Fitted
_USING: list = []                   # Fitted set by `using` (innermost last)


def _cached(path: Path) -> Fitted:
    st = path.stat()
    key = (str(path), st.st_mtime_ns, st.st_size)
    with _LOCK:
        hit = _READ.get(key)
    if hit is None:
        hit = read(path)
        with _LOCK:
            _READ[key] = hit
    return hit


def for_chip(chip: "Chip | str") -> Fitted:
    """The fitted constants the planner uses on this chip (module docstring: `using`, $PYTO_FITTED, the package's
    file, none). Read once per file version (path, mtime, size)."""
    name = chip if isinstance(chip, str) else chip.name
    for f in reversed(_USING):
        if f.chip == name:
            return f
    env = os.environ.get(ENV)
    if env is not None and env.strip().lower() in ("", "none", "off", "0"):
        return Fitted(name)
    if env:
        f = _cached(Path(env)) if Path(env).exists() else None
        if f is None:
            raise CalibrationError(f"${ENV} = {env}: no such fitted constants file (unset it, or "
                                   f"{ENV}=none for the uncalibrated planner)")
        if f.chip == name:
            return f
    path = package_path(name)
    return _cached(path) if path.exists() else Fitted(name)


def for_problem(chip: "Chip | str", p) -> Fitted:
    """for_chip's constants where they apply to the problem's input dtype (Fitted.dtypes), else none."""
    f = for_chip(chip)
    if f.dtypes and p.dtype.name not in f.dtypes:
        return Fitted(f.chip)
    return f


@contextlib.contextmanager
def using(fit: Fitted) -> Iterator[Fitted]:
    """Within the block, the planner uses `fit` on its chip (the fit's replay of the planner; tests)."""
    with _LOCK:
        _USING.append(fit)
    try:
        yield fit
    finally:
        with _LOCK:
            _USING.remove(fit)


__all__ = ["FORMAT", "Fitted", "for_chip", "for_problem", "package_path", "parse", "read", "using", "write"]
