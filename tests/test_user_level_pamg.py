"""Per-epoch user sets and PAMG (docs/host-level.md §1, §4; docs/dp-misra-gries.md §13 T7–T8; paper 002 §7–§8).

* user sets against the plain-Python reference (first m distinct items, over-cap packets);
* the numba PAMG against 002 Alg 4 written directly (tests/naive_user_level.RefPAMG);
* Lemma 9 on 10^4 random neighbouring pairs (remove one whole user), after every user, with
  |T| <= k and Lemma 8's ⌊N/(k+1)⌋ bound; the per-element variant (002 Lemma 7) must break it;
* merge (Cor 10, Lemma 11): commutative; not associative in general (a counterexample is
  pinned); merged neighbours keep Lemma 9's structure and every merge order keeps f − M/(k+1).
"""
import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from dptop.engine.lab.audit.user_level import lemma9_violations
from dptop.engine.user_level.pamg import PAMG, merge_counters
from dptop.engine.user_level.usersets import UserSets
from tests.naive_user_level import RefPAMG, ref_merge, ref_user_sets

SEED = 20_260_101


def keys_of(symbols) -> np.ndarray:
    out = np.zeros((len(symbols), 2), dtype=np.uint64)
    out[:, 1] = np.asarray(symbols, dtype=np.uint64) + 1
    return out


def flat(sets):
    """(items (N, 2), offsets) of a list of symbol sets."""
    items = keys_of([x for s in sets for x in s])
    offsets = np.zeros(len(sets) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in sets], out=offsets[1:])
    return items, offsets


def as_dict(sketch: PAMG) -> dict:
    keys, counts = sketch.items()
    return {int(lo) - 1: int(c) for lo, c in zip(keys[:, 1], counts)}


def pamg_of(sets, k, m=None):
    p = PAMG(k, m or max([len(s) for s in sets] + [1]))
    if sets:
        p.update(*flat(sets))
    return p


def random_sets(rng, n_users, universe, m):
    return [rng.sample(range(universe), rng.randint(1, min(m, universe))) for _ in range(n_users)]


# ---------------------------------------------------------------- user sets

def test_user_sets_match_reference():
    rng = random.Random(SEED)
    for _ in range(150):
        n, m = rng.randint(1, 400), rng.randint(1, 6)
        users = [rng.randint(0, 25) for _ in range(n)]
        items = [rng.randint(0, 20) for _ in range(n)]
        sets = UserSets(m, capacity=2)  # tiny tables: every growth path runs
        for a in range(0, n, 37):
            sets.add(keys_of(users[a:a + 37]), keys_of(items[a:a + 37]))
        want, over = ref_user_sets(users, items, m)
        got_items, offsets = sets.sets()
        got = [[int(x) - 1 for x in got_items[offsets[j]:offsets[j + 1], 1]] for j in range(len(offsets) - 1)]
        assert got == want
        assert sets.over_cap_packets == over and sets.pairs == sum(map(len, want))
        assert sets.capped_users == sum(1 for u in dict.fromkeys(users)
                                        if len(ref_user_sets([x for x in users if x == u],
                                                             [i for x, i in zip(users, items) if x == u], None)[0][0]) > m)
        keys, counts = sets.item_counts()
        truth = {}
        for s in want:
            for x in s:
                truth[x] = truth.get(x, 0) + 1
        assert {int(lo) - 1: int(c) for lo, c in zip(keys[:, 1], counts)} == truth


def test_removing_a_user_leaves_the_other_sets_and_their_order():
    rng = random.Random(SEED + 1)
    users = [rng.randint(0, 9) for _ in range(300)]
    items = [rng.randint(0, 30) for _ in range(300)]
    full, _ = ref_user_sets(users, items, 4)
    gone = users[17]
    kept = [(u, i) for u, i in zip(users, items) if u != gone]
    sets = UserSets(4)
    sets.add(keys_of([u for u, _ in kept]), keys_of([i for _, i in kept]))
    got_items, offsets = sets.sets()
    got = [[int(x) - 1 for x in got_items[offsets[j]:offsets[j + 1], 1]] for j in range(len(offsets) - 1)]
    order = list(dict.fromkeys(users))
    assert got == [s for u, s in zip(order, full) if u != gone]


