"""LazyHH on a live stream (docs/lazyhh.md §7.3): segments of a public packet horizon with restart,
k~ chosen from public parameters, the a-priori release time of a source by its share, and the
privacy map of the segments."""
from __future__ import annotations

import numpy as np
import pytest

from dptop.engine.core.facts import PublicFacts
from dptop.engine.continual.horizon import DEFAULT_HORIZON, segments_cost
from dptop.engine.continual.lazyhh import LazyHH, LazyHHParams, release_after
from dptop.engine.core import registry
from dptop.engine.core.keys import KeyBatch, keys_from_addresses
from dptop.engine.core.settings import Settings
from dptop.engine.privacy.measures import ApproxDP, ZCDP
from dptop.monitor.config import RunConfig

RATE = 2000  # packets per second in the figures


def live_settings(**kw):
    return RunConfig(("lazyhh",), Settings(k=16, epsilon=0.5, delta=1e-6, **kw)).settings_for("lazyhh")


def test_release_after_matches_a_brute_force_scan_of_the_output_steps():
    for k, kt, T, share in ((16, 64, 1 << 17, 0.3), (16, 1024, 1 << 20, 0.1), (4, 32, 1 << 16, 0.5),
                            (16, 256, 1 << 19, 0.07)):
        p = LazyHHParams.build(k, kt, 0.5, 1e-6, 5e-7, T)
        brute = next((t for t in range(kt, T + 1, kt) if share * t >= p.threshold(t) + p.gamma), None)
        assert release_after(p, share) == brute, (k, kt, T, share)
    p = LazyHHParams.build(16, 64, 0.5, 1e-6, 5e-7, 1 << 17)
    assert release_after(p, 1 / 16) is None  # a share at t/k never passes τ1


def test_live_defaults_release_30_and_10_percent_sources_in_time_at_epsilon_half():
    s = live_settings()
    alg = registry.make("lazyhh", s)
    assert (alg.horizon, alg.restart, s.k_tilde) == (DEFAULT_HORIZON, True, 1024)
    t30, t10 = release_after(alg.params, 0.3), release_after(alg.params, 0.1)
    assert t30 / RATE <= 60 and t10 / RATE <= 180, (t30 / RATE, t10 / RATE)
    limit = alg.detectable()
    assert limit.after == ((0.3, t30), (0.1, t10)) and "each segment" in limit.over
    assert limit.to_json()["after"] == {"0.3": t30, "0.1": t10}
    assert "restart per horizon" == alg.status().mode and "each epoch of T = 1048576" in alg.guarantee().scope
    # a replay keeps its own horizon (the file's length) and no restart
    facts = PublicFacts.of(100_000)
    replay = registry.make("lazyhh", RunConfig(("lazyhh",), Settings(k=16, epsilon=0.5, delta=1e-6))
                           .settings_for("lazyhh", facts), facts)
    assert (replay.horizon, replay.restart) == (100_000, False) and replay.detectable().after == ()


def test_segments_compose_in_parallel_and_overlaps_sequentially():
    one = ApproxDP(0.5, 6.3e-6)
    assert segments_cost(one) == one
    assert segments_cost(one, overlap=2) == ApproxDP(1.0, 1.26e-5)
    assert segments_cost(ZCDP(0.01, 1e-6), overlap=3) == ZCDP(0.03, 3e-6)  # zCDP segments add ρ
    with pytest.raises(ValueError, match="overlap"):
        segments_cost(one, overlap=0)


@pytest.mark.parametrize("share, address", [(0.3, "127.0.0.2"), (0.1, "127.0.0.3")])
def test_a_source_is_released_by_the_stated_time_on_a_paced_stream(share, address):
    """A 2,000 packets/s stream (stamps 0.5 ms apart): the source of ``share`` is in the output
    no later than the a-priori ``release_after`` (seeded noise: reproducible, NOT private)."""
    s = live_settings(seed=7)
    alg = LazyHH(s)
    due = release_after(alg.params, share)
    rng = np.random.default_rng(3)
    n = due + 2 * s.k_tilde
    others = [f"10.0.{i // 250}.{i % 250}" for i in range(200)]
    chosen = np.where(rng.random(n) < share, -1, rng.integers(0, len(others), n))
    addresses = [address if c < 0 else others[c] for c in chosen.tolist()]
    keys = keys_from_addresses(addresses)
    stamps = 1_700_000_000 * 10**9 + np.arange(n, dtype=np.int64) * (10**9 // RATE)
    first = None
    for a in range(0, n, 4096):
        for rel in alg.consume(KeyBatch(keys[a:a + 4096], stamps[a:a + 4096])):
            if first is None and address in {it.address for it in rel.items}:
                first = rel.span.end
    assert first is not None and first <= due, (first, due)
    note = alg.status().note
    assert "at the current 2,000 packets/s" in note and f"a {share:.0%} source after ≈ " in note
