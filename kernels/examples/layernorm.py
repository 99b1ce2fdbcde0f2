"""Layer normalisation of each row on many AIVs: y = (x - mean) * rsqrt(var + eps) * gamma + beta.

Shapes: x, y [rows, cols], gamma, beta [1, cols]; fp16, bf16 or fp32 (one kernel per dtype and eps:
`layernorm_kernel(dtype, eps)`); any rows >= 1, 1 <= cols <= MAX_COLS. mean and var are each row's mean and
population variance (divided by cols). An AIV-only kernel: `layernorm_kernel(pl.DT_FP16)[None, n](x, gamma, beta,
y)` runs on n AIVs.

How it is written (PyPTO-Pro's documented patterns, in pyto's own words; the work split, tails, double buffering
and fp32 compute as in softmax.py, whose docstring says why):
- Row statistics: `pl.sum(col, src, tmp, dim=0)` writes each row's sum into a [ROWS, 1] DN column (sum.md). The
  scalar steps on those sums (/ cols, + eps, rsqrt) are elementwise ops, which read rows: they go through the ND
  [1, ROWS] view of the column's bytes, a second tile declared at the same UB address (the dual views of
  CV_fused_operator_quick_start.md), whose valid shape is [1, rows of this block] so that no stale or never-written
  entry of a tail block is touched. The two views are used on V only, where program order orders them.
- Centring and scaling by row: `pl.expand_sub(..., mean, dim=0)` and `pl.expand_mul(..., rstd, dim=0)` broadcast the
  DN column along each row (math_functions/expand_sub.md, expand_mul.md).
- gamma and beta by column: [1, cols] rows broadcast down the columns with dim=1. PyPTO-Pro has no expand_add
  (math_functions/: expand_max, min, mul, sub, div), so beta is negated once per AIV and subtracted: x - (-beta)
  is x + beta to the bit (negation is exact), as PyPTO-Pro's own layernorm test does (python/tests/st/pypto_pro/
  frontend/tile_vector/test_layernorm.py). gamma and -beta are loaded (and widened) once per AIV, before its loop.
- rsqrt (math_functions/rsqrt.md) of var + eps, one value per row; pyto's model of it: vector_effects.py.

UB per AIV (248 KB on the 950): inputs and outputs 2 x ROWS x MAX_COLS x dtype each, for fp16 / bf16 an fp32 work
tile, the squares and the reductions' tmp (fp32), gamma and beta rows, two columns: 161 KB (fp16 / bf16), 193 KB
(fp32).
"""
import functools

from pyto.errors import ShapeError
import pyto.language as pl

from .softmax import COL_BYTES, MAX_COLS, ROWS, vec_tile

EPS = 1e-5


