"""Element access through the other parts' hooks (getval.md, setval.md): `tile[i, j]` reads and `tile[i, j] = v`
writes one element (Tile's subscripts), and a value read by getval is a vector op's scalar operand (the V op waits
for the read, the data pass evaluates it)."""
import numpy as np
import pytest

import pyto
import pyto.language as pl
from pro_kernels import vec

RNG = np.random.default_rng(1920)


@pl.jit
def subscripts(x: pl.Tensor[[16, 64], pl.DT_FP16], out: pl.Tensor[[16, 64], pl.DT_FP16]):
    """getval.md's tile example: tile[0, 0] read, written to [0, 1]; and a view's own [i, j]."""
    g = pl.make_tile_group(type=vec([16, 64], pl.DT_FP16), addrs=0x0, mutex_ids=[0])
    with pl.section_vector():
        t = g.current()
        pl.load(t, x, [0, 0])
        value = t[0, 0]
        t[0, 1] = value
        t[2, 3] = t[8:16, 16:32][1, 2] + value
        pl.store(out, t, [0, 0])


def test_tile_subscripts_read_and_write_one_element():
    x = RNG.standard_normal((16, 64)).astype(np.float16)
    out = np.zeros_like(x)
    subscripts(x, out)
    want = x.copy()
    want[0, 1] = x[0, 0]
    want[2, 3] = x[9, 18] + x[0, 0]                   # one fp16 addition (numpy's: IEEE, one rounding)
    np.testing.assert_array_equal(out, want)


def test_a_tile_subscript_with_slices_is_still_a_view():
    @pl.jit
    def view(x: pl.Tensor[[16, 64], pl.DT_FP32], out: pl.Tensor[[8, 32], pl.DT_FP32]):
        t = pl.make_tile_group(type=vec([16, 64]), addrs=0x0, mutex_ids=[0])
        with pl.section_vector():
            pl.load(t.current(), x, [0, 0])
            pl.store(out, t.current()[8:16, 32:64], [0, 0])
    x = RNG.random((16, 64), np.float32)
    out = np.zeros((8, 32), np.float32)
    view(x, out)
    np.testing.assert_array_equal(out, x[8:, 32:])


@pl.jit
def centred(x: pl.Tensor[[16, 64], pl.DT_FP32], out: pl.Tensor[[16, 64], pl.DT_FP32]):
    """out = x - 2 x[0, 0]: the scalar a pl.Scalar read on S, the subtraction on V."""
    g = pl.make_tile_group(type=vec([16, 64]), addrs=0x0, mutex_ids=[0])
    h = pl.make_tile_group(type=vec([16, 64]), addrs=0x10000, mutex_ids=[1])
    with pl.section_vector():
        t, u = g.current(), h.current()
        pl.load(t, x, [0, 0])
        pl.sub(u, t, t[0, 0] * 2.0)
        pl.store(out, u, [0, 0])


def test_a_value_read_is_a_vector_ops_scalar_and_the_op_waits_for_it():
    x = RNG.random((16, 64), np.float32)
    out = np.zeros_like(x)
    rep = centred(x, out)
    np.testing.assert_array_equal(out, x - x[0, 0] * np.float32(2))
    cores, _, names, _, core_i, _, name_i, _, begin, end, _ = rep.events
    of = {names[n]: (b, e) for n, b, e in zip(name_i, begin, end)}
    assert of["pl.sub"][0] >= of["pl.getval"][1]      # the V op starts once the read completed


def test_in_timing_mode_the_vector_op_is_timed_without_the_value():
    rep = pyto.run(centred, pyto.spec((16, 64), "fp32"), pyto.spec((16, 64), "fp32"), mode="timing")
    full = centred(RNG.random((16, 64), np.float32), np.zeros((16, 64), np.float32))
    assert rep.cycles == full.cycles


def test_a_bool_value_is_not_a_vector_operand():
    @pl.jit
    def bad(x: pl.Tensor[[16, 64], pl.DT_FP32]):
        g = pl.make_tile_group(type=vec([16, 64]), addrs=0x0, mutex_ids=[0])
        with pl.section_vector():
            t = g.current()
            pl.load(t, x, [0, 0])
            pl.add(t, t, t[0, 0] > 0.0)
    with pytest.raises(pyto.KernelError, match=r"a bool scalar as fp32 data"):
        bad(np.zeros((16, 64), np.float32))
