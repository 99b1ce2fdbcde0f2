"""Timing model: per-instruction costs from the chip table, overlap, L2, calibration, roofline."""
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pyto
import pyto.language as pl
from pyto_kernels.examples.matmul_pingpong import matmul_pingpong
from pyto.emulator.encode.timing import COST_KEYS, COSTS
from pyto.ir import Op

CHIP = pyto.load_chip("ascend950pr")


def test_cost_table_covers_every_op():
    assert set(COSTS) == set(Op) == set(COST_KEYS)


class _Reads(dict):
    """An attrs dict that records the names read from it."""

    def __init__(self, *a):
        super().__init__(*a)
        self.read = set()

    def __getitem__(self, k):
        self.read.add(k)
        return super().__getitem__(k)

    def get(self, k, default=None):
        self.read.add(k)
        return super().get(k, default)


def test_each_cost_reads_only_the_attributes_its_memo_key_holds():
    """encode.py memoises costs on COST_KEYS: a cost function reading an attribute its key leaves out would give
    two instructions that differ there one cost. Checked on every op the kernels below trace (cube, vector,
    cross-core moves, flags, barriers, sync_all)."""
    from pyto.emulator.run import _gm_tensors, trace_blocks
    from pyto_kernels.examples.flash_attention import flash_attention
    h = np.float16
    cases = [(matmul_pingpong, (np.ones((40, 72), h), np.ones((72, 48), h), np.ones((40, 48), h)),
              dict(TM=32, TN=32, TK=32), 1),
             (flash_attention, (np.ones((32, 64), h), np.ones((64, 64), h), np.ones((64, 64), h),
                                np.ones((32, 64), h)), dict(M=32, N=64, D=64, BN=32), 1),
             (ub_round_trip, (np.ones((16, 64), np.float32), np.ones((16, 64), np.float32)), {}, 2),   # two AIVs
             (flag_after_load, (np.ones((32, 32), h), np.ones((32, 32), h)), dict(BARRIER=True), 1)]
    seen = set()
    for kernel, arrays, params, blocks in cases:
        tensors = _gm_tensors(kernel, arrays)
        for progs in trace_blocks(kernel, tensors, params, CHIP, blocks):
            for ins in (i for p in progs for i in p.instrs):
                ins.attrs = by_cost = _Reads(ins.attrs)
                COSTS[ins.op](CHIP, ins)
                by_key = _Reads(ins.attrs)
                COST_KEYS[ins.op](by_key)
                assert by_cost.read <= by_key.read, (ins, by_cost.read - by_key.read)
                seen.add(ins.op)
    assert {Op.LOAD, Op.STORE, Op.MOVE, Op.MMAD, Op.VBINARY, Op.SET_FLAG, Op.WAIT_FLAG, Op.BARRIER,
            Op.SYNC_ALL} <= seen


@pl.kernel
def one_mmad(a, b, out, *, M, N, K):
    a_l1, b_l1 = pl.alloc(pl.L1, [M, K], a.dtype), pl.alloc(pl.L1, [K, N], a.dtype)
    a0, b0 = pl.alloc(pl.L0A, [M, K], a.dtype), pl.alloc(pl.L0B, [K, N], a.dtype)
    c = pl.alloc(pl.L0C, [M, N], a.dtype.acc)
    pl.load(a_l1, a)
    pl.load(b_l1, b)
    pl.move(a0, a_l1)
    pl.move(b0, b_l1)
    pl.matmul(c, a0, b0)
    pl.store(out, c, [0, 0])


@pytest.mark.parametrize("M,N,K,dt,odt", [(128, 256, 64, np.float16, np.float16), (40, 72, 100, np.float16, np.float32),
                                          (64, 64, 64, np.int8, np.int32), (32, 48, 40, np.float32, np.float32)])
def test_one_mmad_costs_its_fractal_count(M, N, K, dt, odt):
    a, b, out = np.ones((M, K), dt), np.ones((K, N), dt), np.zeros((M, N), odt)
    rep = pyto.run(one_mmad, a, b, out, M=M, N=N, K=K)
    d = pyto.DType.int8 if dt == np.int8 else pyto.dtypes.as_dtype(dt)
    k0 = 32 // d.itemsize
    fractals = math.ceil(M / 16) * math.ceil(N / 16) * math.ceil(K / k0)
    assert rep.pipe_cycles["M"] == fractals * CHIP.cube_cycles_per_step[d.name] + CHIP.mmad_head_cycles


