"""BlockCache.signature keys exactly a block's structure (pyto/emulator/encode/blockcache.py's docstring): blocks
that differ only in where in GM they work share a signature; a tile rectangle, an attribute, an allocation or
the GM overlap of two pipes' accesses tells them apart."""
from __future__ import annotations

import copy
import importlib
import random

import pytest
from hypothesis import given, settings, strategies as st

import pyto
import pyto.language as pl
from pyto.chip import load_chip
from pyto.emulator.encode.blockcache import BlockCache, _alike, _Reference
from pyto.ir import Access, Buf, GMTensor, Instr, Loc, Op, Pipe, Role, TileStore
from pyto.language.trace import Program
from test_pro_vector_props import N_TILES, OPS, _PL, programs as vector_programs

run_module = importlib.import_module("pyto.emulator.run")


@pl.kernel
def _blocks(a, out, *, CASE: str):
    """Block b loads and stores the 32 x 32 block b of its tensors; one block (1) differs as CASE says."""
    b = pl.get_block_idx()
    with pl.section_cube():
        t = pl.alloc(pl.L1, [64, 32], a.dtype)
        c = pl.alloc(pl.L0C, [32, 32], pl.DT_FP32)
        view = t[32:64, :] if CASE == "rect" and b == 1 else t[0:32, :]
        pl.load(view, a, [32 * b, 0])
        if CASE == "extra alloc" and b == 1:
            pl.alloc(pl.L0A, [32, 32], a.dtype)
        a0 = pl.alloc(pl.L0A, [32, 32], a.dtype, name="a0")
        pl.move(a0, view)
        pl.store(out, c, [32 * b, 0], atomic=pl.AtomicType.AtomicAdd if CASE == "attribute" and b == 1 else None)
        if CASE == "overlap":     # FIX writes out and MTE2 reads it back: the rows it wrote, block 1 block 0's
            pl.load(t[0:32, :], out, [32 * b if b != 1 else 0, 0])


def _signatures(case: str, blocks: int = 3) -> tuple:
    """(each block's signature, each block's GM rows of its first load) of _blocks."""
    specs = (pyto.spec((32 * blocks, 32), "fp16"), pyto.spec((32 * blocks, 32), "fp16"))
    kernel = _blocks
    arrays, params = kernel.bind(specs, {"CASE": case})
    tensors = run_module._gm_tensors(kernel, arrays)
    traced = list(run_module.trace_blocks(kernel, tensors, run_module._check_params(kernel, params),
                                          load_chip("ascend950pr"), blocks))
    cache = BlockCache()
    sigs = [cache.signature(progs) for progs in traced]
    rows = [progs[0].instrs[0].attrs["r0"] for progs in traced]
    return sigs, rows


def test_blocks_differing_only_in_gm_position_share_a_signature():
    sigs, rows = _signatures("same")
    assert rows == [0, 32, 64]                 # they do work in different places
    assert sigs[0] is not None and sigs[0] == sigs[1] == sigs[2]


def test_a_tile_rectangle_tells_blocks_apart():
    sigs, _ = _signatures("rect")
    assert sigs[0] == sigs[2] != sigs[1]


def test_an_attribute_tells_blocks_apart():
    sigs, _ = _signatures("attribute")
    assert sigs[0] == sigs[2] != sigs[1]


def test_an_allocation_tells_blocks_apart():
    sigs, _ = _signatures("extra alloc")
    assert sigs[0] == sigs[2] != sigs[1]


def test_gm_overlap_between_pipes_tells_blocks_apart():
    """Blocks 0 and 2 read back the rows their Fixpipe wrote (an overlap auto-sync orders), block 1 rows it did not
    write: only where the regions lie relative to each other counts."""
    sigs, _ = _signatures("overlap")
    assert sigs[0] == sigs[2] != sigs[1]


