"""pyto sweep (pyto_kernels.bmm.sweep*): specs, run_case's rows, serial = process pool = Dask, resume, error rows,
CSV / Parquet round trips, the plot, the CLI."""
from __future__ import annotations

import json
import math
import sys

import pytest

import pyto
from pyto.cli import main
from pyto_kernels.bmm import plan
from pyto_kernels.bmm import sweep as sweep_mod
from pyto_kernels.bmm import tune as tune_mod
from pyto_kernels.bmm.cost import roofline_us
from pyto_kernels.bmm.cost_pipes import TERMS
from pyto_kernels.bmm.sweep import COLUMNS, NAMES, PIPES, Case, run_case, seed_branch_of, sweep
from pyto_kernels.bmm.sweep_io import read_rows, write_rows
from pyto_kernels.bmm.sweep_spec import load_spec, toml_cases

# the scale-down sweep: 36 grid cases of small shapes (every branch's ground at this size: batch-1 sides, B >= C,
# long K) and 4 random draws with B's batch 1 in fp16
SPEC = {"dtypes": ["bf16"],
        "grid": [{"B": [1, 2, 32], "M": [16, 64], "N": [32, 128], "K": [64, 512, 2048]}],
        "random": {"n": 4, "seed": 1, "B": {"start": 1, "stop": 16}, "M": {"start": 16, "stop": 128},
                   "N": {"start": 16, "stop": 128}, "K": {"start": 16, "stop": 2048}, "dtypes": ["fp16"],
                   "broadcast": ["b"]}}


@pytest.fixture(scope="module")
def cases():
    return toml_cases(SPEC, "test-spec")


@pytest.fixture(scope="module")
def serial(cases):
    return sweep(cases, workers=1, progress=False)


def by_case(rows):
    out = {}
    for r in rows:
        out.setdefault(r["case"], []).append(r)
    return out


# ---- specs -----------------------------------------------------------------------------------------------

