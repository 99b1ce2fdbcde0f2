"""The IterBatch and MergeBatch cost models: whole batches per core, as ordinary matmuls or merged MMADs."""
from __future__ import annotations

from pyto.chip import Chip

from .conditions import ACC_BYTES, FRACTAL, Problem, align_up, cdiv
from .cost_pipes import _Work, a_region, b_region, region
from .cost_tile import _Tile, _acc_tile, _bias, _extents, _pieces, _tiles
from .tilings import IterBatchTiling, MergeBatchTiling


def _iter(t: IterBatchTiling, p: Problem, chip: Chip) -> _Work:
    """Each core runs batches_per_core matmuls with the kernel's own parameters (iter_batch.params_for): held
    slabs per batch in HOLD_PIECES loads (a ring of HOLD_STAGES slots), the other side streamed per tile."""
    from .iter_batch import params_for
    from pyto.errors import PlanError
    w = _Work(p, chip, t.cores_used, l0_buffers=t.l0_buffers)
    isz, bpc = p.isz, t.batches_per_core
    M, N, K = p.M, p.N, p.K
    try:
        q = params_for(t, p, chip)[0]
    except PlanError:                     # the kernel would not fit: cost the tiling as it stands
        q = dict(BASE_M=t.base_m, BASE_N=t.base_n, BASE_K=t.base_k, K_L1=max(t.k_l1_a, t.k_l1_b),
                 HOLD_M=align_up(M, t.base_m) if t.resident in ("AB", "A") else 0,
                 HOLD_N=align_up(N, t.base_n) if t.resident in ("AB", "B") else 0, HOLD_STAGES=t.l1_buffers,
                 STAGES=max(1, t.stream_buffers), L1_PIECES=1, HOLD_PIECES=1)
    bm, bn, bk, k_l1 = q["BASE_M"], q["BASE_N"], q["BASE_K"], q["K_L1"]
    hold_a, hold_b = bool(q["HOLD_M"]), bool(q["HOLD_N"])
    stream = not (hold_a and hold_b)
    pieces, hp = q["L1_PIECES"], q["HOLD_PIECES"]
    k_l1 = k_l1 if stream else align_up(K, bk)
    tm, tn = cdiv(M, bm), cdiv(N, bn)
    classes = _tiles(M, N, bm, bn)
    tiles = [(_acc_tile(w, r, c, K, base_m=bm, base_n=bn, base_k=bk, k_l1=k_l1, pieces=pieces,
                        stream_a=not hold_a, stream_b=not hold_b), cnt) for r, c, cnt in classes]
    per_batch = _Tile()
    for tl, cnt in tiles:
        per_batch.add(tl, cnt)
    # held slabs: loaded once per batch in hold pieces (A's and B's interleaved)
    held_cyc = held_bytes = first_held = held_x = 0.0
    own_a, own_b = hold_a and p.batch_a > 1, hold_b and p.batch_b > 1    # held sides loaded for every batch
    own_cyc = own_bytes = own_x = 0.0
    if hold_a or hold_b:
        for i, kw in enumerate(_pieces(align_up(K, bk), max(FRACTAL, p.k0), bk, hp)):
            kc = max(0, min(kw, K - i * kw))
            piece = (a_region(chip, p, M, kc) if hold_a else 0.0), (b_region(chip, p, kc, N) if hold_b else 0.0)
            cyc = sum(w.xfer(b) for b in piece if b)
            held_cyc += cyc
            held_bytes += sum(piece)
            held_x += sum(1 for b in piece if b)
            for own, b in zip((own_a, own_b), piece):
                if own and b:
                    own_cyc, own_bytes, own_x = own_cyc + w.xfer(b), own_bytes + b, own_x + 1
            if i == 0:
                first_held = cyc
    # L2: the streamed side is re-read by every tile row (B) / column (A) of its batch: the same regions
    ra = tn if not hold_a else 1
    rb = tm if not hold_b else 1
    bc_a = p.batch / p.batch_a if p.batch_a < p.batch else 1
    bc_b = p.batch / p.batch_b if p.batch_b < p.batch else 1
    live = t.cores_used * (M * K + K * N) * isz
    tot_a = p.batch * per_batch.a_bytes
    tot_b = p.batch * per_batch.b_bytes
    held_a_b = a_region(chip, p, M, K) if hold_a else 0.0
    held_b_b = b_region(chip, p, K, N) if hold_b else 0.0
    w.traffic(tot_a / ra / bc_a + p.batch_a * held_a_b, tot_a + p.batch * held_a_b, live)
    w.traffic(tot_b / rb / bc_b + p.batch_b * held_b_b, tot_b + p.batch * held_b_b, live)
    fa, fb = 1 - 1 / ra, 1 - 1 / rb
    # held slabs loaded per batch (a held side with batches of its own): they cycle through the hold ring
    held_per_core = bpc if (hold_a and p.batch_a > 1) or (hold_b and p.batch_b > 1) else 1
    # every core runs the same walk over its own batch at the same time, so the chip-wide channels see the
    # walk's phases together: the first row of tiles reads the streamed side from GM (first touch), later rows
    # from L2. Per tile, the cores' GM bytes share the GM channel and their L2 bytes the L2 channel; the
    # phases add up instead of overlapping as in ASW_Basic's mixed task order.
    by_class = {(r, c): tl for (tl, _), (r, c, _) in zip(tiles, classes)}
    seen_a: set = set()
    seen_b: set = set()
    cores = t.cores_used
    # a broadcast held slab is read from GM by one core; the others find it in L2
    held_gm = held_bytes / cores if (hold_a and bc_a > 1) or (hold_b and bc_b > 1) else held_bytes
    walk = []                               # per tile of a batch: (GM bytes read, L2 bytes, port cycles, store bytes)
    for i, m0 in enumerate(range(0, M, bm)):
        cols = list(range(0, N, bn))
        for j, n0 in enumerate(cols if i % 2 == 0 else cols[::-1]):
            tl = by_class[(min(bm, M - m0), min(bn, N - n0))]
            g = h = 0.0
            for key, seen, nbytes, shared in ((m0, seen_a, tl.a_bytes, bc_a > 1), (n0, seen_b, tl.b_bytes, bc_b > 1)):
                if not nbytes:
                    continue
                if key in seen:
                    h += nbytes
                else:                       # a broadcast side's first touch is one core's; the rest hit L2
                    g += nbytes / cores if shared else nbytes
                    h += nbytes - nbytes / cores if shared else 0.0
                    seen.add(key)
            if i == 0 and j == 0:
                g += held_gm
                h += held_bytes - held_gm
            walk.append((g, h, tl.mte2 + (held_cyc if i == 0 and j == 0 else 0.0), tl.store))

    def phases(n: int) -> tuple:
        """The walk's channel time with n cores on it: (reads and stores, reads only, the stores' share, the
        last tile's store share)."""
        both_t = read_t = 0.0
        for g, h, port, st in walk:
            read = max(n * g / chip.gm_bytes_per_cycle, n * h / chip.l2_bytes_per_cycle, port)
            both = max(n * (g + st) / chip.gm_bytes_per_cycle, n * h / chip.l2_bytes_per_cycle, port)
            both_t, read_t = both_t + both, read_t + read
        return both_t, read_t, both_t - read_t, both - read

    # rounds of batches: every core in the first bpc - 1, the rest of the batches in the last
    full, last = phases(cores), phases(p.batch - (bpc - 1) * cores)
    phased, phased_read = (bpc - 1) * full[0] + last[0], (bpc - 1) * full[1] + last[1]
    # the stores after the walk's last read are in the tail, not in a phase: the last tile's when the other side
    # streams, every tile's of the last batch when both are held (their MMADs wait for the last slab piece)
    w.phased, w.phased_read = phased - (last[3] if stream else last[2]), phased_read
    w.cyc["MTE2"] += bpc * per_batch.mte2 + held_per_core * held_cyc
    w.bytes_in(bpc * (per_batch.a_bytes + per_batch.b_bytes) + held_per_core * held_bytes,
               bpc * (fa * per_batch.a_bytes + fb * per_batch.b_bytes))
    w.cyc["MTE1"] += bpc * per_batch.mte1
    w.cyc["MMAD"] += bpc * per_batch.mmad
    serial = q.get("L0_STAGES", t.l0_buffers) == 1
    if serial:
        w.l0_chain = bpc * (per_batch.mmad + per_batch.mte1)
    w.cyc["FIXPIPE"] += bpc * per_batch.store_cyc
    if stream:
        w.ring(bpc * per_batch.steps, bpc * per_batch.xfers, bpc * (per_batch.a_bytes + per_batch.b_bytes),
               bpc * per_batch.cons, q["STAGES"])
    if held_per_core > 1:
        w.ring(held_per_core, held_per_core * own_x, held_per_core * own_bytes,
               held_per_core * max(per_batch.mmad, per_batch.mte1), q["HOLD_STAGES"])
    n_t = tm * tn
    w.l0c(bpc * n_t, per_batch.mmad / n_t, per_batch.store_cyc / n_t, q.get("L0C_STAGES", t.l0c_buffers),
          q.get("UNIT_FLAG", t.unit_flag))
    last = tiles[-1][0]
    sync = chip.flag_latency_cycles
    w.tail_fix = w.lat("L0C", "GM")
    w.tail_mmad = sync + last.store_cyc + w.tail_fix
    # the held slab's pieces, every core loading its own at once: the chip-wide channels pace them
    held_phase = max(held_cyc, cores * held_gm / chip.gm_bytes_per_cycle,
                     cores * (held_bytes - held_gm) / chip.l2_bytes_per_cycle)
    if stream:
        w.tail_load = w.lat() + 2 * sync + last.last_cube + last.store_cyc + w.tail_fix
        w.tail_ring = w.lat() + 2 * sync + last.last_cube
        # MTE2 runs in order: the first streamed piece waits behind every piece of the held slab
        first = held_phase + tiles[0][0].first_in
    else:
        # the last batch's slab pieces: the cube finishes the last piece's share of every tile after it lands
        share = (per_batch.mmad + per_batch.mte1) / max(1, hp) if serial else \
            per_batch.mmad / max(1, hp) + tiles[-1][0].first_l0
        w.tail_load = w.lat() + 2 * sync + share + last.store_cyc + w.tail_fix
        w.tail_ring = w.lat() + 2 * sync + share
        first = max(first_held, held_phase / max(1, hp))     # the MMADs start on the first piece
    w.stagger_stores(last.store, last.store_cyc)
    w.head = first + w.lat() + sync + tiles[0][0].first_l0 + sync
    # of which the GM channel carried the held slab's first piece (the whole slab before a streamed side)
    w.head_read = min(first, cores * held_gm / chip.gm_bytes_per_cycle / (1 if stream else max(1, hp)))
    w.gm_write += p.batch * per_batch.store
    _bias(w, p, bpc * tm * tn, bn)
    return w


