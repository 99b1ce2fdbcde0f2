"""The checked pass's compiled loop (pyto/emulator/check/checkcore.py) and its plain-Python run (PYTO_NUMBA=0)
reach the same verdicts with the same messages: races within a core, across cores and blocks, followers'
GM checks, uninitialised reads of tiles and workspaces, clean runs."""
import numpy as np
import pytest

import pyto
from pyto_kernels.examples.matmul_pingpong import matmul_pingpong

import test_emulator_phases as phases
from test_emulator_blockcache import read_next_rows
from test_vector import _two_stage_inputs, atomic_rows, l0c_to_ub, split_k, two_stage


def _cases():
    a16, b16 = np.ones((64, 96), np.float16), np.ones((96, 64), np.float16)
    return {
        "l0c_race": lambda: pyto.run(phases.misuse2, *phases._inputs(32, 32, 64), blocks=3, K_SQ=64, TILE_SQ=32),
        "cross_block_race": lambda: pyto.run(two_stage, *_two_stage_inputs(3), blocks=3, TM=32, SYNC=False,
                                             SHIFT=1),
        "sync_all_ok": lambda: pyto.run(two_stage, *_two_stage_inputs(3), blocks=3, TM=32, SYNC=True, SHIFT=1),
        "plain_store_race": lambda: pyto.run(atomic_rows, np.ones((8, 8, 40), np.float32),
                                             np.zeros((8, 40), np.float32), blocks=4, ATOMIC=False),
        "atomic_ok": lambda: pyto.run(atomic_rows, np.ones((8, 8, 40), np.float32), np.zeros((8, 40), np.float32),
                                      blocks=4, ATOMIC=True),
        "split_k_ok": lambda: pyto.run(split_k, a16, b16[:, :48], np.zeros((64, 48), np.float32), blocks=3, KC=32),
        "tile_uninit": lambda: pyto.run(l0c_to_ub, np.ones((32, 32), np.float16), np.ones((32, 64), np.float16),
                                        np.zeros((32, 64), np.float32), MODE=2, WHO=1),
        "workspace_uninit": lambda: pyto.run(read_next_rows, np.ones((96, 64), np.float32),
                                             np.zeros((96, 64), np.float32), blocks=6, TM=32),
        "pingpong_ok": lambda: pyto.run(matmul_pingpong, a16, b16, np.zeros((64, 64), np.float16), blocks=4, TM=32,
                                        TN=32, TK=32),
    }


def _verdict(fn):
    try:
        fn()
        return "ok", ""
    except pyto.PytoError as e:
        return type(e).__name__, str(e)


@pytest.mark.parametrize("case", list(_cases()))
def test_compiled_and_python_loops_agree(case, monkeypatch):
    monkeypatch.setenv("PYTO_NUMBA", "1")
    fast = _verdict(_cases()[case])
    monkeypatch.setenv("PYTO_NUMBA", "0")
    ref = _verdict(_cases()[case])
    assert fast == ref
    want = {"l0c_race": "RaceError", "cross_block_race": "RaceError", "plain_store_race": "RaceError",
            "tile_uninit": "UninitializedReadError", "workspace_uninit": "UninitializedReadError"}.get(case, "ok")
    assert fast[0] == want, fast


def test_long_gm_history_outgrows_the_arena():
    """Every block stores its own rows of one output and nothing covers another's: the GM history keeps them
    all, moving to the arena's end as it grows, and the run stays clean."""
    a, b = np.ones((512, 32), np.float16), np.ones((32, 512), np.float16)
    out = np.zeros((512, 512), np.float16)
    pyto.run(matmul_pingpong, a, b, out, blocks=8, TM=16, TN=16, TK=32)
    assert (out == 32).all()