# ---- the comparison with the reference block (BlockCache.signature's shortcut, `_alike`) ------------------------
# signature() compares a block with a reference block (one it keyed in full), field by field, and on a match hands
# back that block's signature. It must hand every block the signature signature_in_full (the key tuples, as before) gives it,
# and its verdict must be the signatures' equality.
def _assert_paths_agree(blocks: list) -> None:
    """signature() gives every block signature_in_full's signature, and comparing any block with any other as the
    reference says alike just when their full signatures are equal."""
    full = BlockCache()
    want = [full.signature_in_full(progs) for progs in blocks]
    cache = BlockCache()
    got = [cache.signature(progs) for progs in blocks]
    assert got == want
    for i, ref_progs in enumerate(blocks):
        if want[i] is None:
            continue
        for j, progs in enumerate(blocks):
            assert _alike(progs, _Reference(ref_progs, want[i])) == (want[j] == want[i]), (i, j)


def _traced(kernel, specs: tuple, params: dict, blocks: int) -> list:
    arrays, params = kernel.bind(specs, params)
    tensors = run_module._gm_tensors(kernel, arrays)
    return list(run_module.trace_blocks(kernel, tensors, run_module._check_params(kernel, params),
                                        load_chip("ascend950pr"), blocks))


@pytest.mark.parametrize("case", ["same", "rect", "attribute", "extra alloc", "overlap"])
def test_the_reference_comparison_agrees_on_the_kernels_above(case):
    blocks = 4
    specs = (pyto.spec((32 * blocks, 32), "fp16"), pyto.spec((32 * blocks, 32), "fp16"))
    traced = _traced(_blocks, specs, {"CASE": case}, blocks)
    _assert_paths_agree(traced)
    assert BlockCache().signature(traced[0]) is not None


@pytest.mark.parametrize("shape", [(264, 130, 192), (256, 128, 256)])
def test_the_reference_comparison_agrees_on_matmul_blocks(shape):
    """The example matmul, with edge blocks (rows, columns and K past the last whole tile) and without."""
    from pyto_kernels.examples.matmul_pingpong import matmul_pingpong
    m, k, n = shape
    specs = (pyto.spec((m, k), "fp16"), pyto.spec((k, n), "fp16"), pyto.spec((m, n), "fp16"))
    _assert_paths_agree(_traced(matmul_pingpong, specs, dict(TM=64, TN=64, TK=32), 5))


def test_a_block_alike_the_reference_gets_its_signature_object():
    specs = (pyto.spec((32 * 4, 32), "fp16"), pyto.spec((32 * 4, 32), "fp16"))
    traced = _traced(_blocks, specs, {"CASE": "same"}, 4)
    cache = BlockCache()
    sigs = [cache.signature(progs) for progs in traced]
    assert all(s is sigs[0] for s in sigs), "blocks 1-3 should have matched block 0 without being keyed in full"


@pl.kernel
def _vector_blocks(x, out, *, PROGS: tuple, PICK: tuple, ROWS: int, COLS: int):
    """Block b runs the random vector program PROGS[PICK[b]] (test_pro_vector_props' generator) on three UB tiles
    loaded from its own rows of x, and stores them to its rows of out."""
    b = pl.get_block_idx()
    with pl.section_vector():
        tiles = [pl.alloc(pl.UB, [ROWS, COLS], x.dtype) for _ in range(N_TILES)]
        for t in tiles:
            pl.load(t, x, [ROWS * b, 0])
        for op, d, srcs, scalar, valid in PROGS[PICK[b]]:
            view = tiles[d][0:valid[0], 0:valid[1]]
            fn = getattr(pl, _PL.get(op, op))
            if op == "expands":
                fn(view, scalar)
            elif OPS[op][0] == "s":
                fn(view, tiles[srcs[0]][0:valid[0], 0:valid[1]], scalar)
            else:
                fn(view, *(tiles[s][0:valid[0], 0:valid[1]] for s in srcs))
        for t in tiles:
            pl.store(out, t, [ROWS * b, 0])


