"""Cube kernels whose L0C hand-over goes through the hardware unit_flag (matrix_computation/phase.md): a K-split
done right, and each of the page's misuse cases.

k_split: C = A @ B, K in three steps (AccPhase Partial, Partial, Final), one store with STPhase.Final: ok.
no_final_matmul (the page's case 1): a matmul with AccPhase.Partial never sets unit_flag, so the store with
STPhase.Final waits forever: DeadlockError. store_without_phase (case 2): the matmuls carry phases, the store none,
so neither the software sync nor unit_flag orders FIX after M: RaceError on L0C (the device reads a half-done
sum). partial_store_in_loop (case 3): in a loop, matmul Final then store Partial leaves unit_flag at 1 and the
second matmul waits for 0 forever: DeadlockError. final_never_read: the kernel ends with a Final result no store
with STPhase.Final released (unit_flag left at 1, which stalls the next kernel's first matmul): SyncError.
"""
import pytest

import pypto_pro.language as pl

TILE = 64
KS = 3 * TILE                   # k_split's K: three steps

pytestmark = pytest.mark.pyto_check(expect={"no_final_matmul": "DeadlockError", "store_without_phase": "RaceError",
                                            "partial_store_in_loop": "DeadlockError", "final_never_read": "SyncError"})

MAT = pl.TileType(shape=[TILE, TILE], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat)
LEFT = pl.TileType(shape=[TILE, TILE], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Left)
RIGHT = pl.TileType(shape=[TILE, TILE], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Right)
ACC = pl.TileType(shape=[TILE, TILE], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc, fractal=1024)


def _operands():
    """The tile groups of one [TILE, TILE] @ [TILE, TILE] step: L1 and L0A / L0B two slots each, one L0C tile."""
    return (pl.make_tile_group(type=MAT, addrs=0x00000, mutex_ids=[0, 1]),
            pl.make_tile_group(type=MAT, addrs=0x10000, mutex_ids=[2, 3]),
            pl.make_tile_group(type=LEFT, addrs=0x0, mutex_ids=[4, 5]),
            pl.make_tile_group(type=RIGHT, addrs=0x0, mutex_ids=[6, 7]),
            pl.make_tile_group(type=ACC, addrs=0x0, mutex_ids=[8]))


def _step(groups, a, b, k: int):
    """Load A's and B's K block k into the next slots and move them to L0A / L0B; returns (left, right)."""
    a_mat, b_mat, a_left, b_right, _ = groups
    al1, bl1, al, br = a_mat.next(), b_mat.next(), a_left.next(), b_right.next()
    pl.load(al1, a, [0, k])
    pl.load(bl1, b, [k, 0])
    pl.move(al, al1)
    pl.move(br, bl1)
    return al, br


@pl.jit(auto_mutex=True)
def k_split(a: pl.Tensor[[TILE, KS], pl.DT_FP16], b: pl.Tensor[[KS, TILE], pl.DT_FP16],
            c: pl.Tensor[[TILE, TILE], pl.DT_FP32]):
    groups = _operands()
    with pl.section_cube():
        pl.system.set_mm_layout_transform(enabled=True)       # the 950's rule for a K split in L0C
        ac = groups[4].current()
        for k in pl.range(0, KS, TILE):
            al, br = _step(groups, a, b, k)
            if k == 0:
                pl.matmul(ac, al, br, phase=pl.AccPhase.Partial)
            elif k < KS - TILE:
                pl.matmul_acc(ac, ac, al, br, phase=pl.AccPhase.Partial)
            else:
                pl.matmul_acc(ac, ac, al, br, phase=pl.AccPhase.Final)
        pl.store(c, ac, [0, 0], phase=pl.STPhase.Final)
        pl.system.set_mm_layout_transform(enabled=False)


@pl.jit(auto_mutex=True)
def no_final_matmul(a: pl.Tensor[[TILE, TILE], pl.DT_FP16], b: pl.Tensor[[TILE, TILE], pl.DT_FP16],
                    c: pl.Tensor[[TILE, TILE], pl.DT_FP32]):
    groups = _operands()
    with pl.section_cube():
        ac = groups[4].current()
        al, br = _step(groups, a, b, 0)
        pl.matmul(ac, al, br, phase=pl.AccPhase.Partial)       # should be Final: the only write
        pl.store(c, ac, [0, 0], phase=pl.STPhase.Final)


@pl.jit(auto_mutex=True)
def store_without_phase(a: pl.Tensor[[TILE, 2 * TILE], pl.DT_FP16], b: pl.Tensor[[2 * TILE, TILE], pl.DT_FP16],
                        c: pl.Tensor[[TILE, TILE], pl.DT_FP32]):
    groups = _operands()
    with pl.section_cube():
        pl.system.set_mm_layout_transform(enabled=True)
        ac = groups[4].current()
        for k in pl.range(0, 2 * TILE, TILE):
            al, br = _step(groups, a, b, k)
            if k == 0:
                pl.matmul(ac, al, br, phase=pl.AccPhase.Partial)
            else:
                pl.matmul_acc(ac, ac, al, br, phase=pl.AccPhase.Final)
        pl.store(c, ac, [0, 0])                                # no phase=pl.STPhase.Final
        pl.system.set_mm_layout_transform(enabled=False)


@pl.jit(auto_mutex=True)
def partial_store_in_loop(a: pl.Tensor[[TILE, 2 * TILE], pl.DT_FP16], b: pl.Tensor[[2 * TILE, TILE], pl.DT_FP16],
                          c: pl.Tensor[[TILE, TILE], pl.DT_FP32]):
    groups = _operands()
    with pl.section_cube():
        ac = groups[4].current()
        for k in pl.range(0, 2 * TILE, TILE):
            al, br = _step(groups, a, b, k)
            pl.matmul(ac, al, br, phase=pl.AccPhase.Final)
            pl.store(c, ac, [0, 0], phase=pl.STPhase.Partial)  # leaves unit_flag at 1 for the next matmul


@pl.jit(auto_mutex=True)
def final_never_read(a: pl.Tensor[[TILE, TILE], pl.DT_FP16], b: pl.Tensor[[TILE, TILE], pl.DT_FP16],
                     c: pl.Tensor[[TILE, TILE], pl.DT_FP32]):
    groups = _operands()
    with pl.section_cube():
        ac = groups[4].current()
        al, br = _step(groups, a, b, 0)
        pl.matmul(ac, al, br, phase=pl.AccPhase.Final)
        pl.store(c, ac, [0, 0], phase=pl.STPhase.Partial)      # the last read of L0C: should be Final
