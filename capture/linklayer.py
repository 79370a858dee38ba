"""Link layer -> source address key, in numba (shared by file replay and live capture).

``source_of(buf, start, end, linktype)`` looks at one captured frame ``buf[start:end]`` and
returns ``(reason, hi, lo)``: ``reason == OK`` and the source key in the ``dptop.engine.core.keys`` encoding
(IPv4 ``a.b.c.d`` -> ``(0, 0xffff_0000_0000 | ipv4)``, IPv6 full 128 bits), or the reason the frame
gives no key. Supported link types (``linktype`` already masked with ``LINKTYPE_MASK``):

* Ethernet (1) with any number of 802.1Q / 802.1ad tags (0x8100, 0x88a8, 0x9100), MPLS label
  stacks (0x8847, 0x8848; the payload after the bottom-of-stack label is IPv4 or IPv6 by its
  version nibble), PPPoE session frames (0x8864) and 802.2 LLC/SNAP encapsulation;
* Linux cooked capture SLL (113) and SLL2 (276);
* raw IP (101, 12, 14 by version nibble; 228 IPv4; 229 IPv6);
* BSD NULL / LOOP (0, 108; the address family in either byte order: 2 = IPv4, 24/28/30 = IPv6).

An IP packet counts only when its whole fixed header (20 bytes IPv4, 40 bytes IPv6) was
captured and its version nibble matches its ethertype; sources in ff00::/8 are dropped
(``MULTICAST``: they are not sources, and dptop.engine.core.keys reserves that range for sentinels).
"""
from __future__ import annotations

import numpy as np

from dptop.engine.core.jit import inner, kernel
from dptop.engine.core.keys import IPV4_MAPPED

LINKTYPE_MASK = 0x0FFF_FFFF
"""pcap's link-type field carries FCS-length and flag bits above bit 28 (pcap spec §"LinkType")."""

OK = 0
NON_IP = 1
TRUNCATED = 2
MULTICAST = 3
UNSUPPORTED = 4
BAD_VERSION = 5
MALFORMED = 6
UNKNOWN_INTERFACE = 7
N_REASONS = 8

REASON_NAMES = {
    NON_IP: "non-ip",
    TRUNCATED: "truncated header",
    MULTICAST: "multicast source",
    BAD_VERSION: "bad IP version",
    MALFORMED: "malformed record",
    UNKNOWN_INTERFACE: "unknown interface",
}
"""Skip-reason names as they appear in ``CaptureStats.skipped`` (``UNSUPPORTED`` is named per
link type: ``"unsupported link type 147"``)."""

SUPPORTED_LINKTYPES = frozenset({0, 1, 12, 14, 101, 108, 113, 228, 229, 276})

_V4 = np.uint64(IPV4_MAPPED)
_Z = np.uint64(0)
_B8 = np.uint64(8)
_S56 = np.uint64(56)
_FF = np.uint64(0xFF)


@inner
def _u16be(buf, o):
    return (np.int64(buf[o]) << 8) | np.int64(buf[o + 1])


@inner
def _u32le(buf, o):
    return (np.int64(buf[o]) | (np.int64(buf[o + 1]) << 8) | (np.int64(buf[o + 2]) << 16)
            | (np.int64(buf[o + 3]) << 24))


@inner
def _word_be(buf, o, nbytes):
    v = _Z
    for i in range(nbytes):
        v = (v << _B8) | np.uint64(buf[o + i])
    return v


@inner
def _ip_source(buf, o, end, version):
    """The IP header at ``o``; ``version`` 4 or 6 is what the link layer announced, 0 = guess."""
    if o >= end:
        return TRUNCATED, _Z, _Z
    v = np.int64(buf[o]) >> 4
    if version != 0 and v != version:
        return BAD_VERSION, _Z, _Z
    if v == 4:
        if o + 20 > end:
            return TRUNCATED, _Z, _Z
        return OK, _Z, _V4 | _word_be(buf, o + 12, 4)
    if v == 6:
        if o + 40 > end:
            return TRUNCATED, _Z, _Z
        hi = _word_be(buf, o + 8, 8)
        if (hi >> _S56) == _FF:
            return MULTICAST, _Z, _Z
        return OK, hi, _word_be(buf, o + 16, 8)
    return NON_IP, _Z, _Z


