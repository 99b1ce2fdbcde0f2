"""PyPTO-Pro's debugging ops on pyto (docs/zh/pypto_pro/api/Utils-API/debugging/): pl.printf lines in simulated
time order with core and cycle, their C formats, pl.pto_assert at trace time and in the data pass, pl.trap,
pl.dump_data's values against numpy, and the timing of kernels that print nothing."""
import re

import numpy as np
import pytest

import pyto
import pyto.language as pl
from pyto.testing import matmul_bound
from pro_kernels import acc, left, mat, right, vec

RNG = np.random.default_rng(19)
LINE = re.compile(r"^\[(?P<core>[^@]+) @ (?P<cycles>[\d,]+) cycles\](?: (?P<loc>\S+:\d+))? (?P<text>.*)$", re.S)
M, K, N = 32, 32, 32          # the mix kernel's per-block matmul
ROWS = 16                     # rows of x per AIV


def _lines(rep) -> list:
    """(core, cycle, text) of each printed entry."""
    out = []
    for entry in rep.printed:
        m = LINE.match(entry)
        assert m, entry
        out.append((m["core"], int(m["cycles"].replace(",", "")), m["text"]))
    return out


def _starts(rep, line: int) -> list:
    """(core, start cycle) of each instruction traced from kernel line `line`, from the report's events."""
    cores, _, _, locs, core_i, _, _, loc_i, begin, _, _ = rep.events
    at = [i for i, loc in enumerate(locs) if re.search(rf":{line} ", loc + " ")]
    pick = np.isin(loc_i, at)
    return sorted((cores[c], round(float(b))) for c, b in zip(core_i[pick], begin[pick]))


# ---- printf: simulated time, cores, blocks -------------------------------------------------------------------
@pl.jit
def mix_print(a: pl.Tensor[[2 * M, K], pl.DT_FP16], b: pl.Tensor[[K, N], pl.DT_FP16],
              c: pl.Tensor[[2 * M, N], pl.DT_FP32], x: pl.Tensor[[4 * ROWS, 64], pl.DT_FP32],
              y: pl.Tensor[[4 * ROWS, 64], pl.DT_FP32]):
    """Two blocks: the AIC multiplies its rows of a by b and says so; each AIV copies its rows of x and prints its
    first element (a getval, after the load)."""
    a_l1 = pl.make_tile_group(type=mat([M, K]), addrs=0x00000, mutex_ids=[0])
    b_l1 = pl.make_tile_group(type=mat([K, N]), addrs=0x10000, mutex_ids=[1])
    a_left = pl.make_tile_group(type=left([M, K]), addrs=0x0000, mutex_ids=[2])
    b_right = pl.make_tile_group(type=right([K, N]), addrs=0x0000, mutex_ids=[3])
    c_acc = pl.make_tile_group(type=acc([M, N]), addrs=0x0000, mutex_ids=[4])
    x_ub = pl.make_tile_group(type=vec([ROWS, 64]), addrs=0x0000, mutex_ids=[5])
    with pl.section_cube():
        blk = pl.get_block_idx()
        al1, bl1, al, br, ac = a_l1.current(), b_l1.current(), a_left.current(), b_right.current(), c_acc.current()
        pl.load(al1, a, [M * blk, 0])
        pl.load(bl1, b, [0, 0])
        pl.move(al, al1)
        pl.move(br, bl1)
        pl.matmul(ac, al, br)
        pl.printf("cube %d issued its matmul\n", blk)                       # PRINT_CUBE
        pl.store(c, ac, [M * blk, 0])
    with pl.section_vector():
        aiv = pl.get_block_idx()
        t = x_ub.current()
        pl.load(t, x, [ROWS * aiv, 0])
        first = pl.getval(t, 0)
        pl.printf("aiv %d (subblock %d): x[%d, 0] = %.1f\n", aiv, pl.get_subblock_idx(), ROWS * aiv, first)   # PRINT_AIV
        pl.store(y, t, [ROWS * aiv, 0])


