"""Two network namespaces joined by a veth pair, for live tests and ``dptop bench --only live`` (root).

``VethLab`` makes namespaces ``<name>-tx`` and ``<name>-rx`` and a veth pair ``<name>t`` (in tx) and
``<name>r`` (in rx), both up, IPv6 off (no neighbour discovery: only the sender's frames cross), and
removes them on exit. Commands run inside a namespace through ``ip netns exec``; the receiving
side's kernel counters (``/sys/class/net/IFACE/statistics``, read inside its namespace) are the
ground truth of what was offered to a capture.

The two sides run on different CPUs, as two machines would. A veth hands a frame to its peer with
``netif_rx``, which queues it on the sending CPU's backlog, so without help the receive work
(its softirq: the packet sockets, the capture's ring) runs on the sender's CPU and is charged to
the sender: one core then caps the sender at 0.6-0.7M frames/s and a capture pays nothing for its
own receive. The lab therefore steers the receiving veth's frames with RPS (``rps_cpus``) to every
CPU but the sender's (``sender_cpu``: the first this process may use), and ``sender`` pins the
sender there: the receive softirq then runs beside the capture and competes with it for CPU, as a
capture machine's own receive work does (on 2 cores: the sender on CPU 0, the receive work on
CPU 1, the capture on CPU 1 and whatever CPU 0 leaves).
A remote CPU's backlog holds ``net.core.netdev_max_backlog`` frames (1,000 by default); beyond
that the kernel refuses a frame (counted in the interface's ``rx_dropped``, never in
``rx_packets``) and the sender requests it again (dptop.capture.lab.txring), so the count offered
is exact and the backlog paces the sender at what the receiving side takes.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time

LASTING_SOCKET = 1.0
"""Seconds a new packet socket stays mapped before the capture counts as reading it (it sets its
filter right after mapping its ring)."""
MAPPED_SOCKET = re.compile(r"socket:\[(\d+)\]$")


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


class VethLab:
    """A sender namespace and a receiver namespace joined by a veth pair (``with VethLab() as lab``)."""

    def __init__(self, name: str | None = None):
        name = name or f"dpt{os.getpid() % 100000}"
        self.tx_ns, self.rx_ns = f"{name}-tx", f"{name}-rx"
        self.tx, self.rx = f"{name}t", f"{name}r"
        allowed = sorted(os.sched_getaffinity(0))
        self.sender_cpu = allowed[0] if len(allowed) > 1 else None  # None: one CPU, nothing to steer
        self.receive_cpus = allowed[1:]

    def __enter__(self) -> "VethLab":
        try:
            ip("netns", "add", self.tx_ns)
            ip("netns", "add", self.rx_ns)
            ip("link", "add", self.tx, "type", "veth", "peer", "name", self.rx)
            ip("link", "set", self.tx, "netns", self.tx_ns)
            ip("link", "set", self.rx, "netns", self.rx_ns)
            for ns, dev in ((self.tx_ns, self.tx), (self.rx_ns, self.rx)):
                self.run(ns, ["sysctl", "-q", "-w", f"net.ipv6.conf.{dev}.disable_ipv6=1"])
                self.run(ns, ["ip", "link", "set", dev, "up"])
                self.run(ns, ["ip", "link", "set", "lo", "up"])
            self._steer_receive()
        except BaseException:
            self.close()
            raise
        return self

    def _steer_receive(self) -> None:
        """Receive the veth's frames on ``receive_cpus`` (RPS); nothing to do on one CPU or a
        kernel without RPS."""
        path = f"/sys/class/net/{self.rx}/queues/rx-0/rps_cpus"
        if not self.receive_cpus or self.run(self.rx_ns, ["test", "-e", path], check=False).returncode:
            return
        mask = f"{sum(1 << c for c in self.receive_cpus):x}"
        groups = [mask[max(0, i - 8):i] for i in range(len(mask), 0, -8)][::-1]  # 32-bit words, comma-separated
        self.run(self.rx_ns, ["sh", "-c", f"echo {','.join(groups)} > {path}"])

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for ns in (self.tx_ns, self.rx_ns):
            ip("netns", "del", ns, check=False)  # deleting a namespace deletes its end of the pair

    @staticmethod
    def command(ns: str, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", ns, *argv]

    def run(self, ns: str, argv: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(ns, argv), capture_output=True, text=True, check=check, **kw)

    def rx_packets(self) -> int:
        """Frames the receiving interface took (its kernel counter)."""
        return self._counter(self.rx_ns, self.rx, "rx_packets")

    def tx_packets(self) -> int:
        """Frames the sending interface sent (its kernel counter)."""
        return self._counter(self.tx_ns, self.tx, "tx_packets")

    def _counter(self, ns: str, dev: str, name: str) -> int:
        return int(self.run(ns, ["cat", f"/sys/class/net/{dev}/statistics/{name}"]).stdout)

    def sender(self, count: int, rate: float | None, realtime: bool = False) -> list[str]:
        """The command that sends ``count`` frames at ``rate`` per second (None: as fast as it can)
        from the sender's namespace (dptop.capture.lab.txring), pinned to ``sender_cpu``;
        ``realtime``: at the lowest real-time priority (SCHED_FIFO
        1), so a sender standing in for another machine keeps its pace on a shared one (the kernel
        still leaves others 5 % of each second)."""
        argv = [sys.executable, "-m", "dptop.capture.lab.txring", self.tx, str(count)]
        pin = [] if self.sender_cpu is None else ["taskset", "-c", str(self.sender_cpu)]
        priority = ["chrt", "-f", "1"] if realtime else []
        return self.command(self.tx_ns, pin + priority + argv + ([str(rate)] if rate else []))

    def packet_socket_inodes(self) -> set[str]:
        """The inodes of the packet sockets open in the receiving namespace."""
        out = self.run(self.rx_ns, ["cat", "/proc/net/packet"])
        return {line.split()[8] for line in out.stdout.splitlines()[1:] if len(line.split()) > 8}

    def wait_capturing(self, proc: subprocess.Popen, before: set[str], timeout: float = 900.0) -> None:
        """Wait until ``proc`` captures on the receiving side: a packet socket not in ``before``
        (``packet_socket_inodes`` before ``proc`` started) that ``proc`` has memory-mapped (its
        receive ring is set, as dptop's and libpcap's are) for ``LASTING_SOCKET`` seconds.
        ``dptop capture`` opens a socket and closes it at once while it checks its options, then
        builds its algorithms (numba kernels compiled on first use: a minute on a busy machine)
        and only then opens the socket it reads; it keeps every frame out of that socket until
        its ring is set and mapped (hundreds of MB: the kernel takes a while on a busy machine),
        then sets its filter. Frames offered before reach no capture.
        ``RuntimeError`` (with the end of ``proc``'s stderr) if ``proc`` ends or ``timeout`` passes."""
        deadline, since = time.monotonic() + timeout, {}
        while True:
            now = time.monotonic()
            mapped = (self.packet_socket_inodes() - before) & mapped_sockets(proc.pid)
            since = {inode: since.get(inode, now) for inode in mapped}
            if any(now - t >= LASTING_SOCKET for t in since.values()):
                return
            if proc.poll() is not None or now > deadline:
                if proc.poll() is None:
                    proc.kill()
                raise RuntimeError(f"the capture did not map its socket's ring: {proc.communicate()[1][-600:]}")
            time.sleep(0.1)


def mapped_sockets(pid: int) -> set[str]:
    """The inodes of the sockets process ``pid`` has memory-mapped (``/proc/PID/maps``)."""
    try:
        with open(f"/proc/{pid}/maps") as fh:
            return {m.group(1) for m in map(MAPPED_SOCKET.search, fh) if m}
    except OSError:  # ended
        return set()
