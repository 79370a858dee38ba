"""Slow, obviously correct references the fast kernels are compared with (stumpy's tests/naive.py)."""
from __future__ import annotations

from collections import Counter


def spacesaving(stream, capacity: int) -> dict:
    """SpaceSaving with the paper's tie rule (dpss-eehh.md §2.1): among the minimum counters,
    evict the item whose last arrival is most recent."""
    counters: dict = {}
    last: dict = {}
    for t, x in enumerate(stream):
        if x in counters:
            counters[x] += 1
        elif len(counters) < capacity:
            counters[x] = 1
        else:
            m = min(counters.values())
            victim = max((a for a in counters if counters[a] == m), key=lambda a: last[a])
            del counters[victim]
            counters[x] = m + 1
        last[x] = t
    return counters


def exact_counts(stream) -> Counter:
    return Counter(stream)
