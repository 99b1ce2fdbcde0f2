"""Data movement in PyPTO-Pro's spelling (docs/zh/pypto_pro/api/SIMD-API/operation/memory_data_movement/): each
call checks its arguments and records exactly one Instr.

    load / load_tile     GM -> Mat (L1) or Vec (UB)                         MTE2
    move                 Mat -> Left / Right / Bias                         MTE1
                         Acc -> Vec (acc_to_vec_mode), Acc -> Mat           FIX
                         Vec -> Mat                                         MTE3
                         Vec -> Vec                                         V
    store / store_tile   Acc -> GM (FIX), Vec -> GM (MTE3)

`order` on a load picks the tensor's two axes the tile covers; descending order transposes (load.md "Cube侧转置场景").
What the hardware does physically follows from the tile's layout: a ZN Mat tile is the NZ bytes of the transposed
matrix, so `load(mat_zn, b_t, offs, order=[1, 0])` is a plain Nd2Nz of the stored matrix, and an NZ Mat tile loaded
with order=[1, 0] is a Dn2Nz (docs/fractal_formats.md §4.4, the 950 only).

pyto's extensions: `nd_num` / `nd_axis` on a GM load (Nd2Nz's ndNum: several matrices of consecutive batches in
one instruction, as MergeBatch fetches them). A GM region running past the tensor's edge is clipped and the rest of
the tile zero-filled (tails and valid_shape are the vector-side issue's).
"""
from __future__ import annotations

from typing import Optional, Sequence

from ..dtypes import FIXPIPE_OUT, DType
from ..errors import AlignmentError, KernelError, OutOfBoundsError, ShapeError, UnsupportedError
from ..ir import Access, AccToVecMode, Buf, GMTensor, Loc, Op, Pipe, Role, STPhase
from .opcommon import atomic_of, emit, need_path, need_tile, no_scale, phase_of, relu_of
from .tile import Tile, as_int
from .trace import caller_loc, current

_L1, _L0A, _L0B, _L0C, _UB, _BT = Buf.L1, Buf.L0A, Buf.L0B, Buf.L0C, Buf.UB, Buf.BT
_LOAD, _MTE1, _MTE2, _AIC = Op.LOAD, Pipe.MTE1, Pipe.MTE2, Role.AIC
_GM_TO = {Buf.L1: (("GM", "L1"), "GM->L1", Role.AIC), Buf.UB: (("GM", "UB"), "GM->UB", Role.AIV0)}
_L1_TO = {Buf.L0A: (("L1", "L0A"), "L1->L0A"), Buf.L0B: (("L1", "L0B"), "L1->L0B"), Buf.BT: (("L1", "BT"), "L1->BT")}
_CUBE_SIDE = (Buf.L1, Buf.L0A, Buf.L0B, Buf.BT, Buf.L0C)     # a move into / out of these is the AIC's


def _gm_region(gm: GMTensor, offsets, rows: int, cols: int, transpose: bool, loc: Loc):
    """Validate offsets into `gm`; return (Access, batch index, r0, c0, valid rows, valid cols) in GM coords for a
    rows x cols block of the tile's store (its transpose in GM when `transpose`)."""
    nd = len(gm.shape)
    if nd == 2 and type(offsets) in (list, tuple) and len(offsets) == 2 \
            and type(offsets[0]) is int and type(offsets[1]) is int:
        batch, (r0, c0) = 0, offsets      # a matrix: the checks below, in one go
    elif nd == 3 and type(offsets) in (list, tuple) and len(offsets) == 3 and type(offsets[0]) is int \
            and type(offsets[1]) is int and type(offsets[2]) is int and 0 <= offsets[0] < gm.shape[0]:
        batch, r0, c0 = offsets           # one batch dimension, likewise
    else:
        if not isinstance(offsets, (list, tuple)) or len(offsets) != gm.ndim or gm.ndim < 2:
            raise ShapeError(f"{loc}: offsets into {gm!r} need {gm.ndim} ints (one per axis), got {offsets!r}")
        ints = [as_int(o) for o in offsets]
        if None in ints:
            raise KernelError(f"{loc}: offsets must be integers, got {offsets!r}")
        offsets = ints
        batch = 0
        for o, d in zip(offsets[:-2], gm.shape[:-2]):
            if not 0 <= o < d:
                raise OutOfBoundsError(f"{loc}: batch offset {o} outside {gm!r}")
            batch = batch * d + o
        r0, c0 = offsets[-2], offsets[-1]
    gr, gc = (cols, rows) if transpose else (rows, cols)
    R, C = gm.shape[-2], gm.shape[-1]
    if not (0 <= r0 < R and 0 <= c0 < C):
        raise OutOfBoundsError(f"{loc}: offset [{r0}, {c0}] outside {gm!r} (rows {R}, cols {C})")
    vr = gr if gr <= R - r0 else R - r0      # min(gr, R - r0), without two builtin calls per GM access
    vc = gc if gc <= C - c0 else C - c0
    return Access(gm, (r0, r0 + vr, c0, c0 + vc), batch), batch, r0, c0, vr, vc


