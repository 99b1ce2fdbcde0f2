"""Report: what a run cost — cycles, time, busy cycles per pipe, the bottleneck, instruction count."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Optional

from .errors import PytoError, UnsupportedError


@dataclass
class Report:
    """The result of `pyto.run` (and pyto.compile's `.report`): print `summary()`.

    `cycles` is T_total, the launch's simulated time in cycles (`time_us` in microseconds); `pipe_cycles` per
    pipe the largest busy cycles of any core (the scalar pipe S left out; `bottleneck` the largest of them),
    `core_pipe_cycles` every core's; a pipe's busy cycles include waiting for the chip-wide GM channel, whose
    own load is `gm_channel_share`; `instructions` the instructions executed; `flops` the cube's work as
    issued (edge tiles count their fractal-padded m x n x k, as the cube computes them), `achieved_flops` its
    rate and `peak_flops` the whole chip's (all its AI cores, whatever `blocks`); the GM fields below the
    traffic; `core_cycles` each core's last completion; `save_trace(path)` a Chrome/Perfetto trace.
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
        """The pipe with the most busy cycles (seeds/000: the slowest stage dominates)."""
        return max(self.pipe_cycles, key=self.pipe_cycles.get) if self.pipe_cycles else "none"

    @property
    def achieved_flops(self) -> float:
        """The cube's FLOP/s over T_total."""
        return self.flops / (self.time_us * 1e-6) if self.cycles else 0.0

    def summary(self) -> str:
        """The report as text: T_total, each pipe's busy cycles and share, the bottleneck, GM traffic and L2 hit
        rate, the GM channel's share, cores and the last to finish, achieved vs the chip's peak."""
        lines = [f"{self.kernel} on {self.chip}: {self.blocks} block(s), {self.mode} mode",
                 f"  T_total     {self.cycles:,.0f} cycles = {self.time_us:,.3f} us",
                 f"  instructions {self.instructions:,}"]
        for p, c in sorted(self.pipe_cycles.items(), key=lambda kv: -kv[1]):
            share = c / self.cycles if self.cycles else 0.0
            lines.append(f"  {p:<5} busy {c:>12,.0f} cycles ({share:6.1%} of T_total)")
        lines.append(f"  bottleneck  {self.bottleneck}")
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

    def save_trace(self, path: str) -> None:
        """Chrome/Perfetto trace-event JSON: one track per core x pipe that ran something (pid = core + 1,
        tid = pipe + 1: Perfetto reserves pid 0), one complete ('X') event per instruction named by op and
        kernel source line; times in us, begin and end rounded to whole ns (so that a viewer's own rounding
        makes no overlaps). Open it in https://ui.perfetto.dev or chrome://tracing. About 250 B of JSON per
        instruction: for schedules of millions, trace a smaller problem.

        An event spans the cycles its pipe is occupied (they sum to the pipe's busy cycles and never overlap
        on a track); a transfer's data lands its latency later, given in args (latency_cycles, lands_us)."""
        if self.events is None:
            raise UnsupportedError("this report carries no per-instruction times")
        cores, pipes, names, locs, core_i, pipe_i, name_i, loc_i, begin, end, lat = self.events
        scale = 1.0 / (self.clock_ghz * 1e3)
        out, used = [], set()
        for c, p, n, l, b, e, d in zip(core_i.tolist(), pipe_i.tolist(), name_i.tolist(), loc_i.tolist(),
                                       begin.tolist(), end.tolist(), lat.tolist()):
            ts, te = round(b * scale, 3), round((e - d) * scale, 3)
            out.append({"name": f"{names[n]} {locs[l].split(' ', 1)[0]}", "cat": pipes[p], "ph": "X", "pid": c + 1,
                        "tid": p + 1, "ts": ts, "dur": round(te - ts, 3),
                        "args": {"line": locs[l], "latency_cycles": float(d), "lands_us": round(e * scale, 3)}})
            used.add((c, p))
        for c, cname in enumerate(cores):
            out.append({"name": "process_name", "ph": "M", "pid": c + 1, "args": {"name": cname}})
            for p, pname in enumerate(pipes):
                if (c, p) in used:
                    out.append({"name": "thread_name", "ph": "M", "pid": c + 1, "tid": p + 1,
                                "args": {"name": f"PIPE_{pname}"}})
        meta = {"kernel": self.kernel, "chip": self.chip, "blocks": self.blocks, "mode": self.mode,
                "clock_ghz": self.clock_ghz, "cycles": self.cycles}
        try:
            with open(path, "w") as fh:
                json.dump({"traceEvents": out, "displayTimeUnit": "ns", "otherData": meta}, fh)
        except OSError as e:
            raise PytoError(f"cannot write the trace to {path!r}: {e.strerror or e}") from e
