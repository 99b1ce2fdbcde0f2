"""docs/cube_phase.md: AccPhase/STPhase examples and misuse cases, and random phase programs vs a model."""
import re

import numpy as np
import pytest
from hypothesis import given, settings

import pyto
import pyto.language as pl
from dsl_helpers import line_of, matmul_from_gm, matmul_tiles
from pyto.testing import assert_close, assert_deadlock, assert_race, matmul_bound, phase_programs


def _alloc(M, N, K, dt=pl.DT_FP16):
    ac = pl.alloc(pl.L0C, [M, N], pl.DT_FP32)
    al = pl.alloc(pl.L0A, [M, K], dt)
    br = pl.alloc(pl.L0B, [K, N], dt)
    al1 = pl.alloc(pl.L1, [M, K], dt)
    bl1 = pl.alloc(pl.L1, [K, N], dt)
    return ac, al, br, al1, bl1


def _load_k(al1, bl1, al, br, a, b, k, M, N):
    pl.load(al1, a, [0, k])
    pl.load(bl1, b, [k, 0])
    pl.move(al, al1)
    pl.move(br, bl1)


@pl.kernel
def single_matmul(a, b, out):
    M, K = a.shape
    N = b.shape[1]
    ac, al, br, al1, bl1 = _alloc(M, N, K)
    _load_k(al1, bl1, al, br, a, b, 0, M, N)
    pl.matmul(ac, al, br)
    pl.store(out, ac, [0, 0])


@pl.kernel
def k_loop(a, b, out, *, K_TOTAL, TILE_K):
    M = a.shape[0]
    N = b.shape[1]
    ac, al, br, al1, bl1 = _alloc(M, N, TILE_K)
    with pl.section_cube():
        pl.system.set_mm_layout_transform(enabled=True)                   # the 950's K-split rule
        for k in pl.range(0, K_TOTAL, TILE_K):
            _load_k(al1, bl1, al, br, a, b, k, M, N)
            if k == 0:
                pl.matmul(ac, al, br, phase=pl.AccPhase.Partial)          # first block
            elif k < K_TOTAL - TILE_K:
                pl.matmul_acc(ac, ac, al, br, phase=pl.AccPhase.Partial)  # middle blocks
            else:
                pl.matmul_acc(ac, ac, al, br, phase=pl.AccPhase.Final)    # last block
        pl.store(out, ac, [0, 0], phase=pl.STPhase.Final)                 # Final closes
        pl.system.set_mm_layout_transform(enabled=False)


@pl.kernel
def misuse1(a, b, out):
    M, K = a.shape
    N = b.shape[1]
    ac, al, br, al1, bl1 = _alloc(M, N, K)
    _load_k(al1, bl1, al, br, a, b, 0, M, N)
    pl.matmul(ac, al, br, phase=pl.AccPhase.Partial)
    pl.store(out, ac, [0, 0], phase=pl.STPhase.Final)


@pl.kernel
def misuse2(a, b, out, *, K_SQ, TILE_SQ):
    M = a.shape[0]
    N = b.shape[1]
    ac, al, br, al1, bl1 = _alloc(M, N, TILE_SQ)
    pl.system.set_mm_layout_transform(enabled=True)       # the 950's K-split rule: the misuse is the store's
    for ki in pl.range(0, K_SQ, TILE_SQ):
        _load_k(al1, bl1, al, br, a, b, ki, M, N)
        if ki == 0:
            pl.matmul(ac, al, br, phase=pl.AccPhase.Partial)
        else:
            pl.matmul_acc(ac, ac, al, br, phase=pl.AccPhase.Final)
    pl.store(out, ac, [0, 0])
    pl.system.set_mm_layout_transform(enabled=False)


@pl.kernel
def misuse3(a, b, out, *, K_SQ, TILE_SQ):
    M = a.shape[0]
    N = b.shape[1]
    ac, al, br, al1, bl1 = _alloc(M, N, TILE_SQ)
    for ki in pl.range(0, K_SQ, TILE_SQ):
        _load_k(al1, bl1, al, br, a, b, ki, M, N)
        pl.matmul(ac, al, br, phase=pl.AccPhase.Final)
        pl.store(out, ac, [0, 0], phase=pl.STPhase.Partial)


