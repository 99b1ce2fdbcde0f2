"""`pyto.compile` / `pyto.run`: the stages of a launch, in order, each its own subpackage reading the one before's
record and writing its own:

  trace (pyto/language/trace.py: one block's programs) -> block signature (encode/blockcache.py: blocks traced
  alike share the next two) -> sync (sync/: a Deps record) -> encode (encode/: flat arrays) -> schedule
  (schedule/: the event loop; timing) -> check (check/: races, uninitialised and clobbered reads) -> Report;
  then, in full mode, data (data/: the numbers, in the schedule's order).

The verdict and the timing of a launch depend only on its configuration (kernel, static parameters, GM
shapes and dtypes, chip, blocks), never on the data: `pyto.compile` does everything but the data pass
once, and the CompiledKernel it returns computes any number of inputs of those shapes (as Triton and
JAX compile a kernel per signature). `pyto.run` is compile-then-call.

This is the only module that chains the emulator's stages.
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import threading
import warnings
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..chip import Chip, load_chip
from ..dtypes import DType, as_dtype
from ..errors import DeadlockError, KernelError, ShapeError, SyncError, UnsupportedError
from ..ir import DEBUG_OPS, GMTensor, Op, Pipe, Role
from ..language.jit import JitKernel
from ..language.tile import as_int
from ..language.trace import Kernel, Launch, Tracer
from ..report import Report
from .. import progress
from . import admission, debugpass, launchcache
from .sync import crosscore
from .data.datapass import ACCUMULATE, DataPass
from .data.memory import Initialised
from .check.replay import replay
from .check.rows import LaunchRows
from .encode.blockcache import BlockCache
from .encode.encode import Encoder
from .schedule.scheduler import schedule


@dataclass(frozen=True)
class Spec:
    """A GM tensor's shape and dtype without data (timing mode)."""

    shape: tuple
    dtype: DType


def spec(shape, dtype) -> Spec:
    """Describe a GM input for mode='timing': no data is allocated."""
    if not isinstance(shape, (tuple, list)) or not all(
            isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 0 for s in shape):
        raise ShapeError(f"spec shape must be non-negative ints, got {shape!r}")
    return Spec(tuple(int(s) for s in shape), as_dtype(dtype))


def _arg_names(kernel: Kernel) -> list:
    return kernel.gm_names()


def _gm_tensors(kernel: Kernel, arrays) -> list:
    names = _arg_names(kernel)
    if len(arrays) != len(names):
        kw = [p.name for p in kernel.signature.parameters.values() if p.kind is p.KEYWORD_ONLY]
        hint = ""
        if len(arrays) > len(names) and kw and not isinstance(arrays[len(names)], (np.ndarray, Spec)):
            hint = f"; static parameters are keywords: {kw[0]}={arrays[len(names)]!r}"
        raise KernelError(f"kernel '{kernel.name}' takes {len(names)} GM tensors ({', '.join(names)}), "
                          f"got {len(arrays)}{hint}")
    out = []
    declared = kernel.gm_dtypes()
    for i, (name, a, want) in enumerate(zip(names, arrays, declared)):
        if isinstance(a, Spec):
            shape, dt = a.shape, a.dtype
        elif isinstance(a, np.ndarray):
            shape, dt = a.shape, as_dtype(a.dtype)
            if want is not None and want.np == a.dtype:    # a uint8 array declared pl.DT_HF8: HF8 codes
                dt = want
        else:
            raise ShapeError(f"argument '{name}' must be a numpy array or pyto.spec, got {type(a).__name__}")
        if len(shape) < 2:
            raise ShapeError(f"argument '{name}' must have at least 2 dimensions, got shape {list(shape)}")
        out.append(GMTensor(name, tuple(shape), dt, uid=i, autosync=kernel.gm_sync))
    return out


def _static(v) -> bool:
    """A static parameter: a Python scalar (int, float, bool, str, None), a numpy integer (read as the int) or a
    tuple of static parameters."""
    if v is None or isinstance(v, (int, float, bool, str)) or as_int(v) is not None:
        return True
    return type(v) is tuple and all(_static(x) for x in v)


