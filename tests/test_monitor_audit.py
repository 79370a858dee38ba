"""The product-path audit (app/lab/product_audit.py): neighbouring capture files through a monitor
session and the private view it publishes. The real path shows no violation; each broken variant is caught on the pair
that exposes it (the slow test runs every pair of every target with more runs)."""
import pytest

from dptop.engine.lab.audit.cases import run_target
from dptop.lab.product_audit import PRODUCT_TARGETS, view_features
from dptop.lab.audit_paths import PATH_TARGETS

ALL_TARGETS = {**PRODUCT_TARGETS, **PATH_TARGETS}

EXPOSING_PAIR = {
    "product-epochs-file-order": "one packet re-stamped 1.5 s ahead",
    "product-epochs-data-grid": "first packet removed",
    "product-exact-status": "one packet added at an epoch boundary",
    "product-bytes-uncalibrated": "one heavy packet's length changed 1500 B -> 64 B",
    "product-hostdp-senders": "one client with 400 servers and their replies added",
}
RUNS = {"product-hostdp-senders": 60}  # all-or-nothing events need 30 runs per half to pass ε = 1


def _only(target, pair_name):
    pairs = [p for p in target.pairs() if p.name == pair_name]
    assert pairs, pair_name
    target.pairs = lambda: pairs
    return target


@pytest.mark.parametrize("name", sorted(EXPOSING_PAIR))
def test_broken_product_paths_are_caught(name):
    result = run_target(_only(ALL_TARGETS[name](), EXPOSING_PAIR[name]), runs=RUNS.get(name, 30), seed=3)
    assert result.violation, result.summary()


@pytest.mark.parametrize("name", ["product-bytes", "product-dst", "product-epochs-file-span", "product-hostdp-clients"])
def test_default_paths_keep_their_claims(name):
    """Bytes, destinations, time epochs on the file's span, declared clients: the real paths show
    no violation on their pairs."""
    result = run_target(ALL_TARGETS[name](), runs=20, seed=3)
    assert not result.violation, result.summary()


def test_real_product_path_keeps_its_claim():
    result = run_target(PRODUCT_TARGETS["product-epochs"](), runs=30, seed=3)
    assert not result.violation, result.summary()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ALL_TARGETS))
def test_every_pair_of_every_product_target(name):
    result = run_target(ALL_TARGETS[name](), runs=200, seed=5)
    assert result.violation == ALL_TARGETS[name].broken, result.summary()


def test_neighbouring_captures_give_the_same_releases_bounds_and_heavy_labels():
    """The acceptance check in plain terms: one packet added, removed, stamped out of order or a
    year ahead changes neither the number of releases, nor their time bounds, nor (heavy sources
    far above the threshold) the labels of any epoch."""
    target = PRODUCT_TARGETS["product-epochs"]()
    pairs = target.pairs()
    x = target.sample(pairs[0].x_prime, 1, seed=1)[0]
    for pair in pairs:
        for path in (pair.x, pair.x_prime):
            got = target.sample(path, 1, seed=1)[0]
            for alg in target.algorithms:
                rels = f".algorithms.{alg}.releases"
                assert got[f"{rels} length"] == x[f"{rels} length"] == 4.0
                for e in range(4):
                    for bound in ("t_start", "t_end"):
                        assert got[f"{rels}[{e}].span.{bound}"] == x[f"{rels}[{e}].span.{bound}"]
                    assert {k for k in got if k.startswith(f"{rels}[{e}] set")} == \
                           {k for k in x if k.startswith(f"{rels}[{e}] set")}, (pair.name, alg, e)


def test_features_cover_every_field_of_the_view():
    view = {"parameters": {"seed": 5, "epsilon": 0.25}, "public_facts": [{"name": "time_range", "provenance": "declared"}],
            "algorithms": {"dpss": {"releases": [
                {"span": {"t_start": 1.0, "t_end": 2.0}, "threshold": 7.5, "items": [{"address": "a", "estimate": 3}]}]}}}
    f = view_features(view)
    rel = ".algorithms.dpss.releases[0]"
    assert f[".algorithms.dpss.releases length"] == 1.0 and f[f"{rel} item a"] == 3.0
    assert f[f"{rel}.span.t_start"] == 1.0 and f[f"{rel}.threshold"] == 7.5
    assert f".public_facts[0].provenance=declared" in f and f[".parameters.epsilon"] == 0.25
    assert not any("seed" in k for k in f)  # the audit's own run seeds
