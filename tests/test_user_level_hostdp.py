"""``hostdp-dst`` / ``hostdp-src`` and the exact baselines (engine/user_level/hostdp.py).

Against plain-Python references (tests/naive_user_level.py): what is released is PAMG over each
host's first m distinct peers plus GSHM noise; the guarantee is user-level and says so; bad input
and batches without a destination give one clear line; epochs are per packet time; the m-scaled
Misra-Gries variant's map is exact; the runner and the CLI know the names.
"""
import math

import numpy as np
import pytest

from dptop.engine.core.facts import PublicFacts
from dptop.cli import main
from dptop.engine.core import registry
from dptop.engine.core.keys import KeyBatch
from dptop.engine.privacy.units import UnitKind
from dptop.engine.core.runner import Runner
from dptop.engine.core.settings import Settings
from dptop.engine.privacy.measures import ApproxDP, group, within
from dptop.engine.privacy.discrete_gaussian import SEEDED_LABEL
from dptop.engine.user_level.hostdp import HostDPDst, mg_dup_cost
from dptop.resources import DEMO_CAPTURE
from tests.naive_user_level import RefPAMG, client_server_stream, ref_user_sets


def settings(**extra):
    return Settings(k=64, epsilon=1.0, delta=1e-6, seed=extra.pop("seed", 7), extra={"m": 20, **extra})


@pytest.fixture(scope="module")
def stream():
    batch, sets = client_server_stream(clients=1500, per_client=20, servers=3000, skew=1.1, packets=60_000, seed=3)
    return batch, sets


def feed(alg, batch, step=7000):
    for s in range(0, len(batch), step):
        alg.consume(batch.slice(s, s + step))
    return alg.finish()


def by_address(items):
    return {it.address: it.estimate for it in items}


def test_release_is_pamg_plus_noise_on_the_host_sets(stream):
    batch, _ = stream
    alg = registry.make("hostdp-dst", settings())
    rel = feed(alg, batch)[-1]
    users = [tuple(k) for k in batch.keys.tolist()]
    items = [tuple(k) for k in batch.dst.tolist()]
    sets, over = ref_user_sets(users, items, 20)
    ref = RefPAMG(64)
    for s in sets:
        ref.add(s)
    truth = {}
    for s in sets:
        for x in s:
            truth[x] = truth.get(x, 0) + 1
    got = {(it.hi, it.lo): it.estimate for it in rel.items}
    assert got and set(got) <= set(ref.c)  # only stored keys, never a server nobody contacted
    tau = alg.params.tau
    for key, est in got.items():
        assert est >= alg.threshold() and abs(est - ref.c[key]) < tau  # Thm 12: |noise| < τ (w.p. 1 − 2δ)
    heavy = [x for x, f in truth.items() if ref.c.get(x, 0) >= alg.threshold() + tau]
    assert heavy and all(x in got for x in heavy)
    assert rel.threshold == tau and rel.status.m == 20 and "users_in_epoch" not in rel.status.to_json()
    assert over == 0


def test_guarantee_is_user_level(stream):
    g = registry.make("hostdp-dst", settings()).guarantee()
    assert g.unit.kind is UnitKind.HOST and not g.packet_level
    assert g.unit.label() == "the packets one host sends in the epoch" and (g.epsilon, g.delta) == (1.0, 1e-6)
    assert g.notes[0] == "(ε=1, δ=1e-06)-DP per sending host per epoch (all its packets)"
    assert g.noise == SEEDED_LABEL  # a seeded run says NOT private
    g_src = registry.make("hostdp-src", settings()).guarantee()
    assert g_src.unit.label() == "the packets one host receives in the epoch"
    assert "per receiving host per epoch" in g_src.notes[0]
    assert registry.make("dpmg", Settings()).guarantee().packet_level


def test_src_direction_counts_distinct_destinations_per_source(stream):
    batch, _ = stream
    flipped = KeyBatch(batch.dst, batch.ts_ns, dst=batch.keys)  # servers now send to clients
    rel_dst = feed(registry.make("hostdp-dst", settings()), batch)[-1]
    rel_src = feed(registry.make("hostdp-src", settings()), flipped)[-1]
    assert by_address(rel_dst.items) == by_address(rel_src.items)  # same sets, same seed, same noise


