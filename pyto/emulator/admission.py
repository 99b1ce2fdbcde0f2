"""Host-memory admission: before a launch traces everything, the host memory it will hold at its peak, and a
CapacityError naming that estimate, the memory available and what to do when it does not fit (instead of the
OOM killer ending the process after minutes, without a word).

The estimate. A launch holds, at its peak,

    instructions x bytes each  +  instructions of blocks encoded apart x ~1 KB  +  full mode's arrays

* instructions: pyto_kernels.bmm counts a plan's from its tiling without tracing (kernels/bmm/footprint.py)
  and checks before it makes or traces anything. `pyto.run` / `pyto.compile` (and `@pl.jit` launches, which
  call run) check once the second block is traced (`Gate`, run.py `_compile`): the blocks so far plus the
  largest one's count for each block left, and again after every block. A compiled kernel's first call checks
  its data pass with the exact count. In timing mode a block's trace goes once it is encoded: what stays is its
  encoded rows and, with checks, the checked pass's integer rows (check/rows.py: a block that shares an earlier
  block's encoding keeps only its GM moves, a few bytes an instruction); full mode and pyto.compile keep every
  trace for the data pass. A block that does not share an earlier block's auto-sync and encoding (blockcache.py)
  holds its own code (and with checks its own rows) too: PER_INSTRUCTION["code"] more per instruction.
* bytes per instruction (PER_INSTRUCTION). Calibration: a fresh process's peak resident set over its resident
  set before the launch (VmHWM after clear_refs; bf16, ascend950pr, after a warm-up launch; 2026-12-01, the
  2-core development machine), with the estimate / measured ratio (from the plan; from the launch's own first
  check):

    | timing mode                                    | race checks on          | checks off           |
    |------------------------------------------------|-------------------------|----------------------|
    | ASW 32 x 1024^3, 66,560 instructions, 32 cores | 352 B (1.15, 1.15)      | 351 B (1.12, 1.12)   |
    | ASW 32 x 2048^2 x 4096, 1,003,520              | 300 B (1.33, 1.33)      | 295 B (1.33, 1.33)   |
    | MergeBatch 1024 x 64^2 x 512, 11,264           | 829 B (0.49, 0.49)      | 818 B (0.48, 0.48)   |
    | StreamK 2 x 64^2 x 262144, 28,608              | 434 B (0.93, 0.96)      | 419 B (0.94, 1.01)   |

  (race checks on: re-measured 2026-12-02 once the checked pass kept integer rows instead of the trace; it was
  1,084 / 1,050 / 1,796 / 1,697 B. 32 x 4096^3, 4,014,080 instructions: 280 B with checks.)

    | full mode (peak, arrays included)              | measured   | estimate / measured  |
    |------------------------------------------------|------------|----------------------|
    | ASW 32 x 1024^3                                | 648 MiB    | 1.11, 1.11           |
    | ASW 32 x 256^2 x 8192                          | 841 MiB    | 1.05, 1.05           |
    | ASW 8 x 2048^2 x 256                           | 217 MiB    | 1.14, 1.14           |
    | ASW 8 x 1024^2 x 512                           | 104 MiB    | 1.21, 1.21           |
    | MergeBatch 1024 x 64^2 x 512                   | 214 MiB    | 1.23, 1.23           |
    | StreamK 2 x 64^2 x 262144                      | 445 MiB    | 1.14, 1.08           |
    | flash attention N = 65536                      | 123 MiB    | -, 1.40              |

  The phases behind the figures: in timing mode the schedule's peak (the encoded launch and the event loop's
  arrays, ~300 B an instruction), the checked pass after it well under that; in full mode (32 x 1024^3) the
  trace ~1.0 KB an instruction, binding the data pass 1.3-1.7 KB more (both alive while it binds), then the
  arrays. Kernels differ: MergeBatch's ndNum loads
  and StreamK's AIV side hold more per instruction than the ASW kernels the constants are set on, so their
  timing-mode estimates run low (0.5-0.7x).
* the arrays of full mode (`data_pass_arrays`, from the first block's trace or a BMM plan): a staged copy of
  every GM tensor (a broadcast view's compact base only: memory.py stages it as a view), the widened fp32
  copy (float64 for int8) of each fp16/bf16/int8/FP8/HF8 input a load copies whole into an L1 tile, the outputs (the
  caller's arrays are written at the end: untouched np.zeros pages become resident then), workspaces, the
  tiles, and the K-stacked products an L0C tile may queue (memory._Products: (m + n) x K rounded up to
  2048 x 2^j, fp32), once per core, only for chains whose operands are not copies of GM (`_at_source`: a K loop
  read as two GM regions stacks nothing; the BMM kernels' only such chains are MergeBatch's ndNum slots). The
  full-mode figures were re-measured on 2026-12-01 after the data pass read streamed L1 pieces at their source
  (flash attention's is older).

What is available (`available`): the smallest of /proc/meminfo's MemAvailable, the cgroups' limits less their
usage (v2 memory.max, v1 memory.limit_in_bytes; reclaimable page cache not counted as used), and RLIMIT_AS less
the process's address space (VmSize) when that limit is set; elsewhere than Linux, the free physical memory
(os.sysconf), else no check. The environment variable PYTO_HOST_MEMORY_LIMIT overrides it with a budget for
the launch: a byte count with an optional K/M/G/T suffix (powers of 1024: `PYTO_HOST_MEMORY_LIMIT=8G`), or `off`
to skip the check.
"""
from __future__ import annotations

