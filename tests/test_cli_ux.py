"""Issue 24, hardening as a new user meets it: progress on a terminal (and nothing elsewhere), `pyto bmm --quiet`
and the check's error figures, latency-bound vs a named bound, large and gzip traces, numpy integers for sizes,
and the planner's PlanError for chip tables with tiny L0 buffers."""

import dataclasses
import gzip
import io
import json
import os
import pty
import re
import select
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import pyto
import pyto.language as pl
from pyto import progress
from pyto.emulator import jitmode
from pyto.cli import main
from pyto.report import SATURATED, Report
from pyto_kernels.bmm import bmm, plan
from pyto_kernels.bmm.api import compare, random_inputs
from pyto_kernels.examples.matmul_pingpong import matmul_pingpong
from pro_kernels import mat

SMALL = ["bmm", "3", "40", "50", "60", "--batch-b", "1", "--dtype", "fp16", "--bias"]


def _pingpong_arrays(M=128, N=128, K=128):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    return a, b, np.zeros((M, N), np.float16)


# ---- progress ------------------------------------------------------------------------------------------------
def _run_on_pty(code: str, timeout: float = 240.0) -> tuple[str, str]:
    """Run `code` in a fresh interpreter whose stderr is a pseudo-terminal: (what the terminal got, stdout)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=slave, cwd=os.getcwd())
    os.close(slave)
    got, end = [], time.monotonic() + timeout
    while time.monotonic() < end:
        ready, _, _ = select.select([master], [], [], 1.0)
        if not ready:
            if proc.poll() is not None:
                break
            continue
        try:
            chunk = os.read(master, 65536)
        except OSError:        # EIO: the child closed its side
            break
        if not chunk:
            break
        got.append(chunk)
    out = proc.communicate(timeout=timeout)[0]
    os.close(master)
    assert proc.returncode == 0, out.decode()[-2000:]
    return b"".join(got).decode(), out.decode()


def test_progress_is_drawn_on_a_terminal_and_erased():
    code = ("import pyto.progress as pp; pp.DELAY = 0\n"
            "from pyto.cli import main\n"
            "raise SystemExit(main(['bmm', '8', '128', '128', '256', '--dtype', 'fp16', '--quiet']))")
    term, out = _run_on_pty(code)
    # sampled ten times a second: which phases show depends on the machine's speed (the phases and block counts
    # a run reports are checked below, without a clock)
    assert "\rpyto: " in term and any(f"pyto: {name}" in term for name in
                                      ("tracing", "auto-sync", "scheduling", "checking", "data", "comparing")), term
    last = term.rsplit("\r", 2)
    assert last[-1] == "" and last[-2].strip() == "", term[-200:]      # the line is blanked at the end
    assert "\r" not in out and "pyto: tracing" not in out              # stdout is a pipe: the report alone
    assert len(out.splitlines()) == 3


def test_no_progress_when_stderr_is_not_a_terminal(capsys):
    assert main(SMALL + ["--quiet"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "\r" not in out
    proc = subprocess.run([sys.executable, "-c", "import pyto.progress as pp; pp.DELAY = 0\nfrom pyto.cli import main\n"
                           f"raise SystemExit(main({SMALL + ['--quiet']!r}))"], capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


class _FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_run_reports_its_phases_once_a_block_not_per_instruction(monkeypatch):
    calls = []
    monkeypatch.setattr(progress.Progress, "phase", lambda self, *a: calls.append(a))
    before = threading.active_count()
    with progress.shown(stream=io.StringIO()):          # not a terminal: no line, no thread
        assert not progress.active() and threading.active_count() == before
        pyto.run(matmul_pingpong, *_pingpong_arrays(), blocks=4, TM=64, TN=64, TK=64)
    assert calls == []
    with progress.shown(stream=_FakeTerminal()):
        assert progress.active()
        rep = pyto.run(matmul_pingpong, *_pingpong_arrays(), blocks=4, TM=64, TN=64, TK=64)
    names = [c[0] for c in calls]
    assert names[0] == "tracing" and "auto-sync" in names
    assert names[-3:] == ["scheduling", "checking", "data"]
    assert ("tracing", 4, 4) in calls and len(calls) <= 2 * 4 + 4 < rep.instructions
    assert not progress.active()


def test_the_line_names_phase_blocks_seconds_and_a_first_run_compile():
    term = _FakeTerminal()
    p = progress.Progress(term, interval=0.01, delay=0.0)
    try:
        p.phase("tracing", 3, 32)
        assert p.line() == "pyto: tracing 3/32 blocks, 0 s"

        class Cold:                 # a numba dispatcher that has not compiled yet, and has no cache on disk
            overloads: dict = {}
            py_func = staticmethod(lambda: None)

            class _cache:
                class _cache_file:
                    @staticmethod
                    def _load_index() -> dict:
                        return {}
        cold = Cold()
        p._cold = {"scheduling": [cold]}
        p.phase("scheduling")
        assert jitmode.pick(cold, 10, 100) is not cold      # small work: plain Python, nothing compiles
        assert p.line() == "pyto: scheduling, 0 s"
        assert jitmode.pick(cold, 1000, 100) is cold        # large: it compiles, and the line says so
        assert p.line().startswith("pyto: scheduling, 0 s (first large run: numba compiles")
        Cold.overloads = {"sig": object()}
        assert p.line() == "pyto: scheduling, 0 s"
        time.sleep(0.1)
    finally:
        p.close()
    text = term.getvalue()
    assert text.startswith("\rpyto: ") and text.endswith("\r")


def test_numba_functions_that_ran_are_not_cold(monkeypatch):
    from pyto.emulator.check import checkcore
    from pyto.emulator.schedule import simulate
    monkeypatch.setenv("PYTO_NUMBA", "1")          # compiled (on a fresh install a small run's loops stay Python)
    pyto.run(matmul_pingpong, *_pingpong_arrays(), blocks=1, TM=64, TN=64, TK=64)
    cold = [d for ds in progress._cold_jits().values() for d in ds]
    assert simulate.simulate not in cold and checkcore.check not in cold
    assert all(not d.overloads for d in cold)


# ---- --quiet and the check's figures --------------------------------------------------------------------------
def test_quiet_prints_the_plan_headline_and_check_with_its_figures(capsys):
    assert main(SMALL + ["--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3, lines
    assert lines[0].startswith("BMM plan on ascend950pr: C[3, 40, 50] = A @ B + bias (K = 60, fp16) -> ")
    assert "T_total" in lines[1] and "latency-bound" in lines[1]
    assert lines[2].startswith("check: PASS (float64 numpy within matmul_bound): max |error| ")
    assert "(bound there " in lines[2] and "worst |error|/bound" in lines[2]
    assert main(["bmm", "2", "17", "33", "1", "--dtype", "int8", "--branch", "special", "-q"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "check: PASS (exact int32)"
    assert main(SMALL) == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) > 40 and "check: PASS (float64 numpy within matmul_bound): max |error|" in out


def test_compare_gives_the_largest_error_and_the_bound_it_was_held_to():
    a, b, bias = random_inputs((2, 40, 60), (2, 60, 50), "fp16", (2, 1, 50))
    c = bmm(a, b, bias)
    ok = compare(c, a, b, bias)
    ref = a.astype(np.float64) @ b.astype(np.float64) + bias
    assert ok.why == "" and ok.max_error == pytest.approx(np.abs(c - ref).max())
    assert 0 < ok.max_error <= ok.bound and ok.ratio <= 1
    c[1, 2, 3] += 10
    bad = compare(c, a, b, bias)
    assert "1 of 4000 elements beyond the bound" in bad.why and bad.ratio > 1 and bad.max_error > 9
    assert "worst at (1, 2, 3)" in bad.why and f"max |error| {bad.max_error:.3g} (bound there" in bad.figures()
    ai, bi, _ = random_inputs((2, 8, 16), (2, 16, 8), "int8")
    ci = bmm(ai, bi)
    assert compare(ci, ai, bi).figures() == ""
    ci[0, 0, 0] += 3
    assert compare(ci, ai, bi).max_error == 3 and "first at (0, 0, 0)" in compare(ci, ai, bi).why


# ---- what bounds the run --------------------------------------------------------------------------------------
def _report(pipes: dict, cycles: float = 1000.0, gm_bytes: float = 0.0) -> Report:
    return Report("k", "chip", 1, "timing", cycles, 1.0, 10, pipes, gm_bytes=gm_bytes, gm_bytes_per_cycle=1.0)


def test_bound_names_a_saturated_pipe_or_the_gm_channel_and_else_latency():
    assert _report({"MTE2": 700.0, "M": 200.0}).bound == "MTE2-bound"
    assert _report({"MTE2": 170.0, "M": 20.0}).bound == "latency-bound"
    assert _report({"MTE2": 170.0}).bottleneck == "MTE2"              # still the busiest pipe
    assert _report({"MTE2": 500.0}, gm_bytes=900.0).bound == "GM-bandwidth-bound"
    assert _report({"M": 980.0}, gm_bytes=700.0).bound == "M-bound"
    edge = SATURATED * 1000.0
    assert _report({"M": edge}).bound == "M-bound" and _report({"M": edge - 1}).bound == "latency-bound"
    assert _report({}).bound == "none"


def test_a_small_run_is_latency_bound_and_says_what_waits():
    a, b, c = _pingpong_arrays(64, 64, 64)
    rep = pyto.run(matmul_pingpong, a, b, c, blocks=1, TM=64, TN=64, TK=64)
    assert rep.bound == "latency-bound" and rep.busiest_share < SATURATED
    text = rep.summary()
    assert "bound       latency-bound: no pipe near saturation (the busiest, " in text
    assert "block 0 AIC, the last to finish, has no pipe busy " in text and "bottleneck  " not in text
    idle = float(text.split("has no pipe busy ")[1].split("%")[0])
    assert 100 * (1 - rep.busiest_share) >= idle > 0
    assert rep.headline().startswith("matmul_pingpong on ascend950pr: 1 block(s), full mode: T_total ")


def test_a_saturated_run_names_its_bound_and_versus_says_it():
    shape_a, shape_b = (4, 512, 4096), (4, 4096, 512)
    with pyto.run_options(check=False):
        _, rep = bmm(pyto.spec(shape_a, "bf16"), pyto.spec(shape_b, "bf16"), report=True)
    assert rep.bound == f"{rep.bottleneck}-bound" and rep.busiest_share >= SATURATED
    assert f"  bound       {rep.bottleneck}-bound: {rep.bottleneck} busy " in rep.summary()
    row = plan(shape_a, shape_b, "bf16").estimate.versus(rep).splitlines()[-1]
    assert row.startswith("bottleneck: estimate ") and f"emulated {rep.bottleneck}-bound (busiest pipe" in row
    with pyto.run_options(check=False):
        _, small = bmm(pyto.spec((2, 128, 128), "bf16"), pyto.spec((2, 128, 128), "bf16"), report=True)
    row = plan((2, 128, 128), (2, 128, 128), "bf16").estimate.versus(small).splitlines()[-1]
    assert "emulated latency-bound (busiest pipe " in row


# ---- traces: size warning, gzip -------------------------------------------------------------------------------
def test_a_json_gz_trace_is_gzip_and_holds_the_same_events(capsys, tmp_path):
    plain, packed = tmp_path / "t.json", tmp_path / "t.json.gz"
    assert main(SMALL + ["-q", "--trace", str(plain)]) == 0
    assert main(SMALL + ["-q", "--trace", str(packed)]) == 0
    out, err = capsys.readouterr()
    assert f"trace: written to {packed} (Chrome / Perfetto trace-event JSON, gzip)" in out and err == ""
    with gzip.open(packed, "rt") as fh:
        events = json.load(fh)
    assert events == json.loads(plain.read_text())
    assert events["traceEvents"] and events["otherData"]["kernel"] == "to_matmul_kernel"
    assert packed.stat().st_size < plain.stat().st_size / 5


def test_a_large_trace_is_announced_before_it_is_written(capsys, tmp_path, monkeypatch):
    a, b, c = _pingpong_arrays()
    rep = pyto.run(matmul_pingpong, a, b, c, blocks=2, TM=64, TN=64, TK=64)
    path = tmp_path / "t.json"
    rep.save_trace(str(path))
    assert 0.5 < rep.trace_bytes(str(path)) / path.stat().st_size < 2
    assert rep.trace_bytes("t.json.gz") < rep.trace_bytes("t.json") / 10
    assert rep.trace_warning("t.json") == ""
    assert "write it as FILE.json.gz for about" in rep.trace_warning("t.json", limit=1)
    assert ".json.gz for" not in rep.trace_warning("t.json.gz", limit=1)
    monkeypatch.setattr(pyto.report, "LARGE_TRACE_BYTES", 1)
    assert main(SMALL + ["-q", "--trace", str(tmp_path / "big.json")]) == 0
    err = capsys.readouterr().err
    assert "pyto bmm: the trace of " in err and "instructions will be about" in err and ".json.gz" in err


# ---- numpy integers for sizes ---------------------------------------------------------------------------------
def test_numpy_integers_are_blocks_static_sizes_and_limits():
    a, b, c = _pingpong_arrays()
    i64 = np.int64
    rep = pyto.run(matmul_pingpong, a, b, c, blocks=i64(4), TM=i64(64), TN=np.int32(64), TK=np.uint16(64))
    assert rep.blocks == 4 and type(rep.blocks) is int
    assert np.allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=2e-2, atol=5e-2)
    assert pyto.compile(matmul_pingpong, a, b, c, blocks=np.int16(2), TM=64, TN=64, TK=64).report.blocks == 2
    with pyto.run_options(max_block_instructions=i64(10)):
        with pytest.raises(pyto.CapacityError, match="more than 10 instructions"):
            pyto.run(matmul_pingpong, a, b, c, TM=64, TN=64, TK=64)


@pytest.mark.parametrize("blocks", [True, np.bool_(True), 2.0, np.float64(2), "2"])
def test_bools_floats_and_strings_are_still_not_blocks(blocks):
    with pytest.raises(pyto.KernelError, match=r"blocks must be an int in 1\.\.32"):
        pyto.run(matmul_pingpong, *_pingpong_arrays(), blocks=blocks, TM=64, TN=64, TK=64)


def test_numpy_integers_in_tile_shapes_ranges_and_static_tuples():
    i64 = np.int64

    @pl.kernel
    def sizes(x, *, T, group):
        t = pl.alloc(pl.L1, [T, i64(16)], pl.DT_FP16)
        for k in pl.range(i64(0), group[1], i64(16)):
            pl.load(t, x, [0, k])

    x = np.zeros((16, 32), np.float16)
    assert pyto.run(sizes, x, T=i64(16), group=(i64(1), i64(32))).instructions == 2

    @pl.jit
    def placed(x: pl.Tensor[[16, 16], pl.DT_FP16]):
        t = pl.make_tile(mat([i64(16), np.int32(16)]), addr=i64(0), size=i64(512))
        pl.load(t, x, [0, 0])

    assert placed(np.zeros((16, 16), np.float16)).instructions == 1
    with pytest.raises(pyto.ShapeError, match="TileType shape must be two positive ints"):
        mat([True, 16])
    with pytest.raises(pyto.ShapeError, match="TileType shape must be two positive ints"):
        mat([16.0, 16])

    @pl.kernel
    def float_range(x):
        for _ in pl.range(2.0):
            pass
    with pytest.raises(pyto.KernelError, match="pl.range bounds must be integers, got 2.0"):
        pyto.run(float_range, x)


# ---- the planner on chip tables with tiny L0 buffers ----------------------------------------------------------
def _tiny_l0_table(tmp_path, **sizes) -> pyto.Chip:
    """The 950's table with some buffers shrunk to small legal sizes (a chip table written in the test)."""
    text = open(pyto.load_chip("ascend950pr").source).read()
    defaults = {"L0A": 65536, "L0B": 65536, "L0C": 262144}
    for buf, size in sizes.items():
        assert f"{buf} = {defaults[buf]}" in text
        text = text.replace(f"{buf} = {defaults[buf]}", f"{buf} = {size}", 1)
    path = tmp_path / "tiny.toml"
    path.write_text(text)
    return pyto.load_chip(str(path))


