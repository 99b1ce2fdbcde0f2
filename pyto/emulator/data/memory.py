"""The machine's storage in full mode (Memory: one array per tile store, staged copies of GM tensors,
MMAD products not yet summed) and which parts of it have been written (Initialised, for
UninitializedReadError)."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ...dtypes import FP4
from ...errors import ShapeError, UninitializedReadError, UnsupportedError
from ...ir import Access, GMTensor, Instr, TileStore, core_name
from .gmviews import strided
from .widen import widen_into


def _flat3(shape: tuple) -> tuple:
    """(batch, rows, cols) view of a GM tensor shape with any number of leading dimensions."""
    return (int(np.prod(shape[:-2], dtype=np.int64)),) + tuple(shape[-2:])


def _staged_shape(t: GMTensor) -> tuple:
    """The (batch, rows, cols) of a tensor's staged array: an FP4 tensor is staged unpacked, one 4-bit code a uint8
    element, so its columns are twice its shape's packed bytes (language/movement.py: loads address it so)."""
    b, r, c = _flat3(t.shape)
    return (b, r, 2 * c) if t.dtype in FP4 else (b, r, c)


def _unpack_into(out: np.ndarray, packed: np.ndarray) -> None:
    """FP4 pairs (element 2i in the low nibble, pyto.lowp.pack_fp4) into one code an element."""
    np.bitwise_and(packed, 0x0F, out=out[..., 0::2])
    np.right_shift(packed, 4, out=out[..., 1::2])


class _Batched:
    """[batch, rows, cols] indexing of an N-d broadcast view whose batch axes do not merge into one strided axis
    (a stride-0 axis next to a strided one): the flat batch index is unravelled per access (at bind time)."""

    def __init__(self, nd: np.ndarray):
        self.nd, self.shape, self.dtype = nd, _flat3(nd.shape), nd.dtype

    def __getitem__(self, key: tuple) -> np.ndarray:
        batch, *rest = key
        return self.nd[np.unravel_index(batch, self.nd.shape[:-2]) + tuple(rest)]


class _Compact:
    """A GM input staged compact along its stride-0 axes `axes`: `base` holds what the caller's view repeats
    (those axes of size 1), `flat` is the [batch, rows, cols] view of the whole tensor over it that the data
    pass binds (strided, or _Batched), so loads read through the view and nothing is materialised."""

    def __init__(self, shape: tuple, axes: tuple, dtype):
        self.shape, self.axes = tuple(shape), tuple(axes)
        self.base = np.empty(tuple(1 if i in axes else n for i, n in enumerate(shape)), dtype)
        self.pick = tuple(slice(0, 1) if i in axes else slice(None) for i in range(len(shape)))
        nd = np.broadcast_to(self.base, shape)
        dims = [(n, s) for n, s in zip(nd.shape[:-2], nd.strides[:-2]) if n > 1]
        if all(s0 == s1 * n1 for (_, s0), (n1, s1) in zip(dims, dims[1:])):
            step = dims[-1][1] if dims else 0
            self.flat = np.lib.stride_tricks.as_strided(nd, _flat3(shape), (step,) + nd.strides[-2:],
                                                        writeable=False)
        else:
            self.flat = _Batched(nd)

    def like(self, dtype) -> "_Compact":
        """The same view over a compact base of another dtype (the widened copy)."""
        return _Compact(self.shape, self.axes, dtype)

    def stage(self, a: np.ndarray, name: str) -> None:
        """Copy what the caller's view `a` repeats into `base` (ShapeError if `a` is not such a view)."""
        if any(a.strides[i] != 0 for i in self.axes):
            raise ShapeError(f"argument '{name}' was staged as a broadcast view (stride 0 along axes "
                             f"{list(self.axes)}) on this compiled kernel's first call, and this array is not one: "
                             f"pass a broadcast view again (np.broadcast_to), or pyto.compile the kernel anew")
        np.copyto(self.base, a[self.pick])


def region_view(spec: tuple) -> np.ndarray:
    """The view a region spec (array, batch, r0, r1, c0, c1, transposed) names."""
    arr, batch, r0, r1, c0, c1, t = spec
    view = arr[batch, r0:r1, c0:c1]
    return view.T if t else view


def add_into(out: np.ndarray, prod: np.ndarray) -> None:
    """L0C += a product (fp32 or float64): one fp32 rounding of each element's sum in an fp32 tile; an int32
    tile's sum wraps like the hardware's."""
    if out.dtype.kind == "i":
        out[...] = (out.astype(np.int64) + prod.astype(np.int64)).astype(np.int32)
    else:
        out += prod.astype(out.dtype, copy=False)