@pl.kernel
def one_load(a, out, *, R, C):
    t = pl.alloc(pl.L1, [R, C], a.dtype)
    pl.load(t, a)


@pytest.mark.parametrize("R,C,W", [(128, 128, 128), (64, 16, 64), (16, 64, 512), (64, 16, 16)])
def test_one_transfer_costs_what_the_formula_says(R, C, W):
    """occupancy = setup + charged bytes / bandwidth, where a region of full-width rows is one contiguous
    burst and otherwise each row is a burst charged at least 128B; done = + path and GM latency."""
    a = np.ones((R, W), np.float16)
    rep = pyto.run(one_load, a, a.copy(), R=R, C=C)
    path = CHIP.path("GM", "L1")
    charged = R * C * 2 if C == W else R * max(C * 2, CHIP.burst_min_bytes)
    occ = max(CHIP.dma_setup_cycles + charged / path.bytes_per_cycle, charged / CHIP.gm_bytes_per_cycle)
    assert rep.pipe_cycles["MTE2"] == pytest.approx(occ)
    assert rep.cycles == pytest.approx(occ + path.latency + CHIP.gm_latency_cycles)


@pl.kernel
def one_vector_op(x, out, *, OP: int):
    """A [64, 256] source in UB, then one V op on it: a row sum ([64, 1] DN out), an add of a scalar, or a cast to
    fp32."""
    t = pl.alloc(pl.UB, [64, 256], x.dtype)
    u = pl.alloc(pl.UB, [64, 256], x.dtype)
    s = pl.alloc(pl.UB, [64, 1], x.dtype, layout=pl.DN)
    w = pl.alloc(pl.UB, [64, 256], pl.DT_FP32)
    with pl.section_vector():
        if pl.get_subblock_idx() == 0:
            pl.load(t, x)
            if OP == 0:
                pl.sum(s, t, u, dim=0)
            elif OP == 1:
                pl.add(u, t, 1.0)
            else:
                pl.cast(w, t)


@pytest.mark.parametrize("OP,dt,width", [(0, np.float32, 4), (1, np.float32, 4), (1, np.float16, 2),
                                         (2, np.float16, 4)])
def test_a_vector_op_streams_its_largest_operand_at_the_v_byte_rate(OP, dt, width):
    """head + 64*256 elements x bytes / 256 B per cycle (docs/bmm_branches.md §9.3): a row sum pays for its [64, 256] source, not
    its [64, 1] result; fp16 moves 2 bytes an element; a cast pays for its wider side (found by a timing audit:
    reductions were charged their output, fp16 at fp32's rate)."""
    x = np.ones((64, 256), dt)
    rep = pyto.run(one_vector_op, x, x.copy(), OP=OP)
    assert rep.pipe_cycles["V"] == pytest.approx(CHIP.vector_head_cycles + 64 * 256 * width / CHIP.vector_bytes_per_cycle)


def test_small_bursts_lose_efficiency():
    """The same bytes in 32-byte rows of a wide tensor cost 4x the 128-byte rows (docs/bmm_branches.md §6.1.4: dValue >= 128B)."""
    wide_tensor = np.ones((256, 256), np.float16)
    narrow = pyto.run(one_load, wide_tensor, wide_tensor.copy(), R=256, C=16)
    wide = pyto.run(one_load, wide_tensor, wide_tensor.copy(), R=64, C=64)
    setup = CHIP.dma_setup_cycles
    assert narrow.pipe_cycles["MTE2"] - setup == pytest.approx(4 * (wide.pipe_cycles["MTE2"] - setup))


