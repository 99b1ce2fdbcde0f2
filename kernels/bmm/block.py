"""The shared cube pipeline (CATLASS `block_mmad`): L1/L0 ping-pong rings and the K loop of one output tile.

A kernel allocates the rings once with `alloc_buffers`, then calls `mmad_tile` for every output tile it
owns (its tile loop, order and epilogue are its own business: matmul and each BMM branch differ there).

One output tile, base_m x base_n, is computed as (the stepK structure of docs/bmm_branches.md §8.2.4):

    for each L1 step k1 of depth k_l1:                 MTE2: A [base_m, k_l1] and B [k_l1, base_n] -> L1
        for each L0 step kk of depth base_k in it:     MTE1: L1 views -> L0A / L0B
            MMAD into the tile's L0C slot              (the first step writes, with the bias; the rest accumulate)
    Fixpipe: L0C -> GM (fp32/int32 -> the output dtype)

Rings of `stages` slots let MTE2 fill the next L1 slot and MTE1 the next L0 slot while the cube works
(the framework's auto-sync orders each slot's reuse). Two L0C slots let Fixpipe drain one output tile
while the cube accumulates the next.

An operand may instead be *held* in L1 across output tiles (`hold_a`/`hold_b`): a slab of rows of A (or
columns of B) over the whole K is loaded once and every tile inside it reads L1 views. This is docs/bmm_branches.md §8.2.5's
L1 full-load specialisation (slab = the whole matrix) and the reuse of an L1 tile by the L0 tiles it
contains (slab = mL1 rows / nL1 columns).

Synchronisation of L0C between the cube and Fixpipe uses the hardware unit_flag by default (MMAD
AccPhase.Partial ... Final on the last K step, store STPhase.Final), as docs/bmm_branches.md §6.2.3 asks
("fixpipe 应开 unitflag"): the flag is per 512B block of L0C, so Fixpipe starts on exactly the blocks the
final MMAD has finished and the next tile's first MMAD into that slot waits only for the blocks Fixpipe
has drained, with no scalar set_flag/wait_flag pair per tile. `use_unit_flag=False` falls back to the
framework's software sync (no phases) — same results, for comparison.

Edge tiles: the L0 and L0C views are trimmed to the tile's rows/columns (rounded up to the fractal grid) so
MMAD and Fixpipe do not pay for the padding, and the last K step is trimmed the same way. Each view's valid
shape is the tile's real extent (pl.set_validshape): `at_edge` gives a GM load's or store's view the part inside
the tensor (pyto refuses a GM access past the edge), and mmad_l1 gives the L0A/L0B views and their L1 sources
the real [M, K] / [K, N] of each step, which the MMAD computes; the padding around them is never read.

DN operands (transpose_a: A stored [K, M]; transpose_b: B stored [N, K]) are loaded with order=[1, 0] and
take one of two routes, chosen in one place, `l1_as_stored`: on a chip with Dn2Nz (the 950) their L1 tiles are
NZ in the matmul's terms (A [M, K] / B [K, N]) and the GM -> L1 load transposes; on a chip without it (Atlas
A2/A3, docs/fractal_formats.md §4.4) the L1 tiles are ZN, the NZ bytes of the operand as stored, and the move L1 -> L0A/L0B
transposes. Either way the tiles' views take the matmul's terms. The L1 bytes are the same both ways (the
CeilAlign padding is the same on both axes); what differs is the grid a stored A's views sit on (its M is the
inner axis: 32 B, 32 int8 rows) and the square the transposing L0A move takes (int8 32 x 32), so a stored int8
A's M tiles are trimmed in multiples of 32 (`Buffers.m_align`), as the planners' base_m already is (mn_align 32
for int8).

K splits under unit_flag follow PyPTO-Pro's rule (matmul_acc.md): `pl.system.set_mm_layout_transform` is on
while a tile's phased MMADs run and goes off after its store.

8-bit floats: A and B may differ in type (FP8 E4M3FN x E5M2, `dtype_b`); L0C accumulates in fp32 either way.

MX (MXFP8, `alloc_buffers(mx=MxScales(...))`): every L1 tile of A [rows, k] has its E8M0 scale tile [rows, k/32]
(ZZ) beside it, every one of B [k, cols] its [k/32, cols] (NN), loaded GM -> Mat with the data (one load per L1
step or held slab; `MxScales` says where in the GM scale tensors), moved Mat -> ScaleLeft / ScaleRight on MTE1
with the data's Mat -> Left / Right move, and each MMAD is pl.matmul_mx / matmul_mx_acc. PyPTO-Pro's address rule
addr(scale) = addr(data) >> 4 holds by construction: the L0A / L0B rings sit at address 0 of their buffers with
slots of S bytes ([base_m, base_k] of 1-byte elements), the scale rings at address 0 of ScaleLeft / ScaleRight with
twice the slots of S/32 bytes each, so data slot i (at i*S) pairs with scale slot 2i (at i*S/16) (matmul_mx checks
it: a KernelError names both addresses otherwise). matmul_mx takes
whole tiles (its address rule is on whole tiles): the L0A / L0B / L0C tiles of an MX step are the whole ring slots
with their valid shapes set (the MMAD is charged for the whole tile; an edge tile costs a full one). K tiles are
multiples of 64 (two scale groups), as the planner's k_align is for MX; matmul_mx has no bias operand (bmm
refuses a bias with MX).

MXFP4 (A, B FP4 E2M1 / E1M2 in any mix): the same pipeline at half a byte an element. GM holds packed pairs (element
2i in the low nibble of byte i along the stored last axis: A [.., M, K/2] or [.., K, M/2], B [.., K, N/2] or
[.., N, K/2]); every offset and edge here is in elements, and `load_l1` hands pl.load the byte offset on the packed
axis (`gm_offsets`, `matrix_shape`). An L0 data slot of S bytes holds 2S elements, so its scales are S/16 bytes: the
scale rings have as many slots as the data rings, slot i pairing with slot i (addr(scale) = addr(data) >> 4 again).
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import pyto.language as pl
from pyto.tiling import BIAS_ROW_SLOTS

MX_GROUP = 32          # K elements per E8M0 scale (matmul_mx.md)
_E8M0 = pl.DT_FP8E8M0
FP4_TYPES = (pl.DT_FP4E2M1, pl.DT_FP4E1M2)


def matrix_shape(t) -> tuple:
    """A GM operand's shape in elements: an FP4 tensor's last axis counts packed bytes, two elements each (PyPTO-Pro's
    FP4 tensors; pl.load's offsets on that axis count bytes too: `gm_offsets`)."""
    shape = tuple(t.shape)
    return shape[:-1] + (2 * shape[-1],) if t.dtype in FP4_TYPES else shape


def gm_offsets(t, offsets: Sequence[int]) -> list:
    """pl.load's offsets into `t` for a block at element `offsets`: an FP4 tensor's last one in bytes (elements / 2,
    as test_matmul_mx.py writes [mi, ki // 2])."""
    offs = list(offsets)
    if t.dtype in FP4_TYPES:
        offs[-1] //= 2
    return offs


class MxScales:
    """The GM E8M0 scales of an MX BMM launch and where an operand tile's scales sit in them (plain Python: the
    kernels build it at trace time).

    scale_a is GM [Ba*M, K/64, 2]: the user's logical scale_a [*a_batch, M, K/32] with its batch dims folded into
    rows and each pair of groups (2p, 2p+1) on the last axis (a reshape: common.mx_gm_scales), which a ZZ Mat tile loads
    ascending (pyto/language/mx_scales.py: tile[r, c] = gm[o0 + r, o1 + c // 2, c % 2]). scale_b is GM
    [Bb*K/64, N, 2]: the logical [*b_batch, K/32, N] with the pair along K moved last (a transposing copy), which an
    NN Mat tile loads ascending (tile[g, n] = gm[o0 + g // 2, o1 + n, g % 2]). a_batch / b_batch: the batch shapes
    of the kernel's A and B (their batch offsets, as common.batch_offsets gives them, fold with these)."""

    def __init__(self, scale_a, scale_b, a_batch, b_batch, M: int, N: int, K: int):
        self.scale_a, self.scale_b = scale_a, scale_b
        self.a_batch, self.b_batch = tuple(a_batch), tuple(b_batch)
        self.M, self.N, self.K = M, N, K
        pairs = K // (2 * MX_GROUP)
        assert tuple(scale_a.shape) == (math.prod(a_batch) * M, pairs, 2), f"scale_a {scale_a.shape} for M {M}, K {K}"
        assert tuple(scale_b.shape) == (math.prod(b_batch) * pairs, N, 2), f"scale_b {scale_b.shape} for N {N}, K {K}"

    def a_offsets(self, batch: Sequence[int], m0: int, k0: int) -> list:
        """GM offsets of scale_a for A's rows from m0 and K from k0 (a multiple of 64) in A's batch `batch`."""
        return [_flat(batch, self.a_batch) * self.M + m0, k0 // (2 * MX_GROUP), 0]

    def b_offsets(self, batch: Sequence[int], n0: int, k0: int) -> list:
        """GM offsets of scale_b for B's columns from n0 and K from k0 (a multiple of 64) in B's batch `batch`."""
        return [_flat(batch, self.b_batch) * (self.K // (2 * MX_GROUP)) + k0 // (2 * MX_GROUP), n0, 0]


def _flat(idx: Sequence[int], shape: Sequence[int]) -> int:
    """The row-major number of the batch `idx` in `shape`."""
    out = 0
    for i, d in zip(idx, shape):
        out = out * d + i
    return out


def _ceil(x: int, a: int) -> int:
    return -(-x // a) * a


def l1_as_stored(transpose: bool) -> bool:
    """Whether an operand stays in L1 as it is stored in GM (call inside a kernel): a DN operand on a chip
    without Dn2Nz (`pl.has_dn2nz()`: docs/fractal_formats.md §4.4 gives the DN -> Nz conversion on GM -> L1 to the 950 only),
    so its L1 tile is ZN and its transpose happens on the way L1 -> L0A/L0B instead."""
    return bool(transpose) and not pl.has_dn2nz()


def m_trim(itemsize: int, a_stored: bool) -> int:
    """The multiple an edge tile's M is trimmed to: 16 (L0A / L0C fractal rows), or, where L1 holds A as stored
    ([K, M]: M is the 32 B inner axis, and the transposing L0A load moves int8 in 32 x 32 squares), 32 B of
    elements and at least 16: 32 for int8. The kernels (`Buffers.m_align`) and the cost model (cost_tile) read
    it here."""
    return max(16, 32 // itemsize) if a_stored else 16


def at_edge(view, tensor, offsets: Sequence[int], *, transpose: bool = False):
    """`view` with its valid shape set to its part inside `tensor` when its [0, 0] sits at `offsets` (a tail tile),
    or to the whole view (a ring slot keeps a valid shape until set again); `transpose`: the tensor holds the
    view's block transposed (a DN operand). Returns the view."""
    rows, cols = view.shape
    if transpose:
        rows, cols = cols, rows
    shape = matrix_shape(tensor)
    vr = min(rows, shape[-2] - offsets[-2])
    vc = min(cols, shape[-1] - offsets[-1])
    want = [vc, vr] if transpose else [vr, vc]
    if view.valid is not None or want != list(view.shape):
        pl.set_validshape(view, want)
    return view


def as_computed(c_l0c, tensor, offsets: Sequence[int]):
    """A view of the L0C tile `c_l0c` whose valid shape is what its MMADs wrote: c_l0c's valid region rounded up
    to L0C's 16 x 16 fractals (the cube computes whole fractals and sets their unit flags; the data pass fills the
    rows and columns past the valid ones with the zero-padded product), cut at `tensor`'s edge for a store at
    `offsets`. A store of more (the whole trimmed view, say: an int8 view is trimmed to 32 columns, 32 rows too
    where A is held as stored) would read fractals no MMAD wrote, and under unit_flag its STPhase.Final waits
    for their flags forever. Returns the view."""
    rows, cols = c_l0c.valid_shape
    view = c_l0c[:, :]
    return with_valid(view, min(_ceil(rows, 16), tensor.shape[-2] - offsets[-2]),
                      min(_ceil(cols, 16), tensor.shape[-1] - offsets[-1]))


def with_valid(view, rows: int, cols: int):
    """`view` with valid shape [rows, cols] (set only where it differs from what the view has). Returns it."""
    if [rows, cols] != list(view.valid_shape):
        pl.set_validshape(view, [rows, cols])
    return view


def load_l1(view, src, offsets: Sequence[int], *, transpose: bool, nd_num: int = 1, nd_axis: int = 0) -> None:
    """GM -> L1 into `view` (an operand's L1 tile or view, in the matmul's terms: A [M, K], B [K, N]) from `src` at
    `offsets` (GM's own coordinates, in elements: an FP4 tensor's packed last axis is addressed in bytes here,
    `gm_offsets`); transpose: `src` is DN, read with order=[1, 0]. A ZN view (the operand held as stored) takes it as
    a plain Nd2Nz, an NZ one as a Dn2Nz (pl.load's docstring). nd_num / nd_axis as pl.load's, nd_axis in the matmul's
    terms."""
    if nd_num == 1:
        at_edge(view, src, offsets, transpose=transpose)
    else:                   # each part's extent inside the tensor (pl.load: nd_num parts take the valid shape each)
        rows, cols = view.shape
        part = view[0:rows // nd_num, :] if nd_axis == 0 else view[:, 0:cols // nd_num]
        want = list(at_edge(part, src, offsets, transpose=transpose).valid_shape)
        if view.valid is not None or want != list(part.shape):
            pl.set_validshape(view, want)
    pl.load(view, src, gm_offsets(src, offsets), order=[-1, -2] if transpose else None, nd_num=nd_num,
            nd_axis=nd_axis)


def alloc_l1(shape: Sequence[int], dtype, *, transpose: bool = False, buffers: int = 1, name: str):
    """An operand's L1 tile(s), `shape` in the matmul's terms ([M, K] for A, [K, N] for B); transpose: the
    operand is DN, and on a chip without Dn2Nz (`l1_as_stored`) the tile is ZN, the NZ bytes of the operand as
    stored (its views and moves still take the matmul's terms). The bytes charged are the same either way
    (CeilAlign on both axes)."""
    return pl.alloc(pl.L1, list(shape), dtype, layout=pl.ZN if l1_as_stored(transpose) else None, buffers=buffers,
                    name=name)


class Buffers:
    """The rings of one kernel's cube pipeline (allocate with `alloc_buffers`, once per kernel)."""

    def __init__(self, dtype, base_m: int, base_n: int, base_k: int, k_l1: int, transpose_a: bool = False,
                 transpose_b: bool = False, dtype_b=None, mx: Optional[MxScales] = None):
        self.dtype, self.base_m, self.base_n, self.base_k, self.k_l1 = dtype, base_m, base_n, base_k, k_l1
        self.dtype_b = dtype if dtype_b is None else dtype_b
        self.mx = mx
        # MX: the scale rings beside the data rings (alloc_buffers; each L1 scale ring has its data ring's slot
        # count and advances with it); l0_i counts the L0 slots used (scale slot 2i pairs with data slot i);
        # a_hold_s / b_hold_s: the held slabs' scale views of the current tile (held_ab)
        self.a_l1s = self.b_l1s = self.a_holds = self.b_holds = self.a_l0s = self.b_l0s = None
        self.a_hold_s = self.b_hold_s = None
        self.l0_i, self.l0_n = -1, 1
        # scale slots per data slot: an L0 data slot of S bytes pairs with the scale span at S/16; a scale slot is
        # S/32 bytes at 8 bits (two a data slot) and S/16 at 4 (MXFP4: one)
        self.l0_pair = 2 * dtype.itemsize
        self.transpose_a, self.transpose_b = bool(transpose_a), bool(transpose_b)
        # views are trimmed on the fractal grid: 16 rows; N and K also a whole 32B fractal column (int8: 32)
        self.align = max(16, 32 // dtype.itemsize)
        # M tiles too, where L1 holds A as stored ([K, M]: M is the 32 B inner axis, and a transposing L0A
        # load moves int8 in 32 x 32 squares)
        self.m_align = m_trim(dtype.itemsize, l1_as_stored(transpose_a))
        self.a_l1 = self.b_l1 = self.a_hold = self.b_hold = None
        self.a_l0a = self.b_l0b = self.c_l0c = None
        self.bias_l1 = self.bias_bt = None
        self.a_key = self.b_key = None          # which slab each hold ring's current slot holds


def alloc_buffers(dtype, base_m: int, base_n: int, base_k: int, k_l1: Optional[int] = None, *, stages: int = 2,
                  l0_stages: Optional[int] = None, l0c_stages: int = 2, stream_a: bool = True, stream_b: bool = True,
                  hold_a: Optional[Sequence[int]] = None, hold_b: Optional[Sequence[int]] = None,
                  hold_stages: int = 1, bias_dtype=None, transpose_a: bool = False,
                  transpose_b: bool = False, dtype_b=None, mx: Optional[MxScales] = None) -> Buffers:
    """Allocate the pipeline's rings (call inside a @pl.kernel body, once).

    stages: slots of the streamed L1 tiles; l0_stages (default: stages) of the L0A/L0B tiles; l0c_stages of L0C.
    stream_a/stream_b=False skip the streamed L1 ring of an operand that is always held.
    hold_a=(rows, K) / hold_b=(K, cols): shape of a held slab (rows a multiple of base_m, cols of base_n,
    K of base_k), with hold_stages slots. bias_dtype: allocate the bias row (L1) and bias table (BT; fp32, or
    int32 for an int32 bias of an int8 matmul). transpose_a / transpose_b: the operand is DN (A [K, M], B
    [N, K] in GM); its L1 tiles take the matmul's terms either way, ZN (held as stored) where the chip has no
    Dn2Nz. dtype_b: B's element type where it differs from A's (an FP8 mix). mx: the launch's MX scales (module
    docstring): scale rings beside every data ring, base_k and k_l1 multiples of 64, no bias.
    """
    k_l1 = base_k if k_l1 is None else k_l1
    l0_stages = stages if l0_stages is None else l0_stages
    dtype_b = dtype if dtype_b is None else dtype_b
    assert k_l1 % base_k == 0, f"k_l1={k_l1} must be a multiple of base_k={base_k}"
    bufs = Buffers(dtype, base_m, base_n, base_k, k_l1, transpose_a, transpose_b, dtype_b, mx)
    g = MX_GROUP
    if mx is not None:
        assert base_k % (2 * g) == 0 and bias_dtype is None, f"MX: base_k={base_k} % 64, no bias ({bias_dtype})"
    if stream_a:
        bufs.a_l1 = alloc_l1([base_m, k_l1], dtype, transpose=transpose_a, buffers=stages, name="a_l1")
        if mx is not None:
            bufs.a_l1s = pl.alloc(pl.L1, [base_m, k_l1 // g], _E8M0, layout=pl.ZZ, buffers=stages,
                                  name="a_scale_l1")
    if stream_b:
        bufs.b_l1 = alloc_l1([k_l1, base_n], dtype_b, transpose=transpose_b, buffers=stages, name="b_l1")
        if mx is not None:
            bufs.b_l1s = pl.alloc(pl.L1, [k_l1 // g, base_n], _E8M0, layout=pl.NN, buffers=stages,
                                  name="b_scale_l1")
    if hold_a is not None:
        assert hold_a[0] % base_m == 0 and hold_a[1] % base_k == 0, f"hold_a {hold_a} vs base {base_m}x{base_k}"
        bufs.a_hold = alloc_l1(hold_a, dtype, transpose=transpose_a, buffers=hold_stages, name="a_hold_l1")
        if mx is not None:
            bufs.a_holds = pl.alloc(pl.L1, [hold_a[0], hold_a[1] // g], _E8M0, layout=pl.ZZ,
                                    buffers=hold_stages, name="a_scale_hold_l1")
    if hold_b is not None:
        assert hold_b[0] % base_k == 0 and hold_b[1] % base_n == 0, f"hold_b {hold_b} vs base {base_k}x{base_n}"
        bufs.b_hold = alloc_l1(hold_b, dtype_b, transpose=transpose_b, buffers=hold_stages, name="b_hold_l1")
        if mx is not None:
            bufs.b_holds = pl.alloc(pl.L1, [hold_b[0] // g, hold_b[1]], _E8M0, layout=pl.NN,
                                    buffers=hold_stages, name="b_scale_hold_l1")
    if bias_dtype is not None:
        bufs.bias_l1 = pl.alloc(pl.L1, [1, base_n], bias_dtype, buffers=BIAS_ROW_SLOTS, layout=pl.ND, name="bias_l1")
        bt_dtype = pl.DT_INT32 if bias_dtype is pl.DT_INT32 else pl.DT_FP32     # int8 matmuls: an int32 bias
        bufs.bias_bt = pl.alloc(pl.BT, [1, base_n], bt_dtype, name="bias_bt")
    bufs.a_l0a = pl.alloc(pl.L0A, [base_m, base_k], dtype, buffers=l0_stages, name="a_l0a")
    bufs.b_l0b = pl.alloc(pl.L0B, [base_k, base_n], dtype_b, buffers=l0_stages, name="b_l0b")
    bufs.c_l0c = pl.alloc(pl.L0C, [base_m, base_n], dtype.acc, buffers=l0c_stages, name="c_l0c")
    if mx is not None:      # MXFP8: twice the slots, data slot i (at i*S) pairs with scale slot 2i (at i*S/16);
        bufs.l0_n = l0_stages   # MXFP4 (S/16-byte scale slots): slot i
        pair = int(bufs.l0_pair)
        bufs.a_l0s = pl.alloc(pl.MemorySpace.ScaleLeft, [base_m, base_k // g], _E8M0, buffers=pair * l0_stages,
                              name="a_scale_l0")
        bufs.b_l0s = pl.alloc(pl.MemorySpace.ScaleRight, [base_k // g, base_n], _E8M0, buffers=pair * l0_stages,
                              name="b_scale_l0")
    return bufs


# ---- held operands (L1 full load / L1 tile reuse) ---------------------------------------------------
def _hold_loads(hold, key_attr: str, bufs: Buffers, src, batch: list, s0: int, k_all: int, pieces: int,
                transpose: bool, is_a: bool) -> list:
    """The GM -> L1 loads that fill a fresh slot of `hold` with the slab at s0 (rows of A / columns of B),
    in `pieces` loads along K (multiples of base_k), or [] when the current slot already holds it."""
    key = (tuple(batch), s0)
    if getattr(bufs, key_attr) == key:
        return []
    slot = hold.next()
    setattr(bufs, key_attr, key)
    if bufs.mx is not None:         # the slab's scales, over the whole K (their ring advances with the data's)
        load_scales(bufs, (bufs.a_holds if is_a else bufs.b_holds).next(), is_a, batch, s0, 0, bufs.mx.K)
    step = _ceil(-(-k_all // max(1, pieces)), bufs.base_k)
    loads = []
    for kp in range(0, k_all, step):
        kw = min(step, k_all - kp)
        if is_a:
            loads.append((slot[:, kp:kp + kw], [*batch, kp, s0] if transpose else [*batch, s0, kp]))
        else:
            loads.append((slot[kp:kp + kw, :], [*batch, s0, kp] if transpose else [*batch, kp, s0]))
    return loads


def held_ab(bufs: Buffers, a, b, a_off: Optional[Sequence[int]], b_off: Optional[Sequence[int]], *,
            transpose_a: bool = False, transpose_b: bool = False, pieces: int = 1) -> tuple:
    """The held L1 views of A rows [m0, m0 + base_m) x all K and of B all K x columns [n0, n0 + base_n)
    (None for an operand given no offsets), loading each slab that holds them unless it is held already.

    a_off = [*batch, m0] (A is [..., M, K], or [..., K, M] with transpose_a); b_off = [*batch, n0] (B is
    [..., K, N], or [..., N, K] with transpose_b). A fresh slab arrives in `pieces` loads along K, those of
    A and B interleaved in K order, so the first MMAD waits only for the first piece of each (one load of a
    whole slab otherwise keeps the cube idle until all of it has landed).
    """
    _same_route(bufs, transpose_a if a_off is not None else bufs.transpose_a,
                transpose_b if b_off is not None else bufs.transpose_b)
    loads_a, loads_b, a_view, b_view = [], [], None, None
    if a_off is not None:
        *batch, m0 = a_off
        hold = bufs.a_hold
        rows, k_all = hold.current().shape
        s0 = m0 // rows * rows
        loads_a = _hold_loads(hold, "a_key", bufs, a, batch, s0, k_all, pieces, transpose_a, True)
        a_view = hold.current()[m0 - s0:m0 - s0 + bufs.base_m, :]
        if bufs.mx is not None:
            bufs.a_hold_s = bufs.a_holds.current()[m0 - s0:m0 - s0 + bufs.base_m, :]
    if b_off is not None:
        *batch, n0 = b_off
        hold = bufs.b_hold
        k_all, cols = hold.current().shape
        s0 = n0 // cols * cols
        loads_b = _hold_loads(hold, "b_key", bufs, b, batch, s0, k_all, pieces, transpose_b, False)
        b_view = hold.current()[:, n0 - s0:n0 - s0 + bufs.base_n]
        if bufs.mx is not None:
            bufs.b_hold_s = bufs.b_holds.current()[:, n0 - s0:n0 - s0 + bufs.base_n]
    _issue(loads_a, a, transpose_a, loads_b, b, transpose_b)
    return a_view, b_view


def held_a(bufs: Buffers, a, a_off: Sequence[int], *, transpose: bool = False, pieces: int = 1):
    """The L1 view of A rows [m0, m0 + base_m) x all K, loading the slab that holds them unless it is held.

    a_off = [*batch, m0]; A is [..., M, K], or [..., K, M] with transpose (a DN operand). See held_ab.
    """
    return held_ab(bufs, a, None, a_off, None, transpose_a=transpose, pieces=pieces)[0]


def held_b(bufs: Buffers, b, b_off: Sequence[int], *, transpose: bool = False, pieces: int = 1):
    """The L1 view of B all K x columns [n0, n0 + base_n), loading the slab that holds them unless it is held.

    b_off = [*batch, n0]; B is [..., K, N], or [..., N, K] with transpose. See held_ab.
    """
    return held_ab(bufs, None, b, None, b_off, transpose_b=transpose, pieces=pieces)[1]


def _same_route(bufs: Buffers, transpose_a: bool, transpose_b: bool) -> None:
    """The transpose flags of a call match the ones its L1 tiles were allocated for (alloc_buffers)."""
    assert (bool(transpose_a), bool(transpose_b)) == (bufs.transpose_a, bufs.transpose_b), \
        f"transpose_a/b = {transpose_a}/{transpose_b} here, {bufs.transpose_a}/{bufs.transpose_b} in alloc_buffers"


def _issue(loads_a: list, a, transpose_a: bool, loads_b: list, b, transpose_b: bool) -> None:
    """The GM -> L1 loads (L1 view, GM offsets) of A and B, interleaved: K order, so the cube starts on the first
    piece of each."""
    for i in range(max(len(loads_a), len(loads_b))):
        if i < len(loads_a):
            load_l1(loads_a[i][0], a, loads_a[i][1], transpose=transpose_a)
        if i < len(loads_b):
            load_l1(loads_b[i][0], b, loads_b[i][1], transpose=transpose_b)


def load_scales(bufs: Buffers, view, is_a: bool, batch: Sequence[int], pos: int, k0: int, k_len: int) -> None:
    """GM -> Mat of the E8M0 scales of A rows from `pos` (is_a; `view` a ZZ scale tile [rows, k/32]) or B columns
    from `pos` (an NN one [k/32, cols]) over K [k0, k0 + k_len) (multiples of 64) in the operand's batch `batch`; the
    view's valid shape is the part inside the operand (MxScales: the GM scale tensors fold the batches, so the edge
    is the operand's M / N, not the tensor's)."""
    mx = bufs.mx
    groups = min(k_len, mx.K - k0) // MX_GROUP
    if is_a:
        with_valid(view, min(view.shape[0], mx.M - pos), groups)
        pl.load(view, mx.scale_a, mx.a_offsets(batch, pos, k0))
    else:
        with_valid(view, groups, min(view.shape[1], mx.N - pos))
        pl.load(view, mx.scale_b, mx.b_offsets(batch, pos, k0))


# ---- one output tile -----------------------------------------------------------------------------
def _bias_bt(bufs: Buffers, bias, bias_off: Sequence[int], nt: int):
    """GM bias row -> L1 -> BT (converted to fp32); the BT view for an nt-column tile."""
    bias_l1 = at_edge(bufs.bias_l1.next(), bias, bias_off)
    pl.load(bias_l1, bias, list(bias_off))
    cols = bias_l1.valid_shape[1]
    bias_bt, row = bufs.bias_bt[0:1, 0:nt], bias_l1[0:1, 0:nt]
    if cols < nt:
        pl.set_validshape(bias_bt, [1, cols])
        pl.set_validshape(row, [1, cols])
    pl.move(bias_bt, row)
    return bias_bt


def _stream_l1(bufs: Buffers, slot, src, batch: list, pos: int, k1: int, k_len: int, extent: int, pieces: int,
               transpose: bool, is_a: bool, unit: int = 0) -> list:
    """The GM -> L1 loads (view of `slot`, GM offsets) for the L1 step [k1, k1 + k_len) of the tile at row (A)
    / column (B) `pos`.

    pieces 0: the whole slot in one load (rows/columns and K past the tile's own are read too, clipped only at
    the tensor's edge). pieces n >= 1: only the `extent` rows of A / columns of B and the K the step uses
    (aligned), in n loads along K (multiples of `unit`, default base_k): MTE1 and the cube start on the first
    piece while the rest arrive, and a K segment that ends inside the slot (split-K, StreamK) reads nothing
    past its end.
    """
    if pieces <= 0:
        off = ([*batch, k1, pos] if transpose else [*batch, pos, k1]) if is_a else \
              ([*batch, pos, k1] if transpose else [*batch, k1, pos])
        return [(slot, off)]
    k_all = _ceil(k_len, bufs.align)
    step = _ceil(-(-k_all // pieces), unit or bufs.base_k)
    loads = []
    for kp in range(0, k_all, step):
        kw = min(step, k_all - kp)
        if is_a:
            loads.append((slot[0:extent, kp:kp + kw], [*batch, k1 + kp, pos] if transpose else [*batch, pos, k1 + kp]))
        else:
            loads.append((slot[kp:kp + kw, 0:extent], [*batch, pos, k1 + kp] if transpose else [*batch, k1 + kp, pos]))
    return loads


def accumulate(bufs: Buffers, a, b, a_off: Sequence[int], b_off: Sequence[int], K: int, rows: int, cols: int, *,
               k_start: int = 0, a_l1=None, b_l1=None, bias=None, bias_off: Optional[Sequence[int]] = None,
               transpose_a: bool = False, transpose_b: bool = False, use_unit_flag: bool = True,
               l1_pieces: int = 0, tail_k: int = 0):
    """The K loop of one tile: returns the L0C view holding A[m0:, k_start:k_start+K] @ B[.., n0:] (+ bias).

    a_off = [*batch, m0], b_off = [*batch, n0] (GM offsets of the tile's origin, K apart); rows/cols: the
    tile's real extent (<= base_m/base_n). a_l1 / b_l1: held L1 views (see held_a/held_b) covering K from
    0, used instead of streaming that operand. bias: a GM row tensor read at bias_off (default
    [0, ..., 0, n0]), added by the first MMAD. With use_unit_flag the last MMAD carries AccPhase.Final;
    store the result with `store_tile` (STPhase.Final). l1_pieces: how streamed L1 slots are filled
    (`_stream_l1`: 0 = one load of the whole slot; n >= 1 = the tile's own extent in n pieces along K).
    tail_k (> 0: a multiple of the fractal K grid, at most base_k): the last L1 step in pieces of tail_k along
    K, loads and MMADs, so that after its last byte lands only one tail_k MTE1 + MMAD step is left (for a
    core's only tile, as StreamK's units are; where tiles follow each other the next tile's loads hide the
    drain, and the extra transfers cost more than they win). Smaller MMADs round the L0C sums at other
    places: other bits.
    """
    base_m, base_n, base_k, k_l1 = bufs.base_m, bufs.base_n, bufs.base_k, bufs.k_l1
    assert 0 < rows <= base_m and 0 < cols <= base_n and K > 0, f"tile {rows}x{cols}, K={K}"
    assert tail_k == 0 or (tail_k % bufs.align == 0 and tail_k <= base_k), \
        f"tail_k={tail_k} must be 0 or a multiple of {bufs.align} up to base_k={base_k}"
    _same_route(bufs, transpose_a, transpose_b)
    mt = min(base_m, _ceil(rows, bufs.m_align))
    nt = min(base_n, _ceil(cols, bufs.align))
    if bufs.mx is not None:         # matmul_mx chains whole tiles: the whole slot, its valid shape the tile's
        c_l0c = with_valid(bufs.c_l0c.next(), rows, cols)
    else:
        c_l0c = bufs.c_l0c.next()[0:mt, 0:nt]
        if (rows, cols) != (mt, nt):
            pl.set_validshape(c_l0c, [rows, cols])      # what the MMADs compute and the store moves
    bias_bt = None
    if bias is not None:
        bias_off = [0] * (bias.ndim - 1) + [b_off[-1]] if bias_off is None else bias_off
        bias_bt = _bias_bt(bufs, bias, bias_off, nt)
    *a_batch, m0 = a_off
    *b_batch, n0 = b_off
    k_end = k_start + K
    starts = list(pl.range(k_start, k_end, k_l1))
    units = [base_k] * (len(starts) - 1) + [tail_k or base_k]     # the K of each L1 step's MMADs
    steps = sum(-(-min(k_l1, k_end - k1) // u) for k1, u in zip(starts, units))
    step = 0
    for k1, unit in zip(starts, units):
        a1, b1 = a_l1, b_l1
        k_len = min(k_l1, k_end - k1)
        a_loads = b_loads = []
        pieces = l1_pieces
        if tail_k and k1 + k_len >= k_end:     # the last step: one piece per tail_k, a short drain
            pieces = max(1, l1_pieces, -(-k_len // tail_k))
        a1s = b1s = None
        if a_l1 is None:
            a1 = bufs.a_l1.next()
            a_loads = _stream_l1(bufs, a1, a, a_batch, m0, k1, k_len, mt, pieces, transpose_a, True, unit)
            if bufs.mx is not None:
                a1s = bufs.a_l1s.next()
                load_scales(bufs, a1s, True, a_batch, m0, k1, k_len)
        if b_l1 is None:
            b1 = bufs.b_l1.next()
            b_loads = _stream_l1(bufs, b1, b, b_batch, n0, k1, k_len, nt, pieces, transpose_b, False, unit)
            if bufs.mx is not None:
                b1s = bufs.b_l1s.next()
                load_scales(bufs, b1s, False, b_batch, n0, k1, k_len)
        _issue(a_loads, a, transpose_a, b_loads, b, transpose_b)
        if a_l1 is not None:         # held views are indexed by absolute k: start this step's view at k1
            a1 = a1[:, k1:]
            a1s = None if bufs.mx is None else bufs.a_hold_s[:, k1 // MX_GROUP:]
        if b_l1 is not None:
            b1 = b1[k1:, :]
            b1s = None if bufs.mx is None else bufs.b_hold_s[k1 // MX_GROUP:, :]
        step = mmad_l1(bufs, c_l0c, a1, b1, k_len, step=step, steps=steps, bias_bt=bias_bt,
                       use_unit_flag=use_unit_flag, base_k=unit, a1s=a1s, b1s=b1s)
    return c_l0c


def mmad_l1(bufs: Buffers, c_l0c, a1, b1, k_len: int, *, step: int, steps: int, bias_bt=None,
            use_unit_flag: bool = True, base_k: int = 0, a1s=None, b1s=None) -> int:
    """The L0 loop over one L1 step the caller has filled itself (e.g. MergeBatch's merged tiles).

    MTE1 + MMAD over K [0, k_len) of the L1 views a1 [>= mt rows, from its K 0] and b1 [from
    its K 0, >= nt cols] into c_l0c, an L0C view [mt, nt]. step: MMADs already issued into c_l0c (0: the first
    one writes, with bias_bt, a BT view [1, nt]); steps: this tile's MMADs in all, so the last carries
    AccPhase.Final with use_unit_flag. base_k: the K of one MMAD (default the rings' base_k). a1s / b1s (MX): the
    scale views of a1 / b1 from their K 0 (`_mmad_mx`). Returns the updated step count.
    """
    mt, nt = c_l0c.shape
    vm, vn = c_l0c.valid_shape          # the tile's real rows and columns
    base_k = base_k or bufs.base_k
    for kk in pl.range(0, k_len, base_k):
        kt = min(base_k, _ceil(k_len - kk, bufs.align))
        kv = min(base_k, k_len - kk)     # the step's real K
        if bufs.mx is not None:
            step = _mmad_mx(bufs, c_l0c, a1, b1, a1s, b1s, kk, kv, step, steps, use_unit_flag)
            continue
        a_l0a, a_src = bufs.a_l0a.next()[0:mt, 0:kt], a1[0:mt, kk:kk + kt]
        b_l0b, b_src = bufs.b_l0b.next()[0:kt, 0:nt], b1[kk:kk + kt, 0:nt]
        if (vm, kv) != (mt, kt) or a_src.valid is not None:
            pl.set_validshape(a_l0a, [vm, kv])
            pl.set_validshape(a_src, [vm, kv])
        if (kv, vn) != (kt, nt) or b_src.valid is not None:
            pl.set_validshape(b_l0b, [kv, vn])
            pl.set_validshape(b_src, [kv, vn])
        pl.move(a_l0a, a_src)
        pl.move(b_l0b, b_src)
        phase = None
        if use_unit_flag:
            phase = pl.AccPhase.Final if step == steps - 1 else pl.AccPhase.Partial
            pl.system.set_mm_layout_transform(enabled=True)     # a K split under unit_flag (matmul_acc.md)
        if step == 0:
            if bias_bt is None:
                pl.matmul(c_l0c, a_l0a, b_l0b, phase=phase)
            else:
                pl.matmul(c_l0c, a_l0a, b_l0b, bias_bt, phase=phase)
        else:
            pl.matmul_acc(c_l0c, c_l0c, a_l0a, b_l0b, phase=phase)
        step += 1
    return step


def _mmad_mx(bufs: Buffers, c_l0c, a1, b1, a1s, b1s, kk: int, kv: int, step: int, steps: int,
             use_unit_flag: bool) -> int:
    """One MX step of mmad_l1: the whole next L0A / L0B slots and their scale slots (slot 2i of the doubled scale
    rings: addr(scale) = addr(data) >> 4) take K [kk, kk + kv) of the L1 views, valid shapes the tile's, then
    matmul_mx (the first step) or matmul_mx_acc. Returns the step count."""
    vm, vn = c_l0c.valid_shape
    bm, bn, bk, g = bufs.base_m, bufs.base_n, bufs.base_k, MX_GROUP
    bufs.l0_i = (bufs.l0_i + 1) % bufs.l0_n
    a_l0a, b_l0b = bufs.a_l0a.next(), bufs.b_l0b.next()
    pair = int(bufs.l0_pair)
    if pair * bufs.l0_n == 1:       # (one L0 slot of MXFP4: its scale "ring" is one tile)
        sa_l0, sb_l0 = bufs.a_l0s, bufs.b_l0s
    else:
        sa_l0, sb_l0 = bufs.a_l0s[pair * bufs.l0_i], bufs.b_l0s[pair * bufs.l0_i]
    for dst, src, rows, cols in ((a_l0a, a1[0:bm, kk:kk + bk], vm, kv), (sa_l0, a1s[0:bm, kk // g:(kk + bk) // g], vm,
                                 kv // g), (b_l0b, b1[kk:kk + bk, 0:bn], kv, vn),
                                 (sb_l0, b1s[kk // g:(kk + bk) // g, 0:bn], kv // g, vn)):
        pl.set_validshape(dst, [rows, cols])
        pl.set_validshape(src, [rows, cols])
        pl.move(dst, src)
    phase = None
    if use_unit_flag:
        phase = pl.AccPhase.Final if step == steps - 1 else pl.AccPhase.Partial
        pl.system.set_mm_layout_transform(enabled=True)
    if step == 0:
        pl.matmul_mx(c_l0c, a_l0a, b_l0b, sa_l0, sb_l0, phase=phase)
    else:
        pl.matmul_mx_acc(c_l0c, c_l0c, a_l0a, b_l0b, sa_l0, sb_l0, phase=phase)
    return step + 1


def store_tile(out, c_l0c, c_off: Sequence[int], *, use_unit_flag: bool = True, atomic: bool = False) -> None:
    """Fixpipe the tile's L0C view (its valid region: accumulate sets it to the tile's real extent) to out at
    c_off; STPhase.Final frees the slot, and the
    K split's layout transform goes off after it (set_mm_layout_transform.md). atomic: add into out."""
    pl.store(out, c_l0c, list(c_off), phase=pl.STPhase.Final if use_unit_flag else None,
             atomic=pl.AtomicType.AtomicAdd if atomic else None)
    if use_unit_flag:
        pl.system.set_mm_layout_transform(enabled=False)


def mmad_tile(bufs: Buffers, a, b, out, a_off: Sequence[int], b_off: Sequence[int], c_off: Sequence[int], K: int, *,
              k_start: int = 0, a_l1=None, b_l1=None, bias=None, bias_off: Optional[Sequence[int]] = None,
              transpose_a: bool = False, transpose_b: bool = False, use_unit_flag: bool = True,
              atomic: bool = False, l1_pieces: int = 0) -> None:
    """out[c_off tile] = A @ B (+ bias) for one output tile: `accumulate`, then `store_tile`.

    c_off = [*batch, m0, n0]; the tile's real extent is clipped to out's last two dims. Arguments as
    `accumulate`; atomic=True adds into out (split-K partial sums).
    """
    rows = min(bufs.base_m, out.shape[-2] - c_off[-2])
    cols = min(bufs.base_n, out.shape[-1] - c_off[-1])
    c_l0c = accumulate(bufs, a, b, a_off, b_off, K, rows, cols, k_start=k_start, a_l1=a_l1, b_l1=b_l1, bias=bias,
                       bias_off=bias_off, transpose_a=transpose_a, transpose_b=transpose_b,
                       use_unit_flag=use_unit_flag, l1_pieces=l1_pieces)
    store_tile(out, c_l0c, c_off, use_unit_flag=use_unit_flag, atomic=atomic)
