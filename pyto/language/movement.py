"""GM <-> on-chip data movement in PyPTO-Pro's spelling (docs/zh/pypto_pro/api/SIMD-API/operation/memory_data_movement/):
each call checks its arguments and records exactly one Instr (on-chip moves: onchip.py).

    load / load_tile     GM -> Mat (L1) or Vec (UB)                         MTE2
    store / store_tile   Acc -> GM (FIX), Vec -> GM (MTE3)

`order` on a load picks the tensor's two axes the tile covers; descending order transposes (load.md "Cube侧转置场景").
What the hardware does physically follows from the tile's layout: a ZN Mat tile is the NZ bytes of the transposed
matrix, so `load(mat_zn, b_t, offs, order=[1, 0])` is a plain Nd2Nz of the stored matrix, and an NZ Mat tile loaded
with order=[1, 0] is a Dn2Nz (docs/fractal_formats.md §4.4, the 950 only).

FP4 (MXFP4's data, matmul_mx.md): an FP4 GM tensor holds two elements a byte along its last axis, and its shape
counts those bytes ([M, K/2] for a logical [M, K], as PyPTO-Pro's annotations write it); so do its offsets on that
axis (PyPTO-Pro's test_matmul_mx.py loads at [mi, ki // 2]). The Mat tile keeps the logical shape: a load of an
[R, C] tile reads R rows of C/2 bytes (C/2 rows of R/2 bytes transposed, order=[1, 0]), which must be whole bytes
(ShapeError for an odd extent along the tensor's last axis). `pl.set_stride` on an FP4 tensor takes only its own
row-major strides in logical elements ([2 x bytes per row, 1], which PyPTO-Pro's FP4 kernels set); others are
UnsupportedError.

pyto's extensions: `nd_num` / `nd_axis` on a GM load (Nd2Nz's ndNum: several matrices of consecutive batches in
one instruction, as MergeBatch fetches them).

Tails (set_validshape.md, tail_block_handling.md): a load moves the destination's valid region, a store the
source's, and every other byte of the tile keeps what it held. A valid region that runs past the tensor's edge is
an OutOfBoundsError naming the tile, the region and the edge: a tail tile sets its valid shape to the part inside
(pl.set_validshape) before it moves, as PyPTO-Pro's kernels do; nothing is clipped or zero-filled.
"""
from __future__ import annotations

from typing import Optional, Sequence

from ..dtypes import FIXPIPE_OUT, FP4, DType
from ..errors import KernelError, OutOfBoundsError, ShapeError, UnsupportedError
from ..ir import Access, Buf, GMTensor, Loc, Op, Pipe, Role, STPhase
from .opcommon import atomic_of, emit, need_path, need_tile, no_scale, phase_of, relu_of
from .opcommon import region as region_of
from .mx_scales import is_scale_tile, load_scale
from .tile import Tile, as_int
from .trace import caller_loc, current

_L1, _L0A, _L0B, _L0C, _UB, _BT = Buf.L1, Buf.L0A, Buf.L0B, Buf.L0C, Buf.UB, Buf.BT
_LOAD, _STORE, _MTE1, _MTE2, _FIX, _AIC = Op.LOAD, Op.STORE, Pipe.MTE1, Pipe.MTE2, Pipe.FIX, Role.AIC
_GM_TO = {Buf.L1: (("GM", "L1"), "GM->L1", Role.AIC), Buf.UB: (("GM", "UB"), "GM->UB", Role.AIV0)}
_GM_TO_L1, _GM_TO_UB = _GM_TO[Buf.L1], _GM_TO[Buf.UB]     # (an enum-keyed dict lookup hashes in Python)
_E8M0, _FP32 = DType.fp8e8m0, DType.fp32
_FIX_FP32 = FIXPIPE_OUT[DType.fp32]           # what Fixpipe writes an fp32 Acc tile out as
_FINAL, _PARTIAL = STPhase.Final, STPhase.Partial
_STORE_PATH = tuple((Buf(i).name, "GM") for i in range(max(Buf) + 1))    # a store's path attribute, by buffer
_CUBE_SIDE = (Buf.L1, Buf.L0A, Buf.L0B, Buf.BT, Buf.L0C, Buf.L0A_MX, Buf.L0B_MX)     # a move into / out of these is the AIC's


