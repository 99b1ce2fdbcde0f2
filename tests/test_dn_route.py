"""DN operands per chip: the Dn2Nz GM -> L1 load (docs/fractal_formats.md §4.4: Ascend 950PR/950DT only) and the route the
other chips take, loading as stored and transposing L1 -> L0A/L0B (Ascend C LoadDataWithTranspose).

Numbers are checked against a float64 numpy reference: int8 exactly (int32 accumulation of small products is
exact), floats within `matmul_bound` (half an ulp of the output plus fp32 accumulation, see pyto.testing).
"""
import importlib
import inspect
import math
import re

import ml_dtypes
import numpy as np
import pytest

import pyto
import pyto.language as pl
from pyto_kernels import matmul
from pyto_kernels.bmm import bmm
from pyto_kernels.bmm.api import check
from pyto_kernels.bmm.common import operands
from pyto_kernels.bmm.planner import legal_branches, plan
from pyto.testing import assert_close, matmul_bound

NP = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp32": np.float32, "int8": np.int8}
NO_DN2NZ = ("atlas-a2", "atlas-a3")


def _rand(shape, dt, rng):
    if dt == "int8":
        return rng.integers(-128, 128, shape).astype(np.int8)
    return rng.standard_normal(shape).astype(NP[dt])


def _line_of(fn, text: str) -> int:
    """The source line number of the first line of kernel `fn` containing `text`."""
    lines, first = inspect.getsourcelines(fn.fn)
    return first + next(i for i, ln in enumerate(lines) if text in ln)


# ---- the chip tables -----------------------------------------------------------------------------------
def test_only_the_950_has_dn2nz():
    assert pyto.load_chip("ascend950pr").dn2nz is True
    for name in NO_DN2NZ:
        assert pyto.load_chip(name).dn2nz is False


def test_dn2nz_key_is_typed_and_optional(tmp_path):
    """A table from before the key loads without Dn2Nz (what docs/fractal_formats.md §4.4 gives every chip but the 950); a
    non-boolean value is a ChipError naming the key."""
    text = open(pyto.load_chip("ascend950pr").source).read()
    line = next(ln for ln in text.splitlines() if ln.startswith("dn2nz"))
    older = tmp_path / "older.toml"
    older.write_text(text.replace(line + "\n", ""))
    assert pyto.load_chip(older).dn2nz is False
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace(line, 'dn2nz = "yes"'))
    with pytest.raises(pyto.ChipError, match=r"formats\.dn2nz.*bool"):
        pyto.load_chip(bad)


# ---- a DN A through either route, written with the DSL -----------------------------------------------------
@pl.kernel
def dn_a_matmul(a_t, b, out, *, M: int, N: int, K: int, DN2NZ: bool):
    """out [M, N] = a_t.T @ b with a_t stored [K, M]: Dn2Nz into an [M, K] NZ L1 tile (DN2NZ) or as stored into
    an [M, K] ZN L1 tile (the NZ bytes of the stored [K, M]), transposed on the way to L0A."""
    b_l1 = pl.alloc(pl.L1, [K, N], b.dtype)
    a_l0 = pl.alloc(pl.L0A, [M, K], a_t.dtype)
    b_l0 = pl.alloc(pl.L0B, [K, N], b.dtype)
    c = pl.alloc(pl.L0C, [M, N], a_t.dtype.acc)
    if DN2NZ:
        a_l1 = pl.alloc(pl.L1, [M, K], a_t.dtype)
        pl.load(a_l1, a_t, [0, 0], order=[1, 0])      # the Dn2Nz load
    else:
        a_l1 = pl.alloc(pl.L1, [M, K], a_t.dtype, layout=pl.ZN)
        pl.load(a_l1, a_t, [0, 0], order=[1, 0])      # a plain Nd2Nz of the stored matrix
    pl.move(a_l0, a_l1)
    pl.load(b_l1, b, [0, 0])
    pl.move(b_l0, b_l1)
    pl.matmul(c, a_l0, b_l0)
    pl.store(out, c, [0, 0])