def test_batches_without_destination_are_refused():
    alg = registry.make("hostdp-dst", settings())
    keys = np.zeros((3, 2), dtype=np.uint64)
    with pytest.raises(ValueError, match=r"hostdp-dst needs the packet destination.*KeyBatch.dst is None"):
        alg.consume(KeyBatch(keys))
    with pytest.raises(ValueError, match="needs \\(user, item\\) pairs"):
        alg.update(keys)
    with pytest.raises(ValueError, match=r"exact-clients needs the packet destination"):
        registry.make("exact-clients", settings()).consume(KeyBatch(keys))


@pytest.mark.parametrize("extra,match", [({"m": 0}, r"m \(0\) must be >= 1"), ({"m": 2.5}, r"m \(2.5\) must be an integer"),
                                         ({"m": "x"}, r"m \('x'\) must be an integer"),
                                         ({"variant": "dup"}, r"variant \('dup'\) must be one of pamg, mg-dup")])
def test_bad_parameters_name_themselves(extra, match):
    with pytest.raises(ValueError, match=match):
        registry.make("hostdp-dst", settings(**extra))


def test_count_based_epochs_are_refused():
    with pytest.raises(ValueError, match=r"epoch_packets \(100\) cannot be used with hostdp-dst.*epoch_seconds"):
        registry.make("hostdp-dst", Settings(k=16, epoch_packets=100))


