"""Auto-sync's compiled loop (autosync_jit.py on autosync_table.py's tables) against the plain algorithm
(autosync.insert_reference): the same dependencies, in the same order, for every instruction.

Compared on the example kernels, BMM branches and the phase-program kernels of the tests (traced, then
auto-synced both ways), on random loop-structured DSL kernels (tile groups, phases, GM stores read back,
flags, barriers, sync_all), and on random orders built from instructions directly (any rectangles,
batches, other cores' instructions, phases on any pipe), which reach corners no kernel does.
"""
import importlib
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyto
import pyto.language as pl
from pyto.chip import load_chip
from pyto.emulator.sync import autosync, crosscore
from pyto.emulator.sync.deps import Deps
from pyto.ir import AccPhase, Buf, CROSS_CORE, GMTensor, Instr, Op, Pipe, STPhase
from pyto.testing import phase_programs
from test_emulator_phases import _phase_kernel

run_module = importlib.import_module("pyto.emulator.run")
COMPARED = []           # programs (blocks) compared, for the record


@pytest.fixture(autouse=True)
def _compiled_always(monkeypatch):
    """The compiled loop on orders of any length (autosync.SMALL sends short ones to the reference)."""
    monkeypatch.setattr(autosync, "SMALL", 0)


def _deps(instrs: list, deps: Deps) -> list:
    return [[id(d) for d in deps.of(ins)] for ins in instrs]


def _reference_all(programs, auto_sync, wait_blocks_core) -> Deps:
    """crosscore.insert_all with the plain algorithm and the pass that made each list unique everywhere."""
    autosync.REFERENCE = True
    try:
        deps = crosscore.insert_all(programs, auto_sync, wait_blocks_core).deps
    finally:
        autosync.REFERENCE = False
    for prog in programs:
        for ins in prog.instrs:
            deps.dedup(ins)
    return deps


def assert_same_deps(programs: list, auto_sync: bool = True, wait_blocks_core: bool = False):
    """Auto-sync one block's programs both ways; return the compiled loop's crosscore.Synced."""
    instrs = [ins for prog in programs for ins in prog.instrs]
    want = _deps(instrs, _reference_all(programs, auto_sync, wait_blocks_core))
    synced = crosscore.insert_all(programs, auto_sync, wait_blocks_core)
    got = _deps(instrs, synced.deps)
    for ins, w, g in zip(instrs, want, got):
        assert g == w, f"{ins!r}: compiled {g}, reference {w}"
    COMPARED.append(len(instrs))
    return synced


def _traced_blocks(kernel, args, params, chip="ascend950pr", blocks=1):
    tensors = run_module._gm_tensors(kernel, args)
    return list(run_module.trace_blocks(kernel, tensors, params, load_chip(chip), blocks))


def _compare_kernel(kernel, args, params=None, chip="ascend950pr", blocks=1):
    for progs in _traced_blocks(kernel, args, params or {}, chip, blocks):
        for auto_sync in (True, False):
            for wait in (False, True):
                assert_same_deps(progs, auto_sync, wait)


def _spec(*shape, dt="fp16"):
    return pyto.spec(shape, dt)


# ---- the project's kernels --------------------------------------------------------------------------

@pytest.mark.parametrize("M,N,K,tm,tn,tk,stages,blocks", [
    (512, 512, 512, 128, 128, 64, 2, 1), (256, 384, 320, 128, 128, 64, 3, 2), (100, 70, 90, 64, 32, 32, 2, 3)])
def test_matmul_pingpong(M, N, K, tm, tn, tk, stages, blocks):
    from pyto_kernels.examples.matmul_pingpong import matmul_pingpong
    _compare_kernel(matmul_pingpong, (_spec(M, K), _spec(K, N), _spec(M, N)),
                    dict(TM=tm, TN=tn, TK=tk, STAGES=stages), blocks=blocks)


@pytest.mark.parametrize("M,N,D,BN,DK,mode", [(128, 512, 128, 128, 64, 0), (64, 256, 64, 64, 32, 0),
                                               (64, 256, 64, 128, 64, 1), (64, 256, 64, 64, 64, 2)])
