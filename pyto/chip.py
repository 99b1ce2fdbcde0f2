"""Chip: one chip table (chips/*.toml) as a frozen dataclass, with the figures derived from it."""
from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

import chips as _chips

from .dtypes import DType
from .errors import ChipError, UnsupportedError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

BUFFERS = ("L1", "L0A", "L0B", "L0C", "UB", "BT", "FB")
FORMATS = ("ND", "DN", "NZ", "ZZ", "ZN", "NN")
# Allocation alignment in bytes per buffer (REFERENCE: L0A/L0B 512B, L0C 64B, L1/UB 32B): a capacity is a multiple
BUFFER_ALIGN = {"L1": 32, "L0A": 512, "L0B": 512, "L0C": 64, "UB": 32, "BT": 64, "FB": 64}
# The formats the emulator models per buffer (seeds/004); only L0A's differs between chips (Zz on A2/A3, Nz on 950)
MODELLED_FORMATS = {"L1": ("NZ",), "L0A": ("NZ", "ZZ"), "L0B": ("ZN",), "L0C": ("NZ",), "UB": ("ND",)}
AIV_PER_AIC = 2        # the emulator traces two AIVs per block (AIV0, AIV1)
# Keys that may be 0 (a what-if without a latency or an overhead); every other number must be positive
_ZERO_OK = {"gm_latency_cycles", "l2_latency_cycles", "l2_write_latency_cycles", "dma_setup_cycles",
            "mmad_head_cycles", "vector_head_cycles", "flag_latency_cycles", "latency"}


@dataclass(frozen=True)
class PathSpec:
    """One data path of the chip: per-core bandwidth and fixed latency."""

    bytes_per_cycle: float
    latency: float


