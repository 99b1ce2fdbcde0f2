"""The instruction record every DSL call becomes, and the enums it is made of (STYLE 1).

One `pl.*` call appends exactly one `Instr` to the current trace. The emulator reads only these
records; it never imports `pyto.language`.
"""
from __future__ import annotations

import enum
import linecache
import sys
from dataclasses import dataclass
from typing import Any, Optional

from .errors import KernelError


class Pipe(enum.IntEnum):
    """Hardware pipes. AIC: MTE2, MTE1, M, FIX, S. AIV: MTE2, V, MTE3, S."""

    MTE2 = 0  # GM -> L1 / UB
    MTE1 = 1  # L1 -> L0A / L0B / BT
    M = 2     # cube (MMAD)
    FIX = 3   # Fixpipe: L0C -> GM / L1 / UB
    V = 4     # vector unit
    MTE3 = 5  # UB -> GM / L1
    S = 6     # scalar: sync instructions
    ALL = 7   # bar_all only


class Buf(enum.IntEnum):
    """Memories: GM (global), L1 and L0A/L0B/L0C/BT/FB on the cube core, UB on each vector core. PyPTO-Pro's
    `pl.MemorySpace` names the same buffers: DDR = GM, Mat = L1, Left = L0A, Right = L0B, Acc = L0C, Vec = UB,
    Bias = BT, Scaling = FB, ScaleLeft = L0A_MX, ScaleRight = L0B_MX (the MX scale domains paired with L0A / L0B,
    PTO-ISA's __ca__ / __cb__ scale spaces: MemorySpace.md; the 950 only). pyto's extension: SparseIndex = L0B_SP,
    the cube's own buffer LoadDataWithSparse fills with a 4:2 sparse B's 2-bit index beside L0B (Atlas A2/A3;
    language/cube_sparse.py)."""

    GM = 0
    L1 = 1
    L0A = 2
    L0B = 3
    L0C = 4
    UB = 5
    BT = 6
    FB = 7
    L0A_MX = 8
    L0B_MX = 9
    L0B_SP = 10

    def __repr__(self) -> str:
        return f"pl.MemorySpace.{_SPACE_NAME[self]}"


_SPACE_NAME = {Buf.GM: "DDR", Buf.L1: "Mat", Buf.L0A: "Left", Buf.L0B: "Right", Buf.L0C: "Acc", Buf.UB: "Vec",
               Buf.BT: "Bias", Buf.FB: "Scaling", Buf.L0A_MX: "ScaleLeft", Buf.L0B_MX: "ScaleRight",
               Buf.L0B_SP: "SparseIndex"}


class Role(enum.IntEnum):
    """The three processors of one block (core group): one cube core, two vector cores."""

    AIC = 0
    AIV0 = 1
    AIV1 = 2


class Op(enum.IntEnum):
    """The kinds of instruction a trace records (one per DSL call)."""

    # data movement
    LOAD = 0        # GM->L1, GM->UB (MTE2); L1->L0A/L0B/BT (MTE1)
    STORE = 1       # L0C->GM (FIX); UB->GM (MTE3)
    MOVE = 2        # L0C->L1, L0C->UB (FIX); UB->L1 (MTE3)
    # cube
    MMAD = 3        # matmul / matmul_acc
    # vector
    VBINARY = 4     # add sub mul div maximum minimum
    VSCALAR = 5     # adds muls
    VUNARY = 6      # exp abs sqrt relu
    VCAST = 7
    VDUP = 8        # duplicate (fill)
    VREDUCE = 9     # row max / row sum
    VEXPAND = 10    # expand_sub / expand_mul / expand_div
    # synchronisation
    SET_FLAG = 11
    WAIT_FLAG = 12
    BARRIER = 13    # bar_m / bar_mte1 / bar_mte2 / bar_mte3 / bar_fix / bar_v / bar_all
    SYNC_ALL = 14
    MUTEX_LOCK = 15     # pl.system.mutex_lock: take a buffer-id token on a pipe
    MUTEX_UNLOCK = 16   # pl.system.mutex_unlock: give it back
    VFILLPAD = 17   # pl.fillpad: copy a tile's valid region, the pad value around it (V)
    # debugging and element access (pyto/language/debug.py): the scalar unit's (S), pl.dump_data's V
    GETVAL = 40     # pl.getval / container[i, j]: one element into a scalar
    SETVAL = 41     # pl.setval / container[i, j] = v
    PRINTF = 42     # pl.printf
    ASSERT = 43     # pl.pto_assert
    DUMP = 44       # pl.dump_data
    TRAP = 45       # pl.trap