def test_flash_attention(M, N, D, BN, DK, mode):
    from pyto_kernels.examples.flash_attention import flash_attention
    _compare_kernel(flash_attention, (_spec(M, D), _spec(N, D), _spec(N, D), _spec(M, D)),
                    dict(M=M, N=N, D=D, BN=BN, DK=DK, MODE=mode))


@pytest.mark.parametrize("branch,a_shape,b_shape,bias", [
    ("asw_basic", (300, 200), (200, 260), None), ("stream_k", (128, 4096), (4096, 128), None),
    ("iter_batch", (6, 40, 56), (6, 56, 48), None), ("merge_batch", (3, 64, 96), (3, 96, 80), (80,)),
    ("special", (96, 1), (1, 80), None), ("to_matmul", (4, 64, 64), (64, 64), None)])
def test_bmm_branches(branch, a_shape, b_shape, bias, monkeypatch):
    from bmm_helpers import run_branch
    insert_all = crosscore.insert_all

    def compared(programs, auto_sync, wait_blocks_core=False):
        monkeypatch.setattr(crosscore, "insert_all", insert_all)
        try:
            return assert_same_deps(programs, auto_sync, wait_blocks_core)
        finally:
            monkeypatch.setattr(crosscore, "insert_all", compared)
    monkeypatch.setattr(crosscore, "insert_all", compared)
    n = len(COMPARED)
    # (the shapes are each branch's own: a PlanError here means they no longer are, and the test must say so)
    run_branch(_spec(*a_shape), _spec(*b_shape), None if bias is None else _spec(*bias, dt="fp32"), branch=branch)
    assert len(COMPARED) > n


@settings(max_examples=40, derandomize=True, deadline=None)
@given(phase_programs(max_ops=8))
def test_phase_programs(program):
    loops, ops = program
    _compare_kernel(_phase_kernel(loops, ops), (_spec(16, 16), _spec(16, 16), _spec(16, 16, dt="fp32")))


# ---- random loop-structured kernels -----------------------------------------------------------------

_AIC_PIPES = [Pipe.MTE2, Pipe.MTE1, Pipe.M, Pipe.FIX]
_AIC_BARRIERS = [pl.system.bar_mte2, pl.system.bar_mte1, pl.system.bar_m, pl.system.bar_fix]    # _AIC_PIPES' barriers
BODY_OPS = ["ld_a", "ld_b", "l0_a", "l0_b", "mm", "acc", "st", "ws_st", "ws_ld", "flag", "barrier"]


