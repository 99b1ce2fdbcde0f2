"""The `pyto` command (also `python -m pyto`).

Built-in commands live here; packages built on pyto (such as `kernels`) add theirs through the
``pyto.commands`` entry-point group: each entry point is a function ``register(subparsers)``. That
keeps the dependency one-way: pyto never imports kernels.
"""
from __future__ import annotations

import argparse
import os
import sys
from importlib.metadata import entry_points
from typing import Callable, Sequence

from .chip import BUFFERS, Chip, list_chips, load_chip
from .dtypes import DType
from .errors import PytoError, TilingError
from .tiling import DEFAULT_CHIP, IN_FORMATS, OUT_FORMATS, CubeTileShapes


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
             ("GM->L1 Dn2Nz", *("yes" if c.dn2nz else "no" for c in chips)),
             ("R (FLOP/elem)", *(f"{c.R:g}" for c in chips))]
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip())
    return 0


def _usage_table(ts: CubeTileShapes, dtype: DType, chip: Chip) -> list[str]:
    rows = [("buffer", "used", "capacity", "use", "")]
    for buf, (used, cap) in ts.usage(dtype, chip).items():
        rows.append((buf, f"{used} B", f"{cap} B", f"{100 * used / cap:.1f}%", "OVER" if used > cap else "ok"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(x.rjust(w) if 0 < i < 4 else x.ljust(w) for i, (x, w) in enumerate(zip(r, widths))).rstrip()
            for r in rows]


def cmd_tiles(args: argparse.Namespace) -> int:
    """Check tile shapes against docs/tile_shapes.md §6 for a dtype and chip; print the verdict and buffer usage."""
    chip = load_chip(args.chip)
    flags = [name for name, on in (("split-K", args.split_k), ("bias", args.bias), ("scale", args.scale),
                                   ("transpose-a", args.transpose_a), ("transpose-b", args.transpose_b)) if on]
    formats = [f"{side}={fmt}" for side, fmt in (("a", args.a_format), ("b", args.b_format), ("out", args.out_format))
               if fmt != "ND"]
    extra = flags + formats + ([f"out-dtype={args.out_dtype}"] if args.out_dtype else []) \
        + ([f"ndim={args.ndim}"] if args.ndim != 2 else [])
    print(" ".join([f"tiles m={args.m} k={args.k} n={args.n} dtype={args.dtype} chip={chip.name}", *extra]))
    try:
        ts = CubeTileShapes.from_pairs(args.m, args.k, args.n, args.split_k, dtype=args.dtype, chip=chip,
                                       bias=args.bias, transpose_a=args.transpose_a, transpose_b=args.transpose_b,
                                       a_format=args.a_format, b_format=args.b_format, out_format=args.out_format,
                                       scale=args.scale, out_dtype=args.out_dtype, ndim=args.ndim)
        errs = ts.violations()
    except TilingError as e:
        print(f"verdict: BROKEN {e.rule}")
        print(f"  {e}")
        return 1
    if errs:
        print(f"verdict: BROKEN {', '.join(e.rule for e in errs)}")
        for e in errs:
            print(f"  {e}")
    else:
        print("verdict: OK")
    assert ts.dtype is not None
    for line in _usage_table(ts, ts.dtype, chip):
        print(line)
    return 1 if errs else 0


def _register_tiles(sub: "argparse._SubParsersAction") -> None:
    """``pyto tiles --m L0 L1 --k L0 L1 --n L0 L1 --dtype fp16 [--chip NAME] [...]``."""
    p = sub.add_parser("tiles", help="check cube tile shapes against the docs/tile_shapes.md §6 rules",
                       description="Check [L0, L1] tile shapes of m, k, n against every docs/tile_shapes.md §6 rule; "
                                   "exit 0 when they hold, 1 when a rule is broken.")
    for ax in "mkn":
        p.add_argument(f"--{ax}", nargs=2, type=int, required=True, metavar=(f"{ax}L0", f"{ax}L1"),
                       help=f"the {ax} side of the L0 tile and of the L1 tile")
    p.add_argument("--dtype", default="fp16", help="input dtype: fp16, bf16, fp32, int8 (default fp16)")
    p.add_argument("--chip", default=DEFAULT_CHIP, help=f"chip name or .toml path (default {DEFAULT_CHIP})")
    p.add_argument("--bias", action="store_true", help="the matmul has a bias (BT rule)")
    p.add_argument("--scale", action="store_true", help="the fixpipe uses a scale tensor (FB rule)")
    p.add_argument("--transpose-a", action="store_true", help="A is (K, M)")
    p.add_argument("--transpose-b", action="store_true", help="B is (N, K)")
    p.add_argument("--split-k", action="store_true", help="enable multi-core split-K")
    p.add_argument("--a-format", default="ND", type=str.upper, choices=IN_FORMATS)
    p.add_argument("--b-format", default="ND", type=str.upper, choices=IN_FORMATS)
    p.add_argument("--out-format", default="ND", type=str.upper, choices=OUT_FORMATS)
    p.add_argument("--out-dtype", default=None, help="output dtype (default: the input's; int32 for int8; "
                                                      "fp32 with --split-k)")
    p.add_argument("--ndim", type=int, default=2, help="dimensions of the matmul inputs (default 2)")
    p.set_defaults(func=cmd_tiles)


def _register_builtin(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("chips", help="table of the bundled chips and their buffers",
                       description="The bundled chip tables (chips/*.toml): cores, clock, buffer sizes, bandwidths.")
    p.set_defaults(func=cmd_chips)
    _register_tiles(sub)
    from .checker.cli import register as register_check
    register_check(sub)


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
    args, extra = parser.parse_known_args(argv)
    if extra:           # `pyto check FILE --flag V KERNEL`: a command may take trailing positionals after its flags
        if getattr(args, "trailing_positionals", None) and not any(e.startswith("-") for e in extra):
            getattr(args, args.trailing_positionals).extend(extra)
        else:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return int(args.func(args) or 0)
    except PytoError as e:
        print(f"pyto: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:          # `pyto plan ... | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
