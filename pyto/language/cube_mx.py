"""The MX (microscaling) matmuls in PyPTO-Pro's spelling (docs/zh/pypto_pro/api/SIMD-API/operation/matrix_computation/
matmul_mx.md, matmul_mx_acc.md): Left (L0A) x Right (L0B) with their E8M0 scales in ScaleLeft (L0A_MX) /
ScaleRight (L0B_MX) -> Acc (L0C), on the M pipe, one Instr per call:

    dst (+)= (lhs * 2^(scale_a - 127) per 32 K elements) @ (rhs * 2^(scale_b - 127) per 32 K elements)

The rules, each checked in `_check_mx` with its own error naming the tiles and the page (matmul_mx.md's 参数范围 and
补充约束 unless said otherwise):

1. dst_tile is an Acc tile of DT_FP32 (ShapeError).
2. lhs_tile a Left tile and rhs_tile a Right tile of one MX group (MX_GROUPS): MXFP8, DT_FP8E4M3FN or DT_FP8E5M2,
   or MXFP4, DT_FP4E2M1 or DT_FP4E1M2, in any mix within the group ("同一侧的两种格式可以交叉组合；MXFP8与MXFP4不能
   混合使用"; PyPTO-Pro's test_matmul_mx.py runs all eight pairs) (ShapeError naming both dtypes). FP4 tiles hold
   half a byte an element (K0 = 64: Nz fractals 16 x 64, dtypes.py, tile.py); their GM tensors are packed pairs
   (movement.py).
3. lhs [M, K] and rhs [K, N] chain into dst [M, N]; K % 64 == 0 (ShapeError), on the tiles' declared K and on the
   valid K an MMAD with tails covers (two whole 32-element scale groups per 64).
4. scale_a is a ScaleLeft tile [M, K/32], scale_b a ScaleRight tile [K/32, N] (the logical shapes, "该约束按逻辑shape
   校验"), of DT_FP8E8M0 (ShapeError); their layouts are ZZ and NN (the only ones ScaleLeft / ScaleRight take:
   MemorySpace.md, tile.py). With tails the scales' valid region must cover [vM, vK/32] / [vK/32, vN].
5. addr(scale_a) == addr(lhs_tile) >> 4 and addr(scale_b) == addr(rhs_tile) >> 4 (KernelError naming both
   addresses): the hardware derives the scale address from the data tile's and reads there whatever the scale
   tile's own address says ("该关系是强制约束 ... 指令仍会读取上述映射地址，导致计算结果错误"); pyto refuses the
   mismatch rather than compute with bytes it does not model. The operands are whole tiles (a view of a tile has no
   address of its own here: UnsupportedError).
6. phase as pl.matmul / pl.matmul_acc (pl.AccPhase.Partial / Final), with the 950's K-split rules for a phased
   accumulation (cube._ksplit_rules: Acc fractal 1024 and set_mm_layout_transform).
7. The chip has the MX cube: its table has the scale buffers (chip.MX_BUFFERS; the 950) and the group's rate
   (cube.mxfp8_cycles_per_step / mxfp4_cycles_per_step, chip.MX_RATE_KEYS) (UnsupportedError naming the chip). Atlas
   A2/A3 have none: a ScaleLeft / ScaleRight tile there is already an UnsupportedError naming the chip (tile.py).

matmul_mx_acc: acc_tile is dst_tile (the MMAD accumulates in place, as pl.matmul_acc; another accumulator is a
ShapeError); an accumulator nothing wrote is an UninitializedReadError ("首个K块不能使用未初始化的acc_tile").

The data (emulator/data/datapass.py): each operand is decoded exactly (FP8 and FP4 tables) and multiplied by its group's power of
two into fp32, then the product accumulates in fp32 as the other matmuls' do (fused or per MMAD). An element times
its scale is exact in fp32 while it stays within fp32's normal range; outside it the fp32 conversion rounds
(subnormal) or overflows, where the board, which combines the two exponents inside the cube, may not (PyPTO-Pro's
e8m0 boundary test pairs 2^-127 with 2^127): pyto's MX results are exact-up-to-fp32-accumulation only for scales
that keep every scaled element normal in fp32. The scales are source operands of the MMAD, so the checked pass sees
their reads (races with the Mat -> ScaleLeft move, uninitialised scales). A scale 0xFF (NaN) gives NaN.

Timing (emulator/timing.mmad_cycles): ceil(M/16) ceil(N/16) ceil(K/k0) steps at the group's MX rate plus the MMAD
head, charged for the declared tiles as pl.matmul is: MXFP8 steps of 16 x 32 x 16 at cube.mxfp8_cycles_per_step,
MXFP4 steps of 16 x 64 x 16 at cube.mxfp4_cycles_per_step (Huawei Connect 2025 quotes the 950's MXFP8 at 1 PFLOPS,
MXFP4 at 2). Reading the scales costs the MMAD nothing (the chip table's assumption); their moves are MTE1's.
"""
from __future__ import annotations

