"""pyto_kernels.bmm.bmm (numpy.matmul semantics over the planner's branch) and the `pyto bmm` command.

Results are checked with pyto_kernels.bmm.api.check: int8 exactly (as int32), floats against float64 numpy
within pyto.testing.matmul_bound (the bias one more exact term).
"""
import json
import re

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pyto
from pyto_kernels.bmm import api, bmm, legal_branches, plan
from pyto_kernels.bmm.api import check, random_inputs, reference
from pyto_kernels.bmm.cost import roofline_us
from pyto.cli import main
from pyto.errors import PlanError, ShapeError, UnsupportedError

CHIP = pyto.load_chip("ascend950pr")
DTYPES = ["fp16", "bf16", "fp32", "int8"]
OUT = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp32": np.float32, "int8": np.int32}   # numpy.matmul's,
# but int8 accumulates and returns int32 (the cube's)


def _ok(a_shape, b_shape, dt="fp16", bias_shape=None, seed=0, **kw):
    a, b, bias = random_inputs(a_shape, b_shape, dt, bias_shape, seed=seed)
    c, rep = bmm(a, b, bias, report=True, **kw)
    why = check(c, a, b, bias, transpose_a=kw.get("transpose_a", False), transpose_b=kw.get("transpose_b", False))
    assert not why, f"{a_shape} @ {b_shape} {dt} bias {bias_shape} {kw}: {why}"
    return c, rep


# ---- numpy.matmul semantics ----------------------------------------------------------------------------
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("a_shape,b_shape", [((40, 50), (50, 30)),                  # 2-D
                                             ((3, 40, 50), (3, 50, 30)),            # equal batches
                                             ((2, 1, 17, 40), (3, 40, 33)),         # cross broadcast, 2 batch dims
                                             ((1, 17, 40), (4, 40, 33))])           # BatchA = 1
def test_matches_numpy_matmul(dt, a_shape, b_shape):
    c, _ = _ok(a_shape, b_shape, dt)
    want = np.matmul(np.zeros(a_shape, np.float32), np.zeros(b_shape, np.float32))
    assert c.shape == want.shape and c.dtype == OUT[dt]


@pytest.mark.parametrize("bias_shape", [(33,), (1, 33), (4, 1, 33), (2, 4, 1, 33), (2, 1, 1, 33)])
def test_bias_shapes(bias_shape):
    _ok((2, 4, 17, 40), (2, 4, 40, 33), "fp16", bias_shape)


def test_transpose_flags_read_dn_operands():
    a, b, bias = random_inputs((3, 40, 17), (3, 33, 40), "bf16", (33,), seed=3)    # A [B, K, M], B [B, N, K]
    c = bmm(a, b, bias, transpose_a=True, transpose_b=True)
    assert c.shape == (3, 17, 33)
    assert not check(c, a, b, bias, transpose_a=True, transpose_b=True)


def test_inputs_untouched_and_read_only_inputs_work():
    a, b, bias = random_inputs((2, 20, 30), (2, 30, 25), "fp16", (25,))
    copies = [x.copy() for x in (a, b, bias)]
    for x in (a, b, bias):
        x.flags.writeable = False
    c = bmm(a, b, bias)
    assert not check(c, a, b, bias)
    assert all(np.array_equal(x, y) for x, y in zip((a, b, bias), copies))


# ---- every legal branch: correct, and no faster than the roofline ----------------------------------------
@pytest.mark.parametrize("a_shape,b_shape,dt", [((4, 48, 64), (4, 64, 40), "fp16"),
                                                ((1, 30, 96), (3, 96, 20), "int8"),
                                                ((64, 2, 1), (64, 1, 3), "bf16")])
def test_every_legal_branch_is_correct_and_respects_the_roofline(a_shape, b_shape, dt):
    p0 = plan(a_shape, b_shape, dt, bias=True)
    roof = roofline_us(p0.problem, CHIP)
    ran = []
    for branch in legal_branches(a_shape, b_shape, dt, bias=True):
        try:
            _, rep = _ok(a_shape, b_shape, dt, (b_shape[-1],), branch=branch)
        except UnsupportedError:         # a branch whose kernel is not built yet
            continue
        assert rep.time_us >= roof * (1 - 1e-9), f"{branch}: {rep.time_us} us beats the roofline {roof} us"
        ran.append(branch)
    assert p0.branch in ran


