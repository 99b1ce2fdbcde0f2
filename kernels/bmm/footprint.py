"""How many instructions a BMM plan will trace, and the host memory its run will hold (pyto's admission check).

`instructions(plan, a, b, bias)` counts what the branch kernel issues, from the plan's tiling and the kernel's
static parameters, without tracing: per output tile the K loop of `block.accumulate` (each L1 step's GM -> L1
loads, in `l1_pieces` pieces, and per L0 step an L1 -> L0A move, an L1 -> L0B move and an MMAD), the bias row
(a load and a move), the Fixpipe store; the slabs a held operand loads; MergeBatch's merged groups; StreamK's
units and its AIVs' reduction; Special's vector tiles. tests/test_admission.py holds it to the emulator's count
(Report.instructions) on the planner's benchmark suite: within 10% on each shape.

`host_bytes(plan, a, b, bias, mode=..., check=...)` is pyto.emulator.admission's estimate for that count and
the plan's arrays; `admit(...)` refuses a run that would not fit (CapacityError). `bmm()` and `run_plan` call
it before anything is allocated or traced; the `pyto bmm` command adds the arrays it makes itself (the random
inputs) and the float64 check (`caller=True, verify=True`).
"""
from __future__ import annotations

import math

import pyto
from pyto.dtypes import DType
from pyto.emulator import admission

from .common import Operands, cdiv, ceil_align, operands


# ---- instruction counts ----------------------------------------------------------------------------------
def _pieces(k_len: int, align: int, unit: int, pieces: int) -> int:
    """GM -> L1 loads of one operand for an L1 step of k_len (block._stream_l1)."""
    if pieces <= 0:
        return 1
    k_all = ceil_align(k_len, align)
    step = ceil_align(cdiv(k_all, pieces), unit)
    return cdiv(k_all, step)


def _step(k_len: int, base_k: int, align: int, pieces: int, sides: int) -> int:
    """One L1 step of block.accumulate: its loads (sides streamed operands) and, per base_k of K, two moves and
    an MMAD (block.mmad_l1)."""
    return sides * _pieces(k_len, align, base_k, pieces) + 3 * cdiv(k_len, base_k)


def tile_instructions(K: int, base_k: int, k_l1: int, align: int, *, pieces: int = 0, sides: int = 2,
                      bias: bool = False, tail_k: int = 0, store: bool = True) -> int:
    """Instructions of one output tile through block.accumulate and store_tile: K in L1 steps of k_l1 (the last
    one shorter, and in tail_k pieces when tail_k), `sides` operands streamed (the others held), bias: its row
    loaded and moved to BT."""
    if K <= 0:
        return 0
    full = (K - 1) // k_l1
    last = K - full * k_l1
    n = full * _step(k_l1, base_k, align, pieces, sides)
    if tail_k:
        p = max(1, pieces, cdiv(last, tail_k))
        n += sides * _pieces(last, align, tail_k, p) + 3 * cdiv(last, tail_k)
    else:
        n += _step(last, base_k, align, pieces, sides)
    return n + (1 if store else 0) + (2 if bias else 0)


def _tiles(size: int, base: int) -> int:
    return cdiv(size, base) if size > 0 else 0


def _asw(plan, ops: Operands) -> int:
    from .asw_basic import params_of
    p, t = plan.problem, plan.tiling
    chip = plan.chip_spec or pyto.load_chip(plan.chip)
    q = params_of(t, p, chip, bias=ops.has_bias)
    held = int(q["FULL_LOAD_A"]) + int(q["FULL_LOAD_B"])
    per = tile_instructions(p.K, q["BASE_K"], q["K_L1"], _align(p), pieces=q["L1_PIECES"], sides=2 - held,
                            bias=ops.has_bias)
    tiles = p.batch * _tiles(p.M, q["BASE_M"]) * _tiles(p.N, q["BASE_N"])
    return tiles * per + held * t.cores_used


