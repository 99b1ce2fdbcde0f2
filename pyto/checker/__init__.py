"""pyto check: a sanitizer and profiler for PyPTO-Pro kernel files (docs: README, "pyto check").

    result = pyto.check(kernel, x=(75, 37), n=7)      # one @pl.jit kernel -> CheckResult
    kf, results = pyto.check_file("kernels.py")        # every jit kernel of a file
    $ pyto check kernels.py --shape x=75x37 --json      # the command (cli.py); pytest: plugin.py

Stages, one module each: loader (import the file, stand-ins for device packages), inputs (arguments from the
annotations), sparse (valid index bytes for the inputs a 4:2 sparse MMAD's index is copied from), runner (check
one kernel, gather verdict, time, address maps), result (CheckResult), render (text), files (a file's kernels,
exit codes), cli, plugin (pytest), plot (matplotlib).
"""
from .runner import check
from .files import check_file
from ..errors import InputError
from ..errors import LoadError
from .loader import load_file
from .result import CheckResult

__all__ = ["check", "check_file", "CheckResult", "InputError", "LoadError", "load_file"]
