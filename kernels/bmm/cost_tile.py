"""One output tile through block.accumulate + store_tile (_Tile, _acc_tile), the K pieces and tile classes
it is cut into, and the booking of a core's tiles (and their bias rows) on a _Work."""
from __future__ import annotations

from dataclasses import dataclass

from .block import m_trim
from .conditions import ACC_BYTES, FRACTAL, MX_GROUP, Problem, align_up, cdiv
from .cost_pipes import _Work, a_region, b_region, region
from .memo import memoised


def _extents(total: int, tile: int) -> list[tuple[int, int]]:
    """[(extent, count)]: the full tiles and the tail of `total` cut into `tile`s."""
    if total <= 0 or tile <= 0:
        return []
    full, tail = divmod(total, tile)
    out = [(tile, full)] if full else []
    return out + ([(tail, 1)] if tail else [])


def _pieces(k_len: int, align: int, base_k: int, pieces: int) -> list[int]:
    """The K widths block._stream_l1 / held_ab load a step of k_len in (0 pieces: one load of the slot)."""
    k_all = align_up(k_len, align)
    step = align_up(cdiv(k_all, max(1, pieces)), base_k)
    return [min(step, k_all - kp) for kp in range(0, k_all, step)]


# ---- one output tile through block.accumulate -------------------------------------------------------------
@dataclass
class _Tile:
    """What one output tile costs on its core (cycles, charged bytes) and its first/last pieces."""

    xfers: float = 0.0        # GM -> L1 transfers
    mte2: float = 0.0         # MTE2 pipe cycles at the core's share of the channel
    a_bytes: float = 0.0      # charged bytes of A streamed
    b_bytes: float = 0.0
    mte1: float = 0.0
    mmad: float = 0.0
    first_in: float = 0.0     # MTE2 cycles of the first piece of A and B
    first_l0: float = 0.0     # MTE1 of the first L0 step
    last_cube: float = 0.0    # MTE1 + MMAD of the L0 steps in the last piece
    store: float = 0.0        # charged bytes of the store
    store_cyc: float = 0.0    # Fixpipe cycles of the store
    steps: float = 0.0        # L1 steps (each a slot of the streamed ring)
    cons: float = 0.0         # the cube's time on each step, summed (max of its MTE1 and MMAD; their sum with one
                              # L0A/L0B copy)

    def copy(self) -> "_Tile":
        """A shallow copy (a memoised tile handed to a caller that may add to it)."""
        t = _Tile.__new__(_Tile)
        t.__dict__.update(self.__dict__)
        return t

    def add(self, o: "_Tile", n: float) -> None:
        """self += n * o, field by field (the totals' fields: not the first/last pieces')."""
        self.xfers += n * o.xfers
        self.mte2 += n * o.mte2
        self.a_bytes += n * o.a_bytes
        self.b_bytes += n * o.b_bytes
        self.mte1 += n * o.mte1
        self.mmad += n * o.mmad
        self.store += n * o.store
        self.store_cyc += n * o.store_cyc
        self.steps += n * o.steps
        self.cons += n * o.cons


def _acc_tile_key(w: _Work, rows: int, cols: int, k_len: int, *, base_m: int, base_n: int, base_k: int, k_l1: int,
                  pieces: int, stream_a: bool = True, stream_b: bool = True, out_row: int | None = None,
                  out_isz: int | None = None) -> tuple:
    """What _acc_tile reads: the problem, the chip (by identity), one or two L0 copies, the tile and its walk."""
    return (w.p, id(w.chip), w.l0_single, rows, cols, k_len, base_m, base_n, base_k, k_l1, pieces, stream_a, stream_b,
            out_row, out_isz)


