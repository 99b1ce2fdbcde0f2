"""PyPTO-Pro's kernel decorator and launch (`pl.jit`, runtime/jit.py; kernel_function.md) and its parameter
annotations (`pl.Tensor[[shape], dtype(, layout)]`, `pl.DYNAMIC` / `pl.STATIC`, `pl.Ptr[dtype]` (gmview.py), scalar
`pl.DT_*`, a TilingData dataclass), run on pyto's emulator.

    @pl.jit                       # or @pl.jit(auto_mutex=False, ...)
    def k(a: pl.Tensor[[128, 256], pl.DT_FP16], n: pl.DT_INT32): ...
    rep = k[None, 8](a, 7)        # k[8](...), k(...) (block_dim 1); numpy arrays or torch CPU tensors

Every launch returns the Report and writes outputs into the arrays given, only when the run succeeds. A tensor
whose shape or dtype does not match its annotation is a ShapeError naming the parameter. The array's numpy dtype
must be the annotation's storage: fp16 for pl.DT_FP16, ml_dtypes.float8_e4m3fn for pl.DT_FP8E4M3FN, ...; numpy has no
HiFloat8, so a `pl.Tensor[[...], pl.DT_HF8]` takes a uint8 array of HF8 codes (pyto.lowp.HF8.encode makes them) and
the kernel sees an HF8 tensor (a uint8 array is DT_UINT8 everywhere else: pyto/dtypes.py). FP8 / HF8 scalars are
refused (Scalar.md: the low-precision types are storage and tensor-compute only). `pyto.run(k, ...)` and
`pyto.compile(k, ...)` take a jit kernel too (then `blocks=` is its block_dim). pyto traces the body as Python
(PyPTO-Pro parses it): scalar parameters and tiling data are concrete at trace time, so a kernel is compiled per
value of them, as pyto.compile is per shape.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import numpy as np

from ..dtypes import FP4, LOW_PRECISION, DType, as_dtype, stored_as
from ..errors import KernelError, ShapeError, UnsupportedError
from .gmview import Ptr, PtrSpec
from .trace import Kernel
from .types import TensorLayout, Unbuilt


class _Policy:
    """pl.DYNAMIC / pl.STATIC: a dim of any size (STATIC: its value baked into the compiled kernel, as every pyto
    dim is)."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"pl.{self.name}"


DYNAMIC, STATIC = _Policy("DYNAMIC"), _Policy("STATIC")


class TensorSpec:
    """A `pl.Tensor[[shape], dtype(, layout)]` annotation: each dim an int (checked at launch), pl.DYNAMIC or
    pl.STATIC (any size), and a trailing `...` (any further dims)."""

    def __init__(self, shape, dtype, layout=None):
        if not isinstance(shape, (list, tuple)):
            raise ShapeError(f"pl.Tensor[[shape], dtype]: the shape is a list, got {shape!r}")
        self.shape, self.rest = list(shape), False
        if self.shape and self.shape[-1] is Ellipsis:
            self.shape, self.rest = self.shape[:-1], True
        for d in self.shape:
            if not (isinstance(d, _Policy) or (isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0)):
                raise ShapeError(f"pl.Tensor dims are ints, pl.DYNAMIC or pl.STATIC (and a trailing ...), got {d!r}")
        self.dtype, self.layout = dtype, layout

    def check(self, name: str, shape: tuple, dtype: DType) -> None:
        """ShapeError naming the parameter when `shape` / `dtype` do not match."""
        if isinstance(self.dtype, Unbuilt):
            raise self.dtype.refuse(f"parameter '{name}'")
        want = as_dtype(self.dtype)
        if self.layout not in (None, TensorLayout.ND):
            raise UnsupportedError(f"parameter '{name}': a GM tensor of layout {self.layout!r} is not built in pyto "
                                   f"(GM tensors are ND; load a transposed operand with order=[1, 0])")
        n = len(self.shape)
        if len(shape) < n or (len(shape) != n and not self.rest):
            raise ShapeError(f"parameter '{name}' is annotated {self} but got a tensor of shape {list(shape)} "
                             f"({len(shape)} dims)")
        for i, (d, s) in enumerate(zip(self.shape, shape)):
            if not isinstance(d, _Policy) and int(d) != s:
                raise ShapeError(f"parameter '{name}' is annotated {self} but got shape {list(shape)}: dim {i} is "
                                 f"{s}, not {d}")
        if not stored_as(want, dtype):
            got = f"a {dtype} tensor" + (" (an HF8 tensor is a uint8 array of its codes: pyto.lowp.HF8.encode)"
                                         if want is DType.hf8 else "")
            raise ShapeError(f"parameter '{name}' is annotated {self} but got {got}")

    def __repr__(self) -> str:
        dims = ", ".join(repr(d) if isinstance(d, _Policy) else str(d) for d in self.shape) + (", ..." if self.rest
                                                                                                 else "")
        lay = f", {self.layout!r}" if self.layout is not None else ""
        return f"pl.Tensor[[{dims}], {self.dtype!r}{lay}]"


