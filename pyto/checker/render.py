"""A CheckResult as the text block `pyto check` prints per kernel."""
from __future__ import annotations

import os
import textwrap

from .result import OK, PRO_NAMES, BufferMap, CheckResult

_PER_AIV = {"UB": "per AIV"}
PRINTED = 20        # pl.printf lines shown per kernel


def _kb(n: int) -> str:
    return f"{n / 1024:,.1f} KB" if n >= 1024 else f"{n:,} B"


def buffer_table(m: BufferMap) -> list[str]:
    """A buffer's heading (use vs capacity) and one row per placed range."""
    scope = f"{PRO_NAMES[m.buffer]}, " if m.buffer in PRO_NAMES else ""
    scope += f"{_PER_AIV[m.buffer]}, " if m.buffer in _PER_AIV else ""
    over = "  OVER" if m.in_use > m.capacity else ""
    lines = [f"  {m.buffer} ({scope}{_kb(m.capacity)}): {_kb(m.in_use)} in use, {100 * m.use:.1f}%{over} "
             f"[{m.where()}]"]
    width = max(5, len(f"{m.capacity:x}"))
    rows = [(f"{t.lo:#0{width + 2}x}-{t.hi:#0{width + 2}x}", f"{t.hi - t.lo:,} B",
             t.what + ("  <- refused: does not fit" if t.refused else ""), t.line) for t in m.tiles]
    if rows:
        w = [max(len(r[i]) for r in rows) for i in range(4)]
        lines += [f"    {a.ljust(w[0])}  {b.rjust(w[1])}  {c.ljust(w[2])}  {d}".rstrip() for a, b, c, d in rows]
    return lines


def _input(name: str, v: dict) -> str:
    """One input as the inputs line shows it: 'x [32, 128] fp32', 'idx [64, 32] uint8 (4:2 sparse index)', 'n=7'."""
    if "shape" not in v:
        return f"{name}={v['value']}"
    return f"{name} {v['shape']} {v['dtype']}" + (f" ({v['data']})" if "data" in v else "")


def render(r: CheckResult) -> str:
    """The block for one kernel: verdict line, inputs, time (or the error), address maps."""
    where = f"{os.path.basename(r.file)}:{r.line}" if r.file else f"line {r.line}"
    head = f"{r.kernel} ({where}): {r.verdict}"
    lines = [f"{head}   [{r.block_dim} block(s) on {r.chip}, {r.mode} mode, {r.seconds:.2f} s]"]
    if r.inputs:
        lines.append("  inputs: " + ", ".join(_input(k, v) for k, v in r.inputs.items()))
    if r.standins:
        lines.append("  stand-ins (not installed here): " + ", ".join(r.standins))
    if r.kind != OK:
        for para in r.message.splitlines() or [""]:
            lines += textwrap.wrap(para, 116, initial_indent="  | ", subsequent_indent="  |   ") or ["  |"]
    if r.cycles is not None:
        busy = ", ".join(f"{p} {c:,.0f}" for p, c in sorted(r.pipe_cycles.items(), key=lambda pc: -pc[1]) if c)
        lines.append(f"  time: {r.time_us:,.3f} us ({r.cycles:,.0f} cycles), {r.instructions:,} instructions; "
                     f"bottleneck {r.bottleneck}, {r.bound}")
        if busy:
            lines.append(f"  busiest core's pipes (cycles): {busy}")
    if r.printed:
        lines.append(f"  printed ({len(r.printed)} line(s) of pl.printf / pl.dump_data):")
        lines += [f"    {p}" for p in r.printed[:PRINTED]]
        if len(r.printed) > PRINTED:
            lines.append(f"    ... {len(r.printed) - PRINTED} more (--json has them all)")
    if r.trace:
        lines.append(f"  trace: {r.trace}")
    for p in r.plots:
        lines.append(f"  plot: {p}")
    if r.buffers:
        placing = r.verdict in ("CapacityError", "AlignmentError")
        lines.append("  address maps" + (" (up to the failing placement)" if placing else "") + ":")
        for m in r.buffers:
            lines += buffer_table(m)
    return "\n".join(lines)
