"""GM views in PyPTO-Pro's spelling (Ptr.md, addptr.md, make_ptr.md, make_tensor.md, set_stride.md): a workspace
pointer cut with addptr and viewed with strides, a tensor re-viewed (transposed, axes merged), set_stride's row
gather, their bounds, and races and ordering followed onto the memory under the views."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pyto
import pyto.language as pl
from pyto.emulator.data.gmviews import footprint
from pyto.ir import Access, GMTensor, GMView
from pro_kernels import vec

RNG = np.random.default_rng(23)
P = pl.PipeType


def _workspace_kernel(row_stride: int = 256, at: int = 64 * 128):
    """make_tensor.md's example: out = 2a through a [64, 128] view with row stride `row_stride` of a workspace
    pointer moved on by `at` elements, in two halves at offsets [0, 0] and [32, 0]."""
    @pl.jit(auto_mutex=True)
    def workspace_kernel(a: pl.Tensor[[64, 128], pl.DT_FP16], workspace: pl.Ptr[pl.DT_FP16],
                         out: pl.Tensor[[64, 128], pl.DT_FP16]):
        ws_buf = pl.make_tensor(pl.addptr(workspace, at), [64, 128], [row_stride, 1])
        tile = pl.make_tile_group(type=vec([32, 128], pl.DT_FP16), addrs=0x0000, mutex_ids=[0])
        with pl.section_vector():
            t = tile.current()
            for r in pl.range(0, 64, 32):
                pl.load(t, a, [r, 0])
                pl.add(t, t, t)
                pl.store(ws_buf, t, [r, 0])
                pl.load(t, ws_buf, [r, 0])
                pl.store(out, t, [r, 0])
    return workspace_kernel


def test_a_workspace_pointer_viewed_with_a_row_stride():
    a = RNG.standard_normal((64, 128)).astype(np.float16)
    ws = np.full(64 * 128 + 64 * 256, 7, np.float16)
    out = np.zeros_like(a)
    _workspace_kernel()(a, ws, out)
    np.testing.assert_array_equal(out, a + a)                  # fp16 doubling is exact
    rows = ws[64 * 128:].reshape(64, 256)
    np.testing.assert_array_equal(rows[:, :128], a + a)        # the view's rows, 256 elements apart
    assert (rows[:, 128:] == 7).all() and (ws[:64 * 128] == 7).all()     # nothing else written


def test_a_view_past_the_workspace_is_out_of_bounds():
    a = np.zeros((64, 128), np.float16)
    with pytest.raises(pyto.OutOfBoundsError, match=r"pl\.store writes view 'ws_buf' \[64, 128\] \(strides \[256, 1\], "
                                                    r"from element 8192 of GM tensor 'workspace' \[1, 16384\] fp16\) at "
                                                    r"offsets \[32, 0\] \(32 x 128\): it reaches element 24447 of "
                                                    r"'workspace', which has 16384") as ei:
        _workspace_kernel()(a, np.zeros(2 * 64 * 128, np.float16), a.copy())
    assert "test_pro_cv_gm.py:" in str(ei.value)


def test_addptr_past_the_end_is_out_of_bounds():
    with pytest.raises(pyto.OutOfBoundsError, match=r"pl\.addptr\(pl\.Ptr\[fp16\] to element 0 of GM tensor "
                                                    r"'workspace' \[1, 8192\] fp16, 8193\) points at element 8193, "
                                                    r"outside the 8192 elements"):
        _workspace_kernel(128, 8193)(np.zeros((64, 128), np.float16), np.zeros(8192, np.float16),
                                     np.zeros((64, 128), np.float16))


def test_a_tensor_viewed_transposed_through_its_strides():
    """make_tensor.md: the same memory as [16, 8] with strides [1, 16] is the transpose of the [8, 16] tensor."""
    @pl.jit
    def kern(x: pl.Tensor[[8, 16], pl.DT_FP32], out: pl.Tensor[[16, 8], pl.DT_FP32]):
        xt = pl.make_tensor(x, [16, 8], [1, 16])
        t = pl.make_tile(vec([16, 8]), addr=0x0)
        with pl.section_vector():
            pl.load(t, xt, [0, 0])
            _mte2_to_mte3()
            pl.store(out, t, [0, 0])
    x = RNG.standard_normal((8, 16)).astype(np.float32)
    out = np.zeros((16, 8), np.float32)
    kern(x, out)
    np.testing.assert_array_equal(out, x.T)


def _mte2_to_mte3():
    pl.system.sync_src(set_pipe=P.MTE2, wait_pipe=P.MTE3, event_id=0)
    pl.system.sync_dst(set_pipe=P.MTE2, wait_pipe=P.MTE3, event_id=0)


def test_a_batched_tensor_viewed_as_one_matrix():
    """make_tensor.md's axis merge: [4, 16, 32] as [64, 32], loaded whole and stored back into a [4, 16, 32]
    tensor viewed the same way."""
    @pl.jit
    def kern(x: pl.Tensor[[4, 16, 32], pl.DT_FP16], out: pl.Tensor[[4, 16, 32], pl.DT_FP16]):
        flat_x = pl.make_tensor(x, [64, 32])
        flat_out = pl.make_tensor(out, [64, 32])
        t = pl.make_tile(vec([32, 32], pl.DT_FP16), addr=0x0)
        with pl.section_vector():
            r = 32 * pl.get_block_idx()          # an AIV-only kernel: each AIV is a block
            pl.load(t, flat_x, [r, 0])
            _mte2_to_mte3()
            pl.store(flat_out, t, [r, 0])
    x = RNG.standard_normal((4, 16, 32)).astype(np.float16)
    out = np.zeros_like(x)
    kern[2](x, out)
    np.testing.assert_array_equal(out, x)


N_LINES, LINE, PAIRS = 512, 128, 6


@pl.jit(auto_mutex=True)
def gather(x: pl.Tensor[[N_LINES, LINE], pl.DT_FP16], out: pl.Tensor[[2 * PAIRS, LINE], pl.DT_FP16],
           first: pl.DT_INT32, step: pl.DT_INT32):
    """set_stride.md's gather: pair i is lines i and i + (first + step * i), one [2, LINE] load each."""
    ub = pl.make_tile_group(type=vec([2, LINE], pl.DT_FP16), addrs=0x0000, mutex_ids=[0, 1])
    with pl.section_vector():
        for i in pl.range(0, PAIRS, 1):
            tile = ub.next()
            pl.set_stride(x, [(first + step * i) * LINE, 1])
            pl.load(tile, x, [i, 0])
            pl.store(out, tile, [2 * i, 0])


