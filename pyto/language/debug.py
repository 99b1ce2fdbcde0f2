"""PyPTO-Pro's debugging ops (docs/zh/pypto_pro/api/Utils-API/debugging/: printf, pto_assert, dump_data, trap) and
element access (memory_vector_computation/transpose_and_element_access/getval.md, setval.md: `pl.getval`,
`pl.setval`, `container[i, j]`), each one instruction.

Pipes and costs (emulator/encode/timing.py `_debug`): printf, pto_assert, trap, getval and setval run on the scalar pipe
S, as the pages say; dump_data of a Vec tile on V (dump_data.md), of a GM tensor on S (the vector unit reads only
UB). A kernel without them keeps its timing to the cycle: nothing is added to it.

What a value is when: pyto traces the kernel's Python once, before any data exists. Block ids, loop indices and
scalar parameters are concrete then; an element read by getval is a `Scalar` whose value full mode's data pass
supplies when the schedule reaches the read (pyto/lazy.py). Such a Scalar can be computed with (+ - * / // %,
comparisons, & | ^ ~, abs) and fed to instructions: pl.setval, pl.printf, pl.pto_assert (and a vector op's scalar
operand, where the op takes one); the consumer then waits for the read. Deciding the trace with it (an `if` or
`while`, `and`/`or`/`not`, a pl.range bound, an offset, int()/float()) is an UnsupportedError naming the line. In
timing mode nothing is read: printf shows such a value as '?', a pto_assert on it is not checked, dump_data records
the region's shape and time but no values.

Where output goes: pyto prints on the host after the schedule (timing mode) or after the data pass (full mode),
in simulated start order, each entry prefixed by its core and cycle: '[block 3 AIV1 @ 1,234 cycles] ...'. The
Report keeps the entries (`printed`) and the dumps (`dumps`: emulator/debugpass.Dump). A false pto_assert is a
KernelAssertionError (the device only logs it, pto_assert.md; pyto stops so a test sees it) and a pl.trap() a
TrapError, after printing what ran before it.
"""
from __future__ import annotations

import ast
import math
from typing import Optional

import numpy as np

from ..dtypes import FP4, LOW_PRECISION, DType, as_dtype
from ..errors import (KernelAssertionError, KernelError, OutOfBoundsError, ShapeError, UnsupportedError)
from ..ir import Access, Buf, GMTensor, Instr, Loc, Op, Pipe, Role, core_name
from ..lazy import Apply, Cell, FormatError, assertion_text, cells, parse_format, render
from .opcommon import emit, extent
from .tile import Tile, TileGroup, as_int
from .trace import caller_loc, current

_BOOL = np.dtype(np.bool_)


