"""PyPTO-Pro's vector names pyto does not build: each is exported, and using it raises UnsupportedError naming it
(never a silent stand-in). Pages: memory_vector_computation/scatter_gather/, sorting/, vector_mask/, and
_api.py section B9/B10; the register-level `vf` namespace: operation/vf_computation/."""
from __future__ import annotations

from ..errors import UnsupportedError
from .trace import caller_loc

_OPS = {
    "gather": "gather by index", "gatherb": "gather by 32-byte block offsets", "gathermask": "gather by bit pattern",
    "scatter": "scatter by index", "mrgsort": "merge sort", "mrgsort2": "multi-way merge sort",
    "sort32": "32-element sort with indices", "histogram": "radix-sort histogram", "quant": "quantisation",
    "dequant": "dequantisation", "set_mask_count": "the vector mask's counting mode",
    "set_mask_norm": "the vector mask's bit mode", "set_vec_mask": "the 128-bit vector mask",
    "reset_mask": "resetting the vector mask",
}


def _refusal(name: str, what: str) -> UnsupportedError:
    return UnsupportedError(f"{caller_loc()}: pl.{name} ({what}) is not built in pyto yet")


def _unbuilt(name: str, what: str):
    def op(*args, **kwargs):
        raise _refusal(name, what)
    op.__name__ = name
    op.__doc__ = f"PyPTO-Pro's pl.{name} ({what}): not built in pyto; calling it raises UnsupportedError."
    return op


globals().update({name: _unbuilt(name, what) for name, what in _OPS.items()})


def vector_function(fn=None, **kwargs):
    """@pl.vector_function (register-level vf kernels): not built in pyto. Decorating is allowed (a kernel file
    defining one still imports); calling the function raises UnsupportedError naming it."""
    def wrap(f):
        def refused(*args, **kw):
            raise _refusal("vector_function", f"the register-level vf function '{f.__name__}'")
        refused.__name__ = getattr(f, "__name__", "vector_function")
        return refused
    return wrap(fn) if callable(fn) else wrap


class _Vf:
    """`pl.Vf` (`from pypto_pro.language import Vf as vf`): every register-level vf.* op raises UnsupportedError."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return _unbuilt(f"Vf.{name}", "a register-level vf op")

    def __repr__(self) -> str:
        return "pl.Vf (not built in pyto)"


Vf = _Vf()

__all__ = [*_OPS, "vector_function", "Vf"]