def test_timing_mode_on_specs_returns_none_and_a_report():
    a, b = pyto.spec((8, 256, 512), "fp16"), pyto.spec((512, 256), "fp16")
    c, rep = bmm(a, b)
    assert c is None and isinstance(rep, pyto.Report) and rep.mode == "timing"
    c, rep2 = bmm(a, b, pyto.spec((256,), "fp16"), report=True)
    assert c is None and rep2.mode == "timing"
    p = plan(a.shape, b.shape, "fp16")
    assert rep.time_us >= roofline_us(p.problem, CHIP) and rep.cycles == pytest.approx(rep.time_us * CHIP.clock_ghz * 1e3)


# ---- errors --------------------------------------------------------------------------------------------
def test_bad_input_raises_shape_error():
    a, b, _ = random_inputs((2, 8, 16), (2, 16, 8), "fp16")
    with pytest.raises(ShapeError, match="K mismatch"):
        bmm(a, b[:, :5])
    with pytest.raises(ShapeError, match="one dtype"):
        bmm(a, b.astype(np.float32))
    with pytest.raises(ShapeError, match="float64"):
        bmm(a.astype(np.float64), b.astype(np.float64))
    with pytest.raises(ShapeError, match="0-D"):
        bmm(a[0, 0, 0], b)
    with pytest.raises(ShapeError, match="broadcast"):
        bmm(np.zeros((2, 8, 16), np.float16), np.zeros((3, 16, 8), np.float16))
    with pytest.raises(ShapeError, match="bias"):
        bmm(a, b, np.zeros((2, 2, 8), np.float16))
    with pytest.raises(ShapeError, match="bias"):
        bmm(a, b, np.zeros(9, np.float16))
    ai, bi, _ = random_inputs((2, 8, 16), (2, 16, 8), "int8")
    with pytest.raises(ShapeError, match="bias"):
        bmm(ai, bi, np.zeros(8, np.float16))            # an int8 bmm takes an integer bias
    with pytest.raises(ShapeError, match="not a mix"):                    # no silent switch to timing mode
        bmm(pyto.spec(a.shape, "fp16"), b)


def test_forcing_a_branch_whose_preconditions_fail_raises_plan_error():
    a, b, _ = random_inputs((2, 8, 64), (2, 64, 8), "fp16")
    with pytest.raises(PlanError, match="K = 0 or K = 1"):
        bmm(a, b, branch="special")
    with pytest.raises(PlanError, match="BatchA = 1 or BatchB = 1"):
        bmm(a, b, branch="to_matmul")
    with pytest.raises(PlanError, match="unknown branch"):
        bmm(a, b, branch="fastest")
    e, f, _ = random_inputs((2, 8, 0), (2, 0, 8), "fp16")
    with pytest.raises(PlanError, match="use special"):
        bmm(e, f, branch="asw_basic")


def test_a_branch_without_a_kernel_raises_unsupported_error(monkeypatch):
    monkeypatch.setitem(api.BRANCH_MODULES, "asw_basic", "pyto_kernels.bmm._asw_basic_not_built")
    a, b, _ = random_inputs((2, 8, 64), (2, 64, 8), "fp16")
    with pytest.raises(UnsupportedError, match="'asw_basic' has no kernel yet"):
        bmm(a, b, branch="asw_basic")
    monkeypatch.setitem(api.BRANCH_MODULES, "asw_basic", "pyto_kernels._no_such_package.asw_basic")
    with pytest.raises(ModuleNotFoundError):       # a broken import inside a branch is not hidden
        bmm(a, b, branch="asw_basic")


def test_check_finds_wrong_results():
    a, b, bias = random_inputs((2, 8, 16), (2, 16, 8), "fp16", (8,))
    c = bmm(a, b, bias)
    assert check(c, a, b, bias) == ""
    bad = c.copy()
    bad[1, 2, 3] += np.float16(0.5)
    assert "beyond the bound" in check(bad, a, b, bias)
    assert "dtype" in check(c.astype(np.float32), a, b, bias)
    assert "shape" in check(c[0], a, b, bias)
    ai, bi, _ = random_inputs((8, 16), (16, 8), "int8")
    ci = bmm(ai, bi)
    assert check(ci, ai, bi) == "" and np.array_equal(ci, reference(ai, bi))
    ci[0, 0] += 1
    assert "differ" in check(ci, ai, bi)
    nan = c.copy()
    nan[0, 1, 1] = np.nan                  # NaN compares False with any bound: it must still fail
    assert "got nan" in check(nan, a, b, bias)


def test_full_load_that_does_not_fit_beside_base_k_padding_streams_instead():
    """B [2658, 40] fits L1 twice at K padded to 16 but not at K padded to base_k: the ASW tiling (and the
    ToMatmul / IterBatch / MergeBatch / StreamK plans built beside it) streamed it instead of failing."""
    a, b, _ = random_inputs((200, 16, 2658), (2658, 40), "fp16")
    c = bmm(a, b)
    assert check(c, a, b) == ""
    for br in legal_branches(a.shape, b.shape, "fp16"):
        assert plan(a.shape, b.shape, "fp16", branch=br).branch == br
    assert "asw_basic" in legal_branches(a.shape, b.shape, "fp16")


