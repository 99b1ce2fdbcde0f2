"""Row softmax on many AIVs: y[i, :] = exp(x[i, :] - max_j x[i, j]) / sum_j exp(x[i, j] - max_j x[i, j]).

Shapes: x, y [rows, cols], fp16, bf16 or fp32 (one kernel per dtype: `softmax_kernel(dtype)`); any rows >= 1,
1 <= cols <= MAX_COLS. An AIV-only kernel: launch it as `softmax_kernel(pl.DT_FP16)[None, n](x, y)` for n AIVs.

How it is written (PyPTO-Pro's documented patterns, in pyto's own words):
- Work split (multi_core_partitioning_and_Tiling.md): the rows are cut into blocks of ROWS; AIV `pl.get_block_idx()`
  takes blocks idx, idx + n, idx + 2n, ... of the `pl.get_block_num()` = n AIVs, so their loads differ by one block
  at most and no AIV needs a branch of its own.
- Tails (tail_block_handling.md): every tile is MAX_COLS wide and declared `valid_shape=[-1, -1]`; before each load
  the kernel sets the valid shape of every tile it will touch to [rows of this block, cols], so the load, the
  vector ops and the store move and compute only that corner. Rows and columns need not be multiples of 16 (nor of a
  32-byte block). No fillpad: the reductions iterate their source's valid region, so the bytes around it (stale from
  an earlier block, or never written) are never read.
- Row reductions (math_functions/max.md, sum.md): `pl.maximum(col, src, tmp, dim=0)` and `pl.sum(..., dim=0)` write
  one value per row into a [ROWS, 1] column declared `layout=pl.DN`; `pl.expand_sub` / `pl.expand_div` with
  dim=0 broadcast that column along each row (math_functions/expand_sub.md, expand_div.md).
- Numerics: computed in fp32 (exp takes fp16/fp32 only, and a bf16 or fp16 exponent sum loses the small terms); an
  fp16 / bf16 block is widened exactly into a work tile first and the result rounded once, to nearest even, on the
  way out (type_conversion/cast.md, CAST_RINT). pyto's numerics model of each op: pyto/emulator/data/vector_effects.py.
- Double buffering: the input and output tiles are two-slot tile groups under `auto_mutex` (make_tile_group.md,
  Add_operator_quick_start.md): while V computes block i in slot A, MTE2 loads block i + 1 into slot B and MTE3
  drains block i - 1 from the other output slot. auto_mutex, not hand-written flags, because each slot's mutex id
  is exactly the ownership the pipeline needs (MTE2 -> V -> MTE2 on an input slot, V -> MTE3 -> V on an output
  slot, both directions): by hand that is four sync_src/sync_dst pairs per slot pair plus the pre-set flags of the
  first round and the drained ones of the last, and a pair missed there is silently wrong data on the device
  (pyto would report it as a RaceError). The single-slot work, tmp and column tiles are touched on V alone, where
  program order orders them.

UB per AIV (248 KB on the 950): inputs 2 x ROWS x MAX_COLS x dtype, outputs the same, an fp32 work tile (fp16 /
bf16 only), the reductions' tmp (fp32) and a 64-byte column: 128 KB for fp16 / bf16, 160 KB for fp32.
"""

import functools

from pyto.errors import ShapeError
import pyto.language as pl

ROWS = 16          # rows of x one tile holds: a block of rows, the unit dealt to the AIVs
MAX_COLS = 512     # the widest row a tile holds (cols may be anything from 1 to this)
COL_BYTES = 64     # a [ROWS, 1] fp32 column, rounded up to the 32-byte grid


def vec_tile(shape: list, dtype, **kw) -> pl.TileType:
    """A UB tile type whose valid shape the kernel sets at run time (valid_shape=[-1, -1])."""
    return pl.TileType(shape=shape, dtype=dtype, target_memory=pl.MemorySpace.Vec, valid_shape=[-1, -1], **kw)


