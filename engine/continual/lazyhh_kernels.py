"""LazyHH's numba state and kernels [001 Alg 6; docs/lazyhh.md §6.5]: the candidate set C in a hash
table, LAZYHH_UPDATE over a batch of arrivals, and OUTPUT and PRUNE every k~ arrivals. The
parameters, the guarantee and the registered algorithm are in ``lazyhh``."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dptop.engine.core import hashtable as ht
from dptop.engine.core.hashtable import found, homes, probe_at, store
from dptop.engine.core.jit import hot, inner, ix, kernel
from dptop.engine.core.keys import EMPTY_WORD, KEY_DTYPE
from dptop.engine.core.topk import kth_smallest
from dptop.engine.continual.gaussbm import CHUNK
from dptop.engine.continual.lazysketch import LazySketch
from dptop.engine.continual.lazysketch_kernels import SketchState, cms_estimate, push_next, row_buckets
from dptop.engine.privacy import bulknoise


@inner
def suppression_threshold(t, k, k_tilde, width, gamma):
    """τ(t) = max(t/k, t/k~ + λ1 + 2λ2(t)) + 1 with λ1 = γ + w, λ2 = e·t/w + γ (docs/lazyhh.md §6.3)."""
    lam1 = gamma + width
    lam2 = 2.718281828459045 * t / width + gamma
    tau1 = t / k
    tau2 = t / k_tilde + lam1 + 2.0 * lam2
    return max(tau1, tau2) + 1.0


# meta[] fields
T_NOW, CAND_N, OUT_N, OUT_T = 0, 1, 2, 3


class HHState(NamedTuple):
    """Candidates in arrival order in ``cand_*[:n]``; each keeps its cells in row ``cand_slot[c]``
    of ``cells``, so PRUNE moves one slot number per candidate, not d cells. ``cand_slot`` is a
    permutation of the rows: past the candidates it lists the free ones. ``tab`` maps a key to
    its row, which moves with it, so an arrival finds its cells in one lookup."""

    sk: SketchState
    cand_hi: np.ndarray  # uint64[2k~]
    cand_lo: np.ndarray
    cand_slot: np.ndarray  # int64[2k~] the candidate's row of ``cells`` (then the free rows)
    cells: np.ndarray  # uint32[2k~, d] a candidate's cells as flat indices i + d·h_i(x) of ``pre`` (computed on entry)
    drop: np.ndarray  # int64[2k~] PRUNE scratch: the rows it frees
    cand_home: np.ndarray  # int64[2k~] their home positions in ``tab``
    chunk: np.ndarray  # int64[CHUNK]: scratch, home positions of the keys of a batch chunk
    cand_val: np.ndarray  # float64[2k~] estimates at the last output (scratch; never released)
    tab: ht.Table  # candidate key -> its row of ``cells`` (its ``cand_slot``)
    out_hi: np.ndarray  # uint64[2k~] last output H
    out_lo: np.ndarray
    out_val: np.ndarray
    out_tau: np.ndarray  # float64[1] τ applied at the last output
    sel: np.ndarray  # float64[4k~ + 2] selection scratch of PRUNE (``kth_smallest``)
    meta: np.ndarray  # int64[4]


def make_hh_state(sketch: LazySketch, k_tilde: int, table_seed) -> HHState:
    cap = 2 * k_tilde
    return HHState(
        sketch.state, np.zeros(cap, KEY_DTYPE), np.zeros(cap, KEY_DTYPE),
        np.arange(cap, dtype=np.int64), np.zeros((cap, sketch.depth), np.uint32), np.zeros(cap, np.int64),
        np.zeros(cap, np.int64), np.zeros(CHUNK, np.int64), np.zeros(cap),
        ht.make_table(4 * k_tilde, seed=table_seed),
        np.zeros(cap, KEY_DTYPE), np.zeros(cap, KEY_DTYPE), np.zeros(cap), np.zeros(1), np.zeros(2 * cap + 2),
        np.zeros(4, np.int64),
    )


def hh_state_bytes(depth: int, width: int, height: int, k_tilde: int) -> int:
    """The bytes of ``make_hh_state``: the sketch's state and 2k~ candidates with their d cells."""
    cap = 2 * k_tilde
    return (LazySketch.state_bytes(depth, width, height) + cap * (88 + 4 * depth) + 8 * CHUNK + 56
            + ht.table_bytes(4 * k_tilde))


@kernel
def output_step(st, t, k, k_tilde, gamma):
    """OUTPUT(t): estimate every candidate, publish those above τ(t) (docs/lazyhh.md §6.5).

    PRUNE keeps the k~ largest estimates: the k~-th largest of all is at least the smallest of
    the first k~ (any k~ of them), L. So past the first k~ a candidate's estimate stops once its
    running minimum is below L and not above τ: it is then neither kept nor published, and
    the value it keeps (its running minimum, above its estimate but below L) leaves PRUNE's cut
    and ties as they are. Every kept or published value is exact."""
    pre, cells, cand_val = st.sk.bm.pre, st.cells, st.cand_val
    tau = suppression_threshold(t, k, k_tilde, pre.shape[0], gamma)
    flat = pre.reshape(-1)
    n = st.meta[CAND_N]
    low = np.inf
    floor = -np.inf
    m = 0
    for c in range(n):
        if c == k_tilde:
            floor = min(low, np.nextafter(tau, np.inf))  # below it: < L and <= τ
        v = cms_estimate(flat, cells, st.cand_slot[c], floor)
        low = min(low, v)
        cand_val[c] = v
        if v > tau:
            st.out_hi[m] = st.cand_hi[c]
            st.out_lo[m] = st.cand_lo[c]
            st.out_val[m] = v
            m += 1
    st.meta[OUT_N] = m
    st.meta[OUT_T] = t
    st.out_tau[0] = tau


