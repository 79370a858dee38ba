"""EEHH's numba state and kernels [000 Alg 4; docs/dpss-eehh.md §6.1]: the noisy d × w sketch and its
vector multiply-shift row hashes, the CountMin / CountSketch estimate of an arrival, and TRACK_UPDATE
keeping the k~ labels with the largest recorded estimates in an indexed min-heap; the final query
and the readers of the state the release uses. Sizing, thresholds and the registered algorithms are
in ``eehh``."""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from dptop.engine.core import hashtable as ht
from dptop.engine.core.hashtable import HOMES_CHUNK, delete_at, found, homes, probe_at, store
from dptop.engine.core.jit import hot, inner, ix, kernel
from dptop.engine.core.keys import KEY_DTYPE
from dptop.engine.core.topk import select

SIZE, N = 0, 1  # meta[] fields
_LOW32 = np.uint64(0xFFFF_FFFF)
_S32 = np.uint64(32)
_S63 = np.uint64(63)


class EEState(NamedTuple):
    cells: np.ndarray  # int64[d, w]: noise from INIT plus counts
    hseed: np.ndarray  # uint64[d, 5]: bucket hash a0..a3, b
    sseed: np.ndarray  # uint64[d, 5]: sign hash (CountSketch); unused by CountMin
    seed_t: np.ndarray  # uint64[10, d]: hseed then sseed transposed, for the vectorised row loop
    shift: np.ndarray  # uint64[1]: 64 − log2(w)
    slot_hi: np.ndarray  # uint64[k~]
    slot_lo: np.ndarray
    slot_val: np.ndarray  # int64[k~]: estimate recorded at the label's last arrival
    meta: np.ndarray  # int64[2]: tracked size, n
    heap: np.ndarray  # int64[k~]: tracked slots, a binary min-heap by hkey
    hkey: np.ndarray  # int64[k~]: heap keys: slot_val of heap[i] (CountMin: a lower bound of it)
    hpos: np.ndarray  # int64[k~]: each slot's index in ``heap``
    home: np.ndarray  # int64[k~]: hash-table home position of each slot's label
    chunk: np.ndarray  # int64[HOMES_CHUNK]: scratch, home positions of the keys of a batch chunk
    scratch: np.ndarray  # int64[d]: per-row values for the median
    col: np.ndarray  # int64[d]: the current key's column in each row
    sign: np.ndarray  # int64[d]: its sign in each row (CountSketch; 1 for CountMin)
    tab: ht.Table  # label -> slot


def make_ee_state(cells: np.ndarray, hseed: np.ndarray, sseed: np.ndarray, slots: int) -> EEState:
    """A sketch over ``cells`` (d × w, w a power of two) with its row seeds and ``slots`` tracked labels."""
    d, w = cells.shape
    hseed = np.ascontiguousarray(hseed, np.uint64)
    sseed = np.ascontiguousarray(sseed, np.uint64)
    return EEState(cells, hseed, sseed, np.concatenate([hseed.T, sseed.T]).copy(),
                   np.array([64 - int(math.log2(w))], dtype=np.uint64),
                   np.zeros(slots, KEY_DTYPE), np.zeros(slots, KEY_DTYPE), np.zeros(slots, np.int64),
                   np.zeros(2, np.int64), np.zeros(slots, np.int64), np.zeros(slots, np.int64),
                   np.zeros(slots, np.int64), np.zeros(slots, np.int64), np.zeros(HOMES_CHUNK, np.int64),
                   np.zeros(d, np.int64), np.zeros(d, np.int64), np.ones(d, np.int64), ht.make_table(4 * slots))


def ee_state_bytes(d: int, w: int, slots: int) -> int:
    """The bytes ``make_ee_state`` holds for a d × w sketch with ``slots`` tracked labels."""
    return 8 * d * (w + 5 + 5 + 10 + 3) + 8 + 56 * slots + 16 + 8 * HOMES_CHUNK + ht.table_bytes(4 * slots)


@inner
def _rows(seed_t, shift, hi, lo, col, sign, signed):
    """Column (and sign) of (hi, lo) in every row: vector multiply-shift over the four 32-bit
    chunks, top bits (sign: top bit of the second hash). One loop over rows, which the compiler
    vectorises (the coefficients are row-contiguous in ``seed_t``)."""
    h0, h1, l0, l1 = hi >> _S32, hi & _LOW32, lo >> _S32, lo & _LOW32
    a0, a1, a2, a3, b = seed_t[0], seed_t[1], seed_t[2], seed_t[3], seed_t[4]
    for r in range(len(col)):
        col[r] = np.int64((a0[r] * h0 + a1[r] * h1 + a2[r] * l0 + a3[r] * l1 + b[r]) >> shift)
    if signed:
        a0, a1, a2, a3, b = seed_t[5], seed_t[6], seed_t[7], seed_t[8], seed_t[9]
        for r in range(len(sign)):
            sign[r] = 1 - 2 * np.int64((a0[r] * h0 + a1[r] * h1 + a2[r] * l0 + a3[r] * l1 + b[r]) >> _S63)