@dataclass(frozen=True)
class Chip:
    """A chip's numbers. Load with `pyto.load_chip`; never build literals of one chip elsewhere."""

    name: str
    arch: str
    description: str
    source: str
    aic: int
    aiv_per_aic: int
    clock_ghz: float
    buffers: Mapping[str, int]
    formats: Mapping[str, str]
    dn2nz: bool                         # GM->L1 converts a DN operand to Nz on the way (seeds/004 4.4: 950PR/DT only)
    gm_bandwidth_gbs: float
    gm_bytes: int                       # GM (HBM) capacity: every GM tensor of a launch lives in it
    l2_bytes: int
    l2_bandwidth_gbs: float
    l2_line_bytes: int
    gm_latency_cycles: float
    l2_latency_cycles: float
    l2_write_latency_cycles: float
    burst_min_bytes: int
    dma_setup_cycles: float
    paths: Mapping[str, PathSpec]
    cube_cycles_per_step: Mapping[str, float]
    mmad_head_cycles: float
    vector_bytes_per_cycle: float
    vector_head_cycles: float
    scalar_cycles: float
    event_ids: int
    cross_core_flag_ids: int
    cross_core_flag_max: int
    cross_core_wait_blocks_core: bool   # A2/A3: a cross-core wait holds every pipe of its core; 950: its own
    k_split_layout_transform: bool      # 950: a phased K split needs set_mm_layout_transform and Acc fractal 1024
    unit_flag_block_bytes: int
    queue_depth: int
    flag_latency_cycles: float
    R: float
    min_tile_bytes: int
    min_datamount_per_core: int
    min_core_ratio: float
    k_thr_bytes: int
    dvalue_bytes: int
    merge_b0: int
    streamk_min_k_per_core: int
    streamk_theta: float
    streamk_workspace_per_core: int
    streamk_workspace_extra: int

    def __post_init__(self):
        # a Chip made by dataclasses.replace skips the loader: the figures the emulator divides by
        if not isinstance(self.aic, int) or self.aic < 1:
            raise ChipError(f"chip {self.name}: aic must be a positive int, got {self.aic!r}")
        if self.aiv_per_aic != AIV_PER_AIC:
            raise ChipError(f"chip table {self.source}: key 'cores.aiv_per_aic' must be {AIV_PER_AIC} (the emulator "
                            f"runs two AIVs per AI core, pl.get_subblock_idx() 0 and 1), got {self.aiv_per_aic!r}")
        for key in ("clock_ghz", "gm_bandwidth_gbs", "l2_bandwidth_gbs", "vector_bytes_per_cycle"):
            v = getattr(self, key)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ChipError(f"chip {self.name}: {key} must be a positive finite number, got {v!r}")

    # ---- derived figures -------------------------------------------------------------------
    @property
    def aiv(self) -> int:
        """Vector cores (AIVs) of the chip."""
        return self.aic * self.aiv_per_aic

    @property
    def clock_hz(self) -> float:
        """The core clock in Hz."""
        return self.clock_ghz * 1e9

    @property
    def min_core_num(self) -> int:
        """seed000 minCoreNum: ~0.8*C rounded up (26 for C = 32)."""
        return math.ceil(self.min_core_ratio * self.aic - 1e-9)

    def peak_flops(self, dtype: DType | str = DType.fp16) -> float:
        """Chip peak FLOP/s for a cube input dtype: 2*16*16*k0 FLOP per step per core."""
        d = DType[dtype] if isinstance(dtype, str) else dtype
        k0 = 32 // d.itemsize
        return 2 * 16 * 16 * k0 / self.cube_cycles_per_step[d.name] * self.aic * self.clock_hz

    def ridge(self, dtype: DType | str = DType.fp16) -> float:
        """The compute/memory balance point R in FLOP per element for a cube input dtype: the table's R
        (seeds/000 gives it for BF16/FP16) scaled by the dtype's peak FLOP per GM byte relative to fp16's."""
        d = DType[dtype] if isinstance(dtype, str) else dtype
        return self.R * (self.peak_flops(d) * d.itemsize) / (self.peak_flops(DType.fp16) * 2)

    @property
    def gm_bytes_per_cycle(self) -> float:
        """Chip-wide GM bandwidth in bytes per cube cycle."""
        return self.gm_bandwidth_gbs * 1e9 / self.clock_hz

    @property
    def l2_bytes_per_cycle(self) -> float:
        """L2 bandwidth per core clock cycle (the whole chip)."""
        return self.l2_bandwidth_gbs * 1e9 / self.clock_hz

    def capacity(self, buffer: str) -> int:
        """Bytes of an on-chip buffer ('L1', 'L0A', 'L0B', 'L0C', 'UB', 'BT', 'FB')."""
        return self.buffers[buffer]

    def has_path(self, src: str, dst: str) -> bool:
        """Whether the chip moves data from buffer src to dst (e.g. 'L0C', 'UB': not on Atlas A2)."""
        return f"{src}->{dst}" in self.paths

    def path(self, src: str, dst: str) -> PathSpec:
        """The data path src->dst, or UnsupportedError naming the chip and its paths."""
        try:
            return self.paths[_PAIR.get((src, dst)) or f"{src}->{dst}"]
        except KeyError:
            raise UnsupportedError(
                f"chip {self.name} has no data path {src}->{dst}; its paths are {', '.join(self.paths)}"
            ) from None


_PAIR = {(a, b): f"{a}->{b}" for a in ("GM",) + BUFFERS for b in ("GM",) + BUFFERS}

