"""Mergeable summaries (dptop.engine.baselines.merge): merges against naive references, algebra
(associative and commutative where the structure is), merged error bounds for every key, and the
structure of merged Misra-Gries neighbours (docs/dp-misra-gries.md §8, test T8)."""
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from dptop.engine.baselines.merge import (CountSummarizer, CountMinSummarizer, MGSummarizer, SketchSummary,
                                          SSSummarizer, countmin_top, derive_seeds, merge_all, sum_by_key)
from dptop.engine.core.settings import Settings
from tests import naive

BASE = 0xFFFF_0000_0000
streams = st.lists(st.lists(st.integers(0, 40), max_size=120), min_size=1, max_size=4)
capacities = st.integers(1, 8)
FAST = settings(max_examples=60, deadline=None)


def _keys(stream):
    keys = np.zeros((len(stream), 2), dtype=np.uint64)
    keys[:, 1] = BASE + np.asarray(stream, dtype=np.uint64)
    return keys


def _summary(make, stream):
    s = make()
    s.update(_keys(stream))
    return s.summary()


def _as_dict(summary) -> dict:
    return {int(lo) - BASE: int(c) for lo, c in zip(summary.keys[:, 1], summary.counts)}


def _same(a, b) -> bool:
    return np.array_equal(a.keys, b.keys) and np.array_equal(a.counts, b.counts) and a.n == b.n


def test_sum_by_key_matches_counter():
    rng = np.random.default_rng(1)
    stream = rng.integers(0, 50, 1000)
    keys, counts = sum_by_key(_keys(stream), np.ones(len(stream), np.int64))
    assert {int(lo) - BASE: int(c) for lo, c in zip(keys[:, 1], counts)} == Counter(stream.tolist())
    assert np.all(np.diff(keys[:, 1].astype(np.int64)) > 0)


@FAST
@given(streams)
def test_exact_merge_is_the_count_of_the_union_in_any_order(parts):
    summaries = [_summary(CountSummarizer, p) for p in parts]
    merged = merge_all(summaries)
    assert _as_dict(merged) == Counter(x for p in parts for x in p)
    assert _same(merge_all(summaries[::-1]), merged)
    if len(summaries) == 3:
        a, b, c = summaries
        assert _same(a.merge(b.merge(c)), a.merge(b).merge(c))


@FAST
@given(streams, capacities)
def test_misragries_merge_matches_reference_and_bounds(parts, K):
    summaries = [_summary(lambda: MGSummarizer(K), p) for p in parts]
    expected = _as_dict(summaries[0])
    for s in summaries[1:]:
        expected = naive.mg_merge(expected, _as_dict(s), K)
    merged = merge_all(summaries)
    assert _as_dict(merged) == expected
    assert len(merged.keys) <= K
    truth = Counter(x for p in parts for x in p)
    n = sum(truth.values())
    assert merged.n == n and merged.error_bound <= n / (K + 1)
    for x, f in truth.items():  # f − (n − Σc)/(K+1) <= estimate <= f for every key
        est = expected.get(x, 0)
        assert f - merged.error_bound <= est <= f, (x, f, est, merged.error_bound)
    if len(summaries) >= 2:
        a, b = summaries[:2]
        assert _same(a.merge(b), b.merge(a))  # commutative (not associative: sum then cut)


@FAST
@given(streams, capacities)
def test_spacesaving_merge_matches_reference_and_bounds(parts, K):
    summaries = [_summary(lambda: SSSummarizer(K), p) for p in parts]
    expected, floor = _as_dict(summaries[0]), summaries[0].floor
    for s in summaries[1:]:
        expected, floor = naive.ss_merge(expected, floor, _as_dict(s), s.floor, K)
    merged = merge_all(summaries)
    assert _as_dict(merged) == expected and merged.floor == floor
    truth = Counter(x for p in parts for x in p)
    n = sum(truth.values())
    assert merged.floor * K <= n and int(merged.counts.sum()) <= n
    for x in range(41):  # f <= estimate <= f + floor for every key, stored or not
        est = int(merged.estimate(_keys([x]))[0])
        assert truth[x] <= est <= truth[x] + merged.floor, (x, truth[x], est, merged.floor)
    if len(summaries) >= 2:
        a, b = summaries[:2]
        assert _same(a.merge(b), b.merge(a)) and a.merge(b).floor == b.merge(a).floor