def test_toml_grid(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('dtypes = ["bf16", "fp16"]\nbroadcast = ["none", "a"]\n'
                 '[[grid]]\nB = [1, 4]\nM = {start = 16, stop = 512, num = 6, scale = "log"}\n'
                 'N = {start = 64, stop = 256, step = 64}\nK = {start = 100, stop = 320, num = 3, '
                 'scale = "linear", align = 16}\n'
                 '[[grid]]\nB = 2\nM = [32]\nN = [32]\nK = [0]\nchips = ["atlas-a2"]\ntilings = "candidates"\n'
                 'branches = ["special"]\n')
    cs = load_spec(f)
    first = [c for c in cs if c.chip == "ascend950pr"]
    assert len(first) == 2 * 6 * 4 * 3 * 2 * 2
    assert sorted({c.M for c in first}) == [16 * 2 ** i for i in range(6)]     # 16 * 32^(i/5)
    assert sorted({c.N for c in first}) == [64, 128, 192, 256]
    assert sorted({c.K for c in first}) == [96, 208, 320]      # 100, 210, 320 rounded to multiples of 16
    assert {c.dtype for c in first} == {"bf16", "fp16"} and {c.broadcast for c in first} == {"none", "a"}
    assert all(c.tilings == "planner" and c.branches == () for c in first)
    last = cs[-1]
    assert (last.B, last.M, last.N, last.K, last.chip, last.tilings, last.branches) == \
        (2, 32, 32, 0, "atlas-a2", "candidates", ("special",))
    assert last.id == "2x32x32x0-fp16-atlas-a2-bcA-special-candidates"
    assert len({c.id for c in cs}) == len(cs)
    a_shape, b_shape = Case(4, 16, 32, 64, broadcast="a").shapes()
    assert (a_shape, b_shape) == ((1, 16, 64), (4, 64, 32))


def test_toml_random(tmp_path):
    text = ('[random]\nn = 30\nseed = {seed}\nB = [1, 3, 5]\nM = {{start = 16, stop = 1000, align = 16}}\n'
            'N = {{start = 7, stop = 9, scale = "linear"}}\nK = {{start = 1, stop = 65536}}\n')
    f = tmp_path / "r.toml"
    f.write_text(text.format(seed=7))
    cs = load_spec(f)
    assert len(cs) <= 30 and len(cs) >= 25       # duplicates drawn are dropped (rare at these ranges)
    assert all(c.B in (1, 3, 5) and c.M % 16 == 0 and 16 <= c.M <= 1008 and 7 <= c.N <= 9
               and 1 <= c.K <= 65536 for c in cs)
    assert len({c.K for c in cs}) > 20           # log-uniform over 1..65536: spread, not one value
    assert [c.id for c in load_spec(f)] == [c.id for c in cs]          # the seed fixes the draws
    f.write_text(text.format(seed=8))
    assert [c.id for c in load_spec(f)] != [c.id for c in cs]


def test_csv_spec(tmp_path):
    f = tmp_path / "c.csv"
    f.write_text("B,M,N,K,dtype,chip,branch\n4,64,64,256,bf16,ascend950pr,\n1,16,16,8192,fp16,ascend950pr,stream_k\n"
                 "\n4,64,64,256,bf16,ascend950pr,\n")
    cs = load_spec(f)
    assert [c.id for c in cs] == ["4x64x64x256-bf16-ascend950pr-planner",
                                  "1x16x16x8192-fp16-ascend950pr-stream_k-planner"]
    assert cs[1].branches == ("stream_k",)


BAD = [
    ("s.toml", "[[grid]]\nB = [1]\nM = [16]\nN = [16]\nK = [16]\ncolour = 1\n", "grid[0].colour"),
    ("s.toml", "speed = 3\n[[grid]]\nB = [1]\nM = [16]\nN = [16]\nK = [16]\n", "speed"),
    ("s.toml", "[[grid]]\nB = [1]\nM = [16]\nN = [16]\n", "grid[0].K"),
    ("s.toml", "[[grid]]\nB = [1]\nM = {start = 64, stop = 16, num = 3}\nN = [16]\nK = [16]\n", "grid[0].M.stop"),
    ("s.toml", "[[grid]]\nB = [1]\nM = {start = 16, stop = 64, num = 3, scale = 'cubic'}\nN = [16]\nK = [16]\n",
     "grid[0].M.scale"),
    ("s.toml", "[[grid]]\nB = [1]\nM = {start = 16, stop = 64}\nN = [16]\nK = [16]\n", "grid[0].M"),
    ("s.toml", "[[grid]]\nB = [-1]\nM = [16]\nN = [16]\nK = [16]\n", "grid[0].B[0]"),
    ("s.toml", "dtypes = ['bf17']\n[[grid]]\nB = [1]\nM = [16]\nN = [16]\nK = [16]\n", "dtypes[0]"),
    ("s.toml", "chips = ['nochip']\n[[grid]]\nB = [1]\nM = [16]\nN = [16]\nK = [16]\n", "chips[0]"),
    ("s.toml", "branches = ['asw']\n[[grid]]\nB = [1]\nM = [16]\nN = [16]\nK = [16]\n", "branches[0]"),
    ("s.toml", "[[grid]]\nB = [1]\nM = [16]\nN = [16]\nK = [16]\ntilings = 'best'\n", "grid[0].tilings"),
    ("s.toml", "[random]\nB = [1]\nM = [16]\nN = [16]\nK = [16]\n", "random.n"),
    ("s.toml", "[random]\nn = 2\nB = {start = 1, stop = 4, num = 2}\nM = [16]\nN = [16]\nK = [16]\n",
     "random.B.num"),
    ("s.toml", "dtypes = ['bf16']\n", "grid"),
    ("s.toml", "[[grid]\nB = 1\n", "not valid TOML"),
    ("s.csv", "B,M,N,K,dtype\n1,16,16,16,bf16\n", "chip"),
    ("s.csv", "B,M,N,K,dtype,chip\n1,16,x,16,bf16,ascend950pr\n", "row 2, column N"),
    ("s.csv", "B,M,N,K,dtype,chip,branch\n1,16,16,16,bf16,ascend950pr,fast\n", "row 2, column branch"),
    ("s.csv", "B,M,N,K,dtype,chip,flavour\n1,16,16,16,bf16,ascend950pr,x\n", "flavour"),
    ("s.json", "{}", "suffix"),
]


@pytest.mark.parametrize("name,text,key", BAD, ids=[b[2] for b in BAD])
def test_bad_spec_names_the_key_and_file(tmp_path, name, text, key):
    f = tmp_path / name
    f.write_text(text)
    with pytest.raises(pyto.InputError) as e:
        load_spec(f)
    assert key in str(e.value) and str(f) in str(e.value)


# ---- rows --------------------------------------------------------------------------------------------------

def test_rows_schema_and_content(serial, cases):
    rows = by_case(serial)
    assert list(rows) == [c.id for c in cases]
    for c in cases:
        rs = rows[c.id]
        a_shape, b_shape = c.shapes()
        model = plan(a_shape, b_shape, c.dtype)
        roof = roofline_us(model.problem, pyto.load_chip(c.chip))
        assert all(list(r) == list(NAMES) for r in rs)
        assert all(not r["error"] for r in rs), [r["error"] for r in rs]
        assert sum(r["model_plan"] for r in rs) == 1
        m = next(r for r in rs if r["model_plan"])
        assert m["branch"] == model.branch and m["est_us"] == model.estimate.t_total
        # every legal branch has a row, each branch's forced plan exactly once (the model's may stand for it)
        from pyto_kernels.bmm import legal_branches
        assert {r["branch"] for r in rs} == set(legal_branches(a_shape, b_shape, c.dtype))
        for r in rs:
            assert r["model_branch"] == model.branch and r["a_shape"] == json.dumps(list(a_shape))
            assert r["est_us"] == max(r[f"est_{t}_us"] for t in TERMS)
            assert r["roofline_us"] == pytest.approx(roof, rel=1e-12)
            assert r["roofline_fraction"] == pytest.approx(roof / r["simulated_us"], rel=1e-12)
            assert r["simulated_us"] >= roof * (1 - 1e-9)      # no plan beats the roofline
            assert max(r[f"pipe_{p}_us"] for p in PIPES) <= r["simulated_us"] * (1 + 1e-9)
            assert r["bottleneck"] in PIPES and r["bound"].endswith("-bound")
            assert r["pyto_version"] == pyto.__version__ and r["chip_hash"] == tune_mod.chip_hash(
                pyto.load_chip(c.chip))
    # one row re-simulated independently: the forced plan, its time and the Report's figures
    r = next(r for r in serial if r["label"] == "planner's tiling (forced)")
    a_shape, b_shape = json.loads(r["a_shape"]), json.loads(r["b_shape"])
    rep = tune_mod.simulate_report(plan(a_shape, b_shape, r["dtype"], branch=r["branch"]), a_shape, b_shape)
    assert r["simulated_us"] == rep.time_us and r["bound"] == rep.bound and r["bottleneck"] == rep.bottleneck
    assert r["pipe_MTE2_us"] == pytest.approx(rep.pipe_cycles["MTE2"] / (rep.clock_ghz * 1e3), rel=1e-12)


def test_fastest_flag_is_the_least_simulated_time(serial):
    for cid, rs in by_case(serial).items():
        best = min(r["simulated_us"] for r in rs)
        flagged = [r for r in rs if r["fastest"]]
        assert len(flagged) == 1 and flagged[0]["simulated_us"] == best, cid
        assert flagged[0] is next(r for r in rs if r["simulated_us"] == best)      # ties: the first row


def test_seed_branch_follows_the_seed_order():
    order = ["special", "to_matmul", "merge_batch", "iter_batch", "asw_basic", "stream_k"]
    shapes = {"merge+iter overlap": ((128, 32, 1024), (128, 1024, 32)), "K = 0": ((64, 64, 0), (64, 0, 64)),
              "batch-1 side and StreamK": ((1, 64, 8192), (1, 8192, 64)), "no home": ((2, 32, 4096), (2, 4096, 16)),
              "long K, B = 2": ((2, 32, 16384), (2, 16384, 32))}
    seen = set()
    for a, b in shapes.values():
        p = plan(a, b)
        homes = [c.branch for c in p.conditions if c.home]
        seed, listed = seed_branch_of(p.conditions)
        assert sorted(listed, key=order.index) == listed and set(listed) == set(homes)
        assert seed == (min(homes, key=order.index) if homes else "asw_basic")
        seen.add(seed)
    assert seen == {"merge_batch", "special", "to_matmul", "asw_basic", "stream_k"}   # each rule exercised
    assert seed_branch_of(plan(*shapes["merge+iter overlap"]).conditions)[1][:2] == ["merge_batch", "iter_batch"]


def test_candidates_tilings_add_the_next_best(serial):
    c = Case(2, 32, 16, 4096, tilings="candidates")
    rs = run_case(c)
    planner = [r for r in run_case(Case(2, 32, 16, 4096)) if r["label"] != "the model's plan"]
    assert len(rs) > len(planner) and any(r["label"].startswith("next-best #1") for r in rs)
    for r in rs:                 # each row's tiling_changes rebuild its plan and its estimate
        if r["model_plan"]:
            continue
        p = plan((2, 32, 4096), (2, 4096, 16), branch=r["branch"])
        changes = json.loads(r["tiling_changes"])
        if changes:
            p = p.with_tiling(**changes)
        assert p.estimate.t_total == r["est_us"] and tune_mod._brief(p.tiling) == r["tiling"]


def test_error_rows_never_a_crash(monkeypatch):
    rs = run_case(Case(4, 64, 64, 64, dtype="fp8e4"))          # a dtype bmm refuses
    assert len(rs) == 1 and rs[0]["error_class"] == "ShapeError" and "fp8e4" in rs[0]["error"]
    assert rs[0]["simulated_us"] is None and not rs[0]["fastest"] and rs[0]["case"] == "4x64x64x64-fp8e4-ascend950pr-planner"
    rs = run_case(Case(4, 64, 64, 64, branches=("to_matmul",)))   # a forced branch that is illegal here
    assert len(rs) == 1 and rs[0]["branch"] == "to_matmul" and rs[0]["error_class"] == "PlanError"
    rs = run_case(Case(4, 64, 64, 64, branches=("to_matmul", "asw_basic")))
    assert [(r["branch"], r["error_class"]) for r in rs] == [("to_matmul", "PlanError"), ("asw_basic", "")]
    assert rs[1]["fastest"]
    real = tune_mod.simulate_report

    def broken(p, *args):        # a candidate whose simulation raises something that is no PytoError
        if p.branch == "stream_k":
            raise ZeroDivisionError("injected")
        return real(p, *args)
    monkeypatch.setattr(tune_mod, "simulate_report", broken)
    rs = run_case(Case(2, 32, 16, 4096))
    bad = [r for r in rs if r["branch"] == "stream_k"]
    assert bad and all(r["error_class"] == "ZeroDivisionError" and r["simulated_us"] is None for r in bad)
    assert sum(r["fastest"] for r in rs) == 1 and all(r["simulated_us"] is not None for r in rs if r["fastest"])

    def crash(case):             # the whole case: one row
        raise RuntimeError("bug")
    monkeypatch.setattr(sweep_mod, "_rows", crash)
    rs = run_case(Case(2, 32, 16, 4096))
    assert len(rs) == 1 and rs[0]["error_class"] == "RuntimeError" and rs[0]["error"] == "bug"


# ---- executors, resume, files ------------------------------------------------------------------------------

def test_process_pool_gives_the_serial_rows(serial, cases):
    assert sweep(cases, workers=2, progress=False) == serial


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("dask.distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


def test_dask_local_cluster_gives_the_serial_rows(serial, cases, dask_client, tmp_path):
    assert sweep(cases, client=dask_client, progress=False) == serial
    out = tmp_path / "d.csv"          # by address (as --scheduler), into a file
    first = serial[:sum(len(rs) for rs in list(by_case(serial).values())[:3])]
    assert sweep(cases[:3], out, scheduler=dask_client.scheduler.address, progress=False) == first
    assert read_rows(out) == first


def test_resume_skips_the_cases_done(serial, cases, tmp_path, monkeypatch):
    cases = cases[:12]
    serial = [r for r in serial if r["case"] in {c.id for c in cases}]
    calls = []
    real = sweep_mod.run_case

    def counted(case):
        calls.append(case.id)
        if len(calls) == 6 and stop:
            raise KeyboardInterrupt        # a kill mid-way, after 5 cases
        return real(case)
    monkeypatch.setattr(sweep_mod, "run_case", counted)
    out = tmp_path / "out.csv"
    stop = True
    with pytest.raises(KeyboardInterrupt):
        sweep(cases, out, workers=1, progress=False)
    done = by_case(read_rows(out))
    assert list(done) == [c.id for c in cases[:5]]        # the file is whole and holds the cases done
    stop, calls[:] = False, []
    assert sweep(cases, out, workers=1, progress=False) == serial
    assert calls == [c.id for c in cases[5:]]
    assert read_rows(out) == serial
    calls.clear()
    assert sweep(cases, out, workers=1, progress=False) == serial and calls == []   # all done: nothing runs


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_file_round_trip(serial, tmp_path, suffix):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    rows = serial[:20] + run_case(Case(4, 64, 64, 64, dtype="fp8e4"))      # an error row: empty numbers
    out = tmp_path / f"rows{suffix}"
    write_rows(out, rows)
    back = read_rows(out)
    assert back == rows
    assert all(type(r[n]) is t for r in back for n, t in COLUMNS if r[n] is not None)
    assert not list(tmp_path.glob(".*tmp"))          # the temporary file is gone


def test_file_errors(tmp_path, monkeypatch):
    with pytest.raises(pyto.InputError, match="suffix"):
        write_rows(tmp_path / "x.json", [])
    monkeypatch.setattr(sweep_mod, "run_case", lambda case: pytest.fail("ran a case before checking the output"))
    with pytest.raises(pyto.InputError, match="suffix"):
        sweep([Case(1, 16, 16, 64)], tmp_path / "x.json", workers=1, progress=False)
    bad = tmp_path / "other.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(pyto.InputError, match="column"):
        read_rows(bad)


def test_missing_extras_name_the_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "dask.distributed", None)
    with pytest.raises(pyto.UnsupportedError, match=r"pip install 'pyto\[sweep\]'"):
        sweep([Case(1, 16, 16, 64)], scheduler="tcp://127.0.0.1:1", progress=False)
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(pyto.UnsupportedError, match=r"pip install 'pyto\[sweep\]'"):
        write_rows(tmp_path / "x.parquet", [])
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    from pyto_kernels.bmm.sweep_plot import plot
    with pytest.raises(pyto.UnsupportedError, match=r"pip install 'pyto\[plot\]'"):
        plot([], str(tmp_path))


# ---- plot and CLI ------------------------------------------------------------------------------------------

def test_slices_winner_and_margin(serial):
    from pyto_kernels.bmm.sweep_plot import slices
    found = slices(serial, {"B": 2, "N": 32, "dtype": "bf16"})
    assert len(found) == 1 and (found[0]["x"], found[0]["y"]) == ("M", "K")
    cells = found[0]["cells"]
    assert set(cells) == {(m, k) for m in (16, 64) for k in (64, 512, 2048)}
    for (m, k), cell in cells.items():
        rs = [r for r in serial if (r["B"], r["M"], r["N"], r["K"], r["dtype"]) == (2, m, 32, k, "bf16")]
        fastest = next(r for r in rs if r["fastest"])
        others = [r["simulated_us"] for r in rs if r["branch"] != cell["winner"]]
        assert cell["winner"] == fastest["branch"] or math.isclose(
            min(r["simulated_us"] for r in rs if r["branch"] == cell["winner"]), fastest["simulated_us"])
        assert cell["margin"] == pytest.approx(min(others) / fastest["simulated_us"] - 1, rel=1e-12)
        assert cell["seed_branch"] == rs[0]["seed_branch"]
    with pytest.raises(pyto.InputError, match="vary"):
        slices(serial, {"dtype": "bf16"})


def test_plot_writes_png(serial, tmp_path):
    pytest.importorskip("matplotlib")
    from pyto_kernels.bmm.sweep_plot import plot
    paths = plot(serial, str(tmp_path / "plots"), {"B": 32, "dtype": "bf16"}, axes=("M", "K"))
    assert len(paths) == 2                   # one per N (32, 128)
    for p in paths:
        with open(p, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_cli_sweep_and_plot(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text('[[grid]]\nB = [1]\nM = [16, 64]\nN = [32]\nK = [256, 4096]\n')
    out = tmp_path / "o.csv"
    assert main(["sweep", str(spec), "-o", str(out), "--workers", "1"]) == 0
    text = capsys.readouterr().out
    rows = read_rows(out)
    assert f"pyto sweep: 4 cases, {len(rows)} rows (0 with an error) in {out}" in text
    assert len(by_case(rows)) == 4
    assert main(["sweep", str(spec)]) == 2                      # no -o
    assert main(["sweep", str(spec), "--from", str(out)]) == 2    # both a spec and --from
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert main(["sweep", "--from", str(out), "--plot", str(tmp_path / "p")]) == 0
    assert "plot: " in capsys.readouterr().out and len(list((tmp_path / "p").glob("*.png"))) == 1
