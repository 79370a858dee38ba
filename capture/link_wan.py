"""Serial-line link layers (numba; used by dptop.capture.linklayer): PPP, Cisco HDLC, Frame Relay.

* PPP (9) and PPP in HDLC-like framing (50): optional address/control ``ff 03`` (RFC 1662),
  then the protocol field, one byte when compressed (odd first byte, RFC 1661 §6.5); a first byte
  ``0f`` / ``8f`` is Cisco HDLC framing instead (RFC 1547 §4.3.1);
* Cisco HDLC (104): address, control, then an ethertype;
* Frame Relay (107): a Q.922 address of 2 to 4 bytes (ended by its EA bit), then RFC 2427
  multiprotocol encapsulation: control ``03``, an optional ``00`` pad, and the NLPID (``cc``
  IPv4, ``8e`` IPv6, ``cf`` PPP, ``80`` SNAP with OUI 00-00-00). Any other control byte is
  Cisco's encapsulation: an ethertype right after the address.
"""
from __future__ import annotations

from dptop.capture.link_ether import ET_NONE, ppp_ethertype
from dptop.capture.wire import NON_IP, OK, TRUNCATED, UNSUPPORTED, u16
from dptop.engine.core.jit import inner

WAN_LINKTYPES = frozenset({9, 50, 104, 107})


@inner
def _ppp(buf, o, end):
    if o + 2 <= end and buf[o] == 0xFF and buf[o + 1] == 0x03:
        o += 2
    if o >= end:
        return TRUNCATED, o, ET_NONE
    if buf[o] & 1:
        return OK, o + 1, ppp_ethertype(buf[o])
    if o + 2 > end:
        return TRUNCATED, o, ET_NONE
    return OK, o + 2, ppp_ethertype(u16(buf, o, True))


@inner
def _cisco_hdlc(buf, o, end):
    if o + 4 > end:
        return TRUNCATED, o, ET_NONE
    return OK, o + 4, u16(buf, o + 2, True)


@inner
def _frame_relay(buf, o, end):
    n = 0
    while True:  # Q.922 address: the last byte has the EA bit (0x01) set
        if o >= end:
            return TRUNCATED, o, ET_NONE
        last = buf[o] & 1
        o += 1
        n += 1
        if last:
            break
        if n == 4:
            return NON_IP, o, ET_NONE
    if n == 1:  # the first address byte never ends the address
        return NON_IP, o, ET_NONE
    if o >= end:
        return TRUNCATED, o, ET_NONE
    if buf[o] != 0x03:
        if o + 2 > end:
            return TRUNCATED, o, ET_NONE
        return OK, o + 2, u16(buf, o, True)
    o += 1
    if o < end and buf[o] == 0:
        o += 1
    if o >= end:
        return TRUNCATED, o, ET_NONE
    nlpid = buf[o]
    o += 1
    if nlpid == 0xCC:
        return OK, o, 0x0800
    if nlpid == 0x8E:
        return OK, o, 0x86DD
    if nlpid == 0xCF:
        return _ppp(buf, o, end)
    if nlpid == 0x80:
        if o + 5 > end:
            return TRUNCATED, o, ET_NONE
        if buf[o] == 0 and buf[o + 1] == 0 and buf[o + 2] == 0:
            return OK, o + 5, u16(buf, o + 3, True)
    return NON_IP, o, ET_NONE


@inner
def wan_link(buf, start, end, linktype):
    """``(reason, offset, ethertype)`` of a PPP / Cisco HDLC / Frame Relay frame."""
    if linktype == 9 or linktype == 50:
        if start < end and (buf[start] == 0x0F or buf[start] == 0x8F):
            return _cisco_hdlc(buf, start, end)
        return _ppp(buf, start, end)
    if linktype == 104:
        return _cisco_hdlc(buf, start, end)
    if linktype == 107:
        return _frame_relay(buf, start, end)
    return UNSUPPORTED, start, ET_NONE
