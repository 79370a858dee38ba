"""Privacy-Aware Misra-Gries, PAMG [002 Alg 4] (docs/host-level.md §4), as numba kernels.

The input is a sequence of user sets S_1, S_2, ... of distinct items. For each set: every item's
counter goes up by 1 (a new item enters with 1), then, **once per user**, if more than k keys are
stored, every counter goes down by 1 and keys that reach 0 are deleted. So |T| <= k after each
user (at most k + |S_i| during one), and

* error [002 Lemma 8]: f(x) − ⌊N/(k+1)⌋ <= ĉ(x) <= f(x), N = Σ|S_i|; more precisely ĉ(x) >= f(x) − α
  with α the number of decrements;
* neighbours [002 Lemma 9]: removing one set gives T' ⊆ T with c − c' ∈ {0, 1}, or the same with
  the roles swapped, whatever the set size: ℓ2 sensitivity <= √k (the premise of GSHM, gshm.py).

Decrementing once per *element* instead (the textbook MG on the flattened stream) breaks Lemma 9:
one user can move a counter by m [002 Lemma 7]. Feeding every element as its own one-item set gives
exactly that variant; the audit uses it as its negative control (engine/lab/audit/user_level.py).

Merging [002 §7, Cor 10, Lemma 11]: sum the counters, subtract the (k+1)-th largest, drop the
non-positive (Agarwal et al.'s mergeable-summaries rule). Merged neighbours keep Lemma 9's
structure and the error stays within M/(k+1) for any merge order (M = all elements merged). The
rule is commutative; it is **not** associative in general (different trees may subtract different
amounts), only the bounds are order-free.

State: slots 0..size−1 hold (key, counter) pairs, compacted after each decrement; a hash table maps
keys to slots. Capacity k + m, m the largest set size allowed.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dptop.engine.core import hashtable as ht
from dptop.engine.core.hashtable import delete_at, found, probe, store
from dptop.engine.core.jit import inner, kernel
from dptop.engine.core.keys import KEY_DTYPE
from dptop.engine.core.settings import check_positive_int

SIZE, K, ALPHA, ELEMENTS = 0, 1, 2, 3  # meta[] fields: stored keys, k, decrements, N


class PAMGState(NamedTuple):
    key_hi: np.ndarray  # uint64[k + m]
    key_lo: np.ndarray  # uint64[k + m]
    cnt: np.ndarray  # int64[k + m]
    meta: np.ndarray  # int64[4]: size, k, alpha, elements
    tab: ht.Table  # key -> slot


def make_state(k: int, m: int) -> PAMGState:
    """An empty PAMG with k counters for sets of at most m items."""
    k, m = check_positive_int("k", k), check_positive_int("m", m)
    cap = k + m
    return PAMGState(np.zeros(cap, KEY_DTYPE), np.zeros(cap, KEY_DTYPE), np.zeros(cap, np.int64),
                     np.array([0, k, 0, 0], dtype=np.int64), ht.make_table(2 * cap))


def state_bytes(k: int, m: int) -> int:
    """The bytes ``make_state(k, m)`` allocates."""
    return 24 * (k + m) + 32 + ht.table_bytes(2 * (k + m))


@inner
def _decrement_all(key_hi, key_lo, cnt, meta, tab_hi, tab_lo, tab_val, hashing):
    """Every counter −1; keys that reach 0 leave T; the survivors are compacted to the front."""
    meta[ALPHA] += 1
    w = 0
    for j in range(meta[SIZE]):
        hi, lo = key_hi[j], key_lo[j]
        pos = probe(tab_hi, tab_lo, hashing, hi, lo)
        cnt[j] -= 1
        if cnt[j] == 0:
            delete_at(tab_hi, tab_lo, tab_val, hashing, pos)
            continue
        if w != j:
            key_hi[w], key_lo[w], cnt[w] = hi, lo, cnt[j]
            tab_val[pos] = w
        w += 1
    meta[SIZE] = w


@kernel
def update_sets(st, items, offsets):
    """Alg 4 over the sets ``items[offsets[i]:offsets[i+1]]`` (each of distinct keys, at most m)."""
    key_hi, key_lo, cnt, meta = st.key_hi, st.key_lo, st.cnt, st.meta
    tab_hi, tab_lo, tab_val, hashing = st.tab
    for u in range(len(offsets) - 1):
        if offsets[u + 1] - offsets[u] > len(cnt) - meta[K]:
            raise ValueError("a user set is larger than the m this PAMG was built for")
        for e in range(offsets[u], offsets[u + 1]):
            hi, lo = items[e, 0], items[e, 1]
            pos = probe(tab_hi, tab_lo, hashing, hi, lo)
            if found(tab_hi, tab_lo, pos, hi, lo):
                cnt[tab_val[pos]] += 1
            else:
                s = meta[SIZE]
                key_hi[s], key_lo[s], cnt[s] = hi, lo, 1
                store(tab_hi, tab_lo, tab_val, pos, hi, lo, s)
                meta[SIZE] = s + 1
        meta[ELEMENTS] += offsets[u + 1] - offsets[u]
        if meta[SIZE] > meta[K]:  # at most once per user
            _decrement_all(key_hi, key_lo, cnt, meta, tab_hi, tab_lo, tab_val, hashing)


@kernel
def _load(st, keys, counts):
    """Fill an empty state with distinct ``keys`` and positive ``counts`` (at most capacity)."""
    tab_hi, tab_lo, tab_val, hashing = st.tab
    for j in range(len(counts)):
        hi, lo = keys[j, 0], keys[j, 1]
        st.key_hi[j], st.key_lo[j], st.cnt[j] = hi, lo, counts[j]
        store(tab_hi, tab_lo, tab_val, probe(tab_hi, tab_lo, hashing, hi, lo), hi, lo, j)
    st.meta[SIZE] = len(counts)


def snapshot(st: PAMGState) -> tuple[np.ndarray, np.ndarray]:
    """Copies of the stored keys ``(size, 2)`` and counters, in key order."""
    n = int(st.meta[SIZE])
    keys = np.stack([st.key_hi[:n], st.key_lo[:n]], axis=1)
    order = np.lexsort((keys[:, 1], keys[:, 0]))
    return keys[order], st.cnt[:n][order].copy()


class PAMG:
    """A PAMG sketch: ``update(items, offsets)`` feeds user sets, ``merge(other)`` combines two."""

    def __init__(self, k: int, m: int):
        self.k, self.m = check_positive_int("k", k), check_positive_int("m", m)
        self.state = make_state(self.k, self.m)

    def update(self, items: np.ndarray, offsets: np.ndarray) -> None:
        sizes = np.diff(offsets)
        if len(sizes) and int(sizes.max()) > self.m:
            raise ValueError(f"a user set has {int(sizes.max())} items; this PAMG takes at most m ({self.m})")
        update_sets(self.state, items, offsets)

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        """(keys, counters) in key order; every stored counter is >= 1."""
        return snapshot(self.state)

    @property
    def decrements(self) -> int:
        """α: how many times every counter went down (each estimate is within α of the truth)."""
        return int(self.state.meta[ALPHA])

    @property
    def elements(self) -> int:
        """N (M after merges): the number of elements this sketch summarises."""
        return int(self.state.meta[ELEMENTS])

    def error_bound(self) -> int:
        """f(x) − ĉ(x) <= ⌊N/(k+1)⌋ for every x [002 Lemma 8, Lemma 11]."""
        return self.elements // (self.k + 1)

    def merge(self, other: "PAMG") -> "PAMG":
        """A new sketch of both inputs [002 §7]: counters summed, the (k+1)-th largest subtracted,
        non-positive ones dropped. Both must have the same k."""
        if other.k != self.k:
            raise ValueError(f"cannot merge PAMG sketches with k = {self.k} and k = {other.k}")
        keys, counts = merge_counters(*self.items(), *other.items(), self.k)
        out = PAMG(self.k, max(self.m, other.m))
        _load(out.state, keys, counts)
        out.state.meta[ELEMENTS] = self.elements + other.elements
        return out


def merge_counters(keys_a, counts_a, keys_b, counts_b, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Agarwal et al.'s merge of two counter sets: at most k positive counters, in key order."""
    keys = np.concatenate([keys_a, keys_b]).astype(KEY_DTYPE).reshape(-1, 2)
    counts = np.concatenate([counts_a, counts_b]).astype(np.int64)
    if len(keys) == 0:
        return keys, counts
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    summed = np.zeros(len(uniq), dtype=np.int64)
    np.add.at(summed, inverse.ravel(), counts)
    if len(summed) > k:
        summed = summed - np.sort(summed)[::-1][k]  # the (k+1)-th largest
    keep = summed > 0
    return np.ascontiguousarray(uniq[keep]), summed[keep]