def _continue(spec: tuple, new: tuple, k_axis: int) -> Optional[tuple]:
    """`spec` extended by `new` when new continues it along the operand's K axis (k_axis 1 for A [m, k], 0 for
    B [k, n]) in the same array and batch, else None."""
    arr, batch, r0, r1, c0, c1, t = spec
    if new[0] is not arr or new[1] != batch or new[6] != t:
        return None
    along_rows = (k_axis == 0) != t          # K runs along the region's rows
    if along_rows and new[4:6] == (c0, c1) and new[2] == r1:
        return (arr, batch, r0, new[3], c0, c1, t)
    if not along_rows and new[2:4] == (r0, r1) and new[4] == c1:
        return (arr, batch, r0, r1, c0, new[5], t)
    return None


class _Products:
    """The MMAD products queued on one L0C view, summed by one matmul when the view is next read. While every
    piece is a GM region continuing the last along K (operands read at their source: origins.py), the sum is
    one matmul of the two regions; otherwise each operand is widened into a K-stacked buffer as it comes
    (A's K pieces side by side, B's stacked)."""

    def __init__(self, rect: tuple, wide: type, m: int, n: int):
        self.rect, self.wide, self.k = rect, wide, 0
        self.m, self.n = m, n
        self.regions: Optional[tuple] = None    # (A's region spec, B's) while the pieces continue in GM
        self.a = self.b = None                  # the K-stacked buffers, made when first needed and reused

    def restart(self, rect: tuple) -> "_Products":
        self.rect, self.k, self.regions = rect, 0, None
        return self

    def add(self, a: np.ndarray, b: np.ndarray, a_spec: Optional[tuple] = None, b_spec: Optional[tuple] = None) -> None:
        k = a.shape[1]
        if a_spec is not None and b_spec is not None:
            if self.k == 0:
                self.regions, self.k = (a_spec, b_spec), k
                return
            if self.regions is not None:
                ra, rb = _continue(self.regions[0], a_spec, 1), _continue(self.regions[1], b_spec, 0)
                if ra is not None and rb is not None:
                    self.regions, self.k = (ra, rb), self.k + k
                    return
        if self.regions is not None:            # the pieces so far into the buffers
            done, self.k = self.k, 0
            ra, rb = self.regions
            self.regions = None
            self._stack(region_view(ra), region_view(rb), done)
        self._stack(a, b, k)

    def _stack(self, a: np.ndarray, b: np.ndarray, k: int) -> None:
        k0, k1 = self.k, self.k + k
        if self.b is None or k1 > self.b.shape[0]:
            size = max(k1, 2048, 2 * (0 if self.b is None else self.b.shape[0]))
            grown_a, grown_b = np.empty((self.m, size), self.wide), np.empty((size, self.n), self.wide)
            if k0:
                grown_a[:, :k0], grown_b[:k0] = self.a[:, :k0], self.b[:k0]
            self.a, self.b = grown_a, grown_b
        widen_into(a, self.a[:, k0:k1])
        widen_into(b, self.b[k0:k1])
        self.k = k1

    def product(self) -> np.ndarray:
        if self.regions is not None:
            a, b = region_view(self.regions[0]), region_view(self.regions[1])
            if self.m == 1 or self.n == 1:   # numpy's matrix-vector product sums in an order that depends on
                a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)   # the layout: the stacked buffers'
            return a @ b
        return self.a[:, :self.k] @ self.b[:self.k]


def _cell_name(obj) -> str:
    """What one cell of obj's initialisation mask is: a fractal, an ND row's 32-byte block, a GM element."""
    if not isinstance(obj, TileStore):
        return "elements"
    if obj.grid[0] == 1:
        return "32-byte blocks"
    return "fractals"


