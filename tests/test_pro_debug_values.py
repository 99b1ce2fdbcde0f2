"""Element access on pyto (getval.md, setval.md): pl.getval / pl.setval on Vec tiles and GM tensors, tensor[i, j],
the values they read as data (pl.Scalar: arithmetic, setval, printf, pto_assert), their synchronisation on the
scalar pipe, and the UnsupportedError where the kernel's control flow would depend on them."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pyto
import pyto.language as pl
from pyto.language.debug import Scalar, subscript
from pro_kernels import mat, vec

RNG = np.random.default_rng(1919)
R, C = 16, 64


def _data(dtype, shape=(R, C)):
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return RNG.integers(max(info.min, -1000), min(info.max, 1000), shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def _kernel(body, dtype=pl.DT_FP32):
    """x -> tile (a tile group under auto_mutex) -> body(tile, x, out) -> out, on one AIV."""
    @pl.jit
    def k(x: pl.Tensor[[R, C], dtype], out: pl.Tensor[[R, C], dtype]):
        g = pl.make_tile_group(type=vec([R, C], dtype), addrs=0x0, mutex_ids=[0])
        with pl.section_vector():
            t = g.current()
            pl.load(t, x, [0, 0])
            body(t, x, out)
            pl.store(out, t, [0, 0])
    return k


DTYPES = [(pl.DT_FP32, np.float32), (pl.DT_FP16, np.float16), (pl.DT_BF16, pl.DT_BF16.np), (pl.DT_INT32, np.int32),
          (pl.DT_INT8, np.int8)]


# ---- round trips ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("pl_dt, np_dt", DTYPES, ids=[d[0].name for d in DTYPES])
def test_getval_setval_round_trip_moves_one_element_exactly(pl_dt, np_dt):
    """getval.md's example: tile[0, 0] read, written to [0, 1]; here also a linear offset and [i, j] apart."""
    def body(t, x, out):
        pl.setval(t, 1, pl.getval(t, 0))
        pl.setval(t, 5 * C + 7, pl.getval(t, 3 * C + 2))
    x = _data(np_dt)
    out = np.zeros_like(x)
    _kernel(body, pl_dt)(x, out)
    want = x.copy()
    want[0, 1] = x[0, 0]
    want[5, 7] = x[3, 2]
    np.testing.assert_array_equal(out, want)


def test_values_read_are_data_for_expressions_setval_and_printf():
    """v * 2 + 1 and friends in fp32 are fp32 operations (numpy's fp32, one rounding each); a comparison is a bool."""
    def body(t, x, out):
        a, b = pl.getval(t, 0), pl.getval(t, 1)
        pl.setval(t, 2, a * 2.0 + 1.0)
        pl.setval(t, 3, (a - b) / b)
        pl.setval(t, 4, -abs(a))
        pl.setval(t, 5, 3.0 - a)
        pl.printf("a=%f b=%f a>b=%d\n", a, b, a > b)
    x = _data(np.float32)
    out = np.zeros_like(x)
    rep = _kernel(body)(x, out)
    a, b = x[0, 0], x[0, 1]
    np.testing.assert_array_equal(out[0, 2:6], [a * np.float32(2) + np.float32(1), (a - b) / b, -abs(a),
                                                np.float32(3) - a])
    assert rep.printed[0].endswith(f"a={float(a):f} b={float(b):f} a>b={int(a > b)}")


