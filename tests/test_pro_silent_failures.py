"""PyPTO-Pro's documented silent failures, each run on pyto: what the device gives (a wrong number nobody is told
about, a device error, a hang) becomes either the same wrong number, reproducible against numpy, or a named pyto
error. Sources: PRO.md section 2, "Other silent-error traps" (pypto-gym pitfalls.md) and "Negative tests" (the
later public revisions of PyPTO-Pro's device tests, each marked "PASS means the expected error was observed"), and
the PyPTO-Pro pages cited per test. One test per failure; the kernels the other pro tests share are in
tests/pro_kernels.py."""
import numpy as np
import pytest

import pyto
import pyto.language as pl
from pro_kernels import reload_slot, two_phase, vec

RNG = np.random.default_rng(190)
R, C = 8, 16                      # one [8, 16] fp32 tile: 512 B, sixteen 32-byte blocks


def small_ints(*shape) -> np.ndarray:
    """fp32 integers in [-8, 8): every sum of a few of them is exact in fp32, so the checks are exact too."""
    return RNG.integers(-8, 8, shape).astype(np.float32)


# ---- a pad declared without fillpad, read by a reduction -----------------------------------------------------
def column_sums(fill: bool):
    """Column sums of x, R rows at a time, through one [R, C] tile declared pad=pl.TilePad.zero: each block's valid
    rows are loaded, then the reduction reads the whole tile, relying on the pad for the rows past a tail
    (tail_block_handling.md's table: a sum after a tail takes pad zero plus pl.fillpad). `fill`: the kernel calls
    pl.fillpad(INPLACE) before the reduction; without it the pad is only declared."""
    @pl.jit(auto_mutex=True)
    def k(x: pl.Tensor[[pl.DYNAMIC, C], pl.DT_FP32], s: pl.Tensor[[pl.DYNAMIC, C], pl.DT_FP32]):
        rows = x.shape[0]
        block = pl.make_tile_group(type=vec([R, C], valid_shape=[-1, -1], pad=pl.TilePad.zero), addrs=0x0,
                                   mutex_ids=[0])
        tmp = pl.make_tile_group(type=vec([R, C]), addrs=0x400, mutex_ids=[1])
        sums = pl.make_tile_group(type=vec([1, C]), addrs=0x800, mutex_ids=[2])
        with pl.section_vector():
            t, w, o = block.current(), tmp.current(), sums.current()
            for b in pl.range(0, (rows + R - 1) // R):
                pl.set_validshape(t, [pl.min(R, rows - b * R), C])
                pl.load(t, x, [b * R, 0])
                if fill:
                    pl.fillpad(t, t, mode=pl.FillPadMode.INPLACE)
                pl.set_validshape(t, [R, C])              # the reduction over the padded tile
                pl.sum(o, t, w, dim=1)
                pl.store(s, o, [b, 0])
    return k


def test_a_pad_declared_without_fillpad_is_summed_stale():
    """PRO.md's negative test bad_pad_declared_without_fillpad (and tail_block_handling.md: "pad only declares the
    value; pl.fillpad does the filling"): the tail block's reduction reads the rows past its valid ones, which
    still hold the previous block's data. pyto gives the device's wrong number: the tail's column sums plus the
    stale rows'. Where the tail's tile was never written before, the same read is an UninitializedReadError."""
    x = small_ints(R + 5, C)                          # a full block, then a tail of 5 rows
    s = np.zeros((2, C), np.float32)
    column_sums(fill=True)(x, s)
    assert np.array_equal(s, np.stack([x[:R].sum(0), x[R:].sum(0)]))
    column_sums(fill=False)(x, s)
    assert np.array_equal(s[0], x[:R].sum(0))
    assert np.array_equal(s[1], x[R:].sum(0) + x[5:R].sum(0))      # rows 5..7 of the first block, stale
    assert not np.array_equal(s[1], x[R:].sum(0))
    with pytest.raises(pyto.UninitializedReadError, match=r"pl\.sum .*reads UB tile 'block'\[0:8, 0:16\] but part of it "
                                                          r"was never written \(6 of 16 32-byte blocks"):
        column_sums(fill=False)(x[:5], np.zeros((1, C), np.float32))


# ---- a move without valid_shape copies the stale tail ----------------------------------------------------------
def copy_block(set_dst: bool):
    """A tail block (5 of R rows) copied Vec -> Vec and stored through the copy; the source tile held an earlier,
    full block. `set_dst`: the copy's tile gets the block's valid shape too (pl.move covers its destination's
    valid region, move.md; the store moves the tile's valid region, store.md)."""
    @pl.jit(auto_mutex=True)
    def k(x: pl.Tensor[[R, C], pl.DT_FP32], y: pl.Tensor[[R, C], pl.DT_FP32], z: pl.Tensor[[R, C], pl.DT_FP32]):
        src = pl.make_tile_group(type=vec([R, C], valid_shape=[-1, -1]), addrs=0x0, mutex_ids=[0])
        dst = pl.make_tile_group(type=vec([R, C], valid_shape=[-1, -1]), addrs=0x400, mutex_ids=[1])
        with pl.section_vector():
            s, d = src.current(), dst.current()
            pl.load(s, x, [0, 0])                 # an earlier block's data
            pl.system.bar_mte2()                  # (the two loads into s, in order: load.md)
            pl.set_validshape(s, [5, C])
            pl.load(s, y, [0, 0])                 # this block: 5 valid rows
            if set_dst:
                pl.set_validshape(d, [5, C])
            pl.move(d, s)
            pl.store(z, d, [0, 0])
    return k


def test_a_move_without_valid_shape_copies_the_stale_tail():
    """PRO.md's negative test bad_output_tile_missing_valid_shape: a same-size move whose destination has no valid
    shape copies the whole tile, the source's poisoned tail included, and the store writes it out. pyto moves the
    destination's valid region, as the device does: z's last 3 rows are x's, not left alone."""
    x, y = RNG.standard_normal((R, C)).astype(np.float32), RNG.standard_normal((R, C)).astype(np.float32)
    z = np.zeros_like(x)
    copy_block(set_dst=False)(x, y, z)
    assert np.array_equal(z[:5], y[:5]) and np.array_equal(z[5:], x[5:])      # the stale tail went out with it
    z = np.zeros_like(x)
    copy_block(set_dst=True)(x, y, z)
    assert np.array_equal(z[:5], y[:5]) and not z[5:].any()                    # only the valid rows moved


# ---- a [M, 1] reduction result without layout=DN ---------------------------------------------------------------
@pytest.mark.parametrize("op", ["sum", "maximum"])
def test_a_row_reduction_into_an_nd_column_is_refused(op):
    """PRO.md's silent-error traps (pitfalls.md): "a [M,1] reduction output without layout=pl.DN gives ValueError or
    wrong results" (sum.md and max.md require layout=pl.DN for dim=0): an ND [M, 1] tile puts each row's value in a
    32-byte row of its own. pyto refuses it, naming the tile, the declaration to write and the kernel line."""
    reduce = getattr(pl, op)

    @pl.jit(auto_mutex=True)
    def k(x: pl.Tensor[[R, C], pl.DT_FP32], m: pl.Tensor[[1, R], pl.DT_FP32]):
        src = pl.make_tile_group(type=vec([R, C]), addrs=0x0, mutex_ids=[0])
        tmp = pl.make_tile_group(type=vec([R, C]), addrs=0x400, mutex_ids=[1])
        col = pl.make_tile_group(type=vec([R, 1]), addrs=0x800, mutex_ids=[2])      # no layout=pl.DN
        with pl.section_vector():
            s, t, c = src.current(), tmp.current(), col.current()
            pl.load(s, x, [0, 0])
            reduce(c, s, t, dim=0)
    with pytest.raises(pyto.ShapeError, match=rf"test_pro_silent_failures\.py:\d+ .*pl\.{op}\(dim=0\) out UB tile 'col' "
                                              rf"is an ND \[8, 1\] tile: declare it pl\.TileType\(\[8, 1\], \.\.\., "
                                              rf"layout=pl\.DN\)"):
        k(np.zeros((R, C), np.float32), np.zeros((1, R), np.float32))


# ---- a same-address reload before the read, without bar_mte2 ------------------------------------------------
def reuse_address(barrier: bool):
    """Two make_tile tiles at one UB address, each loaded with a block of a, then added: the second load reuses the
    bytes before the first block is read. Synchronised by hand (make_tile tiles have no framework sync);
    `barrier`: a pl.system.bar_mte2() between the loads."""
    @pl.jit
    def k(a: pl.Tensor[[2 * R, C], pl.DT_FP32], out: pl.Tensor[[R, C], pl.DT_FP32]):
        first = pl.make_tile(vec([R, C]), addr=0x0)
        second = pl.make_tile(vec([R, C]), addr=0x0)          # the same 512 bytes
        total = pl.make_tile(vec([R, C]), addr=0x400)
        with pl.section_vector():
            pl.load(first, a, [0, 0])
            if barrier:
                pl.system.bar_mte2()
            pl.load(second, a, [R, 0])
            pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
            pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
            pl.add(total, first, second)
            pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=1)
            pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=1)
            pl.store(out, total, [0, 0])
    return k