@pytest.mark.parametrize("sizes,match", [
    (dict(L0B=512, L0C=1024), r"iter_batch: L0C 1024 B on .* holds no 2 copies of the smallest tile \(16 x 16 fp32\): "
                              r"needs 2048 B"),
    (dict(L0B=512), r"iter_batch: L0B 512 B on .* holds no 2 copies of the smallest tile \(16 x 16 fp16\): needs 1024 B"),
    (dict(L0A=512, L0B=1024, L0C=2048), r"iter_batch: L0A 512 B .* needs 1024 B"),
])
def test_tiny_l0_buffers_are_a_plan_error_naming_the_buffer(tmp_path, sizes, match):
    chip = _tiny_l0_table(tmp_path, **sizes)
    with pytest.raises(pyto.PlanError, match=match):
        plan((64, 32, 32), (64, 32, 32), "fp16", chip=chip, branch="iter_batch")
    try:                                 # the planner's own choice: another branch, or a PlanError, never a crash
        p = plan((64, 32, 32), (64, 32, 32), "fp16", chip=chip)
    except pyto.PlanError:
        return
    assert p.branch != "iter_batch"


def test_planner_never_divides_by_a_zero_tile_on_small_legal_tables():
    base = pyto.load_chip("ascend950pr")
    rng = np.random.default_rng(24)
    shapes = [((4, 16, 16), (4, 16, 16)), ((40, 128, 1), (40, 1, 64)), ((8, 128, 1), (8, 1, 64)),
              ((1, 500, 31), (200, 31, 16)), ((64, 32, 32), (64, 32, 32)), ((2, 64, 1), (2, 1, 256))]
    for _ in range(60):
        bufs = dict(base.buffers)
        bufs.update(L0A=int(rng.choice([512, 1024, 2048, 65536])), L0B=int(rng.choice([512, 1024, 4096, 65536])),
                    L0C=int(rng.choice([1024, 2048, 8192, 262144])))
        chip = dataclasses.replace(base, buffers=bufs)
        sa, sb = shapes[rng.integers(len(shapes))]
        for branch in (None, "iter_batch"):
            for dt in ("fp16", "fp32", "int8"):
                try:
                    plan(sa, sb, dt, chip=chip, branch=branch, bias=bool(rng.integers(2)))
                except pyto.PlanError:
                    pass