def test_int32_expressions_wrap_and_divide_as_python_does():
    def body(t, x, out):
        v = pl.getval(t, 0)
        pl.setval(t, 1, v + 1)
        pl.setval(t, 2, v // 7)
        pl.setval(t, 3, v % 7)
        pl.setval(t, 4, (v & 0xFF) ^ 3)
        pl.setval(t, 5, pl.min(v, pl.getval(t, 6)))
        pl.setval(t, 7, pl.max(-5, pl.getval(t, 8)))
    x = _data(np.int32)
    x[0, 0] = np.iinfo(np.int32).max
    out = np.zeros_like(x)
    _kernel(body, pl.DT_INT32)(x, out)
    v = np.int64(x[0, 0])
    assert out[0, 1] == np.iinfo(np.int32).min                       # wraps
    assert list(out[0, 2:5]) == [v // 7, v % 7, (v & 0xFF) ^ 3]
    assert out[0, 5] == min(x[0, 0], x[0, 6]) and out[0, 7] == max(-5, x[0, 8])      # pl.min / pl.max: Scalars


def test_fp16_expressions_round_once_per_operation():
    def body(t, x, out):
        v = pl.getval(t, 0)
        pl.setval(t, 1, v * v + 0.1)
    x = _data(np.float16)
    out = np.zeros_like(x)
    _kernel(body, pl.DT_FP16)(x, out)
    v = x[0, 0]
    assert out[0, 1] == (v * v) + np.float16(0.1)                   # numpy's fp16 ops: IEEE, one rounding each


def test_setval_of_another_type_converts_to_nearest_even():
    @pl.jit
    def widen(x: pl.Tensor[[R, C], pl.DT_FP32], out: pl.Tensor[[R, C], pl.DT_FP16]):
        src = pl.make_tile_group(type=vec([R, C]), addrs=0x0, mutex_ids=[0])
        dst = pl.make_tile_group(type=vec([R, C], pl.DT_FP16), addrs=0x10000, mutex_ids=[1])
        with pl.section_vector():
            s, d = src.current(), dst.current()
            pl.load(s, x, [0, 0])
            for i in pl.range(4):
                pl.setval(d, i, pl.getval(s, i))
            pl.store(out, d[0:1, 0:16], [0, 0])
    x = _data(np.float32)
    x[0, 3] = 1 + 2 ** -11                    # a tie: to even (1.0)
    out = np.zeros((R, C), np.float16)
    widen(x, out)
    np.testing.assert_array_equal(out[0, :4], x[0, :4].astype(np.float16))
    assert out[0, 3] == 1.0


@pytest.mark.parametrize("value, np_dt, pl_dt, want", [
    (0.1, np.float16, pl.DT_FP16, np.float16(0.1)), (-3, np.int8, pl.DT_INT8, -3),
    (1e10, np.float32, pl.DT_FP32, np.float32(1e10)), (2.5, pl.DT_BF16.np, pl.DT_BF16, 2.5)])
def test_setval_of_a_constant_rounds_it_to_the_element_type(value, np_dt, pl_dt, want):
    x = _data(np_dt)
    out = np.zeros_like(x)
    _kernel(lambda t, x, out: pl.setval(t, 9, value), pl_dt)(x, out)
    assert out[0, 9] == want


@pytest.mark.parametrize("value, pl_dt, text", [
    (1.5, pl.DT_INT32, r"the float 1\.5 with a int32 scalar"), (300, pl.DT_INT8, r"300 is outside int8's range"),
    (True, pl.DT_FP32, r"setval of a bool"), ("x", pl.DT_FP32, r"'x' is not a number")])
def test_setval_of_a_constant_that_does_not_fit_names_the_line(value, pl_dt, text):
    np_dt = pl_dt.np
    with pytest.raises(pyto.KernelError, match=text) as ei:
        _kernel(lambda t, x, out: pl.setval(t, 0, value), pl_dt)(_data(np_dt), np.zeros((R, C), np_dt))
    assert "test_pro_debug_values.py:" in str(ei.value)


# ---- GM tensors and subscripts --------------------------------------------------------------------------------
@pl.jit
def gm_elements(x: pl.Tensor[[2, 8, 32], pl.DT_INT32], out: pl.Tensor[[8, 32], pl.DT_INT32]):
    """GM reads and writes of single elements (getval.md's tensor example), linear and subscripted."""
    with pl.section_vector():
        a = x[1, 2, 3]
        b = pl.getval(x, 8 * 32 + 5)           # x[1, 0, 5]
        out[0, 0] = a
        pl.setval(out, 1, b)
        out[7, 31] = a + b


def test_gm_tensor_elements_are_read_and_written_one_at_a_time():
    x = _data(np.int32, (2, 8, 32))
    out = np.full((8, 32), -1, np.int32)
    gm_elements(x, out)
    want = np.full((8, 32), -1, np.int32)
    want[0, 0], want[0, 1], want[7, 31] = x[1, 2, 3], x[1, 0, 5], x[1, 2, 3] + x[1, 0, 5]
    np.testing.assert_array_equal(out, want)


def test_element_access_through_a_gm_view_is_not_built():
    @pl.jit
    def through_view(x: pl.Tensor[[R, C], pl.DT_FP32], out: pl.Tensor[[R, C], pl.DT_FP32]):
        with pl.section_vector():
            half = pl.make_tensor(pl.make_ptr(x), [R // 2, C])
            out[0, 0] = half[0, 1]
    with pytest.raises(pyto.UnsupportedError, match=r"pl\.getval of the GM view GM tensor 'half' .* is not built"):
        through_view(_data(np.float32), np.zeros((R, C), np.float32))


def test_a_tile_subscript_reads_the_element_of_its_own_terms():
    """subscript (what Tile's [i, j] hands integer subscripts to) on a view and on a DN view of an ND store."""
    @pl.jit
    def views(x: pl.Tensor[[1, 64], pl.DT_FP32], out: pl.Tensor[[1, 64], pl.DT_FP32]):
        row = pl.make_tile(vec([1, 64]), addr=0x0)
        col = pl.make_tile(vec([64, 1], layout=pl.DN), addr=0x0)       # the same bytes, transposed
        with pl.section_vector():
            pl.load(row, x, [0, 0])
            pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.S, event_id=0)
            pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.S, event_id=0)
            pl.setval(row, 0, subscript(col, (5, 0)))
            pl.setval(row, 1, subscript(row[0:1, 32:64], (0, 3)))
            pl.setval(row, 2, pl.getval(col, 9))
            pl.system.sync_src(set_pipe=pl.PipeType.S, wait_pipe=pl.PipeType.MTE3, event_id=0)
            pl.system.sync_dst(set_pipe=pl.PipeType.S, wait_pipe=pl.PipeType.MTE3, event_id=0)
            pl.store(out, row, [0, 0])
    x = _data(np.float32, (1, 64))
    out = np.zeros_like(x)
    views(x, out)
    np.testing.assert_array_equal(out[0, :3], [x[0, 5], x[0, 35], x[0, 9]])
    np.testing.assert_array_equal(out[0, 3:], x[0, 3:])


@pytest.mark.parametrize("call, err, text", [
    (lambda t, x: pl.getval(t, R * C), pyto.OutOfBoundsError, r"offset 1024 is outside UB tile 'g' of 16 x 64"),
    (lambda t, x: pl.getval(t, -1), pyto.OutOfBoundsError, r"offset -1 is outside"),
    (lambda t, x: subscript(t, (0, C)), pyto.OutOfBoundsError, r"index \[0, 64\] is outside"),
    (lambda t, x: subscript(t, (1,)), pyto.KernelError, r"is 2-D: index it as \[i, j\]"),
    (lambda t, x: x[0], pyto.KernelError, r"has 2 dimensions: index one element with 2 indices"),
    (lambda t, x: x[0, C], pyto.OutOfBoundsError, r"index \[0, 64\] is outside GM tensor 'x'"),
    (lambda t, x: pl.getval(t, 1.0), pyto.KernelError, r"offset must be an integer"),
    (lambda t, x: pl.getval(3, 0), pyto.ShapeError, r"takes a Vec tile or a GM tensor"),
])
def test_element_access_misuse_names_the_line(call, err, text):
    with pytest.raises(err, match=text) as ei:
        _kernel(lambda t, x, out: call(t, x))(_data(np.float32), np.zeros((R, C), np.float32))
    assert "test_pro_debug_values.py:" in str(ei.value)


def test_getval_reads_vec_tiles_only():
    @pl.jit
    def cube_tile(x: pl.Tensor[[32, 32], pl.DT_FP16]):
        t = pl.make_tile(mat([32, 32]), addr=0)
        with pl.section_cube():
            pl.getval(t, 0)
    with pytest.raises(pyto.ShapeError, match=r"reads and writes Vec tiles and GM tensors .* not L1 tile"):
        cube_tile(np.zeros((32, 32), np.float16))


def test_getval_of_a_tile_group_asks_for_a_slot():
    @pl.jit
    def group(x: pl.Tensor[[R, C], pl.DT_FP32]):
        g = pl.make_tile_group(type=vec([R, C]), addrs=0x0, mutex_ids=[0, 1])
        with pl.section_vector():
            pl.getval(g, 0)
    with pytest.raises(pyto.ShapeError, match=r"takes a tile, got the tile group 'g'"):
        group(np.zeros((R, C), np.float32))


# ---- synchronisation: the scalar pipe ----------------------------------------------------------------------------
def _make_tile_read(sync: bool):
    @pl.jit
    def read(x: pl.Tensor[[R, C], pl.DT_FP32], out: pl.Tensor[[R, C], pl.DT_FP32]):
        t = pl.make_tile(vec([R, C]), addr=0x0)
        with pl.section_vector():
            pl.load(t, x, [0, 0])
            if sync:
                pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.S, event_id=0)
                pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.S, event_id=0)
            pl.setval(t, 0, pl.getval(t, 1) + 1.0)
            if sync:
                pl.system.sync_src(set_pipe=pl.PipeType.S, wait_pipe=pl.PipeType.MTE3, event_id=0)
                pl.system.sync_dst(set_pipe=pl.PipeType.S, wait_pipe=pl.PipeType.MTE3, event_id=0)
            pl.store(out, t, [0, 0])
    return read