# ---------------------------------------------------------------- PAMG against Alg 4

def test_pamg_matches_reference_and_lemma8():
    rng = random.Random(SEED + 2)
    for _ in range(300):
        k, m = rng.randint(1, 8), rng.randint(1, 6)
        sets = random_sets(rng, rng.randint(1, 40), rng.randint(2, 25), m)
        ref = RefPAMG(k)
        for s in sets:
            ref.add(s)
            assert len(ref.c) <= k
        p = pamg_of(sets, k, m)
        assert as_dict(p) == ref.c and p.decrements == ref.alpha and p.elements == ref.n
        truth = {}
        for s in sets:
            for x in s:
                truth[x] = truth.get(x, 0) + 1
        for x, f in truth.items():
            assert f - p.decrements <= as_dict(p).get(x, 0) <= f
            assert f - ref.n // (k + 1) <= as_dict(p).get(x, 0)
        assert p.decrements <= ref.n // (k + 1)


def test_oversized_set_is_refused():
    with pytest.raises(ValueError, match=r"a user set has 3 items; this PAMG takes at most m \(2\)"):
        PAMG(4, 2).update(*flat([[1, 2, 3]]))
    with pytest.raises(ValueError, match=r"k \(0\) must be >= 1"):
        PAMG(0, 2)


def lemma9_pair(rng, per_element=False):
    """A random pair: sets S and S' = S without user i; checks Lemma 9 after every later user
    (reference model; ``per_element`` decrements once per element instead). Returns violations."""
    k, m = rng.randint(1, 8), rng.randint(1, 6)
    sets = random_sets(rng, rng.randint(1, 30), rng.randint(2, 20), m)
    i = rng.randrange(len(sets))
    a, b = RefPAMG(k), RefPAMG(k)
    for t, s in enumerate(sets):
        for part in ([[x] for x in s] if per_element else [s]):
            a.add(part)
            if t != i:
                b.add(part)
        if t >= i:
            bad = lemma9_violations(a.c, b.c)
            if bad:
                return [f"user {t}: {v}" for v in bad]
    return []


def test_lemma9_on_ten_thousand_random_pairs():
    """T7: 0 violations in 10^4 pairs (both the reference after every user, and the numba
    kernel's final sketches)."""
    rng = random.Random(SEED + 3)
    bad = []
    for _ in range(10_000):
        state = rng.getstate()
        bad += lemma9_pair(rng)
        rng.setstate(state)
        k, m = rng.randint(1, 8), rng.randint(1, 6)
        sets = random_sets(rng, rng.randint(1, 30), rng.randint(2, 20), m)
        i = rng.randrange(len(sets))
        bad += lemma9_violations(as_dict(pamg_of(sets, k, m)), as_dict(pamg_of(sets[:i] + sets[i + 1:], k, m)))
    assert not bad, bad[:5]


def test_per_element_decrements_break_lemma9():
    """T4-style negative control: the same harness must catch plain MG on the flattened sets."""
    rng = random.Random(SEED + 4)
    failures = sum(bool(lemma9_pair(rng, per_element=True)) for _ in range(2000))
    assert failures > 20, f"only {failures} of 2000 per-element pairs broke Lemma 9: the harness lost its teeth"


