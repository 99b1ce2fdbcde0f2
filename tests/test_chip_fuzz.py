"""Chip table fuzz: random edits of a bundled table (a value changed to zero, a negative, a huge or fractional
number, another type; a key or table header deleted; an unknown key added; bytes that are not UTF-8) either load
or fail with a ChipError naming the file, never another exception; and a table that loads keeps docs/cube_phase.md §6's three
phase-misuse verdicts (case 1 DeadlockError, case 2 RaceError, case 3 DeadlockError).

Three layers: the rules' legal extremes (each must load and keep the verdicts), every single edit of a table's
values to a number like it (a sweep: a rule too loose for one key shows here, as unit_flag_block_bytes = 2048
did), and hypothesis' random combinations of edits of every kind."""
import itertools
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import pyto
import pyto.language as pl

TABLES = {name: open(pyto.load_chip(name).source, encoding="utf-8").read() for name in pyto.list_chips()}
_ASSIGN = re.compile(r'^(\s*[A-Za-z0-9_]+\s*=\s*)("[^"]*"|[^\s#]+)(.*)$')   # key = value  # comment
_HEADER = re.compile(r"^\s*\[")
_SERIAL = itertools.count()          # a fresh file per example: the loader caches per (file, mtime, size)

# ---- docs/cube_phase.md §6's three phase misuses, on the smallest tiles (16 x 16: they fit the smallest legal buffers) ------
N = 16


def _operands(a, b):
    """a and b through one L1 tile into L0A and L0B; the L0C accumulator."""
    l1 = pl.alloc(pl.L1, [N, N], pl.DT_FP16)
    l0a = pl.alloc(pl.L0A, [N, N], pl.DT_FP16)
    l0b = pl.alloc(pl.L0B, [N, N], pl.DT_FP16)
    acc = pl.alloc(pl.L0C, [N, N], pl.DT_FP32)
    pl.load(l1, a)
    pl.move(l0a, l1)
    pl.load(l1, b)
    pl.move(l0b, l1)
    return acc, l0a, l0b


@pl.kernel
def partial_then_final_store(a, b, out):
    """Case 1: the matmul never sets unit_flag (AccPhase.Partial): the Final store waits for ever."""
    with pl.section_cube():
        acc, l0a, l0b = _operands(a, b)
        pl.matmul(acc, l0a, l0b, phase=pl.AccPhase.Partial)
        pl.store(out, acc, [0, 0], phase=pl.STPhase.Final)


@pl.kernel
def final_then_plain_store(a, b, out):
    """Case 2: a phased matmul is not ordered before a store without a phase (no auto-sync across unit_flag)."""
    with pl.section_cube():
        acc, l0a, l0b = _operands(a, b)
        pl.matmul(acc, l0a, l0b, phase=pl.AccPhase.Final)
        pl.store(out, acc, [0, 0])


@pl.kernel
def final_then_partial_store_twice(a, b, out):
    """Case 3: STPhase.Partial leaves unit_flag set: the second AccPhase.Final matmul waits for ever."""
    with pl.section_cube():
        acc, l0a, l0b = _operands(a, b)
        for _ in pl.range(2):
            pl.matmul(acc, l0a, l0b, phase=pl.AccPhase.Final)
            pl.store(out, acc, [0, 0], phase=pl.STPhase.Partial)


VERDICTS = ((partial_then_final_store, pyto.DeadlockError), (final_then_plain_store, pyto.RaceError),
            (final_then_partial_store_twice, pyto.DeadlockError))


def _check_verdicts(chip) -> None:
    for kernel, error in VERDICTS:
        a, b = np.ones((N, N), np.float16), np.ones((N, N), np.float16)
        out = np.zeros((N, N), np.float32)
        with pytest.raises(error):
            pyto.run(kernel, a, b, out, chip=chip)
        assert not out.any()          # a failed run leaves its outputs alone


@pytest.mark.parametrize("name", sorted(TABLES))
def test_bundled_tables_give_the_three_verdicts(name):
    _check_verdicts(pyto.load_chip(name))