def test_with_make_tile_the_kernel_orders_the_scalar_pipe_itself():
    """getval.md: 'with make_tile, synchronise explicitly' (MTE2 -> S before the read, S -> MTE3 before the store)."""
    x = _data(np.float32)
    with pytest.raises(pyto.RaceError, match=r"RAW hazard .*\n  PIPE_MTE2 .* pl\.load.*\n  PIPE_S .* pl\.getval"):
        _make_tile_read(False)(x, np.zeros_like(x))
    out = np.zeros_like(x)
    _make_tile_read(True)(x, out)
    assert out[0, 0] == x[0, 1] + np.float32(1) and (out[:, 1:] == x[:, 1:]).all() and (out[1:] == x[1:]).all()


@pl.kernel
def alloc_after_vector(x, out):
    """pyto's auto-sync orders a pl.alloc tile's V -> S -> MTE3 for getval / setval."""
    t = pl.alloc(pl.UB, [R, C], pl.DT_FP32)
    u = pl.alloc(pl.UB, [R, C], pl.DT_FP32)
    with pl.section_vector():
        pl.load(t, x)
        pl.mul(u, t, 3.0)
        pl.setval(u, 0, pl.getval(u, 1) - pl.getval(t, 1))
        pl.store(out, u, [0, 0])