def _line_of(fn, marker: str) -> int:
    import inspect
    src, first = inspect.getsourcelines(fn.fn if hasattr(fn, "fn") else fn)
    return first + next(i for i, s in enumerate(src) if marker in s)


def _mix_inputs():
    a = RNG.standard_normal((2 * M, K)).astype(np.float16)
    b = RNG.standard_normal((K, N)).astype(np.float16)
    x = np.arange(4 * ROWS * 64, dtype=np.float32).reshape(4 * ROWS, 64)
    return a, b, np.zeros((2 * M, N), np.float32), x, np.zeros_like(x)


def test_printf_lines_come_in_simulated_time_order_with_core_and_cycle(capsys):
    a, b, c, x, y = _mix_inputs()
    rep = mix_print[None, 2](a, b, c, x, y)
    lines = _lines(rep)
    assert capsys.readouterr().out.splitlines() == "\n".join(rep.printed).splitlines()     # also on stdout
    assert [cyc for _, cyc, _ in lines] == sorted(cyc for _, cyc, _ in lines)
    want = {("block 0 AIC", "cube 0 issued its matmul"), ("block 1 AIC", "cube 1 issued its matmul")}
    want |= {(f"block {aiv // 2} AIV{aiv % 2}", f"aiv {aiv} (subblock {aiv % 2}): x[{ROWS * aiv}, 0] = "
                                                f"{x[ROWS * aiv, 0]:.1f}") for aiv in range(4)}
    assert {(core, text) for core, _, text in lines} == want and len(lines) == 6
    # each line at its printf's start in the schedule
    starts = _starts(rep, _line_of(mix_print, "# PRINT_CUBE")) + _starts(rep, _line_of(mix_print, "# PRINT_AIV"))
    assert sorted((core, cyc) for core, cyc, _ in lines) == sorted(starts)
    # the AIC's printf waits for nothing (the scalar unit issues it at once); an AIV's waits for its getval, which
    # waits for the load (auto_mutex: MTE2 -> S)
    aic = [cyc for core, cyc, _ in lines if core.endswith("AIC")]
    aiv = [cyc for core, cyc, _ in lines if "AIV" in core]
    assert max(aic) < min(aiv)
    assert min(aiv) > pyto.load_chip("ascend950pr").paths["GM->UB"].latency
    np.testing.assert_array_equal(y, x)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert (np.abs(c - ref) <= matmul_bound(a, b, "fp32")).all()


def test_timing_mode_prints_the_same_lines_with_unknown_values(capsys):
    a, b, c, x, y = _mix_inputs()
    specs = [pyto.spec(v.shape, v.dtype) for v in (a, b, c, x, y)]
    rep = pyto.run(mix_print, *specs, blocks=2, mode="timing")
    full = mix_print[None, 2](a, b, c, x, y)
    assert capsys.readouterr().out.splitlines()[:6] == "\n".join(rep.printed).splitlines()
    assert rep.cycles == full.cycles
    timing, data = _lines(rep), _lines(full)
    assert [(core, cyc) for core, cyc, _ in timing] == [(core, cyc) for core, cyc, _ in data]
    for (_, _, t_text), (_, _, d_text) in zip(timing, data):
        if t_text.startswith("aiv"):
            assert t_text.endswith("= ?") and not d_text.endswith("= ?")
        else:
            assert t_text == d_text


def test_compile_keeps_the_timing_rendering_and_each_call_prints_its_own_values(capsys):
    a, b, c, x, y = _mix_inputs()
    compiled = pyto.compile(mix_print, a, b, c, x, y, blocks=2)
    assert capsys.readouterr().out == ""               # compiling runs nothing
    assert any(text.endswith("= ?") for _, _, text in _lines(compiled.report))
    for shift in (0.0, 1000.0):
        rep = compiled(a, b, c, x + shift, y)
        got = {text for _, _, text in _lines(rep) if text.startswith("aiv 2")}
        assert got == {f"aiv 2 (subblock 0): x[32, 0] = {x[32, 0] + shift:.1f}"}
        assert capsys.readouterr().out.count("aiv 2") == 1


