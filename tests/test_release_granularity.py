"""Every private estimate leaves as a whole number of updates: a float64 ``count + Gaussian``
keeps low-order bits that depend on the exact count (Mironov 2012), so the mechanisms whose
noise is continual (DPSW, LazyHH, the Lazy and Punctual sketches) round before they release."""
from __future__ import annotations

import numpy as np
import pytest

from dptop.engine.core import registry
from dptop.engine.core.facts import PublicFacts
from dptop.engine.core.keys import KeyBatch
from dptop.engine.core.settings import Settings
from dptop.engine.core.workload import keys_of_ipv4
from dptop.engine.privacy.bulknoise import on_grid

HEAVY = ("10.0.0.1", "10.0.0.2", "10.0.0.3")


def _stream(n: int) -> np.ndarray:
    rng = np.random.default_rng(5)
    ids = np.where(rng.random(n) < 0.6, rng.integers(1, 4, n), rng.integers(1000, 1 << 20, n))
    return keys_of_ipv4((0x0A00_0000 + ids).astype(np.uint32))


@pytest.mark.parametrize("name, settings, n", [
    ("dpsw", Settings(k=4, epsilon=2.0, window=4000, gamma=0.05), 6000),
    ("lazyhh", Settings(k=16, epsilon=0.9, delta=1e-3), 60_000),  # 20 % sources pass from 39 215 packets
    ("lazy-cms", Settings(k=4, epsilon=0.9, delta=1e-3, extra={"query": ",".join(HEAVY)}), 6000),
    ("punctual-cms", Settings(k=4, epsilon=0.9, delta=1e-3, extra={"query": ",".join(HEAVY)}), 6000),
])
def test_released_estimates_are_whole_updates(name, settings, n):
    keys = _stream(n)
    alg = registry.make(name, settings, PublicFacts.of(len(keys)))
    alg.consume(KeyBatch(keys))
    items = [it for rel in alg.finish() for it in rel.items]
    assert items, name  # the heavy sources are released, so the check bites
    assert all(float(it.estimate).is_integer() for it in items), [it.estimate for it in items[:5]]


def test_rounding_is_to_the_nearest_update():
    assert on_grid([0.49, 0.5, 1.5, -2.7, 1e6 + 0.25]).tolist() == [0.0, 0.0, 2.0, -3.0, 1e6]
