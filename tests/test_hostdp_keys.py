"""Host-level lanes read each packet's two ends whatever ``--key`` and ``--weight`` count: with
``--key dst`` (or bytes) beside packet-level lanes, ``hostdp-dst`` and ``exact-clients`` count
the same clients per server as with ``--key src``, on a replay and on a live clock (a session's
LiveClock on an injected wall clock, no socket), never an error or a silent zero. The sessions run
in the test's thread (dptop.monitor.stepped; tests/test_stepped_session.py compares that mode with
the threaded one on every algorithm, destinations and bytes included)."""
from __future__ import annotations

import numpy as np
import pytest

from dptop.capture.synth import write_pcap
from dptop.engine.core.clock import MAX_CELLS, TimeGrid
from dptop.engine.core.keys import KeyBatch
from dptop.engine.core.workload import keys_of_ipv4
from dptop.engine.core.settings import Settings
from dptop.monitor.config import CountingChoice, RunConfig, SourceSpec
from dptop.monitor.session import Session
from dptop.monitor.states import State
from dptop.monitor.stepped import SteppedSession

S = 1_000_000_000
T0 = 1_700_000_000 * S
SERVERS = (0xC633_6401, 0xC633_6402)  # 198.51.100.1 and .2: contacted by every client
CLIENTS = 0x0A00_0000 + np.arange(1, 121)  # 120 clients, 10.0.0.1 ... 10.0.0.120
LANES = ("hostdp-dst", "exact-clients", "dpss")


def stream() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every client sends 3 packets to each server within the first second (one epoch)."""
    src = np.repeat(CLIENTS, 6).astype(np.uint32)
    dst = np.tile(np.repeat(np.array(SERVERS, np.uint32), 3), len(CLIENTS))
    ts = T0 + 10**6 + np.sort(np.random.default_rng(5).integers(0, S - 2 * 10**6, len(src)))
    return src, dst, ts


def config(key: str, weight: str) -> RunConfig:
    return RunConfig(LANES, Settings(k=4, epsilon=1.0, delta=1e-6, epoch_seconds=1.0, extra={"m": 4}),
                     counting=CountingChoice(key=key, weight=weight))


def outcome(session: Session) -> dict:
    """Per host-level lane: its error, the packets it took, the clients per server it released
    over the whole run (exact-clients) and whether the private lane released both servers."""
    out = {}
    for name in ("hostdp-dst", "exact-clients"):
        snap = next(v.algorithm for v in session.snapshot().lanes if v.name == name)
        items = {}
        for release in session.releases(name):
            for it in release.items:
                items[it.address] = items.get(it.address, 0) + it.estimate
        out[name] = (snap.error, snap.packets, items)
    return out


def check(result: dict, packets: int) -> None:
    error, seen, items = result["exact-clients"]
    assert error is None and seen == packets
    assert items == {"198.51.100.1": 120, "198.51.100.2": 120}
    error, seen, items = result["hostdp-dst"]
    assert error is None and seen == packets, (error, seen)
    assert set(items) == {"198.51.100.1", "198.51.100.2"}  # 120 clients each: far above τ


@pytest.mark.parametrize("key,weight", [("src", "packets"), ("dst", "packets"), ("dst", "bytes")])
def test_replay_counts_clients_per_server_whatever_the_key(tmp_path, key, weight):
    src, dst, ts = stream()
    path = tmp_path / "x.pcap"
    write_pcap(path, src, ts, dst, np.full(len(src), 600))
    session = SteppedSession(config(key, weight), record_packets=1 << 12)
    session.open(SourceSpec("file", path=str(path), time_range=(T0, T0 + 2 * S)))
    try:
        assert session.replay() is State.FINISHED, session.error
        check(outcome(session), len(src))
    finally:
        session.close(5.0)


class Clock:
    now = T0

    def __call__(self):
        return self.now


@pytest.mark.parametrize("key", ["src", "dst"])
def test_live_clock_counts_clients_per_server_whatever_the_key(key):
    clock = Clock()
    session = SteppedSession(config(key, "packets"), record_packets=1 << 12)
    session.open_live(SourceSpec("live", iface="lo", lateness=0.5), TimeGrid(T0, S, MAX_CELLS), now_ns=clock)
    try:
        src, dst, ts = stream()
        for a in range(0, len(src), 60):  # each batch offered once the wall clock is past its stamps
            clock.now = int(ts[min(a + 59, len(src) - 1)]) + 1
            session.tick()
            session.feed(KeyBatch(keys_of_ipv4(src[a:a + 60]), ts[a:a + 60], dst=keys_of_ipv4(dst[a:a + 60])))
        clock.now = T0 + 3 * S
        session.tick(final=True)
        assert session.finish() is State.FINISHED, session.error
        check(outcome(session), len(src))
    finally:
        session.close(5.0)