class Memory:
    """Arrays keyed by store/tensor identity. GM is staged: user arrays change only on `commit`. The arrays
    live as long as the Memory, so a data pass can bind views of them once (datapass.DataPass); `stage`
    starts each pass from zeroed tiles and workspaces and the caller's inputs."""

    def __init__(self, tensors: list, broadcast: Optional[dict] = None):
        self.tensors = tensors
        self.tiles: dict = {}
        self.pending: dict = {}   # id(L0C store) -> _Products: MMAD products not yet summed
        self.spare: dict = {}     # (m, n, wide) -> summed _Products whose buffers the next ones reuse
        self._views: dict = {}    # (id(store), rect) -> view (bound)
        self._wide: dict = {}     # id(input tensor) -> its widened copy (wide)
        self.widened: set = set() # ids of the inputs whose widened copy a pass reads
        # inputs given as broadcast views ({id(tensor): stride-0 axes}) are staged compact (_Compact)
        self.compact: dict = {id(t): _Compact(t.shape, broadcast[id(t)], t.dtype.np) for t in tensors
                              if broadcast and broadcast.get(id(t)) and t.dtype not in FP4}
        self._compact_wide: dict = {}     # id(input) -> its compact widened copy (`wide`)
        self.gm_views: dict = {}          # id(GM view) -> its strided array over its root's (gmviews.py; not staged)
        self.gm: dict = {id(t): self.compact[id(t)].flat if id(t) in self.compact else
                         np.empty(_staged_shape(t), t.dtype.np) for t in tensors}

    def wide(self, t: GMTensor) -> np.ndarray:
        """The widened copy of input `t` (fp32 for fp16/bf16/fp32 and the 8-bit floats, HF8's codes decoded;
        float64 for int8: exact) that MMAD operands may be read from (origins.py); filled by `stage` once some
        operand reads it (`widened`)."""
        arr = self._wide.get(id(t))
        if arr is None and id(t) in self.compact:      # a compact input: a compact widened copy, the same view
            c = self.compact[id(t)]
            wide = c if c.base.dtype == np.float32 else c.like(np.float64 if c.base.dtype == np.int8 else np.float32)
            self._compact_wide[id(t)] = wide
            arr = self._wide[id(t)] = wide.flat
        if arr is None:
            gm = self.gm[id(t)]
            arr = gm if gm.dtype == np.float32 else np.empty(gm.shape, np.float64 if gm.dtype == np.int8 else np.float32)
            self._wide[id(t)] = arr
        return arr

    def stage(self, arrays: list) -> None:
        """Start a pass: tiles and workspaces zeroed, the caller's arrays copied into staged GM (and widened
        where operands read them so)."""
        self.pending.clear()
        for arr in self.tiles.values():
            arr.fill(0)
        user = {id(t) for t in self.tensors}
        for key, arr in self.gm.items():
            if key not in user:          # a workspace
                arr.fill(0)
        for t, a in zip(self.tensors, arrays):
            c = self.compact.get(id(t))
            if c is not None:           # what the view repeats, once (and its widened copy)
                c.stage(a, t.name)
                wide = self._compact_wide.get(id(t))
                if wide is not None and id(t) in self.widened and wide is not c:
                    widen_into(c.base.reshape(-1, c.base.shape[-1]), wide.base.reshape(-1, wide.base.shape[-1]),
                               t.dtype)
                continue
            if t.dtype in FP4:
                _unpack_into(self.gm[id(t)], a.reshape(_flat3(t.shape)))
            else:
                np.copyto(self.gm[id(t)], a.reshape(self.gm[id(t)].shape))
            wide = self._wide.get(id(t))
            if wide is not None and id(t) in self.widened and wide is not self.gm[id(t)]:
                widen_into(self.gm[id(t)].reshape(-1, wide.shape[-1]), wide.reshape(-1, wide.shape[-1]), t.dtype)

    # ---- tiles ----------------------------------------------------------------------------
    def tile(self, store: TileStore) -> np.ndarray:
        arr = self.tiles.get(id(store))
        if arr is None:
            arr = np.zeros(store.padded, dtype=store.dtype.np)
            self.tiles[id(store)] = arr
        return arr

    def view(self, acc: Access) -> np.ndarray:
        """The array of a tile view (after summing any MMAD products queued on that tile)."""
        if self.pending and id(acc.obj) in self.pending:
            self.flush(acc.obj)
        r0, r1, c0, c1 = acc.rect
        return self.tile(acc.obj)[r0:r1, c0:c1]

    def bound(self, acc: Access) -> np.ndarray:
        """The view of a tile rectangle for binding a data pass (no flush: nothing is queued yet), one array
        object per rectangle: the K loop reads the same ring slots over and over."""
        key = (id(acc.obj), acc.rect)
        view = self._views.get(key)
        if view is None:
            r0, r1, c0, c1 = acc.rect
            view = self._views[key] = self.tile(acc.obj)[r0:r1, c0:c1]
        return view

    def queue_product(self, acc: Access, a: np.ndarray, b: np.ndarray, wide: type, start: bool = False,
                      a_spec: Optional[tuple] = None, b_spec: Optional[tuple] = None) -> bool:
        """Queue a @ b, computed in `wide`, to be added into view `acc`; False if products of another view are
        queued. a and b are widened now (their L0 buffers are rewritten before the sum), unless both are regions
        of widened inputs (a_spec, b_spec: see _Products), which do not change during the pass."""
        q = self.pending.get(id(acc.obj))
        if q is None:
            if not start:
                return False
            shape = (a.shape[0], b.shape[1], wide)
            spare = self.spare.get(shape)
            q = spare.pop().restart(acc.rect) if spare else _Products(acc.rect, wide, *shape[:2])
            self.pending[id(acc.obj)] = q
        elif q.rect != acc.rect or q.wide is not wide:
            return False
        q.add(a, b, a_spec, b_spec)
        return True

    def flush(self, store: TileStore) -> None:
        """Sum the products queued on `store` into it."""
        q = self.pending.pop(id(store))
        r0, r1, c0, c1 = q.rect
        out = self.tile(store)[r0:r1, c0:c1]
        prod = q.product()
        self.spare.setdefault((q.m, q.n, q.wide), []).append(q)
        add_into(out, prod)

    def gm_array(self, t: GMTensor) -> np.ndarray:
        arr = self.gm.get(id(t))
        if arr is None and t.view is not None:      # a view (gmviews.py): strided over its root's array
            arr = self.gm_views.get(id(t))
            if arr is None:
                if id(t.view.root) in self.compact:
                    raise UnsupportedError(f"argument '{t.view.root.name}' was passed as a broadcast view and the "
                                           f"kernel views it with pl.make_tensor / pl.set_stride; pass a contiguous "
                                           f"array")
                arr = self.gm_views[id(t)] = strided(self.gm_array(t.view.root), t)
            return arr
        if arr is None:  # a workspace
            arr = np.zeros(_flat3(t.shape), dtype=t.dtype.np)
            self.gm[id(t)] = arr
        return arr

    def commit(self, arrays: list, written: set) -> None:
        """Write staged GM back into the caller's arrays the kernel wrote (only after a successful run)."""
        for t, a in zip(self.tensors, arrays):
            if id(t) in written:
                np.copyto(a, self.gm[id(t)].reshape(a.shape))