def _inputs(M, N, K, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((M, K)).astype(np.float16), rng.standard_normal((K, N)).astype(np.float16),
            np.zeros((M, N), np.float32))


def test_single_matmul_without_phase_matches_numpy():
    a, b, out = _inputs(48, 40, 56)
    pyto.run(single_matmul, a, b, out)
    assert_close(out, a.astype(np.float64) @ b.astype(np.float64), matmul_bound(a, b, np.float32))


@pytest.mark.parametrize("k_total,tile_k", [(256, 64), (96, 32), (64, 32)])
def test_k_loop_partial_partial_final_matches_numpy(k_total, tile_k):
    a, b, out = _inputs(32, 48, k_total, seed=k_total)
    pyto.run(k_loop, a, b, out, K_TOTAL=k_total, TILE_K=tile_k)
    assert_close(out, a.astype(np.float64) @ b.astype(np.float64), matmul_bound(a, b, np.float32))


def test_case1_matmul_without_final_deadlocks():
    e = assert_deadlock(misuse1, *_inputs(32, 32, 32))
    msg = str(e)
    assert "STPhase.Final" in msg and "unit_flag" in msg and "== 1, is 0" in msg
    assert "test_emulator_phases.py:" in msg and "pl.store(out, ac, [0, 0], phase=pl.STPhase.Final)" in msg


def test_case2_store_without_phase_races():
    e = assert_race(misuse2, *_inputs(32, 32, 64), K_SQ=64, TILE_SQ=32)
    msg = str(e)
    assert "RAW hazard" in msg and "L0C" in msg and "PIPE_M" in msg and "PIPE_FIX" in msg
    # the store races every matmul of the K loop: the report names the last, the AccPhase.Final one
    assert "pl.matmul_acc(ac, ac, al, br, phase=pl.AccPhase.Final)" in msg, msg
    assert "pl.store(out, ac, [0, 0])" in msg


def test_case3_store_partial_in_loop_deadlocks():
    e = assert_deadlock(misuse3, *_inputs(32, 32, 64), K_SQ=64, TILE_SQ=32)
    msg = str(e)
    assert "AccPhase.Final" in msg and "== 0, is 1" in msg and "PIPE_M" in msg
    assert "pl.matmul(ac, al, br, phase=pl.AccPhase.Final)" in msg


def test_failed_run_leaves_arrays_untouched():
    a, b, out = _inputs(32, 32, 64)
    out[...] = 7.0
    before = out.copy()
    with pytest.raises(pyto.RaceError):
        pyto.run(misuse2, a, b, out, K_SQ=64, TILE_SQ=32)
    assert np.array_equal(out, before)


@pl.kernel
def staged_store_out(a, b, out):
    """docs/cube_phase.md §7: an L0C result drained in two parts, each Fixpipe toggling the blocks it reads."""
    M, K = a.shape
    N = b.shape[1]
    ac, al, br, al1, bl1 = _alloc(M, N, K)
    _load_k(al1, bl1, al, br, a, b, 0, M, N)
    pl.matmul(ac, al, br, phase=pl.AccPhase.Final)
    pl.store(out, ac[:, 0:32], [0, 0], phase=pl.STPhase.Final)
    pl.store(out, ac[:, 32:64], [0, 32], phase=pl.STPhase.Final)
    pl.matmul(ac, al, br, phase=pl.AccPhase.Final)   # both halves released: may write again
    pl.store(out, ac, [0, 0], phase=pl.STPhase.Final)


def test_staged_store_out_per_region_unit_flags():
    a, b, out = _inputs(32, 64, 32)
    pyto.run(staged_store_out, a, b, out)
    assert_close(out, a.astype(np.float64) @ b.astype(np.float64), matmul_bound(a, b, np.float32))


