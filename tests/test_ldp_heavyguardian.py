"""HeavyGuardian: L5 (ED direction) and L6 (the non-private sketch), docs/local-dp.md §11."""
import math

import numpy as np
import pytest
from scipy import stats

from dptop.engine.core.workload import zipf_ranks
from dptop.engine.local_dp.entropy import Entropy, WordBuffer
from dptop.engine.local_dp.heavyguardian import (ED_INVERTED, ED_SPEC, HeavyGuardian, ed_base, hg_insert_batch,
                                                 make_hg_state)
from tests.ldp_samplers import ED, count_hits

ALPHA = 1e-3


def test_ed_base_is_the_exact_rational():
    assert ed_base() == pytest.approx(1.08004, abs=1e-5)


@pytest.mark.parametrize("rule, expected", [(ED_SPEC, 0.2144), (ED_INVERTED, 0.7856)])
def test_l5_ed_direction(rule, expected):
    """Weakest count C = 20, 10^5 collisions: decay with probability b^-20 ≈ 0.21 (003 and the
    original design), not ≈ 0.79 ([C]'s reversed sample, kept only behind the flag)."""
    buf = WordBuffer(Entropy(20), block=1 << 20)
    hits = count_hits(ED, 20.0, rule, 100_000, buf.words, buf.pos)
    p = math.exp(-20 * 77 / 1000)
    assert abs(p - 0.2144) < 1e-4
    assert stats.binomtest(hits, 100_000, p if rule == ED_SPEC else 1 - p).pvalue > ALPHA
    assert abs(hits / 100_000 - expected) < 0.01


def test_l5_in_the_sketch():
    """The same through INSERT: one cell ⟨0, 20⟩, a colliding item, 20000 times."""
    st = make_hg_state(1, 1, 0, seed=1)
    buf = WordBuffer(Entropy(7))
    decayed = 0
    for _ in range(20_000):
        st.ids[0, 0], st.cnt[0, 0] = 0, 20
        buf.refill()
        hg_insert_batch(st, np.array([1], np.int64), buf.words, buf.pos, 0)
        decayed += st.cnt[0, 0] == 19
    assert stats.binomtest(decayed, 20_000, math.exp(-1.54)).pvalue > ALPHA


def test_ed_real_counts_fixed_point():
    """Real counts: C = 20.5 decays with b^-20.5 (2^-20 fixed point is exact for halves)."""
    buf = WordBuffer(Entropy(21), block=1 << 20)
    hits = count_hits(ED, 20.5, ED_SPEC, 100_000, buf.words, buf.pos)
    assert stats.binomtest(hits, 100_000, math.exp(-20.5 * 0.077)).pvalue > ALPHA
    assert count_hits(ED, 0.0, ED_SPEC, 1000, buf.words, buf.pos) == 1000


@pytest.mark.parametrize("buckets, heavy, light", [(1, 16, 0), (8, 8, 0), (4, 8, 4)])
def test_l6_heavy_counts_never_exceed_truth(buckets, heavy, light):
    items = zipf_ranks(1.1, 1 << 14, 1 << 18, 9)
    truth = np.bincount(items)
    hg = HeavyGuardian(buckets, heavy, light, seed=4)
    hg.insert(items)
    ids, cnt = hg.state.ids.ravel(), hg.state.cnt.ravel()
    assert (ids >= 0).all()
    assert all(c <= truth[i] for i, c in zip(ids, cnt))
    top = hg.top(5)
    assert [i for i, _ in top][:1] == [1] and all(hg.query(i) == c for i, c in top)


@pytest.mark.parametrize("buckets, heavy, baseline", [(1, 16, 0.5625), (1, 64, 0.9375), (8, 8, 1.0)])
def test_l6_top_k_precision_regression(buckets, heavy, baseline):
    """Top-16 precision on a fixed seeded Zipf 1.1 stream (2^18 over 2^14 items) must not fall
    below the values recorded when this sketch was written (w = 1 needs λ_h >> k)."""
    items = zipf_ranks(1.1, 1 << 14, 1 << 18, 9)
    truth = set(np.argsort(-np.bincount(items), kind="stable")[:16].tolist())
    hg = HeavyGuardian(buckets, heavy, seed=4)
    hg.insert(items)
    assert len({i for i, _ in hg.top(16)} & truth) / 16 >= baseline


def test_rule_is_validated():
    with pytest.raises(ValueError, match="ed"):
        HeavyGuardian(rule="b^C")
