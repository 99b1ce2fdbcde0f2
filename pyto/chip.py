"""Chip: one chip table (chips/*.toml) as a frozen dataclass, with the figures derived from it.

Every key of a table has one rule in _RULES (its type, range and relations, and why): the loader reads the keys
it lists (any other key is a ChipError), and the Chip checks each field against its rule when it is made, by the
loader or by dataclasses.replace."""
from __future__ import annotations

import math
import os
import sys
from contextvars import ContextVar
from dataclasses import dataclass, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, Optional

import pyto_chips as _chips

from .dtypes import DType
from .errors import ChipError, UnsupportedError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

BUFFERS = ("L1", "L0A", "L0B", "L0C", "UB", "BT", "FB")
# The MX scale buffers (PyPTO-Pro MemorySpace.md: ScaleLeft / ScaleRight, the E8M0 scale domains paired with L0A /
# L0B, "独立于Left/Right数据地址域的4KB逻辑容量"): optional, a table without them has no MX cube (Atlas A2/A3:
# matmul_mx.md supports the 950 only), and a scale tile there is an UnsupportedError naming the chip.
MX_BUFFERS = ("L0A_MX", "L0B_MX")
# The 4:2 sparse index buffer (pyto's SparseIndex): the cube's own buffer LoadDataWithSparse fills with the 2-bit index
# beside L0B ("索引矩阵存储在内部缓冲区", MmadWithSparse.md; Atlas A2/A3 only: the 950 removed 4:2 sparsity). Optional
# likewise: a table without it has no sparse cube (language/cube_sparse.py).
SPARSE_BUFFERS = ("L0B_SP",)
OPTIONAL_BUFFERS = MX_BUFFERS + SPARSE_BUFFERS
FORMATS = ("ND", "DN", "NZ", "ZZ", "ZN", "NN")
# Allocation alignment in bytes per buffer (docs/chips.md §6: L0A/L0B 512B, L0C 64B, L1/UB 32B): a capacity is a multiple
BUFFER_ALIGN = {"L1": 32, "L0A": 512, "L0B": 512, "L0C": 64, "UB": 32, "BT": 64, "FB": 64,
                "L0A_MX": 32, "L0B_MX": 32,     # (MemorySpace.md: ScaleLeft / ScaleRight 32-byte address alignment)
                "L0B_SP": 128}                  # (one 128 B index fractal: L0B's 512 B / 4, at L0B's address / 4)
# The formats the emulator models per buffer (docs/fractal_formats.md §4); only L0A's differs between chips (Zz on A2/A3, Nz on 950)
MODELLED_FORMATS = {"L1": ("NZ",), "L0A": ("NZ", "ZZ"), "L0B": ("ZN",), "L0C": ("NZ",), "UB": ("ND",)}
AIV_PER_AIC = 2        # the emulator traces two AIVs per block (AIV0, AIV1)
CROSS_CORE_IDS = 16    # pl.system.set_cross_core / wait_cross_core take ids 0..15 (pyto/language/system.py)
L0C_FRACTAL_BYTES = 16 * 16 * 4   # one Nz fractal of an fp32/int32 accumulator: the smallest L0C tile
# The smallest tile of each buffer (pyto/language/tile.py padded_of: 16 x 16 on the fractal buffers, 32 B ND rows
# on the others): a capacity below it holds no tile
SMALLEST_TILE = {"L1": (512, "16 x 16 fp16"), "L0A": (512, "16 x 16 fp16"), "L0B": (512, "16 x 16 fp16"),
                 "L0C": (L0C_FRACTAL_BYTES, "16 x 16 fp32"), "UB": (32, "one 32 B row"), "BT": (32, "one 32 B row"),
                 "FB": (32, "one 32 B row"), "L0A_MX": (32, "one 16 x 2 e8m0 fractal"),
                 "L0B_MX": (32, "one 2 x 16 e8m0 fractal"), "L0B_SP": (128, "one 8 x 16 sparse index fractal")}
