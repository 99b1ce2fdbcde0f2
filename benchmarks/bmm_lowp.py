"""BMM on the 950's low-precision cube: bf16, FP8 (E4M3 x E5M2), MXFP8 and MXFP4 (E2M1 x E1M2) of the same shapes
through the planner, in timing mode: the branch each gets, its simulated T_total and the planner's estimate, and the
time against bf16's beside the ratio the roofline predicts (max(FLOPs / peak, compulsory bytes / W_GM): FP8 halves the
input bytes and doubles the peak, MXFP4 quarters them and doubles it again; MX adds one E8M0 byte per 32 elements).

Run: python benchmarks/bmm_lowp.py [--chip NAME]
"""
import argparse

import os as _os, sys as _sys  # noqa: E401 - blas_threads lives beside this script, which may be loaded by path
_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
import blas_threads  # noqa: E402,I001 - first: pins the BLAS thread count before numpy loads
import pyto
from pyto_kernels.bmm import bmm, plan
from pyto_kernels.bmm.cost import roofline_us

SHAPES = [((8, 1024, 4096), (8, 4096, 1024)), ((1, 4096, 2048), (1, 2048, 4096)), ((64, 128, 512), (64, 512, 128)),
          ((2, 64, 16384), (2, 16384, 64)), ((32, 256, 1024), (1, 1024, 256)), ((4, 100, 640), (4, 640, 72))]
#: kind -> (A dtype, B dtype, MX)
KINDS = {"bf16": ("bf16", "bf16", False), "fp8": ("fp8e4m3fn", "fp8e5m2", False),
         "mxfp8": ("fp8e4m3fn", "fp8e5m2", True), "mxfp4": ("fp4e2m1", "fp4e1m2", True)}


def stored(shape, dtype: str) -> tuple:
    """An operand's shape as stored: FP4's last axis packs two elements a byte."""
    return tuple(shape[:-1]) + (shape[-1] // 2,) if dtype.startswith("fp4") else tuple(shape)


def run(a_shape, b_shape, kind: str, chip: str):
    """(plan, simulated us) of one shape and kind, timing mode."""
    da, db, mx = KINDS[kind]
    K = a_shape[-1]
    kw = {}
    if mx:
        kw = dict(scale_a=pyto.spec(tuple(a_shape[:-1]) + (K // 32,), "fp8e8m0"),
                  scale_b=pyto.spec(tuple(b_shape[:-2]) + (K // 32, b_shape[-1]), "fp8e8m0"))
    a_shape, b_shape = stored(a_shape, da), stored(b_shape, db)
    p = plan(a_shape, b_shape, da, chip, dtype_b=None if db == da else db, mx=mx)
    _, rep = bmm(pyto.spec(a_shape, da), pyto.spec(b_shape, db), chip=chip, **kw)
    return p, rep.time_us


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chip", default="ascend950pr")
    args = ap.parse_args()
    print(f"{blas_threads.describe()}; chip {args.chip}; timing mode")
    print(f"{'A @ B':<34} {'kind':<6} {'branch':<11} {'sim us':>9} {'est us':>9} {'est/sim':>8} "
          f"{'sim/bf16':>9} {'roofline/bf16':>14}")
    for a_shape, b_shape in SHAPES:
        base = roof_base = None
        for kind in KINDS:
            p, us = run(a_shape, b_shape, kind, args.chip)
            roof = roofline_us(p.problem, p.chip_spec)
            base, roof_base = (us, roof) if base is None else (base, roof_base)
            print(f"{str(a_shape) + ' @ ' + str(b_shape):<34} {kind:<6} {p.branch:<11} {us:>9.2f} "
                  f"{p.estimate.t_total:>9.2f} {p.estimate.t_total / us:>8.2f} {us / base:>9.2f} "
                  f"{roof / roof_base:>14.2f}")


if __name__ == "__main__":
    main()
