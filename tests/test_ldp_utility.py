"""Utility of the local-DP algorithms end to end (docs/local-dp.md §11 L7, the acceptance figures).

Fast: a small stream through the product path. Slow: the acceptance streams (Zipf 1.5, 2^22
packets) through the registered algorithms fed ``KeyBatch``es, as ``dptop replay`` runs them, and
L7's ε sweep. Runs are seeded (reproducible, NOT private) so that the figures can be quoted.
"""
import ipaddress

import numpy as np
import pytest

from dptop.engine.core import registry
from dptop.engine.core.keys import KeyBatch
from dptop.engine.core.settings import Settings
from dptop.engine.core.workload import ipv4_of_rank, keys_of_ipv4, zipf_ranks
from dptop.engine.local_dp.metrics import recall
from dptop.engine.lab.local_dp_sweep import non_decreasing, run_scheme, sweep, synthetic_items, counts_of

BATCH = 1 << 16


def run_algorithm(name: str, keys: np.ndarray, settings: Settings):
    alg = registry.make(name, settings)
    for s in range(0, len(keys), BATCH):
        alg.consume(KeyBatch(keys[s:s + BATCH]))
    return alg.finish()[-1]


def released_recall(release, true_top: set) -> float:
    got = {it.address for it in release.items}
    return len(got & true_top) / len(true_top)


def write_inventory(path, addresses) -> str:
    path.write_text("".join(f"{ipaddress.IPv4Address(int(a))}\n" for a in addresses))
    return str(path)


def test_small_stream_finds_the_top_items():
    """Zipf 1.5 over 100 items, 2^17 reports at ε = 4: BGR and DSR find 4 of the top 5."""
    items = synthetic_items("zipf", 100, 1 << 17, 3)
    counts = counts_of(items)
    for scheme in ("bgr", "dsr"):
        top = run_scheme(scheme, items, 4.0, 100, 5, 64, seed=5)
        assert recall([i for i, _ in top], counts, 5) >= 0.8, (scheme, top)


def test_product_path_reports_the_heaviest_address(tmp_path):
    addresses = ipv4_of_rank(np.arange(1, 201))
    keys = keys_of_ipv4(addresses[zipf_ranks(1.5, 200, 1 << 16, 2) - 1])
    inv = write_inventory(tmp_path / "inv.txt", addresses)
    for name in ("ldp-dsr", "ldp-bgr"):
        rel = run_algorithm(name, keys, Settings(k=3, epsilon=4.0, seed=1, extra={"inventory": inv, "reports": "all"}))
        assert rel.items[0].address == str(ipaddress.IPv4Address(int(addresses[0]))), (name, rel.items)


@pytest.mark.slow
def test_acceptance_inventory_recall(tmp_path, capsys):
    """Zipf 1.5, 2^22 packets over 10^3 sources, inventory of those 10^3 addresses, ε = 2 per
    report, every packet reported, k = 10: ldp-dsr's mean recall of the true top 10 over 5 runs is
    >= 0.9; BGR, BDR and CNR are measured beside it."""
    addresses = ipv4_of_rank(np.arange(1, 1001))
    inv = write_inventory(tmp_path / "inventory.txt", addresses)
    means = {}
    for name in ("ldp-dsr", "ldp-bgr", "ldp-bdr", "ldp-cnr"):
        recalls = []
        for run in range(5):
            ranks = zipf_ranks(1.5, 1000, 1 << 22, 100 + run)
            keys = keys_of_ipv4(addresses[ranks - 1])
            truth = np.bincount(ranks, minlength=1001)
            top = {str(ipaddress.IPv4Address(int(addresses[r - 1]))) for r in np.argsort(-truth, kind="stable")[:10]}
            settings = Settings(k=10, epsilon=2.0, seed=run + 1, extra={"inventory": inv, "reports": "all"})
            recalls.append(released_recall(run_algorithm(name, keys, settings), top))
        means[name] = float(np.mean(recalls))
        with capsys.disabled():
            print(f"\n{name}: recall per run {recalls}, mean {means[name]:.2f}")
    assert means["ldp-dsr"] >= 0.9, means


def public_addresses(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out, seen = [], set()
    while len(out) < n:
        a = int(rng.integers(0, 1 << 32))
        if a not in seen and ipaddress.IPv4Address(a).is_global:
            seen.add(a)
            out.append(a)
    return np.array(out, np.uint32)


@pytest.mark.slow
def test_acceptance_prefix_search_finds_full_addresses(capsys):
    """Zipf 1.5, 2^22 packets over 10^4 random public IPv4 sources, no inventory, ε = 4 per
    report: ldp-dsr-prefix recalls >= 0.8 of the true top 10 full addresses (mean of 5 runs)."""
    recalls = []
    for run in range(5):
        addresses = public_addresses(10_000, 200 + run)
        keys = keys_of_ipv4(addresses[zipf_ranks(1.5, 10_000, 1 << 22, 300 + run) - 1])
        top = {str(ipaddress.IPv4Address(int(a))) for a in addresses[:10]}
        rel = run_algorithm("ldp-dsr-prefix", keys, Settings(k=10, epsilon=4.0, seed=run + 1, extra={"reports": "all"}))
        recalls.append(released_recall(rel, top))
    with capsys.disabled():
        print(f"\nldp-dsr-prefix: recall per run {recalls}, mean {np.mean(recalls):.2f}; {rel.guarantee.notes[1]}")
    assert np.mean(recalls) >= 0.8, recalls


@pytest.mark.slow
@pytest.mark.parametrize("data", ["normal", "exponential"])
@pytest.mark.parametrize("d", [500, 2000])
def test_l7_utility_non_decreasing_in_epsilon(data, d, capsys):
    """L7: BGR, DSR, BDR over 003's synthetic shapes: NDCG and precision, averaged over 3 seeded
    runs, never drop by more than 0.1 as ε grows."""
    rows = sweep(schemes=("bgr", "dsr", "bdr"), epsilons=(0.5, 1.0, 2.0, 4.0, 8.0), data=data, d=d, n=1 << 18,
                 k=20, heavy={"bgr": 200, "dsr": 200}, runs=3, seed=11)
    with capsys.disabled():
        for r in rows:
            print(f"\n{data} d={d} {r['scheme']} eps={r['epsilon']}: ndcg {r['ndcg']:.3f} precision {r['precision']:.3f}", end="")
    for metric in ("ndcg", "precision"):
        assert all(non_decreasing(rows, metric, 0.1).values()), (metric, rows)
