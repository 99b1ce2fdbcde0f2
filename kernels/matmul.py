"""Tensor-level matmul (docs/tile_shapes.md style): C = A @ B (+ bias) on every AI core of the emulated chip.

`matmul(a, b, bias=None, *, chip=..., tile_shapes=None, ...)`: numpy in, numpy out. Tile shapes come from
`tile_shapes`, else from `pyto.set_cube_tile_shapes` (validated against docs/tile_shapes.md §6 for this dtype and
chip), else from `default_tile_shapes` below. `plan_matmul` turns them into the kernel's static
parameters (plan before trace); `matmul_kernel` walks this core's output tiles in the ASW swizzle order
and runs each through the shared pipeline of `kernels/bmm/block.py`.

Choices where the seeds leave room:
* mL0/nL0/kL0 are base_m/base_n/base_k (one L0C tile, one MMAD); mL1 x nL1 is the tile a core is dealt
  (the swizzle's grid) and kL1 the K depth of one GM->L1 load. When K <= kL1 the L1 tile's A rows and
  B columns are held in L1 and shared by the (mL1/mL0) x (nL1/nL0) L0 tiles inside it; otherwise each
  L0 tile streams its own [mL0, kL1] / [kL1, nL0] slices.
* L1 full load (docs/bmm_branches.md §8.2.5): A is held in L1 whole, loaded once per core, when
  padded(M x K) * 2 <= L1 and every core loops over >= 4 tiles of B's side (ceil(n_tiles / blocks) >= 4);
  symmetrically B when A's side qualifies instead (A is preferred). `full_load=` forces it.
* ASW window W from the cores that run (= chip.aic whenever there are enough tiles to fill the chip).
* L2 tiling (docs/bmm_branches.md §8.2.3) over the L1 tiles: when A + B exceed L2, the grid is walked in the fewest
  mL2TileNum x nL2TileNum blocks whose A rows + B columns fit L2 (`pyto_kernels.swizzle.l2_blocks`, the rule
  ASW_Basic uses), each block by the diagonal window snake.
* Split-K (`enable_split_k`, 2-D only): K is cut into GRID_K segments (multiples of kL1) so that
  tiles x GRID_K fills the cores; every segment is added into a zeroed output with Fixpipe's atomic
  add; the output dtype is docs/tile_shapes.md §6.9's split-K one (fp32, int32 for int8); the bias is added once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

import pyto
import pyto.language as pl
from pyto.chip import Chip
from pyto.dtypes import FIXPIPE_OUT, DType, as_dtype
from pyto.errors import PlanError, ShapeError, UnsupportedError
from pyto.tiling import CubeTileShapes, bias_row_bytes, ceil_align

from .bmm.asw_basic import asw_walk, l1_pieces_for
from .bmm.block import alloc_buffers
from .bmm.common import user_operand
from .swizzle import Swizzle, l2_blocks

CUBE_DTYPES = (DType.fp16, DType.bf16, DType.fp32, DType.int8)
FULL_LOAD_ROUNDS = 4      # docs/bmm_branches.md §8.2.5: the other side loops >= 4 times per core


def _cdiv(x: int, y: int) -> int:
    return -(-x // y)


def _floor(x: int, a: int) -> int:
    return x // a * a


def _frac(dtype: DType) -> int:
    """docs/tile_shapes.md §6.4 CeilAlign unit of a fractal buffer: 16 elements, 32 for int8."""
    return 32 if dtype is DType.int8 else 16


def _kn_align(dtype: DType) -> int:
    """docs/tile_shapes.md §6.1: kL0, kL1, nL0, nL1 32-byte aligned (fp32: 16 elements)."""
    return max(16, 32 // dtype.itemsize)


def _l1_bytes(rows: int, cols: int, dtype: DType) -> int:
    a = _frac(dtype)
    return ceil_align(rows, a) * ceil_align(cols, a) * dtype.itemsize


# ---- the default tile rule ----------------------------------------------------------------------
def default_tile_shapes(M: int, N: int, K: int, dtype, chip: "str | Chip" = "ascend950pr", *, bias: bool = False,
                        transpose_a: bool = False, transpose_b: bool = False) -> CubeTileShapes:
    """A simple tile rule from the chip's buffer sizes (a later planner may replace it).

    base_m x base_n: start at min(256, M) x min(256, N) (fractal/32B aligned), halve the larger side
    until two fp32 accumulators fit L0C (docs/bmm_branches.md §8.2.4: M^t N^t 4B DB <= L0C), then while the grid has fewer
    tiles than cores halve the larger side down to 64 (parallelism before tile efficiency, as ASW buys
    M/N splits to fill the cores). base_k: the largest 32B-aligned depth with two L0A and two L0B tiles
    fitting (docs/bmm_branches.md §8.2.4: M^t K^t dtype 2 <= L0A), at most K. kL1 = base_k * step, step in 4, 2, 1 the
    largest whose double-buffered A and B L1 tiles use at most half of L1 (the rest for a held operand
    and the bias). With a bias, base_n * 4B <= BT.
    """
    chip, dt = pyto.load_chip(chip), as_dtype(dtype)
    item, fr, kn = dt.itemsize, _frac(dt), _kn_align(dt)
    bm, bn = min(256, ceil_align(M, fr)), min(256, ceil_align(N, max(fr, kn)))
    if bias:
        bn = min(bn, _floor(chip.buffers["BT"] // 4, kn))

    def halve(x: int, a: int) -> int:
        return max(a, ceil_align(x // 2, a))

    while bm * bn * 4 * 2 > chip.buffers["L0C"]:
        bm, bn = (halve(bm, fr), bn) if bm >= bn else (bm, halve(bn, kn))
    while _cdiv(M, bm) * _cdiv(N, bn) < chip.aic and max(bm, bn) > 64:
        bm, bn = (halve(bm, fr), bn) if bm >= bn else (bm, halve(bn, kn))
    bk = min(chip.buffers["L0A"] // (2 * item * ceil_align(bm, fr)),
             chip.buffers["L0B"] // (2 * item * ceil_align(bn, fr)))
    bk = max(kn, min(_floor(bk, kn), ceil_align(K, kn)))
    step = next(s for s in (4, 2, 1) if s == 1 or 2 * (_l1_bytes(bm, bk * s, dt) + _l1_bytes(bk * s, bn, dt))
                <= chip.buffers["L1"] // 2)
    k_l1 = bk * max(1, min(step, _cdiv(K, bk)))
    ts = CubeTileShapes(bm, bm, bk, k_l1, bn, bn)
    return ts.check(dt, chip, bias=bias, transpose_a=transpose_a, transpose_b=transpose_b)


# ---- plan: tile shapes + chip -> the kernel's static parameters -------------------------------------
@dataclass(frozen=True)
class MatmulPlan:
    """Everything the kernel is traced with, decided on the host from the shapes, tiles and chip."""

    chip: str
    blocks: int
    out_dtype: DType
    tiles: CubeTileShapes
    full_load: str          # 'A', 'B' or '': which operand is held in L1 whole
    params: dict            # the kernel's static parameters

    def describe(self) -> str:
        p = self.params
        return (f"matmul on {self.chip}: {self.blocks} block(s), base {p['BASE_M']}x{p['BASE_N']}x{p['BASE_K']}, "
                f"L1 tile {p['L1_M']}x{p['L1_N']}x{p['K_L1']}, full load {self.full_load or 'none'}, "
                f"hold {p['HOLD_M']}/{p['HOLD_N']}, window {p['WINDOW']}, L2 blocks {p['L2_M']}x{p['L2_N']}, "
                f"grid_k {p['GRID_K']}, "
                f"stages L1 {p['STAGES']} L0 {p['L0_STAGES']} L0C {p['L0C_STAGES']}")


def _l1_budget(dt: DType, bm: int, bn: int, bk: int, k_l1: int, hold_m: int, hold_n: int, K: int,
               stages: int, hold_stages: int, bias_dtype: Optional[DType]) -> int:
    """Bytes of L1 the kernel allocates (as pl.alloc charges them: padded tiles x buffers)."""
    kp = ceil_align(K, bk)
    used = 0
    if not hold_m:
        used += stages * _l1_bytes(bm, k_l1, dt)
    if not hold_n:
        used += stages * _l1_bytes(k_l1, bn, dt)
    used += hold_stages * ((_l1_bytes(hold_m, kp, dt) if hold_m else 0) + (_l1_bytes(kp, hold_n, dt) if hold_n else 0))
    if bias_dtype is not None:
        used += bias_row_bytes(bn, bias_dtype.itemsize)
    return used


def _full_load_side(M, N, K, dt, chip, ts, blocks, full_load) -> str:
    """docs/bmm_branches.md §8.2.5 L1 full load: hold a small A (else B) when the other side loops >= 4 times per core."""
    def fits(rows, cols):
        return _l1_bytes(rows, cols, dt) * 2 <= chip.buffers["L1"]

    a_ok = fits(ceil_align(M, ts.mL0), ceil_align(K, ts.kL0)) and (ts.mL0 % 16 == 0 or M <= ts.mL0)
    b_ok = fits(ceil_align(K, ts.kL0), ceil_align(N, ts.nL0))
    if full_load is None:
        if a_ok and _cdiv(_cdiv(N, ts.nL0), blocks) >= FULL_LOAD_ROUNDS:
            return "A"
        if b_ok and _cdiv(_cdiv(M, ts.mL0), blocks) >= FULL_LOAD_ROUNDS:
            return "B"
        return ""
    side = {True: "A", False: ""}.get(full_load, full_load) if isinstance(full_load, bool) else full_load
    if side not in ("A", "B", ""):
        raise ShapeError(f"full_load must be None, True, False, 'A', 'B' or '', got {full_load!r}")
    if side and not (a_ok if side == "A" else b_ok):
        rows, cols = (ceil_align(M, ts.mL0), ceil_align(K, ts.kL0)) if side == "A" else \
                     (ceil_align(K, ts.kL0), ceil_align(N, ts.nL0))
        why = []
        if not fits(rows, cols):
            why.append(f"{side} held is {_l1_bytes(rows, cols, dt):,} B ({rows} x {cols} {dt.name}), more than half "
                       f"of L1 ({chip.buffers['L1'] // 2:,} of {chip.buffers['L1']:,} B on {chip.name})")
        if side == "A" and not (ts.mL0 % 16 == 0 or M <= ts.mL0):
            why.append(f"base_m = {ts.mL0} is not a multiple of 16 (the held A is cut into base_m-row views)")
        raise PlanError(f"full_load={side!r}: " + "; and ".join(why))
    return side


def _fit_l1(side: str, share: bool, dt, ts: CubeTileShapes, K: int, M: int, N: int, stages: int, bias_dt,
            chip) -> Optional[tuple]:
    """(hold_m, hold_n, hold_stages, stages) that fit L1 with full load `side` ('A', 'B' or ''), or None: the
    streamed slots, then the held slots, go down to one, then a shared L1 tile is given up."""
    bm, bn, bk, k_l1 = ts.mL0, ts.nL0, ts.kL0, ts.kL1
    hold_m = ceil_align(M, bm) if side == "A" else 0
    hold_n = ceil_align(N, bn) if side == "B" else 0
    if share:
        hold_m = hold_m or (ts.mL1 if bm % 16 == 0 else 0)
        hold_n = hold_n or ts.nL1
    hold_stages = 1 if side else 2          # a full-load slab is loaded once: one slot is enough
    while _l1_budget(dt, bm, bn, bk, k_l1, hold_m, hold_n, K, stages, hold_stages, bias_dt) > chip.buffers["L1"]:
        if stages > 2:
            stages = 2
        elif hold_stages > 1:
            hold_stages = 1
        elif stages > 1:
            stages = 1
        elif (hold_m and side != "A") or (hold_n and side != "B"):
            hold_m, hold_n = (hold_m if side == "A" else 0), (hold_n if side == "B" else 0)
        else:
            return None
    return hold_m, hold_n, hold_stages, stages


def plan_matmul(M: int, N: int, K: int, dtype, chip: "str | Chip", ts: CubeTileShapes, *,
                bias_dtype=None, transpose_a: bool = False, transpose_b: bool = False,
                blocks: Optional[int] = None, full_load=None, unit_flag: bool = True,
                swizzle: str = "asw", stages: int = 2, l2_tiles: Optional[tuple] = None) -> MatmulPlan:
    """Static parameters for `matmul_kernel` from checked tile shapes: holds, stages, blocks, swizzle, split-K,
    L2 tiling.

    stages: L1 slots of the streamed tiles to start from (halved while L1 overflows). l2_tiles: (mL2TileNum,
    nL2TileNum) to use instead of docs/bmm_branches.md §8.2.3's (`pyto_kernels.swizzle.l2_blocks`: 1 x 1 while A + B fit L2)."""
    chip, dt = pyto.load_chip(chip), as_dtype(dtype)
    bias_dt = None if bias_dtype is None else as_dtype(bias_dtype)
    bm, bn, bk, k_l1, l1_m, l1_n = ts.mL0, ts.nL0, ts.kL0, ts.kL1, ts.mL1, ts.nL1
    tasks = _cdiv(M, l1_m) * _cdiv(N, l1_n)
    grid_k, k_seg = 1, K
    if ts.enable_split_k:
        want = blocks if blocks is not None else chip.aic
        grid_k = max(1, min(want // tasks, _cdiv(K, k_l1)))
        k_seg = ceil_align(_cdiv(K, grid_k), k_l1)
        grid_k = _cdiv(K, k_seg)
    if blocks is None:
        blocks = min(chip.aic, tasks * grid_k)
    if not isinstance(blocks, int) or isinstance(blocks, bool) or not 1 <= blocks <= chip.aic:
        raise UnsupportedError(f"blocks={blocks!r}: {chip.name} has {chip.aic} AI cores (blocks 1..{chip.aic})")

    if grid_k > 1 and full_load:
        raise PlanError(f"full_load={full_load!r} with split-K: a K segment per task holds no whole operand")
    if swizzle not in ("asw", "identity"):
        raise ShapeError(f"swizzle must be 'asw' or 'identity', got {swizzle!r}")
    side = "" if grid_k > 1 else _full_load_side(M, N, K, dt, chip, ts, blocks, full_load)
    share = grid_k == 1 and K <= k_l1 and (l1_m > bm or l1_n > bn)     # share the L1 tile between its L0 tiles
    fitted = _fit_l1(side, share, dt, ts, K, M, N, stages, bias_dt, chip)
    if fitted is None and side and full_load is None:
        side = ""       # the full load taken by itself leaves the streamed side no room: stream both
        fitted = _fit_l1(side, share, dt, ts, K, M, N, stages, bias_dt, chip)
    if fitted is None:
        raise PlanError(f"matmul tiles {ts.m}x{ts.k}x{ts.n} with full load {side or 'none'} do not fit "
                        f"L1 ({chip.buffers['L1']} B) on {chip.name}")
    hold_m, hold_n, hold_stages, stages = fitted
    fr = _frac(dt)
    l0_fits = (2 * ceil_align(bm, fr) * ceil_align(bk, fr) * dt.itemsize <= chip.buffers["L0A"]
               and 2 * ceil_align(bn, fr) * ceil_align(bk, fr) * dt.itemsize <= chip.buffers["L0B"])
    l0c_stages = 2 if 2 * ceil_align(bm, fr) * ceil_align(bn, fr) * 4 <= chip.buffers["L0C"] else 1
    order = Swizzle.asw(blocks) if swizzle == "asw" else Swizzle.identity()
    if l2_tiles is None:
        l2_m, l2_n = l2_blocks(M, N, K, l1_m, l1_n, dt.itemsize, chip.l2_bytes)
    elif (isinstance(l2_tiles, (tuple, list)) and len(l2_tiles) == 2
          and all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in l2_tiles)):
        l2_m, l2_n = l2_tiles
    else:
        raise ShapeError(f"l2_tiles must be two positive ints (mL2TileNum, nL2TileNum), got {l2_tiles!r}")
    params = dict(BASE_M=bm, BASE_N=bn, BASE_K=bk, K_L1=k_l1, L1_M=l1_m, L1_N=l1_n, HOLD_M=hold_m, HOLD_N=hold_n,
                  HOLD_STAGES=hold_stages, STAGES=stages, L0_STAGES=2 if l0_fits else 1, L0C_STAGES=l0c_stages,
                  GRID_K=grid_k, K_SEG=k_seg, WINDOW=order.window, SNAKE=order.snake, L2_M=l2_m, L2_N=l2_n,
                  TRANSPOSE_A=bool(transpose_a), TRANSPOSE_B=bool(transpose_b), BIAS=bias_dt is not None,
                  UNIT_FLAG=bool(unit_flag), L1_PIECES=l1_pieces_for(bm, bn, bk, k_l1, dt, chip))
    nd = {"a_format": ts.a_format, "b_format": ts.b_format, "out_format": ts.out_format}
    if any(f != "ND" for f in nd.values()) or ts.scale:
        set_ = ", ".join([f"{k}={v!r}" for k, v in nd.items() if v != "ND"] + (["scale=True"] if ts.scale else []))
        raise UnsupportedError(f"tile shapes set with {set_}: this matmul reads A and B and writes C as ND GM "
                               f"tensors, without a Fixpipe scale; set them with the ND defaults")
    out_dt = ts.resolved_out_dtype(dt)
    if out_dt not in FIXPIPE_OUT[dt.acc]:
        raise UnsupportedError(f"out_dtype {out_dt.name} with {dt.name} inputs: this matmul writes the {dt.acc.name} "
                               f"accumulator through Fixpipe as {'/'.join(t.name for t in FIXPIPE_OUT[dt.acc])} (Fixpipe's "
                               f"quantisation modes, which pyto does not model, would be needed for {out_dt.name})")
    return MatmulPlan(chip.name, blocks, out_dt, ts, side, params)


# ---- the kernel ------------------------------------------------------------------------------------
@pl.kernel
def matmul_kernel(a, b, bias, out, *, BASE_M: int, BASE_N: int, BASE_K: int, K_L1: int, L1_M: int, L1_N: int,
                  HOLD_M: int = 0, HOLD_N: int = 0, HOLD_STAGES: int = 1, STAGES: int = 2, L0_STAGES: int = 2,
                  L0C_STAGES: int = 2,
                  GRID_K: int = 1, K_SEG: int = 0, WINDOW: int = 1, SNAKE: bool = False, L2_M: int = 1, L2_N: int = 1,
                  TRANSPOSE_A: bool = False, TRANSPOSE_B: bool = False, BIAS: bool = False, UNIT_FLAG: bool = True,
                  L1_PIECES: int = 0):
    """out [M, N] = a [M, K] @ b [K, N] (+ bias [1, N] when BIAS; any [1, 1] array otherwise).

    a is [K, M] with TRANSPOSE_A and b [N, K] with TRANSPOSE_B (DN operands). The output is cut into
    L1_M x L1_N tiles dealt round robin in the swizzle order (WINDOW, SNAKE), each computed as
    BASE_M x BASE_N L0 tiles; L2_M x L2_N > 1: the grid is walked in that many L2 blocks (kernels/swizzle.py's
    L2 tiling, for working sets larger than L2). HOLD_M / HOLD_N: rows of A / columns of B held in L1 per
    slab (0: stream).
    GRID_K > 1: split-K, K_SEG per task, results atomically added (out must hold zeros).
    L1_PIECES: GM->L1 pieces per streamed L1 step (`block.accumulate`; 0 = one load of the whole slot).
    """
    M, K = (a.shape[1], a.shape[0]) if TRANSPOSE_A else a.shape
    N, Kb = (b.shape[0], b.shape[1]) if TRANSPOSE_B else (b.shape[1], b.shape[0])
    assert K == Kb, f"a {a.shape} and b {b.shape} differ in K ({K} vs {Kb})"
    assert tuple(out.shape) == (M, N), f"out {out.shape}, expected {(M, N)}"
    assert not BIAS or tuple(bias.shape) == (1, N), f"bias {bias.shape}, expected {(1, N)}"
    k_pad = ceil_align(K, BASE_K)
    bufs = alloc_buffers(a.dtype, BASE_M, BASE_N, BASE_K, K_L1, stages=STAGES, l0_stages=L0_STAGES,
                         l0c_stages=L0C_STAGES, stream_a=not HOLD_M, stream_b=not HOLD_N, hold_stages=HOLD_STAGES,
                         hold_a=(HOLD_M, k_pad) if HOLD_M else None, hold_b=(k_pad, HOLD_N) if HOLD_N else None,
                         bias_dtype=bias.dtype if BIAS else None, transpose_a=TRANSPOSE_A, transpose_b=TRANSPOSE_B)
    grid = Swizzle(WINDOW, SNAKE).grid(M, N, L1_M, L1_N, l2_m=L2_M, l2_n=L2_N)
    with pl.section_cube():          # the ASW_Basic tile walk with batch 1 (kernels/bmm/asw_basic.py)
        asw_walk(bufs, a, b, bias if BIAS else None, out, grid, hold_a=bool(HOLD_M), hold_b=bool(HOLD_N),
                 grid_k=GRID_K, k_seg=K_SEG, transpose_a=TRANSPOSE_A, transpose_b=TRANSPOSE_B, unit_flag=UNIT_FLAG,
                 l1_pieces=L1_PIECES)


# ---- the public function -------------------------------------------------------------------------
def _operand(x, name: str):
    """A 2-D numpy array or pyto.spec, and its DType; ShapeError otherwise."""
    x, dt = user_operand(x, "matmul", name)
    shape = tuple(x.shape)
    if len(shape) != 2:
        raise ShapeError(f"matmul: {name} must be 2-D, got shape {list(shape)} (batched inputs: pyto_kernels.bmm.bmm)")
    if min(shape) == 0:
        raise ShapeError(f"matmul: {name} has an empty dimension {list(shape)}; the cube needs M, N, K >= 1 "
                         f"(K = 0 is the Special branch of pyto_kernels.bmm.bmm)")
    return x, tuple(shape), dt


def _tile_shapes(tile_shapes, M, N, K, dt, chip, bias, transpose_a, transpose_b) -> CubeTileShapes:
    ts = tile_shapes if tile_shapes is not None else pyto.get_cube_tile_shapes()
    if ts is None:
        return default_tile_shapes(M, N, K, dt, chip, bias=bias, transpose_a=transpose_a, transpose_b=transpose_b)
    if not isinstance(ts, CubeTileShapes):
        raise ShapeError(f"matmul: tile_shapes must be a pyto.CubeTileShapes (from set_cube_tile_shapes), got {ts!r}")
    return ts.check(dt, chip, bias=bias, transpose_a=transpose_a, transpose_b=transpose_b, ndim=2)


def matmul(a, b, bias=None, *, chip: "str | Chip" = "ascend950pr", tile_shapes: Optional[CubeTileShapes] = None,
           transpose_a: bool = False, transpose_b: bool = False, report: bool = False, blocks: Optional[int] = None,
           full_load=None, unit_flag: bool = True, swizzle: str = "asw", l2_tiles: Optional[tuple] = None):
    """C = A @ B (+ bias) on the emulated chip: a [M, K] (or [K, M] with transpose_a), b [K, N] (or [N, K]).

    fp16/bf16/fp32 give the input dtype (split-K: fp32), int8 gives int32. bias: [N] or [1, N], a float
    dtype (int8 inputs: an int8 or int32 bias, added in int32 through BT). Inputs given as pyto.spec(shape, dtype) run in timing mode: the result is then None, so pass report=True to
    get (None, Report) (bmm returns (None, report) for specs whatever `report`).
    Returns C, or (C, Report) with report=True. full_load: None (auto), 'A', 'B', True (= 'A') or
    False/'' (off). unit_flag=False uses software sync between the cube and Fixpipe instead.
    swizzle: 'asw' (docs/bmm_branches.md §8.2.2 sliding-window snake over the cores that run) or 'identity' (row-major).
    l2_tiles: (mL2TileNum, nL2TileNum) instead of docs/bmm_branches.md §8.2.3's (more than 1 x 1 only when A + B exceed L2).
    """
    chip = pyto.load_chip(chip)
    a, a_shape, dt = _operand(a, "a")
    b, b_shape, dtb = _operand(b, "b")
    if dt not in CUBE_DTYPES or dtb is not dt:
        raise ShapeError(f"matmul: a and b must share one of fp16, bf16, fp32, int8; got {dt} and {dtb}")
    M, K = a_shape[::-1] if transpose_a else a_shape
    Kb, N = b_shape[::-1] if transpose_b else b_shape
    if K != Kb:
        raise ShapeError(f"matmul: a {list(a_shape)}{' (transposed)' if transpose_a else ''} and b "
                         f"{list(b_shape)}{' (transposed)' if transpose_b else ''} differ in K: {K} vs {Kb}")
    timing = isinstance(a, pyto.Spec) or isinstance(b, pyto.Spec)
    bias_dt = None
    if bias is not None:
        bias = bias if isinstance(bias, pyto.Spec) else np.asarray(bias)
        shape = tuple(bias.shape)
        if shape not in ((N,), (1, N)):
            raise ShapeError(f"matmul: bias must be [N] or [1, N] with N = {N}, got {list(shape)}")
        bias_dt = bias.dtype if isinstance(bias, pyto.Spec) else as_dtype(bias.dtype)
        if dt is DType.int8:            # int8 accumulates in int32: the bias goes through BT as int32
            if bias_dt not in (DType.int8, DType.int32):
                raise ShapeError(f"matmul: an int8 matmul takes an int8 or int32 bias, got {bias_dt}")
            bias_dt = DType.int32
        elif not bias_dt.is_float:
            raise ShapeError(f"matmul: bias must be fp16, bf16 or fp32, got {bias_dt}")
        bias = pyto.spec((1, N), bias_dt) if isinstance(bias, pyto.Spec) else np.array(bias.reshape(1, N),
                                                                                        bias_dt.np)
    ts = _tile_shapes(tile_shapes, M, N, K, dt, chip, bias is not None, transpose_a, transpose_b)
    plan = plan_matmul(M, N, K, dt, chip, ts, bias_dtype=bias_dt, transpose_a=transpose_a, transpose_b=transpose_b,
                       blocks=blocks, full_load=full_load, unit_flag=unit_flag, swizzle=swizzle, l2_tiles=l2_tiles)
    if bias is None:
        bias = pyto.spec((1, 1), dt) if timing else np.zeros((1, 1), dt.np)
    if timing:
        a = a if isinstance(a, pyto.Spec) else pyto.spec(a.shape, dt)
        b = b if isinstance(b, pyto.Spec) else pyto.spec(b.shape, dt)
        bias = bias if isinstance(bias, pyto.Spec) else pyto.spec(bias.shape, bias_dt or dt)
        out = pyto.spec((M, N), plan.out_dtype)
    else:
        out = np.zeros((M, N), plan.out_dtype.np)
    rep = pyto.run(matmul_kernel, a, b, bias, out, chip=chip, blocks=plan.blocks,
                   mode="timing" if timing else "full", **plan.params)
    c = None if timing else out
    return (c, rep) if report else c