def _gm_region(gm: GMTensor, offsets, rows: int, cols: int, transpose: bool, loc: Loc, tile: Optional[Tile] = None,
               op: str = "pl.load"):
    """Validate offsets into `gm`; return (Access, batch index, r0, c0, rows, cols) in GM coords for a rows x cols
    block of the tile's store (its transpose in GM when `transpose`): the valid region, which must lie inside the
    tensor (OutOfBoundsError naming `tile` otherwise)."""
    shape = gm.shape
    nd = len(shape)
    if nd == 2 and type(offsets) in (list, tuple) and len(offsets) == 2 \
            and type(offsets[0]) is int and type(offsets[1]) is int:
        batch, (r0, c0) = 0, offsets      # a matrix: the checks below, in one go
    elif nd == 3 and type(offsets) in (list, tuple) and len(offsets) == 3 and type(offsets[0]) is int \
            and type(offsets[1]) is int and type(offsets[2]) is int and 0 <= offsets[0] < shape[0]:
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
    R, C = shape[-2], shape[-1]
    if not (0 <= r0 < R and 0 <= c0 < C):
        raise OutOfBoundsError(f"{loc}: offset [{r0}, {c0}] outside {gm!r} (rows {R}, cols {C})")
    if gr > R - r0 or gc > C - c0:
        raise OutOfBoundsError(_past_edge(gm, tile, op, r0, c0, gr, gc, transpose, loc))
    return Access(gm, (r0, r0 + gr, c0, c0 + gc), batch), batch, r0, c0, gr, gc


def _past_edge(gm: GMTensor, tile: Optional[Tile], op: str, r0: int, c0: int, gr: int, gc: int, transpose: bool,
               loc: Loc) -> str:
    """The message of a GM access whose valid region runs past the tensor's edge (module docstring)."""
    R, C = gm.shape[-2], gm.shape[-1]
    inside = [min(gr, R - r0), min(gc, C - c0)]
    if transpose:
        inside = inside[::-1]
    what = "the region" if tile is None else f"the valid region {list(tile.valid_shape)} of {tile!r}"
    return (f"{loc}: {op} of {what} at offset [{r0}, {c0}] runs past the edge of {gm!r}: rows {r0}:{r0 + gr}, "
            f"cols {c0}:{c0 + gc} of a [{R}, {C}] matrix; a tail tile sets its valid shape to the part inside, "
            f"pl.set_validshape(tile, {inside}), before it moves (set_validshape.md); pyto does not clip")


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
    """(bytes per contiguous burst, bursts) of a GM region of vr x vc elements: full-width rows are one contiguous
    block (an FP4 tensor's rows hold 2 x shape[-1] elements)."""
    dt = gm.dtype
    if dt.bits != 4:                     # (the traced hot path: whole-byte elements)
        isz = dt.itemsize
        return (vr * vc * isz, 1) if vc == gm.shape[-1] else (vc * isz, vr)
    return (dt.nbytes(vr * vc), 1) if vc == 2 * gm.shape[-1] else (dt.nbytes(vc), vr)


# ---- GM -> Mat / Vec ------------------------------------------------------------------------------------------
def _emit_gm_load(dst: Tile, dacc: Access, src: GMTensor, accs: tuple, parts: Sequence[Tile], region: tuple,
                  transpose: bool, to: tuple, loc: Loc, tr=None) -> None:
    """Record a GM -> L1/UB load of len(parts) matrices into `dacc` (the destination's valid region; accs: their GM
    regions, parts: their views of the destination), each `region` = (r0, c0, rows, cols) at its batch; `to`: an
    entry of _GM_TO."""
    r0, c0, vr, vc = region
    n = len(parts)
    dt = src.dtype
    burst, nburst = _bursts(src, vr, vc)
    nbytes = n * vr * vc * dt.itemsize if dt.bits != 4 else n * dt.nbytes(vr * vc)
    attrs = {"batch": accs[0].batch, "r0": r0, "c0": c0, "vr": vr, "vc": vc, "transpose": bool(transpose),
             "bytes": nbytes, "burst": burst, "nburst": nburst * n, "path": to[0]}
    if n > 1:
        attrs["parts"] = tuple((a.batch, p.rect) for a, p in zip(accs, parts))
    emit(_LOAD, _MTE2, to[2], accs, (dacc,), attrs, loc, "pl.load", (dst,), tr=tr)


