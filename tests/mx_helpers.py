"""The one-MMAD MX kernel the MXFP8 and MXFP4 shape tests share: GM -> Mat -> Left / Right and the E8M0 scales ->
ScaleLeft / ScaleRight, one pl.matmul_mx, the Acc stored."""
import pyto.language as pl

MS = pl.MemorySpace
E8 = pl.DT_FP8E8M0


def _tt(shape, dtype, mem, **kw):
    return pl.TileType(shape=shape, dtype=dtype, target_memory=mem, **kw)


def whole_mx_kernel(m: int, k: int, n: int, da, db, a_cols: int, b_cols: int):
    """A jit kernel (a [m, a_cols], b [k, b_cols], scale_a [m, k/64, 2], scale_b [k/64, n, 2], c [m, n] fp32): the
    GM columns are the elements' (8-bit) or the packed bytes' (4-bit: k/2, n/2)."""
    P = k // 64

    @pl.jit(auto_mutex=True)
    def k1(a: pl.Tensor[[m, a_cols], da], b: pl.Tensor[[k, b_cols], db], sa: pl.Tensor[[m, P, 2], E8],
           sb: pl.Tensor[[P, n, 2], E8], c: pl.Tensor[[m, n], pl.DT_FP32]):
        x = pl.make_tile_group(type=_tt([m, k], da, MS.Mat), addrs=0x0, mutex_ids=[0])
        y = pl.make_tile_group(type=_tt([k, n], db, MS.Mat), addrs=0x10000, mutex_ids=[1])
        xs = pl.make_tile_group(type=_tt([m, 2 * P], E8, MS.Mat, layout=pl.ZZ), addrs=0x20000, mutex_ids=[2])
        ys = pl.make_tile_group(type=_tt([2 * P, n], E8, MS.Mat, layout=pl.NN), addrs=0x21000, mutex_ids=[3])
        al = pl.make_tile_group(type=_tt([m, k], da, MS.Left), addrs=0x2000, mutex_ids=[4])
        br = pl.make_tile_group(type=_tt([k, n], db, MS.Right), addrs=0x4000, mutex_ids=[5])
        sal = pl.make_tile_group(type=_tt([m, 2 * P], E8, MS.ScaleLeft), addrs=0x200, mutex_ids=[6])
        sbr = pl.make_tile_group(type=_tt([2 * P, n], E8, MS.ScaleRight), addrs=0x400, mutex_ids=[7])
        ac = pl.make_tile_group(type=_tt([m, n], pl.DT_FP32, MS.Acc), addrs=0x0, mutex_ids=[8])
        with pl.section_cube():
            pl.load(x.current(), a, [0, 0])
            pl.load(y.current(), b, [0, 0])
            pl.load(xs.current(), sa, [0, 0, 0])
            pl.load(ys.current(), sb, [0, 0, 0])
            pl.move(al.current(), x.current())
            pl.move(br.current(), y.current())
            pl.move(sal.current(), xs.current())
            pl.move(sbr.current(), ys.current())
            pl.matmul_mx(ac.current(), al.current(), br.current(), sal.current(), sbr.current())
            pl.store(c, ac.current(), [0, 0])
    return k1


T = 64                          # the K-loop kernel's tiles: M, N and the K step (two 32-element scale groups)
SK = T // 32                    # scale columns (scale_a) / rows (scale_b) per K step


