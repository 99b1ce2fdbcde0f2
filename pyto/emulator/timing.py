"""Instruction costs in cycles from the chip table (DESIGN section 5), first version.

COSTS maps each Op to a cost function returning (pipe free again, instruction complete). Transfers
occupy their pipe for bytes / per-core bandwidth (each contiguous burst charged at least
`burst_min_bytes`) and complete a fixed latency later, so back-to-back transfers pipeline; GM traffic
of all cores also queues on one chip-wide channel of `gm_bandwidth`.
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

    def _transfer(self, ins: Instr, now: float) -> tuple:
        src, dst = ins.attrs["path"]
        path = self.chip.path(src, dst)
        if "GM" in (src, dst):
            nbytes = gm_bytes(self.chip, ins.attrs)
            free = now + nbytes / path.bytes_per_cycle
            ch_start = max(now, self.gm_free)
            self.gm_free = ch_start + nbytes / self.gm_per_cycle
            free = max(free, self.gm_free)
            return free, free + path.latency
        free = now + ins.attrs["bytes"] / path.bytes_per_cycle
        return free, free + path.latency

    def _mmad(self, ins: Instr, now: float) -> tuple:
        a = ins.attrs
        end = now + mmad_cycles(self.chip, a["m"], a["n"], a["k"], a["dtype"])
        return end, end

    def _vector(self, ins: Instr, now: float) -> tuple:
        nbytes = ins.attrs["elems"] * 4
        end = now + self.chip.vector_head_cycles + nbytes / self.chip.vector_bytes_per_cycle
        return end, end

    def _scalar(self, ins: Instr, now: float) -> tuple:
        end = now + self.chip.scalar_cycles
        return end, end

    def cost(self, ins: Instr, now: float) -> tuple:
        """(pipe free again, instruction complete) for `ins` started at `now`."""
        return COSTS[ins.op](self, ins, now)


COSTS = {
    Op.LOAD: Timing._transfer, Op.STORE: Timing._transfer, Op.MOVE: Timing._transfer, Op.MMAD: Timing._mmad,
    Op.VBINARY: Timing._vector, Op.VSCALAR: Timing._vector, Op.VUNARY: Timing._vector,
    Op.VCAST: Timing._vector, Op.VDUP: Timing._vector, Op.VREDUCE: Timing._vector, Op.VEXPAND: Timing._vector,
    Op.SET_FLAG: Timing._scalar, Op.WAIT_FLAG: Timing._scalar, Op.BARRIER: Timing._scalar,
    Op.SYNC_ALL: Timing._scalar,
}
