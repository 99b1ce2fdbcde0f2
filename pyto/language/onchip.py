"""On-chip moves in PyPTO-Pro's spelling (docs/zh/pypto_pro/api/SIMD-API/operation/memory_data_movement/move.md,
insert.md): each call checks its arguments and records exactly one Instr.

    move                 Mat -> Left / Right / Bias                         MTE1
                         Acc -> Vec (acc_to_vec_mode), Acc -> Mat           FIX
                         Vec -> Mat                                         MTE3
                         Vec -> Vec                                         V
    insert               Vec (NZ) -> Mat                                    MTE3 (not built yet)
"""
from __future__ import annotations

from typing import Optional

from ..errors import AlignmentError, KernelError, OutOfBoundsError, ShapeError, UnsupportedError
from ..dtypes import DType
from ..ir import Access, AccToVecMode, Buf, Loc, Op, Pipe, Role, STPhase
from .opcommon import emit, need_path, need_tile, no_scale, phase_of, relu_of
from .tile import Tile, as_int
from .trace import caller_loc, current

_L1, _L0A, _L0B, _L0C, _UB, _BT = Buf.L1, Buf.L0A, Buf.L0B, Buf.L0C, Buf.UB, Buf.BT
_LOAD, _MTE1, _MTE2, _AIC = Op.LOAD, Pipe.MTE1, Pipe.MTE2, Role.AIC
_L1_TO = {Buf.L0A: (("L1", "L0A"), "L1->L0A"), Buf.L0B: (("L1", "L0B"), "L1->L0B"), Buf.BT: (("L1", "BT"), "L1->BT")}


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


__all__ = ["move", "insert"]
