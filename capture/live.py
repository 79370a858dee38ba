"""Live capture from a network interface into the engine.

The socket is scapy's L2 listen socket (``conf.L2listen(iface=..., filter=bpf)``: AF_PACKET,
BPF filter compiled by libpcap, bound to the interface). Two ways to read it:

* ``"ring"`` (default): a TPACKET_V3 memory-mapped receive ring is set on that socket; the
  kernel fills blocks of frames and one numba walk (dptop.capture.ring) turns a whole block into keys,
  so there is no per-packet Python and no per-packet system call.
* ``"recv"``: scapy's ``recv_raw`` in a loop (one system call and some Python per packet),
  collected into batches parsed by the same numba link-layer code. The fallback when the ring
  cannot be set up.

Batches carry source and destination keys, time stamps and wire lengths (ring: the kernel's
``tp_len``; recv: the bytes received). The link type comes from the socket's hardware type
(ARPHRD). On a loopback interface the kernel shows every packet twice (once going out, once
coming in); outgoing copies are ignored there, as libpcap does. The socket's BPF program keeps
``SNAP_LENGTH`` bytes of a frame (every header a key kind reads), so the ring (dptop.capture.ring,
sized in time) holds many frames. Kernel drops come from ``PACKET_STATISTICS``; ``stop()`` wakes the
worker at once through a self-pipe, and the worker then reads the ring until every frame the kernel
delivered to the socket before the stop is read (``LiveCapture._drain``); a frame delivered and never
read counts as a kernel drop. The interface is watched: its going down, coming back up (with the
gap) and disappearing (deleted or replaced, which ends the capture) become ``InterfaceEvent``s in
the stats; the socket's pending error is read, so a dead interface never keeps ``select`` ready.
While paused the worker keeps draining the socket and
counts what it discards as skipped "captured while paused" (not as kernel drops).
"""
from __future__ import annotations

import ctypes
import fcntl
import logging
import os
import select
import socket
import struct
import threading
import time
from typing import Callable

import numpy as np

from dptop.capture import ring as rg
from dptop.capture.linklayer import addresses_of_frames, batch_of, output_rows
from dptop.capture.pcap import CaptureError
from dptop.capture.source import InterfaceEvent, Source
from dptop.capture.wire import N_REASONS, REASON_NAMES, UNSUPPORTED
from dptop.engine.core.extras import LIVE, require
from dptop.engine.core.keys import KeyBatch
from dptop.engine.core.settings import Range

SOL_PACKET = 263
PACKET_STATISTICS = 6
PACKET_IGNORE_OUTGOING = 23
SO_ATTACH_FILTER = 26
SIOCGIFFLAGS = 0x8913
IFF_UP = 1
BPF_RET_K = 0x06
DROP_ALL = (BPF_RET_K, 0, 0, 0)
"""A BPF program's one instruction that keeps no frame."""
SNAP_LENGTH = 256
"""Bytes of each frame the kernel copies into the ring (the wire length is kept apart): the link
header (Ethernet with two VLAN tags, 802.11 with radiotap, a tunnel's), an IPv6 header with its
extension headers and the transport ports, which is every header any key kind reads
(engine/core/keykinds.py). Applied as the return value of the socket's BPF program, as libpcap does."""
DRAIN_SECONDS = 10 * rg.RETIRE_MS / 1000
"""At the end of a capture, how long it waits for the kernel to hand over another block of the
frames it delivered (ten of the ring's block timeouts) before it counts those unread as dropped."""
DRAIN_POLL = 0.005
WATCH_SECONDS = 0.5
"""How often the capture looks at its interface (up, down, gone) while packets flow."""
ARPHRD_LINKTYPE = {1: 1, 772: 1, 0xFFFE: 101, 512: 101, 776: 101, 778: 101, 519: 101, 768: 101,
                   769: 101, 15: 101, 513: 104, 770: 107, 774: 10, 801: 105, 803: 127}