import math
import os
import re
import time
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..dtypes import DType, as_dtype
from ..errors import CapacityError, KernelError
from ..ir import Buf, GMTensor, Op, TileStore

try:
    import resource
except ImportError:         # not a Unix: no RLIMIT_AS
    resource = None

ENV = "PYTO_HOST_MEMORY_LIMIT"

# bytes per traced instruction (the module docstring's table)
PER_INSTRUCTION = {"trace": 1_100,      # full mode: the trace kept for the data pass (and checked)
                   "encoded": 330,      # timing mode: encoded rows and the schedule
                   "rows": 15,          # timing mode with checks, on top: the checked pass's rows (check/rows.py)
                   "code": 1_000,       # on top, per instruction of a block encoded apart (not shared: blockcache.py)
                   "bind": 1_700}       # full mode's data pass bound to the trace, on top of "trace"
SHARED_CODES = 2        # blocks counted as encoded apart when only a plan is known (pyto_kernels.bmm.footprint)

_PRODUCT_K = 2048                        # memory._Products' first K-stacked buffer; it doubles as it fills


def per_instruction(mode: str, check: bool, trace: bool = False) -> int:
    """Host bytes one traced instruction holds at the launch's peak (PER_INSTRUCTION), its block's code shared;
    `trace`: the trace is kept for a data pass (pyto.compile) in timing mode too."""
    if mode == "full":
        return PER_INSTRUCTION["trace"] + PER_INSTRUCTION["bind"]
    if trace and check:
        return PER_INSTRUCTION["trace"]
    return PER_INSTRUCTION["encoded"] + (PER_INSTRUCTION["rows"] if check else 0)


