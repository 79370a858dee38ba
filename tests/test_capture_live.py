"""dptop.capture.live.LiveCapture on the loopback interface (root only) and its error messages."""
from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections import Counter
from ctypes.util import find_library

import pytest

from dptop.capture.live import CapturePermissionError, LiveCapture, list_interfaces
from dptop.capture.pcap import CaptureError
from dptop.capture.ring import RETIRE_MS
from dptop.engine.core.keys import addresses_from_keys

root = pytest.mark.skipif(os.geteuid() != 0, reason="live capture needs root (CAP_NET_RAW)")
# scapy compiles BPF filters with libpcap; `make test` installs it where it can (Makefile: system-deps).
libpcap = pytest.mark.skipif(find_library("pcap") is None, reason="BPF filters need libpcap (libpcap0.8)")
PORT = 40404
SOURCES = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "10.99.0.1"]


def send(n: int, port: int = PORT, inter: float = 0.0005):
    from scapy.all import IP, UDP, Ether, sendp
    pkts = [Ether() / IP(src=SOURCES[i % len(SOURCES)], dst="127.0.0.1") / UDP(sport=5000, dport=port)
            for i in range(n)]
    sendp(pkts, iface="lo", verbose=False, inter=inter)
    return Counter(SOURCES[i % len(SOURCES)] for i in range(n))


@contextlib.contextmanager
def other_traffic_on_lo(port: int = PORT + 1):
    """UDP datagrams to ``port`` on lo, about 100k a second, while the block runs."""
    done = threading.Event()

    def flood():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            while not done.is_set():
                for _ in range(100):
                    s.sendto(b"y", ("127.0.0.1", port))
                time.sleep(0.001)
    thread = threading.Thread(target=flood, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def wait_for(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.01)
    return cond()


@pytest.mark.live
@root
@pytest.mark.parametrize("mode", ["ring", "recv"])
@libpcap
def test_sees_exactly_the_packets_sent(mode):
    got = []
    with other_traffic_on_lo():  # while the socket opens it sees every frame for a moment: none counts
        cap = LiveCapture("lo", lambda b: got.append(b) or True, bpf=f"udp dst port {PORT}", mode=mode)
        assert cap.mode == mode and cap.linktype == 1
        cap.start()
        time.sleep(0.1)
        sent = send(300)
    assert wait_for(lambda: cap.stats().ip_packets >= 300)
    time.sleep(0.2)  # nothing more arrives (no duplicates of loopback's outgoing copies)
    cap.stop()
    cap.join(30)
    assert not cap.is_alive()
    seen = Counter(a for b in got for a in addresses_from_keys(b.keys))
    assert seen == sent
    assert {a for b in got for a in addresses_from_keys(b.dst)} == {"127.0.0.1"}
    assert {n for b in got for n in b.length.tolist()} == {42}  # Ethernet 14 + IPv4 20 + UDP 8
    s = cap.stats()
    assert (s.packets, s.ip_packets, s.kernel_drops, s.queue_drops, s.finished) == (300, 300, 0, 0, True)
    assert s.fraction is None and s.error is None
    ts = [t for b in got for t in b.ts_ns.tolist()]
    assert ts == sorted(ts) and abs(ts[-1] / 1e9 - time.time()) < 60


@pytest.mark.live
@root
@libpcap
def test_count_and_duration_stop_the_capture():
    got = []
    cap = LiveCapture("lo", lambda b: got.append(b) or True, bpf=f"udp dst port {PORT}", count=25)
    cap.start()
    time.sleep(0.1)
    send(60)
    cap.join(5)
    assert not cap.is_alive() and sum(map(len, got)) == 25
    cap = LiveCapture("lo", lambda b: True, duration=0.3, flush_interval=60.0)
    t0 = time.monotonic()
    cap.start()
    cap.join(30)  # idle, it waits for packets until its duration ends, not a whole flush interval
    assert not cap.is_alive() and time.monotonic() - t0 >= 0.25


@pytest.mark.live
@root
@libpcap
def test_stop_wakes_idle_worker_and_lifecycle():
    """An idle worker waits for packets up to its flush interval (60 s here); a stop wakes it: it
    ends in a fraction of that wait (no absolute bound on how fast)."""
    cap = LiveCapture("lo", lambda b: True, bpf="udp dst port 9", flush_interval=60.0)
    cap.start()
    time.sleep(0.2)
    cap.stop()
    cap.join(30)
    assert not cap.is_alive()
    cap.stop()
    never = LiveCapture("lo", lambda b: True)
    never.stop()  # before start: closes the socket, start does nothing
    never.start()
    never.join(1)
    assert never.stats().finished


@pytest.mark.live
@root
@libpcap
def test_bad_bpf_is_a_clear_error():
    with pytest.raises(CaptureError, match="BPF filter 'udp port banana'"):
        LiveCapture("lo", lambda b: True, bpf="udp port banana")


def test_unknown_interface_and_parameters():
    assert "lo" in list_interfaces()
    with pytest.raises(CaptureError, match="no network interface 'nosuch0'; interfaces: .*lo"):
        LiveCapture("nosuch0", lambda b: True)
    with pytest.raises(ValueError, match=r"count \(0\) must be in \[1, "):
        LiveCapture("lo", lambda b: True, count=0)
    with pytest.raises(ValueError, match=r"mode \('mmap'\) must be 'ring' or 'recv'"):
        LiveCapture("lo", lambda b: True, mode="mmap")


def test_permission_error_says_what_to_do(monkeypatch):
    from scapy.config import conf

    def refuse(**kwargs):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(conf, "L2listen", refuse)
    with pytest.raises(CapturePermissionError, match="run dptop as root.*setcap cap_net_raw,cap_net_admin=eip"):
        LiveCapture("lo", lambda b: True)


@pytest.mark.live
@root
@libpcap
def test_pause_discards_and_counts():
    got = []
    cap = LiveCapture("lo", lambda b: got.append(b) or True, bpf=f"udp dst port {PORT}")
    cap.start()
    cap.pause()
    time.sleep(0.1)
    send(40)
    assert wait_for(lambda: cap.stats().skipped.get("captured while paused") == 40)
    cap.resume()
    send(10)
    assert wait_for(lambda: cap.stats().ip_packets == 10)
    cap.stop()
    cap.join(2)
    assert sum(map(len, got)) == 10 and cap.stats().kernel_drops == 0


def blast(n: int, port: int = PORT) -> None:
    """``n`` Ethernet/IPv4/UDP frames from 127.0.0.2 to 127.0.0.1:``port`` written onto lo as fast
    as a packet socket takes them (no pacing: they reach the capture's ring within microseconds)."""
    from scapy.all import IP, UDP, Ether, raw
    frame = raw(Ether() / IP(src="127.0.0.2", dst="127.0.0.1") / UDP(sport=5000, dport=port))
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0) as s:
        s.bind(("lo", 0))
        for _ in range(n):
            s.send(frame)


