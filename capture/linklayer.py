"""Captured frame -> source and destination keys, in numba (shared by file replay and live capture).

``frame_addresses(buf, start, end, linktype)`` looks at one captured frame ``buf[start:end]`` and
returns ``(reason, src_hi, src_lo, dst_hi, dst_lo)``: ``reason == OK`` and the outer IP header's
source and destination in the ``dptop.engine.core.keys`` encoding (IPv4 ``a.b.c.d`` ->
``(0, 0xffff_0000_0000 | ipv4)``, IPv6 full 128 bits), or the reason (dptop.capture.wire) the
frame gives no key. The link layer is walked in two steps: the link type's parser finds where
the network layer starts and what announces it (an ethertype; modules ``link_ether``,
``link_wan``, ``link_wifi``, ``link_host`` list the link types and their headers), then
``link_ether.ethertype_payload`` follows tags, MPLS, PPPoE and LLC/SNAP to the IP header. PKTAP
(258) and PPI (192) wrap a frame of another link type, which is parsed the same way.

An IP packet counts only when its whole fixed header (20 bytes IPv4, 40 bytes IPv6) was
captured and its version nibble matches what announced it; an IPv4 header must also have a header
length of at least 20 bytes and a total length of 0 (unknown, as with segmentation offload) or
at least its header length (``BAD_HEADER``; Wireshark does not dissect those either); sources in ff00::/8 are dropped
(``MULTICAST``: they are not sources, and dptop.engine.core.keys reserves that range for
sentinels), and so are destinations in ffff:ffff:ffff:ffff::/64 (``RESERVED_DESTINATION``), the
only part of that range a destination key could collide with a sentinel in.
"""
from __future__ import annotations

import numpy as np

from dptop.capture.link_ether import ETHER_LINKTYPES, ET_NONE, ether_link, ethertype_payload
from dptop.capture.link_host import HOST_LINKTYPES, host_link, pktap_inner
from dptop.capture.link_wan import WAN_LINKTYPES, wan_link
from dptop.capture.link_wifi import WIFI_LINKTYPES, ppi_inner, wifi_link
from dptop.capture.wire import (BAD_HEADER, BAD_VERSION, INNER_UNSUPPORTED, MULTICAST, NON_IP, OK, RESERVED_DESTINATION,
                                TRUNCATED, UNSUPPORTED, u16, u32, word_be)
from dptop.engine.core.jit import inner, kernel
from dptop.engine.core.keys import IPV4_MAPPED, KEY_DTYPE, KeyBatch

LINKTYPE_MASK = 0xFFFF
"""The link type is the low 16 bits of pcap's link-type field; bits 26-31 carry the FCS flag and
length, bits 16-25 are reserved (pcap spec, "LinkType and additional information")."""

SUPPORTED_LINKTYPES = ETHER_LINKTYPES | WAN_LINKTYPES | WIFI_LINKTYPES | HOST_LINKTYPES

_V4, _Z = np.uint64(IPV4_MAPPED), np.uint64(0)
_S56, _FF, _ONES = np.uint64(56), np.uint64(0xFF), np.uint64(0xFFFF_FFFF_FFFF_FFFF)


@inner
def _v4_lengths_ok(buf, o, end):
    """IPv4 header length >= 20 and total length 0 (unknown) or >= the header length."""
    hlen = np.int64(buf[o] & 0x0F) * 4
    total = u16(buf, o + 2, True)
    return hlen >= 20 and (total == 0 or total >= hlen)


