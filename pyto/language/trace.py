"""Tracing: a kernel is ordinary Python run under a Tracer that records one Instr per DSL call.

A launch traces the kernel once per (block, role); each trace is a `Program`. The kernel's own
source line is captured at call time (as JAX does), so every error can name it.
"""
from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import linecache
import math
import os
import re
import sys
import threading
from typing import Any, Callable, Optional, Sequence

from ..chip import BUFFER_ALIGN, Chip
from ..dtypes import as_dtype
from ..errors import CapacityError, KernelError, PytoError
from ..ir import Buf, GMTensor, Instr, Loc, Pipe, Role, core_name
from .address import AddressSpace

_AIC = Role.AIC
_CUBE_PIPE = Pipe.M
# pyto's own files (with the separator: an installed pyto_kernels beside pyto is the kernel author's code, not pyto's)
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_LIBRARY_DIRS = (_PKG_DIR, os.path.dirname(os.__file__) + os.sep, "<")   # pyto, the standard library, <frozen ...>


class _Tracing(threading.local):
    """The tracer active in this thread (pyto.run may be called from several threads at once)."""
    tracer: Optional["Tracer"] = None
    capture: Optional[list] = None        # inside captured_launches(): every launch this thread begins
    general: bool = False                 # inside general_paths(): the ops' fast paths are off


_STATE = _Tracing()

# id(code) -> (the code object, whether it is pyto's own, {bytecode offset: Loc}). Keyed by id, not by the
# code object, whose hash digests its bytecode and constants on every call (it cost caller_loc more than
# all the rest); the entry holds the code object, so that id stays its own while the entry lives.
_CODES: dict = {}
_LOC_BY_LINE: dict = {}     # (file, line) -> Loc: one Loc object per line (identity is equality)
_CACHE_MAX = 1 << 16
_WORKSPACE_NAME = re.compile(r"([A-Za-z_][A-Za-z_0-9]*)\s*=\s*pl\.workspace\b")   # `ws = pl.workspace(...)`: 'ws'

# Which role owns each buffer: its capacity is charged on that role's core.
OWNER = {Buf.L1: Role.AIC, Buf.L0A: Role.AIC, Buf.L0B: Role.AIC, Buf.L0C: Role.AIC, Buf.BT: Role.AIC,
         Buf.FB: Role.AIC, Buf.UB: Role.AIV0, Buf.L0A_MX: Role.AIC, Buf.L0B_MX: Role.AIC,
         Buf.L0B_SP: Role.AIC}
# Allocation alignment in bytes per buffer (chip.BUFFER_ALIGN).
ALIGN = {Buf[name]: align for name, align in BUFFER_ALIGN.items()}


@contextlib.contextmanager
def captured_launches():
    """Collect the launches this thread begins inside the block (a list, filled as their tracing starts and kept
    whether they succeed or fail): pyto check reads their address maps. Outside it nothing is kept."""
    outer, _STATE.capture = _STATE.capture, []
    try:
        yield _STATE.capture
    finally:
        _STATE.capture = outer


@contextlib.contextmanager
def general_paths():
    """Trace with the ops' fast paths off: each op takes its general path, which checks one thing at a time (tests
    compare the two, which must record the same instructions and raise the same errors)."""
    outer, _STATE.general = _STATE.general, True
    try:
        yield
    finally:
        _STATE.general = outer


def caller_loc() -> Loc:
    """The first stack frame outside pyto: the kernel author's line. (The search starts at the frame
    that called caller_loc's caller: caller_loc is only called from inside pyto.) Cached per call site
    (code object and bytecode offset), which names one line."""
    try:
        f = sys._getframe(2)
    except ValueError:
        f = None
    else:
        entry = _CODES.get(id(f.f_code))
        if entry is not None and not entry[1]:      # the common case: the op's caller is the kernel's, seen before
            loc = entry[2].get(f.f_lasti)
            if loc is not None:
                return loc
    while f is not None:
        code = f.f_code
        entry = _CODES.get(id(code))
        if entry is None:
            if len(_CODES) > _CACHE_MAX:        # kernels made by exec (fuzzers) would grow it without end
                _CODES.clear()
            entry = _CODES[id(code)] = (code, code.co_filename.startswith(_PKG_DIR), {})
        if not entry[1]:
            break
        f = f.f_back
    if f is None:
        return Loc("<unknown>", 0, "")
    sites = entry[2]
    loc = sites.get(f.f_lasti)
    if loc is None:
        file, line = code.co_filename, f.f_lineno
        loc = sites[f.f_lasti] = _LOC_BY_LINE.setdefault((file, line),
                                                          Loc(file, line, linecache.getline(file, line).strip()))
    return loc


