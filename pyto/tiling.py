"""Cube tile-shape rules of docs/tile_shapes.md (``pypto.set_cube_tile_shapes``).

``set_cube_tile_shapes([mL0, mL1], [kL0, kL1], [nL0, nL1], enable_split_k=False, *, dtype=None,
chip=None, ...)`` checks every constraint of docs/tile_shapes.md §6 ("约束说明"), returns a frozen
:class:`CubeTileShapes` and makes it the current default (as pypto does; ``get_cube_tile_shapes()``
reads it back, ``reset_cube_tile_shapes()`` clears it, ``with cube_tile_shapes(...):`` sets it for a
block). A broken rule raises :class:`~pyto.errors.TilingError` whose ``.rule`` is a short stable name
and whose message names the rule in words and gives the numbers.

Rules, in the order they are checked (the first broken one is raised; ``violations()`` lists all):

==================== ==================================================================== ==========
rule                 docs/tile_shapes.md §6 text                                                        needs
==================== ==================================================================== ==========
shape                m, k, n are [L0, L1] pairs of integers                                 -
positive             "0 < mL0", "0 < kL0", "0 < nL0" (and so every L1 > 0)                  -
option / dtype       option values (formats ND|NZ, ndim 2..4, cube input dtype)             -
l0_le_l1_{m,k,n}     "0 < xL0 <= xL1"                                                       -
divisible_{m,k,n}    "xL1 % xL0 == 0"                                                       -
split_k_ndim         "当输入矩阵维度为3维或4维时，enable_split_k参数仅支持False"             -
nz_outer             NZ A/B: "外轴切分大小满足16元素对齐"                                   -
align_k, align_n     "kL0、kL1、nL0、nL1均满足32字节对齐（DT_FP32输入场景要求满足16元素对齐）" dtype
align_m_transposed   "A矩阵在format为ND且转置场景时（即数据排布为(K, M)），要求mL0满足32字节对齐" dtype
nz_inner             NZ A/B: "内轴切分大小满足32字节对齐"                                   dtype
nz_out_inner         "当输出为NZ格式时，需要满足内轴（N轴）32字节对齐"                       out dtype
split_k_out_dtype    "多核切K场景支持数据类型" (fp16/bf16/fp32 -> fp32, int8 -> int32)       dtype
l0a/l0b/l0c_capacity "L0A、L0B、L0C空间约束" (CeilAlign 16; 32 and int32 C for int8)         dtype, chip
l1_capacity          "L1空间约束"                                                           dtype, chip
bt_capacity          bias: "nL0 * 4 <= BTBuffer_size"                                       chip
fb_capacity          scale (FixPipe): "nL0 * 8 <= FixBuffer_size"                          chip
==================== ==================================================================== ==========

Choices made where docs/tile_shapes.md §6 is silent or ambiguous:

* ``dtype=None`` at set time: only the rules whose "needs" column has no dtype are checked then; the
  others run when a matmul uses the shapes (``CubeTileShapes.check(dtype, chip)``). ``nz_out_inner``
  is checked at set time when ``out_dtype`` is given explicitly.
* ``chip=None`` at set time checks the chip-dependent rules against the default chip ``ascend950pr``
  (docs/design.md §2's default everywhere; its buffers are the largest of the bundled chips, so nothing legal on
  A2/A3 is refused). The stored ``chip`` stays ``None`` so ``check()`` at use time takes the chip of
  the matmul. The seed's 1KB BT / 2KB FB are A2/A3's figures; every buffer size comes from the chip
  table (BT 4KB, FB 4KB on ascend950pr).
* The "16 elements for fp32" exception of the first alignment bullet applies to kL0, kL1, nL0, nL1
  only, as written. The other 32-byte rules (transposed ND A's mL0, NZ inner axes, NZ output inner
  axis) are literal 32 bytes, i.e. 8 fp32 elements.
* Axes of the NZ rules: A not transposed is (M, K): outer M, inner K; A transposed is (K, M): outer
  K, inner M. B not transposed is (K, N): outer K, inner N; B transposed (``transpose_b``, an extra
  option) is (N, K): outer N, inner K. Both the L0 and the L1 split of an axis are checked.
* The ND transposed-A rule names mL0 only; mL1 is not checked by it (it is a multiple of mL0 anyway).
* NZ output: the inner axis is N, so nL0 (the split written out per tile) must be 32B aligned in the
  out dtype. Default out dtype: with split-K the listed one (fp32, or int32 for int8); otherwise the
  input dtype for float inputs and int32 for int8 (docs/design.md §2).
* Split-K needs 2-D inputs: any ``ndim != 2`` is refused (the seed names 3-D and 4-D).
* L1 with ``bias=True`` also holds the bias row on its way to BT, which the seed's L1 formula leaves out
  (with A and B filling L1 there is no room to stage it): pyto adds its two slots, ND rows of nL0 fp32
  (``2*CeilAlign(nL0,8)*4B``, as pyto_kernels.matmul allocates them), so such a tiling is refused here
  rather than by the matmul. The scale (FB) is not added.
* Non-integers (``bool`` and ``float`` included), non-pairs -> rule ``shape``; values <= 0 -> rule
  ``positive``. Unknown option values -> rule ``option``; a non-cube input dtype -> rule ``dtype``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import operator
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from .chip import Chip, load_chip
from .dtypes import DType, as_dtype
from .errors import PytoError, TilingError

DEFAULT_CHIP = "ascend950pr"
#: A matmul's bias row ring in L1 (kernels' alloc_buffers): the next tile's row loads while BT takes this one.
BIAS_ROW_SLOTS = 2
CUBE_INPUTS = (DType.fp16, DType.bf16, DType.fp32, DType.int8)
IN_FORMATS = ("ND", "NZ")
OUT_FORMATS = ("ND", "NZ")
#: docs/tile_shapes.md §6.9 "多核切K场景支持数据类型": input dtype -> the only out dtype allowed with split-K.
SPLIT_K_OUT = {DType.fp16: DType.fp32, DType.bf16: DType.fp32, DType.int8: DType.int32,
               DType.fp32: DType.fp32}

_SEED = "docs/tile_shapes.md §6"


def ceil_align(value: int, align: int) -> int:
    """docs/tile_shapes.md §6.4 CeilAlign: ``((value + align - 1) // align) * align``."""
    return ((value + align - 1) // align) * align


def bias_row_bytes(cols: int, isz: int) -> int:
    """L1 a matmul's bias row ring takes: BIAS_ROW_SLOTS ND rows of `cols` elements of `isz` bytes, each 32B-aligned
    (staged on its way to BT as Ascend C copies it, not as a 16-row fractal)."""
    return BIAS_ROW_SLOTS * ceil_align(cols, 32 // isz) * isz


def _as_int(name: str, v: Any) -> int:
    if isinstance(v, bool) or isinstance(v, float):
        raise TilingError(f"shape: {name} must be an integer, got {v!r}", rule="shape")
    try:
        i = operator.index(v)
    except TypeError:
        raise TilingError(f"shape: {name} must be an integer, got {v!r}", rule="shape") from None
    if i <= 0:
        ax = name[0]
        raise TilingError(f"positive: {name}={i} must be > 0 ({_SEED}: 0 < {ax}L0 <= {ax}L1)", rule="positive")
    return i


def _pair(axis: str, v: Any) -> tuple[int, int]:
    """[L0, L1] of one axis as two positive ints; TilingError('shape'/'positive') otherwise."""
    if isinstance(v, (str, bytes, dict)) or not hasattr(v, "__len__") or not hasattr(v, "__iter__"):
        raise TilingError(f"shape: {axis} must be a list [{axis}L0, {axis}L1] of 2 integers, got {v!r}",
                          rule="shape")
    try:
        items = list(v)
    except TypeError:
        raise TilingError(f"shape: {axis} must be a list [{axis}L0, {axis}L1] of 2 integers, got {v!r}",
                          rule="shape") from None
    if len(items) != 2:
        raise TilingError(f"shape: {axis} must be a list [{axis}L0, {axis}L1] of 2 integers, "
                          f"got {len(items)} values {v!r}", rule="shape")
    return _as_int(f"{axis}L0", items[0]), _as_int(f"{axis}L1", items[1])


def _input_dtype(d: Any) -> DType | None:
    if d is None:
        return None
    try:
        dt = as_dtype(d)
    except PytoError as e:
        raise TilingError(f"dtype: {e}", rule="dtype") from None
    if dt not in CUBE_INPUTS:
        raise TilingError(f"dtype: cube inputs are {', '.join(x.name for x in CUBE_INPUTS)}, got {dt.name}",
                          rule="dtype")
    return dt


def _out_dtype(d: Any) -> DType | None:
    if d is None:
        return None
    try:
        return as_dtype(d)
    except PytoError as e:
        raise TilingError(f"option: out_dtype: {e}", rule="option") from None


def _flag(name: str, v: Any) -> bool:
    if isinstance(v, bool) or type(v).__name__ == "bool_":
        return bool(v)
    raise TilingError(f"option: {name} must be True or False, got {v!r}", rule="option")


def _fmt(name: str, v: Any, allowed: Sequence[str]) -> str:
    f = v.upper() if isinstance(v, str) else v
    if f not in allowed:
        raise TilingError(f"option: {name} must be one of {', '.join(allowed)}, got {v!r}", rule="option")
    return f


def _resolve_chip(chip: "str | Chip | None") -> Chip:
    return load_chip(DEFAULT_CHIP if chip is None else chip)


@dataclass(frozen=True)
class CubeTileShapes:
    """A checked set of cube tile shapes (docs/tile_shapes.md §6) plus the options the rules depend on.

    Construction validates the structure only (integers > 0, option values); the seed's rules run
    in :meth:`check` (``set_cube_tile_shapes`` calls it). ``dtype``/``chip`` are what was given at
    set time (``None``: decided when a matmul uses the shapes).
    """

    mL0: int
    mL1: int
    kL0: int
    kL1: int
    nL0: int
    nL1: int
    enable_split_k: bool = False
    dtype: DType | None = None
    chip: "str | Chip | None" = field(default=None, hash=False)
    bias: bool = False
    transpose_a: bool = False
    transpose_b: bool = False
    a_format: str = "ND"
    b_format: str = "ND"
    out_format: str = "ND"
    scale: bool = False
    out_dtype: DType | None = None
    ndim: int = 2

    def __post_init__(self) -> None:
        s = object.__setattr__
        for name in ("mL0", "mL1", "kL0", "kL1", "nL0", "nL1"):
            s(self, name, _as_int(name, getattr(self, name)))
        for name in ("enable_split_k", "bias", "transpose_a", "transpose_b", "scale"):
            s(self, name, _flag(name, getattr(self, name)))
        s(self, "a_format", _fmt("a_format", self.a_format, IN_FORMATS))
        s(self, "b_format", _fmt("b_format", self.b_format, IN_FORMATS))
        s(self, "out_format", _fmt("out_format", self.out_format, OUT_FORMATS))
        s(self, "dtype", _input_dtype(self.dtype))
        s(self, "out_dtype", _out_dtype(self.out_dtype))
        if self.chip is not None and not isinstance(self.chip, (str, Chip)):
            raise TilingError(f"option: chip must be a chip name, a .toml path or a Chip, got {self.chip!r}",
                              rule="option")
        try:
            nd = -1 if isinstance(self.ndim, bool) else operator.index(self.ndim)
        except TypeError:
            nd = -1
        if not 2 <= nd <= 4:
            raise TilingError(f"option: ndim (dimensions of the matmul inputs) must be 2, 3 or 4 (docs/tile_shapes.md §6.8 names "
                              f"2-D inputs and, for split-K, 3-D and 4-D ones), got {self.ndim!r}", rule="option")
        s(self, "ndim", nd)

    # ---- views ------------------------------------------------------------------------------
    @property
    def m(self) -> tuple[int, int]:
        return (self.mL0, self.mL1)

    @property
    def k(self) -> tuple[int, int]:
        return (self.kL0, self.kL1)

    @property
    def n(self) -> tuple[int, int]:
        return (self.nL0, self.nL1)

    @classmethod
    def from_pairs(cls, m: Any, k: Any, n: Any, enable_split_k: Any = False, **options: Any) -> "CubeTileShapes":
        """From ``[L0, L1]`` pairs (docs/tile_shapes.md §3's call form), unchecked beyond the shape rules; ``check()`` runs the
        rest."""
        (mL0, mL1), (kL0, kL1), (nL0, nL1) = _pair("m", m), _pair("k", k), _pair("n", n)
        return cls(mL0, mL1, kL0, kL1, nL0, nL1, enable_split_k, **options)

    def with_options(self, **options: Any) -> "CubeTileShapes":
        """A copy with some fields replaced (validated like a new instance)."""
        names = {f.name for f in dataclasses.fields(self)}
        bad = sorted(set(options) - names)
        if bad:
            raise TilingError(f"option: unknown option(s) {', '.join(bad)}; known: {', '.join(sorted(names))}",
                              rule="option")
        return dataclasses.replace(self, **options) if options else self

    def resolved_out_dtype(self, dtype: "DType | str | None" = None) -> DType | None:
        """The out dtype: ``out_dtype`` if given, else the split-K one, else the input's (int32 for int8)."""
        if self.out_dtype is not None:
            return self.out_dtype
        d = _input_dtype(dtype) if dtype is not None else self.dtype
        if d is None:
            return None
        if self.enable_split_k:
            return SPLIT_K_OUT[d]
        return d.acc if d is DType.int8 else d

    # ---- the rules --------------------------------------------------------------------------
    def violations(self, dtype: "DType | str | None" = None, chip: "str | Chip | None" = None,
                   **options: Any) -> list[TilingError]:
        """Every broken docs/tile_shapes.md §6 rule, in check order, as TilingError objects (not raised).

        ``dtype``/``chip`` default to the ones stored; a missing dtype skips the dtype-dependent
        rules, a missing chip means ``ascend950pr``. ``options`` override stored fields.
        """
        ts = self.with_options(**options)
        d = _input_dtype(dtype) if dtype is not None else ts.dtype
        c = _resolve_chip(chip if chip is not None else ts.chip)
        out: list[TilingError] = []

        def bad(rule: str, msg: str) -> None:
            out.append(TilingError(f"{rule}: {msg}", rule=rule))

        # -- 0 < xL0 <= xL1 and xL1 % xL0 == 0 (dtype-independent) ----------------------------
        for ax in "mkn":
            l0, l1 = getattr(ts, f"{ax}L0"), getattr(ts, f"{ax}L1")
            if l0 > l1:
                bad(f"l0_le_l1_{ax}", f"{ax}L0={l0} > {ax}L1={l1} ({_SEED}: 0 < {ax}L0 <= {ax}L1)")
        for ax in "mkn":
            l0, l1 = getattr(ts, f"{ax}L0"), getattr(ts, f"{ax}L1")
            if l1 % l0:
                bad(f"divisible_{ax}", f"{ax}L1 % {ax}L0 = {l1} % {l0} = {l1 % l0} != 0 "
                                       f"({_SEED}: {ax}L1 % {ax}L0 == 0)")
        # -- split-K only for 2-D inputs --------------------------------------------------------
        if ts.enable_split_k and ts.ndim != 2:
            bad("split_k_ndim", f"enable_split_k=True with {ts.ndim}-D inputs; multi-core split-K supports "
                                f"2-D inputs only ({_SEED}: 3-D/4-D inputs require enable_split_k=False)")
        # -- NZ inputs: outer axis 16 elements (dtype-independent) -------------------------------
        for mat, outer, inner in ts._nz_axes():
            for name in (f"{outer}L0", f"{outer}L1"):
                v = getattr(ts, name)
                if v % 16:
                    bad("nz_outer", f"{mat} in NZ format: outer-axis split {name}={v} is not a multiple of "
                                    f"16 elements ({_SEED}: NZ outer axis 16-element aligned)")

        if d is not None:
            item = d.itemsize
            # -- kL0, kL1, nL0, nL1: 32 bytes (fp32: 16 elements) --------------------------------
            for ax in "kn":
                for name in (f"{ax}L0", f"{ax}L1"):
                    v = getattr(ts, name)
                    if d is DType.fp32:
                        if v % 16:
                            bad(f"align_{ax}", f"{name}={v} is not a multiple of 16 elements "
                                               f"({_SEED}: fp32 inputs need kL0, kL1, nL0, nL1 "
                                               f"16-element aligned)")
                    elif (v * item) % 32:
                        bad(f"align_{ax}", f"{name}={v} * sizeof({d.name})={item}B = {v * item} B is not a "
                                           f"multiple of 32 B ({_SEED}: kL0, kL1, nL0, nL1 32-byte aligned)")
            # -- ND transposed A: mL0 32 bytes -------------------------------------------------
            if ts.transpose_a and ts.a_format == "ND" and (ts.mL0 * item) % 32:
                bad("align_m_transposed", f"A is ND and transposed (K, M): mL0={ts.mL0} * sizeof({d.name})="
                                          f"{item}B = {ts.mL0 * item} B is not a multiple of 32 B "
                                          f"({_SEED}: mL0 32-byte aligned)")
            # -- NZ inputs: inner axis 32 bytes -------------------------------------------------
            for mat, outer, inner in ts._nz_axes():
                for name in (f"{inner}L0", f"{inner}L1"):
                    v = getattr(ts, name)
                    if (v * item) % 32:
                        bad("nz_inner", f"{mat} in NZ format: inner-axis split {name}={v} * sizeof({d.name})="
                                        f"{item}B = {v * item} B is not a multiple of 32 B "
                                        f"({_SEED}: NZ inner axis 32-byte aligned)")
        # -- NZ output: inner axis N 32 bytes in the out dtype ----------------------------------
        od = ts.resolved_out_dtype(d)
        if ts.out_format == "NZ" and od is not None and (ts.nL0 * od.itemsize) % 32:
            bad("nz_out_inner", f"output in NZ format: nL0={ts.nL0} * sizeof({od.name})={od.itemsize}B = "
                                f"{ts.nL0 * od.itemsize} B is not a multiple of 32 B "
                                f"({_SEED}: NZ output inner axis (N) 32-byte aligned)")
        # -- split-K out dtypes -----------------------------------------------------------------
        allowed = ", ".join(f"{i.name}->{o.name}" for i, o in SPLIT_K_OUT.items())
        if d is not None and ts.enable_split_k and od is not SPLIT_K_OUT[d]:
            bad("split_k_out_dtype", f"enable_split_k=True with {d.name} inputs and out_dtype {od.name}; "
                                     f"split-K supports {d.name}->{SPLIT_K_OUT[d].name} only "
                                     f"({_SEED}: {allowed})")
        elif d is None and ts.enable_split_k and od is not None and od not in SPLIT_K_OUT.values():
            bad("split_k_out_dtype", f"enable_split_k=True with out_dtype {od.name}: no split-K input gives it "
                                     f"({_SEED}: {allowed})")
        # -- buffer capacities --------------------------------------------------------------------
        # (without a dtype only L0C, BT and FB, which do not depend on it)
        for buf, (used, cap, formula) in ts._usage_terms(d, c).items():
            if used > cap:
                bad(f"{buf.lower()}_capacity", f"{formula} = {used} B > {buf} {cap} B on {c.name}")
        return out

    def check(self, dtype: "DType | str | None" = None, chip: "str | Chip | None" = None,
              **options: Any) -> "CubeTileShapes":
        """Run the docs/tile_shapes.md §6 rules for this dtype and chip; raise the first broken one as TilingError.

        Used when a matmul uses the shapes. ``dtype``/``chip`` default to the stored ones (chip:
        then ``ascend950pr``); ``options`` (bias=, scale=, transpose_a=, out_dtype=, ndim=, ...)
        override stored fields. Returns the instance with the options applied.
        """
        errs = self.violations(dtype, chip, **options)
        if errs:
            raise errs[0]
        return self.with_options(**options)

    def usage(self, dtype: "DType | str | None" = None,
              chip: "str | Chip | None" = None) -> dict[str, tuple[int, int]]:
        """Buffer -> (bytes used, capacity) by the docs/tile_shapes.md §6 formulas: L0A, L0B, L0C, L1, BT (bias), FB (scale)."""
        d = _input_dtype(dtype) if dtype is not None else self.dtype
        if d is None:
            raise TilingError("dtype: usage() needs the input dtype (none given and none set)", rule="dtype")
        c = _resolve_chip(chip if chip is not None else self.chip)
        return {b: (u, cap) for b, (u, cap, _) in self._usage_terms(d, c).items()}

    # ---- internals --------------------------------------------------------------------------
    def _nz_axes(self) -> list[tuple[str, str, str]]:
        """(matrix, outer axis, inner axis) of each NZ input."""
        axes = []
        if self.a_format == "NZ":
            axes.append(("A (K, M)", "k", "m") if self.transpose_a else ("A (M, K)", "m", "k"))
        if self.b_format == "NZ":
            axes.append(("B (N, K)", "n", "k") if self.transpose_b else ("B (K, N)", "k", "n"))
        return axes

    def _usage_terms(self, d: DType | None, c: Chip) -> dict[str, tuple[int, int, str]]:
        """buffer -> (bytes, capacity, formula text with the numbers); dtype-dependent ones need d."""
        terms: dict[str, tuple[int, int, str]] = {}
        if d is not None:
            al = 32 if d is DType.int8 else 16
            a = b = d.itemsize
            cd = d.acc

            def ca(name: str) -> tuple[int, str]:
                v = getattr(self, name)
                return ceil_align(v, al), f"CeilAlign({name}={v},{al})"

            (m0, tm0), (k0, tk0), (n0, tn0) = ca("mL0"), ca("kL0"), ca("nL0")
            (m1, tm1), (k1, tk1), (n1, tn1) = ca("mL1"), ca("kL1"), ca("nL1")
            terms["L0A"] = (m0 * k0 * a, c.buffers["L0A"], f"{tm0}*{tk0}*sizeof({d.name})={a}B")
            terms["L0B"] = (n0 * k0 * b, c.buffers["L0B"], f"{tn0}*{tk0}*sizeof({d.name})={b}B")
            terms["L0C"] = (m0 * n0 * cd.itemsize, c.buffers["L0C"],
                            f"{tm0}*{tn0}*sizeof({cd.name})={cd.itemsize}B")
            bias_rows = bias_row_bytes(self.nL0, 4) if self.bias else 0     # fp32 rows (module docstring)
            terms["L1"] = (m1 * k1 * a + n1 * k1 * b + bias_rows, c.buffers["L1"],
                           f"{tm1}*{tk1}*{a}B + {tn1}*{tk1}*{b}B"
                           + (f" + bias rows 2*CeilAlign(nL0={self.nL0},8)*4B" if self.bias else ""))
        else:   # L0C accumulates 4-byte values whatever the input: checkable now (16-alignment, the least)
            m0, n0 = ceil_align(self.mL0, 16), ceil_align(self.nL0, 16)
            terms["L0C"] = (m0 * n0 * 4, c.buffers["L0C"], f"CeilAlign(mL0={self.mL0},16)*CeilAlign(nL0={self.nL0},16)"
                                                           f"*4B (fp32/int32 accumulators, any input dtype)")
        if self.bias:
            terms["BT"] = (self.nL0 * 4, c.buffers["BT"], f"bias nL0={self.nL0}*4B (fp32)")
        if self.scale:
            terms["FB"] = (self.nL0 * 8, c.buffers["FB"], f"scale nL0={self.nL0}*8B (uint64)")
        return terms


# ---- the current default (module-level, as pypto; a `with cube_tile_shapes(...)` block is its thread's) ----
_current: CubeTileShapes | None = None


class _Scoped(threading.local):
    """The tile shapes of the `with cube_tile_shapes(...)` blocks open in this thread (innermost last)."""

    def __init__(self):
        self.stack: list = []


_SCOPED = _Scoped()


def set_cube_tile_shapes(m: Sequence[int], k: Sequence[int], n: Sequence[int], enable_split_k: bool = False,
                         *, dtype: Any = None, chip: "str | Chip | None" = None, bias: bool = False,
                         transpose_a: bool = False, a_format: str = "ND", b_format: str = "ND",
                         out_format: str = "ND", scale: bool = False, out_dtype: Any = None, ndim: int = 2,
                         transpose_b: bool = False) -> CubeTileShapes:
    """docs/tile_shapes.md ``set_cube_tile_shapes``: check the tile shapes and make them the current default.

    ``m``, ``k``, ``n`` are ``[L0, L1]`` pairs. With ``dtype=None`` only the dtype-independent rules
    run now; the rest run in ``CubeTileShapes.check`` when a matmul uses the shapes. ``chip=None``
    checks against ``ascend950pr`` now and leaves the chip to the matmul. Raises TilingError naming
    the broken rule; on error the current default is left unchanged.
    """
    global _current
    ts = _checked(m, k, n, enable_split_k, dtype=dtype, chip=chip, bias=bias, transpose_a=transpose_a,
                  transpose_b=transpose_b, a_format=a_format, b_format=b_format, out_format=out_format, scale=scale,
                  out_dtype=out_dtype, ndim=ndim)
    _current = ts
    return ts


def _checked(m, k, n, enable_split_k: bool, **kwargs: Any) -> CubeTileShapes:
    ts = CubeTileShapes.from_pairs(m, k, n, enable_split_k, **kwargs)
    ts.check()
    return ts


def get_cube_tile_shapes() -> CubeTileShapes | None:
    """The current default tile shapes: the innermost ``with cube_tile_shapes(...)`` of this thread, else the
    last successful ``set_cube_tile_shapes`` (process-wide), or None."""
    return _SCOPED.stack[-1] if _SCOPED.stack else _current


def reset_cube_tile_shapes() -> None:
    """Forget the current default tile shapes."""
    global _current
    _current = None


@contextlib.contextmanager
def cube_tile_shapes(m: Sequence[int], k: Sequence[int], n: Sequence[int], enable_split_k: bool = False,
                     **kwargs: Any) -> Iterator[CubeTileShapes]:
    """``with cube_tile_shapes([..], [..], [..]) as ts:`` the default inside the block, in this thread only."""
    ts = _checked(m, k, n, enable_split_k, **kwargs)
    _SCOPED.stack.append(ts)
    try:
        yield ts
    finally:
        _SCOPED.stack.pop()


__all__ = ["CubeTileShapes", "set_cube_tile_shapes", "get_cube_tile_shapes", "reset_cube_tile_shapes",
           "cube_tile_shapes", "ceil_align", "bias_row_bytes", "BIAS_ROW_SLOTS", "SPLIT_K_OUT", "DEFAULT_CHIP",
           "IN_FORMATS", "OUT_FORMATS"]
