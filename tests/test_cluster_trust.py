"""A cluster that trusts no stranger (dptop.cluster.collector, live, messages, archive), on one Dask
scheduler in its own process on loopback: agents are served in threads on a fake capture the test
feeds. A foreign client's pickles run nothing in the collector and read no exact count; a malformed
answer rejects its agent, never the collector; a skewed agent clock loses no packet; a second
collector is refused and one restarted after ``kill -9`` takes over at once; a lost scheduler is a
named gap; a lost agent comes back; ``collect`` writes its JSON on every stop signal."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import cloudpickle
import msgpack
import pytest

from dptop.cluster import archive
from dptop.cluster.collector import Collector
from dptop.cluster.connect import client_for
from dptop.cluster.scheduler_claim import SchedulerTaken
from dptop.engine.core.settings import Settings
from tests.cluster_agents import Agent, FakePlugin, Scheduler, agent_workers, free_port, wait_for

START_S = 120  # an agent's first answer: on a loaded machine, the first summaries compile kernels


class Evil:
    """Unpickled, it appends the unpickling process's id to ``path``: who ran a stranger's code."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (exec, (f"import os; open({self.path!r}, 'a').write(str(os.getpid()) + '\\n')",))


READ_EVENTS = """
import sys
from distributed import Client
with Client(sys.argv[1], timeout="30s") as c:
    print(repr(c.get_events()))
"""


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory):
    s = Scheduler(tmp_path_factory.mktemp("sched"))
    plain = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", s.address, "--nthreads", "1",
                              "--no-dashboard", "--name", "plain"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    observer = client_for(s.address)
    yield s, observer
    observer.close()
    plain.kill()
    s.kill()


def _agents(address, observer, *names, **plugins):
    agents = {n: Agent(address, n, plugins.get(n.replace("-", "_"))) for n in names}
    assert wait_for(lambda: set(names) <= agent_workers(observer), 60), [a.error for a in agents.values()]
    return agents


def _stop(observer, agents):
    for a in agents.values():
        a.stop()
    assert wait_for(lambda: not agent_workers(observer) & set(agents), 30)


def _running(collector, names, timeout=START_S):
    return wait_for(lambda: {a.name: a.state for a in collector.status()} == dict.fromkeys(names, "running"), timeout)


def _top(summary):
    return {(it.hi, it.lo): it.estimate for it in summary.top(None)}


def test_a_foreign_pickle_runs_nothing_and_no_exact_count_reaches_the_event_log(scheduler, tmp_path):
    """Finding 1 and 2: a foreign client posts a pickle in agent A's name on every topic a
    collector ever used; nothing of it runs in the collector's process, A's counts merge, and the
    scheduler's event log, which any client reads, holds no exact count."""
    s, observer = scheduler
    marker = tmp_path / "ran"
    agents = _agents(s.address, observer, "trust-a")
    collector = Collector(s.address, ("exact", "misragries", "dpmg"), Settings(k=4, epoch_seconds=1.0)).start()
    try:
        assert _running(collector, ["trust-a"]), collector.status()
        from distributed.protocol import to_serialize

        with client_for(s.address) as intruder:
            for topic in (f"dptop-{collector.run}", "dptop", collector.run):
                intruder.log_event(topic, {"agent": "trust-a", "kind": "beat", "first_cell": "x",
                                           "exact": to_serialize(Evil(marker))})
            agents["trust-a"].plugin.send([[10, 1]] * 700 + [[10, 2]] * 300)
            assert wait_for(lambda: _top(collector.exact()) == {(10, 1): 700, (10, 2): 300}, 30), collector.exact()
        events = subprocess.run([sys.executable, "-c", READ_EVENTS, s.address], capture_output=True, text=True,
                                timeout=120).stdout  # an ordinary Dask client, in its own process
    finally:
        result = collector.stop()
        _stop(observer, agents)
    ran = marker.read_text().split() if marker.exists() else []
    assert str(os.getpid()) not in ran  # the scheduler may run it (any client may: README); never the collector
    (a,) = result.agents
    assert (a.name, a.state, a.ip_packets) == ("trust-a", "finished", 1000)
    assert _top(result.exact) == {(10, 1): 700, (10, 2): 300}
    leaks = ("dptop-summaries", "dptop-point-report", "\\xcd\\x02\\xbc")  # the formats; 700 as msgpack writes it
    assert "'all'" in events and not any(leak in events for leak in leaks), events[:500]


