"""`pyto sweep --plot DIR`: for each 2-D slice of a sweep (two of B, M, N, K varying, the rest fixed), which
branch wins and by how much, beside the seed's home grounds.

Left panel: each cell's colour is the branch whose fastest row simulated fastest, drawn paler the smaller its
margin over the runner-up (the next branch's fastest row: runner-up / winner - 1, full colour from FULL = 50%),
the margin printed in the cell when the grid is small enough to read; a black dot marks a cell where plan()'s
choice (model_branch) is not the winner. Right panel: the seed's choice without T_total (seed_branch), hatched
where several home grounds overlap (seed_homes). A slice is every row whose fixed columns (the other dims, dtype,
chip, broadcast, tilings) are equal and that spans two or more values on each axis; several cases in one cell
(e.g. different branch lists) are pooled. Error rows are left out. matplotlib is an optional extra (pip install 'pyto[plot]'); figures are drawn on the Agg
canvas, never a display.
"""
from __future__ import annotations

import os
import re
from typing import Optional, Sequence

from pyto.errors import InputError, PytoError, UnsupportedError

from .conditions import BRANCHES
from .sweep import COLUMNS

DIMS = ("B", "M", "N", "K")
FIXED = ("dtype", "chip", "broadcast", "tilings")
FULL = 0.5              # a margin at or above this is drawn in full colour
TEXT_CELLS = 400        # cells up to which each prints its margin
INSTALL = "pip install 'pyto[plot]'"
COLOURS = {"to_matmul": "#1f77b4", "special": "#7f7f7f", "merge_batch": "#2ca02c", "iter_batch": "#17becf",
           "asw_basic": "#ff7f0e", "stream_k": "#d62728"}


def parse_slice(items: Sequence[str]) -> dict:
    """{'B': 1, 'dtype': 'bf16'} from ['B=1', 'dtype=bf16'] (or 'B=1,N=64'), typed as sweep.COLUMNS."""
    kinds = dict(COLUMNS)
    out = {}
    for item in (x for text in items for x in text.split(",") if x.strip()):
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or key not in DIMS + FIXED:
            raise InputError(f"--slice {item!r}: give COLUMN=VALUE with COLUMN one of {', '.join(DIMS + FIXED)}")
        try:
            out[key] = kinds[key](value)
        except ValueError:
            raise InputError(f"--slice {item!r}: {key} takes an integer") from None
    return out


def slices(rows: list, fixed: Optional[dict] = None, axes: Optional[Sequence[str]] = None) -> list[dict]:
    """The 2-D slices of `rows` that match `fixed`: [{'x', 'y', 'fixed': {...}, 'cells': {(xv, yv): cell}}], a
    cell {'winner', 'margin' (None: one branch), 'runner_up', 'seed_branch', 'seed_homes', 'model_branch'}."""
    fixed = fixed or {}
    rows = [r for r in rows if not r["error"] and r["simulated_us"] is not None
            and all(r[k] == v for k, v in fixed.items())]
    if not rows:
        raise InputError(f"sweep plot: no rows without an error match the slice {fixed or '(none)'}")
    if axes is None:
        varying = [d for d in DIMS if d not in fixed and len({r[d] for r in rows}) > 1]
        if len(varying) != 2:
            raise InputError(f"sweep plot: {len(varying)} of B, M, N, K vary in the rows ({', '.join(varying) or 'none'})"
                             f"; a plot needs two: fix the others with --slice (e.g. --slice "
                             f"{varying[-1] if varying else 'B'}={rows[0][varying[-1] if varying else 'B']}) or "
                             f"name the axes with --axes X,Y")
        axes = varying
    x, y = axes
    if x == y or x not in DIMS or y not in DIMS:
        raise InputError(f"sweep plot: axes {x},{y}: two different ones of {', '.join(DIMS)}")
    rest = [d for d in DIMS if d not in (x, y)] + list(FIXED)
    groups: dict = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in rest), []).append(r)
    out = []
    for key, rs in groups.items():
        by_cell: dict = {}
        for r in rs:
            by_cell.setdefault((r[x], r[y]), []).append(r)
        if len({xy[0] for xy in by_cell}) < 2 or len({xy[1] for xy in by_cell}) < 2:
            continue        # a line or a point (e.g. a random shape that shares the fixed values): not a slice
        out.append({"x": x, "y": y, "fixed": dict(zip(rest, key)),
                    "cells": {xy: _cell(cell_rows) for xy, cell_rows in by_cell.items()}})
    if not out:
        raise InputError(f"sweep plot: no {x} x {y} slice with two or more values on each axis in the rows matching "
                         f"{fixed or '(no slice)'}")
    return out


