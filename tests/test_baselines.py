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
