"""The session its caller drives step by step (app/monitor/stepped.py) against the threaded one:
on the same seeded replay of a real capture, every algorithm's releases, the private view
(``publish_json``: releases, spans, guarantees, the ledger, the public facts) and the exact
counts are the same, and no thread is started; on a live clock with an injected wall clock (the
conformance matrix's capture surface), the same private view."""
from __future__ import annotations

import threading
from dataclasses import replace

import numpy as np
import pytest

from tests.conftest import DNS_CAPTURE
from dptop.engine.core import registry
from dptop.engine.core.clock import MAX_CELLS, TimeGrid
from dptop.engine.core.keys import KeyBatch
from dptop.engine.core.workload import keys_of_ipv4
from dptop.engine.core.settings import Settings
from dptop.monitor import sources
from dptop.monitor.clocks import LiveClock
from dptop.monitor.config import CountingChoice, RunConfig, SourceSpec
from dptop.monitor.publish import publish_json
from dptop.monitor.session import Session
from dptop.monitor.states import State
from dptop.monitor.stepped import SteppedSession

S = 10**9
T0 = 1_700_000_000 * S
PRIVATE = tuple(n for n in registry.names() if registry.get(n).private)
BASELINES = ("exact", "spacesaving", "window-exact")


def threaded(config: RunConfig, spec: SourceSpec) -> Session:
    session = Session(config, record_packets=1 << 12)
    session.open(spec)
    assert session.wait(120) is State.FINISHED, session.error
    return session


def stepped(config: RunConfig, spec: SourceSpec) -> SteppedSession:
    before = threading.active_count()
    session = SteppedSession(config, record_packets=1 << 12)
    session.open(spec)
    assert session.replay() is State.FINISHED, session.error
    assert threading.active_count() == before and session.wait() is State.FINISHED
    return session


def outputs(session: Session, names) -> tuple:
    """The private view, every release (but its operational status: a local-DP aggregator's
    includes timings), the exact counts and each lane's packets, releases and errors."""
    releases = {n: [replace(r, status=None) for r in session.releases(n)] for n in names}
    lanes = [(v.name, v.error, v.algorithm and (v.algorithm.packets, v.algorithm.releases, v.algorithm.error))
             for v in session.snapshot().lanes]
    return publish_json(session, "replay"), releases, session.exact(10), lanes


@pytest.mark.parametrize("settings,counting", [
    (Settings(k=4, epsilon=0.5, delta=1e-6, epoch_seconds=5.0, window=500, seed=11), CountingChoice()),
    (Settings(k=4, epsilon=0.5, delta=1e-6, seed=12), CountingChoice()),
    (Settings(k=4, epsilon=0.5, delta=1e-6, epoch_packets=1000, seed=13), CountingChoice(key="dst")),
    (Settings(k=4, epsilon=1.0, delta=1e-6, epoch_seconds=10.0, seed=14), CountingChoice(weight="bytes")),
], ids=["time-epochs", "whole-stream", "packet-epochs-dst", "bytes"])
def test_a_seeded_replay_gives_the_same_private_output_in_both_modes(settings, counting):
    names = (*PRIVATE, *BASELINES)
    config = RunConfig(names, settings, counting=counting)
    spec = SourceSpec("file", path=str(DNS_CAPTURE))
    one, other = threaded(config, spec), stepped(config, spec)
    try:
        a, b = outputs(one, names), outputs(other, names)
        assert a[0] == b[0]  # the private view, the ledger included
        assert a[1] == b[1] and any(a[1].values())
        assert a[2] == b[2] and a[3] == b[3]
    finally:
        one.close(5.0)
        other.close(5.0)


def test_the_check_can_fail():
    """Two seeds give two private views: the comparison above sees a difference in the noise."""
    config = RunConfig(("dpss",), Settings(k=4, epsilon=0.5, epoch_seconds=5.0, seed=1))
    spec = SourceSpec("file", path=str(DNS_CAPTURE))
    one = stepped(config, spec)
    other = stepped(RunConfig(("dpss",), config.settings.with_(seed=2)), spec)
    assert publish_json(one, "replay") != publish_json(other, "replay")


def live_capture(session: Session, stepped_lanes: bool) -> dict:
    """Three seconds of one heavy source and a light tail offered to a live clock on an injected
    wall clock, each second's packets once the wall clock is past them, every close on time: the
    threaded session driven as its capture thread and its own thread drive it, or the stepped one."""
    now = [T0]
    spec = SourceSpec("live", iface="lo", lateness=0.5, duration=3)
    grid = TimeGrid(T0, S, MAX_CELLS)
    if stepped_lanes:
        session.open_live(spec, grid, now_ns=lambda: now[0])
    else:  # what Session._open_live sets up, on the injected clock
        session.spec, session.grid, session.fanout.live = spec, grid, True
        session.public["time_range"], session.public_source = (T0, T0 + 3 * S), sources.LIVE_CLOCK
        session.clock = LiveClock(grid, 0.5, session.fanout, now_ns=lambda: now[0])
        session.truth.count_all()
        session.truth.start()
        assert session._start_lanes()
    rng = np.random.default_rng(3)
    for second in range(3):
        n = 900
        src = np.where(rng.random(n) < 0.6, 0xC000_0201, 0x0A00_0000 + rng.integers(0, 300, n)).astype(np.uint32)
        stamps = T0 + second * S + np.sort(rng.integers(0, S, n))
        now[0] = T0 + (second + 1) * S
        dst = (0xC633_6400 + rng.integers(0, 8, n)).astype(np.uint32)  # host-level lanes read both ends
        batch = KeyBatch(keys_of_ipv4(src), stamps.astype(np.int64), dst=keys_of_ipv4(dst))
        session.feed(batch) if stepped_lanes else session.clock(batch)
        now[0] += S // 2 + 1
        session.tick() if stepped_lanes else session.clock.tick()
    if stepped_lanes:
        assert session.finish() is State.FINISHED
    else:
        session.clock.tick(final=True)
        session._finish_lanes()
    return publish_json(session, "capture")


def test_a_seeded_live_clock_gives_the_same_private_view_in_both_modes():
    config = RunConfig(("dpss", "dpmg", "lazyhh", "dpsw", "hostdp-src"),
                       Settings(k=4, epsilon=0.5, delta=1e-6, epoch_seconds=1.0, window=500, seed=21,
                                extra={"m": 4}))
    one, other = Session(config, record_packets=1 << 12), SteppedSession(config, record_packets=1 << 12)
    try:
        a, b = live_capture(one, False), live_capture(other, True)
        assert a == b and all(v["releases"] for v in a["algorithms"].values()), a
    finally:
        one.close(5.0)
        other.close(5.0)
