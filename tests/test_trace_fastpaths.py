"""The ops' traced fast paths (pl.load, pl.move, pl.matmul / matmul_acc, pl.set_validshape, Tracer.record, tile
views) against their general paths (pyto.language.trace.general_paths()): the same trace records (op, pipe,
operands and their rectangles, attributes, source line, core, cross-core markers) on real kernels, and the same
error class and message on bad input."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import pyto
import pyto.language as pl
from pyto.chip import load_chip
from pyto.errors import PytoError
from pyto.ir import Buf, GMTensor, TileStore
from pyto.language.tile import Tile, grid_of
from pyto.language.trace import general_paths
from pyto_kernels.bmm import bmm
from pyto_kernels.examples.matmul_pingpong import matmul_pingpong

run_module = importlib.import_module("pyto.emulator.run")


def _access(a) -> tuple:
    o = a.obj
    if type(o) is GMTensor:
        return ("GM", o.name, o.uid, a.rect, a.batch)
    return (o.buf.name, o.name, o.key, o.program, a.rect, a.batch)


def _record(ins) -> tuple:
    return (ins.op, ins.pipe, ins.name, ins.loc, ins.core, ins.index, tuple(map(_access, ins.srcs)),
            tuple(map(_access, ins.dsts)), list(ins.attrs.items()))


def _records(kernel, arrays, params: dict, blocks: int, chip: str = "ascend950pr") -> list:
    """Every program's records and markers of the launch, as traced (no sync, encoding or schedule)."""
    tensors = run_module._gm_tensors(kernel, arrays)
    params = run_module._check_params(kernel, params)
    out = []
    for progs in run_module.trace_blocks(kernel, tensors, params, load_chip(chip), blocks):
        for p in progs:
            out.append((p.block, p.role, [_record(i) for i in p.instrs], [(n, _record(m)) for n, m in p.markers]))
    return out


class _Captured(Exception):
    pass


def _bmm_launch(a_shape, b_shape, dtype: str, bias=None, **kw) -> tuple:
    """(kernel, arrays, pyto.run keywords) of the launch bmm() makes (taken at its pyto.run call)."""
    real = pyto.run

    def capture(kernel, *arrays, **kwargs):
        raise _Captured(kernel, arrays, kwargs)
    pyto.run = capture
    try:
        bmm(pyto.spec(a_shape, dtype), pyto.spec(b_shape, dtype), bias, **kw)
    except _Captured as c:
        return c.args
    finally:
        pyto.run = real
    raise AssertionError("bmm made no launch")


def _matmul(M, N, K, blocks):
    specs = (pyto.spec((M, K), "fp16"), pyto.spec((K, N), "fp16"), pyto.spec((M, N), "fp16"))
    return matmul_pingpong, specs, dict(blocks=blocks, TM=128, TN=128, TK=64)


LAUNCHES = {
    "matmul edges": lambda: _matmul(264, 192, 130, 4),
    "matmul 512x512x1024": lambda: _matmul(512, 512, 1024, 2),
    "bmm asw tails": lambda: _bmm_launch((4, 200, 300), (4, 300, 170), "fp16"),
    "bmm transposed": lambda: _bmm_launch((2, 250, 512), (2, 384, 250), "bf16", transpose_a=True, transpose_b=True),
    "bmm bias": lambda: _bmm_launch((2, 200, 512), (2, 512, 384), "fp16", pyto.spec((2, 1, 384), "fp16")),
    "bmm int8": lambda: _bmm_launch((2, 300, 500), (2, 500, 260), "int8"),
    "bmm stream_k (AIVs)": lambda: _bmm_launch((300, 4096), (4096, 200), "fp16"),
    "bmm stream_k atomic": lambda: _bmm_launch((256, 4096), (4096, 256), "bf16", reduce="atomic"),
    "bmm merge_batch": lambda: _bmm_launch((16, 128, 128), (16, 128, 128), "fp16", branch="merge_batch"),
    "bmm MXFP8": lambda: _bmm_launch((2, 256, 1024), (2, 1024, 256), "fp8e4m3fn",
                                     scale_a=pyto.spec((2, 256, 32), "fp8e8m0"),
                                     scale_b=pyto.spec((2, 32, 256), "fp8e8m0")),
}


