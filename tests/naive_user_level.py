"""Plain-Python references for the user-level engine (dptop.engine.user_level) and the synthetic
client/server workload its tests use.

* ``ref_user_sets``: each user's first m distinct items in arrival order, users in order of first
  appearance, and the packets dropped beyond the cap (usersets.py).
* ``RefPAMG``: 002 Alg 4 written directly from the paper (dict of counters).
* ``ref_merge``: Agarwal et al.'s merge (sum, subtract the (k+1)-th largest, drop non-positive).
* ``client_server_stream``: n clients, each contacting ``per_client`` distinct servers drawn from a
  Zipf popularity, packets spread over each client's servers and shuffled (one epoch).
"""
from __future__ import annotations

import numpy as np

from dptop.engine.core.keys import KeyBatch
from dptop.engine.core.workload import ipv4_of_rank, keys_of_ipv4, zipf_ranks


def ref_user_sets(users, items, m):
    """``(sets in first-appearance order, over-cap packets)`` for sequences of hashable users/items."""
    sets, order, over = {}, [], 0
    for u, x in zip(users, items):
        if u not in sets:
            sets[u] = []
            order.append(u)
        if x in sets[u]:
            continue
        if m is not None and len(sets[u]) >= m:
            over += 1
            continue
        sets[u].append(x)
    return [sets[u] for u in order], over


class RefPAMG:
    """002 Alg 4: increment every item of the set, then at most one decrement-all."""

    def __init__(self, k):
        self.k, self.c, self.alpha, self.n = k, {}, 0, 0

    def add(self, items):
        for x in items:
            self.c[x] = self.c.get(x, 0) + 1
        self.n += len(items)
        if len(self.c) > self.k:
            self.alpha += 1
            self.c = {x: v - 1 for x, v in self.c.items() if v > 1}


def ref_merge(a: dict, b: dict, k: int) -> dict:
    summed = {x: a.get(x, 0) + b.get(x, 0) for x in set(a) | set(b)}
    if len(summed) > k:
        cut = sorted(summed.values(), reverse=True)[k]
        summed = {x: v - cut for x, v in summed.items()}
    return {x: v for x, v in summed.items() if v > 0}


def client_server_stream(clients: int, per_client: int, servers: int, skew: float, packets: int, seed: int):
    """``(batch KeyBatch with dst, server ranks (clients, per_client))``: client i is 172.16.0.0 + i;
    its servers are ``per_client`` distinct Zipf(skew) ranks over ``servers`` (drawn with rejection
    of repeats); every pair gets one packet, the rest of ``packets`` go to uniform random pairs of
    the same client; the packet order is a uniform shuffle."""
    rng = np.random.default_rng(seed)
    sets = np.zeros((clients, per_client), dtype=np.int64)
    draw = zipf_ranks(skew, servers, clients * 4 * per_client, seed)
    pos = 0
    for i in range(clients):
        chosen: list[int] = []
        seen = set()
        while len(chosen) < per_client:
            if pos == len(draw):
                draw, pos = zipf_ranks(skew, servers, clients * per_client, seed + 1 + i), 0
            r = int(draw[pos])
            pos += 1
            if r not in seen:
                seen.add(r)
                chosen.append(r)
        sets[i] = chosen
    pair_client = np.repeat(np.arange(clients), per_client)
    pair_server = sets.ravel()
    extra = rng.integers(0, clients * per_client, packets - clients * per_client)
    idx = rng.permutation(np.concatenate([np.arange(clients * per_client), extra]))
    src = keys_of_ipv4((0xAC10_0000 + pair_client[idx]).astype(np.uint32))
    dst = keys_of_ipv4(ipv4_of_rank(pair_server[idx]))
    return KeyBatch(src, np.zeros(len(idx), np.int64), dst=dst), sets