@pytest.mark.parametrize("a_shape,b_shape,ta,tb", [((64,), (3, 64, 20), False, False), ((5, 64), (64,), False, False),
                                                   ((64,), (64,), False, False), ((2, 7, 64), (64,), False, False),
                                                   ((64,), (3, 20, 64), True, True)])
def test_vectors_are_promoted_as_numpy_matmul_does(a_shape, b_shape, ta, tb):
    a, b, _ = random_inputs(a_shape, b_shape, "fp16")
    c = bmm(a, b, transpose_a=ta, transpose_b=tb)
    assert c.shape == np.matmul(a, np.swapaxes(b, -1, -2) if tb and b.ndim > 1 else b).shape
    assert check(c, a, b, transpose_a=ta, transpose_b=tb) == ""


def test_ragged_list_input_is_a_shape_error():
    with pytest.raises(ShapeError, match="not an array"):
        bmm([[1, 2], [3]], np.ones((2, 3), np.float16))


def test_int8_bias_counts_as_int32_in_the_roofline():
    p = plan((64, 1, 1), (64, 1, 1024), "int8", bias=(64, 1, 1024)).problem
    assert p.compulsory_bytes == 64 * 1 + 64 * 1024 + 64 * 1024 * 4 + 64 * 1024 * 4


@pytest.mark.parametrize("bias_shape,rows", [((4096,), 1), ((1, 4096), 1), ((1024, 1, 4096), 1024), (True, 1)])
def test_the_roofline_counts_the_bias_rows_there_are(bias_shape, rows):
    """A bias [N] shared by every batch is read once, not B times (a planner-research review found a run at
    178% of the roofline it printed); a bias of unknown shape counts one row, keeping the bound a lower bound."""
    a, b = pyto.spec((1024, 1, 32), "fp32"), pyto.spec((1, 32, 4096), "fp32")
    p = plan(a.shape, b.shape, "fp32", bias=bias_shape).problem
    assert p.bias and p.bias_rows == rows
    assert p.compulsory_bytes == (1024 * 32 + 32 * 4096 + rows * 4096 + 1024 * 4096) * 4
    if bias_shape is not True:
        _, rep = bmm(a, b, pyto.spec(bias_shape, "fp32"), report=True)
        assert rep.time_us >= roofline_us(p, pyto.load_chip("ascend950pr"))


# ---- the `pyto bmm` command ----------------------------------------------------------------------------
def test_cli_bmm_runs_checks_and_explains(capsys):
    assert main(["bmm", "3", "40", "50", "60", "--batch-b", "1", "--dtype", "fp16", "--bias"]) == 0
    out = capsys.readouterr().out
    for part in ("Chosen branch: to_matmul", "T_total", "bottleneck", "roofline", "achieved", "check: PASS"):
        assert part in out, part