# ---- Scalar: a value the data pass supplies ------------------------------------------------------------------
class Scalar:
    """An element read by pl.getval / `container[i, j]`, or an expression on such reads (module docstring): data
    for instructions, never a trace-time Python value. `dtype`: the element's pl.DT_* (or 'bool' for a
    comparison)."""

    __slots__ = ("expr", "np", "core")
    __array_ufunc__ = None          # numpy defers to these operators (np.float32(2) * v is a Scalar)
    __hash__ = object.__hash__      # (== builds an expression)

    def __init__(self, expr, np_dtype: np.dtype, core: int):
        self.expr, self.np, self.core = expr, np_dtype, core

    @property
    def dtype(self):
        return "bool" if self.np == _BOOL else as_dtype(self.np)

    def __repr__(self) -> str:
        return f"<pl.Scalar {render(self.expr)}: {self.dtype}>"

    # trace-time uses: refused
    def _refuse(self, what: str):
        raise UnsupportedError(
            f"{caller_loc()}: {self!r} is used {what}: its value is known only in full mode's data pass (pyto "
            f"traces the kernel's Python once, before the data exists), so it cannot decide what is traced; use it "
            f"as data (pl.setval, a vector op's scalar, pl.printf, pl.pto_assert) instead")

    def __bool__(self):
        self._refuse("as a condition (an if or while, and/or/not, a builtin min/max)")

    def __index__(self):
        self._refuse("as a trace-time integer (a pl.range bound, an offset, a shape)")

    def __int__(self):
        self._refuse("as a Python int (int())")

    def __float__(self):
        self._refuse("as a Python float (float())")

    def __iter__(self):
        self._refuse("as a sequence")

    # arithmetic: expressions
    def __add__(self, o): return _binary(self, o, np.add, "+", "number")
    def __radd__(self, o): return _binary(o, self, np.add, "+", "number")
    def __sub__(self, o): return _binary(self, o, np.subtract, "-", "number")
    def __rsub__(self, o): return _binary(o, self, np.subtract, "-", "number")
    def __mul__(self, o): return _binary(self, o, np.multiply, "*", "number")
    def __rmul__(self, o): return _binary(o, self, np.multiply, "*", "number")
    def __truediv__(self, o): return _binary(self, o, np.true_divide, "/", "float")
    def __rtruediv__(self, o): return _binary(o, self, np.true_divide, "/", "float")
    def __floordiv__(self, o): return _binary(self, o, np.floor_divide, "//", "int")
    def __rfloordiv__(self, o): return _binary(o, self, np.floor_divide, "//", "int")
    def __mod__(self, o): return _binary(self, o, np.remainder, "%", "int")
    def __rmod__(self, o): return _binary(o, self, np.remainder, "%", "int")
    def __and__(self, o): return _binary(self, o, np.bitwise_and, "&", "bits")
    def __rand__(self, o): return _binary(o, self, np.bitwise_and, "&", "bits")
    def __or__(self, o): return _binary(self, o, np.bitwise_or, "|", "bits")
    def __ror__(self, o): return _binary(o, self, np.bitwise_or, "|", "bits")
    def __xor__(self, o): return _binary(self, o, np.bitwise_xor, "^", "bits")
    def __rxor__(self, o): return _binary(o, self, np.bitwise_xor, "^", "bits")
    def __lt__(self, o): return _binary(self, o, np.less, "<", "compare")
    def __le__(self, o): return _binary(self, o, np.less_equal, "<=", "compare")
    def __gt__(self, o): return _binary(self, o, np.greater, ">", "compare")
    def __ge__(self, o): return _binary(self, o, np.greater_equal, ">=", "compare")
    def __eq__(self, o): return _binary(self, o, np.equal, "==", "compare")
    def __ne__(self, o): return _binary(self, o, np.not_equal, "!=", "compare")
    def __neg__(self): return _unary(self, np.negative, "-", "number")
    def __pos__(self): return self
    def __abs__(self): return _unary(self, np.abs, "abs", "number")
    def __invert__(self): return _unary(self, np.logical_not if self.np == _BOOL else np.invert, "~", "bits")


def _kind_ok(dt: np.dtype, kind: str) -> bool:
    if kind == "compare":
        return True
    if kind == "bits":
        return dt.kind in "iub"
    if dt == _BOOL:
        return False
    return {"number": True, "float": dt.kind not in "iu", "int": dt.kind in "iu"}[kind]


_KIND_WORDS = {"number": "numbers", "float": "floats (// and % are the integer ones)", "int": "integers",
               "bits": "integers and bools"}


def _name(dt: np.dtype) -> str:
    return "bool" if dt == _BOOL else str(as_dtype(dt))


def _const(value, dt: np.dtype, loc: Loc, what: str):
    """A Python (or numpy) number as a constant of the Scalar's dtype `dt` (no implicit promotion: a float with an
    integer scalar, or an int outside its range, is a KernelError; a float rounds once to a float dtype)."""
    if isinstance(value, (bool, np.bool_)):
        if dt != _BOOL:
            raise KernelError(f"{loc}: {what}: a bool with a {_name(dt)} scalar (no implicit conversion)")
        return np.bool_(value)
    if dt == _BOOL:
        raise KernelError(f"{loc}: {what}: {value!r} with a bool scalar (no implicit conversion)")
    if isinstance(value, (int, np.integer)):
        if dt.kind in "iu":
            info = np.iinfo(dt)
            if not info.min <= int(value) <= info.max:
                raise KernelError(f"{loc}: {what}: {value} is outside {_name(dt)}'s range [{info.min}, {info.max}]")
        return np.asarray(int(value), np.float64 if dt.kind not in "iu" else np.int64).astype(dt)[()]
    if isinstance(value, (float, np.floating)):
        if dt.kind in "iu":
            raise KernelError(f"{loc}: {what}: the float {value!r} with a {_name(dt)} scalar (no implicit "
                              f"promotion)")
        return np.asarray(float(value), np.float64).astype(dt)[()]
    raise KernelError(f"{loc}: {what}: {value!r} is not a number or a pl.Scalar")