@kernel
def prune(st, k_tilde):
    """PRUNE(): keep the k~ candidates with the largest estimates (ties: lower index first),
    compacting in place, and rebuild the key table (docs/lazyhh.md §6.5)."""
    n = st.meta[CAND_N]
    if n <= k_tilde:
        return
    vals, slot, drop = st.cand_val, st.cand_slot, st.drop
    cut = kth_smallest(vals, n, n - k_tilde, st.sel)  # the k~-th largest
    above = 0
    for c in range(n):
        if vals[c] > cut:
            above += 1
    ties = k_tilde - above  # how many candidates equal to `cut` stay
    tab_hi, tab_lo, tab_val, hashing = st.tab
    tab_hi[:] = EMPTY_WORD
    tab_lo[:] = EMPTY_WORD
    m = 0
    freed = 0
    for c in range(n):
        keep = vals[c] > cut
        if not keep and vals[c] == cut and ties > 0:
            keep = True
            ties -= 1
        if keep:
            hi = st.cand_hi[c]
            lo = st.cand_lo[c]
            st.cand_hi[m] = hi
            st.cand_lo[m] = lo
            st.cand_home[m] = st.cand_home[c]
            slot[m] = slot[c]
            vals[m] = vals[c]
            q = probe_at(tab_hi, tab_lo, st.cand_home[m], hi, lo)
            store(tab_hi, tab_lo, tab_val, q, hi, lo, slot[m])
            m += 1
        else:
            drop[freed] = slot[c]
            freed += 1
    for j in range(freed):  # the freed rows join the free ones past the candidates
        slot[m + j] = drop[j]
    st.meta[CAND_N] = m


@hot
def update_batch(st, keys, sigma, rng, k, k_tilde, gamma):
    """LAZYHH_UPDATE for every key (docs/lazyhh.md §6.5); returns the index of the last output step or -1.
    The per-arrival loop works on unpacked arrays (see ``gaussbm.push_column``). A key already in
    C adds to P through the cells stored when it entered (the same cells ``row_buckets`` gives):
    most arrivals are candidates' and skip the d hashes. The candidate lookup comes first; C is
    never read by the sketch update, so the order does not matter. Noise is drawn per chunk of
    arrivals for that chunk only (rounded up to whole blocks of ``bulknoise.LANES`` draws): a
    short batch, as a live capture hands over, does not draw a whole chunk it never uses."""
    p, seeds, sk_meta, hm = st.sk.p, st.sk.seeds, st.sk.meta, st.sk.hm
    ex, sx, pre, upd, z = st.sk.bm
    tab_hi, tab_lo, tab_val, hashing = st.tab
    cand_hi, cand_lo, cand_slot, cells, cand_home, meta = (st.cand_hi, st.cand_lo, st.cand_slot, st.cells,
                                                           st.cand_home, st.meta)
    w, d = p.shape
    pos = sk_meta[0]
    t = meta[T_NOW]
    n_cand = meta[CAND_N]
    last = -1
    until = k_tilde - t % k_tilde
    home = st.chunk
    flat_p = p.reshape(-1)
    for n in range(len(keys)):
        if n % CHUNK == 0:
            stop = min(n + CHUNK, len(keys))
            if sigma > 0.0:  # this chunk's d draws an arrival, in whole blocks of lanes
                used = (stop - n) * d
                bulknoise.fill_normal(rng, z[:used + (-used) % bulknoise.LANES], 1.0)
            homes(keys, n, stop, hashing, home)
        hi = keys[n, 0]
        lo = keys[n, 1]
        t += 1
        until -= 1
        h = home[n % CHUNK]
        q = probe_at(tab_hi, tab_lo, h, hi, lo)
        if found(tab_hi, tab_lo, q, hi, lo):  # a candidate (most arrivals): its cells are known, no hashing
            own = cells[ix(tab_val[ix(q)])]
        else:  # joins C: its cells are computed once, kept while it stays
            row = cand_slot[n_cand]
            own = cells[ix(row)]
            row_buckets(seeds, hm, hi, lo, w, own)
            cand_hi[n_cand] = hi
            cand_lo[n_cand] = lo
            cand_home[n_cand] = h
            store(tab_hi, tab_lo, tab_val, q, hi, lo, row)
            n_cand += 1
        for i in range(d):  # LAZY_UPDATE (docs/lazyhh.md §5.2): x into P through its cells, then push a column
            flat_p[own[i]] += 1
        pos = push_next(p, ex, sx, pre, upd, pos, sigma, z, (n % CHUNK) * d)
        if until == 0:  # t ≡ 0 mod k~, counted down (a division per arrival costs more)
            until = k_tilde
            meta[CAND_N] = n_cand
            output_step(st, t, k, k_tilde, gamma)
            prune(st, k_tilde)
            n_cand = meta[CAND_N]
            last = n
    sk_meta[0] = pos
    meta[T_NOW] = t
    meta[CAND_N] = n_cand
    return last
