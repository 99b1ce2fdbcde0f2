"""The matmul family in PyPTO-Pro's spelling (docs/zh/pypto_pro/api/SIMD-API/operation/matrix_computation/):
Left (L0A) x Right (L0B) -> Acc (L0C) on the M pipe, one Instr per call.

K-split rules (matmul_acc.md: "缺一会精度错，已上板验证", missing any one gives wrong results on the board): on the 950
(chip key cube.k_split_layout_transform) a phased accumulation (`matmul_acc` with a phase) needs the Acc tile's
`fractal=1024` and `pl.system.set_mm_layout_transform(enabled=True)` in force; pyto raises KernelError naming the
rule, since the board would silently compute something else. The switch must be turned off again before the
kernel ends.

Tails (matmul.md: the Acc tile takes a tail through valid_shape=[-1, -1] + set_validshape): an MMAD computes
M = the Left tile's valid rows, K = its valid columns (which must be the Right tile's valid rows) and N = the
Right tile's valid columns, as PTO-ISA's TMATMUL reads them (GetValidRow/GetValidCol of the operands), into the
Acc tile's [0:M, 0:N]; nothing outside the operands' valid regions is read and nothing else of the Acc tile is
written (a bias is read over its first N columns). The operand tiles' shapes must still chain ([M, K] x [K, N]
-> [M, N] as declared). pyto charges the MMAD for the declared tiles' fractals (timing.mmad_cycles of their
shapes), not the valid ones: the cube costs what the tiles it names cover, which is what pyto's BMM kernels
trim their views to (the fractal grid of the tile's real extent) and what its cost model plans with; a kernel that
computes a small valid region in a large tile is charged the large tile.

Operand types (OPERANDS, matmul_acc.md's "数据类型及结果组合", for pl.matmul and pl.matmul_acc alike): FP16 x FP16,
BF16 x BF16, FP32 x FP32 -> FP32, INT8 x INT8 -> INT32, any two of FP8E4M3FN / FP8E5M2 -> FP32 ("FP8E4M3FN/FP8E5M2
的任意两两组合输出FP32": E4M3 x E5M2 and E5M2 x E4M3 too), HF8 x HF8 -> FP32. matmul.md's own table lists HF8 among
lhs's types and says rhs is "与lhs_tile一致" (the same), without FP8; pyto follows matmul_acc.md's fuller table for
both (the tutorial Cube_matrix_computation.md gives FP8 and HF8 fractals of 16x32 / 32x16 with FP32 results). Any
other pair is a ShapeError naming both dtypes. The 8-bit floats run on a chip whose table gives their rate
(cube.fp8_cycles_per_step / hf8_cycles_per_step: the 950); elsewhere an UnsupportedError names the chip.
"""
from __future__ import annotations

from typing import Optional

from ..chip import LOWP_RATE_KEYS
from ..dtypes import FP4, DType
from ..errors import KernelError, ShapeError, UnsupportedError
from ..ir import AccPhase, Buf, Loc, Op, Pipe, Role
from .opcommon import emit, need_tile, phase_of, region
from .tile import ACC_FRACTAL, Tile
from .trace import caller_loc, current

_L0A, _L0B, _L0C, _MMAD, _M, _AIC = Buf.L0A, Buf.L0B, Buf.L0C, Op.MMAD, Pipe.M, Role.AIC
_ACC_PARTIAL, _ACC_FINAL = AccPhase.Partial, AccPhase.Final
_E4M3, _E5M2 = DType.fp8e4m3fn, DType.fp8e5m2
#: (lhs dtype, rhs dtype) -> the accumulator's (matmul_acc.md; module docstring)
OPERANDS = {(DType.fp16, DType.fp16): DType.fp32, (DType.bf16, DType.bf16): DType.fp32,
            (DType.fp32, DType.fp32): DType.fp32, (DType.int8, DType.int8): DType.int32,
            **{(x, y): DType.fp32 for x in (_E4M3, _E5M2) for y in (_E4M3, _E5M2)},
            (DType.hf8, DType.hf8): DType.fp32}
_PAGE = "matrix_computation/matmul_acc.md"
#: id(dtype) -> the accumulator of dtype x dtype for the pairs OPERANDS gives any chip (no 8-bit floats: their chip
#: check is _operand_types'); keyed by id, since an enum's hash is a Python call
_PLAIN_ACC = {id(d): OPERANDS[(d, d)] for d in (DType.fp16, DType.bf16, DType.fp32, DType.int8)}


