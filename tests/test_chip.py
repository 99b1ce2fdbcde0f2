"""Chip tables: every bundled chip loads, the seed's numbers are there, bad tables fail clearly."""
import math
import re

import pytest

import pyto
from pyto.cli import main


def test_bundled_chips_listed_and_load():
    names = pyto.list_chips()
    assert {"ascend950pr", "atlas-a2", "atlas-a3"} <= set(names)
    for n in names:
        assert pyto.load_chip(n).name == n


def test_950_carries_seed000_table():
    c = pyto.load_chip("ascend950pr")
    assert c.aic == 32 and c.aiv == 64
    assert c.buffers["L1"] == 512 * 1024 and c.buffers["L0A"] == c.buffers["L0B"] == 64 * 1024
    assert c.buffers["L0C"] == 256 * 1024
    assert c.l2_bytes == 128 * 1024 * 1024 and c.l2_bandwidth_gbs == 5200 and c.gm_bandwidth_gbs == 1600
    assert c.R == 607.5 and c.min_tile_bytes == 16 * 1024 and c.min_datamount_per_core == 480 * 1024
    assert c.min_core_num == 26 and c.k_thr_bytes == 32 and c.dvalue_bytes == 128
    assert c.buffers["UB"] == 248 * 1024 and c.buffers["BT"] == 4096 and c.buffers["FB"] == 4096
    assert (c.formats["L0A"], c.formats["L0B"], c.formats["L0C"]) == ("NZ", "ZN", "NZ")
    assert c.has_path("L0C", "UB") and c.has_path("UB", "L1")


def test_peak_is_consistent_with_R():
    """peak = R x GM bandwidth / 2B, with one 16x16x16 fp16 MMAD per cycle per core."""
    for name in ("ascend950pr", "atlas-a2"):
        c = pyto.load_chip(name)
        assert math.isclose(c.peak_flops("fp16"), c.R * c.gm_bandwidth_gbs * 1e9 / 2, rel_tol=1e-3)
        assert math.isclose(c.peak_flops("fp16"), c.aic * 2 * 16 * 16 * 16 * c.clock_hz, rel_tol=1e-9)
        # the balance point per dtype: peak FLOP/s over GM elements/s (the table's R for fp16 / bf16)
        for dt, isz in (("fp16", 2), ("bf16", 2), ("fp32", 4), ("int8", 1)):
            assert math.isclose(c.ridge(dt), c.peak_flops(dt) / (c.gm_bandwidth_gbs * 1e9 / isz), rel_tol=1e-3)
        assert c.ridge("fp16") == c.R and math.isclose(c.ridge("fp32"), c.R / 2)


def test_a2_public_figures():
    c = pyto.load_chip("atlas-a2")
    assert c.aic == 24 and c.buffers["L0C"] == 128 * 1024 and c.buffers["UB"] == 192 * 1024
    assert c.buffers["BT"] == 1024 and c.buffers["FB"] == 2048 and c.formats["L0A"] == "ZZ"
    assert c.path("L1", "L0A").bytes_per_cycle == 256 and c.path("L1", "L0B").bytes_per_cycle == 128
    assert not c.has_path("L0C", "UB") and not c.has_path("UB", "L1")
    with pytest.raises(pyto.UnsupportedError, match="L0C->UB"):
        c.path("L0C", "UB")


def test_chip_is_frozen():
    c = pyto.load_chip("ascend950pr")
    with pytest.raises(Exception):
        c.aic = 4
    with pytest.raises(TypeError):
        c.buffers["L1"] = 1


def _table_without(tmp_path, drop_line: str, replace: str = ""):
    src = pyto.load_chip("ascend950pr").source
    text = open(src).read()
    assert drop_line in text
    p = tmp_path / "broken.toml"
    p.write_text(text.replace(drop_line, replace, 1))
    return p


def test_missing_key_names_file_and_key(tmp_path):
    p = _table_without(tmp_path, "L0C = 262144")
    with pytest.raises(pyto.ChipError, match=r"broken\.toml.*buffers\.L0C"):
        pyto.load_chip(p)


def test_ill_typed_key_names_file_and_key(tmp_path):
    p = _table_without(tmp_path, "aic = 32", 'aic = "many"')
    with pytest.raises(pyto.ChipError, match=r"broken\.toml.*cores\.aic.*int"):
        pyto.load_chip(p)


