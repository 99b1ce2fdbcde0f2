"""`pyto check FILE.py [KERNEL ...]`: check a PyPTO-Pro kernel file's jit kernels without writing host code.

Exit codes: 0 every kernel ok, 1 a kernel failed a check, 2 usage (the file does not load, a kernel or flag is
wrong, a kernel needs a flag that was not given). `--json` prints one JSON document (schema: README, "pyto check").
"""
from __future__ import annotations

import argparse
import json
import sys

from ..errors import PytoError
from .files import EXIT_USAGE, check_kernels, check_options, exit_code, file_options, merged, select
from ..errors import InputError, LoadError
from .inputs import parse_dims
from .loader import load_file

SCHEMA_VERSION = 1


def _pair(text: str, what: str) -> tuple:
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise InputError(f"--{what} takes NAME=VALUE, got {text!r}")
    return name.strip(), value.strip()


def _number(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    raise InputError(f"--scalar value {text!r} is not a number (nor true/false)")


def parse_values(shapes: list, scalars: list) -> dict:
    """{key: shape or value} from the --shape NAME=DIMS and --scalar NAME=V flags."""
    values = {}
    for text in shapes or ():
        name, dims = _pair(text, "shape")
        shape = parse_dims(dims)
        if shape is None:
            raise InputError(f"--shape {text}: the dims are ints joined by x or commas (75x37), got {dims!r}")
        values[name] = shape
    for text in scalars or ():
        name, v = _pair(text, "scalar")
        values[name] = _number(v)
    return values


def _open_dims(kf, values: dict, default: int) -> dict:
    """--default-dim N: a shape for every tensor whose annotation leaves dims open and that no --shape gave: N for
    an open dim among the last two (the matrix), 2 for a leading (batch) one, so a 4-D tensor stays small."""
    from ..language.jit import _Policy
    out = dict(values)
    for name, k in kf.kernels:
        for p, kind, ann in k.params:
            if kind == "tensor" and p not in out and f"{name}.{p}" not in out and (
                    ann.rest or any(isinstance(d, _Policy) for d in ann.shape)):
                n = len(ann.shape)
                out[f"{name}.{p}"] = tuple((default if i >= n - 2 else 2) if isinstance(d, _Policy) else int(d)
                                           for i, d in enumerate(ann.shape))
    return out


def _open_scalars(kf, values: dict, default: float) -> dict:
    """--default-scalar V: every pl.DT_* scalar parameter no --scalar gave (and that has no default) takes V (as
    an int for an integer dtype)."""
    out = dict(values)
    for name, k in kf.kernels:
        defaults = {p.name for p in k.signature.parameters.values() if p.default is not p.empty}
        for p, kind, ann in k.params:
            if kind == "scalar" and p not in out and f"{name}.{p}" not in out and p not in defaults:
                out[f"{name}.{p}"] = float(default) if ann.is_float else int(default)
    return out


def cmd_check(args: argparse.Namespace) -> int:
    out = sys.stdout
    doc = {"pyto_check": SCHEMA_VERSION, "file": args.file, "kernels": []}
    try:
        kf = load_file(args.file, args.standin or ())
        given = {"block_dim": args.block_dim, "seed": args.seed, "timing": args.timing or None, "chip": args.chip,
                 "values": parse_values(args.shape, args.scalar)}
        opts = merged(file_options(kf.module), given)       # the flags win over the file's own pyto_check marker
        check_options(kf, opts)
        select(kf, args.kernels)
        if args.default_dim is not None:
            opts["values"] = _open_dims(kf, opts["values"], args.default_dim)
        if args.default_scalar is not None:
            opts["values"] = _open_scalars(kf, opts["values"], args.default_scalar)
        results = check_kernels(kf, args.kernels, opts=opts, trace_dir=args.trace, show_progress=not args.json)
    except (LoadError, InputError) as e:
        if args.json:
            doc.update(error=type(e).__name__, message=str(e), exit_code=EXIT_USAGE)
            json.dump(doc, out, indent=1)
            out.write("\n")
        else:
            print(f"pyto check: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.plot:
        from .plot import plot_results
        try:
            plot_results(results, args.plot)
        except PytoError as e:
            print(f"pyto check: {e}", file=sys.stderr)
            return EXIT_USAGE
    code = exit_code(results)
    if args.json:
        doc.update(standins=kf.standins, exit_code=code, kernels=[r.to_dict() for r in results])
        json.dump(doc, out, indent=1)
        out.write("\n")
        return code
    if not results:
        print(f"{args.file}: no @pl.jit kernel at module level")
    for r in results:
        print(r.summary())
        print()
    failed = [r for r in results if not r.ok]
    print(f"{len(results) - len(failed)} of {len(results)} kernel(s) ok" +
          (": " + ", ".join(f"{r.kernel} {r.verdict}" for r in failed) if failed else ""))
    return code


def register(sub: "argparse._SubParsersAction") -> None:
    p = sub.add_parser("check", help="check a PyPTO-Pro kernel file's @pl.jit kernels on the emulator "
                                     "(deadlocks, races, capacity, clobbered tiles, ...), with time and address maps",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", help="the kernel file (imported with pypto_pro aliased to pyto)")
    p.add_argument("kernels", nargs="*", metavar="KERNEL", help="kernels to check (default: every one)")
    p.add_argument("--block-dim", type=int, metavar="N",
                   help="block_dim of each launch (default: the file's pyto_check marker's, else 1)")
    p.add_argument("--shape", action="append", metavar="NAME=DIMS",
                   help="a tensor's shape, e.g. x=75x37 (KERNEL.NAME=... for one kernel); a pl.Ptr's element count")
    p.add_argument("--scalar", action="append", metavar="NAME=V",
                   help="a scalar parameter's value (NAME.FIELD=V for a tiling dataclass's field)")
    p.add_argument("--default-dim", type=int, metavar="N",
                   help="give every open dim (pl.DYNAMIC, pl.STATIC) no --shape gave the size N, a leading (batch) "
                        "one 2 (for surveys)")
    p.add_argument("--default-scalar", type=float, metavar="V",
                   help="give every scalar parameter no --scalar gave the value V (an int for integer dtypes)")
    p.add_argument("--seed", type=int, help="seed of the random inputs (default 0)")
    p.add_argument("--timing", action="store_true", help="timing mode: shapes only, no data (large shapes)")
    p.add_argument("--trace", metavar="DIR", help="write a Perfetto trace per kernel (DIR/KERNEL.json.gz)")
    p.add_argument("--plot", metavar="DIR", help="write a timeline and the address maps per kernel as PNG "
                                                 "(needs matplotlib: pip install 'pyto[plot]')")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    p.add_argument("--chip", help="chip table (default: each kernel's arch; `pyto chips` lists them)")
    p.add_argument("--standin", action="append", metavar="MODULE",
                   help="another package to stand in for if it is not installed (torch, torch_npu, pypto are)")
    p.set_defaults(func=cmd_check, trailing_positionals="kernels")