class Initialised:
    """Which parts of each tile and workspace a launch tracks for the checked pass's UninitializedReadError
    (cells: fractals of fractal tiles, 32-byte blocks of ND rows, GM elements). The written cells
    themselves are kept by the checked pass (check/checkcore.py), in one flat mask laid out by `geometry`."""

    def __init__(self, tensors: list, aiv_only: bool = False):
        # ids of objects written everywhere from the start: the kernel's arguments (only workspaces, made by
        # the kernel, are tracked)
        self.full: set = {id(t) for t in tensors if not t.workspace}
        self.aiv_only = aiv_only

    def geometry(self, obj) -> Optional[tuple]:
        """(batches, rows, cols, row grid, col grid) of obj's mask of cells, None if it is not tracked. A
        tile's cell is one grid step; an access [r0:r1, c0:c1] covers cells [r0 // grid : ceil(r1 / grid)]."""
        if isinstance(obj, TileStore):
            g = obj.grid
            return 1, -(-obj.padded[0] // g[0]), -(-obj.padded[1] // g[1]), g[0], g[1]
        if id(obj) in self.full or not obj.workspace:
            return None
        return (*_flat3(obj.shape), 1, 1)

    def error(self, acc: Access, instr: Instr, unwritten: int, cells: int) -> UninitializedReadError:
        """The error for `instr` reading `acc`, `unwritten` of whose `cells` cells were never written."""
        r0, r1, c0, c1 = acc.rect
        through = getattr(acc, "of", None)        # a GM view's footprint on its root (gmviews.py)
        via = ""
        if through is not None and type(through.obj) is GMTensor:
            v0, v1, w0, w1 = through.rect
            via = f" (through view '{through.obj.name}'[{v0}:{v1}, {w0}:{w1}])"
        return UninitializedReadError(
            f"{instr.loc}: {instr.name} on PIPE_{instr.pipe.name} of {core_name(instr.core, self.aiv_only)} reads "
            f"{acc.obj!r}[{r0}:{r1}, {c0}:{c1}]{via} "
            f"but part of it was never written ({unwritten} of {cells} "
            f"{_cell_name(acc.obj)} uninitialised)")