"""ARPHRD hardware type -> pcap link type, as libpcap maps them: Ethernet (1; loopback 772 is
Ethernet-framed); tun (0xfffe), PPP, SIT, GRE, raw IP, IPIP tunnels (768, 769) and DLCI (15)
hand over bare IP packets; Cisco HDLC (513) -> 104, Frame Relay FRAD (770) -> 107, FDDI (774)
-> 10, 802.11 (801) -> 105 and 802.11 with radiotap (803) -> 127."""

SETCAP_HINT = ("run dptop as root, or allow this Python to capture: "
               "sudo setcap cap_net_raw,cap_net_admin=eip $(readlink -f .venv/bin/python)")


class CapturePermissionError(CaptureError, PermissionError):
    """No permission to open a raw packet socket (not root, no CAP_NET_RAW)."""


def list_interfaces() -> list[str]:
    """Names of the network interfaces (for the GUI's interface menu)."""
    return sorted(name for _, name in socket.if_nameindex())


COUNT = Range("count", 1, 1 << 48, integer=True)
"""Stop a live capture after this many IP packets."""
DURATION = Range("duration", 1e-3, 1e7)
"""Stop a live capture after this many seconds."""


class LiveCapture(Source):
    """Packets from ``iface`` as a ``Source``. The socket is opened here, so missing permissions,
    an unknown interface or a bad BPF filter raise at construction.

    ``count``: stop after that many IP packets (keys); ``duration``: stop after that many
    seconds; ``flush_interval``: the longest a captured packet waits before it is handed over."""

    thread_name = "dptop-live"

    def __init__(self, iface: str, sink: Callable[[KeyBatch], bool], bpf: str | None = None,
                 batch_size: int = 65536, flush_interval: float = 0.05, count: int | None = None,
                 duration: float | None = None, mode: str = "ring"):
        if not (isinstance(batch_size, int) and batch_size >= 1):
            raise ValueError(f"batch_size ({batch_size!r}) must be an integer >= 1")
        if not flush_interval > 0:
            raise ValueError(f"flush_interval ({flush_interval!r}) must be > 0 seconds")
        if count is not None:
            COUNT.check(count)
        if duration is not None:
            DURATION.check(duration)
        if mode not in ("ring", "recv"):
            raise ValueError(f"mode ({mode!r}) must be 'ring' or 'recv'")
        if iface not in list_interfaces():
            raise CaptureError(f"no network interface {iface!r}; interfaces: {', '.join(list_interfaces())}")
        super().__init__(sink)
        warm_up()  # before the socket opens: packets never wait in the ring for a compile
        self.iface, self.bpf, self.batch_size = iface, bpf, batch_size
        self.flush_interval, self.count, self.duration = flush_interval, count, duration
        self._packets = 0
        self._kernel_drops = 0
        self._delivered = 0  # frames the kernel put on the socket: written to the ring or dropped
        self._frames = 0  # frames read from the ring's blocks (outgoing copies included)
        self._while_paused = 0
        self._counts = np.zeros(N_REASONS, np.int64)
        self._closed = False
        self._fd_lock = threading.Lock()
        self._sock = _open_socket(iface, bpf)
        self._fd = self._sock.ins.fileno()
        self._ifindex = socket.if_nametoindex(iface)
        self._down_since: float | None = None if _is_up(iface) else time.time()
        self._events: list[InterfaceEvent] = []
        self._gone = False
        self._watched = 0.0
        hatype = self._sock.ins.getsockname()[3]
        self.linktype = ARPHRD_LINKTYPE.get(hatype, -1)
        self._hatype = hatype
        self._wake_r, self._wake_w = os.pipe()
        if self.linktype == 1 and hatype == 772:
            _ignore_outgoing(self._sock.ins)
        self._ring = None
        if mode == "ring":
            _attach_program(self._sock.ins, [DROP_ALL])  # nothing reaches the socket while its ring is set
            try:
                self._ring = rg.Ring(self._sock.ins)
            except OSError:
                self._ring = None  # old kernel or no mmap: fall back to recv
            _discard_queued(self._sock.ins)
        self.mode = "ring" if self._ring is not None else "recv"
        # The counts start here. Before, the socket took frames of every interface for a moment
        # (scapy opens it unbound and unfiltered), frames none of this capture's.
        _socket_stats(self._sock.ins)
        if mode == "ring":  # recv takes a frame's length from the bytes it reads: no snap there
            _attach_filter(self._sock.ins, iface, bpf, SNAP_LENGTH if self._ring is not None else None)

    # ----- Source hooks ----------------------------------------------------------------
    def _counters(self) -> dict:
        skipped = {REASON_NAMES[r]: int(c) for r, c in enumerate(self._counts) if c and r != UNSUPPORTED}
        if self._while_paused:
            skipped["captured while paused"] = self._while_paused
        if self._counts[UNSUPPORTED]:
            skipped[f"unsupported link type (ARPHRD {self._hatype})"] = int(self._counts[UNSUPPORTED])
        return {"packets": self._packets, "ip_packets": self._fed, "skipped": skipped,
                "kernel_drops": self._kernel_drops, "interface_events": tuple(self._events)}

    def _interrupt(self) -> None:
        with self._fd_lock:  # never write to a closed (and maybe reused) descriptor
            if not self._closed:
                os.write(self._wake_w, b"x")

    def _close(self) -> None:
        with self._fd_lock:
            self._closed = True
            if self._ring is not None:  # frames delivered and never read (a stop before the worker ran)
                self._read_stats()
                self._kernel_drops += max(self._unread(), 0)
                self._ring.close()
            self._sock.close()
            os.close(self._wake_r)
            os.close(self._wake_w)

    def _run(self) -> None:
        self._deadline = None if self.duration is None else time.monotonic() + self.duration
        if self._ring is not None:
            self._run_ring()
        else:
            self._run_recv()

    # ----- worker ----------------------------------------------------------------------
    def _wait(self, timeout: float) -> bool:
        """Wait for packets or a stop for up to ``timeout``; False when stopping. A pending socket
        error (the interface went down or away) is read, so the socket does not stay ready."""
        if self._deadline is not None:
            timeout = max(0.0, min(timeout, self._deadline - time.monotonic()))
        ready, _, _ = select.select([self._fd, self._wake_r], [], [], timeout)
        if self._fd in ready and self._sock.ins.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
            self._watch(force=True)
        return not self.stopping

    def _watch(self, force: bool = False) -> None:
        """Look at the interface (at most every ``WATCH_SECONDS`` unless ``force``): a change of
        state becomes an ``InterfaceEvent``; gone ends the capture."""
        now = time.monotonic()
        if not force and now - self._watched < WATCH_SECONDS:
            return
        self._watched = now
        try:
            gone = socket.if_nametoindex(self.iface) != self._ifindex
        except OSError:
            gone = True
        at = time.time()
        if gone:
            self._gone = True
            self._events.append(InterfaceEvent("gone", self.iface, at))
        elif _is_up(self.iface) == (self._down_since is not None):
            if self._down_since is None:
                self._down_since = at
                self._events.append(InterfaceEvent("down", self.iface, at))
            else:
                self._events.append(InterfaceEvent("up", self.iface, at, at - self._down_since))
                self._down_since = None

    def _over(self) -> bool:
        self._watch()
        return (self.stopping or self._gone or (self.count is not None and self._fed >= self.count)
                or (self._deadline is not None and time.monotonic() >= self._deadline))

    def _hand_over(self, rows, n: int) -> bool:
        """Hand the first ``n`` rows over; True when ``rows`` may be filled again (a small batch is
        handed over as a copy, so a queued batch holds about its own packets, not the rows' capacity)."""
        if self.count is not None:
            n = min(n, self.count - self._fed)
        reusable = True
        if n > 0 and self._paused:  # keep draining the socket, so pausing is not a kernel drop
            self._while_paused += n
        elif n > 0:
            batch = batch_of(rows, n)
            reusable = 4 * n <= len(rows[0])
            if reusable:
                batch = KeyBatch(batch.keys.copy(), batch.ts_ns.copy(), batch.dst.copy(), batch.length.copy(),
                                 flow=batch.flow.copy())
            self._emit(batch)
        self._read_stats()
        return reusable

    def _unread(self) -> int:
        """Frames the kernel put in the ring and the worker has not read (as of the last stats read)."""
        return self._delivered - self._frames - self._kernel_drops

    def _read_stats(self) -> None:
        delivered, drops = _socket_stats(self._sock.ins)
        self._delivered += delivered
        self._kernel_drops += drops

    def _run_ring(self) -> None:
        ring = self._ring
        cap = max(self.batch_size, ring.max_frames_per_block)
        rows = output_rows(cap)
        while not self._over():
            n, first = 0, None
            while not self._over():
                n, packets, frames, blocks = ring.walk(*rows, n, self.linktype, self._counts)
                self._packets += packets
                self._frames += frames
                if n and first is None:
                    first = time.monotonic()
                if n >= self.batch_size or cap - n < ring.max_frames_per_block:
                    break
                if first is not None and time.monotonic() - first >= self.flush_interval:
                    break
                if blocks == 0:
                    left = self.flush_interval if first is None else self.flush_interval - (time.monotonic() - first)
                    self._wait(max(left, 0.0))
            if not self._hand_over(rows, n):
                rows = output_rows(cap)
        self._drain(rows, cap)

    def _drain(self, rows, cap: int) -> None:
        """At the end, account for every frame the kernel put on the socket: it first stops taking
        frames (a filter that keeps none), then the ring is read until the frames read and those the
        kernel dropped reach the kernel's count of frames delivered, the last block when the kernel
        hands it over (``ring.RETIRE_MS`` after its first frame). Frames still unread once no block
        came for ``DRAIN_SECONDS`` are counted as the kernel's drops when the socket closes."""
        ring = self._ring
        _attach_program(self._sock.ins, [DROP_ALL])
        self._read_stats()
        waited = time.monotonic()
        while self._unread() > 0:
            n, packets, frames, blocks = ring.walk(*rows, 0, self.linktype, self._counts)
            self._packets += packets
            self._frames += frames
            if blocks:
                waited = time.monotonic()
                if not self._hand_over(rows, n):
                    rows = output_rows(cap)
                continue
            if time.monotonic() - waited >= DRAIN_SECONDS:
                break  # ``_close`` counts what is still unread
            time.sleep(DRAIN_POLL)
            self._read_stats()

    def _run_recv(self) -> None:
        sock = self._sock
        while not self._over():
            frames, stamps, first = [], [], None
            while len(frames) < self.batch_size and not self._over():
                ready, _, _ = select.select([self._fd], [], [], 0)
                if not ready:
                    if frames and time.monotonic() - first >= self.flush_interval:
                        break
                    left = self.flush_interval if first is None else self.flush_interval - (time.monotonic() - first)
                    self._wait(max(left, 0.0))
                    continue
                try:
                    _cls, data, t = sock.recv_raw(65535)
                except OSError:  # the interface went down or away: its pending error was read
                    self._watch(force=True)
                    continue
                if data is None:
                    continue
                frames.append(data)
                stamps.append(time.time_ns() if t is None else int(t * 1e9))
                if first is None:
                    first = time.monotonic()
            self._packets += len(frames)
            rows, n = self._parse(frames, stamps)
            self._hand_over(rows, n)

    def _parse(self, frames: list, stamps: list):
        lengths = np.fromiter(map(len, frames), np.int64, len(frames))
        offsets = np.zeros(len(frames), np.int64)
        np.cumsum(lengths[:-1], out=offsets[1:])
        buf = np.frombuffer(bytearray().join(frames), np.uint8)  # writable: same kernel type as the ring
        rows = output_rows(len(frames))
        n = addresses_of_frames(buf, offsets, lengths, np.asarray(stamps, np.int64), self.linktype,
                                *rows, self._counts)
        return rows, n


