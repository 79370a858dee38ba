"""Captured frame -> source and destination keys, in numba (shared by file replay and live capture).

``frame_addresses(buf, start, end, linktype)`` looks at one captured frame ``buf[start:end]`` and
returns ``(reason, src_hi, src_lo, dst_hi, dst_lo, flow)``: ``reason == OK`` and the outer IP header's
source and destination in the ``dptop.engine.core.keys`` encoding (IPv4 ``a.b.c.d`` ->
``(0, 0xffff_0000_0000 | ipv4)``, IPv6 full 128 bits) and its ``flow`` word (the upper-layer protocol
and, for TCP, UDP and SCTP, the destination port: ``dptop.engine.core.keys.FLOW_PORT``), or the
reason (dptop.capture.wire) the frame gives no key. The link layer is walked in two steps: the link type's parser finds where
the network layer starts and what announces it (an ethertype; modules ``link_ether``,
``link_wan``, ``link_wifi``, ``link_host`` list the link types and their headers), then
``link_ether.ethertype_payload`` follows tags, MPLS, PPPoE and LLC/SNAP to the IP header. PKTAP
(258) and PPI (192) wrap a frame of another link type, which is parsed the same way.

An IP packet counts only when its whole fixed header (20 bytes IPv4, 40 bytes IPv6) was
captured and its version nibble matches what announced it; an IPv4 header must also have a header
length of at least 20 bytes and a total length of 0 (unknown, as with segmentation offload) or
at least its header length (``BAD_HEADER``; Wireshark does not dissect those either); sources in ff00::/8 are dropped
(``MULTICAST``: they are not sources, and dptop.engine.core.keys reserves that range for
sentinels), and so are destinations in ffff::/16 (``RESERVED_DESTINATION``: multicast with the reserved
flag bit set, never valid), which the engine keeps for sentinels and for keys that are not addresses.

The protocol is IPv4's protocol field, or IPv6's last next header after hop-by-hop, routing,
destination-options, fragment and AH extension headers. The port is read only from the first
fragment and only when its two bytes were captured; otherwise the flow word has no port.
"""
from __future__ import annotations

import mmap
import threading
import weakref

import numpy as np

from dptop.capture.link_ether import ETHER_LINKTYPES, ET_NONE, ether_link, ethertype_payload
from dptop.capture.link_host import HOST_LINKTYPES, host_link, pktap_inner
from dptop.capture.link_wan import WAN_LINKTYPES, wan_link
from dptop.capture.link_wifi import WIFI_LINKTYPES, ppi_inner, wifi_link
from dptop.capture.wire import (BAD_HEADER, BAD_VERSION, INNER_UNSUPPORTED, MULTICAST, NON_IP, OK, RESERVED_DESTINATION,
                                TRUNCATED, UNSUPPORTED, u16, u32, word_be)
from dptop.engine.core.jit import hot, inner
from dptop.engine.core.keys import FLOW_PORT, IPV4_MAPPED, KEY_DTYPE, KeyBatch

LINKTYPE_MASK = 0xFFFF
"""The link type is the low 16 bits of pcap's link-type field; bits 26-31 carry the FCS flag and
length, bits 16-25 are reserved (pcap spec, "LinkType and additional information")."""

SUPPORTED_LINKTYPES = ETHER_LINKTYPES | WAN_LINKTYPES | WIFI_LINKTYPES | HOST_LINKTYPES

_V4, _Z = np.uint64(IPV4_MAPPED), np.uint64(0)
_S48, _S56, _FF, _FFFF = np.uint64(48), np.uint64(56), np.uint64(0xFF), np.uint64(0xFFFF)
_NOFLOW = np.int64(0)


@inner
def _v4_lengths_ok(buf, o, end):
    """IPv4 header length >= 20 and total length 0 (unknown) or >= the header length."""
    hlen = np.int64(buf[o] & 0x0F) * 4
    total = u16(buf, o + 2, True)
    return hlen >= 20 and (total == 0 or total >= hlen)


@inner
def port_flow(buf, p, end, proto, first_fragment):
    """The flow word: ``proto`` in bits 16-23 and, for TCP/UDP/SCTP whose header starts at ``p`` in
    a first fragment with the port captured, the destination port and ``FLOW_PORT``."""
    if first_fragment and (proto == 6 or proto == 17 or proto == 132) and p + 4 <= end:
        return (proto << 16) | FLOW_PORT | u16(buf, p + 2, True)
    return proto << 16