def _matmul_view(plan, ops: Operands) -> int:
    """ToMatmul's folds that are views: kernels/matmul.py's kernel on [rows, K] @ [K, N]."""
    from .to_matmul import _tiles as tile_shapes
    from ..matmul import plan_matmul
    p, t = plan.problem, plan.tiling.matmul
    rows = math.prod(ops.batch) * p.M
    chip = plan.chip_spec or pyto.load_chip(plan.chip)
    kw = dict(bias_dtype=ops.bias.dtype if ops.has_bias else None, transpose_a=p.transpose_a,
              transpose_b=p.transpose_b, stages=t.l1_buffers)
    try:
        mp = plan_matmul(rows, p.N, p.K, p.dtype, chip, tile_shapes(plan), full_load=t.full_load, **kw)
    except pyto.PlanError:
        mp = plan_matmul(rows, p.N, p.K, p.dtype, chip, tile_shapes(plan), full_load="", **kw)
    q = mp.params
    held = int(bool(q["HOLD_M"])) + int(bool(q["HOLD_N"]))
    seg = q["K_SEG"] if q["GRID_K"] > 1 else p.K
    per = tile_instructions(seg, q["BASE_K"], q["K_L1"], _align(p), pieces=q["L1_PIECES"], sides=2 - held,
                            bias=ops.has_bias)
    tiles = _tiles(rows, q["BASE_M"]) * _tiles(p.N, q["BASE_N"]) * q["GRID_K"]
    slabs = (cdiv(rows, q["HOLD_M"]) if q["HOLD_M"] else 0) + (cdiv(p.N, q["HOLD_N"]) if q["HOLD_N"] else 0)
    return tiles * per + min(tiles, max(slabs, held * mp.blocks))


def _to_matmul(plan, ops: Operands) -> int:
    from .to_matmul import batched_params, is_view
    if is_view(plan, ops):
        return _matmul_view(plan, ops)
    p = plan.problem
    blocks, q = batched_params(plan, ops)
    held = int(bool(q["HOLD_M"]))
    per = tile_instructions(p.K, q["BASE_K"], q["K_L1"], _align(p), pieces=q["L1_PIECES"], sides=2 - held,
                            bias=ops.has_bias)
    return p.batch * _tiles(p.M, q["BASE_M"]) * _tiles(p.N, q["BASE_N"]) * per + held * blocks


def _iter_batch(plan, ops: Operands) -> int:
    from .iter_batch import kernel_params
    p = plan.problem
    q, cores = kernel_params(plan)
    held_a, held_b = bool(q["HOLD_M"]), bool(q["HOLD_N"])
    per = tile_instructions(p.K, q["BASE_K"], q["K_L1"], _align(p), pieces=q["L1_PIECES"],
                            sides=2 - held_a - held_b, bias=ops.has_bias)
    n = p.batch * _tiles(p.M, q["BASE_M"]) * _tiles(p.N, q["BASE_N"]) * per
    for held, x_batch in ((held_a, p.batch_a), (held_b, p.batch_b)):
        if held:    # a slab per batch (a broadcast side keeps its slab: once per core)
            n += (p.batch if x_batch > 1 else min(cores, p.batch)) * q["HOLD_PIECES"]
    return n


def _merge_batch(plan, ops: Operands) -> int:
    from .merge_batch import kernel_params
    p = plan.problem
    q, cores = kernel_params(plan)
    a_nd = tuple(ops.a.shape[:-2]) == tuple(ops.batch)
    b_nd = tuple(ops.b.shape[:-2]) == tuple(ops.batch)
    align, bk, kl1, b0 = _align(p), q["BASE_K"], q["K_L1"], q["B_L0"]
    n = 0
    for core in range(cores):
        batches = max(0, min(p.batch, (core + 1) * q["BPC"]) - core * q["BPC"])
        for g in range(0, batches, b0):
            ng = min(b0, batches - g)
            loads = int(a_nd) + int(b_nd) + ng * (2 - int(a_nd) - int(b_nd))
            for k1 in range(0, p.K, kl1):
                k_len = min(kl1, p.K - k1)
                n += loads * _pieces(k_len, align, bk, q["L1_PIECES"]) + 3 * cdiv(k_len, bk)
            # the stores; with a bias, its row: a load per batch, the move, and the zero fill of the columns
            # between batches when there are some (merge_batch._bias_row)
            n += ng + ((ng + 1 + int(ng > 1 and p.N < q["N_PAD"])) if ops.has_bias else 0)
    return n