def _reversed(order, gm: GMTensor, loc: Loc, op: str, store: bool = False) -> bool:
    """Whether `order` (PyPTO-Pro's: the tensor axes the tile's two dimensions cover) transposes. pyto reads GM as
    matrices over its last two axes: other axes are UnsupportedError (they need strided GM views)."""
    if order is None:
        return False
    nd = gm.ndim
    if not (isinstance(order, (list, tuple)) and len(order) == 2 and all(as_int(a) is not None for a in order)):
        raise KernelError(f"{loc}: {op} order must list two axes of {gm!r}, got {order!r}")
    axes = [int(a) + nd if int(a) < 0 else int(a) for a in order]
    if sorted(axes) != [nd - 2, nd - 1]:
        raise UnsupportedError(f"{loc}: {op} order={list(order)} picks axes other than the last two of {gm!r}; pyto "
                               f"reads GM as matrices over its last two axes (strided views are not built)")
    if store and axes[0] > axes[1]:
        raise ShapeError(f"{loc}: {op} order must be ascending (store.md: no transposing store), got {list(order)}")
    return axes[0] > axes[1]


def _nd_parts(dst: Tile, nd_num: int, nd_axis: int, loc: Loc) -> list:
    """`dst` split into nd_num equal views along nd_axis (the store's axis; each on the fractal grid)."""
    if as_int(nd_num) is None or nd_num < 1 or nd_axis not in (0, 1):
        raise KernelError(f"{loc}: nd_num must be a positive int and nd_axis 0 or 1, got {nd_num!r}, {nd_axis!r}")
    if nd_num == 1:
        return [dst]
    r0, r1, c0, c1 = dst.rect
    size = (r1 - r0, c1 - c0)[nd_axis]
    if size % nd_num:
        raise ShapeError(f"{loc}: {dst!r} has {size} along axis {nd_axis}, not a multiple of nd_num = {nd_num}")
    step = size // nd_num
    whole = Tile(dst.store, dst.rect)
    return [whole[j * step:(j + 1) * step, :] if nd_axis == 0 else whole[:, j * step:(j + 1) * step]
            for j in range(nd_num)]


def _next_batch(gm: GMTensor, offsets, j: int, loc: Loc) -> list:
    """`offsets` moved on by j matrices in the flattened batch order of `gm`."""
    dims = gm.shape[:-2]
    flat = 0
    for o, d in zip(offsets[:-2], dims):
        flat = flat * d + o
    flat += j
    total = 1
    for d in dims:
        total *= d
    if flat >= total:
        raise OutOfBoundsError(f"{loc}: nd_num reaches batch {flat} of {gm!r}, which has {total}")
    idx = []
    for d in reversed(dims):
        idx.append(flat % d)
        flat //= d
    return idx[::-1] + list(offsets[-2:])


def _bursts(gm: GMTensor, vr: int, vc: int) -> tuple:
    """(bytes per contiguous burst, bursts) of a GM region: full-width rows are one contiguous block."""
    isz = gm.dtype.itemsize
    return (vr * vc * isz, 1) if vc == gm.shape[-1] else (vc * isz, vr)


