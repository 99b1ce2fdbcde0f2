"""Import a PyPTO-Pro kernel file as its author wrote it and find its `@pl.jit` kernels.

The file is imported with `pyto.alias_pypto_pro()` in force, so `import pypto_pro.language as pl` is pyto's
language. A kernel file often imports device-side packages at module level that a CPU machine lacks (torch_npu,
the PyPTO framework `pypto`, torch itself); the kernels never touch them, their host test code does. While the
file imports, each such package that is not installed is a stand-in module (`Standin`): any attribute of it, any
call of one, is another stand-in, so module-level lines such as `torch.manual_seed(0)` or
`DEVICE = torch.device("npu:0")` run and do nothing. A kernel that uses one at trace time fails with a
KernelError naming the stand-in. With torch installed and torch_npu not, torch's spare backend is named "npu"
(as torch_npu itself does), so `torch.device("npu:0")` parses; tensors are never put there. The stand-ins leave sys.modules when the import ends (a later `import torch`
in the same process finds the real one or fails as usual); the result lists which were used.
"""
from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from dataclasses import dataclass, field
from typing import Iterable, Optional

from ..errors import LoadError, PytoError

#: top-level packages a kernel file may import for its host code only: stood in for when not installed
DEVICE_PACKAGES = ("torch", "torch_npu", "pypto", "acl", "ascendebug", "tbe", "te", "mindspore")


class Standin(types.ModuleType):
    """A stand-in for a missing package or anything taken from it: attributes, calls, items are stand-ins; used
    as a decorator it returns what it decorates."""

    def __init__(self, name: str):
        super().__init__(name, f"pyto check's stand-in for {name} (not installed here)")
        self.__path__ = []                # a package: `import torch_npu.contrib` finds a submodule stand-in

    def __getattr__(self, attr: str) -> "Standin":
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return Standin(f"{self.__name__}.{attr}")

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], Standin):
            return args[0]          # a decorator (`@torch.no_grad()`, `@pypto.options(...)`): what it decorates
        return Standin(f"{self.__name__}(...)")

    def __getitem__(self, item) -> "Standin":
        return Standin(f"{self.__name__}[...]")

    def __iter__(self):
        return iter(())

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"<stand-in {self.__name__}>"


class _StandinFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on sys.meta_path: finds only what no real finder did, and only under the stood-in packages."""

    def __init__(self, packages: Iterable[str]):
        self.packages = set(packages)
        self.used: list[str] = []

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] not in self.packages:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        if spec.name.split(".")[0] == spec.name:
            self.used.append(spec.name)
            if spec.name == "torch_npu":
                _npu_device_name()
        return Standin(spec.name)

    def exec_module(self, module) -> None:
        return None


def _npu_device_name() -> None:
    """What importing torch_npu does first, without the device: name torch's spare backend "npu", so that
    `torch.device("npu:0")` at module level parses (on a real torch; nothing to do without one)."""
    if importlib.util.find_spec("torch") is None:
        return
    import torch
    with contextlib.suppress(RuntimeError, AttributeError):       # already named (once per process)
        torch.utils.rename_privateuse1_backend("npu")


@dataclass
class KernelFile:
    """A loaded kernel file: its path, module, its own jit kernels (name, kernel) in source order, and the
    packages stood in for while it imported."""

    path: str
    module: types.ModuleType
    kernels: list = field(default_factory=list)
    standins: list = field(default_factory=list)


@contextlib.contextmanager
def _standins(packages: Iterable[str]):
    finder = _StandinFinder(p for p in packages if importlib.util.find_spec(p) is None)
    before = set(sys.modules)
    sys.meta_path.append(finder)
    try:
        yield finder
    finally:
        sys.meta_path.remove(finder)
        for name in set(sys.modules) - before:
            if isinstance(sys.modules[name], Standin):
                del sys.modules[name]


def load_file(path: str, extra_standins: Iterable[str] = ()) -> KernelFile:
    """Import the kernel file at `path` (its folder first on sys.path while it imports, as Python runs a script)
    and collect the JitKernels it defines at module level (kernels imported from elsewhere are left out)."""
    from .. import alias_pypto_pro
    from ..language.jit import JitKernel
    full = os.path.abspath(path)
    if not os.path.isfile(full):
        raise LoadError(f"{path}: no such file")
    alias_pypto_pro()
    stem = os.path.splitext(os.path.basename(full))[0]
    name = f"pyto_check_{stem}_{abs(hash(full)) & 0xFFFFFF:06x}"
    spec = importlib.util.spec_from_file_location(name, full)
    if spec is None or spec.loader is None:
        raise LoadError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    folder = os.path.dirname(full)
    sys.path.insert(0, folder)
    sys.modules[name] = module
    try:
        with _standins(tuple(DEVICE_PACKAGES) + tuple(extra_standins)) as finder:
            spec.loader.exec_module(module)
    except SyntaxError as e:
        raise LoadError(f"{path}:{e.lineno}: syntax error: {e.msg}") from None
    except PytoError as e:
        raise LoadError(f"{path}: importing it raised {type(e).__name__}: {e}") from e
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        raise LoadError(f"{path}:{_module_line(e, full)}: importing it raised {type(e).__name__}: {e}") from e
    finally:
        sys.modules.pop(name, None)
        if sys.path and sys.path[0] == folder:
            sys.path.pop(0)
    kernels = [(attr, k) for attr, k in vars(module).items() if isinstance(k, JitKernel) and _defined_in(k, full)]
    kernels.sort(key=lambda item: getattr(item[1].fn, "__code__", None) and item[1].fn.__code__.co_firstlineno or 0)
    return KernelFile(path, module, kernels, finder.used)


def _defined_in(k, full: str) -> bool:
    """Whether jit kernel `k`'s function was written in the file `full` (not imported from elsewhere)."""
    code = getattr(k.fn, "__code__", None)
    return code is not None and os.path.abspath(code.co_filename) == full


def _module_line(e: BaseException, full: str) -> Optional[int]:
    """The line of the kernel file the exception passed through last."""
    line, tb = None, e.__traceback__
    while tb is not None:
        if os.path.abspath(tb.tb_frame.f_code.co_filename) == full:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line
