"""A launch's instructions as flat arrays for the event loop (schedule/simulate.py), plus what a report or a
deadlock message needs to name them. Encoded one block at a time, so a timing-mode run can drop each
block's Instr records once encoded (bounded memory for millions of instructions), and blocks traced
alike share one encoding."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ...chip import Chip
from ...errors import SyncError
from ...ir import AccPhase, Instr, Op, Pipe, STPhase, is_cross_core
from .l2_streams import L2Accesses
from .timing import COST_KEYS, cost

if TYPE_CHECKING:
    from ..sync.deps import Deps

_KIND = {Op.SET_FLAG: 1, Op.WAIT_FLAG: 2, Op.SYNC_ALL: 3}
_LOCK = Op.MUTEX_LOCK
# per-instruction columns of a BlockCode, in the order encode() builds each row, and their types
# (gmb, l2b: GM and L2 channel bytes)
_COLUMNS = dict(pipe_of=np.int64, uf_rid=np.int64, uf_wait=np.int8, uf_set=np.int8, kind=np.int8, fkey=np.int64,
                fneed=np.int64, fspan=np.int64, occ=np.float64, lat=np.float64, gmb=np.float64, l2b=np.float64,
                core_i=np.int32, pipe_i=np.int8, name_i=np.int32, loc_i=np.int32)
# kind 4: an INTER_BLOCK cross-core wait (system._inter_block): it waits for `fneed` sets of its launch-wide event,
# consumes none, and joins the `fspan` sets of its round
ROUND_WAIT = 4


def check_flag_pairs(program) -> None:
    """synccheck: in program order, an event may not be set again before a wait_flag on it (undefined
    on the hardware, whatever the timing)."""
    pending: dict = {}
    for ins in program.instrs:
        if is_cross_core(ins.attrs.get("key")):
            continue              # a counter: up to chip.cross_core_flag_max sets may be pending (scheduler.py)
        if ins.op is Op.SET_FLAG:
            first = pending.get(ins.attrs["key"])
            if first is not None:
                raise SyncError(f"{ins.loc}: event {flag_name(ins.attrs['key'])} set again before a sync_dst "
                                f"consumed the set at {first.loc} (sync_src_sync_dst.md: an id is reused only after "
                                f"it has been consumed; undefined on the hardware)")
            pending[ins.attrs["key"]] = ins
        elif ins.op is Op.WAIT_FLAG:
            pending.pop(ins.attrs["key"], None)


def is_launch_wide(key) -> bool:
    """Whether a cross-core key is an INTER_BLOCK event (one queue for the whole launch)."""
    return is_cross_core(key) and key[2] == "block"


def flag_name(key) -> str:
    if is_launch_wide(key):
        return f"cross-core event {key[1]} (INTER_BLOCK over every {key[3]} of the launch)"
    if is_cross_core(key):
        _, e, space, s, d = key
        return f"cross-core event {e} ({s}->{d}, {'INTRA_BLOCK/UNICAST_BLOCK' if space == 'intra' else 'INTER_SUBBLOCK'})"
    s, d, e = key
    return f"(PipeType.{s.name}->PipeType.{d.name}, event_id {e})"


def unit_flag_access(ins: Instr):
    """(L0C access, value awaited, value set on leaving the pipe or -1) for a phased instruction."""
    phase = ins.attrs.get("phase")
    if phase is None:
        return None
    if isinstance(phase, AccPhase):
        return ins.dsts[0], 0, 1 if phase is AccPhase.Final else -1
    return ins.srcs[0], 1, 0 if phase is STPhase.Final else -1


class _UnitFlagRegions:
    """The unit_flag regions of one block's phased instructions (each a distinct L0C view) and the
    512-byte unit_flag blocks each covers (Nz: a 16x16 fp32 fractal is 1 KB), numbered by address: block b holds
    L0C bytes [512 b, 512 (b + 1)), so tiles at one address share their bits, as on the chip."""

    def __init__(self, block_bytes: int, l0c_bytes: int):
        self.block_bytes, self.total = block_bytes, -(-l0c_bytes // block_bytes)
        self.ids: dict = {}       # (store id, rect) -> region id
        self.ptr, self.blocks, self.names = [0], [], []

    def of(self, ins: Instr) -> tuple:
        """(region id, value awaited, value set) of a phased instruction; (-1, -1, -1) otherwise."""
        uf = unit_flag_access(ins)
        if uf is None:
            return _NO_UNIT_FLAG
        acc = uf[0]
        rid = self.ids.get((id(acc.obj), acc.rect))
        if rid is None:
            rid = self.ids[(id(acc.obj), acc.rect)] = len(self.names)
            self.blocks.extend(self._blocks(acc).tolist())
            self.ptr.append(len(self.blocks))
            r0, r1, c0, c1 = acc.rect
            self.names.append(f"L0C tile '{acc.obj.name}'[{r0}:{r1}, {c0}:{c1}]")
        return rid, uf[1], uf[2]

    def _blocks(self, acc) -> np.ndarray:
        store, (r0, r1, c0, c1) = acc.obj, acc.rect
        rows1 = store.padded[0] // 16
        per = 16 * 16 * store.dtype.itemsize // self.block_bytes
        fr = np.arange(r0 // 16, -(-r1 // 16))
        fc = np.arange(c0 // 16, -(-c1 // 16))
        frac = (fc[:, None] * rows1 + fr[None, :]).ravel()
        return store.addr // self.block_bytes + (frac[:, None] * per + np.arange(per)[None, :]).ravel()


_NO_UNIT_FLAG = (-1, -1, -1)


@dataclass
class Encoded:
    """Everything simulate() takes, and the names to report with."""

    arrays: dict
    n_flags: int
    n_fkeys: int
    participants: int
    slots: list           # slot -> (program name, Pipe)
    cores: list           # program names in launch order
    names: list
    locs: list
    core_i: np.ndarray
    pipe_i: np.ndarray
    name_i: np.ndarray
    loc_i: np.ndarray
    waits: BlockTexts     # wait_flag / sync_all index -> its condition as text, for deadlock messages
    region_names: list    # unit_flag region id -> "L0C tile 'ac'[0:32, 0:32]"
    gm_read_bytes: float
    gm_write_bytes: float
    flops: float
    cube_dtype: object


@dataclass
class BlockCode:
    """One block's instructions encoded with block-local numbers (instruction, pipe slot, unit_flag
    region and block, flag key, program position), so blocks traced alike can share one encoding
    (blockcache.py). `gm_io[p]` lists program p's GM transfers as (position in the program, local
    index, bytes, is_read): their L2 regions are taken from each block's own instructions."""

    n: int
    slots: list           # local slot -> (program position, Pipe)
    queues: list          # local slot -> local indices in program order
    arrays: dict          # per instruction, local numbering
    dep_ptr: np.ndarray
    dep_idx: np.ndarray
    rg_ptr: np.ndarray
    rg_blk: np.ndarray
    region_names: list
    n_flags: int
    n_fkeys: int
    waits: dict
    flops: float
    cube_dtype: object
    gm_read: float
    gm_write: float
    gm_io: list
    launch_keys: tuple = ()     # (local flag key, key) of the launch-wide events (INTER_BLOCK)


