"""Cube <-> vector data paths in PyPTO-Pro's spelling (move.md, insert.md): a matmul -> add -> insert -> matmul chain
synchronised by hand, inserts into NZ and ZN Mat tiles (the on-chip transpose), move's automatic insert, Vec ND -> NZ
and what an NZ tile's bytes overlap, Mat -> Vec, and the RaceError of a missing cross-core wait on each path."""

import numpy as np
import pytest

import pyto
import pyto.language as pl
from pyto.emulator.check.overlap import byte_intervals
from pyto.testing import UNIT_ROUNDOFF, assert_close, matmul_bound, read_trace
from pro_kernels import acc, left, mat, right, vec

RNG = np.random.default_rng(19)
U32 = UNIT_ROUNDOFF[pl.DT_FP32]
S = 64                 # the chain's square size; each AIV holds S/2 rows
HALF = S // 2
P = pl.PipeType


def _sync(src, dst, event=0):
    pl.system.sync_src(set_pipe=src, wait_pipe=dst, event_id=event)
    pl.system.sync_dst(set_pipe=src, wait_pipe=dst, event_id=event)


def _chain(wait_insert: bool = True, wait_first: bool = True):
    """out = (q @ k + x1) @ v + x2 in fp32, as matmul_add_matmul_add (ST matmul/) does it: the cube's first product
    goes to both AIVs (DualModeSplitM), each adds its half of x1, turns it NZ and inserts it into the Mat tile the
    cube's second matmul reads as Left; the second product comes back the same way and gets x2. Every tile is a
    make_tile tile: only the kernel's flags and cross-core events order anything."""
    @pl.jit
    def chain(q: pl.Tensor[[S, S], pl.DT_FP32], k: pl.Tensor[[S, S], pl.DT_FP32], v: pl.Tensor[[S, S], pl.DT_FP32],
              x1: pl.Tensor[[S, S], pl.DT_FP32], x2: pl.Tensor[[S, S], pl.DT_FP32],
              out: pl.Tensor[[S, S], pl.DT_FP32]):
        mm1 = pl.make_tile(vec([HALF, S]), addr=0x0000)
        mm2 = pl.make_tile(vec([HALF, S]), addr=0x2000)
        v1_mat = pl.make_tile(mat([S, S], pl.DT_FP32), addr=0x10000)
        with pl.section_cube():
            q_mat = pl.make_tile(mat([S, S], pl.DT_FP32), addr=0x0000)
            k_mat = pl.make_tile(mat([S, S], pl.DT_FP32), addr=0x4000)
            v_mat = pl.make_tile(mat([S, S], pl.DT_FP32), addr=0x8000)
            q_left = pl.make_tile(left([S, S], pl.DT_FP32), addr=0x0)
            k_right = pl.make_tile(right([S, S], pl.DT_FP32), addr=0x0)
            v_right = pl.make_tile(right([S, S], pl.DT_FP32), addr=0x4000)
            c1 = pl.make_tile(acc([S, S]), addr=0x0)
            c2 = pl.make_tile(acc([S, S]), addr=0x8000)
            pl.load(q_mat, q, [0, 0])
            pl.load(k_mat, k, [0, 0])
            _sync(P.MTE2, P.MTE1)
            pl.move(q_left, q_mat)
            pl.move(k_right, k_mat)
            _sync(P.MTE1, P.M)
            pl.matmul(c1, q_left, k_right)
            _sync(P.M, P.FIX)
            pl.move(mm1, c1, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM)
            pl.system.set_cross_core(pipe=P.FIX, event_id=0)
            pl.load(v_mat, v, [0, 0])
            _sync(P.MTE2, P.MTE1)
            pl.move(v_right, v_mat)
            _sync(P.M, P.MTE1, 1)                   # the first matmul is done with q_left
            if wait_insert:
                pl.system.wait_cross_core(pipe=P.MTE1, event_id=2)
            pl.move(q_left, v1_mat)
            _sync(P.MTE1, P.M)
            pl.matmul(c2, q_left, v_right)
            _sync(P.M, P.FIX)
            pl.move(mm2, c2, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM)
            pl.system.set_cross_core(pipe=P.FIX, event_id=1)
        with pl.section_vector():
            x1_ub = pl.make_tile(vec([HALF, S]), addr=0x4000)
            x2_ub = pl.make_tile(vec([HALF, S]), addr=0x6000)
            o_ub = pl.make_tile(vec([HALF, S]), addr=0x8000)
            nz_ub = pl.make_tile(vec([HALF, S], layout=pl.NZ), addr=0xA000)
            off = pl.get_subblock_idx() * HALF
            pl.load(x1_ub, x1, [off, 0])
            _sync(P.MTE2, P.V, 1)
            if wait_first:
                pl.system.wait_cross_core(pipe=P.V, event_id=0)
            pl.add(o_ub, mm1, x1_ub)
            pl.move(nz_ub, o_ub)                    # ND -> NZ
            _sync(P.V, P.MTE3, 2)
            pl.insert(v1_mat, nz_ub, [off, 0])      # UB -> L1, NZ into NZ
            pl.system.set_cross_core(pipe=P.MTE3, event_id=2)
            pl.load(x2_ub, x2, [off, 0])
            _sync(P.MTE2, P.V, 1)
            pl.system.wait_cross_core(pipe=P.V, event_id=1)
            pl.add(o_ub, mm2, x2_ub)
            _sync(P.V, P.MTE3, 2)
            pl.store(out, o_ub, [off, 0])
    return chain