@pl.kernel
def hello(x, out):
    """printf outside sections: every core of the kernel runs it (an AIV-only kernel has no AIC)."""
    pl.printf("hello from %d\n", pl.get_block_idx())
    t = pl.alloc(pl.UB, [16, 64], pl.DT_FP32)
    with pl.section_vector():
        pl.load(t, x, [16 * pl.get_block_idx(), 0])
        pl.store(out, t, [16 * pl.get_block_idx(), 0])


@pl.kernel
def hello_mix(a, c):
    """The same in a kernel with a cube side: the AIC and both AIVs of each block print."""
    pl.printf("hello\n")
    a_l1 = pl.alloc(pl.L1, [32, 32], pl.DT_FP16)
    a_l0a, b_l0b = pl.alloc(pl.L0A, [32, 32], pl.DT_FP16), pl.alloc(pl.L0B, [32, 32], pl.DT_FP16)
    c_l0c = pl.alloc(pl.L0C, [32, 32], pl.DT_FP32)
    c_ub = pl.alloc(pl.UB, [16, 32], pl.DT_FP32)
    with pl.section_cube():
        pl.load(a_l1, a, [0, 0])
        pl.move(a_l0a, a_l1)
        pl.move(b_l0b, a_l1)
        pl.matmul(c_l0c, a_l0a, b_l0b)
        pl.move(c_ub, c_l0c, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM)
    with pl.section_vector():
        pl.store(c, c_ub, [16 * pl.get_subblock_idx(), 0])


def test_printf_outside_sections_runs_on_every_core_of_the_kernel():
    x = RNG.random((32, 64), np.float32)
    out = np.zeros_like(x)
    rep = pyto.run(hello, x, out, blocks=2)
    assert sorted((core, text) for core, _, text in _lines(rep)) == [("AIV 0", "hello from 0"),
                                                                      ("AIV 1", "hello from 1")]
    np.testing.assert_array_equal(out, x)
    a = np.eye(32, dtype=np.float16)
    c = np.zeros((32, 32), np.float32)
    rep = pyto.run(hello_mix, a, c)
    assert sorted(core for core, _, _ in _lines(rep)) == ["block 0 AIC", "block 0 AIV0", "block 0 AIV1"]
    np.testing.assert_array_equal(c, np.eye(32))


@pl.jit
def formats(out: pl.Tensor[[16, 64], pl.DT_FP32]):
    with pl.section_vector():
        pl.printf("flag=%d, offset=%d\n", 1, 32)
        pl.printf("value=%+08.3f\n", 3.14)
        pl.printf("addr=%#08x\n", 0x1234)
        pl.printf("reached checkpoint A\n")
        pl.printf("debug: i=%d\n", 5, loc=True)                           # LOC_LINE
        pl.printf("%5d|%-5d|%05i|%u|%x|%d\n", 7, -7, 42, True, 255, False)
        pl.printf("fp32 of 0.1: %.10f", 0.1)
        pl.printf("two\nlines\n")


def test_printf_formats_as_c_does():
    """printf.md's examples, flags and widths, a Python float as FP32 (0.1 rounded to fp32)."""
    rep = pyto.run(formats, pyto.spec((16, 64), "fp32"), mode="timing")
    texts = [text for _, _, text in _lines(rep)]
    loc = f"test_pro_debug.py:{_line_of(formats, '# LOC_LINE')}"
    assert texts == ["flag=1, offset=32", "value=+003.140", "addr=0x001234", "reached checkpoint A",
                     "debug: i=5", "    7|-7   |00042|1|ff|0", f"fp32 of 0.1: {float(np.float32(0.1)):.10f}",
                     "two\nlines"]
    assert texts[-2] == "fp32 of 0.1: 0.1000000015"
    assert LINE.match(rep.printed[4])["loc"] == loc
    assert all(LINE.match(e)["loc"] is None for i, e in enumerate(rep.printed) if i != 4)