def _plain(v):
    """A static parameter with its numpy integers as Python ints (shapes, cache keys and reprs alike)."""
    if type(v) is tuple:
        return tuple(_plain(x) for x in v)
    return as_int(v) if not isinstance(v, (int, float, str)) and as_int(v) is not None else v


def _check_params(kernel: Kernel, params: dict) -> dict:
    if isinstance(kernel, JitKernel):
        return params     # its scalars and tiling data were checked against their annotations (JitKernel.bind)
    kw = {p.name for p in kernel.signature.parameters.values() if p.kind is p.KEYWORD_ONLY}
    for k, v in params.items():
        if k not in kw and k in _arg_names(kernel):
            raise KernelError(f"kernel '{kernel.name}': '{k}' is a GM tensor: pass it positionally, in order "
                              f"({', '.join(_arg_names(kernel))})")
        if k not in kw:
            raise KernelError(f"kernel '{kernel.name}' has no static parameter '{k}' (it has: "
                              f"{', '.join(sorted(kw)) or 'none'})")
        if not _static(v):
            shown = f"an array {list(v.shape)} {v.dtype}" if isinstance(v, np.ndarray) else repr(v)[:80]
            raise KernelError(f"static parameter {k}={shown} of kernel '{kernel.name}' must be a Python "
                              f"int, float, bool, str or None, or a tuple of them (e.g. group sizes), got "
                              f"{type(v).__name__}")
    params = {k: _plain(v) for k, v in params.items()}
    missing = [p.name for p in kernel.signature.parameters.values()
               if p.kind is p.KEYWORD_ONLY and p.default is p.empty and p.name not in params]
    if missing:
        raise KernelError(f"kernel '{kernel.name}' needs the static parameter(s) {', '.join(missing)} "
                          f"(pyto.run({kernel.name}, ..., {missing[0]}=...))")
    return params


def _check_block_dim(kernel: Kernel, chip: Chip, block_dim, aiv_only: Optional[bool]) -> None:
    """UnsupportedError for a block_dim the chip cannot run in one wave (aiv_only None: not known yet)."""
    if as_int(block_dim) is None:      # an int or numpy integer, not a bool or float
        raise KernelError(f"blocks must be an int in 1..{chip.aic}, got {block_dim!r} ({type(block_dim).__name__})")
    top = chip.aic * chip.aiv_per_aic if aiv_only in (None, True) else chip.aic
    if not 1 <= block_dim <= top:
        if aiv_only is False:
            raise UnsupportedError(f"blocks={block_dim!r}: {chip.name} has {chip.aic} AI cores (blocks 1..{chip.aic}; "
                                   f"an AIV-only kernel's block_dim counts AIVs, up to {chip.aiv})")
        raise UnsupportedError(f"blocks={block_dim!r}: {chip.name} has {chip.aiv} AIVs (an AIV-only kernel's block_dim, "
                               f"1..{chip.aiv}) and {chip.aic} AI cores (any other kernel's, 1..{chip.aic})")


