"""dptop.capture.replay.FileReplay and the dptop.capture.source.Source lifecycle."""
from __future__ import annotations

import sys
import threading
import time

import numpy as np
import pytest

from dptop.capture.pcap import CaptureError, read_keys
from dptop.capture import replay as replay_module
from dptop.capture.replay import FileReplay
from dptop.capture.source import SourceStats
from tests.capture_files import ether, ipv4, pcap


def collect():
    got = []
    return got, lambda b: got.append(b) or True


def small_capture(tmp_path, n=400, gap_ns=1_000_000):
    times = [1_700_000_000 * 10**9 + i * gap_ns for i in range(n)]
    frames = [ether(0x0800, ipv4(f"10.0.{i % 7}.{i % 5}")) for i in range(n)]
    p = tmp_path / "r.pcap"
    p.write_bytes(pcap(frames, times=times, ns=True))
    return p


def joined(batches):
    return (np.concatenate([b.keys for b in batches]), np.concatenate([b.ts_ns for b in batches]))


def test_same_sequence_at_every_speed(tmp_path, data_dir):
    path = data_dir / "amp.TCP.syn.optionallyACK.optionallysamePort.pcapng"
    keys, ts, _ = read_keys(path)
    fast, sink = collect()
    r = FileReplay(path, sink, batch_size=100)
    r.start()
    r.join(5)
    assert np.array_equal(joined(fast)[0], keys) and np.array_equal(joined(fast)[1], ts)
    s = r.stats()
    assert (s.packets, s.ip_packets, s.finished, s.fraction, s.error) == (896, 896, True, 1.0, None)
    # the file spans ~818 s of capture: at 2000x the same packets arrive paced over ~0.4 s
    paced, sink = collect()
    r = FileReplay(path, sink, speed=2000.0, batch_size=1 << 16)
    t0 = time.monotonic()
    r.start()
    r.join(10)
    took = time.monotonic() - t0
    span_s = (ts[-1] - ts[0]) / 1e9 / 2000
    assert np.array_equal(joined(paced)[0], keys) and np.array_equal(joined(paced)[1], ts)
    assert took >= span_s * 0.9, (took, span_s)  # never ahead of the stamps (how late: the virtual-clock tests)
    assert len(paced) > 10  # the one 65536-key read was split as packets fell due


def test_pacing_follows_time_stamps(tmp_path):
    p = small_capture(tmp_path, n=200, gap_ns=2_000_000)  # 0.4 s of capture
    arrivals = []

    def sink(batch):
        arrivals.append((time.monotonic(), batch.ts_ns.copy()))
        return True

    r = FileReplay(p, sink, speed=1.0)
    r.start()
    r.join(5)
    t_wall0, ts0 = arrivals[0][0], arrivals[0][1][0]
    for wall, ts in arrivals:
        lag = (wall - t_wall0) - (ts[-1] - ts0) / 1e9  # handed over no earlier than due
        assert lag >= -0.002, lag


class VirtualClock:
    """``time`` for dptop.capture.replay: ``monotonic()`` stands still until the test moves it."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def wait_until(condition, timeout=60.0):
    """Poll ``condition`` (a stuck worker fails after ``timeout``; no speed is asserted)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the replay worker did not get there"
        time.sleep(0.002)


def blocked_in(thread, function: str) -> bool:
    """Whether ``thread`` waits on a condition inside ``function`` (read from its stack)."""
    frame, names = sys._current_frames().get(thread.ident), []
    while frame is not None:
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    return function in names and "wait" in names[:names.index(function)]


def test_pacing_hands_over_exactly_the_packets_due_in_the_replay_clock(tmp_path, monkeypatch):
    """With the replay's clock injected, every step of it releases exactly the packets stamped up
    to that time: no earlier and no later (at 2x, 10 ms of clock is 20 ms of capture)."""
    clock = VirtualClock()
    monkeypatch.setattr(replay_module, "time", clock)
    p = small_capture(tmp_path, n=200, gap_ns=2_000_000)  # a packet every 2 ms of capture
    got, sink = collect()
    r = FileReplay(p, sink, speed=2.0)
    r.start()
    for step in range(21):
        due = min(200, 1 + step * 10)  # stamps 0, 2, 4, ... ms: 10 more per 20 ms of capture
        wait_until(lambda: r.stats().ip_packets >= due)
        assert r.stats().ip_packets == due, (step, r.stats().ip_packets)
        if due < 200:
            wait_until(lambda: blocked_in(r.thread, "_sleep"))  # waiting for the next stamp
            assert r.stats().ip_packets == due
        clock.now += 0.010
    r.join(60)
    assert r.stats().finished and np.array_equal(joined(got)[1], np.sort(joined(got)[1]))


