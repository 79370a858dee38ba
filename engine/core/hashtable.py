"""Open-addressing hash table from keys ``(hi, lo)`` to an ``int64`` value, as numba kernels.

Linear probing, backward-shift deletion (no tombstones), power-of-two capacity, home position
``hash_key(hi, lo, seed) >> shift`` with ``shift = 64 - log2(capacity)``
(docs/dp-misra-gries.md §3.3). The seed comes from the OS: it defends against hash flooding by
crafted source addresses and never affects privacy (every structure here is a deterministic
function of the stream whatever the hash). Callers keep the load at most 1/2.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dptop.engine.core.jit import inner, ix, kernel
from dptop.engine.core.keys import EMPTY_WORD, KEY_DTYPE, LO_MULTIPLIER, hash_key, mix64, random_seed64


class Table(NamedTuple):
    hi: np.ndarray  # uint64[C]
    lo: np.ndarray  # uint64[C]
    val: np.ndarray  # int64[C]
    hashing: np.ndarray  # uint64[2]: seed, shift


def _bits(min_capacity: int) -> int:
    return max(3, int(np.ceil(np.log2(max(2, min_capacity)))))


def make_table(min_capacity: int, seed: np.uint64 | None = None) -> Table:
    """An empty table with at least ``min_capacity`` positions (rounded up to a power of two)."""
    bits = _bits(min_capacity)
    capacity = 1 << bits
    hashing = np.array([random_seed64() if seed is None else seed, 64 - bits], dtype=np.uint64)
    return Table(
        np.full(capacity, EMPTY_WORD, dtype=KEY_DTYPE),
        np.full(capacity, EMPTY_WORD, dtype=KEY_DTYPE),
        np.zeros(capacity, dtype=np.int64),
        hashing,
    )


def table_bytes(min_capacity: int) -> int:
    """The bytes ``make_table(min_capacity)`` allocates (three 8-byte words per position)."""
    return 24 * (1 << _bits(min_capacity)) + 16


@inner
def is_empty(tab_hi, tab_lo, pos):
    return tab_hi[ix(pos)] == EMPTY_WORD and tab_lo[ix(pos)] == EMPTY_WORD


@inner
def home(hi, lo, hashing):
    return np.int64(hash_key(hi, lo, hashing[0]) >> hashing[1])


HOMES_CHUNK = 4096
"""Keys per chunk for which a batch kernel computes the home positions up front (``homes``)."""


@inner
def homes(keys, start, stop, hashing, out):
    """``out[i - start]`` = home position of ``keys[i]`` for i in [start, stop): ``hash_key`` in
    four loops the compiler vectorises, so the hashing leaves the per-key critical path (use with
    ``probe_at``). Each loop reads at most one column of the interleaved ``(n, 2)`` keys and does
    little else: one loop reading both columns around the two mixes vectorises badly (measured:
    about 3x slower per key)."""
    seed = hashing[0]
    shift = hashing[1]
    n = stop - start
    for i in range(n):
        out[i] = np.int64(keys[start + i, 0])
    for i in range(n):
        out[i] = np.int64(mix64(np.uint64(out[i]) ^ seed) ^ seed)
    for i in range(n):
        out[i] = np.int64(np.uint64(out[i]) ^ (keys[start + i, 1] * LO_MULTIPLIER))
    for i in range(n):
        out[i] = np.int64(mix64(np.uint64(out[i])) >> shift)


@inner
def probe(tab_hi, tab_lo, hashing, hi, lo):
    """Position of key ``(hi, lo)``, or of the empty position where it would be inserted."""
    return probe_at(tab_hi, tab_lo, home(hi, lo, hashing), hi, lo)


@inner
def probe_at(tab_hi, tab_lo, i, hi, lo):
    """``probe`` from a home position ``i`` computed beforehand."""
    mask = len(tab_hi) - 1
    while True:
        th = tab_hi[ix(i)]
        tl = tab_lo[ix(i)]
        if th == hi and tl == lo:
            return i
        if th == EMPTY_WORD and tl == EMPTY_WORD:
            return i
        i = (i + 1) & mask


@inner
def found(tab_hi, tab_lo, pos, hi, lo):
    return tab_hi[ix(pos)] == hi and tab_lo[ix(pos)] == lo


@inner
def store(tab_hi, tab_lo, tab_val, pos, hi, lo, value):
    """Write key ``(hi, lo)`` with ``value`` at ``pos`` (an empty position from ``probe``, or
    the key's own)."""
    tab_hi[ix(pos)] = hi
    tab_lo[ix(pos)] = lo
    tab_val[ix(pos)] = value


@kernel
def delete_at(tab_hi, tab_lo, tab_val, hashing, pos):
    """Remove the entry at ``pos`` by shifting later cluster members back into the hole."""
    mask = len(tab_hi) - 1
    hole = pos
    j = pos
    while True:
        j = (j + 1) & mask
        if is_empty(tab_hi, tab_lo, j):
            break
        h = home(tab_hi[j], tab_lo[j], hashing)
        # j may move into the hole unless its home lies cyclically in (hole, j].
        if hole <= j:
            stays = hole < h <= j
        else:
            stays = h > hole or h <= j
        if not stays:
            tab_hi[hole] = tab_hi[j]
            tab_lo[hole] = tab_lo[j]
            tab_val[hole] = tab_val[j]
            hole = j
    tab_hi[hole] = EMPTY_WORD
    tab_lo[hole] = EMPTY_WORD
    tab_val[hole] = 0


@kernel
def _reinsert_all(src_hi, src_lo, src_val, dst_hi, dst_lo, dst_val, hashing):
    for i in range(len(src_hi)):
        if not is_empty(src_hi, src_lo, i):
            p = probe(dst_hi, dst_lo, hashing, src_hi[i], src_lo[i])
            store(dst_hi, dst_lo, dst_val, p, src_hi[i], src_lo[i], src_val[i])


def grown(table: Table) -> Table:
    """A table of twice the capacity holding the same entries (same seed)."""
    bigger = make_table(2 * len(table.hi), seed=table.hashing[0])
    _reinsert_all(table.hi, table.lo, table.val, bigger.hi, bigger.lo, bigger.val, bigger.hashing)
    return bigger


@kernel
def occupied(tab_hi, tab_lo):
    """Indices of the occupied positions."""
    out = np.empty(len(tab_hi), dtype=np.int64)
    n = 0
    for i in range(len(tab_hi)):
        if not is_empty(tab_hi, tab_lo, i):
            out[n] = i
            n += 1
    return out[:n]
