"""Slow, obviously correct references the fast kernels are compared with (stumpy's tests/naive.py)."""
from __future__ import annotations

from collections import Counter


def spacesaving(stream, capacity: int) -> dict:
    """SpaceSaving with the paper's tie rule (docs/dpss-eehh.md §2.1): among the minimum counters,
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


def mg_merge(a: dict, b: dict, capacity: int) -> dict:
    """Misra-Gries merge of docs/dp-misra-gries.md §8: sum, subtract the (K+1)-th largest, keep > 0."""
    total = Counter(a) + Counter(b)
    values = sorted(total.values(), reverse=True)
    cut = values[capacity] if len(values) > capacity else 0
    return {x: c - cut for x, c in total.items() if c - cut > 0}


def ss_merge(a: dict, floor_a: int, b: dict, floor_b: int, capacity: int) -> tuple[dict, int]:
    """SpaceSaving merge: an absent key counts as that side's floor; keep the K largest sums
    (ties by key); the new floor is the largest dropped sum, or the floors' sum."""
    total = {x: a.get(x, floor_a) + b.get(x, floor_b) for x in set(a) | set(b)}
    ranked = sorted(total, key=lambda x: (-total[x], x))
    floor = total[ranked[capacity]] if len(ranked) > capacity else floor_a + floor_b
    return {x: total[x] for x in ranked[:capacity]}, floor
