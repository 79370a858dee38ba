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
