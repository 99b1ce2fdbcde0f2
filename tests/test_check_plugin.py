"""The pytest plugin of pyto check (pyto/checker/plugin.py), run by pytester: `pytest --pyto-check` on the kernel
files of tests/check_kernels/ makes one item per kernel that passes when its verdict is the one the file's
pyto_check marker expects; a wrong expectation fails with the check's text; the marker in an ordinary test module
adds an item per jit kernel beside its tests; without either the plugin adds nothing."""
import contextlib

import pytest

with contextlib.suppress(ImportError):
    # torch_host.py imports torch where it is installed; pytester's inline runs drop the modules a run imported, and
    # a second import of torch's C extension in one process crashes it: imported once here, it stays
    import torch  # noqa: F401  (pyflakes: imported for its side effect)

from test_check_cli import KERNELS, VERDICTS

pytest_plugins = ["pytester"]


def _outcomes(rec) -> dict:
    """{item name: outcome} of an inline run's test reports (the call phase; setup for an item that errs there)."""
    got = {}
    for r in rec.getreports("pytest_runtest_logreport"):
        if r.when == "call" or r.outcome != "passed":
            got[r.nodeid.rsplit("::", 1)[-1]] = r.outcome
    return got


def _check(pytester, *args):
    return pytester.inline_run("-p", "pyto.check", "-p", "no:cacheprovider", *map(str, args))


def test_every_kernel_file_is_one_item_per_kernel_with_its_expected_verdict(pytester):
    rec = _check(pytester, "--pyto-check", *(KERNELS / name for name in VERDICTS))
    want = {k: "passed" for verdicts in VERDICTS.values() for k in verdicts}
    assert _outcomes(rec) == want
    items = rec.getcall("pytest_collection_finish").session.items
    # the files in the order given, each file's kernels in source order
    assert [(i.path.name, i.name) for i in items] == [(name, k) for name, verdicts in VERDICTS.items()
                                                      for k in verdicts]
    assert {i.name: i.result.verdict for i in items} == {k: v for verdicts in VERDICTS.values()
                                                         for k, v in verdicts.items()}
    assert rec.ret == 0


def test_a_directory_is_read_as_kernel_files(pytester):
    rec = _check(pytester, "--pyto-check", KERNELS)
    assert _outcomes(rec) == {k: "passed" for verdicts in VERDICTS.values() for k in verdicts}


RACY = '''
import pytest
import pypto_pro.language as pl

pytestmark = pytest.mark.pyto_check(expect={EXPECT})

VEC = pl.TileType(shape=[16, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)


@pl.jit
def racy(x: pl.Tensor[[16, 64], pl.DT_FP32], y: pl.Tensor[[16, 64], pl.DT_FP32]):
    t, u = pl.make_tile(VEC, addr=0x0), pl.make_tile(VEC, addr=0x1000)
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        pl.add(u, t, 1.0)                       # no MTE2 -> V flag
        pl.system.bar_all()
        pl.store(y, u, [0, 0])
'''


def test_a_wrong_expectation_fails_with_the_checks_text(pytester):
    path = pytester.makepyfile(racy_kernels=RACY.replace("{EXPECT}", '{"racy": "ok"}'))
    rec = _check(pytester, "--pyto-check", path)
    (failed,) = rec.getfailures()
    text = str(failed.longrepr)
    assert text.startswith("expected ok, got RaceError\nracy (racy_kernels.py:")
    assert "RAW hazard detected at UB: UB tile 't'" in text and "pl.add(u, t, 1.0)" in text
    assert "UB (" in text and "'u' pl.MemorySpace.Vec [16, 64] fp32 ND" in text        # the address map
    assert rec.ret == 1


def test_the_expected_error_passes(pytester):
    path = pytester.makepyfile(racy_kernels=RACY.replace("{EXPECT}", '{"racy": "RaceError"}'))
    assert _outcomes(_check(pytester, "--pyto-check", path)) == {"racy": "passed"}


def test_command_line_values_reach_a_file_without_its_own(pytester):
    """--pyto-shape / --pyto-block-dim give what the file's marker does not: cube_matmul.py's kernels with the
    shapes on the command line, in a copy without its marker."""
    src = (KERNELS / "cube_matmul.py").read_text()
    marker = "pytestmark = pytest.mark.pyto_check(block_dim=2, a=(128, K), c=(128, N))\n"
    assert marker in src
    path = pytester.path / "cube_unmarked.py"
    path.write_text(src.replace(marker, ""))
    rec = _check(pytester, "--pyto-check", path, "--pyto-block-dim", "2", "--pyto-shape", "a=96x64",
                 "--pyto-shape", "c=96x32")
    assert _outcomes(rec) == {"matmul_rows": "passed", "matmul_block": "passed"}
    rec = _check(pytester, "--pyto-check", path, "--pyto-block-dim", "2")
    (failed,) = rec.getfailures()
    assert failed.nodeid.endswith("::matmul_rows")
    assert "expected ok, got InputError" in str(failed.longrepr) and "-shape a=Nx64" in str(failed.longrepr)