def test_small_tiles_lose_efficiency():
    """Per-transfer setup: a 16KB transfer reaches ~90% of the path bandwidth, a 1KB one far less."""
    path = CHIP.path("GM", "L1")
    eff = {}
    for rows in (8, 128):       # 1KB and 16KB transfers of full 64-element fp16 rows
        a = np.ones((rows, 64), np.float16)
        rep = pyto.run(one_load, a, a.copy(), R=rows, C=64)
        eff[rows] = (rows * 128 / path.bytes_per_cycle) / rep.pipe_cycles["MTE2"]
    assert eff[128] >= 0.85 and eff[8] < 0.5


def test_double_buffering_a_balanced_k_loop_is_at_least_1_5x_faster():
    a, b, out = np.ones((128, 2048), np.float16), np.ones((2048, 128), np.float16), np.zeros((128, 128), np.float16)
    one = pyto.run(matmul_pingpong, a, b, out, TM=128, TN=128, TK=64, STAGES=1)
    two = pyto.run(matmul_pingpong, a, b, out, TM=128, TN=128, TK=64, STAGES=2)
    # balanced: MTE2 and M busy within 20% of each other
    assert abs(two.pipe_cycles["MTE2"] - two.pipe_cycles["M"]) < 0.2 * two.pipe_cycles["M"]
    assert one.cycles / two.cycles >= 1.5


@pl.kernel
def load_twice(a, out):
    t = pl.alloc(pl.L1, [64, 64], a.dtype, buffers=2)
    pl.load(t.next(), a)
    pl.load(t.next(), a)


def test_second_read_of_a_gm_tile_hits_l2():
    a = np.ones((64, 64), np.float16)
    rep = pyto.run(load_twice, a, a.copy())
    assert rep.gm_read_bytes == 2 * 64 * 64 * 2
    assert rep.l2_hit_bytes == 64 * 64 * 2 and rep.l2_hit_rate == pytest.approx(0.5)
    assert rep.gm_bytes == 64 * 64 * 2          # only the first read crosses the GM channel


@pl.kernel
def ub_round_trip(x, out):
    """An AIV writes a [16, 64] tile to GM, sync_all, then every AIV reads one row of it back (an AIV-only
    kernel: launch it with blocks = the AIVs, two)."""
    t = pl.alloc(pl.UB, [16, 64], x.dtype)
    r = pl.alloc(pl.UB, [1, 64], x.dtype)
    with pl.section_vector():
        if pl.get_block_idx() == 0:
            pl.load(t, x)
            pl.store(out, t, [0, 0])
    pl.system.sync_all(core_type=pl.SyncCoreType.AIV_ONLY)
    with pl.section_vector():
        pl.load(r, out, [pl.get_block_idx(), 0])


def test_a_gm_write_lands_in_l2_and_reads_of_its_rows_after_sync_all_hit():
    """A write completes L2's write latency after it leaves its pipe (L2 is write-back, docs/chips.md §3: CAModel 96
    cycles), not GM's; a read of part of a region written before a pl.sync_all is served by L2, though the
    readers' first GM access comes before the writer's second in program order."""
    x = np.ones((16, 64), np.float16)
    rep = pyto.run(ub_round_trip, x, np.zeros_like(x), blocks=2)
    names = rep.events[2]
    pipe_i, name_i, loc_i, begin, end, lat = (rep.events[k] for k in (5, 6, 7, 8, 9, 10))
    stores = [i for i in range(len(name_i)) if names[name_i[i]] == "pl.store"]
    assert len(stores) == 1
    assert lat[stores[0]] == pytest.approx(CHIP.path("UB", "GM").latency + CHIP.l2_write_latency_cycles)
    assert rep.l2_hit_bytes == 2 * 64 * 2         # both rows read back, not the input's first read