def _chain_inputs():
    return [RNG.standard_normal((S, S)).astype(np.float32) for _ in range(5)] + [np.zeros((S, S), np.float32)]


def _chain_bound(q, k, v, x1, x2):
    """Error bound of fl(fl(cube(fl(cube(q k) + x1) v)) + x2) against float64: the first product within matmul_bound,
    one fp32 rounding for each add, and the first stage's error carried through v (|e1| @ |v|) beside the second
    product's own matmul_bound (taken over |v1| + e1, which bounds the computed v1)."""
    f = np.float64
    c1 = q.astype(f) @ k.astype(f)
    v1 = c1 + x1
    e1 = matmul_bound(q, k, np.float32) * (1 + U32) + U32 * (np.abs(c1) + np.abs(x1))
    c2 = v1 @ v.astype(f)
    e2 = e1 @ np.abs(v.astype(f)) + matmul_bound(np.abs(v1) + e1, np.abs(v), np.float32)
    return c2 + x2, e2 * (1 + U32) + U32 * (np.abs(c2) + np.abs(x2))


def test_matmul_add_insert_matmul_chain_synchronised_by_hand():
    q, k, v, x1, x2, out = _chain_inputs()
    rep = _chain()(q, k, v, x1, x2, out)
    ref, bound = _chain_bound(q, k, v, x1, x2)
    assert_close(out, ref, bound, "matmul -> add -> insert -> matmul -> add")
    assert rep.pipe_cycles["MTE3"] > 0 and rep.pipe_cycles["V"] > 0


def _spans(rep, tmp_path) -> list:
    """(kernel source text, core, pipe) of each instruction in the report's Chrome trace."""
    path = tmp_path / "trace.json"
    rep.save_trace(str(path))
    cores, spans = read_trace(path)
    return [(e["args"]["line"].split(" ", 1)[1], cores[e["pid"]], e["cat"]) for e in spans]


def test_the_chain_in_timing_mode_with_a_trace(tmp_path):
    rep = _chain()(*[pyto.spec((S, S), "fp32")] * 6)
    assert rep.mode == "timing" and rep.cycles > 0
    spans = _spans(rep, tmp_path)
    assert len(spans) == rep.instructions
    on = {(line.split("#")[0].strip(), pipe) for line, _, pipe in spans}
    assert {("pl.insert(v1_mat, nz_ub, [off, 0])", "MTE3"), ("pl.move(nz_ub, o_ub)", "V"),
            ("pl.move(mm1, c1, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM)", "FIX"),
            ("pl.move(q_left, v1_mat)", "MTE1")} <= on
    assert {core for line, core, _ in spans if line.startswith("pl.insert")} == {"block 0 AIV0", "block 0 AIV1"}


