"""The headless monitor session (app/monitor/session.py): synthetic and live sources, restarts,
the ledger across an Apply, shutdown."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import socket
import threading
import time

import pytest

from dptop.monitor.config import LIVE_EPOCH_SECONDS, RunConfig, SourceSpec
from dptop.monitor.session import Session
from dptop.engine.core.settings import Settings


def wait(predicate, timeout=120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_synthetic_stream_reaches_every_lane_and_apply_restarts_only_what_changed():
    session = Session(RunConfig(("exact", "spacesaving", "dpss"), Settings(k=8, epsilon=0.5)))
    try:
        session.open(SourceSpec("synth", skew=1.2, domain=1000, length=20_000, seed=3, speed=None))
        assert wait(lambda: session.state == "finished"), session.error
        lanes = {l.name: l for l in session.snapshot().lanes}
        assert all(l.algorithm.packets == 20_000 for l in lanes.values())
        assert lanes["dpss"].algorithm.latest.guarantee.epsilon == 0.5
        assert session.apply(RunConfig(("exact", "spacesaving", "dpss"), Settings(k=8, epsilon=0.25))) == []
    finally:
        assert session.close(1.0) == []


def test_apply_while_running_restarts_only_what_changed_and_the_ledger_keeps_earlier_releases():
    """ε lowered mid-run: the earlier instance's releases stay counted (the ledger states the
    larger ε, not the one in force now), the baseline keeps running."""
    base = Settings(k=8, epsilon=0.5, epoch_seconds=0.5)
    session = Session(RunConfig(("exact", "spacesaving", "dpss"), base))
    try:
        session.open(SourceSpec("synth", skew=1.2, domain=1000, length=40_000, seed=3, speed=0.5, rate=10_000))
        assert wait(lambda: session.state == "running" and (session.snapshot().lanes[2].algorithm or 0)
                    and session.snapshot().lanes[2].algorithm.releases >= 2), session.error
        old = dict(session.lanes)
        restarted = session.apply(RunConfig(("exact", "spacesaving", "dpss"), base.with_(epsilon=0.25)))
        assert restarted == ["dpss"]
        assert session.lanes["exact"] is old["exact"] and session.lanes["dpss"] is not old["dpss"]
        session.stop(flush=True)
        assert session.wait(30) == "stopped"
        budget = session.snapshot().budget
        line = budget["algorithms"]["dpss"]
        # time epochs (a paced source refuses count epochs): each packet lies in one instance's cells
        assert line["segments"] == 2 and line["epsilon"] == pytest.approx(0.5)
        assert any("Apply" in n for n in budget["notes"])
    finally:
        assert session.close(2.0) == []


def refused_unchanged(session: Session, names) -> None:
    """Apply epochs of 1,000 packets to the running ``session``: refused in one line naming the
    option and the private algorithms, as the command line does, and the run goes on as it was
    (same configuration, lanes and ledger notes, packets still counted)."""
    config, lanes, notes = session.config, dict(session.lanes), list(session.ledger.notes)
    fed = session.truth.fed
    count_epochs = RunConfig(names, config.settings.with_(epoch_seconds=None, epoch_packets=1000))
    with pytest.raises(ValueError, match=r"--epoch-packets releases on .*\(dpss\)$") as refusal:
        session.apply(count_epochs)
    assert "\n" not in str(refusal.value)
    assert session.config is config and session.lanes == lanes
    assert all(session.lanes[n] is lanes[n] for n in lanes) and session.state == "running"
    assert session.ledger.notes == notes  # no "parameters applied during the run" note
    assert wait(lambda: session.truth.fed > fed, 30)  # the source still feeds the same lanes


def test_apply_refuses_packet_epochs_on_a_paced_replay_and_keeps_the_run():
    """A paced replay releases on its public clock: epochs of N packets would close when the N-th
    packet arrives, an instant the data chooses; Apply refuses them as ``--epoch-packets`` is
    refused there on the command line."""
    names = ("exact", "dpss")
    session = Session(RunConfig(names, Settings(k=8, epsilon=0.5, epoch_seconds=0.5)))
    try:
        session.open(SourceSpec("synth", skew=1.2, domain=1000, length=40_000, seed=3, speed=0.5, rate=10_000))
        assert wait(lambda: session.state == "running" and session.truth.fed > 0), session.error
        refused_unchanged(session, names)
    finally:
        assert session.close(2.0) == []


def test_apply_without_epochs_keeps_an_endless_streams_clock():
    """A looped stream releases on epochs of its public clock (the window gives it
    ``LIVE_EPOCH_SECONDS``, a live capture gets them from the session): an Apply naming no epochs
    (the window's "whole stream", its default) restarted DPSS with none, a single release that a
    stream without end never makes. The restarted lane keeps the clock's epochs."""
    names = ("exact", "dpss")
    session = Session(RunConfig(names, Settings(k=8, epsilon=0.5, epoch_seconds=LIVE_EPOCH_SECONDS)))
    try:
        session.open(SourceSpec("synth", loop=True, rate=2_000, length=1 << 14))
        assert wait(lambda: session.state == "running" and session.truth.fed > 0), session.error
        assert session.apply(RunConfig(names, Settings(k=8, epsilon=0.25))) == ["dpss"]
        assert session.lanes["dpss"].settings.epoch_seconds == LIVE_EPOCH_SECONDS
        assert session.config.settings.epoch_seconds == LIVE_EPOCH_SECONDS
    finally:
        assert session.close(2.0) == []


@pytest.mark.live
@pytest.mark.skipif(os.geteuid() != 0, reason="live capture needs root")
def test_apply_refuses_packet_epochs_on_a_live_capture_and_keeps_the_run():
    """A live capture releases on the wall clock's cells: Apply refuses epochs of packets there, as
    ``--epoch-packets`` is refused on the command line."""
    names = ("exact", "dpss")
    session = Session(RunConfig(names, Settings(k=8, epsilon=0.5)))
    session.open(SourceSpec("live", iface="lo", bpf="udp and port 47998"))
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        def sent_and_seen():
            sock.sendto(b"x", ("127.0.0.1", 47998))
            return session.state == "running" and session.truth.fed > 0
        assert wait(sent_and_seen, 60), session.error
        stop = threading.Event()

        def send():  # a packet every 10 ms while the Apply is tried: the run must go on counting them
            while not stop.is_set():
                sock.sendto(b"x", ("127.0.0.1", 47998))
                time.sleep(0.01)

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        try:
            refused_unchanged(session, names)
        finally:
            stop.set()
            sender.join()
    finally:
        sock.close()
        assert session.close(30.0) == []


@pytest.mark.live
@pytest.mark.skipif(os.geteuid() != 0, reason="live capture needs root")
def test_live_capture_on_loopback_feeds_the_lanes():
    session = Session(RunConfig(("exact",), Settings(k=4)))
    session.open(SourceSpec("live", iface="lo", bpf="udp and port 47999"))
    assert wait(lambda: session.state == "running" and session.source is not None, 60), session.error
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        def sent_and_seen():
            for _ in range(20):
                sock.sendto(b"x", ("127.0.0.1", 47999))
            a = session.snapshot().lanes[0].algorithm  # its live view may be older than its count
            return a is not None and a.packets >= 100 and a.latest is not None and a.latest.items
        assert wait(sent_and_seen, 60)
        assert session.snapshot().lanes[0].algorithm.latest.items[0].address == "127.0.0.1"
    finally:
        sock.close()
        assert session.close(30.0) == []  # every thread ended (30 s: a hang guard, not a speed)
