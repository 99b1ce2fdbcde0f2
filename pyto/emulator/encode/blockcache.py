"""Blocks traced alike share their auto-sync and encoding.

The blocks of a launch mostly run the same code on different GM regions. Auto-sync and the encoding
(encode.py) depend on a block's structure: each instruction's op, pipe, attributes, tiles and
rectangles, the block's allocations and cross-core markers. They depend on GM positions only where
two pipes of the block touch one tensor and one of them writes it, and there only on where those
regions lie relative to each other (auto-sync asks whether they overlap or cover).
`signature` is exactly that structure, so two blocks with equal signatures get the same
dependencies and the same BlockCode; only their L2 regions are read from each block's own
instructions (Encoder.add).
"""
from __future__ import annotations

from collections import OrderedDict
from operator import itemgetter
from typing import Optional

from ...ir import GMTensor
from ..sync.crosscore import cross_key
from .encode import BlockCode

_GM_POSITION = frozenset(("batch", "r0", "c0", "parts"))   # attrs that say where in GM, not what
_GM_KEPT: dict = {}     # a GM transfer's attribute names -> (those kept, a getter of their values)


def _kept(names: tuple) -> tuple:
    """The names among `names` that are not a GM position, and a function of the attrs dict giving their values
    as a tuple (an itemgetter: no copy of the dict per instruction)."""
    kept = tuple(k for k in names if k not in _GM_POSITION)
    if len(kept) == 1:
        return kept, lambda attrs: (attrs[kept[0]],)      # (itemgetter of one name gives the bare value)
    return kept, itemgetter(*kept) if kept else lambda attrs: ()


def _gm_attrs(attrs: dict, key: list) -> None:
    """Append a GM transfer's attributes without its GM position (nd_num parts keep their tile
    rectangles) to `key`, as _signature keys any attributes: names, then values."""
    names = tuple(attrs)
    kept = _GM_KEPT.get(names)
    if kept is None:
        kept = _GM_KEPT[names] = _kept(names)
    key.append(kept[0])
    key.append(kept[1](attrs))
    parts = attrs.get("parts")
    if parts is not None:
        key.append(tuple(rect for _, rect in parts))


def _shared(gm: list) -> tuple:
    """The GM uses of tensors that one unit (role, pipe) of the block writes and another touches, each
    tensor's moved so its first use sits at batch 0, row 0, column 0: overlap and cover, all auto-sync
    asks of them, do not change under a common shift."""
    by: dict = {}
    for use in gm:
        by.setdefault(use[0], []).append(use)
    out = []
    for uid, uses in by.items():
        if not any(u[4] for u in uses) or len({(u[2], u[3]) for u in uses}) < 2:
            continue
        first = uses[0][5]
        b0, r0, c0 = first.batch, first.rect[0], first.rect[2]
        out.append((uid, tuple((pos, role, pipe, write, a.batch - b0,
                                (a.rect[0] - r0, a.rect[1] - r0, a.rect[2] - c0, a.rect[3] - c0))
                               for _, pos, role, pipe, write, a in uses)))
    return tuple(out)


class BlockCache:
    """The BlockCodes of the last few distinct block signatures of one launch."""

    def __init__(self, size: int = 4):
        self.size = size
        self._codes: OrderedDict = OrderedDict()
        self._intern: dict = {}      # instruction key -> a small int: signatures are tuples of ints

    def signature(self, programs: list) -> Optional[tuple]:
        """The block's structure (see the module docstring), or None if it cannot be keyed."""
        try:
            return self._signature(programs)
        except TypeError:      # an attribute value that cannot be keyed: encode this block on its own
            return None

    def _signature(self, programs: list) -> tuple:
        intern = self._intern
        stores: dict = {}       # TileStore -> its row in table, in order of first use
        views: dict = {}        # a tile's Access (one per tile view, shared by its instructions) -> (row, rect)
        table: list = []
        gm: list = []           # GM uses: (tensor uid, instruction position, role, pipe, write, access)
        body: list = []
        for prog in programs:
            role = prog.role
            body.append(intern.setdefault((role, len(prog.instrs),
                                           tuple((p, cross_key(m)) for p, m in prog.markers)), len(intern)))
            for ins in prog.instrs:
                srcs, dsts = ins.srcs, ins.dsts
                key = [ins.op, ins.pipe, ins.name, ins.loc, len(srcs), len(dsts)]
                write = False
                for group in (srcs, dsts):
                    for acc in group:
                        view = views.get(acc)
                        if view is None:
                            obj = acc.obj
                            if type(obj) is GMTensor:
                                gm.append((obj.uid, len(body), role, ins.pipe, write, acc))
                                key.append(obj.uid)
                                continue
                            sid = stores.get(obj)
                            if sid is None:
                                sid = stores[obj] = len(table)
                                table.append((obj.key, obj.program % 3, obj.buf, obj.shape, obj.padded, obj.dtype,
                                              obj.name))
                            view = views[acc] = (sid, acc.rect)
                        key.append(view)
                    write = True
                a = ins.attrs
                if "batch" in a:
                    _gm_attrs(a, key)
                else:           # names, then values: keys as the items would, without a pair per attribute
                    key.append(tuple(a))
                    key.append(tuple(a.values()))
                body.append(intern.setdefault(tuple(key), len(intern)))
        sig = (tuple(table), tuple(body), _shared(gm))
        hash(sig)
        return sig

    def get(self, sig: Optional[tuple]) -> Optional[BlockCode]:
        if sig is None:
            return None
        code = self._codes.get(sig)
        if code is not None:
            self._codes.move_to_end(sig)
        return code

    def put(self, sig: Optional[tuple], code: BlockCode) -> None:
        if sig is None:
            return
        self._codes[sig] = code
        while len(self._codes) > self.size:
            self._codes.popitem(last=False)
