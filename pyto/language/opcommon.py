"""What every op of the language shares: argument checks that name the kernel line, enum normalisation, and
`emit`, which records the op's Instr with the mutex ids auto_mutex takes for it (docs/design.md §4.4, model (1))."""
from __future__ import annotations

from typing import Optional

from ..errors import KernelError, ShapeError, UnsupportedError
from ..ir import Access, AccPhase, Buf, Instr, Loc, Op, Pipe, Role, STPhase
from .tile import Tile, TileGroup
from .trace import current
from .types import AtomicType, ReluPreMode

_AIC = Role.AIC


def need_tile(x, what: str, bufs: tuple, loc: Loc) -> Tile:
    """`x` as a tile in one of `bufs`, or the ShapeError that says what it is instead."""
    if not isinstance(x, Tile):
        if isinstance(x, TileGroup):
            raise ShapeError(f"{loc}: {what} must be a tile in {'/'.join(b.name for b in bufs)}, got the {x!r}: take "
                             f"a slot with .next() (or .current(), or [i])")
        raise ShapeError(f"{loc}: {what} must be a tile in {'/'.join(b.name for b in bufs)}, got {x!r}")
    if x.buffer not in bufs:
        raise ShapeError(f"{loc}: {what} must be in {'/'.join(f'{b!r} ({b.name})' for b in bufs)}, but {x!r} is in "
                         f"{x.buffer!r}")
    return x


def need_path(src: str, dst: str, loc: Loc) -> None:
    """UnsupportedError naming the kernel line when the chip lacks the data path src->dst."""
    chip = current().chip
    if not chip.has_path(src, dst):
        raise UnsupportedError(f"{loc}: chip {chip.name} has no data path {src}->{dst}; its paths are "
                               f"{', '.join(chip.paths)}")


def phase_of(phase, cls, loc: Loc, op: str):
    """`phase` as pyto holds it: None for no phase (None or cls.Unspecified), else the enum member."""
    if phase is None:
        return None
    if not isinstance(phase, cls):
        raise KernelError(f"{loc}: {op} takes phase=pl.{cls.__name__}.Partial / Final (or Unspecified), got "
                          f"{phase!r}")
    return None if phase is cls.Unspecified else phase


def relu_of(mode, src: Tile, loc: Loc, op: str) -> bool:
    """relu_pre_mode as a flag: NormalRelu is Fixpipe's ReLU (out of Acc only)."""
    if mode is None:
        return False
    if mode is not ReluPreMode.NormalRelu:
        raise KernelError(f"{loc}: {op} relu_pre_mode must be None or pl.ReluPreMode.NormalRelu, got {mode!r}")
    if src.store.buf is not Buf.L0C:
        raise KernelError(f"{loc}: {op} relu_pre_mode is Fixpipe's (out of Acc/L0C); on the vector side use pl.relu")
    return True


def atomic_of(atomic, loc: Loc) -> Optional[str]:
    """atomic= as pyto holds it: None (overwrite) or 'add'."""
    if atomic is None or atomic is AtomicType.AtomicNone:
        return None
    if atomic is AtomicType.AtomicAdd:
        return "add"
    raise KernelError(f"{loc}: atomic must be pl.AtomicType.AtomicNone or pl.AtomicType.AtomicAdd, got {atomic!r}")


def no_scale(scale, loc: Loc, op: str) -> None:
    if scale is not None:
        raise UnsupportedError(f"{loc}: {op}(..., scale=) (Fixpipe quantisation, per tensor or per channel) is not "
                               f"built in pyto yet")


def mutex_ids(tiles, drop_acc: bool) -> tuple:
    """The mutex ids auto_mutex takes for an op on `tiles` (its tile arguments): each slot's, once; an Acc tile's
    are dropped when the op carries a phase (the unit_flag hands L0C over, `_call_parser._emit_auto_mutex`)."""
    ids: list = []
    for t in tiles:
        if t.mutex and not (drop_acc and t.store.buf is Buf.L0C):
            for i in t.mutex:
                if i not in ids:
                    ids.append(i)
    return tuple(ids)


def emit(op: Op, pipe: Pipe, role: Role, srcs: tuple, dsts: tuple, attrs: dict, loc: Loc, name: str,
         tiles: tuple = (), phased: bool = False, tr=None) -> Optional[Instr]:
    """Record one instruction on `role`'s processor (`tr`: the current tracer, if the caller has it); under
    auto_mutex it carries the mutex ids of `tiles`."""
    if tr is None:
        tr = current()
    if tr.auto_mutex:
        for t in tiles:
            if t.mutex:
                ids = mutex_ids(tiles, phased)
                if ids:
                    attrs["mutex"] = ids
                break
    if role is _AIC and tr.fast:
        return tr.record(op, pipe, srcs, dsts, attrs, loc, name)
    return tr.emit(Instr(op, pipe, srcs, dsts, attrs, loc, 0, -1, (), name), role)


def access(t: Tile) -> Access:
    return t.access


def region(t: Tile) -> Access:
    """The Access an op on `t` records: the tile's valid region (its [0:rows, 0:cols] corner for a valid shape set
    by TileType valid_shape, pl.set_validshape or a clamped view; the whole tile otherwise), one Access object per
    tile and extent (Tile.region_of). Every op takes its operands' regions through here."""
    return t.access if t.valid is None else t.region_of(*t.valid)


def extent(t: Tile) -> tuple:
    """(rows, cols) an op on `t` covers, in the tile's own terms: the shape of `region(t)` (its valid shape)."""
    v = t.valid
    return t.shape if v is None else v


__all__ = ["need_tile", "need_path", "phase_of", "relu_of", "atomic_of", "no_scale", "mutex_ids", "emit", "access",
           "region", "extent",
           "AccPhase", "STPhase"]