@dataclass(frozen=True)
class Footprint:
    """An estimate of a launch's peak host memory: instructions x bytes each, the instructions of blocks encoded
    apart x PER_INSTRUCTION['code'], plus named arrays (bytes)."""

    instructions: int
    per_instruction: int
    mode: str
    check: bool
    arrays: tuple = ()        # (what, bytes) pairs
    distinct: int = 0         # instructions in blocks encoded apart (the others share an earlier block's code)

    @property
    def trace_bytes(self) -> int:
        return self.instructions * self.per_instruction + self.distinct * PER_INSTRUCTION["code"]

    @property
    def array_bytes(self) -> int:
        return sum(n for _, n in self.arrays)

    @property
    def total(self) -> int:
        return self.trace_bytes + self.array_bytes

    def describe(self) -> str:
        """'about 12.3 GiB: 1,000,000 instructions x 1,100 B (timing mode, race checks on) + ... = ..., + arrays'."""
        how = f"{self.mode} mode" + ("" if self.mode == "full" else ", race checks on" if self.check else ", checks off")
        text = f"about {gib(self.total)}: {self.instructions:,} instructions x {self.per_instruction:,} B ({how})"
        if self.distinct:
            text += f" + {self.distinct:,} in blocks encoded apart x {PER_INSTRUCTION['code']:,} B"
        text += f" = {gib(self.trace_bytes)}"
        parts = [(what, n) for what, n in self.arrays if n]
        if parts:
            text += " + arrays " + gib(self.array_bytes) + " (" + ", ".join(f"{what} {gib(n)}" for what, n in parts) + ")"
        return text


def gib(n: float) -> str:
    return f"{n / 2**30:,.2f} GiB" if n >= 2**28 else f"{n / 2**20:,.1f} MiB"


def estimate(instructions: int, *, mode: str, check: bool = True, arrays: Optional[dict] = None,
             distinct: int = 0, trace: bool = False) -> Footprint:
    """The Footprint of a launch of `instructions` in `mode` ("full" or "timing"; check: timing mode's race
    checks), `distinct` of them in blocks encoded apart, holding `arrays` ({what: bytes}, full mode's data pass:
    `data_pass_arrays`); `trace`: a timing-mode launch that keeps its trace for a data pass (pyto.compile)."""
    return Footprint(int(instructions), per_instruction(mode, check, trace), mode, bool(check or mode == "full"),
                     tuple((arrays or {}).items()), min(int(distinct), int(instructions)))


# ---- the arrays of full mode -----------------------------------------------------------------------------
def broadcast_axes(a) -> tuple:
    """The axes along which array `a` repeats one element (stride 0, more than one element): np.broadcast_to's
    views. The data pass stages such an input compact, one copy of what repeats, and reads it through the view
    (memory.Memory's `broadcast`)."""
    if not isinstance(a, np.ndarray):
        return ()
    return tuple(i for i, (n, s) in enumerate(zip(a.shape, a.strides)) if s == 0 and n > 1)


def array_bytes(shape, dtype, broadcast: tuple = ()) -> int:
    """Bytes of an array of `shape` and `dtype` kept compact along the stride-0 axes `broadcast` (memory.py)."""
    return math.prod(1 if i in broadcast else int(s) for i, s in enumerate(shape)) * as_dtype(dtype).gm_itemsize


def product_bytes(m: int, n: int, k: int, dtype) -> int:
    """The K-stacked buffers one L0C tile's queued products may grow to (memory._Products): A [m, K'] and
    B [K', n] in fp32 (float64 for int8), K' = k rounded up to 2048 x 2^j."""
    cap = _PRODUCT_K
    while cap < k:
        cap *= 2
    wide = 8 if as_dtype(dtype) is DType.int8 else 4       # (FP8 / HF8 widen to fp32)
    return (m + n) * cap * wide


def data_pass_arrays(staged: list, *, widened: list = (), outputs: list = (), workspace: int = 0,
                     products: list = (), tiles: int = 0) -> dict:
    """Full mode's arrays, {what: bytes}: `staged` (shape, dtype, broadcast axes) GM tensors each staged once,
    `widened` (shape, dtype, broadcast axes) inputs a cube load reads (a widened copy unless fp32), `outputs`
    (shape, dtype) the caller's arrays written at the end, `workspace` bytes, `products` (m, n, k, dtype) per L0C
    tile, `tiles` bytes of tile storage."""
    wide = 0
    for shape, dt, bc in widened:
        size = as_dtype(dt).itemsize
        if as_dtype(dt).name != "fp32":
            wide += array_bytes(shape, dt, bc) // size * (8 if as_dtype(dt) is DType.int8 else 4)
    # (an FP4 tensor is staged unpacked, a byte a 4-bit code: twice its packed bytes, memory.py)
    return {"staged GM copies": sum(array_bytes(s, d, bc) * (2 if as_dtype(d).bits == 4 else 1)
                                    for s, d, bc in staged) + workspace,
            "widened inputs": wide,
            "outputs written back": sum(array_bytes(s, d) for s, d in outputs),
            "L0C products": sum(product_bytes(*p) for p in products),
            "tiles": tiles}


