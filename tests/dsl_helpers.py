"""DSL pieces the test kernels share (called from inside a @pl.kernel, so tracing sees them), and line_of."""
import inspect

import pyto.language as pl


def matmul_tiles(m, k, n, dtype):
    """The L1, L0A/L0B and L0C (fp32) tiles of one [m, k] @ [k, n] product: a_l1, b_l1, a_l0a, b_l0b, c_l0c."""
    a_l1 = pl.alloc(pl.L1, [m, k], dtype)
    b_l1 = pl.alloc(pl.L1, [k, n], dtype)
    a_l0a = pl.alloc(pl.L0A, [m, k], dtype)
    b_l0b = pl.alloc(pl.L0B, [k, n], dtype)
    c_l0c = pl.alloc(pl.L0C, [m, n], pl.DT_FP32)
    return a_l1, b_l1, a_l0a, b_l0b, c_l0c


def matmul_from_gm(tiles, a, a_offsets, b, b_offsets, **matmul_kw):
    """GM -> L1 -> L0 for both operands of `tiles` (matmul_tiles), then one pl.matmul into its L0C tile."""
    a_l1, b_l1, a_l0a, b_l0b, c_l0c = tiles
    pl.load(a_l1, a, a_offsets)
    pl.load(b_l1, b, b_offsets)
    pl.move(a_l0a, a_l1)
    pl.move(b_l0b, b_l1)
    pl.matmul(c_l0c, a_l0a, b_l0b, **matmul_kw)


def line_of(kernel, text: str) -> int:
    """The file line number of the (unique) line of `kernel`'s source containing `text`."""
    lines, start = inspect.getsourcelines(kernel.fn)
    hits = [start + i for i, ln in enumerate(lines) if text in ln]
    assert len(hits) == 1, (text, hits)
    return hits[0]
