"""The data types pyto knows, in the hardware's names, and their numpy counterparts."""
from __future__ import annotations

import enum

import ml_dtypes
import numpy as np

from .errors import ShapeError


class DType(enum.Enum):
    """A tile or tensor element type: value = (name, itemsize, numpy dtype)."""

    fp16 = ("fp16", 2, np.dtype(np.float16))
    bf16 = ("bf16", 2, np.dtype(ml_dtypes.bfloat16))
    fp32 = ("fp32", 4, np.dtype(np.float32))
    int8 = ("int8", 1, np.dtype(np.int8))
    int32 = ("int32", 4, np.dtype(np.int32))
    uint8 = ("uint8", 1, np.dtype(np.uint8))    # the vector compare ops' bit-packed masks (and byte data)

    # itemsize, np, is_float and acc are plain attributes set below: they are read on every traced
    # instruction, and Enum's own `value` property is slow on that path.
    itemsize: int
    np: "np.dtype"
    is_float: bool
    acc: "DType"   # the L0C accumulation type of a cube input: int32 for int8 (and uint8), fp32 otherwise

    def __repr__(self) -> str:
        return f"pl.DT_{self.name.upper()}"

    __str__ = lambda self: self.name  # noqa: E731


for _d in DType:
    _d.itemsize, _d.np = _d.value[1], _d.value[2]
    _d.is_float = _d.value[0] in ("fp16", "bf16", "fp32")
for _d in DType:
    _d.acc = DType.int32 if _d in (DType.int8, DType.uint8) else DType.fp32
del _d

#: The types Fixpipe writes an L0C accumulator out as (a store / move out of L0C converts once).
FIXPIPE_OUT = {DType.fp32: (DType.fp32, DType.fp16, DType.bf16), DType.int32: (DType.int32,)}

_ALIASES = {"u8": "uint8", "float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32"}


def as_dtype(x: object) -> DType:
    """DType from a DType, a name ('fp16', 'bfloat16', ...), a numpy dtype or an array; ShapeError otherwise."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        name = _ALIASES.get(x.lower(), x.lower())
        if name in DType.__members__:
            return DType[name]
        raise ShapeError(f"unknown dtype {x!r}; pyto knows {', '.join(DType.__members__)}")
    try:
        npd = np.dtype(x if isinstance(x, (type, np.dtype)) else getattr(x, "dtype", x))
    except TypeError:
        raise ShapeError(f"cannot read a dtype from {x!r}") from None
    for d in DType:
        if d.np == npd:
            return d
    raise ShapeError(f"dtype {npd} is not supported; pyto knows {', '.join(DType.__members__)}")
