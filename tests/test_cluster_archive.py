"""Archive replay across capture points (dptop.cluster.archive) on a loopback Dask LocalCluster:
a capture split into 4 files by packet index gives the exact counts of the whole file, merged
SpaceSaving / Misra-Gries within their merged bounds, DP-MG recall close to the single-file run,
identical results in-process and on Dask, and public epochs (count and time grid)."""
import logging

import numpy as np
import pytest

from dptop.capture.pcap import read_keys
from dptop.capture.synth import write_pcap
from dptop.cluster.archive import replay_archive
from dptop.cluster.plan import TimeGrid
from dptop.engine.core import registry
from dptop.engine.core.keys import KeyBatch
from dptop.engine.core.metrics import heavy_set, recall
from dptop.engine.core.settings import Settings
from dptop.engine.core.workload import ipv4_of_rank, zipf_ranks

T0 = 1_700_000_000_000_000_000
N = 1 << 16
NAMES = ("exact", "spacesaving", "misragries", "countmin", "dpmg", "eehh-cms")


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None,
                      silence_logs=logging.ERROR) as lc, Client(lc) as c:  # in-process transport, no sockets
        yield c


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    """A Zipf 1.1 capture of 2^16 packets (10 µs apart) and its split into 4 files by packet index."""
    return _split_capture(tmp_path_factory.mktemp("archive"), N, 1 << 14, seed=11)


def _split_capture(d, n, domain, seed):
    """``d/all.pcap``: n Zipf 1.1 packets over ``domain`` hosts, 10 µs apart; and its split into
    4 files by packet index. Returns (all, parts)."""
    src = ipv4_of_rank(zipf_ranks(1.1, domain, n, seed=seed))
    ts = T0 + np.arange(n, dtype=np.int64) * 10_000
    write_pcap(d / "all.pcap", src, ts)
    parts = [d / f"part{i}.pcap" for i in range(4)]
    for i, p in enumerate(parts):
        write_pcap(p, src[i::4], ts[i::4])
    return d / "all.pcap", parts


def _truth(path):
    keys, _, _ = read_keys(path)
    uniq, counts = np.unique(keys, axis=0, return_counts=True)
    return {(int(h), int(lo)): int(c) for (h, lo), c in zip(uniq, counts)}


