"""Cross-core pairing between a block's AIC and its AIVs (the vector issue builds this out)."""
from __future__ import annotations


def pair(programs: list) -> None:
    """Add dependencies for data the AIC moves into an AIV's UB (and back). Cube-only launches: nothing."""
    return None
