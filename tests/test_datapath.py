"""The data pass's copy elision (pyto/emulator/data/origins.py): an MMAD reads a copied operand at its source only
while the copy still holds; every case is checked against a float64 numpy reference and against a run that
reads the tiles themselves (the copies forced to run by reading them)."""
import numpy as np
import pytest

import pyto
import pyto.language as pl
from pyto.testing import assert_close, matmul_bound


def _ab(M, K, N, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((M, K)).astype(np.float16), rng.standard_normal((K, N)).astype(np.float16))


@pl.kernel
def reload_before_use(a, b, out, *, WRITE_A: bool):
    """One L1 tile for A: its second K half is loaded into it after the first half went to L0A but (in program
    order) before the MMAD that reads L0A; the schedule may start that reload first. The MMAD must see the
    first half. WRITE_A: the kernel ends by writing `a`, so `a` is no source and L0A's copy of L1 counts."""
    M, K = a.shape
    N = b.shape[1]
    h = K // 2
    a_l1, b_l1 = pl.alloc(pl.L1, [M, h], pl.DT_FP16), pl.alloc(pl.L1, [h, N], pl.DT_FP16)
    a0, a1 = pl.alloc(pl.L0A, [M, h], pl.DT_FP16), pl.alloc(pl.L0A, [M, h], pl.DT_FP16)
    b0, b1 = pl.alloc(pl.L0B, [h, N], pl.DT_FP16), pl.alloc(pl.L0B, [h, N], pl.DT_FP16)
    c = pl.alloc(pl.L0C, [M, N], pl.DT_FP32)
    pl.load(a_l1, a, [0, 0])
    pl.load(b_l1, b, [0, 0])
    pl.move(a0, a_l1)
    pl.move(b0, b_l1)
    pl.load(a_l1, a, [0, h])          # overwrites L1 while L0A still holds the first half
    pl.load(b_l1, b, [h, 0])
    pl.matmul(c, a0, b0)
    pl.move(a1, a_l1)
    pl.move(b1, b_l1)
    pl.matmul_acc(c, c, a1, b1)
    pl.store(out, c, [0, 0])
    if WRITE_A:
        pl.store(a, c, [0, 0])


@pl.kernel
def overwrite_input(a, b, out):
    """a @ b into out, then the kernel writes a row block of `a` itself: `a` is not an input the pass may read
    at its source (its GM changes during the pass), so L1's copy runs."""
    M, K = a.shape
    N = b.shape[1]
    a_l1, b_l1 = pl.alloc(pl.L1, [M, K], pl.DT_FP16), pl.alloc(pl.L1, [K, N], pl.DT_FP16)
    a_l0, b_l0 = pl.alloc(pl.L0A, [M, K], pl.DT_FP16), pl.alloc(pl.L0B, [K, N], pl.DT_FP16)
    c = pl.alloc(pl.L0C, [M, N], pl.DT_FP32)
    for k in pl.range(2):
        pl.load(a_l1, a, [0, 0])
        pl.load(b_l1, b, [0, 0])
        pl.move(a_l0, a_l1)
        pl.move(b_l0, b_l1)
        pl.matmul(c, a_l0, b_l0)
        if k == 0:
            pl.store(a, c, [0, 0])     # a[:, :N] = a @ b (the next round multiplies the new a)
        else:
            pl.store(out, c, [0, 0])


@pl.kernel
def half_overwritten_l1(a, b, out, *, X):
    """L1 holds a GM block; the AIVs then overwrite its top rows with X * those rows (UB -> L1) before the L1 ->
    L0A load: the MMAD must see the scaled rows, not GM's."""
    M, K = a.shape
    N = b.shape[1]
    a_l1, b_l1 = pl.alloc(pl.L1, [M, K], pl.DT_FP16), pl.alloc(pl.L1, [K, N], pl.DT_FP16)
    a_l0, b_l0 = pl.alloc(pl.L0A, [M, K], pl.DT_FP16), pl.alloc(pl.L0B, [K, N], pl.DT_FP16)
    c = pl.alloc(pl.L0C, [M, N], pl.DT_FP32)
    x_ub = pl.alloc(pl.UB, [16, K], pl.DT_FP16)
    with pl.section_cube():
        pl.load(a_l1, a, [0, 0])
        pl.load(b_l1, b, [0, 0])
    with pl.section_vector():
        if pl.get_subblock_idx() == 0:
            pl.load(x_ub, a, [0, 0])
            pl.mul(x_ub, x_ub, X)
            pl.move(a_l1[0:16, :], x_ub)
    with pl.section_cube():
        pl.move(a_l0, a_l1)
        pl.move(b_l0, b_l1)
        pl.matmul(c, a_l0, b_l0)
        pl.store(out, c, [0, 0])