def test_set_stride_gathers_rows_a_stride_apart():
    """The load starts where [i, 0] is in x's own layout and steps a row by the new stride (ST datacopy/
    test_set_stride.py: lines i and i + stride / LINE); exact."""
    x = RNG.standard_normal((N_LINES, LINE)).astype(np.float16)
    out = np.zeros((2 * PAIRS, LINE), np.float16)
    gather(x, out, 137, 41)
    want = np.stack([x[j] for i in range(PAIRS) for j in (i, i + 137 + 41 * i)])
    np.testing.assert_array_equal(out, want)


def test_set_stride_past_the_tensor_is_out_of_bounds():
    x = np.zeros((N_LINES, LINE), np.float16)
    with pytest.raises(pyto.OutOfBoundsError, match=r"pl\.load reads GM tensor 'x' \[512, 128\] fp16 with strides "
                                                    r"\[66304, 1\] \(pl\.set_stride\) at offsets \[2, 0\] \(2 x 128\): "
                                                    r"it reaches element 66687 of 'x', which has 65536"):
        gather(x, np.zeros((2 * PAIRS, LINE), np.float16), 500, 9)


@pl.jit
def broadcast_store(x: pl.Tensor[[1, 64], pl.DT_FP32], out: pl.Tensor[[4, 64], pl.DT_FP32]):
    rows = pl.make_tensor(out, [4, 64], [0, 1])      # every row the same memory
    t = pl.make_tile(vec([4, 64]), addr=0x0)
    with pl.section_vector():
        pl.store(rows, t, [0, 0])