from typing import Optional

from ..chip import MX_RATE_KEYS
from ..dtypes import DType
from ..errors import KernelError, ShapeError, UnsupportedError
from ..ir import AccPhase, Buf, Loc, Op, Pipe, Role
from ..lowp import MX_GROUP
from .cube import _ksplit_rules, need_in_place, on_aic
from .opcommon import emit, extent, need_tile, region
from .tile import Tile
from .trace import caller_loc, current

_PAGE = "matrix_computation/matmul_mx.md"
#: the MX element groups (matmul_mx.md: E4M3 / E5M2 and E2M1 / E1M2, crossed in any pair within a group)
MXFP8 = (DType.fp8e4m3fn, DType.fp8e5m2)
MXFP4 = (DType.fp4e2m1, DType.fp4e1m2)
MX_GROUPS = {"MXFP8": MXFP8, "MXFP4": MXFP4}
MX_K_STEP = 2 * MX_GROUP        # K % 64 == 0 (matmul_mx.md 补充约束)


def _whole(t: Tile, what: str, name: str, loc: Loc) -> int:
    """The address of a whole tile (rule 5 reads addresses of whole tiles only)."""
    if t.t or t.rect != (0, t.store.shape[0], 0, t.store.shape[1]):
        raise UnsupportedError(f"{loc}: {name} on the view {t!r} as {what}: the MX address relation (addr(scale) = "
                               f"addr(data) >> 4, {_PAGE}) is checked on whole tiles; pass the tile itself")
    return t.store.addr


def _mx_group(name: str, a: Tile, b: Tile, chip, loc: Loc) -> str:
    """Rule 2 and rule 7's rate: the MX group both operands belong to ("MXFP8" / "MXFP4"), on a chip that has it."""
    groups = [next((g for g, members in MX_GROUPS.items() if x.dtype in members), None) for x in (a, b)]
    for x, what, g in ((a, "lhs_tile", groups[0]), (b, "rhs_tile", groups[1])):
        if g is None:
            raise ShapeError(f"{loc}: {name} {what} {x!r} is {x.dtype}: the MX matmul takes MXFP8 elements "
                             f"(DT_FP8E4M3FN, DT_FP8E5M2) or MXFP4 ones (DT_FP4E2M1, DT_FP4E1M2), any pair within a "
                             f"group ({_PAGE})")
    if groups[0] != groups[1]:
        raise ShapeError(f"{loc}: {name} mixes groups: lhs_tile {a!r} is {a.dtype} ({groups[0]}), rhs_tile {b!r} is "
                         f"{b.dtype} ({groups[1]}); {_PAGE}: MXFP8与MXFP4不能混合使用 (MXFP8 and MXFP4 do not mix)")
    item = "mxfp8" if groups[0] == "MXFP8" else a.dtype.name
    if item not in chip.cube_cycles_per_step:
        raise UnsupportedError(f"{loc}: {name} on {groups[0]} operands: chip {chip.name}'s table gives no "
                               f"cube.{MX_RATE_KEYS[item]}_cycles_per_step, so it has no {groups[0]} cube ({_PAGE}: "
                               f"Ascend 950 only)")
    return groups[0]