def test_a_reused_address_reloaded_before_the_read():
    """PRO.md's negative test bad_load_reuses_address_before_read (two make_tiles at one UB address, manual sync:
    the second load overwrites data still needed) and load.md's bar_mte2 rule. Without a barrier the two MTE2
    writes of one range are unordered: a RaceError naming both and the fix. With bar_mte2 they are ordered and the
    kernel runs to the device's wrong number: the tiles are one storage (same address, shape and dtype), so the
    add reads the second block twice."""
    a = small_ints(2 * R, C)
    out = np.zeros((R, C), np.float32)
    with pytest.raises(pyto.RaceError, match=r"WAW hazard detected at UB: UB tile '(first|second)'.*\n  PIPE_MTE2 .*"
                                             r"pl\.load\(first.*\n  PIPE_MTE2 .*pl\.load\(second.*\n.*\n  fix: .*"
                                             r"pl\.system\.bar_mte2\(\)"):
        reuse_address(barrier=False)(a, out)
    assert not out.any()
    reuse_address(barrier=True)(a, out)
    assert np.array_equal(out, a[R:] + a[R:])
    assert not np.array_equal(out, a[:R] + a[R:])


def test_a_group_slot_reloaded_before_the_read_races_on_mte2():
    """The same rule under auto_mutex (load.md: two loads into one tile with no read between need bar_mte2): a
    slot's mutex id orders other pipes against MTE2, not MTE2 against itself, so the second load is a WAW race."""
    a = np.ones((64, 64), np.float32)
    with pytest.raises(pyto.RaceError, match=r"WAW hazard detected at UB: UB tile 't'.*\n  PIPE_MTE2 .*\n  PIPE_MTE2 "
                                             r".*\n.*\n  fix: .*pl\.system\.bar_mte2\(\)"):
        reload_slot(False, False)(a, np.zeros((32, 64), np.float32))


