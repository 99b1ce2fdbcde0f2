"""GM views (pl.make_tensor, pl.set_stride: language/gmview.py) in the emulator: what an access through a view
touches of its root, and the strided array the data pass reads and writes it through.

A view is a GMTensor whose `view` (ir.GMView) maps element [.., r, c] to the root's flat element
`offset + .. + r * row_stride + c * col_stride`. Its accesses keep the view's own coordinates (messages name
them); the checked pass also follows each onto the root (`footprint`: the root's elements it covers, as rectangles
of the root's [batch, rows, cols]), so views of one buffer and the root itself race, are ordered and are written
exactly where their elements meet (overlap.with_bytes adds them, as it adds a shared tile's bytes).
"""
from __future__ import annotations

import math

import numpy as np

from ...ir import Access, GMTensor


class GMFootprint(Access):
    """A rectangle of a view's root that one access through the view covers; `of` is that access."""

    __slots__ = ("of",)

    def __init__(self, root: GMTensor, rect: tuple, batch: int, of: Access):
        super().__init__(root, rect, batch)
        self.of = of


def _flat3(shape: tuple) -> tuple:
    return (math.prod(shape[:-2]),) + tuple(shape[-2:])


def _lead(view: GMTensor, batch: int) -> int:
    """The element offset of batch `batch` (flat over the view's leading dims) from the view's start."""
    out, b = 0, max(batch, 0)
    for d, s in zip(reversed(view.shape[:-2]), reversed(view.view.strides[:-2])):
        out += (b % d) * s
        b //= d
    return out


def footprint(acc: Access) -> list:
    """The root rectangles (GMFootprint, root coordinates) an access through a view covers, exactly: runs of
    consecutive elements cut at the root's rows, runs of equal columns in consecutive rows merged."""
    view = acc.obj
    root, offset, strides = view.view.root, view.view.offset, view.view.strides
    r0, r1, c0, c1 = acc.rect
    sr, sc = strides[-2], strides[-1]
    start = offset + _lead(view, acc.batch)
    flat = (start + np.arange(r0, r1, dtype=np.int64)[:, None] * sr
            + np.arange(c0, c1, dtype=np.int64)[None, :] * sc).reshape(-1)
    flat = np.unique(flat)
    _, rows, cols = _flat3(root.shape)
    # runs of consecutive elements within one root row
    brk = np.flatnonzero((np.diff(flat) != 1) | (flat[1:] % cols == 0)) + 1
    firsts = flat[np.concatenate(([0], brk))]
    lasts = flat[np.concatenate((brk - 1, [len(flat) - 1]))] + 1
    line = firsts // cols                      # the root's row over all batches (batch * rows + row)
    lo, hi = firsts % cols, lasts - line * cols
    # merge runs of the same columns in consecutive root rows
    order = np.lexsort((line, hi, lo))
    line, lo, hi = line[order], lo[order], hi[order]
    cut = np.flatnonzero((np.diff(line) != 1) | (np.diff(lo) != 0) | (np.diff(hi) != 0)
                         | (line[1:] // rows != line[:-1] // rows)) + 1
    out = []
    for a, b in zip(np.concatenate(([0], cut)).tolist(), np.concatenate((cut, [len(line)])).tolist()):
        first, last = int(line[a]), int(line[b - 1])
        out.append(GMFootprint(root, (first % rows, last % rows + 1, int(lo[a]), int(hi[a])), first // rows, acc))
    return out


def strided(root_array: np.ndarray, view: GMTensor):
    """The [batch, rows, cols] array of `view` over its root's staged array (C-ordered [batch, rows, cols]): a
    strided numpy view, so loads read and stores write the root's elements in place. Only the elements a traced
    access reaches are ever touched (each was checked to lie in the root)."""
    from .memory import _Batched
    flat = root_array.reshape(-1)
    isz = flat.itemsize
    off, strides, shape = view.view.offset, view.view.strides, view.shape
    base = flat[off:] if off < flat.size else flat[flat.size - 1:]
    lead = [(d, s) for d, s in zip(shape[:-2], strides[:-2]) if d > 1]
    if all(s0 == s1 * d1 for (_, s0), (d1, s1) in zip(lead, lead[1:])):
        step = lead[-1][1] if lead else 0
        return np.lib.stride_tricks.as_strided(base, _flat3(shape), (step * isz, strides[-2] * isz, strides[-1] * isz))
    nd = np.lib.stride_tricks.as_strided(base, shape, tuple(s * isz for s in strides))
    return _Batched(nd)


__all__ = ["GMFootprint", "footprint", "strided"]
