"""CV-fused kernels that get the cross-core hand-over wrong (set_cross_core_wait_cross_core.md): out = a @ b + bias,
the AIC's product moved to its two AIVs' UB (DualModeSplitM) and announced by cross-core event 0.

no_cross_core_wait: the AIVs never wait for event 0, so V reads the product while FIX may still be writing it: a
RaceError on UB tile 'product'. no_cross_core_set: the AIC never raises event 0, so the AIVs wait forever (on the
device, a hang): a DeadlockError naming the event.
"""
import pytest

import pypto_pro.language as pl

M = K = N = 32
HALF = M // 2
P = pl.PipeType
VEC_HALF = pl.TileType(shape=[HALF, N], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)

pytestmark = pytest.mark.pyto_check(expect={"no_cross_core_wait": "RaceError", "no_cross_core_set": "DeadlockError"})


def _sync(src, dst, event_id: int = 0):
    pl.system.sync_src(set_pipe=src, wait_pipe=dst, event_id=event_id)
    pl.system.sync_dst(set_pipe=src, wait_pipe=dst, event_id=event_id)


def _product_to_ub(a, b, product):
    """On the AIC: product (each AIV's half of the rows) = a @ b, through L1, L0A / L0B and L0C."""
    a_mat = pl.make_tile(pl.TileType(shape=[M, K], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat), addr=0x0)
    b_mat = pl.make_tile(pl.TileType(shape=[K, N], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat), addr=0x800)
    a_left = pl.make_tile(pl.TileType(shape=[M, K], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Left), addr=0x0)
    b_right = pl.make_tile(pl.TileType(shape=[K, N], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Right), addr=0x0)
    c_acc = pl.make_tile(pl.TileType(shape=[M, N], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc), addr=0x0)
    pl.load(a_mat, a, [0, 0])
    pl.load(b_mat, b, [0, 0])
    _sync(P.MTE2, P.MTE1)
    pl.move(a_left, a_mat)
    pl.move(b_right, b_mat)
    _sync(P.MTE1, P.M)
    pl.matmul(c_acc, a_left, b_right)
    _sync(P.M, P.FIX)
    pl.move(product, c_acc, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM)


@pl.jit
def no_cross_core_wait(a: pl.Tensor[[M, K], pl.DT_FP16], b: pl.Tensor[[K, N], pl.DT_FP16],
                       bias: pl.Tensor[[M, N], pl.DT_FP32], out: pl.Tensor[[M, N], pl.DT_FP32]):
    product = pl.make_tile(VEC_HALF, addr=0x0)
    with pl.section_cube():
        _product_to_ub(a, b, product)
        pl.system.set_cross_core(pipe=P.FIX, event_id=0)
    with pl.section_vector():
        bias_ub = pl.make_tile(VEC_HALF, addr=0x800)
        row = pl.get_subblock_idx() * HALF
        pl.load(bias_ub, bias, [row, 0])
        _sync(P.MTE2, P.V)
        pl.add(product, product, bias_ub)         # missing: wait_cross_core(pipe=P.V, event_id=0) before it
        _sync(P.V, P.MTE3)
        pl.store(out, product, [row, 0])


@pl.jit
def no_cross_core_set(a: pl.Tensor[[M, K], pl.DT_FP16], b: pl.Tensor[[K, N], pl.DT_FP16],
                      bias: pl.Tensor[[M, N], pl.DT_FP32], out: pl.Tensor[[M, N], pl.DT_FP32]):
    product = pl.make_tile(VEC_HALF, addr=0x0)
    with pl.section_cube():
        _product_to_ub(a, b, product)             # missing: set_cross_core(pipe=P.FIX, event_id=0) after it
    with pl.section_vector():
        bias_ub = pl.make_tile(VEC_HALF, addr=0x800)
        row = pl.get_subblock_idx() * HALF
        pl.load(bias_ub, bias, [row, 0])
        _sync(P.MTE2, P.V)
        pl.system.wait_cross_core(pipe=P.V, event_id=0)
        pl.add(product, product, bias_ub)
        _sync(P.V, P.MTE3)
        pl.store(out, product, [row, 0])
