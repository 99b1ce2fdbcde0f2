"""The 4:2 sparse matmul, pyto's extension beyond PyPTO-Pro (which has none): Ascend C's LoadDataWithSparse and
MmadWithSparse (asc-devkit basic_api; seeds/004 §5.2, the sparse index's format), Atlas A2/A3 only.

    pl.move_sparse(rhs_tile, index_tile, src_tile, src_index)   Mat -> Right + SparseIndex   MTE1
    pl.matmul_sparse(dst_tile, lhs_tile, rhs_tile, index_tile)  dst = lhs @ expand(rhs, index)   M
    pl.matmul_sparse_acc(dst_tile, acc_tile, lhs_tile, rhs_tile, index_tile)   dst += the same     M

The format (seeds/004 §5.2; pyto.layout): a B [K, N] with at most 2 non-zeros in each group of 4 along K is densified
(`pyto.layout.densify_4_2`) to the dense half [K/2, N] and one 2-bit index per dense element: per group, i0 = the place
of the first non-zero among the group's elements 0..2, i1 = the place of the second among elements 1..3 (so the
places are i0 and 1 + i1, with 0 <= i0 <= i1 <= 2: MmadWithSparse.md's table 2). Four indices consecutive along K
make a uint8, the first in the lowest bits (`pyto.layout.pack_sparse_index`: [K/2, N] -> [K/8, N] bytes;
LoadDataWithSparse.md's "逆序" byte). The index's Zn fractals are 8 x 16 bytes (32 indices along K x 16 along N,
128 B), one for each 32 x 16 int8 Zn fractal of the dense B (512 B), at the same place: index fractal i goes with B
fractal i (catlass reads the index of B's L1 offset o at the index tensor's o >> 2).

The path (the only one pyto builds, as the CANN sample runs it): GM -> Mat for lhs (NZ), the dense B as stored
transposed ([N, K/2] int8, `pl.load(..., order=[1, 0])` into a ZN [K/2, N] Mat tile: LoadDataWithSparse reads Zn and
does not transpose) and the index likewise ([N, K/8] uint8 into a ZN [K/8, N] Mat tile); Mat -> Left with pl.move;
Mat -> Right + SparseIndex with pl.move_sparse; the MMAD. SparseIndex (pl.MemorySpace.SparseIndex, Buf.L0B_SP) is
the cube's own index buffer ("索引矩阵存储在内部缓冲区", MmadWithSparse.md): LoadDataWithSparse names only its L0B
destination, so the index's place there follows from it; pyto models it at the L0B tile's address >> 2 (one 2-bit
index per L0B byte; the layout and size "与矩阵B相同"), which is pyto's model, not a documented address. Its capacity
is L0B's / 4 (chips/atlas-a2.toml, derived).

The rules, each checked with its own error naming the tiles:

1. The chip has the sparse cube: buffers.L0B_SP in its table (Atlas A2/A3; the 950 removed 4:2 sparsity, asc-devkit's
   3510 migration notes; a SparseIndex tile there is already an UnsupportedError naming the chip).
2. dtypes (MmadWithSparse.md 数据类型): lhs and rhs DT_INT8, dst DT_INT32; the index DT_UINT8 (ShapeError).
3. Buffers and layouts: lhs Left, rhs Right, dst Acc, index SparseIndex; move_sparse's sources are ZN Mat tiles
   (seeds/004 §5.2: B and the index are read by columns, Zn, in L1; LoadDataWithSparse has no transpose) (ShapeError).
4. Shapes: lhs [M, K] with K = 2 x rhs's rows ([K/2, N], the dense half), K % 8 == 0 (whole index bytes: two groups
   of 4 a byte, pyto's rule), dst [M, N]; the index [K/8, N] (ShapeError).
5. Pairing: in move_sparse the index source is the source B's own: the same place on the fractal grids (B rows / 4,
   the same columns) of Mat tiles whose stores correspond (B's [K/2, N], the index's [K/8, N]); the index
   destination is at the B destination's address >> 2; in the MMAD the index tile is at rhs's address >> 2. The
   tiles of these address rules are whole tiles (KernelError for a mismatch, UnsupportedError for a view).
6. phase: pl.AccPhase.Partial / Final as pl.matmul's. Tails (valid shapes) are not built for the sparse MMAD
   (UnsupportedError), nor a bias.

The data (emulator/data/datapass.py): the dense B and its unpacked index are expanded to the [K, N] B
(pyto.layout.expand_4_2) and lhs @ B accumulates exactly in int32 (wrapping) as an int8 pl.matmul does; an index pair
outside the cube's table (the code 3, or i0 > i1) is a SparsityError naming the MMAD's line. The hardware's own
choice for more than 2 non-zeros (the first two at the LSB end) never arises: densify_4_2 refuses such a B.

Timing (assumption): the MMAD is charged as a dense int8 MMAD over the half K (ceil(M/16) x ceil(N/16) x
ceil(K/2/32) steps at cube.int8_cycles_per_step), the cube fetching and multiplying the dense B only ("仅对非零元素
进行数据搬运存储和计算，从而减少...计算量", the 4:2 sparse matmul guide); no public cycle figure. So the
MMAD's k attribute is K/2 (its `sparse` attribute the lhs's K), and a Report's flops count the dense half's
2 x M x N x K/2. move_sparse is two MTE1 transfers, B at L1->L0B's rate and the index at L1->L0B_SP's (the table's
assumption: the same 128 B/cycle, (512 + 128) B per fractal).
"""
from __future__ import annotations

