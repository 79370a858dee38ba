"""SpaceSaving kernel vs the plain-Python reference with the paper's tie rule (docs/dpss-eehh.md §2)."""
import random

import numpy as np
import pytest

from dptop.engine.core.settings import Settings
from dptop.engine.baselines.spacesaving import SpaceSaving, make_state, snapshot, update_batch
from tests import naive


def _keys(stream):
    keys = np.zeros((len(stream), 2), dtype=np.uint64)
    keys[:, 1] = 0xFFFF_0000_0000 + np.asarray(stream, dtype=np.uint64)
    return keys


def _run(stream, capacity, batch=None):
    st = make_state(capacity)
    keys = _keys(stream)
    step = batch or max(1, len(stream))
    for i in range(0, len(stream), step):
        update_batch(st, keys[i:i + step])
    k, c, n = snapshot(st)
    return {int(lo) - 0xFFFF_0000_0000: int(v) for lo, v in zip(k[:, 1], c)}, n


@pytest.mark.parametrize("seed", range(4))
def test_matches_reference_on_random_streams(seed):
    rng = random.Random(seed)
    for _ in range(1000):
        capacity = rng.randint(1, 10)
        alphabet = rng.randint(1, 3 * capacity + 2)
        length = rng.randint(0, 200)
        skew = rng.choice([0.0, 1.0, 2.0])
        weights = [1 / (i + 1) ** skew for i in range(alphabet)]
        stream = rng.choices(range(alphabet), weights, k=length)
        got, n = _run(stream, capacity, batch=rng.choice([None, 1, 7]))
        assert n == length
        assert got == naive.spacesaving(stream, capacity), (seed, capacity, stream)


def test_frozen_tie_rule_example():
    # docs/dpss-eehh.md §2.5: at the last arrival 4 and 3 both have count 1 and 3 arrived more
    # recently, so the paper rule evicts 3.
    got, _ = _run([4, 3, 1, 2, 1, 2, 9], 4)
    assert got == {4: 1, 1: 2, 2: 2, 9: 2}


def test_entry_time_counterexample_stream():
    x = [11, 10, 12, 8, 3, 2, 4, 8, 12, 11, 5, 9, 7]
    assert _run(x, 5)[0] == {2: 2, 4: 2, 5: 3, 9: 3, 7: 3}
    assert _run(x[1:], 5)[0] == {12: 2, 8: 2, 4: 2, 9: 3, 7: 3}


def test_error_bound_on_zipf():
    from dptop.engine.core.workload import zipf_ranks

    for skew, k in ((1.1, 16), (1.5, 64), (0.8, 32)):
        stream = zipf_ranks(skew, 5000, 50_000, seed=3).tolist()
        got, n = _run(stream, k)
        truth = naive.exact_counts(stream)
        assert sum(got.values()) == n == len(stream)
        for item, est in got.items():
            assert truth[item] <= est <= truth[item] + n / k, (item, truth[item], est)
        # Any item above n/k must be tracked.
        assert all(item in got for item, f in truth.items() if f > n / k)


def test_algorithm_releases_top_k_and_validates():
    alg = SpaceSaving(Settings(k=2, k_tilde=4))
    alg.update(_keys([1, 1, 1, 2, 2, 3]))
    rel = alg.release()
    assert [it.estimate for it in rel.items] == [3, 2]
    assert rel.guarantee is None and not rel.private
    with pytest.raises(ValueError, match=r"k~ \(1\) must be >= 2"):
        SpaceSaving(Settings(k=2, k_tilde=1))
    with pytest.raises(ValueError, match=r"k \(0\) must be >= 1"):
        SpaceSaving(Settings(k=0))
