"""A jit kernel's launch arguments, made from its annotations: random tensors of the annotated dtype, the dims
its annotations leave open (pl.DYNAMIC, pl.STATIC, a trailing `...`) and its scalars from the values given.

`values` maps a parameter's name to what the caller (pyto.check's keywords, `pyto check`'s --shape / --scalar)
gave: a shape (tuple or list of ints) for a tensor or a pl.Ptr (its element count, or a shape), a number for a
pl.DT_* scalar, a dataclass instance, or a {field: value} dict over the dataclass's defaults, for tiling data.
A parameter that needs a value and has none is an InputError naming the flag that would give it.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional

import numpy as np

from ..dtypes import DType, as_dtype
from ..errors import InputError, ShapeError
from ..language.types import Unbuilt


def _random(rng: np.random.Generator, shape: tuple, dt: DType) -> np.ndarray:
    """Values of `dt` a kernel can compute on without overflow: normal floats; small integers (so that int8
    products and int32 sums stay exact and in range). HF8: normal floats as HF8 codes (uint8, pyto.lowp); FP4: random
    packed bytes."""
    if dt is DType.hf8:
        from ..lowp import HF8
        return HF8.encode(rng.standard_normal(shape))
    if dt.bits == 4:                   # FP4: packed pairs, and every byte is two valid codes (dtypes.py)
        return rng.integers(0, 255, shape, endpoint=True, dtype=np.uint8)
    if dt.is_float:
        return rng.standard_normal(shape).astype(dt.np)
    info = np.iinfo(dt.np)
    lo, hi = max(info.min, -8), min(info.max, 8)
    return rng.integers(lo, hi, shape, endpoint=True).astype(dt.np)


def _shape_of(name: str, spec, given) -> tuple:
    """The tensor shape for annotation `spec`: the given one (checked against the fixed dims) or the annotation's
    own when it fixes every dim."""
    from ..language.jit import _Policy
    flag = f"--shape {name}={'x'.join('N' if isinstance(d, _Policy) else str(d) for d in spec.shape)}"
    if given is None:
        if spec.rest or any(isinstance(d, _Policy) for d in spec.shape):
            raise InputError(f"parameter '{name}' is annotated {spec}: give its shape ({flag}"
                             f"{'x...' if spec.rest else ''}; pytest: --pyto-{flag[2:]} or the pyto_check marker's "
                             f"{name}=(...); pyto.check(..., {name}=(...)))")
        return tuple(int(d) for d in spec.shape)
    shape = _as_shape(name, given)
    try:                                 # the launch's own check of a shape against its annotation
        spec.check(name, shape, as_dtype(spec.dtype))
    except ShapeError as e:
        raise InputError(f"the shape given for {e}") from None
    return shape


def _as_shape(name: str, given) -> tuple:
    if isinstance(given, (int, np.integer)) and not isinstance(given, bool):
        given = (given,)
    if not isinstance(given, (tuple, list)) or not all(
            isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in given):
        raise InputError(f"parameter '{name}': a shape is a tuple of non-negative ints, got {given!r}")
    return tuple(int(d) for d in given)


def _scalar(name: str, dt: DType, given, default) -> Any:
    if given is None:
        if default is not None:
            return default
        raise InputError(f"parameter '{name}' is a {dt} scalar: give its value (--scalar {name}=V; pytest: "
                         f"--pyto-scalar {name}=V or the pyto_check marker's {name}=V; pyto.check(..., {name}=V))")
    if isinstance(given, bool) or not isinstance(given, (int, float, np.integer, np.floating)):
        raise InputError(f"parameter '{name}' is a {dt} scalar, got {given!r}")
    if dt.bits <= 8 and dt.is_float:
        raise InputError(f"parameter '{name}' is annotated {dt!r}: FP8, HF8 and FP4 are not scalar types (Scalar.md)")
    if not dt.is_float and float(given) != int(given):
        raise InputError(f"parameter '{name}' is a {dt} scalar, got {given!r}: not an integer")
    return float(given) if dt.is_float else int(given)


def _data(name: str, ann, given, default) -> Any:
    if given is not None and not isinstance(given, dict):
        return given
    if given is None and default is not None:
        return default
    if not (isinstance(ann, type) and dataclasses.is_dataclass(ann)):
        raise InputError(f"parameter '{name}' (annotated {ann!r}) takes a value pyto check cannot make: give it "
                         f"through pyto.check(..., {name}=...)")
    fields = {f.name: f for f in dataclasses.fields(ann)}
    given = given or {}
    unknown = [k for k in given if k not in fields]
    if unknown:
        raise InputError(f"parameter '{name}': {ann.__name__} has no field {unknown[0]!r} (fields: "
                         f"{', '.join(fields)})")
    missing = [f for f in fields if f not in given and fields[f].default is dataclasses.MISSING
               and fields[f].default_factory is dataclasses.MISSING]
    if missing:
        raise InputError(f"parameter '{name}' is a {ann.__name__}: give its field(s) "
                         f"{', '.join(missing)} (--scalar {name}.{missing[0]}=V ...)")
    return ann(**given)


def make_args(kernel, values: dict, *, seed: int = 0, timing: bool = False) -> tuple[list, dict]:
    """(the launch's positional arguments, {name: {"shape": [...], "dtype": "fp16"} or {"value": v}} describing
    them). Tensors are pyto.spec in timing mode, else random arrays drawn from `seed`."""
    from ..emulator.run import spec
    unknown = [k for k in values if k not in {n for n, _, _ in kernel.params}]
    if unknown:
        raise InputError(f"kernel '{kernel.name}' has no parameter {unknown[0]!r} (parameters: "
                         f"{', '.join(n for n, _, _ in kernel.params)})")
    defaults = {p.name: p.default for p in kernel.signature.parameters.values() if p.default is not p.empty}
    rng = np.random.default_rng(seed)
    args, described = [], {}
    for name, kind, ann in kernel.params:
        given = values.get(name)
        if kind in ("tensor", "ptr"):
            dtype = ann.dtype
            if isinstance(dtype, Unbuilt):
                raise dtype.refuse(f"parameter '{name}'")
            dt = as_dtype(dtype)
            if kind == "tensor":
                shape = _shape_of(name, ann, given)
            elif given is None:
                raise InputError(f"parameter '{name}' is a {ann!r}: give its element count "
                                 f"(--shape {name}=N, or pyto.check(..., {name}=N))")
            else:
                shape = (math.prod(_as_shape(name, given)),)
            args.append(spec(shape, dt) if timing else _random(rng, shape, dt))
            described[name] = {"shape": list(shape), "dtype": str(dt)}
        elif kind == "scalar":
            v = _scalar(name, ann, given, defaults.get(name))
            args.append(v)
            described[name] = {"value": v}
        elif kind == "unbuilt":
            raise ann.refuse(f"parameter '{name}'")
        else:
            v = _data(name, ann, given, defaults.get(name))
            args.append(v)
            described[name] = {"value": repr(v)}
    return args, described


def parse_dims(text: str) -> Optional[tuple]:
    """'75x37', '75,37' or '128' as a shape; None when it is not one."""
    parts = text.replace(",", "x").split("x")
    if not all(p.strip().isdigit() for p in parts):
        return None
    return tuple(int(p) for p in parts)
