"""Commands that kernels adds to `pyto` (entry point group ``pyto.commands``)."""
from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    """Add the kernels' subcommands to the `pyto` parser."""
