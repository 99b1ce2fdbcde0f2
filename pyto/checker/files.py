"""Check every jit kernel of a kernel file (`pyto check FILE.py`, the pytest plugin)."""
from __future__ import annotations

import os
from typing import Iterable, Optional, Sequence

from .. import progress
from .runner import check
from ..errors import InputError
from .loader import KernelFile, load_file
from .result import FAILED, INTERNAL, NEEDS_INPUT, CheckResult

#: exit codes of `pyto check`: every kernel ok; a kernel failed a check (or pyto failed on it); usage (a file that
#: does not load, a kernel name it lacks, a flag missing or malformed)
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def values_for(kernel, name: str, values: dict) -> dict:
    """The values that apply to one kernel. A key is `param` or `param.field` (a tiling dataclass's field), for
    every kernel that has the parameter (but one whose annotation fixes every dim: it needs none), or either
    prefixed with the kernel's name (`softmax.x`): that kernel only, and it wins (and is checked against it)."""
    from ..language.jit import _Policy
    params = {n for n, _, _ in kernel.params}
    fixed = {n for n, kind, ann in kernel.params        # tensors whose annotation fixes every dim need no --shape
             if kind == "tensor" and not ann.rest and not any(isinstance(d, _Policy) for d in ann.shape)}
    general, own = {}, {}
    for key, v in values.items():
        parts = key.split(".")
        into = general
        if len(parts) > 1 and parts[0] in (name, kernel.name) and parts[1] in params:
            parts, into = parts[1:], own
        if parts[0] not in params or (into is general and parts[0] in fixed):
            continue
        if len(parts) == 1:
            into[parts[0]] = v
        else:
            into.setdefault(parts[0], {})[".".join(parts[1:])] = v
    return {**general, **own}


def applies(kernels: list, key: str) -> bool:
    """Whether a --shape / --scalar key names a parameter of some kernel (else it is a typo: usage)."""
    parts = key.split(".")
    return any(parts[0] in p or (len(parts) > 1 and parts[0] in (n, k.name) and parts[1] in p)
               for n, k in kernels for p in [{q for q, _, _ in k.params}])


def select(kf: KernelFile, names: Sequence[str]) -> list:
    """The (name, kernel) pairs asked for (all when `names` is empty); InputError naming a kernel the file lacks."""
    if not names:
        return list(kf.kernels)
    known = {n: k for n, k in kf.kernels} | {k.name: k for _, k in kf.kernels}
    missing = [n for n in names if n not in known]
    if missing:
        raise InputError(f"{kf.path} has no jit kernel {missing[0]!r} (it has: "
                         f"{', '.join(n for n, _ in kf.kernels) or 'none'})")
    return [(n, known[n]) for n in names]


#: the pyto_check marker's keywords that are options (any other keyword is a value: `x=(64, 64)`)
OPTIONS = ("block_dim", "timing", "seed", "chip", "expect", "values")


def marker_options(mark) -> dict:
    """A pyto_check marker's keywords as options, its values gathered under "values"."""
    kw = dict(mark.kwargs)
    opts = {k: kw.pop(k) for k in OPTIONS if k in kw}
    opts["values"] = {**(opts.get("values") or {}), **kw}
    return opts


def file_options(module) -> dict:
    """The options a kernel file states for itself: its module-level `pytestmark = pytest.mark.pyto_check(...)`
    (read without importing pytest), later markers winning; {} when it has none."""
    marks = getattr(module, "pytestmark", [])
    opts: dict = {}
    for m in marks if isinstance(marks, (list, tuple)) else [marks]:
        m = getattr(m, "mark", m)
        if getattr(m, "name", None) == "pyto_check":
            own = marker_options(m)
            opts = {**opts, **own, "values": {**opts.get("values", {}), **own["values"]}}
    return opts


def merged(file_opts: dict, given: dict) -> dict:
    """The file's options overlaid with those given (a command line's: they win), values merged likewise."""
    out = {**file_opts, **{k: v for k, v in given.items() if v is not None and k != "values"}}
    out["values"] = {**file_opts.get("values", {}), **(given.get("values") or {})}
    return out


def per_kernel(option, attr: str, kernel, default):
    """An option given for every kernel (a value) or per kernel ({kernel name: value}; others take `default`)."""
    if isinstance(option, dict):
        return option.get(attr, option.get(kernel.name, default))
    return default if option is None else option


def check_options(kf: KernelFile, opts: dict) -> None:
    """InputError for a per-kernel option or a value that names no kernel or parameter of the file (a typo)."""
    names = {n for n, _ in kf.kernels} | {k.name for _, k in kf.kernels}
    for key in ("expect", "block_dim"):
        option = opts.get(key)
        if isinstance(option, dict):
            unknown = [k for k in option if k not in names]
            if unknown:
                raise InputError(f"{kf.path}: pyto_check {key}= names {unknown[0]!r}, which is no jit kernel of the "
                                 f"file (it has: {', '.join(n for n, _ in kf.kernels) or 'none'})")
        elif key == "block_dim" and option is not None and (isinstance(option, bool) or not isinstance(option, int)):
            raise InputError(f"{kf.path}: block_dim is an int or {{kernel: int}}, got {option!r}")
    for key in opts.get("values") or {}:
        if not applies(kf.kernels, key):
            raise InputError(f"{kf.path}: a shape or value for {key!r}, but no kernel of the file has that parameter")


def check_kernels(kf: KernelFile, kernels: Sequence[str] = (), *, opts: Optional[dict] = None,
                  trace_dir: Optional[str] = None, show_progress: bool = True) -> list:
    """Check the loaded file's kernels (all, or those named) with `opts` (block_dim, timing, seed, chip,
    values: see merged / per_kernel); a progress bar on a terminal when `show_progress`."""
    opts = opts or {}
    check_options(kf, opts)
    chosen = select(kf, kernels)
    results = []
    with progress.shown(show_progress):
        for i, (name, k) in enumerate(chosen):
            progress.task(f"check {progress.bar(i, len(chosen))} {name}")
            trace = os.path.join(trace_dir, f"{name}.json.gz") if trace_dir else None
            r = check(k, block_dim=per_kernel(opts.get("block_dim"), name, k, 1), seed=opts.get("seed") or 0,
                      timing=bool(opts.get("timing")), chip=opts.get("chip"), trace=trace, file=kf.path,
                      **values_for(k, name, opts.get("values") or {}))
            r.standins = list(kf.standins)
            results.append(r)
    return results


def check_file(path: str, kernels: Sequence[str] = (), *, standins: Iterable[str] = (), trace_dir: Optional[str] = None,
               show_progress: bool = True, **given) -> tuple[KernelFile, list]:
    """Load `path` and check its kernels (all, or those named): the file's own pyto_check marker options, overlaid
    with `given` (block_dim, timing, seed, chip, values). Returns (the loaded file, the CheckResults). Raises
    LoadError / InputError (usage) before any kernel runs."""
    kf = load_file(path, standins)
    opts = merged(file_options(kf.module), given)
    return kf, check_kernels(kf, kernels, opts=opts, trace_dir=trace_dir, show_progress=show_progress)


def exit_code(results: list) -> int:
    """1 when a kernel failed a check (or pyto failed), else 2 when one needed a flag, else 0."""
    kinds = {r.kind for r in results}
    if kinds & {FAILED, INTERNAL}:
        return EXIT_FAILED
    if NEEDS_INPUT in kinds:
        return EXIT_USAGE
    return EXIT_OK


__all__ = ["applies", "check_file", "check_kernels", "exit_code", "file_options", "merged", "per_kernel", "select", "values_for", "CheckResult", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE"]
