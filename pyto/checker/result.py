"""What checking one kernel found: the verdict, the simulated time, and each buffer's address map."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional

#: verdict kinds: the kernel passed; a check failed (a PytoError from the run); its inputs could not be made
#: (a flag is missing: usage); pyto itself failed (an exception that is not a PytoError: a bug to report)
OK, FAILED, NEEDS_INPUT, INTERNAL = "ok", "failed", "needs-input", "internal-error"

#: each buffer's name in PyPTO-Pro's MemorySpace
PRO_NAMES = {"L1": "Mat", "L0A": "Left", "L0B": "Right", "L0C": "Acc", "BT": "Bias", "FB": "Scaling", "UB": "Vec",
             "L0A_MX": "ScaleLeft", "L0B_MX": "ScaleRight", "L0B_SP": "SparseIndex"}


@dataclass
class TileRange:
    """One placed range of an address map: [lo, hi) bytes, what holds it, the kernel line that placed it;
    `refused`: the placement that failed the check (a CapacityError's range: not in the map, shown where it was
    asked for)."""

    lo: int
    hi: int
    what: str
    line: str
    refused: bool = False


@dataclass
class BufferMap:
    """A buffer's address map: the tiles of its fullest block (`block`), bytes in use there (the union of the
    ranges: overlapping tiles count once), the capacity, how many blocks had placed tiles in it when tracing
    ended (`blocks_traced`, of the launch's `blocks`), and whether they all placed the same ranges."""

    buffer: str
    capacity: int
    in_use: int
    block: int
    tiles: list = field(default_factory=list)
    same_in_all_blocks: bool = True
    blocks_traced: int = 1
    blocks: int = 1

    @property
    def use(self) -> float:
        return self.in_use / self.capacity if self.capacity else 0.0

    def where(self) -> str:
        """Which block's map this is, in words."""
        if self.blocks_traced == self.blocks and self.same_in_all_blocks:
            return "the same in every block" if self.blocks > 1 else "block 0"
        if self.blocks_traced == 1:
            return f"block {self.block}, the only one traced of {self.blocks}"
        return f"block {self.block}, the fullest of {self.blocks_traced} traced"


@dataclass
class CheckResult:
    """The check of one kernel (pyto.check, `pyto check`). `verdict` is "ok" or the error's class name
    (RaceError, DeadlockError, CapacityError, ...; InputError when its inputs could not be made; the exception's
    type when pyto itself failed); `kind` one of ok / failed / needs-input / internal-error; `message` the error's
    text. Time fields are None when the run did not finish; `buffers` are the address maps as far as tracing got
    (at the failure, for one that fails while placing tiles)."""

    kernel: str
    file: Optional[str]
    line: int
    verdict: str
    kind: str
    message: str = ""
    mode: str = "full"
    chip: str = ""
    block_dim: int = 1
    inputs: dict = field(default_factory=dict)
    cycles: Optional[float] = None
    time_us: Optional[float] = None
    instructions: Optional[int] = None
    bottleneck: Optional[str] = None
    bound: Optional[str] = None
    pipe_cycles: dict = field(default_factory=dict)
    buffers: list = field(default_factory=list)
    standins: list = field(default_factory=list)
    printed: list = field(default_factory=list)
    trace: Optional[str] = None
    plots: list = field(default_factory=list)
    seconds: float = 0.0
    report: object = field(default=None, repr=False, compare=False)    # the Report, when the run finished

    @property
    def ok(self) -> bool:
        return self.kind == OK

    def to_dict(self) -> dict:
        """The JSON form (README, "pyto check --json")."""
        d = asdict(self)
        d.pop("report")
        for b, buf in zip(d["buffers"], self.buffers):
            b["use"] = round(buf.use, 4)
        return d

    def summary(self) -> str:
        from .render import render
        return render(self)

    def __str__(self) -> str:
        return self.summary()
