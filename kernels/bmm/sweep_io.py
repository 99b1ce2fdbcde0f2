"""A sweep's rows on disk: Parquet (pyarrow, the optional extra pyto[sweep]) or CSV (stdlib), by the file's suffix.

Both hold sweep.COLUMNS with their types (text, int, float, bool; an empty number is null in Parquet, an empty
cell in CSV), so a file read back gives the rows written. Writes go to a temporary file beside the target, then
os.replace: a sweep killed mid-write leaves the previous file whole.
"""
from __future__ import annotations

import csv
import os
from pathlib import Path

from pyto.errors import InputError, UnsupportedError

from .sweep import COLUMNS, NAMES

FORMATS = (".parquet", ".csv")
INSTALL = "pip install 'pyto[sweep]'"


def _format(path: "str | Path") -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise InputError(f"sweep output {path}: the suffix must be .parquet or .csv, got {suffix or 'none'!r}")
    return suffix


def check_format(path: "str | Path") -> None:
    """Before a sweep runs: InputError for a suffix that is not .parquet or .csv, UnsupportedError for .parquet
    without pyarrow (not after the cases have run)."""
    if _format(path) == ".parquet":
        _pyarrow()


def _pyarrow():
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:
        raise UnsupportedError(f"a .parquet sweep file needs pyarrow, which is not installed: {INSTALL} (or write "
                               f"a .csv)") from e
    return pa, pq


def _schema(pa):
    kinds = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}
    return pa.schema([(n, kinds[t]) for n, t in COLUMNS])


def write_rows(path: "str | Path", rows: list) -> None:
    """Write `rows` (dicts with sweep.NAMES) to `path` atomically, in the format its suffix names."""
    path = Path(path)
    fmt = _format(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        if fmt == ".parquet":
            pa, pq = _pyarrow()
            table = pa.Table.from_pylist([{n: r.get(n) for n in NAMES} for r in rows], schema=_schema(pa))
            pq.write_table(table, tmp)
        else:
            with open(tmp, "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(NAMES)
                for r in rows:
                    w.writerow(["" if r.get(n) is None else r.get(n) for n in NAMES])
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def read_rows(path: "str | Path") -> list[dict]:
    """The rows of a sweep file (typed as sweep.COLUMNS); InputError when it is not one (a column missing)."""
    path = Path(path)
    fmt = _format(path)
    if fmt == ".parquet":
        pa, pq = _pyarrow()
        try:
            table = pq.read_table(path)
        except (OSError, pa.ArrowException) as e:
            raise InputError(f"sweep file {path}: not a readable Parquet file ({e})") from None
        _check_columns(path, table.column_names)
        return [{n: r[n] for n in NAMES} for r in table.to_pylist()]
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            _check_columns(path, reader.fieldnames or [])
            return [_typed(r, path, i) for i, r in enumerate(reader, start=2)]
    except OSError as e:
        raise InputError(f"sweep file {path}: cannot read it ({e.strerror or e})") from None


def _check_columns(path: Path, names) -> None:
    missing = [n for n in NAMES if n not in names]
    if missing:
        raise InputError(f"sweep file {path}: not a pyto sweep output of this version: column(s) "
                         f"{', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''} missing")


def _typed(raw: dict, path: Path, line: int) -> dict:
    out = {}
    for n, t in COLUMNS:
        v = raw.get(n) or ""
        try:
            if t is str:
                out[n] = v
            elif t is bool:
                if v not in ("True", "False"):
                    raise ValueError(f"{v!r} is not True or False")
                out[n] = v == "True"
            else:
                out[n] = t(v) if v != "" else None
        except ValueError as e:
            raise InputError(f"sweep file {path}: line {line}, column {n}: {e}") from None
    return out
