"""Utility metrics of a release against exact counts: recall, precision, average relative error.

Heavy hitters of a stream of n packets with target k are the items with count > n/k (or, with
``fraction``, count > fraction·n); ``utility`` compares the labels a release reported with them
and measures the relative error of the reported estimates.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dptop.engine.core.release import Release


@dataclass(frozen=True)
class Utility:
    recall: float
    precision: float
    are: float
    reported: int
    true_heavy: int

    def to_json(self) -> dict:
        return {"recall": self.recall, "precision": self.precision, "are": self.are,
                "reported": self.reported, "true_heavy": self.true_heavy}


def heavy_set(keys: np.ndarray, counts: np.ndarray, threshold: float) -> set[tuple[int, int]]:
    """Keys whose exact count is strictly above ``threshold``."""
    mask = counts > threshold
    return {(int(h), int(l)) for h, l in keys[mask].tolist()}


def recall(reported: set, truth: set) -> float:
    """Share of true heavy hitters reported (1.0 when there are none)."""
    return 1.0 if not truth else len(reported & truth) / len(truth)


def precision(reported: set, truth: set) -> float:
    """Share of reported items that are true heavy hitters (1.0 when nothing is reported)."""
    return 1.0 if not reported else len(reported & truth) / len(reported)


def average_relative_error(pairs) -> float:
    """Mean of |estimate - f| / f over ``(estimate, f)`` pairs with f > 0 (0.0 for none)."""
    errors = [abs(est - f) / f for est, f in pairs if f > 0]
    return float(np.mean(errors)) if errors else 0.0


def utility(release: Release, exact, threshold: float) -> Utility:
    """Compare ``release`` with an ``ExactCounter`` over the same span; heavy = count > threshold."""
    keys, counts = exact.items()
    truth = heavy_set(keys, counts, threshold)
    reported = {(it.hi, it.lo) for it in release.items}
    pairs = [(it.estimate, exact.count_of(it.hi, it.lo)) for it in release.items]
    return Utility(recall(reported, truth), precision(reported, truth), average_relative_error(pairs),
                   len(reported), len(truth))
