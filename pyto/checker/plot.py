"""`pyto check --plot DIR`: one figure per kernel, the pipes' timeline (when the run finished) over each buffer's
address map. matplotlib is an optional extra (pip install 'pyto[plot]'); figures are drawn on the Agg canvas,
never a display, so the command works on a headless machine and leaves pyplot's state alone."""
from __future__ import annotations

import math
import os
import re
import textwrap
from typing import NamedTuple

import numpy as np

from ..errors import PytoError, UnsupportedError
from .result import PRO_NAMES
from .result import BufferMap, CheckResult

FORMATS = ("png", "svg")
INSTALL = "pip install 'pyto[plot]'"

#: pipe colours, the same in every figure (the order of pyto.ir.Pipe: a transfer's hops, then compute, then S)
PIPE_COLOURS = {"MTE2": "#1f77b4", "MTE1": "#17becf", "M": "#d62728", "FIX": "#ff7f0e", "V": "#2ca02c",
                "MTE3": "#9467bd", "S": "#8c564b", "ALL": "#7f7f7f"}
SYNC_COLOUR = "#222222"
#: the instructions that order pipes, by the names pyto/language/system.py gives them (flags, cross-core flags,
#: mutexes, barriers, sync_all); auto-sync's flags are dependencies of the schedule, not instructions
_SYNC = re.compile(r"pl\.system\.(sync_src|sync_dst|set_cross_core|wait_cross_core|mutex_lock|mutex_unlock|"
                   r"bar_\w+|sync_all)$")

WIDTH_IN = 13.0         # figure width, inches (1300 px at DPI)
DPI = 100
ROW_IN = 0.24           # one timeline row
MAP_IN = 0.55           # one level of an address map
WIDE = 4                # pixels: a row whose typical instruction is this wide draws each one, outlined; a row of
                        # narrower ones (a BMM's 10^5) is drawn joined per pixel column
LABEL_IN = 2.6          # the room the y labels and the legend take from the width, about


class Row(NamedTuple):
    """The instructions one pipe of one core ran, by start: start and busy cycles (the span its pipe is occupied,
    `end - latency` in the events), and whether each is a sync instruction."""

    starts: np.ndarray
    durations: np.ndarray
    sync: np.ndarray


def is_sync(name: str) -> bool:
    """Whether an instruction name (as the events carry it, e.g. 'pl.system.wait_cross_core') is a sync one."""
    return bool(_SYNC.match(name))


def timeline_rows(report) -> dict:
    """{(core, pipe): Row} for every core x pipe that ran something, in core then pipe order, times in cycles;
    decoded from `report.events` in numpy (a BMM launch has 10^5-10^6 instructions). Each row's durations sum to
    the pipe's busy cycles, `report.core_pipe_cycles[core][pipe]`. {} for a report without events."""
    if report is None or report.events is None:
        return {}
    cores, pipes, names, _, core_i, pipe_i, name_i, _, begin, end, lat = report.events
    core_i, pipe_i = np.asarray(core_i, np.int64), np.asarray(pipe_i, np.int64)
    begin = np.asarray(begin, np.float64)
    busy = np.asarray(end, np.float64) - np.asarray(lat, np.float64) - begin
    sync = np.array([is_sync(n) for n in names], bool)[np.asarray(name_i, np.int64)] if len(names) else \
        np.zeros(len(core_i), bool)
    key = core_i * len(pipes) + pipe_i
    order = np.lexsort((begin, key))
    key = key[order]
    cuts = np.flatnonzero(np.diff(key)) + 1
    rows = {}
    for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(key)]):
        if lo == hi:
            continue
        c, p = divmod(int(key[lo]), len(pipes))
        idx = order[lo:hi]
        rows[(cores[c], pipes[p])] = Row(begin[idx], busy[idx], sync[idx])
    return rows


def tile_name(what: str) -> str:
    """A TileRange's tile name: the first quoted word of its `what` ("'a_l1[0]' pl.MemorySpace.Mat ..." ->
    a_l1[0]), else its first word."""
    m = re.search(r"'([^']*)'", what)
    return m.group(1) if m else (what.split() or ["?"])[0]


def tile_levels(tiles: list) -> list:
    """A stacking level per tile so that tiles on one level do not overlap: level 0 for tiles that share no byte
    with an earlier one, the lowest free level otherwise (greedy interval colouring, by address)."""
    order = sorted(range(len(tiles)), key=lambda i: (tiles[i].lo, -tiles[i].hi))
    level_end: list = []          # per level, the end of its last tile
    levels = [0] * len(tiles)
    for i in order:
        t = tiles[i]
        free = next((lv for lv, e in enumerate(level_end) if e <= t.lo), None)
        if free is None:
            free = len(level_end)
            level_end.append(0)
        level_end[free] = t.hi
        levels[i] = free
    return levels


def _overlapping(tiles: list) -> set:
    """The indices of tiles that share a byte with another tile."""
    out = set()
    for i, a in enumerate(tiles):
        for j in range(i + 1, len(tiles)):
            b = tiles[j]
            if a.lo < b.hi and b.lo < a.hi:
                out.update((i, j))
    return out