def _edit(text: str, key: str, new) -> str:
    """`text` with the first `key = ...` line's value replaced by `new` (None: the line deleted)."""
    pat = re.compile(rf"(?m)^({re.escape(key)}\s*=\s*)(\"[^\"]*\"|[^\s#]+)(.*)\n")
    assert pat.search(text), key
    return pat.sub("" if new is None else rf"\g<1>{new}\g<3>\n", text, count=1)


# the extremes of the rules, every one legal: each still gives the three verdicts
_SMALLEST = [(f"{b}", max(pyto.chip.BUFFER_ALIGN[b], pyto.chip.SMALLEST_TILE[b][0])) for b in pyto.chip.BUFFERS]
_EXTREMES = [
    *_SMALLEST, ("unit_flag_block_bytes", 1), ("unit_flag_block_bytes", 256), ("unit_flag_block_bytes", 1024),
    ("aic", 1), ("aic", 4096), ("dvalue_bytes", 4), ("event_ids", 1), ("cross_core_flag_max", 1),
    ("cross_core_flag_max", 4096), ("queue_depth", 1), ("merge_b0", 1), ("min_core_ratio", 1e-6),
    ("min_core_ratio", 1), ("clock_ghz", 1e-6), ("clock_ghz", 1e12), ("gm_bandwidth_gbs", 1e-6),
    ("l2_bandwidth_gbs", 1e12), ("bytes_per_cycle", 1e-6), ("bytes_per_cycle", 1e12), ("latency", 0),
    ("latency", 1e12), ("gm_latency_cycles", 1e12), ("l2_latency_cycles", 0), ("flag_latency_cycles", 0),
    ("flag_latency_cycles", 1e12), ("mmad_head_cycles", 0), ("scalar_cycles", 1e-6), ("scalar_cycles", 1e12),
    ("fp16_cycles_per_step", 1e-6), ("fp16_cycles_per_step", 1e12), ("l2_bytes", 512), ("l2_line_bytes", 1),
    ("burst_min_bytes", 1), ("burst_min_bytes", 1 << 20), ("gm_bytes", 1 << 48),
    ("cross_core_wait_blocks_core", "true"), ("cross_core_wait_blocks_core", "false"),
    ("k_split_layout_transform", "true"), ("k_split_layout_transform", "false"), ("dn2nz", "true"),
    ("dn2nz", None), ("l2_write_latency_cycles", None), ("clock_ghz_opsnn", None),
]


@pytest.mark.parametrize("name", ["ascend950pr", "atlas-a2"])
def test_the_rules_extremes_load_and_keep_the_verdicts(tmp_path, name):
    for i, (key, new) in enumerate(_EXTREMES):
        path = tmp_path / f"extreme-{i}.toml"
        path.write_text(_edit(TABLES[name], key, new))
        _check_verdicts(pyto.load_chip(path))


# ---- the edits -------------------------------------------------------------------------------------------------
_ANY = ("0", "-1", "1", "2", "3", "0.5", "-0.0", "1e308", "1e-320", "inf", "-inf", "nan", "1" + "0" * 30,
        "-" + "1" * 25, "1" + "0" * 400, "1e400", '"16"', '""', '"ZZ"', '"NZ"', '"nd"', "true", "false", "[1, 2]",
        "{ x = 1 }", "1979-05-27")


