"""`pyto check` on 4:2 sparse matmul kernels (checker/sparse.py; tests/check_kernels/sparse_matmul.py): the random
input of a uint8 tensor that feeds a sparse MMAD's index is valid index bytes (pyto.layout's format), so a correct
kernel passes, and its numbers, as the checker computed them, are the float64 numpy product of a and the B its
inputs encode (decoded here by hand from the bytes: exact, int8 x int8 summed over K = 256 stays below 2^23); an
index the kernel overwrites, or one the caller gives, is still a SparsityError naming the MMAD's line; a uint8
input that feeds no index keeps the ordinary random bytes."""
import json
import re
from pathlib import Path

import numpy as np
import pytest

import pyto
import pyto.language as pl
from pyto.checker import check_file, load_file, runner
from pyto.checker.sparse import index_inputs, random_index_bytes
from pyto.cli import main

KERNELS = Path(__file__).parent / "check_kernels"
FILE = KERNELS / "sparse_matmul.py"
#: the bytes of two valid pairs (i0, i1), 0 <= i0 <= i1 <= 2 (MmadWithSparse.md table 2), i0 in a nibble's low bits
VALID_NIBBLES = {i0 | i1 << 2 for i1 in range(3) for i0 in range(i1 + 1)}
VALID_BYTES = {lo | hi << 4 for lo in VALID_NIBBLES for hi in VALID_NIBBLES}