class Tensor:
    """`pl.Tensor[[shape], dtype(, layout)]`: a GM tensor parameter's annotation (Tensor.md)."""

    def __class_getitem__(cls, item) -> TensorSpec:
        if not isinstance(item, tuple) or len(item) not in (2, 3):
            raise ShapeError(f"pl.Tensor[[shape], dtype(, layout)], got pl.Tensor[{item!r}]")
        return TensorSpec(*item)


class TileAnnotation:
    """`pl.Tile[[shape], dtype]`: a helper's or local's annotation; it has no effect on tracing."""

    def __class_getitem__(cls, item):
        return item


def _scalar(name: str, dt: DType, value) -> Any:
    """A scalar argument annotated `dt`, as the kernel sees it: an int or a float."""
    if dt in LOW_PRECISION:
        raise ShapeError(f"parameter '{name}' is annotated {dt!r}, a storage-only type: FP8 and HF8 are not scalar "
                         f"types (PyPTO-Pro basic_data_structures/Scalar.md)")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ShapeError(f"parameter '{name}' is a {dt} scalar, got {type(value).__name__} {value!r}")
    if not dt.is_float:
        if isinstance(value, (float, np.floating)) and not float(value).is_integer():
            raise ShapeError(f"parameter '{name}' is an integer ({dt}) scalar, got {value!r}")
        info = np.iinfo(dt.np)
        v = int(value)
        if not info.min <= v <= info.max:
            raise ShapeError(f"parameter '{name}' ({dt}) is out of range: {v}")
        return v
    return float(value)


def _as_array(name: str, x) -> np.ndarray:
    """A launch argument as the numpy array pyto runs on: numpy arrays as they are, torch CPU tensors viewed (bf16
    through its bits), sharing memory so outputs land in the caller's tensor."""
    if isinstance(x, np.ndarray):
        return x
    mod = type(x).__module__
    if mod.startswith("torch"):
        import torch
        if x.device.type != "cpu":
            raise ShapeError(f"parameter '{name}': a torch tensor on {x.device}; pyto runs on CPU tensors "
                             f"(x.cpu())")
        if not x.is_contiguous():
            raise ShapeError(f"parameter '{name}': pass a contiguous tensor (x.contiguous()): outputs are written "
                             f"in place")
        if x.dtype == torch.bfloat16:
            import ml_dtypes
            return x.detach().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return x.detach().numpy()
    from ..emulator.run import Spec
    if isinstance(x, Spec):
        return x
    raise ShapeError(f"parameter '{name}' is a GM tensor: pass a numpy array or a torch CPU tensor, got "
                     f"{type(x).__name__}")


def _ptr_array(name: str, spec: PtrSpec, a):
    """A pl.Ptr[dtype] argument as the [1, n] GM tensor of its elements in memory order (Ptr.md: the kernel sees a
    pointer to its first element; pl.addptr and pl.make_tensor address it by element), sharing the caller's memory so
    that what the kernel writes lands there."""
    from ..emulator.run import Spec
    if isinstance(spec.dtype, Unbuilt):
        raise spec.dtype.refuse(f"parameter '{name}'")
    want = as_dtype(spec.dtype)
    if want in FP4:
        raise UnsupportedError(f"parameter '{name}' ({spec!r}): an FP4 pointer is not built: two elements share a "
                               f"byte, so a pointer cannot address one (PyPTO-Pro refuses pointer arithmetic on "
                               f"sub-byte types); pass a pl.Tensor of packed pairs")
    got = a.dtype if isinstance(a, Spec) else as_dtype(a.dtype)
    if not stored_as(want, got):
        raise ShapeError(f"parameter '{name}' is annotated {spec!r} but got a {got} array")
    size = int(np.prod(a.shape, dtype=np.int64))
    if size == 0:
        raise ShapeError(f"parameter '{name}' ({spec!r}) points at an empty array")
    if isinstance(a, Spec):
        return Spec((1, size), a.dtype)
    if not a.flags.c_contiguous:
        raise ShapeError(f"parameter '{name}' ({spec!r}): pass a C-contiguous array (np.ascontiguousarray): a pointer "
                         f"addresses its elements in memory order, and outputs are written in place")
    return a.reshape(1, size)


