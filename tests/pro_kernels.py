"""PyPTO-Pro style kernels the pro tests share, written for pyto after the patterns of PyPTO-Pro's documented
examples (docs/zh/pypto_pro/api/SIMD-API): tile groups under auto_mutex, the K-split loop, make_tile kernels
synchronised by hand. Each is a plain pl.jit kernel body with module-level constants, as PyPTO-Pro wants them."""
import pyto.language as pl

TILE = 128
M1, K1, N1 = 256, 128, 256          # one K step per output tile
KS = 384                            # the K-split kernel's K: three steps of TILE


def mat(shape, dtype=pl.DT_FP16, **kw):
    return pl.TileType(shape=shape, dtype=dtype, target_memory=pl.MemorySpace.Mat, **kw)


def left(shape, dtype=pl.DT_FP16):
    return pl.TileType(shape=shape, dtype=dtype, target_memory=pl.MemorySpace.Left)


def right(shape, dtype=pl.DT_FP16):
    return pl.TileType(shape=shape, dtype=dtype, target_memory=pl.MemorySpace.Right)


def acc(shape, **kw):
    return pl.TileType(shape=shape, dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc, **kw)


def vec(shape, dtype=pl.DT_FP32, **kw):
    return pl.TileType(shape=shape, dtype=dtype, target_memory=pl.MemorySpace.Vec, **kw)


def overlapping_pair(ax: int, a_rows: int, bx: int, b_rows: int):
    """Vec tile x [a_rows, 64] fp32 at byte ax and y [b_rows, 64] at bx: x loaded, y filled with -1, x stored, all
    ordered by barriers (x's data survives exactly when their bytes do not meet or they are one storage)."""
    @pl.jit
    def k(a: pl.Tensor[[8, 64], pl.DT_FP32], out: pl.Tensor[[8, 64], pl.DT_FP32]):
        x = pl.make_tile(vec([a_rows, 64]), addr=ax)
        y = pl.make_tile(vec([b_rows, 64]), addr=bx)
        with pl.section_vector():
            pl.load(x, a, [0, 0])
            pl.system.bar_all()
            pl.expands(y, -1.0)
            pl.system.bar_all()
            pl.store(out, x, [0, 0])
    return k


def grouped_matmul(auto_mutex: bool = True):
    """C = A @ B over 2 x 2 output tiles, L1 double-buffered with next(), L0A/L0B/Acc single groups: all the sync
    is auto_mutex's (make_tile_group.md's 2-buffer example)."""
    @pl.jit(auto_mutex=auto_mutex)
    def tile_group_matmul(a: pl.Tensor[[M1, K1], pl.DT_FP16], b: pl.Tensor[[K1, N1], pl.DT_FP16],
                          c: pl.Tensor[[M1, N1], pl.DT_FP32]):
        a_l1 = pl.make_tile_group(type=mat([TILE, K1]), addrs=0x00000, mutex_ids=[0, 1])
        b_l1 = pl.make_tile_group(type=mat([K1, TILE]), addrs=0x10000, mutex_ids=[2, 3])
        a_left = pl.make_tile_group(type=left([TILE, K1]), addrs=0x0000, mutex_ids=[4])
        b_right = pl.make_tile_group(type=right([K1, TILE]), addrs=0x0000, mutex_ids=[5])
        c_acc = pl.make_tile_group(type=acc([TILE, TILE]), addrs=0x0000, mutex_ids=[6])
        with pl.section_cube():
            for i in pl.range(0, M1, TILE):
                for j in pl.range(0, N1, TILE):
                    cur_a, cur_b = a_l1.next(), b_l1.next()
                    al, br, ac = a_left.current(), b_right.current(), c_acc.current()
                    pl.load(cur_a, a, [i, 0])
                    pl.load(cur_b, b, [0, j])
                    pl.move(al, cur_a)
                    pl.move(br, cur_b)
                    pl.matmul(ac, al, br)
                    pl.store(c, ac, [i, j])
    return tile_group_matmul


