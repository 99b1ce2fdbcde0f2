"""Chip tables as TOML data files. This package holds data only; `pyto.chip` parses it."""
from __future__ import annotations

from pathlib import Path

CHIP_DIR = Path(__file__).resolve().parent


def chip_names() -> list[str]:
    """Names of the bundled chip tables, sorted."""
    return sorted(p.stem for p in CHIP_DIR.glob("*.toml"))


def chip_path(name: str) -> Path:
    """Path of the bundled table called ``name`` (it may not exist)."""
    return CHIP_DIR / f"{name}.toml"