def _f64(x):
    return x.astype(np.float64)


@pytest.mark.parametrize("write_a", [False, True])
def test_an_operand_read_at_its_source_is_the_copy_the_mmad_would_see(write_a):
    a, b = _ab(32, 64, 48)
    out = np.zeros((32, 48), np.float32)
    compiled = pyto.compile(reload_before_use, a, b, out, WRITE_A=write_a)
    for seed in (1, 2):
        a, b = _ab(32, 64, 48, seed)
        a0 = a.copy()
        compiled(a, b, out)
        assert_close(out, _f64(a0) @ _f64(b), matmul_bound(a0, b, np.float32))


def test_an_input_the_kernel_writes_is_not_read_at_its_source():
    a, b = _ab(32, 48, 32)
    a0 = a.copy()
    out = np.zeros((32, 32), np.float32)
    pyto.run(overwrite_input, a, b, out)
    first = (_f64(a0) @ _f64(b)).astype(np.float16)        # Fixpipe rounds the stored rows to fp16
    assert np.array_equal(a[:, :32], first) and np.array_equal(a[:, 32:], a0[:, 32:])
    expect = _f64(a) @ _f64(b)                              # the second round multiplies the new a
    assert_close(out, expect, matmul_bound(a, b, np.float32))


@pytest.mark.parametrize("X", [2.0, -0.5])
def test_a_tile_overwritten_after_its_gm_copy_is_read_as_overwritten(X):
    a, b = _ab(32, 32, 32, 3)
    out = np.zeros((32, 32), np.float32)
    pyto.run(half_overwritten_l1, a, b, out, X=X)
    scaled = a.copy()
    scaled[:16] = (a[:16].astype(np.float32) * np.float32(X)).astype(np.float16)
    assert_close(out, _f64(scaled) @ _f64(b), matmul_bound(scaled, b, np.float32))


@pl.kernel
def split_k_atomic(a, b, out):
    """Block j: out += a[:, 32j:32j+32] @ b[32j:32j+32, :] by Fixpipe's atomic add (out starts at zero)."""
    from dsl_helpers import matmul_from_gm, matmul_tiles
    tiles = matmul_tiles(16, 32, 16, a.dtype)
    k0 = 32 * pl.get_block_idx()
    matmul_from_gm(tiles, a, [0, k0], b, [k0, 0])
    pl.store(out, tiles[-1], [0, 0], atomic=pl.AtomicType.AtomicAdd)


def test_an_fp16_atomic_add_rounds_the_incoming_block_first():
    """Fixpipe converts the fp32 partial to fp16 before the atomic unit adds it in fp16: partials 2079 and 2083
    (exact in fp32) arrive as 2080 and 2084 and sum to 4164; one rounding of 4162 would give 4160 (a kernel-author
    helper's split-K case)."""
    a = np.ones((16, 64), np.float16)
    b = np.full((64, 16), 65, np.float16)
    b[0, :] = 64                      # segment 0: 31 * 65 + 64 = 2079
    b[32:, :] = 65
    b[32, :] = 68                     # segment 1: 31 * 65 + 68 = 2083
    out = np.zeros((16, 16), np.float16)
    pyto.run(split_k_atomic, a, b, out, blocks=2)
    assert np.all(out == np.float16(4164))


