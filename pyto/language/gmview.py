"""GM views in PyPTO-Pro's spelling: raw pointers (`pl.Ptr[dtype]` parameters, `pl.addptr`, `pl.make_ptr`), tensor
views over a pointer or a tensor (`pl.make_tensor`), and a tensor's strides rewritten in place (`pl.set_stride`).
Pages: basic_data_structures/Ptr.md, operation/resource_management/addptr.md, make_ptr.md, make_tensor.md,
operation/memory_vector_computation/transpose_and_element_access/set_stride.md.

A view allocates and moves nothing: it is a GMTensor whose `view` (ir.GMView) lays its elements over a launch
tensor, its root (a GM argument; a Ptr argument, held as a [1, n] tensor of its elements; a pl.workspace): element
[.., r, c] is the root's flat element `offset + .. + r * row_stride + c * col_stride`. Loads and stores take views
as they take tensors (offsets and edges in the view's shape); then

* each GM access through a view is checked when it is traced: the elements it reaches must lie in its root (an
  OutOfBoundsError naming the view, its strides, the offsets and the root: make_tensor.md / addptr.md say a view
  must stay inside the memory it views), and a store through a view whose elements repeat (a stride-0 or
  overlapping-row view) is refused, since the order of its repeated writes is not modelled;
* the checked pass follows every view access onto the root's elements (emulator/data/gmviews.py), so two views of one
  buffer, or a view and the tensor itself, race, are ordered and count as written exactly where their elements
  meet; the data pass reads and writes through a strided view of the root's array.

`set_stride(tensor, [row, col])` changes the descriptor of the core that runs it (set_stride.md: pipe S, a
descriptor update): the loads and stores of that tensor this core traces after it go through the strided view. The
tensor keeps its shape; stride values must be known at trace time (a stride read from GM with getval is data-
dependent control, which pyto does not build). A view of another dtype (make_ptr / make_tensor `dtype=`, a
reinterpretation of the bytes) is not built: UnsupportedError. pyto's dependency auto-sync (@pl.kernel) does not
see through views: accesses of a view and of its root are ordered by the kernel's own synchronisation.
"""
from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Optional

from ..dtypes import FP4
from ..errors import KernelError, OutOfBoundsError, ShapeError, UnsupportedError
from ..ir import Access, GMTensor, GMView, Instr, Loc, Op
from .tile import as_int, dtype_at
from .trace import caller_loc, current
from .types import Unbuilt

_NAME = re.compile(r"([A-Za-z_][A-Za-z_0-9]*)\s*=\s*pl\.make_tensor\b")
_GM_OPS = (Op.LOAD, Op.STORE)
_VIEW_UID = 1_000_000          # views' uids (arguments count from 0, workspaces from 1000)


class PtrSpec:
    """A `pl.Ptr[dtype]` parameter annotation."""

    def __init__(self, dtype):
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"pl.Ptr[{self.dtype!r}]"


class Ptr:
    """`pl.Ptr[dtype]`: a raw GM pointer parameter's annotation (Ptr.md). Inside the kernel a pointer is an element
    offset into a launch tensor (`root`): the Ptr argument itself (the caller's array, as its elements in order) or
    what pl.make_ptr took it from; pl.addptr moves it, pl.make_tensor makes a tensor view at it."""

    __slots__ = ("root", "offset")

    def __class_getitem__(cls, item) -> PtrSpec:
        return PtrSpec(item)

    def __init__(self, root: GMTensor, offset: int = 0):
        self.root, self.offset = root, offset

    @property
    def dtype(self):
        return self.root.dtype

    def __repr__(self) -> str:
        return f"pl.Ptr[{self.root.dtype}] to element {self.offset} of {self.root!r}"


def _elements(t: GMTensor) -> int:
    return math.prod(t.shape)


def _contiguous(shape: tuple) -> tuple:
    """Row-major strides of `shape` (make_tensor.md: stride[i] = shape[i+1] * ... * shape[-1], stride[-1] = 1)."""
    out, step = [], 1
    for d in reversed(shape):
        out.append(step)
        step *= d
    return tuple(reversed(out))


def _descriptor(t: GMTensor) -> tuple:
    """(root, offset, strides) of a tensor: a view's, or a launch tensor's own (offset 0, row-major)."""
    if t.view is not None:
        return t.view.root, t.view.offset, t.view.strides
    return t, 0, _contiguous(t.shape)