def _operand_types(name: str, dst: Tile, a: Tile, b: Tile, loc: Loc) -> DType:
    """The accumulator type of lhs x rhs by OPERANDS, checked against dst and (8-bit floats) the chip."""
    da, db = a.store.dtype, b.store.dtype
    acc = OPERANDS.get((da, db))
    if acc is None:
        if da in FP4 or db in FP4:
            raise ShapeError(f"{loc}: {name} on {da} x {db} operands: FP4 data is a cube input of the MX matmul only "
                             f"(pl.matmul_mx with E8M0 scales, matrix_computation/matmul_mx.md); {_PAGE} lists no FP4 "
                             f"pair")
        if da is not db:
            raise ShapeError(f"{loc}: {name} operands differ in dtype: {da} x {db} is not a pair the cube takes "
                             f"({_PAGE}: lhs and rhs share fp16, bf16, fp32 or int8; FP8 E4M3FN and E5M2 mix in "
                             f"any pair; HF8 pairs with HF8)")
        raise ShapeError(f"{loc}: the cube takes fp16, bf16, fp32 or int8 operands (matrix_computation/matmul.md), "
                         f"not {da.name} (and FP8 E4M3FN / E5M2 or HF8 ones: {_PAGE})")
    if da in LOWP_RATE_KEYS:
        chip = current().chip
        for d in {da, db}:
            if not chip.has_cube(d):
                raise UnsupportedError(f"{loc}: {name} on {d!r} operands: chip {chip.name}'s cube has no {d.name} "
                                       f"mode (its table gives no cube.{LOWP_RATE_KEYS[d]}_cycles_per_step; "
                                       f"PyPTO-Pro's {_PAGE} lists FP8/HF8 matmuls for the Ascend 950)")
    if dst.store.dtype is not acc:
        raise ShapeError(f"{loc}: {da} x {db} operands accumulate in {acc}, but {dst!r} is {dst.dtype}")
    return acc


def _ksplit_rules(dst: Tile, name: str, loc: Loc, tr=None) -> None:
    """A phased accumulation step's two board rules (matmul_acc.md), checked at trace time (`tr`: the tracer)."""
    tr = current() if tr is None else tr
    if not tr.chip.k_split_layout_transform:
        return
    if dst.store.fractal != ACC_FRACTAL:
        raise KernelError(f"{loc}: {name} with a phase accumulates a K split into {dst!r}, whose fractal is "
                          f"{dst.store.fractal}; PyPTO-Pro's K-split rule (matmul_acc.md) needs the Acc tile's "
                          f"fractal=1024, or the board computes wrong results")
    if tr.mm_layout_transform is None:
        raise KernelError(f"{loc}: {name} with a phase accumulates a K split, but "
                          f"pl.system.set_mm_layout_transform(enabled=True) is not in force; PyPTO-Pro's K-split rule "
                          f"(matmul_acc.md) turns it on before the K loop and off after the store, or the board "
                          f"computes wrong results")


def on_aic(name: str, phase, loc: Loc) -> tuple:
    """(the AIC's trace, the phase checked); (None, None) on an AIV's trace, after its cube marker (the AIC's trace
    checks and records the MMAD): the prologue of the MMAD ops beside pl.matmul (MX, sparse)."""
    tr = current()
    if not tr.is_aic:
        tr.cube_marker(_MMAD, name, loc)
        return None, None
    return tr, (None if phase is None else phase_of(phase, AccPhase, loc, name))


def need_in_place(acc, dst, name: str, loc: Loc, page: str = "") -> None:
    """The *_acc MMADs accumulate in place: acc_tile must be dst_tile (ShapeError naming both)."""
    if not isinstance(acc, Tile) or not isinstance(dst, Tile) or acc.store is not dst.store or acc.rect != dst.rect:
        raise ShapeError(f"{loc}: {name} accumulates in place: acc_tile must be dst_tile" + (f" ({page})" if page else "")
                         + f", got acc={acc!r}, dst={dst!r}")


