"""On-chip moves in PyPTO-Pro's spelling (docs/zh/pypto_pro/api/SIMD-API/operation/memory_data_movement/move.md,
insert.md): each call checks its arguments and records exactly one Instr. The pipe follows from the two memory
spaces (move.md's table):

    move                 Mat -> Left / Right / Bias (extract at an offset)  MTE1   the AIC's
                         Mat (ZZ / NN E8M0) -> ScaleLeft / ScaleRight       MTE1   the AIC's
                         Acc -> Vec (acc_to_vec_mode), Acc -> Mat           FIX    the AIC's
                         Mat -> Vec                                         V      each AIV's
                         Vec -> Mat (a sub-block or an NZ source: insert)   MTE3   each AIV's
                         Vec -> Vec (ND -> NZ too)                          V      each AIV's
    insert               Vec (NZ) -> Mat at [row, col]                      MTE3   each AIV's

What a move covers (tails): Mat -> Left/Right/Vec and Vec -> Vec move the destination's valid region, read over
the same rectangle of the source (move.md: the range is [offset, offset + dst.valid_shape); a same-size move whose
destination has no valid shape copies the source's stale tail, as on hardware). Out of Acc and out of Vec into Mat
(Fixpipe, TINSERT) the source's valid region moves. Acc -> Vec by DualModeSplitM / DualModeSplitN follows move.md's
tail rule: the hardware aligns the Acc's valid M up to 2 (N up to 32) and halves it; AIV0 gets the first half,
AIV1 the rest of the valid region (M = 33: 17 and 16 rows; N = 33: 32 and 1 columns; M = 1 or N <= 16: all to
AIV0). The kernel sets each AIV's valid shape to its share itself. The padding the alignment adds (AIV1's 17th row
at M = 33) is written by the hardware from Acc bytes outside the valid region, which hold nothing defined; pyto does
not write it: those UB bytes keep what they held (a read of them is stale data or an UninitializedReadError).

Layouts: pyto holds a tile as its logical matrix; the layout decides where its bytes lie (emulator/check/overlap.py), so
what an NZ Vec tile overlaps at an address differs from its ND source's, while its elements are the same matrix.
`move(vec_nz, vec_nd)` is that copy. Into a ZN Mat tile (the NZ store of the transposed matrix), insert writes the
source's NZ fractals as they are: offsets and shapes are in the store's terms (the source [K, M/2] into a ZN [M, K]
tile at [0, off]; ST matmul/test_insert_transpose_left.py), and the cube, reading the ZN view, gets the transpose:
the on-chip transpose.

Cross-core hand-over (Acc -> Vec, Vec -> Mat, insert, Mat -> Vec) is ordered only by the kernel's own
set_cross_core / wait_cross_core for make_tile and tile-group tiles; a missing wait is a RaceError (pyto's own
pairing, emulator/sync/crosscore.py, orders only its pl.alloc tiles).
"""
from __future__ import annotations

from typing import Optional

from ..errors import AlignmentError, KernelError, OutOfBoundsError, ShapeError, UnsupportedError
from ..dtypes import FIXPIPE_OUT, DType
from ..ir import Access, AccToVecMode, Buf, Loc, Op, Pipe, Role, STPhase
from .opcommon import emit, extent, need_path, need_tile, no_scale, phase_of, region, relu_of
from .tile import Tile, as_int
from .trace import caller_loc, current

_L1, _L0A, _L0B, _L0C, _UB, _BT = Buf.L1, Buf.L0A, Buf.L0B, Buf.L0C, Buf.UB, Buf.BT
_LOAD, _MTE1, _MTE2, _AIC = Op.LOAD, Pipe.MTE1, Pipe.MTE2, Role.AIC
_L1_TO = {Buf.L0A: (("L1", "L0A"), "L1->L0A"), Buf.L0B: (("L1", "L0B"), "L1->L0B"), Buf.BT: (("L1", "BT"), "L1->BT"),
          Buf.L0A_MX: (("L1", "L0A_MX"), "L1->L0A_MX"), Buf.L0B_MX: (("L1", "L0B_MX"), "L1->L0B_MX")}