MAX_AIC = 4096         # planning walks core counts and their divisors: beyond 128x the 950's 32 is a typo
MAX_COUNT = 4096       # ids, queue depths, counters, group sizes
MAX_BYTES = 1 << 48    # sizes in bytes (256 TiB): int64 addresses and float64 byte sums stay exact
TINY, HUGE = 1e-6, 1e12   # the span of a rate, a clock or a cycle count (the bundled tables' lie in 0.8..5200)
CUBE_DTYPES = (DType.fp16, DType.bf16, DType.int8, DType.fp32)   # the cube's input types (cycles per step each)
# The 8-bit float cube inputs and the key of their rate, cube.<key>_cycles_per_step, in the tables that have one
# (FP8 E4M3FN, E5M2 and their mixes share one rate): optional, and a table without it has no such cube (Atlas A2/A3:
# PyPTO-Pro's matmul_acc.md lists FP8/HF8 x FP8/HF8 -> FP32 for the 950 only); cube_cycles_per_step holds it under
# each dtype's name, as it holds the others'.
LOWP_RATE_KEYS = {DType.fp8e4m3fn: "fp8", DType.fp8e5m2: "fp8", DType.hf8: "hf8"}
# The MX matmuls' rates (pl.matmul_mx), optional likewise: cube_cycles_per_step item -> table key. MXFP8 has its own
# key (steps of 16x32x16); FP4's only cube mode is MXFP4, so its rate sits under the FP4 dtypes' names (steps of
# 16x64x16, k0 = 64). A table without them has no such mode (UnsupportedError at the MMAD).
MX_RATE_KEYS = {"mxfp8": "mxfp8", DType.fp4e2m1.name: "mxfp4", DType.fp4e1m2.name: "mxfp4"}


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
    dn2nz: bool                         # GM->L1 converts a DN operand to Nz on the way (docs/fractal_formats.md §4.4: 950PR/DT only)
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
        # every field against its rule (_RULES), a Chip made by dataclasses.replace as well as a loaded one
        _validate(self)

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
        """docs/bmm_branches.md §2 minCoreNum: ~0.8*C rounded up (26 for C = 32)."""
        return math.ceil(self.min_core_ratio * self.aic - 1e-9)

    def has_cube(self, dtype: DType) -> bool:
        """Whether the chip's cube takes `dtype` inputs (its table gives their rate)."""
        return dtype.name in self.cube_cycles_per_step

    def peak_flops(self, dtype: DType | str = DType.fp16) -> float:
        """Chip peak FLOP/s for a cube input dtype: 2*16*16*k0 FLOP per step per core (UnsupportedError for a
        dtype the chip's cube does not take)."""
        d = DType[dtype] if isinstance(dtype, str) else dtype
        if not self.has_cube(d):
            raise UnsupportedError(f"chip {self.name} has no {d.name} cube (its table {self.source} gives no "
                                   f"cube.{LOWP_RATE_KEYS.get(d, d.name)}_cycles_per_step)")
        k0 = 32 // d.itemsize
        return 2 * 16 * 16 * k0 / self.cube_cycles_per_step[d.name] * self.aic * self.clock_hz

    def ridge(self, dtype: DType | str = DType.fp16) -> float:
        """The compute/memory balance point R in FLOP per element for a cube input dtype: the table's R
        (docs/bmm_branches.md §2 gives it for BF16/FP16) scaled by the dtype's peak FLOP per GM byte relative to fp16's."""
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
        """Bytes of an on-chip buffer ('L1', 'L0A', 'L0B', 'L0C', 'UB', 'BT', 'FB'; 'L0A_MX', 'L0B_MX' where the
        table has them)."""
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


_PAIR = {(a, b): f"{a}->{b}" for a in ("GM",) + BUFFERS + OPTIONAL_BUFFERS for b in ("GM",) + BUFFERS + OPTIONAL_BUFFERS}
_REQUIRED_PATHS = ("GM->L1", "L1->L0A", "L1->L0B", "L0C->GM", "L0C->L1", "GM->UB", "UB->GM")


# ---- the rules: every key of a chip table, the Chip field it fills, what it may hold and why -------------------
_REQUIRED = object()


@dataclass(frozen=True)
class _Rule:
    """One key of a chip table. Checked in order: the type, finiteness (numbers), `also` (value-only tests),
    the range [lo, hi] (lo excluded when `open_lo`), then, once every key has passed those, `at_least` (its
    relations to other keys). A failure is a ChipError naming the file, the key, the value and what the rule
    allows."""

    key: str                    # the TOML key, dotted: 'sync.unit_flag_block_bytes'
    field: Optional[str]        # the Chip field it fills (None: recorded in the table, not used)
    item: Optional[str]         # the field's mapping key ('buffers' 'L1'), or None
    typ: type                   # bool, int, float (an int is taken as a float) or str
    lo: Optional[float] = None
    hi: Optional[float] = None
    open_lo: bool = False
    why: str = ""               # why the range, appended to its message
    also: tuple = ()            # (test(value) -> bool, "what it must be") pairs
    at_least: tuple = ()        # (key, why) pairs: the value is at least that key's (a relation between fields)
    default: Any = _REQUIRED    # absent: this value; a _Same(key) takes another key's value


