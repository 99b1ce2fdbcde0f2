"""A launch's instructions as flat arrays for the event loop (simulate.py), plus what a report or a
deadlock message needs to name them. Filled one block at a time, so a timing-mode run can drop each
block's Instr records once encoded (bounded memory for millions of instructions)."""
from __future__ import annotations

from array import array
from dataclasses import dataclass

import numpy as np

from ..chip import Chip
from ..errors import SyncError
from ..ir import AccPhase, GMTensor, Instr, Op, STPhase
from .l2 import l2_hits
from .timing import burst_bytes, cost

_KIND = {Op.SET_FLAG: 1, Op.WAIT_FLAG: 2, Op.SYNC_ALL: 3}


def check_flag_pairs(program) -> None:
    """synccheck: in program order, an event may not be set again before a wait_flag on it (undefined
    on the hardware, whatever the timing)."""
    pending: dict = {}
    for ins in program.instrs:
        if ins.op is Op.SET_FLAG:
            first = pending.get(ins.attrs["key"])
            if first is not None:
                raise SyncError(f"{ins.loc}: event {flag_name(ins.attrs['key'])} set again before a wait_flag "
                                f"consumed the set at {first.loc} (undefined on the hardware)")
            pending[ins.attrs["key"]] = ins
        elif ins.op is Op.WAIT_FLAG:
            pending.pop(ins.attrs["key"], None)


def flag_name(key) -> str:
    s, d, e = key
    return f"({s.name}->{d.name}, id {e})"


def unit_flag_access(ins: Instr):
    """(L0C access, value awaited, value set on leaving the pipe or -1) for a phased instruction."""
    phase = ins.attrs.get("phase")
    if phase is None:
        return None
    if isinstance(phase, AccPhase):
        return ins.dsts[0], 0, 1 if phase is AccPhase.Final else -1
    return ins.srcs[0], 1, 0 if phase is STPhase.Final else -1