def expanded_b(b_t: np.ndarray, idx_t: np.ndarray) -> np.ndarray:
    """The [K, N] float64 B that b_t [N, K/2] and idx_t [N, K/8] (bytes of four 2-bit indices along K, the first in
    the low bits) encode: dense rows 2g, 2g + 1 at K rows 4g + i0 and 4g + 1 + i1 of group g."""
    n, k2 = b_t.shape
    b = np.zeros((2 * k2, n))
    for col in range(n):
        for r in range(k2):
            i = (int(idx_t[col, r // 4]) >> (2 * (r % 4))) & 3
            b[4 * (r // 2) + r % 2 + i, col] = b_t[col, r]
    return b


def _line(text: str) -> int:
    return next(i for i, src in enumerate(FILE.read_text().splitlines(), 1) if text in src)


def test_ordinary_random_bytes_would_fail_the_correct_kernel():
    """The failure the checker's drawing removes: the ordinary random uint8 input is no valid index."""
    kf = load_file(str(FILE))
    kernel = dict(kf.kernels)["sparse_matmul"]
    args, _ = runner.make_args(kernel, {}, seed=0)
    with pytest.raises(pyto.SparsityError, match=r"sparse_matmul\.py:\d+ pl\.matmul_sparse\("):
        pyto.run(kernel, *args, chip="atlas-a2")


def test_pyto_check_passes_the_correct_sparse_kernel(capsys):
    code = main(["check", str(FILE), "sparse_matmul"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "idx_t [64, 32] uint8 (4:2 sparse index), c [32, 64] int32" in out
    assert out.splitlines()[-1] == "1 of 1 kernel(s) ok"
    main(["check", str(FILE), "sparse_matmul", "--json"])
    inputs = json.loads(capsys.readouterr().out)["kernels"][0]["inputs"]
    assert inputs["idx_t"] == {"shape": [64, 32], "dtype": "uint8", "data": "4:2 sparse index"}
    assert "data" not in inputs["a"] and "data" not in inputs["b_t"]


@pytest.mark.parametrize("seed", [0, 7])
def test_the_checkers_numbers_are_the_float64_product(monkeypatch, seed):
    """pyto check does not compare with a reference (README: `ok` is no failed check); the arrays it ran on (caught
    from make_args: the index drawn into them in place, c written by the run) are compared here."""
    made = []

    def recording(*a, **kw):
        made.append(runner_make_args(*a, **kw))
        return made[-1]

    runner_make_args = runner.make_args
    monkeypatch.setattr(runner, "make_args", recording)
    _, (result, _) = check_file(str(FILE), seed=seed, show_progress=False)
    assert (result.kernel, result.verdict) == ("sparse_matmul", "ok"), result.message
    a, b_t, idx_t, c = made[0][0]
    assert set(np.unique(idx_t)) <= VALID_BYTES
    np.testing.assert_array_equal(c, a.astype(np.float64) @ expanded_b(b_t, idx_t))
    assert np.abs(c).max() > 0


def test_a_kernel_that_overwrites_its_index_still_fails_at_the_mmad():
    """index_overwritten writes one byte of idx_t (pair (1, 0)) after the checker drew it: SparsityError at the
    first sparse MMAD's line, naming the group and column."""
    _, results = check_file(str(FILE), ["index_overwritten"], show_progress=False)
    (r,) = results
    assert (r.verdict, r.kind) == ("SparsityError", "failed")
    line = _line("pl.matmul_sparse(c_l0")
    assert re.search(rf"^sparse_matmul\.py:{line} pl\.matmul_sparse\(c_l0, a_left, b_right, i_sp, phase=phase\): "
                     r"pl\.matmul_sparse's index: group 6 .* of column 5 has the index pair \(1, 0\)", r.message), \
        r.message


def test_an_index_the_caller_gives_is_not_redrawn():
    """pyto.run / a kernel call take the caller's bytes as they are: a bad pair is the MMAD's SparsityError."""
    kernel = dict(load_file(str(FILE)).kernels)["sparse_matmul"]
    rng = np.random.default_rng(5)
    a = rng.integers(-8, 9, (32, 256)).astype(np.int8)
    b_t = rng.integers(-8, 9, (64, 128)).astype(np.int8)
    idx_t = random_index_bytes(rng, (64, 32))
    c = np.zeros((32, 64), np.int32)
    kernel(a, b_t, idx_t, c)
    np.testing.assert_array_equal(c, a.astype(np.float64) @ expanded_b(b_t, idx_t))
    idx_t[9, 1] = 0b00_00_00_11             # column 9, index byte 1 (dense rows 4..7): group 2's pair is (3, 0)
    with pytest.raises(pyto.SparsityError, match=r"sparse_matmul\.py:\d+ pl\.matmul_sparse\(.*group 2 .* of column "
                                                 r"9 has the index pair \(3, 0\)"):
        kernel(a, b_t, idx_t, c)


@pytest.mark.parametrize("shape", [(1, 1), (64, 32), (3, 5, 7)])
def test_random_index_bytes_are_every_valid_byte_and_no_other(shape):
    """Each byte is two valid pairs, whatever the shape; over 4096 bytes all 36 such bytes occur."""
    rng = np.random.default_rng(11)
    got = random_index_bytes(rng, shape)
    assert got.shape == shape and got.dtype == np.uint8
    assert set(np.unique(got)) <= VALID_BYTES
    many = random_index_bytes(rng, (64, 64))
    assert set(np.unique(many)) == VALID_BYTES


@pl.jit(arch="a2")
def copy_bytes(x: pl.Tensor[[16, 64], pl.DT_UINT8], y: pl.Tensor[[16, 64], pl.DT_UINT8]):
    """y = x through UB: a uint8 input that feeds no sparse index."""
    x_ub = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_UINT8, target_memory=pl.MemorySpace.Vec), addr=0x0)
    with pl.section_vector():
        pl.load(x_ub, x, [0, 0])
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.store(y, x_ub, [0, 0])


def test_a_uint8_input_that_feeds_no_index_keeps_its_random_bytes(monkeypatch):
    made = []
    runner_make_args = runner.make_args
    monkeypatch.setattr(runner, "make_args", lambda *a, **kw: made.append(runner_make_args(*a, **kw)) or made[-1])
    r = pyto.check(copy_bytes)
    assert r.verdict == "ok", r.message
    assert "data" not in r.inputs["x"]
    (x, y), _ = made[0]
    fresh, _ = runner_make_args(copy_bytes, {}, seed=0)
    np.testing.assert_array_equal(x, fresh[0])          # the ordinary random bytes, not redrawn
    np.testing.assert_array_equal(y, x)
    compiled = pyto.compile(copy_bytes, *fresh, chip="atlas-a2")
    assert index_inputs(compiled._instrs, compiled.tensors) == []
