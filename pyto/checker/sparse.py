"""Random inputs for a 4:2 sparse matmul's index (pl.matmul_sparse, language/cube_sparse.py): valid index bytes.

A pl.DT_UINT8 annotation does not say that a tensor is a sparse index, and random bytes are not valid index bytes
(the data pass refuses them at the MMAD: SparsityError). So the checker reads it from the launch: for a kernel with
a uint8 GM input it compiles the launch (pyto.compile: trace, sync, schedule, checks), follows the traced copies
backwards from each sparse MMAD's index operand (srcs[2] of an Op.MMAD with "sparse" in attrs: SparseIndex <- Mat
<- GM, any chain of LOAD / STORE / MOVE between uint8 tiles and GM tensors) to the launch's GM inputs, draws valid
index bytes for those, and only then runs the data pass on the compiled launch. (Chosen over a flag or marker
naming index tensors: the launch itself says which tensor is an index, at no second trace, and a file needs no
change to be checked.)

What a valid index is comes from pyto.layout alone: the bytes are pack_sparse_index(densify_4_2(B)) of a random
4:2 sparse B (two places of each 4 along K, so every pair of MmadWithSparse.md's table 2 occurs), the format's one
definition. Every byte holds two whole groups' pairs (K % 8 == 0), so bytes valid one by one are valid wherever a
kernel reads them from: the tensor's shape and stored order do not matter.

What stays a failure: an index the kernel makes or changes itself (computed in UB, written by pl.setval, cast from
another dtype: not a plain uint8 copy of an input), and an index given by the caller (pyto.run / pyto.compile take
the caller's arrays and draw nothing). What the checker cannot see: a kernel that reads the wrong uint8 input as its
index gets valid bytes for it too.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..dtypes import DType, as_dtype
from ..ir import MOVE_OPS, GMTensor, Op
from ..layout import densify_4_2, pack_sparse_index

#: what a tensor's description says when its data are drawn as index bytes (result.inputs[name]["data"])
INDEX_DATA = "4:2 sparse index"


def may_take_index(kernel) -> bool:
    """Whether `kernel` (a JitKernel) has a GM input of the index's dtype (pl.DT_UINT8): only then is the launch
    compiled first to look for sparse MMADs."""
    return any(kind in ("tensor", "ptr") and as_dtype(ann.dtype) is DType.uint8 for _, kind, ann in kernel.params)


def _node(obj) -> int:
    """The copy graph's node of an access's object: a tile store, or a GM tensor's launch tensor (a view's root)."""
    view = obj.view if isinstance(obj, GMTensor) else None
    return id(view.root if view is not None else obj)


def index_inputs(instrs: list, tensors: list) -> list:
    """The GM tensors of `tensors` (the launch's inputs) whose bytes reach a sparse MMAD's index operand in
    `instrs` through plain uint8 copies (LOAD / STORE / MOVE), in `tensors`' order. Stores are followed as named:
    bytes written through one tile store and read through another that overlaps it are a ClobberedReadError."""
    fed: dict = {}                    # node -> the nodes copies into it read (uint8 to uint8 only)
    wanted: list = []
    for ins in instrs:
        if ins.op is Op.MMAD and "sparse" in ins.attrs:
            wanted.append(_node(ins.srcs[2].obj))
        elif ins.op in MOVE_OPS:
            srcs = [_node(a.obj) for a in ins.srcs if a.obj.dtype is DType.uint8]
            for d in ins.dsts:
                if d.obj.dtype is DType.uint8 and srcs:
                    fed.setdefault(_node(d.obj), set()).update(srcs)
    seen = set(wanted)
    while wanted:
        for src in fed.get(wanted.pop(), ()):
            if src not in seen:
                seen.add(src)
                wanted.append(src)
    return [t for t in tensors if id(t) in seen]


def random_index_bytes(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """Valid packed index bytes of `shape`: pyto.layout's index of a random 4:2 sparse B (each group of 4 keeps 2
    random places), packed 4 indices a byte (module docstring: any byte order of them is valid)."""
    n = int(np.prod(shape, dtype=np.int64))
    groups = 2 * n                                            # two groups of 4 (K rows) per byte
    order = rng.random((groups, 4)).argsort(axis=1)           # a random ranking of each group's 4 places
    b = np.where(order < 2, 1, 0).astype(np.int8).reshape(4 * groups, 1)
    _, idx = densify_4_2(b)
    return pack_sparse_index(idx).reshape(shape)


def draw_index_inputs(compiled, arrays: list, seed: int, described: Optional[dict] = None) -> list:
    """Fill, in place, each array of `arrays` (the compiled launch's GM arrays, in order) that feeds a sparse MMAD's
    index with random valid index bytes (from `seed`); mark it in `described` (make_args' descriptions). Returns
    their names. `compiled` must not have run yet (its traced instructions are still held)."""
    found = index_inputs(compiled.traced, compiled.tensors)
    rng = np.random.default_rng((seed, 0x42))
    for t in found:
        a = arrays[compiled.tensors.index(t)]
        a[...] = random_index_bytes(rng, a.shape)
        if described is not None and t.name in described:
            described[t.name]["data"] = INDEX_DATA
    return [t.name for t in found]


__all__ = ["INDEX_DATA", "draw_index_inputs", "index_inputs", "may_take_index", "random_index_bytes"]