def _merged(starts: np.ndarray, ends: np.ndarray, join: float, least: float) -> np.ndarray:
    """Spans (sorted by start) joined where less than `join` apart, as (start, width) pairs at least `least`
    wide: what a pixel column can show, so that a row of 10^6 instructions draws as a few hundred boxes."""
    if not len(starts):
        return np.zeros((0, 2))
    reach = np.maximum.accumulate(ends)
    first = np.flatnonzero(np.r_[True, starts[1:] - reach[:-1] >= join])
    lo = starts[first]
    hi = np.maximum.reduceat(ends, first)
    return np.column_stack([lo, np.maximum(hi - lo, least)])


def _title(r: CheckResult) -> str:
    where = f"{os.path.basename(r.file)}:{r.line}" if r.file else f"line {r.line}"
    head = f"{r.kernel} ({where}): {r.verdict}  [{r.block_dim} block(s) on {r.chip}, {r.mode} mode]"
    if r.report is not None:
        rep = r.report
        return (f"{head}\nT_total {rep.time_us:,.3f} us ({rep.cycles:,.0f} cycles), {rep.instructions:,} "
                f"instructions; bottleneck {rep.bottleneck}, {rep.bound}")
    first = (r.message.splitlines() or [""])[0]
    return head + "\n" + "\n".join(textwrap.wrap(first, 150)[:3])