@settings(max_examples=25)
@given(a=vector_programs(), b=vector_programs(), pick=st.lists(st.integers(0, 1), min_size=2, max_size=6))
def test_random_vector_kernels_agree(a, b, pick):
    """Random vector programs (two per launch, each block runs one): the two paths give every block the same
    signature."""
    dname, (rows, cols), prog_a, _ = a
    prog_b = b[2]
    blocks = len(pick)
    specs = (pyto.spec((rows * blocks, cols), dname), pyto.spec((rows * blocks, cols), dname))
    try:
        traced = _traced(_vector_blocks, specs, {"PROGS": (prog_a, prog_b), "PICK": tuple(pick), "ROWS": rows,
                                                 "COLS": cols}, blocks)
    except pyto.errors.PytoError:       # an op the second program's dtype does not take on the first's tiles
        return
    _assert_paths_agree(traced)


# ---- synthetic blocks: every field the signature keys, changed one at a time --------------------------------------
_LOCS = (Loc("k.py", 1, "a"), Loc("k.py", 2, "b"))
_GM = (GMTensor("a", (4, 64, 64), pl.DT_FP16, uid=0), GMTensor("out", (4, 64, 64), pl.DT_FP16, uid=1))


def _spec(rng: random.Random, n: int) -> dict:
    """A random block plan: instructions over a few stores and the two GM tensors, some GM transfers, markers."""
    instrs = []
    for _ in range(n):
        kind = rng.choice(["load", "store", "tile", "tile"])
        attrs = {"vr": rng.choice([8, 16]), "flag": rng.choice([True, False])}
        if kind in ("load", "store"):
            gm = {"t": rng.choice([0, 1]), "r": rng.choice([0, 8, 16]), "b": rng.choice([0, 1]),
                  "parts": rng.random() < 0.3, "prect": (0, 8, 0, 8)}
            attrs = {"batch": 0, "r0": 0, "c0": 0, **attrs}
        else:
            gm = None
        tiles = [(rng.randrange(4), rng.choice([(0, 8, 0, 8), (8, 16, 0, 8)])) for _ in range(rng.choice([1, 2]))]
        instrs.append(dict(kind=kind, op=rng.choice([Op.LOAD, Op.MOVE, Op.VBINARY]),
                           pipe=rng.choice([Pipe.MTE2, Pipe.V, Pipe.MTE3]), name=rng.choice(["", "x"]),
                           loc=rng.randrange(2), attrs=attrs, gm=gm, tiles=tiles, share=rng.random() < 0.5,
                           ndst=rng.choice([0, 1])))
    stores = [dict(buf=rng.choice([Buf.UB, Buf.L1]), shape=(16, 8), dtype=rng.choice([pl.DT_FP16, pl.DT_FP32]),
                   name=rng.choice(["s", "t"]), key=k) for k in range(4)]
    markers = [(rng.randrange(max(n, 1)), rng.randrange(4)) for _ in range(rng.choice([0, 0, 1]))]
    return dict(instrs=instrs, stores=stores, markers=markers, roles=[Role.AIC] if rng.random() < 0.5 else
                [Role.AIV0, Role.AIV1])


def _build(spec: dict, block: int, shift: int) -> list:
    """The block's programs from a plan; its GM transfers `shift` rows further on (a GM position, not keyed)."""
    progs = []
    for r, role in enumerate(spec["roles"]):
        prog = Program(block, role)
        stores = [TileStore(s["buf"], s["shape"], s["shape"], s["dtype"], "ND", (1, 1), s["name"], s["key"],
                            block * 3 + int(role)) for s in spec["stores"]]
        views: dict = {}
        for i, d in enumerate(spec["instrs"]):
            tiles = []
            for sid, rect in d["tiles"]:
                if d["share"] and (sid, rect) in views:     # one Access per view, or a fresh equal one
                    tiles.append(views[(sid, rect)])
                else:
                    tiles.append(views.setdefault((sid, rect), Access(stores[sid], rect)))
            attrs = dict(d["attrs"])
            cut = len(tiles) - d["ndst"]
            srcs, dsts = tuple(tiles[:cut]), tuple(tiles[cut:])
            if d["gm"] is not None:
                g = d["gm"]
                row = g["r"] + shift
                acc = Access(_GM[g["t"]], (row, row + 8, 0, 8), g["b"]) if not g.get("as_tile") else \
                    Access(stores[0], (0, 8, 0, 8))
                attrs.update(batch=g["b"], r0=row)
                if g["parts"]:
                    attrs["parts"] = [(row, g["prect"])]
                srcs, dsts = ((acc,), tuple(tiles)) if d["kind"] == "load" else (tuple(tiles), (acc,))
            prog.instrs.append(Instr(d["op"], d["pipe"], srcs, dsts, attrs, _LOCS[d["loc"]], name=d["name"]))
        for pos, sid in spec["markers"]:
            move = Instr(Op.MOVE, Pipe.FIX, (Access(stores[0], (0, 8, 0, 8)),), (Access(stores[sid], (0, 8, 0, 8)),),
                         {"path": ("L0C", "UB")}, _LOCS[0])
            prog.markers.append((pos, move))
        progs.append(prog)
    return progs