_L1_TO_AT = tuple(_L1_TO.get(b) for b in range(max(Buf) + 1))     # _L1_TO by buffer number (no enum hash)
#: Mat -> ScaleLeft / ScaleRight (move.md: MTE1): the scale tile's layout, which its Mat source must have
_SCALE_LAYOUT = {Buf.L0A_MX: "ZZ", Buf.L0B_MX: "NN"}
_SPLITM, _SPLITN = AccToVecMode.DualModeSplitM, AccToVecMode.DualModeSplitN


def _fractal_bytes(store, rows: int, cols: int) -> int:
    """Bytes an L1 -> L0A/L0B move carries for a rows x cols tile: whole fractals of the destination's grid
    (docs/fractal_formats.md §4.1: L0A/L0B hold and the cube fetches whole fractals; an edge tile's padding moves too)."""
    g0, g1 = store.grid
    n = -(-rows // g0) * g0 * (-(-cols // g1) * g1)
    return n * store.dtype.itemsize if store.dtype.bits != 4 else store.dtype.nbytes(n)    # (FP4: 16 x 64 fractals)


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


def _corner(t: Tile, r: int, c: int, rows: int, cols: int) -> Access:
    """The Access of t's [r:r + rows, c:c + cols] (t's own terms) in its store's coordinates (an extract at an
    offset; the [0:rows, 0:cols] corner is Tile.region_of's, one object per tile and extent)."""
    r0, _, c0, _ = t.rect
    if t.t:
        return Access(t.store, (r0 + c, r0 + c + cols, c0 + r, c0 + r + rows))
    return Access(t.store, (r0 + r, r0 + r + rows, c0 + c, c0 + c + cols))


def _over_dst(dst: Tile, src: Tile, offset, op: str, loc: Loc) -> tuple:
    """(source Access, destination Access, (rows, cols)) of a move that covers the destination's valid region, read
    from the source at `offset` (TEXTRACT: the source at least the destination's shape) or, without one, over the
    same rectangle of a source of the same shape. Offsets and shapes in each tile's own terms."""
    rows, cols = extent(dst)
    dacc = region(dst)
    if offset is None:
        if src.shape != dst.shape:
            raise ShapeError(f"{loc}: {op} shapes differ: {src!r} is {list(src.shape)}, {dst!r} is "
                             f"{list(dst.shape)} (move.md: a move without offset= needs the same [rows, cols]; give "
                             f"offset= to extract part of a larger source)")
        sacc = src.region_of(rows, cols)
        return sacc, dacc, (rows, cols)
    if not (isinstance(offset, (list, tuple)) and len(offset) == 2 and all(as_int(o) is not None for o in offset)):
        raise KernelError(f"{loc}: {op} offset must be [row, col], got {offset!r}")
    r, c = int(offset[0]), int(offset[1])
    sr, sc = src.shape
    if not (0 <= r < sr and 0 <= c < sc) or r + rows > sr or c + cols > sc:
        raise OutOfBoundsError(f"{loc}: {op} extracts [{r}:{r + rows}, {c}:{c + cols}] from {src!r} of shape "
                               f"{list(src.shape)}: outside it (move.md: offset + the destination's valid shape within "
                               f"the source)")
    g0, g1 = src.store.grid[::-1] if src.t else src.store.grid
    if r % g0 or c % g1:
        name, at, step = ("row", r, g0) if r % g0 else ("column", c, g1)
        raise AlignmentError(f"{loc}: {op} extracts from {src!r} at {name} offset {at}, off the fractal grid "
                             f"(multiples of {step} for {src.store.buf.name} {src.layout.value} {src.dtype})")
    vr, vc = extent(src)
    if r + rows > vr or c + cols > vc:
        raise OutOfBoundsError(f"{loc}: {op} extracts [{r}:{r + rows}, {c}:{c + cols}] from {src!r}, whose valid shape "
                               f"is [{vr}, {vc}] (move.md: the extracted range must lie in the source's valid region)")
    return _corner(src, r, c, rows, cols), dacc, (rows, cols)


# ---- Mat -> Left / Right / Bias (MTE1) ------------------------------------------------------------------------
_BIAS_SOURCES = (DType.fp16, DType.bf16, DType.fp32, DType.int32)     # (matmul.md: Mat FP16/BF16 -> Bias FP32)
def _to_l0(dst: Tile, src: Tile, offset, loc: Loc) -> None:
    """Mat -> Left / Right / Bias on MTE1 (L1 -> L0A/L0B/BT). A transposed Mat view (ZN) into Left is
    LoadDataWithTranspose: its view must be whole transpose squares (int8 32 x 32, fp16/bf16 16 x 16, fp32
    16 x 16 in the L0A view's M x K; AlignmentError otherwise, docs/tile_shapes.md §6.1's mL0 32-byte rule for a K-major int8 A).
    Into Right, a ZN Mat view is the Zn fractals themselves (no hardware transpose)."""
    s, d = src.store, dst.store
    if offset is not None and (dst.shape[0] > src.shape[0] or dst.shape[1] > src.shape[1]):
        raise UnsupportedError(f"{loc}: pl.move into the larger {dst!r} at an offset is an insert (TINSERT) into a "
                               f"cube buffer, which PyPTO-Pro does from Vec into Mat only")
    sacc, dacc, _ = _over_dst(dst, src, offset, "pl.move", loc)
    transpose = src.t != dst.t
    path = _L1_TO[d.buf]
    if s.layout == "ND" and d.buf is not _BT:
        raise ShapeError(f"{loc}: {src!r} is an ND row in Mat (for the Bias table); the cube's operands come from NZ "
                         f"or ZN Mat tiles")
    need_path("L1", d.buf.name, loc)
    if d.buf in _SCALE_LAYOUT and s.layout != _SCALE_LAYOUT[d.buf]:
        raise ShapeError(f"{loc}: pl.move({dst!r}, {src!r}): {d.buf!r} takes E8M0 scales from a "
                         f"{_SCALE_LAYOUT[d.buf]} Mat tile (move.md; matmul_mx.md: scale_a ZZ, scale_b NN), got a "
                         f"{s.layout} one")
    if s.dtype is DType.fp8e8m0 and d.buf not in _SCALE_LAYOUT:
        raise ShapeError(f"{loc}: pl.move({dst!r}, {src!r}): an E8M0 scale tile moves to ScaleLeft (ZZ) or "
                         f"ScaleRight (NN), not {d.buf!r}")
    if transpose and d.buf is _L0A and dst.dtype.itemsize not in _TRANSPOSE_SQUARE:
        raise UnsupportedError(f"{loc}: pl.move({dst!r}, {src!r}): Mat (ZN) -> Left with transpose "
                               f"(LoadDataWithTranspose) of {dst.dtype!r} is not built in pyto (its 4-bit transpose "
                               f"square is not documented); load the operand into an NZ Mat tile (order=[1, 0], a "
                               f"Dn2Nz on the 950) and move it as it is")
    if transpose and d.buf is _L0A and not _squares_ok(d, dst.rect):
        sr, sc = _TRANSPOSE_SQUARE[dst.dtype.itemsize]
        q0, q1, p0, p1 = dst.rect
        raise AlignmentError(f"{loc}: pl.move({dst!r}, {src!r}): Mat (ZN) -> Left with transpose "
                             f"(LoadDataWithTranspose) moves {sr} x {sc} {dst.dtype} squares, so the Left view's "
                             f"rows (M) must start and end on multiples of {sr} and its columns (K) on multiples of "
                             f"{sc} (or end at the tile's edge); got rows {q0}:{q1}, columns {p0}:{p1}")
    if d.buf is _BT:
        want = DType.int32 if src.dtype is DType.int32 else DType.fp32
        if src.shape[0] != 1 or src.dtype not in _BIAS_SOURCES or dst.dtype is not want:
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
    emit(_LOAD, _MTE1, _AIC, (sacc,), (dacc,), attrs, loc, "pl.move", (dst, src))


# ---- out of Acc (FIX) -----------------------------------------------------------------------------------------
def acc_to_vec_shares(dst: Tile, src: Tile, mode: Optional[AccToVecMode], loc: Loc) -> tuple:
    """Which part of `src` (an Acc tile) each AIV receives: (rect for AIV0 or None, rect for AIV1 or None), in the Acc
    store's coordinates. The tile shapes follow the hardware's halving: DualModeSplitM needs an even M and gives each
    AIV [M/2, N] tiles, DualModeSplitN needs N a multiple of 32 (N/2 on L0C's 16-column fractal grid) and [M, N/2];
    the single modes send [M, N] to one AIV. The shares are of the Acc's valid region, by move.md's tail rule (module
    docstring)."""
    if not isinstance(mode, AccToVecMode):
        raise KernelError(f"{loc}: an Acc -> Vec move needs acc_to_vec_mode=pl.AccToVecMode.<mode>, got {mode!r}")
    (m, n), (vm, vn) = src.shape, extent(src)
    r0, _, c0, _ = src.rect
    if mode is _SPLITM:
        if m % 2:
            raise ShapeError(f"{loc}: DualModeSplitM needs an even M, {src!r} has M = {m}")
        want = (m // 2, n)
        h = (vm + 1) // 2                      # the valid M aligned up to 2, halved
        shares = ((r0, r0 + h, c0, c0 + vn), (r0 + h, r0 + vm, c0, c0 + vn) if vm > h else None)
    elif mode is _SPLITN:
        if n % 32:
            raise AlignmentError(f"{loc}: DualModeSplitN gives each AIV N/2 columns, which must sit on L0C's 16-column "
                                 f"fractal grid: {src!r} has N = {n} (N/2 = {n / 2:g}); use an N that is a multiple "
                                 f"of 32, or DualModeSplitM")
        want = (m, n // 2)
        h = -(-vn // 32) * 16                  # the valid N aligned up to 32, halved
        shares = ((r0, r0 + vm, c0, c0 + min(h, vn)), (r0, r0 + vm, c0 + h, c0 + vn) if vn > h else None)
    else:
        want = (m, n)
        whole = (r0, r0 + vm, c0, c0 + vn)
        shares = (whole, None) if mode is AccToVecMode.SingleModeVec0 else (None, whole)
    if dst.shape != want:
        raise ShapeError(f"{loc}: {mode.name} gives each AIV a [{want[0]}, {want[1]}] tile, but {dst!r} is "
                         f"{list(dst.shape)}")
    return shares


def _out_of_acc(dst: Tile, src: Tile, mode, phase, relu: bool, loc: Loc) -> None:
    """Acc -> Vec (both AIVs' UB by acc_to_vec_mode) or Acc -> Mat, on FIX: the Acc's valid region."""
    tr = current()
    attrs = {"phase": phase, "mode": mode, "path": (src.buffer.name, dst.buffer.name), "relu": relu}
    if src.dtype is DType.int32 and dst.dtype is not DType.int32:
        raise ShapeError(f"{loc}: an int32 accumulator moves out as int32, not {dst.dtype}")
    if src.dtype is DType.fp32 and dst.dtype not in FIXPIPE_OUT[DType.fp32]:
        raise ShapeError(f"{loc}: an fp32 accumulator moves out as fp32/fp16/bf16, not {dst.dtype}")
    if dst.t:
        raise UnsupportedError(f"{loc}: a move out of Acc into the transposed view {dst!r} is not built yet")
    sacc = region(src)
    if dst.buffer is Buf.UB:
        if dst.store.layout != "ND":
            raise UnsupportedError(f"{loc}: Acc -> the {dst.store.layout} Vec tile {dst!r} is not built in pyto "
                                   f"(Fixpipe writes ND rows into UB here); move into an ND tile, then "
                                   f"pl.move(nz, nd)")
        attrs["split"] = shares = acc_to_vec_shares(dst, src, mode, loc)
        pair = tr.launch.stores(tr.block, dst.store.key, None, vector=True)
        dsts, nbytes = [], 0
        for v, rect in enumerate(shares):
            if rect is not None:
                rows, cols = rect[1] - rect[0], rect[3] - rect[2]
                q0, _, p0, _ = dst.rect
                dsts.append(Access(pair[v], (q0, q0 + rows, p0, p0 + cols)))
                nbytes += rows * cols * dst.dtype.itemsize
        attrs["bytes"] = nbytes
        emit(Op.MOVE, Pipe.FIX, Role.AIC, (sacc,), tuple(dsts), attrs, loc, "pl.move", (dst, src), phase is not None)
        return
    if mode is not None:
        raise KernelError(f"{loc}: acc_to_vec_mode applies to Acc -> Vec moves only")
    if dst.shape != src.shape:
        raise ShapeError(f"{loc}: pl.move shapes differ: {src!r} {list(src.shape)} vs {dst!r} {list(dst.shape)}")
    if dst.store.layout == "ND":
        raise ShapeError(f"{loc}: Fixpipe writes Acc into Mat as NZ; {dst!r} is an ND row (for the Bias table)")
    rows, cols = extent(src)
    attrs["bytes"] = rows * cols * dst.dtype.itemsize
    dacc = dst.region_of(rows, cols)
    emit(Op.MOVE, Pipe.FIX, Role.AIC, (sacc,), (dacc,), attrs, loc, "pl.move", (dst, src), phase is not None)


# ---- the vector side's moves ------------------------------------------------------------------------------------
def _mat_to_vec(dst: Tile, src: Tile, offset, loc: Loc) -> None:
    """Mat -> Vec on V (move.md's pipe table), an AIV reading its AI core's L1: the destination's valid region from
    the source (at `offset`, an extract); no conversion."""
    need_path("L1", "UB", loc)
    if dst.t or src.t:
        raise UnsupportedError(f"{loc}: pl.move Mat -> Vec between transposed views ({src!r} -> {dst!r}) is not built "
                               f"in pyto")
    if src.dtype is not dst.dtype:
        raise ShapeError(f"{loc}: pl.move does not convert: {src!r} is {src.dtype}, {dst!r} is {dst.dtype}")
    sacc, dacc, (rows, cols) = _over_dst(dst, src, offset, "pl.move", loc)
    attrs = {"phase": None, "mode": None, "path": ("L1", "UB"), "relu": False,
             "bytes": rows * cols * src.dtype.itemsize}
    emit(Op.MOVE, Pipe.V, Role.AIV0, (sacc,), (dacc,), attrs, loc, "pl.move", (dst, src))


def _physical(t: Tile) -> tuple:
    """(row, col, rows, cols) of a tile in its store's coordinates (a ZN Mat tile's are its NZ store's)."""
    r0, r1, c0, c1 = t.rect
    return r0, c0, r1 - r0, c1 - c0


def _vec_to_mat(dst: Tile, src: Tile, loc: Loc) -> None:
    """Vec -> Mat of one shape, on MTE3 (an ND source: its rows go into the Mat tile's fractals): the source's
    valid region."""
    need_path("UB", "L1", loc)
    if dst.shape != src.shape or dst.dtype is not src.dtype or dst.t or src.t:
        raise ShapeError(f"{loc}: pl.move Vec -> Mat needs equal shapes and dtypes: {src!r} {list(src.shape)} "
                         f"{src.dtype} vs {dst!r} {list(dst.shape)} {dst.dtype}")
    rows, cols = extent(src)
    sacc = region(src)
    dacc = dst.region_of(rows, cols)
    attrs = {"phase": None, "mode": None, "path": ("UB", "L1"), "relu": False,
             "bytes": rows * cols * src.dtype.itemsize}
    emit(Op.MOVE, Pipe.MTE3, Role.AIV0, (sacc,), (dacc,), attrs, loc, "pl.move", (dst, src))


def _insert(dst: Tile, src: Tile, offset, loc: Loc, op: str) -> None:
    """TINSERT (insert.md): the NZ Vec source's valid region into the Mat tile at [row, col] of its store, on MTE3."""
    need_tile(dst, f"{op} destination", (Buf.L1,), loc)
    need_tile(src, f"{op} source", (Buf.UB,), loc)
    if src.store.layout != "NZ":
        raise ShapeError(f"{loc}: {op} inserts an NZ Vec tile into Mat, but {src!r} is {src.layout.value} (insert.md: "
                         f"the source must be NZ; make it with pl.move(nz_tile, {src.store.name}))")
    if dst.store.layout == "ND":
        raise ShapeError(f"{loc}: {op} writes NZ fractals; {dst!r} is an ND row in Mat (for the Bias table)")
    if src.dtype is not dst.dtype:
        raise ShapeError(f"{loc}: {op} does not convert: {src!r} is {src.dtype}, {dst!r} is {dst.dtype}")
    need_path("UB", "L1", loc)
    if not (isinstance(offset, (list, tuple)) and len(offset) == 2 and all(as_int(o) is not None for o in offset)):
        raise KernelError(f"{loc}: {op} offset must be [row, col] (ints), got {offset!r}")
    r, c = int(offset[0]), int(offset[1])
    q0, p0, dr, dc = _physical(dst)
    rows, cols = extent(src)
    terms = " (the ZN tile's NZ store: offsets and shapes are in its physical terms)" if dst.t else ""
    if r < 0 or c < 0 or r + rows > dr or c + cols > dc:
        raise OutOfBoundsError(f"{loc}: {op} puts [{rows}, {cols}] of {src!r} at [{r}, {c}] of {dst!r}, which is "
                               f"[{dr}, {dc}]{terms}: outside it (insert.md: row + source rows <= destination rows, "
                               f"col + source columns <= destination columns)")
    c0 = 32 // src.dtype.itemsize
    if c % c0:
        raise AlignmentError(f"{loc}: {op} at column {c} of {dst!r}: NZ fractals are {c0} {src.dtype} columns wide, so "
                             f"the column offset must be a multiple of {c0}{terms}")
    attrs = {"phase": None, "mode": None, "path": ("UB", "L1"), "relu": False,
             "bytes": rows * cols * src.dtype.itemsize}
    dacc = Access(dst.store, (q0 + r, q0 + r + rows, p0 + c, p0 + c + cols))
    emit(Op.MOVE, Pipe.MTE3, Role.AIV0, (region(src),), (dacc,), attrs, loc, op, (dst, src))


def _auto_insert(dst: Tile, src: Tile, offset) -> bool:
    """Whether pl.move(Mat, Vec) is an insert (move.md): an NZ source, a source smaller than the destination (in the
    store's terms, as a ZN/NZ pair compares), or an offset."""
    if offset is not None or src.store.layout == "NZ":
        return True
    _, _, dr, dc = _physical(dst)
    _, _, sr, sc = _physical(src)
    return (dr, dc) != (sr, sc) and dr >= sr and dc >= sc


def move(dst_tile: Tile, src_tile: Tile, offset=None, *, acc_to_vec_mode: Optional[AccToVecMode] = None,
         relu_pre_mode=None, scale=None, phase: Optional[STPhase] = None) -> None:
    """Tile to tile (move.md); the pipe follows from the two memory spaces (see the module docstring).

    Mat -> Left/Right/Bias: the same [rows, cols], or `offset=[row, col]` to extract the destination's extent from a
    larger Mat tile (TEXTRACT, on the fractal grid); Mat -> Bias converts fp16/bf16 to fp32. Acc -> Vec:
    `acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM` halves M (even) between the two AIVs' UB, DualModeSplitN halves
    N (a multiple of 32), SingleModeVec0/1 send it whole to one (tails: the module docstring); `phase` (STPhase) and
    `relu_pre_mode` as pl.store's. Mat -> Vec on V. Vec -> Mat on MTE3; from an NZ source, a smaller one or at an
    offset it is pl.insert (TINSERT) unless a move-only keyword is given. Vec -> Vec on V (ND -> NZ: the same matrix
    in NZ bytes)."""
    loc = caller_loc()
    tr = current()
    dst, src = dst_tile, src_tile
    if type(dst) is Tile and type(src) is Tile and src.store.buf is _L1 and dst.store.buf is not _UB:
        if not tr.is_aic:
            tr.cube_marker(_LOAD, "pl.move", loc)  # an AIV's trace: the AIC's trace checks and records it
            return
        s, d = src.store, dst.store
        path = _L1_TO_AT[d.buf]
        if (tr.fast and path is not None and d.buf is not _BT and offset is None and scale is None
                and acc_to_vec_mode is None and relu_pre_mode is None and phase is None and s.layout == "NZ"
                and not dst.t and not src.t and s.dtype is d.dtype and path[1] in tr.chip.paths):
            # the K loop's plain Mat -> Left/Right move, all its checks in one go (the general path says which fails)
            r0, r1, c0, c1 = src.rect
            q0, q1, p0, p1 = dst.rect
            if r1 - r0 == q1 - q0 and c1 - c0 == p1 - p0:
                v = dst.valid              # the destination's valid region, over the same rect of the source
                if v is None:
                    dacc, sacc = dst.access, src.access
                else:
                    dacc = dst.region_of(v[0], v[1])
                    sacc = src.access if dacc is dst.access else src.region_of(v[0], v[1])
                emit(_LOAD, _MTE1, _AIC, (sacc,), (dacc,),
                     {"transpose": False, "bytes": _fractal_bytes(d, q1 - q0, p1 - p0), "path": path[0]}, loc,
                     "pl.move", (dst, src), tr=tr)
                return
    # (a move out of Acc, or out of Vec, is recorded in every trace: the other side's trace keeps it as a marker,
    # which pairs pyto's cross-core moves, crosscore.py)
    need_tile(src, "pl.move source", (Buf.L1, Buf.L0C, Buf.UB), loc)
    need_tile(dst, "pl.move destination", (Buf.L0A, Buf.L0B, Buf.BT, Buf.L1, Buf.UB, Buf.L0A_MX, Buf.L0B_MX), loc)
    no_scale(scale, loc, "pl.move")
    sb, db = src.buffer, dst.buffer
    if sb is _L0C:
        if offset is not None:
            raise UnsupportedError(f"{loc}: pl.move out of Acc at an offset (a part of the accumulator) is not built "
                                   f"in pyto")
        if db not in (_UB, _L1):
            raise ShapeError(f"{loc}: an Acc tile moves to Vec (UB) or Mat (L1), not {dst.buffer!r}")
        need_path(sb.name, db.name, loc)
        _out_of_acc(dst, src, acc_to_vec_mode, phase_of(phase, STPhase, loc, "pl.move"),
                    relu_of(relu_pre_mode, src, loc, "pl.move"), loc)
        return
    move_only = acc_to_vec_mode is not None or relu_pre_mode is not None or phase is not None
    if move_only:
        raise KernelError(f"{loc}: acc_to_vec_mode, relu_pre_mode and phase apply to moves out of Acc only")
    if sb is _L1:
        if db is _UB:
            _mat_to_vec(dst, src, offset, loc)
            return
        if db not in (_L0A, _L0B, _BT) and db not in _SCALE_LAYOUT:
            raise UnsupportedError(f"{loc}: pl.move {src.buffer!r} -> {dst.buffer!r} is not built in pyto (Mat moves "
                                   f"to Left, Right, Bias, ScaleLeft, ScaleRight or Vec)")
        _to_l0(dst, src, offset, loc)
        return
    if db is _L1:        # Vec -> Mat
        if _auto_insert(dst, src, offset):
            _insert(dst, src, [0, 0] if offset is None else offset, loc, "pl.move")
        else:
            _vec_to_mat(dst, src, loc)
        return
    if offset is not None:
        raise UnsupportedError(f"{loc}: pl.move offset= applies to extracts out of Mat and inserts into Mat; a Vec -> "
                               f"{dst.buffer!r} move at an offset is not built in pyto")
    if db is _UB:        # Vec -> Vec on V
        from .vector import copy
        copy(dst, src)
        return
    raise ShapeError(f"{loc}: a Vec tile moves to Mat (vector to cube) or Vec, not {dst.buffer!r}")


def insert(dst_tile: Tile, src_tile: Tile, offset) -> None:
    """The NZ Vec tile `src_tile` (its valid region) into the Mat tile `dst_tile` at `offset` = [row, col], on MTE3
    (insert.md, TINSERT). Produce the NZ tile with pl.move(nz_tile, nd_tile). row + source rows <= destination rows,
    col + source columns <= destination columns (OutOfBoundsError), col on a fractal column (a multiple of 32 B of
    elements). Into a ZN Mat tile the offset and shapes are the store's (the transposed matrix's): the cube then
    reads the inserted data transposed (module docstring)."""
    loc = caller_loc()
    current()
    _insert(dst_tile, src_tile, offset, loc, "pl.insert")


__all__ = ["move", "insert", "acc_to_vec_shares"]