def test_a_pickled_archive_result_runs_nothing_and_the_good_file_merges(scheduler, tmp_path, monkeypatch):
    s, _ = scheduler
    from dptop.capture.synth import write_zipf_pcap

    marker = tmp_path / "ran"
    paths = [tmp_path / "good.pcap", tmp_path / "evil.pcap"]
    for i, p in enumerate(paths):
        write_zipf_pcap(p, 1.1, 100, 2000, seed=i)
    real = archive.summarize_file

    def evil(path, plan, stop=None):
        return Evil(marker) if path.endswith("evil.pcap") else real(path, plan, stop)

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the worker runs the test's function
    try:
        monkeypatch.setattr(archive, "summarize_file", evil)
        result = archive.replay_archive(paths, ("exact", "dpmg"), Settings(k=4), cluster=s.address)
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert not marker.exists() or str(os.getpid()) not in marker.read_text().split()
    (missing,) = result.missing
    assert missing.name == str(paths[1]) and "nothing of it merged" in missing.error and "\n" not in missing.error
    assert [a.name for a in result.agents] == [str(paths[0])] and result.exact.n == 2000


class BadPlugin(FakePlugin):
    """An agent whose answers are malformed the way ``case`` says."""

    def __init__(self, case):
        super().__init__()
        self.case = case

    def pull(self, run, now_ns, through, final):
        good = super().pull(run, now_ns, through, final)
        doc = msgpack.unpackb(good, raw=False, strict_map_key=False)
        if self.case == "a text cell":
            doc["through"] = "x"
        elif self.case == "a cell 2**40":
            doc["epochs"] = {2 ** 40: b""}
            doc["through"] = 2 ** 40
        elif self.case == "cells never asked":
            doc["through"] = through + 5
        elif self.case == "a pickle":
            return cloudpickle.dumps(Evil(self.marker))
        elif self.case == "a pickled object":
            return Evil(self.marker)
        elif self.case == "another run":
            doc["run"] = "0" * 12
        return msgpack.packb(doc, use_bin_type=True)


BAD = ("a text cell", "a cell 2**40", "cells never asked", "a pickle", "a pickled object", "another run")


def test_a_malformed_answer_rejects_its_agent_in_one_line_never_the_collector(scheduler, tmp_path):
    """Finding 3 and 4: each bad agent is failed with one line, nothing of its answer merged; the
    good agent's run, the collector and every release go on, naming the bad ones as not covered."""
    s, observer = scheduler
    plugins = {f"bad-{i}": BadPlugin(case) for i, case in enumerate(BAD)}
    for p in plugins.values():
        p.marker = tmp_path / "ran"
    agents = _agents(s.address, observer, "good", *plugins, **{n.replace("-", "_"): p for n, p in plugins.items()})
    collector = Collector(s.address, ("exact", "dpmg"), Settings(k=4, epoch_seconds=1.0), expect=["good"]).start()
    try:
        assert wait_for(lambda: {a.name: a.state for a in collector.status()}.get("good") == "running", START_S)
        assert wait_for(lambda: all(a.state == "failed" for a in collector.status() if a.name != "good"), 30), \
            collector.status()
        agents["good"].plugin.send([[7, 7]] * 50)
        assert wait_for(lambda: collector.exact().n == 50, 30)
        assert collector._thread.is_alive() and collector.fatal is None
    finally:
        result = collector.stop()
        _stop(observer, agents)
    status = {a.name: a for a in result.agents}
    assert status["good"].state == "finished" and _top(result.exact) == {(7, 7): 50}
    for name, case in zip(plugins, BAD):
        a = status[name]
        assert a.state == "failed" and a.error.startswith("rejected: ") and "\n" not in a.error, (case, a.error)
    assert not (tmp_path / "ran").exists() or str(os.getpid()) not in (tmp_path / "ran").read_text().split()
    released = [r for r in result.releases["dpmg"] if r.span.index >= status["good"].first_cell]
    assert released and all(r.status["agents"] == ["good"] for r in released)