def _loop_kernel(outer, inner, rings, body, tail, sync):
    """A cube kernel: `outer` x `inner` loops over `body` (op, choice) with tile groups of `rings` (L1, L0, L0C)
    slots; GM offsets follow the loop indices; a workspace stored and loaded back (a GM dependency)."""
    r_l1, r_l0, r_c = rings

    @pl.kernel
    def prog(a, b, out):
        a_l1 = pl.alloc(pl.L1, [16, 16], pl.DT_FP16, buffers=r_l1)
        b_l1 = pl.alloc(pl.L1, [16, 16], pl.DT_FP16, buffers=r_l1)
        w_l1 = pl.alloc(pl.L1, [16, 16], pl.DT_FP32)
        a_l0 = pl.alloc(pl.L0A, [16, 16], pl.DT_FP16, buffers=r_l0)
        b_l0 = pl.alloc(pl.L0B, [16, 16], pl.DT_FP16, buffers=r_l0)
        c_l0 = pl.alloc(pl.L0C, [16, 16], pl.DT_FP32, buffers=r_c)
        ws = pl.workspace([32, 32], pl.DT_FP32)
        cur = {"a1": a_l1.next(), "b1": b_l1.next(), "a0": a_l0.next(), "b0": b_l0.next(), "c": c_l0.next()}
        pl.system.set_mm_layout_transform(enabled=True)      # the 950's K-split rule for phased matmul_acc steps

        def step(op, x, i, j):
            if op == "ld_a":
                cur["a1"] = a_l1.next()
                pl.load(cur["a1"], a, [16 * ((i + j + x) % 2), 0])
            elif op == "ld_b":
                cur["b1"] = b_l1.next()
                pl.load(cur["b1"], b, [0, 16 * (j % 2)])
            elif op == "l0_a":
                cur["a0"] = a_l0.next()
                pl.move(cur["a0"], cur["a1"])
            elif op == "l0_b":
                cur["b0"] = b_l0.next()
                pl.move(cur["b0"], cur["b1"])
            elif op in ("mm", "acc"):
                phase = [None, AccPhase.Partial, AccPhase.Final][x % 3]
                if x % 4 == 3:
                    cur["c"] = c_l0.next()
                if op == "mm":
                    pl.matmul(cur["c"], cur["a0"], cur["b0"], phase=phase)
                else:
                    pl.matmul_acc(cur["c"], cur["c"], cur["a0"], cur["b0"], phase=phase)
            elif op == "st":
                phase = [None, STPhase.Partial, STPhase.Final][x % 3]
                pl.store(out, cur["c"], [16 * (i % 2), 16 * ((j + x) % 2)], phase=phase)
            elif op == "ws_st":
                pl.store(ws, cur["c"], [16 * (x % 2), 16 * (j % 2)])
            elif op == "ws_ld":
                pl.load(w_l1, ws, [16 * ((x + i) % 2), 16 * (j % 2)])
            elif op == "flag":
                src = _AIC_PIPES[x % 4]
                dst = _AIC_PIPES[(x // 4 + 1 + x % 4) % 4]
                if src != dst:
                    pl.system.sync_src(set_pipe=src, wait_pipe=dst, event_id=x % 3)
                    pl.system.sync_dst(set_pipe=src, wait_pipe=dst, event_id=x % 3)
            elif op == "barrier":
                (pl.system.bar_all if x % 5 == 0 else _AIC_BARRIERS[x % 4])()

        for i in pl.range(outer):
            for j in pl.range(inner):
                for op, x in body:
                    step(op, x, i, j)
            for op, x in tail:
                step(op, x, i, 0)
            if sync:
                pl.system.sync_all(core_type=pl.SyncCoreType.AIC_ONLY)
        pl.system.set_mm_layout_transform(enabled=False)
    return prog


loop_kernels = st.tuples(
    st.integers(1, 3), st.integers(1, 4),
    st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 2)),
    st.lists(st.tuples(st.sampled_from(BODY_OPS), st.integers(0, 11)), min_size=1, max_size=10),
    st.lists(st.tuples(st.sampled_from(BODY_OPS), st.integers(0, 11)), max_size=3),
    st.booleans())


@settings(max_examples=60, derandomize=True, deadline=None)
@given(loop_kernels)
def test_random_loop_kernels(spec):
    outer, inner, rings, body, tail, sync = spec
    kernel = _loop_kernel(outer, inner, rings, body, tail, sync)
    _compare_kernel(kernel, (_spec(32, 16), _spec(16, 32), _spec(32, 32, dt="fp32")))


# ---- random instruction orders ---------------------------------------------------------------------

class _Tile:
    """A stand-in TileStore: what auto-sync reads of one (buffer, logical shape)."""

    autosync = True     # a pl.alloc tile: pyto's auto-sync orders it

    def __init__(self, buf, shape):
        self.buf, self.shape = buf, shape


_RECTS = [(0, 8, 0, 8), (0, 4, 0, 8), (4, 8, 0, 8), (0, 8, 0, 4), (0, 4, 0, 4), (2, 6, 2, 6)]


def _rect(rng):
    """Mostly a few rectangles that cover or overlap each other, sometimes any one."""
    if rng.random() < 0.8:
        return rng.choice(_RECTS)
    r0, c0 = rng.randrange(8), rng.randrange(8)
    return (r0, rng.randint(r0 + 1, 8), c0, rng.randint(c0 + 1, 8))