def _mutated(spec: dict, rng: random.Random, how: str) -> dict:
    """The plan with one thing changed as `how` says (each a change the signature keys, or one it must not)."""
    s = copy.deepcopy(spec)
    ins = s["instrs"]
    gms = [d for d in ins if d["gm"] is not None]
    if how == "attr value" and ins:
        rng.choice(ins)["attrs"]["vr"] += 1
    elif how == "attr order" and ins:
        d = rng.choice(ins)
        d["attrs"] = dict(reversed(list(d["attrs"].items())))
    elif how == "attr extra" and ins:
        rng.choice(ins)["attrs"]["extra"] = 1
    elif how == "tile rect" and ins:
        d = rng.choice(ins)
        d["tiles"][0] = (d["tiles"][0][0], (0, 4, 0, 8))
    elif how == "tile store" and ins:
        d = rng.choice(ins)
        d["tiles"][0] = ((d["tiles"][0][0] + 1) % 4, d["tiles"][0][1])
    elif how == "store name":
        rng.choice(s["stores"])["name"] += "2"
    elif how == "store dtype":
        st_ = rng.choice(s["stores"])
        st_["dtype"] = pl.DT_FP32 if st_["dtype"] is pl.DT_FP16 else pl.DT_FP16
    elif how == "marker":
        s["markers"] = [(0, 1)] if not s["markers"] else []
    elif how == "marker store" and s["markers"]:
        s["markers"] = [(p, (k + 1) % 4) for p, k in s["markers"]]
    elif how == "length" and ins:
        ins.pop(rng.randrange(len(ins)))
    elif how == "op" and ins:
        d = rng.choice(ins)
        d["op"] = Op.VBINARY if d["op"] is not Op.VBINARY else Op.LOAD
    elif how == "loc" and ins:
        d = rng.choice(ins)
        d["loc"] = 1 - d["loc"]
    elif how == "name" and ins:
        rng.choice(ins)["name"] += "y"
    elif how == "gm uid" and gms:
        g = rng.choice(gms)["gm"]
        g["t"] = 1 - g["t"]
    elif how == "gm overlap" and gms:      # one transfer moved relative to the others (in every block alike)
        rng.choice(gms)["gm"]["r"] += 4
    elif how == "gm batch" and gms:
        g = rng.choice(gms)["gm"]
        g["b"] = 1 - g["b"]
    elif how == "parts" and gms:
        g = rng.choice(gms)["gm"]
        g["parts"] = not g["parts"]
    elif how == "parts rect" and [d for d in gms if d["gm"]["parts"]]:
        rng.choice([d for d in gms if d["gm"]["parts"]])["gm"]["prect"] = (0, 4, 0, 8)
    elif how == "split" and [d for d in ins if d["gm"] is None and len(d["tiles"]) == 2]:
        d = rng.choice([d for d in ins if d["gm"] is None and len(d["tiles"]) == 2])
        d["ndst"] = 1 - d["ndst"]
    elif how == "attr moved":           # the last attribute of one instruction moved to the front of the next
        at = [i for i in range(len(ins) - 1) if ins[i]["gm"] is None and ins[i + 1]["gm"] is None]
        if at:
            i = rng.choice(at)
            name, value = ins[i]["attrs"].popitem()
            ins[i + 1]["attrs"] = {name: value, **ins[i + 1]["attrs"]}
    elif how == "store split" and ins:   # one access to a second store, the first's twin (same key, name, ...)
        d = rng.choice(ins)
        s["stores"].append(dict(s["stores"][d["tiles"][0][0]]))
        d["tiles"][0] = (len(s["stores"]) - 1, d["tiles"][0][1])
    elif how == "gm as tile" and gms:
        rng.choice(gms)["gm"]["as_tile"] = True
    elif how == "sharing":               # an Access object shared, or equal ones: not keyed
        for d in ins:
            d["share"] = not d["share"]
    elif how == "roles":
        s["roles"] = [Role.AIC] if len(s["roles"]) == 2 else [Role.AIV0, Role.AIV1]
    return s