@inner
def v4_flow(buf, o, end):
    """The flow word of the IPv4 header at ``o`` (its header length already checked)."""
    return port_flow(buf, o + np.int64(buf[np.uint64(o)] & 0x0F) * 4, end, np.int64(buf[np.uint64(o + 9)]),
                     (u16(buf, o + 6, True) & 0x1FFF) == 0)


@inner
def v6_flow(buf, o, end):
    """The flow word of the IPv6 header at ``o``: follows up to eight extension headers."""
    nh = np.int64(buf[np.uint64(o + 6)])
    p = o + 40
    first = True
    for _ in range(8):
        if nh == 0 or nh == 43 or nh == 60 or nh == 51:
            if p + 2 > end:
                return nh << 16
            size = np.int64(buf[np.uint64(p + 1)])
            step = (size + 2) * 4 if nh == 51 else (size + 1) * 8
            nh = np.int64(buf[np.uint64(p)])
            p += step
        elif nh == 44:
            if p + 8 > end:
                return nh << 16
            first = first and (u16(buf, p + 2, True) >> 3) == 0
            nh = np.int64(buf[np.uint64(p)])
            p += 8
        else:
            break
    return port_flow(buf, p, end, nh, first)


@inner
def ip_addresses(buf, o, end, version):
    """The IP header at ``o``; ``version`` 4 or 6 is what the link layer announced, 0 = guess."""
    if o >= end:
        return TRUNCATED, _Z, _Z, _Z, _Z, _NOFLOW
    v = np.int64(buf[o]) >> 4
    if version != 0 and v != version:
        return BAD_VERSION, _Z, _Z, _Z, _Z, _NOFLOW
    if v == 4:
        if o + 20 > end:
            return TRUNCATED, _Z, _Z, _Z, _Z, _NOFLOW
        if not _v4_lengths_ok(buf, o, end):
            return BAD_HEADER, _Z, _Z, _Z, _Z, _NOFLOW
        return (OK, _Z, _V4 | np.uint64(u32(buf, o + 12, True)), _Z, _V4 | np.uint64(u32(buf, o + 16, True)),
                v4_flow(buf, o, end))
    if v == 6:
        if o + 40 > end:
            return TRUNCATED, _Z, _Z, _Z, _Z, _NOFLOW
        src_hi = word_be(buf, o + 8, 8)
        if (src_hi >> _S56) == _FF:
            return MULTICAST, _Z, _Z, _Z, _Z, _NOFLOW
        dst_hi = word_be(buf, o + 24, 8)
        if (dst_hi >> _S48) == _FFFF:
            return RESERVED_DESTINATION, _Z, _Z, _Z, _Z, _NOFLOW
        return OK, src_hi, word_be(buf, o + 16, 8), dst_hi, word_be(buf, o + 32, 8), v6_flow(buf, o, end)
    return NON_IP, _Z, _Z, _Z, _Z, _NOFLOW


@hot
def link_payload(buf, start, end, linktype):
    """``(reason, offset, ethertype)`` of the network layer of a frame of any supported link type
    but Ethernet (a called function, not inlined: compiled once, outside the hot path)."""
    o = start
    lt = linktype
    for _ in range(3):  # PKTAP and PPI wrap another link type's frame
        if lt == 258:
            reason, o, lt = pktap_inner(buf, o, end)
        elif lt == 192:
            reason, o, lt = ppi_inner(buf, o, end)
        else:
            break
        if reason != OK:
            return reason, o, ET_NONE
    reason, o, et = ether_link(buf, o, end, lt)
    if reason == UNSUPPORTED:
        reason, o, et = wifi_link(buf, o, end, lt)
    if reason == UNSUPPORTED:
        reason, o, et = wan_link(buf, o, end, lt)
    if reason == UNSUPPORTED:
        reason, o, et = host_link(buf, o, end, lt)
    if reason == UNSUPPORTED and lt != linktype:
        reason = INNER_UNSUPPORTED
    return reason, o, et