@pytest.mark.live
@root
@libpcap
@pytest.mark.parametrize("retired", [True, False], ids=["blocks handed over", "block still filling"])
def test_a_stop_reads_every_frame_already_in_the_ring(retired):
    """Frames the kernel put in the ring before a stop are read (or counted as dropped), not left
    there: the worker is held in its sink (a lane's hand-over) while 3,000 frames arrive, the stop
    comes before it is released. ``retired``: the kernel has handed their blocks over (its block
    timeout passed); else the stop comes while the block holding them is still the kernel's (20 ms
    after the last one was sent: delivered, but a fifth of the block timeout)."""
    held, release, got = threading.Event(), threading.Event(), []

    def sink(batch):
        got.append(len(batch))
        held.set()
        release.wait(30)
        return True

    cap = LiveCapture("lo", sink, bpf=f"udp dst port {PORT}")
    cap.start()
    time.sleep(0.1)
    blast(1)
    assert held.wait(10)  # the worker is inside the sink: it reads nothing more until released
    blast(3000)
    time.sleep(3 * RETIRE_MS / 1000 if retired else 0.02)  # on the socket (not in a softirq backlog)
    cap.stop()
    release.set()
    cap.join(30)
    s = cap.stats()
    assert not cap.is_alive() and s.error is None
    assert s.packets + s.kernel_drops == 3001 and sum(got) == s.ip_packets == s.packets
    assert s.kernel_drops == 0  # the ring holds far more than 3,000 frames: none is lost


@pytest.mark.live
@root
@libpcap
def test_frames_delivered_before_a_stop_that_precedes_the_start_are_counted_as_dropped():
    """A capture stopped before its worker ran (Ctrl-C while the session starts) never reads its
    ring: the frames the kernel already put there are kernel drops, not silently gone."""
    cap = LiveCapture("lo", lambda b: True, bpf=f"udp dst port {PORT}")
    blast(500)
    time.sleep(3 * RETIRE_MS / 1000)
    cap.stop()
    cap.start()
    cap.join(5)
    s = cap.stats()
    assert s.finished and (s.packets, s.ip_packets, s.kernel_drops) == (0, 0, 500)