@dataclass(frozen=True)
class _Same:
    """A default that is another key's value (a key added after tables were written)."""
    key: str


def _r(key: str, typ: type, lo=None, hi=None, *, field: Optional[str] = "", item: Optional[str] = None,
       **kw) -> _Rule:
    return _Rule(key, key.rpartition(".")[2] if field == "" else field, item, typ, lo, hi, **kw)


def _size(key, lo=1, hi=MAX_BYTES, why=" B", **kw) -> _Rule:
    return _r(key, int, lo, hi, why=why, **kw)


def _count(key, lo=1, hi=MAX_COUNT, why=" (the bundled chips' counts are at most 32: one beyond 4096 is a "
                                        "typo)", **kw) -> _Rule:
    return _r(key, int, lo, hi, why=why, **kw)


def _rate(key, **kw) -> _Rule:
    """A rate, a clock or a divisor: positive (the emulator divides by it) within [TINY, HUGE]."""
    return _r(key, float, TINY, HUGE, **kw)


def _cycles(key, **kw) -> _Rule:
    """A latency or an overhead in cycles: 0 is a what-if without it."""
    return _r(key, float, 0.0, HUGE, why=" cycles (0: a what-if without it)", **kw)


def _flag(key, **kw) -> _Rule:
    return _r(key, bool, **kw)


def _text(key, **kw) -> _Rule:
    return _r(key, str, **kw)


def _pow2(v) -> bool:
    return v <= 0 or v & (v - 1) == 0


_POW2 = (_pow2, "a power of two")


def _buffer(b: str, **kw) -> _Rule:
    a, t = BUFFER_ALIGN[b], SMALLEST_TILE[b]
    why = f" B (at least its smallest tile, {t[1]} = {t[0]} B, and its allocation alignment, {a} B)"
    return _size(f"buffers.{b}", max(a, t[0]), field="buffers", item=b, why=why, **kw,
                 also=((lambda v: v <= 0 or v % a == 0,
                        f"a multiple of {a} B (its allocation alignment, pyto.chip.BUFFER_ALIGN['{b}'])"),))


def _format(b: str) -> _Rule:
    modelled = MODELLED_FORMATS[b]
    return _text(f"formats.{b}", field="formats", item=b,
                 also=((lambda v: v in modelled, f"{' or '.join(modelled)} (the emulator models {b} as "
                                                 f"{' or '.join(modelled)}, docs/fractal_formats.md §4)"),))


_MAX_ITEMSIZE = max(d.itemsize for d in CUBE_DTYPES)

