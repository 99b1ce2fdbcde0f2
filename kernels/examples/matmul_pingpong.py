"""A double-buffered multi-core matmul: the classic L1/L0 ping-pong K loop (CATLASS style).

Shapes: a [M, K] @ b [K, N] -> out [M, N]; any M, N, K (edge tiles are clipped on GM and zero-padded
on chip). Output tiles are dealt round-robin to blocks; each block runs the K loop with L1 and L0
rings of two, accumulates in one of two L0C tiles while Fixpipe drains the other.
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
            c = c_l0c.next()
            for k in pl.range(0, K, TK):
                a1, b1 = a_l1.next(), b_l1.next()
                pl.load(a1, a, [m0, k])
                pl.load(b1, b, [k, n0])
                a0, b0 = a_l0a.next(), b_l0b.next()
                pl.move(a0, a1)
                pl.move(b0, b1)
                if k == 0:
                    pl.matmul(c, a0, b0)
                else:
                    pl.matmul_acc(c, c, a0, b0)
            pl.store(out, c, [m0, n0])