def test_lemma7_construction():
    """002 Lemma 7 with k = 6, m = 3: x ends m apart under per-element decrements, 1 apart under PAMG."""
    k, m = 6, 3
    cycle = [[(i * m + t) % k for t in range(m)] for i in range(k)]
    fresh = [100, 101, 102]
    tail = [[50]] * 10
    s, sp = cycle + [fresh] + tail, cycle + tail
    assert as_dict(pamg_of(s, k))[50] - as_dict(pamg_of(sp, k))[50] == 1

    def per_element(sets):
        p = PAMG(k, m)
        items = flat(sets)[0]
        p.update(items, np.arange(len(items) + 1, dtype=np.int64))
        return as_dict(p)

    assert per_element(s)[50] - per_element(sp)[50] == m


# ---------------------------------------------------------------- merge

def sketch_dict_strategy(k):
    return st.dictionaries(st.integers(0, 30), st.integers(1, 40), max_size=k)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 8).flatmap(lambda k: st.tuples(st.just(k), sketch_dict_strategy(k), sketch_dict_strategy(k))))
def test_merge_matches_reference_and_is_commutative(case):
    k, a, b = case

    def arr(d):
        return keys_of(list(d)), np.array(list(d.values()), dtype=np.int64)

    keys, counts = merge_counters(*arr(a), *arr(b), k)
    got = {int(lo) - 1: int(c) for lo, c in zip(keys[:, 1], counts)}
    assert got == ref_merge(a, b, k) and len(got) <= k
    keys2, counts2 = merge_counters(*arr(b), *arr(a), k)
    assert np.array_equal(keys, keys2) and np.array_equal(counts, counts2)


def test_merge_is_not_associative_in_general():
    """Pinned counterexample (k = 1): the merge tree changes what is subtracted; only the bounds of
    Lemma 11 are order-free."""
    a, b, c = pamg_of([[1]], 1), pamg_of([[3]], 1), pamg_of([[2]], 1)
    assert as_dict(a.merge(b).merge(c)) == {2: 1}
    assert as_dict(a.merge(b.merge(c))) == {1: 1}


def test_merged_sketches_keep_bounds_and_neighbour_structure():
    """Lemma 11: every merge order keeps f − M/(k+1) <= ĉ <= f; Cor 10 / T8: neighbouring inputs
    (one user removed from one part) give merged sketches in Lemma 9's structure."""
    rng = random.Random(SEED + 5)
    bad = []
    for _ in range(1500):
        k, m = rng.randint(1, 8), rng.randint(1, 5)
        parts = [random_sets(rng, rng.randint(1, 15), rng.randint(2, 20), m) for _ in range(rng.randint(2, 4))]
        j = rng.randrange(len(parts))
        i = rng.randrange(len(parts[j]))
        parts_p = [p if q != j else p[:i] + p[i + 1:] for q, p in enumerate(parts)]
        order = list(range(len(parts)))
        rng.shuffle(order)

        def merged(ps):
            out = pamg_of(ps[order[0]], k, m)
            for q in order[1:]:
                out = out.merge(pamg_of(ps[q], k, m))
            return out

        full = merged(parts)
        truth = {}
        for p in parts:
            for s in p:
                for x in s:
                    truth[x] = truth.get(x, 0) + 1
        total = sum(len(s) for p in parts for s in p)
        assert full.elements == total
        est = as_dict(full)
        assert all(f - total / (k + 1) <= est.get(x, 0) <= f for x, f in truth.items())
        bad += lemma9_violations(est, as_dict(merged(parts_p)))
    assert not bad, bad[:5]


def test_merge_refuses_different_k():
    with pytest.raises(ValueError, match="k = 4 and k = 5"):
        PAMG(4, 2).merge(PAMG(5, 2))


def test_merged_sketch_takes_more_users():
    a, b = pamg_of([[1, 2], [2, 3]], 2), pamg_of([[3, 4]], 2)
    merged = a.merge(b)
    merged.update(*flat([[1, 5]]))
    ref = RefPAMG(2)
    ref.c = ref_merge(as_dict(a), as_dict(b), 2)
    ref.add([1, 5])
    assert as_dict(merged) == ref.c