def _covers(ins) -> bool:
    """A GM -> L1 load whose block covers its destination: the data pass reads MMAD operands it feeds from the
    input's widened copy (datapass._Binder._load, data/origins.py); other loads need none."""
    dst, a = ins.dsts[0], ins.attrs
    if dst.obj.buf is not Buf.L1 or "parts" in a and len(a["parts"]) != 1:
        return False
    d = dst.rect
    h, w = (a["vc"], a["vr"]) if a.get("transpose") else (a["vr"], a["vc"])
    return (h, w) == (d[1] - d[0], d[3] - d[2])


_FED = (Buf.L1, Buf.L0A, Buf.L0B)


def _from_gm(ins, dst: TileStore, gm_fed: dict) -> bool:
    """Whether `ins` writes `dst` with a copy of GM: a covering GM -> L1 load, or an L1 -> L0A/L0B move of such a
    tile (data/origins.py keeps those copies' GM origins, so an MMAD reads them at the source)."""
    if dst.buf is Buf.L1:
        return ins.op is Op.LOAD and _covers(ins)
    srcs = [acc.obj for acc in ins.srcs]
    return bool(srcs) and all(type(o) is TileStore and o.buf is Buf.L1 and gm_fed.get(id(o), False) for o in srcs)


def _at_source(ins, gm_fed: dict) -> bool:
    """An MMAD whose L0A and L0B operands are copies of GM: the data pass sums its K loop as one matmul of two GM
    regions (memory._Products), stacking nothing (assumed: the pieces continue along K, as the K loops' do)."""
    ops = [acc.obj for acc in ins.srcs if type(acc.obj) is TileStore and acc.obj.buf in (Buf.L0A, Buf.L0B)]
    return bool(ops) and all(gm_fed.get(id(o), False) for o in ops)


def launch_arrays(tensors: list, arrays: tuple, launch, programs: list) -> dict:
    """`data_pass_arrays` of a launch from its first block's programs, extrapolated to its blocks: what the
    block writes and loads whole into L1 tiles (`_covers`), its tiles and the L0C accumulation chains whose operands
    are not copies of GM (`_at_source`: those are summed as one matmul of two GM regions, stacking nothing), the
    most open at once, each at the longest such chain's size (an upper bound)."""
    written, loaded = set(), set()
    stores: dict = {}
    gm_fed: dict = {}       # id(L1 / L0A / L0B store) -> whether every write into it so far copied GM through L1
    chain: dict = {}        # id(L0C store) -> K its open accumulation has summed so far
    longest = (0, 0, 0, None)   # (m, n, K, dtype) of the longest chain
    most = 0                # the most chains open at once (an L0C store's queued products are summed when read)
    for prog in programs:
        for ins in prog.instrs:
            for acc in ins.dsts:
                obj = acc.obj
                if type(obj) is GMTensor:
                    written.add(id(obj))
                elif type(obj) is TileStore:
                    stores[id(obj)] = obj
                    if obj.buf in _FED:
                        gm_fed[id(obj)] = gm_fed.get(id(obj), True) and _from_gm(ins, obj, gm_fed)
            mmad = ins.op is Op.MMAD and not _at_source(ins, gm_fed)
            for acc in ins.srcs:
                obj = acc.obj
                if type(obj) is TileStore:
                    stores[id(obj)] = obj
                    if not mmad and id(obj) in chain:
                        del chain[id(obj)]
                elif type(obj) is GMTensor and ins.op is Op.LOAD and _covers(ins):
                    loaded.add(id(obj))
            if mmad:
                a, key = ins.attrs, id(ins.dsts[0].obj)
                k = chain[key] = chain.get(key, 0) + a["k"] if a["accumulate"] else a["k"]
                most = max(most, len(chain))
                if k > longest[2]:
                    longest = (a["m"], a["n"], k, a["dtype"])
    bc = {id(t): (broadcast_axes(a) if isinstance(a, np.ndarray) and id(t) not in written else ())
          for t, a in zip(tensors, arrays)}
    blocks = launch.blocks
    return data_pass_arrays(
        [(t.shape, t.dtype, bc[id(t)]) for t in tensors],
        widened=[(t.shape, t.dtype, bc[id(t)]) for t in tensors if id(t) in loaded and id(t) not in written],
        outputs=[(t.shape, t.dtype) for t in tensors if id(t) in written],
        workspace=sum(array_bytes(w.shape, w.dtype) for w in launch.workspaces),
        products=[longest] * (most * blocks) if most else [],
        tiles=blocks * sum(math.prod(s.padded) * s.dtype.itemsize for s in stores.values()))