@functools.lru_cache(maxsize=None)
def layernorm_kernel(dtype=pl.DT_FP16, eps: float = EPS) -> pl.JitKernel:
    """The layernorm kernel for fp16, bf16 or fp32 tensors x, y [rows, cols] and gamma, beta [1, cols]."""
    if dtype not in (pl.DT_FP16, pl.DT_BF16, pl.DT_FP32):
        raise ShapeError(f"layernorm_kernel computes fp16, bf16 or fp32 tensors, not {dtype!r}")
    widen = dtype is not pl.DT_FP32                 # fp16 / bf16: computed in fp32 tiles
    slot = ROWS * MAX_COLS * dtype.itemsize
    slot32 = ROWS * MAX_COLS * 4
    row = MAX_COLS * dtype.itemsize                 # one [1, MAX_COLS] row in the tensors' dtype
    row32 = MAX_COLS * 4
    x_ub = 0x0                                      # two input slots
    y_ub = x_ub + 2 * slot                          # two output slots
    work_ub = y_ub + 2 * slot                       # the fp32 copy of a block (fp16 / bf16 only)
    sq_ub = work_ub + (slot32 if widen else 0)      # the squares of the centred block
    tmp_ub = sq_ub + slot32                         # the reductions' tmp
    gamma_ub = tmp_ub + slot32                      # gamma as loaded (fp16 / bf16 only)
    beta_ub = gamma_ub + (row if widen else 0)      # beta as loaded (fp16 / bf16 only)
    gamma32_ub = beta_ub + (row if widen else 0)    # gamma in fp32
    nbeta32_ub = gamma32_ub + row32                 # -beta in fp32
    mean_ub = nbeta32_ub + row32                    # each row's mean (DN column and its ND view)
    rstd_ub = mean_ub + COL_BYTES                   # each row's rsqrt(var + eps) (DN column and its ND view)

    @pl.jit(auto_mutex=True, name=f"layernorm_{dtype.name}")
    def layernorm(x: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], dtype], gamma: pl.Tensor[[1, pl.DYNAMIC], dtype],
                  beta: pl.Tensor[[1, pl.DYNAMIC], dtype], y: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], dtype]):
        rows, cols = x.shape[0], x.shape[1]
        assert tuple(y.shape) == (rows, cols), f"y {list(y.shape)} must be x's shape {[rows, cols]}"
        assert gamma.shape[1] == cols and beta.shape[1] == cols, \
            f"gamma {list(gamma.shape)} and beta {list(beta.shape)} must be [1, {cols}]"
        assert 1 <= cols <= MAX_COLS, f"layernorm rows are 1..{MAX_COLS} wide (one tile), x has {cols} columns"
        block = vec_tile([ROWS, MAX_COLS], dtype)
        block32 = vec_tile([ROWS, MAX_COLS], pl.DT_FP32)
        x_in = pl.make_tile_group(type=block, addrs=x_ub, mutex_ids=[0, 1])
        y_out = pl.make_tile_group(type=block, addrs=y_ub, mutex_ids=[2, 3])
        work = pl.make_tile_group(type=block32, addrs=work_ub, mutex_ids=[4])
        sq = pl.make_tile_group(type=block32, addrs=sq_ub, mutex_ids=[5])
        tmp = pl.make_tile_group(type=block32, addrs=tmp_ub, mutex_ids=[6])
        gamma_in = pl.make_tile_group(type=vec_tile([1, MAX_COLS], dtype), addrs=gamma_ub, mutex_ids=[7])
        beta_in = pl.make_tile_group(type=vec_tile([1, MAX_COLS], dtype), addrs=beta_ub, mutex_ids=[8])
        gamma32 = pl.make_tile_group(type=vec_tile([1, MAX_COLS], pl.DT_FP32), addrs=gamma32_ub, mutex_ids=[9])
        nbeta32 = pl.make_tile_group(type=vec_tile([1, MAX_COLS], pl.DT_FP32), addrs=nbeta32_ub, mutex_ids=[10])
        column = vec_tile([ROWS, 1], pl.DT_FP32, layout=pl.DN)       # one value per row, for expand_* dim=0
        column_nd = vec_tile([1, ROWS], pl.DT_FP32)                  # the same bytes, for elementwise ops
        mean = pl.make_tile_group(type=column, addrs=mean_ub, mutex_ids=[11])
        mean_nd = pl.make_tile_group(type=column_nd, addrs=mean_ub, mutex_ids=[12])
        rstd = pl.make_tile_group(type=column, addrs=rstd_ub, mutex_ids=[13])
        rstd_nd = pl.make_tile_group(type=column_nd, addrs=rstd_ub, mutex_ids=[14])

        with pl.section_vector():
            aiv, aivs = pl.get_block_idx(), pl.get_block_num()
            blocks = (rows + ROWS - 1) // ROWS
            if aiv < blocks:                                   # an AIV with no rows loads no gamma either
                g, nb = gamma32.current(), nbeta32.current()
                pl.set_validshape(g, [1, cols])
                pl.set_validshape(nb, [1, cols])
                if widen:
                    g_in, b_in = gamma_in.current(), beta_in.current()
                    pl.set_validshape(g_in, [1, cols])
                    pl.set_validshape(b_in, [1, cols])
                    pl.load(g_in, gamma, [0, 0])
                    pl.load(b_in, beta, [0, 0])
                    pl.cast(g, g_in, mode=pl.RoundMode.CAST_RINT)           # exact: widening
                    pl.cast(nb, b_in, mode=pl.RoundMode.CAST_RINT)
                else:
                    pl.load(g, gamma, [0, 0])
                    pl.load(nb, beta, [0, 0])
                pl.neg(nb, nb)                                 # -beta: there is no expand_add

            for b in pl.range(aiv, blocks, aivs):
                r0 = b * ROWS
                valid_rows = pl.min(ROWS, rows - r0)
                xs, ys = x_in.next(), y_out.next()
                s, t = sq.current(), tmp.current()
                mu, mu_nd, rs, rs_nd = mean.current(), mean_nd.current(), rstd.current(), rstd_nd.current()
                for tile in (xs, ys, s, t):
                    pl.set_validshape(tile, [valid_rows, cols])
                for tile in (mu, rs):
                    pl.set_validshape(tile, [valid_rows, 1])
                for tile in (mu_nd, rs_nd):
                    pl.set_validshape(tile, [1, valid_rows])
                pl.load(xs, x, [r0, 0])
                if widen:
                    xc = work.current()
                    pl.set_validshape(xc, [valid_rows, cols])
                    pl.cast(xc, xs, mode=pl.RoundMode.CAST_RINT)            # exact: fp16 / bf16 -> fp32
                else:
                    xc = xs                                    # centred in place
                out = xc if widen else ys
                pl.sum(mu, xc, t, dim=0)
                pl.div(mu_nd, mu_nd, float(cols))              # mean (through the ND view)
                pl.expand_sub(xc, xc, mu, dim=0)               # x - mean
                pl.mul(s, xc, xc)
                pl.sum(rs, s, t, dim=0)
                pl.div(rs_nd, rs_nd, float(cols))              # var
                pl.add(rs_nd, rs_nd, eps)
                pl.rsqrt(rs_nd, rs_nd)                         # 1 / sqrt(var + eps)
                pl.expand_mul(out, xc, rs, dim=0)
                pl.expand_mul(out, out, g, dim=1)              # * gamma, down the columns
                pl.expand_sub(out, out, nb, dim=1)             # - (-beta) = + beta
                if widen:
                    pl.cast(ys, out, mode=pl.RoundMode.CAST_RINT)           # one rounding to the output dtype
                pl.store(y, ys, [r0, 0])
    return layernorm