def _printf_misuse(call):
    @pl.jit
    def misuse(x: pl.Tensor[[16, 64], pl.DT_FP32]):
        t = pl.make_tile_group(type=vec([16, 64]), addrs=0x0, mutex_ids=[0])
        with pl.section_vector():
            cur = t.current()
            pl.load(cur, x, [0, 0])
            call(cur)
    return misuse


@pytest.mark.parametrize("call, err, text", [
    (lambda t: pl.printf("%s", 1), pyto.KernelError, r"'%s' is not supported"),
    (lambda t: pl.printf("100%%"), pyto.KernelError, r"'%%' is not supported"),
    (lambda t: pl.printf("%c", 65), pyto.KernelError, r"'%c' is not supported"),
    (lambda t: pl.printf("%ld", 1), pyto.KernelError, r"length modifiers \(l\) are not supported"),
    (lambda t: pl.printf("%q", 1), pyto.KernelError, r"'%q' is not a conversion"),
    (lambda t: pl.printf("%d %d", 1), pyto.KernelError, r"has 2 conversion\(s\) but 1 argument"),
    (lambda t: pl.printf("%f", 1), pyto.KernelError, r"'%f' takes an FP32 value .* argument 1 is a Python int"),
    (lambda t: pl.printf("%d", 1.5), pyto.KernelError, r"'%d' takes .* argument 1 is an FP32 value"),
    (lambda t: pl.printf("%u", -1), pyto.KernelError, r"'%u' takes an unsigned value, got -1"),
    (lambda t: pl.printf("%x", True), pyto.KernelError, r"'%x' takes an unsigned integer or a Python int"),
    (lambda t: pl.printf("%d", pl.getval(t, 0)), pyto.KernelError, r"argument 1 is an FP32 value"),
    (lambda t: pl.printf("%d", t), pyto.KernelError, r"argument 1 \(%d\) must be a scalar"),
    (lambda t: pl.printf(7), pyto.KernelError, r"takes a format string"),
    (lambda t: pl.printf("x", loc=1), pyto.KernelError, r"loc= takes True or False"),
    (lambda t: pl.printf("%p", 0), pyto.UnsupportedError, r"'%p' .* not built"),
])
def test_printf_misuse_names_the_line(call, err, text):
    with pytest.raises(err, match=text) as ei:
        _printf_misuse(call)(np.zeros((16, 64), np.float32))
    assert "test_pro_debug.py:" in str(ei.value)


def test_printf_on_fp16_data_is_refused_as_printf_md_says():
    @pl.jit
    def half(x: pl.Tensor[[16, 64], pl.DT_FP16]):
        t = pl.make_tile_group(type=vec([16, 64], pl.DT_FP16), addrs=0x0, mutex_ids=[0])
        with pl.section_vector():
            pl.load(t.current(), x, [0, 0])
            pl.printf("%f", pl.getval(t.current(), 0))
    with pytest.raises(pyto.KernelError, match=r"'%f' takes an FP32 value .* is an FP16/BF16 value"):
        half(np.zeros((16, 64), np.float16))


# ---- kernels that print nothing keep their timing ------------------------------------------------------------
@pl.kernel
def scale_rows(x, out, *, DEBUG, PRINT_LINE=True):
    """out = 2 x, 16 rows an AIV; with DEBUG a printf in a branch that runs, without it one that does not."""
    t = pl.alloc(pl.UB, [16, 64], pl.DT_FP32, buffers=2)
    u = pl.alloc(pl.UB, [16, 64], pl.DT_FP32, buffers=2)
    with pl.section_vector():
        for r in pl.range(16 * pl.get_block_idx(), x.shape[0], 16 * pl.get_block_num()):
            cur, res = t.next(), u.next()
            pl.load(cur, x, [r, 0])
            if DEBUG:
                pl.printf("row %d\n", r)
            pl.mul(res, cur, 2.0)
            pl.store(out, res, [r, 0])


