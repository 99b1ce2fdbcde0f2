"""`pyto check --plot`: pyto/checker/plot.py's figures (timeline and address maps), its event decoding against the
report's busy cycles, the missing-matplotlib message, and the CLI writing one PNG per kernel."""
import sys
import textwrap

import numpy as np
import pytest

from pyto.checker import check_file
from pyto.checker.plot import INSTALL, PIPE_COLOURS, WIDTH_IN, DPI, plot_results, tile_levels, timeline_rows
from pyto.errors import UnsupportedError

# A PyPTO-Pro file: a correct vector kernel on 2 blocks (each AIV adds one to its 16 rows, ordered by flags) and
# one that fails placing its third tile past UB's end (its first two overlap: the map stacks them).
KERNELS = textwrap.dedent('''
    import pyto.language as pl

    ROWS = 16


    def vec(shape, dt=pl.DT_FP32):
        return pl.TileType(shape=shape, dtype=dt, target_memory=pl.MemorySpace.Vec)


    @pl.jit
    def add_one(x: pl.Tensor[[32, 64], pl.DT_FP32], y: pl.Tensor[[32, 64], pl.DT_FP32]):
        t = pl.make_tile(vec([ROWS, 64]), addr=0)
        u = pl.make_tile(vec([ROWS, 64]), addr=0x1000)
        with pl.section_vector():
            i = pl.get_block_idx()
            pl.load(t, x, [i * ROWS, 0])
            pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
            pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
            pl.add(u, t, 1.0)
            pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=1)
            pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=1)
            pl.store(y, u, [i * ROWS, 0])


    @pl.jit
    def too_big(x: pl.Tensor[[32, 64], pl.DT_FP32], y: pl.Tensor[[32, 64], pl.DT_FP32]):
        t = pl.make_tile(vec([ROWS, 64]), addr=0)
        u = pl.make_tile(vec([ROWS, 64]), addr=0x800)
        w = pl.make_tile(vec([256, 256]), addr=0x2000)
        with pl.section_vector():
            pl.load(t, x, [0, 0])
''')


@pytest.fixture(scope="module")
def kernel_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("kernels") / "plot_kernels.py"
    path.write_text(KERNELS)
    return str(path)


@pytest.fixture(scope="module")
def results(kernel_file):
    _, res = check_file(kernel_file, block_dim=2, show_progress=False)
    by_name = {r.kernel: r for r in res}
    assert by_name["add_one"].ok, by_name["add_one"].message
    assert by_name["too_big"].verdict == "CapacityError"
    return by_name


def _rgb(hex_colour: str) -> np.ndarray:
    return np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)]) / 255


def _has_colour(img: np.ndarray, hex_colour: str, pixels: int) -> bool:
    """Whether at least `pixels` pixels of an RGB(A) float image are `hex_colour` (PNG rounding: within 1/255)."""
    return int((np.abs(img[..., :3] - _rgb(hex_colour)) <= 1.5 / 255).all(axis=-1).sum()) >= pixels


def test_a_correct_kernel_gets_a_png_with_its_timeline(results, tmp_path):
    image = pytest.importorskip("matplotlib.image")
    r = results["add_one"]
    plot_results([r], str(tmp_path))
    path = str(tmp_path / "add_one.png")
    assert r.plots[-1] == path
    img = image.imread(path)
    assert img.shape[1] == round(WIDTH_IN * DPI) and img.shape[0] > 300
    assert img[..., :3].std() > 0.05                              # not a blank canvas
    for pipe in ("MTE2", "V", "MTE3"):                          # each pipe the kernel ran drew its busy spans
        assert _has_colour(img, PIPE_COLOURS[pipe], 50), pipe
    assert not _has_colour(img, PIPE_COLOURS["M"], 1)           # no cube pipe: no M row, no overlap outline


def test_a_failed_kernel_gets_its_address_map_and_the_error(results, tmp_path):
    image = pytest.importorskip("matplotlib.image")
    from pyto.checker.plot import figure
    r = results["too_big"]
    assert r.report is None and [m.buffer for m in r.buffers] == ["UB"]
    fig = figure(r)
    assert len(fig.axes) == 1                                    # the UB map only: no timeline
    title = fig._suptitle.get_text()
    assert "CapacityError" in title and "UB overflow" in title
    ax = fig.axes[0]
    assert {t.get_text() for t in ax.texts} == {"t", "u", "w"}        # w: the refused range, where it was asked
    assert [t.refused for t in r.buffers[0].tiles] == [False, False, True]
    assert "6,144 / 253,952 B" in ax.get_ylabel() and "the only one traced" in ax.get_ylabel()
    plot_results([r], str(tmp_path), fmt="svg")
    assert r.plots[-1] == str(tmp_path / "too_big.svg")
    assert (tmp_path / "too_big.svg").read_text().lstrip().startswith("<?xml")
    plot_results([r], str(tmp_path))
    img = image.imread(r.plots[-1])
    assert img.shape[1] == round(WIDTH_IN * DPI)
    assert _has_colour(img, "#d62728", 20)                       # t and u overlap: outlined red