@pl.kernel
def dn_b_matmul(a, b_t, out, *, M: int, N: int, K: int):
    """out [M, N] = a @ b_t.T with b_t stored [N, K]: as stored into a [K, N] ZN L1 tile, transposed on the way
    to L0B."""
    a_l1 = pl.alloc(pl.L1, [M, K], a.dtype)
    b_l1 = pl.alloc(pl.L1, [K, N], b_t.dtype, layout=pl.ZN)
    a_l0 = pl.alloc(pl.L0A, [M, K], a.dtype)
    b_l0 = pl.alloc(pl.L0B, [K, N], b_t.dtype)
    c = pl.alloc(pl.L0C, [M, N], a.dtype.acc)
    pl.load(a_l1, a, [0, 0])
    pl.load(b_l1, b_t, [0, 0], order=[1, 0])
    pl.move(a_l0, a_l1)
    pl.move(b_l0, b_l1)
    pl.matmul(c, a_l0, b_l0)
    pl.store(out, c, [0, 0])


def _out(M, N, dt):
    return np.zeros((M, N), np.int32 if dt == "int8" else NP[dt])


def _assert_matmul(c, a, b):
    ref = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
    if c.dtype == np.int32:
        assert np.array_equal(c, ref.astype(np.int64))
    else:
        assert_close(c, ref, matmul_bound(a, b, c.dtype))


@pytest.mark.parametrize("chip", NO_DN2NZ)
def test_dn2nz_load_is_refused_without_the_capability(chip):
    """UnsupportedError naming the chip, the kernel's own line, and the route to take instead."""
    M, N, K = 32, 32, 32
    a_t, b = np.ones((K, M), np.float16), np.ones((K, N), np.float16)
    out = np.full((M, N), 7, np.float16)
    with pytest.raises(pyto.UnsupportedError) as e:
        pyto.run(dn_a_matmul, a_t, b, out, M=M, N=N, K=K, DN2NZ=True, chip=chip)
    msg = str(e.value)
    line = _line_of(dn_a_matmul, "order=[1, 0])      # the Dn2Nz load")
    assert f"test_dn_route.py:{line}" in msg, msg
    assert chip in msg and "Dn2Nz" in msg and "950" in msg
    assert "layout=pl.ZN (the operand as stored)" in msg and "pl.move into Left/Right transpose it" in msg
    assert (out == 7).all()          # the run is all or nothing


@pytest.mark.parametrize("dt", ["fp16", "bf16", "fp32", "int8"])
def test_dn2nz_load_runs_on_the_950(dt):
    M, N, K = 32, 48, 64
    rng = np.random.default_rng(1)
    a_t, b = _rand((K, M), dt, rng), _rand((K, N), dt, rng)
    out = _out(M, N, dt)
    pyto.run(dn_a_matmul, a_t, b, out, M=M, N=N, K=K, DN2NZ=True, chip="ascend950pr")
    _assert_matmul(out, a_t.T, b)


@pytest.mark.parametrize("chip", ["atlas-a2", "ascend950pr"])
@pytest.mark.parametrize("dt,M,N,K", [("fp16", 20, 28, 40), ("bf16", 48, 17, 33), ("fp32", 16, 40, 48),
                                      ("int8", 32, 20, 64), ("int8", 64, 48, 96)])
def test_l1_to_l0a_transpose_numbers(chip, dt, M, N, K):
    """A stored [K, M], loaded as stored and transposed L1 -> L0A: a_t.T @ b, on every chip (M, N, K off the
    16 grid included: the tiles' zero padding stays out of the product)."""
    rng = np.random.default_rng(M + N + K)
    a_t, b = _rand((K, M), dt, rng), _rand((K, N), dt, rng)
    out = _out(M, N, dt)
    pyto.run(dn_a_matmul, a_t, b, out, M=M, N=N, K=K, DN2NZ=False, chip=chip)
    _assert_matmul(out, a_t.T, b)


@pytest.mark.parametrize("dt,M,N,K", [("fp16", 20, 28, 40), ("bf16", 33, 48, 17), ("fp32", 16, 24, 48),
                                      ("int8", 20, 40, 64)])
