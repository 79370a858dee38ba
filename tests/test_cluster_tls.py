"""A cluster over TLS (dptop.cluster.connect): a loopback Dask scheduler and worker that require
encryption, certificates (self-signed, made here with openssl) given the way a user gives them, in
Dask's configuration. An archive replay and a live collector run over it; a plain connection and a
tls:// address without certificates are refused."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from dptop.capture.synth import write_zipf_pcap
from dptop.cluster.archive import replay_archive
from dptop.cluster.cli import main as cluster_main
from dptop.cluster.collector import Collector
from dptop.cluster.connect import check_cluster
from dptop.engine.core.settings import Settings

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="the test's certificates need openssl")


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    """(the scheduler's tls:// address, the Dask configuration a client needs)."""
    import dask
    from distributed import LocalCluster, Security

    d = tmp_path_factory.mktemp("tls")
    cert, key = str(d / "cert.pem"), str(d / "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=dptop-test", "-keyout", key, "-out", cert], check=True, capture_output=True)
    roles = {f"tls_{role}_{part}": path for role in ("scheduler", "worker", "client")
             for part, path in (("cert", cert), ("key", key))}
    security = Security(tls_ca_file=cert, require_encryption=True, **roles)
    config = {"distributed.comm.require-encryption": True, "distributed.comm.tls.ca-file": cert,
              "distributed.comm.tls.client.cert": cert, "distributed.comm.tls.client.key": key}
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tls://", host="127.0.0.1",
                      security=security, dashboard_address=None) as cluster:
        with dask.config.set(config):
            yield cluster.scheduler_address, config


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("tlsfiles")
    paths = [d / f"{i}.pcap" for i in range(2)]
    for i, p in enumerate(paths):
        write_zipf_pcap(p, 1.1, 500, 5000, seed=30 + i)
    return paths


def test_an_archive_replay_over_tls_matches_the_in_process_one(tls, files):
    address, _ = tls
    assert address.startswith("tls://127.0.0.1:")
    settings = Settings(k=8, seed=3)
    remote = replay_archive(files, ("exact", "misragries"), settings, cluster=address)
    local = replay_archive(files, ("exact", "misragries"), settings)
    assert remote.cluster == address and not remote.partial
    assert remote.exact.n == local.exact.n == 10_000
    assert remote.exact_top() == local.exact_top()
    assert [r.items for r in remote.releases["misragries"]] == [r.items for r in local.releases["misragries"]]


def test_a_live_collector_runs_over_tls(tls):
    address, _ = tls
    collector = Collector(address, ("exact",), Settings(k=4), expect=("tap",), expect_timeout=0.5).start()
    assert collector.wait_for_expected() == ["tap"]
    result = collector.stop(timeout=1)
    assert [(a.name, a.state) for a in result.agents] == [("tap", "missing")]


def test_a_plain_connection_to_the_tls_scheduler_is_refused(tls):
    import dask
    from distributed import Client

    address, _ = tls
    with dask.config.set({"distributed.comm.require-encryption": False}):  # a client that would talk plain TCP
        with pytest.raises(OSError):  # the scheduler accepts TLS handshakes only
            Client(address.replace("tls://", "tcp://"), timeout="3s")


def test_tls_without_certificates_is_one_line(capsys):
    import dask

    with dask.config.set({"distributed.comm.tls.ca-file": None}):
        with pytest.raises(ValueError, match="TLS needs the user's certificates") as err:
            check_cluster("tls://127.0.0.1:8786")
        assert "\n" not in str(err.value)
        with pytest.raises(SystemExit) as exit_:
            cluster_main(["agent", "--iface", "lo", "--scheduler", "tls://127.0.0.1:8786"])
    assert exit_.value.code == 2
    err_lines = capsys.readouterr().err.strip().splitlines()
    assert "TLS needs the user's certificates" in err_lines[-1] and "Traceback" not in "\n".join(err_lines)


def _openssl(*argv):
    subprocess.run(["openssl", *argv], check=True, capture_output=True)