def test_timing_on_the_command_line(pytester):
    rec = _check(pytester, "--pyto-check", KERNELS / "sync_misuses.py", "--pyto-timing")
    assert _outcomes(rec) == {k: "passed" for k in VERDICTS["sync_misuses.py"]}
    (item,) = [i for i in rec.getcall("pytest_collection_finish").session.items if i.name == "missing_flag"]
    assert item.result.mode == "timing"


ORDINARY = '''
import numpy as np
import pytest
import pyto.language as pl
{MARK}
VEC = pl.TileType(shape=[16, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)


@pl.jit
def add_one(x: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32], y: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32]):
    t, u = pl.make_tile(VEC, addr=0x0), pl.make_tile(VEC, addr=0x1000)
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        pl.system.bar_all()
        pl.add(u, t, 1.0)
        pl.system.bar_all()
        pl.store(y, u, [0, 0])


@pl.jit
def never_loaded(x: pl.Tensor[[16, 64], pl.DT_FP32], y: pl.Tensor[[16, 64], pl.DT_FP32]):
    t = pl.make_tile(VEC, addr=0x0)
    with pl.section_vector():
        pl.store(y, t, [0, 0])


def test_add_one_on_numpy():
    x = np.arange(16 * 64, dtype=np.float32).reshape(16, 64)
    y = np.zeros_like(x)
    add_one(x, y)
    np.testing.assert_array_equal(y, x + 1)
'''

MARK = 'pytestmark = pytest.mark.pyto_check(expect={"never_loaded": "UninitializedReadError"}, x=(16, 64), y=(16, 64))'


def test_the_marker_adds_an_item_per_kernel_beside_the_tests(pytester):
    pytester.makepyfile(test_marked=ORDINARY.replace("{MARK}", MARK))
    rec = _check(pytester)
    assert _outcomes(rec) == {"test_add_one_on_numpy": "passed", "pyto_check[add_one]": "passed",
                              "pyto_check[never_loaded]": "passed"}


def test_a_marked_kernel_that_fails_its_expectation_fails(pytester):
    pytester.makepyfile(test_marked=ORDINARY.replace("{MARK}", MARK.replace("UninitializedReadError", "ok")))
    rec = _check(pytester)
    assert _outcomes(rec) == {"test_add_one_on_numpy": "passed", "pyto_check[add_one]": "passed",
                              "pyto_check[never_loaded]": "failed"}
    (failed,) = rec.getfailures()
    assert str(failed.longrepr).startswith("expected ok, got UninitializedReadError\nnever_loaded (test_marked.py:")


def test_without_the_flag_or_the_marker_the_plugin_adds_nothing(pytester):
    pytester.makepyfile(test_plain=ORDINARY.replace("{MARK}", ""))
    assert _outcomes(_check(pytester)) == {"test_add_one_on_numpy": "passed"}
    # the kernel directory without --pyto-check: no file there is a test module by its name, nothing is collected
    rec = _check(pytester, KERNELS)
    assert _outcomes(rec) == {} and rec.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_under_the_flag_a_test_module_gives_its_kernels_only(pytester):
    """--pyto-check reads every file given as a kernel file: the marked module's kernels, not its tests."""
    path = pytester.makepyfile(test_marked=ORDINARY.replace("{MARK}", MARK))
    assert _outcomes(_check(pytester, "--pyto-check", path)) == {"add_one": "passed", "never_loaded": "passed"}


def test_a_kernel_file_that_does_not_load_is_a_collection_error(pytester):
    path = pytester.makepyfile(broken='import pypto_pro.language as pl\nraise RuntimeError("no device here")\n')
    rec = _check(pytester, "--pyto-check", path)
    (report,) = [r for r in rec.getreports("pytest_collectreport") if r.failed]
    assert "broken.py:2: importing it raised RuntimeError: no device here" in str(report.longrepr)
    assert rec.ret == pytest.ExitCode.INTERRUPTED


def test_where_plugin_autoload_is_off_p_pyto_check_loads_it(pytester, monkeypatch):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    rec = _check(pytester, "--pyto-check", KERNELS / "cv_misuses.py")
    assert _outcomes(rec) == {"no_cross_core_wait": "passed", "no_cross_core_set": "passed"}
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--pyto-check", KERNELS / "cv_misuses.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR            # not loaded: its flag is unknown
    result.stderr.fnmatch_lines(["*unrecognized arguments: --pyto-check*"])