def _open_socket(iface: str, bpf: str | None):
    require(LIVE)
    import scapy.arch  # noqa: F401  (sets conf.L2listen for this platform)
    from scapy.config import conf
    from scapy.error import Scapy_Exception
    log = logging.getLogger("scapy.runtime")
    level = log.level
    log.setLevel(logging.ERROR)  # scapy warns it cannot name lo's layer (ARPHRD 772); we map it
    try:
        return conf.L2listen(iface=iface, filter=bpf)
    except PermissionError as exc:
        raise CapturePermissionError(f"cannot capture on {iface!r}: {exc.strerror}; {SETCAP_HINT}") from exc
    except Scapy_Exception as exc:
        raise CaptureError(f"cannot capture on {iface!r} with BPF filter {bpf!r}: {exc}") from exc
    except OSError as exc:
        raise CaptureError(f"cannot capture on {iface!r}: {exc}") from exc
    finally:
        log.setLevel(level)


def _attach_filter(sock: socket.socket, iface: str, bpf: str | None, snap: int | None) -> None:
    """Set the filter's program (``bpf``; without one, a program that accepts every frame), with
    every accepting return capped at ``snap`` bytes of a frame (None: the whole frame)."""
    cap = 0xFFFFFFFF if snap is None else snap
    program = [(BPF_RET_K, 0, 0, cap)]
    if bpf:
        from scapy.arch.common import compile_filter, free_filter
        compiled = compile_filter(bpf, iface)
        program = [(i.code, i.jt, i.jf, min(i.k, cap) if i.code == BPF_RET_K and i.k else i.k)
                   for i in compiled.bf_insns[:compiled.bf_len]]
        free_filter(compiled)
    _attach_program(sock, program)


