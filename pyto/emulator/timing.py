"""Instruction costs in cycles from the chip table (DESIGN section 5), first version.

COSTS maps each Op to a cost function; a test checks it covers all of Op. Transfers cost latency +
bytes / per-core bandwidth, each contiguous burst charged at least `burst_min_bytes`; GM traffic of all
cores also queues on one chip-wide channel of `gm_bandwidth`.
"""
from __future__ import annotations

import math

from ..chip import Chip
from ..ir import Instr, Op


def mmad_cycles(chip: Chip, m: int, n: int, k: int, dtype) -> float:
    """ceil(m/16)*ceil(n/16)*ceil(k/k0) fractal steps (k0 = 32B/itemsize) + the instruction head."""
    k0 = 32 // dtype.itemsize
    steps = math.ceil(m / 16) * math.ceil(n / 16) * math.ceil(k / k0)
    return steps * chip.cube_cycles_per_step[dtype.name] + chip.mmad_head_cycles


def gm_bytes(chip: Chip, attrs: dict) -> float:
    """Bytes a GM transfer costs: each burst (row) charged at least the burst minimum."""
    return attrs["nburst"] * max(attrs["burst"], chip.burst_min_bytes)


class Timing:
    """Stateful cost model of one launch: per-instruction cost plus the shared GM channel."""

    def __init__(self, chip: Chip):
        self.chip = chip
        self.gm_free = 0.0
        self.gm_per_cycle = chip.gm_bytes_per_cycle

    def _transfer(self, ins: Instr, now: float) -> float:
        src, dst = ins.attrs["path"]
        path = self.chip.path(src, dst)
        if "GM" in (src, dst):
            nbytes = gm_bytes(self.chip, ins.attrs)
            own = now + path.latency + nbytes / path.bytes_per_cycle
            ch_start = max(now, self.gm_free)
            self.gm_free = ch_start + nbytes / self.gm_per_cycle
            return max(own, self.gm_free + path.latency)
        return now + path.latency + ins.attrs["bytes"] / path.bytes_per_cycle

    def _mmad(self, ins: Instr, now: float) -> float:
        a = ins.attrs
        return now + mmad_cycles(self.chip, a["m"], a["n"], a["k"], a["dtype"])

    def _vector(self, ins: Instr, now: float) -> float:
        nbytes = ins.attrs["elems"] * 4
        return now + self.chip.vector_head_cycles + nbytes / self.chip.vector_bytes_per_cycle

    def _scalar(self, ins: Instr, now: float) -> float:
        return now + self.chip.scalar_cycles

    def end(self, ins: Instr, now: float) -> float:
        """When `ins`, started at `now`, completes."""
        return COSTS[ins.op](self, ins, now)


COSTS = {
    Op.LOAD: Timing._transfer, Op.STORE: Timing._transfer, Op.MOVE: Timing._transfer, Op.MMAD: Timing._mmad,
    Op.VBINARY: Timing._vector, Op.VSCALAR: Timing._vector, Op.VUNARY: Timing._vector,
    Op.VCAST: Timing._vector, Op.VDUP: Timing._vector, Op.VREDUCE: Timing._vector, Op.VEXPAND: Timing._vector,
    Op.SET_FLAG: Timing._scalar, Op.WAIT_FLAG: Timing._scalar, Op.BARRIER: Timing._scalar,
    Op.SYNC_ALL: Timing._scalar,
}
