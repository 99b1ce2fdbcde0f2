"""Special (docs/bmm_branches.md §9): K = 0 and K = 1 on the AIVs (the vector path), no cube.

* K = 0 ("fill"): C = bias (broadcast down the rows) or 0. Each AIV fills one UB tile — zeros by
  `expands`, or 0 - (-bias) down the rows by `expand_sub(dim=1)` from a zero tile (PyPTO-Pro has no
  expand_add; the bias row is negated in place first; 0 - (-b) is 0 + b bit for bit; rebuilt only when
  the bias batch or the column block changes) — and stores it to every output tile it owns (MTE3).
* K = 1 ("outer"): C[b] = A[b][:, 0:1] * B[b][0:1, :] (+ bias). K = 1 makes A's single column and B's
  single row contiguous in GM whatever the transpose flags, so both are read as rows ([*, 1, M] and
  [*, 1, N] views, no data moved). Per UB tile of rows x cols: the A column comes in by one transposed
  GM->UB load into a [rows, 1] DN column (one burst), the B row and bias row by row loads; then, in the
  compute dtype (fp32; int32 for int8 inputs, so int8 x int8 + int32 bias is exact like numpy's):
      prod = ones * b_row   (expand_mul, dim=1)     every row = B's row (1 x b is b exactly)
      prod = prod * a_col   (expand_mul, dim=0)     row r scaled by A[r]
      prod = prod - (-bias) (neg, expand_sub dim=1) when there is a bias: PyPTO-Pro has no expand_add, and
                                                    x - (-b) is x + b bit for bit (int32: mod 2^32 too)
      out  = cast(prod)                             fp16/bf16 outputs (CAST_RINT); fp32 and int32 store prod
  Tiles are rings of `ub_buffers` so the next tile's loads and the previous tile's store overlap the
  vector work (the framework's auto-sync orders the reuse).
* an empty output: nothing to run (a launch with no instructions).

Work split: UB tile u = (batch, row block, column block) goes to AIV u mod aivs. The kernels are AIV-only
(PyPTO-Pro's kind with no cube section): the launch's block_dim counts AIVs, each is a block of its own and
pl.get_block_idx() is its index.

UB fit: the kernel's own allocations (the ones tile, the product and output rings; `ub_bytes` still counts
a [rows, 1] column at a 32B row per element, as the ND column it was: the DN column takes less, so the count
is an upper bound) can exceed the planner's estimate of a tile's bytes; `fit` then
lowers the rows (and if need be the columns) of the tiling's tile until they fit, and recounts the tiles
and AIVs.
"""
from __future__ import annotations

from dataclasses import dataclass

import pyto
import pyto.language as pl
from pyto.dtypes import DType
from pyto.errors import PlanError

from .common import batch_offsets, Operands, prod
from .conditions import FRACTAL_BYTES, align_down, align_up, cdiv

COL_ALIGN = FRACTAL_BYTES     # column blocks and views: multiples of 32 elements sit on every dtype's UB grid


def compute_dtype(dtype: DType) -> DType:
    """The vector compute dtype: fp32, or int32 for int8 inputs (exact products and bias)."""
    return DType.int32 if dtype is DType.int8 else DType.fp32


def _ub(rows: int, cols: int, dt: DType) -> int:
    """UB bytes of a [rows, cols] tile as pl.alloc charges it: ND rows padded to 32 bytes."""
    per = FRACTAL_BYTES // dt.itemsize
    return rows * align_up(cols, per) * dt.itemsize


