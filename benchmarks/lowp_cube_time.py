"""Cube time of the MX matmuls on the emulated Ascend 950PR: MXFP8 and MXFP4 against FP16 of the same shape.

For each shape one K-loop kernel per kind (FP16 pl.matmul, MXFP8 E4M3 x E5M2 and MXFP4 E2M1 x E1M2 pl.matmul_mx; the
same tiles, rings and loop), simulated in timing mode: the M pipe's busy cycles, T_total, and their ratios to FP16's,
beside the ratio the chip table predicts for the M pipe (ceil(m/16) ceil(n/16) ceil(k/k0) steps per MMAD at
cube.<kind>_cycles_per_step plus cube.mmad_head_cycles; k0 = 16, 32, 64). The M-pipe ratio must equal the prediction
(tests/test_lowp_fp4.py asserts it for single MMADs); T_total also carries the loads, which the 4-bit data halves.

Run: python benchmarks/lowp_cube_time.py [--chip NAME]
"""
import argparse
import math

import os as _os, sys as _sys  # noqa: E401 - blas_threads lives beside this script, which may be loaded by path
_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
import blas_threads  # noqa: E402,I001 - first: pins the BLAS thread count before numpy loads
import pyto
import pyto.language as pl

TM = TN = 64          # output tile
TK = 128              # K step (two MX scale pairs)
MS = pl.MemorySpace
E8 = pl.DT_FP8E8M0
#: kind -> (lhs dtype, rhs dtype, k0, the table's cube_cycles_per_step item)
KINDS = {"fp16": (pl.DT_FP16, pl.DT_FP16, 16, "fp16"),
         "mxfp8": (pl.DT_FP8E4M3FN, pl.DT_FP8E5M2, 32, "mxfp8"),
         "mxfp4": (pl.DT_FP4E2M1, pl.DT_FP4E1M2, 64, "fp4e2m1")}
SHAPES = [(256, 1024, 256), (512, 2048, 512), (128, 4096, 192), (1024, 1024, 1024)]


def tt(shape, dtype, mem, **kw):
    return pl.TileType(shape=shape, dtype=dtype, target_memory=mem, **kw)