def test_unknown_chip_lists_known():
    with pytest.raises(pyto.ChipError, match="ascend950pr"):
        pyto.load_chip("no-such-chip")


def test_cli_chips_table(capsys):
    assert main(["chips"]) == 0
    out = capsys.readouterr().out
    assert "ascend950pr" in out and "atlas-a2" in out and "256KB" in out and "128KB" in out


def test_what_if_zeros_are_accepted(tmp_path):
    """A latency or an overhead may be 0 (a what-if without it); capacities and rates may not."""
    p = _table_without(tmp_path, "dma_setup_cycles = 16", "dma_setup_cycles = 0")
    assert pyto.load_chip(p).dma_setup_cycles == 0
    with pytest.raises(pyto.ChipError, match="positive"):
        pyto.load_chip(_table_without(tmp_path, "aic = 32", "aic = 0"))


def test_an_edited_table_is_read_again(tmp_path):
    """The cache is per file and its modification: an edit is seen by the next load in the same process."""
    p = _table_without(tmp_path, "aic = 32", "aic = 32")
    assert pyto.load_chip(p).aic == 32
    text = p.read_text().replace("aic = 32", "aic = 8", 1)
    p.write_text(text + "\n")        # a different size, whatever the file system's time resolution
    assert pyto.load_chip(p).aic == 8


def test_replace_cannot_build_a_chip_the_emulator_divides_by_zero_with():
    import dataclasses
    with pytest.raises(pyto.ChipError, match="aic"):
        dataclasses.replace(pyto.load_chip("ascend950pr"), aic=0)


def test_a_table_from_before_the_write_latency_key_still_loads(tmp_path):
    """l2_write_latency_cycles came later: a table without it takes its L2 latency (one L2 latency then)."""
    src = pyto.load_chip("ascend950pr").source
    text = "\n".join(ln for ln in open(src).read().splitlines() if not ln.startswith("l2_write_latency_cycles"))
    p = tmp_path / "older.toml"
    p.write_text(text)
    c = pyto.load_chip(p)
    assert c.l2_write_latency_cycles == c.l2_latency_cycles


