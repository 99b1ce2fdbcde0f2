"""Instruction costs in cycles from the chip table (docs/design.md §5).

COSTS maps each Op to its static cost (occupancy of its pipe, latency after leaving it, bytes it
moves over the chip-wide GM and L2 channels); a test checks the table covers all of Op. The event
loop (schedule/simulate.py) adds the dynamic part: waiting for the shared GM/L2 channels and for sync.
Transfers occupy their pipe for bytes / per-core path bandwidth, each contiguous burst charged at
least `burst_min_bytes` (docs/bmm_branches.md §6.1.4: dValue >= 128B), GM transfers plus a per-instruction setup
(`dma_setup_cycles`: tiles under docs/bmm_branches.md §2's 16KB min_TileSize lose efficiency); an MMAD costs its
fractal steps plus a head; a vector op a head plus its largest operand's bytes (in the widest dtype it
touches) at the V pipe's byte rate (docs/bmm_branches.md §9.3: 256 B per cycle), once per PTO instruction it
lowers to.
"""
from __future__ import annotations

import math
from typing import NamedTuple

from ...chip import Chip
from ...ir import Instr, Op, Pipe


class Cost(NamedTuple):
    occ: float        # cycles the pipe is held
    lat: float        # cycles from leaving the pipe to completion
    gm_bytes: float   # bytes over the chip-wide GM channel
    l2_bytes: float   # bytes over the chip-wide L2 channel


def mmad_cycles(chip: Chip, m: int, n: int, k: int, dtype, mx: bool = False) -> float:
    """ceil(m/16)*ceil(n/16)*ceil(k/k0) fractal steps (k0 = 32B/itemsize: 64 for FP4) + the instruction head. An MX
    MMAD (pl.matmul_mx, `mx`) steps at the table's MX rate: cube.mxfp8_cycles_per_step for FP8 data, the FP4 dtypes'
    cube.mxfp4_cycles_per_step for FP4; its E8M0 scales add no cycles (the chip table's assumption)."""
    k0 = 32 // dtype.itemsize
    steps = math.ceil(m / 16) * math.ceil(n / 16) * math.ceil(k / k0)
    rate = chip.cube_cycles_per_step["mxfp8" if mx and dtype.bits == 8 else dtype.name]
    return steps * rate + chip.mmad_head_cycles


def burst_bytes(chip: Chip, attrs: dict) -> float:
    """Bytes a GM transfer is charged: each contiguous burst (row) at least the burst minimum."""
    return attrs["nburst"] * max(attrs["burst"], chip.burst_min_bytes)


def _transfer(chip: Chip, ins: Instr) -> Cost:
    src, dst = ins.attrs["path"]
    path = chip.path(src, dst)
    if "GM" in (src, dst):
        nbytes = burst_bytes(chip, ins.attrs)
        # a write lands in L2 (write-back): L2's write latency; a read is a miss here (encode.py turns the
        # reads l2.py serves from L2 into hits: L2's latency and channel)
        lat = path.latency + (chip.l2_write_latency_cycles if dst == "GM" else chip.gm_latency_cycles)
        return Cost(chip.dma_setup_cycles + nbytes / path.bytes_per_cycle, lat, nbytes, 0.0)
    return Cost(ins.attrs["bytes"] / path.bytes_per_cycle, path.latency, 0.0, 0.0)


def _mmad(chip: Chip, ins: Instr) -> Cost:
    a = ins.attrs
    return Cost(mmad_cycles(chip, a["m"], a["n"], a["k"], a["dtype"], "mx" in a), 0.0, 0.0, 0.0)


def _vector(chip: Chip, ins: Instr) -> Cost:
    """A head plus the largest operand's elements in the widest dtype at the V pipe's byte rate (a compare's
    mask, an expand's column, a reduction's result are smaller than the source they are charged by), once per PTO
    instruction the call is lowered to (`passes`: add_relu is TADD then TRELU)."""
    a = ins.attrs
    nbytes = a["elems"] * a["width"]     # elements of the largest operand, widest dtype
    return Cost(a.get("passes", 1) * (chip.vector_head_cycles + nbytes / chip.vector_bytes_per_cycle), 0.0, 0.0, 0.0)