@pl.kernel
def pieces_into_one_tile(a, b, x, out, *, AFTER: str):
    """A and B reach L1 in two K pieces each (loads into the two halves of one tile, as a streamed L1 slot is
    filled), each half then moved to its own L0 tile. AFTER: what happens to A's first half in L1 before it is
    moved: "" nothing (both halves read at their GM source), "load" loaded again from x (a copy of x's block:
    the MMAD must see x there, a's block beside it), "vector" its top rows overwritten by the AIVs (not a copy:
    every copy the tile holds is dropped, the MMAD reads L1)."""
    M, K = a.shape
    N = b.shape[1]
    h = K // 2
    a_l1, b_l1 = pl.alloc(pl.L1, [M, K], pl.DT_FP16), pl.alloc(pl.L1, [K, N], pl.DT_FP16)
    a0, a1 = pl.alloc(pl.L0A, [M, h], pl.DT_FP16), pl.alloc(pl.L0A, [M, h], pl.DT_FP16)
    b0, b1 = pl.alloc(pl.L0B, [h, N], pl.DT_FP16), pl.alloc(pl.L0B, [h, N], pl.DT_FP16)
    c = pl.alloc(pl.L0C, [M, N], pl.DT_FP32)
    x_ub = pl.alloc(pl.UB, [16, h], pl.DT_FP16)
    with pl.section_cube():
        pl.load(a_l1[:, 0:h], a, [0, 0])
        pl.load(a_l1[:, h:K], a, [0, h])
        pl.load(b_l1[0:h, :], b, [0, 0])
        pl.load(b_l1[h:K, :], b, [h, 0])
        if AFTER == "load":
            pl.load(a_l1[:, 0:h], x, [0, 0])
    if AFTER == "vector":
        with pl.section_vector():
            if pl.get_subblock_idx() == 0:
                pl.load(x_ub, x, [0, 0])
                pl.move(a_l1[0:16, 0:h], x_ub)
    with pl.section_cube():
        pl.move(a0, a_l1[:, 0:h])
        pl.move(a1, a_l1[:, h:K])
        pl.move(b0, b_l1[0:h, :])
        pl.move(b1, b_l1[h:K, :])
        pl.matmul(c, a0, b0)
        pl.matmul_acc(c, c, a1, b1)
        pl.store(out, c, [0, 0])


@pytest.mark.parametrize("after", ["", "load", "vector"])
def test_a_tile_filled_in_pieces_reads_each_piece_at_its_source_while_it_holds(after):
    a, b = _ab(32, 64, 48, 4)
    x = np.random.default_rng(5).standard_normal((32, 32)).astype(np.float16)
    out = np.zeros((32, 48), np.float32)
    pyto.run(pieces_into_one_tile, a, b, x, out, AFTER=after)
    seen = a.copy()
    if after == "load":
        seen[:, :32] = x
    elif after == "vector":
        seen[:16, :32] = x[:16]
    assert_close(out, _f64(seen) @ _f64(b), matmul_bound(seen, b, np.float32))


def test_a_copy_drops_the_copies_it_covers_from_its_stores_writers():
    """Origins keeps, per tile store, only the copies whose bytes it may still hold: a copy over a rectangle drops
    the earlier copies inside it (a ring slot refilled every K step keeps one writer, not one per step: the bind
    stays linear in the launch), pieces beside each other stay, and a read needs exactly the live ones."""
    from pyto.emulator.data.origins import Origins
    from pyto.ir import Access

    class Store:          # any object: Origins keys stores by identity
        pass
    slot, gm = Store(), Store()
    o = Origins(inputs={id(gm)})
    for step in range(1000):                                   # the same slot refilled whole
        o.gm_copy(Access(slot, (0, 64, 0, 64)), gm, (0, 0, 64, 64 * step, 64 * step + 64, False), step)
    assert [s for _, s in o.writers[id(slot)]] == [999]
    o.gm_copy(Access(slot, (0, 64, 0, 32)), gm, (0, 0, 64, 0, 32, False), 1000)     # two pieces side by side
    o.gm_copy(Access(slot, (0, 64, 32, 64)), gm, (0, 0, 64, 32, 64, False), 1001)
    # together the pieces cover 999, neither alone does: it is kept (conservative: a read runs it, then them)
    assert [s for _, s in o.writers[id(slot)]] == [999, 1000, 1001]
    o.wrote(Access(slot, (0, 64, 0, 64)), 1002)                # a covering copy of anything: only it is left
    assert [s for _, s in o.writers[id(slot)]] == [1002]
    o.gm_copy(Access(slot, (0, 16, 0, 16)), gm, (0, 0, 16, 0, 16, False), 1003)
    o.read(Access(slot, (0, 64, 0, 64)))                       # a read of the tile needs the copies it holds
    assert o.needed == {1002, 1003}
