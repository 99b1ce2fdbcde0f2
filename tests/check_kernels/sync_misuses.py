"""Vector kernels whose hand-written synchronisation is wrong (synchronization/*.md), out = a + b on [32, 128] fp32.

wait_never_set: a sync_dst whose sync_src was left out: V waits forever (on the device, a hang): DeadlockError.
missing_flag: the MTE2 -> V pair between the loads and the add left out: V may read the tiles before MTE2 has
written them: RaceError. unpaired_mutex_lock: auto_mutex=False with a mutex_lock on MTE3 that is never unlocked
(mutex_lock_mutex_unlock.md: every lock is paired with an unlock on its pipe): SyncError. sync_all_mix: a pure
vector kernel calls sync_all with core_type MIX, which syncs AICs it does not run (sync_all.md: AIV_ONLY there; on
the device, an error): SyncError.
"""
import pytest

import pypto_pro.language as pl

VEC = pl.TileType(shape=[32, 128], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)
P = pl.PipeType

pytestmark = pytest.mark.pyto_check(expect={"wait_never_set": "DeadlockError", "missing_flag": "RaceError",
                                            "unpaired_mutex_lock": "SyncError", "sync_all_mix": "SyncError"})


@pl.jit
def wait_never_set(a: pl.Tensor[[32, 128], pl.DT_FP32], b: pl.Tensor[[32, 128], pl.DT_FP32],
                   out: pl.Tensor[[32, 128], pl.DT_FP32]):
    a_ub, b_ub, out_ub = pl.make_tile(VEC, addr=0x0), pl.make_tile(VEC, addr=0x4000), pl.make_tile(VEC, addr=0x8000)
    with pl.section_vector():
        pl.load(a_ub, a, [0, 0])
        pl.load(b_ub, b, [0, 0])
        pl.system.sync_dst(set_pipe=P.MTE2, wait_pipe=P.V, event_id=0)      # its sync_src is missing
        pl.add(out_ub, a_ub, b_ub)
        pl.system.sync_src(set_pipe=P.V, wait_pipe=P.MTE3, event_id=1)
        pl.system.sync_dst(set_pipe=P.V, wait_pipe=P.MTE3, event_id=1)
        pl.store(out, out_ub, [0, 0])


@pl.jit
def missing_flag(a: pl.Tensor[[32, 128], pl.DT_FP32], b: pl.Tensor[[32, 128], pl.DT_FP32],
                 out: pl.Tensor[[32, 128], pl.DT_FP32]):
    a_ub, b_ub, out_ub = pl.make_tile(VEC, addr=0x0), pl.make_tile(VEC, addr=0x4000), pl.make_tile(VEC, addr=0x8000)
    with pl.section_vector():
        pl.load(a_ub, a, [0, 0])
        pl.load(b_ub, b, [0, 0])
        pl.add(out_ub, a_ub, b_ub)                                             # no MTE2 -> V pair before it
        pl.system.sync_src(set_pipe=P.V, wait_pipe=P.MTE3, event_id=1)
        pl.system.sync_dst(set_pipe=P.V, wait_pipe=P.MTE3, event_id=1)
        pl.store(out, out_ub, [0, 0])


@pl.jit(auto_mutex=False)
def unpaired_mutex_lock(a: pl.Tensor[[32, 128], pl.DT_FP32], b: pl.Tensor[[32, 128], pl.DT_FP32],
                        out: pl.Tensor[[32, 128], pl.DT_FP32]):
    a_grp = pl.make_tile_group(type=VEC, addrs=0x0, mutex_ids=[0])
    b_grp = pl.make_tile_group(type=VEC, addrs=0x4000, mutex_ids=[1])
    out_grp = pl.make_tile_group(type=VEC, addrs=0x8000, mutex_ids=[2])
    with pl.section_vector():
        a_ub, b_ub, out_ub = a_grp.current(), b_grp.current(), out_grp.current()
        pl.system.mutex_lock(pipe=P.MTE2, mutex_id=0)
        pl.load(a_ub, a, [0, 0])
        pl.system.mutex_unlock(pipe=P.MTE2, mutex_id=0)
        pl.system.mutex_lock(pipe=P.MTE2, mutex_id=1)
        pl.load(b_ub, b, [0, 0])
        pl.system.mutex_unlock(pipe=P.MTE2, mutex_id=1)
        pl.system.sync_src(set_pipe=P.MTE2, wait_pipe=P.V, event_id=0)
        pl.system.sync_dst(set_pipe=P.MTE2, wait_pipe=P.V, event_id=0)
        pl.add(out_ub, a_ub, b_ub)
        pl.system.sync_src(set_pipe=P.V, wait_pipe=P.MTE3, event_id=1)
        pl.system.sync_dst(set_pipe=P.V, wait_pipe=P.MTE3, event_id=1)
        pl.system.mutex_lock(pipe=P.MTE3, mutex_id=2)
        pl.store(out, out_ub, [0, 0])                                          # no mutex_unlock after it


@pl.jit
def sync_all_mix(a: pl.Tensor[[32, 128], pl.DT_FP32], b: pl.Tensor[[32, 128], pl.DT_FP32],
                 out: pl.Tensor[[32, 128], pl.DT_FP32]):
    a_ub, b_ub, out_ub = pl.make_tile(VEC, addr=0x0), pl.make_tile(VEC, addr=0x4000), pl.make_tile(VEC, addr=0x8000)
    with pl.section_vector():
        pl.load(a_ub, a, [0, 0])
        pl.load(b_ub, b, [0, 0])
        pl.system.sync_all(core_type=pl.SyncCoreType.MIX)                     # AIV_ONLY in a vector kernel
        pl.add(out_ub, a_ub, b_ub)
        pl.system.sync_src(set_pipe=P.V, wait_pipe=P.MTE3, event_id=1)
        pl.system.sync_dst(set_pipe=P.V, wait_pipe=P.MTE3, event_id=1)
        pl.store(out, out_ub, [0, 0])
