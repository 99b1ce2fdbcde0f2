"""The 4:2 sparse matmul (issue 21, the sparse part; pyto's extension beyond PyPTO-Pro): pyto.layout.densify_4_2 /
expand_4_2 / pack_sparse_index (seeds/004 §5.2), and pl.move_sparse + pl.matmul_sparse / matmul_sparse_acc on Atlas
A2/A3 (language/cube_sparse.py), in a K-loop kernel written with the public DSL only, against the float64 numpy
product of A and the expanded B: exact, since int8 x int8 products summed over K <= 512 stay below 2^23 (int32
neither wraps nor rounds, and float64 holds them exactly). Every rule's refusal with its error class and message; a
hypothesis test over shapes; the MMAD time against the dense int8 MMAD over K/2 the chip table gives."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyto
import pyto.language as pl
from pyto import layout as L

RNG = np.random.default_rng(4242)
SP = pl.MemorySpace.SparseIndex
CHIPS = ["atlas-a2", "atlas-a3"]


def sparse_b(K: int, N: int, rng=RNG, batch=()) -> np.ndarray:
    """A random int8 [..., K, N] with 0..2 non-zeros (never -128..127's 0 by chance only) in each group of 4 along K."""
    b = rng.integers(-128, 128, (*batch, K // 4, 4, N)).astype(np.int8)
    b[b == 0] = 1
    keep = rng.integers(0, 3, (*batch, K // 4, 1, N))                 # how many of the 4 stay non-zero
    order = rng.random((*batch, K // 4, 4, N)).argsort(axis=-2)       # a random ranking of the 4 places
    b[order >= keep] = 0
    return b.reshape(*batch, K, N)


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) @ b.astype(np.float64)


# ---- the format: densify / expand / the packed index -----------------------------------------------------------
@given(st.integers(1, 3), st.integers(1, 12), st.integers(1, 40), st.integers(0, 2**32 - 1))
def test_densify_expand_round_trip(batch, groups, N, seed):
    """expand_4_2(densify_4_2(b)) is b; each group's two places hold its non-zeros; the index packs 4 to a byte and
    unpacks back; the packed index's 8 x 16 Zn fractals are sparse_index_to_zn's."""
    rng = np.random.default_rng(seed)
    K = 8 * groups                                  # (whole index bytes: K/2 % 4 == 0)
    b = sparse_b(K, N, rng, (batch,))
    dense, idx = L.densify_4_2(b)
    assert dense.shape == idx.shape == (batch, K // 2, N)
    np.testing.assert_array_equal(L.expand_4_2(dense, idx), b)
    places = idx.reshape(batch, K // 4, 2, N).astype(int) + np.array([0, 1]).reshape(2, 1)
    assert (places[..., 0, :] < places[..., 1, :]).all() and places.min() >= 0 and places.max() <= 3
    g = b.reshape(batch, K // 4, 4, N)
    np.testing.assert_array_equal(np.take_along_axis(g, places, axis=-2).reshape(dense.shape), dense)
    packed = L.pack_sparse_index(idx)
    assert packed.shape == (batch, K // 8, N) and packed.dtype == np.uint8
    np.testing.assert_array_equal(L.unpack_sparse_index(packed), idx)
    np.testing.assert_array_equal(L.nd_to_zn(packed, fractal=(8, 16)), L.sparse_index_to_zn(idx, packed=True))


def test_index_byte_order_is_loaddatawithsparse_example():
    """LoadDataWithSparse.md: the indices 1 2 0 1 0 2 1 0 lie in memory as 1 0 2 1 | 0 1 2 0 (each byte's 2-bit fields
    written high to low), so the first index is a byte's lowest two bits."""
    idx = np.array([1, 2, 0, 1, 0, 2, 1, 0], np.uint8).reshape(8, 1)
    packed = L.pack_sparse_index(idx)[:, 0]
    fields = [[(int(v) >> s) & 3 for s in (6, 4, 2, 0)] for v in packed]
    assert fields == [[1, 0, 2, 1], [0, 1, 2, 0]]


def test_densify_follows_the_seed_rule_per_group():
    """seeds/004 §5.2: index 0 = the first non-zero's place among elements 0..2, index 1 = the second's among 1..3."""
    col = np.array([0, 5, 0, 7,   3, 0, 0, 0,   0, 0, 0, 9,   0, 0, 4, 6], np.int8).reshape(16, 1)
    dense, idx = L.densify_4_2(col)
    assert idx[:, 0].tolist() == [1, 2, 0, 0, 0, 2, 2, 2]
    assert dense[:, 0].tolist() == [5, 7, 3, 0, 0, 9, 4, 6]


def test_densify_refuses_three_nonzeros_and_a_partial_group():
    b = np.zeros((8, 3), np.int8)
    b[4:7, 2] = 1
    with pytest.raises(pyto.SparsityError, match=r"group of K rows 4\.\.7 \(column 2\) has 3 nonzeros"):
        L.densify_4_2(b)
    with pytest.raises(pyto.ShapeError, match=r"K divisible by 4, got K=6"):
        L.densify_4_2(np.zeros((6, 3), np.int8))
    assert issubclass(pyto.SparsityError, pyto.ShapeError)


@pytest.mark.parametrize("pair", [(1, 0), (2, 0), (2, 1), (3, 3), (0, 3)])
def test_an_index_pair_outside_the_cube_table_is_refused(pair):
    """MmadWithSparse.md's table 2 holds the six pairs 0 <= i0 <= i1 <= 2; (1, 0) / (2, 0) pick one element twice."""
    idx = np.zeros((4, 2), np.uint8)
    idx[2:4, 1] = pair
    with pytest.raises(pyto.SparsityError, match=rf"group 1 .* of column 1 has the index pair \({pair[0]}, {pair[1]}\)"):
        L.check_sparse_index(idx)
    with pytest.raises(pyto.SparsityError):
        L.expand_4_2(np.zeros((4, 2), np.int8), idx)


# ---- a kernel with the public DSL only -----------------------------------------------------------------------
@pl.kernel
def sparse_matmul(a, b_t, idx_t, c, *, M: int, N: int, K: int, TM: int, TN: int, TK: int):
    """c [M, N] int32 = a [M, K] int8 @ B, B [K, N] 4:2 sparse given as its dense half stored transposed, b_t
    [N, K/2] int8, and its packed index stored transposed, idx_t [N, K/8] uint8 (pyto.layout.densify_4_2 and
    pack_sparse_index, then .T): TM x TN output tiles, a K loop of TK (matmul_sparse, then matmul_sparse_acc)."""
    a_l1 = pl.alloc(pl.L1, [TM, TK], pl.DT_INT8)
    b_l1 = pl.alloc(pl.L1, [TK // 2, TN], pl.DT_INT8, layout=pl.ZN)      # as stored: LoadDataWithSparse reads Zn
    i_l1 = pl.alloc(pl.L1, [TK // 8, TN], pl.DT_UINT8, layout=pl.ZN)
    a_l0 = pl.alloc(pl.L0A, [TM, TK], pl.DT_INT8)
    b_l0 = pl.alloc(pl.L0B, [TK // 2, TN], pl.DT_INT8)
    i_l0 = pl.alloc(SP, [TK // 8, TN], pl.DT_UINT8)                      # at b_l0's address >> 2 (both first)
    c_l0 = pl.alloc(pl.L0C, [TM, TN], pl.DT_INT32)
    for mi in range(0, M, TM):
        for ni in range(0, N, TN):
            for ki in range(0, K, TK):
                pl.load(a_l1, a, [mi, ki])
                pl.load(b_l1, b_t, [ni, ki // 2], order=[1, 0])
                pl.load(i_l1, idx_t, [ni, ki // 8], order=[1, 0])
                pl.move(a_l0, a_l1)
                pl.move_sparse(b_l0, i_l0, b_l1, i_l1)
                if ki == 0:
                    pl.matmul_sparse(c_l0, a_l0, b_l0, i_l0)
                else:
                    pl.matmul_sparse_acc(c_l0, c_l0, a_l0, b_l0, i_l0)
            pl.store(c, c_l0, [mi, ni])


def _inputs(M, N, K, rng=RNG):
    a = rng.integers(-128, 128, (M, K)).astype(np.int8)
    b = sparse_b(K, N, rng)
    dense, idx = L.densify_4_2(b)
    return a, b, np.ascontiguousarray(dense.T), np.ascontiguousarray(L.pack_sparse_index(idx).T)


def _run(M, N, K, TM, TN, TK, chip="atlas-a2", inputs=None, **kw):
    a, b, b_t, idx_t = inputs or _inputs(M, N, K)
    c = np.zeros((M, N), np.int32)
    rep = pyto.run(sparse_matmul, a, b_t, idx_t, c, M=M, N=N, K=K, TM=TM, TN=TN, TK=TK, chip=chip, **kw)
    return c, reference(a, b), rep


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("accumulate", ["fused", "per_mmad"])
def test_sparse_matmul_is_the_dense_product_of_the_expanded_b(chip, accumulate):
    """M, N over 2 x 3 output tiles, K over 4 K steps: exact int32 (see the module docstring)."""
    with pyto.run_options(accumulate=accumulate):
        c, ref, _ = _run(64, 96, 256, 32, 32, 64, chip)
    np.testing.assert_array_equal(c, ref)


@settings(max_examples=12)
@given(st.sampled_from([8, 16, 20, 48]), st.sampled_from([16, 20, 32, 48]), st.integers(1, 8),
       st.sampled_from([1, 2, 4]), st.integers(0, 2**32 - 1))
def test_sparse_matmul_over_shapes(M, N, k_bytes, steps, seed):
    """K = 8 x k_bytes x steps (whole index bytes per K step, often not whole fractals: the padding), M and N off the
    16-grid too, one output tile or two along N."""
    K, TK = 8 * k_bytes * steps, 8 * k_bytes
    TN = N // 2 if N == 32 else N
    c, ref, _ = _run(M, N, K, M, TN, TK, inputs=_inputs(M, N, K, np.random.default_rng(seed)))
    np.testing.assert_array_equal(c, ref)


@given(st.integers(1, 15))
@settings(max_examples=8)
def test_a_k_that_is_not_whole_index_bytes_is_refused(k):
    """K % 8 != 0 (a dense B of K/2 rows, not a multiple of 4: no whole index byte): ShapeError naming the rule."""
    K = 8 * k + 4
    with pytest.raises(pyto.ShapeError, match=rf"K = {K} must be a multiple of 8"):
        _run(16, 16, K, 16, 16, K, inputs=(np.zeros((16, K), np.int8), np.zeros((K, 16), np.int8),
                                            np.zeros((16, K // 2), np.int8), np.zeros((16, K // 8 + 1), np.uint8)))


def test_the_mmad_is_charged_as_the_dense_int8_mmad_over_half_k():
    """Timing (assumption): the M pipe of the sparse kernel = that of the same tiles' dense int8 MMAD over K/2, so
    half that over K (plus the per-MMAD head), by the table's cube.int8_cycles_per_step."""
    chip = pyto.load_chip("atlas-a2")
    M, N, K, T = 64, 64, 256, 64
    _, _, rep = _run(M, N, K, M, N, T)
    steps = (M // 16) * (N // 16) * (T // 2 // 32)
    per_mmad = steps * chip.cube_cycles_per_step["int8"] + chip.mmad_head_cycles
    assert rep.pipe_cycles["M"] == pytest.approx((K // T) * per_mmad)
    dense_steps = (M // 16) * (N // 16) * (T // 32)
    dense = (K // T) * (dense_steps * chip.cube_cycles_per_step["int8"] + chip.mmad_head_cycles)
    print(f"sparse M pipe {rep.pipe_cycles['M']:.1f} cycles, the dense K matmul's {dense:.1f}: "
          f"{rep.pipe_cycles['M'] / dense:.3f}")
    assert rep.pipe_cycles["M"] < dense
    assert rep.flops == 2 * M * N * (K // 2)          # the MACs the cube does: the dense half's


# ---- each rule's refusal ---------------------------------------------------------------------------------------
def _case(body, chip="atlas-a2"):
    """Run a one-step kernel whose cube part is `body(t)` on tiles t (a dict); inputs all zero."""
    @pl.kernel
    def k(a, b_t, idx_t, c):
        t = {"a1": pl.alloc(pl.L1, [16, 64], pl.DT_INT8),
             "b1": pl.alloc(pl.L1, [32, 16], pl.DT_INT8, layout=pl.ZN),
             "i1": pl.alloc(pl.L1, [8, 16], pl.DT_UINT8, layout=pl.ZN),
             "a0": pl.alloc(pl.L0A, [16, 64], pl.DT_INT8),
             "b0": pl.alloc(pl.L0B, [32, 16], pl.DT_INT8),
             "i0": pl.alloc(SP, [8, 16], pl.DT_UINT8),
             "c0": pl.alloc(pl.L0C, [16, 16], pl.DT_INT32)}
        pl.load(t["a1"], a, [0, 0])
        pl.load(t["b1"], b_t, [0, 0], order=[1, 0])
        pl.load(t["i1"], idx_t, [0, 0], order=[1, 0])
        pl.move(t["a0"], t["a1"])
        body(t)
        pl.store(c, t["c0"], [0, 0])
    c = np.zeros((16, 16), np.int32)
    pyto.run(k, np.zeros((16, 64), np.int8), np.zeros((16, 32), np.int8), np.zeros((16, 8), np.uint8), c, chip=chip)
    return c


def _ok(t):
    pl.move_sparse(t["b0"], t["i0"], t["b1"], t["i1"])
    pl.matmul_sparse(t["c0"], t["a0"], t["b0"], t["i0"])


def test_the_case_kernel_runs_as_written():
    np.testing.assert_array_equal(_case(_ok), np.zeros((16, 16), np.int32))


def test_the_950_has_no_sparse_cube():
    """The 950 removed 4:2 sparsity (asc-devkit's 3510 notes): its table has no SparseIndex buffer."""
    with pytest.raises(pyto.UnsupportedError, match=r"SparseIndex.*does not exist on chip ascend950pr.*Atlas A2/A3"):
        _case(_ok, chip="ascend950pr")


def _fp16_left(t):
    x = pl.alloc(pl.L0A, [16, 64], pl.DT_FP16)
    pl.move_sparse(t["b0"], t["i0"], t["b1"], t["i1"])
    pl.matmul_sparse(t["c0"], x, t["b0"], t["i0"])


def _fp32_acc(t):
    x = pl.alloc(pl.L0C, [16, 16], pl.DT_FP32)
    pl.move_sparse(t["b0"], t["i0"], t["b1"], t["i1"])
    pl.matmul_sparse(x, t["a0"], t["b0"], t["i0"])


def _k_mismatch(t):
    x = pl.alloc(pl.L0A, [16, 32], pl.DT_INT8)
    pl.move_sparse(t["b0"], t["i0"], t["b1"], t["i1"])
    pl.matmul_sparse(t["c0"], x, t["b0"], t["i0"])


def _nz_b(t):
    x = pl.alloc(pl.L1, [32, 16], pl.DT_INT8)
    pl.move_sparse(t["b0"], t["i0"], x, t["i1"])


def _nz_index(t):
    x = pl.alloc(pl.L1, [8, 16], pl.DT_UINT8)
    pl.move_sparse(t["b0"], t["i0"], t["b1"], x)


def _int8_index(t):
    pl.alloc(SP, [8, 16], pl.DT_INT8)


def _index_shape(t):
    x = pl.alloc(pl.L1, [4, 16], pl.DT_UINT8, layout=pl.ZN)
    pl.move_sparse(t["b0"], t["i0"], t["b1"], x)


def _index_of_another_b(t):
    """A [16, 16] index view of a [8, 32]-shaped ZN index tile: the right shape, not B's store."""
    big = pl.alloc(pl.L1, [8, 32], pl.DT_UINT8, layout=pl.ZN)
    pl.move_sparse(t["b0"], t["i0"], t["b1"], big[0:8, 16:32])


def _index_view_elsewhere(t):
    """B's first fractal paired with the index's second."""
    b = pl.alloc(pl.L1, [64, 16], pl.DT_INT8, layout=pl.ZN)
    i = pl.alloc(pl.L1, [16, 16], pl.DT_UINT8, layout=pl.ZN)
    pl.move_sparse(t["b0"], t["i0"], b[0:32, 0:16], i[8:16, 0:16])


def _index_not_at_addr(t):
    pl.alloc(SP, [8, 16], pl.DT_UINT8)                  # after i0 (0x0) and this (0x80), the next one is at 0x100
    x = pl.alloc(SP, [8, 16], pl.DT_UINT8)
    pl.move_sparse(t["b0"], x, t["b1"], t["i1"])


def _mmad_index_not_rhs(t):
    x = pl.alloc(SP, [8, 16], pl.DT_UINT8)
    pl.move_sparse(t["b0"], t["i0"], t["b1"], t["i1"])
    pl.matmul_sparse(t["c0"], t["a0"], t["b0"], x)


def _acc_not_dst(t):
    x = pl.alloc(pl.L0C, [16, 16], pl.DT_INT32)
    pl.move_sparse(t["b0"], t["i0"], t["b1"], t["i1"])
    pl.matmul_sparse_acc(t["c0"], x, t["a0"], t["b0"], t["i0"])


def _never_moved(t):
    pl.move(t["b0"], t["b1"])                     # the dense B by a plain LoadData: the index buffer stays unwritten
    pl.matmul_sparse(t["c0"], t["a0"], t["b0"], t["i0"])


def _tails(t):
    pl.set_validshape(t["a0"], [8, 64])
    pl.move_sparse(t["b0"], t["i0"], t["b1"], t["i1"])
    pl.matmul_sparse(t["c0"], t["a0"], t["b0"], t["i0"])


RULES = [
    (_fp16_left, pyto.ShapeError, r"int8 by int8 into int32 .*lhs_tile .* is fp16"),
    (_fp32_acc, pyto.ShapeError, r"int8 by int8 into int32 .*dst_tile .* is fp32"),
    (_k_mismatch, pyto.ShapeError, r"shapes do not chain.*\[16, 32\] @ expand\(rhs_tile .* \[32, 16\]\): lhs's K must "
                                   r"be twice"),
    (_nz_b, pyto.ShapeError, r"src_tile .* is NZ: LoadDataWithSparse reads the dense B as Zn fractals"),
    (_nz_index, pyto.ShapeError, r"src_index .* is NZ: the sparse index is ZN"),
    (_int8_index, pyto.ShapeError, r"SparseIndex tiles hold the 4:2 sparse index, pl.DT_UINT8 .*got int8"),
    (_index_shape, pyto.ShapeError, r"src_index .* has shape \[4, 16\], but the dense B \[K/2, N\] = \[32, 16\] needs "
                                    r"the index \[K/8, N\] = \[8, 16\]"),
    (_index_of_another_b, pyto.KernelError, r"src_index .* is not the index of src_tile .*'s store.*got \[8, 32\]"),
    (_index_view_elsewhere, pyto.KernelError, r"covers index rows 8:16.*whose index is rows 0:8.*index fractal i goes "
                                              r"with B fractal i"),
    (_index_not_at_addr, pyto.KernelError, r"index_tile .* is at 0x100, but rhs_tile .* is at 0x0.*place index_tile "
                                           r"at 0x0"),
    (_mmad_index_not_rhs, pyto.KernelError, r"pl.matmul_sparse index_tile .* is at 0x80, but rhs_tile .* is at 0x0: "
                                            r"the cube reads rhs's index at"),
    (_acc_not_dst, pyto.ShapeError, r"pl.matmul_sparse_acc accumulates in place"),
    (_never_moved, pyto.UninitializedReadError, r"pl\.matmul_sparse on PIPE_M .* reads L0B_SP tile .* never written"),
    (_tails, pyto.UnsupportedError, r"pl.matmul_sparse with valid shapes \(tails\) is not built"),
]


@pytest.mark.parametrize("body, error, message", RULES, ids=[r[0].__name__.strip("_") for r in RULES])
def test_each_rule_has_its_own_error(body, error, message):
    with pytest.raises(error, match=message) as e:
        _case(body)
    assert "test_sparse.py:" in str(e.value)          # the kernel's own line


def test_a_bad_index_in_gm_is_a_sparsity_error_at_the_mmad():
    """The index is data: a pair outside the cube's table is found by the data pass, naming the MMAD's line."""
    M, N, K = 16, 16, 64
    a, b, b_t, idx_t = _inputs(M, N, K)
    idx_t = idx_t.copy()
    idx_t[5, 3] = 0b00_00_00_01             # column 5, index bytes' row 3: its first group's pair is (1, 0)
    with pytest.raises(pyto.SparsityError, match=r"test_sparse\.py:\d+ pl\.matmul_sparse\(.*\): pl\.matmul_sparse's index: "
                                                 r"group 6 .* of column 5 has the index pair \(1, 0\)"):
        _run(M, N, K, M, N, K, inputs=(a, b, b_t, idx_t))


# ---- a ring of Right / SparseIndex slots at the address relation, B and its index as views ---------------------
def tt(shape, dtype, mem, **kw):
    return pl.TileType(shape=shape, dtype=dtype, target_memory=mem, **kw)


def sparse_matmul_ring(M: int, N: int, K: int, TK: int):
    """c [M, N] = a @ B as sparse_matmul, one output tile, PyPTO-Pro style (pl.jit for Atlas A2, make_tile /
    make_tile_group, auto_mutex): the tile's whole dense B and its index loaded once into Mat, each K step moving
    views of both (B rows ki/2.., index rows ki/8..: fractal i with fractal i) into double-buffered Right /
    SparseIndex slots placed at the relation (each index slot at its Right slot's address >> 2), phases Partial /
    Final on the accumulation."""
    @pl.jit(arch="a2", auto_mutex=True)
    def kern(a: pl.Tensor[[M, K], pl.DT_INT8], b_t: pl.Tensor[[N, K // 2], pl.DT_INT8],
             idx_t: pl.Tensor[[N, K // 8], pl.DT_UINT8], c: pl.Tensor[[M, N], pl.DT_INT32]):
        b_l1 = pl.make_tile(tt([K // 2, N], pl.DT_INT8, pl.MemorySpace.Mat, layout=pl.ZN), addr=0x10000)
        i_l1 = pl.make_tile(tt([K // 8, N], pl.DT_UINT8, pl.MemorySpace.Mat, layout=pl.ZN), addr=0x30000)
        a_l1 = pl.make_tile_group(type=tt([M, TK], pl.DT_INT8, pl.MemorySpace.Mat), addrs=0x0, mutex_ids=[0, 1])
        a_l0 = pl.make_tile_group(type=tt([M, TK], pl.DT_INT8, pl.MemorySpace.Left), addrs=[0x0, 0x4000],
                                  mutex_ids=[2, 3])
        b_l0 = pl.make_tile_group(type=tt([TK // 2, N], pl.DT_INT8, pl.MemorySpace.Right), addrs=[0x0, 0x4000],
                                  mutex_ids=[4, 5])
        i_l0 = pl.make_tile_group(type=tt([TK // 8, N], pl.DT_UINT8, SP), addrs=[0x0, 0x1000], mutex_ids=[6, 7])
        c_l0 = pl.make_tile(tt([M, N], pl.DT_INT32, pl.MemorySpace.Acc), addr=0x0)
        with pl.section_cube():
            pl.load(b_l1, b_t, [0, 0], order=[1, 0])
            pl.load(i_l1, idx_t, [0, 0], order=[1, 0])
            for ki in pl.range(0, K, TK):
                x, al, br, ir = a_l1.next(), a_l0.next(), b_l0.next(), i_l0.next()
                pl.load(x, a, [0, ki])
                pl.move(al, x)
                pl.move_sparse(br, ir, b_l1[ki // 2:(ki + TK) // 2, 0:N], i_l1[ki // 8:(ki + TK) // 8, 0:N])
                phase = pl.AccPhase.Final if ki + TK == K else pl.AccPhase.Partial
                if ki == 0:
                    pl.matmul_sparse(c_l0, al, br, ir, phase=phase)
                else:
                    pl.matmul_sparse_acc(c_l0, c_l0, al, br, ir, phase=phase)
            pl.store(c, c_l0, [0, 0], phase=pl.STPhase.Final)
    return kern


@pytest.mark.parametrize("K, TK", [(256, 64), (384, 128)])
def test_a_ring_of_slots_and_views_of_b_and_its_index(K, TK):
    M, N = 32, 64
    a, b, b_t, idx_t = _inputs(M, N, K)
    c = np.zeros((M, N), np.int32)
    sparse_matmul_ring(M, N, K, TK)(a, b_t, idx_t, c)
    np.testing.assert_array_equal(c, reference(a, b))


@pl.kernel
def index_load(idx_t):
    i_l1 = pl.alloc(pl.L1, [8, 16], pl.DT_UINT8, layout=pl.ZN)
    pl.load(i_l1, idx_t, [0, 0], order=[1, 0])


@pytest.mark.parametrize("gm, error, message", [
    (np.zeros((16, 8), np.int8), pyto.ShapeError, r"pl.load does not convert: GM tensor 'idx_t' \[16, 8\] int8"),
    (np.zeros((8, 16), np.uint8), pyto.OutOfBoundsError, r"runs past the edge of GM tensor 'idx_t' \[8, 16\] uint8"),
])
def test_the_index_load_takes_the_packed_bytes_as_stored(gm, error, message):
    """GM -> Mat of the index: uint8 bytes [N, K/8] (the packed [K/8, N] transposed, as the dense B is stored)."""
    with pytest.raises(error, match=message):
        pyto.run(index_load, gm, chip="atlas-a2")
    pyto.run(index_load, np.zeros((16, 8), np.uint8), chip="atlas-a2")