# ---- random phase programs against an independent model of docs/cube_phase.md §2's unit_flag table -----------
def model_verdict(loops, ops):
    """Independent model: two in-order pipes (M for mm/acc, FIX for st) over whole L0C tiles.

    Software sync joins an M op and a FIX op on the same tile only when neither carries a phase (an op
    without a phase waits for the latest op without a phase of the other pipe, whatever phased ops lie
    between: docs/design.md §4.2);
    unit_flag: mm/acc wait for 0 (Final sets 1), st waits for 1 (Final sets 0). A run that ends with a flag at
    1 leaves the next kernel's first matmul waiting (docs/cube_phase.md §4.2: the last read of an L0C buffer uses
    STPhase.Final). Verdict priority: race > uninitialised read > deadlock > left set > ok (the order in which
    pyto reports them).
    """
    prog = [op for _ in range(loops) for op in ops]
    pipe_ops = {"M": [], "F": []}
    for i, (kind, tile, phase) in enumerate(prog):
        pipe_ops["F" if kind == "st" else "M"].append(i)
    # software-sync edges: latest earlier op without a phase of the other pipe on the same tile
    deps = {i: [] for i in range(len(prog))}
    for i, (kind, tile, phase) in enumerate(prog):
        if phase != "none":
            continue
        for j in range(i - 1, -1, -1):
            k2, t2, p2 = prog[j]
            if t2 == tile and (k2 == "st") != (kind == "st") and p2 == "none":
                deps[i].append(j)
                break
    flags = {}
    setter = {}
    clock = {}          # op -> vector clock (M, F) at its execution
    pos = {"M": 0, "F": 0}
    vc = {"M": [0, 0], "F": [0, 0]}
    done = set()
    progressed = True
    while progressed:
        progressed = False
        for p, idx in (("M", 0), ("F", 1)):
            if pos[p] >= len(pipe_ops[p]):
                continue
            i = pipe_ops[p][pos[p]]
            kind, tile, phase = prog[i]
            if any(d not in done for d in deps[i]):
                continue
            want = 1 if kind == "st" else 0
            if phase != "none" and flags.get(tile, 0) != want:
                continue
            joins = [clock[d] for d in deps[i]]
            if phase != "none" and (tile, want) in setter:
                joins.append(clock[setter[(tile, want)]])
            for c in joins:
                vc[p] = [max(x, y) for x, y in zip(vc[p], c)]
            vc[p][idx] += 1
            clock[i] = list(vc[p])
            if phase == "Final":
                flags[tile] = 0 if kind == "st" else 1
                setter[(tile, flags[tile])] = i
            done.add(i)
            pos[p] += 1
            progressed = True
    # race: an executed M op and an executed FIX op on one tile, neither ordered before the other
    for i in done:
        for j in done:
            ki, ti, _ = prog[i]
            kj, tj, _ = prog[j]
            if ti == tj and ki != "st" and kj == "st":
                before = clock[i][0] <= clock[j][0]
                after = clock[j][1] <= clock[i][1]
                if not before and not after:
                    return "race"
    for i in done:
        kind, tile, _ = prog[i]
        if kind in ("acc", "st"):
            if not any(prog[w][0] == "mm" and prog[w][1] == tile and clock[w][0] <= clock[i][0]
                       for w in done if w != i):
                return "uninit"
    if len(done) < len(prog):
        return "deadlock"
    if any(v == 1 for v in flags.values()):
        return "left set"
    return "ok"


def _phase_kernel(loops, ops):
    @pl.kernel
    def prog(a, b, out):
        c = [pl.alloc(pl.L0C, [16, 16], pl.DT_FP32, name=f"c{t}") for t in range(2)]
        al = pl.alloc(pl.L0A, [16, 16], pl.DT_FP16)
        br = pl.alloc(pl.L0B, [16, 16], pl.DT_FP16)
        al1 = pl.alloc(pl.L1, [16, 16], pl.DT_FP16)
        bl1 = pl.alloc(pl.L1, [16, 16], pl.DT_FP16)
        _load_k(al1, bl1, al, br, a, b, 0, 16, 16)
        pl.system.set_mm_layout_transform(enabled=True)     # the 950's K-split rule for the phased accs
        for _ in pl.range(loops):
            for kind, t, phase in ops:
                acc = None if phase == "none" else getattr(pl.AccPhase, phase)
                st = None if phase == "none" else getattr(pl.STPhase, phase)
                if kind == "mm":
                    pl.matmul(c[t], al, br, phase=acc)
                elif kind == "acc":
                    pl.matmul_acc(c[t], c[t], al, br, phase=acc)
                else:
                    pl.store(out, c[t], [0, 0], phase=st)
        pl.system.set_mm_layout_transform(enabled=False)
    return prog