def _random_order(seed: int, n_body: int, loops: int):
    """(order, core) of random instructions repeated as a loop body with alternating tile-group slots; about
    one in six belongs to another core (1 or 2) with its own increasing indices."""
    rng = random.Random(seed)
    tiles = [[_Tile(buf, (8, 8)) for _ in range(2)] for buf in (Buf.L1, Buf.L0C, Buf.L0C, Buf.UB)]
    gms = [GMTensor(f"g{i}", (2, 8, 8), None, uid=i) for i in range(2)]
    pipes = [Pipe.M, Pipe.FIX, Pipe.M, Pipe.FIX, Pipe.MTE2, Pipe.MTE1, Pipe.V, Pipe.MTE3]
    phases = [None, None, AccPhase.Partial, AccPhase.Final, STPhase.Partial, STPhase.Final]

    def access(slot):
        if rng.random() < 0.25:
            g = rng.choice(gms)
            return ("gm", g, rng.randrange(2), _rect(rng))
        t = rng.randrange(len(tiles))
        return ("tile", t, (slot + rng.randrange(2)) % 2, _rect(rng))

    def template():
        core = 0 if rng.random() < 0.83 else rng.choice([1, 2])
        kind = rng.random()
        if core == 0 and kind < 0.15:
            op = rng.choice([Op.SET_FLAG, Op.WAIT_FLAG, Op.BARRIER, Op.SYNC_ALL])
            attrs = {}
            if op is Op.BARRIER:
                attrs["pipe"] = rng.choice([Pipe.ALL] + pipes)
            elif op in (Op.SET_FLAG, Op.WAIT_FLAG):
                attrs["key"] = (CROSS_CORE, 0, 2, "AIC", "AIV0") if rng.random() < 0.5 else (Pipe.M, Pipe.FIX, 0)
            return (op, rng.choice(pipes + [Pipe.S]), core, [], [], attrs)
        srcs = [access(0) for _ in range(rng.randrange(4))]
        dsts = [access(0) for _ in range(rng.randrange(3))]
        attrs = {"phase": rng.choice(phases)} if rng.random() < 0.5 else {}
        return (rng.choice([Op.LOAD, Op.STORE, Op.MOVE, Op.MMAD]), rng.choice(pipes), core, srcs, dsts, attrs)

    def make(tpl, it, index):
        op, pipe, core, srcs, dsts, attrs = tpl

        def acc(a):
            if a[0] == "gm":
                return pyto.ir.Access(a[1], a[3], a[2])
            return pyto.ir.Access(tiles[a[1]][(a[2] + it) % 2], a[3])
        return Instr(op, pipe, tuple(map(acc, srcs)), tuple(map(acc, dsts)), dict(attrs), None, core=core,
                     index=index)

    body = [template() for _ in range(n_body)]
    for j, tpl in enumerate(body):     # another core's copy of one of this core's instructions: same key but the core
        if tpl[2] == 0 and rng.random() < 0.15:
            body.insert(rng.randrange(len(body) + 1), (tpl[0], tpl[1], rng.choice([1, 2]), *tpl[3:]))
            break
    extra = [template() for _ in range(3)]
    counters = {0: 0, 1: 10_000, 2: 30_000}
    step = {0: 1, 1: 1, 2: -1}      # core 2's indices decrease: auto-sync orders by index, not position
    order = []
    for it, tpl in [(0, t) for t in extra] + [(it, t) for it in range(loops) for t in body] + \
            [(loops, t) for t in extra]:
        core = tpl[2]
        order.append(make(tpl, it, counters[core]))
        counters[core] += step[core]
    return order


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.integers(0, 2 ** 32), st.integers(1, 16), st.integers(1, 8), st.booleans(), st.booleans(),
       st.sampled_from(["traced", "tied", "shuffled"]))
def test_random_orders(seed, n_body, loops, data, wait, index):
    order = _random_order(seed, n_body, loops)
    if index != "traced":       # insert compares indices as the reference does, whatever they are
        values = [-1] * len(order) if index == "tied" else random.Random(seed).sample(range(len(order)), len(order))
        for ins, v in zip(order, values):
            ins.index = v
    ref, got = Deps(), Deps()
    autosync.insert_reference(order, 0, ref, data, wait)
    autosync.insert(order, 0, got, data, wait)
    assert _deps(order, got) == _deps(order, ref)
    COMPARED.append(len(order))