def test_a_store_through_a_view_whose_elements_repeat_is_refused():
    with pytest.raises(pyto.UnsupportedError, match=r"pl\.store writes view 'rows' .* whose elements repeat"):
        broadcast_store(np.zeros((1, 64), np.float32), np.zeros((4, 64), np.float32))


def test_a_view_of_another_dtype_is_not_built():
    @pl.jit
    def kern(x: pl.Tensor[[8, 16], pl.DT_FP32]):
        pl.make_tensor(pl.make_ptr(x), [8, 32], dtype=pl.DT_FP16)
    with pytest.raises(pyto.UnsupportedError, match=r"reinterprets the fp32 elements of GM tensor 'x' .* as fp16"):
        kern(np.zeros((8, 16), np.float32))


def test_a_ptr_argument_is_checked_against_its_annotation():
    kern = _workspace_kernel()
    a = np.zeros((64, 128), np.float16)
    with pytest.raises(pyto.ShapeError, match=r"parameter 'workspace' is annotated pl\.Ptr\[pl\.DT_FP16\] but got a fp32"):
        kern(a, np.zeros(3 * 8192, np.float32), a.copy())
    with pytest.raises(pyto.ShapeError, match=r"parameter 'workspace' .* pass a C-contiguous array"):
        kern(a, np.zeros((3 * 8192, 2), np.float16)[:, 0], a.copy())


def test_views_run_in_timing_mode():
    rep = _workspace_kernel()(pyto.spec((64, 128), "fp16"), pyto.spec((3 * 8192,), "fp16"),
                              pyto.spec((64, 128), "fp16"))
    assert rep.mode == "timing" and rep.pipe_cycles["MTE3"] > 0


# ---- races and order across views of one buffer ---------------------------------------------------------------------
def _two_views(sync: bool):
    """Two AIVs (an AIV-only kernel, two blocks) write overlapping views of one workspace: rows 0:16 of a view at
    element 0 and of a view 64 elements on overlap in 16 x 64 elements. With a sync_all between the first AIV's
    write and the second's, the second's values win there."""
    @pl.jit
    def two_views(a: pl.Tensor[[32, 128], pl.DT_FP32], ws: pl.Ptr[pl.DT_FP32]):
        v0 = pl.make_tensor(ws, [16, 128])
        v1 = pl.make_tensor(pl.addptr(ws, 64), [16, 128])
        t = pl.make_tile(vec([16, 128]), addr=0x0)
        with pl.section_vector():
            i = pl.get_block_idx()
            pl.load(t, a, [16 * i, 0])
            _mte2_to_mte3()
            if i == 0:
                pl.store(v0, t, [0, 0])
            if sync:
                pl.system.sync_all(core_type=pl.SyncCoreType.AIV_ONLY)
            if i == 1:
                pl.store(v1, t, [0, 0])
    return two_views


def test_two_views_of_one_workspace_race_where_their_elements_meet():
    a = RNG.standard_normal((32, 128)).astype(np.float32)
    with pytest.raises(pyto.RaceError, match=r"(?s)WAW hazard detected at GM: GM tensor 'ws' \[1, 2112\] fp32 "
                                             r"\[0:1, 64:2048\] \(through view 'v[01]' .*PIPE_MTE3 \(AIV [01]\) write: "
                                             r".*pl\.store\(v[01], t.*PIPE_MTE3 \(AIV [01]\) write"):
        _two_views(sync=False)[2](a, np.zeros(16 * 128 + 64, np.float32))


