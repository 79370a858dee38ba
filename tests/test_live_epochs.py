"""Live time epochs: the public lateness allowance at cell boundaries, drops counted where they
happen, the exact baseline counting exactly the packets the lanes count, and (on ``lo``, root)
``dptop capture`` releasing while it runs, one line per release, with wall times."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import pytest

from dptop.capture.lab.netns import mapped_sockets
from dptop.engine.core.clock import MAX_CELLS, TimeGrid
from dptop.engine.core.keys import KeyBatch, keys_from_addresses
from dptop.engine.core.settings import Settings
from dptop.monitor import clocks
from dptop.monitor.config import RunConfig, SourceSpec
from dptop.monitor.explain import drops_of
from dptop.monitor.result import session_json
from dptop.monitor.clocks import AHEAD, LATE, LiveClock
from dptop.monitor.session import Session
from dptop.monitor.states import State
from dptop.report import render_text
from dptop.runresult import RunResult

S = 1_000_000_000
START = 1_700_000_000 * S


class Clock:
    now = START

    def __call__(self):
        return self.now


def batch(stamps_s, address="192.0.2.1"):
    keys = keys_from_addresses([address] * len(stamps_s))
    return KeyBatch(keys, np.array([START + round(t * S) for t in stamps_s], np.int64))


def open_live(monkeypatch, config: RunConfig):
    """A session of ``config`` on a live 1 s wall-clock grid (no socket): batches go in through its
    live sink at the moments the fake clock says."""
    clock = Clock()
    monkeypatch.setattr(clocks.time, "time_ns", clock)
    s = Session(config)
    s.spec = SourceSpec("live", iface="lo", lateness=0.5)
    s.public["time_range"] = (START, None)
    s.grid = TimeGrid(START, S, MAX_CELLS)
    s.fanout.live = True
    s.clock = LiveClock(s.grid, 0.5, s.fanout)
    s.truth.start()
    assert s._start_lanes()
    return s, clock


@pytest.fixture
def live_session(monkeypatch):
    s, clock = open_live(monkeypatch, RunConfig(("exact", "dpss"), Settings(k=4, epsilon=1.0, epoch_seconds=1.0)))
    yield s, clock
    assert s.close(5.0) == []


def deliver(s, clock, at_s, stamps_s, address="192.0.2.1"):
    clock.now = START + round(at_s * S)
    s.clock(batch(stamps_s, address))
    drained(s)


def drained(s, timeout=30.0):
    """Wait until every lane took what it was offered (a live lane's queue is short; on a busy
    machine the next offer could find it full, which is a counted drop, not what this tests)."""
    deadline = time.monotonic() + timeout
    while any(lane.worker.snapshot().queue_depth for lane in s.lanes.values()):
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_lateness_allowance_keeps_boundary_packets_and_drops_later_ones(live_session):
    s, clock = live_session
    deliver(s, clock, 0.2, [0.1, 0.2])
    deliver(s, clock, 1.2, [0.95, 1.1])  # 0.95 is late by 0.25 s < 0.5 s: epoch 0; 1.1 waits for epoch 1
    deliver(s, clock, 1.45, [0.99, 1.3])
    deliver(s, clock, 1.6, [0.98, 1.5])  # epoch 0 closed at 1.5 s: 0.98 is a drop
    deliver(s, clock, 1.7, [5.0])  # ahead of the wall clock: a drop
    assert s.dropped == {LATE: 1, AHEAD: 1}
    clock.now = START + round(2.6 * S)
    s.clock.tick()  # closes epoch 1
    drained(s)
    clock.now = START + round(3.6 * S)
    s.clock.tick(final=True)
    for lane in s.lanes.values():
        lane.worker.finish(10)
    s.truth.wait_idle()
    rec = s.truth.rec  # the truth's packets by cell: 0.1 0.2 0.95 0.99 | 1.1 1.3 1.5
    assert (rec.position_of_cell(1), rec.position_of_cell(2), rec.pos) == (4, 7, 7)
    releases = s.releases("dpss")
    assert [r.span.index for r in releases] == [0, 1, 2, 3]  # every cell up to the stop, empty ones too
    assert [(r.span.t_start, r.span.t_end) for r in releases[:2]] == [(START / S, START / S + 1),
                                                                      (START / S + 1, START / S + 2)]
    exact_total = s.exact(None)[0]
    lane_packets = {name: lane.worker.snapshot().packets for name, lane in s.lanes.items()}
    assert exact_total == 7 and lane_packets == {"exact": 7, "dpss": 7}
    d = drops_of(s.snapshot())
    assert (d.clock, d.total) == (2, 2)


def test_drops_reach_the_json_and_every_view(live_session):
    s, clock = live_session
    deliver(s, clock, 0.2, [0.1])
    deliver(s, clock, 1.9, [0.5, 0.6, 1.8])
    clock.now = START + round(2.6 * S)  # the public clock hands 1.8 s on when its epoch opens, not before
    s.clock.tick()
    drained(s)
    out = session_json(s, "capture", 10)
    assert out["dropped"] == {LATE: 2}
    lane = {"seen": 2, "refused": 0, "missed": 2}  # every lane misses what the clock dropped
    assert out["drops"] == {"total": 2, "clock": 2, "kernel": 0, "queue": 0, "lanes": 0, "offered": 4,
                            "by_lane": {"dpss": lane, "exact": lane}}
    assert "drops" in out["non_private"]["fields"]
    assert drops_of(s.snapshot()).text().startswith("drops 2 of 4 offered (late 2")


def test_live_continual_and_window_spans_keep_their_exact_positions_under_non_private(monkeypatch):
    """A live LazyHH steps on the clock (one release per closed cell, its span the grid's) and a
    live DPSW's window counts the packets seen: in the run's JSON their spans show no position,
    which each lane's ``exact_spans`` (listed non-private) keeps, and the text table prints none."""
    config = RunConfig(("exact", "lazyhh", "dpsw"), Settings(k=4, epsilon=0.5, delta=1e-6, epoch_seconds=1.0,
                                                             window=50))
    s, clock = open_live(monkeypatch, config)
    try:
        deliver(s, clock, 0.2, [0.1, 0.15])
        deliver(s, clock, 1.7, [1.2, 1.3, 1.4])
        for name in ("lazyhh", "dpsw"):
            s.lanes[name].snapshot(want_live=True)  # a view asks for the window's answer
        clock.now = START + round(3.6 * S)
        s.clock.tick(final=True)
        for lane in s.lanes.values():
            lane.worker.finish(30)
        out = session_json(s, "capture", 10)
    finally:
        assert s.close(5.0) == []
    assert "exact_spans" in " ".join(out["non_private"]["fields"])
    for name in ("lazyhh", "dpsw"):
        a = out["algorithms"][name]
        assert a["releases"] and len(a["exact_spans"]) == len(a["releases"]), name
        for release, exact in zip(a["releases"], a["exact_spans"]):
            assert release["span"]["start"] is None and release["span"]["end"] is None, (name, release["span"])
            assert 0 <= exact["start"] <= exact["end"] <= 5, (name, exact)
    lazyhh = out["algorithms"]["lazyhh"]
    closes = [(r["span"]["t_start"], r["span"]["t_end"]) for r in lazyhh["releases"]]
    assert closes[:3] == [(START / S, START / S + c) for c in (1, 2, 3)]  # one release per cell, on the grid
    assert [e["end"] for e in lazyhh["exact_spans"]][:3] == [2, 5, 5]
    text = render_text(RunResult.from_json(out))
    assert "lazyhh" in text and "horizon 0, " in text and "packets 0-" not in text


root = pytest.mark.skipif(os.geteuid() != 0, reason="live capture needs root (CAP_NET_RAW)")


def capture_socket_open(pid: int, timeout: float) -> bool:
    """Wait until process ``pid`` holds a packet socket whose ring it has mapped, for half a second
    (its capture listens: the check before any output opens a socket and closes it at once, and a
    ring of hundreds of MB keeps every frame out until it is mapped), however long its kernels take
    to load on a busy machine; False when it does not within ``timeout`` seconds."""
    def held() -> set[str]:
        with open("/proc/net/packet") as f:
            inodes = {line.split()[-1] for line in f.readlines()[1:]}
        fds = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
        return {inode for inode in inodes if f"socket:[{inode}]" in fds} & mapped_sockets(pid)

    deadline = time.monotonic() + timeout
    seen: set[str] = set()
    while time.monotonic() < deadline:
        try:
            now = held()
        except OSError:
            return False  # the capture ended
        if seen & now:
            return True
        seen = now
        time.sleep(0.5)
    return False


@pytest.mark.live
@root
def test_capture_on_lo_releases_while_running_with_wall_times_and_counts_every_drop(tmp_path):
    """A paced sender on 127.0.0.x for 5 s; 2 s epochs over 11 s: a line per DPSS release while the
    capture runs, every release with its wall time, drops = sent - counted."""
    port = 40000 + os.getpid() % 20000
    out = tmp_path / "out.json"
    t0 = time.time()
    cap = subprocess.Popen([sys.executable, "-m", "dptop", "capture", "--iface", "lo", "--bpf",
                            f"udp dst port {port}", "--duration", "11", "--epoch-seconds", "2", "--k", "4",
                            "--algorithms", "dpss,lazyhh,exact", "--json", str(out)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert capture_socket_open(cap.pid, 120), "the capture opened no packet socket"  # after its kernels load
    sender = subprocess.run([sys.executable, "-m", "dptop.capture.lab.paced", "--rate", "2000", "--seconds", "5",
                             "--share", "127.0.0.2=0.5", "--others", "4", "--port", str(port)],
                            capture_output=True, text=True, timeout=60)
    stdout, stderr = cap.communicate(timeout=120)
    cap.returncode, cap.stdout, cap.stderr = cap.returncode, stdout, stderr
    sent = json.loads(sender.stdout)
    assert cap.returncode == 0, cap.stderr
    lines = [line for line in cap.stdout.splitlines() if " dpss epoch " in line]
    assert len(lines) >= 3 and any("127.0.0.2" in line for line in lines), cap.stdout
    result = json.loads(out.read_text())
    dpss = result["algorithms"]["dpss"]["releases"]
    assert [r["span"]["index"] for r in dpss] == list(range(len(dpss))) and len(dpss) >= 4
    for name, a in result["algorithms"].items():
        for r in a["releases"]:
            assert r["span"]["t_start"] is not None and t0 - 60 < r["span"]["t_start"] <= r["span"]["t_end"], name
    lazyhh = result["algorithms"]["lazyhh"]  # on the clock's 2 s cells; its counted positions in exact_spans
    assert all(r["span"]["end"] is None for r in lazyhh["releases"])
    assert [e["end"] for e in lazyhh["exact_spans"]] == sorted(e["end"] for e in lazyhh["exact_spans"])
    assert max(e["end"] for e in lazyhh["exact_spans"]) <= result["exact"]["total"]
    start = result["public"]["time_range"]["start"]
    assert all(abs((r["span"]["t_end"] - start) / 2.0 - round((r["span"]["t_end"] - start) / 2.0)) < 1e-6
               for r in lazyhh["releases"])
    for r in dpss:
        assert abs(r["span"]["t_end"] - r["span"]["t_start"] - 2.0) < 1e-6
    counted = result["exact"]["total"]
    assert sent["first"] > result["public"]["time_range"]["start"], "the sender started before the capture"
    assert result["drops"]["total"] == sent["packets"] - counted
    assert Counter({a: c for a, c in sent["sent"].items()})["127.0.0.2"] >= \
        next(r["count"] for r in result["exact"]["top"] if r["address"] == "127.0.0.2")


DNS = os.path.join(os.path.dirname(__file__), "data", "amp.dns.RRSIG.fragmented.pcap")


def test_packet_epochs_are_refused_where_a_clock_paces_the_releases(capsys):
    """``--epoch-packets`` would close epochs, and a continual algorithm's output steps, at the
    N-th packet's arrival (docs/dpss-eehh.md §9, docs/lazyhh.md §7.5): on a paced replay or a live
    capture it is refused with private algorithms, in one line, by the command and by the session;
    an unpaced replay and the exact baseline keep it."""
    from dptop.cli import main

    paced = ["replay", DNS, "--speed", "100", "--epoch-packets", "500"]
    assert main([*paced, "--algorithms", "lazyhh,dpss"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--epoch-packets" in err and "(lazyhh, dpss)" in err, err
    assert main(["replay", DNS, "--epoch-packets", "500", "--algorithms", "lazyhh"]) == 0
    s = Session(RunConfig(("lazyhh",), Settings(k=4, epsilon=0.5, epoch_packets=500)))
    s.open(SourceSpec("file", path=DNS, speed=100.0))
    try:
        assert s.wait(60) is State.FAILED and "--epoch-packets" in s.error, s.error
    finally:
        s.close(5.0)
    s = Session(RunConfig(("exact",), Settings(k=4, epoch_packets=500)))
    s.open(SourceSpec("file", path=DNS, speed=1000.0))
    try:
        assert s.wait(60) is State.FINISHED, s.error
    finally:
        s.close(5.0)