def _binary(a, b, fn, symbol: str, kind: str) -> Scalar:
    loc = caller_loc()
    lazy = a if isinstance(a, Scalar) else b
    what = f"pl.Scalar {symbol}"
    ea, eb = ((x.expr if isinstance(x, Scalar) else _const(x, lazy.np, loc, what)) for x in (a, b))
    if isinstance(a, Scalar) and isinstance(b, Scalar):
        if a.np != b.np:
            raise KernelError(f"{loc}: {what} of a {_name(a.np)} and a {_name(b.np)} scalar: no implicit promotion "
                              f"(PyPTO-Pro's rule)")
        if a.core != b.core:
            raise KernelError(f"{loc}: {what} of values read on different cores")
    if not _kind_ok(lazy.np, kind):
        raise KernelError(f"{loc}: {what} takes {_KIND_WORDS[kind]}, got a {_name(lazy.np)} scalar")
    out = _BOOL if kind == "compare" else lazy.np
    return Scalar(Apply(fn, (ea, eb), out, symbol), out, lazy.core)


def scalar_min(a, b) -> Scalar:
    """pl.min of a pl.Scalar (and a number or another Scalar): a Scalar."""
    return _binary(a, b, np.minimum, "min", "number")


def scalar_max(a, b) -> Scalar:
    """pl.max of a pl.Scalar (and a number or another Scalar): a Scalar."""
    return _binary(a, b, np.maximum, "max", "number")


def _unary(a: Scalar, fn, symbol: str, kind: str) -> Scalar:
    if not _kind_ok(a.np, kind):
        raise KernelError(f"{caller_loc()}: {symbol} takes {_KIND_WORDS[kind]}, got a {_name(a.np)} scalar")
    return Scalar(Apply(fn, (a.expr,), a.np, symbol), a.np, a.core)


def _cells_of(v) -> list:
    return cells(v.expr) if isinstance(v, Scalar) else []


def depend(instr: Optional[Instr], values, loc: Loc) -> None:
    """`instr` (a consumer on this trace's core) uses `values`: each getval they read must be this core's
    (cores share no scalar registers: KernelError), and a consumer on another pipe than S waits for it (the
    scalar unit issues it once the value is read). For ops that take a pl.Scalar operand (and setval, printf,
    pto_assert)."""
    if instr is None:
        return
    for v in values:
        for cell in cells(v.expr if isinstance(v, Scalar) else v):
            if cell.core != instr.core:
                raise KernelError(f"{loc}: {cell.name} was read by pl.getval on another core than the one this runs "
                                  f"on ({core_name(instr.core, current().launch.aiv_only)}): cores share no scalar "
                                  f"registers; pass the value through GM")
            if cell.instr is not None and cell.instr.pipe is not instr.pipe:
                instr.after = (*instr.after, cell.instr)


def operand(value, dtype: DType, what: str, loc: Loc):
    """A pl.Scalar operand of an instruction on `dtype` data, as the instruction records it: its expression, which
    the data pass evaluates (pyto.lazy.evaluate) and the instruction converts to `dtype` as it converts any value
    (datapath.convert: round to nearest even; saturating float to int). A bool is refused."""
    if not isinstance(value, Scalar):
        raise KernelError(f"{loc}: {what} takes a pl.Scalar here, got {value!r}")
    if value.np == _BOOL:
        raise KernelError(f"{loc}: {what}: a bool scalar as {dtype} data")
    return value.expr


# ---- element access -------------------------------------------------------------------------------------------
def _where(tr) -> Role:
    """The role a scalar-unit op runs on: its section's core, or outside sections this trace's own."""
    if tr.section == "vector":
        return Role.AIV0
    if tr.section == "cube":
        return Role.AIC
    return tr.role


def _index(v, what: str, loc: Loc) -> int:
    i = as_int(v)
    if i is None:
        raise KernelError(f"{loc}: {what} must be an integer, got {v!r}")
    return i


