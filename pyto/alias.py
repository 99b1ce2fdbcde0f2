"""`pyto.alias_pypto_pro()`: make `import pypto_pro.language as pl` resolve to pyto.language (docs/design.md §3), so a
PyPTO-Pro kernel file runs on pyto with its import line unchanged."""
from __future__ import annotations

import importlib.util
import sys
import types

from .errors import KernelError


def alias_pypto_pro() -> bool:
    """Register `pypto_pro`, `pypto_pro.language` (= pyto.language), `pypto_pro.runtime` (jit, kernel) and
    `pypto_pro.runtime.tilingkey` (TilingKeyField) in sys.modules, unless the real package is importable (then
    nothing changes and the answer is False). Returns whether the alias is in place. Idempotent."""
    from . import language
    current = sys.modules.get("pypto_pro")
    if current is not None:
        return getattr(current, "__pyto_alias__", False)
    if importlib.util.find_spec("pypto_pro") is not None:
        return False
    root = types.ModuleType("pypto_pro", "pyto's stand-in for PyPTO-Pro (pyto.alias_pypto_pro())")
    root.__pyto_alias__ = True
    root.__path__ = []                     # a package: `import pypto_pro.language` finds the submodule below
    runtime = types.ModuleType("pypto_pro.runtime")
    runtime.jit, runtime.kernel = language.jit, language.kernel
    runtime.__path__ = []
    tilingkey = types.ModuleType("pypto_pro.runtime.tilingkey")
    tilingkey.TilingKeyField = language.TilingKeyField
    root.language, root.runtime, runtime.tilingkey = language, runtime, tilingkey
    sys.modules.update({"pypto_pro": root, "pypto_pro.language": language, "pypto_pro.runtime": runtime,
                        "pypto_pro.runtime.tilingkey": tilingkey})
    sys.modules.update(_parser_modules())
    return True


class ParserError(KernelError):
    """PyPTO-Pro's parser error names (language/parser/diagnostics/_exceptions.py): pyto's KernelError, which its
    trace-time checks raise, so a test's `pytest.raises(ParserSyntaxError)` names the same failure class."""


class ParserSyntaxError(ParserError):
    """The DSL's syntax is violated."""


class ParserTypeError(ParserError):
    """A type annotation is wrong or missing."""


def _parser_modules() -> dict:
    """pypto_pro.language.parser(.diagnostics._exceptions): the error classes kernel files import from there."""
    names = ["pypto_pro.language.parser", "pypto_pro.language.parser.diagnostics",
             "pypto_pro.language.parser.diagnostics._exceptions"]
    mods = {n: types.ModuleType(n, "pyto's stand-in (pyto.alias_pypto_pro())") for n in names}
    for parent, child in zip(names, names[1:]):
        mods[parent].__path__ = []
        setattr(mods[parent], child.rsplit(".", 1)[1], mods[child])
    exc = mods[names[-1]]
    exc.ParserError, exc.ParserSyntaxError, exc.ParserTypeError = ParserError, ParserSyntaxError, ParserTypeError
    return mods