class Program:
    """The instructions one processor (the AIC or one AIV of a block) executes, in program order."""

    def __init__(self, block: int, role: Role, aiv_only: bool = False):
        self.block, self.role, self.aiv_only = block, role, aiv_only
        self.id = block * 3 + int(role)
        self.instrs: list[Instr] = []
        self.markers: list = []   # foreign ops that touch this role's buffers (cross-core pairing)

    def __repr__(self) -> str:
        return core_name(self.id, self.aiv_only)


class Launch:
    """What all traces of one launch share: chip, GM tensors, workspaces, each block's stores and address maps.

    `block_dim` is what the kernel's get_block_num() returns; `aiv_only`: the kernel has no cube side, so each
    AIV is a block of its own (PyPTO-Pro's AIV-only kernels: block_dim counts AIVs, two to a pyto block)."""

    def __init__(self, chip: Chip, blocks: int, tensors: list[GMTensor], max_instructions: int,
                 block_dim: Optional[int] = None, aiv_only: bool = False, auto_mutex: bool = True,
                 gm_sync: bool = True):
        self.chip, self.blocks, self.tensors = chip, blocks, tensors
        self.block_dim = blocks if block_dim is None else block_dim
        self.aiv_only, self.auto_mutex, self.gm_sync = aiv_only, auto_mutex, gm_sync
        self.sync_alls: dict = {}               # core_type -> the first line calling sync_all with it
        self.reserved_events: dict = {}         # cross-core event id sync_all reserves (11..14) -> the first line
        self.max_instructions = max_instructions   # per traced processor: its Program is held until encoded
        self.workspaces: list[GMTensor] = []
        self.uses_vector = False
        self.uses_cube = False                  # a section_cube was entered or a cube op traced
        self.vector_loc: Optional[Loc] = None   # the first kernel line that brought in the vector side
        self._stores: dict = {}
        self._spaces: dict = {}                 # (block, buffer) -> AddressSpace
        self.overlap = False                    # some tiles' bytes overlap, or GM views alias their roots
        # (emulator/check/overlap.py and gmviews.py follow them)
        self.gm_views: dict = {}                # (root id, offset, shape, strides) -> the GM view (gmview.py)
        self.debug: list = []                   # the debug ops' instructions, as traced (language/debug.py)
        if _STATE.capture is not None:
            _STATE.capture.append(self)
        self._check_gm(None)

    def note_sync_all(self, core_type, loc: Loc) -> None:
        self.sync_alls.setdefault(core_type, loc)

    def note_cross_core(self, event: int, loc: Loc) -> None:
        if 11 <= event <= 14:
            self.reserved_events.setdefault(event, loc)

    def spaces(self) -> dict:
        """{(block, buffer): AddressSpace} of every map a tile was placed in so far."""
        return dict(self._spaces)

    def space(self, block: int, buf: Buf) -> AddressSpace:
        """The address map of `buf` in `block` (UB: one for both AIVs, see address.py)."""
        sp = self._spaces.get((block, buf))
        if sp is None:
            sp = self._spaces[(block, buf)] = AddressSpace(buf, self.chip.buffers[buf.name], ALIGN[buf],
                                                           self.chip.name)
        return sp

    def _check_gm(self, loc: Optional[Loc]) -> None:
        """CapacityError when the launch's GM tensors (arguments and workspaces) exceed the chip's GM."""
        sizes = [(t, math.prod(t.shape) * t.dtype.gm_itemsize) for t in self.tensors + self.workspaces]
        total = sum(n for _, n in sizes)
        if total > self.chip.gm_bytes:
            big = ", ".join(f"'{t.name}' {list(t.shape)} {t.dtype} {n:,} B"
                            for t, n in sorted(sizes, key=lambda x: -x[1])[:3])
            where = f"{loc}: " if loc is not None else ""
            raise CapacityError(f"{where}GM overflow on {self.chip.name}: the launch's GM tensors need {total:,} B "
                                f"({big}), capacity {self.chip.gm_bytes:,} B", buffer="GM", asked=total, in_use=0,
                                capacity=self.chip.gm_bytes, loc=str(loc or ""))

    def mark_vector(self, loc: Loc) -> None:
        """The launch uses the AIVs (a UB tile, a vector op or section): remember the first line that said so."""
        if not self.uses_vector:
            self.uses_vector, self.vector_loc = True, loc

    def stores(self, block: int, key, make: Callable, vector: bool) -> list:
        """The TileStores of storage `key` in `block`, shared by the block's three traces, made (and registered in
        the block's address map) on first use.

        A cube buffer has one store (on the AIC); a UB tile has one per AIV, since each vector core has its own UB.
        """
        got = self._stores.get((block, key))
        if got is None:
            got = [make(block * 3 + 1), make(block * 3 + 2)] if vector else [make(block * 3)]
            self._stores[(block, key)] = got
            if self.space(block, got[0].buf).add_store(got[0], got[1:]):
                self.overlap = True
        return got

    def stores_if(self, block: int, key) -> Optional[list]:
        """The stores of `key` in `block` if some trace made them, else None."""
        return self._stores.get((block, key))

    def workspace(self, n: int, shape: tuple, dtype: Any, loc: Loc) -> GMTensor:
        if n < len(self.workspaces):
            ws = self.workspaces[n]
            if ws.shape != shape or ws.dtype != dtype:
                raise KernelError(f"{loc}: pl.workspace #{n} asks {list(shape)} {dtype} here but "
                                  f"{list(ws.shape)} {ws.dtype} in another trace; it must not depend on the core")
            return ws
        named = _WORKSPACE_NAME.search(loc.text)
        name = named.group(1) if named and all(w.name != named.group(1) for w in self.workspaces) else f"workspace{n}"
        ws = GMTensor(name, shape, dtype, uid=1000 + n, autosync=self.gm_sync, workspace=True)
        self.workspaces.append(ws)
        self._check_gm(loc)
        return ws