# ---- what is available --------------------------------------------------------------------------------
def _read(path: str) -> Optional[str]:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _field(text: Optional[str], key: str) -> Optional[int]:
    """`key value` (or `key: value kB`) in a /proc or cgroup file, in bytes for /proc's kB."""
    if not text:
        return None
    m = re.search(rf"^{re.escape(key)}:?\s+(\d+)(\s*kB)?", text, re.M)
    if m is None:
        return None
    return int(m.group(1)) * (1024 if m.group(2) else 1)


def _cgroup() -> Optional[tuple]:
    """(limit less usage, 'the cgroup ...') of the process's memory cgroups (v2 memory.max, v1
    memory.limit_in_bytes; the tightest of those found), or None without a limit."""
    own = _read("/proc/self/cgroup") or ""
    dirs = []
    for line in own.splitlines():
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        path = path.strip().rstrip("/")
        if controllers == "":                                     # v2: 0::/path (also under unified/ on hybrids)
            dirs += [("v2", root + path) for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")]
            dirs += [("v2", "/sys/fs/cgroup")]
        elif "memory" in controllers.split(","):
            dirs += [("v1", "/sys/fs/cgroup/memory" + path), ("v1", "/sys/fs/cgroup/memory")]
    found = []
    for kind, base in dict.fromkeys(dirs):
        names = ("memory.max", "memory.current", "inactive_file") if kind == "v2" else \
            ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
        limit, usage = _read(f"{base}/{names[0]}"), _read(f"{base}/{names[1]}")
        if limit is None or usage is None or not limit.strip().isdigit() or not usage.strip().isdigit():
            continue                                               # absent, or "max": no limit here
        limit = int(limit)
        if limit >= 1 << 60:                                       # v1 writes a huge number for none
            continue
        cache = _field(_read(f"{base}/memory.stat"), names[2]) or 0
        used = max(0, int(usage) - cache)
        found.append((max(0, limit - used), f"the cgroup's memory limit {gib(limit)} less {gib(used)} in use"))
    return min(found) if found else None


def _address_space() -> Optional[tuple]:
    """(RLIMIT_AS less the address space in use, 'RLIMIT_AS ...') when the limit is set."""
    if resource is None:
        return None
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ValueError, OSError):
        return None
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return None
    size = _field(_read("/proc/self/status"), "VmSize") or 0
    return max(0, soft - size), f"RLIMIT_AS {gib(soft)} less the {gib(size)} of address space in use"


