"""Ethernet-like link layers and the ethertype walk (numba; used by dptop.capture.linklayer).

Link-layer parsers here and in the other ``link_*`` modules return ``(reason, offset, ethertype)``:
where the network layer starts and what announces it. Besides real ethertypes, ``ET_LLC`` (any
802.3 length) says an 802.2 LLC header follows, ``ET_GUESS`` says an IP header follows whose
version nibble decides, and ``ET_NONE`` says nothing IP follows. ``ethertype_payload`` then walks
to the IP header:

* 802.1Q / 802.1ad tags (0x8100, 0x88a8, 0x9100), Cisco VN-Tag (0x8926, 4-byte tag), 802.1BR
  E-Tag (0x893f, 6-byte tag) and 802.1ah PBB I-Tag (0x88e7: 4-byte tag, then the customer's
  destination and source addresses and ethertype), in any number and order;
* MPLS label stacks (0x8847, 0x8848): after the bottom-of-stack label, IP by its version nibble;
* PPPoE session frames (0x8864: 6-byte header, then the PPP protocol);
* 802.2 LLC/SNAP with OUI 00-00-00 (RFC 1042) or 00-00-f8 (802.1H): the SNAP ethertype.
"""
from __future__ import annotations

from dptop.capture.wire import NON_IP, OK, TRUNCATED, UNSUPPORTED, u16
from dptop.engine.core.jit import inner

ET_LLC = 0
ET_GUESS = 0x1_0000
ET_NONE = 0x1_0001

ETHER_LINKTYPES = frozenset({1, 10, 113, 242, 276})
"""Ethernet (1), FDDI (10), Linux cooked SLL (113) and SLL2 (276), IP over InfiniBand (242)."""


@inner
def ppp_ethertype(protocol):
    """PPP protocol number -> the ethertype of the same payload (``ET_NONE`` if not IP/MPLS)."""
    if protocol == 0x0021:
        return 0x0800
    if protocol == 0x0057:
        return 0x86DD
    if protocol == 0x0281:
        return 0x8847
    if protocol == 0x0283:
        return 0x8848
    return ET_NONE


@inner
def ether_link(buf, start, end, linktype):
    """Ethernet-like frames: the fixed header, then its ethertype (or LLC)."""
    if linktype == 1:
        if start + 14 > end:
            return TRUNCATED, start, ET_NONE
        return OK, start + 14, u16(buf, start + 12, True)
    if linktype == 113:
        if start + 16 > end:
            return TRUNCATED, start, ET_NONE
        return OK, start + 16, u16(buf, start + 14, True)
    if linktype == 276:
        if start + 20 > end:
            return TRUNCATED, start, ET_NONE
        return OK, start + 20, u16(buf, start, True)
    if linktype == 10:  # FDDI: frame control, 6-byte addresses; LLC frames only (FC 0x50-0x57, 0xd0)
        if start + 13 > end:
            return TRUNCATED, start, ET_NONE
        fc = buf[start]
        if (fc & 0xF8) == 0x50 or fc == 0xD0:
            return OK, start + 13, ET_LLC
        return NON_IP, start, ET_NONE
    if linktype == 242:  # IPoIB: 40-byte GRH / destination pseudo-header, then type + reserved
        if start + 44 > end:
            return TRUNCATED, start, ET_NONE
        return OK, start + 44, u16(buf, start + 40, True)
    return UNSUPPORTED, start, ET_NONE


@inner
def ethertype_payload(buf, o, end, ethertype):
    """From the payload at ``o`` announced by ``ethertype`` to the IP header:
    ``(reason, offset, version)``, version 4, 6 or 0 (by the header's nibble)."""
    et = ethertype
    while True:
        skip = 0
        at = 0
        if et == 0x0800:
            return OK, o, 4
        if et == 0x86DD:
            return OK, o, 6
        if et == 0x8100 or et == 0x88A8 or et == 0x9100:
            skip, at = 4, 2
        elif et == 0x8926:  # VN-Tag
            skip, at = 6, 4
        elif et == 0x893F:  # E-Tag
            skip, at = 8, 6
        elif et == 0x88E7:  # I-Tag, customer destination and source
            skip, at = 18, 16
        elif et == 0x8847 or et == 0x8848:
            while True:
                if o + 4 > end:
                    return TRUNCATED, o, 0
                bottom = buf[o + 2] & 1
                o += 4
                if bottom:
                    return OK, o, 0
        elif et == 0x8864:  # PPPoE session: 6-byte header, then the 2-byte PPP protocol
            skip, at = 8, 6
        elif et == ET_GUESS:
            return OK, o, 0
        elif et <= 1500:  # an 802.3 length: only LLC/SNAP with an ethertype OUI carries one
            if (o + 8 <= end and buf[o] == 0xAA and buf[o + 1] == 0xAA and buf[o + 2] == 3
                    and buf[o + 3] == 0 and buf[o + 4] == 0 and (buf[o + 5] == 0 or buf[o + 5] == 0xF8)):
                skip, at = 8, 6
            else:
                return NON_IP, o, 0
        else:
            return NON_IP, o, 0
        if o + skip > end:
            return TRUNCATED, o, 0
        nxt = u16(buf, o + at, True)
        et = ppp_ethertype(nxt) if et == 0x8864 else nxt
        o += skip
