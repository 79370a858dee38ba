"""A live session opens its socket only once every kernel its lanes reach is ready (app/monitor/
session.py ``_open_live``, dptop.monitor.warming): a lane that stops to compile or load a kernel
while packets arrive can only queue them, and at a high rate its queue overflows. The kernels a
first batch leaves cold are the exact counter's growth (past 5/8 of its first 4,096 homes) and an
epoch's release; the traffic here reaches both, on loopback."""
import os
import socket
import threading
import time

import pytest
from numba.core import event

from dptop.engine.baselines.exact import ExactCounter
from dptop.engine.core.settings import Settings
from dptop.monitor import sources
from dptop.monitor.config import RunConfig, SourceSpec
from dptop.monitor.session import Session, State

pytestmark = [pytest.mark.live,
              pytest.mark.skipif(os.geteuid() != 0, reason="a live capture needs root (CAP_NET_RAW)")]

PORT = 47993
SPEC = SourceSpec("live", iface="lo", bpf=f"udp and port {PORT}", lateness=0.2)
SOURCES = 3000
"""Distinct sources sent: past 5/8 of the exact counter's first table, which then grows."""
FIRST_CALL = 2.0
"""Seconds the first growth of an exact table takes here, as a first use's compile does."""
START_GUARD = 600.0
"""Seconds a start may take (kernels compile on first use): a guard, not a speed."""
GUARD = 60.0


class CompilerLock(event.Listener):
    """The threads that took numba's compiler lock (a kernel compiled or loaded from the cache)
    once ``since`` is set."""

    def __init__(self):
        self.since = threading.Event()
        self.threads: list[str] = []

    def on_start(self, ev):
        if self.since.is_set():
            self.threads.append(threading.current_thread().name)

    def on_end(self, ev):
        pass


def send_from_many_sources(n: int) -> None:
    """One UDP datagram to 127.0.0.1 from each of ``n`` loopback sources (127.1.x.y)."""
    for i in range(n):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind((f"127.1.{i >> 8}.{i & 255}", 0))
            s.sendto(b"warm", ("127.0.0.1", PORT))


def test_the_socket_opens_only_once_the_lanes_later_kernels_are_ready(monkeypatch):
    first_grow: list[tuple[float, str]] = []  # when the first growth ended, on which thread
    grow = ExactCounter._grow

    def slow_first_grow(self):
        if not first_grow:
            time.sleep(FIRST_CALL)
            first_grow.append((time.monotonic(), threading.current_thread().name))
        return grow(self)
    monkeypatch.setattr(ExactCounter, "_grow", slow_first_grow)
    opened: list[float] = []
    opening = sources.live_capture

    def live_capture(*args, **kw):
        opened.append(time.monotonic())
        lock.since.set()
        return opening(*args, **kw)
    monkeypatch.setattr(sources, "live_capture", live_capture)
    lock = CompilerLock()
    event.register("numba:compiler_lock", lock)
    session = Session(RunConfig(("exact", "dpss"), Settings(k=4, epoch_seconds=1.0)))
    try:
        session.open(SPEC)
        deadline = time.monotonic() + START_GUARD
        while session.state is State.STARTING and time.monotonic() < deadline:
            time.sleep(0.05)
        assert session.state is State.RUNNING, (session.state, session.error)
        send_from_many_sources(SOURCES)
        deadline = time.monotonic() + GUARD
        while time.monotonic() < deadline and not (
                session.lanes["exact"].snapshot().packets >= SOURCES and session.lanes["dpss"].snapshot().releases):
            time.sleep(0.05)
        exact, dpss = session.lanes["exact"].snapshot(), session.lanes["dpss"].snapshot()
        assert exact.packets == SOURCES and exact.drops == 0
        assert dpss.releases > 0  # an epoch closed: its release ran while packets could arrive
        assert first_grow and first_grow[0][0] < opened[0], (first_grow, opened)  # grown before the socket
        assert lock.threads == []  # no kernel compiled or loaded once the socket was open
    finally:
        event.unregister("numba:compiler_lock", lock)
        session.close(GUARD)
