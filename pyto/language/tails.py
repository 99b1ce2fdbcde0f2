"""Tail tiles in PyPTO-Pro's spelling: `set_validshape` (a tile's valid region) and `fillpad` (the pad value
written outside it).

Sources: docs/zh/pypto_pro/api/SIMD-API/operation/memory_vector_computation/transpose_and_element_access/
set_validshape.md, .../memory_vector_computation/fillpad.md, basic_data_structures/TilePad.md and the tutorial
tutorials/operator_development/tile_based_python_programming/tail_block_handling.md.

A valid shape is the Tile object's state (tile.py): loads, stores, moves, vector ops and matmul work on the
valid region (opcommon.region) and leave every other byte of the tile as it was, so a kernel that reads outside
it gets stale data, as on hardware, and one that reads bytes nothing wrote is an UninitializedReadError.
"""
from __future__ import annotations

import numpy as np

from ..dtypes import LOW_PRECISION
from ..errors import KernelError, ShapeError, UnsupportedError
from ..ir import Buf, Op, Pipe, Role
from .opcommon import emit, region
from .tile import Tile, TileGroup, as_int
from .trace import _STATE, caller_loc, current
from .types import FillPadMode, TilePad


def set_validshape(tile, shape) -> None:
    """Set the valid shape [rows, cols] of a tile, or of every slot of a tile group (set_validshape.md). Both
    positive and within the tile's shape (ShapeError otherwise). It persists until set again: across pl.range
    iterations, and for a group through every later next() (as the hardware's tile descriptor does), so a kernel
    that narrows a tile for its last block must widen it again for the next. A tile whose TileType declared a
    static valid_shape cannot be changed (KernelError).

    On hardware a scalar write of the descriptor (pipe S); pyto records no instruction for it: the scalar unit's
    issue cost is not modelled (docs/design.md §5 charges S only for sync instructions), and a descriptor field
    is no data any pipe waits for."""
    tr = _STATE.tracer or current()     # (outside a kernel: current()'s KernelError)
    if tr.fast and type(tile) is Tile and type(shape) in (list, tuple) and len(shape) == 2 and not tile.fixed:
        rows, cols = shape       # the common case, all its checks in one go (the general path says which one fails)
        if type(rows) is int and type(cols) is int:
            r0, r1, c0, c1 = tile.rect
            r, c = (c1 - c0, r1 - r0) if tile.t else (r1 - r0, c1 - c0)
            if 0 < rows <= r and 0 < cols <= c:
                tile.valid = None if (rows == r and cols == c) else (rows, cols)
                return
    loc = caller_loc()
    if isinstance(tile, TileGroup):
        tiles = tile.tiles
    elif isinstance(tile, Tile):
        tiles = [tile]
    else:
        raise ShapeError(f"{loc}: pl.set_validshape takes a tile or a tile group, got {tile!r}")
    if not (isinstance(shape, (list, tuple)) and len(shape) == 2):
        raise ShapeError(f"{loc}: pl.set_validshape needs a shape [rows, cols], got {shape!r}")
    rows, cols = as_int(shape[0]), as_int(shape[1])
    if rows is None or cols is None:
        raise KernelError(f"{loc}: pl.set_validshape's rows and cols must be integers, got {list(shape)!r}")
    for t in tiles:
        r, c = t.shape
        if not (0 < rows <= r and 0 < cols <= c):
            raise ShapeError(f"{loc}: valid shape [{rows}, {cols}] for {t!r} of shape [{r}, {c}]: rows and cols must "
                             f"be positive and at most the tile's (set_validshape.md)")
        if t.fixed:
            raise KernelError(f"{loc}: {t!r} was declared with a static valid_shape {list(t.valid_shape)}; "
                              f"pl.set_validshape changes dynamic ones only (TileType valid_shape=[-1, -1])")
    for t in tiles:
        t._set_valid((rows, cols))


def pad_value(pad: TilePad, dtype) -> float:
    """The value TilePad `pad` fills a `dtype` tile with: zero; max / min are +inf / -inf for fp16, bf16 and fp32
    (the bit patterns PTO-ISA's pad table uses: 0x7c00 / 0xfc00, 0x7f80 / 0xff80, 0x7f800000 / 0xff800000, so a
    max reduction or a softmax ignores them exactly), and the type's largest / smallest value for integers
    (TilePad.md: "the type's maximum / minimum")."""
    if pad is TilePad.zero:
        return 0
    if dtype.is_float:
        return np.inf if pad is TilePad.max else -np.inf
    info = np.iinfo(dtype.np)
    return int(info.max if pad is TilePad.max else info.min)