def ub_bytes(mode: str, rows: int, cols: int, dtype: DType, out_dtype: DType, bias: bool, buffers: int) -> int:
    """UB bytes one AIV allocates in `special_outer_kernel` / `special_fill_kernel` for this tile."""
    cdt, acc = compute_dtype(dtype), dtype.acc
    if mode == "fill":
        if not bias:
            return _ub(rows, cols, out_dtype)
        use = (buffers + 1) * _ub(rows, cols, out_dtype)               # the fill ring and the zero tile
        return use + buffers * (_ub(1, cols, acc) + (_ub(1, cols, out_dtype) if out_dtype is not acc else 0))
    use = _ub(rows, cols, cdt) + buffers * (_ub(rows, 1, cdt) + _ub(1, cols, cdt) + _ub(rows, cols, cdt))
    if dtype is not cdt:
        use += buffers * (_ub(rows, 1, dtype) + _ub(1, cols, dtype))
    if bias:
        use += buffers * _ub(1, cols, cdt)
    if out_dtype is not cdt:
        use += buffers * _ub(rows, cols, out_dtype)
    return use


@dataclass(frozen=True)
class Launch:
    """What the kernel runs with: the (fitted) UB tile, the tile count and the AIVs and blocks used."""

    mode: str
    rows: int
    cols: int
    buffers: int
    units: int
    aivs: int
    blocks: int
    ub: int