_RULES: tuple[_Rule, ...] = (
    _text("name", also=((bool, "a non-empty string"),)),
    _text("arch"),
    _text("description"),
    _count("cores.aic", hi=MAX_AIC, why=" (planning walks the core counts and their divisors: a count beyond 4096, "
                                        "128x the 950's 32 AI cores, is a typo, and 10**30 would never finish)"),
    _count("cores.aiv_per_aic", AIV_PER_AIC, AIV_PER_AIC,
           why=" (the emulator runs two AIVs per AI core, pl.get_subblock_idx() 0 and 1)"),
    _rate("cores.clock_ghz", why=" GHz"),
    _rate("cores.clock_ghz_opsnn", field=None, default=None, why=" GHz (recorded, not used for timing)"),
    *(_buffer(b) for b in BUFFERS),
    *(_buffer(b, default=None) for b in OPTIONAL_BUFFERS),     # optional (MX_BUFFERS, SPARSE_BUFFERS)
    *(_format(b) for b in MODELLED_FORMATS),
    # a table from before the key: no DN -> Nz conversion on GM -> L1 (what docs/fractal_formats.md §4.4 gives every chip but the 950)
    _flag("formats.dn2nz", default=False),
    _rate("memory.gm_bandwidth_gbs", why=" GB/s"),
    _size("memory.gm_bytes", at_least=(("memory.l2_bytes", "L2 caches GM"),)),
    _size("memory.l2_bytes", at_least=(("memory.l2_line_bytes", "L2 holds at least one line"),)),
    _rate("memory.l2_bandwidth_gbs", why=" GB/s"),
    _size("memory.l2_line_bytes", also=(_POW2,)),
    _cycles("memory.gm_latency_cycles"),
    _cycles("memory.l2_latency_cycles"),
    # a table from before writes landed in L2 had one L2 latency
    _cycles("memory.l2_write_latency_cycles", default=_Same("memory.l2_latency_cycles")),
    _size("memory.burst_min_bytes", also=(_POW2,)),
    _cycles("memory.dma_setup_cycles"),
    *(_rate(f"cube.{d.name}_cycles_per_step", field="cube_cycles_per_step", item=d.name,
            why=" cycles (peak FLOP/s divides by it)") for d in CUBE_DTYPES),
    # optional (default None: absent, no such cube); one key may fill two dtypes' items (fp8: E4M3FN and E5M2)
    *(_rate(f"cube.{key}_cycles_per_step", field="cube_cycles_per_step", item=d.name, default=None,
            why=" cycles per 16x32x16 step (peak FLOP/s divides by it)") for d, key in LOWP_RATE_KEYS.items()),
    *(_rate(f"cube.{key}_cycles_per_step", field="cube_cycles_per_step", item=item, default=None,
            why=" cycles per MX step (16x32x16 MXFP8, 16x64x16 MXFP4)") for item, key in MX_RATE_KEYS.items()),
    _cycles("cube.mmad_head_cycles"),
    _rate("cube.vector_bytes_per_cycle", why=" B/cycle"),
    _cycles("cube.vector_head_cycles"),
    _flag("cube.k_split_layout_transform"),
    _rate("cube.scalar_cycles", why=" cycles (every sync instruction takes time)"),
    _count("sync.event_ids"),
    _count("sync.cross_core_flag_ids", CROSS_CORE_IDS, CROSS_CORE_IDS,
           why=" (pl.system.set_cross_core/wait_cross_core take ids 0..15 and sync_all reserves 11..14, "
               "pyto/language/system.py: another count would be ignored)"),
    _count("sync.cross_core_flag_max"),
    _flag("sync.cross_core_wait_blocks_core"),
    _size("sync.unit_flag_block_bytes", 1, L0C_FRACTAL_BYTES,
          also=((lambda v: v <= 0 or L0C_FRACTAL_BYTES % v == 0,
                 f"a divisor of the {L0C_FRACTAL_BYTES}-byte L0C fractal (16 x 16 x 4 B: 1, 2, 4, ..., "
                 f"{L0C_FRACTAL_BYTES}), so that every fractal has at least one unit_flag bit"),)),
    _count("sync.queue_depth"),
    _cycles("sync.flag_latency_cycles"),
    _rate("planner.R", why=" FLOP per element"),
    _size("planner.min_tile_bytes"),
    _size("planner.min_datamount_per_core"),
    _r("planner.min_core_ratio", float, 0.0, 1.0, open_lo=True, why=" (a share of the cores)"),
    _size("planner.k_thr_bytes"),
    _size("planner.dvalue_bytes", _MAX_ITEMSIZE,
          why=f" B (at least the largest cube dtype's size, {_MAX_ITEMSIZE} B: planning steps K by "
              f"dvalue_bytes // itemsize elements and divides by it)"),
    _count("planner.merge_b0"),
    _size("planner.streamk_min_k_per_core", why=" elements of K"),
    _rate("planner.streamk_theta"),
    _size("planner.streamk_workspace_per_core"),
    _size("planner.streamk_workspace_extra"),
)
# each [paths."SRC->DST"] table
_PATH_RULES = (_rate("bytes_per_cycle", why=" B/cycle"), _cycles("latency"))
_PATH_KEYS = tuple(r.key for r in _PATH_RULES)
_TABLES = tuple(dict.fromkeys(r.key.partition(".")[0] for r in _RULES if "." in r.key)) + ("paths",)


def _show(v) -> str:
    s = repr(v)
    return s if len(s) <= 40 else f"{s[:20]}... ({len(s)} characters)"


def _span(rule: _Rule) -> str:
    """The rule's range in words: 'a positive int, at most 4096', 'a finite number >= 0, at most 1e+12', ..."""
    lo, hi = rule.lo, rule.hi
    if rule.typ is int:
        if lo == hi:
            return f"{lo}"
        top = "2**48" if hi == MAX_BYTES else f"{hi}"
        return f"a positive int, at most {top}" if lo == 1 else f"an int from {lo} to {top}"
    if lo == 0 and rule.open_lo:
        return f"a positive finite number, at most {hi:g}"
    if lo == 0:
        return f"a finite number >= 0, at most {hi:g}"
    return f"a positive finite number from {lo:g} to {hi:g}"