@pl.kernel
def scale_rows_plain(x, out):
    """scale_rows without the debug branch at all."""
    t = pl.alloc(pl.UB, [16, 64], pl.DT_FP32, buffers=2)
    u = pl.alloc(pl.UB, [16, 64], pl.DT_FP32, buffers=2)
    with pl.section_vector():
        for r in pl.range(16 * pl.get_block_idx(), x.shape[0], 16 * pl.get_block_num()):
            cur, res = t.next(), u.next()
            pl.load(cur, x, [r, 0])
            pl.mul(res, cur, 2.0)
            pl.store(out, res, [r, 0])


def test_a_printf_that_does_not_run_changes_no_cycle():
    x = RNG.standard_normal((128, 64)).astype(np.float32)
    out0, out1, out2 = (np.zeros_like(x) for _ in range(3))
    plain = pyto.run(scale_rows_plain, x, out0, blocks=2)
    silent = pyto.run(scale_rows, x, out1, blocks=2, DEBUG=False)
    loud = pyto.run(scale_rows, x, out2, blocks=2, DEBUG=True)
    for rep in (silent,):
        assert (rep.cycles, rep.instructions, rep.pipe_cycles, rep.core_pipe_cycles, rep.core_cycles) == \
               (plain.cycles, plain.instructions, plain.pipe_cycles, plain.core_pipe_cycles, plain.core_cycles)
        assert rep.printed == [] and rep.dumps == []
    assert loud.instructions == plain.instructions + 8          # one printf per row block
    assert all(per.get("S", 0) > 0 for core, per in loud.core_pipe_cycles.items() if "AIV" in core)
    assert sorted(int(t.split()[1]) for _, _, t in _lines(loud)) == list(range(0, 128, 16))
    for o in (out0, out1, out2):
        np.testing.assert_array_equal(o, 2 * x)


# ---- pto_assert --------------------------------------------------------------------------------------------------
@pl.jit
def checked_copy(x: pl.Tensor[[32, 64], pl.DT_FP32], out: pl.Tensor[[32, 64], pl.DT_FP32], limit: pl.DT_INT32):
    """Each AIV copies 16 rows; asserts its block index is below `limit` (trace time) and its first element is
    non-negative (data)."""
    t = pl.make_tile_group(type=vec([16, 64]), addrs=0x0, mutex_ids=[0])
    with pl.section_vector():
        aiv = pl.get_block_idx()
        pl.pto_assert(aiv < limit, "aiv %d is past the limit %d", aiv, limit)
        cur = t.current()
        pl.load(cur, x, [16 * aiv, 0])
        first = pl.getval(cur, 0)
        pl.printf("aiv %d read %f\n", aiv, first)
        pl.pto_assert(first >= 0.0, "aiv %d: x[%d, 0] = %f is negative", aiv, 16 * aiv, first)   # DATA_ASSERT
        pl.store(out, cur, [16 * aiv, 0])


def test_pto_assert_passes_silently():
    x = RNG.random((32, 64), np.float32)
    out = np.zeros_like(x)
    rep = checked_copy[None, 2](x, out, 2)
    np.testing.assert_array_equal(out, x)
    assert len(rep.printed) == 2                     # the printfs only: a passing assertion prints nothing


def test_pto_assert_on_trace_time_values_fails_when_traced():
    x = RNG.random((32, 64), np.float32)
    with pytest.raises(pyto.KernelAssertionError) as ei:
        checked_copy[None, 2](x, np.zeros_like(x), 1)
    msg = str(ei.value)
    assert re.search(r"test_pro_debug\.py:\d+ pl\.pto_assert\(aiv < limit, .*\): pl\.pto_assert failed on AIV 1 at "
                     r"trace time .*: Assertion failed: aiv < limit\naiv 1 is past the limit 1$", msg), msg