@pl.kernel
def k_loop_unit_flag(a, b, out, *, TK):
    """docs/cube_phase.md §5.2's K loop: operands double-buffered in L0, AccPhase Partial.../Final, STPhase.Final."""
    M, K = a.shape
    N = b.shape[1]
    a_l1, b_l1 = pl.alloc(pl.L1, [M, K], a.dtype), pl.alloc(pl.L1, [K, N], a.dtype)
    a0 = pl.alloc(pl.L0A, [M, TK], a.dtype, buffers=2)
    b0 = pl.alloc(pl.L0B, [TK, N], a.dtype, buffers=2)
    c = pl.alloc(pl.L0C, [M, N], pl.DT_FP32)
    pl.load(a_l1, a)
    pl.load(b_l1, b)
    pl.system.set_mm_layout_transform(enabled=True)      # the 950's K-split rule
    for k in pl.range(0, K, TK):
        x, y = a0.next(), b0.next()
        pl.move(x, a_l1[:, k:k + TK])
        pl.move(y, b_l1[k:k + TK, :])
        phase = pl.AccPhase.Final if k + TK >= K else pl.AccPhase.Partial
        if k == 0:
            pl.matmul(c, x, y, phase=phase)
        else:
            pl.matmul_acc(c, c, x, y, phase=phase)
    pl.store(out, c, [0, 0], phase=pl.STPhase.Final)
    pl.system.set_mm_layout_transform(enabled=False)


def _mmad_span(rep):
    """Cycles from the first MMAD's start to the last MMAD's end, from the report's per-instruction times."""
    cores, pipes, names, locs, core_i, pipe_i, name_i, loc_i, begin, end = rep.events[:10]
    m = pipe_i == pipes.index("M")
    return float(end[m].max() - begin[m].min())


