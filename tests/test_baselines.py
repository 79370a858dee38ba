"""Exact counts, CountMin + heap and the utility metrics against plain-Python references."""
import numpy as np
import pytest

from dptop.engine.core.workload import zipf_ranks
from dptop.engine.baselines.exact import ExactCounter
from dptop.engine.core.metrics import average_relative_error, heavy_set, precision, recall, utility
from dptop.engine.core.registry import make
from dptop.engine.core.release import Release, ReleasedItem, Span
from dptop.engine.core.settings import Settings
from tests import naive


def _keys(stream):
    keys = np.zeros((len(stream), 2), dtype=np.uint64)
    keys[:, 1] = 0xFFFF_0000_0000 + np.asarray(stream, dtype=np.uint64)
    return keys


def test_exact_counter_grows_and_matches_counter():
    stream = zipf_ranks(1.0, 100_000, 200_000, seed=4).tolist()
    ec = ExactCounter(capacity=8)  # forces many doublings
    keys = _keys(stream)
    for i in range(0, len(keys), 30_000):
        ec.add(keys[i:i + 30_000])
    truth = naive.exact_counts(stream)
    k, c = ec.items()
    got = {int(lo) - 0xFFFF_0000_0000: int(v) for lo, v in zip(k[:, 1], c)}
    assert got == dict(truth)
    assert ec.total == len(stream) and ec.size == len(truth)
    top = ec.top(5)
    assert [it.estimate for it in top] == [v for _, v in truth.most_common(5)]


def test_exact_counter_mixed_families_weights_and_spills_match_a_dict():
    """IPv4 keys (compact table), IPv6 and near-IPv4 keys (wide table), byte weights that push
    packed counts past their field (carried to the heavy table) and past 2^32:
    counts, size, items and top agree with a plain dict, ties broken by key ascending."""
    rng = np.random.default_rng(7)
    n = 60_000
    keys = np.zeros((n, 2), dtype=np.uint64)
    family = rng.integers(0, 4, n)
    ranks = zipf_ranks(1.1, 5_000, n, seed=8).astype(np.uint64)
    keys[:, 1] = 0xFFFF_0000_0000 + ranks  # IPv4-mapped
    keys[family == 1, 0] = np.uint64(0x2001_0DB8_0000_0000)  # IPv6
    keys[family == 2, 1] = ranks[family == 2]  # ::a.b.c.d (IPv4-compatible): not IPv4-mapped, wide
    keys[0] = (0, 0xFFFF_FFFF_FFFF)  # 255.255.255.255
    keys[1] = (0, 0xFFFF_0000_0000)  # 0.0.0.0
    big = rng.random(n) < 0.002
    weights = np.where(big, 3_000_000_000, rng.integers(1, 1500, n)).astype(np.int64)
    ec = ExactCounter(capacity=8)
    truth: dict = {}
    for i in range(0, n, 7_000):
        ec.add(keys[i:i + 7_000], weights[i:i + 7_000])
    for (hi, lo), w in zip(keys.tolist(), weights.tolist()):
        truth[(hi, lo)] = truth.get((hi, lo), 0) + w
    assert ec.heavy > 0  # some packed counts did carry
    k, c = ec.items()
    assert {(int(h), int(l)): int(v) for (h, l), v in zip(k.tolist(), c.tolist())} == truth
    assert ec.size == len(truth) and ec.total == sum(truth.values())
    for key in list(truth)[:200]:
        assert ec.count_of(*key) == truth[key]
    assert ec.count_of(0, 0xFFFF_0000_0000 + 10**6) == 0
    expect = sorted(truth.items(), key=lambda kv: (-kv[1], kv[0]))[:25]
    assert [((it.hi, it.lo), it.estimate) for it in ec.top(25)] == [(k, float(v)) for k, v in expect]


def test_exact_counter_top_breaks_ties_by_key_without_listing_every_entry():
    keys = _keys(np.repeat(np.arange(1000), 3))  # 1000 sources, 3 packets each: all tied
    ec = ExactCounter(capacity=8)
    ec.add(keys[::-1].copy())
    assert [it.lo - 0xFFFF_0000_0000 for it in ec.top(4)] == [0, 1, 2, 3]
    assert ec.top(0) == () and len(ec.top(None)) == 1000


def test_countmin_never_underestimates_and_finds_heavy_hitters():
    stream = zipf_ranks(1.3, 20_000, 100_000, seed=5).tolist()
    alg = make("countmin", Settings(k=16))
    alg.update(_keys(stream))
    truth = naive.exact_counts(stream)
    rel = alg.release()
    assert len(rel.items) == 16
    for it in rel.items:
        f = truth[it.lo - 0xFFFF_0000_0000]
        assert it.estimate >= f
        assert it.estimate <= f + 2 * len(stream) / alg.width * 4, "CountMin error far beyond e·n/w"
    reported = {it.lo - 0xFFFF_0000_0000 for it in rel.items}
    assert {x for x, f in truth.items() if f > len(stream) / 16} <= reported


def test_countmin_with_a_seed_gives_the_same_release_and_without_one_new_rows():
    """--seed makes the sketch's row hashes (and so its over-estimates) the same on every run; without
    it they come from the OS (a small width makes collisions, so different rows give other estimates)."""
    keys = _keys(zipf_ranks(1.1, 5_000, 20_000, seed=2).tolist())

    def estimates(seed):
        alg = make("countmin", Settings(k=16, seed=seed, extra={"width": 64}))
        alg.update(keys)
        return [(it.lo, it.estimate) for it in alg.release().items], alg.hashing.seeds.tolist()

    assert estimates(7) == estimates(7)
    assert estimates(7)[1] != estimates(8)[1]
    assert estimates(None)[1] != estimates(None)[1]


def test_countmin_validates_width():
    with pytest.raises(ValueError, match=r"width \(1000\) must be a power of two"):
        make("countmin", Settings(k=4, extra={"width": 1000}))


def test_metrics_on_hand_made_release():
    truth = {(0, 1): 100, (0, 2): 50, (0, 3): 5}
    ec = ExactCounter()
    ec.add(np.array([[0, 1]] * 100 + [[0, 2]] * 50 + [[0, 3]] * 5, dtype=np.uint64))
    items = (ReleasedItem(0, 1, 110.0), ReleasedItem(0, 3, 4.0))
    u = utility(Release("x", Span(0, 155), items), ec, threshold=10)
    assert u.recall == 0.5 and u.precision == 0.5
    assert u.are == pytest.approx((10 / 100 + 1 / 5) / 2)
    assert recall(set(), set()) == 1.0 and precision(set(), {(0, 1)}) == 1.0
    assert average_relative_error([]) == 0.0
    keys = np.array(list(truth), dtype=np.uint64)
    assert heavy_set(keys, np.array(list(truth.values())), 50) == {(0, 1)}