_HOW = ["none", "attr value", "attr order", "attr extra", "tile rect", "tile store", "store name", "store dtype",
        "marker", "marker store", "length", "op", "loc", "name", "gm uid", "gm overlap", "gm batch", "parts",
        "parts rect", "split", "attr moved", "store split", "gm as tile", "sharing", "roles"]


@pytest.mark.parametrize("how", _HOW)
def test_blocks_differing_in_one_field(how):
    """For each field: blocks from one plan (at different GM rows) and from the plan with that field changed,
    interleaved; the two paths agree on every block and every pair."""
    for seed in range(12):
        rng = random.Random(seed)
        spec = _spec(rng, rng.randrange(1, 9))
        other = _mutated(spec, rng, how)
        plans = [spec, spec, other, other, spec, other]
        _assert_paths_agree([_build(p, b, shift=8 * b) for b, p in enumerate(plans)])


@settings(max_examples=60)
@given(seed=st.integers(0, 2 ** 31 - 1), hows=st.lists(st.sampled_from(_HOW), min_size=1, max_size=3),
       order=st.lists(st.integers(0, 3), min_size=2, max_size=8), n=st.integers(0, 10))
def test_random_blocks_agree(seed, hows, order, n):
    """Random plans and random changes of them, in a random block order, at random GM shifts."""
    rng = random.Random(seed)
    plans = [_spec(rng, n)]
    for how in hows:
        plans.append(_mutated(rng.choice(plans), rng, how))
    _assert_paths_agree([_build(plans[k % len(plans)], b, shift=rng.choice([0, 8, 24]))
                         for b, k in enumerate(order)])


def test_an_attribute_that_cannot_be_hashed():
    """A value equal to the reference's but unhashable (a set for a frozenset): keyed in full the block has no
    signature, and the comparison must not give it the reference's."""
    spec = _spec(random.Random(3), 6)
    kinds = [d["gm"] is None for d in spec["instrs"]]
    for i in (kinds.index(True), kinds.index(False)):     # a plain instruction, a GM transfer
        blocks = [_build(spec, b, 8 * b) for b in range(3)]
        for progs, value in zip(blocks, (frozenset({1}), {1}, frozenset({1}))):
            progs[0].instrs[i].attrs["v"] = value
        full = BlockCache()
        want = [full.signature_in_full(p) for p in blocks]
        assert want[1] is None and want[0] == want[2] is not None
        cache = BlockCache()
        assert [cache.signature(p) for p in blocks] == want


def _verdicts(blocks: list, monkeypatch) -> list:
    """The comparisons signature() makes over the blocks (each one's verdict), after checking that every block gets
    its full signature."""
    import pyto.emulator.encode.blockcache as bc
    real, made = bc._alike, []

    def recording(progs, ref):
        made.append(real(progs, ref))
        return made[-1]
    monkeypatch.setattr(bc, "_alike", recording)
    cache, full = BlockCache(), BlockCache()
    assert [cache.signature(p) for p in blocks] == [full.signature_in_full(p) for p in blocks]
    return made