def emulator_verdict(loops, ops, chip="ascend950pr"):
    a, b, out = _inputs(16, 16, 16)
    try:
        pyto.run(_phase_kernel(loops, ops), a, b, out, chip=chip)
    except pyto.RaceError:
        return "race"
    except pyto.UninitializedReadError:
        return "uninit"
    except pyto.DeadlockError:
        return "deadlock"
    except pyto.SyncError as e:
        assert "leaves unit_flag" in str(e), e
        return "left set"
    return "ok"


@settings(max_examples=60)
@given(phase_programs())
def test_verdicts_do_not_depend_on_the_timing(program):
    """Race and deadlock come from happens-before and the unit_flag table, not from which pipe the timing
    lets run first: the same program on a chip with other latencies and bandwidths gets the same verdict."""
    loops, ops = program
    assert emulator_verdict(loops, ops, "atlas-a2") == emulator_verdict(loops, ops)


@settings(max_examples=300)
@given(phase_programs())
def test_random_phase_programs_match_independent_model(program):
    loops, ops = program
    assert emulator_verdict(loops, ops) == model_verdict(loops, ops)


@pytest.mark.parametrize("loops,ops,verdict", [
    (1, [("mm", 0, "Partial"), ("st", 0, "Final")], "deadlock"),
    (1, [("mm", 0, "Final"), ("st", 0, "Final")], "ok"),
    (2, [("mm", 0, "Final"), ("st", 0, "Partial")], "deadlock"),
    (1, [("mm", 0, "Final"), ("st", 0, "none")], "race"),
    (2, [("mm", 0, "none"), ("st", 0, "none")], "ok"),
    (1, [("st", 0, "none")], "uninit"),
    (3, [("mm", 0, "Partial"), ("acc", 0, "Final"), ("st", 0, "Final"), ("mm", 1, "none"), ("st", 1, "none")], "ok"),
    # the store without a phase waits for the acc without a phase, though a phased mm (itself held by
    # unit_flag until the Final store) was issued between them
    (1, [("mm", 0, "Final"), ("acc", 0, "none"), ("mm", 0, "Partial"), ("st", 0, "none"), ("st", 0, "Final")], "ok"),
    (1, [("mm", 0, "Final"), ("acc", 0, "none"), ("mm", 0, "Final"), ("st", 0, "none")], "deadlock"),
    # the kernel ends with a Final result nobody read with STPhase.Final (a unit_flag audit's find: it passed)
    (1, [("mm", 0, "Final")], "left set"),
    (1, [("mm", 0, "Final"), ("st", 0, "Final"), ("mm", 1, "Final"), ("st", 1, "Partial")], "left set"),
])
def test_model_and_emulator_on_known_programs(loops, ops, verdict):
    assert model_verdict(loops, ops) == verdict
    assert emulator_verdict(loops, ops) == verdict


@pl.kernel
def flag_behind_a_blocked_matmul(a, b, out):
    M, K = a.shape
    N = b.shape[1]
    ac, al, br, al1, bl1 = _alloc(M, N, K)
    with pl.section_cube():
        _load_k(al1, bl1, al, br, a, b, 0, M, N)
        pl.matmul(ac, al, br, phase=pl.AccPhase.Final)
        pl.matmul(ac, al, br, phase=pl.AccPhase.Final)      # waits for the Final store, queued behind the wait
        pl.system.sync_src(set_pipe=pl.PipeType.M, wait_pipe=pl.PipeType.FIX, event_id=0)  # behind the blocked matmul
        pl.system.sync_dst(set_pipe=pl.PipeType.M, wait_pipe=pl.PipeType.FIX, event_id=0)
        pl.store(out, ac, [0, 0], phase=pl.STPhase.Final)


