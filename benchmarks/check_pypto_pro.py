"""Survey: `pyto check` on every kernel file of PyPTO-Pro's device tests, as a user would run it.

PyPTO-Pro's frontend device tests (hicann/pypto, python/tests/st/pypto_pro/frontend/) are pytest files that
define @pl.jit kernels and launch them on an NPU. This script runs `pyto check FILE --json` on each of them (the
CLI, one subprocess per file, a timeout per file), then prints how many files load, how many kernels run clean,
and the failures grouped by verdict and a normalised reason, with an example file per group.

Get a checkout (the files are not part of pyto; nothing of them is copied here):

    git clone --depth 1 https://github.com/hicann/pypto.git
    mkdir -p /tmp/pypto_st && git -C pypto archive HEAD python/tests/st/pypto_pro | tar -x -C /tmp/pypto_st

Run: python benchmarks/check_pypto_pro.py /tmp/pypto_st [--json results.json] [--only fa/]
     python benchmarks/check_pypto_pro.py --from-json results.json      (the table of a saved run)

Inputs: every open dim (pl.DYNAMIC / pl.STATIC) is --default-dim, 256 by default: a multiple of the 64, 128 and
256 tiles the tests use. Blocks: the tests launch on 1 block (kernel(...) or kernel[None, 1]), on 32, or on a
count computed from the shape, and the multi-block kernels share the work out by pl.get_block_idx() /
pl.get_block_num(); so a kernel the file launches only on one block is checked on 1 (more blocks would all
write the one output), any other on --block-dim, 2 by default (the cross-block paths at a fraction of 32's
cost). Kernels the file launches only under `with pytest.raises` are negative tests: a failure there is expected.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Optional

FRONTEND = os.path.join("python", "tests", "st", "pypto_pro", "frontend")


@dataclass
class FileResult:
    """One kernel file's survey result: what its source declares and what `pyto check` said."""

    path: str                                   # relative to the frontend folder
    module_kernels: list = field(default_factory=list)   # names of module-level @jit functions (from the source)
    nested_kernels: int = 0                     # @jit functions defined inside a function (not checked)
    expect_error: list = field(default_factory=list)  # kernels the file launches only under pytest.raises
    status: str = ""                            # loaded / load-error / usage / timeout / crash / no-kernels
    error: str = ""                             # LoadError/InputError text, or the crash's stderr tail
    exit_code: Optional[int] = None
    seconds: float = 0.0
    kernels: list = field(default_factory=list)  # [{kernel, verdict, kind, message, block_dim, seconds}]


def find_frontend(path: str) -> str:
    """The frontend folder in a checkout: `path` itself, or python/tests/st/pypto_pro/frontend under it."""
    for cand in (os.path.join(path, FRONTEND), path):
        if os.path.isdir(cand) and any(f.endswith(".py") for _, _, fs in os.walk(cand) for f in fs):
            return cand
    sys.exit(f"{path}: no {FRONTEND} (nor .py files) in it")


def _is_jit(dec: ast.expr) -> bool:
    """`@pl.jit`, `@pl.jit(...)`, `@jit`."""
    target = dec.func if isinstance(dec, ast.Call) else dec
    return (isinstance(target, ast.Attribute) and target.attr == "jit") or \
        (isinstance(target, ast.Name) and target.id == "jit")


@dataclass
class Source:
    """What a kernel file's source says about its kernels (read with ast, never imported)."""

    kernels: list            # module-level @jit function names, in order
    nested: int              # @jit functions defined inside a function or class (pyto check does not see them)
    single_block: set        # kernels the file launches on one block only
    expect_error: set        # kernels the file launches only inside `with pytest.raises(...)` (negative tests)


def _is_kernel(fn: ast.FunctionDef) -> bool:
    """A @jit function PyPTO-Pro compiles: a parameter annotated pl.Tensor, pl.Ptr or a DT_* dtype (its jit wraps
    any other function as a plain pass-through, runtime/jit.py _is_tile_kernel)."""
    for a in fn.args.args:
        text = ast.unparse(a.annotation) if a.annotation is not None else ""
        if "Tensor" in text or "Ptr" in text or "DT_" in text:
            return True
    return False


def _launched(node: ast.Call) -> tuple[Optional[str], Optional[object]]:
    """(the launched name, its block dim: an int, or None when computed) of `k(...)` / `k[None, n(, key)](...)`;
    (None, None) for any other call."""
    f = node.func
    if isinstance(f, ast.Name):
        return f.id, 1
    if isinstance(f, ast.Subscript) and isinstance(f.value, ast.Name):
        key = f.slice.elts if isinstance(f.slice, ast.Tuple) else [None, f.slice]
        dim = key[1] if len(key) > 1 else None
        return f.value.id, dim.value if isinstance(dim, ast.Constant) else None
    return None, None