def _no_nz_vec(t: Tile, what: str, loc: Loc) -> None:
    """An NZ Vec tile is a move target and an insert source only (PyPTO-Pro's tests use it so): GM <-> NZ UB would
    move fractal bytes, which pyto does not model."""
    if t.store.buf is _UB and t.store.layout == "NZ":
        raise UnsupportedError(f"{loc}: {what} the NZ Vec tile {t!r} is not built: NZ Vec tiles are made with "
                               f"pl.move(nz_tile, nd_tile) and read by pl.insert / pl.move into Mat; load or store "
                               f"an ND Vec tile instead")


def load(dst_tile: Tile, src_tensor: GMTensor, offsets: Optional[Sequence[int]] = None, *, order=None,
         nd_num: int = 1, nd_axis: int = 0) -> None:
    """GM -> Mat (L1, Nd2Nz) or Vec (UB), on MTE2 (load.md): the destination's valid region, which must lie inside
    the tensor (module docstring). `offsets`: absolute element offsets, one per tensor axis (default all 0). `order`: the tensor's two axes the tile covers, descending to transpose (the tile then
    holds the tensor's block transposed: a DN operand). `nd_num` / `nd_axis` (pyto's extension): nd_num matrices
    of consecutive batches into nd_num equal parts of the tile along its axis nd_axis; the tile's valid shape, if
    set, is each part's (the rest of each part is left as it was).

    A transposing load into an NZ Mat tile is a Dn2Nz (DN -> Nz on the way, docs/fractal_formats.md §4.4), which only the Ascend
    950PR/950DT has (chip key formats.dn2nz, `pl.has_dn2nz()`); elsewhere declare the Mat tile ZN (its bytes are
    the NZ of the matrix as stored, so the load is a plain Nd2Nz) and let the move to Left/Right transpose."""
    tr = current()   # outside a kernel: KernelError before anything else
    loc = caller_loc()
    dst = dst_tile
    if type(dst) is Tile:
        d = dst.store
        buf = d.buf
        if tr.is_aic:
            if buf is _UB:
                tr.skip(loc)                  # the AIC's trace: the AIVs' traces check and record it
                return
        elif buf in _CUBE_SIDE:
            tr.cube_marker(_LOAD, "pl.load", loc)       # an AIV's trace: the AIC's trace checks and records it
            return
        src = src_tensor
        dt = d.dtype
        if (tr.fast and type(src) is GMTensor and order is None and nd_num == 1 and not dst.t and src.dtype is dt
                and dt.bits != 4 and dt is not _E8M0 and (buf is _L1 or (buf is _UB and d.layout != "NZ"))):
            # the common case, all its checks in one go (the general path below says which one fails): a plain
            # Nd2Nz (or GM -> UB copy) of the destination's valid region, no transpose, FP4 or MX scales
            to = _GM_TO_L1 if buf is _L1 else _GM_TO_UB
            if to[1] in tr.chip.paths:
                v = dst.valid
                dacc = dst.access if v is None else dst.region_of(v[0], v[1])
                q0, q1, p0, p1 = dacc.rect
                region = _gm_region(src, [0] * len(src.shape) if offsets is None else offsets, q1 - q0, p1 - p0,
                                    False, loc, dst)
                _emit_gm_load(dst, dacc, src, (region[0],), (dst,), region[2:], False, to, loc, tr)
                return
        if is_scale_tile(dst):            # E8M0 into a ZZ / NN Mat tile: the MX scale layout (mx_scales.py)
            if nd_num != 1:
                raise UnsupportedError(f"{loc}: pl.load of MX scales with nd_num={nd_num} is not built in pyto")
            load_scale(tr, dst, src, offsets, order, loc, _emit_gm_load, _gm_region, _GM_TO[_L1])
            return
    need_tile(dst, "pl.load destination", (Buf.L1, Buf.UB), loc)
    _no_nz_vec(dst, "pl.load into", loc)
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
    if src.dtype in FP4:
        _load_fp4(dst, src, offsets, transpose, nd_num, to, loc)
        return
    if nd_num == 1:
        dacc = region_of(dst)
        q0, q1, p0, p1 = dacc.rect
        region = _gm_region(src, offsets, q1 - q0, p1 - p0, transpose, loc, dst)
        _emit_gm_load(dst, dacc, src, (region[0],), (dst,), region[2:], transpose, to, loc)
        return
    parts = _nd_parts(dst, nd_num, (1 - nd_axis) if dst.t and nd_axis in (0, 1) else nd_axis, loc)
    r0, r1, c0, c1 = parts[0].rect
    rows, cols = r1 - r0, c1 - c0           # each part's extent: the part, or the valid shape (per part)
    if dst.valid is not None:
        vr, vc = dst.valid[::-1] if dst.t else dst.valid
        if vr > rows or vc > cols:
            raise ShapeError(f"{loc}: pl.load with nd_num={nd_num} takes {dst!r}'s valid shape "
                             f"{list(dst.valid_shape)} as each part's, but a part is [{rows}, {cols}]")
        rows, cols = vr, vc
    accs, region = [], None
    for j, part in enumerate(parts):
        offs = offsets if j == 0 else _next_batch(src, offsets, j, loc)
        region = _gm_region(src, offs, rows, cols, transpose, loc, part)
        accs.append(region[0])
    _emit_gm_load(dst, dst.access, src, tuple(accs), parts, region[2:], transpose, to, loc)