def k_split(transform: bool = True, fractal: int = 1024, last_phase=pl.AccPhase.Final, store_phase=pl.STPhase.Final):
    """C [TILE, TILE] = A [TILE, KS] @ B [KS, TILE], K in three steps: Partial, Partial, `last_phase`, then one store
    with `store_phase`, under set_mm_layout_transform when `transform` (matmul_acc.md's K-split kernel)."""
    @pl.jit(auto_mutex=True)
    def k_split_kernel(a: pl.Tensor[[TILE, KS], pl.DT_FP16], b: pl.Tensor[[KS, TILE], pl.DT_FP16],
                       c: pl.Tensor[[TILE, TILE], pl.DT_FP32]):
        a_l1 = pl.make_tile_group(type=mat([TILE, TILE]), addrs=0x00000, mutex_ids=[0, 1])
        b_l1 = pl.make_tile_group(type=mat([TILE, TILE]), addrs=0x10000, mutex_ids=[2, 3])
        a_left = pl.make_tile_group(type=left([TILE, TILE]), addrs=0x0000, mutex_ids=[4, 5])
        b_right = pl.make_tile_group(type=right([TILE, TILE]), addrs=0x0000, mutex_ids=[6, 7])
        c_acc = pl.make_tile_group(type=acc([TILE, TILE], fractal=fractal), addrs=0x0000, mutex_ids=[8])
        with pl.section_cube():
            if transform:
                pl.system.set_mm_layout_transform(enabled=True)
            ac = c_acc.current()
            for k in pl.range(0, KS, TILE):
                cur_a, cur_b, al, br = a_l1.next(), b_l1.next(), a_left.next(), b_right.next()
                pl.load(cur_a, a, [0, k])
                pl.load(cur_b, b, [k, 0])
                pl.move(al, cur_a)
                pl.move(br, cur_b)
                if k == 0:
                    pl.matmul(ac, al, br, phase=pl.AccPhase.Partial)
                elif k < KS - TILE:
                    pl.matmul_acc(ac, ac, al, br, phase=pl.AccPhase.Partial)
                else:
                    pl.matmul_acc(ac, ac, al, br, phase=last_phase)
            pl.store(c, ac, [0, 0], phase=store_phase)
            if transform:
                pl.system.set_mm_layout_transform(enabled=False)
    return k_split_kernel


def make_tile_add(sync_in: bool = True, sync_out: bool = True):
    """out = a + b on one AIV with make_tile tiles at fixed UB addresses, ordered by sync_src/sync_dst pairs
    (make_tile.md's example); `sync_in` / `sync_out` drop a pair."""
    @pl.jit()
    def make_tile_add_kernel(a: pl.Tensor[[64, 128], pl.DT_FP16], b: pl.Tensor[[64, 128], pl.DT_FP16],
                             out: pl.Tensor[[64, 128], pl.DT_FP16]):
        tt = vec([64, 128], pl.DT_FP16)
        tile_a = pl.make_tile(tt, addr=0x0000)
        tile_b = pl.make_tile(tt, addr=0x4000)
        tile_out = pl.make_tile(tt, addr=0x8000)
        with pl.section_vector():
            pl.load(tile_a, a, [0, 0])
            pl.load(tile_b, b, [0, 0])
            if sync_in:
                pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
                pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
            pl.add(tile_out, tile_a, tile_b)
            if sync_out:
                pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=1)
                pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=1)
            pl.store(out, tile_out, [0, 0])
    return make_tile_add_kernel


def manual_mutex(mode: str = "ok"):
    """out = a + b, every buffer ordered by hand with mutex_lock / mutex_unlock and sync_src/sync_dst under
    auto_mutex=False (mutex_lock_mutex_unlock.md's example). mode "double": a second lock of id 0 on MTE2 before
    its unlock; "unpaired": the last unlock missing."""
    @pl.jit(auto_mutex=False)
    def mutex_kernel(a: pl.Tensor[[64, 64], pl.DT_FP32], b: pl.Tensor[[64, 64], pl.DT_FP32],
                     out: pl.Tensor[[64, 64], pl.DT_FP32]):
        tt = vec([64, 64])
        tile_a = pl.make_tile_group(type=tt, addrs=0x0000, mutex_ids=[0])
        tile_b = pl.make_tile_group(type=tt, addrs=0x4000, mutex_ids=[1])
        tile_out = pl.make_tile_group(type=tt, addrs=0x8000, mutex_ids=[2])
        with pl.section_vector():
            cur_a, cur_b, cur_out = tile_a.current(), tile_b.current(), tile_out.current()
            pl.system.mutex_lock(pipe=pl.PipeType.MTE2, mutex_id=0)
            pl.load(cur_a, a, [0, 0])
            if mode == "double":
                pl.system.mutex_lock(pipe=pl.PipeType.MTE2, mutex_id=0)
            pl.system.mutex_unlock(pipe=pl.PipeType.MTE2, mutex_id=0)
            pl.system.mutex_lock(pipe=pl.PipeType.MTE2, mutex_id=1)
            pl.load(cur_b, b, [0, 0])
            pl.system.mutex_unlock(pipe=pl.PipeType.MTE2, mutex_id=1)
            pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
            pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
            pl.add(cur_out, cur_a, cur_b)
            pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=1)
            pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=1)
            pl.system.mutex_lock(pipe=pl.PipeType.MTE3, mutex_id=2)
            pl.store(out, cur_out, [0, 0])
            if mode != "unpaired":
                pl.system.mutex_unlock(pipe=pl.PipeType.MTE3, mutex_id=2)
    return mutex_kernel