def _raises_bodies(tree: ast.AST) -> list:
    """The statements inside each `with pytest.raises(...)` block."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.With) and any(
                isinstance(item.context_expr, ast.Call) and isinstance(item.context_expr.func, ast.Attribute)
                and item.context_expr.func.attr == "raises" for item in node.items):
            out.append(node)
    return out


def scan_source(full: str) -> Source:
    """Read a kernel file's source. A kernel launched by its name is single-block when every launch is `k(...)`
    or `k[None, 1(, key)](...)`; one launched only through another name (a dict of kernels, a parameter) is when
    no bracket launch in the file has a block dim other than a literal 1. A kernel is a negative test when every
    launch of it is inside `with pytest.raises`, directly or through a helper that launches its parameter there."""
    try:
        tree = ast.parse(open(full, encoding="utf-8").read())
    except SyntaxError:
        return Source([], 0, set(), set())
    top = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
           and any(_is_jit(d) for d in n.decorator_list) and _is_kernel(n)]
    every = sum(1 for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                and any(_is_jit(d) for d in n.decorator_list) and _is_kernel(n))
    inside = {id(n) for w in _raises_bodies(tree) for n in ast.walk(w)}
    helpers = {}                             # function name -> index of the parameter it launches under raises
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef):
            params = [a.arg for a in fn.args.args]
            for n in ast.walk(fn):
                name = _launched(n)[0] if isinstance(n, ast.Call) and id(n) in inside else None
                if name in params:
                    helpers[fn.name] = params.index(name)
    dims: dict = defaultdict(set)            # kernel name (None: another name) -> block dims of its launches
    in_raises: dict = defaultdict(list)      # kernel name -> for each launch, whether it is under pytest.raises
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name, dim = _launched(node)
        if name in helpers and len(node.args) > helpers[name]:
            arg = node.args[helpers[name]]
            if isinstance(arg, ast.Name) and arg.id in top:
                in_raises[arg.id].append(True)
            continue
        if name is None or (isinstance(node.func, ast.Name) and name not in top):
            continue
        key = name if name in top else None
        dims[key].add(dim)
        if key:
            in_raises[key].append(id(node) in inside)
    others_single = dims.get(None, {1}) <= {1}
    single = {k for k in top if dims[k] == {1} or (not dims[k] and others_single)}
    negative = {k for k in top if in_raises[k] and all(in_raises[k])}
    return Source(top, every - len(top), single, negative)


def run_check(pyto: list, full: str, kernels: list, block_dim: int,
              args: argparse.Namespace) -> tuple[str, dict, float]:
    """Run `pyto check` on one file (or some of its kernels): (status, JSON document or {}, seconds)."""
    cmd = pyto + ["check", full, *kernels, "--json", "--default-dim", str(args.default_dim),
                  "--block-dim", str(block_dim)]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout,
                           cwd=os.path.dirname(full))
    except subprocess.TimeoutExpired:
        return "timeout", {}, time.perf_counter() - t0
    seconds = time.perf_counter() - t0
    try:
        doc = json.loads(p.stdout)
    except json.JSONDecodeError:
        return "crash", {"exit_code": p.returncode, "message": (p.stderr or p.stdout)[-3000:]}, seconds
    return "ok", doc, seconds


def _kernel_rows(doc: dict, block_dim: int) -> list:
    """The per-kernel rows kept from a `pyto check --json` document."""
    return [{"kernel": k["kernel"], "verdict": k["verdict"], "kind": k["kind"], "message": k.get("message") or "",
             "block_dim": block_dim, "seconds": round(k.get("seconds") or 0.0, 2)} for k in doc.get("kernels", [])]


def _row(name: str, verdict: str, kind: str, message: str, block_dim: int, seconds: float) -> dict:
    return {"kernel": name, "verdict": verdict, "kind": kind, "message": message, "block_dim": block_dim,
            "seconds": round(seconds, 2)}


def survey_file(pyto: list, frontend: str, rel: str, args: argparse.Namespace) -> FileResult:
    """Check one file. Kernels that the file launches only on one block are checked with --block-dim 1 (more
    blocks would race on the one output they all write), the others with args.block_dim; one `pyto check` per
    block dim (the whole file when all agree). A run that times out is redone kernel by kernel."""
    full = os.path.join(frontend, rel)
    src = scan_source(full)
    top, single = src.kernels, src.single_block
    res = FileResult(rel, top, src.nested, sorted(src.expect_error))
    by_dim = defaultdict(list)
    for name in top:
        by_dim[1 if name in single else args.block_dim].append(name)
    runs = [(dim, names if len(by_dim) > 1 else []) for dim, names in sorted(by_dim.items())] or \
        [(args.block_dim, [])]
    for dim, names in runs:
        status, doc, s = run_check(pyto, full, names, dim, args)
        res.seconds += s
        if status == "crash":
            res.status, res.error, res.exit_code = "crash", doc["message"], doc["exit_code"]
            return res
        if status == "ok" and "error" in doc and not res.kernels:
            res.exit_code = doc.get("exit_code")
            res.status = "load-error" if doc["error"] == "LoadError" else "usage"
            res.error = f"{doc['error']}: {doc['message']}"
            return res
        if status == "ok":
            res.exit_code = max(res.exit_code or 0, doc.get("exit_code") or 0)
            res.kernels += _kernel_rows(doc, dim)
            continue
        for name in names or top:              # timed out: one kernel at a time
            st, d, s = (status, doc, s) if len(names or top) == 1 else run_check(pyto, full, [name], dim, args)
            if len(names or top) > 1:
                res.seconds += s
            if st == "timeout":
                res.kernels.append(_row(name, "Timeout", "timeout", f"over {args.timeout:.0f} s", dim, s))
            elif st == "crash":
                res.kernels.append(_row(name, "Crash", "crash", d["message"], dim, s))
            elif "error" in d:
                res.kernels.append(_row(name, d["error"], "usage", d["message"], dim, s))
            else:
                res.kernels += _kernel_rows(d, dim)
    res.status = "loaded" if res.kernels else "no-kernels"
    return res


# ---- normalising a failure's reason so that like failures group together

def _first_line(text: str) -> str:
    """A message's first line (its summary)."""
    return text.strip().splitlines()[0] if text.strip() else ""