# ---- every key's rule (pyto/chip.py _RULES) ---------------------------------------------------------------------
@pytest.mark.parametrize("line,new,match", [
    # 2048 B blocks would give a 1 KB L0C fractal no unit_flag bit: docs/cube_phase.md §6's deadlocks would become races
    ("unit_flag_block_bytes = 512", "unit_flag_block_bytes = 2048",
     r"sync\.unit_flag_block_bytes.*divisor of the 1024-byte L0C fractal.*got 2048"),
    ("unit_flag_block_bytes = 512", "unit_flag_block_bytes = 768", r"sync\.unit_flag_block_bytes.*divisor"),
    # planning steps K by dvalue_bytes // itemsize: below fp32's 4 B that is 0, a division by zero
    ("dvalue_bytes = 128", "dvalue_bytes = 2", r"planner\.dvalue_bytes.*from 4 .*largest cube dtype.*got 2"),
    # planning walks the core counts: 10**30 would never finish
    ("aic = 32", "aic = 1000000000000000000000000000000", r"cores\.aic.*at most 4096.*got 10{30}$"),
    ("L0C = 262144", "L0C = 512", r"buffers\.L0C.*smallest tile, 16 x 16 fp32 = 1024 B"),
    ("l2_line_bytes = 512", "l2_line_bytes = 500", r"memory\.l2_line_bytes.*power of two"),
    ("gm_bytes = 137438953472", "gm_bytes = 1048576", r"memory\.gm_bytes.*at least memory\.l2_bytes = 134217728"),
    ("cross_core_flag_ids = 16", "cross_core_flag_ids = 8", r"sync\.cross_core_flag_ids.*must be 16.*ids 0\.\.15"),
    ("event_ids = 16", "event_ids = 0", r"sync\.event_ids.*positive"),
    ("min_core_ratio = 0.8", "min_core_ratio = 0", r"planner\.min_core_ratio.*positive.*at most 1"),
    ("k_split_layout_transform = true", "k_split_layout_transform = 1",
     r"cube\.k_split_layout_transform.*boolean.*got int 1"),
    ("clock_ghz = 1.8539", "clock_ghz = 1e300", r"cores\.clock_ghz.*from 1e-06 to 1e\+12"),
    ("gm_latency_cycles = 400", "gm_latency_cycles = 1" + "0" * 400, r"memory\.gm_latency_cycles.*401 characters"),
    ("clock_ghz_opsnn = 1.65", "clock_ghz_opsnn = -1", r"cores\.clock_ghz_opsnn.*recorded"),
    ('name = "ascend950pr"', 'name = ""', r"'name' must be a non-empty string"),
    ("queue_depth = 32", "queue_depth = 32\nqueue_dept = 3", r"unknown key 'sync\.queue_dept'"),
    ('[paths."GM->L1"]', '[paths."GM->L1"]\nbandwidth = 3', r"unknown key 'paths\.\"GM->L1\"\.bandwidth'"),
    ("bytes_per_cycle = 128     # assumption: per-core", "bytes_per_cycle = 0     #",
     r"paths\.\"GM->L1\"\.bytes_per_cycle.*positive"),
    ("R = 607.5", "R = 607.5\n[extra]", r"unknown key 'extra'"),
    # non-finite or negative numbers, a vector core count the emulator does not run, misspelt or misaligned
    # buffers, unmodelled formats and unknown data paths
    ("gm_bandwidth_gbs = 1600", "gm_bandwidth_gbs = nan", r"memory\.gm_bandwidth_gbs.*finite"),
    ("gm_bandwidth_gbs = 1600", "gm_bandwidth_gbs = inf", r"memory\.gm_bandwidth_gbs.*finite"),
    ("gm_latency_cycles = 400", "gm_latency_cycles = -500", r"memory\.gm_latency_cycles.*>= 0"),
    ("aiv_per_aic = 2", "aiv_per_aic = 4", r"cores\.aiv_per_aic.*two AIVs"),
    ("min_core_ratio = 0.8", "min_core_ratio = 2.0", r"planner\.min_core_ratio"),
    ("L0C = 262144", "L0C = 262144\nL0c = 1", r"unknown key 'buffers\.L0c'"),
    ("L0C = 262144", "L0C = 1000", r"buffers\.L0C.*multiple of 64"),
    ('L0C = "NZ"', 'L0C = "ND"', r"formats\.L0C.*models L0C as NZ"),
    ('[paths."L1->BT"]', '[paths."L1->Bt"]', r'paths\."L1->Bt"'),
])
def test_each_key_has_its_rule(tmp_path, line, new, match):
    """A value outside its key's rule is a ChipError naming the file, the key, what is allowed and the value."""
    with pytest.raises(pyto.ChipError, match=r"broken\.toml: key|broken\.toml: unknown") as e:
        pyto.load_chip(_table_without(tmp_path, line, new))
    assert re.search(match, str(e.value)), str(e.value)


def test_a_table_that_is_not_utf8_is_a_chip_error(tmp_path):
    src = pyto.load_chip("ascend950pr").source
    p = tmp_path / "latin1.toml"
    p.write_bytes(open(src, "rb").read().replace(b"# seed000: 512KB", b"# seed000: 512\xb5B", 1))
    with pytest.raises(pyto.ChipError, match=r"latin1\.toml is not UTF-8 text.*byte 0xb5.*line 19"):
        pyto.load_chip(p)


def test_a_replaced_chip_is_held_to_the_same_rules():
    """dataclasses.replace builds a Chip without the loader: the same rules hold, the error says it was built in
    code (the value is not the table's)."""
    import dataclasses
    c = pyto.load_chip("ascend950pr")
    assert dataclasses.replace(c, R=100.0).R == 100.0
    with pytest.raises(pyto.ChipError, match=r"chip 'ascend950pr' \(built in code from chip table .*ascend950pr\.toml\)"
                                             r": key 'sync\.unit_flag_block_bytes'.*got 2048"):
        dataclasses.replace(c, unit_flag_block_bytes=2048)
    with pytest.raises(pyto.ChipError, match=r"memory\.gm_bytes.*at least memory\.l2_bytes"):
        dataclasses.replace(c, l2_bytes=c.gm_bytes * 2)