def matmul_tiles(m: int, k: int, n: int, *, groups: bool = False, dtype=pl.DT_FP16):
    """(a_l1, b_l1, al, br, ac) of one [m, k] @ [k, n] product (call inside a kernel; the tiles take those names):
    make_tile tiles at fixed addresses, or with `groups` the current slots of single-slot groups with mutex ids 0..4
    (auto_mutex)."""
    if groups:
        a_l1 = pl.make_tile_group(type=mat([m, k], dtype), addrs=0x0, mutex_ids=[0])
        b_l1 = pl.make_tile_group(type=mat([k, n], dtype), addrs=0x10000, mutex_ids=[1])
        al = pl.make_tile_group(type=left([m, k], dtype), addrs=0x0, mutex_ids=[2])
        br = pl.make_tile_group(type=right([k, n], dtype), addrs=0x0, mutex_ids=[3])
        ac = pl.make_tile_group(type=acc([m, n]), addrs=0x0, mutex_ids=[4])
        return tuple(g.current() for g in (a_l1, b_l1, al, br, ac))
    a_l1 = pl.make_tile(mat([m, k], dtype), addr=0x0)
    b_l1 = pl.make_tile(mat([k, n], dtype), addr=0x10000)
    al = pl.make_tile(left([m, k], dtype), addr=0x0)
    br = pl.make_tile(right([k, n], dtype), addr=0x0)
    ac = pl.make_tile(acc([m, n]), addr=0x0)
    return a_l1, b_l1, al, br, ac


def gm_to_l0(tiles, a, b, offsets_a=(0, 0), offsets_b=(0, 0), *, barriers: bool = True) -> None:
    """GM -> Mat -> Left / Right for `tiles` (matmul_tiles); `barriers` orders the hops with bar_all (make_tile tiles
    have no framework sync; groups under auto_mutex need none)."""
    a_l1, b_l1, al, br, _ = tiles
    pl.load(a_l1, a, list(offsets_a))
    pl.load(b_l1, b, list(offsets_b))
    if barriers:
        pl.system.bar_all()
    pl.move(al, a_l1)
    pl.move(br, b_l1)
    if barriers:
        pl.system.bar_all()


def l1_matmul_store(out, ac, al, br, a_l1, b_l1, offsets=(0, 0)) -> None:
    """Mat -> Left / Right, ac = al @ br, Acc -> GM `out` at `offsets`, each hop after a bar_all (the loads into
    a_l1 / b_l1 before it are the caller's)."""
    pl.system.bar_all()
    pl.move(al, a_l1)
    pl.move(br, b_l1)
    pl.system.bar_all()
    pl.matmul(ac, al, br)
    pl.system.bar_all()
    pl.store(out, ac, list(offsets))


def two_phase(core_type, inside: bool, cube: bool = False, event=None):
    """AIV i writes row i of a workspace, sync_all (none with core_type None), then reads row i + 1 (a neighbour's)."""
    @pl.jit
    def k(x: pl.Tensor[[4, 64], pl.DT_FP32], out: pl.Tensor[[4, 64], pl.DT_FP32]):
        ws = pl.workspace([4, 64], pl.DT_FP32)
        t = pl.make_tile(vec([1, 64]), addr=0)
        u = pl.make_tile(vec([1, 64]), addr=0x100)
        if cube:
            with pl.section_cube():
                if inside:
                    pl.system.sync_all(core_type=core_type)
        with pl.section_vector():
            i = pl.get_block_idx()
            pl.load(t, x, [i, 0])
            pl.system.bar_all()
            pl.store(ws, t, [i, 0])
            if event is not None:
                pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=event)
            if inside and core_type is not None:
                pl.system.sync_all(core_type=core_type)
        if not inside and core_type is not None:
            pl.system.sync_all(core_type=core_type)
        with pl.section_vector():
            i = pl.get_block_idx()
            pl.load(u, ws, [(i + 1) % 4, 0])
            pl.system.bar_all()
            pl.store(out, u, [i, 0])
    return k


def reload_slot(read_between: bool, barrier: bool):
    """Two loads into one tile-group slot under auto_mutex (load.md's bar_mte2 rule)."""
    @pl.jit(auto_mutex=True)
    def k(a: pl.Tensor[[64, 64], pl.DT_FP32], out: pl.Tensor[[32, 64], pl.DT_FP32]):
        t = pl.make_tile_group(type=vec([32, 64]), addrs=0, mutex_ids=[0])
        o = pl.make_tile_group(type=vec([32, 64]), addrs=0x4000, mutex_ids=[1])
        with pl.section_vector():
            x, y = t.current(), o.current()
            pl.load(x, a, [0, 0])
            if read_between:
                pl.add(y, x, 0.0)
            if barrier:
                pl.system.bar_mte2()
            pl.load(x, a, [32, 0])
            pl.add(y, x, 1.0)
            pl.store(out, y, [0, 0])
    return k