def _check_mx(name: str, dst: Tile, a: Tile, b: Tile, sa: Tile, sb: Tile, loc: Loc) -> tuple:
    """Rules 1-5 and 7 (module docstring); returns (m, k, n, valid (vm, vk, vn) or None)."""
    for x, what, buf in ((dst, "dst_tile", Buf.L0C), (a, "lhs_tile", Buf.L0A), (b, "rhs_tile", Buf.L0B),
                         (sa, "scale_a", Buf.L0A_MX), (sb, "scale_b", Buf.L0B_MX)):
        need_tile(x, f"{name} {what}", (buf,), loc)
        if x.store.buf is not buf:
            raise ShapeError(f"{loc}: {name} {what} must be a {buf!r} tile ({_PAGE}), got {x!r}")
    chip = current().chip
    if "L0A_MX" not in chip.buffers or "L0B_MX" not in chip.buffers:
        raise UnsupportedError(f"{loc}: {name}: chip {chip.name} has no MX cube (its table has no ScaleLeft / "
                               f"ScaleRight buffers; {_PAGE}: Ascend 950 only)")
    if dst.dtype is not DType.fp32:
        raise ShapeError(f"{loc}: {name} dst_tile {dst!r} must be DT_FP32 ({_PAGE}: the MX matmul accumulates in "
                         f"FP32), got {dst.dtype}")
    _mx_group(name, a, b, chip, loc)
    (m, k), (k2, n), (dm, dn) = a.shape, b.shape, dst.shape
    if k != k2 or (dm, dn) != (m, n):
        raise ShapeError(f"{loc}: {name} shapes do not chain: dst_tile {dst!r} {[dm, dn]} = lhs_tile {a!r} {[m, k]} "
                         f"@ rhs_tile {b!r} {[k2, n]} ({_PAGE})")
    if k % MX_K_STEP:
        raise ShapeError(f"{loc}: {name} K = {k} (lhs_tile {a!r}, rhs_tile {b!r}) is not a multiple of {MX_K_STEP} "
                         f"({_PAGE}: K必须为64的倍数)")
    for s, what, want, pair in ((sa, "scale_a", (m, k // MX_GROUP), "[M, K/32]"),
                                (sb, "scale_b", (k // MX_GROUP, n), "[K/32, N]")):
        if s.dtype is not DType.fp8e8m0:         # (tile.py refuses another dtype in a scale buffer already)
            raise ShapeError(f"{loc}: {name} {what} {s!r} must be DT_FP8E8M0 ({_PAGE}), got {s.dtype}")
        if s.shape != want:
            raise ShapeError(f"{loc}: {name} {what} {s!r} has shape {list(s.shape)}, but lhs_tile {a!r} [M, K] = "
                             f"{[m, k]} and rhs_tile {b!r} [K, N] = {[k, n]} need {what} {pair} = {list(want)} "
                             f"({_PAGE}: one E8M0 scale per 32 K elements, checked on the logical shape)")
    for s, what, data, dname in ((sa, "scale_a", a, "lhs_tile"), (sb, "scale_b", b, "rhs_tile")):
        da, ds = _whole(data, dname, name, loc), _whole(s, what, name, loc)
        if ds != da >> 4:
            raise KernelError(f"{loc}: {name} {what} {s!r} is at {ds:#x}, but {dname} {data!r} is "
                              f"at {da:#x}, so the cube reads {what} at {da:#x} >> 4 = {da >> 4:#x} ({_PAGE}: "
                              f"addr({what}) = addr({dname}) >> 4 is mandatory; the hardware reads the mapped "
                              f"address whatever the scale tile's); place {what} at {da >> 4:#x}")
    if a.valid is None and b.valid is None:
        return m, k, n, None
    vm, vk = extent(a)
    vk2, vn = extent(b)
    if vk != vk2:
        raise ShapeError(f"{loc}: {name}'s valid K differs: lhs_tile {a!r} has valid shape [{vm}, {vk}], rhs_tile "
                         f"{b!r} [{vk2}, {vn}]; set both to the K the step covers (pl.set_validshape)")
    if vk % MX_K_STEP:
        raise ShapeError(f"{loc}: {name}'s valid K = {vk} (lhs_tile {a!r}) is not a multiple of {MX_K_STEP} "
                         f"({_PAGE}: K必须为64的倍数; a K tail is padded to whole groups by the kernel)")
    for s, what, want in ((sa, "scale_a", (vm, vk // MX_GROUP)), (sb, "scale_b", (vk // MX_GROUP, vn))):
        got = extent(s)
        if got[0] < want[0] or got[1] < want[1]:
            raise ShapeError(f"{loc}: {name} {what} {s!r} has valid shape {list(got)}, but the MMAD's valid "
                             f"[M, K, N] = {[vm, vk, vn]} reads {list(want)} of it ({_PAGE})")
    return m, k, n, (vm, vk, vn)


def _mmad_mx(name: str, dst: Tile, a: Tile, b: Tile, sa: Tile, sb: Tile, phase, accumulate: bool, loc: Loc) -> None:
    tr, phase = on_aic(name, phase, loc)
    if tr is None:
        return
    m, k, n, valid = _check_mx(name, dst, a, b, sa, sb, loc)
    if valid is None:
        srcs, out = [a.access, b.access, region(sa), region(sb)], dst.access
    else:
        vm, vk, vn = valid
        srcs = [a.region_of(vm, vk), b.region_of(vk, vn), sa.region_of(vm, vk // MX_GROUP),
                sb.region_of(vk // MX_GROUP, vn)]
        out = dst.region_of(vm, vn)
    if accumulate:
        srcs.append(out)
        if phase is not None:
            _ksplit_rules(dst, name, loc)
    attrs = {"m": m, "n": n, "k": k, "phase": phase, "accumulate": accumulate, "bias": False, "dtype": a.dtype,
             "mx": (a.dtype, b.dtype)}
    emit(Op.MMAD, Pipe.M, Role.AIC, tuple(srcs), (out,), attrs, loc, name, (dst, a, b, sa, sb), phase is not None, tr)


def matmul_mx(dst_tile: Tile, lhs_tile: Tile, rhs_tile: Tile, scale_a: Tile, scale_b: Tile, *,
              phase: Optional[AccPhase] = None) -> None:
    """dst = dequant(lhs, scale_a) @ dequant(rhs, scale_b) (matmul_mx.md): the first K block of an MX matmul. lhs
    [M, K] Left and rhs [K, N] Right of FP8 E4M3FN / E5M2 (any pair), scale_a [M, K/32] ScaleLeft (ZZ) and scale_b
    [K/32, N] ScaleRight (NN) of DT_FP8E8M0 at their data tiles' addresses >> 4, dst [M, N] fp32 Acc; K % 64 == 0.
    The rules and the data: the module docstring."""
    loc = caller_loc()
    current()
    _mmad_mx("pl.matmul_mx", dst_tile, lhs_tile, rhs_tile, scale_a, scale_b, phase, False, loc)


def matmul_mx_acc(dst_tile: Tile, acc_tile: Tile, lhs_tile: Tile, rhs_tile: Tile, scale_a: Tile, scale_b: Tile, *,
                  phase: Optional[AccPhase] = None) -> None:
    """dst = acc + dequant(lhs, scale_a) @ dequant(rhs, scale_b) (matmul_mx_acc.md), in place: acc_tile is dst_tile.
    Each K block loads its own scales (the page), at its data tiles' addresses >> 4 in every ring slot."""
    loc = caller_loc()
    need_in_place(acc_tile, dst_tile, "pl.matmul_mx_acc", loc, "matrix_computation/matmul_mx_acc.md")
    _mmad_mx("pl.matmul_mx_acc", dst_tile, lhs_tile, rhs_tile, scale_a, scale_b, phase, True, loc)


__all__ = ["matmul_mx", "matmul_mx_acc"]