@FAST
@given(streams)
def test_countmin_merge_is_the_sketch_of_the_union(parts):
    seeds = derive_seeds(b"collector-secret", "countmin", 4)
    config = Settings(k=4)
    summaries = [_summary(lambda: CountMinSummarizer(config, seeds), p) for p in parts]
    merged = merge_all(summaries)
    whole = _summary(lambda: CountMinSummarizer(config, seeds), [x for p in parts for x in p])
    assert np.array_equal(merged.cells, whole.cells) and merged.n == whole.n
    assert np.array_equal(merge_all(summaries[::-1]).cells, merged.cells)
    truth = Counter(x for p in parts for x in p)
    for item in countmin_top(merged, 4):  # CountMin never under-estimates
        assert item.estimate >= truth[item.lo - BASE]


def test_sketches_with_different_seeds_refuse_to_merge():
    a = SketchSummary(np.zeros((2, 8), np.int64), np.arange(2, dtype=np.uint64), np.zeros((0, 2), np.uint64), 0)
    b = SketchSummary(np.zeros((2, 8), np.int64), np.arange(1, 3, dtype=np.uint64), np.zeros((0, 2), np.uint64), 0)
    with pytest.raises(ValueError, match="different hash seeds"):
        a.merge(b)
    with pytest.raises(ValueError, match=r"different capacity K \(4 and 5\)"):
        _summary(lambda: MGSummarizer(4), [1]).merge(_summary(lambda: MGSummarizer(5), [1]))


def test_derived_seeds_are_a_function_of_master_and_label():
    a = derive_seeds(b"m" * 32, "eehh-cms/epoch/0", 20)
    assert np.array_equal(a, derive_seeds(b"m" * 32, "eehh-cms/epoch/0", 20))
    assert not np.array_equal(a, derive_seeds(b"m" * 32, "eehh-cms/epoch/1", 20))
    assert not np.array_equal(a, derive_seeds(b"n" * 32, "eehh-cms/epoch/0", 20))
    assert len(set(a.tolist())) == 20


def _neighbour_diff(a, b) -> dict:
    da, db = _as_dict(a), _as_dict(b)
    return {x: da.get(x, 0) - db.get(x, 0) for x in set(da) | set(db) if da.get(x, 0) != db.get(x, 0)}


@settings(max_examples=150, deadline=None)
@given(streams, capacities, st.data())
def test_merged_misragries_neighbours_differ_by_one_in_one_direction_on_at_most_k_keys(parts, K, data):
    """T8: drop one element from one capture point's stream; whatever the merge order, the merged
    counters differ by exactly 1, all in the same direction, on at most K keys (§8)."""
    i = data.draw(st.sampled_from([j for j, p in enumerate(parts) if p] or [None]))
    if i is None:
        return
    pos = data.draw(st.integers(0, len(parts[i]) - 1))
    neighbour = [p if j != i else p[:pos] + p[pos + 1:] for j, p in enumerate(parts)]
    order = data.draw(st.permutations(range(len(parts))))
    tree = data.draw(st.booleans())

    def merged(ps):
        s = [_summary(lambda: MGSummarizer(K), ps[j]) for j in order]
        if tree and len(s) == 4:
            return s[0].merge(s[1]).merge(s[2].merge(s[3]))
        return merge_all(s)

    diff = _neighbour_diff(merged(parts), merged(neighbour))
    assert len(diff) <= K, diff
    assert set(diff.values()) <= {1} or set(diff.values()) <= {-1}, diff
