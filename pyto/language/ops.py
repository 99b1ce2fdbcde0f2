"""Data movement and cube ops: each call checks its arguments and records exactly one Instr."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ..dtypes import FIXPIPE_OUT, DType
from ..errors import AlignmentError, KernelError, OutOfBoundsError, ShapeError, UnsupportedError
from ..ir import Access, AccPhase, AccToVecMode, Buf, GMTensor, Instr, Loc, Op, Pipe, Role, STPhase
from .tile import Ring, Tile, as_int
from .trace import caller_loc, current


_L1, _L0A, _L0B, _L0C, _UB = Buf.L1, Buf.L0A, Buf.L0B, Buf.L0C, Buf.UB
_LOAD, _MMAD, _MTE1, _MTE2, _M, _AIC = Op.LOAD, Op.MMAD, Pipe.MTE1, Pipe.MTE2, Pipe.M, Role.AIC
_GM_TO = {Buf.L1: (("GM", "L1"), "GM->L1", Role.AIC), Buf.UB: (("GM", "UB"), "GM->UB", Role.AIV0)}
_L1_TO_L0 = {Buf.L0A: (("L1", "L0A"), "L1->L0A"), Buf.L0B: (("L1", "L0B"), "L1->L0B")}
_CUBE_SIDE = (Buf.L1, Buf.L0A, Buf.L0B, Buf.BT)     # a load into these is the AIC's


def _need_tile(x, what: str, bufs: tuple, loc: Loc) -> Tile:
    if not isinstance(x, Tile):
        if isinstance(x, Ring):
            t = x.tiles[0]
            raise ShapeError(f"{loc}: {what} must be a tile in {'/'.join(b.name for b in bufs)}, got the ring "
                             f"'{t.store.name.split('[')[0]}' ({len(x.tiles)} {t.buffer.name} tiles): take a slot with "
                             f".next() (or .current())")
        raise ShapeError(f"{loc}: {what} must be a tile in {'/'.join(b.name for b in bufs)}, got {x!r}")
    if x.buffer not in bufs:
        raise ShapeError(f"{loc}: {what} must be in {'/'.join(b.name for b in bufs)}, but {x!r} is in "
                         f"{x.buffer.name}")
    return x


def _need_path(src: str, dst: str, loc: Loc) -> None:
    """UnsupportedError naming the kernel line when the chip lacks the data path src->dst."""
    chip = current().chip
    if not chip.has_path(src, dst):
        raise UnsupportedError(f"{loc}: chip {chip.name} has no data path {src}->{dst}; its paths are "
                               f"{', '.join(chip.paths)}")


def _acc(t: Tile) -> Access:
    return t.access


def _check_phase(phase, cls, loc: Loc, op: str):
    if phase is not None and not isinstance(phase, cls):
        raise KernelError(f"{loc}: {op} takes phase=pl.{cls.__name__}.Partial/Final, got {phase!r}")


def _check_relu(relu, src: Tile, loc: Loc, op: str) -> None:
    if relu is not False and relu is not True:
        raise KernelError(f"{loc}: {op} relu must be True or False, got {relu!r}")
    if relu and src.store.buf is not _L0C:
        raise KernelError(f"{loc}: {op} relu=True is Fixpipe's (out of L0C); on the vector side use pl.relu")


def _gm_region(gm: GMTensor, offsets, rows: int, cols: int, transpose: bool, loc: Loc):
    """Validate offsets into `gm`; return (Access, batch index, r0, c0, valid rows, valid cols) in GM coords."""
    nd = len(gm.shape)
    if nd == 2 and type(offsets) in (list, tuple) and len(offsets) == 2 \
            and type(offsets[0]) is int and type(offsets[1]) is int:
        batch, (r0, c0) = 0, offsets      # a matrix: the checks below, in one go
    elif nd == 3 and type(offsets) in (list, tuple) and len(offsets) == 3 and type(offsets[0]) is int \
            and type(offsets[1]) is int and type(offsets[2]) is int and 0 <= offsets[0] < gm.shape[0]:
        batch, r0, c0 = offsets           # one batch dimension, likewise
    else:
        if not isinstance(offsets, (list, tuple)) or len(offsets) != gm.ndim or gm.ndim < 2:
            raise ShapeError(f"{loc}: offsets into {gm!r} need {gm.ndim} ints, got {offsets!r}")
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


def _nd_parts(dst: Tile, nd_num: int, nd_axis: int, loc: Loc) -> list:
    """`dst` split into nd_num equal views along nd_axis (each on the fractal grid)."""
    if not isinstance(nd_num, int) or nd_num < 1 or nd_axis not in (0, 1):
        raise KernelError(f"{loc}: nd_num must be a positive int and nd_axis 0 or 1, got {nd_num!r}, {nd_axis!r}")
    if nd_num == 1:
        return [dst]
    size = dst.shape[nd_axis]
    if size % nd_num:
        raise ShapeError(f"{loc}: {dst!r} has {size} along axis {nd_axis}, not a multiple of nd_num = {nd_num}")
    step = size // nd_num
    return [dst[j * step:(j + 1) * step, :] if nd_axis == 0 else dst[:, j * step:(j + 1) * step]
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
    """Bytes an L1 -> L0A/L0B load moves for a rows x cols tile: whole fractals of the destination's grid
    (seeds/004: L0A/L0B hold and the cube fetches whole fractals; an edge tile's padding moves too)."""
    g0, g1 = store.grid
    return -(-rows // g0) * g0 * (-(-cols // g1) * g1) * store.dtype.itemsize


#: itemsize -> (rows, columns) of the square LoadDataWithTranspose transposes, in the L0A view's terms (M, K):
#: int8 two 16 x 32 fractals (32 x 32), fp16/bf16 one 16 x 16 fractal, fp32 two 16 x 8 fractals (16 x 16).
_TRANSPOSE_SQUARE = {1: (32, 32), 2: (16, 16), 4: (16, 16)}


def _squares_ok(store, rect: tuple) -> bool:
    """Whether an L0A view (rect in its tile) is whole LoadDataWithTranspose squares (see `load`): it starts on
    them and ends on them or at the tile's edge (the tile's padding, CeilAlign 32 for int8, holds the rest)."""
    sr, sc = _TRANSPOSE_SQUARE[store.dtype.itemsize]
    q0, q1, p0, p1 = rect
    rows, cols = store.shape
    return not (q0 % sr or p0 % sc or (q1 % sr and q1 != rows) or (p1 % sc and p1 != cols))


def _emit(op: Op, pipe: Pipe, role: Role, srcs: tuple, dsts: tuple, attrs: dict, loc: Loc, name: str):
    tr = current()
    return tr.emit(Instr(op, pipe, srcs, dsts, attrs, loc, name=name), role)


def _emit_gm_load(tr, dst: Tile, src: GMTensor, accs: tuple, parts: Sequence[Tile], region: tuple, transpose: bool,
                  to: tuple, loc: Loc) -> None:
    """Record a GM -> L1/UB load of len(parts) matrices (accs: their GM regions, parts: their views of
    dst), each `region` = (r0, c0, valid rows, valid cols) at its batch; `to`: an entry of _GM_TO."""
    r0, c0, vr, vc = region
    n = len(parts)
    burst, nburst = _bursts(src, vr, vc)
    attrs = {"batch": accs[0].batch, "r0": r0, "c0": c0, "vr": vr, "vc": vc, "transpose": bool(transpose),
             "bytes": n * vr * vc * src.dtype.itemsize, "burst": burst, "nburst": nburst * n, "path": to[0]}
    if n > 1:
        attrs["parts"] = tuple((a.batch, p.rect) for a, p in zip(accs, parts))
    tr.emit(Instr(_LOAD, _MTE2, accs, (dst.access,), attrs, loc, name="pl.load"), to[2])


def load(dst: Tile, src, offsets: Optional[Sequence[int]] = None, *, transpose: bool = False, nd_num: int = 1,
         nd_axis: int = 0) -> None:
    """GM->L1 (Nd2Nz, or Dn2Nz with transpose), GM->UB (MTE2); L1->L0A/L0B/BT (MTE1).

    A GM region running past the tensor's edge is clipped and the rest of `dst` zero-filled (fractal
    padding). With `transpose`, dst[r, c] = src[c, r] (a DN operand). With `nd_num` > 1 (Nd2Nz's
    ndNum: several matrices in one instruction, as MergeBatch fetches batches), `dst` is split into
    nd_num equal parts along `nd_axis` (0: stacked rows, 1: side by side) and part j receives the
    matrix of batch (offsets' batch + j), at the same row/column offsets.

    A transposing GM -> L1 load is Dn2Nz, which seeds/004 (4.4) and Ascend C's DataCopy DN2NZ page give to
    the Ascend 950PR/950DT only (chip table key formats.dn2nz, `pl.has_dn2nz()`): on another chip it raises
    UnsupportedError. There a DN operand (A^T stored K x M, B^T stored N x K) is loaded as it is stored and
    transposed on the way L1 -> L0A/L0B, `pl.load(l0_view, l1_view, transpose=True)`: same GM bytes, and the
    MTE1 load costs what the plain one does (the destination's whole fractals at the path's rate).
    Into L0A that load is Ascend C's LoadDataWithTranspose, which transposes squares of two 16 x 32 B
    fractals merged (int8 32 x 32, fp32 16 x 16) or of one fractal (fp16/bf16 16 x 16). The reading pyto
    takes: an L0A view loaded with transpose must start on those squares and end on them or at the tile's edge
    (whose padding holds the rest), so for int8 its rows (M) are a multiple of 32, and for fp32 its columns (K)
    a multiple of 16 (AlignmentError otherwise). This
    is seeds/002's "A ND and transposed (K, M): mL0 32-byte aligned" (32 int8 rows) seen from the chip: a
    K-major int8 A needs base_m, and every M tile trimmed at an edge, in multiples of 32. Into L0B, pyto's
    transpose reads an [N, K] Nz tile, whose fractals already are Zn's (no hardware transpose: the plain
    [K, N] load is the one the hardware transposes), so no square rule is applied there.
    """
    tr = current()   # outside a @pl.kernel: KernelError before anything else
    loc = caller_loc()
    if not tr.is_aic and type(dst) is Tile and dst.store.buf in _CUBE_SIDE:
        tr.cube_marker(_LOAD, "pl.load", loc)       # an AIV's trace: the AIC's trace checks and records it
        return
    if tr.is_aic and type(dst) is Tile and dst.store.buf is _UB:
        tr.launch.mark_vector(loc)                  # the AIC's trace: the AIVs' traces check and record it
        return
    if transpose is not False and transpose is not True and not isinstance(transpose, np.bool_):
        raise KernelError(f"{loc}: pl.load transpose must be True or False, got {transpose!r}")
    if transpose and type(dst) is Tile and dst.store.buf is _UB and min(dst.shape) > 1:
        # a row into a [r, 1] column (or back) is a strided copy; a matrix would need Dn2Nz, which is GM->L1's
        raise UnsupportedError(f"{loc}: pl.load(..., transpose=True) of a {list(dst.shape)} matrix into UB: GM->UB is "
                               f"a plain MTE2 copy (the transposing Dn2Nz path goes to L1; a single row or column "
                               f"may be loaded transposed); load into L1, or transpose on the vector side")
    if transpose and type(src) is GMTensor and type(dst) is Tile and dst.store.buf is _L1 and not tr.chip.dn2nz:
        raise UnsupportedError(
            f"{loc}: pl.load({dst!r}, {src!r}, transpose=True) is a Dn2Nz load (DN -> Nz on the way GM -> L1), "
            f"which chip {tr.chip.name} does not have (seeds/004 4.4: Ascend 950PR/950DT only; chip table key "
            f"formats.dn2nz); load the operand as it is stored (an L1 tile of the GM region's shape, "
            f"transpose=False) and transpose it on the way to L0A/L0B: pl.load(l0_view, l1_view, transpose=True)")
    if type(dst) is Tile and type(src) is Tile and offsets is None and nd_num == 1:
        # the K loop's L1 -> L0A/L0B load, all its checks in one go (the general path below says
        # which one fails)
        s, d = src.store, dst.store
        path = _L1_TO_L0.get(d.buf) if s.buf is _L1 and s.layout == "NZ" else None
        if path is not None and s.dtype is d.dtype and path[1] in tr.chip.paths:
            r0, r1, c0, c1 = src.rect
            q0, q1, p0, p1 = dst.rect
            if (r1 - r0, c1 - c0) == ((p1 - p0, q1 - q0) if transpose else (q1 - q0, p1 - p0)) and \
                    (not transpose or d.buf is not _L0A or _squares_ok(d, dst.rect)):
                attrs = {"transpose": bool(transpose), "bytes": _fractal_bytes(d, q1 - q0, p1 - p0),
                         "path": path[0]}
                tr.emit(Instr(_LOAD, _MTE1, (src.access,), (dst.access,), attrs, loc,
                              name="pl.load"), _AIC)
                return
    if type(dst) is Tile and type(src) is GMTensor and nd_num == 1:
        # one GM matrix into L1 or UB: the general path below without the nd_num split
        d = dst.store
        to = _GM_TO.get(d.buf)
        if to is not None and src.dtype is d.dtype and to[1] in tr.chip.paths:
            q0, q1, p0, p1 = dst.rect
            region = _gm_region(src, [0] * src.ndim if offsets is None else offsets, q1 - q0, p1 - p0, transpose, loc)
            _emit_gm_load(tr, dst, src, (region[0],), (dst,), region[2:], transpose, to, loc)
            return
    _need_tile(dst, "pl.load destination", (Buf.L1, Buf.UB, Buf.L0A, Buf.L0B, Buf.BT), loc)
    if isinstance(src, GMTensor):
        if dst.buffer not in (Buf.L1, Buf.UB):
            raise ShapeError(f"{loc}: GM loads go to L1 or UB, not {dst.buffer.name} (there is no GM->"
                             f"{dst.buffer.name} path); load into L1 first")
        _need_path("GM", dst.buffer.name, loc)
        if src.dtype is not dst.dtype:
            raise ShapeError(f"{loc}: pl.load does not convert: {src!r} is {src.dtype}, {dst!r} is {dst.dtype}")
        if offsets is None:
            offsets = [0] * src.ndim
        parts = _nd_parts(dst, nd_num, nd_axis, loc)
        accs, region = [], None
        for j, part in enumerate(parts):
            offs = offsets if j == 0 else _next_batch(src, offsets, j, loc)
            region = _gm_region(src, offs, *part.shape, transpose, loc)
            accs.append(region[0])
        _emit_gm_load(tr, dst, src, tuple(accs), parts, region[2:], transpose, _GM_TO[dst.buffer], loc)
        return
    if nd_num != 1:
        raise KernelError(f"{loc}: nd_num applies to GM loads only")
    src = _need_tile(src, "pl.load source", (Buf.L1,), loc)
    if dst.buffer not in (Buf.L0A, Buf.L0B, Buf.BT):
        raise ShapeError(f"{loc}: an L1 tile loads into L0A, L0B or BT, not {dst.buffer.name}")
    if src.store.layout == "ND" and dst.buffer is not Buf.BT:
        raise ShapeError(f"{loc}: {src!r} is an ND row in L1 (for BT); the cube's operands come from NZ L1 tiles")
    _need_path("L1", dst.buffer.name, loc)
    if offsets is not None:
        raise KernelError(f"{loc}: on-chip loads take a view (src[r0:r1, c0:c1]), not offsets")
    want = dst.shape[::-1] if transpose else dst.shape
    if src.shape != want:
        raise ShapeError(f"{loc}: pl.load shapes differ: {src!r} is {list(src.shape)}, {dst!r} is "
                         f"{list(dst.shape)}" + (" (transposed)" if transpose else ""))
    if transpose and dst.buffer is Buf.L0A and not _squares_ok(dst.store, dst.rect):
        sr, sc = _TRANSPOSE_SQUARE[dst.dtype.itemsize]
        q0, q1, p0, p1 = dst.rect
        raise AlignmentError(f"{loc}: pl.load({dst!r}, {src!r}, transpose=True): L1 -> L0A with transpose "
                             f"(LoadDataWithTranspose) moves {sr} x {sc} {dst.dtype} squares, so the L0A view's "
                             f"rows (M) must start and end on multiples of {sr} and its columns (K) on multiples of "
                             f"{sc} (or end at the tile's edge); got rows {q0}:{q1}, columns {p0}:{p1}")
    if dst.buffer is Buf.BT:
        want = DType.int32 if src.dtype is DType.int32 else DType.fp32
        if src.shape[0] != 1 or not (src.dtype.is_float or src.dtype is DType.int32) or dst.dtype is not want:
            raise ShapeError(f"{loc}: bias goes to BT as one row of fp16/bf16/fp32 (into an fp32 BT tile) or of "
                             f"int32 (into an int32 BT tile), got {src!r} {list(src.shape)} {src.dtype} -> "
                             f"{dst!r} {dst.dtype}")
    elif src.dtype is not dst.dtype:
        raise ShapeError(f"{loc}: pl.load does not convert: {src!r} is {src.dtype}, {dst!r} is {dst.dtype}")
    nbytes = _fractal_bytes(dst.store, *dst.shape) if dst.buffer is not Buf.BT else \
        src.shape[0] * src.shape[1] * src.dtype.itemsize
    _emit(Op.LOAD, Pipe.MTE1, Role.AIC, (_acc(src),), (_acc(dst),),
          {"transpose": bool(transpose), "bytes": nbytes, "path": ("L1", dst.buffer.name)}, loc, "pl.load")




def store(dst: GMTensor, src: Tile, offsets: Optional[Sequence[int]] = None, *, phase: Optional[STPhase] = None,
          atomic: Optional[str] = None, relu: bool = False) -> None:
    """L0C->GM (Fixpipe: Nz->ND, fp32 -> dst dtype, round to nearest even) or UB->GM (MTE3).

    `offsets`: where src's [0, 0] lands in dst (one int per dimension; default all 0); rows and columns past
    dst's edge are not written. `phase`: pl.STPhase.Partial/Final for a unit_flag store out of L0C (seeds/001);
    `atomic="add"`: add into GM instead of overwriting (split-K across cores: every block's adds land);
    `relu=True` (L0C only): Fixpipe's ReLU, max(x, 0) before the conversion, at no extra cost (it is applied
    on the way out).
    """
    tr = current()
    loc = caller_loc()
    if not tr.is_aic and type(src) is Tile and src.store.buf is _L0C:
        tr.cube_marker(Op.STORE, "pl.store", loc)   # an AIV's trace: the AIC's trace checks and records it
        return
    if tr.is_aic and type(src) is Tile and src.store.buf is _UB:
        tr.launch.mark_vector(loc)                  # the AIC's trace: the AIVs' traces check and record it
        return
    if not isinstance(dst, GMTensor):
        raise ShapeError(f"{loc}: pl.store writes a GM tensor, got {dst!r}; use pl.move between on-chip buffers")
    _need_tile(src, "pl.store source", (Buf.L0C, Buf.UB), loc)
    _check_phase(phase, STPhase, loc, "pl.store")
    _check_relu(relu, src, loc, "pl.store")
    if atomic not in (None, "add"):
        raise KernelError(f"{loc}: atomic must be None or 'add', got {atomic!r}")
    _need_path(src.buffer.name, "GM", loc)
    if src.buffer is Buf.L0C:
        if dst.dtype not in FIXPIPE_OUT[src.dtype]:
            raise ShapeError(f"{loc}: Fixpipe converts {src.dtype} to {'/'.join(map(str, FIXPIPE_OUT[src.dtype]))}, "
                             f"not {dst.dtype} ({dst!r})")
        pipe, role = Pipe.FIX, Role.AIC
    else:
        if phase is not None:
            raise KernelError(f"{loc}: phase applies to L0C only (Fixpipe), not a UB store")
        if src.dtype is not dst.dtype:
            raise ShapeError(f"{loc}: UB->GM does not convert: {src!r} is {src.dtype}, {dst!r} is {dst.dtype}")
        pipe, role = Pipe.MTE3, Role.AIV0
    if offsets is None:
        offsets = [0] * dst.ndim
    acc, batch, r0, c0, vr, vc = _gm_region(dst, offsets, *src.shape, False, loc)
    burst, nburst = _bursts(dst, vr, vc)
    attrs = {"batch": batch, "r0": r0, "c0": c0, "vr": vr, "vc": vc, "phase": phase, "atomic": atomic,
             "bytes": vr * vc * dst.dtype.itemsize, "burst": burst, "nburst": nburst,
             "path": (src.buffer.name, "GM"), "relu": bool(relu)}
    _emit(Op.STORE, pipe, role, (_acc(src),), (acc,), attrs, loc, "pl.store")


def move(dst: Tile, src: Tile, *, acc_to_vec_mode: Optional[AccToVecMode] = None,
         phase: Optional[STPhase] = None, relu: bool = False) -> None:
    """On-chip moves: L0C->L1 and L0C->UB (Fixpipe), UB->L1 (MTE3, vector to cube).

    `acc_to_vec_mode` (required for L0C->UB, else unused): which AIV receives what (pl.AccToVecMode.DualModeSplitM
    halves M, an even number, DualModeSplitN halves N, a multiple of 32, between the two AIVs' UBs;
    SingleModeVec0/1 send the tile whole to one). `phase`: pl.STPhase for a
    unit_flag move out of L0C, as pl.store's. `relu=True` (out of L0C): Fixpipe's ReLU, as pl.store's.
    """
    loc = caller_loc()
    tr = current()
    _need_tile(src, "pl.move source", (Buf.L0C, Buf.UB), loc)
    _need_tile(dst, "pl.move destination", (Buf.L1, Buf.UB), loc)
    _check_phase(phase, STPhase, loc, "pl.move")
    _check_relu(relu, src, loc, "pl.move")
    _need_path(src.buffer.name, dst.buffer.name, loc)
    attrs = {"phase": phase, "mode": acc_to_vec_mode, "path": (src.buffer.name, dst.buffer.name), "relu": bool(relu)}
    if src.buffer is Buf.L0C:
        if src.dtype is DType.int32 and dst.dtype is not DType.int32:
            raise ShapeError(f"{loc}: an int32 accumulator moves out as int32, not {dst.dtype}")
        if src.dtype is DType.fp32 and not dst.dtype.is_float:
            raise ShapeError(f"{loc}: an fp32 accumulator moves out as fp32/fp16/bf16, not {dst.dtype}")
        if dst.buffer is Buf.UB:
            from .vector import l0c_to_ub_split
            attrs["split"] = halves = l0c_to_ub_split(dst, src, acc_to_vec_mode, loc)
            pair = tr.launch.stores(tr.block, dst.store.key, None, vector=True)
            dsts = tuple(Access(pair[v], dst.rect) for v in (0, 1) if halves[v] is not None)
            attrs["bytes"] = src.shape[0] * src.shape[1] * dst.dtype.itemsize
            _emit(Op.MOVE, Pipe.FIX, Role.AIC, (_acc(src),), dsts, attrs, loc, "pl.move")
            return
        else:
            if acc_to_vec_mode is not None:
                raise KernelError(f"{loc}: acc_to_vec_mode applies to L0C->UB moves only")
            if dst.shape != src.shape:
                raise ShapeError(f"{loc}: pl.move shapes differ: {src!r} {list(src.shape)} vs {dst!r} {list(dst.shape)}")
            if dst.store.layout == "ND":
                raise ShapeError(f"{loc}: Fixpipe writes L0C into L1 as NZ; {dst!r} is an ND row (for BT)")
            role = Role.AIC
        attrs["bytes"] = src.shape[0] * src.shape[1] * dst.dtype.itemsize
        _emit(Op.MOVE, Pipe.FIX, role, (_acc(src),), (_acc(dst),), attrs, loc, "pl.move")
        return
    if dst.buffer is not Buf.L1:
        raise ShapeError(f"{loc}: a UB tile moves to L1 (vector to cube), not {dst.buffer.name}")
    if phase is not None or acc_to_vec_mode is not None:
        raise KernelError(f"{loc}: phase and acc_to_vec_mode apply to moves out of L0C only")
    if dst.shape != src.shape or dst.dtype is not src.dtype:
        raise ShapeError(f"{loc}: pl.move UB->L1 needs equal shapes and dtypes: {src!r} {list(src.shape)} "
                         f"{src.dtype} vs {dst!r} {list(dst.shape)} {dst.dtype}")
    attrs["bytes"] = src.shape[0] * src.shape[1] * src.dtype.itemsize
    _emit(Op.MOVE, Pipe.MTE3, Role.AIV0, (_acc(src),), (_acc(dst),), attrs, loc, "pl.move")


def _mmad(name: str, dst: Tile, a: Tile, b: Tile, bias: Optional[Tile], phase, accumulate: bool, loc: Loc) -> None:
    tr = current()
    if not tr.is_aic:
        tr.cube_marker(_MMAD, name, loc)            # an AIV's trace: the AIC's trace checks and records it
        return
    if not (type(dst) is Tile and type(a) is Tile and type(b) is Tile and dst.store.buf is _L0C
            and a.store.buf is _L0A and b.store.buf is _L0B):    # else _need_tile says which one is wrong
        for x, what, buf in ((dst, "destination", _L0C), (a, "left operand", _L0A), (b, "right operand", _L0B)):
            _need_tile(x, f"{name} {what}", (buf,), loc)
    if phase is not None:
        _check_phase(phase, AccPhase, loc, name)
    a0, a1, a2, a3 = a.rect          # shapes from the rectangles (Tile.shape, without a tuple per call)
    b0, b1, b2, b3 = b.rect
    d0, d1, d2, d3 = dst.rect
    m, k, k2, n = a1 - a0, a3 - a2, b1 - b0, b3 - b2
    if k != k2 or d1 - d0 != m or d3 - d2 != n:
        raise ShapeError(f"{loc}: {name} shapes do not chain: {dst!r} {list(dst.shape)} = {a!r} {list(a.shape)} "
                         f"@ {b!r} {list(b.shape)}")
    dt = a.store.dtype
    if dt is not b.store.dtype:
        raise ShapeError(f"{loc}: {name} operands differ in dtype: {a.dtype} vs {b.dtype}")
    if dt is DType.int32:
        raise ShapeError(f"{loc}: the cube takes fp16, bf16, fp32 or int8 operands, not int32")
    if dst.store.dtype is not dt.acc:
        raise ShapeError(f"{loc}: {a.dtype} operands accumulate in {a.dtype.acc}, but {dst!r} is {dst.dtype}")
    srcs = [a.access, b.access]
    if bias is not None:
        _need_tile(bias, f"{name} bias", (Buf.BT,), loc)
        if bias.shape != (1, n) or bias.dtype is not dst.dtype:
            raise ShapeError(f"{loc}: bias must be [1, {n}] {dst.dtype} (the accumulator's type), got "
                             f"{list(bias.shape)} {bias.dtype}")
        srcs.append(bias.access)
    if accumulate:
        srcs.append(dst.access)
    attrs = {"m": m, "n": n, "k": k, "phase": phase, "accumulate": accumulate, "bias": bias is not None,
             "dtype": dt}
    tr.emit(Instr(_MMAD, _M, tuple(srcs), (dst.access,), attrs, loc, name=name), _AIC)


def matmul(dst: Tile, a: Tile, b: Tile, *, bias: Optional[Tile] = None, phase: Optional[AccPhase] = None) -> None:
    """dst = a @ b (+ bias): L0A x L0B -> L0C on the cube (M pipe).

    a [M, K] and b [K, N] share a dtype (fp16, bf16, fp32 or int8); dst [M, N] is the accumulation type (fp32,
    int32 for int8); `bias`: a [1, N] BT tile of that type (it initialises L0C). `phase`: pl.AccPhase.Partial
    / Final for unit_flag (seeds/001). Mismatches are ShapeErrors naming the line."""
    _mmad("pl.matmul", dst, a, b, bias, phase, False, caller_loc())


def matmul_acc(dst: Tile, acc: Tile, a: Tile, b: Tile, *, phase: Optional[AccPhase] = None) -> None:
    """dst = acc + a @ b, accumulating in place in L0C (`acc` is `dst`). No bias: a bias initialises
    L0C, so it goes with the first product (pl.matmul(..., bias=)); issue 3's 'pl.matmul_acc (with bias=)'
    is read as the pair, bias on pl.matmul."""
    loc = caller_loc()
    if not isinstance(acc, Tile) or not isinstance(dst, Tile) or acc.store is not dst.store or acc.rect != dst.rect:
        raise ShapeError(f"{loc}: pl.matmul_acc accumulates in place: acc must be dst, got acc={acc!r}, dst={dst!r}")
    _mmad("pl.matmul_acc", dst, a, b, None, phase, True, loc)