@inner
def _add_and_estimate(cells, seed_t, shift, scratch, col, sign, hi, lo, signed, delta):
    """Add ``delta`` occurrences of (hi, lo) (0 = pure query) and return its estimate:
    min over rows (CountMin) or median of the signed cells (CountSketch, odd d)."""
    _rows(seed_t, shift, hi, lo, col, sign, signed)
    d = cells.shape[0]
    if signed:
        for r in range(d):
            cells[r, col[r]] += sign[r] * delta
            scratch[r] = sign[r] * cells[r, col[r]]
        return select(scratch, d // 2)
    est = cells[0, ix(col[0])] + delta
    cells[0, ix(col[0])] = est
    for r in range(1, d):
        v = cells[r, ix(col[r])] + delta
        cells[r, ix(col[r])] = v
        est = min(est, v)
    return est


@inner
def _sift_up(heap, hkey, hpos, i):
    s, v = heap[i], hkey[i]
    while i > 0:
        parent = (i - 1) // 2
        if hkey[parent] <= v:
            break
        heap[i], hkey[i] = heap[parent], hkey[parent]
        hpos[heap[i]] = i
        i = parent
    heap[i], hkey[i] = s, v
    hpos[s] = i


@inner
def _sift_down(heap, hkey, hpos, i, size):
    s, v = heap[i], hkey[i]
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and hkey[c + 1] < hkey[c]:
            c += 1
        if hkey[c] >= v:
            break
        heap[i], hkey[i] = heap[c], hkey[c]
        hpos[heap[i]] = i
        i = c
    heap[i], hkey[i] = s, v
    hpos[s] = i


@inner
def _rekey(heap, hkey, hpos, i, key, size):
    old = hkey[i]
    hkey[i] = key
    if key > old:
        _sift_down(heap, hkey, hpos, i, size)
    elif key < old:
        _sift_up(heap, hkey, hpos, i)


@inner
def _admit(tab_hi, tab_lo, tab_val, hashing, slot_hi, slot_lo, val, meta, heap, hkey, hpos, slot_home,
           p, hi, lo, h, est):
    """TRACK_UPDATE steps 3–5 for an untracked label at empty table position ``p``: take a free
    slot, or the slot of the smallest recorded estimate if ``est`` exceeds it."""
    size = meta[SIZE]
    if size < len(val):
        s = size
        meta[SIZE] = size + 1
        store(tab_hi, tab_lo, tab_val, p, hi, lo, s)
        val[s] = est
        heap[size], hkey[size] = s, est
        _sift_up(heap, hkey, hpos, size)
    else:
        while hkey[0] != val[heap[0]]:  # stale lower bound at the root (CountMin only)
            _rekey(heap, hkey, hpos, 0, val[heap[0]], size)
        if est <= hkey[0]:
            return
        s = heap[0]
        old_pos = probe_at(tab_hi, tab_lo, slot_home[s], slot_hi[s], slot_lo[s])
        store(tab_hi, tab_lo, tab_val, p, hi, lo, s)  # before the deletion, as in SpaceSaving
        delete_at(tab_hi, tab_lo, tab_val, hashing, old_pos)
        val[s] = est
        _rekey(heap, hkey, hpos, 0, est, size)
    slot_hi[s] = hi
    slot_lo[s] = lo
    slot_home[s] = h


@hot
def update_batch(st, keys, signed):
    """Sketch update and TRACK_UPDATE (docs/dpss-eehh.md §6.1) for every key of the batch: the k~
    labels with the largest recorded estimates, in an indexed binary min-heap (ties arbitrary, as
    §6.1 allows). CountMin estimates of a label only grow, so there the heap keys are lower bounds,
    refreshed when the minimum is needed; CountSketch rekeys at once. The common cases (a tracked
    label; an untracked one below the minimum) stay in this loop: helpers taking a dozen arrays
    cost their reference counting on every call."""
    cells, seed_t, shift, scratch, col, sign = st.cells, st.seed_t, st.shift[0], st.scratch, st.col, st.sign
    tab_hi, tab_lo, tab_val, hashing = st.tab
    val, meta, heap, hkey, hpos = st.slot_val, st.meta, st.heap, st.hkey, st.hpos
    kt = len(val)
    meta[N] += len(keys)
    home = st.chunk
    for i in range(len(keys)):
        if i % HOMES_CHUNK == 0:
            homes(keys, i, min(i + HOMES_CHUNK, len(keys)), hashing, home)
        hi = keys[i, 0]
        lo = keys[i, 1]
        est = _add_and_estimate(cells, seed_t, shift, scratch, col, sign, hi, lo, signed, np.int64(1))
        h = home[i % HOMES_CHUNK]
        p = probe_at(tab_hi, tab_lo, h, hi, lo)
        if found(tab_hi, tab_lo, p, hi, lo):
            s = tab_val[p]
            val[s] = est
            if signed:
                _rekey(heap, hkey, hpos, hpos[s], est, meta[SIZE])
            continue
        if meta[SIZE] == kt and hkey[0] == val[heap[0]] and est <= hkey[0]:
            continue
        _admit(tab_hi, tab_lo, tab_val, hashing, st.slot_hi, st.slot_lo, val, meta, heap, hkey, hpos, st.home,
               p, hi, lo, h, est)


@kernel
def query_batch(st, keys, signed):
    """Final estimates of ``keys`` (no update)."""
    out = np.empty(len(keys), dtype=np.int64)
    for i in range(len(keys)):
        out[i] = _add_and_estimate(st.cells, st.seed_t, st.shift[0], st.scratch, st.col, st.sign, keys[i, 0],
                                   keys[i, 1], signed, np.int64(0))
    return out


def tracked(st: EEState) -> np.ndarray:
    """The tracked labels ``(m, 2)`` (their stale values are never released)."""
    m = int(st.meta[SIZE])
    return np.stack([st.slot_hi[:m], st.slot_lo[:m]], axis=1).copy()


def f2_upper(st: EEState) -> float:
    """F2_up = 2·median_r Σ_j cell[r][j]² of the final noisy sketch (§6.4 step 3)."""
    return 2.0 * float(np.median((st.cells.astype(np.float64) ** 2).sum(axis=1)))