def _tile_element(t: Tile, idx, op: str, loc: Loc) -> tuple:
    """(Access of the element, its name) of Vec tile `t` at a linear offset (int) or [i, j] (a 2-tuple), in the
    tile's own terms: offset = i * cols + j over its shape (getval.md's linearisation)."""
    if t.store.buf is not Buf.UB:
        raise ShapeError(f"{loc}: {op} reads and writes Vec tiles and GM tensors (getval.md), not {t!r} in "
                         f"{t.store.buf!r}")
    if t.store.layout not in ("ND",):
        raise UnsupportedError(f"{loc}: {op} on the {t.layout.value} tile {t!r} is not built in pyto")
    rows, cols = t.shape
    if isinstance(idx, tuple):
        if len(idx) != 2:
            raise KernelError(f"{loc}: {t!r} is 2-D: index it as [i, j] (or pl.getval(tile, offset)), got "
                              f"{len(idx)} index{'es' if len(idx) != 1 else ''}")
        i, j = (_index(v, f"{op} index", loc) for v in idx)
        if not (0 <= i < rows and 0 <= j < cols):
            raise OutOfBoundsError(f"{loc}: {op} index [{i}, {j}] is outside {t!r} of shape [{rows}, {cols}]")
    else:
        off = _index(idx, f"{op} offset", loc)
        if not 0 <= off < rows * cols:
            raise OutOfBoundsError(f"{loc}: {op} offset {off} is outside {t!r} of {rows} x {cols} = "
                                   f"{rows * cols} elements (getval.md: 0 <= offset < the element count)")
        i, j = divmod(off, cols)
    r0, _, c0, _ = t.rect
    sr, sc = (r0 + j, c0 + i) if t.t else (r0 + i, c0 + j)
    whole = t.rect == (0, t.store.shape[0], 0, t.store.shape[1]) and not t.t
    base = f"{t.store.name}" if whole else repr(t).split(" ", 2)[-1]
    return Access(t.store, (sr, sr + 1, sc, sc + 1)), f"{base}[{i}, {j}]"


def _plain_gm(g: GMTensor, op: str, loc: Loc) -> None:
    """UnsupportedError for a GM view (pl.make_tensor, or a tensor pl.set_stride rewrote): element access and dumps
    reach launch tensors and workspaces as they are laid out."""
    if getattr(g, "view", None) is not None or id(g) in getattr(current(), "gm_strides", {}):
        raise UnsupportedError(f"{loc}: {op} of the GM view {g!r} (pl.make_tensor / pl.set_stride) is not built in "
                               f"pyto; load it into a Vec tile and read that")


def _gm_element(g: GMTensor, idx, op: str, loc: Loc) -> tuple:
    """(Access, name) of one element of GM tensor `g` at a linear offset over its shape or a full index."""
    _plain_gm(g, op, loc)
    if isinstance(idx, tuple):
        if len(idx) != g.ndim:
            raise KernelError(f"{loc}: {g!r} has {g.ndim} dimensions: index one element with {g.ndim} indices (or "
                              f"pl.getval(tensor, offset)), got {len(idx)}; tiles reach GM through pl.load / pl.store")
        pos = [_index(v, f"{op} index", loc) for v in idx]
        if not all(0 <= p < d for p, d in zip(pos, g.shape)):
            raise OutOfBoundsError(f"{loc}: {op} index {pos} is outside {g!r}")
    else:
        off = _index(idx, f"{op} offset", loc)
        n = math.prod(g.shape)
        if not 0 <= off < n:
            raise OutOfBoundsError(f"{loc}: {op} offset {off} is outside {g!r} of {n} elements")
        pos = [int(p) for p in np.unravel_index(off, g.shape)]
    batch = int(np.ravel_multi_index(pos[:-2], g.shape[:-2])) if g.ndim > 2 else 0
    r, c = pos[-2], pos[-1]
    return Access(g, (r, r + 1, c, c + 1), batch), f"{g.name}[{', '.join(map(str, pos))}]"


def _element(container, idx, op: str, loc: Loc) -> tuple:
    """(Access of one element, its name, the role that runs the op, the tiles whose mutex ids it takes): a Vec
    tile's on an AIV, a GM tensor's on the section's core (outside sections: the core tracing it)."""
    if isinstance(container, TileGroup):
        raise ShapeError(f"{loc}: {op} takes a tile, got the {container!r}: take a slot with .current() (or .next(), "
                         f"[i])")
    if isinstance(container, Tile):
        acc, text = _tile_element(container, idx, op, loc)
        return acc, text, Role.AIV0, (container,)
    if isinstance(container, GMTensor):
        acc, text = _gm_element(container, idx, op, loc)
        return acc, text, _where(current()), ()
    raise ShapeError(f"{loc}: {op} takes a Vec tile or a GM tensor, got {container!r}")


def _storage_only(container, op: str, loc: Loc) -> None:
    """getval.md / setval.md: FP8 and HF8 (storage-only types) have no scalar element access."""
    dt = getattr(container, "dtype", None)
    if dt in LOW_PRECISION:
        raise ShapeError(f"{loc}: {op} on {container!r}, a {dt!r} container: {op}.md does not support FP8E4M3FN, "
                         f"FP8E5M2 or HF8 (storage-only types, no scalar expressions: Scalar.md)")


