"""The launch's stages (pyto/emulator/run.py) read the trace and write records of their own: after sync, encode,
schedule, the checked pass and the data pass, every traced instruction is as the tracer left it (op, pipe,
accesses and their rectangles, attributes, line, core, index, `after`, name). Kernels that exercise each
stage's writers: auto-sync and its cross-core pairing (flash attention), mutex tokens (a jit kernel with
auto_mutex), unit_flag phases, a getval dependency, blocks that share their encoding, and a Stream-K BMM."""
import importlib

import numpy as np
import pytest

import pyto
import pyto.language as pl
from pyto.ir import Instr

run_module = importlib.import_module("pyto.emulator.run")


def _snapshot(ins: Instr) -> tuple:
    return (ins.op, ins.pipe, tuple((a.obj, a.rect, a.batch) for a in ins.srcs),
            tuple((a.obj, a.rect, a.batch) for a in ins.dsts), dict(ins.attrs), ins.loc, ins.core, ins.index,
            tuple(ins.after), ins.name)


@pytest.fixture
def traced(monkeypatch):
    """Every instruction of the launches in the test, with its snapshot when its block was yielded to the stages."""
    seen: list = []
    real = run_module.trace_blocks

    def spying(*args, **kwargs):
        for progs in real(*args, **kwargs):
            seen.extend((ins, _snapshot(ins)) for prog in progs for ins in prog.instrs)
            yield progs
    monkeypatch.setattr(run_module, "trace_blocks", spying)
    return seen


def _unchanged(seen: list) -> None:
    assert seen, "nothing was traced"
    changed = [ins for ins, snap in seen if _snapshot(ins) != snap]
    assert not changed, f"{len(changed)} traced instructions changed after tracing, first {changed[0]!r}"


def _rng():
    return np.random.default_rng(3)


def test_matmul_blocks_sharing_their_encoding(traced):
    from pyto_kernels.examples.matmul_pingpong import matmul_pingpong
    rng = _rng()
    a, b = rng.standard_normal((200, 300)).astype(np.float16), rng.standard_normal((300, 150)).astype(np.float16)
    out = np.zeros((200, 150), np.float16)
    with pyto.run_options(cache=False):
        pyto.run(matmul_pingpong, a, b, out, blocks=4, TM=64, TN=64, TK=64)
    _unchanged(traced)


def test_flash_attention_cross_core_pairing_and_phases(traced):
    from pyto_kernels.examples.flash_attention import flash_attention
    rng = _rng()
    q, k, v = (rng.standard_normal(s).astype(np.float16) for s in ((64, 64), (128, 64), (128, 64)))
    out = np.zeros((64, 64), np.float16)
    with pyto.run_options(cache=False):
        pyto.run(flash_attention, q, k, v, out, M=64, N=128, D=64, BN=64)
    _unchanged(traced)


def test_mutex_tokens_of_a_jit_kernel(traced):
    from pyto_kernels.examples.softmax import softmax_kernel
    x = _rng().standard_normal((40, 96)).astype(np.float16)
    y = np.zeros_like(x)
    with pyto.run_options(cache=False):
        softmax_kernel(pl.DT_FP16)[None, 2](x, y)
    _unchanged(traced)


def test_a_getval_dependency(traced):
    @pl.kernel
    def scale_by_first(x, out):
        t = pl.alloc(pl.UB, [8, 8], pl.DT_FP32)
        u = pl.alloc(pl.UB, [8, 8], pl.DT_FP32)
        with pl.section_vector():
            pl.load(t, x, [0, 0])
            pl.mul(u, t, pl.getval(t, 0))         # a V op on a getval value: it waits for the read
            pl.store(out, u, [0, 0])
    x = _rng().standard_normal((8, 8)).astype(np.float32)
    out = np.zeros_like(x)
    with pyto.run_options(cache=False):
        pyto.run(scale_by_first, x, out)
    np.testing.assert_array_equal(out, x * x[0, 0])      # one fp32 product each, as numpy's
    assert any(ins.after for ins, _ in traced), "the pl.mul should wait for its getval (Instr.after)"
    _unchanged(traced)


def test_a_stream_k_bmm(traced):
    from bmm_helpers import run_branch
    rng = _rng()
    a = rng.standard_normal((1, 128, 4096)).astype(np.float16)
    b = rng.standard_normal((1, 4096, 128)).astype(np.float16)
    with pyto.run_options(cache=False):
        run_branch(a, b, branch="stream_k")
    _unchanged(traced)