def load_reason(error: str) -> str:
    """'LoadError: ModuleNotFoundError No module named X' etc. from a LoadError's text (no paths, no lines)."""
    m = re.search(r"importing it raised (\w+): (.*)", error, re.S)
    if not m:
        return _generalise(_first_line(error))
    kind, msg = m.group(1), _first_line(m.group(2))
    return f"LoadError: {kind} {_generalise(msg)}"


def _generalise(text: str) -> str:
    """A message with its file lines, source text, names and numbers taken out, so like failures compare equal."""
    text = re.sub(r"/\S+/", "", text)                      # folders of paths
    text = re.sub(r"^[\w.-]+\.py:\d+ .*?: (?=pl\.|kernel |parameter |argument |[a-z_]+ |<)", "", text)  # source line
    text = re.sub(r"(kernel|parameter|argument|tile|tensor|function) '[^']+'", r"\1 X", text)
    text = re.sub(r"name '\w+' is not defined", "name X is not defined", text)
    text = re.sub(r"is a (?!pl\.)[A-Z]\w*", "is a <tiling dataclass>", text)
    text = re.sub(r"\.py:\d+", ".py", text)                  # line numbers
    text = re.sub(r"(?<![\w.])0x[0-9a-fA-F]+|(?<![\w.])\d+(?![\w])", "N", text)
    text = re.sub(r"\[[N:, ]+\]", "[..]", text)              # index ranges
    return text[:140]


def kernel_reason(row: dict) -> str:
    """A failing kernel's group key: its verdict and the first line of its message, generalised."""
    msg = _first_line(row["message"]).replace("pyto failed (please report): ", "")
    if row["kind"] == "needs-input":              # 'parameter X is a pl.Ptr[...]: give ...': the first clause
        msg = msg.split(": give")[0]
    return f"{row['verdict']}: {_generalise(msg)}"


# ---- the report

