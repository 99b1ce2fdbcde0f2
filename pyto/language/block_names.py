"""PyPTO-Pro's internal block-op names, which its parser accepts beside the documented ones (a kernel may call
`pl.row_sum`: parser/_op_pipeline.py's _BLOCK_OP_ALIASES maps sum -> row_sum and the like, and
parser/_call_parser.py makes any unregistered `pl.X` the block op `block.X`; ir/op/block_ops.py defines them). Each
is the documented op with its dim: row = dim=0 (one value per row, a [rows, 1] DN tile), col = dim=1. Also
`pl.muls` (block.muls: a tile times a scalar, ir/op/block_ops.py) and `pl.constexpr(x)` (ir/op/scalar_ops.py: a
compile-time value; pyto's values are concrete at trace time already)."""
from __future__ import annotations

from .tile import Tile
from .vector_elementwise import maximum, minimum, mul
from .vector_reduce import argmax, argmin, expand_div, expand_max, expand_min, expand_mul, expand_sub, sum


def _along(op, dim: int, name: str):
    def fn(out: Tile, src: Tile, third: Tile) -> None:
        op(out, src, third, dim=dim)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"pl.{op.__name__}(out, src, ..., dim={dim}) under PyPTO-Pro's block-op name {name}."
    return fn


_OPS = {"sum": sum, "max": maximum, "min": minimum, "argmax": argmax, "argmin": argmin, "expand_max": expand_max,
        "expand_min": expand_min, "expand_mul": expand_mul, "expand_sub": expand_sub, "expand_div": expand_div}
NAMES = {f"{side}_{kind}": _along(op, dim, f"{side}_{kind}") for side, dim in (("row", 0), ("col", 1))
         for kind, op in _OPS.items()}
globals().update(NAMES)


def muls(out: Tile, src: Tile, scalar) -> None:
    """out = src * scalar (block.muls): pl.mul with a scalar right-hand side."""
    mul(out, src, scalar)


def constexpr(value):
    """A compile-time value (PyPTO-Pro's pl.constexpr): the value itself, as every value is at trace time."""
    return value


__all__ = [*NAMES, "muls", "constexpr"]