def _load_fp4(dst: Tile, src: GMTensor, offsets, transpose: bool, nd_num: int, to: tuple, loc: Loc) -> None:
    """GM (packed pairs) -> an FP4 Mat tile (module docstring): the GM Access in the tensor's byte columns, the
    attrs in logical elements (the data pass stages the tensor unpacked, one code an element)."""
    if nd_num != 1:
        raise UnsupportedError(f"{loc}: pl.load of the FP4 tensor {src!r} with nd_num={nd_num} is not built in pyto")
    if src.view is not None:
        raise UnsupportedError(f"{loc}: pl.load of FP4 through the GM view {src!r} is not built in pyto (an FP4 "
                               f"tensor is read as its packed rows)")
    dacc = region_of(dst)
    q0, q1, p0, p1 = dacc.rect
    rows, cols = q1 - q0, p1 - p0              # the block in the store's terms; transposed, its rows run along GM's
    along = rows if transpose else cols        # last axis, the packed one
    if along % 2:
        raise ShapeError(f"{loc}: pl.load of {dst!r} (valid shape {list(dst.valid_shape)}) reads {along} FP4 "
                         f"elements along the last axis of {src!r}, which packs two a byte: the extent along it must "
                         f"be even (matmul_mx.md: MXFP4 data sits packed in GM)")
    try:
        acc, batch, r0, c0, gr, gc = _gm_region(src, offsets, *((rows // 2, cols) if transpose else (rows, cols // 2)),
                                                transpose, loc, None)
    except OutOfBoundsError as e:
        raise OutOfBoundsError(f"{e} (the FP4 tensor's last axis counts bytes, two elements each: {dst!r} with valid "
                               f"shape {list(dst.valid_shape)} covers {along // 2} of them)") from None
    _emit_gm_load(dst, dacc, src, (acc,), (dst,), (r0, 2 * c0, gr, 2 * gc), transpose, to, loc)


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
    if src_tensor.dtype in FP4:
        raise UnsupportedError(f"{loc}: pl.load_tile of the FP4 tensor {src_tensor!r} is not built: its last axis "
                               f"counts packed bytes, not the tile's elements; use pl.load with a byte offset on that "
                               f"axis (as PyPTO-Pro's test_matmul_mx.py does: [mi, ki // 2])")
    rev = _reversed(order, src_tensor, loc, "pl.load_tile")
    offs = _tile_offsets(dst_tile, src_tensor, tile_offsets, rev, loc, "pl.load_tile")
    load(dst_tile, src_tensor, offs, order=order)


# ---- tile -> GM -----------------------------------------------------------------------------------------------
def store(dst_tensor: GMTensor, src_tile: Tile, offsets: Optional[Sequence[int]] = None, *, relu_pre_mode=None,
          scale=None, order=None, atomic=None, phase: Optional[STPhase] = None) -> None:
    """Acc (L0C) -> GM on FIX (Fixpipe: Nz -> ND, fp32 -> the tensor's dtype, round to nearest even), or Vec (UB)
    -> GM on MTE3 (store.md). `offsets`: where the tile's [0, 0] lands (one int per axis); the tile's valid region is
    written, and must lie inside the tensor (module docstring). `phase`: pl.STPhase.Partial / Final for the unit_flag hand-over out of L0C
    (docs/cube_phase.md §2.2); `atomic=pl.AtomicType.AtomicAdd`: add into GM (split-K across cores); `relu_pre_mode=
    pl.ReluPreMode.NormalRelu` (out of Acc): Fixpipe's ReLU before the conversion. `order` must be ascending."""
    tr = current()
    loc = caller_loc()
    src, dst = src_tile, dst_tensor
    if type(src) is Tile:
        s = src.store
        if not tr.is_aic and s.buf is _L0C:
            tr.cube_marker(Op.STORE, "pl.store", loc)   # an AIV's trace: the AIC's trace checks and records it
            return
        if tr.is_aic and s.buf is _UB:
            tr.skip(loc)                  # the AIC's trace: the AIVs' traces check and record it
            return
        if (tr.fast and s.buf is _L0C and type(dst) is GMTensor and not src.t and relu_pre_mode is None
                and scale is None and order is None and (phase is None or phase is _FINAL or phase is _PARTIAL)
                and s.dtype is _FP32 and dst.dtype in _FIX_FP32 and "L0C->GM" in tr.chip.paths):
            # Fixpipe out of an fp32 Acc tile, all its checks in one go (the general path below says which fails)
            _emit_store(tr, dst, src, offsets, _FIX, _AIC, phase, atomic_of(atomic, loc), False, loc)
            return
    if not isinstance(dst, GMTensor):
        raise ShapeError(f"{loc}: pl.store writes a GM tensor, got {dst!r}; between on-chip tiles use pl.move")
    need_tile(src, "pl.store source", (Buf.L0C, Buf.UB), loc)
    _no_nz_vec(src, "pl.store from", loc)
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
    _emit_store(tr, dst, src, offsets, pipe, role, phase, atomic, relu, loc)


def _emit_store(tr, dst: GMTensor, src: Tile, offsets, pipe: Pipe, role: Role, phase, atomic, relu: bool,
                loc: Loc) -> None:
    """Record a store of src's valid region into dst at `offsets` (checked: inside the tensor)."""
    if offsets is None:
        offsets = [0] * len(dst.shape)
    v = src.valid
    sacc = src.access if v is None else src.region_of(v[0], v[1])
    rows, cols = src.shape if v is None else v
    acc, batch, r0, c0, vr, vc = _gm_region(dst, offsets, rows, cols, False, loc, src, "pl.store")
    burst, nburst = _bursts(dst, vr, vc)
    attrs = {"batch": batch, "r0": r0, "c0": c0, "vr": vr, "vc": vc, "phase": phase, "atomic": atomic,
             "bytes": vr * vc * dst.dtype.itemsize, "burst": burst, "nburst": nburst,
             "path": _STORE_PATH[src.store.buf], "relu": relu}
    emit(_STORE, pipe, role, (sacc,), (acc,), attrs, loc, "pl.store", (src,), phase is not None, tr)


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


__all__ = ["load", "load_tile", "store", "store_tile"]