def _kind_checks(launch: Launch, kernel: Kernel) -> None:
    """sync_all's core_type against the kernel's kind, and the cross-core events sync_all reserves."""
    from ..language.types import SyncCoreType
    kind = "aiv" if launch.aiv_only else ("mix" if launch.uses_vector else "aic")
    want = {"mix": SyncCoreType.MIX, "aiv": SyncCoreType.AIV_ONLY, "aic": SyncCoreType.AIC_ONLY}[kind]
    for core_type, loc in launch.sync_alls.items():
        if core_type is want:
            continue
        if core_type is SyncCoreType.MIX:
            raise SyncError(f"{loc}: pl.system.sync_all(core_type=SyncCoreType.MIX) in kernel '{kernel.name}', which "
                            f"runs {'only AIVs' if kind == 'aiv' else 'only AICs'}: it would sync cores that do not "
                            f"exist, a device error on the chip (sync_all.md); pass core_type=pl.SyncCoreType."
                            f"{want.name}")
        if kind == "mix":
            raise UnsupportedError(f"{loc}: a sync_all over {core_type.name} cores of a kernel that runs both AICs and "
                                   f"AIVs is not built in pyto (its checked pass orders every core at a sync_all); "
                                   f"use core_type=pl.SyncCoreType.MIX")
        raise SyncError(f"{loc}: pl.system.sync_all(core_type=SyncCoreType.{core_type.name}) in kernel "
                        f"'{kernel.name}', which runs no {'AICs' if kind == 'aiv' else 'AIVs'}; pass "
                        f"core_type=pl.SyncCoreType.{want.name}")
    if launch.sync_alls and launch.reserved_events:
        event, loc = min(launch.reserved_events.items())
        raise SyncError(f"{loc}: cross-core event {event} is one of the ids 11..14 pl.system.sync_all uses itself "
                        f"(set_cross_core_wait_cross_core.md), and kernel '{kernel.name}' calls sync_all "
                        f"({launch.sync_alls[next(iter(launch.sync_alls))]}); use another event id")


