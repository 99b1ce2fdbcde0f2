"""Blocks traced alike share their auto-sync and encoding.

The blocks of a launch mostly run the same code on different GM regions. Auto-sync and the encoding
(encode.py) depend on a block's structure: each instruction's op, pipe, attributes, tiles and
rectangles, the block's allocations and cross-core markers. They depend on GM positions only where
two pipes of the block touch one tensor and one of them writes it, and there only on where those
regions lie relative to each other (auto-sync asks whether they overlap or cover).
`signature` is exactly that structure, so two blocks with equal signatures get the same
dependencies and the same BlockCode; only their L2 regions are read from each block's own
instructions (Encoder.add).

Most blocks of a launch equal the block before them, so `signature` first compares a block with a reference
block, one it keyed in full (`_Reference`; its trace is held, one block's more than a timing-mode launch keeps, until
`release`), by whole-block tuples that C loops build and compare (map, attrgetter, zip, tuple ==), with no key tuple
per instruction to build and hash; alike, the block gets the reference's signature. `_alike` checks what the
signature keys, compared as its tuples compare (identity, then ==): alike => equal signatures. It is exact too
(equal signatures => alike) but for two cases the tracer does not make, where it says not alike and the signature in
full decides, so each block's signature is the same either way: GM transfers whose attribute names differ only in
the GM position names (or their order), and distinct GM tensors of one uid (a launch's uids name one tensor each).
"""
from __future__ import annotations

from collections import OrderedDict
from itertools import chain
from operator import attrgetter, itemgetter
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


def _header(prog) -> tuple:
    """A program's entry in the signature's body: role, length, cross-core markers."""
    return prog.role, len(prog.instrs), tuple((p, cross_key(m)) for p, m in prog.markers)


_MAX_SKIP = 16
_INSTRS = attrgetter("instrs")
_INSTR_FIELDS = attrgetter("op", "pipe", "name", "loc", "srcs", "dsts", "attrs")
_OBJ, _RECT = attrgetter("obj"), attrgetter("rect")


def _row(store) -> tuple:
    """A TileStore's row in the signature's table."""
    return store.key, store.program % 3, store.buf, store.shape, store.padded, store.dtype, store.name


def _parts_key(attrs: dict):
    """The tile rectangles of an nd_num transfer's parts (what _gm_attrs keys of them), None if it has none."""
    parts = attrs.get("parts")
    return None if parts is None else tuple(rect for _, rect in parts)


def _picker(at: list):
    """A function of a sequence giving the tuple of its items at positions `at` (one C call: itemgetter)."""
    if len(at) > 1:
        return itemgetter(*at)
    if at:
        i = at[0]
        return lambda seq: (seq[i],)
    return lambda seq: ()


class _Lists:
    """A block's instructions (all programs, in order) field by field: tuples made by C loops (map, attrgetter,
    zip), no Python loop."""

    __slots__ = ("ops", "pipes", "names", "locs", "srcs", "dsts", "attrs")

    def __init__(self, programs: list):
        instrs = list(chain.from_iterable(map(_INSTRS, programs)))
        fields = tuple(zip(*map(_INSTR_FIELDS, instrs))) or ((),) * 7
        self.ops, self.pipes, self.names, self.locs, self.srcs, self.dsts, self.attrs = fields


class _Reference:
    """The last block keyed in full and what `_alike` compares a block with, built the first time it is asked."""

    def __init__(self, programs: list, sig: tuple):
        self.programs, self.sig, self.built = programs, sig, False

    def build(self) -> None:
        """The reference's lists and the positions in them that the comparison reads (tiles, GM transfers)."""
        programs = self.programs
        L = self.lists = _Lists(programs)
        accs = tuple(chain(chain.from_iterable(L.srcs), chain.from_iterable(L.dsts)))   # all srcs, then all dsts
        self.objs = tuple(map(_OBJ, accs))
        self.headers = list(map(_header, programs))
        self.nsrcs, self.ndsts = tuple(map(len, L.srcs)), tuple(map(len, L.dsts))
        keys = list(map(tuple, L.attrs))                    # each instruction's attribute names
        self.nattrs, self.flat_keys = tuple(map(len, L.attrs)), tuple(chain.from_iterable(L.attrs))
        objs = dict.fromkeys(self.objs)
        self.nobjs = len(objs)
        self.uids = {o: o.uid for o in objs if type(o) is GMTensor}
        self.rows = {o: _row(o) for o in objs if type(o) is not GMTensor}     # the signature's table, as a dict
        self.tiles = _picker([i for i, o in enumerate(self.objs) if type(o) is not GMTensor])
        self.tile_rects = tuple(map(_RECT, self.tiles(accs)))
        self.plain = _picker([i for i, k in enumerate(keys) if "batch" not in k])
        self.plain_values = tuple(chain.from_iterable(map(dict.values, self.plain(L.attrs))))
        groups: dict = {}       # a GM transfer's attribute names -> the positions of the instructions that have them
        for i, k in enumerate(keys):
            if "batch" in k:
                groups.setdefault(k, []).append(i)
        self.gm_groups = []     # (getter of the kept values, picker of the instructions, the reference's values)
        self.parts = []         # (position, the reference's _parts_key) of GM transfers that have a "parts" name
        for k, at in groups.items():
            kept = _GM_KEPT.get(k)
            if kept is None:
                kept = _GM_KEPT[k] = _kept(k)
            pick = _picker(at)
            self.gm_groups.append((kept[1], pick, tuple(map(kept[1], pick(L.attrs)))))
            if "parts" in k:
                self.parts += [(i, _parts_key(L.attrs[i])) for i in at]
        self.shared_uses = self._shared_uses(programs) if self.sig[2] else []
        self.built = True

    def _shared_uses(self, programs: list) -> list:
        """The GM uses _shared keeps, as _signature lists them but with the access's position in the block's
        accesses in place of the access: which they are follows from the block's structure alone."""
        uses: list = []
        pos = src = 0
        dst = sum(self.nsrcs)       # (the accesses: all srcs, then all dsts)
        for prog in programs:
            pos += 1
            for ins in prog.instrs:
                for acc in ins.srcs:
                    if type(acc.obj) is GMTensor:
                        uses.append((acc.obj.uid, pos, prog.role, ins.pipe, False, src))
                    src += 1
                for acc in ins.dsts:
                    if type(acc.obj) is GMTensor:
                        uses.append((acc.obj.uid, pos, prog.role, ins.pipe, True, dst))
                    dst += 1
                pos += 1
        keep = {uid for uid, _ in self.sig[2]}
        return [u for u in uses if u[0] in keep]