def test_pto_assert_on_data_fails_in_the_data_pass_naming_line_core_and_values(capsys):
    x = RNG.random((32, 64), np.float32)
    x[16, 0] = -2.5
    out = np.zeros_like(x)
    with pytest.raises(pyto.KernelAssertionError) as ei:
        checked_copy[None, 2](x, out, 2)
    msg = str(ei.value)
    line = _line_of(checked_copy, "# DATA_ASSERT")
    assert re.search(rf"test_pro_debug\.py:{line} .*: pl\.pto_assert failed on AIV 1 @ [\d,]+ cycles: Assertion "
                     r"failed: first >= 0\.0\naiv 1: x\[16, 0\] = -2\.500000 is negative\n\(t\[0, 0\] = -2\.5\)$",
                     msg), msg
    assert not out.any()                               # a failed launch writes no output
    printed = capsys.readouterr().out
    assert "aiv 1 read -2.500000" in printed           # what ran before the assertion is printed


def test_a_compiled_kernel_checks_its_assertion_on_every_call():
    x = RNG.random((32, 64), np.float32)
    compiled = pyto.compile(checked_copy, x, x, 2, blocks=2)
    out = np.zeros_like(x)
    compiled(x, out, )
    np.testing.assert_array_equal(out, x)
    bad = x.copy()
    bad[0, 0] = -1.0
    with pytest.raises(pyto.KernelAssertionError, match="AIV 0"):
        compiled(bad, np.zeros_like(x))
    compiled(x, out)                                    # and passes again


def test_pto_assert_on_data_is_not_checked_in_timing_mode():
    rep = pyto.run(checked_copy, pyto.spec((32, 64), "fp32"), pyto.spec((32, 64), "fp32"), 2, blocks=2,
                   mode="timing")
    assert rep.instructions > 0 and len(rep.printed) == 2


@pytest.mark.parametrize("call, text", [
    (lambda t: pl.pto_assert(1), r"takes a bool condition .* got 1"),
    (lambda t: pl.pto_assert(pl.getval(t, 0)), r"takes a bool condition, got a fp32 scalar"),
    (lambda t: pl.pto_assert(True, "%d"), r"has 1 conversion\(s\) but 0 argument"),
])
def test_pto_assert_misuse(call, text):
    with pytest.raises(pyto.KernelError, match=text):
        _printf_misuse(call)(np.zeros((16, 64), np.float32))


def test_pto_assert_without_a_message_ignores_extra_arguments():
    with pytest.raises(pyto.KernelAssertionError, match=r"Assertion failed: False$"):
        _printf_misuse(lambda t: pl.pto_assert(False, None, 1, 2))(np.zeros((16, 64), np.float32))


# ---- trap --------------------------------------------------------------------------------------------------------
@pl.jit
def trapping(x: pl.Tensor[[32, 64], pl.DT_FP32], out: pl.Tensor[[32, 64], pl.DT_FP32], bad: pl.DT_INT32):
    t = pl.make_tile_group(type=vec([16, 64]), addrs=0x0, mutex_ids=[0])
    with pl.section_vector():
        aiv = pl.get_block_idx()
        cur = t.current()
        pl.load(cur, x, [16 * aiv, 0])
        pl.printf("aiv %d before\n", aiv)
        if aiv == bad:
            pl.trap()                                                           # TRAP_LINE
        pl.store(out, cur, [16 * aiv, 0])
        pl.printf("aiv %d after\n", aiv)


@pytest.mark.parametrize("mode", ["full", "timing"])
def test_trap_aborts_the_launch_naming_line_core_and_cycle(mode, capsys):
    x = RNG.random((32, 64), np.float32)
    out = np.zeros_like(x)
    args = (x, out) if mode == "full" else (pyto.spec(x.shape, x.dtype), pyto.spec(x.shape, x.dtype))
    with pytest.raises(pyto.TrapError) as ei:
        pyto.run(trapping, *args, 1, blocks=2, mode=mode)
    assert isinstance(ei.value, pyto.KernelError)
    line = _line_of(trapping, "# TRAP_LINE")
    assert re.match(rf"test_pro_debug\.py:{line} pl\.trap\(\) .*: pl\.trap\(\) on AIV 1 @ [\d,]+ cycles: the "
                    r"kernel aborts here", str(ei.value)), str(ei.value)
    printed = capsys.readouterr().out
    assert "aiv 1 before" in printed and "aiv 1 after" not in printed
    assert not out.any()