@pytest.mark.parametrize("case", list(LAUNCHES))
def test_fast_and_general_paths_trace_the_same(case):
    kernel, arrays, kw = LAUNCHES[case]()
    kw = dict(kw)
    chip, blocks = kw.pop("chip", "ascend950pr"), kw.pop("blocks", 1)
    kw.pop("mode", None)
    arrays, params = kernel.bind(arrays, kw)
    fast = _records(kernel, arrays, params, blocks, chip)
    with general_paths():
        general = _records(kernel, arrays, params, blocks, chip)
    assert sum(len(r[2]) for r in fast) > 0
    assert fast == general


def test_vector_kernel_traces_the_same():
    """UB loads and stores on the AIVs (the load's GM -> UB fast path; instructions emitted on the AIVs)."""
    from pyto_kernels.examples.softmax import softmax_kernel
    k = softmax_kernel()
    x = np.ones((64, 256), np.float16)
    arrays, params = k.bind((x, np.zeros_like(x)), {})
    fast = _records(k, arrays, params, 1)
    with general_paths():
        general = _records(k, arrays, params, 1)
    assert any(r[1].name != "AIC" and r[2] for r in fast)
    assert fast == general


# ---- bad input: the same error either way ------------------------------------------------------------------------
@pl.kernel
def _bad(a, b, out, *, CASE: str):
    with pl.section_cube():
        a1 = pl.alloc(pl.L1, [128, 64], a.dtype)
        a0 = pl.alloc(pl.L0A, [128, 64], a.dtype)
        b1 = pl.alloc(pl.L1, [64, 128], a.dtype)
        b0 = pl.alloc(pl.L0B, [64, 128], a.dtype)
        c = pl.alloc(pl.L0C, [128, 128], pl.DT_FP32)
        ring = pl.alloc(pl.L1, [128, 64], a.dtype, buffers=2)
        if CASE == "load past edge":
            pl.load(a1, a, [112, 0])
        elif CASE == "load offset outside":
            pl.load(a1, a, [400, 0])
        elif CASE == "load offsets count":
            pl.load(a1, a, [0])
        elif CASE == "load float offsets":
            pl.load(a1, a, [0.5, 0])
        elif CASE == "load dtype":
            pl.load(pl.alloc(pl.L1, [128, 64], pl.DT_BF16), a, [0, 0])
        elif CASE == "load into L0A":
            pl.load(a0, a, [0, 0])
        elif CASE == "load a group":
            pl.load(ring, a, [0, 0])
        elif CASE == "load from a tile":
            pl.load(a1, b1)
        elif CASE == "move shapes":
            pl.move(pl.alloc(pl.L0A, [64, 64], a.dtype), a1)
        elif CASE == "move dtype":
            pl.move(pl.alloc(pl.L0A, [128, 64], pl.DT_BF16), a1)
        elif CASE == "move offset outside":
            pl.move(b0, b1, offset=[0, 16])
        elif CASE == "matmul chain":
            pl.matmul(c, a0, pl.alloc(pl.L0B, [32, 128], a.dtype))
        elif CASE == "matmul acc dtype":
            pl.matmul(pl.alloc(pl.L0C, [128, 128], pl.DT_INT32), a0, b0)
        elif CASE == "matmul operand dtypes":
            pl.matmul(c, a0, pl.alloc(pl.L0B, [64, 128], pl.DT_BF16))
        elif CASE == "matmul swapped":
            pl.matmul(c, b0, a0)
        elif CASE == "matmul valid K":
            pl.set_validshape(a0, [128, 48])
            pl.set_validshape(b0, [32, 128])
            pl.matmul(c, a0, b0)
        elif CASE == "matmul_acc in place":
            pl.matmul_acc(c, pl.alloc(pl.L0C, [128, 128], pl.DT_FP32), a0, b0)
        elif CASE == "validshape too big":
            pl.set_validshape(a1, [129, 64])
        elif CASE == "validshape zero":
            pl.set_validshape(a1, [0, 64])
        elif CASE == "validshape float":
            pl.set_validshape(a1, [1.5, 64])
        elif CASE == "validshape length":
            pl.set_validshape(a1, [16])
        elif CASE == "view off grid":
            pl.load(a1[8:24, :], a, [0, 0])
        elif CASE == "store past edge":
            pl.store(out, c, [112, 0])
        elif CASE == "store offset outside":
            pl.store(out, c, [0, 128])
        elif CASE == "store dtype":
            pl.store(pl.workspace([128, 128], pl.DT_INT8), c, [0, 0])
        elif CASE == "store atomic":
            pl.store(out, c, [0, 0], atomic="add")
        elif CASE == "store phase":
            pl.store(out, c, [0, 0], phase=pl.AccPhase.Final)
        elif CASE == "store from L1":
            pl.store(out, a1, [0, 0])
        elif CASE == "store to a tile":
            pl.store(a1, c, [0, 0])