def test_a_deadlock_names_the_release_that_is_queued_behind_it():
    """The store that would clear the flag and the set_flag the wait needs both exist but are queued behind the
    cycle: the report names them and says so (it said 'no store ... cleared it' and 'never set': a unit_flag
    audit's find)."""
    e = assert_deadlock(flag_behind_a_blocked_matmul, *_inputs(32, 32, 32))
    msg = str(e)
    store = line_of(flag_behind_a_blocked_matmul, "pl.store(out, ac")
    setf = line_of(flag_behind_a_blocked_matmul, "pl.system.sync_src(set_pipe=pl.PipeType.M")
    assert re.search(rf"the pl.store that would clear it, test_emulator_phases.py:{store} .*has not run: it is "
                     r"queued on block 0 AIC PIPE_FIX", msg), msg
    assert re.search(rf"its pl\.system\.sync_src, test_emulator_phases.py:{setf} .*has not run: it is queued on "
                     r"block 0 AIC PIPE_M", msg), msg
    assert "never set" not in msg and "no store/move" not in msg


@pl.kernel
def half_released_twice(a, b, out):
    """The result stored in halves, the bottom half with STPhase.Partial; then the same tile computed again."""
    h = a.shape[0] // 2
    ac, al, br, al1, bl1 = _alloc(2 * h, b.shape[1], a.shape[1])
    for _ in pl.range(2):
        with pl.section_cube():
            _load_k(al1, bl1, al, br, a, b, 0, 2 * h, b.shape[1])
            pl.matmul(ac, al, br, phase=pl.AccPhase.Final)
            pl.store(out, ac[0:h, :], [0, 0], phase=pl.STPhase.Final)
            pl.store(out, ac[h:2 * h, :], [h, 0], phase=pl.STPhase.Partial)


def test_a_deadlock_on_a_half_released_tile_names_the_partial_read_not_a_store_of_the_released_half():
    """The second matmul waits on the bottom half (still set): the second pass's Final store of the top half, whose
    blocks are already 0, would free nothing (the report named it as the store that would clear the flag, 'queued
    behind a blocked instruction' though it headed its pipe: a kernel-author helper's find)."""
    e = assert_deadlock(half_released_twice, *_inputs(32, 32, 32))
    msg = str(e)
    partial = line_of(half_released_twice, "[h, 0], phase=pl.STPhase.Partial")
    assert "that would clear it" not in msg, msg
    assert re.search(rf"is mixed \(4 of 8 set\).*no store/move with STPhase.Final cleared it; the blocks still set "
                     rf"were last read by the pl.store at test_emulator_phases.py:{partial} ", msg), msg