def _stream_k(plan, ops: Operands) -> int:
    from .stream_k import chunks, params_of, segments
    p, t = plan.problem, plan.tiling
    chip = plan.chip_spec or pyto.load_chip(plan.chip)
    q = params_of(t, p, chip, bias=ops.has_bias)
    atomic = q["ATOMIC"]
    nb = p.batch
    sm, sn, sck = q["SINGLE_M"], q["SINGLE_N"], q["SINGLE_K"]
    n = 0
    for mi in range(q["M_CNT"]):
        rows = min(sm, p.M - mi * sm)
        for ni in range(q["N_CNT"]):
            cols = min(sn, p.N - ni * sn)
            if rows <= 0 or cols <= 0:
                continue
            for c in range(q["GRID_K"]):
                k0 = c * sck
                if k0 >= p.K:
                    continue
                tm, tn = _tiles(rows, q["BASE_M"]), _tiles(cols, q["BASE_N"])
                seg = min(sck, p.K - k0)
                plain = tile_instructions(seg, q["BASE_K"], q["K_L1"], _align(p), pieces=q["L1_PIECES"],
                                          bias=atomic and ops.has_bias and c == 0)
                tail = tile_instructions(seg, q["BASE_K"], q["K_L1"], _align(p), pieces=q["L1_PIECES"],
                                         bias=atomic and ops.has_bias and c == 0, tail_k=q["TAIL_K"])
                n += nb * ((tm * tn - 1) * plain + tail)
    cast = ops.out_dtype is not p.dtype.acc
    rr, rc = q["RED_ROWS"], q["RED_COLS"]
    syncs = (1 + int(cast)) if atomic else 1           # sync_all, on the AIC and both AIVs of every block
    n += 3 * syncs * t.cores_used
    if atomic:
        whole = len(chunks(nb, 1, 1, p.M, p.N, p.M, p.N, rr, rc))
        n += whole + (3 * whole if cast else 0)
    else:
        segs = segments(p.K, q["GRID_K"], sck)
        items = len(chunks(nb, q["M_CNT"], q["N_CNT"], sm, sn, p.M, p.N, rr, rc))
        adds = 0
        m = segs
        while m > 1:
            adds, m = adds + 1, m - m // 2
        n += items * (2 + adds + (2 if ops.has_bias else 0) + (1 if cast else 0))
    return n


def _special(plan, ops: Operands) -> int:
    from .special import compute_dtype, fit
    p = plan.problem
    lc = fit(plan, ops)
    if lc.mode == "empty":
        return 0
    if lc.mode == "fill":
        rebuilds = lc.units if ops.has_bias else 0        # at most one bias row per tile
        cast = ops.has_bias and ops.out_dtype is not ops.bias.dtype
        # a rebuild: load the bias row, (cast it,) negate it, expand_sub it from the zero tile
        return lc.aivs + lc.units + rebuilds * (3 + int(cast))
    widen = p.dtype is not compute_dtype(p.dtype)
    # a tile: a column and a row in (cast each when widening), two expand_muls, the bias (load, neg, expand_sub),
    # the cast out, the store
    per = (4 if widen else 2) + 2 + (3 if ops.has_bias else 0) + (1 if ops.out_dtype is not compute_dtype(p.dtype)
                                                                   else 0) + 1
    return lc.aivs + lc.units * per


