"""Central releases of merged summaries (dptop.engine.single_release.merged): the merged DP-MG
threshold by exact values, release hygiene, determinism of the noise order, the guarantee text and
the merged EEHH sketch being the single-process sketch of the union."""
import math

import numpy as np
import pytest

from dptop.engine.core.facts import PublicFacts
from dptop.engine.baselines.merge import MGSummarizer, merge_all
from dptop.engine.core.settings import Settings
from dptop.engine.core.status import Covered
from dptop.engine.core.workload import zipf_keys
from dptop.engine.single_release.merged import EEHHSummarizer, MergedDPMG, MergedEEHH, merged_mg_threshold


@pytest.mark.parametrize("eps,delta,K,expected", [
    (1.0, 1e-6, 1, 15),  # ⌈ln(e/((1 + e^-1)·1e-6))⌉ = ⌈14.5022⌉
    (0.45, 1e-6, 32, 1213),  # ⌈1212.0964⌉
    (0.9, 1e-3, 8, 83),  # ⌈82.2108⌉
])
def test_merged_threshold_exact_values_and_minimality(eps, delta, K, expected):
    t = merged_mg_threshold(eps, delta, K)
    assert t == expected
    alpha = math.exp(-eps / K)
    tail = lambda s: K * alpha ** s / (1 + alpha)  # noqa: E731  K·Pr[Z >= s]
    assert tail(t) <= delta * math.exp(-eps) < tail(t - 1)


def test_merged_threshold_rejects_bad_parameters():
    with pytest.raises(ValueError, match=r"epsilon \(0\) must be > 0"):
        merged_mg_threshold(0.0, 1e-6, 4)
    with pytest.raises(ValueError, match=r"k~ \(0\) must be >= 1"):
        merged_mg_threshold(1.0, 1e-6, 0)
    with pytest.raises(ValueError, match="mode .*'pure'.*leave mode at A"):
        MergedDPMG(Settings(extra={"mode": "pure"}))


def _merged_mg(parts, K):
    out = []
    for p in parts:
        s = MGSummarizer(K)
        s.update(p)
        out.append(s.summary())
    return out


def test_merged_dpmg_releases_only_seen_heavy_keys_with_its_guarantee():
    parts = [zipf_keys(1.2, 1 << 12, 1 << 15, seed=s) for s in range(3)]
    alg = MergedDPMG(Settings(k=8, epsilon=1.0, delta=1e-6))
    rel = alg.publish(merge_all(_merged_mg(parts, alg.k_tilde)), 0, 0, notes=("merged from 3 capture point(s): a, b, c",),
                      coverage=Covered(agents=("a", "b", "c")))
    seen = {tuple(k) for k in np.concatenate(parts).tolist()}
    assert rel.items and all((it.hi, it.lo) in seen for it in rel.items)
    assert all(it.estimate > rel.threshold for it in rel.items)
    assert rel.threshold >= merged_mg_threshold(alg.eps_a, alg.delta, alg.k_tilde)
    g = rel.guarantee
    assert (g.epsilon, g.delta) == pytest.approx((1.0, 1e-6))
    assert any("§8" in n for n in g.notes) and "merged from 3 capture point(s): a, b, c" in g.notes
    assert rel.status.agents == ("a", "b", "c") and rel.status.noisy_length is not None
    assert list(rel.status.to_json())[-2:] == ["agents", "agents_missing"] and "noisy_length" in rel.status.to_json()


def test_merged_dpmg_output_does_not_depend_on_merge_order():
    """T13 for the merge: commutative merge + noise drawn in key order -> identical releases."""
    parts = _merged_mg([zipf_keys(1.1, 1 << 10, 1 << 14, seed=s) for s in range(2)], 32)
    a = MergedDPMG(Settings(k=16, seed=9)).publish(parts[0].merge(parts[1]), 0, 0)
    b = MergedDPMG(Settings(k=16, seed=9)).publish(parts[1].merge(parts[0]), 0, 0)
    assert a.items == b.items and a.threshold == b.threshold


def test_count_and_grid_epochs_give_public_spans():
    alg = MergedDPMG(Settings(k=4, epoch_packets=100, seed=1))
    rel = alg.publish(None, 60, 3)
    assert (rel.span.start, rel.span.end, rel.span.index) == (300, 360, 3)
    assert rel.guarantee.neighbouring.startswith("substitution")  # count epochs: group privacy
    alg = MergedDPMG(Settings(k=4, epoch_seconds=2.0, seed=1), PublicFacts.of(time_range=(1_700_000_000 * 10**9, None)))
    rel = alg.publish(None, 0, 5, cell=850_000_005)
    assert (rel.span.t_start, rel.span.t_end, rel.span.index) == (1_700_000_010.0, 1_700_000_012.0, 5)
    assert rel.items == () and rel.status.noisy_length is not None


def test_merged_eehh_sums_to_the_sketch_of_the_union_and_releases_heavy_labels():
    settings = Settings(k=8, epsilon=1.0, delta=1e-6, seed=3)
    parts = [zipf_keys(1.5, 1 << 12, 1 << 16, seed=s) for s in range(4)]
    alg = MergedEEHH(settings, agents=4)
    seeds = alg.epoch_seeds(b"k" * 32, 0)
    agents = []
    for p in parts:
        s = EEHHSummarizer(alg, seeds)
        s.update(p)
        agents.append(s.summary())
    union = EEHHSummarizer(alg, seeds)
    union.update(np.concatenate(parts))
    merged = merge_all(agents)
    assert np.array_equal(merged.cells, union.summary().cells) and merged.n == 4 << 16
    state = alg.state_of(merged)
    noise = state.cells - merged.cells
    assert noise.std() > alg.scale  # fresh discrete Laplace(b) cell noise, std b·√2
    rel = alg.publish(state, merged.n, 0)
    truth = dict(zip(*np.unique(np.concatenate(parts)[:, 1], return_counts=True)))
    heavy = [lo for lo, c in truth.items() if c > rel.threshold + 3 * alg.psi]
    assert heavy and {it.lo for it in rel.items} >= set(heavy)
    assert all(it.estimate > rel.threshold for it in rel.items)
    assert any("capture points" in n for n in rel.guarantee.notes)
    assert alg.depth >= MergedEEHH(settings, agents=1).depth  # depth also covers A·k~ final queries