@pytest.mark.parametrize("N,theory,measured", [(256, 4156, 4209), (128, 2108, 2172)])
def test_calibration_against_ascend_c_mmad_figures(N, theory, measured):
    """docs/chips.md §4 (Ascend C docs): fp16 128xNx512 in 8 MMADs: theoretical and measured with unit_flag."""
    mmad = sum(CHIP.cube_cycles_per_step["fp16"] * 8 * (N // 16) * 4 + CHIP.mmad_head_cycles for _ in range(8))
    assert abs(mmad - theory) / theory < 0.03
    a, b, out = np.ones((128, 512), np.float16), np.ones((512, N), np.float16), np.zeros((128, N), np.float16)
    rep = pyto.run(k_loop_unit_flag, a, b, out, TK=64)
    assert abs(_mmad_span(rep) - measured) / measured < 0.03


def test_trace_file_has_a_track_per_core_and_pipe(tmp_path):
    a, b, out = np.ones((64, 128), np.float16), np.ones((128, 64), np.float16), np.zeros((64, 64), np.float16)
    rep = pyto.run(matmul_pingpong, a, b, out, blocks=2, TM=32, TN=64, TK=64)
    path = tmp_path / "trace.json"
    rep.save_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert len(spans) == rep.instructions
    tracks = {(e["pid"], e["tid"]) for e in spans}
    assert len({pid for pid, _ in tracks}) == 2 and len(tracks) >= 8
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"PIPE_MTE2", "PIPE_MTE1", "PIPE_M", "PIPE_FIX"} <= names
    # an event is the pipe's occupancy: per track they sum to the pipe's busy cycles and never overlap
    us = 1.0 / (rep.clock_ghz * 1e3)
    core_names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    pipe_names = {e["tid"]: e["args"]["name"][5:] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    for pid, tid in tracks:
        track = sorted((e["ts"], e["dur"]) for e in spans if (e["pid"], e["tid"]) == (pid, tid))
        busy = rep.core_pipe_cycles[core_names[pid]][pipe_names[tid]]
        assert sum(d for _, d in track) == pytest.approx(busy * us, abs=1e-3 * len(track))   # whole ns each
        # in whole ns, as a viewer rounds them (Perfetto drops overlapping slices): no overlap
        ns = [(round(t * 1000), round(d * 1000)) for t, d in track]
        assert all(t0 + d0 <= t1 for (t0, d0), (t1, _) in zip(ns, ns[1:]))
    assert min(pid for pid, _ in tracks) >= 1          # Perfetto reserves pid 0
    assert max(e["args"]["lands_us"] for e in spans) == pytest.approx(rep.time_us, abs=1e-3)
    assert any("matmul_pingpong.py:" in e["name"] for e in spans)
    assert max(e["ts"] + e["dur"] for e in spans) <= rep.time_us + 1e-3
    with pytest.raises(pyto.PytoError, match="cannot write the trace to .*no_such_dir"):
        rep.save_trace(str(tmp_path / "no_such_dir" / "trace.json"))


@settings(max_examples=20)
@given(st.integers(1, 300), st.integers(1, 300), st.integers(1, 600), st.integers(1, 8),
       st.sampled_from([(32, 32, 32), (64, 64, 64), (128, 128, 64)]))
def test_roofline_invariant(M, N, K, blocks, tiles):
    """No simulated time beats max(FLOPs / peak, compulsory bytes / GM bandwidth)."""
    tm, tn, tk = tiles
    args = (pyto.spec((M, K), "fp16"), pyto.spec((K, N), "fp16"), pyto.spec((M, N), "fp16"))
    rep = pyto.run(matmul_pingpong, *args, mode="timing", blocks=blocks, TM=tm, TN=tn, TK=tk)
    flops = 2.0 * M * N * K
    compulsory = 2 * (M * K + K * N + M * N)
    bound = max(flops / (CHIP.peak_flops("fp16") / CHIP.clock_hz), compulsory / CHIP.gm_bytes_per_cycle)
    assert rep.cycles >= bound


def test_report_counts_gm_bytes_and_per_core_finish():
    a, b, out = np.ones((64, 128), np.float16), np.ones((128, 64), np.float16), np.zeros((64, 64), np.float16)
    rep = pyto.run(matmul_pingpong, a, b, out, blocks=2, TM=32, TN=64, TK=64)
    assert rep.gm_write_bytes == out.nbytes
    assert rep.gm_read_bytes == a.nbytes + b.nbytes * 2        # each block reads its A rows and all of B
    assert set(rep.core_cycles) == {"block 0 AIC", "block 1 AIC"}
    assert max(rep.core_cycles.values()) == pytest.approx(rep.cycles)
    assert "written" in rep.summary()


@pl.kernel
def flag_after_load(a, out, *, BARRIER: bool):
    a_l1 = pl.alloc(pl.L1, [32, 32], pl.DT_FP16)
    a_l0 = pl.alloc(pl.L0A, [32, 32], pl.DT_FP16)
    with pl.section_cube():
        pl.load(a_l1, a, [0, 0])
        if BARRIER:
            pl.system.bar_mte2()
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE1, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE1, event_id=0)
        pl.move(a_l0, a_l1)


@pytest.mark.parametrize("barrier", [False, True])
def test_a_flag_is_raised_once_the_pipes_data_has_landed(barrier):
    """sync_src (and bar_mte2) on MTE2 waits for the GM load before it to complete, its latency included: the
    MTE1 move it releases reads L1 after the data arrived, not when MTE2 let the load go."""
    a = np.ones((32, 32), np.float16)
    rep = pyto.run(flag_after_load, a, a.copy(), auto_sync=False, BARRIER=barrier)
    cores, pipes, names, locs, core_i, pipe_i, name_i, loc_i, begin, end = rep.events[:10]
    gm_load = int(np.flatnonzero(pipe_i == pipes.index("MTE2"))[0])
    l1_load = int(np.flatnonzero(pipe_i == pipes.index("MTE1"))[-1])
    assert begin[l1_load] >= end[gm_load] > begin[gm_load] + CHIP.gm_latency_cycles



@pl.kernel
def flag_ping_pong(x, out, *, N: int):
    """N round trips MTE2 -> MTE1 -> MTE2 by hand-set flags, nothing else on the pipes."""
    with pl.section_cube():
        for _ in range(N):
            pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE1, event_id=0)
            pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE1, event_id=0)
            pl.system.sync_src(set_pipe=pl.PipeType.MTE1, wait_pipe=pl.PipeType.MTE2, event_id=0)
            pl.system.sync_dst(set_pipe=pl.PipeType.MTE1, wait_pipe=pl.PipeType.MTE2, event_id=0)


def test_a_hand_set_flag_reaches_its_wait_a_flag_latency_later():
    """Each set -> wait hop costs the chip's flag latency, as an auto-sync edge does (a fused-kernel helper
    found 100 round trips cost nothing)."""
    x = np.zeros((16, 16), np.float16)
    one = pyto.run(flag_ping_pong, x, x.copy(), auto_sync=False, N=1)
    many = pyto.run(flag_ping_pong, x, x.copy(), auto_sync=False, N=51)
    assert many.cycles - one.cycles >= 50 * 2 * CHIP.flag_latency_cycles