# a StreamK tiling's units repeat the same blocks and K segments, and its candidate splits the same tiles
@memoised(4096, key=_acc_tile_key, keep=lambda w, *a, **kw: w.chip, copy=lambda t: t.copy())
def _acc_tile(w: _Work, rows: int, cols: int, k_len: int, *, base_m: int, base_n: int, base_k: int, k_l1: int,
              pieces: int, stream_a: bool = True, stream_b: bool = True,
              out_row: int | None = None, out_isz: int | None = None) -> _Tile:
    """One tile of rows x cols over k_len of K (block.accumulate + store_tile).

    out_row / out_isz: the stored tensor's row length and item size (default the output [.., M, N]). MX
    (block.py): each L1 step also loads the streamed operands' E8M0 scales (`_mx_scales`), each L0 step moves them
    to ScaleLeft / ScaleRight, and matmul_mx computes the whole base tile (its whole-tile rule).
    """
    p, chip = w.p, w.chip
    align = max(FRACTAL, p.k0)
    mt = min(base_m, align_up(rows, m_trim(p.isz, p.transpose_a and not chip.dn2nz)))   # block.Buffers.m_align
    nt = min(base_n, align_up(cols, align))
    if pieces <= 0:
        a_r, b_c = min(base_m, p.M), min(base_n, p.N)
    else:
        a_r, b_c = min(mt, rows), min(nt, cols)
    t = _Tile()
    steps = _extents(k_len, k_l1)                   # the full L1 steps and the tail
    k1 = 0
    for si, (kl, cnt) in enumerate(steps):
        ws = [k_l1] if pieces <= 0 else _pieces(kl, align, base_k, pieces)
        mte2 = nx = ab_sum = bb_sum = 0.0
        first_cyc = None
        kp = 0
        for kw in ws:
            kc = max(0, min(kw, kl - kp)) if pieces > 0 else min(kw, kl)
            ab = a_region(chip, p, a_r, kc) if stream_a else 0.0
            bb = b_region(chip, p, kc, b_c) if stream_b else 0.0
            cyc = (w.xfer(ab) if stream_a else 0.0) + (w.xfer(bb) if stream_b else 0.0)
            nx += int(stream_a) + int(stream_b)
            mte2 += cyc
            ab_sum += ab
            bb_sum += bb
            first_cyc = cyc if first_cyc is None else first_cyc
            kp += kw
        if p.mx:
            sc, n_sc, sa, sb = _mx_scales(w, kl, min(a_r, rows) if stream_a else 0, min(b_c, cols) if stream_b else 0)
            mte2 += sc
            nx += n_sc
            ab_sum += sa
            bb_sum += sb
        l0 = []                                     # (kt, count) of the L0 steps in this L1 step
        full, tail = divmod(kl, base_k)
        if full:
            l0.append((base_k, full))
        if tail:
            l0.append((align_up(tail, align), 1))
        m1 = sum(c * w.mte1_cycles(mt * kt * p.isz, kt * nt * p.isz) for kt, c in l0)
        mm = sum(c * w.mmad_cycles(mt, nt, kt) for kt, c in l0)
        if p.mx:
            m1 += sum(c * w.mte1_cycles(mt * kt // MX_GROUP, kt // MX_GROUP * nt) for kt, c in l0)
            mm = sum(c for _, c in l0) * w.mmad_cycles(base_m, base_n, base_k)
        t.xfers += cnt * nx
        t.mte2 += cnt * mte2
        t.a_bytes += cnt * ab_sum
        t.b_bytes += cnt * bb_sum
        t.mte1 += cnt * m1
        t.mmad += cnt * mm
        t.steps += cnt
        t.cons += cnt * (m1 + mm if w.l0_single else max(m1, mm))
        if si == 0:
            t.first_in = first_cyc or 0.0
            kt0 = l0[0][0]
            t.first_l0 = w.mte1_cycles(mt * kt0 * p.isz, kt0 * nt * p.isz)
        # the L0 steps of the last piece follow the last transfer
        last_w = ws[-1] if pieces > 0 else kl
        share = min(1.0, last_w / max(1, kl))
        kt_l = l0[-1][0]
        t.last_cube = share * mm + w.mte1_cycles(mt * kt_l * p.isz, kt_l * nt * p.isz)
        k1 += cnt * kl
    row_len = p.N if out_row is None else out_row
    isz = p.out_isz if out_isz is None else out_isz
    t.store = region(chip, rows, cols, row_len, isz)
    t.store_cyc = w.xfer(t.store, "L0C", "GM")
    return t


def _mx_scales(w: _Work, k_len: int, a_rows: int, b_cols: int) -> tuple[float, int, float, float]:
    """(MTE2 cycles, transfers, charged bytes of A's and of B's) of one L1 step's E8M0 scale loads
    (block.load_scales): A's rows of k_len/32 bytes from GM [Ba*M, K/64, 2] (rows K/32 bytes long: each charged
    the burst minimum, several times its bytes), B's k_len/64 rows of 2 x cols bytes from GM [Bb*K/64, N, 2];
    a_rows / b_cols 0 for a side not streamed."""
    p, chip = w.p, w.chip
    g = k_len // MX_GROUP
    sa = region(chip, a_rows, g, p.K // MX_GROUP, 1) if a_rows else 0.0
    sb = region(chip, g // 2, 2 * b_cols, 2 * p.N, 1) if b_cols else 0.0
    cyc = (w.xfer(sa) if a_rows else 0.0) + (w.xfer(sb) if b_cols else 0.0)
    return cyc, int(bool(a_rows)) + int(bool(b_cols)), sa, sb


def _tiles(m: int, n: int, bm: int, bn: int) -> list[tuple[int, int, int]]:
    """[(rows, cols, count)] of the tile classes of an m x n grid of bm x bn tiles."""
    return [(r, c, cm * cn) for r, cm in _extents(m, bm) for c, cn in _extents(n, bn)]


def _biggest(tiles: list) -> _Tile:
    """The costliest tile class: tiles are dealt round robin, and a core's share of a batch is often the same
    tile position batch after batch, so the busiest core may run only full tiles."""
    return max((tl for tl, _ in tiles), key=lambda tl: (max(tl.mmad, tl.mte2, tl.mte1), tl.mmad + tl.mte2))


def _finish_tiles(w: _Work, per_core: float, avg: _Tile, last: _Tile, sync: float) -> None:
    """Book a core's tiles: `per_core` tiles like `avg`, the last like `last`; fill and drain."""
    w.cyc["MTE2"] += per_core * avg.mte2
    w.cyc["MTE1"] += per_core * avg.mte1
    w.cyc["MMAD"] += per_core * avg.mmad
    w.cyc["FIXPIPE"] += per_core * avg.store_cyc
    if w.l0_single:
        w.l0_chain = per_core * (avg.mmad + avg.mte1)
    store_lat = w.lat("L0C", "GM")
    w.tail_fix = store_lat
    w.tail_mmad = sync + last.store_cyc + store_lat
    w.tail_load = w.lat() + sync + last.last_cube + sync + last.store_cyc + store_lat
    w.tail_ring = w.lat() + sync + last.last_cube + sync
    w.tail_store = last.store_cyc
    w.head = w.head or (last.first_in + w.lat() + sync + last.first_l0 + sync)


def _bias(w: _Work, p: Problem, per_core: float, cols: int) -> None:
    """The bias row of each tile: GM -> L1 (one short row) -> BT."""
    if not p.bias:
        return
    row = region(w.chip, 1, min(cols, p.N), p.N, ACC_BYTES)
    w.cyc["MTE2"] += per_core * w.xfer(row)
    w.cyc["MTE1"] += per_core * min(cols, p.N) * ACC_BYTES / w.chip.path("L1", "BT").bytes_per_cycle
    w.bias_reads()