def _mmad(name: str, dst: Tile, a: Tile, b: Tile, bias: Optional[Tile], phase, accumulate: bool, loc: Loc) -> None:
    tr = current()
    if not tr.is_aic:
        tr.cube_marker(_MMAD, name, loc)            # an AIV's trace: the AIC's trace checks and records it
        return
    if not (type(dst) is Tile and type(a) is Tile and type(b) is Tile and dst.store.buf is _L0C
            and a.store.buf is _L0A and b.store.buf is _L0B):    # else need_tile says which one is wrong
        for x, what, buf in ((dst, "destination", _L0C), (a, "left operand", _L0A), (b, "right operand", _L0B)):
            need_tile(x, f"{name} {what}", (buf,), loc)
    if phase is not None and phase is not _ACC_PARTIAL and phase is not _ACC_FINAL:
        phase = phase_of(phase, AccPhase, loc, name)     # (Partial and Final are themselves)
    a0, a1, a2, a3 = a.rect          # shapes from the rectangles (Tile.shape, without a tuple per call)
    b0, b1, b2, b3 = b.rect
    d0, d1, d2, d3 = dst.rect
    m, k, k2, n = a1 - a0, a3 - a2, b1 - b0, b3 - b2
    if k != k2 or d1 - d0 != m or d3 - d2 != n:
        raise ShapeError(f"{loc}: {name} shapes do not chain: {dst!r} {list(dst.shape)} = {a!r} {list(a.shape)} "
                         f"@ {b!r} {list(b.shape)}")
    dt = a.store.dtype            # (lhs's: an FP8 mix's rate and k0 are either operand's)
    if not (tr.fast and dt is b.store.dtype and _PLAIN_ACC.get(id(dt)) is dst.store.dtype):   # (common pairs)
        _operand_types(name, dst, a, b, loc)
    va, vb = a.valid, b.valid
    if va is None and vb is None:          # no tails: the whole tiles
        sa, sb, out = a.access, b.access, dst.access
        vn = n
    else:
        vm, vk = (m, k) if va is None else va
        vk2, vn = (k, n) if vb is None else vb
        if vk != vk2:
            raise ShapeError(f"{loc}: {name}'s valid K differs: {a!r} has valid shape [{vm}, {vk}], {b!r} "
                             f"[{vk2}, {vn}]; set both to the K the step covers (pl.set_validshape)")
        sa, sb, out = region(a), region(b), dst.region_of(vm, vn)
    if bias is None:               # sources: lhs, rhs, the bias, the accumulator read (in that order)
        srcs, tiles = (sa, sb, out) if accumulate else (sa, sb), (dst, a, b)
    else:
        need_tile(bias, f"{name} bias", (Buf.BT,), loc)
        if bias.shape != (1, n) or bias.dtype is not dst.dtype:
            raise ShapeError(f"{loc}: bias must be [1, {n}] {dst.dtype} (the accumulator's type), got "
                             f"{list(bias.shape)} {bias.dtype}")
        sbias = bias.region_of(1, vn)
        srcs, tiles = (sa, sb, sbias, out) if accumulate else (sa, sb, sbias), (dst, a, b, bias)
    if accumulate and phase is not None:
        _ksplit_rules(dst, name, loc, tr)
    attrs = {"m": m, "n": n, "k": k, "phase": phase, "accumulate": accumulate, "bias": bias is not None,
             "dtype": dt}
    emit(_MMAD, _M, _AIC, srcs, (out,), attrs, loc, name, tiles, phase is not None, tr)


def matmul(dst_tile: Tile, lhs_tile: Tile, rhs_tile: Tile, *args, phase: Optional[AccPhase] = None, **kwargs) -> None:
    """dst = lhs @ rhs (+ bias): Left x Right -> Acc on the M pipe (matmul.md).

    lhs [M, K] and rhs [K, N] are one of OPERANDS' pairs (fp16, bf16, fp32 or int8 alike; FP8 E4M3FN / E5M2 in any
    mix, HF8 x HF8: module docstring); dst [M, N] is the accumulation type (fp32, int32 for int8). A fourth
    positional argument is a [1, N] Bias tile of that type: it initialises Acc (so it goes with a K loop's first
    block only); PyPTO-Pro rejects it as the keyword bias_tile=, and so does pyto. `phase`:
    pl.AccPhase.Partial / Final for the unit_flag hand-over to Fixpipe (docs/cube_phase.md §2.1, phase.md)."""
    loc = caller_loc()
    current()
    if "bias_tile" in kwargs:
        raise KernelError(f"{loc}: pl.matmul takes the bias as its fourth positional argument, "
                          f"pl.matmul(dst, lhs, rhs, bias); the keyword bias_tile= is rejected (PyPTO-Pro's matmul.md)")
    if kwargs:
        raise KernelError(f"{loc}: pl.matmul got unexpected keyword(s) {', '.join(kwargs)}; it takes (dst, lhs, rhs"
                          f"[, bias], *, phase=)")
    if len(args) > 1:
        raise KernelError(f"{loc}: pl.matmul takes (dst, lhs, rhs[, bias]), got {3 + len(args)} positional arguments")
    _mmad("pl.matmul", dst_tile, lhs_tile, rhs_tile, args[0] if args else None, phase, False, loc)


def matmul_acc(dst_tile: Tile, acc_tile: Tile, lhs_tile: Tile, rhs_tile: Tile, *,
               phase: Optional[AccPhase] = None) -> None:
    """dst = acc + lhs @ rhs, accumulating in place in Acc (matmul_acc.md): `acc_tile` is `dst_tile` (the hardware
    MMAD accumulates into its destination; pyto refuses another accumulator rather than guess a copy). An
    accumulator nothing wrote is an UninitializedReadError; one a previous tile left holds those values, and they
    are added to (PyPTO-Pro's bad_matmul_acc_reuses_stale_accumulator). With a phase, the K-split rules apply
    (module docstring)."""
    loc = caller_loc()
    need_in_place(acc_tile, dst_tile, "pl.matmul_acc", loc)
    _mmad("pl.matmul_acc", dst_tile, lhs_tile, rhs_tile, None, phase, True, loc)


__all__ = ["matmul", "matmul_acc"]