# TOML key -> (section path, type); the dataclass field of the same name receives the value.
_SCALARS: dict[str, tuple[str, type]] = {
    "name": ("", str), "arch": ("", str), "description": ("", str),
    "aic": ("cores", int), "aiv_per_aic": ("cores", int), "clock_ghz": ("cores", float),
    "gm_bandwidth_gbs": ("memory", float), "gm_bytes": ("memory", int), "l2_bytes": ("memory", int),
    "l2_bandwidth_gbs": ("memory", float), "l2_line_bytes": ("memory", int),
    "gm_latency_cycles": ("memory", float), "l2_latency_cycles": ("memory", float),
    "l2_write_latency_cycles": ("memory", float),
    "burst_min_bytes": ("memory", int), "dma_setup_cycles": ("memory", float),
    "mmad_head_cycles": ("cube", float), "vector_bytes_per_cycle": ("cube", float),
    "vector_head_cycles": ("cube", float), "scalar_cycles": ("cube", float),
    "event_ids": ("sync", int), "cross_core_flag_ids": ("sync", int), "cross_core_flag_max": ("sync", int),
    "cross_core_wait_blocks_core": ("sync", bool), "k_split_layout_transform": ("cube", bool),
    "unit_flag_block_bytes": ("sync", int), "queue_depth": ("sync", int),
    "flag_latency_cycles": ("sync", float),
    "R": ("planner", float), "min_tile_bytes": ("planner", int), "min_datamount_per_core": ("planner", int),
    "min_core_ratio": ("planner", float), "k_thr_bytes": ("planner", int), "dvalue_bytes": ("planner", int),
    "merge_b0": ("planner", int), "streamk_min_k_per_core": ("planner", int),
    "streamk_theta": ("planner", float), "streamk_workspace_per_core": ("planner", int),
    "streamk_workspace_extra": ("planner", int),
}
# keys added after tables were written: absent, they take another key's value (l2_write_latency_cycles: a table
# from before writes landed in L2 had one L2 latency)
_OPTIONAL = {"l2_write_latency_cycles": "l2_latency_cycles"}
_REQUIRED_PATHS = ("GM->L1", "L1->L0A", "L1->L0B", "L0C->GM", "L0C->L1", "GM->UB", "UB->GM")


class _Reader:
    """Typed access to a parsed TOML document; every failure names the file and the key."""

    def __init__(self, doc: dict, file: str):
        self.doc, self.file = doc, file

    def get(self, section: str, key: str, typ: type):
        full = f"{section}.{key}" if section else key
        node = self.doc
        for part in filter(None, section.split(".")):
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or key not in node:
            raise ChipError(f"chip table {self.file}: missing key '{full}'")
        val = node[key]
        ok = isinstance(val, typ) and (typ is bool or not isinstance(val, bool))
        if typ is float and isinstance(val, int) and not isinstance(val, bool):
            val, ok = float(val), True
        if not ok:
            raise ChipError(f"chip table {self.file}: key '{full}' must be {typ.__name__}, "
                            f"got {type(val).__name__} {val!r}")
        if typ is float and not math.isfinite(val):
            raise ChipError(f"chip table {self.file}: key '{full}' must be a finite number, got {val!r}")
        if typ in (int, float) and (val < 0 or (val == 0 and key not in _ZERO_OK)):
            raise ChipError(f"chip table {self.file}: key '{full}' must be "
                            f"{'>= 0' if key in _ZERO_OK else 'positive'}, got {val!r}")
        return val

    def only(self, section: str, known) -> None:
        """A ChipError for a key of [section] that is not one of `known` (a misspelt name is otherwise ignored)."""
        extra = [k for k in self.table(section) if k not in known]
        if extra:
            raise ChipError(f"chip table {self.file}: unknown key '{section}.{extra[0]}' (known: {', '.join(known)})")

    def table(self, key: str) -> dict:
        val = self.doc.get(key)
        if not isinstance(val, dict):
            raise ChipError(f"chip table {self.file}: missing table '[{key}]'")
        return val