@pytest.mark.parametrize("skew_s", [20.0, 3600.0, -3600.0])
def test_a_skewed_agent_clock_loses_no_packet_and_no_epoch(scheduler, skew_s):
    """Finding 5: agent B's clock is off by ``skew_s``; it is neither ended nor left out: every
    epoch from its first cell covers A and B, and B's heavy hitter is in a private release."""
    s, observer = scheduler
    skewed = FakePlugin(clock=lambda: time.time_ns() + int(skew_s * 1e9))
    agents = _agents(s.address, observer, "clock-a", "clock-b", clock_b=skewed)
    collector = Collector(s.address, ("exact", "dpmg"), Settings(k=4, epoch_seconds=1.0, seed=4)).start()
    try:
        assert _running(collector, ["clock-a", "clock-b"]), collector.status()
        for _ in range(3):
            agents["clock-a"].plugin.send([[1, 1]] * 100)
            skewed.send([[2, 2]] * 3000)
            time.sleep(0.4)
        assert wait_for(lambda: _top(collector.exact()).get((2, 2)) == 9000, 30)
    finally:
        result = collector.stop()
        _stop(observer, agents)
    status = {a.name: a for a in result.agents}
    assert [status[n].state for n in ("clock-a", "clock-b")] == ["finished", "finished"], status
    assert status["clock-b"].late == 0 and status["clock-b"].ip_packets == 9000
    first = max(a.first_cell for a in status.values())
    rels = [r for r in result.releases["dpmg"] if r.span.index >= first]
    assert rels and all((sorted(r.status["agents"]), r.status["agents_missing"]) == (["clock-a", "clock-b"], [])
                        for r in rels), [(r.span.index, r.status) for r in rels]
    assert any(it.hi == 2 and it.lo == 2 for r in rels for it in r.items), [r.items for r in rels]


def test_a_second_collector_is_refused_and_a_lost_agent_comes_back(scheduler):
    """Finding 8 (a second collector in one line) and finding 6 (a lost agent re-admitted)."""
    s, observer = scheduler
    agents = _agents(s.address, observer, "back-a")
    collector = Collector(s.address, ("exact", "dpmg"), Settings(k=4, epoch_seconds=1.0)).start()
    try:
        assert _running(collector, ["back-a"])
        with pytest.raises(SchedulerTaken) as err:
            Collector(s.address, ("exact",), Settings(k=4)).start()
        assert "another collector" in str(err.value) and "\n" not in str(err.value)
        agents["back-a"].plugin.send([[3, 3]] * 10)
        assert wait_for(lambda: collector.exact().n == 10, 30)
        _stop(observer, agents)
        assert wait_for(lambda: [a.state for a in collector.status()] == ["lost"], 10)
        agents = _agents(s.address, observer, "back-a")  # the same agent, restarted
        assert _running(collector, ["back-a"], 60), collector.status()
        agents["back-a"].plugin.send([[3, 3]] * 5)
        assert wait_for(lambda: collector.exact().n == 15, 30)
    finally:
        result = collector.stop()
        _stop(observer, agents)
    (a,) = result.agents
    assert a.state == "finished" and result.exact.n == 15
    last = result.releases["dpmg"][-1]
    assert last.status["agents"] == ["back-a"]


