"""The cube path in PyPTO-Pro's spelling: the transposed loads of load.md's table (ZN Mat tiles and order=[1, 0]),
extracts by offset, load_tile / store_tile, the bias matmul of matmul.md, and Acc -> Vec with a phase."""
import numpy as np
import pytest

import pyto
import pyto.language as pl
from pro_kernels import acc, gm_to_l0, l1_matmul_store, left, mat, matmul_tiles, right, vec

RNG = np.random.default_rng(11)
M, K, N = 32, 64, 48


def _fp16(*shape):
    return RNG.standard_normal(shape).astype(np.float16)


def _tol(k):
    return k * 2.0 ** -24 * 4 * k


def _transposed(ta: bool, tb: bool, a_layout=None, b_layout=None):
    """C = op(A) @ op(B) with A^T stored [K, M] / B^T stored [N, K] when ta / tb (load.md "Cube侧转置场景": the Mat tile
    has Left's / Right's shape, ZN for the transposed case, and the load takes order=[1, 0])."""
    a_lay = a_layout or (pl.ZN if ta else pl.NZ)
    b_lay = b_layout or (pl.ZN if tb else pl.NZ)

    @pl.jit
    def k(a: pl.Tensor[[K, M] if ta else [M, K], pl.DT_FP16], b: pl.Tensor[[N, K] if tb else [K, N], pl.DT_FP16],
          c: pl.Tensor[[M, N], pl.DT_FP32]):
        a_l1 = pl.make_tile(mat([M, K], layout=a_lay), addr=0x0)
        b_l1 = pl.make_tile(mat([K, N], layout=b_lay), addr=0x10000)
        al, br, ac = pl.make_tile(left([M, K]), addr=0), pl.make_tile(right([K, N]), addr=0), \
            pl.make_tile(acc([M, N]), addr=0)
        with pl.section_cube():
            pl.load(a_l1, a, [0, 0], order=[1, 0] if ta else None)
            pl.load(b_l1, b, [0, 0], order=[1, 0] if tb else None)
            l1_matmul_store(c, ac, al, br, a_l1, b_l1)
    return k


@pytest.mark.parametrize("chip", ["ascend950pr", "atlas-a2"])
@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True), (True, True)])
def test_load_md_transpose_table(chip, ta, tb):
    a, b = _fp16(M, K), _fp16(K, N)
    c = np.zeros((M, N), np.float32)
    pyto.run(_transposed(ta, tb), np.ascontiguousarray(a.T) if ta else a, np.ascontiguousarray(b.T) if tb else b, c,
             chip=chip)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=0, atol=_tol(K))


def test_a_dn2nz_load_is_the_950s():
    """An NZ Mat tile loaded with order=[1, 0] is a Dn2Nz: fine on the 950, UnsupportedError on A2 naming the way."""
    a, b = _fp16(M, K), _fp16(K, N)
    c = np.zeros((M, N), np.float32)
    kern = _transposed(True, False, a_layout=pl.NZ)
    pyto.run(kern, np.ascontiguousarray(a.T), b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=0, atol=_tol(K))
    with pytest.raises(pyto.UnsupportedError, match=r"Dn2Nz load .* atlas-a2 does not have .* declare the Mat tile "
                                                    r"layout=pl\.ZN"):
        pyto.run(kern, np.ascontiguousarray(a.T), b, c, chip="atlas-a2")


@pl.jit
def extract_k(a: pl.Tensor[[M, 2 * K], pl.DT_FP16], b: pl.Tensor[[2 * K, N], pl.DT_FP16],
              c: pl.Tensor[[M, N], pl.DT_FP32]):
    """One wide Mat tile per operand, its two K halves moved out by offset (move.md's TEXTRACT)."""
    a_l1 = pl.make_tile(mat([M, 2 * K]), addr=0x0)
    b_l1 = pl.make_tile(mat([2 * K, N]), addr=0x10000)
    al = pl.make_tile_group(type=left([M, K]), addrs=[0x0, 0x8000], mutex_ids=[0, 1])
    br = pl.make_tile_group(type=right([K, N]), addrs=[0x0, 0x8000], mutex_ids=[2, 3])
    ac = pl.make_tile(acc([M, N]), addr=0)
    with pl.section_cube():
        pl.load_tile(a_l1, a, [0, 0])
        pl.load_tile(b_l1, b, [0, 0])
        pl.system.bar_all()
        pl.system.set_mm_layout_transform(enabled=True)
        for i, kk in enumerate(pl.range(0, 2 * K, K)):
            x, y = al.next(), br.next()
            pl.move(x, a_l1, [0, kk])
            pl.move(y, b_l1, [kk, 0])
            if i == 0:
                pl.matmul(ac, x, y, phase=pl.AccPhase.Partial)
            else:
                pl.matmul_acc(ac, ac, x, y, phase=pl.AccPhase.Final)
        pl.store_tile(c, ac, [0, 0], phase=pl.STPhase.Final)
        pl.system.set_mm_layout_transform(enabled=False)


