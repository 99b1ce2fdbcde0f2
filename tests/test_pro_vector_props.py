"""A property test of the vector op set: random vector programs (a sequence of elementwise ops, each over a random
valid region of its destination, on three UB tiles of a random shape and dtype, in one @pl.jit kernel) against an
independent numpy model written here: each op computed in float64 (int64 for int32) over the destination's valid
rectangle, sources read over the same rectangle, the result rounded once to the dtype (floats, to nearest even)
or wrapped (int32); bytes outside the rectangle keep what they held."""
import ml_dtypes
import numpy as np
from hypothesis import given, settings, strategies as st

import pyto.language as pl
from test_pro_vector import round_table

BF16 = ml_dtypes.bfloat16
DTYPES = {"fp16": (np.float16, pl.DT_FP16), "bf16": (BF16, pl.DT_BF16), "fp32": (np.float32, pl.DT_FP32),
          "int32": (np.int32, pl.DT_INT32)}
#: op: (arity, dtypes that take it); "s" = a scalar right-hand side
OPS = {"add": (2, "all"), "sub": (2, "all"), "mul": (2, "all"), "maximum": (2, "all"), "minimum": (2, "all"),
       "adds": ("s", "all"), "muls": ("s", "all"), "maxs": ("s", "all"), "divs": ("s", ("fp16", "fp32")),
       "neg": (1, "all"), "abs": (1, ("fp16", "fp32", "int32")), "relu": (1, ("fp16", "fp32", "int32")),
       "and_": (2, ("int32",)), "expands": (0, "all")}
_PL = {"adds": "add", "muls": "mul", "maxs": "maximum", "divs": "div"}
N_TILES = 3


def _round(x: np.ndarray, dt) -> np.ndarray:
    """float64 -> dt, to nearest even, by an independent route: numpy's direct conversion for fp16 and fp32
    (IEEE's, one rounding), the table of every value for bf16."""
    if dt is BF16:
        return round_table(x, BF16).astype(BF16)
    with np.errstate(over="ignore"):
        return x.astype(dt)


def model(prog, tiles: list, dt) -> list:
    """The program on numpy arrays: the reference."""
    t = [a.copy() for a in tiles]
    for op, d, srcs, scalar, (vr, vc) in prog:
        ins = [t[s][:vr, :vc] for s in srcs]
        if dt is np.int32:
            x = [a.astype(np.int64) for a in ins]
            s = int(scalar)
        else:
            x = [a.astype(np.float64) for a in ins]
            s = float(_round(np.float64(scalar), dt))
        base = _PL.get(op, op)
        if op == "expands":
            res = np.full((vr, vc), s, np.float64 if dt is not np.int32 else np.int64)
        elif op in ("neg", "abs", "relu"):
            res = {"neg": np.negative, "abs": np.abs, "relu": lambda v: np.maximum(v, 0)}[op](x[0])
        else:
            rhs = x[1] if OPS[op][0] == 2 else s
            res = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum,
                   "minimum": np.minimum, "div": np.divide, "and_": np.bitwise_and}[base](x[0], rhs)
        if dt is np.int32:
            t[d][:vr, :vc] = (np.mod(res, 2 ** 32) - np.where(np.mod(res, 2 ** 32) >= 2 ** 31, 2 ** 32, 0))
        else:
            with np.errstate(invalid="ignore"):
                t[d][:vr, :vc] = _round(res, dt)
    return t


def kernel_for(prog, shape, pdt):
    """The program as a @pl.jit kernel: load the three tiles, run the ops (each dst's valid shape set first), widen
    the valid shapes back and store."""
    rows, cols = shape

    @pl.jit
    def program(x0: pl.Tensor[[rows, cols], pdt], x1: pl.Tensor[[rows, cols], pdt], x2: pl.Tensor[[rows, cols], pdt],
                o0: pl.Tensor[[rows, cols], pdt], o1: pl.Tensor[[rows, cols], pdt], o2: pl.Tensor[[rows, cols], pdt]):
        tt = pl.TileType([rows, cols], pdt, pl.MemorySpace.Vec)
        tiles = [pl.make_tile(tt, addr=i * 0x1000, size=0x1000) for i in range(N_TILES)]
        with pl.section_vector():
            for t, x in zip(tiles, (x0, x1, x2)):
                pl.load(t, x)
            pl.system.bar_all()
            for op, d, srcs, scalar, valid in prog:
                pl.set_validshape(tiles[d], list(valid))
                fn = getattr(pl, _PL.get(op, op))
                if op == "expands":
                    fn(tiles[d], scalar)
                elif OPS[op][0] == "s":
                    fn(tiles[d], tiles[srcs[0]], scalar)
                else:
                    fn(tiles[d], *(tiles[s] for s in srcs))
            for t in tiles:
                pl.set_validshape(t, [rows, cols])
            pl.system.bar_all()
            for t, o in zip(tiles, (o0, o1, o2)):
                pl.store(o, t)
    return program


@st.composite
def programs(draw):
    dname = draw(st.sampled_from(sorted(DTYPES)))
    rows = draw(st.integers(1, 8))
    cols = draw(st.sampled_from([1, 5, 8, 16, 24, 40, 64]))
    ops = [o for o, (_, dts) in OPS.items() if dts == "all" or dname in dts]
    prog = []
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(ops))
        arity = OPS[op][0]
        n = {0: 0, 1: 1, 2: 2, "s": 1}[arity]
        d = draw(st.integers(0, N_TILES - 1))
        srcs = tuple(draw(st.integers(0, N_TILES - 1)) for _ in range(n))
        if dname == "int32":
            scalar = draw(st.integers(-2 ** 31, 2 ** 31 - 1))
        else:
            scalar = draw(st.sampled_from([-0.375, 0.1, 1.5, -3.0, 2.0 ** -9, 7.25]))
        valid = (draw(st.integers(1, rows)), draw(st.integers(1, cols)))
        prog.append((op, d, srcs, scalar, valid))
    seed = draw(st.integers(0, 2 ** 31 - 1))
    return dname, (rows, cols), tuple(prog), seed


@settings(derandomize=True, deadline=None, max_examples=60)
@given(programs())
def test_random_vector_programs_match_the_numpy_model(case):
    dname, shape, prog, seed = case
    dt, pdt = DTYPES[dname]
    rng = np.random.default_rng(seed)
    if dt is np.int32:
        xs = [rng.integers(-2 ** 31, 2 ** 31, shape, dtype=np.int64).astype(np.int32) for _ in range(N_TILES)]
    else:
        xs = [rng.uniform(-4, 4, shape).astype(dt) for _ in range(N_TILES)]
    outs = [np.zeros(shape, dt) for _ in range(N_TILES)]
    kernel_for(prog, shape, pdt)(*xs, *outs)
    want = model(prog, xs, dt)
    for i, (got, w) in enumerate(zip(outs, want)):
        g64, w64 = np.asarray(got, np.float64), np.asarray(w, np.float64)
        assert np.array_equal(g64, w64, equal_nan=True), (i, prog, np.argwhere(~((g64 == w64) |
                                                                                (np.isnan(g64) & np.isnan(w64)))))
