"""Corollary 1 of paper 000 on neighbouring streams (docs/dpss-eehh.md §2.4–§2.6, tests T2–T5).

X is the longer stream and X' is X without the element at position i. After every prefix
t >= i + 1 the summaries SS(X[:t]) and SS(X'[:t−1]) must satisfy (I1)–(I5) of §2.6. The paper's
tie rule (evict the minimum counter whose *last arrival* is most recent) never violates them; the
plausible wrong rule "recency set only on insertion" (entry time) does, which shows the harness
has teeth. The wrong rule exists only here, in the plain-Python reference.
"""
import random

import numpy as np
import pytest

from dptop.engine.lab.audit.structure import corollary1_violations
from dptop.engine.baselines.spacesaving import make_state, snapshot, update_batch
from tests import naive

BASE = 0xFFFF_0000_0000


class RefSS:
    """Plain-Python SpaceSaving; ``rule`` = "paper" (last arrival) or "entry" (insertion time)."""

    def __init__(self, capacity: int, rule: str = "paper"):
        self.K, self.rule = capacity, rule
        self.C: dict = {}
        self.last: dict = {}
        self.entry: dict = {}
        self.t = 0

    def add(self, x):
        C = self.C
        if x in C:
            C[x] += 1
        elif len(C) < self.K:
            C[x] = 1
            self.entry[x] = self.t
        else:
            m = min(C.values())
            recency = self.last if self.rule == "paper" else self.entry
            victim = max((a for a in C if C[a] == m), key=recency.__getitem__)
            del C[victim]
            C[x] = m + 1
            self.entry[x] = self.t
        self.last[x] = self.t  # the paper rule refreshes this on every arrival (§2.2)
        self.t += 1


def check_pair(stream, i, K, rule="paper") -> list[str]:
    """Run X and X' = X minus element i side by side; violations after every prefix t > i."""
    a, b = RefSS(K, rule), RefSS(K, rule)
    for t, x in enumerate(stream, start=1):
        a.add(x)
        if t - 1 != i:
            b.add(x)
        if t > i:
            bad = corollary1_violations(a.C, b.C, K, t)
            if bad:
                return [f"t={t}: {v}" for v in bad]
    return []


def random_pair(rng, hard: bool = False):
    """A random (stream, removed position, K). ``hard``: uniform symbols over K+1..2K+2 values,
    K in 5..8, length 150 — where the entry-time bug shows up about 4 times per 1,000 pairs."""
    if hard:
        K = rng.randint(5, 8)
        stream = rng.choices(range(rng.randint(K + 1, 2 * K + 2)), k=150)
    else:
        K = rng.randint(1, 8)
        alphabet = rng.randint(K + 1, 2 * K + 3)
        weights = [1 / (j + 1) ** rng.choice([0.0, 1.0, 2.0]) for j in range(alphabet)]
        stream = rng.choices(range(alphabet), weights, k=rng.randint(1, 100))
    return stream, rng.randrange(len(stream)), K


def _kernel_summary(stream, K):
    st = make_state(K)
    keys = np.zeros((len(stream), 2), dtype=np.uint64)
    keys[:, 1] = BASE + np.asarray(stream, dtype=np.uint64)
    update_batch(st, keys)
    k, c, _ = snapshot(st)
    return {int(lo) - BASE: int(v) for lo, v in zip(k[:, 1], c)}


def test_reference_matches_naive():
    rng = random.Random(7)
    for _ in range(300):
        stream, _, K = random_pair(rng)
        ref = RefSS(K)
        for x in stream:
            ref.add(x)
        assert ref.C == naive.spacesaving(stream, K)


@pytest.mark.parametrize("seed", range(4))
def test_corollary1_paper_rule_random_pairs(seed):
    """>= 10^4 random neighbouring pairs in total (2,500 per seed, half of them "hard"), every
    prefix checked."""
    rng = random.Random(1000 + seed)
    for j in range(2500):
        stream, i, K = random_pair(rng, hard=j % 2 == 1)
        assert check_pair(stream, i, K) == [], (seed, K, i, stream)


def test_entry_time_rule_violates_corollary1():
    """Negative control (T5): the same harness must catch the entry-time bug."""
    rng = random.Random(2024)
    found = 0
    for _ in range(5000):
        stream, i, K = random_pair(rng, hard=True)
        found += bool(check_pair(stream, i, K, rule="entry"))
    assert found >= 5, f"the entry-time rule broke only {found} of 5,000 pairs: the harness lost its teeth"


FROZEN_K5 = [11, 10, 12, 8, 3, 2, 4, 8, 12, 11, 5, 9, 7]


def _final(stream, K, rule):
    ref = RefSS(K, rule)
    for x in stream:
        ref.add(x)
    return ref.C


def test_frozen_counterexample_paper_rule():
    assert _final(FROZEN_K5, 5, "paper") == {2: 2, 4: 2, 5: 3, 9: 3, 7: 3}
    assert _final(FROZEN_K5[1:], 5, "paper") == {12: 2, 8: 2, 4: 2, 9: 3, 7: 3}
    assert check_pair(FROZEN_K5, 0, 5) == []
    # The numba kernel reaches the same summaries.
    assert _kernel_summary(FROZEN_K5, 5) == {2: 2, 4: 2, 5: 3, 9: 3, 7: 3}
    assert _kernel_summary(FROZEN_K5[1:], 5) == {12: 2, 8: 2, 4: 2, 9: 3, 7: 3}


def test_frozen_counterexample_entry_rule():
    C = _final(FROZEN_K5, 5, "entry")
    assert C == {11: 2, 2: 2, 5: 3, 9: 3, 7: 3}
    Cp = _final(FROZEN_K5[1:], 5, "entry")
    assert len(set(C) - set(Cp)) == 3 and len(set(Cp) - set(C)) == 3
    assert any(v.startswith("t=13: I1") for v in check_pair(FROZEN_K5, 0, 5, "entry"))


def test_frozen_dphh_ring_mismatch():
    # docs/dpss-eehh.md §2.5: the paper rule evicts 3 (the more recent of the two count-1 items).
    assert _final([4, 3, 1, 2, 1, 2, 9], 4, "paper") == {4: 1, 1: 2, 2: 2, 9: 2}
    assert _kernel_summary([4, 3, 1, 2, 1, 2, 9], 4) == {4: 1, 1: 2, 2: 2, 9: 2}


def test_corollary1_on_kernel_summaries():
    """Corollary 1 on the numba kernel's summaries (final states of 500 random pairs)."""
    rng = random.Random(99)
    for _ in range(500):
        stream, i, K = random_pair(rng)
        shorter = stream[:i] + stream[i + 1:]
        C, Cp = _kernel_summary(stream, K), _kernel_summary(shorter, K)
        assert corollary1_violations(C, Cp, K, len(stream)) == [], (K, i, stream)