def _fractal_bytes(store, rows: int, cols: int) -> int:
    """Bytes an L1 -> L0A/L0B move carries for a rows x cols tile: whole fractals of the destination's grid
    (docs/fractal_formats.md §4.1: L0A/L0B hold and the cube fetches whole fractals; an edge tile's padding moves too)."""
    g0, g1 = store.grid
    return -(-rows // g0) * g0 * (-(-cols // g1) * g1) * store.dtype.itemsize


#: itemsize -> (rows, columns) of the square LoadDataWithTranspose transposes, in the L0A view's terms (M, K):
#: int8 two 16 x 32 fractals (32 x 32), fp16/bf16 one 16 x 16 fractal, fp32 two 16 x 8 fractals (16 x 16).
_TRANSPOSE_SQUARE = {1: (32, 32), 2: (16, 16), 4: (16, 16)}


def _squares_ok(store, rect: tuple) -> bool:
    """Whether an L0A view (rect in its tile) is whole LoadDataWithTranspose squares: it starts on them and ends
    on them or at the tile's edge (the tile's padding, CeilAlign 32 for int8, holds the rest)."""
    sr, sc = _TRANSPOSE_SQUARE[store.dtype.itemsize]
    q0, q1, p0, p1 = rect
    rows, cols = store.shape
    return not (q0 % sr or p0 % sc or (q1 % sr and q1 != rows) or (p1 % sc and p1 != cols))


# ---- GM -> Mat / Vec ------------------------------------------------------------------------------------------
def _emit_gm_load(dst: Tile, src: GMTensor, accs: tuple, parts: Sequence[Tile], region: tuple, transpose: bool,
                  to: tuple, loc: Loc, tr=None) -> None:
    """Record a GM -> L1/UB load of len(parts) matrices (accs: their GM regions, parts: their views of
    dst), each `region` = (r0, c0, valid rows, valid cols) at its batch; `to`: an entry of _GM_TO."""
    r0, c0, vr, vc = region
    n = len(parts)
    burst, nburst = _bursts(src, vr, vc)
    attrs = {"batch": accs[0].batch, "r0": r0, "c0": c0, "vr": vr, "vc": vc, "transpose": bool(transpose),
             "bytes": n * vr * vc * src.dtype.itemsize, "burst": burst, "nburst": nburst * n, "path": to[0]}
    if n > 1:
        attrs["parts"] = tuple((a.batch, p.rect) for a, p in zip(accs, parts))
    emit(_LOAD, _MTE2, to[2], accs, (dst.access,), attrs, loc, "pl.load", (dst,), tr=tr)


def load(dst_tile: Tile, src_tensor: GMTensor, offsets: Optional[Sequence[int]] = None, *, order=None,
         nd_num: int = 1, nd_axis: int = 0) -> None:
    """GM -> Mat (L1, Nd2Nz) or Vec (UB), on MTE2 (load.md). `offsets`: absolute element offsets, one per tensor
    axis (default all 0). `order`: the tensor's two axes the tile covers, descending to transpose (the tile then
    holds the tensor's block transposed: a DN operand). `nd_num` / `nd_axis` (pyto's extension): nd_num matrices
    of consecutive batches into nd_num equal parts of the tile along its axis nd_axis.

    A transposing load into an NZ Mat tile is a Dn2Nz (DN -> Nz on the way, docs/fractal_formats.md §4.4), which only the Ascend
    950PR/950DT has (chip key formats.dn2nz, `pl.has_dn2nz()`); elsewhere declare the Mat tile ZN (its bytes are
    the NZ of the matrix as stored, so the load is a plain Nd2Nz) and let the move to Left/Right transpose."""
    tr = current()   # outside a kernel: KernelError before anything else
    loc = caller_loc()
    dst = dst_tile
    if type(dst) is Tile:
        if not tr.is_aic and dst.store.buf in _CUBE_SIDE:
            tr.cube_marker(_LOAD, "pl.load", loc)       # an AIV's trace: the AIC's trace checks and records it
            return
        if tr.is_aic and dst.store.buf is _UB:
            tr.skip(loc)                  # the AIC's trace: the AIVs' traces check and record it
            return
        src = src_tensor
        if type(src) is GMTensor and order is None and nd_num == 1 and not dst.t:
            # the common case, all its checks in one go (the general path below says which one fails)
            d = dst.store
            to = _GM_TO.get(d.buf)
            if to is not None and src.dtype is d.dtype and to[1] in tr.chip.paths:
                q0, q1, p0, p1 = dst.rect
                region = _gm_region(src, [0] * src.ndim if offsets is None else offsets, q1 - q0, p1 - p0, False, loc)
                _emit_gm_load(dst, src, (region[0],), (dst,), region[2:], False, to, loc, tr)
                return
    need_tile(dst, "pl.load destination", (Buf.L1, Buf.UB), loc)
    src = src_tensor
    if not isinstance(src, GMTensor):
        if isinstance(src, Tile):
            raise ShapeError(f"{loc}: pl.load reads a GM tensor; between on-chip tiles use pl.move (Mat -> Left/Right: "
                             f"pl.move({dst!r}, ...)), got {src!r}")
        raise ShapeError(f"{loc}: pl.load reads a GM tensor, got {src!r}")
    transpose = _reversed(order, src, loc, "pl.load") != dst.t     # what the bytes go through
    if transpose and dst.store.buf is _UB and min(dst.store.shape) > 1:
        raise UnsupportedError(f"{loc}: a transposing load of a {list(dst.shape)} matrix into UB: GM->UB is a plain "
                               f"MTE2 copy (the transposing Dn2Nz goes to L1; a single row or column may be loaded "
                               f"transposed); load into L1, or transpose on the vector side")
    if transpose and dst.store.buf is _L1 and not tr.chip.dn2nz:
        raise UnsupportedError(
            f"{loc}: pl.load({dst!r}, {src!r}, order=...) transposes into an NZ Mat tile: a Dn2Nz load (DN -> Nz "
            f"on the way GM -> L1), which chip {tr.chip.name} does not have (docs/fractal_formats.md §4.4: Ascend 950PR/950DT only; "
            f"chip table key formats.dn2nz); declare the Mat tile layout=pl.ZN (the operand as stored) and let "
            f"pl.move into Left/Right transpose it")
    to = _GM_TO[dst.store.buf]
    need_path("GM", dst.store.buf.name, loc)
    if src.dtype is not dst.dtype:
        raise ShapeError(f"{loc}: pl.load does not convert: {src!r} is {src.dtype}, {dst!r} is {dst.dtype}")
    if offsets is None:
        offsets = [0] * src.ndim
    if nd_num == 1:
        q0, q1, p0, p1 = dst.rect
        region = _gm_region(src, offsets, q1 - q0, p1 - p0, transpose, loc)
        _emit_gm_load(dst, src, (region[0],), (dst,), region[2:], transpose, to, loc)
        return
    parts = _nd_parts(dst, nd_num, (1 - nd_axis) if dst.t and nd_axis in (0, 1) else nd_axis, loc)
    accs, region = [], None
    for j, part in enumerate(parts):
        offs = offsets if j == 0 else _next_batch(src, offsets, j, loc)
        r0, r1, c0, c1 = part.rect
        region = _gm_region(src, offs, r1 - r0, c1 - c0, transpose, loc)
        accs.append(region[0])
    _emit_gm_load(dst, src, tuple(accs), parts, region[2:], transpose, to, loc)


def _tile_offsets(tile: Tile, tensor: GMTensor, tile_offsets, transpose: bool, loc: Loc, op: str) -> list:
    """load_tile / store_tile: offsets in tiles along the two matrix axes (elements along the others)."""
    if not isinstance(tile_offsets, (list, tuple)) or len(tile_offsets) != tensor.ndim:
        raise ShapeError(f"{loc}: {op} tile_offsets into {tensor!r} need {tensor.ndim} ints, got {tile_offsets!r}")
    rows, cols = tile.shape[::-1] if transpose else tile.shape
    ints = [as_int(o) for o in tile_offsets]
    if None in ints:
        raise KernelError(f"{loc}: {op} tile_offsets must be integers, got {tile_offsets!r}")
    return ints[:-2] + [ints[-2] * rows, ints[-1] * cols]


def load_tile(dst_tile: Tile, src_tensor: GMTensor, tile_offsets: Sequence[int], *, order=None) -> None:
    """pl.load with offsets counted in tiles (load_tile.md): element offset = tile offset x the tile's extent."""
    tr = current()
    loc = caller_loc()
    if not isinstance(dst_tile, Tile) or not isinstance(src_tensor, GMTensor):
        need_tile(dst_tile, "pl.load_tile destination", (Buf.L1, Buf.UB), loc)
        raise ShapeError(f"{loc}: pl.load_tile reads a GM tensor, got {src_tensor!r}")
    del tr
    rev = _reversed(order, src_tensor, loc, "pl.load_tile")
    offs = _tile_offsets(dst_tile, src_tensor, tile_offsets, rev, loc, "pl.load_tile")
    load(dst_tile, src_tensor, offs, order=order)


# ---- tile -> GM -----------------------------------------------------------------------------------------------
def store(dst_tensor: GMTensor, src_tile: Tile, offsets: Optional[Sequence[int]] = None, *, relu_pre_mode=None,
          scale=None, order=None, atomic=None, phase: Optional[STPhase] = None) -> None:
    """Acc (L0C) -> GM on FIX (Fixpipe: Nz -> ND, fp32 -> the tensor's dtype, round to nearest even), or Vec (UB)
    -> GM on MTE3 (store.md). `offsets`: where the tile's [0, 0] lands (one int per axis); rows and columns past the
    tensor's edge are not written. `phase`: pl.STPhase.Partial / Final for the unit_flag hand-over out of L0C
    (docs/cube_phase.md §2.2); `atomic=pl.AtomicType.AtomicAdd`: add into GM (split-K across cores); `relu_pre_mode=
    pl.ReluPreMode.NormalRelu` (out of Acc): Fixpipe's ReLU before the conversion. `order` must be ascending."""
    tr = current()
    loc = caller_loc()
    src, dst = src_tile, dst_tensor
    if type(src) is Tile:
        if not tr.is_aic and src.store.buf is _L0C:
            tr.cube_marker(Op.STORE, "pl.store", loc)   # an AIV's trace: the AIC's trace checks and records it
            return
        if tr.is_aic and src.store.buf is _UB:
            tr.skip(loc)                  # the AIC's trace: the AIVs' traces check and record it
            return
    if not isinstance(dst, GMTensor):
        raise ShapeError(f"{loc}: pl.store writes a GM tensor, got {dst!r}; between on-chip tiles use pl.move")
    need_tile(src, "pl.store source", (Buf.L0C, Buf.UB), loc)
    if src.t:
        raise UnsupportedError(f"{loc}: storing the transposed view {src!r} is not built yet (store the tile in its "
                               f"store's layout)")
    phase = phase_of(phase, STPhase, loc, "pl.store")
    relu = relu_of(relu_pre_mode, src, loc, "pl.store")
    atomic = atomic_of(atomic, loc)
    no_scale(scale, loc, "pl.store")
    _reversed(order, dst, loc, "pl.store", store=True)
    need_path(src.buffer.name, "GM", loc)
    if src.buffer is Buf.L0C:
        if dst.dtype not in FIXPIPE_OUT[src.dtype]:
            raise ShapeError(f"{loc}: Fixpipe converts {src.dtype} to {'/'.join(map(str, FIXPIPE_OUT[src.dtype]))}, "
                             f"not {dst.dtype} ({dst!r})")
        pipe, role = Pipe.FIX, Role.AIC
    else:
        if phase is not None:
            raise KernelError(f"{loc}: phase applies to Acc (L0C) stores only (Fixpipe), not a Vec (UB) store")
        if src.dtype is not dst.dtype:
            raise ShapeError(f"{loc}: UB->GM does not convert: {src!r} is {src.dtype}, {dst!r} is {dst.dtype}")
        pipe, role = Pipe.MTE3, Role.AIV0
    if offsets is None:
        offsets = [0] * dst.ndim
    acc, batch, r0, c0, vr, vc = _gm_region(dst, offsets, *src.shape, False, loc)
    burst, nburst = _bursts(dst, vr, vc)
    attrs = {"batch": batch, "r0": r0, "c0": c0, "vr": vr, "vc": vc, "phase": phase, "atomic": atomic,
             "bytes": vr * vc * dst.dtype.itemsize, "burst": burst, "nburst": nburst,
             "path": (src.buffer.name, "GM"), "relu": relu}
    emit(Op.STORE, pipe, role, (src.access,), (acc,), attrs, loc, "pl.store", (src,), phase is not None)


def store_tile(dst_tensor: GMTensor, src_tile: Tile, tile_offsets: Sequence[int], *, relu_pre_mode=None,
               scale=None, order=None, atomic=None, phase: Optional[STPhase] = None) -> None:
    """pl.store with offsets counted in tiles (store_tile.md)."""
    current()
    loc = caller_loc()
    if not isinstance(dst_tensor, GMTensor) or not isinstance(src_tile, Tile):
        raise ShapeError(f"{loc}: pl.store_tile writes a tile into a GM tensor, got {dst_tensor!r}, {src_tile!r}")
    offs = _tile_offsets(src_tile, dst_tensor, tile_offsets, False, loc, "pl.store_tile")
    store(dst_tensor, src_tile, offs, relu_pre_mode=relu_pre_mode, scale=scale, order=order, atomic=atomic,
          phase=phase)


# ---- tile -> tile -----------------------------------------------------------------------------------------------
def _extract(src: Tile, dst: Tile, offset, loc: Loc) -> Tile:
    """The part of `src` a move into `dst` reads: all of it (same shape), or dst's extent at `offset` (TEXTRACT)."""
    if offset is None:
        if src.shape != dst.shape:
            raise ShapeError(f"{loc}: pl.move shapes differ: {src!r} is {list(src.shape)}, {dst!r} is "
                             f"{list(dst.shape)} (move.md: Mat -> Left/Right needs the same [rows, cols]; give "
                             f"offset= to extract part of a larger source)")
        return src
    if not (isinstance(offset, (list, tuple)) and len(offset) == 2 and all(as_int(o) is not None for o in offset)):
        raise KernelError(f"{loc}: pl.move offset must be [row, col], got {offset!r}")
    r, c = int(offset[0]), int(offset[1])
    rows, cols = dst.shape
    sr, sc = src.shape
    if rows > sr or cols > sc:
        raise UnsupportedError(f"{loc}: pl.move into the larger {dst!r} at an offset is an insert (TINSERT), which "
                               f"is not built yet")
    if not (0 <= r < sr and 0 <= c < sc) or r + rows > sr or c + cols > sc:
        raise OutOfBoundsError(f"{loc}: pl.move extracts [{r}:{r + rows}, {c}:{c + cols}] from {src!r} of shape "
                               f"{list(src.shape)}: outside it (move.md: offset + the destination's shape within the "
                               f"source)")
    return src[r:r + rows, c:c + cols]


def _to_l0(dst: Tile, src: Tile, loc: Loc) -> None:
    """Mat -> Left / Right / Bias on MTE1 (L1 -> L0A/L0B/BT). A transposed Mat view (ZN) into Left is
    LoadDataWithTranspose: its view must be whole transpose squares (int8 32 x 32, fp16/bf16 16 x 16, fp32
    16 x 16 in the L0A view's M x K; AlignmentError otherwise, docs/tile_shapes.md §6.1's mL0 32-byte rule for a K-major int8 A).
    Into Right, a ZN Mat view is the Zn fractals themselves (no hardware transpose)."""
    tr = current()
    s, d = src.store, dst.store
    transpose = src.t != dst.t
    path = _L1_TO[d.buf]
    if s.layout == "ND" and d.buf is not _BT:
        raise ShapeError(f"{loc}: {src!r} is an ND row in Mat (for the Bias table); the cube's operands come from NZ "
                         f"or ZN Mat tiles")
    need_path("L1", d.buf.name, loc)
    if transpose and d.buf is _L0A and not _squares_ok(d, dst.rect):
        sr, sc = _TRANSPOSE_SQUARE[dst.dtype.itemsize]
        q0, q1, p0, p1 = dst.rect
        raise AlignmentError(f"{loc}: pl.move({dst!r}, {src!r}): Mat (ZN) -> Left with transpose "
                             f"(LoadDataWithTranspose) moves {sr} x {sc} {dst.dtype} squares, so the Left view's "
                             f"rows (M) must start and end on multiples of {sr} and its columns (K) on multiples of "
                             f"{sc} (or end at the tile's edge); got rows {q0}:{q1}, columns {p0}:{p1}")
    if d.buf is _BT:
        want = DType.int32 if src.dtype is DType.int32 else DType.fp32
        if src.shape[0] != 1 or not (src.dtype.is_float or src.dtype is DType.int32) or dst.dtype is not want:
            raise ShapeError(f"{loc}: bias goes Mat -> Bias as one row of fp16/bf16/fp32 (into an fp32 Bias tile) or "
                             f"of int32 (into an int32 one), got {src!r} {list(src.shape)} {src.dtype} -> {dst!r} "
                             f"{dst.dtype}")
        nbytes = src.shape[0] * src.shape[1] * src.dtype.itemsize
    else:
        if src.dtype is not dst.dtype:
            raise ShapeError(f"{loc}: pl.move does not convert: {src!r} is {src.dtype}, {dst!r} is {dst.dtype}")
        q0, q1, p0, p1 = dst.rect
        nbytes = _fractal_bytes(d, q1 - q0, p1 - p0)
    attrs = {"transpose": transpose, "bytes": nbytes, "path": path[0]}
    del tr
    emit(_LOAD, _MTE1, _AIC, (src.access,), (dst.access,), attrs, loc, "pl.move", (dst, src))


def _out_of_acc(dst: Tile, src: Tile, mode, phase, relu: bool, loc: Loc) -> None:
    """Acc -> Vec (both AIVs' UB by acc_to_vec_mode) or Acc -> Mat, on FIX."""
    tr = current()
    attrs = {"phase": phase, "mode": mode, "path": (src.buffer.name, dst.buffer.name), "relu": relu}
    if src.dtype is DType.int32 and dst.dtype is not DType.int32:
        raise ShapeError(f"{loc}: an int32 accumulator moves out as int32, not {dst.dtype}")
    if src.dtype is DType.fp32 and not dst.dtype.is_float:
        raise ShapeError(f"{loc}: an fp32 accumulator moves out as fp32/fp16/bf16, not {dst.dtype}")
    if dst.t:
        raise UnsupportedError(f"{loc}: a move out of Acc into the transposed view {dst!r} is not built yet")
    attrs["bytes"] = src.shape[0] * src.shape[1] * dst.dtype.itemsize
    if dst.buffer is Buf.UB:
        from .vector import l0c_to_ub_split
        attrs["split"] = halves = l0c_to_ub_split(dst, src, mode, loc)
        pair = tr.launch.stores(tr.block, dst.store.key, None, vector=True)
        dsts = tuple(Access(pair[v], dst.rect) for v in (0, 1) if halves[v] is not None)
        emit(Op.MOVE, Pipe.FIX, Role.AIC, (src.access,), dsts, attrs, loc, "pl.move", (dst, src), phase is not None)
        return
    if mode is not None:
        raise KernelError(f"{loc}: acc_to_vec_mode applies to Acc -> Vec moves only")
    if dst.shape != src.shape:
        raise ShapeError(f"{loc}: pl.move shapes differ: {src!r} {list(src.shape)} vs {dst!r} {list(dst.shape)}")
    if dst.store.layout == "ND":
        raise ShapeError(f"{loc}: Fixpipe writes Acc into Mat as NZ; {dst!r} is an ND row (for the Bias table)")
    emit(Op.MOVE, Pipe.FIX, Role.AIC, (src.access,), (dst.access,), attrs, loc, "pl.move", (dst, src),
         phase is not None)


def move(dst_tile: Tile, src_tile: Tile, offset=None, *, acc_to_vec_mode: Optional[AccToVecMode] = None,
         relu_pre_mode=None, scale=None, phase: Optional[STPhase] = None) -> None:
    """Tile to tile (move.md); the pipe follows from the two memory spaces (see the module docstring).

    Mat -> Left/Right/Bias: the same [rows, cols], or `offset=[row, col]` to extract the destination's extent from a
    larger Mat tile (TEXTRACT, on the fractal grid); Mat -> Bias converts fp16/bf16 to fp32. Acc -> Vec:
    `acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM` halves M (even) between the two AIVs' UB, DualModeSplitN halves
    N (a multiple of 32), SingleModeVec0/1 send it whole to one; `phase` (STPhase) and `relu_pre_mode` as
    pl.store's. Vec -> Mat on MTE3 (vector to cube); Vec -> Vec a copy on V."""
    loc = caller_loc()
    tr = current()
    dst, src = dst_tile, src_tile
    if type(dst) is Tile and type(src) is Tile and src.store.buf is _L1:
        if not tr.is_aic:
            tr.cube_marker(_LOAD, "pl.move", loc)  # an AIV's trace: the AIC's trace checks and records it
            return
        s, d = src.store, dst.store
        path = _L1_TO.get(d.buf)
        if (path is not None and d.buf is not _BT and offset is None and scale is None and acc_to_vec_mode is None
                and relu_pre_mode is None and phase is None and s.layout == "NZ" and not dst.t and not src.t
                and s.dtype is d.dtype and path[1] in tr.chip.paths):
            # the K loop's plain Mat -> Left/Right move, all its checks in one go (the general path says which fails)
            r0, r1, c0, c1 = src.rect
            q0, q1, p0, p1 = dst.rect
            if (r1 - r0, c1 - c0) == (q1 - q0, p1 - p0):
                emit(_LOAD, _MTE1, _AIC, (src.access,), (dst.access,),
                     {"transpose": False, "bytes": _fractal_bytes(d, q1 - q0, p1 - p0), "path": path[0]}, loc,
                     "pl.move", (dst, src), tr=tr)
                return
    # (a move out of Acc, or out of Vec, is recorded in every trace: the other side's trace keeps it as a marker,
    # which pairs pyto's cross-core moves, crosscore.py)
    need_tile(src, "pl.move source", (Buf.L1, Buf.L0C, Buf.UB), loc)
    need_tile(dst, "pl.move destination", (Buf.L0A, Buf.L0B, Buf.BT, Buf.L1, Buf.UB), loc)
    no_scale(scale, loc, "pl.move")
    sb, db = src.buffer, dst.buffer
    if sb is _L1:
        if db not in (_L0A, _L0B, _BT):
            raise UnsupportedError(f"{loc}: pl.move {src.buffer!r} -> {dst.buffer!r} is not built in pyto (Mat moves "
                                   f"to Left, Right or Bias)")
        if acc_to_vec_mode is not None or relu_pre_mode is not None or phase is not None:
            raise KernelError(f"{loc}: acc_to_vec_mode, relu_pre_mode and phase apply to moves out of Acc only")
        _to_l0(dst, _extract(src, dst, offset, loc), loc)
        return
    if offset is not None:
        raise UnsupportedError(f"{loc}: pl.move offset= applies to Mat -> Left/Right (extract) here; an insert "
                               f"(TINSERT) into a larger tile is not built yet")
    if sb is _L0C:
        if db not in (_UB, _L1):
            raise ShapeError(f"{loc}: an Acc tile moves to Vec (UB) or Mat (L1), not {dst.buffer!r}")
        need_path(sb.name, db.name, loc)
        _out_of_acc(dst, src, acc_to_vec_mode, phase_of(phase, STPhase, loc, "pl.move"),
                    relu_of(relu_pre_mode, src, loc, "pl.move"), loc)
        return
    if acc_to_vec_mode is not None or relu_pre_mode is not None or phase is not None:
        raise KernelError(f"{loc}: acc_to_vec_mode, relu_pre_mode and phase apply to moves out of Acc only")
    if db is _UB:        # Vec -> Vec on V
        from .vector import copy
        copy(dst, src)
        return
    if db is not _L1:
        raise ShapeError(f"{loc}: a Vec tile moves to Mat (vector to cube) or Vec, not {dst.buffer!r}")
    need_path("UB", "L1", loc)
    if dst.shape != src.shape or dst.dtype is not src.dtype or dst.t or src.t:
        raise ShapeError(f"{loc}: pl.move Vec -> Mat needs equal shapes and dtypes: {src!r} {list(src.shape)} "
                         f"{src.dtype} vs {dst!r} {list(dst.shape)} {dst.dtype}")
    attrs = {"phase": None, "mode": None, "path": ("UB", "L1"), "relu": False,
             "bytes": src.shape[0] * src.shape[1] * src.dtype.itemsize}
    emit(Op.MOVE, Pipe.MTE3, Role.AIV0, (src.access,), (dst.access,), attrs, loc, "pl.move", (dst, src))


def insert(dst_tile: Tile, src_tile: Tile, offset) -> None:
    """Vec (NZ) -> Mat at [row, col] (insert.md, TINSERT): needs NZ Vec tiles, which are the vector-side issue's;
    not built yet."""
    current()
    raise UnsupportedError(f"{caller_loc()}: pl.insert (Vec NZ -> Mat, TINSERT) is not built in pyto yet")


__all__ = ["load", "load_tile", "store", "store_tile", "move", "insert"]