def _alike(programs: list, ref: _Reference) -> bool:
    """Whether the block keys as the reference does (see the module docstring); what edge blocks most often differ
    in (lengths, attributes such as valid shapes, tile rectangles) first. A TypeError: an attribute value equal to
    the reference's that cannot be hashed (keyed in full, the block has no signature)."""
    if not ref.built:
        ref.build()
    if len(programs) != len(ref.headers) or list(map(_header, programs)) != ref.headers:
        return False
    L, R = _Lists(programs), ref.lists
    if L.ops != R.ops or L.pipes != R.pipes or L.names != R.names or L.locs != R.locs \
            or tuple(map(len, L.srcs)) != ref.nsrcs or tuple(map(len, L.dsts)) != ref.ndsts \
            or tuple(map(len, L.attrs)) != ref.nattrs or tuple(chain.from_iterable(L.attrs)) != ref.flat_keys:
        return False        # (the attribute names: each instruction's count, then all of them in order)
    values = tuple(chain.from_iterable(map(dict.values, ref.plain(L.attrs))))    # (the counts are equal)
    if values != ref.plain_values:
        return False
    hash(values)
    for getter, pick, rvalues in ref.gm_groups:
        values = tuple(map(getter, pick(L.attrs)))
        if values != rvalues:
            return False
        hash(values)
    for i, rparts in ref.parts:
        if _parts_key(L.attrs[i]) != rparts:
            return False
    accs = tuple(chain(chain.from_iterable(L.srcs), chain.from_iterable(L.dsts)))
    if tuple(map(_RECT, ref.tiles(accs))) != ref.tile_rects:
        return False
    objs = tuple(map(_OBJ, accs))
    same = dict(zip(objs, ref.objs))          # the block's objects -> the reference's at the same accesses
    if len(same) != ref.nobjs or tuple(map(same.__getitem__, objs)) != ref.objs:
        return False        # not one to one: the objects are not accessed alike (order of first use included)
    uids, rows = ref.uids, ref.rows
    for obj, robj in same.items():
        if type(obj) is GMTensor:
            if robj not in uids or obj.uid != uids[robj]:
                return False
        elif robj not in rows or _row(obj) != rows[robj]:
            return False
    if ref.shared_uses:
        gm = [(uid, pos, role, pipe, write, accs[at]) for uid, pos, role, pipe, write, at in ref.shared_uses]
        return _shared(gm) == ref.sig[2]
    return True


class BlockCache:
    """The BlockCodes of the last few distinct block signatures of one launch."""

    def __init__(self, size: int = 4):
        self.size = size
        self._codes: OrderedDict = OrderedDict()
        self._intern: dict = {}      # instruction key -> a small int: signatures are tuples of ints
        self._ref: Optional[_Reference] = None    # the last block keyed in full (None: it could not be keyed)
        self._fails = 0         # comparisons with the reference failed in a row
        self._skip = 0          # blocks to key in full before comparing again

    def signature(self, programs: list) -> Optional[tuple]:
        """The block's structure (see the module docstring), or None if it cannot be keyed: the reference's
        signature when the block is alike it, else the signature in full. The block keyed in full becomes the
        reference unless it is the first in a row not alike the reference (an edge block among blocks alike);
        from the third such block in a row, 1, 2, 4 ... of the blocks after each are keyed in full without a
        comparison (blocks that alternate pay few comparisons that fail)."""
        ref = self._ref
        if self._skip:
            self._skip -= 1
        elif ref is not None:
            try:
                if _alike(programs, ref):
                    self._fails = 0
                    return ref.sig
            except Exception:   # noqa: BLE001 - a value equal to the reference's that cannot be hashed (keyed in
                pass            # full, the block has no signature), or one whose == raises: the signature decides
            self._fails += 1
            if self._fails >= 3:
                self._skip = min(2 ** (self._fails - 3), _MAX_SKIP)
        sig = self.signature_in_full(programs)
        if ref is None or self._fails != 1:
            self._ref = None if sig is None else _Reference(programs, sig)
        return sig

    def release(self) -> None:
        """Drop the reference block (its trace): the launch has traced its last block."""
        self._ref = None

    def signature_in_full(self, programs: list) -> Optional[tuple]:
        """The block's structure built key by key, no reference consulted or kept (what `signature` returns)."""
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
            body.append(intern.setdefault(_header(prog), len(intern)))
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
