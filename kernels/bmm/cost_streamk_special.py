"""The StreamK and Special cost models: K segments on grid_K cores then the AIV reduction, and the AIV path."""
from __future__ import annotations

from pyto.chip import Chip

from .conditions import ACC_BYTES, FRACTAL, Problem, align_up, cdiv
from .cost_pipes import _Work, region
from .cost_tile import _Tile, _acc_tile, _biggest, _finish_tiles, _tiles
from .tilings import SpecialTiling, StreamKTiling


def _stream(t: StreamKTiling, p: Problem, chip: Chip) -> _Work:
    """grid_K cores per output block (stream_k.py): each unit's K segment through block.accumulate, its partial
    block to the workspace (or atomically added); then, after sync_all, the AIVs sum the partials."""
    from .asw_basic import l1_pieces_for
    from .stream_k import params_of, reduce_chunk
    w = _Work(p, chip, t.cores_used, l0_buffers=t.l0_buffers)
    isz, M, N, K = p.isz, p.M, p.N, p.K
    sm, sn, sck = t.single_m, t.single_n, t.single_core_k
    pieces = l1_pieces_for(t.base_m, t.base_n, t.base_k, t.k_l1, p.dtype, chip)
    atomic = t.reduce == "atomic"
    ws_row, ws_isz = (N, ACC_BYTES) if atomic else (sn, ACC_BYTES)    # the fp32 target / workspace rows
    # the unit blocks (rows, cols) that exist, and the K segment lengths
    blocks = [(min(sm, M - mi * sm), min(sn, N - ni * sn)) for mi in range(t.m_cnt) for ni in range(t.n_cnt)
              if M - mi * sm > 0 and N - ni * sn > 0]
    segs = [min(sck, K - c * sck) for c in range(t.grid_k) if K - c * sck > 0]
    units, same = [], {}        # most units are the same block and segment: one _Tile each (read, never changed)
    for r, c in blocks:
        for kl in segs:
            tl = same.get((r, c, kl))
            if tl is None:
                tl = same[(r, c, kl)] = _Tile()
                for rr, cc, cnt in _tiles(r, c, t.base_m, t.base_n):
                    one = _acc_tile(w, rr, cc, kl, base_m=t.base_m, base_n=t.base_n, base_k=t.base_k, k_l1=t.k_l1,
                                    pieces=pieces, out_row=ws_row, out_isz=ws_isz)
                    tl.add(one, cnt)
                    tl.first_in, tl.first_l0, tl.last_cube = one.first_in, one.first_l0, one.last_cube
            units.append(tl)
    n_units = len(units) * p.batch
    avg = _Tile()
    for tl in units:
        avg.add(tl, 1 / len(units))
    per = cdiv(n_units, t.cores_used)
    big = _biggest([(u, 1) for u in units])
    # L2: each A rows x K-segment region is read by the n blocks of its row, each B region by the m blocks
    ra = max(1.0, len([1 for _ in range(t.n_cnt)]) * (p.batch / p.batch_a if p.batch_a < p.batch else 1))
    rb = max(1.0, t.m_cnt * (p.batch / p.batch_b if p.batch_b < p.batch else 1))
    tot_a, tot_b = p.batch * sum(u.a_bytes for u in units), p.batch * sum(u.b_bytes for u in units)
    stages = params_of(t, p, chip, bias=p.bias)["STAGES"]
    # in one round the units sharing a region run side by side and read it at the same pace: between two
    # reads of a piece the chip reads about one ring of pieces per core; across rounds, whole segments
    live = t.cores_used * (sm + sn) * (t.k_l1 * stages if per == 1 else sck) * isz
    w.traffic(tot_a / ra, tot_a, live)
    w.traffic(tot_b / rb, tot_b, live)
    w.bytes_in(per * (avg.a_bytes + avg.b_bytes), per * ((1 - 1 / ra) * avg.a_bytes + (1 - 1 / rb) * avg.b_bytes))
    _finish_tiles(w, per, big, big, chip.flag_latency_cycles)
    w.ring(per * big.steps, per * big.xfers, per * (big.a_bytes + big.b_bytes), per * big.cons, stages)
    out = p.batch * M * N
    part = p.batch * sum(u.store for u in units)          # charged bytes of the partial blocks
    w.gm_write += part
    # the reduction on the AIVs after sync_all (workspace), or the zero / cast passes around the atomic adds
    aivs = t.cores_used * chip.aiv_per_aic
    rows, cols = reduce_chunk(t, p, chip, t.cores_used, bias=p.bias)
    cast = p.out_isz != ACC_BYTES
    if atomic:
        chunks = p.batch * cdiv(M, rows) * cdiv(N, cols)
        per_aiv = cdiv(chunks, aivs)
        w.gm_write += out * ACC_BYTES                        # the zeroed target
        zero = per_aiv * w.xfer(region(chip, rows, cols, N, ACC_BYTES), "UB", "GM")
        serial = zero + w.lat("UB", "GM") + chip.flag_latency_cycles
        if cast:
            w.gm_read += out * ACC_BYTES
            w.gm_write += out * p.out_isz
            w.serial_gm += out * (ACC_BYTES + p.out_isz)     # the cast pass after the second sync_all
            ld = w.xfer(region(chip, rows, cols, N, ACC_BYTES), "GM", "UB")
            stv = w.xfer(region(chip, rows, cols, N, p.out_isz), "UB", "GM")
            serial += per_aiv * max(ld, stv, w.vec_cycles(rows * cols)) + w.lat("GM", "UB", l2=True) \
                + w.lat("UB", "GM") + ld + stv
        w.serial = serial
    else:
        chunks = p.batch * sum(cdiv(r, rows) * cdiv(c, cols) for r, c in blocks)
        per_aiv = cdiv(chunks, aivs)
        g = len(segs)
        w.gm_read += 0.0
        w.l2_read += part                                    # the partials were just written: L2 hits
        w.gm_write += out * p.out_isz
        w.serial_l2 += part                                  # both after sync_all: in serial, below
        w.serial_gm += out * p.out_isz
        ld = w.xfer(g * region(chip, rows, cols, sn, ACC_BYTES), "GM", "UB")    # a chunk's g partials at once
        stv = w.xfer(region(chip, rows, min(cols, N), N, p.out_isz), "UB", "GM")
        vec, n = (w.vec_cycles(rows * cols) if cast else 0) + (2 * w.vec_cycles(rows * cols) if p.bias else 0), g
        while n > 1:              # the pairwise sum: the top half into the bottom half
            vec, n = vec + w.vec_cycles(n // 2 * rows * cols), n - n // 2
        per_chunk = max(ld, vec, stv)
        # two UB slots of stacked partials: a chunk's load waits for the chunk two before it to be summed
        w.serial = (chip.flag_latency_cycles + per_aiv * per_chunk + w.lat("GM", "UB", l2=True) * (1 + per_aiv // 2)
                    + vec / max(1, per_aiv) + stv + w.lat("UB", "GM"))
        # ... or the chip-wide channels: the output over GM, the partials over L2
        chan = max(out * p.out_isz / chip.gm_bytes_per_cycle, part / chip.l2_bytes_per_cycle)
        w.serial = max(w.serial, chip.flag_latency_cycles + w.lat("GM", "UB", l2=True) + chan + w.lat("UB", "GM"))
    return w


def _special(t: SpecialTiling, p: Problem, chip: Chip) -> _Work:
    """AIV tiles (special.py): fill writes bias or zeros; outer reads an A column and a B row, multiplies, writes."""
    w = _Work(p, chip, t.aiv_used, write_pipe="MTE3")
    if t.mode == "empty":
        return w
    per = t.units_per_aiv
    rows, cols = t.rows, min(t.cols, p.N)
    st = w.xfer(region(chip, rows, cols, p.N, p.out_isz), "UB", "GM")
    w.cyc["MTE3"] += per * st
    w.gm_write += t.units * region(chip, rows, cols, p.N, p.out_isz)
    w.tail_fix = w.lat("UB", "GM")
    sync = chip.flag_latency_cycles
    elems = rows * align_up(cols, FRACTAL)
    if t.mode == "fill":
        w.cyc["VECTOR"] += chip.vector_head_cycles + elems * p.out_isz / chip.vector_bytes_per_cycle   # duplicate
        w.head = w.cyc["VECTOR"] + sync
        if p.bias:
            w.cyc["MTE2"] += w.xfer(region(chip, 1, cols, p.N, ACC_BYTES), "GM", "UB")
            w.gm_read += p.batch * p.N * ACC_BYTES
            w.head += w.cyc["MTE2"] + w.lat("GM", "UB") + sync
        return w
    a_b = region(chip, 1, rows, p.M, p.isz)
    b_b = region(chip, 1, cols, p.N, p.isz)
    ld = w.xfer(a_b, "GM", "UB") + w.xfer(b_b, "GM", "UB") + (w.xfer(region(chip, 1, cols, p.N, ACC_BYTES), "GM", "UB")
                                                           if p.bias else 0.0)
    w.cyc["MTE2"] += per * ld
    w.gm_read += p.batch * (p.M + p.N) * p.isz
    w.bias_reads()
    cast_in = p.isz != ACC_BYTES
    ops = [elems, elems] + ([rows, cols] if cast_in else []) + ([elems] if p.out_isz != ACC_BYTES else []) + \
        ([elems] if p.bias else [])
    vec = sum(w.vec_cycles(e) for e in ops)
    w.cyc["VECTOR"] += per * vec
    # each tile waits for its loads (latency) unless enough copies keep the next tiles' loads in flight
    rounds = cdiv(per, max(1, t.ub_buffers))
    w.head = ld + w.lat("GM", "UB") + sync + vec + sync
    w.cyc["MTE3"] += (rounds - 1) * (w.lat("GM", "UB"))
    return w
