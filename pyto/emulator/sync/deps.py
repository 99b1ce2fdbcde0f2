"""The sync stage's record: per instruction, the instructions whose completion it waits for.

Auto-sync, mutex tokens and cross-core pairing add to one Deps per block; the encoder reads it. The trace
is not written: an instruction's own `after` (what the tracer recorded, a pl.Scalar operand's getval) comes
first, then what the sync stage found, in the order it found them.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from ...ir import Instr


class Deps:
    """Dependencies by instruction identity (the block's instructions outlive it: it is read while they are)."""

    __slots__ = ("_of",)

    def __init__(self):
        self._of: dict = {}       # id(instr) -> list of instrs

    def add(self, ins: Instr, more: Iterable[Instr]) -> None:
        """Append `more` to what `ins` waits for."""
        more = list(more)
        if not more:
            return
        got = self._of.get(id(ins))
        if got is None:
            self._of[id(ins)] = [*ins.after, *more] if ins.after else more
        else:
            got.extend(more)

    def of(self, ins: Instr) -> Sequence[Instr]:
        """What `ins` waits for: its traced `after`, then the sync stage's additions."""
        got = self._of.get(id(ins))
        return ins.after if got is None else got

    def dedup(self, ins: Instr) -> None:
        """Keep each of `ins`'s dependencies once, and never itself (a move spliced into two programs' orders)."""
        got = self.of(ins)
        if len(got) > 1:
            self._of[id(ins)] = list({id(d): d for d in got if d is not ins}.values())

    def get_map(self) -> dict:
        """id(instr) -> its dependencies, for instructions the sync stage gave any (the encoder's lookup); an id not in
        it has its own `after` (what `of` returns)."""
        return self._of
