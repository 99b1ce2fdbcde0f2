"""pytest plugin: each @pl.jit kernel of a file becomes a test item that runs `pyto.check` on it.

Installed as the pytest11 entry point `pyto.check` and inert unless asked (`-p pyto.check` loads it where plugin
autoload is off):
- `pytest --pyto-check FILE.py [DIR ...]`: every .py file collected is read as a kernel file (imported as
  `pyto check` does, with stand-ins for device packages) and yields one item per jit kernel; no ordinary tests
  are collected from those files. `--pyto-block-dim`, `--pyto-shape NAME=DIMS`, `--pyto-scalar NAME=V`,
  `--pyto-timing`, `--pyto-default-dim N` are `pyto check`'s flags.
- a marker, in an ordinary test module: `pytestmark = pytest.mark.pyto_check(...)` adds an item per jit kernel of
  that module to its tests (no flag needed).
The marker's keywords (also read from a kernel file's module-level `pytestmark` under --pyto-check):
`block_dim`, `timing`, `seed`, `chip`, `expect` (the verdict expected: "RaceError", or {kernel: verdict}; default
"ok"), `values` ({"param" or "kernel.param": shape or value}); any other keyword is a value (`x=(64, 64)`).
An item passes when its verdict is the one expected; a failure prints the check's text block.
"""
from __future__ import annotations

from typing import Optional

import pytest

# pyto itself (numba, numpy) is imported only when the plugin is used: every pytest run of an environment with
# pyto installed loads this module


def pytest_addoption(parser) -> None:
    g = parser.getgroup("pyto", "pyto check: PyPTO-Pro kernels on pyto's emulator")
    g.addoption("--pyto-check", action="store_true",
                help="read the .py files given as kernel files: one test item per @pl.jit kernel, run by pyto.check")
    g.addoption("--pyto-block-dim", type=int, default=None, metavar="N", help="block_dim of each launch")
    g.addoption("--pyto-shape", action="append", default=[], metavar="NAME=DIMS", help="as pyto check --shape")
    g.addoption("--pyto-scalar", action="append", default=[], metavar="NAME=V", help="as pyto check --scalar")
    g.addoption("--pyto-timing", action="store_true", help="timing mode (shapes only)")
    g.addoption("--pyto-default-dim", type=int, default=None, metavar="N", help="as pyto check --default-dim")


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "pyto_check(block_dim=1, timing=False, seed=0, chip=None, expect='ok', "
                                       "values=None, **values): check this module's @pl.jit kernels on pyto's "
                                       "emulator, one test item each")


def _enabled(config) -> bool:
    return bool(config.getoption("pyto_check", False))


def pytest_collect_file(file_path, parent):
    if _enabled(parent.config) and file_path.suffix == ".py" and file_path.name != "conftest.py":
        return KernelFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path, parent):
    if _enabled(parent.config):            # the file's kernels are KernelFile's: no ordinary tests from it
        return _NoTests.from_parent(parent, path=module_path)
    return None


def _is_jit(obj) -> bool:
    return type(obj).__name__ == "JitKernel" and type(obj).__module__ == "pyto.language.jit"


def pytest_pycollect_makeitem(collector, name, obj):
    if not _is_jit(obj) or _enabled(collector.config):
        return None
    marker = collector.get_closest_marker("pyto_check")
    if marker is None or obj.fn.__code__.co_filename != str(collector.path):
        return None
    from .files import marker_options
    return KernelItem.from_parent(collector, name=f"pyto_check[{name}]", kernel=obj, attr=name,
                                  options=marker_options(marker))


class _NoTests(pytest.File):
    def collect(self):
        return []


class KernelFile(pytest.File):
    """A kernel file under --pyto-check: one KernelItem per jit kernel (options from the command line, then the
    module's own pyto_check marker)."""

    def collect(self):
        from ..errors import PytoError
        from .cli import parse_values
        from .files import check_options, file_options, merged
        from .loader import load_file
        config = self.config
        try:
            kf = load_file(str(self.path))
            given = {"values": parse_values(config.getoption("pyto_shape"), config.getoption("pyto_scalar")),
                     "timing": config.getoption("pyto_timing") or None, "block_dim": config.getoption("pyto_block_dim")}
            opts = merged(file_options(kf.module), given)      # the command line wins over the file's marker
            check_options(kf, opts)
        except PytoError as e:
            raise self.CollectError(str(e)) from None
        default_dim = config.getoption("pyto_default_dim")
        for attr, k in kf.kernels:
            yield KernelItem.from_parent(self, name=attr, kernel=k, attr=attr, options=opts, default_dim=default_dim,
                                         standins=kf.standins)


class CheckFailed(Exception):
    """An item's verdict was not the one expected (its text is the check's block)."""


class KernelItem(pytest.Item):
    def __init__(self, *, kernel, attr: str, options: dict, default_dim: Optional[int] = None,
                 standins=(), **kw):
        super().__init__(**kw)
        self.kernel, self.attr, self.options = kernel, attr, options
        self.default_dim, self.standins = default_dim, list(standins)
        self.result = None

    def expected(self) -> str:
        from .files import per_kernel
        return per_kernel(self.options.get("expect"), self.attr, self.kernel, "ok")

    def runtest(self) -> None:
        from .files import per_kernel, values_for
        from .runner import check
        from .cli import _open_dims
        values = self.options.get("values") or {}
        if self.default_dim is not None:
            values = _open_dims(_One(self.attr, self.kernel), values, self.default_dim)
        opts = {k: v for k, v in self.options.items() if k in ("timing", "seed", "chip") and v is not None}
        block_dim = per_kernel(self.options.get("block_dim"), self.attr, self.kernel, 1)
        self.result = r = check(self.kernel, file=str(self.path), block_dim=block_dim, **opts,
                                **values_for(self.kernel, self.attr, values))
        r.standins = self.standins
        if r.verdict != self.expected():
            raise CheckFailed(r.summary())

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, CheckFailed):
            return f"expected {self.expected()}, got {self.result.verdict}\n{excinfo.value}"
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        code = self.kernel.fn.__code__
        return self.path, code.co_firstlineno - 1, f"pyto check {self.attr}"


class _One:
    """The shape of a KernelFile (its kernels list) for _open_dims, for one kernel."""

    def __init__(self, attr: str, kernel):
        self.kernels = [(attr, kernel)]
