"""A double-buffered multi-core matmul: the classic L1/L0 ping-pong K loop (CATLASS style).

Shapes: a [M, K] @ b [K, N] -> out [M, N]; any M, N, K. Edge tiles are tails, handled PyPTO-Pro's way
(docs/zh/pypto_pro/tutorials/operator_development/tile_based_python_programming/tail_block_handling.md):
before each load the kernel sets the valid shape of the L1 tiles to the part of the block inside the tensor (a
GM access past the edge is an OutOfBoundsError), the L0 tiles it moves into to the same [rows, K] / [K, cols] (a
move covers its destination's valid region), and the Acc tile to [rows, cols] (the MMAD computes the operands'
valid M x K x N, the store moves the Acc's valid region). The bytes around the valid regions keep what they held
and are never read. Output tiles are dealt round-robin to blocks; each block runs the K loop with L1 and L0 rings
of two, accumulates in one of two L0C tiles while Fixpipe drains the other.
"""
from __future__ import annotations

import pyto.language as pl


@pl.kernel
def matmul_pingpong(a, b, out, *, TM: int = 128, TN: int = 128, TK: int = 64, STAGES: int = 2):
    M, K = a.shape
    K2, N = b.shape
    assert K == K2 and tuple(out.shape) == (M, N), f"a {a.shape} @ b {b.shape} -> out {out.shape}"
    dt = a.dtype
    a_l1 = pl.alloc(pl.L1, [TM, TK], dt, buffers=STAGES)
    b_l1 = pl.alloc(pl.L1, [TK, TN], dt, buffers=STAGES)
    a_l0a = pl.alloc(pl.L0A, [TM, TK], dt, buffers=STAGES)
    b_l0b = pl.alloc(pl.L0B, [TK, TN], dt, buffers=STAGES)
    c_l0c = pl.alloc(pl.L0C, [TM, TN], dt.acc, buffers=2)
    tiles = [(m, n) for m in range(0, M, TM) for n in range(0, N, TN)]
    with pl.section_cube():
        for t in pl.range(pl.get_block_idx(), len(tiles), pl.get_block_num()):
            m0, n0 = tiles[t]
            rows, cols = min(M - m0, TM), min(N - n0, TN)      # the tile's valid rows and columns
            c = c_l0c.next()
            pl.set_validshape(c, [rows, cols])     # a ring slot keeps its valid shape until set again: set it each time
            for k in pl.range(0, K, TK):
                depth = min(K - k, TK)             # the step's valid K
                a1, b1 = a_l1.next(), b_l1.next()
                pl.set_validshape(a1, [rows, depth])
                pl.set_validshape(b1, [depth, cols])
                pl.load(a1, a, [m0, k])
                pl.load(b1, b, [k, n0])
                a0, b0 = a_l0a.next(), b_l0b.next()
                pl.set_validshape(a0, [rows, depth])
                pl.set_validshape(b0, [depth, cols])
                pl.move(a0, a1)
                pl.move(b0, b1)
                if k == 0:
                    pl.matmul(c, a0, b0)
                else:
                    pl.matmul_acc(c, c, a0, b0)
            pl.store(out, c, [m0, n0])
