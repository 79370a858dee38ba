"""Utility of a top-k list against exact counts: NDCG (003 A.6, docs/local-dp.md §8), precision, recall, AAE.

* True ranks are 1-based; ties in the true counts are broken by item key ascending [D].
* rel(v) = |k − |rank_true(v) − rank_est(v)|| for v in the true top-k, else 0;
  DCG_k = rel(v_1) + Σ_{i=2..k} rel(v_i)/log2(i) (positions 1 and 2 both undiscounted, as
  printed); IDCG_k = k + Σ_{i=2..k} k/log2(i); NDCG_k = DCG_k/IDCG_k.
* precision = |V ∩ V_true|/k (003 leaves it undefined; with a full list of k it equals recall,
  which is |V ∩ V_true|/|V_true|, the figure the acceptance quotes).
* AAE [D, option 1 of §8]: mean over the true top-k of |f~(v) − f(v)|, with f~ = 0 if v is not
  reported.
"""
from __future__ import annotations

import math

import numpy as np


def true_top(counts: dict, k: int) -> list:
    """The k items with the largest counts, ties by item key."""
    return [v for v, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]


def ndcg(reported: list, counts: dict, k: int) -> float:
    """NDCG_k of ``reported`` (items in estimated order) against exact ``counts``."""
    rank = {v: r for r, v in enumerate(true_top(counts, k), 1)}
    dcg = 0.0
    for i, v in enumerate(reported[:k], 1):
        rel = abs(k - abs(rank[v] - i)) if v in rank else 0
        dcg += rel if i == 1 else rel / math.log2(i)
    idcg = k + sum(k / math.log2(i) for i in range(2, k + 1))
    return dcg / idcg


def precision(reported: list, counts: dict, k: int) -> float:
    return len(set(reported[:k]) & set(true_top(counts, k))) / k


def recall(reported: list, counts: dict, k: int) -> float:
    truth = set(true_top(counts, k))
    return len(set(reported[:k]) & truth) / len(truth) if truth else 1.0


def aae(estimates: dict, counts: dict, k: int) -> float:
    return float(np.mean([abs(estimates.get(v, 0.0) - counts[v]) for v in true_top(counts, k)]))


def counts_of(items: np.ndarray) -> dict:
    """Exact counts of an int64 item stream as {item: count}."""
    values, freq = np.unique(items, return_counts=True)
    return dict(zip(values.tolist(), freq.tolist()))


def score(top: list[tuple[int, float]], counts: dict, k: int) -> dict:
    """All four metrics of a released top list of (item, estimate)."""
    reported = [v for v, _ in top]
    return {"ndcg": ndcg(reported, counts, k), "precision": precision(reported, counts, k),
            "recall": recall(reported, counts, k), "aae": aae(dict(top), counts, k)}
