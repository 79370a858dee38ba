"""Live capture points (dptop.cluster.live, dptop.cluster.collector) on the loopback interface: two
``dptop agent`` processes joined to a loopback scheduler, a collector merging them; killing one shows
it as lost within 5 s and the epochs after it do not claim it. Root and loopback only."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from ctypes.util import find_library

import pytest

from dptop.cluster.collector import Collector
from dptop.cluster.connect import local_cluster
from dptop.engine.core.settings import Settings

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(os.geteuid() != 0, reason="live capture needs root (CAP_NET_RAW)"),
    pytest.mark.skipif(find_library("pcap") is None, reason="the agents' BPF filters need libpcap"),
]
AGENTS = {"tap-a": (40511, ["127.0.0.2", "127.0.0.3"]), "tap-b": (40512, ["127.0.0.4", "127.0.0.5"])}


def wait_for(cond, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def test_two_agents_merge_and_a_killed_agent_is_lost_within_5_s():
    from scapy.all import IP, UDP, Ether, sendp

    cluster = local_cluster(0)  # a scheduler on 127.0.0.1 only
    procs = {name: subprocess.Popen([sys.executable, "-m", "dptop.cluster", "agent", "--iface", "lo", "--scheduler",
                                     cluster.scheduler_address, "--name", name, "--bpf", f"udp dst port {port}"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for name, (port, _) in AGENTS.items()}
    collector = Collector(cluster.scheduler_address, ("exact", "dpmg"), Settings(k=4, epoch_seconds=1.0)).start()
    try:
        assert wait_for(lambda: {a.name: a.state for a in collector.status()} == dict.fromkeys(AGENTS, "running"), 120), \
            (collector.status(), {n: p.poll() for n, p in procs.items()})
        packets = [Ether() / IP(src=src, dst="127.0.0.1") / UDP(sport=5000, dport=port)
                   for port, sources in AGENTS.values() for src in sources for _ in range(40)]
        sendp(packets, iface="lo", verbose=False)
        expected = {src: 40 for _, sources in AGENTS.values() for src in sources}
        assert wait_for(lambda: {it.address: it.estimate for it in collector.exact().top(None)} == expected, 10), \
            collector.exact().top(None)

        procs["tap-b"].kill()
        killed = time.monotonic()
        assert wait_for(lambda: {a.name: a.state for a in collector.status()}["tap-b"] == "lost", 5)
        lost_after = time.monotonic() - killed
        print(f"tap-b shown lost {lost_after:.2f} s after the kill")
        assert lost_after < 5.0
        # the first epoch that ends after the kill is released without claiming tap-b
        assert wait_for(lambda: any("tap-b" in r.status.agents_missing for r in collector.releases()["dpmg"]), 6)
        rel = next(r for r in collector.releases()["dpmg"] if "tap-b" in r.status.agents_missing)
        assert rel.status.agents == ("tap-a",)
        assert any("NOT covered" in n and "tap-b" in n for n in rel.guarantee.notes)
        assert {a.name: a.packets_per_second >= 0 for a in collector.status()}["tap-a"]
        running_a = next(a for a in collector.status() if a.name == "tap-a")
        assert running_a.packets == 80 and running_a.kernel_drops == 0
    finally:
        result = collector.stop()
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
                p.wait(20)
        cluster.close()
    states = {a.name: a.state for a in result.agents}
    assert states == {"tap-a": "finished", "tap-b": "lost"}
    assert {it.address: it.estimate for it in result.exact.top(None)} == expected
    (exact,) = result.releases["exact"]  # tap-b's counts are there until it was lost, not claimed as covered
    assert (exact.status.agents, exact.status.agents_partial) == (("tap-a",), ("tap-b",))
    cells = [r.span.index for r in result.releases["dpmg"]]
    assert cells == list(range(len(cells)))  # every grid cell from the collector's start, in order


SLOW_AGENT = """
import sys, time
from dptop.cluster import live, point
from dptop.cluster.cli import main
where, seconds = sys.argv[1], float(sys.argv[2])
if where == "feed":  # the first batch takes seconds to summarize, as a kernel's first use compiles it
    feed, stalls = point.CapturePoint.feed, [seconds]
    def slow_feed(self, batch):
        if len(batch) and stalls:
            time.sleep(stalls.pop())
        feed(self, batch)
    point.CapturePoint.feed = slow_feed
else:  # the capture opens slowly: the task started (its first cell is set) but sends no beat yet
    class SlowCapture(live.LiveCapture):
        def start(self):
            time.sleep(seconds)
            super().start()
    live.LiveCapture = SlowCapture
sys.exit(main(sys.argv[3:]))
"""


@pytest.mark.parametrize("where, seconds", [("feed", 4.0), ("start", 3.0)])
def test_a_slow_agent_is_waited_for_not_lost_nor_left_out(where, seconds):
    """An agent that is slow (a batch taking ``seconds``, twice ``lost_after``, to summarize; or a slow
    start) is alive: it never shows as lost, and every epoch from its first cell covers it instead of
    being released without it."""
    from scapy.all import IP, UDP, Ether, sendp

    cluster = local_cluster(0)
    proc = subprocess.Popen([sys.executable, "-c", SLOW_AGENT, where, str(seconds), "agent", "--iface", "lo",
                             "--scheduler", cluster.scheduler_address, "--name", "tap-s", "--bpf", "udp dst port 40513"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    collector = Collector(cluster.scheduler_address, ("exact", "dpmg"), Settings(k=4, epoch_seconds=1.0)).start()
    states = set()

    def counted():
        states.update(a.state for a in collector.status())
        return {it.address: it.estimate for it in collector.exact().top(None)} == {"127.0.0.6": 40}

    try:
        assert wait_for(lambda: [a.state for a in collector.status()] == ["running"], 120), proc.poll()
        sendp([Ether() / IP(src="127.0.0.6", dst="127.0.0.1") / UDP(sport=5000, dport=40513)] * 40, iface="lo",
              verbose=False)
        assert wait_for(counted, 10 + seconds), collector.exact().top(None)
        assert states == {"running"}
    finally:
        result = collector.stop()
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(20)
        cluster.close()
    (agent,) = result.agents
    assert (agent.state, agent.ip_packets) == ("finished", 40)
    rels = [r for r in result.releases["dpmg"] if agent.first_cell <= r.span.index <= agent.last_cell]
    assert rels and all((r.status.agents, r.status.agents_missing) == (("tap-s",), ()) for r in rels), \
        (agent.first_cell, [(r.span.index, r.status.agents, r.status.agents_missing) for r in rels])
