"""Audit of user-level privacy (engine/lab/audit/user_level.py): neighbouring streams that differ in one
whole client. The real ``hostdp-dst`` shows no violation; the per-element variant (one decrement per
element, 002 Lemma 7) is caught both statistically and by the white-box Lemma 9 check. Seeded runs
with a few hundred runs per side; ``dptop audit`` uses 2000 by default."""
import numpy as np
import pytest

from dptop.engine.lab.audit import cases as ac
from dptop.engine.lab.audit.user_level import HostDPTarget, lemma9_violations


def test_lemma9_check():
    assert lemma9_violations({1: 3, 2: 1}, {1: 2}) == []  # case 1: T' ⊆ T, +1
    assert lemma9_violations({1: 2}, {1: 3, 2: 1}) == []  # case 2: T ⊆ T', −1
    assert lemma9_violations({1: 5}, {1: 3})  # a difference of 2
    assert lemma9_violations({1: 3, 2: 1}, {1: 2, 3: 1})  # keys on both sides only


def test_targets_are_registered():
    assert not ac.TARGETS["hostdp-dst"].broken and ac.TARGETS["hostdp-per-element"].broken


def test_pairs_differ_in_one_whole_client():
    for pair in HostDPTarget().pairs():
        clients, clients_p = np.unique(pair.x.keys, axis=0), np.unique(pair.x_prime.keys, axis=0)
        assert len(clients) == len(clients_p) + 1
        extra = np.array([c for c in clients.tolist() if c not in clients_p.tolist()], dtype=np.uint64)
        assert len(extra) == 1
        rest = ~np.all(pair.x.keys == extra, axis=1)
        assert np.array_equal(pair.x.keys[rest], pair.x_prime.keys) and np.array_equal(pair.x.dst[rest], pair.x_prime.dst)


def test_real_mechanism_shows_no_violation():
    result = ac.run("hostdp-dst", runs=600, seed=11)
    assert not result.violation, result.summary()
    assert len(result.pairs) == 3 and not result.structural


@pytest.mark.parametrize("runs", [600])
def test_per_element_variant_is_caught(runs):
    result = ac.run("hostdp-per-element", runs=runs, seed=12)
    assert result.statistical_violation, result.summary()
    assert result.epsilon_lower_bound > 1.5
    caught = {p.pair for p in result.pairs if p.violation}
    assert any(name.startswith("Lemma 7") for name in caught), caught
    assert any("Lemma 9 fails" in s for s in result.structural)