def test_no_cube_tile_fitting_l1_names_what_l1_holds():
    """The cube tiling's refusal names L1's size and which sides it would hold whole (or none)."""
    base = pyto.load_chip("ascend950pr")
    chip = dataclasses.replace(base, buffers=dict(base.buffers, L1=1024))
    with pytest.raises(pyto.PlanError) as e:
        plan((4, 256, 256), (4, 256, 256), "fp16", chip=chip, branch="asw_basic")
    msg = str(e.value)
    assert re.search(r"no cube tile of \d+x\d+x\d+ fits L1 1024 B \((no side held whole in L1|[AB]( and B)? held "
                     r"whole in L1 x \d)\)", msg), msg


def test_pyto_check_draws_a_bar_of_the_kernels_on_a_terminal_only(tmp_path):
    """pyto check's line: a bar of the kernels done before the run's phase; on a pty only (not with --json, not on
    a pipe)."""
    p = progress.Progress(_FakeTerminal(), interval=0.01, delay=0.0)
    try:
        p.task = f"check {progress.bar(1, 4, width=8)} softmax"
        p.phase("tracing", 2, 4)
        assert p.line() == "pyto: check [##......] 1/4 softmax: tracing 2/4 blocks, 0 s"
    finally:
        p.close()
    assert progress.bar(0, 3, width=3) == "[...] 0/3" and progress.bar(3, 3, width=3) == "[###] 3/3"
    kernel = tmp_path / "two.py"
    kernel.write_text(
        "import pypto_pro.language as pl\n\n"
        "def k(x: pl.Tensor[[16, 64], pl.DT_FP32], y: pl.Tensor[[16, 64], pl.DT_FP32]):\n"
        "    t = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec), addr=0)\n"
        "    with pl.section_vector():\n"
        "        pl.load(t, x, [0, 0])\n"
        "        pl.system.bar_all()\n"
        "        pl.store(y, t, [0, 0])\n\n"
        "first = pl.jit(k, name='first')\nsecond = pl.jit(k, name='second')\n")
    code = ("import pyto.progress as pp; pp.DELAY = 0; pp.INTERVAL = 0.001\n"
            "import pyto.checker.runner as cc, time\n"
            "real = cc.check\n"
            "def slow(*a, **k):\n"
            "    time.sleep(0.3)\n"
            "    return real(*a, **k)\n"
            "import pyto.checker.files as cf; cf.check = slow\n"
            "from pyto.cli import main\n"
            f"raise SystemExit(main(['check', {str(kernel)!r}]))")
    term, out = _run_on_pty(code)
    assert "pyto: check [" in term and "] 0/2 first" in term and "] 1/2 second" in term, term
    assert "2 of 2 kernel(s) ok" in out and "pyto: check" not in out