class Tracer:
    """Records one Program; tracks the section, allocations and capacity of its core."""

    def __init__(self, launch: Launch, block: int, role: Role):
        self.launch, self.chip = launch, launch.chip
        self.program = Program(block, role, launch.aiv_only)
        self.core, self.instrs = self.program.id, self.program.instrs   # emit's shortcuts
        self.auto_mutex = launch.auto_mutex
        self.fast = not _STATE.general   # the ops' fast paths are on (general_paths() turns them off)
        self.max_instructions = launch.max_instructions
        self.block, self.role = block, role
        self.is_aic = role is Role.AIC
        self.section: Optional[str] = None
        self.alloc_count = 0
        self.allocs_at: dict = {}     # kernel line -> tile-making calls made from it (tile names)
        self.n_workspace = 0
        self.mm_layout_transform: Optional[Loc] = None   # where set_mm_layout_transform(enabled=True) was called
        self.inter_block_waits: dict = {}   # INTER_BLOCK event key -> this core's waits on it so far
        self.skipped = 0              # the other side's ops this trace walked (they count against the limit too)
        self.gm_strides: dict = {}    # id(GM tensor) -> the view this core's pl.set_stride made of it (gmview.py)
        self.gm_hook: Optional[Callable] = None   # gmview.resolve, once this trace has GM views

    # ---- recording ----------------------------------------------------------------------------
    def record(self, op, pipe: Pipe, srcs: tuple, dsts: tuple, attrs: dict, loc: Loc, name: str) -> Optional[Instr]:
        """`emit` of a new AIC instruction (op, pipe, ...), the traced hot path: on the AIC's trace outside
        pl.section_vector() and with no GM views it is appended here in one go; anything else goes through emit."""
        section = self.section
        if self.is_aic and self.gm_hook is None and (section is None or section == "cube"):
            instr = Instr(op, pipe, srcs, dsts, attrs, loc, self.core, -1, (), name)   # (positional: ~0.1 us less)
            instrs = self.instrs
            instrs.append(instr)
            if len(instrs) > self.max_instructions:
                self._too_long(instr)
            return instr
        return self.emit(Instr(op, pipe, srcs, dsts, attrs, loc, name=name), _AIC)

    def emit(self, instr: Instr, role: Role) -> Optional[Instr]:
        """Append `instr` if it runs on this processor (AIC, or an AIV for any vector-side op);
        otherwise keep it as a cross-core marker."""
        if self.gm_hook is not None:
            self.gm_hook(self, instr)       # GM accesses through views: checked, set_stride applied
        aic = role is _AIC
        if not aic:
            self.launch.mark_vector(instr.loc)
        section = self.section
        if section is not None and section != ("cube" if aic else "vector"):
            want = "cube" if aic else "vector"
            raise KernelError(f"{instr.loc}: {instr.name or instr.op.name.lower()} is a {want} op inside "
                              f"pl.section_{section}(); move it into pl.section_{want}()")
        if aic == self.is_aic:
            instr.core = self.core
            self.instrs.append(instr)
            if len(self.instrs) > self.max_instructions:
                self._too_long(instr)
            return instr
        self.program.markers.append((len(self.program.instrs), instr))
        if len(self.program.markers) > self.max_instructions:
            self._too_many_markers(instr.loc)
        return None

    def skip(self, loc: Loc) -> None:
        """The AIC's trace meeting an AIV op (the AIVs' traces record it): note that the vector side takes part, and
        count it, so that a trace walking an endless vector loop ends in a CapacityError as the AIVs' would."""
        self.launch.mark_vector(loc)
        self.skipped += 1
        if self.skipped > self.max_instructions:
            raise CapacityError(
                f"{loc}: block {self.block} {self.role.name}'s trace walked more than {self.max_instructions:,} ops of "
                f"the vector side (its AIVs' traces record them; each core's trace counts against "
                f"pyto.run_options(max_block_instructions=...)): an endless loop, or a problem to split over more "
                f"blocks or larger tiles", buffer="trace", asked=self.skipped, capacity=self.max_instructions,
                loc=str(loc))

    def _too_long(self, instr: Instr) -> None:
        raise CapacityError(
            f"{instr.loc}: block {self.block} {self.role.name} traced more than {self.max_instructions:,} "
            f"instructions; one block's trace is held in host memory (about 1 KB an instruction) until it is encoded. "
            f"Split the work over more blocks or larger tiles, or raise the limit with "
            f"pyto.run_options(max_block_instructions=...)", buffer="trace", asked=len(self.instrs),
            capacity=self.max_instructions, loc=str(instr.loc))

    def cube_marker(self, op, name: str, loc: Loc) -> None:
        """An AIV's trace meeting a cube op: only where it stands matters here (a marker; crosscore.py counts
        them and checks the AIVs met the AIC's cube code). The AIC's trace, made first, checked the op. Markers
        are held until the block is encoded: they count against the limit as instructions do."""
        self.program.markers.append((len(self.program.instrs), Instr(op, _CUBE_PIPE, (), (), {}, loc, name=name)))
        if len(self.program.markers) > self.max_instructions:
            self._too_many_markers(loc)

    def _too_many_markers(self, loc: Loc) -> None:
        raise CapacityError(
            f"{loc}: block {self.block} {self.role.name}'s trace met more than {self.max_instructions:,} ops of the other "
            f"side (the other cores' traces record them; each core's trace counts against "
            f"pyto.run_options(max_block_instructions=...)): an endless loop, or a problem to split over more "
            f"blocks or larger tiles", buffer="trace", asked=len(self.program.markers), capacity=self.max_instructions,
            loc=str(loc))


