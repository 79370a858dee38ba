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
N_BLOCKS = 64
RETIRE_MS = 100
"""The ring is sized in time: the kernel hands a block over when it is full or ``RETIRE_MS`` after
its first frame, so below the rate that fills a block in that time its ``N_BLOCKS`` blocks hold
``N_BLOCKS × RETIRE_MS`` = 6.4 s of traffic; above it they hold ``N_BLOCKS × BLOCK_SIZE`` bytes of
frames. With the snap length (``live.SNAP_LENGTH``) a minimum-size Ethernet frame takes 128 bytes of
ring, so 16,384 fit a block and the 128 MiB ring holds 5 s of a stall at up to 210,000 frames/s (and
1,048,576 frames at any rate). A reader held up that long loses nothing."""


class Ring:
    """A TPACKET_V3 RX ring set on ``sock`` (raises OSError where unsupported)."""

    def __init__(self, sock: socket.socket, block_size: int = BLOCK_SIZE, n_blocks: int = N_BLOCKS,
                 retire_ms: int = RETIRE_MS, skip_outgoing: bool = True):
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
