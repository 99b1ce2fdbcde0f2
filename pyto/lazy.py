"""Scalars whose values exist only in full mode's data pass, and how pl.printf shows a value.

A `Cell` is one element a `pl.getval` (or `container[i, j]`) reads: the data pass fills it when the schedule
reaches that instruction. `Apply` is a scalar expression a kernel builds on cells (`v * 2`, `v > 0`). pyto
traces a kernel's Python once, before any data exists, so these values can feed instructions (a setval, a
vector op's scalar, pl.printf, pl.pto_assert) but not decide what is traced (pyto/language/debug.py's Scalar
refuses that); the emulator evaluates them when the data pass reaches the instruction that uses them.

`parse_format` / `c_format` are pl.printf's restricted C format strings (printf.md): `%[flags][width][.precision]`
with d, i, u, x, f (p names a pl.Ptr), no `%%`, `%s`, `%c` and no length modifiers.
"""
from __future__ import annotations

import re
from typing import Any, NamedTuple, Optional

import numpy as np


class Cell:
    """One element read by a getval instruction: `value` (a numpy scalar of `dtype`) once the data pass has run it,
    None before (and in timing mode). `name` says which element ("x_ub[0, 3]"), `core` which trace read it."""

    __slots__ = ("value", "dtype", "name", "core", "instr")

    def __init__(self, dtype: np.dtype, name: str, core: int):
        self.value: Any = None
        self.dtype, self.name, self.core = dtype, name, core
        self.instr = None          # the getval Instr that fills it (None: nothing fills it on this core)

    def __repr__(self) -> str:
        return f"<cell {self.name}>"


class Apply:
    """`fn(*args)` on cells, other expressions and constants (numpy scalars), its result of numpy `dtype`;
    `symbol` renders it ("+", "abs", ...)."""

    __slots__ = ("fn", "args", "dtype", "symbol")

    def __init__(self, fn, args: tuple, dtype: np.dtype, symbol: str):
        self.fn, self.args, self.dtype, self.symbol = fn, args, dtype, symbol

    def __repr__(self) -> str:
        return f"<expr {render(self)}>"


class Unknown(Exception):
    """A value the data pass has not computed (timing mode, or an instruction it did not reach)."""


def evaluate(x):
    """The value of a cell or expression (a constant is itself); Unknown if a cell is not filled."""
    t = type(x)
    if t is Cell:
        if x.value is None:
            raise Unknown(x.name)
        return x.value
    if t is Apply:
        with np.errstate(all="ignore"):     # a wrapping int32 sum, a division by zero: the machine's result
            return np.asarray(x.fn(*[evaluate(a) for a in x.args])).astype(x.dtype)[()]
    return x


def cells(x) -> list:
    """The cells an expression reads, each once, in order."""
    out: list = []

    def walk(e) -> None:
        if type(e) is Cell:
            if e not in out:
                out.append(e)
        elif type(e) is Apply:
            for a in e.args:
                walk(a)
    walk(x)
    return out


def render(x) -> str:
    """An expression as text: 'x_ub[0, 0] * 2 > 1.5'."""
    t = type(x)
    if t is Cell:
        return x.name
    if t is Apply:
        args = [render(a) for a in x.args]
        if x.symbol.isalpha():
            return f"{x.symbol}({', '.join(args)})"
        if len(args) == 1:
            return f"{x.symbol}{args[0]}"
        inner = [f"({a})" if type(e) is Apply and len(e.args) > 1 else a for a, e in zip(args, x.args)]
        return f" {x.symbol} ".join(inner)
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    return str(x.item() if isinstance(x, np.generic) else x)


# ---- printf's format strings ---------------------------------------------------------------------------------
_SPEC = re.compile(r"%(?P<flags>[-+ #0]*)(?P<width>\d+)?(?:\.(?P<prec>\d+))?(?P<length>hh|h|ll|l|j|z|t|L)?"
                   r"(?P<conv>.?)")


class Conversion(NamedTuple):
    """One conversion of a format string: its text, where it starts and ends, its conversion letter and the
    Python %-format that prints it as C does."""

    text: str
    start: int
    end: int
    conv: str
    py: str


class FormatError(ValueError):
    """A format string printf.md does not allow (the message says why)."""


def parse_format(fmt: str) -> list:
    """The conversions of a printf format string, or FormatError naming the first it does not allow."""
    out = []
    for m in _SPEC.finditer(fmt):
        conv, text = m["conv"], m.group(0)
        if m["length"]:
            raise FormatError(f"'{text}': length modifiers ({m['length']}) are not supported; write "
                              f"%{m['flags']}{m['width'] or ''}{'.' + m['prec'] if m['prec'] else ''}{conv}")
        if conv == "%":
            raise FormatError("'%%' is not supported (a literal percent sign cannot be printed)")
        if conv in ("s", "c"):
            raise FormatError(f"'%{conv}' is not supported (printf takes scalars: d, i, u, x, f, p)")
        if conv not in ("d", "i", "u", "x", "f", "p"):
            raise FormatError(f"'{text}' is not a conversion printf takes (d, i, u, x, f, p)")
        py = "%" + m["flags"] + (m["width"] or "") + (f".{m['prec']}" if m["prec"] is not None else "")
        out.append(Conversion(text, m.start(), m.end(), conv, py + {"u": "d", "i": "d"}.get(conv, conv)))
    return out


def c_format(fmt: str, specs: list, values: list, unknown: str = "?") -> str:
    """`fmt` with each conversion replaced by its value as C's printf prints it; a value that is not known (None)
    prints `unknown`."""
    out, at = [], 0
    for spec, v in zip(specs, values):
        out.append(fmt[at:spec.start])
        if v is None:
            out.append(unknown)
        else:
            out.append(spec.py % (float(v) if spec.conv == "f" else int(v)))
        at = spec.end
    out.append(fmt[at:])
    return "".join(out)


def value_or_none(x) -> Optional[Any]:
    """evaluate(x), or None when it is not known yet."""
    try:
        return evaluate(x)
    except Unknown:
        return None


def _known(x, full: bool):
    """x's value: after a data pass (`full`) whatever it computed, else only a trace-time constant (None for an
    expression on cells: timing mode has no data)."""
    return value_or_none(x) if full else (x if not cells(x) else None)


def _message(fmt: str, specs: list, args: tuple, full: bool) -> str:
    text = c_format(fmt, specs, [_known(x, full) for x in args])
    return text[:-1] if text.endswith("\n") else text


def printf_text(attrs: dict, full: bool) -> str:
    """A pl.printf's output from its instruction's attrs: the format with its values (a getval's '?' unless
    `full`), one trailing newline dropped (each call is one entry of Report.printed)."""
    return _message(attrs["fmt"], attrs["specs"], attrs["args"], full)


def assertion_text(attrs: dict, full: bool) -> str:
    """A failed pl.pto_assert's text from its attrs: 'Assertion failed: <condition>' (pto_assert.md), its message
    on the next line, then the getval values the condition read."""
    text = f"Assertion failed: {attrs['text']}"
    if attrs["fmt"] is not None:
        text += "\n" + _message(attrs["fmt"], attrs["specs"], attrs["args"], full)
    read = cells(attrs["cond"])
    if read:
        text += "\n(" + ", ".join(f"{c.name} = {render(_known(c, full)) if _known(c, full) is not None else '?'}"
                                  for c in read) + ")"
    return text


__all__ = ["Cell", "Apply", "Unknown", "evaluate", "cells", "render", "Conversion", "FormatError", "parse_format",
           "c_format", "value_or_none", "printf_text", "assertion_text"]
