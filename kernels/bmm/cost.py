"""Analytic BMM time (docs/bmm_branches.md §3.1: T_total = max(T_MMAD, T_MTE2, T_MTE1, T_Fixpipe[, T_Reduce])), per branch.

Each branch's model counts what its kernel (kernels/bmm/<branch>.py) issues on the busiest core and costs it
with the emulator's rules and the same chip constants (pyto/emulator/encode/timing.py, docs/design.md §5):

* a GM transfer holds its pipe for dma_setup_cycles + charged bytes / path bandwidth. Charged bytes: a
  region of full-width rows of the tensor is one contiguous burst; otherwise every row is a burst charged
  at least burst_min_bytes (docs/bmm_branches.md §6.1.4's dValue >= 128B). An Nd2Nz load of nd_num batches is nd_num regions.
* all cores' GM traffic (reads that miss L2, and writes) shares one chip-wide channel of gm_bytes_per_cycle;
  reads of a region already read or written (same tensor, batch, rectangle) hit L2 and share the L2 channel
  (when the live set fits L2). A core's transfers are paced by its share of those channels.
* a transfer completes path latency + GM (or L2) latency after it leaves its pipe; latency overlaps the next
  transfer (pipelining), so it only shows where nothing else can run: at the start (the cube waits for the
  first piece of its first tile) and at the end (the last piece's compute and the last stores).
* MMAD = ceil(m/16)*ceil(n/16)*ceil(k/k0)*cycles_per_step + mmad_head_cycles; L1 -> L0 at the path bandwidth;
  Fixpipe (L0C -> GM) is a GM transfer; a cross-pipe sync edge costs flag_latency_cycles; a vector op costs
  vector_head_cycles + its largest operand's elements * its widest itemsize / vector_bytes_per_cycle (the
  StreamK reduction's operands are fp32; Special's fill is in the output dtype).

The seed's terms are each pipe's time on the critical path: its busy time plus the fill it must wait for
and the drain after it (T_MMAD = first piece in + MMAD busy + last store out; T_MTE2 = max(the core's own
transfer time, the chip-wide GM and L2 channel time) + the last piece's compute and stores; ...), so that
T_total = max(terms) as the seed writes it. StreamK's reduction runs after a barrier (sync_all): its term
is the cube phase's time plus the reduction's own.

Layout: cost_pipes (Estimate, charged bytes of a GM region, _Work: the pipes, the channels, fill and drain,
finish -> Estimate), cost_tile (one output tile through block.accumulate), the branch models in cost_asw
(ASW_Basic, ToMatmul), cost_batch (IterBatch, MergeBatch) and cost_streamk_special (StreamK, Special).
"""
from __future__ import annotations

from pyto.chip import Chip

from .conditions import Problem
from .cost_asw import _asw, _to_matmul
from .cost_batch import _iter, _merge
from .cost_pipes import Estimate
from .cost_streamk_special import _special, _stream
from .memo import memoised
from .tilings import (AswTiling, IterBatchTiling, MergeBatchTiling, SpecialTiling, StreamKTiling, Tiling,
                      ToMatmulTiling)


# The model's resolution: estimates closer than this (relative) do not order the emulated times, so the seed's
# own preferences decide between them (the price order of branches, the tile rules of ASW 4). 3%: the median
# |error| against the emulator over benchmarks/bmm_planner.py's suite is 2.1-2.7% (2026-11-30).
RESOLUTION = 0.03


def roofline_us(p: Problem, chip: Chip) -> float:
    """max(FLOPs / peak, compulsory bytes / GM bandwidth): no plan can beat it."""
    return max(p.flops / chip.peak_flops(p.dtype), p.compulsory_bytes / (chip.gm_bandwidth_gbs * 1e9)) * 1e6


_MODELS = {AswTiling: _asw, ToMatmulTiling: _to_matmul, IterBatchTiling: _iter, MergeBatchTiling: _merge,
           StreamKTiling: _stream, SpecialTiling: _special}


@memoised(16384, key=lambda p, tiling, chip: (p, tiling, id(chip)), keep=lambda p, tiling, chip: chip)
def estimate(p: Problem, tiling: Tiling, chip: Chip) -> Estimate:
    """The analytic time of running `tiling` on `p` (branch given by the tiling's type); memoised (memo.py)."""
    return _MODELS[type(tiling)](tiling, p, chip).finish()