def _cell(rows: list) -> dict:
    best: dict = {}
    for r in rows:
        if r["branch"] not in best or r["simulated_us"] < best[r["branch"]]:
            best[r["branch"]] = r["simulated_us"]
    order = sorted(best, key=lambda b: (best[b], BRANCHES.index(b)))
    win = order[0]
    second = order[1] if len(order) > 1 else None
    margin = best[second] / best[win] - 1 if second is not None and best[win] > 0 else None
    return {"winner": win, "runner_up": second, "margin": margin, "seed_branch": rows[0]["seed_branch"],
            "seed_homes": rows[0]["seed_homes"], "model_branch": rows[0]["model_branch"]}


def _matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
    except ImportError as e:
        raise UnsupportedError(f"pyto sweep --plot needs matplotlib, which is not installed: {INSTALL}") from e


def figure(s: dict):
    """The Figure of one slice (slices()): winner and margin, beside the seed's home grounds."""
    _matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import to_rgb
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch, Rectangle
    xs = sorted({xy[0] for xy in s["cells"]})
    ys = sorted({xy[1] for xy in s["cells"]})
    w, h = max(5.0, 0.45 * len(xs) + 2.0), max(3.5, 0.35 * len(ys) + 1.8)
    fig = Figure(figsize=(2 * w + 1.8, h), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2)
    text = len(s["cells"]) <= TEXT_CELLS
    for (xv, yv), c in s["cells"].items():
        i, j = xs.index(xv), ys.index(yv)
        m = c["margin"]
        k = 1.0 if m is None else 0.2 + 0.8 * min(m / FULL, 1.0)
        rgb = tuple(1 - k * (1 - v) for v in to_rgb(COLOURS[c["winner"]]))
        left.add_patch(Rectangle((i, j), 1, 1, facecolor=rgb, edgecolor="white", linewidth=0.5))
        if text and m is not None:
            left.text(i + 0.5, j + 0.5, f"{m:.0%}", ha="center", va="center", fontsize=6)
        if c["model_branch"] != c["winner"]:
            left.plot(i + 0.85, j + 0.85, "o", color="black", markersize=2.5)
        homes = c["seed_homes"].split("+") if c["seed_homes"] else []
        right.add_patch(Rectangle((i, j), 1, 1, facecolor=COLOURS.get(c["seed_branch"], "#ffffff"),
                                  edgecolor="white", linewidth=0.5, hatch="///" if len(homes) > 1 else None))
    fixed = ", ".join(f"{k} {v}" for k, v in s["fixed"].items())
    for ax, title in ((left, "fastest simulated branch (paler: smaller margin over the runner-up; "
                              "dot: plan() chose another)"),
                      (right, "the seed's choice without T_total (seed_branch; hatched: home grounds overlap)")):
        ax.set_xlim(0, len(xs))
        ax.set_ylim(0, len(ys))
        ax.set_xticks([i + 0.5 for i in range(len(xs))], [str(v) for v in xs], rotation=90, fontsize=7)
        ax.set_yticks([j + 0.5 for j in range(len(ys))], [str(v) for v in ys], fontsize=7)
        ax.set_xlabel(s["x"])
        ax.set_ylabel(s["y"])
        ax.set_title(title, fontsize=8)
    shown = {c["winner"] for c in s["cells"].values()} | {c["seed_branch"] for c in s["cells"].values()}
    fig.legend(handles=[Patch(facecolor=COLOURS[b], label=b) for b in BRANCHES if b in shown], loc="outside right",
               fontsize=8)
    fig.suptitle(f"pyto sweep: {s['y']} x {s['x']} at {fixed}", fontsize=10)
    return fig


def file_name(s: dict) -> str:
    """'sweep-M-K-B1-N64-bf16-ascend950pr-none-planner.png' (characters other than letters, digits, '.', '_' and
    '-' replaced)."""
    parts = [s["x"], s["y"]] + [f"{k}{v}" if k in DIMS else str(v) for k, v in s["fixed"].items()]
    return re.sub(r"[^A-Za-z0-9._-]", "_", "sweep-" + "-".join(parts)) + ".png"


def plot(rows: list, out_dir: str, fixed: Optional[dict] = None, axes: Optional[Sequence[str]] = None) -> list[str]:
    """Write one PNG per 2-D slice of `rows` into out_dir; return their paths."""
    _matplotlib()
    found = slices(rows, fixed, axes)
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise PytoError(f"cannot make the plot directory {out_dir!r}: {e.strerror or e}") from e
    paths = []
    for s in found:
        path = os.path.join(out_dir, file_name(s))
        fig = figure(s)
        try:
            fig.savefig(path, format="png")
        except OSError as e:
            raise PytoError(f"cannot write the plot to {path!r}: {e.strerror or e}") from e
        finally:
            fig.clear()
        paths.append(path)
    return paths