def test_a_trap_in_a_branch_not_taken_changes_nothing():
    x = RNG.random((32, 64), np.float32)
    out = np.zeros_like(x)
    rep = trapping[None, 2](x, out, 7)
    np.testing.assert_array_equal(out, x)
    assert len(rep.printed) == 4


# ---- dump_data ---------------------------------------------------------------------------------------------------
@pl.jit
def dumps(x: pl.Tensor[[2, 32, 64], pl.DT_INT32], y: pl.Tensor[[32, 64], pl.DT_INT32],
          out: pl.Tensor[[32, 64], pl.DT_INT32]):
    """Each AIV: x's rows into a, y's into b, c = a + b, dumping a, then a again after a reload, c's window, and x
    itself (GM, a window across both batches)."""
    ta = pl.make_tile_group(type=vec([16, 64], pl.DT_INT32), addrs=0x0000, mutex_ids=[0])
    tb = pl.make_tile_group(type=vec([16, 64], pl.DT_INT32), addrs=0x1000, mutex_ids=[1])
    tc = pl.make_tile_group(type=vec([16, 64], pl.DT_INT32), addrs=0x2000, mutex_ids=[2])
    with pl.section_vector():
        aiv = pl.get_block_idx()
        a, b, c = ta.current(), tb.current(), tc.current()
        pl.load(a, x, [0, 16 * aiv, 0])
        pl.dump_data(a, flag="a from x[0]")
        pl.load(b, y, [16 * aiv, 0])
        pl.add(c, a, b)
        pl.load(a, x, [1, 16 * aiv, 0])
        pl.dump_data(a)
        pl.dump_data(c, offsets=[2, 8], shapes=[3, 5])
        pl.store(out, c, [16 * aiv, 0])
        if aiv == 0:
            pl.dump_data(x, offsets=[0, 4, 60], shapes=[2, 2, 4], loc=True)


def test_dump_data_returns_the_values_at_that_point_of_the_program(capsys):
    x = RNG.integers(-1000, 1000, (2, 32, 64)).astype(np.int32)
    y = RNG.integers(-1000, 1000, (32, 64)).astype(np.int32)
    out = np.zeros_like(y)
    rep = dumps[None, 2](x, y, out)
    np.testing.assert_array_equal(out, x[0] + y)
    by_core: dict = {}
    for d in rep.dumps:
        by_core.setdefault(d.core, []).append(d)
    assert sorted(by_core) == ["AIV 0", "AIV 1"] and [len(v) for v in by_core.values()] in ([4, 3], [3, 4])
    for aiv in (0, 1):
        rows = slice(16 * aiv, 16 * aiv + 16)
        first, again, window = [d for d in by_core[f"AIV {aiv}"] if "GM" not in d.what]
        np.testing.assert_array_equal(first.data, x[0, rows])
        np.testing.assert_array_equal(again.data, x[1, rows])          # the reload, not the first load
        np.testing.assert_array_equal(window.data, (x[0] + y)[rows][2:5, 8:13])
        assert first.label == "a from x[0]" and again.label == "" and window.shape == (3, 5)
        assert first.cycles < again.cycles < window.cycles
        assert first.data.dtype == np.int32
    (gm,) = [d for d in rep.dumps if "GM" in d.what]
    assert gm.core == "AIV 0" and gm.cycles < by_core["AIV 0"][-1].cycles   # read from GM at once: nothing waits
    np.testing.assert_array_equal(gm.data, x[0:2, 4:6, 60:64])
    assert "'x' GM [2, 32, 64] int32 window at [0, 4, 60] of [2, 2, 4]" in gm.what
    printed = capsys.readouterr().out
    assert printed.count("dump_data") == 7 and "a from x[0]" in printed
    entry = next(e for e in rep.printed if "GM [2, 32, 64]" in e)
    assert re.search(r"\] test_pro_debug\.py:\d+ dump_data 'x'", entry)    # loc=True
    assert str(x[0, 4, 60]) in entry