def _near(value: str) -> list:
    """Numbers like a table's value (many of them legal): multiples and fractions, +-1, its negative, the same
    value as the other number type."""
    try:
        x = int(value)
    except ValueError:
        try:
            x = float(value)
        except ValueError:
            return []
    if isinstance(x, int):
        out = [2 * x, 4 * x, x // 2, x // 4, x - 1, x + 1, -x, float(x)]
    else:
        out = [2 * x, x / 2, 1.5 * x, x + 0.5, -x, 0.0]
    return [repr(v) if isinstance(v, float) else str(v) for v in out]


@st.composite
def edited_table(draw):
    """(table name, bytes to write, what was done, whether the bytes are UTF-8)."""
    name = draw(st.sampled_from(sorted(TABLES)))
    lines = TABLES[name].splitlines()
    values = [i for i, ln in enumerate(lines) if _ASSIGN.match(ln)]
    done = []
    for _ in range(draw(st.sampled_from([1, 1, 1, 1, 2, 3]))):
        kind = draw(st.sampled_from(["near", "near", "near", "near", "wild", "wild", "delete", "add"]))
        if kind in ("near", "wild"):
            i = draw(st.sampled_from(values))
            head, old, tail = _ASSIGN.match(lines[i]).groups()
            near = _near(old) if kind == "near" else []
            new = draw(st.sampled_from(near or _ANY))
            lines[i] = f"{head}{new}{tail}"
            done.append(f"{head.strip()} {old} -> {new}")
        elif kind == "delete":
            i = draw(st.sampled_from([i for i, ln in enumerate(lines) if _ASSIGN.match(ln) or _HEADER.match(ln)]))
            done.append(f"delete {lines[i].split('#')[0].strip()!r}")
            del lines[i]
            values = [i for i, ln in enumerate(lines) if _ASSIGN.match(ln)]
        else:
            i = draw(st.integers(0, len(lines)))
            key = draw(st.sampled_from(["zz_unknown = 1", "L0c = 1", "aic_count = 32", "bytes_per_cycle_max = 1"]))
            lines.insert(i, key)
            done.append(f"add {key!r} at line {i + 1}")
            values = [i for i, ln in enumerate(lines) if _ASSIGN.match(ln)]
    data = ("\n".join(lines) + "\n").encode("utf-8")
    utf8 = True
    if draw(st.integers(0, 9)) == 0:
        at = draw(st.integers(0, len(data)))
        bad = draw(st.sampled_from([b"\xff", b"\xfe\xff", b"\xc3\x28", b"\x80", b"\xed\xa0\x80", b"\xe2\x82"]))
        data = data[:at] + bad + data[at:]
        done.append(f"insert {bad!r} at byte {at}")
        utf8 = False
    return name, data, done, utf8


@pytest.mark.parametrize("name", ["ascend950pr", "atlas-a2"])
def test_every_single_near_edit_loads_or_is_a_chip_error_and_keeps_the_phase_verdicts(tmp_path, name):
    """Each value of the table, one at a time, changed to each number like it (_near): every edit the rules let
    through still gives the three verdicts (e.g. unit_flag_block_bytes 256 and 1024 do, 2048 is refused)."""
    lines = TABLES[name].splitlines()
    loaded = 0
    for i, line in enumerate(lines):
        m = _ASSIGN.match(line)
        if not m:
            continue
        head, old, tail = m.groups()
        for j, new in enumerate(_near(old)):
            path = tmp_path / f"near-{i}-{j}.toml"
            path.write_text("\n".join(lines[:i] + [f"{head}{new}{tail}"] + lines[i + 1:]) + "\n")
            try:
                chip = pyto.load_chip(path)
            except pyto.ChipError as e:
                assert path.name in str(e), str(e)
                continue
            loaded += 1
            try:
                _check_verdicts(chip)
            except BaseException as e:
                raise AssertionError(f"{name}: {head.strip()} {old} -> {new} loads, but: {e!r}") from e
    assert loaded > 100


@settings(derandomize=True, deadline=None, max_examples=500,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(edited_table())
def test_an_edited_table_loads_or_is_a_chip_error_and_keeps_the_phase_verdicts(tmp_path_factory, edit):
    name, data, done, utf8 = edit
    note(f"{name}: {'; '.join(done)}")
    path = tmp_path_factory.getbasetemp() / f"fuzz-{next(_SERIAL)}-{name}.toml"
    path.write_bytes(data)
    try:
        chip = pyto.load_chip(path)
    except pyto.ChipError as e:
        assert path.name in str(e), str(e)          # the file, named
        assert utf8 or "not UTF-8" in str(e), str(e)
        return
    assert utf8, "a table that is not UTF-8 loaded"
    _check_verdicts(chip)