def test_the_reference_outlives_one_block_unlike_it(monkeypatch):
    """Blocks alternating between two plans: the reference stays the first plan's block, so every block of that
    plan after the first is matched."""
    rng = random.Random(5)
    a = _spec(rng, 6)
    b = _mutated(a, rng, "tile rect")
    made = _verdicts([_build(b if i % 2 else a, i, 8 * i) for i in range(40)], monkeypatch)
    assert made == [False, True] * 19 + [False]


def test_a_new_plan_becomes_the_reference_after_two_blocks(monkeypatch):
    rng = random.Random(6)
    a = _spec(rng, 6)
    b = _mutated(a, rng, "attr value")
    made = _verdicts([_build(a if i < 10 else b, i, 8 * i) for i in range(20)], monkeypatch)
    assert made == [True] * 9 + [False, False] + [True] * 8


def test_blocks_all_unlike_are_compared_ever_less_often(monkeypatch):
    rng = random.Random(7)
    plans = [_spec(rng, 6)]
    for _ in range(63):
        plans.append(_mutated(plans[-1], rng, "attr value"))
    made = _verdicts([_build(p, i, 8 * i) for i, p in enumerate(plans)], monkeypatch)
    assert not any(made) and len(made) < 16, made


def test_the_split_of_operands_into_srcs_and_dsts():
    """Two tiles as (srcs, dsts) = ((t0, t1), ()) or ((t0,), (t1,)): the same accesses in the same order, keyed
    apart by the lengths alone."""
    spec = _spec(random.Random(0), 1)
    spec["instrs"][0].update(gm=None, kind="tile", tiles=[(0, (0, 8, 0, 8)), (1, (0, 8, 0, 8))], ndst=0)
    spec["roles"] = [Role.AIC]
    split = copy.deepcopy(spec)
    split["instrs"][0]["ndst"] = 1
    blocks = [_build(p, b, 0) for b, p in enumerate([spec, spec, split, split, spec])]
    _assert_paths_agree(blocks)
    full = BlockCache()
    assert full.signature_in_full(blocks[0]) != full.signature_in_full(blocks[2])


def _one_load() -> dict:
    """A plan of one program: a GM load into store 1, then a tile instruction on store 1 (store 0 unused)."""
    spec = _spec(random.Random(1), 2)
    spec["roles"], spec["markers"] = [Role.AIC], []
    load, tile = spec["instrs"]
    load.update(kind="load", gm={"t": 0, "r": 0, "b": 0, "parts": False, "prect": (0, 8, 0, 8)},
                attrs={"batch": 0, "r0": 0, "c0": 0, "vr": 8}, tiles=[(1, (0, 8, 0, 8))])
    tile.update(kind="tile", gm=None, attrs={"vr": 8, "k": 1}, tiles=[(1, (0, 8, 0, 8))], ndst=0)
    return spec


def test_a_gm_access_where_the_reference_has_a_tile():
    """The load's GM operand replaced by an access to store 0, used nowhere else: the objects still match one to
    one, only their kinds differ."""
    spec = _one_load()
    other = copy.deepcopy(spec)
    other["instrs"][0]["gm"]["as_tile"] = True
    _assert_paths_agree([_build(p, b, 8 * b) for b, p in enumerate([spec, other, spec, other])])


def test_an_attribute_moved_to_the_next_instruction():
    """The same attribute names and values in the same order over the block, split between two instructions
    differently: keyed apart."""
    spec = _one_load()
    spec["instrs"][0].update(gm=None, kind="tile", attrs={"vr": 8, "j": 2})
    other = copy.deepcopy(spec)
    other["instrs"][0]["attrs"] = {"vr": 8}
    other["instrs"][1]["attrs"] = {"j": 2, "vr": 8, "k": 1}
    spec["instrs"][1]["attrs"] = {"vr": 8, "k": 1}
    _assert_paths_agree([_build(p, b, 8 * b) for b, p in enumerate([spec, other, spec, other])])
