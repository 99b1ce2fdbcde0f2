"""Report: what a run cost — cycles, time, busy cycles per pipe, what bounds it, instruction count."""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .errors import PytoError, UnsupportedError

# A pipe (or the GM channel) busy this share of T_total or more bounds the run; below it the run is latency-bound.
# A pipelined kernel keeps its slowest stage busy all but the pipeline's fill and drain: the emulated BMMs whose
# roofline is well above their latency floor show their busiest pipe or the GM channel at 66-98% of T_total,
# small ones (a few tiles a core) at 4-20%. Below 60%, more than 40% of T_total passes with even the busiest
# pipe waiting, so a faster pipe would gain at most its share; the waiting (transfers landing, flags, idle
# cores) sets T_total.
SATURATED = 0.6
TRACE_EVENT_BYTES = 240       # JSON bytes per instruction of save_trace, about (236-250 measured)
TRACE_GZIP_RATIO = 1 / 20     # and gzip's share of them (1/16 to 1/25 measured on BMM traces)
LARGE_TRACE_BYTES = 100e6     # a trace larger than this is worth a word before it is written (Report.trace_warning)


def _mb(n: float) -> str:
    return f"{n / 1e9:,.1f} GB" if n >= 1e9 else f"{n / 1e6:,.0f} MB"