def fillpad(out, src, *, mode: FillPadMode = FillPadMode.NORMAL) -> None:
    """out = src over src's valid region, and out's pad value (its TileType's pad, TilePad.zero/max/min) over the
    rest of out's shape, on the V pipe (fillpad.md). Vec tiles of one bit width (b8/b16/b32: a different dtype of
    that width takes the bits as they are). Modes: NORMAL, out and src of one shape at different addresses;
    EXPAND, out at least src's shape on both axes, at a different address; INPLACE, the same shape at the same
    address (out's bytes of the valid region are src's own and stay). The padding written is out's whole shape
    minus src's valid region, whatever out's own valid shape. Mat tiles (fillpad.md allows them on the 950) are
    not built (UnsupportedError)."""
    tr = current()
    loc = caller_loc()
    if tr.is_aic:
        tr.skip(loc)            # the AIVs' traces check and record it
        return
    for x, what in ((out, "out"), (src, "src")):
        if isinstance(x, Tile) and x.buffer is Buf.L1:
            raise UnsupportedError(f"{loc}: pl.fillpad on the Mat tile {x!r} is not built in pyto yet (Vec only)")
        if not isinstance(x, Tile) or x.buffer is not Buf.UB:
            raise ShapeError(f"{loc}: pl.fillpad {what} must be a Vec (UB) tile, got {x!r}")
        if x.t:
            raise UnsupportedError(f"{loc}: pl.fillpad on the transposed view {x!r} is not built yet")
    if not isinstance(mode, FillPadMode):
        raise KernelError(f"{loc}: pl.fillpad mode must be pl.FillPadMode.NORMAL, EXPAND or INPLACE, got {mode!r}")
    for x in (out, src):
        if x.dtype in LOW_PRECISION:
            raise UnsupportedError(f"{loc}: pl.fillpad on the {x.dtype!r} tile {x!r} is not built in pyto (FP8 / HF8 "
                                   f"tiles are storage and cube inputs only here; their pad values are not modelled)")
    if out.pad is None:
        raise KernelError(f"{loc}: pl.fillpad writes {out!r}'s pad value, but its TileType declares none (pad=None "
                          f"or TilePad.null); declare pad=pl.TilePad.zero / max / min (fillpad.md)")
    if out.dtype.itemsize != src.dtype.itemsize:
        raise ShapeError(f"{loc}: pl.fillpad copies bits: {src!r} is {src.dtype} and {out!r} is {out.dtype}, of "
                         f"different widths (fillpad.md: b8, b16, b32 of one width)")
    same = out.store.buf is src.store.buf and out.store.addr == src.store.addr
    (orow, ocol), (srow, scol) = out.shape, src.shape
    if mode is FillPadMode.EXPAND:
        if orow < srow or ocol < scol:
            raise ShapeError(f"{loc}: pl.fillpad EXPAND needs out at least src's shape: {out!r} is [{orow}, {ocol}], "
                             f"{src!r} [{srow}, {scol}]")
    elif (orow, ocol) != (srow, scol):
        raise ShapeError(f"{loc}: pl.fillpad {mode.name} needs out and src of one shape: {out!r} is [{orow}, {ocol}], "
                         f"{src!r} [{srow}, {scol}] (EXPAND pads into a larger out)")
    if (mode is FillPadMode.INPLACE) != same:
        raise ShapeError(f"{loc}: pl.fillpad {mode.name} needs out and src at "
                         f"{'the same' if mode is FillPadMode.INPLACE else 'different'} addresses: {out!r} at "
                         f"{out.store.addr:#x}, {src!r} at {src.store.addr:#x}")
    if mode is FillPadMode.INPLACE and (out.store is not src.store or out.rect != src.rect):
        raise ShapeError(f"{loc}: pl.fillpad INPLACE pads a tile in place: out {out!r} and src {src!r} must be the "
                         f"same rectangle of one store")
    vr, vc = src.valid_shape
    attrs = {"vr": vr, "vc": vc, "value": pad_value(out.pad, out.dtype), "elems": orow * ocol,
             "width": out.dtype.itemsize, "inplace": mode is FillPadMode.INPLACE}
    emit(Op.VFILLPAD, Pipe.V, Role.AIV0, (region(src),), (out.access,), attrs, loc, "pl.fillpad", (out, src))


__all__ = ["set_validshape", "fillpad", "pad_value"]
