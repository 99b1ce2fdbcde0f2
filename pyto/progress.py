"""A run's progress on a terminal: one line on stderr, redrawn in place, that names the phase (tracing,
auto-sync, scheduling, checking, data), the blocks done of the total and the seconds spent.

    with progress.shown():          # nothing at all unless the stream is a terminal
        ... pyto.run(...) ...       # emulator/run.py reports its phases: progress.phase("tracing", b, n)

`phase()` only sets three attributes (the run calls it once a phase or a block, never per instruction); a
daemon thread redraws the line at most `INTERVAL` times a second when the text changed (whole seconds: about
once a second within a phase), and not before `DELAY` seconds, so short runs print nothing. When the stream
is not a terminal (pipes, files, tests) no thread starts and nothing is written. The line is erased when the
`with` block ends, whatever ends it. Runs in other threads do not report to this thread's line.

On a first large run numba compiles the emulator's loops (about 15 s, cached on disk after; a small run's
loops run as plain Python instead, pyto/emulator/jitmode.py): a phase compiling them says so.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import sys
import threading
import time
from typing import Optional

INTERVAL = 0.1       # seconds between redraws, at most
DELAY = 0.5          # seconds before the first one: a short run shows nothing

# the emulator modules whose numba functions compile in each phase (the first call compiles or loads them)
PHASE_JIT = {"auto-sync": ("autosync_jit", "l2_replay"), "scheduling": ("simulate", "l2_replay"),
             "checking": ("checkcore", "lower"), "data": ("widen",)}
COMPILING = "first large run: numba compiles, ~15 s once"


class Progress:
    """The line for one `shown()` block: the phase set by the run, drawn by a daemon thread."""

    def __init__(self, stream, interval: Optional[float] = None, delay: Optional[float] = None):
        self.stream = stream
        self.interval = INTERVAL if interval is None else interval
        self.delay = DELAY if delay is None else delay
        self.t0 = time.monotonic()
        self.name: str = "starting"
        self.done: Optional[int] = None
        self.total: Optional[int] = None
        self.task = ""                 # what the runs belong to (pyto check: a bar of the kernels done)
        self._cold = _cold_jits()      # phase -> numba dispatchers that will compile (not cached on disk)
        self._width = 0                # characters on the line now
        self._columns = max(20, shutil.get_terminal_size((80, 24)).columns - 1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="pyto-progress", daemon=True)
        self._thread.start()

    def phase(self, name: str, done: Optional[int] = None, total: Optional[int] = None) -> None:
        self.name, self.done, self.total = name, done, total

    def line(self) -> str:
        """The text drawn now, e.g. 'pyto: tracing 12/32 blocks, 14 s'."""
        name, done, total = self.name, self.done, self.total
        text = f"pyto: {self.task + ': ' if self.task else ''}{name}"
        if total is not None:
            text += f" {done or 0:,}/{total:,} blocks"
        text += f", {time.monotonic() - self.t0:.0f} s"
        if self._cold.get(name) and _compiling(self._cold[name]):
            text += f" ({COMPILING})"
        return text[:self._columns]

    def _loop(self) -> None:
        if self._stop.wait(self.delay):
            return
        last = None
        while True:
            text = self.line()
            if text != last:
                self._draw(text)
                last = text
            if self._stop.wait(self.interval):
                return

    def _draw(self, text: str) -> None:
        # padding, not ANSI escapes, clears the rest of the last line (a dumb terminal shows it right too)
        try:
            self.stream.write("\r" + text + " " * max(0, self._width - len(text)))
            self.stream.flush()
        except (OSError, ValueError):      # the terminal went away: stop drawing
            self._stop.set()
        self._width = len(text)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        if self._width:
            self._draw("")
            with contextlib.suppress(OSError, ValueError):
                self.stream.write("\r")
                self.stream.flush()


class _Current(threading.local):
    progress: Optional[Progress] = None


_CURRENT = _Current()


def phase(name: str, done: Optional[int] = None, total: Optional[int] = None) -> None:
    """Report the run's phase (and blocks done of total) to this thread's line, if one is shown."""
    p = _CURRENT.progress
    if p is not None:
        p.phase(name, done, total)


def task(text: str) -> None:
    """Set what this thread's runs belong to (drawn before the phase), if a line is shown."""
    p = _CURRENT.progress
    if p is not None:
        p.task = text


def bar(done: int, total: int, width: int = 20) -> str:
    """'[#####...............] 3/12': `done` of `total` as a bar."""
    full = width * done // max(total, 1)
    return f"[{'#' * full}{'.' * (width - full)}] {done}/{total}"


def active() -> bool:
    """Whether this thread shows a progress line now."""
    return _CURRENT.progress is not None


@contextlib.contextmanager
def shown(enabled: bool = True, stream=None):
    """Show the progress of the runs in this `with` block (this thread's) on `stream` (default sys.stderr), if
    `enabled` and the stream is a terminal; inside another shown() block it adds nothing."""
    stream = sys.stderr if stream is None else stream
    if not enabled or _CURRENT.progress is not None or not _isatty(stream):
        yield
        return
    p = _CURRENT.progress = Progress(stream)
    try:
        yield
    finally:
        _CURRENT.progress = None
        p.close()


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False


def _compiling(ds: list) -> bool:
    """Whether one of these cold dispatchers is compiling (jitmode picked it to: a small run's stay Python)."""
    from .emulator import jitmode
    return any(jitmode.compiling(d) for d in ds)


def _cold_jits() -> dict:
    """Per phase (PHASE_JIT), the numba functions of its modules that neither ran in this process nor have an
    up-to-date cache on disk: their first call compiles. Empty when numba is off or its cache cannot be read."""
    if os.environ.get("PYTO_NUMBA", "1") == "0":
        return {}
    try:
        from numba.core.dispatcher import Dispatcher
    except ImportError:
        return {}
    from .emulator import jitmode
    cold: dict = {}
    for mod in {m for mods in PHASE_JIT.values() for m in mods}:
        module = sys.modules.get(f"pyto.emulator.{mod}")
        if module is None:
            continue
        for d in vars(module).values():
            if (isinstance(d, Dispatcher) and d.__module__ == module.__name__ and not d.overloads
                    and d.targetoptions.get("inline") != "always" and jitmode.cold(d)):
                cold.setdefault(mod, []).append(d)
    return {name: [d for m in mods for d in cold.get(m, ())] for name, mods in PHASE_JIT.items()}


__all__ = ["phase", "shown", "active", "Progress", "INTERVAL", "DELAY"]