def test_gm_channel_share_shows_a_bandwidth_bound_launch():
    """32 blocks each loading 4 x 64 KB: the chip-wide GM channel is the limit, which the report says (the
    MTE2 busy cycles include waiting for it), and the share is bytes / bandwidth over T_total."""
    a = np.ones((32 * 4 * 256, 128), np.float16)

    @pl.kernel
    def copy_in(a, out):
        t = pl.alloc(pl.L1, [256, 128], a.dtype, buffers=2)
        for i in range(4):
            pl.load(t.next(), a, [(pl.get_block_idx() * 4 + i) * 256, 0])

    rep = pyto.run(copy_in, a, a[:16].copy(), blocks=32)
    moved = 32 * 4 * 256 * 128 * 2                       # every load misses L2: distinct tiles
    assert rep.gm_channel_share == pytest.approx(moved / CHIP.gm_bytes_per_cycle / rep.cycles)
    assert rep.gm_channel_share > 0.9 and "GM channel  busy" in rep.summary()
    assert rep.pipe_cycles["MTE2"] > 0.5 * rep.cycles      # MTE2's busy cycles hold the channel's wait


@pl.kernel
def everyone_loads_one_tile(a, out):
    t = pl.alloc(pl.L1, [64, 64], a.dtype)
    pl.load(t, a)


def test_reads_of_a_tile_whose_fill_is_in_flight_land_with_the_fill():
    """32 blocks read one tile at cycle 0: one miss, 31 L2 hits that merge into its fill, so none lands before
    the miss does (a report helper saw hits land 159 cycles before the data reached L2)."""
    a = np.ones((64, 64), np.float16)
    rep = pyto.run(everyone_loads_one_tile, a, a.copy(), blocks=32)
    assert rep.l2_hit_bytes == 31 * 64 * 64 * 2
    path = CHIP.path("GM", "L1")
    miss_lands = CHIP.dma_setup_cycles + 64 * 64 * 2 / path.bytes_per_cycle + path.latency + CHIP.gm_latency_cycles
    end = np.asarray(rep.events[9])
    assert end.min() >= miss_lands - 1e-9


def test_l2_reads_inside_written_regions():
    """l2_hits directly: a region read, written back, then read in part hits; so does a part of a region
    rewritten after 64 others; a read of rows nothing wrote misses; overlapping written pieces do not count."""
    from pyto.emulator.schedule.l2 import l2_hits

    def acc(i, rect, read):
        region = (7, 0, rect)
        return (i, hash(region), region, (rect[1] - rect[0]) * (rect[3] - rect[2]) * 4, read, 0)

    cap = 1 << 30
    s = [acc(0, (0, 16, 0, 64), True), acc(1, (0, 16, 0, 64), False), acc(2, (0, 8, 0, 64), True)]
    assert 2 in l2_hits([s], cap)
    s = [acc(0, (0, 16, 0, 64), False)] + [acc(1 + j, (16 * (j + 1), 16 * (j + 2), 0, 64), False) for j in range(64)]
    s += [acc(100, (0, 16, 0, 64), False), acc(101, (0, 8, 0, 64), True), acc(102, (2000, 2016, 0, 64), True)]
    hits = l2_hits([s], cap)
    assert 101 in hits and 102 not in hits
    s = [acc(0, (0, 16, 0, 32), False), acc(1, (0, 16, 32, 64), False), acc(2, (0, 16, 16, 48), True),
         acc(3, (0, 16, 0, 40), False), acc(4, (0, 16, 8, 48), True)]
    hits = l2_hits([s], cap)
    assert hits[2] == (16 * 32 * 4, 1)       # two disjoint written pieces; lands with the later writer
    # a partial rewrite (2) over a region (1): the cover is the older region and 3, not the newest first
    s = [acc(1, (0, 16, 16, 48), False), acc(2, (0, 16, 32, 48), False), acc(3, (0, 16, 0, 16), False),
         acc(4, (0, 16, 0, 48), True)]
    assert 4 in l2_hits([s], cap)