def _merge(t: MergeBatchTiling, p: Problem, chip: Chip) -> _Work:
    """b batches per merged MMAD; each K slice of a group comes in L1_PIECES Nd2Nz loads per operand (ndNum = b;
    one load per batch for a broadcast side); cross terms (b-1)/b are computed and dropped."""
    from .merge_batch import params_for
    w = _Work(p, chip, t.cores_used)
    isz, bpc = p.isz, t.batches_per_core
    M, N, K = p.M, p.N, p.K
    align = max(FRACTAL, p.k0)
    q = params_for(t, p, chip)[0]
    pieces = q["L1_PIECES"]
    a_nd, b_nd = p.batch_a == p.batch, p.batch_b == p.batch
    groups = _extents(bpc, t.b)                       # [(batches in the group, count)]
    sync = chip.flag_latency_cycles
    tot = dict(mte2=0.0, mte1=0.0, mmad=0.0, fix=0.0, a=0.0, b=0.0, x=0.0, steps=0.0, cons=0.0)
    last = dict(cube=0.0, store=0.0, first=0.0, first_l0=0.0)

    def k_slice(ng: int, k1: int) -> tuple:
        """One K slice of a group of ng batches from k1: (costs, first piece's cycles and GM bytes, the MMADs on
        the slice's last piece)."""
        kl = min(t.k_l1, K - k1)
        d = dict(mte2=0.0, mte1=0.0, mmad=0.0, a=0.0, b=0.0, x=0.0, steps=1.0, cons=0.0)
        first = first_bytes = None
        ws = _pieces(kl, align, t.base_k, pieces)
        kp = 0
        for kw in ws:
            kc = max(0, min(kw, K - k1 - kp))
            ab, bb = a_region(chip, p, M, kc), b_region(chip, p, kc, N)
            cyc = (w.xfer(ng * ab) if a_nd else ng * w.xfer(ab)) + (w.xfer(ng * bb) if b_nd else ng * w.xfer(bb))
            d["mte2"] += cyc
            d["a"] += ng * ab
            d["b"] += ng * bb
            d["x"] += (1 if a_nd else ng) + (1 if b_nd else ng)
            if first is None:
                first, first_bytes = cyc, ng * ((ab if a_nd else 0.0) + (bb if b_nd else 0.0))   # GM's share
            kp += kw
        cube_last = s1 = s2 = 0.0
        for kk in range(k1, k1 + kl, t.base_k):
            kt = min(t.base_k, align_up(K - kk, align))
            m1 = w.mte1_cycles(ng * t.m_pad * kt * isz, kt * ng * t.n_pad * isz)
            mm = w.mmad_cycles(ng * t.m_pad, ng * t.n_pad, kt)
            d["mte1"] += m1
            d["mmad"] += mm
            s1 += m1
            s2 += mm
            if kk >= k1 + kl - ws[-1]:
                cube_last += mm
        d["cons"] += max(s1, s2)
        return d, first, first_bytes, cube_last

    n_slices = cdiv(K, t.k_l1)
    for ng, cnt in groups:
        # every K slice but the last is the same (k_l1 is on the alignment grid): cost one, count the rest
        d0, first, first_bytes, cube_last = k_slice(ng, 0)
        g = dict(d0, fix=0.0)
        if n_slices > 1:
            dl, _, _, cube_last = k_slice(ng, (n_slices - 1) * t.k_l1)
            for k in d0:
                g[k] = (n_slices - 1) * d0[k] + dl[k]
        cube_last += w.mte1_cycles(ng * t.m_pad * t.base_k * isz, t.base_k * ng * t.n_pad * isz)
        st = w.xfer(region(chip, M, N, N, p.out_isz), "L0C", "GM")
        g["fix"] += ng * st
        for k in tot:
            tot[k] += cnt * g[k]
        last.update(cube=cube_last, store=ng * st, store_bytes=ng * region(chip, M, N, N, p.out_isz), first=first or 0.0,
                    first_l0=w.mte1_cycles(ng * t.m_pad * t.base_k * isz, t.base_k * ng * t.n_pad * isz))
        if "head" not in last:
            last["head"] = (first or 0.0, last["first_l0"], first_bytes or 0.0)
    w.cyc["MTE2"] += tot["mte2"]
    w.cyc["MTE1"] += tot["mte1"]
    w.cyc["MMAD"] += tot["mmad"]
    w.cyc["FIXPIPE"] += tot["fix"]
    w.ring(tot["steps"], tot["x"], tot["a"] + tot["b"], tot["cons"], q["L1_STAGES"])
    n_groups = sum(cnt for _, cnt in groups)
    w.l0c(n_groups, tot["mmad"] / n_groups, tot["fix"] / n_groups, q["L0C_STAGES"], unit_flag=False)
    unique_a = p.batch_a * a_region(chip, p, M, K) * (tot["a"] / max(1.0, bpc * a_region(chip, p, M, K)))
    unique_b = p.batch_b * b_region(chip, p, K, N) * (tot["b"] / max(1.0, bpc * b_region(chip, p, K, N)))
    live = (M * K if p.batch_a == 1 else 0) + (K * N if p.batch_b == 1 else 0)
    w.traffic(unique_a, tot["a"] * p.batch / bpc, live)
    w.traffic(unique_b, tot["b"] * p.batch / bpc, live)
    w.bytes_in(tot["a"] + tot["b"], 0.0)
    w.tail_fix = w.lat("L0C", "GM")
    w.tail_mmad = sync + last["store"] + w.tail_fix
    w.tail_load = w.lat() + 2 * sync + last["cube"] + last["store"] + w.tail_fix
    w.tail_ring = w.lat() + 2 * sync + last["cube"]
    w.stagger_stores(last["store_bytes"], last["store"])
    h_first, h_l0, h_bytes = last["head"]
    w.head = h_first + w.lat() + sync + h_l0 + sync
    w.head_read = min(h_first, t.cores_used * h_bytes / chip.gm_bytes_per_cycle)   # the first pieces on the channel
    w.gm_write += p.batch * M * N * p.out_isz
    if p.bias:
        w.cyc["MTE2"] += bpc * w.xfer(region(chip, 1, N, N, ACC_BYTES))
        w.bias_reads()
    return w
