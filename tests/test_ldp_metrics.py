"""L8: NDCG (003 A.6, docs/local-dp.md §8) and the other metrics by hand-computed values."""
import math

import pytest

from dptop.engine.local_dp.metrics import aae, ndcg, precision, recall, score, true_top

COUNTS = {10: 50, 11: 40, 12: 30, 13: 20, 14: 10}


def test_perfect_list_is_one():
    assert ndcg([10, 11, 12], COUNTS, 3) == pytest.approx(1.0)


def test_disjoint_list_is_zero():
    assert ndcg([13, 14, 99], COUNTS, 3) == 0.0


def test_one_swap_by_hand():
    """True order a, b, c; reported b, a, c: rel = 2, 2, 3; DCG = 2 + 2/log2(2) + 3/log2(3);
    IDCG = 3 + 3 + 3/log2(3)."""
    expected = (2 + 2 + 3 / math.log2(3)) / (3 + 3 + 3 / math.log2(3))
    assert ndcg([11, 10, 12], COUNTS, 3) == pytest.approx(expected)
    assert expected == pytest.approx(0.7466, abs=1e-4)


def test_true_ties_break_by_key():
    assert true_top({5: 7, 3: 7, 9: 1}, 2) == [3, 5]


def test_precision_recall_aae():
    assert precision([10, 13, 99], COUNTS, 3) == pytest.approx(1 / 3)
    assert recall([10, 11], COUNTS, 3) == pytest.approx(2 / 3)
    assert aae({10: 45.0, 11: 40.0}, COUNTS, 3) == pytest.approx((5 + 0 + 30) / 3)
    s = score([(10, 50.0), (11, 40.0), (12, 30.0)], COUNTS, 3)
    assert s == {"ndcg": pytest.approx(1.0), "precision": 1.0, "recall": 1.0, "aae": 0.0}
