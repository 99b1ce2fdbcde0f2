"""Cross-core pairing inside a block: data the AIC moves into an AIV's UB (L0C->UB) and data an AIV
moves into the AIC's L1 (UB->L1).

Each role's trace keeps the other roles' ops as markers at the place its own program meets them.
The n-th move into a tile in the mover's program pairs with the n-th marker of that move in the
receiver's program (issue 4: "the n-th move into a UB tile pairs with the vector code that follows
it in that order"). Auto-sync then runs on each program with the real moves spliced in at their
markers, so the receiver waits for the move (RAW) and the next move waits for the receiver to be
done with the tile (WAR: the buffer's release back). These edges are part of happens-before.
"""
from __future__ import annotations

from ..ir import Op, Role
from . import autosync

_CROSS = {("L0C", "UB"), ("UB", "L1")}


def cross_key(ins):
    """(path, destination allocation key) of a cross-core move, None for any other instruction."""
    if ins.op is Op.MOVE and ins.attrs.get("path") in _CROSS:
        return ins.attrs["path"], ins.dsts[0].obj.key
    return None


def _spliced(prog, real: dict) -> list:
    """The program's own instructions with the paired real cross-core moves at their markers."""
    count: dict = {}
    extra: dict = {}
    for pos, marker in prog.markers:
        key = cross_key(marker)
        if key is None:
            continue
        n = count.get(key, 0)
        count[key] = n + 1
        for ins in real.get(key, {}).get(n, ()):
            extra.setdefault(pos, []).append(ins)
    if not extra:
        return prog.instrs
    order = []
    for i, ins in enumerate(prog.instrs):
        order.extend(extra.get(i, ()))
        order.append(ins)
    order.extend(extra.get(len(prog.instrs), ()))
    return order


def insert_all(programs: list, auto_sync: bool) -> None:
    """Auto-sync every program of the launch, with cross-core moves paired inside each block."""
    blocks: dict = {}
    for prog in programs:
        blocks.setdefault(prog.block, []).append(prog)
    for progs in blocks.values():
        real: dict = {}
        for prog in progs:
            seen: dict = {}
            for ins in prog.instrs:
                key = cross_key(ins)
                if key is not None:
                    n = seen.get(key, 0)
                    seen[key] = n + 1
                    real.setdefault(key, {}).setdefault(n, []).append(ins)
        for prog in sorted(progs, key=lambda p: p.role is not Role.AIC):
            order = _spliced(prog, real) if auto_sync else prog.instrs
            autosync.insert(order, prog.id, data=auto_sync)
    for prog in programs:
        for ins in prog.instrs:
            if len(ins.deps) > 1:
                ins.deps = list({id(d): d for d in ins.deps if d is not ins}.values())