def _fill(chip: Chip, ins: Instr) -> Cost:
    """pl.expands / fill_index: on V a vector op (_vector). pl.expands into a Mat (L1) tile runs on the AIC's MTE2
    (vector_elementwise.expands): its bytes at the GM->L1 path's rate, then that path's latency; no GM traffic
    (pyto's assumption: the chip tables give no figure for MTE2 writing a constant, and it is the unit's write
    side into L1 that a load also uses)."""
    if ins.pipe is not Pipe.MTE2:
        return _vector(chip, ins)
    a, path = ins.attrs, chip.path("GM", "L1")
    return Cost(a["elems"] * a["width"] / path.bytes_per_cycle, path.latency, 0.0, 0.0)


def _scalar(chip: Chip, ins: Instr) -> Cost:
    return Cost(chip.scalar_cycles, 0.0, 0.0, 0.0)


def _debug(chip: Chip, ins: Instr) -> Cost:
    """The debug and element-access ops (pyto/language/debug.py), costed as the scalar work they are (assumptions:
    no public figure). getval/setval of a UB element: one scalar access (scalar_cycles); of a GM element, a read
    holds the scalar unit for the GM latency, a write lands in L2 a write latency later. printf writes a record to
    the device's print buffer in GM, a scalar store a word (two header words and one an argument: `words`).
    pto_assert and trap: a compare and a branch. dump_data copies its bytes to the print buffer: on V (a Vec
    tile) at the vector rate after the vector head, on S (a GM tensor: the vector unit reads only UB) a scalar
    access an element after a GM read's latency."""
    a, s = ins.attrs, chip.scalar_cycles
    if ins.op is Op.GETVAL:
        return Cost(s + (chip.gm_latency_cycles if a["gm"] else 0.0), 0.0, 0.0, 0.0)
    if ins.op is Op.SETVAL:
        return Cost(s, chip.l2_write_latency_cycles if a["gm"] else 0.0, 0.0, 0.0)
    if ins.op is Op.PRINTF:
        return Cost(a["words"] * s, chip.l2_write_latency_cycles, 0.0, 0.0)
    if ins.op is Op.DUMP:
        if a["gm"]:
            return Cost(a["words"] * s + chip.gm_latency_cycles, chip.l2_write_latency_cycles, 0.0, 0.0)
        return Cost(chip.vector_head_cycles + a["bytes"] / chip.vector_bytes_per_cycle, chip.l2_write_latency_cycles,
                    0.0, 0.0)
    return Cost(s, 0.0, 0.0, 0.0)       # ASSERT, TRAP


COSTS = {
    Op.LOAD: _transfer, Op.STORE: _transfer, Op.MOVE: _transfer, Op.MMAD: _mmad,
    Op.VBINARY: _vector, Op.VSCALAR: _vector, Op.VUNARY: _vector, Op.VCAST: _vector, Op.VDUP: _fill,
    Op.VREDUCE: _vector, Op.VEXPAND: _vector, Op.VFILLPAD: _vector,
    Op.SET_FLAG: _scalar, Op.WAIT_FLAG: _scalar, Op.BARRIER: _scalar, Op.SYNC_ALL: _scalar, Op.MUTEX_LOCK: _scalar,
    Op.MUTEX_UNLOCK: _scalar,
    Op.GETVAL: _debug, Op.SETVAL: _debug, Op.PRINTF: _debug, Op.ASSERT: _debug, Op.DUMP: _debug, Op.TRAP: _debug,
}


def cost(chip: Chip, ins: Instr) -> Cost:
    """The static cost of one instruction, a GM read taken as an L2 miss (encode.py applies l2.py's hits)."""
    return COSTS[ins.op](chip, ins)


def _transfer_key(a: dict) -> tuple:
    return a["path"], a.get("nburst"), a.get("burst"), a.get("bytes")


def _scalar_key(a: dict) -> tuple:
    return ()


# What each cost function reads of an instruction's attrs: equal keys (with the op), equal costs. encode.py
# memoises costs on them; a test checks that every cost function reads nothing else.
COST_KEYS = {
    Op.LOAD: _transfer_key, Op.STORE: _transfer_key, Op.MOVE: _transfer_key,
    Op.MMAD: lambda a: (a["m"], a["n"], a["k"], a["dtype"], "mx" in a),
    **{op: (lambda a: (a["elems"], a["width"], a.get("passes", 1))) for op, f in COSTS.items()
       if f is _vector or f is _fill},      # _fill: the pipe, in the memo key, picks V or MTE2
    **{op: _scalar_key for op, f in COSTS.items() if f is _scalar},
    **{op: (lambda a: (a.get("gm"), a.get("words"), a.get("bytes"))) for op, f in COSTS.items() if f is _debug},
}