@inner
def ethertype_source(buf, o, end, ethertype):
    """The payload at ``o`` of a frame whose (outer) ethertype is ``ethertype``."""
    et = ethertype
    while True:
        if et == 0x0800:
            return _ip_source(buf, o, end, 4)
        if et == 0x86DD:
            return _ip_source(buf, o, end, 6)
        if et == 0x8100 or et == 0x88A8 or et == 0x9100:
            if o + 4 > end:
                return TRUNCATED, _Z, _Z
            et = _u16be(buf, o + 2)
            o += 4
        elif et == 0x8847 or et == 0x8848:
            while True:
                if o + 4 > end:
                    return TRUNCATED, _Z, _Z
                bottom = buf[o + 2] & 1
                o += 4
                if bottom:
                    break
            return _ip_source(buf, o, end, 0)
        elif et == 0x8864:  # PPPoE session: 6-byte header, then the 2-byte PPP protocol
            if o + 8 > end:
                return TRUNCATED, _Z, _Z
            ppp = _u16be(buf, o + 6)
            o += 8
            if ppp == 0x0021:
                et = 0x0800
            elif ppp == 0x0057:
                et = 0x86DD
            else:
                return NON_IP, _Z, _Z
        elif et <= 1500:  # 802.3 length field: only LLC/SNAP with OUI 0 carries an ethertype
            if (o + 8 <= end and buf[o] == 0xAA and buf[o + 1] == 0xAA and buf[o + 2] == 3
                    and buf[o + 3] == 0 and buf[o + 4] == 0 and buf[o + 5] == 0):
                et = _u16be(buf, o + 6)
                o += 8
            else:
                return NON_IP, _Z, _Z
        else:
            return NON_IP, _Z, _Z


@inner
def source_of(buf, start, end, linktype):
    """``(reason, hi, lo)`` for the frame ``buf[start:end]`` of link type ``linktype``."""
    if linktype == 1:
        if start + 14 > end:
            return TRUNCATED, _Z, _Z
        return ethertype_source(buf, start + 14, end, _u16be(buf, start + 12))
    if linktype == 113:
        if start + 16 > end:
            return TRUNCATED, _Z, _Z
        return ethertype_source(buf, start + 16, end, _u16be(buf, start + 14))
    if linktype == 276:
        if start + 20 > end:
            return TRUNCATED, _Z, _Z
        return ethertype_source(buf, start + 20, end, _u16be(buf, start))
    if linktype == 101 or linktype == 12 or linktype == 14:
        return _ip_source(buf, start, end, 0)
    if linktype == 228:
        return _ip_source(buf, start, end, 4)
    if linktype == 229:
        return _ip_source(buf, start, end, 6)
    if linktype == 0 or linktype == 108:
        if start + 4 > end:
            return TRUNCATED, _Z, _Z
        family = _u32le(buf, start)
        if family > 0xFFFF:  # written in the other byte order
            family = ((family >> 24) & 0xFF) | ((family >> 8) & 0xFF00)
        if family == 2:
            return _ip_source(buf, start + 4, end, 4)
        if family == 24 or family == 28 or family == 30:
            return _ip_source(buf, start + 4, end, 6)
        return NON_IP, _Z, _Z
    return UNSUPPORTED, _Z, _Z


@kernel
def sources_of_frames(buf, offsets, lengths, stamps, linktype, keys, ts, counts):
    """Frames ``buf[offsets[i]:offsets[i]+lengths[i]]`` stamped ``stamps[i]`` -> ``keys``/``ts``
    (filled from row 0); returns the number of keys written and adds skip reasons to ``counts``
    (live capture's batch parser)."""
    n = 0
    for i in range(len(offsets)):
        reason, hi, lo = source_of(buf, offsets[i], offsets[i] + lengths[i], linktype)
        if reason == OK:
            keys[n, 0] = hi
            keys[n, 1] = lo
            ts[n] = stamps[i]
            n += 1
        else:
            counts[reason] += 1
    return n