def test_the_chain_without_the_wait_for_the_insert_races_on_the_mat_tile():
    with pytest.raises(pyto.RaceError, match=r"(?s)RAW hazard detected at L1: L1 tile 'v1_mat'.*PIPE_MTE3 \(AIV[01] "
                                             r"of block 0\) write: .*pl\.insert\(v1_mat, nz_ub.*PIPE_MTE1 \(AIC of block "
                                             r"0\) read: .*pl\.move\(q_left, v1_mat\)"):
        _chain(wait_insert=False)(*_chain_inputs())


def test_the_chain_without_the_wait_for_the_product_races_on_ub():
    with pytest.raises(pyto.RaceError, match=r"(?s)RAW hazard detected at UB: UB tile 'mm1'.*PIPE_FIX \(AIC of block "
                                             r"0\) write: .*pl\.move\(mm1, c1.*PIPE_V \(AIV[01] of block 0\) read"):
        _chain(wait_first=False)(*_chain_inputs())


# ---- the on-chip transpose: an NZ tile inserted into a ZN Mat tile ------------------------------------------------
MT, KT, NT = 64, 128, 64        # P [MT, KT] @ V [KT, NT]; P arrives contraction-major, as d = P^T [KT, MT]


def _insert_transposed(how: str, side: str):
    """out = d^T @ w (side "left": d [KT, MT] is P^T) or w @ d^T (side "right": d [NT, KT] is B^T), the transpose made
    on chip: each AIV loads its half of d's columns (rows for "right") into UB, turns it NZ and inserts it into a ZN
    Mat tile at its offset; the cube moves the ZN tile into Left / Right, which reads it transposed (ST matmul/
    test_insert_transpose_left.py, _right.py). `how`: "insert" (pl.insert), "move" (pl.move's automatic insert at the
    offset)."""
    if side == "left":
        d_shape, w_shape, mat_shape, part = [KT, MT], [KT, NT], [MT, KT], [KT, MT // 2]
    else:
        d_shape, w_shape, mat_shape, part = [NT, KT], [MT, KT], [KT, NT], [NT // 2, KT]

    @pl.jit
    def kern(d: pl.Tensor[d_shape, pl.DT_FP16], w: pl.Tensor[w_shape, pl.DT_FP16],
             out: pl.Tensor[[MT, NT], pl.DT_FP32]):
        d_mat = pl.make_tile(mat(mat_shape, layout=pl.ZN), addr=0x20000)
        with pl.section_vector():
            sub = pl.get_subblock_idx()
            d_ub = pl.make_tile(vec(part, pl.DT_FP16), addr=0x0)
            d_nz = pl.make_tile(vec(part, pl.DT_FP16, layout=pl.NZ), addr=0x6000)
            at = [0, sub * part[1]] if side == "left" else [sub * part[0], 0]
            pl.load(d_ub, d, at)
            _sync(P.MTE2, P.V)
            pl.move(d_nz, d_ub)
            _sync(P.V, P.MTE3)
            if how == "insert":
                pl.insert(d_mat, d_nz, at)
            else:
                pl.move(d_mat, d_nz, at)
            pl.system.set_cross_core(pipe=P.MTE3, event_id=2)
        with pl.section_cube():
            w_mat = pl.make_tile(mat(w_shape), addr=0x0)
            a_left = pl.make_tile(left([MT, KT]), addr=0x0)
            b_right = pl.make_tile(right([KT, NT]), addr=0x0)
            c = pl.make_tile(acc([MT, NT]), addr=0x0)
            pl.load(w_mat, w, [0, 0])
            _sync(P.MTE2, P.MTE1)
            pl.system.wait_cross_core(pipe=P.MTE1, event_id=2)
            pl.move(b_right if side == "left" else a_left, w_mat)
            pl.move(a_left if side == "left" else b_right, d_mat)
            _sync(P.MTE1, P.M)
            pl.matmul(c, a_left, b_right)
            _sync(P.M, P.FIX)
            pl.store(out, c, [0, 0])
    return kern, d_shape, w_shape


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("how", ["insert", "move"])
def test_an_nz_tile_inserted_into_a_zn_mat_tile_reaches_the_cube_transposed(how, side):
    kern, d_shape, w_shape = _insert_transposed(how, side)
    d = RNG.standard_normal(d_shape).astype(np.float16)
    w = RNG.standard_normal(w_shape).astype(np.float16)
    out = np.zeros((MT, NT), np.float32)
    kern(d, w, out)
    a, b = (d.T, w) if side == "left" else (w, d.T)
    assert_close(out, a.astype(np.float64) @ b.astype(np.float64), matmul_bound(a, b, np.float32),
                 f"on-chip transpose into {side}")


def test_a_whole_nz_tile_moved_into_a_zn_mat_tile_is_an_insert_at_the_origin():
    """pl.move(ZN Mat [M, K], NZ Vec [K, M]): equal shapes once the ZN tile is read as its NZ store (move.md), so an
    insert at [0, 0] (ST matmul/test_move_insert_transpose_left_full.py); here on one AIV (SingleModeVec-style: the
    other does nothing)."""
    @pl.jit
    def kern(d: pl.Tensor[[KT, MT], pl.DT_FP16], w: pl.Tensor[[KT, NT], pl.DT_FP16],
             out: pl.Tensor[[MT, NT], pl.DT_FP32]):
        d_mat = pl.make_tile(mat([MT, KT], layout=pl.ZN), addr=0x20000)
        with pl.section_vector():
            d_ub = pl.make_tile(vec([KT, MT], pl.DT_FP16), addr=0x0)
            d_nz = pl.make_tile(vec([KT, MT], pl.DT_FP16, layout=pl.NZ), addr=0x8000)
            if pl.get_subblock_idx() == 0:
                pl.load(d_ub, d, [0, 0])
                _sync(P.MTE2, P.V)
                pl.move(d_nz, d_ub)
                _sync(P.V, P.MTE3)
                pl.move(d_mat, d_nz)
            pl.system.set_cross_core(pipe=P.MTE3, event_id=2)
        with pl.section_cube():
            w_mat = pl.make_tile(mat([KT, NT]), addr=0x0)
            a_left = pl.make_tile(left([MT, KT]), addr=0x0)
            b_right = pl.make_tile(right([KT, NT]), addr=0x0)
            c = pl.make_tile(acc([MT, NT]), addr=0x0)
            pl.load(w_mat, w, [0, 0])
            _sync(P.MTE2, P.MTE1)
            pl.move(b_right, w_mat)
            pl.system.wait_cross_core(pipe=P.MTE1, event_id=2)
            pl.move(a_left, d_mat)
            _sync(P.MTE1, P.M)
            pl.matmul(c, a_left, b_right)
            _sync(P.M, P.FIX)
            pl.store(out, c, [0, 0])
    d = RNG.standard_normal((KT, MT)).astype(np.float16)
    w = RNG.standard_normal((KT, NT)).astype(np.float16)
    out = np.zeros((MT, NT), np.float32)
    kern(d, w, out)
    assert_close(out, d.T.astype(np.float64) @ w.astype(np.float64), matmul_bound(d.T, w, np.float32), "d^T @ w")


def _insert_one(src_shape, dst_shape, offset, *, nz_src=True, dst_layout=None, auto=False):
    @pl.jit
    def kern(x: pl.Tensor[[64, 64], pl.DT_FP16]):
        m = pl.make_tile(mat(dst_shape, layout=dst_layout), addr=0x0)
        with pl.section_vector():
            t = pl.make_tile(vec(src_shape, pl.DT_FP16, layout=pl.NZ if nz_src else None), addr=0x0)
            if auto:
                pl.move(m, t, offset)
            else:
                pl.insert(m, t, offset)
    return kern


@pytest.mark.parametrize("src,dst,offset,lay,nz,err,text", [
    ([32, 64], [64, 64], [40, 0], None, True, pyto.OutOfBoundsError,
     r"puts \[32, 64\] of UB tile 't' at \[40, 0\] of L1 tile 'm', which is \[64, 64\]: outside it \(insert.md"),
    ([32, 32], [64, 64], [0, 48], None, True, pyto.OutOfBoundsError, r"at \[0, 48\] of L1 tile 'm'"),
    ([32, 32], [64, 64], [16, 8], None, True, pyto.AlignmentError,
     r"at column 8 of L1 tile 'm': NZ fractals are 16 fp16 columns wide"),
    ([32, 64], [64, 64], [0, 0], None, False, pyto.ShapeError, r"but UB tile 't' is ND \(insert.md: the source must be NZ"),
    # a ZN Mat tile [64, 32] is the NZ store [32, 64]: offsets and shapes are its physical ones
    ([32, 64], [64, 32], [16, 0], pl.ZN, True, pyto.OutOfBoundsError, r"which is \[32, 64\] \(the ZN tile's NZ store"),
])
def test_insert_checks_name_the_tiles_and_the_rule(src, dst, offset, lay, nz, err, text):
    x = np.zeros((64, 64), np.float16)
    with pytest.raises(err, match=text) as ei:
        _insert_one(src, dst, offset, nz_src=nz, dst_layout=lay)(x)
    assert "test_pro_cv.py:" in str(ei.value)


def test_move_into_a_larger_mat_tile_from_an_nd_tile_needs_it_nz():
    """move's automatic insert has insert's rule: a sub-block source must be NZ."""
    with pytest.raises(pyto.ShapeError, match=r"pl\.move inserts an NZ Vec tile into Mat, but UB tile 't' is ND"):
        _insert_one([32, 64], [64, 64], None, nz_src=False, auto=True)(np.zeros((64, 64), np.float16))


def test_a_move_only_keyword_keeps_a_vec_to_mat_move_a_move():
    @pl.jit
    def kern(x: pl.Tensor[[64, 64], pl.DT_FP16]):
        m = pl.make_tile(mat([64, 64]), addr=0x0)
        with pl.section_vector():
            t = pl.make_tile(vec([32, 64], pl.DT_FP16, layout=pl.NZ), addr=0x0)
            pl.move(m, t, [0, 0], relu_pre_mode=pl.ReluPreMode.NormalRelu)
    with pytest.raises(pyto.KernelError, match="relu_pre_mode and phase apply to moves out of Acc only"):
        kern(np.zeros((64, 64), np.float16))


# ---- NZ Vec tiles: the same matrix, other bytes ------------------------------------------------------------------
def test_an_nz_vec_tile_lays_its_bytes_out_in_fractal_columns():
    """A [32, 64] fp16 NZ Vec tile's columns 16:32 are its second fractal column, one contiguous run of 32 rows x
    32 B; the ND tile's same columns are 32 runs of 32 B, one per row (overlap.byte_intervals, what the race and
    clobber checks follow)."""
    stores = {}

    @pl.jit
    def kern(x: pl.Tensor[[32, 64], pl.DT_FP16]):
        nd = pl.make_tile(vec([32, 64], pl.DT_FP16), addr=0x0)
        nz = pl.make_tile(vec([32, 64], pl.DT_FP16, layout=pl.NZ), addr=0x4000)
        stores.update(nd=nd.store, nz=nz.store)
        with pl.section_vector():
            pl.load(nd, x, [0, 0])
    kern(np.zeros((32, 64), np.float16))
    assert stores["nz"].grid == (16, 16) and stores["nz"].padded == (32, 64)
    assert byte_intervals(stores["nz"], (0, 32, 16, 32)) == [(0x4000 + 1024, 0x4000 + 2048)]
    assert byte_intervals(stores["nd"], (0, 32, 16, 32)) == [(r * 128 + 32, r * 128 + 64) for r in range(32)]


def test_an_nd_tile_at_an_nz_tiles_address_does_not_see_its_matrix():
    """The NZ tile holds the ND matrix in fractal order: an ND tile declared at the same address reads other
    elements in the hardware's bytes, so pyto refuses the read (ClobberedReadError naming both tiles) rather than
    give it the matrix."""
    @pl.jit
    def kern(x: pl.Tensor[[32, 64], pl.DT_FP16], out: pl.Tensor[[32, 64], pl.DT_FP16]):
        src = pl.make_tile(vec([32, 64], pl.DT_FP16), addr=0x0)
        nz = pl.make_tile(vec([32, 64], pl.DT_FP16, layout=pl.NZ), addr=0x4000)
        alias = pl.make_tile(vec([32, 64], pl.DT_FP16), addr=0x4000)
        with pl.section_vector():
            pl.load(src, x, [0, 0])
            pl.system.bar_all()
            pl.move(nz, src)
            pl.system.bar_all()
            pl.store(out, alias, [0, 0])
    with pytest.raises(pyto.ClobberedReadError, match=r"pl\.store reads UB tile 'alias' .* last written through UB "
                                                      r"tile 'nz'"):
        kern(np.ones((32, 64), np.float16), np.zeros((32, 64), np.float16))


def test_nz_is_legal_for_vec_and_zn_is_not():
    with pytest.raises(pyto.ShapeError, match=r"layout ZN is not legal for pl\.MemorySpace\.Vec tiles: UB takes ND or DN "
                                              r"or NZ"):
        pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec, layout=pl.ZN)


# ---- Mat -> Vec on V -----------------------------------------------------------------------------------------------
def _mat_to_vec(wait: bool = True, chip: str = "a5"):
    @pl.jit(arch=chip)
    def kern(x: pl.Tensor[[64, 64], pl.DT_FP16], out: pl.Tensor[[64, 64], pl.DT_FP16]):
        x_mat = pl.make_tile(mat([64, 64]), addr=0x0)
        with pl.section_cube():
            pl.load(x_mat, x, [0, 0])
            pl.system.set_cross_core(pipe=P.MTE2, event_id=4)
        with pl.section_vector():
            half = pl.make_tile(vec([32, 64], pl.DT_FP16), addr=0x0)
            sub = pl.get_subblock_idx()
            if wait:
                pl.system.wait_cross_core(pipe=P.V, event_id=4)
            pl.move(half, x_mat, [32 * sub, 0])      # an extract of the Mat tile's rows, on V
            _sync(P.V, P.MTE3)
            pl.store(out, half, [32 * sub, 0])
    return kern


def test_mat_to_vec_runs_on_the_vector_pipe_and_moves_the_matrix():
    x = RNG.standard_normal((64, 64)).astype(np.float16)
    out = np.zeros_like(x)
    rep = _mat_to_vec()(x, out)
    np.testing.assert_array_equal(out, x)
    assert rep.pipe_cycles["V"] > 0 and "MTE1" not in rep.pipe_cycles


def test_mat_to_vec_without_the_wait_races_with_the_load():
    with pytest.raises(pyto.RaceError, match=r"(?s)RAW hazard detected at L1: L1 tile 'x_mat'.*PIPE_MTE2 \(AIC of "
                                             r"block 0\) write.*PIPE_V \(AIV[01] of block 0\) read: .*pl\.move\(half"):
        _mat_to_vec(wait=False)(np.ones((64, 64), np.float16), np.zeros((64, 64), np.float16))


def test_mat_to_vec_needs_the_950s_path():
    with pytest.raises(pyto.UnsupportedError, match=r"chip atlas-a2 has no data path L1->UB"):
        _mat_to_vec(chip="a2")(np.ones((64, 64), np.float16), np.zeros((64, 64), np.float16))


# ---- Vec -> Mat (a plain move: an ND tile of the Mat tile's shape) ---------------------------------------------------
def _vec_to_mat(wait: bool = True):
    """Both AIVs load their half of x and move it into their rows of the Mat tile (a view of it: the same shape as
    the source, so a plain MTE3 move); the cube waits for both (INTRA_BLOCK), then computes x @ w."""
    @pl.jit
    def kern(x: pl.Tensor[[64, 64], pl.DT_FP16], w: pl.Tensor[[64, 64], pl.DT_FP16],
             out: pl.Tensor[[64, 64], pl.DT_FP32]):
        x_mat = pl.make_tile(mat([64, 64]), addr=0x20000)
        with pl.section_vector():
            part = pl.make_tile(vec([32, 64], pl.DT_FP16), addr=0x0)
            r = 32 * pl.get_subblock_idx()
            pl.load(part, x, [r, 0])
            _sync(P.MTE2, P.MTE3)
            pl.move(x_mat[r:r + 32, :], part)
            pl.system.set_cross_core(pipe=P.MTE3, event_id=5)
        with pl.section_cube():
            w_mat = pl.make_tile(mat([64, 64]), addr=0x0)
            a_left = pl.make_tile(left([64, 64]), addr=0x0)
            b_right = pl.make_tile(right([64, 64]), addr=0x0)
            c = pl.make_tile(acc([64, 64]), addr=0x0)
            pl.load(w_mat, w, [0, 0])
            _sync(P.MTE2, P.MTE1)
            pl.move(b_right, w_mat)
            if wait:
                pl.system.wait_cross_core(pipe=P.MTE1, event_id=5)
            pl.move(a_left, x_mat)
            _sync(P.MTE1, P.M)
            pl.matmul(c, a_left, b_right)
            _sync(P.M, P.FIX)
            pl.store(out, c, [0, 0])
    return kern


def test_vec_to_mat_hands_the_aivs_rows_to_the_cube():
    x, w = (RNG.standard_normal((64, 64)).astype(np.float16) for _ in range(2))
    out = np.zeros((64, 64), np.float32)
    _vec_to_mat()(x, w, out)
    assert_close(out, x.astype(np.float64) @ w.astype(np.float64), matmul_bound(x, w, np.float32), "x @ w")


def test_vec_to_mat_without_the_cross_core_wait_races():
    x = np.ones((64, 64), np.float16)
    with pytest.raises(pyto.RaceError, match=r"(?s)RAW hazard detected at L1: L1 tile 'x_mat'.*PIPE_MTE3 \(AIV[01] of "
                                             r"block 0\) write: .*pl\.move\(x_mat\[r:r \+ 32, :\], part\).*PIPE_MTE1 "
                                             r"\(AIC of block 0\) read: .*pl\.move\(a_left, x_mat\)"):
        _vec_to_mat(wait=False)(x, x.copy(), np.zeros((64, 64), np.float32))


@pytest.mark.parametrize("op", ["load", "store"])
def test_gm_moves_of_an_nz_vec_tile_are_not_built(op):
    """An NZ Vec tile is a move target and an insert source: GM <-> NZ UB would move fractal bytes, refused by name."""
    @pl.jit
    def k(x: pl.Tensor[[16, 16], pl.DT_FP16]):
        nz = pl.make_tile(vec([16, 16], pl.DT_FP16, layout=pl.NZ), addr=0)
        with pl.section_vector():
            if op == "load":
                pl.load(nz, x, [0, 0])
            else:
                pl.store(x, nz, [0, 0])
    with pytest.raises(pyto.UnsupportedError, match=rf"pl\.{op} (into|from) the NZ Vec tile .* is not built"):
        k(np.zeros((16, 16), np.float16))