def kloop(M: int, K: int, N: int, kind: str):
    """C [M, N] fp32 = A [M, K] @ B [K, N]: TM x TN output tiles, a K loop of TK, every ring double-buffered under
    auto_mutex. MX kinds load E8M0 scales beside the data (ScaleLeft / ScaleRight at the data address >> 4); FP4
    tensors are packed pairs ([M, K/2], [K, N/2])."""
    da, db, _, _ = KINDS[kind]
    mx, fp4 = kind != "fp16", kind == "mxfp4"
    a_shape, b_shape = ([M, K // 2], [K, N // 2]) if fp4 else ([M, K], [K, N])
    P = K // 64

    @pl.jit(auto_mutex=True)
    def kern(a: pl.Tensor[a_shape, da], b: pl.Tensor[b_shape, db], scale_a: pl.Tensor[[M, P, 2], E8],
             scale_b: pl.Tensor[[P, N, 2], E8], c: pl.Tensor[[M, N], pl.DT_FP32]):
        a_l1 = pl.make_tile_group(type=tt([TM, TK], da, MS.Mat), addrs=0x00000, mutex_ids=[0, 1])
        b_l1 = pl.make_tile_group(type=tt([TK, TN], db, MS.Mat), addrs=0x20000, mutex_ids=[2, 3])
        a_left = pl.make_tile_group(type=tt([TM, TK], da, MS.Left), addrs=[0x0, 0x4000], mutex_ids=[8, 9])
        b_right = pl.make_tile_group(type=tt([TK, TN], db, MS.Right), addrs=[0x0, 0x4000], mutex_ids=[10, 11])
        if mx:
            sa_l1 = pl.make_tile_group(type=tt([TM, TK // 32], E8, MS.Mat, layout=pl.ZZ), addrs=0x40000,
                                       mutex_ids=[4, 5])
            sb_l1 = pl.make_tile_group(type=tt([TK // 32, TN], E8, MS.Mat, layout=pl.NN), addrs=0x41000,
                                       mutex_ids=[6, 7])
            sa_l0 = pl.make_tile_group(type=tt([TM, TK // 32], E8, MS.ScaleLeft), addrs=[0x0, 0x400],
                                       mutex_ids=[12, 13])
            sb_l0 = pl.make_tile_group(type=tt([TK // 32, TN], E8, MS.ScaleRight), addrs=[0x0, 0x400],
                                       mutex_ids=[14, 15])
        c_acc = pl.make_tile_group(type=tt([TM, TN], pl.DT_FP32, MS.Acc), addrs=0x0, mutex_ids=[16])
        with pl.section_cube():
            for mi in pl.range(0, M, TM):
                for ni in pl.range(0, N, TN):
                    ac = c_acc.current()
                    for ki in pl.range(0, K, TK):
                        x, y, al, br = a_l1.next(), b_l1.next(), a_left.next(), b_right.next()
                        pl.load(x, a, [mi, ki // 2] if fp4 else [mi, ki])
                        pl.load(y, b, [ki, ni // 2] if fp4 else [ki, ni])
                        pl.move(al, x)
                        pl.move(br, y)
                        if mx:
                            xs, ys, sal, sbr = sa_l1.next(), sb_l1.next(), sa_l0.next(), sb_l0.next()
                            pl.load(xs, scale_a, [mi, ki // 64, 0])
                            pl.load(ys, scale_b, [ki // 64, ni, 0])
                            pl.move(sal, xs)
                            pl.move(sbr, ys)
                            if ki == 0:
                                pl.matmul_mx(ac, al, br, sal, sbr)
                            else:
                                pl.matmul_mx_acc(ac, ac, al, br, sal, sbr)
                        elif ki == 0:
                            pl.matmul(ac, al, br)
                        else:
                            pl.matmul_acc(ac, ac, al, br)
                    pl.store(c, ac, [mi, ni])
    specs = (pyto.spec(a_shape, da.name), pyto.spec(b_shape, db.name), pyto.spec((M, P, 2), "fp8e8m0"),
             pyto.spec((P, N, 2), "fp8e8m0"), pyto.spec((M, N), "fp32"))
    return kern, specs


def predicted_m_cycles(chip, M: int, K: int, N: int, kind: str) -> float:
    """The chip table's M-pipe cycles for kloop: one MMAD per (output tile, K step)."""
    _, _, k0, item = KINDS[kind]
    per = math.ceil(TM / 16) * math.ceil(TN / 16) * math.ceil(TK / k0) * chip.cube_cycles_per_step[item] \
        + chip.mmad_head_cycles
    return (M // TM) * (N // TN) * (K // TK) * per


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chip", default="ascend950pr")
    args = ap.parse_args()
    chip = pyto.load_chip(args.chip)
    print(f"MX cube time on {chip.name} (timing mode, {TM}x{TN} output tiles, K step {TK}); {blas_threads.describe()}")
    print(f"table: fp16 {chip.cube_cycles_per_step['fp16']:g}, mxfp8 {chip.cube_cycles_per_step.get('mxfp8')}, "
          f"mxfp4 {chip.cube_cycles_per_step.get('fp4e2m1')} cycles per step (k0 16 / 32 / 64), "
          f"head {chip.mmad_head_cycles:g}")
    head = (f"{'M x K x N':>18} {'kind':>6} {'M pipe cyc':>11} {'/fp16':>7} {'table /fp16':>11} {'T_total cyc':>12} "
            f"{'/fp16':>7} {'MTE2 cyc':>10}")
    print(head)
    print("-" * len(head))
    bad = 0
    for M, K, N in SHAPES:
        base = None
        for kind in KINDS:
            kern, specs = kloop(M, K, N, kind)
            rep = pyto.run(kern, *specs, chip=chip, mode="timing", check=False)
            m_cyc, pred = rep.pipe_cycles["M"], predicted_m_cycles(chip, M, K, N, kind)
            if base is None:
                base = (m_cyc, rep.cycles, pred)
            ratio, want = m_cyc / base[0], pred / base[2]
            bad += m_cyc != pred
            print(f"{f'{M}x{K}x{N}':>18} {kind:>6} {m_cyc:>11,.0f} {ratio:>7.3f} {want:>11.3f} {rep.cycles:>12,.0f} "
                  f"{rep.cycles / base[1]:>7.3f} {rep.pipe_cycles.get('MTE2', 0):>10,.0f}")
    print(f"M-pipe cycles equal to the table's prediction: {'all' if not bad else f'{bad} differ'}")


if __name__ == "__main__":
    main()