def print_table(results: list, args: argparse.Namespace) -> None:
    """The summary table, then the failures grouped by (what failed, normalised reason), largest first."""
    rows = [k for r in results for k in r.kernels]
    ok = [k for k in rows if k["kind"] == "ok"]
    negative = [k for r in results for k in r.kernels if k["kernel"] in r.expect_error]
    print(f"pyto check over PyPTO-Pro's frontend device tests: --default-dim {args.default_dim}; --block-dim 1 "
          f"for kernels the file launches only on one block, else {args.block_dim}; timeout {args.timeout:.0f} s "
          f"per run\n")
    table = [
        ("files found (.py)", len(results)),
        ("files with module-level jit kernels (source)", sum(bool(r.module_kernels) for r in results)),
        ("files with jit kernels only inside functions (source)",
         sum(not r.module_kernels and r.nested_kernels > 0 for r in results)),
        ("files that load", sum(r.status in ("loaded", "no-kernels") for r in results)),
        ("files that do not load (LoadError / usage / crash)",
         sum(r.status in ("load-error", "usage", "crash") for r in results)),
        ("files timed out whole", sum(r.status == "timeout" for r in results)),
        ("files with a kernel checked", sum(bool(r.kernels) for r in results)),
        ("module-level jit kernels (source)", sum(len(r.module_kernels) for r in results)),
        ("jit kernels nested in functions (source; not checked)", sum(r.nested_kernels for r in results)),
        ("kernels checked (pyto check's module-level kernels)", len(rows)),
        ("kernels ok", len(ok)),
        ("kernels not ok", len(rows) - len(ok)),
        ("  of them negative tests (the file expects an error)", sum(k["kind"] != "ok" for k in negative)),
        ("negative tests pyto passed (the file expects an error)", sum(k["kind"] == "ok" for k in negative)),
    ]
    width = max(len(t) for t, _ in table)
    for title, n in table:
        print(f"  {title:<{width}}  {n:>5}")
    kinds = Counter(k["kind"] for k in rows)
    print("\n  kernels by kind: " + ", ".join(f"{k} {n}" for k, n in kinds.most_common()))

    groups: dict = defaultdict(list)
    for r in results:
        if r.status in ("load-error", "usage"):
            groups[("file", load_reason(r.error))].append(r.path)
        elif r.status == "crash":
            groups[("file", "Crash: " + _generalise(r.error.strip().splitlines()[-1] if r.error.strip() else ""))
                   ].append(r.path)
        for k in r.kernels:
            negative = k["kernel"] in r.expect_error
            if k["kind"] != "ok" or negative:
                what = ("expects-error " if negative else "") + k["kind"]
                reason = kernel_reason(k) if k["kind"] != "ok" else "ok: pyto passed a kernel the test expects to fail"
                groups[(what, reason)].append(f"{r.path}::{k['kernel']}")
    print(f"\nfailures: {len(groups)} groups (count, what failed, the normalised reason, examples)")
    for (what, reason), where in sorted(groups.items(), key=lambda g: (-len(g[1]), g[0])):
        print(f"  {len(where):4}  {what:<20} {reason}")
        print(f"        e.g. {', '.join(where[:3])}")


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkout", nargs="?", help="a checkout holding python/tests/st/pypto_pro/frontend "
                                               "(or that folder itself)")
    ap.add_argument("--default-dim", type=int, default=256,
                    help="size of every open dim (default 256: a multiple of the tests' 64/128/256 tiles)")
    ap.add_argument("--block-dim", type=int, default=2,
                    help="blocks per launch of a kernel the file launches on more than one block, or on a "
                         "computed number (default 2); a kernel launched only as k(...) or k[None, 1] gets 1")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds per `pyto check` run (default 120); a file that times out is redone kernel by kernel")
    ap.add_argument("--jobs", type=int, default=2, help="files checked at once (default 2)")
    ap.add_argument("--only", action="append", help="check only files whose path contains this (repeatable)")
    ap.add_argument("--json", metavar="OUT", help="write the per-file results as JSON to OUT")
    ap.add_argument("--from-json", metavar="IN", help="print the table of a saved --json run instead of running")
    ap.add_argument("--pyto", default=None,
                    help="the pyto command, split like a shell line (default: pyto beside this Python, or on PATH)")
    args = ap.parse_args(argv)
    if args.from_json:
        with open(args.from_json) as f:
            saved = json.load(f)
        for key in ("default_dim", "block_dim", "timeout"):
            setattr(args, key, saved[key])
        print_table([FileResult(**r) for r in saved["files"]], args)
        return 0
    if not args.checkout:
        print(__doc__)
        print("No checkout given: pass the folder of one (see above for how to get one).")
        return 2
    frontend = find_frontend(args.checkout)
    beside = os.path.join(os.path.dirname(sys.executable), "pyto")
    default = beside if os.path.exists(beside) else shutil.which("pyto") or "pyto"
    pyto = shlex.split(args.pyto) if args.pyto else [default]
    rels = sorted(os.path.relpath(os.path.join(d, f), frontend)
                  for d, _, fs in os.walk(frontend) for f in fs if f.endswith(".py"))
    if args.only:
        rels = [r for r in rels if any(o in r for o in args.only)]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(survey_file, pyto, frontend, rel, args) for rel in rels]
        results = []
        for i, f in enumerate(futures):
            results.append(f.result())
            r = results[-1]
            ok = sum(k["kind"] == "ok" for k in r.kernels)
            print(f"[{i + 1}/{len(rels)}] {r.path}: {r.status}, {ok}/{len(r.kernels)} ok ({r.seconds:.0f} s)",
                  file=sys.stderr)
    print_table(results, args)
    print(f"\n{time.perf_counter() - t0:.0f} s in all")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"checkout": os.path.abspath(args.checkout), "default_dim": args.default_dim,
                       "block_dim": args.block_dim, "timeout": args.timeout,
                       "files": [asdict(r) for r in results]}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
