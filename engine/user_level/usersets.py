"""Per-epoch user sets: the distinct (user, item) pairs of an epoch, at most ``m`` items per user
(docs/host-level.md §1.2: contributions are bounded **before** sketching, P1).

A user is one host (the packet source for ``hostdp-dst``), an item another host (the packet
destination). Each user keeps its first ``m`` distinct items in arrival order; packets of further
pairs are dropped and counted per user (operational status, never part of a release). A user's
set therefore depends on that user's own packets only, and users are numbered by first
appearance, so removing one user leaves every other set and the order of the others unchanged:
exactly the neighbouring relation of 002 §8 (Lemma 9 removes one set S_i from the sequence).

Three growable hash tables (``dptop.engine.core.hashtable``) map user keys and item keys to dense
indices and the pair ``(user index, item index)`` (a key whose words are both < 2^32, never the
empty sentinel) to its presence. Memory follows the distinct pairs kept (at most m per user);
the kernel stops before a table passes half load and Python doubles it, as ``ExactCounter`` does.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dptop.engine.core import hashtable as ht
from dptop.engine.core.hashtable import found, probe, store
from dptop.engine.core.jit import kernel
from dptop.engine.core.keys import KEY_DTYPE

USERS, ITEMS, PAIRS = 0, 1, 2


class UserSetsState(NamedTuple):
    users: ht.Table  # user key -> user index (first appearance order)
    items: ht.Table  # item key -> item index
    pairs: ht.Table  # (user index, item index) -> 1
    user_kept: np.ndarray  # int64[cap_u]: distinct items kept per user (<= m)
    user_over: np.ndarray  # int64[cap_u]: packets of pairs beyond the user's first m items
    item_key: np.ndarray  # uint64[cap_i, 2]
    item_users: np.ndarray  # int64[cap_i]: users whose kept set holds the item
    pair_user: np.ndarray  # int64[cap_p], kept pairs in arrival order
    pair_item: np.ndarray  # int64[cap_p]
    sizes: np.ndarray  # int64[3]: users, items, pairs


def _state(cap_u: int, cap_i: int, cap_p: int, tables=None) -> UserSetsState:
    users, items, pairs = tables or (ht.make_table(2 * cap_u), ht.make_table(2 * cap_i), ht.make_table(2 * cap_p))
    return UserSetsState(users, items, pairs, np.zeros(len(users.hi) // 2, np.int64),
                         np.zeros(len(users.hi) // 2, np.int64), np.zeros((len(items.hi) // 2, 2), KEY_DTYPE),
                         np.zeros(len(items.hi) // 2, np.int64), np.zeros(len(pairs.hi) // 2, np.int64),
                         np.zeros(len(pairs.hi) // 2, np.int64), np.zeros(3, np.int64))


@kernel
def _collect(st, m, users, items, start):
    """Add the packets ``start..`` (user key ``users[i]``, item key ``items[i]``); return the index
    of the first packet not processed because a table reached half load (``len(users)`` if none)."""
    u_hi, u_lo, u_val, u_hash = st.users
    i_hi, i_lo, i_val, i_hash = st.items
    p_hi, p_lo, p_val, p_hash = st.pairs
    sizes = st.sizes
    for idx in range(start, len(users)):
        if sizes[USERS] >= len(st.user_kept) or sizes[ITEMS] >= len(st.item_users) \
                or sizes[PAIRS] >= len(st.pair_user):
            return idx
        hi, lo = users[idx, 0], users[idx, 1]
        pos = probe(u_hi, u_lo, u_hash, hi, lo)
        if found(u_hi, u_lo, pos, hi, lo):
            u = u_val[pos]
        else:
            u = sizes[USERS]
            store(u_hi, u_lo, u_val, pos, hi, lo, u)
            st.user_kept[u] = 0
            st.user_over[u] = 0
            sizes[USERS] += 1
        hi, lo = items[idx, 0], items[idx, 1]
        ipos = probe(i_hi, i_lo, i_hash, hi, lo)
        item = -1
        if found(i_hi, i_lo, ipos, hi, lo):
            item = i_val[ipos]
            ppos = probe(p_hi, p_lo, p_hash, np.uint64(u), np.uint64(item))
            if found(p_hi, p_lo, ppos, np.uint64(u), np.uint64(item)):
                continue  # a known pair: one more packet of it, nothing to record
        if st.user_kept[u] >= m:
            st.user_over[u] += 1  # a new pair beyond the cap: dropped
            continue
        if item < 0:
            item = sizes[ITEMS]
            store(i_hi, i_lo, i_val, ipos, hi, lo, item)
            st.item_key[item, 0] = hi
            st.item_key[item, 1] = lo
            st.item_users[item] = 0
            sizes[ITEMS] += 1
        ppos = probe(p_hi, p_lo, p_hash, np.uint64(u), np.uint64(item))
        store(p_hi, p_lo, p_val, ppos, np.uint64(u), np.uint64(item), 1)
        st.pair_user[sizes[PAIRS]] = u
        st.pair_item[sizes[PAIRS]] = item
        sizes[PAIRS] += 1
        st.user_kept[u] += 1
        st.item_users[item] += 1
    return len(users)


def _grown(st: UserSetsState) -> UserSetsState:
    """The same content with every full structure doubled."""
    def bigger(table, size):
        return ht.grown(table) if size >= len(table.hi) // 2 else table

    n_u, n_i, n_p = (int(x) for x in st.sizes)
    new = _state(0, 0, 0, (bigger(st.users, n_u), bigger(st.items, n_i), bigger(st.pairs, n_p)))
    for old, arr, n in ((st.user_kept, new.user_kept, n_u), (st.user_over, new.user_over, n_u),
                        (st.item_key, new.item_key, n_i), (st.item_users, new.item_users, n_i),
                        (st.pair_user, new.pair_user, n_p), (st.pair_item, new.pair_item, n_p)):
        arr[:n] = old[:n]
    new.sizes[:] = st.sizes
    return new


INITIAL_CAPACITY = 1 << 10
"""Users, items and pairs a new ``UserSets`` holds before its tables grow."""


class UserSets:
    """The distinct items of each user, first ``m`` per user (``m=None``: no cap)."""

    @staticmethod
    def nbytes(capacity: int = INITIAL_CAPACITY) -> int:
        """The bytes ``_state(capacity, capacity, capacity)`` allocates: three tables and the
        per-user, per-item and per-pair arrays (half a table's positions each)."""
        table = ht.table_bytes(2 * capacity)
        rows = (table - 16) // 48  # half of the table's positions
        return 3 * table + rows * (16 + 24 + 16) + 24

    def __init__(self, m: int | None, capacity: int = INITIAL_CAPACITY):
        self.m = m
        self._cap = np.iinfo(np.int64).max if m is None else int(m)
        self.state = _state(capacity, capacity, capacity)

    def add(self, users: np.ndarray, items: np.ndarray) -> None:
        """One batch of packets: ``users[i]`` contacted (or was contacted by) ``items[i]``."""
        start = 0
        while True:
            start = _collect(self.state, self._cap, users, items, start)
            if start >= len(users):
                return
            self.state = _grown(self.state)

    @property
    def users(self) -> int:
        return int(self.state.sizes[USERS])

    @property
    def pairs(self) -> int:
        """Distinct (user, item) pairs kept: N = Σ|S_i| of 002 §8."""
        return int(self.state.sizes[PAIRS])

    @property
    def capped_users(self) -> int:
        """Users that had pairs beyond their first m items."""
        return int(np.count_nonzero(self.state.user_over[:self.users]))

    @property
    def over_cap_packets(self) -> int:
        """Packets dropped because their pair was beyond its user's first m items."""
        return int(self.state.user_over[:self.users].sum())

    def sets(self) -> tuple[np.ndarray, np.ndarray]:
        """``(items (N, 2), offsets (users + 1))``: user j's set is ``items[offsets[j]:offsets[j+1]]``,
        users in order of first appearance, items in arrival order."""
        st, n = self.state, self.pairs
        order = np.argsort(st.pair_user[:n], kind="stable")
        items = st.item_key[st.pair_item[:n][order]]
        offsets = np.zeros(self.users + 1, dtype=np.int64)
        np.cumsum(np.bincount(st.pair_user[:n], minlength=self.users), out=offsets[1:])
        return np.ascontiguousarray(items), offsets

    def item_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """``(item keys (d, 2), number of users holding each)``: the exact f(x) of 002 §8."""
        n = int(self.state.sizes[ITEMS])
        return self.state.item_key[:n].copy(), self.state.item_users[:n].copy()