class _Blocks:
    """Global ids of the 512-byte unit_flag blocks of L0C views (Nz: a 16x16 fp32 fractal is 1 KB)."""

    def __init__(self, block_bytes: int):
        self.block_bytes, self.base, self.total = block_bytes, {}, 0

    def of(self, acc) -> np.ndarray:
        store, (r0, r1, c0, c1) = acc.obj, acc.rect
        rows1 = store.padded[0] // 16
        per = 16 * 16 * store.dtype.itemsize // self.block_bytes
        if id(store) not in self.base:
            self.base[id(store)] = (self.total, store)   # keep the store alive: ids must stay unique
            self.total += rows1 * (store.padded[1] // 16) * per
        fr = np.arange(r0 // 16, -(-r1 // 16))
        fc = np.arange(c0 // 16, -(-c1 // 16))
        frac = (fc[:, None] * rows1 + fr[None, :]).ravel()
        return self.base[id(store)][0] + (frac[:, None] * per + np.arange(per)[None, :]).ravel()


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
    waits: dict           # wait_flag / sync_all index -> its condition as text, for deadlock messages
    region_names: list    # unit_flag region id -> "L0C tile 'ac'[0:32, 0:32]"
    gm_read_bytes: float
    gm_write_bytes: float
    flops: float
    cube_dtype: object


class Encoder:
    """Append the instructions of whole blocks (auto-synced, indices assigned), then `finish()`."""

    def __init__(self, chip: Chip):
        self.chip = chip
        self.n = 0
        self.slot_of: dict = {}
        self.slots: list = []
        self.queues: list = []
        self.pipe_of = array("q")
        self.dep_ptr, self.dep_idx = array("q", [0]), array("q")
        self.uf_rid, self.rg_ptr, self.rg_blk = array("q"), array("q", [0]), array("q")
        self.regions: dict = {}    # (store id, rect) -> region id: phased instructions share regions
        self.region_names: list = []
        self.uf_wait, self.uf_set, self.kind = array("b"), array("b"), array("b")
        self.fkey, self.fkeys = array("q"), {}
        self.occ, self.lat, self.gmb, self.l2b = array("d"), array("d"), array("d"), array("d")
        self.core_i, self.pipe_i, self.name_i, self.loc_i = array("i"), array("b"), array("i"), array("i")
        self.names, self.locs, self.cores, self.core_of = {}, {}, [], {}
        self.blocks = _Blocks(chip.unit_flag_block_bytes)
        self.streams: list = []
        self.waits: dict = {}
        self.participants = 0
        self.gm_read = 0.0
        self.gm_write = 0.0
        self.flops = 0.0
        self.cube_dtype = None

    def add(self, programs: list) -> None:
        for prog in programs:
            check_flag_pairs(prog)
            self.core_of[prog.id] = len(self.cores)
            self.cores.append(str(prog))
            if any(ins.op is Op.SYNC_ALL for ins in prog.instrs):
                self.participants += 1
            stream = []
            for ins in prog.instrs:
                self._one(prog, ins, stream)
            self.streams.append(stream)

    def _one(self, prog, ins: Instr, stream: list) -> None:
        assert ins.index == self.n, "instructions must be added in index order"
        self.n += 1
        key = (ins.core, ins.pipe)
        slot = self.slot_of.get(key)
        if slot is None:
            slot = self.slot_of[key] = len(self.slots)
            self.slots.append((str(prog), ins.pipe))
            self.queues.append(array("q"))
        self.pipe_of.append(slot)
        self.queues[slot].append(ins.index)
        for d in ins.deps:
            self.dep_idx.append(d.index)
        self.dep_ptr.append(len(self.dep_idx))
        uf = unit_flag_access(ins)
        if uf is not None:
            acc = uf[0]
            rid = self.regions.get((id(acc.obj), acc.rect))
            if rid is None:
                rid = self.regions[(id(acc.obj), acc.rect)] = len(self.region_names)
                self.rg_blk.extend(self.blocks.of(acc).tolist())
                self.rg_ptr.append(len(self.rg_blk))
                r0, r1, c0, c1 = acc.rect
                self.region_names.append(f"L0C tile '{acc.obj.name}'[{r0}:{r1}, {c0}:{c1}]")
            self.uf_rid.append(rid)
            self.uf_wait.append(uf[1])
            self.uf_set.append(uf[2])
        else:
            self.uf_rid.append(-1)
            self.uf_wait.append(-1)
            self.uf_set.append(-1)
        k = _KIND.get(ins.op, 0)
        self.kind.append(k)
        self.fkey.append(self.fkeys.setdefault((ins.core, ins.attrs["key"]), len(self.fkeys)) if k in (1, 2) else 0)
        if ins.op is Op.MMAD:
            self.flops += 2.0 * ins.attrs["m"] * ins.attrs["n"] * ins.attrs["k"]
            self.cube_dtype = ins.attrs["dtype"]
        c = cost(self.chip, ins)
        self.occ.append(c.occ)
        self.lat.append(c.lat)
        self.gmb.append(c.gm_bytes)
        self.l2b.append(c.l2_bytes)
        if ins.op in (Op.LOAD, Op.STORE):
            gm = [(acc, True) for acc in ins.srcs if isinstance(acc.obj, GMTensor)]
            gm += [(acc, False) for acc in ins.dsts if isinstance(acc.obj, GMTensor)]
            if gm:
                nbytes = burst_bytes(self.chip, ins.attrs) / len(gm)
                key = hash(tuple((acc.obj.uid, acc.batch, acc.rect) for acc, _ in gm))
                stream.append((ins.index, key, nbytes * len(gm), gm[0][1]))
                if gm[0][1]:
                    self.gm_read += nbytes * len(gm)
                else:
                    self.gm_write += nbytes * len(gm)
        self.core_i.append(self.core_of[prog.id])
        self.pipe_i.append(int(ins.pipe))
        self.name_i.append(self.names.setdefault(ins.name, len(self.names)))
        self.loc_i.append(self.locs.setdefault(ins.loc, len(self.locs)))
        if k in (2, 3):
            self.waits[ins.index] = _wait_text(ins)

    def finish(self) -> Encoded:
        n = self.n
        occ, lat = np.frombuffer(self.occ, np.float64).copy(), np.frombuffer(self.lat, np.float64).copy()
        gmb, l2b = np.frombuffer(self.gmb, np.float64).copy(), np.frombuffer(self.l2b, np.float64).copy()
        for i, hit in l2_hits(self.streams, self.chip.l2_bytes).items():   # re-reads served by L2
            gmb[i] -= hit
            l2b[i] += hit
            lat[i] += self.chip.l2_latency_cycles - self.chip.gm_latency_cycles
        q_ptr = np.zeros(len(self.queues) + 1, np.int64)
        for s, q in enumerate(self.queues):
            q_ptr[s + 1] = q_ptr[s] + len(q)
        q_idx = np.concatenate([np.frombuffer(q, np.int64) for q in self.queues]) if n else np.zeros(0, np.int64)

        def arr(a, dt):
            return np.frombuffer(a, dt).copy() if len(a) else np.zeros(0, dt)

        arrays = dict(pipe_of=arr(self.pipe_of, np.int64), q_ptr=q_ptr, q_idx=q_idx,
                      dep_ptr=arr(self.dep_ptr, np.int64), dep_idx=arr(self.dep_idx, np.int64),
                      uf_rid=arr(self.uf_rid, np.int64), rg_ptr=arr(self.rg_ptr, np.int64),
                      rg_blk=arr(self.rg_blk, np.int64),
                      uf_wait=arr(self.uf_wait, np.int8), uf_set=arr(self.uf_set, np.int8),
                      kind=arr(self.kind, np.int8), fkey=arr(self.fkey, np.int64), occ=occ, lat=lat,
                      gm_bytes=gmb, l2_bytes=l2b)
        return Encoded(arrays, self.blocks.total, len(self.fkeys), self.participants, self.slots, self.cores,
                       list(self.names), [str(x) for x in self.locs], arr(self.core_i, np.int32),
                       arr(self.pipe_i, np.int8), arr(self.name_i, np.int32), arr(self.loc_i, np.int32),
                       self.waits, self.region_names, self.gm_read, self.gm_write, self.flops, self.cube_dtype)


def _wait_text(ins: Instr) -> str:
    """The flag condition of a wait_flag or sync_all, as text for a deadlock message."""
    if ins.op is Op.WAIT_FLAG:
        return f"event {flag_name(ins.attrs['key'])}: never set by a matching pl.set_flag"
    return "pl.sync_all: {arrived} of {participants} cores arrived"