_TYPE_WORD = {int: "an int", float: "a number", bool: "a boolean (true or false)", str: "a string"}


def _check(rule: _Rule, key: str, v, where: str) -> None:
    """ChipError unless v passes the rule's type, finiteness, `also` tests and range (not its relations)."""
    typ = rule.typ
    ok = (isinstance(v, bool) if typ is bool else
          isinstance(v, (int, float)) and not isinstance(v, bool) if typ is float else
          isinstance(v, typ) and not isinstance(v, bool))
    if not ok:
        raise ChipError(f"{where}: key '{key}' must be {_TYPE_WORD[typ]}, got {type(v).__name__} {_show(v)}")
    if typ is float and isinstance(v, float) and not math.isfinite(v):
        raise ChipError(f"{where}: key '{key}' must be {_span(rule)}{rule.why}, got {_show(v)} (not finite)")
    for test, says in rule.also:
        if not test(v):
            raise ChipError(f"{where}: key '{key}' must be {says}, got {_show(v)}")
    if typ in (int, float) and (v < rule.lo or (rule.open_lo and v == rule.lo) or v > rule.hi):
        raise ChipError(f"{where}: key '{key}' must be {_span(rule)}{rule.why}, got {_show(v)}")


def _validate(chip: "Chip") -> None:
    """Every field of `chip` against _RULES (and its data paths against _PATH_RULES): a ChipError for the first
    that breaks its rule."""
    if _LOADING.get() == chip.source:
        where = f"chip table {chip.source}"
    else:       # dataclasses.replace or Chip(...): the value is not the table's
        where = f"chip {chip.name!r} (built in code from chip table {chip.source})"
    for m in ("buffers", "formats", "cube_cycles_per_step", "paths"):
        if not isinstance(getattr(chip, m), Mapping):
            raise ChipError(f"{where}: '{m}' must be a mapping, got {type(getattr(chip, m)).__name__}")
    for rule in _RULES:
        if rule.field is not None:
            v = _field(chip, rule, where)
            if v is not None or rule.default is not None:      # (an optional rate a table leaves out: None)
                _check(rule, rule.key, v, where)
    by_key = {rule.key: rule for rule in _RULES}
    for rule in _RULES:
        for other, why in rule.at_least:
            v, w = _field(chip, rule, where), _field(chip, by_key[other], where)
            if v < w:
                raise ChipError(f"{where}: key '{rule.key}' must be at least {other} = {_show(w)} ({why}), "
                                f"got {_show(v)}")
    ends = ("GM",) + BUFFERS + OPTIONAL_BUFFERS
    for name, spec in chip.paths.items():
        src, _, dst = str(name).partition("->")
        if src not in ends or dst not in ends or src == dst:
            raise ChipError(f"{where}: key 'paths.\"{name}\"' is not a data path 'SRC->DST' between "
                            f"{', '.join(ends)}")
        if not isinstance(spec, PathSpec):
            raise ChipError(f"{where}: key 'paths.\"{name}\"' must be a PathSpec, got {type(spec).__name__}")
        for rule in _PATH_RULES:
            _check(rule, f"paths.\"{name}\".{rule.key}", getattr(spec, rule.key), where)
    for name in _REQUIRED_PATHS:
        if name not in chip.paths:
            raise ChipError(f"{where}: missing key 'paths.\"{name}\"' (every chip has GM->L1, L1->L0A, L1->L0B, "
                            f"L0C->GM, L0C->L1, GM->UB and UB->GM)")


def _field(chip: "Chip", rule: _Rule, where: str):
    v = getattr(chip, rule.field)
    if rule.item is None:
        return v
    if rule.item not in v:
        if rule.default is None:       # optional (an 8-bit float rate): absent
            return None
        raise ChipError(f"{where}: missing key '{rule.key}'")
    return v[rule.item]


