"""The `pyto` command (also `python -m pyto`).

Built-in commands live here; packages built on pyto (such as `kernels`) add theirs through the
``pyto.commands`` entry-point group: each entry point is a function ``register(subparsers)``. That
keeps the dependency one-way: pyto never imports kernels.
"""
from __future__ import annotations

import argparse
import sys
from importlib.metadata import entry_points
from typing import Callable, Sequence

from .chip import BUFFERS, list_chips, load_chip
from .errors import PytoError


def _kib(n: float) -> str:
    return f"{n / 1024:g}KB" if n < 1 << 20 else f"{n / (1 << 20):g}MB"


def cmd_chips(args: argparse.Namespace) -> int:
    """Print a table of the bundled chips and their buffers."""
    names = list_chips()
    chips = [load_chip(n) for n in names]
    rows = [("chip", *names),
            ("arch", *(c.arch for c in chips)),
            ("AIC / AIV", *(f"{c.aic} / {c.aiv}" for c in chips)),
            ("clock", *(f"{c.clock_ghz:.3f} GHz" for c in chips)),
            ("peak fp16", *(f"{c.peak_flops('fp16') / 1e12:.0f} TFLOP/s" for c in chips))]
    rows += [(b, *(_kib(c.buffers[b]) for c in chips)) for b in BUFFERS]
    rows += [("L2", *(f"{_kib(c.l2_bytes)} @ {c.l2_bandwidth_gbs / 1000:g}TB/s" for c in chips)),
             ("GM bandwidth", *(f"{c.gm_bandwidth_gbs / 1000:g}TB/s" for c in chips)),
             ("L0A/L0B/L0C", *(f"{c.formats['L0A']}/{c.formats['L0B']}/{c.formats['L0C']}" for c in chips)),
             ("L0C->UB path", *("yes" if c.has_path("L0C", "UB") else "no" for c in chips)),
             ("R (FLOP/elem)", *(f"{c.R:g}" for c in chips))]
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip())
    return 0


def _register_builtin(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("chips", help="table of the bundled chips and their buffers")
    p.set_defaults(func=cmd_chips)
    from .tiling import register_cli
    register_cli(sub)


def _plugins() -> list[Callable]:
    try:
        eps = entry_points(group="pyto.commands")
    except TypeError:  # Python < 3.10
        eps = entry_points().get("pyto.commands", [])
    return [ep.load() for ep in sorted(eps, key=lambda e: e.name)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pyto", description="Ascend NPU kernel DSL and emulator")
    sub = parser.add_subparsers(dest="command", required=True)
    _register_builtin(sub)
    for register in _plugins():
        register(sub)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except PytoError as e:
        print(f"pyto: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