@pl.kernel
def split_k_through_a_workspace(a, b, out, *, SYNC: bool, FINAL: bool):
    """Each block's K segment to the workspace (phased store), then the AIVs add the segments: with SYNC, a
    pl.system.sync_all() between; FINAL=False drops the last AccPhase.Final (the store then waits forever)."""
    M, K = a.shape
    N = b.shape[1]
    S = pl.get_block_num()
    KS = K // S
    ws = pl.workspace([S * M, N], pl.DT_FP32)
    al1, bl1 = pl.alloc(pl.L1, [M, KS], pl.DT_FP16), pl.alloc(pl.L1, [KS, N], pl.DT_FP16)
    al, br = pl.alloc(pl.L0A, [M, KS], pl.DT_FP16), pl.alloc(pl.L0B, [KS, N], pl.DT_FP16)
    ac = pl.alloc(pl.L0C, [M, N], pl.DT_FP32)
    acc, part = pl.alloc(pl.UB, [M // 2, N], pl.DT_FP32), pl.alloc(pl.UB, [M // 2, N], pl.DT_FP32)
    s = pl.get_block_idx() // pl.get_subblock_num()      # the AI core's index, on the AIC and on its AIVs
    with pl.section_cube():
        _load_k(al1, bl1, al, br, a, b, s * KS, M, N)
        pl.matmul(ac, al, br, phase=pl.AccPhase.Final if FINAL else pl.AccPhase.Partial)
        pl.store(ws, ac, [s * M, 0], phase=pl.STPhase.Final)
    if SYNC:
        pl.system.sync_all()
    with pl.section_vector():
        if s == 0:
            r0 = pl.get_subblock_idx() * (M // 2)
            pl.load(acc, ws, [r0, 0])
            for j in pl.range(1, S):
                pl.load(part, ws, [j * M + r0, 0])
                pl.add(acc, acc, part)
            pl.store(out, acc, [r0, 0])


def test_a_workspace_race_is_not_blamed_on_the_phase_and_a_stalled_sync_all_counts_its_arrivals():
    """A kernel author's split-K: without the sync_all the report named docs/cube_phase.md §4.1's phase hint (the store has a
    phase, but the race is on GM between cores) and now says how to order them; without the Final the report said
    '6 of 6 cores arrived' at a sync_all the two AICs never reached (both found by a kernel-author helper)."""
    a, b = _inputs(32, 32, 128)[:2]
    out = np.zeros((32, 32), np.float32)
    e = assert_race(split_k_through_a_workspace, a, b, out, blocks=2, SYNC=False, FINAL=True)
    assert "GM tensor 'ws'" in str(e) and "hint: one side carries a phase" not in str(e), e
    assert "fix: " in str(e) and ("sync_all" in str(e) or "cross_core" in str(e)), e
    e = assert_deadlock(split_k_through_a_workspace, a, b, out, blocks=2, SYNC=True, FINAL=False)
    assert "pl.system.sync_all: 4 of 6 cores arrived" in str(e), e
    pyto.run(split_k_through_a_workspace, a, b, out, blocks=2, SYNC=True, FINAL=True)
    assert_close(out, a.astype(np.float64) @ b.astype(np.float64), matmul_bound(a, b, np.float32))


@pl.kernel
def final_read_runs_early(a, b, o1, o3):
    """matmul Final; store Partial; matmul Final; store Final: the last store (FIX runs in order behind the
    first) finds the flag still 1 from the first result and takes it before the second matmul."""
    tiles = matmul_tiles(32, 32, 32, pl.DT_FP16)
    a0, b0, c = tiles[2:]
    with pl.section_cube():
        matmul_from_gm(tiles, a, [0, 0], b, [0, 0], phase=pl.AccPhase.Final)
        pl.store(o1, c, [0, 0], phase=pl.STPhase.Partial)
        pl.matmul(c, a0, b0, phase=pl.AccPhase.Final)
        pl.store(o3, c, [0, 0], phase=pl.STPhase.Final)


def test_a_final_read_that_ran_early_is_named():
    """The flag left at 1 names the matmul and the STPhase.Final store that ran before it (a kernel-author helper
    found only the matmul named, though the next source line is such a store)."""
    a = np.ones((32, 32), np.float16)
    outs = [np.zeros((32, 32), np.float32) for _ in range(2)]
    with pytest.raises(pyto.SyncError, match=r"ran before it: the flag was still 1 from an earlier AccPhase\.Final "
                                             r"result that only STPhase\.Partial reads took"):
        pyto.run(final_read_runs_early, a, a.copy(), *outs)


@pl.kernel
def half_cleared(a, b, o1, o2):
    """Final result stored whole with Partial, then only the top half with Final: the next matmul waits on the
    bottom half forever."""
    tiles = matmul_tiles(32, 32, 32, pl.DT_FP16)
    a0, b0, c = tiles[2:]
    with pl.section_cube():
        matmul_from_gm(tiles, a, [0, 0], b, [0, 0], phase=pl.AccPhase.Final)
        pl.store(o1, c, [0, 0], phase=pl.STPhase.Partial)
        pl.store(o1, c[0:16, :], [0, 0], phase=pl.STPhase.Final)
        pl.matmul(c, a0, b0, phase=pl.AccPhase.Final)
        pl.store(o2, c, [0, 0], phase=pl.STPhase.Final)


def test_a_partly_cleared_region_names_the_last_read_of_what_is_still_set():
    """The deadlock says which read left the still-set blocks (the Partial store of the whole tile), not only the
    queued store after the blocked matmul (a kernel-author helper's circular report)."""
    a = np.ones((32, 32), np.float16)
    line = line_of(half_cleared, "pl.store(o1, c, [0, 0], phase=pl.STPhase.Partial)")
    with pytest.raises(pyto.DeadlockError, match=rf"the blocks still set were last read by the pl.store at "
                                                 rf"test_emulator_phases.py:{line} .*STPhase.Partial: a Final read"):
        pyto.run(half_cleared, a, a.copy(), np.zeros((32, 32), np.float32), np.zeros((32, 32), np.float32))