def _collect(address, *argv):
    return subprocess.Popen([sys.executable, "-m", "dptop.cluster", "collect", "--scheduler", address,
                             "--algorithms", "exact,dpmg", "--epoch-seconds", "1", *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _until_running(proc, name):
    """How many status lines (one a second) showed ``name`` not yet running, or None if it never ran."""
    waiting = 0
    for line in proc.stdout:
        if name in line and "running" in line:
            return waiting
        waiting += name in line
    return None


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_collect_writes_partial_json_on_every_stop_signal(scheduler, tmp_path, sig):
    """Finding 7: INT, TERM and HUP end ``collect`` with its JSON (``partial``) and 128 + signal."""
    s, observer = scheduler
    agents = _agents(s.address, observer, "sig-a")
    out = tmp_path / "o.json"
    proc = _collect(s.address, "--duration", "600", "--json", str(out))
    try:
        assert _until_running(proc, "sig-a") is not None
        agents["sig-a"].plugin.send([[5, 5]] * 20)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        _stop(observer, agents)
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err
    doc = json.loads(out.read_text())
    assert doc["partial"] is True and doc["stopped_by_signal"] is True
    assert [a["state"] for a in doc["agents"]] == ["finished"]


def test_rc_0_only_for_a_complete_run_and_a_collector_killed_9_is_replaced_at_once(scheduler, tmp_path):
    """Finding 8: a collector restarted after ``kill -9`` finds its agents running within seconds
    (not after the old lease); a complete run exits 0 with ``partial: false``."""
    s, observer = scheduler
    agents = _agents(s.address, observer, "nine-a")
    proc, second = _collect(s.address, "--duration", "600"), None
    try:
        assert _until_running(proc, "nine-a") is not None
        proc.kill()
        proc.wait(30)
        out = tmp_path / "o.json"
        second = _collect(s.address, "--duration", "4", "--json", str(out))
        waited = _until_running(second, "nine-a")
        second.communicate(timeout=60)
    finally:
        for p in (proc, second):
            if p is not None and p.poll() is None:
                p.kill()
        _stop(observer, agents)
    print(f"\nafter kill -9, the next collector's status showed the agent not yet running {waited} time(s)")
    assert waited is not None and waited <= 3  # a status line a second: the old lease was 15 s
    doc = json.loads(out.read_text())
    assert second.returncode == 0 and doc["partial"] is False and doc["epochs_not_covered"] == []


def test_a_lost_scheduler_is_a_named_gap_and_the_run_goes_on(tmp_path):
    """Finding 6: the scheduler is killed and restarted on its port; the agent and the collector
    rejoin, the gap is named, and the packets from before and after it are all merged."""
    port = free_port()
    s = Scheduler(tmp_path, port)
    agent = Agent(s.address, "gap-a")
    collector = Collector(s.address, ("exact", "dpmg"), Settings(k=4, epoch_seconds=1.0)).start()
    try:
        assert _running(collector, ["gap-a"])
        agent.plugin.send([[4, 4]] * 30)
        assert wait_for(lambda: collector.exact().n == 30, 30)
        s.kill()
        assert wait_for(lambda: any("lost the scheduler" in line for line in agent.lines), 30), agent.lines
        s = Scheduler(tmp_path, port)
        assert wait_for(lambda: any("rejoined" in line for line in agent.lines), 90), agent.lines
        assert wait_for(lambda: collector.gaps and [a.state for a in collector.status()] == ["running"], 60), \
            (collector.gaps, collector.status(), collector.fatal)
        agent.plugin.send([[4, 4]] * 20)
        assert wait_for(lambda: collector.exact().n == 50, 30)
    finally:
        result = collector.stop()
        agent.stop()
        s.kill()
    (a,) = result.agents
    assert a.state == "finished" and result.exact.n == 50 and len(collector.gaps) == 1
    assert collector.gaps[0]["seconds"] > 0
