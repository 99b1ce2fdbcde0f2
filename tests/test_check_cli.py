"""`pyto check` on the kernel files of tests/check_kernels/ (PyPTO-Pro's spelling, correct kernels and one per misuse
kind): each kernel's verdict and what its message names, the exit codes (0 ok, 1 a check failed, 2 usage), the
text block, the --json document's keys (README, "pyto check"), --trace, --timing, --seed, the stand-ins for device
packages, and one run of the installed command in a process of its own."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pyto.checker import load_file
from pyto.cli import main
from pyto.testing import read_trace

KERNELS = Path(__file__).parent / "check_kernels"


def _unmarked(tmp_path: Path, name: str) -> Path:
    """A copy of a kernel file without its pyto_check marker (the CLI reads the marker's shapes and scalars)."""
    import ast
    src = (KERNELS / name).read_text()
    lines = src.splitlines(keepends=True)
    for node in ast.parse(src).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            lines[node.lineno - 1:node.end_lineno] = ["\n"] * (node.end_lineno - node.lineno + 1)
    path = tmp_path / name
    path.write_text("".join(lines))
    return path

#: every kernel of check_kernels/ and its verdict: "ok", or the error its misuse should give
VERDICTS = {
    "cube_matmul.py": {"matmul_rows": "ok", "matmul_block": "ok"},
    "vector_kernels.py": {"scale_add": "ok", "relu_rows": "ok"},
    "cv_fused.py": {"matmul_bias_relu": "ok"},
    "torch_host.py": {"exp_rows": "ok"},
    "sync_misuses.py": {"wait_never_set": "DeadlockError", "missing_flag": "RaceError",
                        "unpaired_mutex_lock": "SyncError", "sync_all_mix": "SyncError"},
    "memory_misuses.py": {"overlapping_tiles": "ClobberedReadError", "ub_overflow": "CapacityError",
                          "l1_overflow": "CapacityError", "misaligned_left": "AlignmentError",
                          "never_written": "UninitializedReadError", "load_past_edge": "OutOfBoundsError"},
    "phase_misuses.py": {"k_split": "ok", "no_final_matmul": "DeadlockError", "store_without_phase": "RaceError",
                         "partial_store_in_loop": "DeadlockError", "final_never_read": "SyncError"},
    "cv_misuses.py": {"no_cross_core_wait": "RaceError", "no_cross_core_set": "DeadlockError"},
    "vector_misuses.py": {"row_max_nd_column": "ShapeError", "rows_asserted": "KernelAssertionError"},
    "sparse_matmul.py": {"sparse_matmul": "ok", "index_overwritten": "SparsityError"},
}

#: what each failing kernel's message must name: the rule broken, the object, the line's source
MESSAGES = {
    "wait_never_set": [r"waits for event \(PipeType\.MTE2->PipeType\.V, event_id 0\): never set by a matching "
                       r"pl\.system\.sync_src", r"sync_misuses\.py:\d+ pl\.system\.sync_dst\(set_pipe=P\.MTE2"],
    "missing_flag": [r"RAW hazard detected at UB: UB tile '[ab]_ub'", r"PIPE_MTE2 .* pl\.load\([ab]_ub",
                     r"PIPE_V .* pl\.add\(out_ub, a_ub, b_ub\)",
                     r"fix: pl\.system\.sync_src\(set_pipe=pl\.PipeType\.MTE2"],
    "unpaired_mutex_lock": [r"mutex id 2 on PIPE_MTE3 is never unlocked"],
    "sync_all_mix": [r"sync_all\(core_type=SyncCoreType\.MIX\) in kernel 'sync_all_mix', which runs only AIVs",
                     r"core_type=pl\.SyncCoreType\.AIV_ONLY"],
    "overlapping_tiles": [r"pl\.store reads UB tile 'x_ub'", r"last written through UB tile 'ones'",
                          r"pl\.expands\(ones, 1\.0\)"],
    "ub_overflow": [r"UB overflow on ascend950pr: 'y_ub'", r"\[0x3c000, 0x40000\)", r"by 8,192 B"],
    "l1_overflow": [r"L1 overflow on ascend950pr: 'b_mat'", r"by 65,536 B"],
    "misaligned_left": [r"'a_left' .* at address 0x100 in L0A: L0A tiles start on 512-byte boundaries",
                        r"the nearest are 0x0 and 0x200"],
    "never_written": [r"pl\.add\(x_ub, x_ub, bias_ub\): .* reads UB tile 'bias_ub'.* never written"],
    "load_past_edge": [r"at offset \[48, 0\] runs past the edge of GM tensor 'x' \[64, 128\]",
                       r"pl\.set_validshape\(tile, \[16, 128\]\)"],
    "no_final_matmul": [r"pl\.store\(c, ac, \[0, 0\], phase=pl\.STPhase\.Final\)",
                        r"unit_flag\(L0C .*\) == 1, is 0"],
    "store_without_phase": [r"RAW hazard detected at L0C", r"PIPE_M .* phase=pl\.AccPhase\.Final\)",
                            r"PIPE_FIX .* pl\.store\(c, ac, \[0, 0\]\)", r"both sides need AccPhase/STPhase"],
    "partial_store_in_loop": [r"PIPE_M: .*pl\.matmul\(ac, al, br, phase=pl\.AccPhase\.Final\)",
                              r"unit_flag\(L0C .*\) == 0, is 1"],
    "final_never_read": [r"leaves unit_flag\(L0C .*\) at 1 when the kernel ends"],
    "no_cross_core_wait": [r"hazard detected at UB: UB tile 'product'", r"PIPE_FIX \(AIC of block 0\) write: "
                           r".*pl\.move\(product, c_acc"],
    "no_cross_core_set": [r"waits for event cross-core event 0 \(AIC->AIV[01], INTRA_BLOCK/UNICAST_BLOCK\): never set"],
    "row_max_nd_column": [r"pl\.maximum\(dim=0\) out UB tile 'col' is an ND \[16, 1\] tile: declare it "
                          r"pl\.TileType\(\[16, 1\], \.\.\., layout=pl\.DN\)"],
    "rows_asserted": [r"pl\.pto_assert failed .*: Assertion failed: rows % ROWS == 0",
                      r"x has 40 rows, not a multiple of 16"],
    "index_overwritten": [r"sparse_matmul\.py:\d+ pl\.matmul_sparse\(c_l0, .*group 6 .* of column 5 has the index "
                          r"pair \(1, 0\)"],
}

#: the --json document's keys at each level (README, "pyto check --json"): each must be there
DOC_KEYS = {"pyto_check", "file", "exit_code", "standins", "kernels"}
KERNEL_KEYS = {"kernel", "file", "line", "verdict", "kind", "message", "mode", "chip", "block_dim", "inputs", "cycles",
               "time_us", "instructions", "bottleneck", "bound", "pipe_cycles", "buffers", "standins", "printed",
               "trace", "plots", "seconds"}
BUFFER_KEYS = {"buffer", "capacity", "in_use", "use", "block", "tiles", "same_in_all_blocks"}
TILE_KEYS = {"lo", "hi", "what", "line"}


def _readme_keys() -> set:
    """Every "quoted" name of the README's --json schema paragraph: the keys it documents, at any level."""
    text = (Path(__file__).parent.parent / "README.md").read_text()
    schema = text[text.index("`--json` schema"):]
    return set(re.findall(r'"([a-z_]+)"', schema[:schema.index("\n\n")]))


def _keys(obj) -> set:
    """The keys of every dict in a JSON value, at any depth (not those of the maps keyed by data: inputs, pipes)."""
    if isinstance(obj, list):
        return set().union(*map(_keys, obj)) if obj else set()
    if not isinstance(obj, dict):
        return set()
    return set(obj) | set().union(*(_keys(v) for k, v in obj.items() if k not in ("inputs", "pipe_cycles")))


def _marker(name: str) -> dict:
    """The keywords of the file's module-level pyto_check marker."""
    marks = load_file(str(KERNELS / name)).module.pytestmark
    (mark,) = [m for m in (marks if isinstance(marks, list) else [marks]) if m.name == "pyto_check"]
    return dict(mark.kwargs)


def _flags(name: str) -> list:
    """`pyto check`'s flags for what the file's marker gives: --block-dim, --shape for shapes, --scalar for values."""
    flags = []
    for key, v in _marker(name).items():
        if key == "block_dim":
            flags += ["--block-dim", str(v)]
        elif isinstance(v, tuple):
            flags += ["--shape", f"{key}={'x'.join(map(str, v))}"]
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            flags += ["--scalar", f"{key}={v}"]
        else:
            assert key == "expect", f"{name}: marker keyword {key} has no flag here"
    return flags


def _check(capsys, *argv) -> tuple:
    """(exit code, stdout, stderr) of `pyto check ARGV` run in this process."""
    code = main(["check", *map(str, argv)])
    got = capsys.readouterr()
    return code, got.out, got.err


def _json(capsys, *argv) -> dict:
    code, out, _ = _check(capsys, *argv, "--json")
    doc = json.loads(out)                         # stdout is the document alone
    assert doc["exit_code"] == code
    return doc


def _line(name: str, text: str, after: str = "") -> int:
    """The line of check_kernels/NAME that holds `text`: the first after the line holding `after`."""
    lines = (KERNELS / name).read_text().splitlines()
    start = next(i for i, src in enumerate(lines) if after in src)
    return next(i for i, src in enumerate(lines[start:], start + 1) if text in src)


def test_the_table_is_every_kernel_file_and_its_marker():
    """VERDICTS covers each file of the directory and agrees with the file's own marker (what the plugin reads)."""
    assert {p.name for p in KERNELS.glob("*.py")} == set(VERDICTS)
    for name, verdicts in VERDICTS.items():
        expect = _marker(name).get("expect", {})
        assert {k: expect.get(k, "ok") for k in verdicts} == verdicts, name
        assert set(expect) <= set(verdicts), name


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_each_kernel_gets_its_verdict(capsys, name):
    doc = _json(capsys, KERNELS / name, *_flags(name))
    got = {k["kernel"]: k["verdict"] for k in doc["kernels"]}
    assert got == VERDICTS[name]
    assert [k["kernel"] for k in doc["kernels"]] == list(VERDICTS[name])        # in source order
    assert doc["exit_code"] == (0 if set(got.values()) == {"ok"} else 1)
    for k in doc["kernels"]:
        assert k["kind"] == ("ok" if k["verdict"] == "ok" else "failed"), k["message"]
        assert k["line"] == _line(name, f"def {k['kernel']}(") - 1                # its decorator's line
        if k["verdict"] == "ok":
            assert k["message"] == "" and k["cycles"] > 0 and k["instructions"] > 0
        else:
            assert k["cycles"] is None
            for pattern in MESSAGES[k["kernel"]]:
                assert re.search(pattern, k["message"]), (k["kernel"], pattern, k["message"])


def test_an_all_ok_file_exits_0(capsys):
    code, out, err = _check(capsys, KERNELS / "cube_matmul.py", *_flags("cube_matmul.py"))
    assert code == 0 and err == ""
    assert out.splitlines()[-1] == "2 of 2 kernel(s) ok"
    assert re.search(r"^matmul_rows \(cube_matmul\.py:\d+\): ok +\[2 block\(s\) on ascend950pr, full mode", out, re.M)


def test_a_file_with_a_failing_kernel_exits_1(capsys):
    code, out, _ = _check(capsys, KERNELS / "phase_misuses.py")
    assert code == 1
    assert out.splitlines()[-1] == ("1 of 5 kernel(s) ok: no_final_matmul DeadlockError, store_without_phase "
                                    "RaceError, partial_store_in_loop DeadlockError, final_never_read SyncError")


def test_a_missing_shape_is_usage_naming_the_flag(capsys, tmp_path):
    """matmul_rows's M is pl.DYNAMIC: without --shape (nor the marker's) its inputs cannot be made (exit 2, the
    flag to add); the file's other kernel, whose annotations fix every dim, still runs."""
    unmarked = _unmarked(tmp_path, "cube_matmul.py")
    code, out, _ = _check(capsys, unmarked)
    assert code == 2
    assert "matmul_rows (cube_matmul.py:" in out and "InputError" in out
    assert "give its shape (--shape a=Nx64" in out
    doc = _json(capsys, unmarked)
    rows, block = doc["kernels"]
    assert (rows["verdict"], rows["kind"], block["verdict"]) == ("InputError", "needs-input", "ok")
    assert rows["message"].startswith("parameter 'a' is annotated pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP16]")


def test_a_missing_scalar_is_usage_naming_the_flag(capsys, tmp_path):
    code, out, _ = _check(capsys, _unmarked(tmp_path, "vector_kernels.py"), "scale_add")
    assert code == 2 and "parameter 'alpha' is a fp32 scalar: give its value (--scalar alpha=V" in out


def test_a_failed_check_outranks_a_missing_flag(capsys, tmp_path):
    """vector_misuses.py without --shape x: one kernel fails its check (exit 1 wins over the other's usage)."""
    doc = _json(capsys, _unmarked(tmp_path, "vector_misuses.py"))
    assert [k["kind"] for k in doc["kernels"]] == ["failed", "needs-input"] and doc["exit_code"] == 1


@pytest.mark.parametrize("argv, says", [
    (["cube_matmul.py", "--shape", "a=12xq"], r"--shape a=12xq: the dims are ints joined by x or commas"),
    (["cube_matmul.py", "--shape", "a"], r"--shape takes NAME=VALUE, got 'a'"),
    (["vector_kernels.py", "--scalar", "alpha=half"], r"--scalar value 'half' is not a number"),
    (["cube_matmul.py", "--shape", "zz=4x4"], r"cube_matmul\.py: a shape or value for 'zz', but no kernel of the "
                                              r"file has that parameter"),
    (["cube_matmul.py", "matmul_cols"], r"cube_matmul\.py has no jit kernel 'matmul_cols' \(it has: matmul_rows, "
                                        r"matmul_block\)"),
    (["no_such_file.py"], r"no_such_file\.py: no such file"),
], ids=["bad-dims", "no-equals", "bad-scalar", "shape-for-no-parameter", "unknown-kernel", "missing-file"])
def test_usage_errors_exit_2_before_any_kernel_runs(capsys, argv, says):
    code, out, err = _check(capsys, KERNELS / argv[0], *argv[1:])
    assert code == 2 and out == ""
    assert err.startswith("pyto check: ") and re.search(says, err), err


def test_a_file_with_a_syntax_error_is_usage(capsys, tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("import pypto_pro.language as pl\n\n@pl.jit\ndef k(x: pl.Tensor[[16, 16], pl.DT_FP32]:\n    pass\n")
    code, out, err = _check(capsys, bad)
    assert code == 2 and out == "" and re.search(r"broken\.py:4: syntax error", err), err
    doc = _json(capsys, bad)
    assert doc["error"] == "LoadError" and "syntax error" in doc["message"] and doc["kernels"] == []
    assert doc["exit_code"] == 2


def test_an_unknown_flag_is_argparse_usage(capsys):
    with pytest.raises(SystemExit) as e:
        main(["check", str(KERNELS / "cube_matmul.py"), "--block-size", "2"])
    assert e.value.code == 2
    assert "unrecognized arguments: --block-size" in capsys.readouterr().err


def test_the_text_block_names_the_verdict_the_message_and_the_address_map(capsys):
    name = "memory_misuses.py"
    _, out, _ = _check(capsys, KERNELS / name, "overlapping_tiles", "ub_overflow")
    first, second = out.split("\n\n")[:2]
    assert first.startswith(f"overlapping_tiles ({name}:{_line(name, 'def overlapping_tiles(') - 1}): "
                            f"ClobberedReadError   [1 block(s) on ascend950pr, full mode, ")
    assert "  inputs: x [32, 128] fp32, y [32, 128] fp32" in first
    assert "  | memory_misuses.py:" in first and "last written through UB tile 'ones'" in first
    ub = [ln for ln in first.splitlines() if ln.startswith("  UB (")]
    assert len(ub) == 1 and "per AIV" in ub[0] and "248.0 KB" in ub[0] and "16.0 KB in use" in ub[0]
    rows = [ln.split() for ln in first.splitlines() if ln.startswith("    0x")]
    assert [(r[0], r[3]) for r in rows] == [("0x00000-0x04000", "'x_ub'"), ("0x02000-0x04000", "'ones'")]
    assert rows[0][-1] == f"{name}:{_line(name, 'x_ub = pl.make_tile(VEC, addr=0x0000)', 'def overlapping_tiles(')}"
    assert "(up to the failing placement)" in second and "UB overflow" in second
    assert out.splitlines()[-1] == ("0 of 2 kernel(s) ok: overlapping_tiles ClobberedReadError, ub_overflow "
                                    "CapacityError")


def test_the_json_document_has_the_readmes_keys(capsys):
    doc = _json(capsys, KERNELS / "cv_fused.py")
    assert set(doc) == DOC_KEYS
    assert _keys(doc) <= _readme_keys(), f"keys the README does not list: {_keys(doc) - _readme_keys()}"
    # and the README lists nothing this document lacks but a load error's key and the inputs' own (data: a sparse index's)
    assert _readme_keys() - _keys(doc) <= {"error", "shape", "dtype", "value", "data"}
    assert doc["pyto_check"] == 1 and doc["file"].endswith("cv_fused.py") and doc["exit_code"] == 0
    (k,) = doc["kernels"]
    assert set(k) == KERNEL_KEYS
    assert (k["kernel"], k["verdict"], k["kind"], k["mode"], k["chip"], k["block_dim"]) == (
        "matmul_bias_relu", "ok", "ok", "full", "ascend950pr", 1)
    assert k["inputs"] == {"a": {"shape": [64, 64], "dtype": "fp16"}, "b": {"shape": [64, 64], "dtype": "fp16"},
                           "bias": {"shape": [64, 64], "dtype": "fp32"}, "out": {"shape": [64, 64], "dtype": "fp32"}}
    assert k["time_us"] > 0 and k["cycles"] > k["instructions"] > 0 and k["seconds"] > 0
    assert k["bottleneck"] in k["pipe_cycles"] and k["bound"]
    assert {"M", "FIX", "V", "MTE2", "MTE3"} <= {p for p, c in k["pipe_cycles"].items() if c > 0}
    assert (k["trace"], k["plots"], k["printed"]) == (None, [], [])
    by_buf = {b["buffer"]: b for b in k["buffers"]}
    assert list(by_buf) == ["L1", "L0A", "L0B", "L0C", "UB"]
    for b in k["buffers"]:
        assert set(b) >= BUFFER_KEYS and b["same_in_all_blocks"] is True and b["block"] == 0
        assert b["use"] == pytest.approx(b["in_use"] / b["capacity"], abs=1e-4)
        for t in b["tiles"]:
            assert set(t) >= TILE_KEYS and t["hi"] > t["lo"] >= 0 and t["line"].startswith("cv_fused.py:")
    ub = by_buf["UB"]
    assert (ub["capacity"], ub["in_use"]) == (253952, 16384)
    assert [(t["lo"], t["hi"], t["what"].split()[0]) for t in ub["tiles"]] == [(0, 0x2000, "'product'"),
                                                                               (0x2000, 0x4000, "'bias_ub'")]
    assert ub["tiles"][1]["line"] == f"cv_fused.py:{_line('cv_fused.py', 'bias_ub = pl.make_tile(')}"


def test_a_failed_kernels_json_keeps_the_address_map_up_to_the_failure(capsys):
    doc = _json(capsys, KERNELS / "memory_misuses.py", "l1_overflow")
    (k,) = doc["kernels"]
    assert (k["verdict"], k["kind"], k["time_us"], k["instructions"]) == ("CapacityError", "failed", None, None)
    (l1,) = k["buffers"]
    assert (l1["buffer"], l1["capacity"], l1["in_use"]) == ("L1", 524288, 131072)       # a_mat's 128 KB
    assert [(t["what"].split()[0], t["lo"], t["hi"], t["refused"]) for t in l1["tiles"]] == [
        ("'a_mat'", 0x0, 0x20000, False), ("'b_mat'", 0x70000, 0x90000, True)]      # b_mat: where it was asked for


def test_trace_writes_one_perfetto_trace_per_kernel(capsys, tmp_path):
    doc = _json(capsys, KERNELS / "cube_matmul.py", *_flags("cube_matmul.py"), "--trace", tmp_path / "traces")
    assert sorted(p.name for p in (tmp_path / "traces").iterdir()) == ["matmul_block.json.gz", "matmul_rows.json.gz"]
    for k in doc["kernels"]:
        assert k["trace"] == str(tmp_path / "traces" / f"{k['kernel']}.json.gz")
        cores, spans = read_trace(k["trace"])
        assert len(spans) == k["instructions"]
        assert set(cores.values()) == {"block 0 AIC", "block 1 AIC"}
        assert {e["cat"] for e in spans} >= {"MTE2", "MTE1", "M", "FIX"}
    _, out, _ = _check(capsys, KERNELS / "cube_matmul.py", *_flags("cube_matmul.py"), "--trace", tmp_path / "t2")
    assert f"  trace: {tmp_path / 't2' / 'matmul_rows.json.gz'}" in out


def test_timing_mode_runs_on_shapes_only(capsys):
    full = _json(capsys, KERNELS / "cube_matmul.py", *_flags("cube_matmul.py"))
    timing = _json(capsys, KERNELS / "cube_matmul.py", *_flags("cube_matmul.py"), "--timing")
    assert timing["exit_code"] == 0
    for f, t in zip(full["kernels"], timing["kernels"]):
        assert (t["mode"], t["verdict"], t["inputs"]) == ("timing", "ok", f["inputs"])
        assert t["cycles"] == f["cycles"] and t["instructions"] == f["instructions"]     # timing needs no data


def test_timing_mode_finds_what_needs_no_data(capsys):
    """Deadlocks, races and capacity are found on shapes alone."""
    doc = _json(capsys, KERNELS / "sync_misuses.py", "wait_never_set", "missing_flag", "--timing")
    assert [(k["mode"], k["verdict"]) for k in doc["kernels"]] == [("timing", "DeadlockError"), ("timing", "RaceError")]


def _printed(capsys, seed: int) -> list:
    code, out, _ = _check(capsys, KERNELS / "vector_kernels.py", "scale_add", *_flags("vector_kernels.py"),
                          "--seed", seed)
    assert code == 0 and "scale_add (vector_kernels.py:" in out and "): ok " in out
    return re.findall(r"\[AIV (\d) @ [\d,]+ cycles\] x\[(\d+), 0\] = (-?\d+\.\d+)", out)


def test_seed_changes_the_data_not_the_verdict(capsys):
    """scale_add prints each AIV's first x: another seed, other values; the same seed, the same ones."""
    zero, again, one = _printed(capsys, 0), _printed(capsys, 0), _printed(capsys, 1)
    assert [(aiv, row) for aiv, row, _ in zero] == [("0", "0"), ("1", "32")]
    assert zero == again
    assert [v for _, _, v in zero] != [v for _, _, v in one]


def _torch_installed() -> bool:
    import importlib.util
    return importlib.util.find_spec("torch") is not None


def test_a_file_importing_torch_npu_loads_with_stand_ins(capsys):
    doc = _json(capsys, KERNELS / "torch_host.py", *_flags("torch_host.py"))
    want = ["torch_npu"] if _torch_installed() else ["torch", "torch_npu"]
    assert doc["standins"] == want and doc["kernels"][0]["standins"] == want
    assert doc["kernels"][0]["verdict"] == "ok"
    _, out, _ = _check(capsys, KERNELS / "torch_host.py")
    assert f"  stand-ins (not installed here): {', '.join(want)}" in out
    assert "torch_npu" not in sys.modules            # the stand-ins leave sys.modules after the import


#: a fresh interpreter where torch cannot be found (as on CI), running `pyto check` on the torch-importing file
_WITHOUT_TORCH = """
import importlib.abc, sys

class _NoTorch(importlib.abc.MetaPathFinder):
    def __init__(self, inner):
        self.inner = inner
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "torch":
            return None
        find = getattr(self.inner, "find_spec", None)
        return find(name, path, target) if find else None

sys.meta_path[:] = [_NoTorch(f) for f in sys.meta_path]
from pyto.cli import main
sys.exit(main(["check", sys.argv[1], "--json"]))
"""


def test_without_torch_both_torch_and_torch_npu_are_stand_ins():
    proc = subprocess.run([sys.executable, "-c", _WITHOUT_TORCH, str(KERNELS / "torch_host.py")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["standins"] == ["torch", "torch_npu"] and doc["kernels"][0]["verdict"] == "ok"


def test_the_installed_command_exits_with_the_verdicts_code(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pyto", "check", str(KERNELS / "memory_misuses.py"), "never_written",
                           "load_past_edge", "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert [k["verdict"] for k in doc["kernels"]] == ["UninitializedReadError", "OutOfBoundsError"]
    proc = subprocess.run([sys.executable, "-m", "pyto", "check", str(_unmarked(tmp_path, "cube_matmul.py"))],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--shape a=Nx64" in proc.stdout


def test_the_files_marker_gives_the_cli_its_shapes_and_the_flags_win(capsys):
    """cube_matmul.py's pyto_check marker states a's and c's shapes: `pyto check` takes them (no flag needed) and a
    --shape overrides them; a marker's per-kernel block_dim or expect naming no kernel is usage."""
    doc = _json(capsys, KERNELS / "cube_matmul.py")
    rows = doc["kernels"][0]
    marked = rows["inputs"]["a"]["shape"]
    assert rows["verdict"] == "ok" and doc["exit_code"] == 0
    doc = _json(capsys, KERNELS / "cube_matmul.py", "matmul_rows", "--shape", "a=96x64", "--shape", "c=96x32")
    assert doc["kernels"][0]["inputs"]["a"]["shape"] == [96, 64] != marked


@pytest.mark.parametrize("marker, says", [
    ("block_dim={'nope': 2}", r"pyto_check block_dim= names 'nope', which is no jit kernel of the file"),
    ("expect={'typo': 'RaceError'}", r"pyto_check expect= names 'typo', which is no jit kernel of the file"),
    ("block_dim='2'", r"block_dim is an int or \{kernel: int\}, got '2'")], ids=["block_dim", "expect", "type"])
def test_a_marker_naming_no_kernel_is_usage(capsys, tmp_path, marker, says):
    path = _unmarked(tmp_path, "vector_kernels.py")
    path.write_text("import pytest\n" + path.read_text() + f"\npytestmark = pytest.mark.pyto_check({marker})\n")
    code, out, err = _check(capsys, path)
    assert code == 2 and re.search(says, err), err


def test_a_standin_used_as_a_decorator_returns_what_it_decorates(tmp_path, capsys):
    """`@pypto.options(...)` / `@torch_npu.xxx()` on a host test function, with pytest marks over it: the
    stand-in gives the function back, so the marks apply and the file loads."""
    path = tmp_path / "decorated.py"
    path.write_text(
        "import pytest\nimport pypto\nimport pypto_pro.language as pl\n\n"
        "@pytest.mark.skipif(False, reason='')\n@pypto.options(debug=True)\ndef test_host():\n    return 7\n\n"
        "@pl.jit\ndef k(x: pl.Tensor[[8, 64], pl.DT_FP32]):\n"
        "    t = pl.make_tile(pl.TileType(shape=[8, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec), addr=0)\n"
        "    with pl.section_vector():\n        pl.load(t, x, [0, 0])\n")
    kf = load_file(str(path))
    assert kf.module.test_host() == 7 and "pypto" in kf.standins
    assert _json(capsys, path)["kernels"][0]["verdict"] == "ok"


def test_default_dim_sizes_the_matrix_and_keeps_batch_dims_small(tmp_path, capsys):
    path = tmp_path / "batched.py"
    path.write_text(
        "import pypto_pro.language as pl\n\n"
        "@pl.jit\ndef k(x: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC, pl.DYNAMIC, 64], pl.DT_FP32]):\n"
        "    t = pl.make_tile(pl.TileType(shape=[8, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec), addr=0)\n"
        "    with pl.section_vector():\n        pl.load(t, x, [0, 0, 0, 0])\n")
    doc = _json(capsys, path, "--default-dim", "96")
    assert doc["kernels"][0]["inputs"]["x"]["shape"] == [2, 2, 96, 64]


def test_inputs_too_large_for_memory_are_needs_input(monkeypatch):
    """A MemoryError making or running the inputs is the shapes' fault: needs-input naming them, not a pyto bug."""
    import pyto.checker.runner as runner

    def oom(*a, **k):
        raise MemoryError
    monkeypatch.setattr(sys.modules["pyto.emulator.run"], "run", oom)
    kf = load_file(str(KERNELS / "vector_kernels.py"))
    r = runner.check(dict(kf.kernels)["relu_rows"])
    assert (r.kind, r.verdict) == ("needs-input", "InputError")
    assert "do not fit in this machine's memory: give smaller shapes (--shape)" in r.message


def test_a_missing_cross_core_wait_leads_with_the_hand_over_fix(capsys):
    """The replay ran the AIV's read before the AIC's write (two cores have no program order): the report lists the
    RAW hand-over's fix first (set on the writer's pipe after the write, wait on the reader's before the read)."""
    doc = _json(capsys, KERNELS / "cv_misuses.py", "no_cross_core_wait")
    msg = doc["kernels"][0]["message"]
    write, read = _line("cv_misuses.py", "pl.move(product, c_acc"), _line("cv_misuses.py", "pl.store(out, product",
                                                                             after="def no_cross_core_wait")
    assert re.search(rf"fix: if the read is meant to see this write \(a hand-over, RAW\): pl\.system\.set_cross_core\("
                     rf"pipe=pl\.PipeType\.FIX, event_id=\.\.\.\) after cv_misuses\.py:{write} and pl\.system\."
                     rf"wait_cross_core\(pipe=pl\.PipeType\.MTE3, event_id=\.\.\.\) before cv_misuses\.py:{read}; if "
                     rf"the write must wait until the read is done \(WAR\)", msg), msg


def test_default_scalar_gives_every_open_scalar_a_value(capsys, tmp_path):
    """vector_kernels.py's scale_add takes a fp32 scalar alpha: --default-scalar gives it (as a float; an int
    dtype would get an int), a --scalar wins over it."""
    path = _unmarked(tmp_path, "vector_kernels.py")
    doc = _json(capsys, path, "scale_add", "--default-scalar", "3")
    assert doc["kernels"][0]["inputs"]["alpha"] == {"value": 3.0} and doc["kernels"][0]["verdict"] == "ok"
    doc = _json(capsys, path, "scale_add", "--default-scalar", "3", "--scalar", "alpha=0.5")
    assert doc["kernels"][0]["inputs"]["alpha"] == {"value": 0.5}
