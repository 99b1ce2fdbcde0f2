"""What PyPTO-Pro kernel files use beyond the documented API, found by running pyto check over PyPTO-Pro's own
device tests (benchmarks/check_pypto_pro.py): the parser's block-op names (row_sum, col_expand_mul, muls,
constexpr), string annotations, the parser's error classes, and the pl.simt / pl.pipeline namespaces pyto does
not build (a file naming them still imports; using them is an UnsupportedError)."""
import numpy as np
import pytest

import pyto
import pyto.language as pl
from pro_kernels import vec

R, C = 8, 64


@pl.jit(auto_mutex=True)
def block_names(x: pl.Tensor[[R, C], pl.DT_FP32], y: pl.Tensor[[R, C], pl.DT_FP32], s: pl.Tensor[[1, C], pl.DT_FP32]):
    """y = (x - rowmax(x)) * 2 through the block-op names, s = column sums of x."""
    src = pl.make_tile_group(type=vec([R, C]), addrs=0x0, mutex_ids=[0])
    tmp = pl.make_tile_group(type=vec([R, C]), addrs=0x800, mutex_ids=[1])
    out = pl.make_tile_group(type=vec([R, C]), addrs=0x1000, mutex_ids=[2])
    col = pl.make_tile_group(type=vec([R, 1], layout=pl.DN), addrs=0x1800, mutex_ids=[3])
    row = pl.make_tile_group(type=vec([1, C]), addrs=0x1900, mutex_ids=[4])
    with pl.section_vector():
        if pl.get_subblock_idx() == pl.constexpr(0):
            a, t, o, c, r = src.current(), tmp.current(), out.current(), col.current(), row.current()
            pl.load(a, x, [0, 0])
            pl.row_max(c, a, t)
            pl.row_expand_sub(o, a, c)
            pl.muls(o, o, 2.0)
            pl.col_sum(r, a, t)
            pl.store(y, o, [0, 0])
            pl.store(s, r, [0, 0])


def test_the_parsers_block_op_names_are_the_documented_ops_with_their_dim():
    x = np.random.default_rng(3).integers(-8, 8, (R, C)).astype(np.float32)     # small ints: every result exact
    y, s = np.zeros_like(x), np.zeros((1, C), np.float32)
    block_names(x, y, s)
    np.testing.assert_array_equal(y, (x - x.max(axis=1, keepdims=True)) * 2)
    np.testing.assert_array_equal(s[0], x.sum(axis=0))
    assert pl.row_sum.__doc__.startswith("pl.sum(out, src, ..., dim=0)")


def test_unbuilt_namespaces_import_and_refuse_when_used():
    @pl.simt.function(max_threads=64)
    def threads(dst):
        return pl.simt.thread_idx()
    with pytest.raises(pyto.UnsupportedError, match=r"'threads': pl\.simt\.function\(\.\.\.\) \(SIMT: thread-level "
                                                    r"functions on the vector cores\) is not built in pyto yet"):
        threads(None)

    @pl.jit
    def launches(x: pl.Tensor[[R, C], pl.DT_FP32]):
        with pl.section_vector():
            pl.simt.launch(threads, threads=64, args=(x,))
    with pytest.raises(pyto.UnsupportedError, match=r"pl\.simt\.launch \(SIMT"):
        launches(np.zeros((R, C), np.float32))


def test_a_file_with_string_annotations_and_the_parsers_errors_loads(tmp_path):
    path = tmp_path / "future.py"
    path.write_text(
        "from __future__ import annotations\n"
        "import pypto_pro.language as pl\n"
        "from pypto_pro.language.parser.diagnostics._exceptions import ParserSyntaxError, ParserTypeError\n\n"
        "@pl.jit\n"
        "def copy(x: pl.Tensor[[8, 64], pl.DT_FP32], y: pl.Tensor[[8, 64], pl.DT_FP32]):\n"
        "    t = pl.make_tile(pl.TileType(shape=[8, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec), addr=0)\n"
        "    with pl.section_vector():\n"
        "        pl.load(t, x, [0, 0])\n"
        "        pl.system.bar_all()\n"
        "        pl.store(y, t, [0, 0])\n\n"
        "@pl.jit\n"
        "def helper(n):\n"
        "    return n + 1\n")
    kf, (r,) = pyto.check_file(str(path), show_progress=False)
    assert r.ok, r.summary()
    assert kf.module.helper(1) == 2                     # no kernel annotation: pl.jit passes it through
    assert issubclass(kf.module.ParserSyntaxError, pyto.KernelError)
    assert issubclass(kf.module.ParserTypeError, kf.module.ParserSyntaxError.__mro__[1])
