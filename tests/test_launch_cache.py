"""pyto.run's launch cache (pyto/emulator/launchcache.py): a repeated launch reuses the checked one and gives the
same report and numbers as a fresh trace; what is in the key (code, parameters, shapes, dtypes, chip, blocks, mode)
makes a new launch; failures are not kept; the bounds hold; run_options(cache=False) turns it off. (tests/conftest.py
turns the cache off for every other test.)"""
import numpy as np
import pytest

import pyto
import pyto.language as pl
from pyto.emulator import launchcache
from pyto.testing import assert_close, matmul_bound
from pyto_kernels.examples.matmul_pingpong import matmul_pingpong
from pro_kernels import vec


@pytest.fixture(autouse=True)
def cache_on():
    launchcache.clear()
    with pyto.run_options(cache=True):
        yield
    launchcache.clear()


def arrays(M=64, N=64, K=128, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    return a, b, np.zeros((M, N), np.float16)


def pingpong(*xs, blocks=2, **kw):
    return pyto.run(matmul_pingpong, *xs, blocks=blocks, **{"TM": 32, "TN": 32, "TK": 64, **kw})


def test_a_repeated_launch_is_the_cached_one_with_fresh_numbers():
    a, b, c = arrays()
    first = pingpong(a, b, c)
    assert launchcache.stats() == {"entries": 1, "instructions": first.instructions, "hits": 0, "misses": 1}
    a2, b2, c2 = arrays(seed=1)                      # new data, same shapes: the cached launch, its data pass
    again = pingpong(a2, b2, c2)
    assert launchcache.stats()["hits"] == 1
    assert_close(c2, a2.astype(np.float64) @ b2.astype(np.float64), matmul_bound(a2, b2, np.float16))
    assert (again.cycles, again.instructions, again.pipe_cycles) == (first.cycles, first.instructions,
                                                                     first.pipe_cycles)
    with pyto.run_options(cache=False):
        c3 = np.zeros_like(c2)
        fresh = pingpong(a2, b2, c3)
    np.testing.assert_array_equal(c3, c2)           # the same numbers as a fresh trace
    assert fresh.cycles == again.cycles and launchcache.stats()["hits"] == 1


@pytest.mark.parametrize("change", ["params", "shape", "dtype", "blocks", "chip", "mode"])
def test_what_the_key_holds_makes_a_new_launch(change):
    a, b, c = arrays()
    pingpong(a, b, c)
    if change == "params":
        pingpong(a, b, c, TK=32)
    elif change == "shape":
        pingpong(*arrays(M=96))
    elif change == "dtype":
        pingpong(a.astype(np.float32), b.astype(np.float32), c.astype(np.float32))
    elif change == "blocks":
        pingpong(a, b, c, blocks=4)
    elif change == "chip":
        pyto.run(matmul_pingpong, a, b, c, blocks=2, chip="atlas-a2", TM=32, TN=32, TK=64)
    else:
        pyto.run(matmul_pingpong, *[pyto.spec(x.shape, x.dtype) for x in (a, b, c)], blocks=2, mode="timing",
                 TM=32, TN=32, TK=64)
    assert launchcache.stats()["hits"] == 0 and launchcache.stats()["entries"] == 2


def _scale_kernel(factor: float):
    """A new jit kernel (new code object and closure) per call: y = x * factor."""
    @pl.jit
    def scale(x: pl.Tensor[[8, 64], pl.DT_FP32], y: pl.Tensor[[8, 64], pl.DT_FP32]):
        t = pl.make_tile(vec([8, 64]), addr=0)
        u = pl.make_tile(vec([8, 64]), addr=0x800)
        with pl.section_vector():
            pl.load(t, x, [0, 0])
            pl.system.bar_all()
            pl.mul(u, t, factor)
            pl.system.bar_all()
            pl.store(y, u, [0, 0])
    return scale


def test_a_redefined_kernel_is_traced_again():
    x = np.arange(8 * 64, dtype=np.float32).reshape(8, 64)
    for factor in (2.0, 3.0):                      # same source, another closure: its own launch
        y = np.zeros_like(x)
        _scale_kernel(factor)(x, y)
        np.testing.assert_array_equal(y, x * np.float32(factor))
    assert launchcache.stats()["hits"] == 0


def test_a_jit_launch_and_timing_mode_hit_too():
    k = _scale_kernel(2.0)
    x = np.ones((8, 64), np.float32)
    k(x, np.zeros_like(x))
    y = np.zeros_like(x)
    k(x * 5, y)
    np.testing.assert_array_equal(y, np.full_like(x, 10.0))
    t1 = k(pyto.spec((8, 64), "fp32"), pyto.spec((8, 64), "fp32"))
    t2 = k(pyto.spec((8, 64), "fp32"), pyto.spec((8, 64), "fp32"))
    assert t1 is not t2 and t1.cycles == t2.cycles and t2.mode == "timing"
    assert launchcache.stats()["hits"] == 2


def test_a_failing_launch_is_not_kept():
    @pl.jit
    def races(x: pl.Tensor[[8, 64], pl.DT_FP32], y: pl.Tensor[[8, 64], pl.DT_FP32]):
        t = pl.make_tile(vec([8, 64]), addr=0)
        with pl.section_vector():
            pl.load(t, x, [0, 0])
            pl.store(y, t, [0, 0])               # no flag MTE2 -> MTE3
    x = np.ones((8, 64), np.float32)
    for _ in range(2):
        with pytest.raises(pyto.RaceError):
            races(x, np.zeros_like(x))
    assert launchcache.stats()["entries"] == 0


def test_the_bounds_evict_the_least_recently_used(monkeypatch):
    monkeypatch.setattr(launchcache, "MAX_ENTRIES", 2)
    a, b, c = arrays()
    for tk in (32, 64, 128):
        pingpong(a, b, c, TK=tk)
    assert launchcache.stats()["entries"] == 2
    pingpong(a, b, c, TK=32)                       # the oldest was dropped: traced again
    assert launchcache.stats()["hits"] == 0
    monkeypatch.setattr(launchcache, "MAX_ENTRY_INSTRUCTIONS", 1)
    launchcache.clear()
    pingpong(a, b, c)
    assert launchcache.stats()["entries"] == 0     # too large to keep


def test_cache_false_and_bad_values():
    a, b, c = arrays()
    with pyto.run_options(cache=False):
        pingpong(a, b, c)
        pingpong(a, b, c)
    assert launchcache.stats() == {"entries": 0, "instructions": 0, "hits": 0, "misses": 0}
    with pytest.raises(pyto.KernelError, match="cache must be True or False"):
        pyto.run_options(cache="yes")


def test_bmm_keeps_its_plan_per_problem():
    from pyto_kernels.bmm import api
    api._PLANS.clear()
    p1 = api.cached_plan((4, 64, 96), (4, 96, 80), pyto.DType.fp16, "ascend950pr", False, False, False, None,
                         "workspace")
    p2 = api.cached_plan((4, 64, 96), (4, 96, 80), pyto.DType.fp16, "ascend950pr", False, False, False, None,
                         "workspace")
    p3 = api.cached_plan((4, 64, 96), (4, 96, 80), pyto.DType.fp16, "atlas-a2", False, False, False, None,
                         "workspace")
    assert p1 is p2 and p3 is not p1 and p3.chip == "atlas-a2"
    fresh = api.plan((4, 64, 96), (4, 96, 80), dtype=pyto.DType.fp16)
    assert (fresh.branch, fresh.tiling) == (p1.branch, p1.tiling)
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 64, 96)).astype(np.float16)
    b = rng.standard_normal((4, 96, 80)).astype(np.float16)
    c1, c2 = api.bmm(a, b), api.bmm(a, b)          # the second: the plan and the launch from the caches
    np.testing.assert_array_equal(c1, c2)
    assert launchcache.stats()["hits"] >= 1