def test_l1_to_l0b_transpose_numbers(dt, M, N, K):
    rng = np.random.default_rng(M * N)
    a, b_t = _rand((M, K), dt, rng), _rand((N, K), dt, rng)
    out = _out(M, N, dt)
    pyto.run(dn_b_matmul, a, b_t, out, M=M, N=N, K=K, chip="atlas-a2")
    _assert_matmul(out, a, b_t.T)


@pytest.mark.parametrize("dt,M,K", [("fp16", 64, 64), ("int8", 64, 128), ("fp32", 32, 64)])
def test_l1_to_l0a_transpose_costs_what_the_plain_load_does(dt, M, K):
    """Both routes move the same GM bytes (the same region, the same bursts) and the same MTE1 bytes: the
    transposing L1 -> L0A load is the L0A tile's whole fractals at the L1 -> L0A rate, as the plain one."""
    chip = pyto.load_chip("ascend950pr")
    N = 32
    a_t, b = np.ones((K, M), NP[dt]), np.ones((K, N), NP[dt])
    runs = {}
    for dn2nz in (True, False):
        out = _out(M, N, dt)
        runs[dn2nz] = pyto.run(dn_a_matmul, a_t, b, out, M=M, N=N, K=K, DN2NZ=dn2nz, chip=chip)
        assert (out == K).all()
    isz = np.dtype(NP[dt]).itemsize
    path_a, path_b = chip.path("L1", "L0A"), chip.path("L1", "L0B")
    mte1 = M * K * isz / path_a.bytes_per_cycle + K * N * isz / path_b.bytes_per_cycle
    for rep in runs.values():
        assert rep.pipe_cycles["MTE1"] == pytest.approx(mte1)
    assert runs[True].pipe_cycles["MTE2"] == pytest.approx(runs[False].pipe_cycles["MTE2"])
    assert runs[True].gm_read_bytes == runs[False].gm_read_bytes
    assert runs[True].cycles == pytest.approx(runs[False].cycles)


@pl.kernel
def transposed_l0a_view(a_t, out, *, ROWS: int, COLS: int, TILE_ROWS: int, TILE_COLS: int):
    """Load a_t [COLS, ROWS] as stored (a [ROWS, COLS] ZN L1 tile), then transpose it into the [ROWS, COLS]
    corner of an L0A tile."""
    a_l1 = pl.alloc(pl.L1, [ROWS, COLS], a_t.dtype, layout=pl.ZN)
    a_l0 = pl.alloc(pl.L0A, [TILE_ROWS, TILE_COLS], a_t.dtype)
    pl.load(a_l1, a_t, [0, 0], order=[1, 0])
    pl.move(a_l0[0:ROWS, 0:COLS], a_l1)


@pytest.mark.parametrize("dt,rows,cols,tile,ok", [
    ("int8", 32, 64, (64, 64), True),      # whole 32 x 32 squares
    ("int8", 16, 64, (64, 64), False),     # half a square of rows (M) inside the tile
    ("int8", 48, 64, (64, 64), False),
    ("int8", 48, 64, (48, 64), True),      # ends at the tile's edge: its CeilAlign(32) padding holds the square
    ("fp32", 16, 8, (16, 32), False),      # fp32 squares are 16 x 16: 8 columns (K) are half of one
    ("fp32", 16, 16, (16, 32), True),
    ("fp16", 16, 16, (32, 32), True),      # fp16: one fractal is the square
])
def test_l1_to_l0a_transpose_moves_whole_squares(dt, rows, cols, tile, ok):
    a_t = np.ones((cols, rows), NP[dt])
    kw = dict(ROWS=rows, COLS=cols, TILE_ROWS=tile[0], TILE_COLS=tile[1], chip="atlas-a2")
    if ok:
        pyto.run(transposed_l0a_view, a_t, a_t.copy(), **kw)
    else:
        with pytest.raises(pyto.AlignmentError, match=r"LoadDataWithTranspose.*squares") as e:
            pyto.run(transposed_l0a_view, a_t, a_t.copy(), **kw)
        assert f"test_dn_route.py:{_line_of(transposed_l0a_view, 'pl.move(a_l0')}" in str(e.value)