@inner
def frame_addresses(buf, start, end, linktype, ether_only):
    """``(reason, src_hi, src_lo, dst_hi, dst_lo, flow)`` for the frame ``buf[start:end]``.

    ``ether_only`` (a constant where a kernel inlines this twice) says ``linktype`` is 1: that
    copy has no call to ``link_payload``, whose mere presence in a record loop halves its speed."""
    if ether_only or linktype == 1:
        if start + 14 > end:
            return TRUNCATED, _Z, _Z, _Z, _Z, _NOFLOW
        o = start + 14
        et = u16(buf, start + 12, True)
        if et == 0x0800 and o + 20 <= end and (buf[o] >> 4) == 4 and _v4_lengths_ok(buf, o, end):  # plain IPv4
            return (OK, _Z, _V4 | np.uint64(u32(buf, o + 12, True)), _Z, _V4 | np.uint64(u32(buf, o + 16, True)),
                    v4_flow(buf, o, end))
    else:
        reason, o, et = link_payload(buf, start, end, linktype)
        if reason != OK:
            return reason, _Z, _Z, _Z, _Z, _NOFLOW
    reason, o, version = ethertype_payload(buf, o, end, et)
    if reason != OK:
        return reason, _Z, _Z, _Z, _Z, _NOFLOW
    return ip_addresses(buf, o, end, version)


@inner
def store(keys, dst, ts, length, n, src_hi, src_lo, dst_hi, dst_lo, flow, t, wire_len):
    """Write row ``n`` of the outputs (``length`` is (wire lengths, flow words): two rows)."""
    keys[n, 0] = src_hi
    keys[n, 1] = src_lo
    dst[n, 0] = dst_hi
    dst[n, 1] = dst_lo
    ts[n] = t
    length[0, n] = wire_len
    length[1, n] = flow


@hot
def addresses_of_frames(buf, offsets, lengths, stamps, linktype, keys, dst, ts, length, counts):
    """Frames ``buf[offsets[i]:offsets[i]+lengths[i]]`` stamped ``stamps[i]`` -> outputs (filled
    from row 0; the wire length is the frame's length); returns the number of rows written and
    adds skip reasons to ``counts`` (live capture's batch parser)."""
    n = 0
    for i in range(len(offsets)):
        reason, src_hi, src_lo, dst_hi, dst_lo, flow = frame_addresses(buf, offsets[i], offsets[i] + lengths[i],
                                                                       linktype, False)
        if reason == OK:
            store(keys, dst, ts, length, n, src_hi, src_lo, dst_hi, dst_lo, flow, stamps[i], lengths[i])
            n += 1
        else:
            counts[reason] += 1
    return n


ROW_BYTES = 48
"""Bytes of one row of ``output_rows``: two keys, a time stamp, a wire length and a flow word."""


def _rows_of(block: np.ndarray, n: int):
    return (block[:16 * n].view(KEY_DTYPE).reshape(n, 2), block[16 * n:32 * n].view(KEY_DTYPE).reshape(n, 2),
            block[32 * n:40 * n].view(np.int64), block[40 * n:].view(np.uint32).reshape(2, n))


def output_rows(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Empty outputs of the walks for ``n`` rows: source keys, destination keys, time stamps,
    and wire lengths above flow words (``(2, n)``: each row contiguous, so a batch takes them
    without a copy), as views of one block (one allocation per batch, not four)."""
    return _rows_of(np.empty(ROW_BYTES * n, np.uint8), n)


class BlockPool:
    """``output_rows`` from blocks used again: a block returns to the pool when the last view of
    its batch is gone (wherever that batch went: lanes, the truth, a queue), so a replay cycles
    through the blocks its batches in flight need instead of mapping 3 MiB of fresh pages a batch
    (large blocks are mapped on their own, ``dptop.monitor.memory.map_large_blocks``: measured,
    0.48 s of system time for the page faults of a 2^24-packet replay, 0.17 s with the pool).
    A new block is an anonymous mapping, so only the pages its rows fill are touched: a 2^20-row
    batch reading a one-packet file would otherwise zero 48 MiB (about 35 ms).
    Thread-safe: a batch's last holder may be any thread."""

    def __init__(self, keep: int = 16):
        self.keep = keep  # idle blocks kept at most
        self._free: list[mmap.mmap] = []
        self._lock = threading.Lock()

    def rows(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        size = ROW_BYTES * n
        with self._lock:
            raw = self._free.pop() if self._free and len(self._free[-1]) == size else None
        if raw is None:
            raw = mmap.mmap(-1, size)
        block = np.frombuffer(raw, np.uint8)  # views of it keep it alive
        weakref.finalize(block, self._put, raw)
        return _rows_of(block, n)

    def _put(self, raw: mmap.mmap) -> None:
        with self._lock:
            if len(self._free) < self.keep:
                self._free.append(raw)


def batch_of(rows, n: int) -> KeyBatch:
    """The first ``n`` rows of ``output_rows`` as a ``KeyBatch`` (views, no copy)."""
    keys, dst, ts, length = rows
    return KeyBatch(keys[:n], ts[:n], dst[:n], length[0, :n], flow=length[1, :n])