MOVE_OPS = frozenset({Op.LOAD, Op.STORE, Op.MOVE})
CUBE_OPS = frozenset({Op.MMAD})
VECTOR_OPS = frozenset({Op.VBINARY, Op.VSCALAR, Op.VUNARY, Op.VCAST, Op.VDUP, Op.VREDUCE, Op.VEXPAND, Op.VFILLPAD})
SYNC_OPS = frozenset({Op.SET_FLAG, Op.WAIT_FLAG, Op.BARRIER, Op.SYNC_ALL, Op.MUTEX_LOCK, Op.MUTEX_UNLOCK})
DEBUG_OPS = frozenset({Op.GETVAL, Op.SETVAL, Op.PRINTF, Op.ASSERT, Op.DUMP, Op.TRAP})
assert MOVE_OPS | CUBE_OPS | VECTOR_OPS | SYNC_OPS | DEBUG_OPS == set(Op)


class AccPhase(enum.Enum):
    """Matmul side of the hardware unit_flag (docs/cube_phase.md §2.1): Partial and Final wait for flag 0; Final sets it to 1.
    Unspecified (PyPTO-Pro's default) is no phase: software sync only."""

    __hash__ = object.__hash__    # singletons: identity hashing (C), as DType

    Unspecified = "Unspecified"
    Partial = "Partial"
    Final = "Final"


class STPhase(enum.Enum):
    """Fixpipe side of the unit_flag (docs/cube_phase.md §2.2): Partial and Final wait for flag 1; Final resets it to 0.
    Unspecified (PyPTO-Pro's default) is no phase."""

    __hash__ = object.__hash__    # singletons: identity hashing (C), as DType

    Unspecified = "Unspecified"
    Partial = "Partial"
    Final = "Final"


class AccToVecMode(enum.Enum):
    """How Fixpipe L0C->UB splits a tile between the two AIVs (PyPTO-Pro names)."""

    __hash__ = object.__hash__    # singletons: identity hashing (C), as DType

    SingleModeVec0 = "SingleModeVec0"
    SingleModeVec1 = "SingleModeVec1"
    DualModeSplitM = "DualModeSplitM"
    DualModeSplitN = "DualModeSplitN"


@dataclass(frozen=True, eq=False)   # interned per (file, line): identity is equality
class Loc:
    """Where in the kernel's own source an instruction came from."""

    file: str
    line: int
    text: str

    def __str__(self) -> str:
        short = self.file.rsplit("/", 1)[-1]
        return f"{short}:{self.line} {self.text}".rstrip()


def core_name(core: int, aiv_only: bool = False) -> str:
    """A core (block * 3 + role) as messages name it: 'block 2 AIC', 'block 2 AIV1'; in an AIV-only kernel, where
    each AIV is a block of its own (PyPTO-Pro's numbering), 'AIV 5'."""
    block, role = divmod(core, 3)
    if aiv_only and role:
        return f"AIV {2 * block + role - 1}"
    return f"block {block} {('AIC', 'AIV0', 'AIV1')[role]}"


CROSS_CORE = "xcore"   # first item of a cross-core flag's key: (CROSS_CORE, id, mode, src role, dst role)


def is_cross_core(key) -> bool:
    """Whether a flag key names a cross-core flag's queue (pl.system.set_cross_core / wait_cross_core)."""
    return type(key) is tuple and key[0] == CROSS_CORE


def rect_covers(a: tuple, b: tuple) -> bool:
    """Whether rectangle a contains rectangle b."""
    return a[0] <= b[0] and b[1] <= a[1] and a[2] <= b[2] and b[3] <= a[3]


def rect_overlaps(a: tuple, b: tuple) -> bool:
    """Whether rectangles a and b share an element."""
    return a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]


class Access:
    """A rectangle of one buffer instance: a tile (`obj` = TileStore) or a GM tensor.

    `rect` = (r0, r1, c0, c1) in the object's logical element coordinates; `batch` selects one
    matrix of a GM tensor with leading dimensions (a flat index), -1 for tiles. (A plain slotted
    class rather than a frozen dataclass: one or two are made per traced instruction.)
    """

    __slots__ = ("obj", "rect", "batch")

    def __init__(self, obj: Any, rect: tuple, batch: int = -1):
        self.obj, self.rect, self.batch = obj, rect, batch

    def __repr__(self) -> str:
        return f"Access({self.obj!r}, {self.rect}, batch={self.batch})"


class Instr:
    """One instruction on one pipe of one core. `attrs` holds op-specific parameters."""

    __slots__ = ("op", "pipe", "srcs", "dsts", "attrs", "loc", "core", "index", "after", "name")

    def __init__(self, op: Op, pipe: Pipe, srcs: tuple, dsts: tuple, attrs: dict, loc: Loc, core: int = 0,
                 index: int = -1, after: tuple = (), name: str = ""):
        # one assignment a slot: a traced instruction makes one Instr, and packing them in tuples costs more
        self.op = op
        self.pipe = pipe
        self.srcs = srcs
        self.dsts = dsts
        self.attrs = attrs
        self.loc = loc
        self.core = core
        self.index = index
        self.name = name
        self.after = after   # instructions the tracer says this one waits for (a pl.Scalar operand's getval); the
        # sync stage's dependencies are its own record (emulator/sync/deps.py)

    def describe(self) -> str:
        return f"{self.name or self.op.name.lower()} on {self.pipe.name}"

    def __repr__(self) -> str:
        return f"<{self.describe()} #{self.index} {self.loc}>"