# ---- the kernels take the A2/A3 route ---------------------------------------------------------------------
def _dn_operands(B, M, N, K, dt, ta, tb, seed):
    rng = np.random.default_rng(seed)
    a = _rand((B, K, M) if ta else (B, M, K), dt, rng)
    b = _rand((B, N, K) if tb else (B, K, N), dt, rng)
    return a, b


TRANSPOSES = [(True, False), (False, True), (True, True)]
BRANCH_SHAPES = {          # (B, M, N, K) inside each branch's conditions, M/N/K off the 16 grid
    "asw_basic": (2, 100, 72, 200),
    "iter_batch": (4, 40, 72, 100),
    "merge_batch": (6, 20, 40, 100),
    "stream_k": (1, 20, 24, 2100),
}


CASES = [("atlas-a2", br, dt, ta, tb) for br in BRANCH_SHAPES for dt in ("fp16", "bf16", "fp32", "int8")
         for ta, tb in TRANSPOSES]
CASES += [("atlas-a3", br, dt, True, True) for br in BRANCH_SHAPES for dt in ("fp16", "int8")]   # A2's core


@pytest.mark.parametrize("chip,branch,dt,ta,tb", CASES)
def test_bmm_branches_with_dn_operands_without_dn2nz(chip, branch, dt, ta, tb):
    """Each branch forced on DN operands on A2/A3: right numbers, though Dn2Nz is refused there (so the
    kernels load as stored and transpose L1 -> L0)."""
    B, M, N, K = BRANCH_SHAPES[branch]
    a, b = _dn_operands(B, M, N, K, dt, ta, tb, seed=B + M + K)
    bias = np.random.default_rng(3).integers(-5, 5, (N,)).astype(np.int32 if dt == "int8" else np.float32)
    p = plan(a.shape, b.shape, pyto.dtypes.as_dtype(a.dtype), chip, bias=True, transpose_a=ta, transpose_b=tb,
             branch=branch)
    c = bmm(a, b, bias, chip=chip, transpose_a=ta, transpose_b=tb, branch=branch)
    why = check(c, a, b, bias, transpose_a=ta, transpose_b=tb)
    assert not why, f"{branch} {dt} ta={ta} tb={tb}: {why}\n{p.tiling}"


@pytest.mark.parametrize("dt", ["fp16", "int8"])
def test_bmm_to_matmul_and_special_with_dn_operands_on_a2(dt):
    """ToMatmul (B broadcast: A folds to [B*M, K] when A is not DN) and Special (single-row transposes into UB,
    unchanged by the route)."""
    rng = np.random.default_rng(5)
    a, b = _rand((8, 50, 300), dt, rng), _rand((200, 300), dt, rng)
    c = bmm(a, b, chip="atlas-a2", transpose_b=True, branch="to_matmul")
    assert not check(c, a, b, transpose_b=True)
    a, b = _rand((4, 1, 48), dt, rng), _rand((4, 40, 1), dt, rng)
    c = bmm(a, b, chip="atlas-a2", transpose_a=True, transpose_b=True, branch="special")
    assert not check(c, a, b, transpose_a=True, transpose_b=True)


@pytest.mark.parametrize("dt,M,N,K", [("fp16", 100, 72, 200), ("bf16", 33, 130, 70), ("fp32", 72, 40, 100),
                                      ("int8", 40, 72, 100), ("int8", 100, 260, 300)])
@pytest.mark.parametrize("ta,tb", TRANSPOSES)
def test_matmul_with_dn_operands_on_a2(dt, M, N, K, ta, tb):
    rng = np.random.default_rng(M + N)
    a = _rand((K, M) if ta else (M, K), dt, rng)
    b = _rand((N, K) if tb else (K, N), dt, rng)
    c = matmul(a, b, chip="atlas-a2", transpose_a=ta, transpose_b=tb)
    _assert_matmul(c, a.T if ta else a, b.T if tb else b)


@pytest.mark.parametrize("full_load", ["A", "B"])
def test_matmul_holds_a_dn_operand_as_stored(full_load):
    """A held (L1 full load) DN operand is held as stored, its base tiles cut from it as column views; int8
    A's M = 72 leaves a tail tile, trimmed to 32 rows (the transposing load's square), not 16."""
    rng = np.random.default_rng(9)
    M, N, K = 72, 600, 96
    a, b = _rand((K, M), "int8", rng), _rand((N, K), "int8", rng)
    c = matmul(a, b, chip="atlas-a2", transpose_a=True, transpose_b=True, full_load=full_load)
    _assert_matmul(c, a.T, b.T)