def trace_blocks(kernel: Kernel, tensors: list, params: dict, chip: Chip, blocks: int, auto_sync: bool = True,
                 state: Optional[dict] = None):
    """Trace the launch one block at a time: yield each block's programs (AIC, and the two AIVs when the kernel uses
    the vector side; an AIV-only kernel's AIVs alone, two to a block, the second idle past block_dim), with
    launch-wide instruction indices. `blocks` is the kernel's block_dim; `state["launch"]` is the Launch."""
    auto_mutex = auto_sync and kernel.auto_mutex

    def launch_of(n_blocks: int, aiv_only: bool) -> Launch:
        return Launch(chip, n_blocks, tensors, _THREAD.values["max_block_instructions"], block_dim=blocks,
                      aiv_only=aiv_only, auto_mutex=auto_mutex, gm_sync=kernel.gm_sync)
    launch = launch_of(blocks, False)
    probe = kernel.trace(Tracer(launch, 0, Role.AIC), tensors, params)
    # (a sync_all outside sections lands in every trace: it does not make the AIC run)
    aiv_only = launch.uses_vector and not launch.uses_cube and all(ins.op is Op.SYNC_ALL or ins.op in DEBUG_OPS
                                                                   for ins in probe.instrs)
    _check_block_dim(kernel, chip, blocks, aiv_only)
    if aiv_only:
        launch = launch_of(-(-blocks // chip.aiv_per_aic), True)
    if state is not None:
        state["launch"] = launch
    index = 0
    vector = None
    for b in range(launch.blocks):
        if aiv_only:
            roles = [Role.AIV0, Role.AIV1][:min(2, blocks - 2 * b)]
            progs = [kernel.trace(Tracer(launch, b, role), tensors, params) for role in roles]
        else:
            progs = [probe if b == 0 else kernel.trace(Tracer(launch, b, Role.AIC), tensors, params)]
            if vector is None:
                vector = launch.uses_vector
            elif launch.uses_vector != vector:
                raise KernelError(f"{launch.vector_loc}: kernel '{kernel.name}': block {b} uses the vector side here "
                                  f"but block 0 does not; UB tiles and pl.section_vector() must not depend on the "
                                  f"block")
            if vector:
                progs += [kernel.trace(Tracer(launch, b, role), tensors, params) for role in (Role.AIV0, Role.AIV1)]
        for prog in progs:
            for ins in prog.instrs:
                ins.index = index
                index += 1
        if b == launch.blocks - 1:
            _kind_checks(launch, kernel)
        yield progs


MAX_BLOCK_INSTRUCTIONS = 4_000_000    # per traced processor: a block's trace is held until encoded (~1 KB each)


class _Options(threading.local):
    """run_options' settings, per thread (a `with` block in one thread does not change another's runs)."""

    def __init__(self):
        self.values = {"check": True, "max_block_instructions": MAX_BLOCK_INSTRUCTIONS, "accumulate": "fused",
                       "cache": True}


_THREAD = _Options()


class run_options:
    """Defaults for the `pyto.run` calls inside the block, including those a library (pyto_kernels.bmm)
    makes: `with pyto.run_options(check=False): bmm(spec_a, spec_b)` runs big timing-mode schedules
    without race checks (a little faster; timing mode's memory is about the same either way: the checks keep
    integer rows, check/rows.py). `check` applies to timing mode only: full-mode runs inside
    the block are still checked (they compute data in checked order). `max_block_instructions` (default
    MAX_BLOCK_INSTRUCTIONS = 4,000,000): the most instructions one processor of one block may trace, since a block's trace is held in
    host memory until it is encoded (a CapacityError past it, instead of exhausting the machine).
    `accumulate` (None: leave as is; default "fused"): the order in which full mode's data pass sums MMADs into
    L0C, read when the data is computed (each pyto.run, each call of a pyto.compile'd kernel, whenever it was
    compiled): "fused" sums a K loop's products in one fp32 matmul and adds that to the bias (fast; within
    pyto.testing.matmul_bound of the exact result); "per_mmad" rounds L0C to fp32 after every MMAD
    instruction, starting from the bias, as the cube does (datapass.py states the model). It concerns L0C
    only, not partials a split-K or Stream-K kernel reduces across blocks in GM. `cache` (None: leave as is;
    default True): pyto.run reuses a launch it checked before for the same kernel, parameters, shapes, dtypes,
    chip and blocks (emulator/launchcache.py); False traces every run afresh. Only a
    `with` block applies them: called alone it changes nothing and says so (a RuntimeWarning)."""

    def __init__(self, *, check: bool = True, max_block_instructions: Optional[int] = None,
                 accumulate: Optional[str] = None, cache: Optional[bool] = None):
        if not isinstance(check, bool):
            raise KernelError(f"check must be True or False, got {check!r}")
        if cache is not None and not isinstance(cache, bool):
            raise KernelError(f"cache must be True or False, got {cache!r}")
        if accumulate is not None and (not isinstance(accumulate, str) or accumulate not in ACCUMULATE):
            raise KernelError(f"accumulate must be one of {', '.join(map(repr, ACCUMULATE))}, got {accumulate!r}")
        if max_block_instructions is not None and (as_int(max_block_instructions) is None
                                                   or max_block_instructions < 1):
            raise KernelError(f"max_block_instructions must be a positive int, got {max_block_instructions!r}")
        self._set = {"check": check}
        if max_block_instructions is not None:
            self._set["max_block_instructions"] = as_int(max_block_instructions)
        if accumulate is not None:
            self._set["accumulate"] = accumulate
        if cache is not None:
            self._set["cache"] = cache
        self._saved: list = []       # the settings each open `with` of this object replaced (re-entrant)
        self._entered = False

    def __enter__(self) -> "run_options":
        self._entered = True
        self._saved.append(dict(_THREAD.values))
        _THREAD.values.update(self._set)
        return self

    def __exit__(self, *exc) -> None:
        _THREAD.values = self._saved.pop()

    def __del__(self) -> None:
        if not getattr(self, "_entered", True):      # (not when __init__ refused its arguments)
            warnings.warn("pyto.run_options(...) changes nothing outside a `with` block: write "
                          "`with pyto.run_options(...):` around the runs", RuntimeWarning)


def run(kernel: Kernel, *arrays, chip: "str | Chip" = "ascend950pr", blocks: int = 1, mode: str = "full",
        auto_sync: bool = True, check: Optional[bool] = None, **params) -> Report:
    """Run `kernel` on the emulated chip; outputs are written into the arrays given (only on success).

    `arrays`: a @pl.kernel's GM tensors in order, numpy arrays (or `pyto.spec(shape, dtype)` in timing mode), its
    static parameters as keywords; a @pl.jit kernel's arguments in its signature's order (tensors, scalars, tiling
    data). `chip`: a chip table name (`pyto chips` lists them) or a Chip. `blocks`: the block_dim, how many AI cores
    run the kernel (1 to the chip's AIC count, one block a core: a launch of more blocks than cores, which hardware
    runs in waves, is refused; pl.get_block_idx() tells them apart), or for an AIV-only kernel how many AIVs. `mode`:
    "full" computes the data and checks everything; "timing" only schedules (no data), for shapes too large to
    compute. `auto_sync=False` turns off the framework's synchronisation (auto_mutex tokens and pyto's auto-sync of
    pl.alloc tiles): the kernel orders its pipes with pl.system.sync_src/sync_dst and the rest itself, and the
    sanitizer reports what it misses. `check`: None (default)
    takes pyto.run_options' setting in timing mode and is always on in full mode; `check=False` (timing
    mode only; a KernelError in full mode) skips the race and uninitialised-read checks (pyto.run's timing-mode
    memory is about the same either way: a checked run keeps integer rows, check/rows.py; a pyto.compile'd launch
    with checks keeps its trace for the data pass); capacity,
    alignment and deadlock are still checked. Static parameters are Python int, float, bool or str, None
    (read by kernels as 'not given'), or tuples of them (a grouped GEMM's sizes); numpy integers, there and in
    `blocks`, are read as ints. Running one configuration many times: `pyto.compile`.
    """
    if not isinstance(kernel, Kernel):
        raise KernelError(f"pyto.run takes a @pl.jit or @pl.kernel function, got {kernel!r}")
    arrays, params = kernel.bind(arrays, params)
    if mode not in ("full", "timing"):
        raise KernelError(f"mode must be 'full' or 'timing', got {mode!r}")
    if mode == "full":
        for name, a in zip(_arg_names(kernel), arrays):
            if isinstance(a, Spec):
                raise ShapeError(f"argument '{name}' is a pyto.spec: full mode needs real arrays (or mode='timing')")
    if check is None:
        check = _THREAD.values["check"] or mode == "full"
    if not check and mode == "full":
        raise KernelError("check=False is for mode='timing': full mode computes data in checked order")
    with _gc_paused():   # one pause: the collector is not switched back on while the launch's records live
        chip = load_chip(chip)
        _check_block_dim(kernel, chip, blocks, None)          # (before the cache: blocks=True is no 1)
        key = launchcache.key(kernel, arrays, params, chip, blocks, auto_sync, check, mode, _THREAD.values) \
            if _THREAD.values["cache"] else None
        cached = launchcache.get(key)
        if mode == "full":
            compiled = cached or _compile(kernel, arrays, chip, blocks, auto_sync, check, params, full=True)
            report = compiled(*arrays)
            if cached is None:
                launchcache.put(key, compiled, report.instructions, (kernel, kernel.fn, chip))
        else:
            report = cached or _compile(kernel, arrays, chip, blocks, auto_sync, check, params, data=False).report
            if cached is None:
                launchcache.put(key, report, report.instructions, (kernel, kernel.fn, chip))
            report = dataclasses.replace(report)             # each run its own Report
            debugpass.emit(report.printed)      # pl.printf / pl.dump_data output (full mode's: after its data pass)
    return report


def compile(kernel: Kernel, *arrays, chip: "str | Chip" = "ascend950pr", blocks: int = 1, auto_sync: bool = True,
            check: bool = True, **params) -> "CompiledKernel":
    """Trace, synchronise, schedule and check one launch configuration of `kernel` (GM inputs as arrays or
    pyto.spec: only their shapes and dtypes are read); raises what pyto.run would. The result's `.report`
    is the timing; calling it with arrays of those shapes and dtypes computes them (full mode's data pass
    alone) and returns that Report (mode 'full'); compiled with check=False it only times (a call is a
    KernelError). No `mode`: compile is both. The kernel must trace the same for the same configuration (no
    reads of mutable globals)."""
    if not isinstance(kernel, Kernel):
        raise KernelError(f"pyto.compile takes a @pl.jit or @pl.kernel function, got {kernel!r}")
    arrays, params = kernel.bind(arrays, params)
    with _gc_paused():
        return _compile(kernel, arrays, load_chip(chip), blocks, auto_sync, check, params)


class CompiledKernel:
    """A checked launch configuration (pyto.compile): `.report` (timing mode's Report) and, when compiled with
    checks, `__call__(*arrays)`, the data pass on new inputs of the compiled shapes and dtypes. After the first
    call it keeps the pass's arrays (a staged copy of each GM tensor, the tiles) for the next calls, so calls
    from several threads take turns (a lock). Each call sums MMADs in the order pyto.run_options(accumulate=...)
    sets at that call (not at compile time)."""

    def __init__(self, kernel: Kernel, tensors: list, report: Report, instrs: Optional[list], order, written: set):
        self.kernel, self.tensors, self.report = kernel, tensors, report
        self._instrs, self._order, self._written = instrs, order, written
        self._data: Optional[DataPass] = None       # bound on the first call
        self._lock = threading.Lock()
        self.footprint: Optional[admission.Footprint] = None   # full mode's host memory (admission.py), or None
        self.debug: Optional[debugpass.DebugLog] = None   # the launch's debug ops (printf, dump_data...), or None

    @property
    def traced(self) -> list:
        """The launch's traced instructions, held for the data pass until its first call binds them ([] after it, and
        for a launch compiled with check=False): what a tool reads of the launch before computing it (pyto check
        finds a sparse MMAD's index inputs in it)."""
        return self._instrs or []

    def __call__(self, *arrays, **params) -> Report:
        """Compute the kernel on `arrays` (numpy arrays of the compiled shapes and dtypes); outputs are written
        in place; returns the report (mode 'full'). Static parameters were fixed by pyto.compile: none here."""
        if params:
            given = ", ".join(f"{k}={v!r}"[:60] for k, v in params.items())
            raise KernelError(f"compiled kernel '{self.kernel.name}' called with {given}: static parameters are "
                              f"fixed at compile time (pyto.compile({self.kernel.name}, ..., {next(iter(params))}=...)"
                              f"); call it with its GM arrays only ({', '.join(t.name for t in self.tensors)}), or "
                              f"compile again for other static values")
        if self._data is None and self._instrs is None:
            raise KernelError(f"kernel '{self.kernel.name}' was compiled with check=False (timing only); compile "
                              f"with checks to compute data")
        self._check_arrays(arrays)
        # the device's IEEE results (inf, NaN, subnormals) whatever the caller's np.seterr
        with self._lock, _gc_paused(), np.errstate(all="ignore"):
            progress.phase("data")
            if self._data is None:     # bind once; the instructions are not needed after
                if self.footprint is not None:
                    admission.admit_data_pass(self.footprint, self.kernel.name, len(self._instrs))
                broadcast = {id(t): axes for t, a in zip(self.tensors, arrays)           # inputs kept as views
                             if id(t) not in self._written and (axes := admission.broadcast_axes(a))}
                self._data = DataPass(self._instrs, self._order, self.tensors, self._written, broadcast)
                self._instrs = self._order = None
            with debugpass.data_pass(self.debug) as out:      # printed after the pass, getval values filled in
                self._data(list(arrays), _THREAD.values["accumulate"])   # run_options at the call, not the compile
        return dataclasses.replace(self.report, mode="full", printed=out.printed, dumps=out.dumps)

    def _check_arrays(self, arrays: tuple) -> None:
        if len(arrays) != len(self.tensors):
            raise KernelError(f"kernel '{self.kernel.name}' was compiled for {len(self.tensors)} GM tensors "
                              f"({', '.join(t.name for t in self.tensors)}), got {len(arrays)}")
        for t, a in zip(self.tensors, arrays):
            if not isinstance(a, np.ndarray):
                raise ShapeError(f"argument '{t.name}' must be a numpy array, got {type(a).__name__}")
            if a.shape != t.shape or a.dtype != t.dtype.np:      # (an HF8 tensor's array: uint8 codes)
                raise ShapeError(f"argument '{t.name}' is {list(a.shape)} {as_dtype(a.dtype)}; kernel "
                                 f"'{self.kernel.name}' was compiled for {list(t.shape)} {t.dtype}")
            if id(t) in self._written and not a.flags.writeable:
                raise ShapeError(f"argument '{t.name}' is read-only, but the kernel writes it (pyto writes "
                                 f"outputs in place)")
            if isinstance(a, np.ma.MaskedArray):
                raise ShapeError(f"argument '{t.name}' is a masked array: the kernel would read the data under its "
                                 f"mask and leave the mask as it is; pass a plain array (a.filled(...))")
        for i, (t, a) in enumerate(zip(self.tensors, arrays)):
            for u, b in zip(self.tensors[i + 1:], arrays[i + 1:]):
                if (id(t) in self._written or id(u) in self._written) and _overlap(a, b):
                    raise ShapeError(
                        f"arguments '{t.name}' and '{u.name}' share memory and the kernel writes "
                        f"'{t.name if id(t) in self._written else u.name}': pyto stages each GM argument apart, so "
                        f"reads of one would not see writes to the other as on the device; pass separate arrays "
                        f"(e.g. a copy of the input)")

    def __repr__(self) -> str:
        args = ", ".join(f"{t.name} {list(t.shape)} {t.dtype}" for t in self.tensors)
        return f"<compiled {self.kernel.name}({args}) on {self.report.chip}, {self.report.blocks} block(s)>"


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays share an element (a strided pair too hard to decide counts as sharing)."""
    if not np.may_share_memory(a, b):
        return False
    try:
        return bool(np.shares_memory(a, b, max_work=100_000))
    except _TOO_HARD:
        return True


_TOO_HARD = getattr(np, "exceptions", np).TooHardError      # numpy.exceptions from 1.25, numpy's namespace before


@contextlib.contextmanager
def _gc_paused():
    """Tracing makes millions of small acyclic records; the cyclic collector, rescanning them at
    every allocation threshold, would cost more than tracing itself. Reference counting frees them.
    Counted across threads: the collector comes back when the last launch ends, if it was on before."""
    global _GC_PAUSES, _GC_WAS
    with _GC_LOCK:
        if _GC_PAUSES == 0:
            _GC_WAS = gc.isenabled()
            gc.disable()
        _GC_PAUSES += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _GC_PAUSES -= 1
            if _GC_PAUSES == 0 and _GC_WAS:
                gc.enable()


_GC_LOCK = threading.Lock()
_GC_PAUSES = 0
_GC_WAS = True


def _compile(kernel: Kernel, arrays: tuple, chip: Chip, blocks: int, auto_sync: bool, check: bool,
             params: dict, full: bool = False, data: bool = True) -> CompiledKernel:
    """The launch compiled (pyto.compile); `data=False`: only its report is wanted (pyto.run in timing mode), so
    the traced instructions are not kept for a data pass."""
    _check_block_dim(kernel, chip, blocks, None)
    if not isinstance(auto_sync, bool) or not isinstance(check, bool):
        raise KernelError(f"auto_sync and check must be True or False, got auto_sync={auto_sync!r}, check={check!r}")
    blocks = as_int(blocks)
    params = _check_params(kernel, params)
    tensors = _gm_tensors(kernel, arrays)
    enc = Encoder(chip)
    cache = BlockCache()
    state: dict = {}
    programs: list = []       # the traces, kept for the data pass (`data`)
    rows = LaunchRows(lambda: state["launch"].overlap)    # the checked pass's record, block by block
    unpaired = ""
    progress.phase("tracing")
    gate = admission.Gate(kernel.name, tensors, arrays, chip, full=full, check=check, trace=data)
    for b, progs in enumerate(trace_blocks(kernel, tensors, params, chip, blocks, auto_sync, state)):
        sig = cache.signature(progs) if blocks > 1 else None   # one block: nothing to share with
        code = cache.get(sig)
        gate.block(b, progs, state["launch"], code is not None)   # the launch's host memory, or a CapacityError
        if code is None:
            progress.phase("auto-sync", b, state["launch"].blocks)
            synced = crosscore.insert_all(progs, auto_sync, chip.cross_core_wait_blocks_core)
            unpaired = synced.unpaired or unpaired
            code = enc.encode(progs, synced.deps)
            cache.put(sig, code)
        if check:
            rows.add(enc.n, progs, code)
            if data:
                programs += progs
        enc.add(progs, code)
        progress.phase("tracing", b + 1, state["launch"].blocks)
    progs = sig = synced = None     # the last block's trace and records: not held through the schedule
    cache.release()                 # (nor the cache's reference block)
    progress.phase("scheduling")       # (finish replays the L2 model: timing)
    encoded = enc.finish()
    sched = schedule(encoded, chip)
    if sched.overflow:
        raise SyncError(sched.overflow)
    report = _report(kernel, chip, blocks, encoded, sched)
    debug = debugpass.DebugLog(state["launch"].debug, sched, state["launch"].aiv_only) if state["launch"].debug else None
    if debug is not None:
        debug.check_trap()       # a pl.trap() the schedule reached aborts the launch (before what it would report)
        timed = debug.render(full=False)
        report.printed, report.dumps = timed.printed, timed.dumps
    if unpaired and not sched.deadlock:
        raise SyncError(unpaired)
    if not check:
        if sched.deadlock:
            raise DeadlockError(sched.deadlock)
        if sched.left_set:
            raise SyncError(sched.left_set)
        return CompiledKernel(kernel, tensors, report, None, None, set())
    del encoded, enc, cache     # the report keeps the columns it shows
    launch = state["launch"]
    progress.phase("checking")
    written = replay(rows, sched, launch.blocks, Initialised(tensors, launch.aiv_only), launch.overlap)
    if sched.left_set:       # after the schedule's and the checks' errors, which say more
        raise SyncError(sched.left_set)
    instrs = [ins for p in programs for ins in p.instrs] if data else None
    compiled = CompiledKernel(kernel, tensors, report, instrs, sched.order.tolist() if data else None, written)
    compiled.footprint = gate.footprint
    compiled.debug = debug
    return compiled


def _report(kernel, chip, blocks, enc, sched) -> Report:
    core_pipe: dict = {}
    for (prog, pipe), busy in sched.busy.items():
        core_pipe.setdefault(prog, {})[pipe.name] = busy
    pipe_cycles: dict = {}
    for per in core_pipe.values():
        for p, c in per.items():
            if p != "S":
                pipe_cycles[p] = max(pipe_cycles.get(p, 0.0), c)
    events = (enc.cores, [p.name for p in Pipe], enc.names, enc.locs, enc.core_i, enc.pipe_i, enc.name_i,
              enc.loc_i, np.asarray(sched.begin), np.asarray(sched.end), enc.arrays["lat"])
    dt = enc.cube_dtype
    end = np.asarray(sched.end)
    core_cycles = {}
    if len(end):
        last = np.full(len(enc.cores), 0.0)
        core = enc.core_i
        if (core[1:] >= core[:-1]).all():     # the encoder lays cores out in launch order: one reduction per run
            starts = np.flatnonzero(np.r_[True, core[1:] != core[:-1]])
            last[core[starts]] = np.maximum(0.0, np.maximum.reduceat(end, starts))
        else:
            np.maximum.at(last, core, end)
        core_cycles = {name: float(t) for name, t in zip(enc.cores, last)}
    return Report(kernel.name, chip.name, blocks, "timing", sched.cycles, chip.clock_ghz, len(enc.core_i), pipe_cycles,
                  core_pipe, events, enc.flops, chip.peak_flops(dt) if dt is not None else 0.0,
                  gm_bytes=sched.gm_bytes, gm_read_bytes=enc.gm_read_bytes, gm_write_bytes=enc.gm_write_bytes,
                  l2_hit_bytes=sched.l2_hit_bytes, core_cycles=core_cycles, gm_bytes_per_cycle=chip.gm_bytes_per_cycle,
                  integer=dt is not None and not dt.is_float)
