"""A line-rate load generator for ``dptop bench``: an AF_PACKET TX ring (TPACKET_V2) filled once.

Every slot of a memory-mapped transmit ring is written once, before the first frame leaves, with a
34-byte Ethernet/IPv4 frame (protocol 253, "testing") from a 10.0.0.0/8 source drawn from a Zipf
law (exponent ``ZIPF``, over ``SOURCES`` sources); after that a batch of frames costs one numpy
store (their ``tp_status`` set to "send request") and one ``send()``, so Python does nothing per
frame. Each frame carries a virtio-net header whose ``hdr_len`` covers the whole frame
(PACKET_VNET_HDR): the kernel then copies the 34 bytes into the socket buffer instead of attaching
the ring's page as a fragment, which a veth would copy again into a fresh page of its own. The
frames skip the queueing discipline (PACKET_QDISC_BYPASS) and the send buffer is large enough for a
whole batch in flight. Pacing is by batch against the monotonic clock: batch ``i`` leaves when
``i·batch/rate`` seconds have passed, a sender that fell behind catches up, so the count is exact.
At most ``IN_FLIGHT`` batches are with the kernel: a new one waits, sleeping, until the kernel gave
back the oldest's slots. On a veth whose receive work runs on another CPU (dptop.capture.lab.netns)
that CPU's backlog refuses a frame when full; the refused frame stays requested and goes again, so
the count stays exact and the sender, instead of spinning on a core the capture could use, goes as
fast as the receiving side takes frames.

Run as ``python -m dptop.capture.lab.txring IFACE COUNT [RATE]`` (root); it prints the frames
sent, the seconds from the first batch to the last frame's release, and the CPU seconds it used
(system and user; it includes receive work that ran on its CPU, little once the lab steers that work
to another CPU). While the interface cannot send (down) it waits and retries.
"""
from __future__ import annotations

import errno
import mmap
import os
import socket
import struct
import sys
import time
from collections import deque

import numpy as np

SOL_PACKET = 263
PACKET_VERSION = 10
PACKET_TX_RING = 13
PACKET_LOSS = 14
PACKET_VNET_HDR = 15
PACKET_QDISC_BYPASS = 20
SO_SNDBUFFORCE = 32
TPACKET_V2 = 1
TP_STATUS_SEND_REQUEST = 1

FRAME_BYTES = 34
VNET_HDR = 10
"""``struct virtio_net_hdr``: flags, gso_type, hdr_len (little-endian u16 at byte 2), gso_size, ..."""
DATA = 32
"""TPACKET_ALIGN(sizeof(struct tpacket2_hdr)): where the kernel reads a slot's bytes from."""
SLOT = 128
"""Bytes per ring slot (a power of two, so the slots tile the ring's blocks)."""
RING_SLOTS = 1 << 18
"""Slots in the ring (32 MiB): the frame sequence repeats every 262,144 frames."""
BLOCK = 1 << 16
BATCH = 512
"""Frames per ``send()`` at full speed; a paced sender sends ``BATCH_SECONDS`` of frames at a time
(at most ``BATCH``)."""
BATCH_SECONDS = 0.004
IN_FLIGHT = 2
"""Batches handed to the kernel and not yet given back: a new batch waits for the oldest. Two
batches of ``BATCH`` are about what the receiving CPU's backlog holds (``net.core.netdev_max_backlog``,
1,000 by default): enough to keep that CPU busy while the sender sleeps."""
SETTLE_WAIT = 0.0001
SNDBUF = 1 << 27
ZIPF = 1.1
SOURCES = 1 << 16


def frames(count: int, zipf: float = ZIPF, sources: int = SOURCES, seed: int = 1) -> np.ndarray:
    """``count`` 34-byte Ethernet/IPv4 frames (checksum 0; the capture does not check it) whose
    sources follow a Zipf law: the source of rank ``r`` (1..``sources``) sends a share ∝ ``r^-zipf``."""
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(np.arange(1, sources + 1, dtype=np.float64) ** -zipf)
    rank = np.minimum(np.searchsorted(cdf, rng.random(count) * cdf[-1]), sources - 1).astype(np.uint64)
    src = (rank * np.uint64(2654435761) % np.uint64(1 << 24)).astype(np.uint32) | np.uint32(0x0A00_0000)
    out = np.zeros((count, FRAME_BYTES), np.uint8)
    out[:, 12:14] = (0x08, 0x00)
    out[:, 14] = 0x45
    out[:, 16:18] = (0, 20)
    out[:, 22:24] = (64, 253)
    out[:, 26:30] = src.astype(">u4").view(np.uint8).reshape(-1, 4)
    out[:, 30:34] = (127, 0, 0, 1)
    return out