def test_cli_bmm_int8_transposes_and_trace(capsys, tmp_path):
    trace = tmp_path / "bmm.json"
    assert main(["bmm", "2", "17", "33", "1", "--dtype", "int8", "--branch", "special", "--transpose-a",
                 "--transpose-b", "--bias", "--trace", str(trace), "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "check: PASS (exact int32)" in out and "Chosen branch: special" in out
    assert json.loads(trace.read_text())["traceEvents"]


def test_cli_bmm_timing_mode(capsys):
    assert main(["bmm", "64", "256", "256", "1024", "--batch-a", "1", "--timing"]) == 0
    out = capsys.readouterr().out
    assert "timing mode" in out and "check: skipped" in out


def test_cli_bmm_names_its_dtypes_cores_and_where_reduce_applies(capsys):
    with pytest.raises(SystemExit) as e:
        main(["bmm", "1", "16", "16", "16", "--dtype", "int32"])
    assert e.value.code == 2 and "invalid choice: 'int32'" in capsys.readouterr().err
    assert main(["bmm", "2", "32", "32", "64", "--dtype", "fp16", "--reduce", "atomic", "--timing"]) == 0
    out, err = capsys.readouterr()
    assert "--reduce atomic applies to StreamK; the plan is" in err
    assert re.search(r"cores +\d+ AIC(?: \+ \d+ AIV)?; last to finish", out), out


def test_cli_bmm_failing_check_and_errors_exit_1(capsys, monkeypatch):
    monkeypatch.setattr(api, "compare", lambda *a, **k: api.Comparison("wrong on purpose", 2.0, 0.5, 4.0))
    assert main(["bmm", "2", "16", "16", "16", "--dtype", "fp32"]) == 1
    assert "check: FAIL (float64 numpy within matmul_bound): wrong on purpose; max |error| 2 (bound there 0.5), " \
           "worst |error|/bound 4 of at most 1" in capsys.readouterr().out
    assert main(["bmm", "2", "16", "16", "16", "--branch", "special"]) == 1
    assert "PlanError" in capsys.readouterr().err
    assert main(["bmm", "4", "16", "16", "16", "--batch-a", "3"]) == 1
    assert "ShapeError" in capsys.readouterr().err


# ---- property test: whatever the planner picks matches numpy ---------------------------------------------
@settings(max_examples=12)
@given(kind=st.sampled_from(["same", "a1", "b1", "cross", "2d"]), B=st.integers(1, 4), M=st.integers(1, 48),
       N=st.integers(1, 48), K=st.sampled_from([0, 1, 15, 16, 33, 70]), dt=st.sampled_from(DTYPES),
       ta=st.booleans(), tb=st.booleans(), with_bias=st.booleans())
def test_bmm_property(kind, B, M, N, K, dt, ta, tb, with_bias):
    batch_a, batch_b = {"same": ((B,), (B,)), "a1": ((1,), (B,)), "b1": ((B,), ()), "cross": ((B, 1), (1, 2)),
                        "2d": ((), ())}[kind]
    a_shape = batch_a + ((K, M) if ta else (M, K))
    b_shape = batch_b + ((N, K) if tb else (K, N))
    c, _ = _ok(a_shape, b_shape, dt, (N,) if with_bias else None, seed=M + 7 * N, transpose_a=ta, transpose_b=tb)
    assert c.shape == np.broadcast_shapes(batch_a, batch_b) + (M, N)


@pytest.mark.parametrize("args,text", [(["-1", "16", "16", "16"], "argument B: -1 is negative"),
                                       (["2", "16", "16", "16", "--seed", "-1"], "argument --seed: -1 is negative"),
                                       (["2", "16", "16", "x"], "'x' is not an integer"),
                                       (["2", "16", "16", "16", "--trace", "/nonexistent/dir/t.json"],
                                        "No such file or directory"),
                                       (["2", "16", "16", "16", "--trace", "/proc/t.json"], "cannot write"),
                                       (["2", "16", "16", "16", "--trace", "/etc/passwd/t.json"], "Not a directory")])
def test_cli_bad_arguments_exit_2_before_running(args, text, capsys, tmp_path):
    with pytest.raises(SystemExit) as ei:
        main(["bmm", *args])
    assert ei.value.code == 2 and text in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["bmm", "2", "16", "16", "16", "--trace", str(tmp_path)])     # a directory
    assert "Is a directory" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())      # the probe left nothing behind


def test_cli_bmm_refuses_what_no_chip_or_host_holds(capsys):
    """A problem larger than the chip's GM is a PlanError at once (the planner ran for minutes, found by an
    onboarding helper); full mode on a shape this machine cannot hold says to use --timing instead of a numpy
    allocation traceback."""
    assert main(["bmm", "99999999999999999999", "256", "256", "512", "--timing"]) == 1
    err = capsys.readouterr().err
    assert "PlanError" in err and "B of GM; ascend950pr has 137,438,953,472 B" in err, err
    assert main(["bmm", "1", "100000", "100000", "100000"]) == 1      # a refusal (pyto/emulator/admission.py)
    err = capsys.readouterr().err
    assert "CapacityError" in err and "of host memory" in err and "--timing" in err, err


def test_cli_bmm_timing_without_race_checks(capsys):
    assert main(["bmm", "32", "256", "256", "512", "--timing", "--no-race-check"]) == 0
    assert "timing mode" in capsys.readouterr().out
    assert main(["bmm", "2", "16", "16", "16", "--no-race-check"]) == 2
    assert "--no-race-check applies to --timing" in capsys.readouterr().err


def test_cli_bmm_trace_that_cannot_be_written_keeps_the_verdict(capsys, monkeypatch, tmp_path):
    """The check runs before the trace is written; a write that fails then (a full disk) is exit 2, as a bad
    path given up front is."""
    def full_disk(self, path):
        raise pyto.PytoError(f"cannot write the trace to {path!r}: No space left on device")

    monkeypatch.setattr(pyto.Report, "save_trace", full_disk)
    assert main(["bmm", "1", "64", "64", "64", "--dtype", "fp16", "--trace", str(tmp_path / "t.json")]) == 2
    captured = capsys.readouterr()
    assert "check: PASS" in captured.out and "cannot write the trace" in captured.err