def _ints(xs, what: str, op: str, loc: Loc, low: int) -> tuple:
    if not isinstance(xs, (list, tuple)):
        raise KernelError(f"{loc}: {op} {what} is a list of ints, got {xs!r}")
    out = tuple(as_int(x) for x in xs)
    if any(x is None or x < low for x in out):
        need = "positive" if low > 0 else "non-negative"
        raise KernelError(f"{loc}: {op} {what} must be {need} ints known when the kernel is traced, got "
                          f"{list(xs)!r}")
    return out


def _same_dtype(root: GMTensor, dtype, op: str, loc: Loc) -> None:
    if dtype is None:
        return
    if isinstance(dtype, Unbuilt):
        raise dtype.refuse(str(loc))
    dt = dtype_at(dtype, loc)
    if dt is not root.dtype:
        raise UnsupportedError(f"{loc}: {op}(..., dtype={dt}) reinterprets the {root.dtype} elements of {root!r} as "
                               f"{dt}: a view of another dtype is not built in pyto (GM tensors hold elements, not "
                               f"bytes); view it as {root.dtype}")


def _view(tr, root: GMTensor, offset: int, shape: tuple, strides: tuple, name: str) -> GMTensor:
    """The launch's view of `root` at `offset` with `shape` / `strides` (one object per distinct view, shared by the
    traces; the root itself when the view is the whole root as it is)."""
    if offset == 0 and shape == root.shape and strides == _contiguous(root.shape):
        return root
    launch = tr.launch
    key = (id(root), offset, shape, strides)
    got = launch.gm_views.get(key)
    if got is None:
        got = GMTensor(name, shape, root.dtype, uid=_VIEW_UID + len(launch.gm_views), autosync=root.autosync,
                       view=GMView(root, offset, strides))
        launch.gm_views[key] = got
        launch.overlap = True       # the checked pass follows the view onto its root's elements (gmviews.py)
    tr.gm_hook = resolve
    return got


def addptr(ptr: Ptr, offset) -> Ptr:
    """The pointer `offset` elements (not bytes) past `ptr` (addptr.md); it must stay inside the memory `ptr` points
    into (OutOfBoundsError naming the pointer, the offset and the root's size)."""
    current()
    loc = caller_loc()
    if not isinstance(ptr, Ptr):
        raise KernelError(f"{loc}: pl.addptr moves a pl.Ptr (a pl.Ptr[...] parameter or pl.make_ptr's result), got "
                          f"{ptr!r}; a tensor view at an offset is pl.make_tensor(pl.addptr(pl.make_ptr(t), n), ...)")
    n = as_int(offset)
    if n is None:
        raise KernelError(f"{loc}: pl.addptr's offset is an int (elements) known when the kernel is traced, got "
                          f"{offset!r}")
    at, size = ptr.offset + n, _elements(ptr.root)
    if not 0 <= at <= size:
        raise OutOfBoundsError(f"{loc}: pl.addptr({ptr!r}, {n}) points at element {at}, outside the {size} elements "
                               f"of {ptr.root!r} (addptr.md: the moved pointer must stay inside the memory it "
                               f"points into)")
    return Ptr(ptr.root, at)


def _pointee(ptr, dtype, what: str, loc) -> tuple:
    """(root memory, element offset) a pl.Ptr or a GM tensor (its first element) points at; `dtype` must be its own."""
    if isinstance(ptr, Ptr):
        root, offset = ptr.root, ptr.offset
    elif isinstance(ptr, GMTensor):
        root, offset, _ = _descriptor(ptr)
    else:
        raise KernelError(f"{loc}: {what} a pl.Ptr or a GM tensor, got {ptr!r}")
    if root.dtype in FP4:
        raise UnsupportedError(f"{loc}: {what.split()[0]} of the FP4 tensor {root!r} is not built: two elements share "
                               f"a byte, so an element offset cannot address one (PyPTO-Pro refuses pointer arithmetic "
                               f"on sub-byte types too, ptr_ops.py)")
    _same_dtype(root, dtype, what.split()[0], loc)
    return root, offset


def make_ptr(ptr, dtype=None) -> Ptr:
    """A pointer to where `ptr` (a pl.Ptr or a GM tensor: its first element) points (make_ptr.md); `dtype` other
    than its own (a reinterpretation) is not built."""
    current()
    loc = caller_loc()
    root, offset = _pointee(ptr, dtype, "pl.make_ptr takes", loc)
    return Ptr(root, offset)