def test_auto_sync_orders_scalar_reads_and_writes_of_alloc_tiles():
    x = _data(np.float32)
    out = np.zeros_like(x)
    pyto.run(alloc_after_vector, x, out)
    want = x * np.float32(3)
    want[0, 0] = want[0, 1] - x[0, 1]
    np.testing.assert_array_equal(out, want)


def test_a_value_read_on_one_core_is_not_used_on_another():
    @pl.jit
    def cross(x: pl.Tensor[[R, C], pl.DT_FP32], c: pl.Tensor[[R, C], pl.DT_FP32]):
        g = pl.make_tile_group(type=vec([R, C]), addrs=0x0, mutex_ids=[0])
        with pl.section_vector():
            pl.load(g.current(), x, [0, 0])
            v = pl.getval(g.current(), 0)
        with pl.section_cube():
            pl.printf("%f", v)
    with pytest.raises(pyto.KernelError, match=r"g\[0, 0\] was read by pl.getval on another core .* cores share no "
                                               r"scalar registers"):
        cross(_data(np.float32), np.zeros((R, C), np.float32))


# ---- control flow on a value read: refused -------------------------------------------------------------------------
def _if(v):
    if v > 0:
        pass


def _while(v):
    while v:
        break


def _and(v):
    return v > 0 and v < 1


def _range(v):
    for _ in pl.range(v):
        pass


@pytest.mark.parametrize("use, what", [
    (_if, "as a condition"), (_while, "as a condition"), (_and, "as a condition"), (bool, "as a condition"),
    (lambda v: min(v, 3.0), "as a condition"), (_range, "as a trace-time integer"), (int, "as a Python int"),
    (float, "as a Python float"), (lambda v: range(v), "as a trace-time integer"),
    (lambda v: [0, 1][v], "as a trace-time integer")])
def test_control_flow_on_a_value_read_is_an_unsupported_error_naming_the_line(use, what):
    with pytest.raises(pyto.UnsupportedError) as ei:
        _kernel(lambda t, x, out: use(pl.getval(t, 0)))(_data(np.float32), np.zeros((R, C), np.float32))
    msg = str(ei.value)
    assert "test_pro_debug_values.py:" in msg and f"is used {what}" in msg
    assert "known only in full mode's data pass" in msg and "traces the kernel's Python once" in msg