# ---- a pure-vector sync_all without AIV_ONLY -------------------------------------------------------------------
@pytest.mark.parametrize("core_type, why", [
    (pl.SyncCoreType.MIX, r"sync_all\(core_type=SyncCoreType.MIX\) .*runs only AIVs: it would sync cores that do not "
                          r"exist, a device error"),
    (pl.SyncCoreType.AIC_ONLY, r"sync_all\(core_type=SyncCoreType.AIC_ONLY\) in kernel 'k', which runs no AICs; pass "
                               r"core_type=pl\.SyncCoreType\.AIV_ONLY")], ids=["MIX", "AIC_ONLY"])
def test_sync_all_without_aiv_only_in_an_aiv_only_kernel_is_a_device_error(core_type, why):
    """PRO.md section 2, mutexes and flags: "sync_all without AIV_ONLY in a pure-vector kernel gives a device error"
    (sync_all.md's core_type must match the cores the kernel runs). pyto refuses it as a SyncError naming the core
    type and the line; with AIV_ONLY the same kernel runs (tests/test_pro_sync.py)."""
    x = np.zeros((4, 64), np.float32)
    with pytest.raises(pyto.SyncError, match=r"pro_kernels\.py:\d+ pl\.system\.sync_all\(core_type=core_type\): .*" + why):
        two_phase(core_type, True)[None, 4](x, np.zeros_like(x))