def available() -> tuple:
    """(bytes, where the figure comes from) of host memory a launch may still take, or (None, why) when it is not
    known: the smallest of MemAvailable, the cgroup's headroom and RLIMIT_AS's (module docstring)."""
    found = []
    mem = _field(_read("/proc/meminfo"), "MemAvailable")
    if mem is not None:
        found.append((mem, "MemAvailable in /proc/meminfo"))
    for probe in (_cgroup, _address_space):
        got = probe()
        if got is not None:
            found.append(got)
    if not found:       # not Linux: the free physical pages, where the platform tells
        for pages in ("SC_AVPHYS_PAGES", "SC_PHYS_PAGES"):
            try:
                n = os.sysconf(pages) * os.sysconf("SC_PAGE_SIZE")
            except (ValueError, OSError, AttributeError):
                continue
            if n > 0:
                found.append((n, "free physical memory" if pages == "SC_AVPHYS_PAGES" else "physical memory"))
                break
    if not found:
        return None, "this platform does not say how much memory is free"
    return min(found)


LIMIT_REFRESH_S = 0.25     # a launch reads the memory it may take at most this often (Gate._budget)

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.I)


def limit() -> tuple:
    """(bytes, what they are) a launch may take: PYTO_HOST_MEMORY_LIMIT when set (None: 'off'), else `available`."""
    text = os.environ.get(ENV)
    if text is None or not text.strip():
        return available()
    if text.strip().lower() in ("off", "none", "no", "0"):
        return None, f"{ENV}={text.strip()}"
    m = _SIZE.match(text)
    if m is None:
        raise KernelError(f"{ENV}={text!r}: give a byte count with an optional K, M, G or T suffix (e.g. 8G), "
                          f"or 'off' to skip the host-memory check")
    n = int(float(m.group(1)) * 1024 ** " kmgt".index(m.group(2).lower() or " "))
    return n, f"{ENV}={text.strip()}"


def admit(fp: Footprint, what: str, advice: list, held: int = 0, limit_now: Optional[tuple] = None) -> None:
    """CapacityError when `fp` does not fit what `limit()` allows: the estimate, the memory available and the
    advice (ways to run it in less). `held`: bytes the launch holds already (its blocks traced so far), free
    memory's part of the estimate (a PYTO_HOST_MEMORY_LIMIT budget is the whole launch's). `limit_now`: limit()'s
    answer when the caller read it (Gate: once in a while, not per block)."""
    have, source = limit() if limit_now is None else limit_now
    if have is None:
        return
    if not source.startswith(ENV) and held:
        have, source = have + held, f"{source}, and the {gib(held)} this launch's trace holds already"
    if fp.total <= have:
        return
    raise CapacityError(
        f"{what}: the run would hold {fp.describe()} of host memory at its peak, more than the {gib(have)} "
        f"available ({source}). To fit: " + "; ".join(advice) + f". If the estimate is wrong for this machine, set "
        f"{ENV} (bytes, e.g. 16G; 'off' skips the check)", buffer="host memory", asked=fp.total, capacity=have)


def timing_checks() -> bool:
    """Whether timing-mode runs started now check races (pyto.run_options(check=...)): for estimates made before
    pyto.run is called (pyto_kernels.bmm)."""
    from .run import _THREAD
    return bool(_THREAD.values["check"])


def launch_advice(mode: str, check: bool, blocks: int, max_blocks: int) -> list:
    """What to try when a pyto.run launch does not fit."""
    out = []
    if mode == "full":
        out.append("mode='timing' (no data: GM inputs may be pyto.spec(shape, dtype))")
    if mode == "full":
        out.append("in timing mode `with pyto.run_options(check=False):` too, if the race checks are not needed")
    out.append("a smaller problem, or larger tiles (fewer instructions)")
    if blocks < max_blocks:
        out.append(f"more blocks (blocks={blocks} of up to {max_blocks}) if the kernel then traces less per block")
    return out


