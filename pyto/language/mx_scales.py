"""pl.load of MX scales: a DT_FP8E8M0 GM tensor into a ZZ (scale_a) or NN (scale_b) Mat tile (load.md, matmul_mx.md:
"只在load目标为fractal-32 ZZ/NN Mat Tile时，根据目标和order选择PTO MX layout"), on MTE2.

The GM tensor is ND with a physical last axis of length 2, the "phase" axis: the two scales of consecutive 32-element
groups along K sit next to each other (matmul_mx.md's [M, G/2, 2] for scale_a, [G/2, N, 2] for scale_b, G = K/32;
PyPTO-Pro's test_matmul_mx.py `_pack_mx_scale_axis` splits the group axis into [G/2, 2] and moves the 2 last). The
two matrix axes are the two before it (load.md: the default order is [ndim-3, ndim-2]; the last axis cannot be
chosen); offsets name all three axes, the last 0. Which of the two carries K (the group pairs) follows from the
destination: a ZZ tile is [M, G], K along its columns; an NN tile is [G, N], K along its rows. Element order, with
offsets [o0, o1, 0] and order ascending ([0, 1], the default):

    ZZ  tile[r, c] = gm[o0 + r, o1 + c // 2, c % 2]        (GM [M, G/2, 2]: a plain reshape of [M, G])
    NN  tile[g, n] = gm[o0 + g // 2, o1 + n, g % 2]        (GM [G/2, N, 2])

and with order=[1, 0] (the tile's rows along GM axis 1):

    ZZ  tile[r, c] = gm[o0 + c // 2, o1 + r, c % 2]        (GM [G/2, M, 2])
    NN  tile[g, n] = gm[o0 + n, o1 + g // 2, g % 2]        (GM [N, G/2, 2])

So the offset on the pair axis counts pairs of groups (ki // 64 for a K offset ki, as the pages' examples write it).
pyto reads these as matrices it already moves: ZZ ascending and NN descending are one block of the [D0, 2 * D1] view
of the tensor (a GM view, gmview.py), NN ascending and ZZ descending are one [rows, 2] block per pair from the
tensor's consecutive batches (the nd_num load's parts), transposed for NN. The valid region moves (tails), and its
extent along K must be a whole number of pairs. Only 3-D tensors are built (others: UnsupportedError).
"""
from __future__ import annotations

from ..dtypes import DType
from ..errors import KernelError, ShapeError, UnsupportedError
from ..ir import Buf, GMTensor, Loc
from .gmview import _view
from .opcommon import extent, need_path
from .opcommon import region as region_of
from .tile import Tile, as_int

_PAGES = "memory_data_movement/load.md, matrix_computation/matmul_mx.md"


def load_scale(tr, dst: Tile, src: GMTensor, offsets, order, loc: Loc, emit_load, gm_region, to) -> None:
    """The MX scale load (module docstring); `emit_load`, `gm_region`, `to`: movement.py's."""
    lay = dst.store.layout
    if not isinstance(src, GMTensor) or src.dtype is not DType.fp8e8m0:
        raise ShapeError(f"{loc}: pl.load into the E8M0 scale tile {dst!r} reads a DT_FP8E8M0 GM tensor, got {src!r}")
    if src.ndim != 3 or src.shape[-1] != 2:
        raise UnsupportedError(f"{loc}: pl.load of MX scales into {dst!r} takes a 3-D DT_FP8E8M0 tensor whose last "
                               f"axis is the physical pair axis of length 2 ([M, G/2, 2] for a ZZ scale_a tile, "
                               f"[G/2, N, 2] for an NN scale_b one; {_PAGES}), got {src!r}")
    if src.view is not None:
        raise UnsupportedError(f"{loc}: pl.load of MX scales through the GM view {src!r} is not built in pyto")
    desc = False
    if order is not None:
        axes = [as_int(a) for a in order] if isinstance(order, (list, tuple)) and len(order) == 2 else None
        if axes is None or None in axes or sorted(a % 3 for a in axes) != [0, 1]:
            raise KernelError(f"{loc}: pl.load of MX scales: order picks the two matrix axes 0 and 1 of {src!r} "
                              f"(the last, the pair axis, cannot be chosen: load.md), got {order!r}")
        desc = axes[0] % 3 > axes[1] % 3
    if offsets is None:
        offsets = [0, 0, 0]
    offs = [as_int(o) for o in offsets] if isinstance(offsets, (list, tuple)) else None
    if offs is None or len(offs) != 3 or None in offs:
        raise ShapeError(f"{loc}: offsets into {src!r} need 3 ints, got {offsets!r}")
    if offs[2] != 0:
        raise ShapeError(f"{loc}: pl.load of MX scales moves whole pairs: the offset on the pair axis of {src!r} must "
                         f"be 0, got {offs[2]} ({_PAGES})")
    need_path("GM", "L1", loc)
    vr, vc = extent(dst)
    kx = 1 if lay == "ZZ" else 0                    # the tile axis along K
    vk = (vr, vc)[kx]
    if vk % 2:
        raise ShapeError(f"{loc}: pl.load of MX scales into {dst!r}: its valid extent along K is {vk} groups, not a "
                         f"whole number of pairs (the GM tensor's last axis holds 2 groups)")
    dacc = region_of(dst)
    q0, _, p0, _ = dacc.rect
    o0, o1 = offs[0], offs[1]
    if (lay == "ZZ") != desc:       # ZZ ascending, NN descending: one block of the [D0, 2*D1] view
        d0, d1 = src.shape[0], src.shape[1]
        flat = _view(tr, src, 0, (d0, 2 * d1), (2 * d1, 1), f"{src.name} as [{d0}, {2 * d1}]")
        region = gm_region(flat, [o0, 2 * o1], vr, vc, desc, loc, dst)
        emit_load(dst, dacc, flat, (region[0],), (dst,), region[2:], desc, to, loc, tr)
        return
    # NN ascending (parts along the tile's rows, each the transpose of a [vn, 2] block), ZZ descending (parts along
    # its columns, each a [vm, 2] block): part q from batch o0 + q, at row o1
    accs, parts, region = [], [], None
    for q in range(vk // 2):
        rows, cols = (2, vc) if kx == 0 else (vr, 2)
        region = gm_region(src, [o0 + q, o1, 0], rows, cols, kx == 0, loc, dst)
        accs.append(region[0])
        rect = (q0 + 2 * q, q0 + 2 * q + 2, p0, p0 + vc) if kx == 0 else (q0, q0 + vr, p0 + 2 * q, p0 + 2 * q + 2)
        parts.append(Tile(dst.store, rect))
    emit_load(dst, dacc, src, tuple(accs), parts, region[2:], kx == 0, to, loc, tr)


def is_scale_tile(dst) -> bool:
    """Whether a load's destination is an MX scale Mat tile (an E8M0 ZZ / NN tile in L1)."""
    return type(dst) is Tile and dst.store.buf is Buf.L1 and dst.store.dtype is DType.fp8e8m0
