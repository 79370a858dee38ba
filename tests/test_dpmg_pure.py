"""DP-MG pure mode's noise: integer, from the exact samplers, with the discrete Laplace order law
(docs/dp-misra-gries.md §7.2)."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dptop.engine.core.settings import Settings
from dptop.engine.privacy.noise import NoiseSource
from dptop.engine.single_release.dpmg import UNIVERSE_SIZE, DPMisraGries
from dptop.engine.single_release.dpmg_universe import universe_top_noise

BASE = 0xFFFF_0000_0000


def _keys(values):
    keys = np.zeros((len(values), 2), dtype=np.uint64)
    keys[:, 1] = BASE + np.asarray(values, dtype=np.uint64)
    return keys


def test_pure_mode_noise_is_integer_and_drawn_by_the_exact_samplers(monkeypatch):
    """Every released value times K+1 is an integer (to float display precision), the kept keys' noise
    comes from the exact batched discrete Laplace, the universe part from uniform integers of the
    same generator, and no float exponential is ever drawn."""
    calls = {"dlap_array": 0, "uniform_int": 0}

    def counting(name):
        original = getattr(NoiseSource, name)

        def wrapper(self, *args):
            calls[name] += 1
            return original(self, *args)
        return wrapper

    def float_draw(self):
        raise AssertionError("pure mode drew a floating-point exponential")

    monkeypatch.setattr(NoiseSource, "exponential", float_draw, raising=False)
    for name in calls:
        monkeypatch.setattr(NoiseSource, name, counting(name))
    k, k_tilde = 3, 6
    alg = DPMisraGries(Settings(k=k, k_tilde=k_tilde, epsilon=1.0, seed=5, extra={"mode": "pure"}))
    alg.update(_keys([1] * 3000 + [2] * 1000 + list(range(100, 160))))
    rel = alg.finish()[0]
    assert len(rel.items) == k
    for it in rel.items:
        scaled = it.estimate * (k_tilde + 1)  # the released value is an integer over K+1
        assert abs(scaled - round(scaled)) < 1e-6, it.estimate
    # kept keys: one batched exact discrete Laplace; universe: k labels plus the lazy uniforms of
    # the level-by-level binomial counts
    assert calls["dlap_array"] == 1 and calls["uniform_int"] > k


def test_universe_top_noise_follows_the_discrete_laplace_order_law():
    """The largest and second largest of m i.i.d. DLap(α) draws: Pr[max >= z] = 1 − (1 − p)^m and
    Pr[2nd >= z] = 1 − (1 − p)^m − m·p·(1 − p)^(m−1), p = α^z/(1 + α). 1,000 exact draws; each
    frequency within 4.5 standard errors of its law (a false alarm about once in 10^5 runs)."""
    src, eps, m, n = NoiseSource(seed=11), 0.5, 20, 1000
    alpha = math.exp(-eps)
    draws = [universe_top_noise(src, 2, m, eps) for _ in range(n)]
    assert all(a >= b for a, b in draws) and all(isinstance(a, int) for a, _ in draws)
    for z in (2, 4, 6, 8):
        p = alpha ** z / (1 + alpha)
        law_max = 1 - (1 - p) ** m
        law_2nd = law_max - m * p * (1 - p) ** (m - 1)
        for law, seen in ((law_max, sum(a >= z for a, _ in draws) / n),
                          (law_2nd, sum(b >= z for _, b in draws) / n)):
            assert abs(seen - law) <= 4.5 * math.sqrt(law * (1 - law) / n), (z, seen, law)


def test_universe_top_noise_over_the_address_universe_is_ordered_and_bounded():
    """Over ~2^128 elements the k largest sit near ln(m)/ε' (the max's median), decreasing."""
    eps = Fraction(1, 41)
    seq = universe_top_noise(NoiseSource(seed=2), 5, UNIVERSE_SIZE, eps)
    assert seq == sorted(seq, reverse=True)
    centre = math.log(UNIVERSE_SIZE) / float(eps)
    assert centre - 40 / float(eps) < seq[-1] <= seq[0] < centre + 40 / float(eps)


def test_universe_top_noise_rejects_bad_arguments():
    with pytest.raises(ValueError, match="count"):
        universe_top_noise(NoiseSource(seed=1), 3, 2, 0.5)