def _getval(container, idx, loc: Loc) -> Scalar:
    _storage_only(container, "pl.getval", loc)
    acc, text, role, tiles = _element(container, idx, "pl.getval", loc)
    cell = Cell(container.dtype.np, text, -1)
    ins = _record(Op.GETVAL, Pipe.S, {"cell": cell, "gm": isinstance(container, GMTensor)}, loc, "pl.getval",
                  srcs=(acc,), tiles=tiles, role=role)
    if ins is not None:          # (None: another core's read, met on this trace)
        cell.core, cell.instr = ins.core, ins
    return Scalar(cell, cell.dtype, cell.core)


def _setval(container, idx, value, loc: Loc) -> None:
    _storage_only(container, "pl.setval", loc)
    acc, text, role, tiles = _element(container, idx, "pl.setval", loc)
    dt = container.dtype
    if isinstance(value, Scalar):
        stored = operand(value, dt, "pl.setval", loc)
    elif isinstance(value, (bool, np.bool_)):
        raise KernelError(f"{loc}: pl.setval of a bool into {dt} data")
    else:
        stored = _const(value, dt.np, loc, f"pl.setval into {dt} data")
    _record(Op.SETVAL, Pipe.S, {"value": stored, "gm": isinstance(container, GMTensor)}, loc, "pl.setval", (value,),
            dsts=(acc,), tiles=tiles, role=role)


def getval(container, offset: int) -> Scalar:
    """One element of a Vec tile or GM tensor at a linear `offset` (0 <= offset < its element count; a tile's in
    its own row-major terms, i * cols + j), on the scalar pipe S: a Scalar, its value known in full mode's data pass
    (module docstring). With make_tile the kernel orders the read after the write (sync_src/dst MTE2 -> S, or
    V -> S); a tile group under auto_mutex or a pl.alloc tile is ordered for it (getval.md)."""
    return _getval(container, offset, caller_loc())


def setval(container, offset: int, value) -> None:
    """Write `value` (a number of the element type, or a Scalar: converted, rounding to nearest even) into one
    element of a Vec tile or GM tensor at a linear `offset`, on the scalar pipe S (setval.md)."""
    _setval(container, offset, value, caller_loc())


def subscript(container, key) -> Scalar:
    """`container[i, j]` (one index per dimension, getval.md's subscript form): pl.getval of that element. Tile and
    GMTensor hand integer subscripts here."""
    return _getval(container, key if isinstance(key, tuple) else (key,), caller_loc())


def subscript_store(container, key, value) -> None:
    """`container[i, j] = value`: pl.setval of that element (setval.md)."""
    _setval(container, key if isinstance(key, tuple) else (key,), value, caller_loc())


# ---- printf, pto_assert ---------------------------------------------------------------------------------------
_ACCEPTS = {"d": ("sint", "bool", "index"), "i": ("sint", "bool", "index"), "u": ("uint", "bool", "index"),
            "x": ("uint", "index"), "f": ("fp32",)}
_KIND_TEXT = {"sint": "a signed integer", "uint": "an unsigned integer", "bool": "a bool", "index": "a Python int",
              "fp32": "an FP32 value", "half": "an FP16/BF16 value"}


def _arg_kind(x) -> Optional[str]:
    if isinstance(x, Scalar):
        dt = x.np
        if dt == _BOOL:
            return "bool"
        return {"i": "sint", "u": "uint"}.get(dt.kind, "fp32" if dt == np.float32 else "half")
    if isinstance(x, (bool, np.bool_)):
        return "bool"
    if isinstance(x, np.unsignedinteger):
        return "uint"
    if isinstance(x, np.signedinteger):
        return "sint"
    if isinstance(x, int):
        return "index"
    if isinstance(x, (np.float16,)) or (isinstance(x, np.generic) and x.dtype.name == "bfloat16"):
        return "half"
    if isinstance(x, (float, np.floating)):
        return "fp32"
    return None


