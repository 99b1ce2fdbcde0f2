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


def check_file(path: str, kernels: Sequence[str] = (), *, block_dim: int = 1, values: Optional[dict] = None,
               seed: int = 0, timing: bool = False, chip: Optional[str] = None, trace_dir: Optional[str] = None,
               standins: Iterable[str] = (), show_progress: bool = True) -> tuple[KernelFile, list]:
    """Load `path` and check its kernels (all, or those named), each with the values that apply to it
    (values_for); a progress bar on a terminal when `show_progress`. Returns (the loaded file, the CheckResults).
    Raises LoadError / InputError (usage) before any kernel runs."""
    kf = load_file(path, standins)
    chosen = select(kf, kernels)
    results = []
    with progress.shown(show_progress):
        for i, (name, k) in enumerate(chosen):
            progress.task(f"check {progress.bar(i, len(chosen))} {name}")
            trace = os.path.join(trace_dir, f"{name}.json.gz") if trace_dir else None
            r = check(k, block_dim=block_dim, seed=seed, timing=timing, chip=chip, trace=trace, file=kf.path,
                      **values_for(k, name, values or {}))
            r.standins = list(kf.standins)
            results.append(r)
    return kf, results


def exit_code(results: list) -> int:
    """1 when a kernel failed a check (or pyto failed), else 2 when one needed a flag, else 0."""
    kinds = {r.kind for r in results}
    if kinds & {FAILED, INTERNAL}:
        return EXIT_FAILED
    if NEEDS_INPUT in kinds:
        return EXIT_USAGE
    return EXIT_OK


__all__ = ["applies", "check_file", "exit_code", "select", "values_for", "CheckResult", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE"]
