"""BlockCache.signature keys exactly a block's structure (pyto/emulator/encode/blockcache.py's docstring): blocks
that differ only in where in GM they work share a signature; a tile rectangle, an attribute, an allocation or
the GM overlap of two pipes' accesses tells them apart."""
from __future__ import annotations

import importlib

import pyto
import pyto.language as pl
from pyto.chip import load_chip
from pyto.emulator.encode.blockcache import BlockCache

run_module = importlib.import_module("pyto.emulator.run")


@pl.kernel
def _blocks(a, out, *, CASE: str):
    """Block b loads and stores the 32 x 32 block b of its tensors; one block (1) differs as CASE says."""
    b = pl.get_block_idx()
    with pl.section_cube():
        t = pl.alloc(pl.L1, [64, 32], a.dtype)
        c = pl.alloc(pl.L0C, [32, 32], pl.DT_FP32)
        view = t[32:64, :] if CASE == "rect" and b == 1 else t[0:32, :]
        pl.load(view, a, [32 * b, 0])
        if CASE == "extra alloc" and b == 1:
            pl.alloc(pl.L0A, [32, 32], a.dtype)
        a0 = pl.alloc(pl.L0A, [32, 32], a.dtype, name="a0")
        pl.move(a0, view)
        pl.store(out, c, [32 * b, 0], atomic=pl.AtomicType.AtomicAdd if CASE == "attribute" and b == 1 else None)
        if CASE == "overlap":     # FIX writes out and MTE2 reads it back: the rows it wrote, block 1 block 0's
            pl.load(t[0:32, :], out, [32 * b if b != 1 else 0, 0])


def _signatures(case: str, blocks: int = 3) -> tuple:
    """(each block's signature, each block's GM rows of its first load) of _blocks."""
    specs = (pyto.spec((32 * blocks, 32), "fp16"), pyto.spec((32 * blocks, 32), "fp16"))
    kernel = _blocks
    arrays, params = kernel.bind(specs, {"CASE": case})
    tensors = run_module._gm_tensors(kernel, arrays)
    traced = list(run_module.trace_blocks(kernel, tensors, run_module._check_params(kernel, params),
                                          load_chip("ascend950pr"), blocks))
    cache = BlockCache()
    sigs = [cache.signature(progs) for progs in traced]
    rows = [progs[0].instrs[0].attrs["r0"] for progs in traced]
    return sigs, rows


def test_blocks_differing_only_in_gm_position_share_a_signature():
    sigs, rows = _signatures("same")
    assert rows == [0, 32, 64]                 # they do work in different places
    assert sigs[0] is not None and sigs[0] == sigs[1] == sigs[2]


def test_a_tile_rectangle_tells_blocks_apart():
    sigs, _ = _signatures("rect")
    assert sigs[0] == sigs[2] != sigs[1]


def test_an_attribute_tells_blocks_apart():
    sigs, _ = _signatures("attribute")
    assert sigs[0] == sigs[2] != sigs[1]


def test_an_allocation_tells_blocks_apart():
    sigs, _ = _signatures("extra alloc")
    assert sigs[0] == sigs[2] != sigs[1]


def test_gm_overlap_between_pipes_tells_blocks_apart():
    """Blocks 0 and 2 read back the rows their Fixpipe wrote (an overlap auto-sync orders), block 1 rows it did not
    write: only where the regions lie relative to each other counts."""
    sigs, _ = _signatures("overlap")
    assert sigs[0] == sigs[2] != sigs[1]