def _format(fmt, args: tuple, op: str, loc: Loc) -> tuple:
    """(conversions, stored arguments) of a printf-style format and its arguments, checked as printf.md says."""
    if not isinstance(fmt, str):
        raise KernelError(f"{loc}: {op} takes a format string (a compile-time constant), got {fmt!r}")
    try:
        specs = parse_format(fmt)
    except FormatError as e:
        raise KernelError(f"{loc}: {op} format {fmt!r}: {e}") from None
    if len(specs) != len(args):
        raise KernelError(f"{loc}: {op} format {fmt!r} has {len(specs)} conversion(s) but {len(args)} argument(s) "
                          f"were given")
    stored = []
    for n, (spec, x) in enumerate(zip(specs, args)):
        if spec.conv == "p":
            raise UnsupportedError(f"{loc}: {op} '%p' (a pl.Ptr's address) is not built in pyto")
        kind = _arg_kind(x)
        if kind is None:
            raise KernelError(f"{loc}: {op} argument {n + 1} ({spec.text}) must be a scalar (a Python int, float or "
                              f"bool, or a pl.Scalar), got {x!r}")
        if kind not in _ACCEPTS[spec.conv]:
            raise KernelError(f"{loc}: {op} '{spec.text}' takes {' or '.join(_KIND_TEXT[k] for k in _ACCEPTS[spec.conv])}"
                              f" (printf.md), but argument {n + 1} is {_KIND_TEXT[kind]}: {x!r}")
        if kind == "index" and spec.conv in "ux" and x < 0:
            raise KernelError(f"{loc}: {op} '{spec.text}' takes an unsigned value, got {x}")
        stored.append(x.expr if isinstance(x, Scalar) else (np.float32(x) if kind == "fp32" else int(x)))
    return specs, tuple(stored)


def _show_loc(loc_flag, op: str, loc: Loc) -> bool:
    if not isinstance(loc_flag, (bool, np.bool_)):
        raise KernelError(f"{loc}: {op} loc= takes True or False, got {loc_flag!r}")
    return bool(loc_flag)


def _record(op: Op, pipe: Pipe, attrs: dict, loc: Loc, name: str, values=(), srcs: tuple = (), dsts: tuple = (),
            tiles: tuple = (), role: Optional[Role] = None) -> Optional[Instr]:
    """Emit one debug or element instruction on its core (`role`; default: the section's, outside sections the
    tracing core's), note it in the launch's debug list and make it wait for the getvals of `values`. None where
    this trace does not record it: an AIV op on the AIC's trace (noted, as vector ops are), an AIC op on an AIV's
    (a marker), and outside sections an op on values another core read (that core's trace records it)."""
    tr = current()
    role = _where(tr) if role is None else role
    if tr.section is None and any(c.core != tr.core for v in values for c in _cells_of(v)):
        return None
    if tr.is_aic and role is not Role.AIC:
        tr.skip(loc)
        return None
    ins = emit(op, pipe, role, srcs, dsts, attrs, loc, name, tiles, tr=tr)
    if ins is not None:
        tr.launch.debug.append(ins)
        depend(ins, values, loc)
    return ins


def printf(format_str: str, *args, loc: bool = False) -> None:
    """Print scalars with a C format string at the simulated time this instruction runs (printf.md): d/i (signed
    int, bool, Python int), u (unsigned, bool, Python int >= 0), x (unsigned, Python int >= 0), f (FP32 only),
    flags - + space # 0, width and precision; '%%', %s, %c and length modifiers are KernelErrors, %p
    UnsupportedError. S pipe. Each call is one entry of Report.printed (one trailing newline dropped), printed
    on stdout after the run (module docstring); `loc=True` adds the kernel's file:line."""
    where = caller_loc()
    specs, stored = _format(format_str, args, "pl.printf", where)
    attrs = {"fmt": format_str, "specs": specs, "args": stored, "show_loc": _show_loc(loc, "pl.printf", where),
             "words": 2 + len(stored)}
    _record(Op.PRINTF, Pipe.S, attrs, where, "pl.printf", args)


def _condition_text(loc: Loc, fn: str) -> Optional[str]:
    """The source of the first argument of the call to `fn` on the kernel line (pto_assert.md prints it)."""
    try:
        tree = ast.parse(loc.text)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and node.args
                and (getattr(node.func, "attr", None) == fn or getattr(node.func, "id", None) == fn)):
            return ast.get_source_segment(loc.text, node.args[0])
    return None