def fit(plan, ops: Operands) -> Launch:
    """The tiling's UB tile, lowered until the kernel's allocations fit one AIV's UB."""
    p, t = plan.problem, plan.tiling
    chip = plan.chip_spec or pyto.load_chip(plan.chip)
    if t.mode == "empty":
        return Launch("empty", 0, 0, 0, 0, 0, 1, 0)
    cap, nbuf = chip.buffers["UB"], max(1, t.ub_buffers)

    def need(r: int, c: int) -> int:
        return ub_bytes(t.mode, r, c, p.dtype, ops.out_dtype, ops.has_bias, nbuf)

    while nbuf > 2 and need(t.rows, t.cols) > cap:     # extra copies first, then the tile itself
        nbuf -= 1
    cols = t.cols
    while need(1, cols) > cap and cols > COL_ALIGN:
        cols = max(COL_ALIGN, align_down(cols // 2, COL_ALIGN))
    if need(1, cols) > cap:
        raise PlanError(f"special: even a 1 x {cols} tile needs {need(1, cols)} B > UB {cap} B")
    lo, hi = 1, max(1, t.rows)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if need(mid, cols) <= cap else (lo, mid - 1)
    rows = cdiv(p.M, cdiv(p.M, lo))                   # balanced row blocks
    units = p.batch * cdiv(p.M, rows) * cdiv(p.N, cols)
    aivs = min(units, chip.aiv)
    return Launch(t.mode, rows, cols, nbuf, units, aivs, cdiv(aivs, chip.aiv_per_aic), need(rows, cols))


# ---- the kernels ---------------------------------------------------------------------------------------
def _tile(u: int, M: int, N: int, rows: int, cols: int) -> tuple:
    """Tile u -> (flat batch, r0, c0, rows here, column view): the view ends on the 32-element grid or
    at the tile's edge; its valid columns (`_cols`) stop at N, which loads and stores move."""
    tm, tn = cdiv(M, rows), cdiv(N, cols)
    flat, rest = divmod(u, tm * tn)
    i, j = divmod(rest, tn)
    r0, c0 = i * rows, j * cols
    return flat, r0, c0, min(rows, M - r0), min(cols, align_up(N - c0, COL_ALIGN))


def _cols(view, cols: int):
    """`view` with its valid columns set to `cols` (an edge tile's part inside N; the whole view elsewhere)."""
    if cols != view.shape[1]:
        pl.set_validshape(view, [view.shape[0], cols])
    return view


@pl.kernel
def special_outer_kernel(a, b, bias, out, *, ROWS: int, COLS: int, BUFFERS: int, AIVS: int, BIAS: bool = False):
    """K = 1: out [*batch, M, N] = a as a column (* b as a row) (+ bias).

    a [*a_batch, 1, M]: A's only column, as a row; b [*b_batch, 1, N]: B's only row; bias
    [*bias_batch, 1, N] in the compute dtype (used when BIAS). Batch dims of 1 broadcast.
    """
    batch = tuple(out.shape[:-2])
    M, N = out.shape[-2], out.shape[-1]
    assert a.shape[-2:] == (1, M) and b.shape[-2:] == (1, N), f"a {a.shape}, b {b.shape} vs out {out.shape}"
    dt, odt = a.dtype, out.dtype
    cdt = compute_dtype(dt)
    ones_ub = pl.alloc(pl.UB, [ROWS, COLS], cdt)
    a_ub = pl.alloc(pl.UB, [ROWS, 1], dt, layout=pl.DN, buffers=BUFFERS) if dt is not cdt else None
    b_ub = pl.alloc(pl.UB, [1, COLS], dt, buffers=BUFFERS) if dt is not cdt else None
    a_col_ub = pl.alloc(pl.UB, [ROWS, 1], cdt, layout=pl.DN, buffers=BUFFERS)
    b_row_ub = pl.alloc(pl.UB, [1, COLS], cdt, buffers=BUFFERS)
    bias_ub = pl.alloc(pl.UB, [1, COLS], cdt, buffers=BUFFERS) if BIAS else None
    prod_ub = pl.alloc(pl.UB, [ROWS, COLS], cdt, buffers=BUFFERS)
    out_ub = pl.alloc(pl.UB, [ROWS, COLS], odt, buffers=BUFFERS) if odt is not cdt else None
    with pl.section_vector():
        aiv = pl.get_block_idx()          # an AIV-only kernel: every AIV is a block of its own
        if aiv < AIVS:
            pl.expands(ones_ub, 1)
            for u in pl.range(aiv, prod(batch) * cdiv(M, ROWS) * cdiv(N, COLS), AIVS):
                flat, r0, c0, r, cv = _tile(u, M, N, ROWS, COLS)
                a_bat = batch_offsets(flat, batch, tuple(a.shape[:-2]))
                b_bat = batch_offsets(flat, batch, tuple(b.shape[:-2]))
                vc = min(cv, N - c0)              # the valid columns
                a_col = a_col_ub.next()[0:r, 0:1]
                b_row = _cols(b_row_ub.next()[0:1, 0:cv], vc)
                if a_ub is not None:
                    a_in = a_ub.next()[0:r, 0:1]
                    pl.load(a_in, a, [*a_bat, 0, r0], order=[-1, -2])
                    pl.cast(a_col, a_in, mode=pl.RoundMode.CAST_RINT)     # widening: exact
                    b_in = _cols(b_ub.next()[0:1, 0:cv], vc)
                    pl.load(b_in, b, [*b_bat, 0, c0])
                    pl.cast(b_row, b_in, mode=pl.RoundMode.CAST_RINT)
                else:
                    pl.load(a_col, a, [*a_bat, 0, r0], order=[-1, -2])
                    pl.load(b_row, b, [*b_bat, 0, c0])
                c_ub = _cols(prod_ub.next()[0:r, 0:cv], vc)
                pl.expand_mul(c_ub, ones_ub[0:r, 0:cv], b_row, dim=1)
                pl.expand_mul(c_ub, c_ub, a_col, dim=0)
                if BIAS:
                    bias_row = _cols(bias_ub.next()[0:1, 0:cv], vc)
                    pl.load(bias_row, bias, [*batch_offsets(flat, batch, tuple(bias.shape[:-2])), 0, c0])
                    pl.neg(bias_row, bias_row)
                    pl.expand_sub(c_ub, c_ub, bias_row, dim=1)
                res = c_ub
                if out_ub is not None:
                    res = _cols(out_ub.next()[0:r, 0:cv], vc)
                    pl.cast(res, c_ub, mode=pl.RoundMode.CAST_RINT)
                pl.store(out, res, [*batch_offsets(flat, batch, batch), r0, c0])


@pl.kernel
def special_fill_kernel(bias, out, *, ROWS: int, COLS: int, BUFFERS: int, AIVS: int, BIAS: bool = False):
    """K = 0: out [*batch, M, N] = bias [*bias_batch, 1, N] broadcast down the rows (BIAS), else 0."""
    batch = tuple(out.shape[:-2])
    M, N = out.shape[-2], out.shape[-1]
    odt, acc = out.dtype, bias.dtype
    fill_ub = pl.alloc(pl.UB, [ROWS, COLS], odt, buffers=BUFFERS if BIAS else 1)
    zeros_ub = pl.alloc(pl.UB, [ROWS, COLS], odt) if BIAS else None
    bias_ub = pl.alloc(pl.UB, [1, COLS], acc, buffers=BUFFERS) if BIAS else None
    bias_out_ub = pl.alloc(pl.UB, [1, COLS], odt, buffers=BUFFERS) if BIAS and odt is not acc else None
    with pl.section_vector():
        aiv = pl.get_block_idx()          # an AIV-only kernel: every AIV is a block of its own
        if aiv < AIVS:
            pl.expands(zeros_ub if BIAS else fill_ub, 0)
            built = None                            # (bias batch, c0) of the fill tile now in UB
            for u in pl.range(aiv, prod(batch) * cdiv(M, ROWS) * cdiv(N, COLS), AIVS):
                flat, r0, c0, r, cv = _tile(u, M, N, ROWS, COLS)
                vc = min(cv, N - c0)              # the valid columns
                if BIAS:
                    bias_bat = batch_offsets(flat, batch, tuple(bias.shape[:-2]))
                    if built != (tuple(bias_bat), c0):
                        bias_row = _cols(bias_ub.next()[0:1, 0:cv], vc)
                        pl.load(bias_row, bias, [*bias_bat, 0, c0])
                        if bias_out_ub is not None:
                            row = _cols(bias_out_ub.next()[0:1, 0:cv], vc)
                            pl.cast(row, bias_row, mode=pl.RoundMode.CAST_RINT)
                            bias_row = row
                        pl.neg(bias_row, bias_row)
                        pl.expand_sub(_cols(fill_ub.next()[:, 0:cv], vc), zeros_ub[:, 0:cv], bias_row, dim=1)
                        built = (tuple(bias_bat), c0)
                pl.store(out, _cols(fill_ub.current()[0:r, 0:cv], vc), [*batch_offsets(flat, batch, batch), r0, c0])


@pl.kernel
def special_empty_kernel(out):
    """An empty output: nothing to compute or write."""


# ---- launch ----------------------------------------------------------------------------------------------
def _row_view(x, batch_dims: tuple, n: int):
    """A [*, n, 1] or [*, 1, n] operand (one column or row: contiguous) seen as the row [*, 1, n]."""
    shape = tuple(batch_dims) + (1, n)
    if isinstance(x, pyto.Spec):
        return pyto.spec(shape, x.dtype)
    return x.reshape(shape)


def launch(plan, ops: Operands, *, mode: str) -> pyto.Report:
    """Run the Special branch (the launch convention of kernels/bmm/common.py)."""
    p = plan.problem
    chip = plan.chip_spec or plan.chip
    lc = fit(plan, ops)
    if lc.mode == "empty":
        return pyto.run(special_empty_kernel, ops.out, chip=chip, blocks=1, mode=mode)
    params = dict(ROWS=lc.rows, COLS=lc.cols, BUFFERS=lc.buffers, AIVS=lc.aivs, BIAS=ops.has_bias)
    if lc.mode == "fill":
        return pyto.run(special_fill_kernel, ops.bias, ops.out, chip=chip, blocks=lc.aivs, mode=mode, **params)
    a = _row_view(ops.a, tuple(ops.a.shape[:-2]), p.M)
    b = _row_view(ops.b, tuple(ops.b.shape[:-2]), p.N)
    return pyto.run(special_outer_kernel, a, b, ops.bias, ops.out, chip=chip, blocks=lc.aivs, mode=mode, **params)
