"""Tests of pyto.tiling: every docs/tile_shapes.md §6 tile-shape rule accepted once and rejected once, the chip
dependence of the capacity rules, the dtype=None deferral, a hypothesis property and the CLI."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

import pyto
from pyto.cli import main
from pyto.dtypes import DType
from pyto.errors import TilingError
from pyto.tiling import (CubeTileShapes, ceil_align, cube_tile_shapes, get_cube_tile_shapes,
                         reset_cube_tile_shapes, set_cube_tile_shapes)

SQ = [128, 128]


@pytest.fixture(autouse=True)
def _clean_default():
    reset_cube_tile_shapes()
    yield
    reset_cube_tile_shapes()


def rejects(rule: str, *numbers, m=SQ, k=SQ, n=SQ, split_k=False, **kw) -> TilingError:
    """Assert set_cube_tile_shapes raises TilingError(rule) whose message has the rule and the numbers."""
    with pytest.raises(TilingError) as ei:
        set_cube_tile_shapes(m, k, n, split_k, **kw)
    e = ei.value
    assert e.rule == rule, str(e)
    msg = str(e)
    assert rule in msg
    for x in numbers:
        assert str(x) in msg, (x, msg)
    return e


def accepts(m=SQ, k=SQ, n=SQ, split_k=False, **kw) -> CubeTileShapes:
    ts = set_cube_tile_shapes(m, k, n, split_k, **kw)
    assert get_cube_tile_shapes() is ts
    return ts


# ---- the seed's example and the default --------------------------------------------------------
def test_seed_example_and_default():
    ts = set_cube_tile_shapes([128, 128], [128, 128], [128, 128], True)
    assert (ts.mL0, ts.mL1, ts.kL0, ts.kL1, ts.nL0, ts.nL1, ts.enable_split_k) == (128,) * 6 + (True,)
    assert ts.m == ts.k == ts.n == (128, 128)
    assert get_cube_tile_shapes() is ts
    assert pyto.set_cube_tile_shapes is set_cube_tile_shapes and pyto.get_cube_tile_shapes() is ts
    with pytest.raises(dataclasses_frozen_error()):
        ts.mL0 = 64  # type: ignore[misc]


def dataclasses_frozen_error():
    import dataclasses
    return dataclasses.FrozenInstanceError


def test_failed_set_keeps_previous_default_and_reset():
    ok = accepts(dtype="fp16")
    rejects("l0_le_l1_m", m=[256, 128])
    assert get_cube_tile_shapes() is ok
    reset_cube_tile_shapes()
    assert get_cube_tile_shapes() is None


def test_context_manager_restores():
    outer = accepts()
    with cube_tile_shapes([64, 128], SQ, SQ, dtype="bf16") as ts:
        assert get_cube_tile_shapes() is ts and ts.mL0 == 64
    assert get_cube_tile_shapes() is outer


def test_ceil_align():
    assert ceil_align(1, 16) == 16 and ceil_align(16, 16) == 16 and ceil_align(17, 32) == 32


# ---- shape / positive / options ------------------------------------------------------------------
@pytest.mark.parametrize("bad", [[128], [128, 128, 128], 128, "ab", [128.0, 128], [True, 128], None,
                                 [128, "128"], {"a": 1}])
def test_shape_rejected(bad):
    with pytest.raises(TilingError) as ei:
        set_cube_tile_shapes(bad, SQ, SQ)
    assert ei.value.rule == "shape"
    assert "m" in str(ei.value)


def test_shape_accepts_tuples_and_numpy_ints():
    ts = accepts(m=(np.int64(64), np.int32(128)), k=np.array([128, 128]), n=(128, 128), dtype="fp16")
    assert ts.mL0 == 64 and type(ts.mL0) is int


@pytest.mark.parametrize("m", [[0, 128], [-16, 128], [16, 0], [16, -32]])
def test_positive_rejected(m):
    e = rejects("positive", m=m)
    assert str(min(m)) in str(e)


def test_positive_accepted():
    accepts(m=[1, 1], k=[16, 16], n=[16, 16], dtype="fp16")


@pytest.mark.parametrize("kw", [dict(a_format="XX"), dict(out_format="DN"), dict(ndim=1), dict(ndim=2.0), dict(ndim=7),
                                dict(bias="yes"), dict(out_dtype="float64"), dict(chip=3)])
def test_option_rejected(kw):
    with pytest.raises(TilingError) as ei:
        set_cube_tile_shapes(SQ, SQ, SQ, **kw)
    assert ei.value.rule == "option"


@pytest.mark.parametrize("d", ["int32", "float64", "nope"])
def test_dtype_rejected(d):
    with pytest.raises(TilingError) as ei:
        set_cube_tile_shapes(SQ, SQ, SQ, dtype=d)
    assert ei.value.rule == "dtype"


@pytest.mark.parametrize("d", ["fp16", "bf16", "fp32", "int8", DType.bf16, "float16"])
def test_dtype_accepted(d):
    accepts(dtype=d)


# ---- 0 < L0 <= L1, L1 % L0 == 0 -----------------------------------------------------------------
@pytest.mark.parametrize("ax", "mkn")
def test_l0_le_l1(ax):
    kw = {ax: [64, 128]}
    accepts(dtype="fp16", **kw)
    rejects(f"l0_le_l1_{ax}", 256, 128, **{ax: [256, 128]})


@pytest.mark.parametrize("ax", "mkn")
def test_divisible(ax):
    accepts(**{ax: [32, 96]}, dtype="fp16")
    rejects(f"divisible_{ax}", 128, 96, 32, **{ax: [96, 128]})  # 128 % 96 = 32


# ---- alignment -----------------------------------------------------------------------------------
@pytest.mark.parametrize("ax", "kn")
def test_align_fp16_32_bytes(ax):
    accepts(**{ax: [16, 48]}, dtype="fp16")
    e = rejects(f"align_{ax}", f"{ax}L0=8", 16, 32, **{ax: [8, 16]}, dtype="fp16")   # 8 * 2B = 16 B
    assert "32-byte" in str(e)


@pytest.mark.parametrize("ax", "kn")
def test_align_int8_32_elements(ax):
    # 16 int8 = 16 B. (An L1 misaligned with an aligned L0 cannot happen: L1 is a multiple of L0.)
    rejects(f"align_{ax}", f"{ax}L0=16", **{ax: [16, 32]}, dtype="int8")
    accepts(**{ax: [32, 96]}, dtype="int8")


@pytest.mark.parametrize("ax", "kn")
def test_align_fp32_16_elements(ax):
    # 8 fp32 = 32 B would satisfy 32-byte alignment, but fp32 inputs need 16 elements (docs/tile_shapes.md §6.1)
    accepts(**{ax: [16, 32]}, dtype="fp32")
    e = rejects(f"align_{ax}", f"{ax}L0=8", "16 elements", **{ax: [8, 16]}, dtype="fp32")
    assert "fp32" in str(e)


def test_align_m_transposed():
    accepts(m=[16, 32], dtype="fp16", transpose_a=True)
    accepts(m=[8, 16], dtype="fp16", transpose_a=False)            # not transposed: no rule on mL0
    rejects("align_m_transposed", "mL0=8", 16, 32, m=[8, 16], dtype="fp16", transpose_a=True)
    rejects("align_m_transposed", "mL0=16", m=[16, 32], dtype="int8", k=[32, 32], n=[32, 32],
            transpose_a=True)
    accepts(m=[8, 16], dtype="fp32", transpose_a=True)             # literal 32 B = 8 fp32 elements


def test_nz_outer():
    accepts(m=[16, 32], dtype="fp16", a_format="NZ")
    e = rejects("nz_outer", "mL0=8", "16", m=[8, 16], dtype="fp16", a_format="NZ")     # A (M, K): outer M
    assert "A (M, K)" in str(e)
    rejects("nz_outer", "nL0=8", m=[16, 16], n=[8, 16], b_format="NZ", transpose_b=True)  # B (N, K): outer N
    # dtype-independent: checked at set time even with dtype=None
    rejects("nz_outer", "mL0=8", m=[8, 16], a_format="NZ")
    # ND A has no outer-axis rule
    accepts(m=[8, 16], dtype="fp16", a_format="ND")


def test_nz_inner():
    # A transposed (K, M) in NZ: inner axis M must be 32 B
    accepts(m=[16, 32], dtype="fp16", a_format="NZ", transpose_a=True)
    e = rejects("nz_inner", "mL0=8", 16, 32, m=[8, 16], dtype="fp16", a_format="NZ", transpose_a=True)
    assert "A (K, M)" in str(e)
    rejects("nz_inner", "mL0=16", m=[16, 32], k=[32, 32], n=[32, 32], dtype="int8", a_format="NZ",
            transpose_a=True)
    accepts(m=[32, 64], k=[32, 32], n=[32, 32], dtype="int8", a_format="NZ", transpose_a=True)


def test_nz_out_inner():
    # fp16 in, int8 out (quantised fixpipe): N inner axis 32 B in int8 = 32 elements
    accepts(n=[32, 64], dtype="fp16", out_format="NZ", out_dtype="int8", scale=True)
    rejects("nz_out_inner", "nL0=16", 16, 32, n=[16, 64], dtype="fp16", out_format="NZ", out_dtype="int8")
    accepts(n=[16, 64], dtype="fp16", out_format="ND", out_dtype="int8")   # ND output: no rule
    accepts(n=[16, 64], dtype="fp16", out_format="NZ")                     # default out fp16: 32 B
    # explicit out_dtype makes it checkable with dtype=None
    rejects("nz_out_inner", "nL0=16", n=[16, 64], out_format="NZ", out_dtype="int8")


# ---- split-K -------------------------------------------------------------------------------------
@pytest.mark.parametrize("ndim", [3, 4])
def test_split_k_ndim(ndim):
    accepts(split_k=True, ndim=2)
    accepts(split_k=False, ndim=ndim)
    rejects("split_k_ndim", f"{ndim}-D", split_k=True, ndim=ndim)


@pytest.mark.parametrize("din,dout", [("fp16", "fp32"), ("bf16", "fp32"), ("int8", "int32"), ("fp32", "fp32")])
def test_split_k_out_dtype(din, dout):
    accepts(split_k=True, dtype=din, out_dtype=dout)
    ts = accepts(split_k=True, dtype=din)                  # None means the listed one
    assert ts.resolved_out_dtype() is DType[dout]
    wrong = "fp16" if dout != "fp16" else "fp32"
    rejects("split_k_out_dtype", din, wrong, dout, split_k=True, dtype=din, out_dtype=wrong)


def test_split_k_out_dtype_no_input_gives_is_refused_without_a_dtype():
    rejects("split_k_out_dtype", "fp16", split_k=True, out_dtype="fp16")
    accepts(split_k=True, out_dtype="fp32")           # some input (fp16, bf16, fp32) gives it


def test_default_out_dtype_without_split_k():
    assert accepts(dtype="bf16").resolved_out_dtype() is DType.bf16
    assert accepts(dtype="int8").resolved_out_dtype() is DType.int32
    accepts(dtype="fp16", out_dtype="fp16")               # allowed without split-K


# ---- capacities -----------------------------------------------------------------------------------
def test_l0a_capacity():
    accepts(m=[128, 128], k=[256, 256], n=[64, 64], dtype="fp16")           # 128*256*2 = 65536
    rejects("l0a_capacity", "CeilAlign(mL0=144,16)", 73728, 65536, "ascend950pr",
            m=[144, 144], k=[256, 256], n=[16, 16], dtype="fp16")


def test_l0a_capacity_ceil_align():
    # int8 aligns to 32: mL0 = 112 counts as 128; 128 * 544 = 69632 > 65536 (CeilAlign 16 would fit)
    assert ceil_align(112, 16) * 544 <= 65536
    rejects("l0a_capacity", "CeilAlign(mL0=112,32)", 69632, m=[112, 112], k=[544, 544], n=[32, 32],
            dtype="int8")
    accepts(m=[96, 96], k=[544, 544], n=[32, 32], dtype="int8")


def test_l0b_capacity():
    accepts(m=[16, 16], k=[256, 256], n=[128, 128], dtype="bf16")
    rejects("l0b_capacity", "CeilAlign(nL0=256,16)", 131072, 65536, m=[16, 16], k=[256, 256], n=[256, 256],
            dtype="bf16")


def test_l0c_capacity_depends_on_chip():
    kw = dict(m=[256, 256], k=[64, 64], n=[256, 256], dtype="fp16")          # 256*256*4 = 262144
    ts = accepts(chip="ascend950pr", **kw)
    assert ts.usage()["L0C"] == (262144, 262144)
    rejects("l0c_capacity", 262144, 131072, "atlas-a2", chip="atlas-a2", **kw)
    rejects("l0c_capacity", 262144, 131072, "atlas-a3", chip="atlas-a3", **kw)
    accepts(chip="atlas-a2", m=[128, 256], k=[64, 64], n=[256, 256], dtype="fp16")


def test_l0c_int8_uses_int32_and_32_alignment():
    ts = accepts(m=[16, 16], k=[32, 32], n=[32, 32], dtype="int8")
    assert ts.usage()["L0C"][0] == 32 * 32 * 4
    assert ts.usage()["L0A"][0] == 32 * 32 * 1


def test_l1_capacity():
    kw = dict(m=[128, 512], n=[128, 512], dtype="fp16")
    ts = accepts(k=[128, 256], **kw)                                        # 2 * 512*256*2 = 524288
    assert ts.usage()["L1"] == (524288, 524288)
    rejects("l1_capacity", "CeilAlign(kL1=384,16)", 786432, 524288, k=[128, 384], **kw)
    # with a bias, its row's two L1 slots on the way to BT count too (pyto's addition, module docstring): the
    # tiling that fills L1 with A and B leaves them no room (pyto_kernels.matmul refused it with a PlanError)
    rejects("l1_capacity", "bias rows 2*CeilAlign(nL0=128,8)*4B", 524288 + 1024, k=[128, 256], bias=True, **kw)


def test_bt_capacity_depends_on_chip():
    kw = dict(m=[16, 16], k=[32, 32], n=[512, 512], dtype="fp16", bias=True)  # 512 * 4 = 2048 B
    ts = accepts(chip="ascend950pr", **kw)
    assert ts.usage()["BT"] == (2048, 4096)
    rejects("bt_capacity", "nL0=512", 2048, 1024, "atlas-a2", chip="atlas-a2", **kw)
    accepts(chip="atlas-a2", **{**kw, "n": [256, 512]})                      # 1024 B fits
    accepts(chip="atlas-a2", **{**kw, "bias": False})                        # no bias, no rule
    assert "BT" not in get_cube_tile_shapes().usage()


def test_fb_capacity_depends_on_chip():
    kw = dict(m=[16, 16], k=[32, 32], n=[512, 512], dtype="fp16", scale=True)  # 512 * 8 = 4096 B
    assert accepts(chip="ascend950pr", **kw).usage()["FB"] == (4096, 4096)
    rejects("fb_capacity", "nL0=512", 4096, 2048, "atlas-a2", chip="atlas-a2", **kw)
    assert accepts(chip="atlas-a2", **{**kw, "n": [256, 512]}).usage()["FB"] == (2048, 2048)


def test_chip_object_and_path():
    chip = pyto.load_chip("atlas-a2")
    rejects("l0c_capacity", m=[256, 256], k=[64, 64], n=[256, 256], dtype="fp16", chip=chip)
    rejects("l0c_capacity", m=[256, 256], k=[64, 64], n=[256, 256], dtype="fp16", chip=chip.source)


def test_usage_keys():
    ts = accepts(dtype="fp16", bias=True, scale=True)
    assert set(ts.usage()) == {"L0A", "L0B", "L0C", "L1", "BT", "FB"}
    assert set(accepts().usage("fp16")) == {"L0A", "L0B", "L0C", "L1"}
    with pytest.raises(TilingError) as ei:
        accepts().usage()
    assert ei.value.rule == "dtype"


# ---- dtype=None deferral ------------------------------------------------------------------------
def test_dtype_none_defers_alignment():
    ts = accepts(k=[8, 8])                 # kL0 = 8 is 16 B in fp16: not checked yet
    with pytest.raises(TilingError) as ei:
        ts.check("fp16")
    assert ei.value.rule == "align_k" and "kL0=8" in str(ei.value)
    with pytest.raises(TilingError) as ei:
        ts.check("fp32")
    assert ei.value.rule == "align_k"


def test_dtype_none_defers_capacity():
    ts = accepts(m=[512, 512], k=[512, 512], n=[16, 16])
    with pytest.raises(TilingError) as ei:
        ts.check("fp16")
    assert ei.value.rule == "l0a_capacity" and "524288" in str(ei.value)


def test_dtype_none_still_checks_dtype_independent_rules():
    rejects("l0_le_l1_k", k=[256, 128])
    rejects("divisible_n", n=[48, 128])
    rejects("split_k_ndim", split_k=True, ndim=3)
    rejects("bt_capacity", m=[16, 16], n=[512, 512], bias=True, chip="atlas-a2")
    rejects("l0c_capacity", n=[512, 512], chip="atlas-a2")    # 4-byte accumulators, any input dtype


def test_chip_none_checks_against_950_and_defers_the_chip():
    ts = accepts(m=[16, 16], k=[32, 32], n=[512, 512], dtype="fp16", bias=True)   # BT 2048 <= 4096 (950)
    assert ts.chip is None
    ts.check()                                                                    # 950 again
    with pytest.raises(TilingError) as ei:
        ts.check("fp16", "atlas-a2")
    assert ei.value.rule == "bt_capacity"
    rejects("bt_capacity", n=[2048, 2048], k=[16, 16], m=[16, 16], bias=True)     # 8192 > 950's 4096


def test_check_options_override():
    ts = accepts(m=[16, 16], k=[32, 32], n=[512, 512], dtype="fp16", chip="atlas-a2")
    with pytest.raises(TilingError) as ei:
        ts.check(bias=True)
    assert ei.value.rule == "bt_capacity"
    assert ts.check(bias=True, chip="ascend950pr").bias is True
    with pytest.raises(TilingError) as ei:
        ts.check(no_such_option=1)
    assert ei.value.rule == "option"


def test_violations_lists_every_broken_rule():
    ts = CubeTileShapes(256, 128, 8, 8, 512, 512, bias=True)
    rules = [e.rule for e in ts.violations("fp16", "atlas-a2")]
    assert rules[0] == "l0_le_l1_m"
    assert {"align_k", "bt_capacity"} <= set(rules)


# ---- hypothesis ------------------------------------------------------------------------------------
GOOD = st.sampled_from([1, 8, 16, 24, 32, 48, 64, 96, 128, 160, 256, 512])
JUNK = st.one_of(st.integers(-300, 2000), st.floats(allow_nan=True), st.booleans(), st.none(), st.text(max_size=2))
VALUE = st.one_of(GOOD, GOOD, JUNK)
WELL_FORMED = st.one_of(st.tuples(GOOD, st.integers(1, 4)).map(lambda t: [t[0], t[0] * t[1]]),
                        st.tuples(GOOD, GOOD).map(list))
MALFORMED = st.one_of(st.lists(VALUE, min_size=0, max_size=3), VALUE)
# ~90% well-formed pairs so that all three axes are often well-formed and the seed's rules are reached
PAIR = st.integers(0, 9).flatmap(lambda i: WELL_FORMED if i else MALFORMED)
OPTIONS = st.fixed_dictionaries({
    "dtype": st.sampled_from([None, "fp16", "bf16", "fp32", "int8"]),
    "chip": st.sampled_from([None, "ascend950pr", "atlas-a2", "atlas-a3"]),
    "bias": st.booleans(), "scale": st.booleans(), "transpose_a": st.booleans(),
    "a_format": st.sampled_from(["ND", "NZ"]), "b_format": st.sampled_from(["ND", "NZ"]),
    "out_format": st.sampled_from(["ND", "NZ"]),
    "out_dtype": st.sampled_from([None, "fp16", "fp32", "int32", "int8"]),
    "ndim": st.sampled_from([2, 3, 4]),
})


@given(m=PAIR, k=PAIR, n=PAIR, split_k=st.booleans(), opts=OPTIONS)
def test_property_returns_or_tiling_error(m, k, n, split_k, opts):
    try:
        ts = set_cube_tile_shapes(m, k, n, split_k, **opts)
    except TilingError as e:
        assert e.rule and str(e).startswith(e.rule)
        return
    assert get_cube_tile_shapes() is ts
    assert 0 < ts.mL0 <= ts.mL1 and ts.mL1 % ts.mL0 == 0
    assert 0 < ts.kL0 <= ts.kL1 and ts.kL1 % ts.kL0 == 0
    assert 0 < ts.nL0 <= ts.nL1 and ts.nL1 % ts.nL0 == 0
    if opts["dtype"] is None:
        return
    d = DType[opts["dtype"]]
    for v in (ts.kL0, ts.kL1, ts.nL0, ts.nL1):
        assert v % 16 == 0 if d is DType.fp32 else (v * d.itemsize) % 32 == 0
    usage = ts.usage()
    note(repr(usage))
    for buf, (used, cap) in usage.items():
        assert used <= cap, buf
    assert ("BT" in usage) == opts["bias"] and ("FB" in usage) == opts["scale"]


@given(m=PAIR, k=PAIR, n=PAIR, opts=OPTIONS, d=st.sampled_from(["fp16", "bf16", "fp32", "int8"]),
       chip=st.sampled_from(["ascend950pr", "atlas-a2", "atlas-a3"]))
def test_property_deferred_check(m, k, n, opts, d, chip):
    """Set with dtype=None, check later: check either raises TilingError or usage fits the chip."""
    opts = {**opts, "dtype": None}
    try:
        ts = set_cube_tile_shapes(m, k, n, **opts)
        ts.check(d, chip)
    except TilingError:
        return
    for buf, (used, cap) in ts.usage(d, chip).items():
        assert used <= cap, buf


ALIGNED_PAIR = st.tuples(st.integers(1, 16), st.integers(1, 4)).map(lambda t: [32 * t[0], 32 * t[0] * t[1]])


@given(m=ALIGNED_PAIR, k=ALIGNED_PAIR, n=ALIGNED_PAIR, d=st.sampled_from(["fp16", "bf16", "fp32", "int8"]),
       chip=st.sampled_from(["ascend950pr", "atlas-a2", "atlas-a3"]), bias=st.booleans(), scale=st.booleans())
def test_property_capacity_matches_seed_formulas(m, k, n, d, chip, bias, scale):
    """Aligned, divisible shapes break only capacity rules: compare with the seed's formulas, recomputed here."""
    dt, c = DType[d], pyto.load_chip(chip)
    al, s = (32 if dt is DType.int8 else 16), dt.itemsize
    ca = lambda v: -(-v // al) * al  # noqa: E731
    over = set()
    if ca(m[0]) * ca(k[0]) * s > c.buffers["L0A"]:
        over.add("l0a_capacity")
    if ca(n[0]) * ca(k[0]) * s > c.buffers["L0B"]:
        over.add("l0b_capacity")
    if ca(m[0]) * ca(n[0]) * 4 > c.buffers["L0C"]:
        over.add("l0c_capacity")
    if ca(m[1]) * ca(k[1]) * s + ca(n[1]) * ca(k[1]) * s > c.buffers["L1"]:
        over.add("l1_capacity")
    if bias and n[0] * 4 > c.buffers["BT"]:
        over.add("bt_capacity")
    if scale and n[0] * 8 > c.buffers["FB"]:
        over.add("fb_capacity")
    ts = CubeTileShapes(*m, *k, *n, dtype=d, chip=chip, bias=bias, scale=scale)
    assert {e.rule for e in ts.violations()} == over
    if over:
        with pytest.raises(TilingError) as ei:
            set_cube_tile_shapes(m, k, n, dtype=d, chip=chip, bias=bias, scale=scale)
        assert ei.value.rule in over
    else:
        set_cube_tile_shapes(m, k, n, dtype=d, chip=chip, bias=bias, scale=scale)


# ---- CLI -------------------------------------------------------------------------------------------
def test_cli_ok(capsys):
    rc = main(["tiles", "--m", "128", "128", "--k", "128", "128", "--n", "128", "128", "--dtype", "fp16"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "verdict: OK" in out
    for buf in ("L0A", "L0B", "L0C", "L1"):
        assert buf in out
    assert "32768 B" in out and "65536 B" in out and "262144 B" in out
    assert get_cube_tile_shapes() is None          # the CLI does not change the default


def test_cli_broken_capacity_on_a2(capsys):
    argv = ["tiles", "--m", "256", "256", "--k", "64", "64", "--n", "256", "256", "--dtype", "fp16"]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(argv + ["--chip", "atlas-a2"]) == 1
    out = capsys.readouterr().out
    assert "l0c_capacity" in out and "262144" in out and "131072" in out and "OVER" in out


def test_cli_bias_and_flags(capsys):
    argv = ["tiles", "--m", "16", "16", "--k", "32", "32", "--n", "512", "512", "--dtype", "fp16",
            "--chip", "atlas-a2", "--bias"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "bt_capacity" in out and "BT" in out and "2048" in out and "1024" in out
    assert main(["tiles", "--m", "128", "128", "--k", "128", "128", "--n", "128", "128", "--split-k",
                 "--transpose-a", "--dtype", "bf16"]) == 0
    assert "verdict: OK" in capsys.readouterr().out
    assert main(["tiles", "--m", "8", "16", "--k", "128", "128", "--n", "128", "128", "--transpose-a"]) == 1
    assert "align_m_transposed" in capsys.readouterr().out


def test_cli_structural_error(capsys):
    rc = main(["tiles", "--m", "0", "128", "--k", "128", "128", "--n", "128", "128"])
    out = capsys.readouterr().out
    assert rc == 1 and "positive" in out and "mL0=0" in out
    rc = main(["tiles", "--m", "128", "128", "--k", "128", "128", "--n", "128", "128", "--dtype", "int32"])
    assert rc == 1 and "dtype" in capsys.readouterr().out


def test_l0c_overflow_is_caught_without_a_dtype():
    """L0C accumulates 4-byte values whatever the input: [256, 256] L0 tiles overflow A2's 128 KB L0C at set
    time, not at the first matmul (an A2-porting helper's case)."""
    with pytest.raises(TilingError) as ei:
        set_cube_tile_shapes([256, 256], [64, 256], [256, 256], chip="atlas-a2")
    assert ei.value.rule == "l0c_capacity" and "131072" in str(ei.value)
    set_cube_tile_shapes([256, 256], [64, 256], [256, 256])           # 256 KB on the 950: it fits
    pyto.reset_cube_tile_shapes()