def make_tensor(ptr, shape, stride=None, dtype=None) -> GMTensor:
    """A tensor view of `shape` at `ptr` (a pl.Ptr, or a GM tensor: at its first element), element [.., r, c] at
    `.. + r * stride[-2] + c * stride[-1]` elements from there (make_tensor.md; `stride` None: row-major). Loads and
    stores take it as a GM tensor; each access through it must stay inside the memory it views (checked when traced).
    Two or more dims (pyto addresses GM as matrices over the last two)."""
    tr = current()
    loc = caller_loc()
    root, offset = _pointee(ptr, dtype, "pl.make_tensor views", loc)
    shp = _ints(shape, "shape", "pl.make_tensor", loc, 1)
    if len(shp) < 2:
        raise ShapeError(f"{loc}: pl.make_tensor shape {list(shp)}: pyto's loads and stores address GM as matrices "
                         f"over the last two dims; give two or more ([1, n] for a row)")
    strides = _contiguous(shp) if stride is None else _ints(stride, "stride", "pl.make_tensor", loc, 0)
    if len(strides) != len(shp):
        raise ShapeError(f"{loc}: pl.make_tensor gives {len(strides)} strides for the {len(shp)} dims of shape "
                         f"{list(shp)}")
    named = _NAME.search(loc.text)
    name = named.group(1) if named else f"view{len(tr.launch.gm_views)}"
    return _view(tr, root, offset, shp, strides, name)


def set_stride(tensor: GMTensor, stride) -> None:
    """Rewrite the strides of `tensor`'s last two axes, [row_stride, col_stride] in elements (set_stride.md): this
    core's later loads and stores of it start where the tensor's own layout puts their offsets and walk the block's
    rows and columns by these strides (set_stride.md's example and ST datacopy/test_set_stride.py: a [2, LINE] load
    at [i, 0] with row stride k * LINE gathers lines i and i + k). Its shape is kept; each access must stay inside
    the memory under it (checked when traced)."""
    tr = current()
    loc = caller_loc()
    if not isinstance(tensor, GMTensor):
        raise KernelError(f"{loc}: pl.set_stride rewrites a GM tensor's strides, got {tensor!r}"
                          + ("; a pointer becomes a tensor view with pl.make_tensor(ptr, shape, stride)"
                             if isinstance(tensor, Ptr) else ""))
    if not (isinstance(stride, (list, tuple)) and len(stride) == 2):
        raise KernelError(f"{loc}: pl.set_stride takes [row_stride, col_stride], got {stride!r}")
    rs, cs = _ints(stride, "stride", "pl.set_stride", loc, 0)
    if tensor.dtype in FP4:
        own = [2 * tensor.shape[-1], 1]         # row-major in logical FP4 elements (matmul_mx.md: "按逻辑FP4元素")
        if [rs, cs] != own or tensor.view is not None:
            raise UnsupportedError(f"{loc}: pl.set_stride on the FP4 tensor {tensor!r} takes its own row-major "
                                   f"strides in logical elements, {own} (matmul_mx.md), got {[rs, cs]}: pyto reads an "
                                   f"FP4 tensor as its packed rows (order=[1, 0] loads it transposed)")
        return
    if (rs, cs) == _descriptor(tensor)[2][-2:]:
        tr.gm_strides.pop(id(tensor), None)
    else:
        tr.gm_strides[id(tensor)] = (rs, cs)
        tr.gm_hook = resolve


# ---- each traced GM access through a view (Tracer.emit calls this once a trace has views) -------------------------
def resolve(tr, ins: Instr) -> None:
    """Check every GM access of a load or store that goes through a view, and send those of a tensor this core's
    set_stride rewrote through the strided view of the block they walk."""
    if ins.op not in _GM_OPS:
        return
    side = "srcs" if ins.op is Op.LOAD else "dsts"
    accs = getattr(ins, side)
    strided = tr.gm_strides
    if strided and any(type(a.obj) is GMTensor and id(a.obj) in strided for a in accs):
        if len(accs) > 1:
            raise UnsupportedError(f"{ins.loc}: {ins.name} with nd_num > 1 of a tensor whose strides pl.set_stride "
                                   f"rewrote is not built in pyto")
        t, stride = accs[0].obj, strided[id(accs[0].obj)]
        shown = (f"{t!r} with strides {list(stride)} (pl.set_stride)", _offsets(t, accs[0])[1])
        accs = (_restrided(tr, accs[0], stride, ins),)
        setattr(ins, side, accs)
    else:
        shown = None
    for a in accs:
        if type(a.obj) is GMTensor and a.obj.view is not None:
            _check(a, ins, side == "dsts", shown)
            _bursts(a, ins)