@pytest.fixture(scope="module")
def ca_cluster(tmp_path_factory):
    """A scheduler requiring certificates signed by the test's CA: (address, folder of certificates,
    Security of an agent by name). Agents tap-a and tap-b and the collector have certificates of that
    CA; "rogue" is a self-signed certificate naming tap-a."""
    import dask
    from distributed import LocalCluster, Security

    d = tmp_path_factory.mktemp("ca")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=dptop-test-ca",
             "-keyout", str(d / "ca.key"), "-out", str(d / "ca.pem"))
    for cn in ("scheduler", "collector", "tap-a", "tap-b"):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cn}", "-keyout", str(d / f"{cn}.key"),
                 "-out", str(d / f"{cn}.csr"))
        _openssl("x509", "-req", "-in", str(d / f"{cn}.csr"), "-CA", str(d / "ca.pem"), "-CAkey", str(d / "ca.key"),
                 "-CAcreateserial", "-days", "1", "-out", str(d / f"{cn}.pem"))
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=tap-a",
             "-keyout", str(d / "rogue.key"), "-out", str(d / "rogue.pem"))

    def agent(cert, ca="ca.pem"):
        roles = {} if cert is None else {"tls_worker_cert": str(d / f"{cert}.pem"), "tls_worker_key": str(d / f"{cert}.key")}
        return Security(tls_ca_file=str(d / ca), require_encryption=True, **roles)

    scheduler = Security(tls_ca_file=str(d / "ca.pem"), tls_scheduler_cert=str(d / "scheduler.pem"),
                         tls_scheduler_key=str(d / "scheduler.key"), tls_client_cert=str(d / "collector.pem"),
                         tls_client_key=str(d / "collector.key"), require_encryption=True)
    config = {"distributed.comm.require-encryption": True, "distributed.comm.tls.ca-file": str(d / "ca.pem"),
              "distributed.comm.tls.client.cert": str(d / "collector.pem"),
              "distributed.comm.tls.client.key": str(d / "collector.key")}
    with LocalCluster(n_workers=0, processes=False, protocol="tls://", host="127.0.0.1", security=scheduler,
                      dashboard_address=None) as cluster, dask.config.set(config):
        yield cluster.scheduler_address, d, agent


def test_an_agent_without_a_valid_certificate_is_refused_in_one_line(ca_cluster):
    """Finding 9: a rogue certificate and a CA without a certificate are one line each, before any
    worker starts (no "joining…" forever, no traceback); so is the command."""
    import os
    import sys

    from dptop.cluster.connect import check_reachable

    address, d, agent = ca_cluster
    for security, says in ((agent("rogue"), "TLS handshake failed"), (agent(None), "needs this worker's own certificate")):
        with pytest.raises(ConnectionError) as err:
            check_reachable(address, "worker", security)
        assert says in str(err.value) and "\n" not in str(err.value), str(err.value)
    env = {**os.environ, "DASK_DISTRIBUTED__COMM__TLS__CA_FILE": str(d / "ca.pem"),
           "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "True",
           "DASK_DISTRIBUTED__COMM__TLS__WORKER__CERT": str(d / "rogue.pem"),
           "DASK_DISTRIBUTED__COMM__TLS__WORKER__KEY": str(d / "rogue.key")}
    proc = subprocess.run([sys.executable, "-m", "dptop.cluster", "agent", "--iface", "lo", "--scheduler", address],
                          capture_output=True, text=True, env=env, timeout=120)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(err) == 1 and err[0].startswith("dptop: error: cannot join"), proc.stderr
    assert "TLS handshake failed" in err[0]


def test_two_agents_over_tls_equal_the_in_process_run_and_a_borrowed_name_is_refused(ca_cluster):
    """Two agents with their certificates merge exactly as the same two capture points in one
    process; a worker named "tap-c" presenting tap-a's certificate is refused and named."""
    import numpy as np

    from dptop.cluster.merger import Merger
    from dptop.cluster.point import CapturePoint
    from dptop.engine.core.keys import KeyBatch
    from tests.cluster_agents import Agent, wait_for

    address, _, agent = ca_cluster
    rng = np.random.default_rng(7)
    keys = {n: rng.zipf(1.3, (5000, 2)).clip(0, 200).astype(np.uint64) for n in ("tap-a", "tap-b")}
    agents = {n: Agent(address, n, security=agent(n)) for n in ("tap-a", "tap-b")}
    agents["tap-c"] = Agent(address, "tap-c", security=agent("tap-a"))
    collector = Collector(address, ("exact", "misragries", "dpmg"), Settings(k=8, seed=11)).start()
    try:
        assert wait_for(lambda: {a.name: a.state for a in collector.status()} == {"tap-a": "running",
                                                                                 "tap-b": "running"}, 120), \
            (collector.status(), [a.error for a in agents.values()])
        assert wait_for(lambda: len(collector.refused()) == 1, 30)
        for n, k in keys.items():
            agents[n].plugin.send(k)
        assert wait_for(lambda: collector.exact().n == 10_000, 30)
    finally:
        result = collector.stop()
        for a in agents.values():
            a.stop()
    (why,) = collector.refused().values()
    assert "'tap-c'" in why and "'tap-a'" in why and "\n" not in why
    assert sorted(a.name for a in result.agents) == ["tap-a", "tap-b"]
    merger = Merger(collector.plan, ["tap-a", "tap-b"])
    for n, k in keys.items():
        point = CapturePoint(collector.plan)
        point.feed(KeyBatch(k, np.zeros(len(k), dtype=np.int64)))
        merger.add_epoch(n, 0, point.take_epoch(0))
        merger.add_whole(n, point.take_whole())
    merger.release_whole()
    merger.release_epoch(0, ["tap-a", "tap-b"])
    assert result.exact_top() == merger.exact().top() and result.exact.n == 10_000
    for name in ("exact", "misragries", "dpmg"):
        assert [r.items for r in result.releases[name]] == [r.items for r in merger.releases[name]], name
