"""A stop that lands while a live session is still starting (app/monitor/session.py, ``_run``):
the session says it ended only once its starting thread has ended, whatever it had opened is
closed, and no thread it started after the stop runs on. The stop is injected at each step of a
live start (before the lanes are rebuilt on the wall clock, while the socket opens, after it
opened and before the session runs, while the capture's kernels compile), and at random instants
right after ``open``."""
import os
import random
import threading

import pytest

from dptop.engine.core.settings import Settings
from dptop.monitor import sources
from dptop.monitor.config import RunConfig, SourceSpec
from dptop.monitor.session import Session, State

pytestmark = [pytest.mark.live,
              pytest.mark.skipif(os.geteuid() != 0, reason="a live capture needs root (CAP_NET_RAW)")]

SPEC = SourceSpec("live", iface="lo", bpf="udp and port 47996")
HANG_GUARD = 30.0
"""Seconds a thread gets to end after the stop: a guard against a thread left running, not a speed."""
START_GUARD = 600.0
"""Seconds a start may take to reach the step where a stop is injected (kernels compile on first use)."""


def packet_sockets_open() -> int:
    """Packet sockets this process holds open."""
    with open("/proc/net/packet") as fh:
        inodes = {line.split()[8] for line in fh.read().splitlines()[1:]}
    held = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        held += target.startswith("socket:[") and target[8:-1] in inodes
    return held


def ended(session: Session) -> State:
    """What a view does (``dptop capture``): ask until the session says it ended."""
    for _ in range(int(HANG_GUARD / 0.05)):
        state = session.wait(0.05)
        if state.ended:
            return state
    pytest.fail(f"the session never ended: {session.state}")


def assert_nothing_left(session: Session) -> None:
    """Once the session says it ended, without ``close`` (which stops everything once more): no
    packet socket is open, and every thread it started ends (its starting thread included)."""
    assert session.state is State.STOPPED, session.error
    assert packet_sockets_open() == 0
    for t in session.threads():
        t.join(HANG_GUARD)
    assert [t.name for t in session.threads() if t.is_alive()] == []
    stats = session.source_stats()
    assert stats is None or stats.ip_packets == 0  # nothing read after the stop


def stop_then(session: Session, opening, said: list, wait_seconds: float = 0.0):
    """``opening`` with the session stopped first (and ``wait_seconds`` of work after the stop:
    kernels that compile while the socket opens); ``said`` gets the session's state once it returned."""
    def opened(*args, **kw):
        session.stop(flush=True)  # as Ctrl-C does (headless)
        stopped.set()
        threading.Event().wait(wait_seconds)
        out = opening(*args, **kw)
        said.append(session.state)
        return out
    return opened


stopped = threading.Event()
"""Set once the injected stop happened (the hang guard counts from there)."""


@pytest.mark.parametrize("where", ["before the lanes restart on the wall clock", "while the socket opens",
                                   "after the socket opened"])
def test_a_stop_at_each_step_of_a_live_start_leaves_nothing_running(monkeypatch, where):
    session, said = Session(RunConfig(("exact", "spacesaving"), Settings(k=4))), []
    if where == "before the lanes restart on the wall clock":
        monkeypatch.setattr(sources, "wall_grid", stop_then(session, sources.wall_grid, said))
    elif where == "while the socket opens":
        monkeypatch.setattr(sources, "live_capture", stop_then(session, sources.live_capture, said, 0.5))
    else:
        opening = sources.live_capture

        def opened(*args, **kw):
            source = opening(*args, **kw)
            session.stop(flush=True)
            stopped.set()
            said.append(session.state)
            return source
        monkeypatch.setattr(sources, "live_capture", opened)
    stopped.clear()
    try:
        session.open(SPEC)
        assert stopped.wait(START_GUARD), session.error
        assert ended(session) is State.STOPPED
        assert_nothing_left(session)
        assert said and not any(state.ended for state in said), said  # never ended while still opening
    finally:
        assert session.close(HANG_GUARD) == []


def test_stopped_at_once_after_open_many_times_every_session_ends_whole():
    rng = random.Random(36)
    for _ in range(12):
        session = Session(RunConfig(("exact",), Settings(k=4)))
        try:
            session.open(SPEC)
            threading.Event().wait(rng.uniform(0, 0.3))
            session.stop(flush=True)
            assert ended(session) is State.STOPPED, session.error
            assert packet_sockets_open() == 0  # closed before the session said it ended, running or not
        finally:
            assert session.close(HANG_GUARD) == []  # every thread ended (a flushed run's lanes end on close)
        assert session.state is State.STOPPED and packet_sockets_open() == 0


def test_a_stop_while_the_capture_kernels_compile_does_not_wait_for_the_compile(monkeypatch):
    """The capture's kernels compile after the lanes' (first use: half a minute on a busy machine);
    a Ctrl-C then ends the session at once, the compile going on by itself."""
    from dptop.capture import live

    compiling, compiled = threading.Event(), threading.Event()

    def slow_warm_up():
        compiling.set()
        threading.Event().wait(HANG_GUARD / 2)
        compiled.set()
    monkeypatch.setattr(live, "warm_up", slow_warm_up)
    session = Session(RunConfig(("exact",), Settings(k=4)))
    try:
        session.open(SPEC)
        assert compiling.wait(START_GUARD)
        session.stop(flush=True)
        assert ended(session) is State.STOPPED
        assert not compiled.is_set()  # ended while the compile was under way
        assert_nothing_left(session)
    finally:
        assert session.close(HANG_GUARD) == []
