"""TPACKET_V3 memory-mapped receive ring on an AF_PACKET socket (Linux packet_mmap).

The kernel writes frames into ``n_blocks`` blocks of ``block_size`` bytes and marks a block
``TP_STATUS_USER`` when it is full or ``retire_ms`` have passed; ``walk_ring`` (numba) turns
every ready block into keys and hands it back (``TP_STATUS_KERNEL``); ``RETIRE_MS`` says how the
ring is sized. Layouts are those of
``<linux/if_packet.h>``: block descriptor (status at +8, packet count at +12, offset of the
first frame at +16), ``tpacket3_hdr`` (next offset +0, sec +4, nsec +8, snaplen +12, wire
length +16, mac offset +24) followed by ``sockaddr_ll`` at +48 (packet type at +58). The ring relies on x86's
ordered loads and stores (as libpcap's C code relies on compiler barriers only).
"""
from __future__ import annotations

import mmap
import socket
import struct

import numpy as np

from dptop.capture.linklayer import frame_addresses, store
from dptop.capture.wire import OK, u16, u32
from dptop.engine.core.jit import hot, inner

SOL_PACKET = 263
PACKET_RX_RING = 5
PACKET_VERSION = 10
TPACKET_V3 = 2
PACKET_OUTGOING = 4
_NS = np.int64(1_000_000_000)


@hot
def walk_ring(ring, block_size, n_blocks, cur, keys, dst, ts, length, n_out, linktype, skip_outgoing, counts):
    """Consume ready blocks from block ``cur[0]`` on while their frames fit in ``keys``; the
    outputs are ``linklayer.output_rows``. Returns ``(n_out, packets, frames, blocks)``: ``packets``
    the frames read, ``frames`` those and the outgoing copies skipped (every frame the blocks held)."""
    if linktype == 1:  # an Ethernet-only copy of the loop (linklayer.frame_addresses)
        return _walk_ring(ring, block_size, n_blocks, cur, keys, dst, ts, length, n_out, linktype,
                          skip_outgoing, counts, True)
    return _walk_ring(ring, block_size, n_blocks, cur, keys, dst, ts, length, n_out, linktype,
                      skip_outgoing, counts, False)


@inner
def _walk_ring(ring, block_size, n_blocks, cur, keys, dst, ts, length, n_out, linktype, skip_outgoing,
               counts, ether_only):
    n_max = len(keys)
    packets = 0
    frames = 0
    blocks = 0
    while blocks < n_blocks:
        b = cur[0] * block_size
        if (u32(ring, b + 8, False) & 1) == 0:  # not TP_STATUS_USER: the kernel still owns it
            break
        num = u32(ring, b + 12, False)
        if n_max - n_out < num:
            break
        off = b + u32(ring, b + 16, False)
        frames += num
        for _ in range(num):
            if not (skip_outgoing and ring[off + 58] == PACKET_OUTGOING):
                packets += 1
                start = off + u16(ring, off + 24, False)
                end = start + u32(ring, off + 12, False)
                reason, src_hi, src_lo, dst_hi, dst_lo, flow = frame_addresses(ring, start, end, linktype, ether_only)
                if reason == OK:
                    store(keys, dst, ts, length, n_out, src_hi, src_lo, dst_hi, dst_lo, flow,
                          u32(ring, off + 4, False) * _NS + u32(ring, off + 8, False), u32(ring, off + 16, False))
                    n_out += 1
                else:
                    counts[reason] += 1
            off += u32(ring, off, False)
        for i in range(4):  # block_status = TP_STATUS_KERNEL: give the block back
            ring[b + 8 + i] = 0
        cur[0] = (cur[0] + 1) % n_blocks
        blocks += 1
    return n_out, packets, frames, blocks


BLOCK_SIZE = 1 << 21
RETIRE_MS = 100
FRAME_RING_BYTES = 128
"""Ring bytes a frame of up to 46 bytes takes at most (its ``tpacket3_hdr``, ``sockaddr_ll`` and
padding, 82 bytes, then the frame, the whole aligned to 8); a minimum-size Ethernet frame on a
wire (60 bytes) takes 144, and with the snap length (``live.SNAP_LENGTH``) no frame takes more
than 344."""
STALL_SECONDS = 5
STALL_RATE = 1_000_000
N_BLOCKS = -(-STALL_SECONDS * STALL_RATE * FRAME_RING_BYTES // BLOCK_SIZE)
"""The ring is sized in time: the kernel hands a block over when it is full or ``RETIRE_MS`` after
its first frame, so below the rate that fills a block in that time (16,384 frames of 128 bytes:
164k frames/s) its blocks hold ``N_BLOCKS × RETIRE_MS`` (30 s) of traffic, and above it ``N_BLOCKS ×
BLOCK_SIZE`` bytes of frames: 306 blocks (612 MiB) hold 5 s of small frames at 1M frames/s (5.0M
frames; 4.5M 60-byte frames), so a reader held up for ``STALL_SECONDS`` at that rate loses nothing.
The ring is the kernel's memory, taken whole when the capture starts: ``ring_blocks`` takes fewer
blocks where that is more than ``MEMORY_SHARE`` of the memory available, never fewer than
``MIN_BLOCKS`` (128 MiB: 1M small frames)."""
MIN_BLOCKS = 64
MEMORY_SHARE = 1 / 8


def ring_blocks(available: int | None) -> int:
    """Blocks for a ring given the bytes of memory ``available`` (None: unknown, ``N_BLOCKS``)."""
    if available is None:
        return N_BLOCKS
    return max(MIN_BLOCKS, min(N_BLOCKS, int(available * MEMORY_SHARE) // BLOCK_SIZE))


def memory_available() -> int | None:
    """The bytes of memory the kernel says are available (``MemAvailable``); None where unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


class Ring:
    """A TPACKET_V3 RX ring set on ``sock`` (raises OSError where unsupported)."""

    def __init__(self, sock: socket.socket, block_size: int = BLOCK_SIZE, n_blocks: int | None = None,
                 retire_ms: int = RETIRE_MS, skip_outgoing: bool = True):
        """``n_blocks`` None: ``ring_blocks`` of the memory available now."""
        if n_blocks is None:
            n_blocks = ring_blocks(memory_available())
        frame_size = 2048
        sock.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V3)
        req = struct.pack("7I", block_size, n_blocks, frame_size,
                          block_size // frame_size * n_blocks, retire_ms, 0, 0)
        sock.setsockopt(SOL_PACKET, PACKET_RX_RING, req)
        self._mm = mmap.mmap(sock.fileno(), block_size * n_blocks, mmap.MAP_SHARED,
                             mmap.PROT_READ | mmap.PROT_WRITE)
        self.buf = np.frombuffer(self._mm, np.uint8)
        self.block_size, self.n_blocks = block_size, n_blocks
        self.skip_outgoing = skip_outgoing
        self.max_frames_per_block = block_size // 64  # a frame takes >= 48 + 20 + 14 bytes
        self._cur = np.zeros(1, np.int64)

    def walk(self, keys, dst, ts, length, n_out, linktype, counts):
        return walk_ring(self.buf, self.block_size, self.n_blocks, self._cur, keys, dst, ts, length,
                         n_out, linktype, self.skip_outgoing, counts)

    def close(self) -> None:
        self.buf = None
        self._mm.close()
