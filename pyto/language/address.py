"""Where tiles sit: one address map per on-chip buffer of a block (docs/design.md §4.5, "Addresses").

A tile's bytes are [addr, addr + size) in its buffer. `pl.make_tile` says where; `pl.alloc` (pyto's extension)
takes the first free aligned range. Ranges may overlap (PyPTO-Pro reuses addresses): the map charges the union
of the ranges against the capacity, and marks stores whose bytes overlap another's as `shared`, so the checked
pass follows their accesses byte by byte (emulator/check/overlap.py: ClobberedReadError, races on bytes). PyPTO-Pro's
own front end checks alignment only (block_ops.py `_MEMORY_ALIGNMENT`); capacity and overlap are pyto's.

UB is one map per block for both AIVs (each has its own UB of the same size and the kernel places tiles alike on
both): a tile placed only under `pl.get_subblock_idx() == 0` is charged on both, which can only overstate use.
"""
from __future__ import annotations

from bisect import insort
from typing import Optional

from ..errors import AlignmentError, CapacityError
from ..ir import Buf, Loc, TileStore


class Reservation:
    """One placed range: what holds it (a tile's description) and the kernel line that placed it."""

    __slots__ = ("lo", "hi", "what", "loc")

    def __init__(self, lo: int, hi: int, what: str, loc: Loc):
        self.lo, self.hi, self.what, self.loc = lo, hi, what, loc

    def __lt__(self, other: "Reservation") -> bool:
        return (self.lo, self.hi) < (other.lo, other.hi)


class AddressSpace:
    """The address map of one buffer of one block: its reservations, in address order, and its stores."""

    def __init__(self, buf: Buf, capacity: int, align: int, chip_name: str):
        self.buf, self.capacity, self.align, self.chip_name = buf, capacity, align, chip_name
        self.reserved: list = []      # Reservations, sorted by (lo, hi)
        self.stores: list = []        # TileStores placed here (for overlap)
        self._seen: set = set()       # (lo, hi) already reserved (a make_tile in a loop reserves once)

    # ---- placement -------------------------------------------------------------------------------
    def check_align(self, addr: int, what: str, loc: Loc) -> None:
        if addr % self.align:
            raise AlignmentError(f"{loc}: {what} at address {addr:#x} in {self.buf.name}: {self.buf.name} tiles start "
                                 f"on {self.align}-byte boundaries (PyPTO-Pro's make_tile rule); the nearest are "
                                 f"{addr // self.align * self.align:#x} and {-(-addr // self.align) * self.align:#x}")

    def reserve(self, addr: int, size: int, what: str, loc: Loc) -> None:
        """Reserve [addr, addr + size): CapacityError when it runs past the buffer's end."""
        if addr < 0:
            raise CapacityError(f"{loc}: {what} at a negative address {addr} in {self.buf.name}", buffer=self.buf.name,
                                asked=size, capacity=self.capacity, loc=str(loc))
        if addr + size > self.capacity:
            raise CapacityError(
                f"{loc}: {self.buf.name} overflow on {self.chip_name}: {what} occupies [{addr:#x}, {addr + size:#x}) "
                f"({size:,} B at {addr:#x}), past the end of {self.buf.name}'s {self.capacity:,} B "
                f"({self.capacity // 1024} KB; last address {self.capacity - 1:#x}) by {addr + size - self.capacity:,} "
                f"B; place it lower or make it smaller", buffer=self.buf.name, asked=size, in_use=self.in_use(),
                capacity=self.capacity, loc=str(loc), at=addr, what=what)
        if (addr, addr + size) not in self._seen:
            self._seen.add((addr, addr + size))
            insort(self.reserved, Reservation(addr, addr + size, what, loc))

    def first_fit(self, size: int, what: str, loc: Loc) -> int:
        """The lowest aligned address where `size` bytes overlap no reservation (pl.alloc); reserved here."""
        at = 0
        for r in self.reserved:
            if r.lo - at >= size:
                break
            at = max(at, -(-r.hi // self.align) * self.align)
        if at + size > self.capacity:
            used = self.in_use()
            held = "; ".join(f"{r.what} {r.hi - r.lo} B at {r.lo:#x} (line {r.loc.line})" for r in self.reserved)
            raise CapacityError(
                f"{loc}: {self.buf.name} overflow on {self.chip_name}: {what} asks {size} B, {used} B already in use, "
                f"capacity {self.capacity} B (short by {at + size - self.capacity} B)"
                + (f"; in use: {held}" if held else "") + "; shrink a tile, or allocate fewer buffers of it",
                buffer=self.buf.name, asked=size, in_use=used, capacity=self.capacity, loc=str(loc))
        self.reserve(at, size, what, loc)
        return at

    def in_use(self) -> int:
        """Bytes of the union of the reservations (overlapping tiles charge their shared bytes once)."""
        total, end = 0, 0
        for r in self.reserved:
            if r.hi > end:
                total += r.hi - max(r.lo, end)
                end = r.hi
        return total

    # ---- stores ----------------------------------------------------------------------------------
    def add_store(self, store: TileStore, twins: Optional[list] = None) -> bool:
        """Register a new store (and its twins: the other AIV's store of a UB tile); any other store whose bytes it
        overlaps becomes `shared`, and so does this one. Returns whether it overlaps any."""
        lo, hi = store.addr, store.addr + store.nbytes
        group = [store] + (twins or [])
        for other in self.stores:
            if other[0].addr < hi and lo < other[0].addr + other[0].nbytes:
                for s in (*other, *group):
                    s.shared = True
        self.stores.append(group)
        return store.shared

    def table(self) -> list:
        """(lo, hi, what, line) of each reservation, in address order (for reports)."""
        return [(r.lo, r.hi, r.what, r.loc.line) for r in self.reserved]
