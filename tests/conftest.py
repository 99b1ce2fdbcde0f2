"""Test configuration: a deterministic, bounded hypothesis profile for CI (and by default)."""
import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", max_examples=200, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("PYTO_HYPOTHESIS_PROFILE", "ci"))

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))   # tests import each other's kernels (test_scheduler)

import pytest


@pytest.fixture(autouse=True)
def _launch_cache_off():
    """pyto.run's launch cache (pyto/emulator/launchcache.py) is off in each test, and empty: many tests patch
    pyto's internals and run one kernel twice to compare the two paths, which a cached launch would not take. The
    cache's own tests (tests/test_launch_cache.py) turn it on."""
    import pyto
    from pyto.emulator import launchcache
    launchcache.clear()
    with pyto.run_options(cache=False):
        yield


@pytest.fixture(autouse=True, scope="session")
def _uncalibrated_planner():
    """The BMM planner without fitted constants (PYTO_FITTED=none) in every test, module fixtures included: the tests
    pin the seed's rules and today's constants, decision by decision; the package's fitted file
    (kernels/bmm/calibration/) and the planner with it are tested in tests/test_calibrate.py."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTO_FITTED", "none")
        yield