def _draw_timeline(ax, report, rows: dict) -> None:
    """One row per core x pipe: busy spans in the pipe's colour, sync instructions hatched dark; x in us."""
    from matplotlib.patches import Patch
    scale = 1.0 / (report.clock_ghz * 1e3)
    total = max(report.cycles, max((float((r.starts + r.durations).max()) for r in rows.values()), default=0.0))
    px = total / ((WIDTH_IN - LABEL_IN) * DPI) or 1.0        # the cycles a pixel column covers
    labels = []
    for y, ((core, pipe), row) in enumerate(rows.items()):
        colour = PIPE_COLOURS.get(pipe, "#bcbd22")
        for mask, face, hatch in ((~row.sync, colour, None), (row.sync, SYNC_COLOUR, "////")):
            if not mask.any():
                continue
            s, d = row.starts[mask], row.durations[mask]
            few = float(np.median(d)) >= WIDE * px        # each instruction wide enough to draw, outlined
            spans = _merged(s, s + d, 0.0 if few else px, px) * scale
            edge = SYNC_COLOUR if hatch else ("white" if few else "none")
            ax.broken_barh(spans, (y - 0.4, 0.8), facecolors=face, edgecolor=edge, linewidth=0.5 if few else 0,
                           hatch=hatch)
        labels.append(f"{core}  {pipe}")
    prev = None
    for y, (core, _) in enumerate(rows):
        if prev is not None and core != prev:
            ax.axhline(y - 0.5, color="#999999", linewidth=0.6)
        prev = core
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=8 if len(labels) <= 60 else 6)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.set_xlim(0, total * scale)
    ax.set_xlabel(f"time (us; {report.clock_ghz:g} GHz)")
    ax.grid(axis="x", linewidth=0.4, alpha=0.5)
    used = list(dict.fromkeys(p for _, p in rows))
    handles = [Patch(facecolor=PIPE_COLOURS.get(p, "#bcbd22"), label=p) for p in used]
    if any(r.sync.any() for r in rows.values()):
        handles.append(Patch(facecolor=SYNC_COLOUR, hatch="////", label="sync / wait"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, title="pipe",
              title_fontsize=8, frameon=False)


def _hex_locator(extent: int):
    """Ticks every power-of-two bytes, about eight over the buffer (addresses read as the kernel writes them)."""
    from matplotlib.ticker import FuncFormatter, MultipleLocator
    step = 2 ** max(0, math.ceil(math.log2(max(extent, 8) / 8)))
    return MultipleLocator(step), FuncFormatter(lambda x, _: f"{int(x):#x}" if x >= 0 else "")


def _draw_map(ax, m: BufferMap) -> None:
    """A buffer's capacity as a bar, each placed tile a box at [lo, hi) named where the name fits; overlapping
    tiles stacked on levels and outlined red; past the capacity shaded red."""
    tiles = m.tiles
    levels = tile_levels(tiles)
    depth = max(levels, default=0) + 1
    over = _overlapping(tiles)
    extent = max([m.capacity] + [t.hi for t in tiles])
    ax.set_xlim(0, extent)
    ax.set_ylim(-0.5, depth - 0.5)
    ax.axvspan(0, m.capacity, color="#f2f2f2", zorder=0)
    if extent > m.capacity:
        ax.axvspan(m.capacity, extent, color="#f6c6c6", zorder=0)
        ax.axvline(m.capacity, color="#d62728", linewidth=1.2)
    if tiles:
        from matplotlib.colors import to_rgba
        faces = [to_rgba(f"C{i % 10}", 0.55) for i in range(len(tiles))]      # see-through faces, solid edges
        ax.barh(levels, [t.hi - t.lo for t in tiles], left=[t.lo for t in tiles], height=0.8,
                color=faces, edgecolor=["#d62728" if i in over else "#333333" for i in range(len(tiles))],
                linewidth=[1.6 if i in over else 0.6 for i in range(len(tiles))], zorder=2)
        refused = [(t, lv) for t, lv in zip(tiles, levels) if t.refused]
        for t, lv in refused:           # the placement that failed: where it was asked for, hatched
            ax.barh([lv], [t.hi - t.lo], left=[t.lo], height=0.8, color="none", edgecolor="#d62728", hatch="//",
                    linewidth=1.6, zorder=2.5)
        px_per_byte = (WIDTH_IN - LABEL_IN) * DPI / extent
        for t, lv in zip(tiles, levels):
            name = tile_name(t.what)
            width = (t.hi - t.lo) * px_per_byte
            size = next((pt for pt in (8, 6.5) if width > len(name) * pt * 0.72 + 2), None)   # ~0.72 px/pt a char
            if size:
                ax.text((t.lo + t.hi) / 2, lv, name, ha="center", va="center", fontsize=size, zorder=3, clip_on=True)
    loc, fmt = _hex_locator(extent)
    ax.xaxis.set_major_locator(loc)
    ax.xaxis.set_major_formatter(fmt)
    ax.tick_params(axis="x", labelsize=7)
    ax.set_yticks([])
    where = "" if m.blocks_traced == m.blocks and m.same_in_all_blocks else f"\n{m.where()}"
    flag = " OVER" if m.in_use > m.capacity else ""
    pro = f" ({PRO_NAMES[m.buffer]})" if m.buffer in PRO_NAMES else ""
    ax.set_ylabel(f"{m.buffer}{pro}{where}\n{m.in_use:,} / {m.capacity:,} B\n({100 * m.use:.1f}%{flag})",
                  rotation=0, ha="right", va="center", fontsize=8)


def _matplotlib() -> None:
    """Import matplotlib, or say how to install it."""
    try:
        import matplotlib                     # noqa: F401  (first: a stubbed-out matplotlib fails here)
        from matplotlib.backends.backend_agg import FigureCanvasAgg   # noqa: F401
    except ImportError as e:
        raise UnsupportedError(f"plotting needs matplotlib, which is not installed: {INSTALL}") from e


def figure(r: CheckResult):
    """The matplotlib Figure of one result (on an Agg canvas): the timeline, when the run finished, over the
    address maps; the title says the verdict, and the time and bottleneck or the error's first line."""
    _matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    rows = timeline_rows(r.report)
    depths = [max(tile_levels(m.tiles), default=0) + 1 for m in r.buffers]
    heights = ([max(1.2, ROW_IN * len(rows))] if rows else []) + [MAP_IN * d + 0.35 for d in depths]
    fig = Figure(figsize=(WIDTH_IN, min(60.0, sum(heights) + 1.0)), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    fig.suptitle(_title(r), fontsize=10, ha="left", x=0.01)
    if not heights:
        fig.text(0.5, 0.5, "no timeline (the run did not finish) and no address map (nothing was placed)",
                 ha="center", va="center", fontsize=10)
        return fig
    axes = fig.subplots(len(heights), 1, gridspec_kw={"height_ratios": heights}, squeeze=False)[:, 0]
    if rows:
        _draw_timeline(axes[0], r.report, rows)
    for ax, m in zip(axes[1 if rows else 0:], r.buffers):
        _draw_map(ax, m)
    if r.buffers:
        axes[1 if rows else 0].set_title("address maps (bytes)", fontsize=9, loc="left")
    return fig


def _path(out_dir: str, kernel: str, fmt: str, taken: set) -> str:
    """`<kernel>.<fmt>` in out_dir; `<kernel>-2.<fmt>`, ... for a second kernel of the same name."""
    path, n = os.path.join(out_dir, f"{kernel}.{fmt}"), 1
    while path in taken:
        n += 1
        path = os.path.join(out_dir, f"{kernel}-{n}.{fmt}")
    taken.add(path)
    return path


def plot_results(results: list, out_dir: str, fmt: str = "png") -> None:
    """Write one figure per result into out_dir (`<kernel>.png`, or .svg) and append its path to
    `result.plots`: the timeline of each core's pipes when the run finished, and each buffer's address map (a
    failed kernel gets the maps and the error). Needs matplotlib (pip install 'pyto[plot]')."""
    if fmt not in FORMATS:
        raise UnsupportedError(f"plot format {fmt!r}: pyto writes {' or '.join(FORMATS)}")
    _matplotlib()
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise PytoError(f"cannot make the plot directory {out_dir!r}: {e.strerror or e}") from e
    taken: set = set()
    for r in results:
        path = _path(out_dir, r.kernel, fmt, taken)
        fig = figure(r)
        try:
            fig.savefig(path, format=fmt)
        except OSError as e:
            raise PytoError(f"cannot write the plot to {path!r}: {e.strerror or e}") from e
        finally:
            fig.clear()
        r.plots.append(path)