@pytest.mark.parametrize("first_foreign", [False, True])
def test_a_phased_write_key_equals_core_1s(first_foreign):
    """The reference keys a phased L0C write (batch, rect, True) and core 1's write (batch, rect, 1): equal in
    Python, so one replaces the other where it stands (the compiled loop's tags follow)."""
    c = _Tile(Buf.L0C, (8, 8))
    full = (0, 8, 0, 8)
    mm = Instr(Op.MMAD, Pipe.M, (), (pyto.ir.Access(c, full),), {"phase": AccPhase.Final}, None, core=0, index=0)
    fix = Instr(Op.MOVE, Pipe.FIX, (), (pyto.ir.Access(c, full),), {}, None, core=1, index=100)
    read = Instr(Op.LOAD, Pipe.MTE1, (pyto.ir.Access(c, full),), (), {}, None, core=0, index=1)
    read_m = Instr(Op.MMAD, Pipe.M, (pyto.ir.Access(c, full),), (), {}, None, core=0, index=2)
    write = Instr(Op.LOAD, Pipe.MTE2, (), (pyto.ir.Access(c, full),), {}, None, core=0, index=3)
    order = ([fix, mm] if first_foreign else [mm, fix]) + [read, read_m, write]
    ref, got = Deps(), Deps()
    autosync.insert_reference(order, 0, ref)
    autosync.insert(order, 0, got)
    assert _deps(order, got) == _deps(order, ref)


# ---- crosscore's orders: its splicing against the straightforward loops it replaced -----------------

def _plain_with(instrs, extra):
    order = []
    for i, ins in enumerate(instrs):
        order.extend(extra.get(i, ()))
        order.append(ins)
    order.extend(extra.get(len(instrs), ()))
    return order


def _plain_spliced(prog, real):
    count, extra = {}, {}
    for pos, marker in prog.markers:
        key = crosscore.cross_key(marker)
        if key is None:
            continue
        n = count.get(key, 0)
        count[key] = n + 1
        for ins in real.get(key, {}).get(n, ()):
            extra.setdefault(pos, []).append(ins)
    return _plain_with(prog.instrs, extra)


def _plain_aic_order(aic, aivs):
    cube = [i for i, ins in enumerate(aic.instrs) if ins.op is not Op.SYNC_ALL]
    syncs = [i for i, ins in enumerate(aic.instrs) if ins.op is Op.SYNC_ALL]
    extra = {}
    for prog in aivs:
        met = n_sync = 0
        for i, ins in enumerate(prog.instrs):
            while met < len(prog.markers) and prog.markers[met][0] <= i:
                met += 1
            if ins.op is Op.SYNC_ALL:
                n_sync += 1
            elif crosscore.cross_key(ins) is not None and ins.attrs["path"] == ("UB", "L1"):
                at = max(cube[met - 1] + 1 if met else 0, syncs[n_sync - 1] + 1 if n_sync else 0)
                extra.setdefault(at, []).append(ins)
    return _plain_with(aic.instrs, extra)


@pytest.mark.parametrize("M,N,D,BN,DK,mode", [(128, 512, 128, 128, 64, 0), (64, 256, 64, 64, 32, 2)])
def test_crosscore_orders(M, N, D, BN, DK, mode):
    from pyto_kernels.examples.flash_attention import flash_attention
    from pyto.ir import Role
    (progs,) = _traced_blocks(flash_attention, (_spec(M, D), _spec(N, D), _spec(N, D), _spec(M, D)),
                              dict(M=M, N=N, D=D, BN=BN, DK=DK, MODE=mode))
    real = {}
    for prog in progs:
        seen = {}
        for ins in prog.instrs:
            key = crosscore.cross_key(ins)
            if key is not None:
                n = seen.get(key, 0)
                seen[key] = n + 1
                real.setdefault(key, {}).setdefault(n, []).append(ins)
    aic, aivs = progs[0], [p for p in progs if p.role is not Role.AIC]
    assert list(map(id, crosscore._aic_order(aic, aivs))) == list(map(id, _plain_aic_order(aic, aivs)))
    assert len(crosscore._aic_order(aic, aivs)) > len(aic.instrs)
    for prog in aivs:
        assert list(map(id, crosscore._spliced(prog, real))) == list(map(id, _plain_spliced(prog, real)))
        assert len(crosscore._spliced(prog, real)) > len(prog.instrs)


def test_record():
    """The number of programs compared so far (pytest -s shows it)."""
    print(f"\nauto-sync compared on {len(COMPARED)} programs, {sum(COMPARED)} instructions")