def _align(p) -> int:
    """block.Buffers.align: the fractal grid views are trimmed to (16; 32 for int8)."""
    return max(16, 32 // p.isz)


_BRANCHES = {"asw_basic": _asw, "to_matmul": _to_matmul, "iter_batch": _iter_batch, "merge_batch": _merge_batch,
             "stream_k": _stream_k, "special": _special}


def _specs(plan, a, b, bias) -> Operands:
    """The plan's Operands as pyto.spec (shapes only: nothing is allocated)."""
    p = plan.problem
    dt = p.dtype
    bias_dt = DType.int32 if dt is DType.int8 else DType.fp32 if p.lowp else dt
    scales = (None, None)
    if p.mx:        # the logical scales [*a_batch, M, K/32], [*b_batch, K/32, N]
        scales = (pyto.spec(tuple(a.shape[:-2]) + (p.M, p.K // 32), DType.fp8e8m0),
                  pyto.spec(tuple(b.shape[:-2]) + (p.K // 32, p.N), DType.fp8e8m0))
    return operands(p, pyto.spec(tuple(a.shape), dt), pyto.spec(tuple(b.shape), p.b_dtype),
                    None if bias is None else pyto.spec(tuple(bias.shape), bias_dt), *scales)


def instructions(plan, a, b, bias=None) -> int:
    """The instructions the plan's kernel traces on operands of a's, b's and bias's shapes (arrays or specs, as
    given to run_plan: batch dims as the user's), counted from the tiling, not traced."""
    return int(_BRANCHES[plan.branch](plan, _specs(plan, a, b, bias)))


# ---- host memory -----------------------------------------------------------------------------------------
def host_bytes(plan, a, b, bias=None, *, mode: str = "full", check: bool = True, caller: bool = False,
               verify: bool = False) -> admission.Footprint:
    """pyto's estimate (emulator/admission.py) of the host memory the plan's run holds at peak on these operands.

    mode/check: the run's (timing mode holds the trace only; full mode also the data pass's arrays: staged GM
    copies of the operands as the emulator keeps them (a broadcast view compact, at its base's size), widened
    copies of A and B, the output, each L0C tile's stacked products, the tiles, StreamK's workspace). caller:
    add the arrays the caller makes and passes in (a, b, bias: the `pyto bmm` command's random inputs);
    verify: add the float64 check of `api.check` (the reference and its error bound)."""
    p = plan.problem
    n = instructions(plan, a, b, bias)
    arrays: dict = {}
    if mode == "full":
        arrays = _data_pass(plan, _specs(plan, a, b, bias), a, b)
    if caller:
        arrays["the caller's inputs"] = sum(admission.array_bytes(x.shape, _dtype(x, p)) for x in (a, b, bias)
                                            if x is not None)
    if verify:
        # api.compare, in float64: A and B, [A, 1] and [B; bias] over the whole batch and their absolute values
        # (matmul_bound), the reference, |A| @ |B|, the bound and the error figures (about 7 outputs)
        out = p.batch * p.M * p.N
        aug = p.batch * (p.M + p.N) * (p.K + 1)
        arrays["the float64 check"] = 8 * (p.batch_a * p.M * p.K + p.batch_b * p.K * p.N + 2 * aug + 7 * out)
    blocks = _blocks(plan)      # blocks traced alike share their code: count SHARED_CODES blocks' worth apart
    distinct = n if blocks <= 1 else -(-n * admission.SHARED_CODES // blocks)
    return admission.estimate(n, mode=mode, check=check, arrays=arrays, distinct=distinct)


def _blocks(plan) -> int:
    """The blocks (AI cores; Special: pairs of AIVs) the plan's launch runs on."""
    t = plan.tiling
    if plan.branch == "special":
        return -(-max(1, getattr(t, "aiv_used", 1)) // 2)
    return max(1, getattr(t, "cores_used", 0) or getattr(getattr(t, "matmul", None), "cores_used", 0) or 1)


def _dtype(x, p):
    return x.dtype if isinstance(x, pyto.Spec) else getattr(x, "dtype", p.dtype)


def _data_pass(plan, ops: Operands, a, b) -> dict:
    """The full-mode arrays of the plan's launch (admission.data_pass_arrays' parts, from the plan)."""
    p, t = plan.problem, plan.tiling
    dt = p.dtype
    a_in, b_in = (ops.a.shape, dt, _stride0(a, ops.a)), (ops.b.shape, dt, _stride0(b, ops.b))
    staged = [a_in, b_in, (ops.bias.shape, ops.bias.dtype, ()), (ops.out.shape, ops.out_dtype, ())]
    workspace = getattr(t, "workspace_bytes", 0)
    if plan.branch == "stream_k" and t.reduce == "atomic" and ops.out_dtype is not dt.acc:
        workspace = admission.array_bytes((p.batch, p.M, p.N), dt.acc)
    mm = t.matmul if plan.branch == "to_matmul" else t
    cores, cube = _blocks(plan), plan.branch != "special"
    widened = [a_in, b_in] if cube else []
    if plan.branch == "merge_batch":    # a group's batches arrive in one ndNum load: its MMADs read the L1 slot
        widened = [w for w in widened if tuple(w[0][:-2]) != tuple(ops.batch)]
    k_chain = getattr(t, "single_core_k", 0) or p.K
    return admission.data_pass_arrays(
        staged, widened=widened, outputs=[(ops.out.shape, ops.out_dtype)], workspace=workspace,
        # K-stacked products only where an MMAD's operands are not GM copies (MergeBatch's ndNum slots): the
        # other branches' K loops are summed as one matmul of two GM regions (admission._at_source)
        products=[(mm.base_m, mm.base_n, k_chain, dt)] * cores if plan.branch == "merge_batch" else [],
        tiles=cores * sum(plan.buffer_use().values()))


def _stride0(x, padded) -> tuple:
    """The axes of `padded` (x with its batch dims left-padded, common.operands) along which x, an array, repeats
    one element (stride 0): the emulator stages it compact. () for a spec."""
    if x is None or isinstance(x, pyto.Spec):
        return ()
    shift = len(padded.shape) - len(x.shape)
    return tuple(i + shift for i in admission.broadcast_axes(x))


def admit(plan, a, b, bias=None, *, mode: str = "full", check: bool = True, caller: bool = False,
          verify: bool = False) -> None:
    """CapacityError (pyto.errors) when the plan's run on these operands would not fit the host's memory."""
    fp = host_bytes(plan, a, b, bias, mode=mode, check=check, caller=caller, verify=verify)
    p = plan.problem
    what = (f"bmm B {p.batch} M {p.M} N {p.N} K {p.K} {p.dtype} ({plan.branch}, {mode} mode"
            f"{'' if check or mode == 'full' else ', checks off'})")
    advice = []
    if mode == "full":
        advice.append("timing mode (operands as pyto.spec; `pyto bmm ... --timing`)")
    if mode == "full":
        advice.append("pyto.run_options(check=False) in timing mode (`--timing --no-race-check`) too, if the race "
                      "checks are not needed")
    advice.append("a smaller problem (fewer batches, or split M, N or K and add the pieces)")
    admission.admit(fp, what, advice)