__all__ = ["core_name", "Pipe", "Buf", "Role", "Op", "AccPhase", "STPhase", "AccToVecMode", "Loc", "Access", "Instr",
           "rect_covers", "rect_overlaps", "CROSS_CORE", "is_cross_core",
           "MOVE_OPS", "CUBE_OPS", "VECTOR_OPS", "SYNC_OPS", "DEBUG_OPS"]


@dataclass(eq=False)
class TileStore:
    """The storage of one tile on one core: a `pl.make_tile` / tile-group slot at its address, or a `pl.alloc`
    slot at the address the allocator gave it. Tiles that name the same bytes the same way (same address, dtype
    and shape; a layout or its transpose: ND [1, M] / DN [M, 1], NZ [N, K] / ZN [K, N]) are views of one store.

    `shape` is the logical shape in the store's own orientation, `padded` the stored shape (fractal-padded);
    `grid` the fractal grid a view's offsets must sit on. `key` names the storage in every role's trace of a
    block (an allocation's sequence number, or its address), so the AIC and AIV programs name the same tile.
    `addr` is its first byte in its buffer and `nbytes` how many it uses from there. `autosync`: pyto's
    dependency auto-sync orders it (a `pl.alloc` tile); otherwise only the kernel's own synchronisation does.
    `shared`: its bytes overlap another store's, so the checked pass also follows its accesses byte by byte
    (emulator/check/overlap.py). `fractal`: an Acc tile's fractal bytes (PyPTO-Pro's TileType fractal).
    """

    buf: Buf
    shape: tuple
    padded: tuple
    dtype: Any            # pyto.dtypes.DType
    layout: str
    grid: tuple
    name: str
    key: int
    program: int
    loc: Optional[Loc] = None
    nbytes: int = 0
    addr: int = 0
    autosync: bool = True
    shared: bool = False
    fractal: int = 0

    def __repr__(self) -> str:
        return f"{self.buf.name} tile '{self.name}'"

    def where(self) -> str:
        """Its byte range in its buffer, for messages: 'L1 [0x8000, 0xc000)'."""
        return f"{self.buf.name} [{self.addr:#x}, {self.addr + self.nbytes:#x})"


@dataclass(frozen=True, eq=False)
class GMView:
    """How a GM view (pl.make_tensor, pl.set_stride) lays its elements over the launch tensor `root`: element
    [i0, ..., r, c] is the root's flat element `offset + i0 * strides[0] + ... + c * strides[-1]` (row-major
    flat order of the root's own shape)."""

    root: "GMTensor"
    offset: int
    strides: tuple


@dataclass(eq=False)
class GMTensor:
    """A global-memory tensor of a launch: a kernel argument, a `pl.workspace`, or a view of one of them (`view`:
    pl.make_tensor / pl.set_stride, language/gmview.py)."""

    name: str
    shape: tuple
    dtype: Any            # pyto.dtypes.DType
    uid: int
    autosync: bool = True     # pyto's dependency auto-sync orders its accesses within a program (@pl.kernel)
    view: Optional[GMView] = None
    workspace: bool = False

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"GM tensor '{self.name}' {list(self.shape)} {self.dtype}"

    def __getitem__(self, key):
        """`tensor[i, j]`: one element, PyPTO-Pro's getval (pyto/language/debug.py); tiles reach GM through pl.load /
        pl.store offsets."""
        from .language.debug import subscript
        return subscript(self, key)

    def __setitem__(self, key, value) -> None:
        """`tensor[i, j] = value`: PyPTO-Pro's setval of one element."""
        from .language.debug import subscript_store
        subscript_store(self, key, value)

    def __setattr__(self, name: str, value) -> None:
        if "workspace" in self.__dict__:      # set up (workspace is the last field __init__ sets)
            raise KernelError(f"{_caller_line()}: {self!r} is read-only in a kernel (its '{name}' is the "
                              f"launch's)")
        object.__setattr__(self, name, value)


def _caller_line() -> Loc:
    """The line that called the GMTensor method calling this: a kernel's own line."""
    f = sys._getframe(2)
    return Loc(f.f_code.co_filename, f.f_lineno, linecache.getline(f.f_code.co_filename, f.f_lineno).strip())


__all__ += ["TileStore", "GMView", "GMTensor"]