@functools.lru_cache(maxsize=None)
def softmax_kernel(dtype=pl.DT_FP16) -> pl.JitKernel:
    """The row-softmax kernel for fp16, bf16 or fp32 tensors x and y [rows, cols] (cols <= MAX_COLS)."""
    if dtype not in (pl.DT_FP16, pl.DT_BF16, pl.DT_FP32):
        raise ShapeError(f"softmax_kernel computes fp16, bf16 or fp32 tensors, not {dtype!r}")
    widen = dtype is not pl.DT_FP32                 # fp16 / bf16: computed in an fp32 work tile
    slot = ROWS * MAX_COLS * dtype.itemsize         # bytes of one input or output slot
    slot32 = ROWS * MAX_COLS * 4
    x_ub = 0x0                                      # two input slots
    y_ub = x_ub + 2 * slot                          # two output slots
    work_ub = y_ub + 2 * slot                       # the fp32 copy of a block (fp16 / bf16 only)
    tmp_ub = work_ub + (slot32 if widen else 0)     # the reductions' tmp
    col_ub = tmp_ub + slot32                        # one value per row: the max, then the sum

    @pl.jit(auto_mutex=True, name=f"softmax_{dtype.name}")
    def softmax(x: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], dtype], y: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], dtype]):
        rows, cols = x.shape[0], x.shape[1]
        assert tuple(y.shape) == (rows, cols), f"y {list(y.shape)} must be x's shape {[rows, cols]}"
        assert 1 <= cols <= MAX_COLS, f"softmax rows are 1..{MAX_COLS} wide (one tile), x has {cols} columns"
        x_in = pl.make_tile_group(type=vec_tile([ROWS, MAX_COLS], dtype), addrs=x_ub, mutex_ids=[0, 1])
        y_out = pl.make_tile_group(type=vec_tile([ROWS, MAX_COLS], dtype), addrs=y_ub, mutex_ids=[2, 3])
        work = pl.make_tile_group(type=vec_tile([ROWS, MAX_COLS], pl.DT_FP32), addrs=work_ub, mutex_ids=[4])
        tmp = pl.make_tile_group(type=vec_tile([ROWS, MAX_COLS], pl.DT_FP32), addrs=tmp_ub, mutex_ids=[5])
        col = pl.make_tile_group(type=vec_tile([ROWS, 1], pl.DT_FP32, layout=pl.DN), addrs=col_ub, mutex_ids=[6])

        with pl.section_vector():
            aiv, aivs = pl.get_block_idx(), pl.get_block_num()
            blocks = (rows + ROWS - 1) // ROWS
            for b in pl.range(aiv, blocks, aivs):
                r0 = b * ROWS
                valid_rows = pl.min(ROWS, rows - r0)
                xs, ys, t, c = x_in.next(), y_out.next(), tmp.current(), col.current()
                for tile in (xs, ys, t):
                    pl.set_validshape(tile, [valid_rows, cols])
                pl.set_validshape(c, [valid_rows, 1])
                pl.load(xs, x, [r0, 0])
                if widen:
                    src = dst = work.current()
                    pl.set_validshape(src, [valid_rows, cols])
                    pl.cast(src, xs, mode=pl.RoundMode.CAST_RINT)       # exact: fp16 / bf16 -> fp32
                else:
                    src, dst = xs, ys
                pl.maximum(c, src, t, dim=0)                  # c = max of each row
                pl.expand_sub(dst, src, c, dim=0)             # x - max: every exponent <= 0
                pl.exp(dst, dst)
                pl.sum(c, dst, t, dim=0)                      # c = sum of each row's exponentials
                pl.expand_div(dst, dst, c, dim=0)
                if widen:
                    pl.cast(ys, dst, mode=pl.RoundMode.CAST_RINT)       # one rounding to the output dtype
                pl.store(y, ys, [r0, 0])
    return softmax
