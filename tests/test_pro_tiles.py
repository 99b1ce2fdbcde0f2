"""Tiles at byte addresses (make_tile, make_tile_group, pl.alloc on the same map): alignment, capacity, the fractal
padding size rule, group cursors, views that alias one storage, and tiles that overlap and clobber each other."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pyto
import pyto.language as pl
from pyto import layout
from pyto.emulator.check.overlap import byte_intervals
from pyto.ir import Buf, TileStore
from pyto.language.tile import grid_of, padded_of
from pro_kernels import acc, l1_matmul_store, left, mat, overlapping_pair, right, vec

RNG = np.random.default_rng(7)


def _launch(kernel, *arrays, **kw):
    return pyto.run(kernel, *arrays, **kw)


# ---- placement rules -----------------------------------------------------------------------------------------
def _one_tile(tt, addr, size=None):
    @pl.jit
    def place(x: pl.Tensor[[16, 16], pl.DT_FP16]):
        t = pl.make_tile(tt(), addr=addr, size=size)
        del t
    return place


def test_a_tile_past_l0a_end_is_a_capacity_error_naming_64kb():
    x = np.zeros((16, 16), np.float16)
    with pytest.raises(pyto.CapacityError, match=r"L0A overflow on ascend950pr: 't' .* occupies \[0xc000, 0x1c000\) "
                                                  r".*past the end of L0A's 65,536 B \(64 KB; last address 0xffff\)"):
        _one_tile(lambda: left([128, 256]), 0xC000)(x)


def test_capacity_error_carries_its_numbers():
    x = np.zeros((16, 16), np.float16)
    with pytest.raises(pyto.CapacityError) as e:
        _one_tile(lambda: left([128, 256]), 0xC000)(x)
    assert (e.value.buffer, e.value.asked, e.value.capacity) == ("L0A", 128 * 256 * 2, 65536)


@pytest.mark.parametrize("tt, addr, align", [(lambda: left([16, 16]), 0x100, 512), (lambda: acc([16, 16]), 0x20, 64),
                                             (lambda: vec([16, 16]), 0x10, 32), (lambda: mat([16, 16]), 0x8, 32)])
def test_misaligned_addresses(tt, addr, align):
    x = np.zeros((16, 16), np.float16)
    with pytest.raises(pyto.AlignmentError, match=rf"at address {addr:#x} .* on {align}-byte boundaries"):
        _one_tile(tt, addr)(x)


def test_a_size_too_small_for_the_fractal_padding():
    """make_tile.md: size defaults to elements x dtype bytes; an NZ tile of 30 rows pads to 32."""
    x = np.zeros((16, 16), np.float16)
    with pytest.raises(pyto.CapacityError, match=r"needs 4,096 B \(NZ pads it to 32 x 64 elements: whole fractals, "
                                                 r"docs/tile_shapes\.md §6\.4\), but its size is "
                                                 r"3,840 B; pass size=4096"):
        _one_tile(lambda: mat([30, 64]), 0x0)(x)
    _one_tile(lambda: mat([30, 64]), 0x0, 4096)(x)                 # with the padded size it is placed


def test_tiles_placed_on_one_line_take_their_targets_names():
    """`a, b = pl.make_tile(...), pl.make_tile(...)`: the first call's tile is a, the second's b."""
    @pl.jit
    def k(x: pl.Tensor[[16, 16], pl.DT_FP16]):
        a_t, b_t = pl.make_tile(vec([8, 8]), addr=0x0), pl.make_tile(vec([8, 8]), addr=0x100, size=16)
    with pytest.raises(pyto.CapacityError, match=r"'b_t' pl\.MemorySpace\.Vec \[8, 8\] fp32 ND at 0x100 needs"):
        k(np.zeros((16, 16), np.float16))

    @pl.jit
    def k2(x: pl.Tensor[[16, 16], pl.DT_FP16]):
        a_t, b_t = pl.make_tile(vec([8, 8]), addr=0x0, size=16), pl.make_tile(vec([8, 8]), addr=0x100)
    with pytest.raises(pyto.CapacityError, match=r"'a_t' pl\.MemorySpace\.Vec \[8, 8\] fp32 ND at 0x0 needs"):
        k2(np.zeros((16, 16), np.float16))


def test_illegal_layouts_name_the_space():
    with pytest.raises(pyto.ShapeError, match=r"layout ZN is not legal for pl.MemorySpace.Left tiles"):
        pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Left, layout=pl.ZN)
    with pytest.raises(pyto.ShapeError, match=r"layout NZ is not legal for pl.MemorySpace.Right"):
        pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Right, layout=pl.NZ)


def test_unbuilt_names_refuse():
    x = np.zeros((16, 16), np.float16)
    with pytest.raises(pyto.UnsupportedError, match=r"pl.DT_HF4 \(the HiFloat4 data type\) is not built"):
        _one_tile(lambda: pl.TileType(shape=[16, 32], dtype=pl.DT_HF4), 0)(x)
    # (ScaleLeft / ScaleRight, DT_FP8E8M0 and the FP4 types are built: tests/test_lowp_mx.py, test_lowp_fp4.py)


def test_overlap_charges_the_union_and_alloc_takes_the_next_free_range():
    """Two make_tiles sharing bytes charge them once; pl.alloc (pyto's extension) fills the first free gap."""
    seen = {}

    @pl.kernel
    def placed(x):
        a = pl.make_tile(vec([16, 16]), addr=0x0)          # [0, 1024)
        b = pl.make_tile(vec([16, 16]), addr=0x200)        # [512, 1536): overlaps a
        c = pl.alloc(pl.UB, [8, 8], pl.DT_FP32)            # 256 B: after the union
        d = pl.make_tile(vec([8, 8]), addr=0x800)
        e = pl.alloc(pl.UB, [16, 32], pl.DT_FP32)          # 2 KB: 0x700 is too small before d, so after it
        seen.update(a=a.store, b=b.store, c=c.store, d=d.store, e=e.store)
    _launch(placed, np.zeros((16, 16), np.float32))
    assert [seen[k].addr for k in "abcde"] == [0x0, 0x200, 0x600, 0x800, 0x900]
    assert seen["a"].shared and seen["b"].shared and not seen["c"].shared and not seen["e"].shared


# ---- tile groups ------------------------------------------------------------------------------------------------
def test_group_cursor_starts_at_the_last_slot_and_slots_follow_the_base():
    order = []

    @pl.jit
    def cursor(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        g = pl.make_tile_group(type=vec([16, 16]), addrs=0x1000, mutex_ids=[0, 1, 2])
        order.append(g.current().store.addr)
        for _ in range(4):
            order.append(g.next().store.addr)
        order.append(g.previous().store.addr)
        order.append(g[1].store.addr)
        order.append(g.current().store.addr)          # g[i] left the cursor alone
    cursor(np.zeros((16, 16), np.float32))
    slot = 16 * 16 * 4
    base = [0x1000 + i * slot for i in range(3)]
    assert order[:7] == [base[2], base[0], base[1], base[2], base[0], base[2], base[1]]
    assert order[7] == base[0]


def test_group_rules():
    x = np.zeros((16, 16), np.float32)

    def group(**kw):
        @pl.jit
        def k(x: pl.Tensor[[16, 16], pl.DT_FP32]):
            pl.make_tile_group(type=vec([16, 16]), **kw)
        return k
    with pytest.raises(pyto.KernelError, match=r"needs depth="):
        group(addrs=0)(x)
    with pytest.raises(pyto.KernelError, match=r"depth=3 but mutex_ids names 2 slots"):
        group(addrs=0, mutex_ids=[0, 1], depth=3)(x)
    with pytest.raises(pyto.KernelError, match=r"mutex ids are ints 0..31"):
        group(addrs=0, mutex_ids=[0, 32])(x)
    with pytest.raises(pyto.KernelError, match=r"same number of mutex ids"):
        group(addrs=0, mutex_ids=[[0, 1], [2]])(x)
    with pytest.raises(pyto.KernelError, match=r"a slot's mutex ids must differ"):
        group(addrs=0, mutex_ids=[[0, 0], [1, 2]])(x)
    with pytest.raises(pyto.KernelError, match=r"addrs lists 1 addresses for a group of 2"):
        group(addrs=[0], depth=2)(x)


def test_a_padded_group_from_one_base_shares_bytes_between_its_slots():
    """PyPTO-Pro puts slot i at base + i x elements x bytes (tile_slot_size) even where NZ pads a slot beyond that:
    [30, 64] fp16 slots 3840 B apart, each 4096 B with its padding. Slot 1's rows land on slot 0's last fractal
    column: bytes [0xf00, 0xfc0) are both slots', and a read of slot 0 after a load into slot 1 races on them (the
    slots' mutex ids do not order each other's pipes)."""
    @pl.jit(auto_mutex=True)
    def k(x: pl.Tensor[[30, 64], pl.DT_FP16]):
        g = pl.make_tile_group(type=mat([30, 64]), addrs=0, mutex_ids=[0, 1])
        al = pl.make_tile_group(type=left([30, 64]), addrs=0, mutex_ids=[2])
        with pl.section_cube():
            first, second = g.next(), g.next()
            pl.load(first, x, [0, 0])
            pl.system.bar_mte2()                  # the two loads write shared bytes: ordered (else a WAW race)
            pl.load(second, x, [0, 0])
            pl.move(al.current(), first)
    with pytest.raises(pyto.RaceError, match=r"RAW hazard detected at L1: bytes \[0xf00, 0xfc0\) of L1 of block 0 AIC, "
                                             r"shared by L1 tile 'g\[1\]' .* and L1 tile 'g\[0\]'"):
        k(np.zeros((30, 64), np.float16))


# ---- views of one storage ---------------------------------------------------------------------------------------
@pl.jit
def dn_view_of_nd(x: pl.Tensor[[1, 64], pl.DT_FP32], out: pl.Tensor[[1, 64], pl.DT_FP32]):
    """A [1, 64] ND tile and a [64, 1] DN tile at one address name the same bytes (pitfalls.md's dual views)."""
    row = pl.make_tile(vec([1, 64]), addr=0x0)
    col = pl.make_tile(vec([64, 1], layout=pl.DN), addr=0x0)
    assert col.store is row.store and col.t and col.shape == (64, 1)
    with pl.section_vector():
        pl.load(row, x, [0, 0])
        pl.system.bar_all()
        pl.store(out, row, [0, 0])


def test_dn_and_nd_views_share_storage():
    x = RNG.random((1, 64), np.float32)
    out = np.zeros_like(x)
    dn_view_of_nd(x, out)
    np.testing.assert_array_equal(out, x)


@pl.jit
def zn_view_of_nz(bt: pl.Tensor[[64, 32], pl.DT_FP16], c: pl.Tensor[[32, 64], pl.DT_FP32],
                  eye: pl.Tensor[[32, 32], pl.DT_FP16]):
    """An NZ [N, K] Mat tile and a ZN [K, N] Mat tile at one address are one storage (load.md): B^T loaded plainly
    through the NZ tile is B through the ZN one, and C = I @ B reads it back."""
    nz = pl.make_tile(mat([64, 32]), addr=0x0)
    zn = pl.make_tile(mat([32, 64], layout=pl.ZN), addr=0x0)
    e_l1 = pl.make_tile(mat([32, 32]), addr=0x10000)
    with pl.section_cube():
        pl.load(nz, bt, [0, 0])
        pl.load(e_l1, eye, [0, 0])
        al = pl.make_tile(left([32, 32]), addr=0x0)
        br = pl.make_tile(right([32, 64]), addr=0x0)
        ac = pl.make_tile(acc([32, 64]), addr=0x0)
        pl.system.bar_all()
        pl.move(al, e_l1)
        pl.move(br, zn)                   # a transposed view: the move reads B = (B^T)^T
        pl.system.bar_all()
        pl.matmul(ac, al, br)
        pl.system.bar_all()
        pl.store(c, ac, [0, 0])


def test_nz_and_zn_views_share_storage():
    bt = RNG.standard_normal((64, 32)).astype(np.float16)
    c = np.zeros((32, 64), np.float32)
    zn_view_of_nz(bt, c, np.eye(32, dtype=np.float16))
    np.testing.assert_array_equal(c, bt.T.astype(np.float32))     # I @ B in fp32: exactly B


# ---- overlap and clobbering ---------------------------------------------------------------------------------------
@pl.jit
def clobbering_l1(a: pl.Tensor[[64, 64], pl.DT_FP16], b: pl.Tensor[[64, 64], pl.DT_FP16],
                  c: pl.Tensor[[64, 64], pl.DT_FP32]):
    """a_l1 [0, 8 KB) and b_l1 [4 KB, 12 KB) overlap in L1: loading b overwrites half of a before a is read."""
    a_l1 = pl.make_tile(mat([64, 64]), addr=0x0000)
    b_l1 = pl.make_tile(mat([64, 64]), addr=0x1000)
    al = pl.make_tile(left([64, 64]), addr=0x0)
    br = pl.make_tile(right([64, 64]), addr=0x0)
    ac = pl.make_tile(acc([64, 64]), addr=0x0)
    with pl.section_cube():
        pl.load(a_l1, a, [0, 0])
        pl.system.bar_mte2()
        pl.load(b_l1, b, [0, 0])
        l1_matmul_store(c, ac, al, br, a_l1, b_l1)


def test_two_overlapping_l1_tiles_clobber_each_other():
    a = np.ones((64, 64), np.float16)
    with pytest.raises(pyto.ClobberedReadError, match=r"pl\.move reads L1 tile 'a_l1' \(L1 \[0x0, 0x2000\)\), but its "
                                                      r"bytes \[0x1000, 0x2000\) were last written through L1 tile "
                                                      r"'b_l1' \(L1 \[0x1000, 0x3000\)\) by pl\.load at .*pl\.load\(b_l1"):
        clobbering_l1(a, a, np.zeros((64, 64), np.float32))
    assert issubclass(pyto.ClobberedReadError, pyto.UninitializedReadError)


@pl.jit
def racing_overlap(a: pl.Tensor[[32, 64], pl.DT_FP32], out: pl.Tensor[[32, 64], pl.DT_FP32]):
    """Two UB tiles sharing bytes, written by MTE2 and V with nothing ordering them: a race on the bytes."""
    x = pl.make_tile(vec([32, 64]), addr=0x0)
    y = pl.make_tile(vec([16, 64]), addr=0x1000)          # the second half of x
    with pl.section_vector():
        pl.load(x, a, [0, 0])
        pl.expands(y, 1.0)
        pl.system.bar_all()
        pl.store(out, x, [0, 0])


def test_unordered_accesses_of_overlapping_tiles_race_on_their_bytes():
    a = np.ones((32, 64), np.float32)
    with pytest.raises(pyto.RaceError, match=r"WAW hazard detected at UB: bytes \[0x1000, 0x2000\) of UB of block 0 "
                                             r"AIV0, shared by UB tile '[xy]' .* and UB tile '[xy]'"):
        racing_overlap(a, np.zeros_like(a))


def test_disjoint_tiles_around_a_rewritten_one_do_not_clobber():
    """A tile rewritten whole after another tile scribbled on its bytes reads its own data again."""
    @pl.jit
    def rewrite(a: pl.Tensor[[32, 64], pl.DT_FP32], out: pl.Tensor[[32, 64], pl.DT_FP32]):
        x = pl.make_tile(vec([32, 64]), addr=0x0)
        y = pl.make_tile(vec([16, 64]), addr=0x1000)
        with pl.section_vector():
            pl.expands(y, 3.0)
            pl.system.bar_all()
            pl.load(x, a, [0, 0])
            pl.system.bar_all()
            pl.store(out, x, [0, 0])
    a = RNG.random((32, 64), np.float32)
    out = np.zeros_like(a)
    rewrite(a, out)
    np.testing.assert_array_equal(out, a)


# ---- properties ---------------------------------------------------------------------------------------------------
_LAYOUTS = [(Buf.UB, "ND"), (Buf.L1, "NZ"), (Buf.L0A, "NZ"), (Buf.L0A, "ZZ"), (Buf.L0B, "ZN"), (Buf.L0C, "NZ")]


def _fractal_of(buf: Buf, lay: str, dt) -> tuple:
    c0 = 32 // dt.itemsize
    return (16, 16) if buf is Buf.L0C else ((c0, 16) if lay == "ZN" else (16, c0))


def _element_bytes(store: TileStore) -> np.ndarray:
    """Byte offset (from the store's address) of each element of its padded matrix, from pyto.layout's fractal
    formats (docs/fractal_formats.md §4.5's reshape-and-transpose), independently of overlap.byte_intervals' arithmetic."""
    rows, cols = store.padded
    idx = np.arange(rows * cols, dtype=np.int64).reshape(rows, cols)
    if store.layout == "ND":
        flat = idx.ravel()
    else:
        flat = layout.to_format(idx, store.layout.lower(), fractal=_fractal_of(store.buf, store.layout,
                                                                               store.dtype)).ravel()
    where = np.empty(rows * cols, np.int64)
    where[flat] = np.arange(rows * cols)
    return where.reshape(rows, cols) * store.dtype.itemsize


def _bytes(store: TileStore, offsets: np.ndarray) -> set:
    out = set()
    for off in offsets.ravel():
        out.update(range(store.addr + int(off), store.addr + int(off) + store.dtype.itemsize))
    return out


@settings(max_examples=80, deadline=None, derandomize=True)
@given(st.sampled_from(_LAYOUTS), st.sampled_from(["fp16", "fp32", "int8"]), st.integers(1, 4), st.integers(1, 4),
       st.data())
def test_byte_intervals_are_the_views_elements(where, dtname, rblocks, cblocks, data):
    """The bytes a view touches are its elements' bytes, plus at most the rest of the fractals it cuts (a fractal
    layout moves whole fractals), never anything else."""
    from pyto.dtypes import as_dtype
    buf, lay = where
    dt = as_dtype("fp32" if buf is Buf.L0C else dtname)
    g = grid_of(buf, dt)
    shape = (rblocks * (1 if buf is Buf.UB else max(g[0], 16)), cblocks * max(g[1], 16))
    store = TileStore(buf, shape, padded_of(buf, shape, dt), dt, lay, g, "t", 0, 0, None, 0, 0x400)
    r0 = data.draw(st.integers(0, shape[0] // g[0] - 1)) * g[0]
    r1 = data.draw(st.integers(r0 // g[0] + 1, shape[0] // g[0])) * g[0]
    c0 = data.draw(st.integers(0, shape[1] // g[1] - 1)) * g[1]
    c1 = data.draw(st.integers(c0 // g[1] + 1, shape[1] // g[1])) * g[1]
    offs = _element_bytes(store)
    want = _bytes(store, offs[r0:r1, c0:c1])
    if lay == "ND":
        most = want
    else:
        fr, fc = _fractal_of(buf, lay, dt)
        most = _bytes(store, offs[r0 // fr * fr:-(-r1 // fr) * fr, c0 // fc * fc:-(-c1 // fc) * fc])
    got = set()
    for lo, hi in byte_intervals(store, (r0, r1, c0, c1)):
        got.update(range(lo, hi))
    assert want <= got <= most


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.integers(0, 64), st.integers(1, 8), st.integers(0, 64), st.integers(1, 8))
def test_overlap_verdicts_follow_the_byte_ranges(a_blk, a_rows, b_blk, b_rows):
    """Tile x is written, then y, then x is read (all ordered by barriers): a ClobberedReadError exactly when their
    byte ranges (rows of 256 B, at 32 B steps) intersect and they are not one storage; x's data otherwise."""
    ax, bx = a_blk * 32, b_blk * 32
    k = overlapping_pair(ax, a_rows, bx, b_rows)
    a = RNG.random((8, 64), np.float32)
    out = np.zeros_like(a)
    same = (ax, a_rows) == (bx, b_rows)
    overlap = ax < bx + b_rows * 256 and bx < ax + a_rows * 256
    if overlap and not same:
        with pytest.raises(pyto.ClobberedReadError):
            k(a, out)
    else:
        k(a, out)
        want = np.full((a_rows, 64), -1.0, np.float32) if same else a[:a_rows]
        np.testing.assert_array_equal(out[:a_rows], want)