@inner
def ip_addresses(buf, o, end, version):
    """The IP header at ``o``; ``version`` 4 or 6 is what the link layer announced, 0 = guess."""
    if o >= end:
        return TRUNCATED, _Z, _Z, _Z, _Z
    v = np.int64(buf[o]) >> 4
    if version != 0 and v != version:
        return BAD_VERSION, _Z, _Z, _Z, _Z
    if v == 4:
        if o + 20 > end:
            return TRUNCATED, _Z, _Z, _Z, _Z
        if not _v4_lengths_ok(buf, o, end):
            return BAD_HEADER, _Z, _Z, _Z, _Z
        return OK, _Z, _V4 | np.uint64(u32(buf, o + 12, True)), _Z, _V4 | np.uint64(u32(buf, o + 16, True))
    if v == 6:
        if o + 40 > end:
            return TRUNCATED, _Z, _Z, _Z, _Z
        src_hi = word_be(buf, o + 8, 8)
        if (src_hi >> _S56) == _FF:
            return MULTICAST, _Z, _Z, _Z, _Z
        dst_hi = word_be(buf, o + 24, 8)
        if dst_hi == _ONES:
            return RESERVED_DESTINATION, _Z, _Z, _Z, _Z
        return OK, src_hi, word_be(buf, o + 16, 8), dst_hi, word_be(buf, o + 32, 8)
    return NON_IP, _Z, _Z, _Z, _Z


@kernel
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
    """``(reason, src_hi, src_lo, dst_hi, dst_lo)`` for the frame ``buf[start:end]``.

    ``ether_only`` (a constant where a kernel inlines this twice) says ``linktype`` is 1: that
    copy has no call to ``link_payload``, whose mere presence in a record loop halves its speed."""
    if ether_only or linktype == 1:
        if start + 14 > end:
            return TRUNCATED, _Z, _Z, _Z, _Z
        o = start + 14
        et = u16(buf, start + 12, True)
        if et == 0x0800 and o + 20 <= end and (buf[o] >> 4) == 4 and _v4_lengths_ok(buf, o, end):  # plain IPv4
            return OK, _Z, _V4 | np.uint64(u32(buf, o + 12, True)), _Z, _V4 | np.uint64(u32(buf, o + 16, True))
    else:
        reason, o, et = link_payload(buf, start, end, linktype)
        if reason != OK:
            return reason, _Z, _Z, _Z, _Z
    reason, o, version = ethertype_payload(buf, o, end, et)
    if reason != OK:
        return reason, _Z, _Z, _Z, _Z
    return ip_addresses(buf, o, end, version)


@inner
def store(keys, dst, ts, length, n, src_hi, src_lo, dst_hi, dst_lo, t, wire_len):
    """Write row ``n`` of the outputs."""
    keys[n, 0] = src_hi
    keys[n, 1] = src_lo
    dst[n, 0] = dst_hi
    dst[n, 1] = dst_lo
    ts[n] = t
    length[n] = wire_len


@kernel
def addresses_of_frames(buf, offsets, lengths, stamps, linktype, keys, dst, ts, length, counts):
    """Frames ``buf[offsets[i]:offsets[i]+lengths[i]]`` stamped ``stamps[i]`` -> outputs (filled
    from row 0; the wire length is the frame's length); returns the number of rows written and
    adds skip reasons to ``counts`` (live capture's batch parser)."""
    n = 0
    for i in range(len(offsets)):
        reason, src_hi, src_lo, dst_hi, dst_lo = frame_addresses(buf, offsets[i], offsets[i] + lengths[i],
                                                                 linktype, False)
        if reason == OK:
            store(keys, dst, ts, length, n, src_hi, src_lo, dst_hi, dst_lo, stamps[i], lengths[i])
            n += 1
        else:
            counts[reason] += 1
    return n


def output_rows(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Empty outputs of the walks for ``n`` rows: source keys, destination keys, time stamps,
    wire lengths, as views of one block (one allocation per batch, not four)."""
    block = np.empty(44 * n, np.uint8)
    return (block[:16 * n].view(KEY_DTYPE).reshape(n, 2), block[16 * n:32 * n].view(KEY_DTYPE).reshape(n, 2),
            block[32 * n:40 * n].view(np.int64), block[40 * n:].view(np.uint32))


def batch_of(rows, n: int) -> KeyBatch:
    """The first ``n`` rows of ``output_rows`` as a ``KeyBatch``."""
    keys, dst, ts, length = rows
    return KeyBatch(keys[:n], ts[:n], dst[:n], length[:n])