def _signature(fn: Callable) -> inspect.Signature:
    """fn's signature with its annotations evaluated (a file with `from __future__ import annotations` has them as
    strings; PyPTO-Pro evaluates them, runtime/jit.py)."""
    if sys.version_info >= (3, 10):
        try:
            return inspect.signature(fn, eval_str=True)
        except NameError as e:
            raise KernelError(f"kernel '{fn.__name__}': an annotation names something undefined ({e}); with `from "
                              f"__future__ import annotations` every annotation must resolve in the module") from None
    return inspect.signature(fn)


def tracing() -> bool:
    """Whether a kernel is being traced in this thread."""
    return _STATE.tracer is not None


def current() -> Tracer:
    """The active tracer, or KernelError telling the user to launch the kernel."""
    tr = _STATE.tracer
    if tr is None:
        raise KernelError("pyto.language ops can only be called inside a kernel being launched: decorate the "
                          "function with @pl.jit and call it (kernel[None, block_dim](arrays...)), or with @pl.kernel "
                          "and run it with pyto.run(kernel, ...)")
    return tr


class Kernel:
    """A function marked @pl.kernel (pyto's extension): GM tensors positional (numpy arrays, any shape), static
    Python parameters as keywords. Its tile groups with mutex ids are ordered by auto_mutex tokens (PyPTO-Pro's
    default), and pyto's dependency auto-sync orders its pl.alloc tiles and, within each program, its GM tensors.
    `pl.jit` kernels (jit.py) are a subclass."""

    auto_mutex = True
    gm_sync = True        # auto-sync orders GM accesses within a program (a jit kernel's are the kernel's to order)

    def __init__(self, fn: Callable):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.signature = _signature(fn)
        self.name = fn.__name__
        self._gm: Optional[tuple] = None      # declare()'s GM dtypes
        self._declared: dict = {}             # dtypes -> the declared kernel (one object each: launch cache keys)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _STATE.tracer is None:
            raise KernelError(f"kernel '{self.name}' cannot be called directly; launch it with "
                              f"pyto.run({self.name}, *arrays, **params)")
        return self.fn(*args, **kwargs)

    def gm_names(self) -> list:
        """The names of its GM tensor parameters, in order."""
        return [p.name for p in self.signature.parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]

    def gm_dtypes(self) -> list:
        """The DType each GM tensor parameter declares, or None (a @pl.kernel's: its array's dtype says it, unless
        `declare` named one). A declared type whose numpy storage is the array's names it: a uint8 array declared
        HF8 is HF8 codes, one declared FP4 packed FP4 pairs."""
        return list(self._gm) if self._gm is not None else [None] * len(self.gm_names())

    def declare(self, dtypes: Sequence) -> "Kernel":
        """This @pl.kernel with its GM tensors declared `dtypes` (a DType each, None: the array's own), as a pl.jit
        kernel's annotations declare them: numpy has no HF8 or FP4, so only a declaration makes uint8 bytes HF8
        codes or packed FP4 pairs. One object per dtypes (the launch cache keys kernels by identity)."""
        if type(self).gm_dtypes is not Kernel.gm_dtypes:
            raise KernelError(f"kernel '{self.name}' declares its GM dtypes by its annotations; declare() is for "
                              f"@pl.kernel")
        key = tuple(None if d is None else as_dtype(d) for d in dtypes)
        if len(key) != len(self.gm_names()):
            raise KernelError(f"kernel '{self.name}' takes {len(self.gm_names())} GM tensors, declare() got "
                              f"{len(key)} dtypes")
        got = self._declared.get(key)
        if got is None:
            got = self._declared[key] = copy.copy(self)
            got._gm, got._declared = key, {}
        return got

    def bind(self, args: tuple, params: dict) -> tuple:
        """(GM arrays, trace-time values by name) of a launch (run.py checks them)."""
        return list(args), dict(params)

    def call(self, tensors: list, values: dict) -> None:
        """Run the body on the traced GM tensors and the trace-time values."""
        self.fn(*tensors, **values)

    def trace(self, tracer: Tracer, args: list, params: dict) -> Program:
        """Run the kernel under `tracer` (one processor of one block): its Program (pyto.run calls this)."""
        prev, _STATE.tracer = _STATE.tracer, tracer
        try:
            self.call(args, params)
            if tracer.mm_layout_transform is not None:
                raise KernelError(f"{tracer.mm_layout_transform}: pl.system.set_mm_layout_transform(enabled=True) is "
                                  f"still on when kernel '{self.name}' ends; PyPTO-Pro pairs it "
                                  f"(set_mm_layout_transform.md): enabled=False after the store")
        except PytoError:
            raise
        except MemoryError as e:
            raise CapacityError(f"{_raising_line(e, self.fn)}: host memory ran out tracing kernel '{self.name}' (block "
                                f"{tracer.block} {tracer.role.name}, {len(tracer.instrs):,} instructions so far): the "
                                f"problem is too large to trace on this machine", buffer="host") from None
        except Exception as e:      # the kernel's own Python failed (an assert, a bad unpack): name its line
            raise KernelError(f"{_raising_line(e, self.fn)}: kernel '{self.name}' raised {type(e).__name__}: "
                              f"{e}") from e
        finally:
            _STATE.tracer = prev
        return tracer.program


def _raising_line(e: BaseException, fn: Optional[Callable] = None) -> Loc:
    """The last frame of e's traceback in the kernel author's code (not pyto, numpy or the standard library; the
    kernel's own file even when it is installed in site-packages): the kernel line, or a helper it called."""
    tb, last = e.__traceback__, None
    own = getattr(getattr(fn, "__code__", None), "co_filename", None)
    while tb is not None:
        file = tb.tb_frame.f_code.co_filename
        if file == own or (not file.startswith(_LIBRARY_DIRS) and "site-packages" not in file):
            last = tb
        tb = tb.tb_next
    if last is None:
        return Loc("<unknown>", 0, "")
    file, line = last.tb_frame.f_code.co_filename, last.tb_lineno
    return Loc(file, line, linecache.getline(file, line).strip())


def kernel(fn: Callable) -> Kernel:
    """Mark a function as a pyto kernel (pyto's extension of PyPTO-Pro's @pl.jit for kernels with static Python
    parameters: `pyto.run(k, *arrays, blocks=..., **static)`)."""
    if not callable(fn):
        raise KernelError(f"@pl.kernel decorates a function, got {fn!r}")
    return Kernel(fn)
