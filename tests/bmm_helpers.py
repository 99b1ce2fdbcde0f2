"""What the BMM branch tests share: operands, forcing one branch through plan -> operands -> launch,
and checking against the float64 reference (pyto_kernels.bmm.api.check)."""
import importlib

import ml_dtypes
import numpy as np

import pyto
from pyto_kernels.bmm.api import check
from pyto_kernels.bmm.common import operands
from pyto_kernels.bmm.planner import plan

CHIP = pyto.load_chip("ascend950pr")
NP = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp32": np.float32, "int8": np.int8}


def stored(shape, transpose):
    """The stored shape of a logical [..., r, c] operand (DN: [..., c, r])."""
    return tuple(shape[:-2]) + ((shape[-1], shape[-2]) if transpose else tuple(shape[-2:]))


def inputs(a_shape, b_shape, dt, bias_shape=None, seed=0):
    """Random operands: standard normal floats with an fp32 bias; int8 in [-128, 128) with an int32 bias
    well beyond fp32's exact range."""
    rng = np.random.default_rng(seed)
    if dt == "int8":
        a = rng.integers(-128, 128, a_shape).astype(np.int8)
        b = rng.integers(-128, 128, b_shape).astype(np.int8)
        bias = None if bias_shape is None else rng.integers(-2**20, 2**20, bias_shape).astype(np.int32)
    else:
        a = rng.standard_normal(a_shape).astype(NP[dt])
        b = rng.standard_normal(b_shape).astype(NP[dt])
        bias = None if bias_shape is None else rng.standard_normal(bias_shape).astype(np.float32)
    return a, b, bias


def run_branch(a, b, bias=None, *, branch, transpose_a=False, transpose_b=False, **plan_kw):
    """(result or None, report, plan) of `branch` forced on these operands (numpy or pyto.spec)."""
    dt = a.dtype if isinstance(a, pyto.Spec) else pyto.dtypes.as_dtype(a.dtype)
    p = plan(a.shape, b.shape, dt, CHIP, bias=bias is not None, transpose_a=transpose_a, transpose_b=transpose_b,
             branch=branch, **plan_kw)
    ops = operands(p.problem, a, b, bias)
    timing = isinstance(ops.out, pyto.Spec)
    rep = importlib.import_module(f"pyto_kernels.bmm.{branch}").launch(p, ops, mode="timing" if timing else "full")
    return (None if timing else ops.out), rep, p


def ok(a_shape, b_shape, dt="fp16", bias_shape=None, seed=0, *, branch, **kw):
    """Run `branch` on random operands given in GM layout (DN shapes with the transpose flags) and check."""
    a, b, bias = inputs(a_shape, b_shape, dt, bias_shape, seed)
    c, rep, p = run_branch(a, b, bias, branch=branch, **kw)
    why = check(c, a, b, bias, transpose_a=kw.get("transpose_a", False), transpose_b=kw.get("transpose_b", False))
    assert not why, f"{a_shape} @ {b_shape} {dt} {kw}: {why}\n{p.tiling}"
    return c, rep, p