from typing import Optional

from ..dtypes import DType
from ..errors import KernelError, ShapeError, UnsupportedError
from ..ir import AccPhase, Buf, Loc, Op, Pipe, Role
from .cube import _ksplit_rules, need_in_place, on_aic
from .onchip import _fractal_bytes, _to_l0
from .opcommon import emit, need_path, need_tile
from .tile import Tile
from .trace import caller_loc, current

_PAGES = "MmadWithSparse.md, LoadDataWithSparse.md; seeds/004 §5.2"
INDEX_K = 4          # dense K rows per index byte (four 2-bit indices)


def _need_chip(name: str, loc: Loc) -> None:
    chip = current().chip
    if "L0B_SP" not in chip.buffers:
        raise UnsupportedError(f"{loc}: {name}: chip {chip.name} has no 4:2 sparse cube (its table has no "
                               f"buffers.L0B_SP; {_PAGES}: Atlas A2/A3 only, the Ascend 950 removed it)")


def _whole(t: Tile, what: str, name: str, loc: Loc) -> int:
    """The address of a whole tile (the pairing rule's address relation is on whole tiles)."""
    if t.t or t.rect != (0, t.store.shape[0], 0, t.store.shape[1]):
        raise UnsupportedError(f"{loc}: {name} on the view {t!r} as {what}: the index's address relation (addr(index)"
                               f" = addr(rhs) >> 2) is checked on whole tiles; pass the tile itself")
    return t.store.addr