def mx_k_loop(M: int, K: int, N: int, da, db, *, shapes: tuple, load_a, load_b, load_scales, b_layout=None,
              a_stride=None, phases: bool = True):
    """C [M, N] fp32 = MX(A, scale_a) @ MX(B, scale_b) (PyPTO-Pro's test_matmul_mx.py in pyto's spelling): T x T
    output tiles (M/N tails by valid shapes), a K loop of T (matmul_mx, then matmul_mx_acc), every ring
    double-buffered under auto_mutex, each ScaleLeft / ScaleRight slot at its Left / Right slot's address >> 4.
    shapes: the GM shapes of (a, b, scale_a, scale_b); load_a(x, a, mi, ki), load_b(y, b, ni, ki) and
    load_scales(xs, ys, scale_a, scale_b, mi, ni, ki) issue the GM -> Mat loads the GM forms need; b_layout: the B
    Mat tile's layout (default NZ); a_stride: a pl.set_stride for A first."""
    a_shape, b_shape, sa_shape, sb_shape = shapes
    b_kw = {} if b_layout is None else {"layout": b_layout}

    @pl.jit(auto_mutex=True)
    def kern(a: pl.Tensor[a_shape, da], b: pl.Tensor[b_shape, db], scale_a: pl.Tensor[sa_shape, E8],
             scale_b: pl.Tensor[sb_shape, E8], c: pl.Tensor[[M, N], pl.DT_FP32]):
        a_l1 = pl.make_tile_group(type=_tt([T, T], da, MS.Mat, valid_shape=[-1, -1]), addrs=0x00000, mutex_ids=[0, 1])
        b_l1 = pl.make_tile_group(type=_tt([T, T], db, MS.Mat, valid_shape=[-1, -1], **b_kw), addrs=0x10000,
                                  mutex_ids=[2, 3])
        sa_l1 = pl.make_tile_group(type=_tt([T, SK], E8, MS.Mat, layout=pl.ZZ, valid_shape=[-1, -1]), addrs=0x20000,
                                   mutex_ids=[4, 5])
        sb_l1 = pl.make_tile_group(type=_tt([SK, T], E8, MS.Mat, layout=pl.NN, valid_shape=[-1, -1]), addrs=0x21000,
                                   mutex_ids=[6, 7])
        a_left = pl.make_tile_group(type=_tt([T, T], da, MS.Left, valid_shape=[-1, -1]), addrs=[0x0, 0x1000],
                                    mutex_ids=[8, 9])
        b_right = pl.make_tile_group(type=_tt([T, T], db, MS.Right, valid_shape=[-1, -1]), addrs=[0x0, 0x1000],
                                     mutex_ids=[10, 11])
        sa_l0 = pl.make_tile_group(type=_tt([T, SK], E8, MS.ScaleLeft, valid_shape=[-1, -1]), addrs=[0x0, 0x100],
                                   mutex_ids=[12, 13])
        sb_l0 = pl.make_tile_group(type=_tt([SK, T], E8, MS.ScaleRight, valid_shape=[-1, -1]), addrs=[0x0, 0x100],
                                   mutex_ids=[14, 15])
        c_acc = pl.make_tile_group(type=_tt([T, T], pl.DT_FP32, MS.Acc, fractal=1024, valid_shape=[-1, -1]),
                                   addrs=0x0, mutex_ids=[16])
        with pl.section_cube():
            if a_stride is not None:
                pl.set_stride(a, a_stride)
            if phases:
                pl.system.set_mm_layout_transform(enabled=True)
            for mi in pl.range(0, M, T):
                m = pl.min(T, M - mi)
                for ni in pl.range(0, N, T):
                    n = pl.min(T, N - ni)
                    ac = c_acc.current()
                    pl.set_validshape(ac, [m, n])
                    for ki in pl.range(0, K, T):
                        x, y, xs, ys = a_l1.next(), b_l1.next(), sa_l1.next(), sb_l1.next()
                        al, br, sal, sbr = a_left.next(), b_right.next(), sa_l0.next(), sb_l0.next()
                        for tile, valid in ((x, [m, T]), (al, [m, T]), (xs, [m, SK]), (sal, [m, SK]),
                                            (y, [T, n]), (br, [T, n]), (ys, [SK, n]), (sbr, [SK, n])):
                            pl.set_validshape(tile, valid)
                        load_a(x, a, mi, ki)
                        load_b(y, b, ni, ki)
                        load_scales(xs, ys, scale_a, scale_b, mi, ni, ki)
                        pl.move(al, x)
                        pl.move(br, y)
                        pl.move(sal, xs)
                        pl.move(sbr, ys)
                        phase = None
                        if phases:
                            phase = pl.AccPhase.Final if ki + T >= K else pl.AccPhase.Partial
                        if ki == 0:
                            pl.matmul_mx(ac, al, br, sal, sbr, phase=phase)
                        else:
                            pl.matmul_mx_acc(ac, ac, al, br, sal, sbr, phase=phase)
                    pl.store(c, ac, [mi, ni], phase=pl.STPhase.Final if phases else None)
            if phases:
                pl.system.set_mm_layout_transform(enabled=False)
    return kern
