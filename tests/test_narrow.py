"""fp32 -> fp16 narrowing (pyto/emulator/data/narrow.py): the compiled loop gives numpy's cast bit for bit, on every
sign and exponent with random significands and on the significands where rounding decides (ties, carries into the
exponent, the subnormal and overflow edges, NaN payloads); strided views and the data pass's Fixpipe store too."""
import numpy as np
import pytest

import pyto
from pyto.emulator import jitmode
from pyto.emulator.data import narrow

# significand patterns where RNE decides: ties below and above, the bits just past fp16's, all ones (carry)
_EDGES = np.array([0, 1, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x2fff, 0x3000, 0x3001, 0x7fffff, 0x7fe000,
                   0x7ff000, 0x7fefff, 0x400000, 0x000040, 0x002000], np.uint32)


def _patterns(rng: np.random.Generator, per_exponent: int) -> np.ndarray:
    """Every sign and exponent with the edge significands and `per_exponent` random ones."""
    sig = np.concatenate([_EDGES, rng.integers(0, 1 << 23, per_exponent, dtype=np.uint32)])
    exp = np.arange(256, dtype=np.uint32) << np.uint32(23)
    body = (exp[:, None] | sig[None, :]).ravel()
    return np.concatenate([body, body | np.uint32(0x80000000)])


def _numpy(bits: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return bits.view(np.float32).astype(np.float16).view(np.uint16)


def test_the_compiled_loop_gives_numpys_bits_on_every_exponent():
    bits = _patterns(np.random.default_rng(0), 4096).reshape(512, -1)
    got = np.empty(bits.shape, np.uint16)
    narrow._fp16_bits(bits, got)
    want = _numpy(bits)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(hex(bits.ravel()[i]), hex(want.ravel()[i]), hex(got.ravel()[i])) for i in bad[:5]]


def test_the_plain_python_loop_is_the_same_rule():
    """The loop's Python (jitmode's fallback for a cold cache) on the edge patterns: the rule, not numba's codegen."""
    bits = _patterns(np.random.default_rng(1), 4).reshape(2, -1)
    got = np.empty(bits.shape, np.uint16)
    jitmode.plain(narrow._fp16_bits)(bits, got)
    assert np.array_equal(got, _numpy(bits))


@pytest.mark.parametrize("mode", ["0", "1", ""])
def test_fp16_into_strided_views_in_every_mode(monkeypatch, mode):
    monkeypatch.setenv("PYTO_NUMBA", mode)
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((96, 80)) * np.float32(3e4)).astype(np.float32)   # some overflow to inf
    x[3, 4], x[5, 6], x[7, 8] = np.nan, np.inf, 3e-8                            # NaN, inf, a subnormal
    out = np.zeros((80, 200), np.float16)
    narrow.fp16_into(x.T[::2], out[::2, 10:106])
    with np.errstate(over="ignore"):
        want = x.T[::2].astype(np.float16)
    assert np.array_equal(out[::2, 10:106].view(np.uint16), want.view(np.uint16))
    assert not out[1::2].any() and not out[:, :10].any() and not out[:, 106:].any()   # nothing else written


def test_a_shape_mismatch_takes_numpys_broadcast():
    out = np.empty((4, 3), np.float16)
    narrow.fp16_into(np.arange(3, dtype=np.float32)[None, :] + np.float32(0.1), out)
    np.testing.assert_array_equal(out, np.broadcast_to(np.float16(np.arange(3) + np.float32(0.1)), (4, 3)))


def test_a_fixpipe_store_to_fp16_rounds_as_numpy():
    """A full-mode matmul into fp16 (Fixpipe's rounding through fp16_into): each output element is the fp16
    rounding of the fp32 sum, within one fp16 ulp plus the fp32 sum's error of the float64 product."""
    from pyto_kernels.examples.matmul_pingpong import matmul_pingpong
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 96)).astype(np.float16)
    b = rng.standard_normal((96, 80)).astype(np.float16)
    out = np.zeros((64, 80), np.float16)
    pyto.run(matmul_pingpong, a, b, out, TM=32, TN=32, TK=32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tol = np.abs(ref) * 2.0 ** -11 + np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) * 96 * 2.0 ** -24
    assert (np.abs(out.astype(np.float64) - ref) <= tol).all()