def _parse(doc: dict, file: str) -> Chip:
    r = _Reader(doc, file)
    kw = {k: r.get(sec, k, t) for k, (sec, t) in _SCALARS.items() if k not in _OPTIONAL}
    for k, fallback in _OPTIONAL.items():
        sec, t = _SCALARS[k]
        kw[k] = r.get(sec, k, t) if k in (r.doc.get(sec) or {}) else kw[fallback]
    if kw["min_core_ratio"] > 1:
        raise ChipError(f"chip table {file}: key 'planner.min_core_ratio' is a share of the cores (<= 1), got "
                        f"{kw['min_core_ratio']}")
    r.only("buffers", BUFFERS)
    buffers = {}
    for b in BUFFERS:
        buffers[b] = r.get("buffers", b, int)
        if buffers[b] % BUFFER_ALIGN[b]:
            raise ChipError(f"chip table {file}: key 'buffers.{b}' must be a multiple of {BUFFER_ALIGN[b]} B (its "
                            f"allocation alignment), got {buffers[b]}")
    kw["buffers"] = MappingProxyType(buffers)
    r.only("formats", tuple(MODELLED_FORMATS) + ("dn2nz",))
    formats = {}
    for b, modelled in MODELLED_FORMATS.items():
        f = r.get("formats", b, str).upper()
        if f not in modelled:
            raise ChipError(f"chip table {file}: key 'formats.{b}': the emulator models {b} as "
                            f"{' or '.join(modelled)} (seeds/004), got {f!r}")
        formats[b] = f
    kw["formats"] = MappingProxyType(formats)
    # a table from before the key: no DN -> Nz conversion on GM -> L1 (what seeds/004 gives every chip but the 950)
    kw["dn2nz"] = r.get("formats", "dn2nz", bool) if "dn2nz" in r.table("formats") else False
    paths = {}
    ends = ("GM",) + BUFFERS
    for name in r.table("paths"):
        src, _, dst = name.partition("->")
        if src not in ends or dst not in ends or src == dst:
            raise ChipError(f"chip table {file}: key 'paths.\"{name}\"' is not a data path 'SRC->DST' between "
                            f"{', '.join(ends)}")
        paths[name] = PathSpec(r.get(f"paths.{name}", "bytes_per_cycle", float),
                               r.get(f"paths.{name}", "latency", float))
    for name in _REQUIRED_PATHS:
        if name not in paths:
            raise ChipError(f"chip table {file}: missing key 'paths.\"{name}\"'")
    kw["paths"] = MappingProxyType(paths)
    kw["cube_cycles_per_step"] = MappingProxyType(
        {d.name: r.get("cube", f"{d.name}_cycles_per_step", float) for d in (DType.fp16, DType.bf16,
                                                                            DType.int8, DType.fp32)})
    kw["source"] = file
    return Chip(**kw)


_CACHE: dict[tuple, Chip] = {}
_RESOLVED: dict[str, str] = {}     # a bundled chip's name -> its table's resolved path (found once)


def load_chip(name: "str | Path | Chip" = "ascend950pr") -> Chip:
    """Load a bundled chip by name ('ascend950pr', 'atlas-a2', 'atlas-a3') or a .toml path. Tables are cached
    per file and read again when the file changes (a what-if edit is seen by the next load)."""
    if isinstance(name, Chip):
        return name
    resolved = _RESOLVED.get(str(name))
    if resolved is None:
        path = Path(str(name))
        bundled = not (path.suffix == ".toml" or path.exists())
        if bundled:
            path = _chips.chip_path(str(name))
            if not path.exists():
                raise ChipError(f"unknown chip {str(name)!r}; known chips: {', '.join(list_chips())} (or give a .toml "
                                f"path)")
        resolved = str(path.resolve())
        if bundled:          # (a path given is resolved each time: it may be relative to a working directory)
            _RESOLVED[str(name)] = resolved
    path = Path(resolved)
    try:
        stat = os.stat(resolved)
        key = (resolved, stat.st_mtime_ns, stat.st_size)
        if key in _CACHE:
            return _CACHE[key]
        for old in [k for k in _CACHE if k[0] == key[0]]:      # an edited table's earlier versions
            del _CACHE[old]
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except OSError as e:
        raise ChipError(f"cannot read chip table {path}: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ChipError(f"chip table {path} is not valid TOML: {e}") from None
    chip = _parse(doc, str(path))
    _CACHE[key] = chip
    return chip


def list_chips() -> list[str]:
    """Names of the bundled chips."""
    return _chips.chip_names()


assert {f.name for f in fields(Chip)} >= set(_SCALARS)