def test_overlapping_tiles_are_stacked_on_levels(results):
    t, u, _ = results["too_big"].buffers[0].tiles               # t [0, 0x1000), u [0x800, 0x1800), w refused
    assert (t.lo, t.hi, u.lo, u.hi) == (0, 0x1000, 0x800, 0x1800)
    assert tile_levels([t, u]) == [0, 1]
    assert tile_levels(results["add_one"].buffers[0].tiles) == [0, 0]     # side by side: one level


def test_timeline_rows_sum_to_each_core_pipes_busy_cycles(results):
    rep = results["add_one"].report
    rows = timeline_rows(rep)
    expected = {(core, pipe) for core, per in rep.core_pipe_cycles.items() for pipe in per}
    assert set(rows) == expected and len(rows) == 2 * 3         # 2 AIVs x MTE2, V, MTE3
    for (core, pipe), row in rows.items():
        assert np.all(np.diff(row.starts) >= 0)
        assert np.all(row.durations >= 0)
        # the same cycle figures summed in another order: float64 rounding, a few ulps of ~10^3 cycles
        assert row.durations.sum() == pytest.approx(rep.core_pipe_cycles[core][pipe], rel=1e-12, abs=1e-9)
    # per AIV: sync_src on MTE2, sync_dst and sync_src on V, sync_dst on MTE3 (the flags the kernel writes)
    assert [int(rows[("AIV 0", p)].sync.sum()) for p in ("MTE2", "V", "MTE3")] == [1, 2, 1]
    assert sum(len(r.starts) for r in rows.values()) == rep.instructions


def test_without_matplotlib_the_error_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)       # `import matplotlib` raises ImportError
    with pytest.raises(UnsupportedError, match=r"pip install 'pyto\[plot\]'"):
        plot_results([], str(tmp_path))
    assert "pip install 'pyto[plot]'" == INSTALL


def test_an_unknown_format_is_refused(tmp_path):
    with pytest.raises(UnsupportedError, match="png or svg"):
        plot_results([], str(tmp_path), fmt="jpg")


def test_the_cli_writes_one_png_per_kernel(kernel_file, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from pyto.cli import main
    out = tmp_path / "plots"
    code = main(["check", kernel_file, "--block-dim", "2", "--plot", str(out)])
    assert code == 1                                            # too_big fails its check
    assert sorted(p.name for p in out.iterdir()) == ["add_one.png", "too_big.png"]
    printed = capsys.readouterr().out
    assert f"plot: {out / 'add_one.png'}" in printed and f"plot: {out / 'too_big.png'}" in printed


def test_a_row_of_many_instructions_draws_at_most_a_box_per_pixel_column():
    pytest.importorskip("matplotlib")
    from pyto.checker.plot import LABEL_IN, figure
    from pyto.checker.result import CheckResult
    from pyto.report import Report
    n, rng = 200_000, np.random.default_rng(0)     # one AIV's MTE2: 1-4 cycle loads, now and then a long wait
    dur = rng.integers(1, 5, n).astype(np.float64)
    gap = np.where(rng.random(n) < 0.001, 1e6, 0.0)
    begin = np.cumsum(dur + gap) - dur
    lat = np.full(n, 600.0)
    zeros = np.zeros(n, np.int64)
    events = (["AIV 0"], ["MTE2"], ["pl.load"], ["k.py:1 pl.load(t, x, [0, 0])"], zeros, zeros, zeros, zeros,
              begin, begin + dur + lat, lat)
    rep = Report("many", "ascend950pr", 1, "timing", float(begin[-1] + dur[-1] + 600), 1.85, n, {"MTE2": dur.sum()},
                 {"AIV 0": {"MTE2": float(dur.sum())}}, events)
    (row,) = timeline_rows(rep).values()
    assert row.durations.sum() == pytest.approx(dur.sum(), rel=1e-12)
    fig = figure(CheckResult("many", "k.py", 1, "ok", "ok", report=rep))
    boxes = sum(len(c.get_paths()) for c in fig.axes[0].collections)
    assert 100 < boxes <= (WIDTH_IN - LABEL_IN) * DPI       # its ~200 waits split it; never 200,000 patches


def test_sync_instructions_are_known_by_the_names_the_events_carry():
    from pyto.checker.plot import is_sync
    for name in ("pl.system.sync_src", "pl.system.sync_dst", "pl.system.set_cross_core", "pl.system.wait_cross_core",
                 "pl.system.mutex_lock", "pl.system.mutex_unlock", "pl.system.bar_m", "pl.system.bar_all",
                 "pl.system.sync_all"):
        assert is_sync(name), name
    for name in ("pl.load", "pl.store", "pl.matmul", "pl.move", "pl.system.set_mm_layout_transform", ""):
        assert not is_sync(name), name