def test_split_capture_merges_to_the_exact_counts_and_within_merged_bounds(capture, client):
    whole, parts = capture
    settings = Settings(k=16)
    single = replay_archive([whole], ("exact",), settings)
    merged = replay_archive(parts, NAMES, settings, cluster=client)
    assert np.array_equal(merged.exact.keys, single.exact.keys)
    assert np.array_equal(merged.exact.counts, single.exact.counts) and merged.exact.n == N
    assert [(a.packets, a.ip_packets, a.skipped) for a in merged.agents] == [(N // 4, N // 4, {})] * 4
    assert all(0 < a.bytes_shipped < p.stat().st_size for a, p in zip(merged.agents, parts))
    truth = _truth(whole)
    mg = merged.releases["misragries"][0]
    assert 0 <= mg.status["error_bound"] <= N / (2 * 16 + 1)
    for it in mg.items:
        f = truth[(it.hi, it.lo)]
        assert f - mg.status["error_bound"] <= it.estimate <= f
    ss = merged.releases["spacesaving"][0]
    assert 0 <= ss.status["error_bound"] <= N / (2 * 16)
    for it in ss.items:
        f = truth[(it.hi, it.lo)]
        assert f <= it.estimate <= f + ss.status["error_bound"]
    for name in ("dpmg", "eehh-cms"):
        (rel,) = merged.releases[name]
        assert rel.guarantee is not None and rel.status["agents"] == [str(p) for p in parts]
    assert merged.exact_top(3)[0].estimate == max(truth.values())


def test_dpmg_recall_matches_the_single_file_run(capture, client):
    """Mean recall over 5 runs, heavy = count > n/k, same parameters (k=16, ε=0.5, δ=1e-6)."""
    whole, parts = capture
    settings = Settings(k=16)
    keys, ts, _ = read_keys(whole)
    uniq, counts = np.unique(keys, axis=0, return_counts=True)
    heavy = heavy_set(uniq, counts, N / settings.k)
    single, split = [], []
    for _ in range(5):
        alg = registry.make("dpmg", settings)
        alg.consume(KeyBatch(keys, ts))
        (rel,) = alg.finish()
        single.append(recall({(it.hi, it.lo) for it in rel.items}, heavy))
        (rel,) = replay_archive(parts, ("dpmg",), settings, cluster=client).releases["dpmg"]
        split.append(recall({(it.hi, it.lo) for it in rel.items}, heavy))
    assert abs(np.mean(split) - np.mean(single)) <= 0.05, (single, split, len(heavy))


def test_in_process_and_dask_give_identical_results(capture, client):
    _, parts = capture
    settings = Settings(k=16, seed=4)
    local = replay_archive(parts, NAMES, settings)
    dask = replay_archive(parts, NAMES, settings, cluster=client)
    assert local.cluster == "in-process" and dask.cluster.startswith("client of inproc://")
    assert np.array_equal(local.exact.counts, dask.exact.counts)
    for name in NAMES:
        assert [r.items for r in local.releases[name]] == [r.items for r in dask.releases[name]], name
        assert [r.threshold for r in local.releases[name]] == [r.threshold for r in dask.releases[name]]


def test_time_grid_releases_every_cell_and_counts_packets_outside(capture, client):
    _, parts = capture
    span_ns = N * 10_000  # the capture lasts 0.655 s
    grid = TimeGrid(T0 // 100_000_000 * 100_000_000 + 100_000_000, 100_000_000, 10)  # 1 s of 0.1 s cells
    result = replay_archive(parts, ("exact", "dpmg"), Settings(k=16, epoch_seconds=0.1), cluster=client, grid=grid)
    rels = result.releases["dpmg"]
    assert [r.span.index for r in rels] == list(range(10))
    assert [r.span.t_start for r in rels] == pytest.approx([(grid.start_ns + i * grid.epoch_ns) / 1e9 for i in range(10)])
    before = int(np.count_nonzero(T0 + np.arange(N) * 10_000 < grid.start_ns))
    assert sum(a.outside_grid for a in result.agents) == before > 0
    assert result.exact.n == N  # the exact counts cover every packet; private releases only the grid
    last_cell = (T0 + span_ns - 10_000 - grid.start_ns) // grid.epoch_ns
    assert all(r.status["agents"] == [str(p) for p in parts] for r in rels)
    assert all(r.status["noisy_length"] < 1000 for r in rels[last_cell + 1:])  # empty cells still released
    assert "epochs of 0.1 s of packet time" in rels[0].guarantee.scope


def test_count_epochs_are_per_capture_point(capture):
    _, parts = capture
    result = replay_archive(parts, ("dpmg", "eehh-cms"), Settings(k=16, epoch_packets=5000, seed=1))
    for name in ("dpmg", "eehh-cms"):
        rels = result.releases[name]
        assert [(r.span.start, r.span.end) for r in rels] == [(0, 5000), (5000, 10000), (10000, 15000),
                                                               (15000, N // 4)]
        assert rels[0].guarantee.neighbouring.startswith("substitution")


def test_bad_requests_get_one_clear_line(capture):
    _, parts = capture
    with pytest.raises(ValueError, match="not available in cluster mode: dpss, lazyhh, dpsw .*covered by no privacy argument"):
        replay_archive(parts, ("exact", "dpss", "lazyhh", "dpsw"), Settings())
    with pytest.raises(ValueError, match=r"cluster \('local:0'\): local workers .* \(0\) must be in \[1, "):
        replay_archive(parts, ("exact",), Settings(), cluster="local:0")
    with pytest.raises(ValueError, match="epoch_seconds .* needs a public time grid"):
        replay_archive(parts, ("dpmg",), Settings(epoch_seconds=1.0))
    with pytest.raises(ValueError, match=r"epoch length \(0 ns\) must be >= 1 ns"):
        TimeGrid(5, 0, 3)
    result = replay_archive([parts[0], parts[0].with_name("missing.pcap")], ("exact",), Settings())
    assert [m.name for m in result.missing] == [str(parts[0].with_name("missing.pcap"))] and result.partial
    assert "cannot read capture file" in result.missing[0].error


def test_local_cluster_of_worker_processes(capture):
    """The embedded default: "local:N" starts worker processes that read the files themselves."""
    whole, parts = capture
    result = replay_archive(parts[:2], ("exact", "misragries"), Settings(k=16), cluster="local:2")
    assert result.cluster == "local:2"
    assert result.exact.n == N // 2 and [a.ip_packets for a in result.agents] == [N // 4, N // 4]


@pytest.mark.slow
@pytest.mark.parametrize("k", [16, 64])
def test_acceptance_zipf_2_20_split_in_4_on_local_2(tmp_path, k):
    """The full-size check: 2^20 Zipf 1.1 packets split into 4 files by packet index, replayed on
    "local:2": exact counts identical to the single file, SpaceSaving / Misra-Gries within their
    merged bounds for every released key, and mean DP-MG recall over 5 runs within 0.05 of the
    single-file run (ε=0.5, δ=1e-6, k~=2k). Prints the figures (run with -s)."""
    n = 1 << 20
    whole, parts = _split_capture(tmp_path, n, 1 << 16, seed=21)
    settings = Settings(k=k)
    truth = _truth(whole)
    uniq = np.array(list(truth), dtype=np.uint64)
    counts = np.array(list(truth.values()))
    heavy = heavy_set(uniq, counts, n / k)
    keys, stamps, _ = read_keys(whole)
    names = ("exact", "spacesaving", "misragries", "dpmg")
    from dptop.cluster.connect import connect

    single, split = [], []
    with connect("local:2") as client:
        for run in range(5):
            alg = registry.make("dpmg", settings)
            alg.consume(KeyBatch(keys, stamps))
            (rel,) = alg.finish()
            single.append(recall({(it.hi, it.lo) for it in rel.items}, heavy))
            result = replay_archive(parts, names if run == 0 else ("dpmg",), settings, cluster=client)
            split.append(recall({(it.hi, it.lo) for it in result.releases["dpmg"][0].items}, heavy))
            if run == 0:
                first = result
    merged = {(int(h), int(lo)): int(c) for (h, lo), c in zip(first.exact.keys, first.exact.counts)}
    assert merged == truth
    mg, ss = first.releases["misragries"][0], first.releases["spacesaving"][0]
    assert mg.status["error_bound"] <= n / (2 * k + 1) and ss.status["error_bound"] <= n / (2 * k)
    assert all(truth[(it.hi, it.lo)] - mg.status["error_bound"] <= it.estimate <= truth[(it.hi, it.lo)] for it in mg.items)
    assert all(truth[(it.hi, it.lo)] <= it.estimate <= truth[(it.hi, it.lo)] + ss.status["error_bound"] for it in ss.items)
    print(f"\nk={k}: {len(heavy)} heavy hitters (> n/k = {n / k:.0f}); MG merged bound {mg.status['error_bound']:.1f} "
          f"(n/(k~+1) = {n / (2 * k + 1):.1f}), SS merged bound {ss.status['error_bound']} (n/k~ = {n / (2 * k):.1f}); "
          f"dpmg recall single {np.mean(single):.3f} {single}, split {np.mean(split):.3f} {split}; "
          f"merged threshold {first.releases['dpmg'][0].threshold:.0f}")
    assert abs(np.mean(split) - np.mean(single)) <= 0.05
