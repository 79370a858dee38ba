"""Link layers that a host's capture stack writes in front of the IP packet (numba; used by
dptop.capture.linklayer).

* raw IP (101, 12, 14 by version nibble; 228 IPv4; 229 IPv6);
* BSD NULL / LOOP (0, 108): a 4-byte address family in either byte order (2 = IPv4,
  24/28/30 = IPv6);
* Solaris IPNET (226): 24-byte header, family at byte 1 (2 = IPv4, 26 = IPv6);
* Linux NFLOG (239): 4-byte header (family 2 = IPv4, 10 = IPv6), then TLVs (length, type; in the
  writing host's byte order, told apart by the type being < 256; padded to 4 bytes) until the
  payload TLV (type 9), which holds the IP packet;
* Apple PKTAP (258): a header of ``pth_length`` (>= 108) little-endian bytes with the record type
  (1 = packet) and the inner link type ``pth_dlt`` (``pktap_inner``; the dispatcher parses the
  inner frame).
"""
from __future__ import annotations

from dptop.capture.link_ether import ET_GUESS, ET_NONE
from dptop.capture.wire import MALFORMED, NON_IP, OK, TRUNCATED, UNSUPPORTED, u16, u32
from dptop.engine.core.jit import inner

HOST_LINKTYPES = frozenset({0, 12, 14, 101, 108, 226, 228, 229, 239, 258})

NFULA_PAYLOAD = 9
PKTAP_MIN_HEADER = 108


@inner
def _family(value, v4, v6a, v6b, v6c):
    if value == v4:
        return 0x0800
    if value == v6a or value == v6b or value == v6c:
        return 0x86DD
    return ET_NONE


@inner
def _nflog(buf, start, end):
    if start + 4 > end:
        return TRUNCATED, start, ET_NONE
    et = _family(buf[start], 2, 10, 10, 10)
    o = start + 4
    while o + 4 <= end:
        length = u16(buf, o, False)
        kind = u16(buf, o + 2, False) & 0x7FFF
        if kind >= 0x100:  # written on a big-endian host
            length = u16(buf, o, True)
            kind = u16(buf, o + 2, True) & 0x7FFF
        if length < 4:
            return MALFORMED, o, ET_NONE
        if kind == NFULA_PAYLOAD:
            return OK, o + 4, et
        o += (length + 3) & ~3
    return (NON_IP if o == end else TRUNCATED), o, ET_NONE


@inner
def host_link(buf, start, end, linktype):
    """``(reason, offset, ethertype)`` of a raw IP, NULL/LOOP, IPNET or NFLOG frame."""
    if linktype == 101 or linktype == 12 or linktype == 14:
        return OK, start, ET_GUESS
    if linktype == 228:
        return OK, start, 0x0800
    if linktype == 229:
        return OK, start, 0x86DD
    if linktype == 0 or linktype == 108:
        if start + 4 > end:
            return TRUNCATED, start, ET_NONE
        family = u32(buf, start, False)
        if family > 0xFFFF:  # written in the other byte order
            family = u32(buf, start, True)
        et = _family(family, 2, 24, 28, 30)
        return (OK if et != ET_NONE else NON_IP), start + 4, et
    if linktype == 226:
        if start + 24 > end:
            return TRUNCATED, start, ET_NONE
        et = _family(buf[start + 1], 2, 26, 26, 26)
        return (OK if et != ET_NONE else NON_IP), start + 24, et
    if linktype == 239:
        return _nflog(buf, start, end)
    return UNSUPPORTED, start, ET_NONE


@inner
def pktap_inner(buf, start, end):
    """``(reason, offset, linktype)`` of the frame after an Apple PKTAP header."""
    if start + 12 > end:
        return TRUNCATED, start, 0
    length = u32(buf, start, False)
    if length < PKTAP_MIN_HEADER:
        return MALFORMED, start, 0
    if start + length > end:
        return TRUNCATED, start, 0
    if u32(buf, start + 4, False) != 1:
        return NON_IP, start, 0
    return OK, start + length, u32(buf, start + 8, False)