def pto_assert(condition, format_str: Optional[str] = None, *args, loc: bool = False) -> None:
    """Check a bool (pto_assert.md), on S: a trace-time False (block ids, parameters, loop indices) is a
    KernelAssertionError when traced; a condition on pl.getval values is checked in full mode's data pass, where
    the schedule reaches it (not in timing mode). The error names the line and core, 'Assertion failed: <the
    condition's source>', the formatted message and the getval values the condition read. With no format
    string the extra arguments are ignored (as PyPTO-Pro drops them)."""
    where = caller_loc()
    if isinstance(condition, Scalar):
        if condition.np != _BOOL:
            raise KernelError(f"{where}: pl.pto_assert takes a bool condition, got a {condition.dtype} scalar "
                              f"(pto_assert.md: a non-BOOL scalar is a TypeError)")
        cond = condition.expr
    elif isinstance(condition, (bool, np.bool_)):
        cond = bool(condition)
    else:
        raise KernelError(f"{where}: pl.pto_assert takes a bool condition (a comparison, True/False, or a bool "
                          f"pl.Scalar), got {condition!r} (pto_assert.md: a non-BOOL scalar is a TypeError)")
    if format_str is None:
        specs, stored, args = [], (), ()
    else:
        specs, stored = _format(format_str, args, "pl.pto_assert", where)
    text = _condition_text(where, "pto_assert") or (render(cond) if cells(cond) else str(cond))
    attrs = {"cond": cond, "text": text, "fmt": format_str, "specs": specs, "args": stored,
             "show_loc": _show_loc(loc, "pl.pto_assert", where)}
    ins = _record(Op.ASSERT, Pipe.S, attrs, where, "pl.pto_assert", (condition, *args))
    if ins is not None and cond is False:
        tr = current()
        on = (core_name(ins.core, tr.launch.aiv_only) if tr.section is not None
              else f"block {tr.block} (outside the sections: on each of its cores)")
        raise KernelAssertionError(f"{where}: pl.pto_assert failed on {on} "
                                   f"at trace time (its condition does not depend on data): "
                                   f"{assertion_text(attrs, full=False)}")


# ---- dump_data, trap ------------------------------------------------------------------------------------------
def _window(offsets, shapes, full: tuple, what: str, loc: Loc) -> tuple:
    """(offsets, shapes) of a dump window over `full` (the whole when both are None)."""
    if (offsets is None) != (shapes is None):
        raise KernelError(f"{loc}: pl.dump_data takes offsets and shapes together (or neither), got "
                          f"offsets={offsets!r}, shapes={shapes!r}")
    if offsets is None:
        return (0,) * len(full), tuple(full)
    if not (isinstance(offsets, (list, tuple)) and isinstance(shapes, (list, tuple))
            and len(offsets) == len(full) == len(shapes)):
        raise KernelError(f"{loc}: pl.dump_data of {what} takes {len(full)} offsets and {len(full)} shapes, got "
                          f"{offsets!r} and {shapes!r}")
    offs = tuple(_index(o, "pl.dump_data offset", loc) for o in offsets)
    shp = tuple(_index(s, "pl.dump_data shape", loc) for s in shapes)
    if any(s <= 0 for s in shp):
        raise KernelError(f"{loc}: pl.dump_data shapes must be positive, got {list(shp)}")
    if any(o < 0 or o + s > f for o, s, f in zip(offs, shp, full)):
        raise OutOfBoundsError(f"{loc}: pl.dump_data window at {list(offs)} of shape {list(shp)} runs outside {what} "
                               f"{list(full)}")
    return offs, shp