class TxRing:
    """A TPACKET_V2 transmit ring on ``iface`` with every slot holding its frame (``with TxRing(...)``)."""

    def __init__(self, iface: str, slots: int = RING_SLOTS):
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        self.sock.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V2)
        self.sock.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)  # before the ring: the kernel refuses it after
        self.sock.setsockopt(SOL_PACKET, PACKET_LOSS, 1)  # a frame the kernel refuses is skipped, not retried
        for option in ((SOL_PACKET, PACKET_QDISC_BYPASS, 1), (socket.SOL_SOCKET, SO_SNDBUFFORCE, SNDBUF)):
            try:
                self.sock.setsockopt(*option)
            except OSError:  # an older kernel, no CAP_NET_ADMIN: slower, still right
                pass
        self.sock.setsockopt(SOL_PACKET, PACKET_TX_RING, struct.pack("4I", BLOCK, slots * SLOT // BLOCK, SLOT, slots))
        self.sock.bind((iface, 0))
        self._mm = mmap.mmap(self.sock.fileno(), slots * SLOT, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        ring = np.frombuffer(self._mm, np.uint8).reshape(slots, SLOT)
        ring[:, 4:8].view(np.uint32)[:, 0] = VNET_HDR + FRAME_BYTES  # tp_len
        ring[:, DATA:DATA + VNET_HDR] = 0
        ring[:, DATA + 2:DATA + 4].view("<u2")[:, 0] = FRAME_BYTES  # hdr_len: the whole frame in the skb's head
        ring[:, DATA + VNET_HDR:DATA + VNET_HDR + FRAME_BYTES] = frames(slots)
        self.status = ring[:, 0:4].view(np.uint32)[:, 0]
        self.slots = slots

    def __enter__(self) -> "TxRing":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def flush(self) -> None:
        """Hand the requested slots to the kernel. A frame the kernel refuses (the receiving CPU's
        backlog is full: ENOBUFS; the interface is down) stays requested and goes on a later call."""
        try:
            self.sock.send(b"", socket.MSG_DONTWAIT)
        except BlockingIOError:  # the send buffer is full: the rest goes on the next call
            pass
        except OSError as e:
            if e.errno == errno.ENETDOWN or e.errno == errno.ENXIO:
                time.sleep(0.01)
            elif e.errno != errno.ENOBUFS:
                raise

    def settle(self, slot: int, k: int) -> None:
        """Wait, sleeping, until the kernel gave back slots ``slot`` to ``slot + k`` (it is done
        with their frames), handing it the ones it refused again meanwhile."""
        while self.status[slot:slot + k].any():
            self.flush()
            time.sleep(SETTLE_WAIT)

    def send(self, count: int, rate: float | None = None) -> float:
        """Send ``count`` frames at ``rate`` per second (None: as fast as the receiving side takes
        them); returns the seconds from the first batch to the last frame's release."""
        batch = BATCH if not rate else int(min(BATCH, max(64, rate * BATCH_SECONDS)))
        sent, slot, in_flight = 0, 0, deque()
        t0 = time.monotonic()
        while sent < count:
            k = min(batch, count - sent, self.slots - slot)
            while len(in_flight) >= IN_FLIGHT:
                self.settle(*in_flight.popleft())
            if rate:
                left = t0 + sent / rate - time.monotonic()
                if left > 0:
                    time.sleep(left)
            self.status[slot:slot + k] = TP_STATUS_SEND_REQUEST
            self.flush()
            in_flight.append((slot, k))
            sent += k
            slot = (slot + k) % self.slots
        while in_flight:
            self.settle(*in_flight.popleft())
        return time.monotonic() - t0

    def close(self) -> None:
        self.status = None
        self._mm.close()
        self.sock.close()


def send(iface: str, count: int, rate: float | None = None) -> float:
    """Send ``count`` frames on ``iface`` at ``rate`` per second; returns the seconds taken."""
    with TxRing(iface) as ring:
        return ring.send(count, rate)


if __name__ == "__main__":
    n = int(sys.argv[2])
    with TxRing(sys.argv[1]) as tx:
        cpu0 = os.times()
        seconds = tx.send(n, rate=float(sys.argv[3]) if len(sys.argv) > 3 else None)
        cpu = os.times()
    print(n, seconds, round(cpu.user + cpu.system - cpu0.user - cpu0.system, 3))