def test_dn_route_moves_the_same_gm_bytes_as_dn2nz(tmp_path):
    """A2 as it is and a what-if A2 with Dn2Nz: the same results from the same GM traffic (the two routes read
    the same regions; only where the transpose happens differs)."""
    text = open(pyto.load_chip("atlas-a2").source).read()
    what_if = tmp_path / "a2-dn2nz.toml"
    what_if.write_text(re.sub(r"(?m)^dn2nz = false", "dn2nz = true", text))
    assert pyto.load_chip(what_if).dn2nz
    a, b = _dn_operands(4, 40, 72, 100, "fp16", True, True, seed=2)
    out = {}
    for chip in ("atlas-a2", str(what_if)):
        out[chip] = bmm(a, b, chip=chip, transpose_a=True, transpose_b=True, branch="iter_batch", report=True)
    (c0, r0), (c1, r1) = out.values()
    assert np.array_equal(c0, c1)
    assert r0.gm_read_bytes == r1.gm_read_bytes and r0.gm_bytes == r1.gm_bytes


# ---- the planners agree with the kernels -----------------------------------------------------------------
@pytest.mark.parametrize("dt", ["fp16", "fp32", "int8"])
@pytest.mark.parametrize("shape", [(3, 40, 72, 100), (1, 100, 260, 300), (8, 20, 40, 70), (2, 330, 20, 1500)])
def test_every_legal_branch_launches_with_dn_operands_on_a2(dt, shape):
    """Whatever branch the planner finds legal for DN operands on A2 runs as planned (timing mode): no
    AlignmentError or CapacityError at launch from the L1 tiles held as stored."""
    B, M, N, K = shape
    a_shape, b_shape = (B, K, M), (B, N, K)
    branches = legal_branches(a_shape, b_shape, dt, "atlas-a2", transpose_a=True, transpose_b=True)
    assert branches
    for branch in branches:
        p = plan(a_shape, b_shape, dt, "atlas-a2", transpose_a=True, transpose_b=True, branch=branch)
        ops = operands(p.problem, pyto.spec(a_shape, dt), pyto.spec(b_shape, dt))
        rep = importlib.import_module(f"pyto_kernels.bmm.{branch}").launch(p, ops, mode="timing")
        assert rep.cycles > 0 and math.isfinite(rep.cycles)


@pytest.mark.parametrize("ta", [False, True])
def test_cost_model_trims_a_stored_int8_a_like_the_kernel(ta):
    """One 40-row int8 tile on A2: the kernel trims its M to 48 (16 grid), or to 64 when L1 holds A as stored
    (32 grid); the cost model's MMAD and MTE1 busy cycles follow the emulator's either way."""
    from pyto_kernels.bmm.cost import _MODELS
    a_shape, b_shape = ((1, 100, 40) if ta else (1, 40, 100)), (1, 100, 64)
    chip = pyto.load_chip("atlas-a2")
    p = plan(a_shape, b_shape, "int8", chip, transpose_a=ta, branch="asw_basic").with_tiling(
        base_m=64, base_n=64, cores_used=1)
    ops = operands(p.problem, pyto.spec(a_shape, "int8"), pyto.spec(b_shape, "int8"))
    rep = importlib.import_module("pyto_kernels.bmm.asw_basic").launch(p, ops, mode="timing")
    w = _MODELS[type(p.tiling)](p.tiling, p.problem, chip)
    mt = 64 if ta else 48
    steps = math.ceil(100 / 32)                    # K 100 in k0 = 32 steps, padded
    assert rep.pipe_cycles["M"] == pytest.approx(mt // 16 * 4 * steps * chip.cube_cycles_per_step["int8"]
                                                 + chip.mmad_head_cycles * math.ceil(128 / p.tiling.base_k))
    assert w.cyc["MMAD"] == pytest.approx(rep.pipe_cycles["M"])
    assert w.cyc["MTE1"] == pytest.approx(rep.pipe_cycles["MTE1"])
