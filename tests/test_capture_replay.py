"""dptop.capture.replay.FileReplay and the dptop.capture.source.Source lifecycle."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from dptop.capture.pcap import CaptureError, read_keys
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
    assert span_s * 0.9 <= took <= span_s + 1.0, (took, span_s)
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
        assert -0.002 <= lag <= 0.25, lag


def test_pause_resume_stop(tmp_path):
    p = small_capture(tmp_path, n=400, gap_ns=5_000_000)  # 2 s of capture
    got, sink = collect()
    r = FileReplay(p, sink, speed=1.0)
    r.start()
    time.sleep(0.3)
    r.pause()
    time.sleep(0.05)
    seen = r.stats().ip_packets
    assert r.stats().paused
    time.sleep(0.3)
    assert r.stats().ip_packets == seen  # nothing while paused
    r.resume()
    time.sleep(0.2)
    assert r.stats().ip_packets > seen
    t0 = time.monotonic()
    r.stop()
    r.join(2)
    assert time.monotonic() - t0 < 0.2 and not r.is_alive()
    assert r.stats().finished and 0 < r.stats().ip_packets < 400
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