def _check_index(name: str, idx: Tile, what: str, buf: Buf, k2: int, n: int, loc: Loc) -> None:
    """Rules 2-4 for an index tile: `buf`, DT_UINT8, ZN, [k2 / 4, n]."""
    need_tile(idx, f"{name} {what}", (buf,), loc)
    if idx.dtype is not DType.uint8:
        raise ShapeError(f"{loc}: {name} {what} {idx!r} is {idx.dtype}: the 4:2 sparse index is pl.DT_UINT8 bytes of "
                         f"four 2-bit indices ({_PAGES})")
    if idx.layout.value != "ZN":
        raise ShapeError(f"{loc}: {name} {what} {idx!r} is {idx.layout.value}: the sparse index is ZN, read by "
                         f"columns as B is ({_PAGES})")
    if idx.shape != (k2 // INDEX_K, n):
        raise ShapeError(f"{loc}: {name} {what} {idx!r} has shape {list(idx.shape)}, but the dense B [K/2, N] = "
                         f"{[k2, n]} needs the index [K/8, N] = {[k2 // INDEX_K, n]} (one byte per 4 dense rows, "
                         f"{_PAGES})")


def _check_dense(name: str, b: Tile, what: str, buf: Buf, loc: Loc) -> tuple:
    """Rules 2-4 for a dense B tile: `buf`, DT_INT8, an even number of index bytes' rows; its [K/2, N]."""
    need_tile(b, f"{name} {what}", (buf,), loc)
    if b.dtype is not DType.int8:
        raise ShapeError(f"{loc}: {name} {what} {b!r} is {b.dtype}: the 4:2 sparse matmul takes int8 operands into "
                         f"int32 ({_PAGES})")
    k2, n = b.shape
    if k2 % INDEX_K:
        raise ShapeError(f"{loc}: {name} {what} {b!r} has {k2} rows (K/2): the sparse matmul's K = {2 * k2} must be "
                         f"a multiple of 8 (whole index bytes: four 2-bit indices, two groups of 4, a byte)")
    return k2, n


def move_sparse(rhs_tile: Tile, index_tile: Tile, src_tile: Tile, src_index: Tile) -> None:
    """LoadDataWithSparse: the dense B (a ZN [K/2, N] int8 Mat tile) into Right and its index (the ZN [K/8, N] uint8
    Mat tile paired with it) into SparseIndex at the Right tile's address >> 2, on MTE1 (module docstring)."""
    loc = caller_loc()
    tr = current()
    name = "pl.move_sparse"
    if not tr.is_aic:
        tr.cube_marker(Op.LOAD, name, loc)       # an AIV's trace: the AIC's trace checks and records it
        return
    _need_chip(name, loc)
    k2, n = _check_dense(name, src_tile, "src_tile", Buf.L1, loc)
    _check_dense(name, rhs_tile, "rhs_tile", Buf.L0B, loc)
    if src_tile.layout.value != "ZN":
        raise ShapeError(f"{loc}: {name} src_tile {src_tile!r} is {src_tile.layout.value}: LoadDataWithSparse reads "
                         f"the dense B as Zn fractals and does not transpose; load it as stored ([N, K/2]) into a ZN "
                         f"Mat tile (pl.load(..., order=[1, 0])) ({_PAGES})")
    _check_index(name, src_index, "src_index", Buf.L1, k2, n, loc)
    _check_index(name, index_tile, "index_tile", Buf.L0B_SP, rhs_tile.shape[0], rhs_tile.shape[1], loc)
    s, i = src_tile.store, src_index.store              # both NZ stores of the transposes: [N, K/2], [N, K/8]
    if i.shape != (s.shape[0], s.shape[1] // INDEX_K) or s.shape[1] % INDEX_K:
        raise KernelError(f"{loc}: {name} src_index {src_index!r} is not the index of src_tile {src_tile!r}'s store: "
                          f"B's [K/2, N] = {[s.shape[1], s.shape[0]]} has index [K/8, N] = "
                          f"{[s.shape[1] // INDEX_K, s.shape[0]]}, got {[i.shape[1], i.shape[0]]} (index fractal i "
                          f"goes with B fractal i, {_PAGES})")
    r0, r1, c0, c1 = src_tile.rect                     # store terms: rows N, cols K/2
    if src_index.rect != (r0, r1, c0 // INDEX_K, c1 // INDEX_K):
        q0, q1, p0, p1 = src_index.rect
        raise KernelError(f"{loc}: {name} src_index {src_index!r} covers index rows {p0}:{p1}, columns {q0}:{q1}, but "
                          f"src_tile {src_tile!r} covers dense B rows {c0}:{c1}, columns {r0}:{r1}, whose index is rows "
                          f"{c0 // INDEX_K}:{c1 // INDEX_K}, columns {r0}:{r1}: index fractal i goes with B fractal i "
                          f"({_PAGES})")
    da, di = _whole(rhs_tile, "rhs_tile", name, loc), _whole(index_tile, "index_tile", name, loc)
    if di != da >> 2:
        raise KernelError(f"{loc}: {name} index_tile {index_tile!r} is at {di:#x}, but rhs_tile {rhs_tile!r} is at "
                          f"{da:#x}, so LoadDataWithSparse writes its index at {da:#x} >> 2 = {da >> 2:#x} (pyto's model of "
                          f"the cube's index buffer: one 2-bit index per L0B byte); place index_tile at {da >> 2:#x}")
    if src_tile.valid is not None or src_index.valid is not None or rhs_tile.valid is not None:
        raise UnsupportedError(f"{loc}: {name} with a valid shape (tails) is not built in pyto; move whole tiles")
    _to_l0(rhs_tile, src_tile, None, loc)                # the dense B: LoadData's checks and its MTE1 transfer
    need_path("L1", "L0B_SP", loc)
    q0, q1, p0, p1 = index_tile.rect
    emit(Op.LOAD, Pipe.MTE1, Role.AIC, (src_index.access,), (index_tile.access,),
         {"transpose": True, "bytes": _fractal_bytes(index_tile.store, q1 - q0, p1 - p0), "path": ("L1", "L0B_SP")},
         loc, name, (index_tile, src_index), False, tr)


def _mmad_sparse(name: str, dst: Tile, a: Tile, b: Tile, idx: Tile, phase, accumulate: bool, loc: Loc) -> None:
    tr, phase = on_aic(name, phase, loc)
    if tr is None:
        return
    _need_chip(name, loc)
    need_tile(dst, f"{name} dst_tile", (Buf.L0C,), loc)
    need_tile(a, f"{name} lhs_tile", (Buf.L0A,), loc)
    k2, n = _check_dense(name, b, "rhs_tile", Buf.L0B, loc)
    if a.dtype is not DType.int8 or dst.dtype is not DType.int32:
        raise ShapeError(f"{loc}: {name} multiplies int8 by int8 into int32 ({_PAGES}): lhs_tile {a!r} is {a.dtype}, "
                         f"dst_tile {dst!r} is {dst.dtype}")
    (m, k), (dm, dn) = a.shape, dst.shape
    if k != 2 * k2 or (dm, dn) != (m, n):
        raise ShapeError(f"{loc}: {name} shapes do not chain: dst_tile {dst!r} {[dm, dn]} = lhs_tile {a!r} {[m, k]} "
                         f"@ expand(rhs_tile {b!r} {[k2, n]}): lhs's K must be twice the dense B's rows (K/2) and dst "
                         f"[M, N] ({_PAGES})")
    _check_index(name, idx, "index_tile", Buf.L0B_SP, k2, n, loc)
    da, di = _whole(b, "rhs_tile", name, loc), _whole(idx, "index_tile", name, loc)
    if di != da >> 2:
        raise KernelError(f"{loc}: {name} index_tile {idx!r} is at {di:#x}, but rhs_tile {b!r} is at {da:#x}: the cube "
                          f"reads rhs's index at {da:#x} >> 2 = {da >> 2:#x} (where pl.move_sparse put it), whatever "
                          f"index_tile names; pass the index moved with rhs_tile")
    if a.valid is not None or b.valid is not None or dst.valid is not None:
        raise UnsupportedError(f"{loc}: {name} with valid shapes (tails) is not built in pyto; multiply whole tiles")
    srcs, out = [a.access, b.access, idx.access], dst.access
    if accumulate:
        srcs.append(out)
        if phase is not None:
            _ksplit_rules(dst, name, loc)
    attrs = {"m": m, "n": n, "k": k2, "phase": phase, "accumulate": accumulate, "bias": False, "dtype": DType.int8,
             "sparse": k}
    emit(Op.MMAD, Pipe.M, Role.AIC, tuple(srcs), (out,), attrs, loc, name, (dst, a, b, idx), phase is not None, tr)


def matmul_sparse(dst_tile: Tile, lhs_tile: Tile, rhs_tile: Tile, index_tile: Tile, *,
                  phase: Optional[AccPhase] = None) -> None:
    """dst = lhs @ expand(rhs, index) (MmadWithSparse): lhs [M, K] int8 Left, rhs [K/2, N] int8 Right (the dense
    half), index [K/8, N] uint8 SparseIndex at rhs's address >> 2 (pl.move_sparse), dst [M, N] int32 Acc; K % 8 == 0.
    The rules, the data and the timing: the module docstring."""
    loc = caller_loc()
    current()
    _mmad_sparse("pl.matmul_sparse", dst_tile, lhs_tile, rhs_tile, index_tile, phase, False, loc)


def matmul_sparse_acc(dst_tile: Tile, acc_tile: Tile, lhs_tile: Tile, rhs_tile: Tile, index_tile: Tile, *,
                      phase: Optional[AccPhase] = None) -> None:
    """dst = acc + lhs @ expand(rhs, index), in place: acc_tile is dst_tile (as pl.matmul_acc)."""
    loc = caller_loc()
    need_in_place(acc_tile, dst_tile, "pl.matmul_sparse_acc", loc)
    _mmad_sparse("pl.matmul_sparse_acc", dst_tile, lhs_tile, rhs_tile, index_tile, phase, True, loc)


__all__ = ["move_sparse", "matmul_sparse", "matmul_sparse_acc"]