def _attach_program(sock: socket.socket, program: list[tuple[int, int, int, int]]) -> None:
    """Set ``program`` (classic BPF instructions ``(code, jt, jf, k)``) as the socket's filter."""
    code = (ctypes.c_uint8 * (8 * len(program))).from_buffer_copy(
        b"".join(struct.pack("HBBI", *insn) for insn in program))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, struct.pack("HL", len(program), ctypes.addressof(code)))


def _is_up(iface: str) -> bool:
    """Whether ``iface`` is administratively up (False when it cannot be read)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            raw = fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, struct.pack("16sH14x", iface.encode()[:15], 0))
        except OSError:
            return False
    return bool(struct.unpack("16sH14x", raw)[1] & IFF_UP)


def probe(iface: str, bpf: str | None = None) -> None:
    """Open the capture socket of ``iface`` with ``bpf`` and close it again, compiling nothing (the
    checks a command runs before any output): an unknown interface or a filter that does not
    compile is ``CaptureError``, a missing permission ``CapturePermissionError``."""
    if iface not in list_interfaces():
        raise CaptureError(f"no network interface {iface!r}; interfaces: {', '.join(list_interfaces())}")
    _open_socket(iface, bpf).close()


def _ignore_outgoing(sock: socket.socket) -> None:
    try:
        sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
    except OSError:
        pass  # kernel < 4.20: the ring walk also skips PACKET_OUTGOING frames


def _discard_queued(sock: socket.socket) -> None:
    """Read and discard the frames the kernel queued on the socket before its ring was set (they
    are not in the ring; they came before the capture's counts start)."""
    while True:
        try:
            sock.recv(1, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError, OSError):  # OSError: the interface went away
            return


def _socket_stats(sock: socket.socket) -> tuple[int, int]:
    """``(delivered, dropped)`` since the last call (PACKET_STATISTICS resets on read): the frames
    the kernel put on the socket (TPACKET_V3 counts those it dropped in both) and those it dropped
    because the ring was full; ``(0, 0)`` where unsupported."""
    try:
        raw = sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 12)
    except OSError:
        return 0, 0
    delivered, dropped = struct.unpack("II", raw[:8])
    return delivered, dropped


def warm_up() -> None:
    """Compile (or load from numba's cache) the kernels now, not while packets wait."""
    empty = np.zeros(0, np.int64)
    addresses_of_frames(np.zeros(0, np.uint8), empty, empty, empty, 1, *output_rows(0),
                        np.zeros(N_REASONS, np.int64))
    rg.walk_ring(np.zeros(64, np.uint8), 64, 1, np.zeros(1, np.int64), *output_rows(0), 0, 1, True,
                 np.zeros(N_REASONS, np.int64))
