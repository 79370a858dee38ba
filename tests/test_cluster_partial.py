"""Cluster runs keep what they can (dptop.cluster.archive, dptop.cluster.collector): a file that
cannot be read is named and left out of the merge, the others are released (``partial``), a stop
ships what the workers read, and a collector waits for the agents it expects and names those that
never came."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from dptop.capture.synth import write_zipf_pcap
from dptop.cluster.archive import BATCH, replay_archive
from dptop.engine.core.settings import Settings

N = 100_000


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("partial")
    paths = []
    for i in range(4):
        paths.append(d / f"{'ABCD'[i]}.pcap")
        write_zipf_pcap(paths[-1], 1.1, 1000, N, seed=10 + i)
    (d / "bad.pcap").write_text("not a capture file\n")
    return d, paths


def test_unreadable_files_are_named_and_the_others_merged(files):
    d, (a, b, c, _) = files
    paths = [a, d / "bad.pcap", b, d / "missing.pcap", c]
    result = replay_archive(paths, ("exact", "misragries", "dpmg"), Settings(k=8))
    assert [m.name for m in result.missing] == [str(d / "bad.pcap"), str(d / "missing.pcap")] and result.partial
    assert "not a capture file" in result.missing[0].error and "cannot read" in result.missing[1].error
    assert result.exact.n == 3 * N and [r.name for r in result.agents] == [str(a), str(b), str(c)]
    (rel,) = result.releases["dpmg"]
    assert rel.status.agents == (str(a), str(b), str(c))
    assert rel.status.agents_missing == (str(d / "bad.pcap"), str(d / "missing.pcap"))
    for name in ("exact", "misragries"):
        assert result.releases[name][0].status.agents == (str(a), str(b), str(c))
    assert result.to_json()["partial"] is True


class _SetAfter:
    """A stop that is requested once the readers have checked it ``n`` times."""

    def __init__(self, n):
        self.n, self.lock = n, threading.Lock()

    def is_set(self):
        with self.lock:
            self.n -= 1
            return self.n < 0


def test_a_stop_ships_what_was_read(files):
    _, paths = files
    big = paths[0].with_name("big.pcap")
    write_zipf_pcap(big, 1.1, 1000, 3 * BATCH, seed=5)
    result = replay_archive([big, paths[1]], ("exact", "dpmg"), Settings(k=8), stop=_SetAfter(2))
    (first,) = result.agents
    assert first.cut_short and first.ip_packets == BATCH and result.exact.n == BATCH and result.partial
    assert result.missing[0].name == str(paths[1]) and "stopped" in result.missing[0].error


def _dptop(*argv, **kw):
    return subprocess.Popen([sys.executable, "-m", "dptop", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kw)


def test_cli_replay_with_a_bad_file_on_local_2(files, tmp_path):
    """The acceptance case: ``dptop replay A B bad C D --cluster local:2 --json o.json``."""
    d, (a, b, c, dd) = files
    out = tmp_path / "o.json"
    proc = _dptop("replay", str(a), str(b), str(d / "bad.pcap"), str(c), str(dd), "--cluster", "local:2",
                  "--algorithms", "exact,dpmg", "--json", str(out))
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 1, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("dptop: error:")]
    assert len(errors) == 1 and "bad.pcap" in errors[0] and "Traceback" not in stderr, stderr
    result = json.loads(out.read_text())
    assert result["partial"] is True and [m["path"] for m in result["missing"]] == [str(d / "bad.pcap")]
    assert result["exact"]["total"] == 4 * N == result["source"]["ip_packets"]
    assert result["algorithms"]["dpmg"]["releases"][0]["status"]["agents_missing"] == [str(d / "bad.pcap")]
    assert "not covered" in stdout


def _children(pid: int) -> list[int]:
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        kids.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return kids


def test_ctrl_c_on_local_2_writes_valid_partial_json_without_tracebacks(files, tmp_path):
    """Ctrl-C reaches the whole process group (the workers too): the workers ignore it, the tasks
    stop at their next batch and ship what they read; one line, exit 130, valid JSON."""
    _, paths = files
    big = [tmp_path / f"big{i}.pcap" for i in range(3)]
    for i, p in enumerate(big):
        write_zipf_pcap(p, 1.1, 1 << 16, 1 << 21, seed=i)
    out = tmp_path / "o.json"
    proc = _dptop("replay", *map(str, big), "--cluster", "local:2", "--algorithms", "exact,misragries,dpmg",
                  "--json", str(out), start_new_session=True)
    first = proc.stderr.readline()  # the workers are up and the files go out
    assert "reading 3 capture file(s) on local:2" in first, first
    assert len(_children(proc.pid)) >= 2
    time.sleep(0.5)  # the files went out; on a quiet machine the whole run takes about 2 s, so signal early
    os.killpg(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "SIGINT" in stderr and len(stderr.strip().splitlines()) <= 2 + len(big), stderr
    result = json.loads(out.read_text())
    delivered = sum(a["ip_packets"] for a in result["agents"])
    assert result["exact"]["total"] == delivered
    assert result["partial"] == (any(a["cut_short"] for a in result["agents"]) or bool(result["missing"]))
    print(f"\ninterrupted: {delivered} of {3 << 21} packets merged; cut short "
          f"{[a['path'][-9:] for a in result['agents'] if a['cut_short']]}, missing {len(result['missing'])}")


def test_a_collector_waits_for_the_agents_it_expects_and_names_the_missing():
    """No agent joins: the wait ends at the expect timeout naming it, and every release of the run
    names it as not covered (instead of an empty network that claims to be complete)."""
    from distributed import Client

    from dptop.cluster.collector import Collector
    from dptop.cluster.connect import local_cluster

    with local_cluster(0, processes=False) as cluster, Client(cluster) as client:
        collector = Collector(client, ("exact", "dpmg"), Settings(k=4), expect=["tap-x"], expect_timeout=1.0).start()
        t0 = time.monotonic()
        assert collector.wait_for_expected() == ["tap-x"]
        assert 0.9 <= time.monotonic() - t0 < 5
        result = collector.stop()
    assert [(a.name, a.state) for a in result.agents] == [("tap-x", "missing")]
    (rel,) = result.releases["dpmg"]
    assert rel.status.agents == () and rel.status.agents_missing == ("tap-x",)
    assert result.releases["exact"][0].status.agents_missing == ("tap-x",)
    jsonschema = pytest.importorskip("jsonschema")
    from dptop.cluster.cli import collect_json
    from dptop.monitor.schemas import COLLECT

    out = collect_json(result, 10)
    jsonschema.validate(out, COLLECT)
    assert out["partial"] is True and out["missing"] == ["tap-x"]