def test_pause_resume_stop(tmp_path, monkeypatch):
    """In the replay's own (injected) clock: 0.3 s of capture, a pause during which the clock moves
    0.3 s and nothing is read, 0.2 s more after resuming (the replay clock stood still while
    paused), then a stop that ends the worker without waiting for the next stamp."""
    clock = VirtualClock()
    monkeypatch.setattr(replay_module, "time", clock)
    p = small_capture(tmp_path, n=400, gap_ns=5_000_000)  # 2 s of capture, a packet every 5 ms
    got, sink = collect()
    r = FileReplay(p, sink, speed=1.0)
    r.start()
    wait_until(lambda: r.stats().ip_packets == 1)  # the first packet is due at once
    clock.now += 0.3
    wait_until(lambda: r.stats().ip_packets == 61)  # stamps 0 .. 300 ms
    r.pause()
    assert r.stats().paused
    wait_until(lambda: blocked_in(r.thread, "_hold"))  # parked by the pause
    clock.now += 0.3
    assert r.stats().ip_packets == 61 and blocked_in(r.thread, "_hold")  # nothing while paused
    r.resume()
    wait_until(lambda: blocked_in(r.thread, "_sleep"))  # running again, its clock set back by the pause
    clock.now += 0.2
    wait_until(lambda: r.stats().ip_packets >= 101)
    wait_until(lambda: blocked_in(r.thread, "_sleep"))
    assert r.stats().ip_packets == 101  # stamps up to 500 ms: the paused 0.3 s did not count
    r.stop()  # the next packet is due 5 ms ahead in a clock that no longer moves
    r.join(60)
    assert not r.is_alive()
    assert r.stats().finished and r.stats().ip_packets == 101
    r.stop()  # double stop is harmless


def test_stop_while_paused_and_before_start(tmp_path):
    p = small_capture(tmp_path)
    r = FileReplay(p, lambda b: True, speed=1.0)
    r.start()
    r.pause()
    r.stop()
    r.join(1)
    assert not r.is_alive()
    r2 = FileReplay(p, lambda b: True)
    r2.stop()
    r2.start()
    r2.join(1)
    assert r2.stats().finished and r2.stats().ip_packets == 0
    with pytest.raises(RuntimeError, match="already started"):
        r2.start()


def test_loop_shifts_time_forward(tmp_path):
    p = small_capture(tmp_path, n=50, gap_ns=1_000_000)
    got, sink = collect()
    r = FileReplay(p, sink, loop=True)
    r.start()
    deadline = time.monotonic() + 5
    while sum(map(len, got)) < 500 and time.monotonic() < deadline:
        time.sleep(0.01)
    r.stop()
    r.join(2)
    keys, ts = joined(got)
    assert len(keys) >= 500
    one = read_keys(p)
    passes = len(keys) // 50
    assert np.array_equal(keys[:passes * 50], np.tile(one[0], (passes, 1)))
    assert np.all(np.diff(ts) > 0)
    assert ts[50] - ts[49] == 1_000_000  # one mean packet gap between passes
    assert r.stats().packets >= 500


def test_queue_drops_counted(tmp_path):
    p = small_capture(tmp_path, n=300)
    calls = []
    r = FileReplay(p, lambda b: calls.append(len(b)) or len(calls) % 2 == 0, batch_size=100)
    r.start()
    r.join(2)
    assert calls == [100, 100, 100] and r.stats().queue_drops == 200


def test_worker_exception_reraised_on_join(tmp_path):
    p = small_capture(tmp_path)

    def sink(batch):
        raise ZeroDivisionError("engine fell over")

    r = FileReplay(p, sink)
    r.start()
    with pytest.raises(ZeroDivisionError, match="engine fell over"):
        r.join(2)
    assert r.stats().error == "ZeroDivisionError: engine fell over" and r.stats().finished


def test_stats_snapshot_is_immutable(tmp_path):
    r = FileReplay(small_capture(tmp_path), lambda b: True)
    s = r.stats()
    assert isinstance(s, SourceStats) and s.bytes_total > 0 and not s.finished
    with pytest.raises(AttributeError):
        s.packets = 3


def test_stats_from_another_thread_during_replay(tmp_path):
    p = small_capture(tmp_path, n=2000, gap_ns=100_000)
    r = FileReplay(p, lambda b: True, speed=1.0, batch_size=64)
    r.start()
    seen = []
    t = threading.Thread(target=lambda: [seen.append(r.stats().packets) or time.sleep(0.01) for _ in range(20)])
    t.start()
    t.join()
    r.stop()
    r.join(1)
    assert seen == sorted(seen) and seen[-1] > 0


@pytest.mark.parametrize("kwargs,match", [
    ({"speed": 0}, r"speed \(0\) must be in \[0.001, 1000000.0\]"),
    ({"speed": -2.0}, r"speed \(-2.0\) must be in"),
    ({"speed": 1e-300}, r"speed \(1e-300\) must be in"),
    ({"max_gap": float("inf")}, r"max-gap \(inf\) must be in \[0.001, 3600.0\]"),
    ({"speed": float("inf")}, r"speed \(inf\)"),
    ({"batch_size": 0}, r"batch_size \(0\) must be an integer >= 1"),
])
def test_bad_parameters(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        FileReplay(small_capture(tmp_path), lambda b: True, **kwargs)


def test_bad_file_raises_at_construction(tmp_path):
    (tmp_path / "x.pcap").write_text("not a capture")
    with pytest.raises(CaptureError, match="x.pcap: not a capture file"):
        FileReplay(tmp_path / "x.pcap", lambda b: True)


def test_progress_follows_the_paced_feed_not_the_read_ahead():
    from tests.conftest import DNS_CAPTURE  # 4412 packets over 29.7 s: read in one batch, fed over 3 s at 10x

    got, sink = collect()
    replay = FileReplay(DNS_CAPTURE, sink, speed=10.0)
    replay.start()
    time.sleep(0.8)
    mid = replay.stats().fraction
    replay.stop()
    replay.join()
    fed = sum(len(b) for b in got)
    assert 0.0 < mid < 0.9, mid
    assert 0 < fed < 4412