_JIT_KEYWORDS = ("target", "arch", "auto_mutex", "name", "pipeline", "tiling_key", "datatype", "compile_timeout")
_ARCH = {None: "ascend950pr", "a5": "ascend950pr", "a2": "atlas-a2", "a3": "atlas-a3"}


class JitKernel(Kernel):
    """A `@pl.jit` kernel: annotated parameters, launched as `k[block_dim](...)` / `k[None, block_dim](...)` /
    `k(...)` on the emulated chip (`arch`: "a5" = the 950PR, the default; "a2"/"a3"; or a pyto chip name)."""

    gm_sync = False       # PyPTO-Pro orders GM only by the kernel's own synchronisation

    def __init__(self, fn: Callable, *, arch: Optional[str] = None, auto_mutex: bool = True,
                 name: Optional[str] = None, tiling_key=None, unbuilt: Optional[str] = None):
        super().__init__(fn)
        self.unbuilt = unbuilt        # a pl.jit keyword pyto does not build: refused at launch (bind)
        if not isinstance(auto_mutex, bool):
            raise KernelError(f"pl.jit auto_mutex must be True or False, got {auto_mutex!r}")
        self.auto_mutex = auto_mutex
        self.chip = _ARCH.get(arch, arch)
        if name is not None:
            self.name = name
        self.tiling_key = tiling_key
        self.params = []        # (name, kind, annotation): kind "tensor", "scalar", "data" (tiling data / other)
        for p in self.signature.parameters.values():
            ann = p.annotation
            if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                raise KernelError(f"pl.jit kernel '{self.name}': parameter '{p.name}' must be positional (annotated "
                                  f"pl.Tensor[...], pl.DT_* or a tiling dataclass)")
            if isinstance(ann, TensorSpec):
                self.params.append((p.name, "tensor", ann))
            elif isinstance(ann, PtrSpec):
                self.params.append((p.name, "ptr", ann))
            elif isinstance(ann, DType):
                self.params.append((p.name, "scalar", ann))
            elif isinstance(ann, Unbuilt):
                self.params.append((p.name, "unbuilt", ann))
            else:
                self.params.append((p.name, "data", ann))
        if not any(kind in ("tensor", "ptr") for _, kind, _ in self.params):
            raise KernelError(f"pl.jit kernel '{self.name}' has no pl.Tensor[...] parameter (nor a pl.Ptr[...]): "
                              f"annotate its GM tensors (a: pl.Tensor[[M, K], pl.DT_FP16])")

    # ---- binding (run.py) ------------------------------------------------------------------------------------
    def gm_names(self) -> list:
        return [n for n, kind, _ in self.params if kind in ("tensor", "ptr")]

    def gm_dtypes(self) -> list:
        """The DType each GM tensor / pointer parameter is annotated with (run.py: a uint8 array annotated HF8 is
        an HF8 tensor)."""
        return [as_dtype(ann.dtype) if isinstance(ann.dtype, DType) else None
                for _, kind, ann in self.params if kind in ("tensor", "ptr")]

    def bind(self, args: tuple, params: dict) -> tuple:
        """(GM arrays, trace-time values by name) of a launch's positional arguments, checked against the
        annotations."""
        if self.unbuilt:
            raise UnsupportedError(f"kernel '{self.name}': {self.unbuilt}")
        if params:
            raise KernelError(f"kernel '{self.name}' takes its arguments positionally, in order "
                              f"({', '.join(n for n, _, _ in self.params)}); got keyword(s) {', '.join(params)}")
        if len(args) != len(self.params):
            raise KernelError(f"kernel '{self.name}' takes {len(self.params)} arguments "
                              f"({', '.join(n for n, _, _ in self.params)}), got {len(args)}")
        arrays, values = [], {}
        for (name, kind, ann), x in zip(self.params, args):
            if kind == "tensor":
                a = _as_array(name, x)
                ann.check(name, tuple(a.shape), a.dtype if isinstance(a.dtype, DType) else as_dtype(a.dtype))
                arrays.append(a)
            elif kind == "scalar":
                values[name] = _scalar(name, ann, x)
            elif kind == "ptr":
                arrays.append(_ptr_array(name, ann, _as_array(name, x)))
            elif kind == "unbuilt":
                raise ann.refuse(f"parameter '{name}'")
            else:
                values[name] = x
        return arrays, values

    def call(self, tensors: list, values: dict) -> None:
        it = iter(tensors)
        self.fn(*[next(it) if kind == "tensor" else Ptr(next(it)) if kind == "ptr" else values[name]
                  for name, kind, _ in self.params])

    # ---- launch ------------------------------------------------------------------------------------------------
    def __getitem__(self, key) -> "Callable[..., Any]":
        if not isinstance(key, tuple):
            key = (None, key)
        if len(key) not in (2, 3) or key[0] is not None:
            raise KernelError(f"launch a jit kernel as kernel[block_dim](...) or kernel[None, block_dim(, tiling "
                              f"key)](...) (the stream must be None on pyto), got kernel[{key!r}]")
        block_dim = key[1]
        if isinstance(block_dim, bool) or not isinstance(block_dim, (int, np.integer)) or block_dim < 1:
            raise KernelError(f"kernel[...]'s block_dim must be a positive int, got {block_dim!r}")
        if len(key) == 3 and not isinstance(key[2], dict):
            raise KernelError(f"kernel[None, block_dim, tiling_key]: the tiling key is a dict, got {key[2]!r}")
        return lambda *args: self.launch(int(block_dim), args)

    def __call__(self, *args) -> Any:
        return self.launch(1, args)

    def launch(self, block_dim: int, args: tuple):
        """Run on the emulator (full mode; timing mode when every GM argument is a pyto.spec) and return the
        Report."""
        from ..emulator.run import Spec, run
        mode = "timing" if all(isinstance(a, Spec) for a, (_, k, _) in zip(args, self.params)
                               if k in ("tensor", "ptr")) else "full"
        return run(self, *args, blocks=block_dim, chip=self.chip, mode=mode)