def dump_data(data, offsets=None, shapes=None, *, workspace=None, loc: bool = False, flag: Optional[str] = None) -> None:
    """Record a Vec tile's values (its valid region, or a window of it: offsets/shapes in its own terms, clamped
    to the valid region) or a GM tensor's (whole, or a window of one offset and size per dimension) at this point
    of the program (dump_data.md): Report.dumps gets them in full mode (timing mode: the shape and cycle, no
    values) and the run prints them. A Vec tile's dump runs on V, a GM tensor's on S. An Acc tile's (through
    `workspace`) is not built in pyto yet (UnsupportedError); Mat, Left and Right tiles cannot be dumped
    (KernelError, as on the device). `flag`: a label printed on its own line before the dump."""
    where = caller_loc()
    if flag is not None and not isinstance(flag, str):
        raise KernelError(f"{where}: pl.dump_data flag= takes a string label, got {flag!r}")
    show = _show_loc(loc, "pl.dump_data", where)
    if isinstance(data, TileGroup) or not isinstance(data, (Tile, GMTensor)):
        raise KernelError(f"{where}: pl.dump_data takes a Tensor or a Tile (take a group's slot with .current()), "
                          f"got {data!r} (dump_data.md: anything else is a TypeError)")
    if isinstance(data, GMTensor):
        if workspace is not None:
            raise KernelError(f"{where}: pl.dump_data workspace= is for Acc tiles; {data!r} is a GM tensor "
                              f"(dump_data.md: a ValueError)")
        _plain_gm(data, "pl.dump_data", where)
        if data.dtype in FP4:
            raise UnsupportedError(f"{where}: pl.dump_data of the FP4 tensor {data!r} is not built in pyto (its "
                                   f"elements are packed pairs; dump the uint8 array on the host)")
        offs, shp = _window(offsets, shapes, data.shape, repr(data), where)
        batches = [int(np.ravel_multi_index(tuple(o + q for o, q in zip(offs[:-2], p)), data.shape[:-2]))
                   for p in np.ndindex(*shp[:-2])] if data.ndim > 2 else [0]
        r0, c0, (h, w) = offs[-2], offs[-1], shp[-2:]
        srcs = tuple(Access(data, (r0, r0 + h, c0, c0 + w), b) for b in batches)
        what = f"'{data.name}' GM {list(data.shape)} {data.dtype}" + (
            "" if shp == tuple(data.shape) else f" window at {list(offs)} of {list(shp)}")
        attrs = {"slot": Cell(data.dtype.np, what, -1), "shape": shp, "transposed": False,
                 "label": flag or "", "what": what, "show_loc": show, "gm": True, "words": math.prod(shp),
                 "bytes": math.prod(shp) * data.dtype.itemsize}
        _record(Op.DUMP, Pipe.S, attrs, where, "pl.dump_data", srcs=srcs)
        return
    buf = data.store.buf
    if buf is Buf.L0C:
        if workspace is None:
            raise KernelError(f"{where}: pl.dump_data of the Acc tile {data!r} needs workspace= (a GM tensor of its "
                              f"dtype holding the whole tile: dump_data.md)")
        raise UnsupportedError(f"{where}: pl.dump_data of an Acc tile through a workspace is not built in pyto; move "
                               f"the tile to a Vec tile (or store it) and dump that")
    if buf is not Buf.UB:
        raise KernelError(f"{where}: pl.dump_data cannot print {data!r} in {buf!r}: only Vec tiles, Acc tiles "
                          f"(through a workspace) and GM tensors can be dumped (dump_data.md)")
    if workspace is not None:
        raise KernelError(f"{where}: pl.dump_data workspace= is for Acc tiles, not the Vec tile {data!r}")
    valid = extent(data)
    offs, shp = _window(offsets, shapes, data.shape, repr(data), where)
    shp = (max(0, min(shp[0], valid[0] - offs[0])), max(0, min(shp[1], valid[1] - offs[1])))
    if 0 in shp:
        raise KernelError(f"{where}: pl.dump_data window at {list(offs)} lies outside {data!r}'s valid region "
                          f"{list(valid)}")
    r0, _, c0, _ = data.rect
    (i, j), (h, w) = offs, shp
    rect = (r0 + j, r0 + j + w, c0 + i, c0 + i + h) if data.t else (r0 + i, r0 + i + h, c0 + j, c0 + j + w)
    what = (f"{data!r} {list(data.shape)} {data.dtype} {data.layout.value}"
            + ("" if shp == tuple(data.shape) else f" [{i}:{i + h}, {j}:{j + w}]"))
    attrs = {"slot": Cell(data.dtype.np, what, -1), "shape": shp,
             "transposed": data.t, "label": flag or "", "what": what, "show_loc": show, "gm": False,
             "words": h * w, "bytes": h * w * data.dtype.itemsize}
    _record(Op.DUMP, Pipe.V, attrs, where, "pl.dump_data", srcs=(Access(data.store, rect),), tiles=(data,),
            role=Role.AIV0)


def trap() -> None:
    """Abort the kernel here (trap.md: an unconditional trap instruction, S pipe): pyto raises TrapError naming the
    line, core and cycle once the schedule reaches it, after printing what ran before it. pyto's control flow is
    decided at trace time, so a traced trap is always reached unless the launch stalls first."""
    _record(Op.TRAP, Pipe.S, {}, caller_loc(), "pl.trap")


__all__ = ["Scalar", "getval", "setval", "printf", "pto_assert", "dump_data", "trap", "subscript", "subscript_store",
           "depend", "operand", "scalar_min", "scalar_max"]