def test_dump_data_in_timing_mode_records_shape_and_time_but_no_data():
    specs = [pyto.spec((2, 32, 64), "int32"), pyto.spec((32, 64), "int32"), pyto.spec((32, 64), "int32")]
    rep = pyto.run(dumps, *specs, blocks=2, mode="timing")
    assert len(rep.dumps) == 7 and all(d.data is None for d in rep.dumps)
    assert sorted(d.shape for d in rep.dumps)[0] == (2, 2, 4)
    assert all("(timing mode: no data)" in e for e in rep.printed)


@pl.jit
def dn_dump(x: pl.Tensor[[1, 64], pl.DT_FP32]):
    row = pl.make_tile(vec([1, 64]), addr=0x0)
    col = pl.make_tile(vec([64, 1], layout=pl.DN), addr=0x0)
    with pl.section_vector():
        pl.load(row, x, [0, 0])
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
        pl.dump_data(col, offsets=[3, 0], shapes=[4, 1])


def test_dump_data_of_a_dn_view_is_in_its_own_terms():
    x = RNG.random((1, 64), np.float32)
    (d,) = dn_dump(x).dumps
    assert d.shape == (4, 1)
    np.testing.assert_array_equal(d.data, x[0, 3:7].reshape(4, 1))


@pytest.mark.parametrize("make, call, err, text", [
    (lambda: pl.make_tile(mat([32, 32]), addr=0), lambda t, x: pl.dump_data(t), pyto.KernelError,
     r"cannot print .*MemorySpace\.Mat"),
    (lambda: pl.make_tile(acc([32, 32]), addr=0), lambda t, x: pl.dump_data(t), pyto.KernelError,
     r"needs workspace="),
    (lambda: pl.make_tile(acc([32, 32]), addr=0), lambda t, x: pl.dump_data(t, workspace=x), pyto.UnsupportedError,
     r"Acc tile through a workspace is not built"),
    (lambda: pl.make_tile(vec([16, 64]), addr=0), lambda t, x: pl.dump_data(t, workspace=x), pyto.KernelError,
     r"workspace= is for Acc tiles"),
    (lambda: pl.make_tile(vec([16, 64]), addr=0), lambda t, x: pl.dump_data(x, workspace=x), pyto.KernelError,
     r"workspace= is for Acc tiles; .* is a GM tensor"),
    (lambda: pl.make_tile(vec([16, 64]), addr=0), lambda t, x: pl.dump_data(t, offsets=[0, 0]), pyto.KernelError,
     r"takes offsets and shapes together"),
    (lambda: pl.make_tile(vec([16, 64]), addr=0), lambda t, x: pl.dump_data(t, [8, 0], [9, 4]),
     pyto.OutOfBoundsError, r"window at \[8, 0\] of shape \[9, 4\] runs outside"),
    (lambda: pl.make_tile(vec([16, 64]), addr=0), lambda t, x: pl.dump_data(t, [0], [4]), pyto.KernelError,
     r"takes 2 offsets and 2 shapes"),
    (lambda: pl.make_tile(vec([16, 64]), addr=0), lambda t, x: pl.dump_data(t, [0, 0], [0, 4]), pyto.KernelError,
     r"shapes must be positive"),
    (lambda: pl.make_tile(vec([16, 64]), addr=0), lambda t, x: pl.dump_data(3), pyto.KernelError,
     r"takes a Tensor or a Tile"),
    (lambda: pl.make_tile(vec([16, 64]), addr=0), lambda t, x: pl.dump_data(t, flag=3), pyto.KernelError,
     r"flag= takes a string"),
])
def test_dump_data_misuse(make, call, err, text):
    @pl.jit
    def misuse(x: pl.Tensor[[32, 32], pl.DT_FP32]):
        t = make()
        with pl.section_vector() if t.buffer is pl.MemorySpace.Vec else pl.section_cube():
            call(t, x)
    with pytest.raises(err, match=text) as ei:
        misuse(np.zeros((32, 32), np.float32))
    assert "test_pro_debug.py:" in str(ei.value)