def jit(target: Optional[Callable] = None, **options) -> Any:
    """Mark a kernel (PyPTO-Pro's `pl.jit`, bare or called). Keywords: `auto_mutex` (default True: tile groups with
    mutex ids are ordered by their tokens), `arch` ("a5", "a2", "a3" or a pyto chip name), `name`; `tiling_key`
    is accepted; `pipeline=` (the automatic preload transform) and `datatype=` are not built (an UnsupportedError
    when the kernel is launched, so a file that declares one still imports); a function none of whose parameters
    is annotated pl.Tensor / pl.Ptr / pl.DT_* is returned as it is (PyPTO-Pro's pass-through, runtime/jit.py);
    `target` and `compile_timeout` have no meaning on the emulator and are ignored. Any other keyword is a
    KernelError."""
    unknown = [k for k in options if k not in _JIT_KEYWORDS]
    if unknown:
        raise KernelError(f"pl.jit got unexpected keyword(s) {', '.join(unknown)}; it takes "
                          f"{', '.join(_JIT_KEYWORDS)}")
    unbuilt = None
    if options.get("pipeline") is not None:
        unbuilt = ("pl.jit(pipeline=...): the automatic cube/vector preload transform is not built in pyto; write "
                   "the cross-core sync it would insert (set_cross_core / wait_cross_core)")
    elif options.get("datatype") is not None:
        unbuilt = "pl.jit(datatype=...): dtype specialisation is not built in pyto; annotate the dtypes"
    kw = {k: options[k] for k in ("arch", "auto_mutex", "name", "tiling_key") if k in options}

    def wrap(fn: Callable) -> Any:
        if isinstance(fn, JitKernel):           # @pl.jit twice: one kernel
            return fn
        if not callable(fn):
            raise KernelError(f"pl.jit decorates a function, got {fn!r}")
        if not _is_kernel(fn):                  # PyPTO-Pro passes a function without kernel annotations through
            return fn
        return JitKernel(fn, **kw, unbuilt=unbuilt)
    if target is not None and not isinstance(target, str):
        return wrap(target)
    return wrap


def _is_kernel(fn: Callable) -> bool:
    """Whether some parameter is annotated as a kernel's is (pl.Tensor, pl.Ptr, a pl.DT_* scalar): PyPTO-Pro's
    _is_tile_kernel (runtime/jit.py)."""
    from .trace import _signature
    try:
        params = _signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(isinstance(p.annotation, (TensorSpec, PtrSpec, DType, Unbuilt)) for p in params)


@dataclasses.dataclass(frozen=True)
class TilingKeyField:
    """A tiling-key field (pypto_pro.runtime.tilingkey): bits and the values it may take."""
    bits: int = 0
    values: tuple = ()


__all__ = ["jit", "JitKernel", "Tensor", "TensorSpec", "Ptr", "PtrSpec", "TileAnnotation", "DYNAMIC", "STATIC",
           "TilingKeyField"]