@dataclass
class Report:
    """The result of `pyto.run` (and pyto.compile's `.report`): print `summary()`.

    `cycles` is T_total, the launch's simulated time in cycles (`time_us` in microseconds); `pipe_cycles` per
    pipe the largest busy cycles of any core (the scalar pipe S left out; `bottleneck` the largest of them,
    `bound` whether it, the GM channel or latency bounds the run), `core_pipe_cycles` every core's; a pipe's
    busy cycles include waiting for the chip-wide GM channel, whose own load is `gm_channel_share`;
    `instructions` the instructions executed; `flops` the cube's work as issued (edge tiles count their
    fractal-padded m x n x k, as the cube computes them), `achieved_flops` its rate and `peak_flops` the whole
    chip's (all its AI cores, whatever `blocks`); the GM fields below the traffic; `core_cycles` each core's
    last completion; `headline()` one line; `save_trace(path)` a Chrome/Perfetto trace (gzip for a .gz path).
    """

    kernel: str
    chip: str
    blocks: int
    mode: str
    cycles: float
    clock_ghz: float
    instructions: int
    pipe_cycles: dict
    core_pipe_cycles: dict = field(default_factory=dict)
    events: Optional[tuple] = None   # compact per-instruction times for save_trace (see emulator/run.py)
    flops: float = 0.0
    peak_flops: float = 0.0
    # GM traffic as the DMA is charged: each contiguous burst (a row, or a block of full-width rows) at least
    # the chip's burst_min_bytes (128 B on the bundled chips): a [64, 16] fp16 slice of a wide tensor counts
    # 64 x 128 B
    gm_bytes: float = 0.0        # bytes over the chip-wide GM channel (reads missing L2, and writes)
    gm_read_bytes: float = 0.0   # bytes read from GM tensors (served by L2 or GM)
    l2_hit_bytes: float = 0.0    # of those, bytes served by L2
    gm_write_bytes: float = 0.0  # bytes written to GM tensors
    core_cycles: dict = field(default_factory=dict)   # per core (block AIC/AIV): its last completion
    gm_bytes_per_cycle: float = 0.0   # the chip's GM channel
    integer: bool = False             # the cube ran int8 (its work counts operations: TOPS)
    # pl.printf / pl.dump_data output, in simulated start order, each entry '[block 0 AIV1 @ 1,234 cycles] ...'
    # (printed on stdout by the run too); pl.dump_data's values (emulator/debugpass.Dump: line, core, cycle,
    # label, what, shape, data; data None in timing mode)
    printed: list = field(default_factory=list)
    dumps: list = field(default_factory=list)

    @property
    def gm_channel_share(self) -> float:
        """The share of T_total the chip-wide GM channel is busy (1.0: the launch is GM-bandwidth bound)."""
        if not self.cycles or not self.gm_bytes_per_cycle:
            return 0.0
        return self.gm_bytes / self.gm_bytes_per_cycle / self.cycles

    @property
    def l2_hit_rate(self) -> float:
        """The share of GM read bytes served by L2."""
        return self.l2_hit_bytes / self.gm_read_bytes if self.gm_read_bytes else 0.0

    @property
    def time_us(self) -> float:
        """T_total in microseconds at the chip's clock."""
        return self.cycles / (self.clock_ghz * 1e3)

    @property
    def bottleneck(self) -> str:
        """The pipe with the most busy cycles (docs/bmm_branches.md §3.1: the slowest stage dominates); whether it bounds the
        run, or latency does, is `bound`."""
        return max(self.pipe_cycles, key=self.pipe_cycles.get) if self.pipe_cycles else "none"

    @property
    def busiest_share(self) -> float:
        """The share of T_total the busiest pipe (`bottleneck`) is busy."""
        return self.pipe_cycles[self.bottleneck] / self.cycles if self.pipe_cycles and self.cycles else 0.0

    @property
    def bound(self) -> str:
        """What bounds T_total: "<pipe>-bound" (e.g. "MTE2-bound") or "GM-bandwidth-bound" for the most
        saturated of the pipes and the chip-wide GM channel when it is busy at least SATURATED (60%) of
        T_total; "latency-bound" when none is (the pipes mostly wait); "none" for a run without pipe work."""
        if not self.pipe_cycles or not self.cycles:
            return "none"
        if max(self.busiest_share, self.gm_channel_share) < SATURATED:
            return "latency-bound"
        return "GM-bandwidth-bound" if self.gm_channel_share > self.busiest_share else f"{self.bottleneck}-bound"

    def bound_text(self) -> str:
        """`bound` in words, with its figures: the saturated pipe's share, or, latency-bound, the busiest pipe's
        share and what waits (the last core's time with no pipe busy; cores that finish early)."""
        bound = self.bound
        if bound == "none":
            return "none (no pipe ran)"
        if bound == "GM-bandwidth-bound":
            return (f"GM-bandwidth-bound: the chip's GM channel is busy {self.gm_channel_share:.0%} of T_total "
                    f"(the busiest pipe, {self.bottleneck}, {self.busiest_share:.0%}, waiting for it included)")
        if bound != "latency-bound":
            return f"{bound}: {self.bottleneck} busy {self.busiest_share:.0%} of T_total on the busiest core"
        text = (f"latency-bound: no pipe near saturation (the busiest, {self.bottleneck}, is busy "
                f"{self.busiest_share:.0%} of T_total, below {SATURATED:.0%})")
        idle = self._idle_share()
        if idle is not None:
            core, share = idle
            text += (f"; {core}, the last to finish, has no pipe busy {share:.0%} of T_total: it waits for "
                     f"transfers to land (GM/L2 latency) and for flags")
        if len(self.core_cycles) > 1:
            mean = sum(self.core_cycles.values()) / len(self.core_cycles) / self.cycles
            if mean < 0.75:
                text += f"; cores idle: the average core finishes at {mean:.0%} of T_total"
        return text

    def _idle_share(self) -> Optional[tuple]:
        """(the last core to finish, the share of T_total in which none of its pipes is busy), from the events
        (an instruction occupies its pipe from begin to end - latency); None without events."""
        if self.events is None or not self.cycles or not self.core_cycles:
            return None
        cores, _, _, _, core_i, _, _, _, begin, end, lat = self.events
        last = max(self.core_cycles, key=self.core_cycles.get)
        mine = np.asarray(core_i) == list(cores).index(last)
        if not mine.any():
            return None
        b = np.asarray(begin, np.float64)[mine]
        e = np.asarray(end, np.float64)[mine] - np.asarray(lat, np.float64)[mine]
        order = np.argsort(b, kind="stable")
        b, e = b[order], e[order]
        reach = np.maximum.accumulate(e)
        starts = np.flatnonzero(np.r_[True, b[1:] > reach[:-1]])     # where a busy stretch begins
        busy = float((np.maximum.reduceat(e, starts) - b[starts]).sum())
        return last, max(0.0, 1.0 - busy / self.cycles)

    def headline(self) -> str:
        """One line: kernel, chip, blocks, mode, T_total, what bounds it, achieved vs peak."""
        text = (f"{self.kernel} on {self.chip}: {self.blocks} block(s), {self.mode} mode: T_total "
                f"{self.time_us:,.3f} us ({self.cycles:,.0f} cycles), {self.bound}")
        if self.bound == "latency-bound":
            text += f" (busiest pipe {self.bottleneck} {self.busiest_share:.0%})"
        if self.flops and self.peak_flops:
            unit = "TOPS" if self.integer else "TFLOP/s"
            text += (f", {self.achieved_flops / 1e12:.2f} {unit} ({self.achieved_flops / self.peak_flops:.1%} of "
                     f"peak)")
        return text

    @property
    def achieved_flops(self) -> float:
        """The cube's FLOP/s over T_total."""
        return self.flops / (self.time_us * 1e-6) if self.cycles else 0.0

    def summary(self) -> str:
        """The report as text: T_total, each pipe's busy cycles and share, what bounds the run (`bound_text`), GM
        traffic and L2 hit rate, the GM channel's share, cores and the last to finish, achieved vs the chip's peak."""
        lines = [f"{self.kernel} on {self.chip}: {self.blocks} block(s), {self.mode} mode",
                 f"  T_total     {self.cycles:,.0f} cycles = {self.time_us:,.3f} us",
                 f"  instructions {self.instructions:,}"]
        for p, c in sorted(self.pipe_cycles.items(), key=lambda kv: -kv[1]):
            share = c / self.cycles if self.cycles else 0.0
            lines.append(f"  {p:<5} busy {c:>12,.0f} cycles ({share:6.1%} of T_total)")
        lines.append(f"  bound       {self.bound_text()}")
        lines.append(f"  GM          read {self.gm_read_bytes / 1e6:,.3f} MB (L2 hit rate {self.l2_hit_rate:.1%}), "
                     f"written {self.gm_write_bytes / 1e6:,.3f} MB (bursts charged at least the burst minimum); "
                     f"{self.gm_bytes / 1e6:,.3f} MB over the GM channel")
        if self.gm_bytes_per_cycle:
            lines.append(f"  GM channel  busy {self.gm_channel_share:.1%} of T_total (chip-wide; a pipe's busy cycles "
                         f"include waiting for it)")
        if len(self.core_cycles) > 1:
            busiest = max(self.core_cycles, key=self.core_cycles.get)
            aic = sum(1 for c in self.core_cycles if c.endswith("AIC"))
            aiv = len(self.core_cycles) - aic
            lines.append(f"  cores       {aic} AIC" + (f" + {aiv} AIV" if aiv else "") + f"; last to finish: "
                         f"{busiest} at {self.core_cycles[busiest]:,.0f} cycles")
        if self.flops:
            unit = "TOPS" if self.integer else "TFLOP/s"
            lines.append(f"  achieved    {self.achieved_flops / 1e12:.2f} {unit} of the chip's peak "
                         f"{self.peak_flops / 1e12:.0f} ({self.achieved_flops / self.peak_flops:.1%}; cube work as "
                         f"issued, edge tiles padded)")
        return "\n".join(lines)

    @property
    def trace_events(self) -> int:
        """How many instruction events save_trace writes (0 without per-instruction times)."""
        return 0 if self.events is None else len(self.events[4])

    def trace_bytes(self, path: str = "") -> int:
        """About how many bytes save_trace(path) writes: TRACE_EVENT_BYTES an instruction, gzip's share of that
        for a path ending in .gz (an estimate from the event count, before writing)."""
        size = self.trace_events * TRACE_EVENT_BYTES
        return int(size * TRACE_GZIP_RATIO) if str(path).endswith(".gz") else size

    def trace_warning(self, path: str, limit: Optional[float] = None) -> str:
        """'' when save_trace(path) writes less than `limit` bytes (default LARGE_TRACE_BYTES), about, else a
        sentence saying how large the file will be and, for a plain .json path, how large its .json.gz would be."""
        size = self.trace_bytes(path)
        if size < (LARGE_TRACE_BYTES if limit is None else limit):
            return ""
        text = f"the trace of {self.trace_events:,} instructions will be about {_mb(size)}"
        if not str(path).endswith(".gz"):
            text += (f"; write it as FILE.json.gz for about {_mb(self.trace_bytes(str(path) + '.gz'))} (gzip; "
                     f"Perfetto and chrome://tracing open .json.gz)")
        return text

    def save_trace(self, path: str) -> None:
        """Chrome/Perfetto trace-event JSON: one track per core x pipe that ran something (pid = core + 1,
        tid = pipe + 1: Perfetto reserves pid 0), one complete ('X') event per instruction named by op and
        kernel source line; times in us, begin and end rounded to whole ns (so that a viewer's own rounding
        makes no overlaps). Open it in https://ui.perfetto.dev or chrome://tracing. About 240 B of JSON per
        instruction (`trace_bytes`); a path ending in .gz is written gzip-compressed (about 1/20 of that; both
        viewers open .json.gz). Events are written in chunks, so host memory does not grow with the trace.

        An event spans the cycles its pipe is occupied (they sum to the pipe's busy cycles and never overlap
        on a track); a transfer's data lands its latency later, given in args (latency_cycles, lands_us)."""
        if self.events is None:
            raise UnsupportedError("this report carries no per-instruction times")
        cores, pipes, names, locs, core_i, pipe_i, name_i, loc_i, begin, end, lat = self.events
        scale = 1.0 / (self.clock_ghz * 1e3)
        used = set()

        def chunks(step: int = 65536):
            for lo in range(0, len(core_i), step):
                hi = lo + step
                out = []
                for c, p, n, l, b, e, d in zip(core_i[lo:hi].tolist(), pipe_i[lo:hi].tolist(),
                                               name_i[lo:hi].tolist(), loc_i[lo:hi].tolist(), begin[lo:hi].tolist(),
                                               end[lo:hi].tolist(), lat[lo:hi].tolist()):
                    ts, te = round(b * scale, 3), round((e - d) * scale, 3)
                    out.append({"name": f"{names[n]} {locs[l].split(' ', 1)[0]}", "cat": pipes[p], "ph": "X",
                                "pid": c + 1, "tid": p + 1, "ts": ts, "dur": round(te - ts, 3),
                                "args": {"line": locs[l], "latency_cycles": float(d), "lands_us": round(e * scale, 3)}})
                    used.add((c, p))
                yield out
            out = []
            for c, cname in enumerate(cores):
                out.append({"name": "process_name", "ph": "M", "pid": c + 1, "args": {"name": cname}})
                for p, pname in enumerate(pipes):
                    if (c, p) in used:
                        out.append({"name": "thread_name", "ph": "M", "pid": c + 1, "tid": p + 1,
                                    "args": {"name": f"PIPE_{pname}"}})
            yield out
        meta = {"kernel": self.kernel, "chip": self.chip, "blocks": self.blocks, "mode": self.mode,
                "clock_ghz": self.clock_ghz, "cycles": self.cycles}
        try:
            with (gzip.open(path, "wt", compresslevel=6) if str(path).endswith(".gz") else open(path, "w")) as fh:
                fh.write('{"traceEvents": [')
                first = True
                for out in chunks():
                    if out:
                        fh.write(("" if first else ", ") + json.dumps(out)[1:-1])
                        first = False
                fh.write('], "displayTimeUnit": "ns", "otherData": ' + json.dumps(meta) + "}")
        except OSError as e:
            raise PytoError(f"cannot write the trace to {path!r}: {e.strerror or e}") from e