def _offsets(t: GMTensor, acc: Access) -> tuple:
    """(element offset from the tensor's first element, its offsets [.., r0, c0]) of an access's first element in
    tensor `t`'s own layout."""
    _, _, strides = _descriptor(t)
    b, index, lead = max(acc.batch, 0), [], 0
    for d, s in zip(reversed(t.shape[:-2]), reversed(strides[:-2])):
        index.append(b % d)
        lead += (b % d) * s
        b //= d
    index.reverse()
    r0, _, c0, _ = acc.rect
    return lead + r0 * strides[-2] + c0 * strides[-1], index + [r0, c0]


def _restrided(tr, acc: Access, stride: tuple, ins: Instr) -> Access:
    """An access of a set_stride'd tensor as an access of the [rows, cols] view it walks: from where the tensor's own
    layout puts its offsets, rows and columns at the new strides."""
    t = acc.obj
    root, offset, _ = _descriptor(t)
    first, index = _offsets(t, acc)
    r0, r1, c0, c1 = acc.rect
    shape = (r1 - r0, c1 - c0)
    view = _view(tr, root, offset + first, shape, stride, f"{t.name}{list(index)} (set_stride {list(stride)})")
    if view is root:
        return Access(root, (0, shape[0], 0, shape[1]), 0) if root.ndim == 2 else acc
    ins.attrs.update(batch=0, r0=0, c0=0)
    return Access(view, (0, shape[0], 0, shape[1]), 0)


def _check(acc: Access, ins: Instr, write: bool, shown: Optional[tuple] = None) -> None:
    """OutOfBoundsError when `acc` (through a view) reaches outside its root; UnsupportedError for a write through
    a view whose elements repeat within the access. `shown`: (the tensor, the offsets) as the kernel named them (a
    set_stride'd access, which walks a view of its own)."""
    t = acc.obj
    root, offset, strides = t.view.root, t.view.offset, t.view.strides
    first, index = _offsets(t, acc)
    r0, r1, c0, c1 = acc.rect
    sr, sc = strides[-2], strides[-1]
    hi = offset + first + (r1 - r0 - 1) * sr + (c1 - c0 - 1) * sc
    size = _elements(root)
    if shown is None:
        shown = (f"view '{t.name}' {list(t.shape)} (strides {list(strides)}, from element {offset} of {root!r})",
                 index)
    where = f"{shown[0]} at offsets {shown[1]} ({r1 - r0} x {c1 - c0})"
    if hi >= size:
        raise OutOfBoundsError(f"{ins.loc}: {ins.name} {'writes' if write else 'reads'} {where}: it reaches element "
                               f"{hi} of '{root.name}', which has {size} (make_tensor.md / set_stride.md: a view's "
                               f"accesses must stay inside the memory it views)")
    if write and _repeats(r1 - r0, c1 - c0, sr, sc):
        raise UnsupportedError(f"{ins.loc}: {ins.name} writes {where}, whose elements repeat (strides {sr}, {sc} map "
                               f"two positions to one element): pyto does not model the order of such writes; store "
                               f"through a view whose elements are distinct")


def _bursts(acc: Access, ins: Instr) -> None:
    """The DMA bursts of an access through a view (the timing model's): rows are contiguous only at column stride
    1, and the block is one burst only when its rows follow each other."""
    r0, r1, c0, c1 = acc.rect
    sr, sc = acc.obj.view.strides[-2:]
    isz = acc.obj.dtype.itemsize
    nr, nc = r1 - r0, c1 - c0
    if sc != 1:
        burst, n = isz, nr * nc
    elif nr == 1 or sr == nc:
        burst, n = nr * nc * isz, 1
    else:
        burst, n = nc * isz, nr
    if "nburst" in ins.attrs:
        ins.attrs.update(burst=burst, nburst=n)


@lru_cache(maxsize=1024)
def _repeats(nr: int, nc: int, sr: int, sc: int) -> bool:
    """Whether two positions of an nr x nc block with strides (sr, sc) >= 0 name one element."""
    if sc == 1 and sr >= nc:
        return False
    if (sc == 0 and nc > 1) or (sr == 0 and nr > 1):
        return True
    if sc == 0 or sr == 0:
        return False
    for dr in range(1, nr):       # position (r + dr, c - dc) meets (r, c) when dr * sr == dc * sc, 0 < dc < nc
        if (dr * sr) % sc == 0 and (dr * sr) // sc < nc:
            return True
    return False


__all__ = ["Ptr", "PtrSpec", "addptr", "make_ptr", "make_tensor", "set_stride"]
