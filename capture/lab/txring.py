"""A fast loopback load generator for ``dptop bench``: AF_PACKET TX ring (TPACKET_V2).

Frames are written into a memory-mapped transmit ring with numpy slicing and sent with one
``send()`` per chunk, so the sender is not limited by one system call per packet the way
``tcpreplay`` is. Run as ``python -m dptop.capture.lab.txring IFACE COUNT [RATE]`` (root); prints
packets and seconds. With a rate, each chunk leaves when it is due (chunks of ``chunk`` frames: at
800,000 frames/s a chunk every 2.6 ms); while the interface cannot send (down) it waits and retries. The frames are Ethernet/IPv4 protocol 253 ("testing") from 10.0.0.0/8 sources.
"""
from __future__ import annotations

import mmap
import socket
import struct
import sys
import time

import numpy as np

SOL_PACKET = 263
PACKET_VERSION = 10
PACKET_TX_RING = 13
PACKET_QDISC_BYPASS = 20
TPACKET_V2 = 1
FRAME = 128
DATA = 32  # TPACKET_ALIGN(sizeof(struct tpacket2_hdr)): where the kernel reads the frame from


def frames(count: int) -> np.ndarray:
    """``count`` 34-byte Ethernet/IPv4 frames (checksum 0; the capture does not check it)."""
    out = np.zeros((count, 34), np.uint8)
    out[:, 12:14] = (0x08, 0x00)
    out[:, 14] = 0x45
    out[:, 16:18] = (0, 20)
    out[:, 22:24] = (64, 253)
    src = (np.arange(count, dtype=np.uint64) * np.uint64(2654435761) % np.uint64(1 << 24)).astype(np.uint32) | 0x0A00_0000
    out[:, 26:30] = src.astype(">u4").view(np.uint8).reshape(-1, 4)
    out[:, 30:34] = (127, 0, 0, 1)
    return out


def send(iface: str, count: int, n_frames: int = 1 << 14, chunk: int = 1 << 11, rate: float | None = None) -> float:
    """Send ``count`` frames on ``iface`` at ``rate`` per second (None: as fast as the ring drains);
    returns the seconds taken."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    sock.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V2)
    try:
        sock.setsockopt(SOL_PACKET, PACKET_QDISC_BYPASS, 1)
    except OSError:
        pass
    block = 1 << 16
    sock.setsockopt(SOL_PACKET, PACKET_TX_RING, struct.pack("4I", block, n_frames * FRAME // block, FRAME, n_frames))
    sock.bind((iface, 0))
    mm = mmap.mmap(sock.fileno(), n_frames * FRAME, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    ring = np.frombuffer(mm, np.uint8).reshape(n_frames, FRAME)
    status = ring[:, 0:4].view(np.uint32)[:, 0]  # tp_status
    length = ring[:, 4:8].view(np.uint32)[:, 0]  # tp_len
    data = frames(count)
    sent, slot = 0, 0
    t0 = time.perf_counter()
    while sent < count:
        k = min(chunk, count - sent, n_frames - slot)
        while status[slot:slot + k].any():  # wait until the kernel has sent these slots
            _flush(sock)
        if rate:
            due = t0 + sent / rate
            while (left := due - time.perf_counter()) > 0:
                time.sleep(left if left > 0.001 else 0)
        ring[slot:slot + k, DATA:DATA + 34] = data[sent:sent + k]
        length[slot:slot + k] = 34
        status[slot:slot + k] = 1  # TP_STATUS_SEND_REQUEST
        _flush(sock)
        sent += k
        slot = (slot + k) % n_frames
    while status.any():
        _flush(sock)
    took = time.perf_counter() - t0
    del ring, status, length
    mm.close()
    sock.close()
    return took


def _flush(sock: socket.socket) -> None:
    """Ask the kernel to send the requested frames; an interface that is down is waited for."""
    try:
        sock.send(b"")
    except OSError:
        time.sleep(0.01)
    else:
        time.sleep(0)


if __name__ == "__main__":
    n = int(sys.argv[2])
    print(n, send(sys.argv[1], n, rate=float(sys.argv[3]) if len(sys.argv) > 3 else None))
