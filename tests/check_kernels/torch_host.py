"""A kernel file with its host code, as PyPTO-Pro's device tests keep it: torch and torch_npu imported at module
level, the NPU device and the seed set there, the golden in torch. The kernel never touches them: `pyto check`
loads this file with or without torch installed (torch_npu never is on a CPU machine: it is a stand-in, and so is
torch where torch is missing).

exp_rows: y = exp(x) on [64, 128] fp16, each AIV its ROWS rows, through a tile group under auto_mutex.
"""
import pytest
import torch
import torch_npu  # noqa: F401  (registers the "npu" device on a machine that has one)

import pypto_pro.language as pl

DEVICE = torch.device("npu:0")
torch.manual_seed(0)
ROWS = 32

pytestmark = pytest.mark.pyto_check(block_dim=2)


@pl.jit(auto_mutex=True)
def exp_rows(x: pl.Tensor[[64, 128], pl.DT_FP16], y: pl.Tensor[[64, 128], pl.DT_FP16]):
    tiles = pl.make_tile_group(type=pl.TileType(shape=[ROWS, 128], dtype=pl.DT_FP16,
                                                target_memory=pl.MemorySpace.Vec), addrs=0x0, mutex_ids=[0])
    with pl.section_vector():
        t = tiles.current()
        row = pl.get_block_idx() * ROWS
        pl.load(t, x, [row, 0])
        pl.exp(t, t)
        pl.store(y, t, [row, 0])


def golden(x: "torch.Tensor") -> "torch.Tensor":
    """What exp_rows computes, on the host (fp32, rounded to fp16 once)."""
    return torch.exp(x.float()).half()


def run_on_npu() -> None:
    """The device run this file was written for (never called by pyto check)."""
    x = torch.randn(64, 128, dtype=torch.float16, device=DEVICE)
    y = torch.empty_like(x)
    exp_rows[None, 2](x, y)
    torch.testing.assert_close(y.cpu(), golden(x.cpu()))