def test_an_offset_from_a_value_read_is_refused_where_it_is_used():
    @pl.jit
    def gather_row(x: pl.Tensor[[R, C], pl.DT_INT32], out: pl.Tensor[[R, C], pl.DT_INT32]):
        g = pl.make_tile_group(type=vec([1, C], pl.DT_INT32), addrs=0x0, mutex_ids=[0])
        with pl.section_vector():
            t = g.current()
            pl.load(t, x, [0, 0])
            row = pl.getval(t, 0)
            pl.load(t, x, [row, 0])                                               # OFFSET_LINE
    with pytest.raises(pyto.UnsupportedError, match=r"test_pro_debug_values\.py:\d+ pl\.load\(t, x, \[row, 0\]\)"):
        gather_row(np.zeros((R, C), np.int32), np.zeros((R, C), np.int32))


@pytest.mark.parametrize("expr, text", [
    (lambda a, b: a + pl.getval(b, 0), r"a fp32 and a int32 scalar: no implicit promotion"),
    (lambda a, b: pl.getval(b, 0) + 0.5, r"the float 0\.5 with a int32 scalar"),
    (lambda a, b: a // 2.0, r"// takes integers, got a fp32 scalar"),
    (lambda a, b: pl.getval(b, 0) / 2, r"/ takes floats"),
    (lambda a, b: (a > 0) + 1, r"1 with a bool scalar"),
    (lambda a, b: a & a, r"& takes integers and bools"),
])
def test_scalar_expressions_follow_pyptos_no_promotion_rule(expr, text):
    @pl.jit
    def mixed(x: pl.Tensor[[R, C], pl.DT_FP32], y: pl.Tensor[[R, C], pl.DT_INT32]):
        f = pl.make_tile_group(type=vec([R, C]), addrs=0x0, mutex_ids=[0])
        i = pl.make_tile_group(type=vec([R, C], pl.DT_INT32), addrs=0x10000, mutex_ids=[1])
        with pl.section_vector():
            pl.load(f.current(), x, [0, 0])
            pl.load(i.current(), y, [0, 0])
            expr(pl.getval(f.current(), 0), i.current())
    with pytest.raises(pyto.KernelError, match=text):
        mixed(np.zeros((R, C), np.float32), np.zeros((R, C), np.int32))


def test_a_scalar_says_what_it_is():
    seen = []
    _kernel(lambda t, x, out: seen.append(pl.getval(t, C + 2) * 2.0 > 1.0))(_data(np.float32),
                                                                             np.zeros((R, C), np.float32))
    assert isinstance(seen[-1], Scalar) and seen[-1].dtype == "bool"
    assert repr(seen[-1]) == "<pl.Scalar (g[1, 2] * 2.0) > 1.0: bool>"


def test_timing_mode_reads_no_data():
    def body(t, x, out):
        v = pl.getval(t, 0)
        pl.setval(t, 1, v)
        pl.printf("v=%f\n", v)
        pl.pto_assert(v > 1e30)                          # would fail on any of these data: not checked in timing
    rep = pyto.run(_kernel(body), pyto.spec((R, C), "fp32"), pyto.spec((R, C), "fp32"), mode="timing")
    assert rep.printed[0].endswith("] v=?")


# ---- property: a random sequence of element moves ------------------------------------------------------------------
@settings(derandomize=True, deadline=None, max_examples=15)
@given(st.sampled_from(DTYPES), st.lists(st.tuples(st.integers(0, R * C - 1), st.integers(0, R * C - 1)),
                                          min_size=1, max_size=6))
def test_a_random_sequence_of_element_copies_matches_numpy(dt, moves):
    """setval(dst, getval(src)) in program order, against the same copies on a numpy array (exact)."""
    pl_dt, np_dt = dt

    def body(t, x, out):
        for src, dst in moves:
            pl.setval(t, dst, pl.getval(t, src))
    x = _data(np_dt)
    out = np.zeros_like(x)
    _kernel(body, pl_dt)(x, out)
    want = x.copy().reshape(-1)
    for src, dst in moves:
        want[dst] = want[src]
    np.testing.assert_array_equal(out.reshape(-1), want)
