"""A first run's cost on a fresh install: `import pyto`, the first plan, the first launch (the README's first
command's bmm: 8 x [256, 512] @ [512, 256] fp16 with data, checked), their total, and the README's first command
`pyto bmm 8 256 256 512 --dtype fp16` as a process of its own; with numba's disk cache empty (a fresh machine)
and again with the cache it left (warm), in the default mode (pyto/emulator/jitmode.py: a cold loop with little
work runs as Python) and with PYTO_NUMBA=1 (every loop compiled: numba's compile time itself).

Run with the interpreter of the install to measure (a fresh venv: python3 -m venv /tmp/fresh &&
/tmp/fresh/bin/pip install .; /tmp/fresh/bin/python benchmarks/first_run.py). Wall and CPU seconds: on a
loaded machine the CPU column is the fairer one.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, time
w0, c0 = time.perf_counter(), time.process_time()
import pyto
from pyto_kernels.bmm import api, bmm, plan
w1, c1 = time.perf_counter(), time.process_time()
p = plan((8, 256, 512), (8, 512, 256), "fp16")
w2, c2 = time.perf_counter(), time.process_time()
a, b, bias = api.random_inputs((8, 256, 512), (8, 512, 256), "fp16", None, 0)
c = bmm(a, b)
api.check(c, a, b, bias)
w3, c3 = time.perf_counter(), time.process_time()
print(json.dumps({"import": (w1 - w0, c1 - c0), "first plan": (w2 - w1, c2 - c1),
                  "first launch": (w3 - w2, c3 - c2), "total": (w3 - w0, c3 - c0)}))
"""
COMMAND = ["bmm", "8", "256", "256", "512", "--dtype", "fp16"]


def _child(env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _command(env: dict) -> tuple[float, float]:
    """(wall, CPU) seconds of `pyto bmm ...` as its own process (the CPU of the child, from os.times)."""
    before = os.times()
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pyto"] + COMMAND, env=env, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t
    after = os.times()
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system)


def main() -> None:
    print(f"python {sys.executable}; numba's cache in a new temporary directory per mode (NUMBA_CACHE_DIR)")
    rows = []
    for label, numba in (("default", None), ("PYTO_NUMBA=1", "1")):
        with tempfile.TemporaryDirectory() as steps_cache, tempfile.TemporaryDirectory() as command_cache:
            env = {k: v for k, v in os.environ.items() if k != "PYTO_NUMBA"}
            if numba:
                env["PYTO_NUMBA"] = numba
            for state in ("fresh cache", "warm cache"):     # the second run: the cache the first one left
                steps = _child({**env, "NUMBA_CACHE_DIR": steps_cache})
                steps["pyto bmm (own process)"] = _command({**env, "NUMBA_CACHE_DIR": command_cache})
                rows.append((f"{label}, {state}", steps))
    cols = ["import", "first plan", "first launch", "total", "pyto bmm (own process)"]
    print(f"{'seconds (wall / CPU)':<38}" + "".join(f"{c:>24}" for c in cols))
    for label, steps in rows:
        print(f"{label:<38}" + "".join(f"{steps[c][0]:>11.2f} / {steps[c][1]:<10.2f}" if c in steps else f"{'-':>24}"
                                       for c in cols))
    print("total: import + first plan + first launch (bmm with data, checked) in one process; pyto bmm: the README's "
          "first command, a process of its own (its own cache directory)")


if __name__ == "__main__":
    main()