class Gate:
    """The check of a pyto.run / pyto.compile launch (run.py `_compile`), after each block is traced and looked
    up in the block cache, from the second on (the first, for a launch of one block): the blocks traced so far
    plus the largest one's count for each block left; as encoded apart (blocks traced alike share their code),
    the blocks that missed the cache so far and one more; with full mode's arrays when `full`; against the
    memory free now plus what the blocks traced so far hold. A kernel whose blocks keep differing is refused as
    their code piles up, from the first misses on. `footprint` is the full-mode estimate (a compiled kernel's
    first call checks its data pass with it)."""

    def __init__(self, kernel_name: str, tensors: list, arrays: tuple, chip, *, full: bool, check: bool,
                 trace: bool = True):
        self.name, self.tensors, self.arrays, self.chip = kernel_name, tensors, arrays, chip
        self.full, self.check, self.trace = full, check, trace     # trace: kept for a data pass (pyto.compile)
        self.traced = self.largest = self.apart = 0     # instructions so far, the largest block's, encoded apart
        self.data: Optional[dict] = None                # full mode's arrays, from the first block
        # only a launch that will compute data needs them (full mode, or pyto.compile on arrays): not one on specs
        self.wants_data = full or any(isinstance(a, np.ndarray) for a in arrays)
        self.footprint: Optional[Footprint] = None
        self._limit: Optional[tuple] = None             # (when, limit(), the trace held then): see _budget

    def _budget(self, held: int) -> tuple:
        """(limit(), the bytes the launch's trace held when it was read), read again after LIMIT_REFRESH_S: the free
        memory a launch may take, with what it held then, changes as others allocate, hardly from block to block
        (reading /proc and the cgroup files, ~0.35 ms, per block cost a 32-block launch of small blocks ~11 ms)."""
        now = time.monotonic()
        if self._limit is None or now - self._limit[0] > LIMIT_REFRESH_S:
            self._limit = (now, limit(), held)
        return self._limit[1], self._limit[2]

    def block(self, b: int, programs: list, launch, shared: bool) -> None:
        """Block b traced (`shared`: it reuses an earlier block's code); CapacityError when the launch will not fit."""
        n = sum(len(p.instrs) for p in programs)
        self.traced += n
        self.largest = max(self.largest, n)
        self.apart += 0 if shared else n
        if self.data is None:
            self.data = launch_arrays(self.tensors, self.arrays, launch, programs) if self.wants_data else {}
        left = launch.blocks - b - 1
        if b == 0 and left:
            return                  # the second block says whether blocks share their code
        total = self.traced + self.largest * left
        distinct = self.apart + self.largest * min(left, 1)     # the next block may be encoded apart too
        self.footprint = estimate(total, mode="full", distinct=distinct, arrays=self.data)
        fp = self.footprint if self.full else estimate(total, mode="timing", check=self.check, distinct=distinct,
                                                       trace=self.trace)
        held = estimate(self.traced, mode=fp.mode, check=self.check, distinct=self.apart, trace=self.trace).trace_bytes
        mode = "full" if self.full else "timing"
        limit_now, held_then = self._budget(held)
        admit(fp, f"kernel '{self.name}' on {launch.blocks} block(s) (estimated from its first {b + 1})",
              launch_advice(mode, self.check, launch.block_dim, self.chip.aiv if launch.aiv_only else self.chip.aic),
              held=held_then, limit_now=limit_now)


def admit_data_pass(fp: Footprint, kernel_name: str, instructions: int) -> None:
    """A compiled kernel's first call: binding its data pass adds `instructions` x PER_INSTRUCTION['bind'] and
    full mode's arrays to what compiling it holds."""
    bind = Footprint(instructions, PER_INSTRUCTION["bind"], "full", True, fp.arrays)
    admit(bind, f"kernel '{kernel_name}': its compiled data pass ({instructions:,} instructions)",
          ["pyto.compile it in timing mode only (check=False) if the data is not needed",
           "a smaller problem, or larger tiles (fewer instructions)"])


__all__ = ["ENV", "PER_INSTRUCTION", "Footprint", "Gate", "admit", "admit_data_pass", "array_bytes",
           "available", "broadcast_axes", "data_pass_arrays", "estimate", "launch_arrays", "limit", "product_bytes",
           "timing_checks"]