def test_cli_lists_the_names_and_rejects_bad_m(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in ("hostdp-dst", "hostdp-src", "exact-clients"):
        assert name in out
    assert main(["replay", str(DEMO_CAPTURE), "--algorithms", "hostdp-dst", "--param", "m=0"]) == 2
    assert capsys.readouterr().err.strip() == "dptop: error: hostdp-dst: m (0) must be >= 1"


def test_cap_is_counted_in_live_status_only():
    # client 1 contacts 5 servers with m = 3: 2 pairs (3 packets) dropped; client 2 stays under the cap
    src = np.array([[0, 1]] * 6 + [[0, 2]] * 2, dtype=np.uint64)
    dst = np.array([[0, 10], [0, 11], [0, 12], [0, 13], [0, 13], [0, 14], [0, 10], [0, 10]], dtype=np.uint64)
    alg = registry.make("hostdp-dst", Settings(k=16, seed=1, extra={"m": 3}))
    alg.consume(KeyBatch(src, dst=dst))
    st = alg.status()
    assert (st.users_in_epoch, st.capped_users, st.over_cap_packets) == (2, 1, 3)
    rel = alg.finish()[-1]
    assert "over_cap_packets" not in rel.status.to_json()


def test_epochs_follow_packet_time(stream):
    batch, _ = stream
    ts = np.linspace(0, 2.999e9, len(batch)).astype(np.int64)  # three 1 s epochs
    timed = KeyBatch(batch.keys, ts, dst=batch.dst)
    alg = registry.make("hostdp-dst", Settings(k=64, epsilon=1.0, delta=1e-6, seed=3, epoch_seconds=1.0,
                                               extra={"m": 20}), PublicFacts.of(time_range=(0, 3 * 10**9)))
    rels = []
    for s in range(0, len(timed), 9000):
        rels += alg.consume(timed.slice(s, s + 9000))
    rels += alg.finish()
    assert [r.span.index for r in rels] == [0, 1, 2]
    assert [r.span.t_start for r in rels] == [0.0, 1.0, 2.0]
    assert all(r.guarantee.scope.startswith(f"epoch {i}: packet time") for i, r in enumerate(rels))


def test_same_sets_give_the_same_release(stream):
    """T13 analogue: extra duplicate packets change nothing the sketch sees, so with the same seed
    the release is byte-identical (noise drawn in key order)."""
    batch, _ = stream
    dup = KeyBatch(np.concatenate([batch.keys, batch.keys[:5000]]), dst=np.concatenate([batch.dst, batch.dst[:5000]]))
    a = feed(registry.make("hostdp-dst", settings()), batch)[-1]
    b = feed(registry.make("hostdp-dst", settings()), dup)[-1]
    assert a.to_json()["items"] == b.to_json()["items"]


def test_empty_stream_releases_nothing():
    rel = registry.make("hostdp-dst", settings()).finish()
    assert len(rel) == 1 and rel[0].items == ()


def test_mg_dup_map_and_release(stream):
    c = mg_dup_cost(1.0, 1e-6, 50)
    assert (c.epsilon, c.delta) == (1.0 / 50, 1e-6 / (50 * math.e))
    assert within(group(c, 50), ApproxDP(1.0, 1e-6))  # m elements per host: back to (ε, δ)
    with pytest.raises(ValueError, match=r"m \(0\) must be >= 1"):
        mg_dup_cost(1.0, 1e-6, 0)
    batch, _ = stream
    alg = registry.make("hostdp-dst", settings(variant="mg-dup"))
    assert alg.flat.tau == alg.threshold() and (alg.flat.epsilon, alg.flat.delta) == (1.0 / 20, 1e-6 / (20 * math.e))
    rel = feed(alg, batch)[-1]
    contacted = {(int(h), int(l)) for h, l in batch.dst.tolist()}
    assert rel.items and all((it.hi, it.lo) in contacted for it in rel.items)
    assert rel.status.variant == "mg-dup" and rel.status.noisy_pairs is not None
    assert alg.threshold() > registry.make("hostdp-dst", settings()).threshold()  # the factor m costs


def test_exact_baselines_count_distinct_peers(stream):
    batch, sets = stream
    exact = registry.make("exact-clients", Settings(k=10, extra={"top": 0}))
    feed(exact, batch)
    truth = np.bincount(sets.ravel())
    got = sorted((int(it.estimate) for it in exact.release().items), reverse=True)
    assert got == sorted(truth[truth > 0].tolist(), reverse=True)
    servers = registry.make("exact-servers", Settings(k=5))
    feed(servers, batch)
    assert [it.estimate for it in servers.release().items] == [20.0] * 5  # every client has 20 servers


def test_runner_runs_hostdp_beside_its_baseline(stream):
    batch, _ = stream
    algs = [registry.make(n, settings()) for n in ("hostdp-dst", "exact-clients")]
    runner = Runner(algs).start()
    for s in range(0, len(batch), 10_000):
        runner.feed(batch.slice(s, s + 10_000))
    snap = runner.finish()
    assert not snap.errors
    top = runner.releases("exact-clients")[-1].items[0]
    assert top.address in by_address(runner.releases("hostdp-dst")[-1].items)


def test_error_bound_helper():
    alg = HostDPDst(Settings(k=1024, epsilon=1.0, delta=1e-6, extra={"m": 50}))
    assert alg.error_bound(1_000_000) == (1_000_000 / 1025 + 2 * 812 + 1, 812.0)  # τ = 812 (test_user_level_gshm)
    assert alg.threshold() == 813
    with pytest.raises(ValueError, match="error_bound is 002 Thm 12, for variant pamg"):
        registry.make("hostdp-dst", settings(variant="mg-dup")).error_bound(10)


def test_ledger_adds_what_a_host_lane_costs_one_packet():
    """One packet changes one host's epoch: the per-packet total pays the host's (ε, δ) too, and
    the host-level line states its own unit per epoch and over the session."""
    from dptop.monitor.ledger import Ledger

    packet = registry.make("dpmg", Settings()).guarantee()
    host = registry.make("hostdp-dst", settings()).guarantee()
    alone, both = Ledger(), Ledger()
    alone.record("dpmg", 1, packet, 1)
    both.record("dpmg", 1, packet, 1)
    both.record("hostdp-dst", 1, host, 1)
    assert both.to_json()["epsilon"] == pytest.approx(alone.to_json()["epsilon"] + host.epsilon)
    assert both.to_json()["delta"] == pytest.approx(alone.to_json()["delta"] + host.delta)
    assert [g["unit"] for g in both.to_json()["other_units"]] == [host.unit.label()]
    both.record("hostdp-dst", 1, host, 3)  # three epochs released
    line = both.to_json()["other_units"][0]
    assert (line["epsilon"], line["session"]["epsilon"]) == (host.epsilon, pytest.approx(3 * host.epsilon))


def test_host_line_beside_a_lane_sized_by_the_stream_length_says_what_it_does_not_cover():
    """With hostdp-dst and lazyhh together, removing one host changes the stream length and with it
    LazyHH's horizon, thresholds and releases: the host-level line must not stand as if it covered
    the session. It names the packet-level lanes and the assumed length they are sized by."""
    from dptop.monitor.ledger import Ledger

    host = registry.make("hostdp-dst", settings()).guarantee()
    lazy = registry.make("lazyhh", Settings(k=4, epsilon=0.5), PublicFacts.of(4412)).guarantee()
    ledger = Ledger()
    ledger.record("hostdp-dst", 1, host, 1)
    ledger.record("lazyhh", 1, lazy, 1)
    notes = " ".join(ledger.to_json()["other_units"][0]["notes"])
    assert "covers the releases of hostdp-dst only" in notes and "lazyhh protect one packet" in notes
    assert "NOT covered for a host: stream_length (assumed, read from the data) sizes lazyhh" in notes