@pl.kernel
def store_then_read_stacked(x, out, other, *, BOTH: bool):
    """Store x's two matrices (the second into out, or into other), then read out's two in one nd_num load."""
    t = pl.alloc(pl.UB, [16, 64], x.dtype, buffers=2)
    back = pl.alloc(pl.UB, [32, 64], x.dtype)
    with pl.section_vector():
        if pl.get_subblock_idx() == 0:
            for i in pl.range(2):
                s = t.next()
                pl.load(s, x, [i, 0, 0])
                pl.store(out if BOTH or i == 0 else other, s, [i, 0, 0])
            pl.load(back, out, [0, 0, 0], nd_num=2)


def test_an_nd_num_read_hits_l2_region_by_region():
    """An nd_num load's matrices are L2 regions of their own: both just stored -> all of it from L2 at L2's
    latency; one stored, one not -> that one's bytes from L2, the load as late as a miss (its other matrix)."""
    x = np.arange(2 * 16 * 64, dtype=np.float32).reshape(2, 16, 64)
    reps = {}
    for both in (True, False):
        out, other = np.zeros_like(x), np.zeros_like(x)
        reps[both] = pyto.run(store_then_read_stacked, x, out, other, BOTH=both)
        assert np.array_equal(out[0], x[0]) and np.array_equal((out if both else other)[1], x[1])
    assert reps[True].l2_hit_bytes == 2 * 16 * 64 * 4
    assert reps[False].l2_hit_bytes == 16 * 64 * 4
    # the same work: the partly missing load ends the kernel later, by at most a miss's extra latency (the hit
    # lands no earlier than the store that brought its data into L2)
    gap = reps[False].cycles - reps[True].cycles
    assert 0 < gap <= CHIP.gm_latency_cycles - CHIP.l2_latency_cycles, gap


@pl.kernel
def l1_to_l0a_edge(a, *, R: int, C: int):
    l1 = pl.alloc(pl.L1, [R, C], pl.DT_FP16)
    l0a = pl.alloc(pl.L0A, [R, C], pl.DT_FP16)
    with pl.section_cube():
        pl.load(l1, a, [0, 0])
        pl.move(l0a, l1)


@pytest.mark.parametrize("R,C,fractals", [(1, 1, 1), (17, 17, 4), (20, 28, 4), (32, 32, 4)])
def test_an_l1_to_l0_load_moves_whole_fractals(R, C, fractals):
    """docs/fractal_formats.md §4.1: L0A holds whole 16 x 16 fp16 fractals (512 B): an edge tile's load moves its padding too (MTE1
    was charged the logical bytes, 2 B for a 1 x 1 tile, while the MMAD was charged whole fractal steps)."""
    rep = pyto.run(l1_to_l0a_edge, pyto.spec((R, C), "fp16"), R=R, C=C, mode="timing")
    assert rep.pipe_cycles["MTE1"] == pytest.approx(fractals * 512 / CHIP.path("L1", "L0A").bytes_per_cycle)


@pytest.mark.parametrize("small,large,kw", [
    ((341, 438, 321), (341, 438, 337), dict(TM=128, TN=128, TK=32, STAGES=2, blocks=8)),
    ((76, 229, 949), (83, 229, 949), dict(TM=64, TN=32, TK=128, STAGES=1, blocks=32))])
def test_more_work_is_never_faster_on_the_same_tiling(small, large, kw):
    """The chip-wide channels are booked in start order: a transfer issued a flag latency ahead of its start (a
    store waiting for its MMAD) booked the GM channel at issue, and a load starting 2.5 cycles sooner but issued
    after it queued 268 cycles behind eight such stores, so K = 321 ran 1.9% slower than K = 337 (a timing
    audit's find)."""
    def cycles(M, N, K):
        specs = (pyto.spec((M, K), "fp16"), pyto.spec((K, N), "fp16"), pyto.spec((M, N), "fp16"))
        return pyto.run(matmul_pingpong, *specs, mode="timing", **kw).cycles
    assert cycles(*small) <= cycles(*large)