def test_two_views_ordered_by_sync_all_write_in_that_order():
    a = RNG.standard_normal((32, 128)).astype(np.float32)
    ws = np.zeros(16 * 128 + 64, np.float32)
    _two_views(sync=True)[2](a, ws)
    want = np.zeros_like(ws)
    want[:16 * 128] = a[:16].reshape(-1)
    want[64:64 + 16 * 128] = a[16:].reshape(-1)
    np.testing.assert_array_equal(ws, want)


def test_a_view_and_its_tensor_race_across_cores():
    """The cube stores into out; an AIV stores into a view of out's first rows: the same elements, no order."""
    @pl.jit
    def kern(x: pl.Tensor[[16, 16], pl.DT_FP32], out: pl.Tensor[[16, 16], pl.DT_FP32]):
        head = pl.make_tensor(out, [8, 16])
        t = pl.make_tile(vec([8, 16]), addr=0x0)
        c = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc), addr=0x0)
        with pl.section_cube():
            pl.store(out, c, [0, 0])
        with pl.section_vector():
            if pl.get_subblock_idx() == 0:
                pl.load(t, x, [0, 0])
                _mte2_to_mte3()
                pl.store(head, t, [0, 0])
    with pytest.raises(pyto.RaceError, match=r"(?s)hazard detected at GM: GM tensor 'out' \[16, 16\] fp32 \[0:8, "
                                             r"0:16\] \(through view 'head'"):
        kern(np.zeros((16, 16), np.float32), np.zeros((16, 16), np.float32))


def test_a_read_through_a_view_of_a_workspace_before_any_write_is_uninitialised():
    @pl.jit
    def kern(out: pl.Tensor[[16, 32], pl.DT_FP32]):
        ws = pl.workspace([64, 32], pl.DT_FP32)
        upper = pl.make_tensor(ws, [16, 32])
        t = pl.make_tile(vec([16, 32]), addr=0x0)
        with pl.section_vector():
            pl.load(t, upper, [0, 0])
            _mte2_to_mte3()
            pl.store(out, t, [0, 0])
    with pytest.raises(pyto.UninitializedReadError, match=r"pl\.load .* reads GM tensor 'ws' \[64, 32\] fp32\[0:16, "
                                                          r"0:32\] \(through view 'upper'\[0:16, 0:32\]\) but part of it "
                                                          r"was never written"):
        kern(np.zeros((16, 32), np.float32))


@settings(derandomize=True, deadline=None, max_examples=150)
@given(st.data())
def test_a_views_footprint_is_exactly_the_elements_it_touches(data):
    """gmviews.footprint against the set of flat elements, over random roots, offsets, strides and blocks: the
    rectangles cover every touched element once and nothing else."""
    batch, rows, cols = (data.draw(st.integers(1, n)) for n in (3, 12, 20))
    root = GMTensor("root", (batch, rows, cols) if batch > 1 else (rows, cols), pl.DT_FP16, uid=0)
    size = batch * rows * cols
    nr, nc = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 8))
    sr, sc = data.draw(st.integers(0, 40)), data.draw(st.integers(0, 3))
    r0, c0 = data.draw(st.integers(0, 3)), data.draw(st.integers(0, 3))
    reach = (r0 + nr - 1) * sr + (c0 + nc - 1) * sc
    if reach >= size:
        return
    offset = data.draw(st.integers(0, size - 1 - reach))
    view = GMTensor("v", (r0 + nr, c0 + nc), pl.DT_FP16, uid=1, view=GMView(root, offset, (sr, sc)))
    want = {offset + (r0 + i) * sr + (c0 + j) * sc for i in range(nr) for j in range(nc)}
    got = []
    for acc in footprint(Access(view, (r0, r0 + nr, c0, c0 + nc), 0)):
        a0, a1, b0, b1 = acc.rect
        got += [(acc.batch * rows + r) * cols + c for r in range(a0, a1) for c in range(b0, b1)]
    assert sorted(got) == sorted(want)