def test_move_extracts_by_offset_and_tile_offsets():
    a, b = _fp16(M, 2 * K), _fp16(2 * K, N)
    c = np.zeros((M, N), np.float32)
    extract_k(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=0, atol=_tol(2 * K))


def test_an_extract_past_the_source_is_out_of_bounds():
    @pl.jit
    def k(a: pl.Tensor[[M, K], pl.DT_FP16]):
        a_l1 = pl.make_tile(mat([M, K]), addr=0x0)
        al = pl.make_tile(left([M, 32]), addr=0)
        with pl.section_cube():
            pl.move(al, a_l1, [0, 48])
    with pytest.raises(pyto.OutOfBoundsError, match=r"extracts \[0:32, 48:80\] from L1 tile 'a_l1' of shape \[32, 64\]"):
        k(_fp16(M, K))


@pl.jit
def tile_offsets(x: pl.Tensor[[64, 64], pl.DT_FP32], out: pl.Tensor[[64, 64], pl.DT_FP32]):
    """out's tile (i, j) of 32 x 32 = x's tile (j, i): load_tile / store_tile count in tiles."""
    t = pl.make_tile(vec([32, 32]), addr=0)
    with pl.section_vector():
        for i in pl.range(2):
            for j in pl.range(2):
                pl.load_tile(t, x, [j, i])
                pl.system.bar_all()
                pl.store_tile(out, t, [i, j])
                pl.system.bar_all()


def test_load_tile_and_store_tile_count_in_tiles():
    x = RNG.random((64, 64), np.float32)
    out = np.zeros_like(x)
    tile_offsets(x, out)
    want = np.block([[x[0:32, 0:32], x[32:64, 0:32]], [x[0:32, 32:64], x[32:64, 32:64]]])
    np.testing.assert_array_equal(out, want)


@pl.jit(auto_mutex=True)
def k_split_bias(a: pl.Tensor[[M, 2 * K], pl.DT_FP16], b: pl.Tensor[[2 * K, N], pl.DT_FP16],
                 bias: pl.Tensor[[1, N], pl.DT_FP16], c: pl.Tensor[[M, N], pl.DT_FP16]):
    """matmul.md's K split with a bias: the first block's matmul takes the Bias tile (it initialises Acc), the last
    matmul_acc is Final; the bias goes GM -> Mat (fp16) -> Bias (fp32)."""
    a_l1 = pl.make_tile_group(type=mat([M, K]), addrs=0x00000, mutex_ids=[0, 1])
    b_l1 = pl.make_tile_group(type=mat([K, N]), addrs=0x10000, mutex_ids=[2, 3])
    bias_l1 = pl.make_tile_group(type=mat([1, N]), addrs=0x20000, mutex_ids=[4])
    al = pl.make_tile_group(type=left([M, K]), addrs=0x0, mutex_ids=[5, 6])
    br = pl.make_tile_group(type=right([K, N]), addrs=0x0, mutex_ids=[7, 8])
    bt = pl.make_tile_group(type=pl.TileType(shape=[1, N], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Bias),
                            addrs=0x0, mutex_ids=[9])
    ac = pl.make_tile_group(type=acc([M, N]), addrs=0x0, mutex_ids=[10]).current()
    with pl.section_cube():
        pl.system.set_mm_layout_transform(enabled=True)
        for kk in pl.range(0, 2 * K, K):
            x_l1, y_l1, x, y = a_l1.next(), b_l1.next(), al.next(), br.next()
            pl.load(x_l1, a, [0, kk])
            pl.load(y_l1, b, [kk, 0])
            pl.move(x, x_l1)
            pl.move(y, y_l1)
            if kk == 0:
                pl.load(bias_l1.current(), bias, [0, 0])
                pl.move(bt.current(), bias_l1.current())
                pl.matmul(ac, x, y, bt.current(), phase=pl.AccPhase.Partial)
            else:
                pl.matmul_acc(ac, ac, x, y, phase=pl.AccPhase.Final)
        pl.store(c, ac, [0, 0], phase=pl.STPhase.Final)
        pl.system.set_mm_layout_transform(enabled=False)


def test_k_split_with_a_bias_on_its_first_block():
    a, b, bias = _fp16(M, 2 * K), _fp16(2 * K, N), _fp16(1, N)
    c = np.zeros((M, N), np.float16)
    k_split_bias(a, b, bias, c)
    ref = a.astype(np.float64) @ b.astype(np.float64) + bias.astype(np.float64)
    # fp32 accumulation, then one rounding to fp16 (half an ulp of the result)
    tol = _tol(2 * K) + np.abs(ref) * 2.0 ** -11
    assert np.all(np.abs(c.astype(np.float64) - ref) <= tol)


def test_the_bias_is_positional():
    @pl.jit
    def k(x: pl.Tensor[[16, 16], pl.DT_FP16]):
        al, br = pl.make_tile(left([16, 16]), addr=0), pl.make_tile(right([16, 16]), addr=0)
        ac = pl.make_tile(acc([16, 16]), addr=0)
        bt = pl.make_tile(pl.TileType(shape=[1, 16], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Bias), addr=0)
        with pl.section_cube():
            pl.matmul(ac, al, br, bias_tile=bt)
    with pytest.raises(pyto.KernelError, match=r"fourth positional argument.*the keyword bias_tile= is rejected"):
        k(np.zeros((16, 16), np.float16))