# ---- reading a table --------------------------------------------------------------------------------------------
class _Reader:
    """Typed access to a parsed TOML document; every failure names the file and the key."""

    def __init__(self, doc: dict, file: str):
        self.doc, self.file = doc, file
        self.where = f"chip table {file}"

    def table(self, name: str) -> dict:
        if name not in self.doc:
            raise ChipError(f"{self.where}: missing table '[{name}]'")
        val = self.doc[name]
        if not isinstance(val, dict):
            raise ChipError(f"{self.where}: '{name}' must be a table [{name}], got {type(val).__name__} {_show(val)}")
        return val

    def lookup(self, key: str, default=_REQUIRED):
        """The value at dotted `key` ('sync.event_ids'), `default` when absent (or a ChipError naming it)."""
        section, _, leaf = key.rpartition(".")
        node = self.table(section) if section else self.doc
        if leaf not in node:
            if default is _REQUIRED:
                raise ChipError(f"{self.where}: missing key '{key}'")
            return default
        return node[leaf]

    def value(self, rule: _Rule, key: str, node: Optional[dict] = None, known: Optional[dict] = None):
        """A rule's value as the Chip takes it: the default when absent, an int as a float for a float key, a
        format in upper case. Checked by _check (here for a recorded key, else by the Chip it fills)."""
        if node is None:
            v = self.lookup(key, rule.default)
        elif rule.key in node:
            v = node[rule.key]
        else:
            raise ChipError(f"{self.where}: missing key '{key}'")
        if isinstance(v, _Same):
            v = known[v.key]
        if rule.typ is float and isinstance(v, int) and not isinstance(v, bool) and abs(v) <= HUGE * 1e3:
            v = float(v)       # (a larger int stays one: its range check names it, float() might overflow)
        if rule.field == "formats" and isinstance(v, str):
            v = v.upper()
        return v

    def only_known(self) -> None:
        """A ChipError for a key or table the rules do not know (a misspelt name is otherwise ignored)."""
        known: dict = {"": set(_TABLES)}
        for rule in _RULES:
            section, _, leaf = rule.key.rpartition(".")
            known.setdefault(section, set()).add(leaf)
        for section, keys in known.items():
            node = self.table(section) if section else self.doc
            extra = [k for k in node if k not in keys]
            if extra:
                full = f"{section}.{extra[0]}" if section else extra[0]
                raise ChipError(f"{self.where}: unknown key '{full}' (known{' in [' + section + ']' if section else ''}"
                                f": {', '.join(sorted(keys))})")


_LOADING: ContextVar[Optional[str]] = ContextVar("pyto_chip_loading", default=None)   # the table _parse reads


def _parse(doc: dict, file: str) -> Chip:
    token = _LOADING.set(file)
    try:
        return _build(doc, file)
    finally:
        _LOADING.reset(token)


def _build(doc: dict, file: str) -> Chip:
    r = _Reader(doc, file)
    r.only_known()
    kw: dict = {"buffers": {}, "formats": {}, "cube_cycles_per_step": {}, "source": file}
    values: dict = {}
    for rule in _RULES:
        v = values[rule.key] = r.value(rule, rule.key, known=values)
        if rule.field is None:
            if v is not None:
                _check(rule, rule.key, v, r.where)
        elif rule.item is None:
            kw[rule.field] = v
        elif v is not None:            # (None: an optional item the table leaves out)
            kw[rule.field][rule.item] = v
    paths = {}
    for name, node in r.table("paths").items():         # (the names and values are checked by the Chip)
        key = f"paths.\"{name}\""
        if not isinstance(node, dict):
            raise ChipError(f"{r.where}: '{key}' must be a table [{key}] with {' and '.join(_PATH_KEYS)}, got "
                            f"{type(node).__name__} {_show(node)}")
        extra = [k for k in node if k not in _PATH_KEYS]
        if extra:
            raise ChipError(f"{r.where}: unknown key '{key}.{extra[0]}' (known: {', '.join(_PATH_KEYS)})")
        paths[name] = PathSpec(**{rule.key: r.value(rule, f"{key}.{rule.key}", node) for rule in _PATH_RULES})
    kw["paths"] = paths
    for m in ("buffers", "formats", "cube_cycles_per_step", "paths"):
        kw[m] = MappingProxyType(kw[m])
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
            data = fh.read()
        doc = tomllib.loads(data.decode("utf-8"))
    except OSError as e:
        raise ChipError(f"cannot read chip table {path}: {e}") from None
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ChipError(f"chip table {path} is not UTF-8 text (TOML is UTF-8): byte {data[e.start]:#04x} at offset "
                        f"{e.start}, line {line}: {e.reason}") from None
    except tomllib.TOMLDecodeError as e:
        raise ChipError(f"chip table {path} is not valid TOML: {e}") from None
    chip = _parse(doc, str(path))
    _CACHE[key] = chip
    return chip


def list_chips() -> list[str]:
    """Names of the bundled chips."""
    return _chips.chip_names()


assert {f.name for f in fields(Chip)} == {r.field for r in _RULES if r.field} | {"paths", "source"}