BAD = ["load past edge", "load offset outside", "load offsets count", "load float offsets", "load dtype",
       "load into L0A", "load a group", "load from a tile", "move shapes", "move dtype", "move offset outside",
       "matmul chain", "matmul acc dtype", "matmul operand dtypes", "matmul swapped", "matmul valid K",
       "matmul_acc in place", "validshape too big", "validshape zero", "validshape float", "validshape length",
       "view off grid", "store past edge", "store offset outside", "store dtype", "store atomic", "store phase",
       "store from L1", "store to a tile"]


def _error(case: str) -> PytoError:
    specs = (pyto.spec((228, 64), "fp16"), pyto.spec((64, 128), "fp16"), pyto.spec((228, 128), "fp16"))
    with pytest.raises(PytoError) as e, pyto.run_options(cache=False):
        pyto.run(_bad, *specs, mode="timing", CASE=case)
    return e.value


@pytest.mark.parametrize("case", BAD)
def test_fast_and_general_paths_raise_the_same(case):
    fast = _error(case)
    with general_paths():
        general = _error(case)
    assert type(fast) is type(general)
    assert str(fast) == str(general)
    assert "kernel '_bad' raised" not in str(fast), f"the kernel's own Python failed, not the op: {fast}"
    assert "test_trace_fastpaths.py" in str(fast)      # names the kernel line


# ---- tile views: Tile.__getitem__'s fast path against the view built check by check ------------------------------
def _store(buf: Buf, shape: tuple, dtype) -> TileStore:
    return TileStore(buf, shape, shape, dtype, "NZ", grid_of(buf, dtype), "t", 0, 0)


def _view(fn, idx):
    """fn(idx) as (store, rect, valid, mutex, pad), or its error (class, message), raised from this line."""
    try:
        v = fn(idx)
    except PytoError as e:
        return type(e), str(e)
    return v.store, v.rect, v.valid, v.mutex, v.pad


BOUNDS = [None, 0, 8, 16, 48, 64, 80, 128, 144, -16]


@pytest.mark.parametrize("buf", [Buf.L1, Buf.L0C])
def test_view_fast_path_matches_the_checked_view(buf):
    store = _store(buf, (128, 80) if buf is Buf.L1 else (128, 128), pyto.dtypes.DType.fp16)
    tile = Tile(store, (0, store.shape[0], 0, store.shape[1]), mutex=(3,))
    part = Tile(store, (16, 64, 16, 48))
    n = 0
    for t in (tile, part):
        for r0 in BOUNDS:
            for r1 in BOUNDS:
                for c0 in BOUNDS[:6]:
                    idx = (slice(r0, r1), slice(c0, None))
                    got = _view(t.__getitem__, idx)
                    want = _view(t._slow_view, idx)
                    assert got == want, (t, idx)
                    n += isinstance(got[0], TileStore)
    assert n > 20      # views were made, not only refused


def test_ring_next_cycles_through_the_slots():
    store = [_store(Buf.L1, (32, 32), pyto.dtypes.DType.fp16) for _ in range(3)]
    group = pl.TileGroup([Tile(s, (0, 32, 0, 32)) for s in store])
    got = [group.next().store for _ in range(7)]
    assert got == [store[i % 3] for i in range(7)]
    assert group.current().store is store[0] and group.previous().store is store[2]
