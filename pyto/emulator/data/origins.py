"""Where a data pass can read an MMAD operand from its source, and which copies nobody then reads.

The cube path copies GM -> L1 -> L0A/L0B and only the MMAD reads L0A/L0B. Binding the data pass in the
schedule's order (datapass.DataPass), Origins follows what each tile rectangle holds: a copy of a GM block
(a GM -> L1 load that covered its destination: the whole tile, or one of the K pieces a streamed L1 slot is
filled in, each a rectangle of its own) or of an L1 view (an L1 -> L0 load), and the write counts that keep it
true. An MMAD operand that is still such a copy is read from the GM block (through a widened
copy of the input, made once per pass) or from the L1 view, and a copy whose every reader went to the
source is not run. GM tensors the launch writes are never a source (their content changes during the
pass); anything else that reads a tile keeps the copies that wrote it. The numbers are the same: the
MMAD multiplies the same values.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

from ...ir import Access, GMTensor, rect_covers


class Held(NamedTuple):
    """A tile rectangle's content as a copy, written by copy step `step` (the store's latest write): of the GM
    region `region` = (batch, r0, r1, c0, c1, transposed) of input `tensor` (the content is that
    region, transposed when the flag says so), or of the tile view `src` (transposed if `transposed`; tensor
    None), valid while that tile's store has `src_version` writes."""

    rect: tuple
    tensor: Optional[GMTensor]
    region: Optional[tuple]
    src: Optional[Access]
    transposed: bool
    src_version: int
    step: int


class Origins:
    """Binding-time bookkeeping for copy elision (module docstring). `inputs`: ids of the GM tensors no
    instruction writes."""

    def __init__(self, inputs: set):
        self.inputs = inputs
        self.version: dict = {}      # id(store) -> writes so far
        self.held: dict = {}         # id(store) -> the copies it holds, disjoint rectangles (a copy drops those
                                     # it overlaps; any other write to the store drops them all)
        self.writers: dict = {}      # id(store) -> (rect, step) of the copies whose bytes it may still hold
                                     # (elidable until read); a copy drops those its rect covers
        self.deps: dict = {}         # copy step -> the copy steps that wrote what it copied
        self.needed: set = set()     # copy steps something reads

    # ---- writes ---------------------------------------------------------------------------------
    def wrote(self, acc: Access, step: Optional[int] = None, held: Optional[Held] = None) -> None:
        """`acc` (a tile) written by step `step`, an elidable copy, or by anything else (step None)."""
        key = id(acc.obj)
        self.version[key] = self.version.get(key, 0) + 1
        if step is not None:          # a copy writes all of its rect: the copies it covers can be read no more
            r = acc.rect                # (without dropping them, the lists grow with the launch: a quadratic bind)
            ws = self.writers.get(key)
            if ws is None:
                self.writers[key] = [(r, step)]
            else:
                ws[:] = [w for w in ws if not rect_covers(r, w[0])]
                ws.append((r, step))
        if held is not None:
            r = held.rect
            self.held[key] = [h for h in self.held.get(key, ()) if h.rect[1] <= r[0] or r[1] <= h.rect[0]
                              or h.rect[3] <= r[2] or r[3] <= h.rect[2]] + [held]
        else:
            self.held.pop(key, None)

    def gm_copy(self, acc: Access, tensor: GMTensor, region: tuple, step: int) -> None:
        """A GM -> L1 load that covers acc: its content is `region` (batch, r0, r1, c0, c1, transposed) of
        `tensor`."""
        ok = id(tensor) in self.inputs
        self.deps[step] = ()
        self.wrote(acc, step, Held(acc.rect, tensor, region, None, False, 0, step) if ok else None)

    def tile_copy(self, dst: Access, src: Access, transpose: bool, step: int) -> None:
        """An L1 -> L0 load dst <- src: dst holds src's GM region if src still holds one, else src's view while
        src's store is not written again."""
        skey = id(src.obj)
        self.deps[step] = tuple(w for _, w in self.writers.get(skey, ()))
        inner = self._holding(src)
        if inner is not None and inner.tensor is not None:
            batch, r0, r1, c0, c1, t = inner.region
            dr, dc = src.rect[0] - inner.rect[0], src.rect[2] - inner.rect[2]
            h, w = src.rect[1] - src.rect[0], src.rect[3] - src.rect[2]
            # a view of region.T (t) at (dr, dc) is region[dc:dc+w, dr:dr+h].T
            sub = ((batch, r0 + dc, r0 + dc + w, c0 + dr, c0 + dr + h, True) if t else
                   (batch, r0 + dr, r0 + dr + h, c0 + dc, c0 + dc + w, False))
            region = sub[:5] + (sub[5] != transpose,)
            held = Held(dst.rect, inner.tensor, region, None, False, 0, step)
        else:
            held = Held(dst.rect, None, None, src, transpose, self.version.get(skey, 0), step)
        self.wrote(dst, step, held)

    def _holding(self, acc: Access) -> Optional[Held]:
        """The copy `acc` lies in (its store not written since but by copies beside it), or None."""
        r = acc.rect
        for h in self.held.get(id(acc.obj), ()):
            if h.rect[0] <= r[0] and r[1] <= h.rect[1] and h.rect[2] <= r[2] and r[3] <= h.rect[3]:
                return h
        return None

    # ---- reads ----------------------------------------------------------------------------------
    def operand(self, acc: Access) -> Optional[tuple]:
        """An MMAD operand read at its source: ("gm", tensor, region), ("tile", src access, transposed), or None
        to read the tile itself."""
        h = self._holding(acc)
        if h is None or h.rect != acc.rect:
            return None
        if h.tensor is not None:
            return "gm", h.tensor, h.region
        skey = id(h.src.obj)
        if self.version.get(skey, 0) != h.src_version:
            return None
        self._need_writers(skey)
        return "tile", h.src, h.transposed

    def read(self, acc: Access) -> None:
        """Something reads the tile of `acc` itself: every copy that wrote it must run."""
        if not isinstance(acc.obj, GMTensor):
            self._need_writers(id(acc.obj))

    def _need_writers(self, key: int) -> None:
        todo = [w for _, w in self.writers.get(key, ())]
        while todo:
            s = todo.pop()
            if s not in self.needed:
                self.needed.add(s)
                todo.extend(self.deps.get(s, ()))