@pl.jit
def acc_to_vec_phased(a: pl.Tensor[[M, K], pl.DT_FP16], b: pl.Tensor[[K, N], pl.DT_FP16],
                      c: pl.Tensor[[M, N], pl.DT_FP32]):
    """The unit_flag hands L0C to a move into both AIVs' UB (STPhase.Final on the move), then a cross-core event."""
    tiles = matmul_tiles(M, K, N)
    half = pl.make_tile(vec([M // 2, N]), addr=0)
    with pl.section_cube():
        gm_to_l0(tiles, a, b)
        ac = tiles[4]
        pl.matmul(ac, tiles[2], tiles[3], phase=pl.AccPhase.Final)
        pl.move(half, ac, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM, phase=pl.STPhase.Final)
        pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0)
    with pl.section_vector():
        pl.system.wait_cross_core(pipe=pl.PipeType.MTE3, event_id=0)
        pl.store(c, half, [pl.get_subblock_idx() * (M // 2), 0])


def test_acc_to_vec_with_a_phase():
    a, b = _fp16(M, K), _fp16(K, N)
    c = np.zeros((M, N), np.float32)
    acc_to_vec_phased(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=0, atol=_tol(K))


@pytest.mark.parametrize("dt", [pl.DT_UINT8, pl.DT_INT32])
def test_the_cube_refuses_operands_matmul_md_does_not_list(dt):
    """matrix_computation/matmul.md: lhs and rhs are FP16, BF16, FP32, INT8 (or HF8); uint8 and int32 are not."""
    @pl.jit
    def k(x: pl.Tensor[[16, 32], pl.DT_FP16]):
        al = pl.make_tile(left([32, 32], dt), addr=0)
        br = pl.make_tile(right([32, 32], dt), addr=0)
        ac = pl.make_tile(pl.TileType(shape=[32, 32], dtype=pl.DT_INT32, target_memory=pl.MemorySpace.Acc), addr=0)
        with pl.section_cube():
            pl.matmul(ac, al, br)
    with pytest.raises(pyto.ShapeError, match=rf"test_pro_cube\.py:\d+ .*the cube takes fp16, bf16, fp32 or int8 "
                                              rf"operands \(matrix_computation/matmul\.md\), not {dt.name}"):
        k(np.zeros((16, 32), np.float16))


@pl.jit(auto_mutex=True)
def two_biases(a: pl.Tensor[[M, K], pl.DT_FP16], b: pl.Tensor[[K, N], pl.DT_FP16],
               bias: pl.Tensor[[2, N], pl.DT_FP16], c: pl.Tensor[[2 * M, N], pl.DT_FP32]):
    """c[i] = a @ b + bias[i] for two bias rows held in a 2-slot Mat group at one base address: PyPTO-Pro puts
    slot 1 at base + N x 2 B (tile_slot_size, matmul.md's bias example), inside slot 0's 16-row NZ padding."""
    a_l1 = pl.make_tile_group(type=mat([M, K]), addrs=0x00000, mutex_ids=[0])
    b_l1 = pl.make_tile_group(type=mat([K, N]), addrs=0x10000, mutex_ids=[1])
    bias_l1 = pl.make_tile_group(type=mat([1, N]), addrs=0x20000, mutex_ids=[2, 3])
    al = pl.make_tile_group(type=left([M, K]), addrs=0x0, mutex_ids=[4])
    br = pl.make_tile_group(type=right([K, N]), addrs=0x0, mutex_ids=[5])
    bt = pl.make_tile_group(type=pl.TileType(shape=[1, N], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Bias),
                            addrs=0x0, mutex_ids=[6])
    ac = pl.make_tile_group(type=acc([M, N]), addrs=0x0, mutex_ids=[7])
    with pl.section_cube():
        x_l1, y_l1, x, y = a_l1.current(), b_l1.current(), al.current(), br.current()
        pl.load(x_l1, a, [0, 0])
        pl.load(y_l1, b, [0, 0])
        pl.move(x, x_l1)
        pl.move(y, y_l1)
        rows = [bias_l1.next(), bias_l1.next()]
        for i in pl.range(0, 2):
            pl.load(rows[i], bias, [i, 0])
        for i in pl.range(0, 2):
            pl.move(bt.current(), rows[i])
            pl.matmul(ac.current(), x, y, bt.current())
            pl.store(c, ac.current(), [i * M, 0])


def test_bias_rows_in_a_group_at_one_base_are_spaced_as_pyptopro_spaces_them():
    a, b, bias = _fp16(M, K), _fp16(K, N), _fp16(2, N)
    c = np.zeros((2 * M, N), np.float32)
    two_biases(a, b, bias, c)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    for i in range(2):           # fp32 accumulation of K exact fp16 products, plus the bias (one more rounding)
        assert np.all(np.abs(c[i * M:(i + 1) * M] - (ref + bias[i].astype(np.float64))) <= _tol(K + 1))
    assert not np.allclose(c[:M], c[M:])