def _np(values, dtype) -> np.ndarray:
    return np.array(values, dtype=dtype) if len(values) else np.zeros(0, dtype)


_STATIC = ("occ", "lat", "gmb", "l2b", "io_bytes", "read", "flops", "name_i", "loc_i", "pipe_i", "kind")


def _slots(core_i: np.ndarray, pipe_i: np.ndarray) -> tuple:
    """The block's pipe slots, one per (program position, pipe) in order of first use: (slots as (position,
    Pipe), each instruction's slot, each slot's instruction indices in program order)."""
    key = core_i * 64 + pipe_i
    uniq, first, slot_of_uniq = np.unique(key, return_index=True, return_inverse=True)
    rank = np.empty(len(uniq), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(uniq))
    slot_i = rank[slot_of_uniq.reshape(-1)]
    slots = [(int(k) // 64, Pipe(int(k) % 64)) for k in uniq[np.argsort(first, kind="stable")]]
    by_slot = np.argsort(slot_i, kind="stable")
    queues = np.split(by_slot, np.cumsum(np.bincount(slot_i, minlength=len(slots)))[:-1]) if len(slots) else []
    return slots, slot_i, queues


def _gm_io(lens: list, io: np.ndarray, read: np.ndarray, nbytes: np.ndarray, kind: np.ndarray) -> list:
    """Per program, its GM transfers as (position in the program, block-local index, bytes, is_read, sync_all
    phase): the L2 replay (l2.py) orders GM accesses by phase."""
    out, lo = [], 0
    for length in lens:
        hi = lo + length
        at = np.flatnonzero(io[lo:hi])
        phase = np.cumsum(kind[lo:hi] == 3)[at]
        out.append(list(zip(at.tolist(), (at + lo).tolist(), nbytes[lo:hi][at].tolist(), read[lo:hi][at].tolist(),
                            phase.tolist())))
        lo = hi
    return out


class BlockTexts:
    """A launch-wide index -> text lookup (`get`) over the blocks' own dicts of block-local indices, so that
    finish() copies no text per instruction (most are never looked up: only a deadlock message reads them)."""

    def __init__(self, bases: list, texts: list):
        self.bases, self.texts = np.asarray(bases, np.int64), texts    # per block: its first index, its dict

    def get(self, i: int, default: str = "") -> str:
        k = int(np.searchsorted(self.bases, i, side="right")) - 1
        return self.texts[k].get(int(i) - int(self.bases[k]), default) if k >= 0 else default


class Encoder:
    """Encode each block (auto-synced, indices assigned) with `encode`, append it with `add`, then
    `finish()` joins the blocks into launch-wide arrays."""

    def __init__(self, chip: Chip):
        self.chip = chip
        self.n = 0
        self.names, self.locs = {}, {}
        self.cores: list = []
        self.slots: list = []
        self.chunks: list = []     # (code, instruction, slot, region, unit_flag block, flag key, core) bases
        self.l2 = L2Accesses()     # the GM accesses for the L2 replay
        self.n_regions = self.n_ufblocks = self.n_fkeys = 0
        self.launch_keys: dict = {}   # a launch-wide event's key -> its number after the blocks' own
        self.gm_read = self.gm_write = self.flops = 0.0
        self.cube_dtype = None
        self._memo: dict = {}      # (op, cost key, pipe, name, line) -> its row of _statics
        self._statics: list = []   # per distinct instruction: the _STATIC columns
        self._dtypes: list = []    # per row of _statics: its dtype attribute (an MMAD's: the cube's dtype)

    def _static(self, ins: Instr) -> int:
        """The row of `statics` for what an instruction's encoding takes from its op, pipe, attributes, name and
        line (encode memoises it on them: instructions alike cost alike)."""
        c = cost(self.chip, ins)
        path = ins.attrs.get("path", ())
        io_bytes = c.gm_bytes if ins.op in (Op.LOAD, Op.STORE) and "GM" in path else -1.0
        flops = 2.0 * ins.attrs["m"] * ins.attrs["n"] * ins.attrs["k"] if ins.op is Op.MMAD else 0.0
        self._statics.append((c.occ, c.lat, c.gm_bytes, c.l2_bytes, io_bytes, float(path[:1] == ("GM",)), flops,
                              self.names.setdefault(ins.name, len(self.names)),
                              self.locs.setdefault(ins.loc, len(self.locs)), int(ins.pipe), _KIND.get(ins.op, 0)))
        self._dtypes.append(ins.attrs.get("dtype"))
        return len(self._statics) - 1

    def encode(self, programs: list, deps: Deps) -> BlockCode:
        """The block's BlockCode; its instructions must be numbered from the encoder's next index; `deps`: the sync
        stage's. One pass in Python per instruction (its memoised static row, its dependencies; flags, waits and
        unit_flag regions where it has them), the columns then in numpy."""
        n0 = self.n
        uf = _UnitFlagRegions(self.chip.unit_flag_block_bytes, self.chip.buffers["L0C"])
        mids: list = []
        dep_ptr, dep_idx = [0], []
        special: list = []     # (index, program position, instr) of flags, waits and sync_alls
        phased: list = []      # (index, instr) of unit_flag (phased) instructions
        memo, static = self._memo, self._static
        synced = deps.get_map()
        i = 0
        for pos, prog in enumerate(programs):
            instrs = prog.instrs
            assert not instrs or (instrs[0].index == n0 + i and instrs[-1].index == n0 + i + len(instrs) - 1), \
                "instructions must be encoded in index order"
            for ins in instrs:
                op, a = ins.op, ins.attrs
                key = (op, COST_KEYS[op](a), ins.pipe, ins.name, ins.loc)
                mid = memo.get(key)
                if mid is None:
                    mid = memo[key] = static(ins)
                mids.append(mid)
                waits = synced.get(id(ins)) or ins.after
                if waits:
                    dep_idx.extend([d.index - n0 for d in waits])
                dep_ptr.append(len(dep_idx))
                if op in _KIND:
                    special.append((i, pos, ins))
                if a.get("phase") is not None:
                    phased.append((i, ins))
                if op is _LOCK or "mutex" in a:
                    special.append((i, pos, ins))
                i += 1
        n = i
        mid = np.fromiter(mids, np.int64, n)
        table = np.array(self._statics, np.float64).reshape(-1, len(_STATIC))
        col = {name: table[:, c][mid] for c, name in enumerate(_STATIC)}
        lens = [len(prog.instrs) for prog in programs]
        core_i = np.repeat(np.arange(len(programs)), lens)
        kind = col["kind"].astype(np.int8)
        for pos, prog in enumerate(programs):
            lo = sum(lens[:pos])
            if (kind[lo:lo + lens[pos]] == 1).any():
                check_flag_pairs(prog)
        slots, slot_i, queues = _slots(core_i, col["pipe_i"].astype(np.int64))
        fkey, fneed, fspan = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
        fkeys: dict = {}
        launch_keys: dict = {}
        waits: dict = {}
        for j, pos, ins in special:
            k = _KIND.get(ins.op, 0)
            if k == 1 or k == 2:      # a flag queue: a program's own, or a cross-core one the block shares
                key = ins.attrs["key"]
                fkey[j] = fkeys.setdefault(key if is_cross_core(key) else (pos, key), len(fkeys))
                if is_launch_wide(key):
                    launch_keys[int(fkey[j])] = key
                    if k == 2:
                        kind[j], fneed[j], fspan[j] = ROUND_WAIT, ins.attrs["need"], ins.attrs["parties"]
            if k >= 2 or k == 0:
                waits[j] = _wait_text(ins)
        uf_cols = np.full((3, n), -1, np.int64)
        for j, ins in phased:
            uf_cols[:, j] = uf.of(ins)
        io_bytes, flops = col["io_bytes"], col["flops"]
        mmads = np.flatnonzero(flops)
        io = io_bytes >= 0
        read = io & (col["read"] > 0)
        gm_io = _gm_io(lens, io, read, io_bytes, kind)
        arrays = dict(pipe_of=slot_i, uf_rid=uf_cols[0], uf_wait=uf_cols[1], uf_set=uf_cols[2], kind=kind,
                      fkey=fkey, fneed=fneed, fspan=fspan, occ=col["occ"], lat=col["lat"], gmb=col["gmb"],
                      l2b=col["l2b"], core_i=core_i, pipe_i=col["pipe_i"], name_i=col["name_i"], loc_i=col["loc_i"])
        arrays = {name: arrays[name].astype(dt, copy=False) for name, dt in _COLUMNS.items()}
        return BlockCode(n, slots, queues, arrays, _np(dep_ptr, np.int64), _np(dep_idx, np.int64),
                         _np(uf.ptr, np.int64), _np(uf.blocks, np.int64), uf.names, uf.total, len(fkeys), waits,
                         float(flops.sum()), self._dtypes[mid[mmads[-1]]] if len(mmads) else None,
                         float(io_bytes[read].sum()), float(io_bytes[io & ~read].sum()), gm_io,
                         tuple(launch_keys.items()))

    def add(self, programs: list, code: BlockCode) -> None:
        """Append a block: its programs (numbered from the next index) encoded as `code`."""
        base = self.n
        core_base = len(self.cores)
        self.cores.extend(str(prog) for prog in programs)
        self.l2.add(programs, code.gm_io, base, core_base)
        self.chunks.append((code, base, len(self.slots), self.n_regions, self.n_ufblocks, self.n_fkeys, core_base))
        self.slots.extend((str(programs[pos]), pipe) for pos, pipe in code.slots)
        self.n += code.n
        self.n_regions += len(code.region_names)
        self.n_ufblocks += code.n_flags
        self.n_fkeys += code.n_fkeys
        for _, key in code.launch_keys:
            self.launch_keys.setdefault(key, len(self.launch_keys))
        self.gm_read += code.gm_read
        self.gm_write += code.gm_write
        self.flops += code.flops
        if code.cube_dtype is not None:
            self.cube_dtype = code.cube_dtype

    def finish(self) -> Encoded:
        parts: dict = {k: [] for k in (*_COLUMNS, "dep_ptr", "dep_idx", "rg_ptr", "rg_blk", "q_idx")}
        parts["dep_ptr"].append(np.zeros(1, np.int64))
        parts["rg_ptr"].append(np.zeros(1, np.int64))
        q_len, region_names = [], []
        n_deps = n_rgblk = 0
        for code, base, slot0, rid0, blk0, fkey0, core0 in self.chunks:
            a = code.arrays
            parts["pipe_of"].append(a["pipe_of"] + slot0)
            parts["uf_rid"].append(np.where(a["uf_rid"] >= 0, a["uf_rid"] + rid0, -1))
            fmap = np.arange(code.n_fkeys, dtype=np.int64) + fkey0
            for lid, key in code.launch_keys:          # one queue for the whole launch
                fmap[lid] = self.n_fkeys + self.launch_keys[key]
            flag = (a["kind"] == 1) | (a["kind"] == 2) | (a["kind"] == ROUND_WAIT)
            parts["fkey"].append(np.where(flag, fmap[a["fkey"]] if code.n_fkeys else 0, 0))
            parts["core_i"].append(a["core_i"] + core0)
            for k in ("uf_wait", "uf_set", "kind", "fneed", "fspan", "occ", "lat", "gmb", "l2b", "pipe_i", "name_i",
                      "loc_i"):
                parts[k].append(a[k])
            parts["dep_ptr"].append(code.dep_ptr[1:] + n_deps)
            parts["dep_idx"].append(code.dep_idx + base)
            n_deps += len(code.dep_idx)
            parts["rg_ptr"].append(code.rg_ptr[1:] + n_rgblk)
            parts["rg_blk"].append(code.rg_blk + blk0)
            n_rgblk += len(code.rg_blk)
            for q in code.queues:
                parts["q_idx"].append(q + base)
                q_len.append(len(q))
            region_names += code.region_names
        # indices, counts and numbers as int32 where they fit: a quarter less memory to fault in and to read
        index = ("pipe_of", "uf_rid", "fkey", "fneed", "fspan", "dep_ptr", "dep_idx", "rg_ptr", "rg_blk", "q_idx")
        rounds = max((int(x.max()) for k in ("fneed", "fspan") for x in parts[k] if len(x)), default=0)
        small = max(self.n, n_deps, n_rgblk, self.n_ufblocks, self.n_fkeys + len(self.launch_keys), len(self.slots),
                    self.n_regions, rounds) < 2**31
        types = {**_COLUMNS, **{k: np.int32 if small else np.int64 for k in index}}
        cat = {k: np.concatenate(v, dtype=types.get(k, np.int64), casting="same_kind") if v
               else np.zeros(0, types.get(k, np.int64)) for k, v in parts.items()}
        gmb, l2b, lat = cat["gmb"], cat["l2b"], cat["lat"]
        idx, hit, filler = self.l2.hits(self.chip.l2_bytes, self.n)    # re-reads served by L2
        fill = np.full(len(lat), -1, types["dep_idx"])        # a hit's filler: it completes no earlier
        if len(idx):          # idx distinct: in-place fancy updates are exact
            served_all = hit >= gmb[idx]      # every region served by L2 (an nd_num read may be partly): its latency
            full = idx[served_all]
            gmb[idx] -= hit
            l2b[idx] += hit
            lat[full] += self.chip.l2_latency_cycles - self.chip.gm_latency_cycles
            fill[idx] = np.where(served_all, filler, -1)      # a partial hit completes on its own
        q_ptr = np.zeros(len(q_len) + 1, np.int64)
        np.cumsum(q_len, out=q_ptr[1:])
        arrays = dict(pipe_of=cat["pipe_of"], q_ptr=q_ptr, q_idx=cat["q_idx"],
                      dep_ptr=cat["dep_ptr"], dep_idx=cat["dep_idx"], uf_rid=cat["uf_rid"], rg_ptr=cat["rg_ptr"],
                      rg_blk=cat["rg_blk"], uf_wait=cat["uf_wait"], uf_set=cat["uf_set"], kind=cat["kind"],
                      fkey=cat["fkey"], fneed=cat["fneed"], fspan=cat["fspan"], occ=cat["occ"], lat=lat, gm_bytes=gmb,
                      l2_bytes=l2b, fill=fill)
        # a pl.system.sync_all waits for every traced core, also one that never calls it (then a deadlock)
        return Encoded(arrays, self.n_ufblocks, self.n_fkeys + len(self.launch_keys), len(self.cores), self.slots,
                       self.cores,
                       list(self.names), [str(x) for x in self.locs], cat["core_i"], cat["pipe_i"], cat["name_i"],
                       cat["loc_i"], BlockTexts([c[1] for c in self.chunks], [c[0].waits for c in self.chunks]),
                       region_names, self.gm_read, self.gm_write, self.flops, self.cube_dtype)


def _wait_text(ins: Instr) -> str:
    """The condition of a wait (a flag, a sync_all, a mutex token), as text for a deadlock message."""
    if ins.op is Op.WAIT_FLAG:
        setter = "pl.system.set_cross_core" if is_cross_core(ins.attrs["key"]) else "pl.system.sync_src"
        return f"event {flag_name(ins.attrs['key'])}: never set by a matching {setter}"
    if ins.op is Op.SYNC_ALL:
        return "pl.system.sync_all: {arrived} of {participants} cores arrived"
    ids = (ins.attrs["mutex_id"],) if ins.op is _LOCK else ins.attrs["mutex"]
    how = "pl.system.mutex_lock" if ins.op is _LOCK else "auto_mutex"
    return f"mutex id{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))} ({how})"
