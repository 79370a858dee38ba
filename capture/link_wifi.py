"""IEEE 802.11 link layers (numba; used by dptop.capture.linklayer).

* 802.11 (105): data frames only (type 2; management, control and null-function frames are
  counted as ``NON_DATA_80211``, frames with the Protected bit as ``PROTECTED_80211``). The MAC
  header is 24 bytes, +6 with both To-DS and From-DS (fourth address), +2 for QoS subtypes, +4
  when a QoS frame has the Order bit (HT control); an A-MSDU (QoS control bit 7) is read from its
  first subframe (14-byte subframe header). LLC/SNAP follows.
* radiotap (127): ``it_len`` bytes of radiotap header, then 802.11; its Flags field (present bit
  1, after the TSFT field when present bit 0 is set) bit 0x20 says the MAC header is padded to a
  multiple of 4 bytes.
* PPI (192): ``pph_len`` bytes of PPI header, then a frame of link type ``pph_dlt``
  (``ppi_inner``; the dispatcher parses that frame).
"""
from __future__ import annotations

from dptop.capture.link_ether import ET_LLC, ET_NONE
from dptop.capture.wire import MALFORMED, NON_DATA_80211, OK, PROTECTED_80211, TRUNCATED, UNSUPPORTED, u16, u32
from dptop.engine.core.jit import inner

WIFI_LINKTYPES = frozenset({105, 127, 192})


@inner
def _dot11(buf, o, end, padded):
    if o + 2 > end:
        return TRUNCATED, o, ET_NONE
    fc0 = buf[o]
    fc1 = buf[o + 1]
    if (fc0 & 0x03) != 0 or ((fc0 >> 2) & 0x03) != 2 or (fc0 & 0x40):  # version 0, type data, not null
        return NON_DATA_80211, o, ET_NONE
    if fc1 & 0x40:
        return PROTECTED_80211, o, ET_NONE
    hdr = 30 if (fc1 & 0x03) == 0x03 else 24
    amsdu = False
    if fc0 & 0x80:  # QoS subtype
        if o + hdr + 2 > end:
            return TRUNCATED, o, ET_NONE
        amsdu = (buf[o + hdr] & 0x80) != 0
        hdr += 6 if fc1 & 0x80 else 2
    if padded:
        hdr = (hdr + 3) & ~3
    o += hdr + (14 if amsdu else 0)
    if o > end:
        return TRUNCATED, o, ET_NONE
    return OK, o, ET_LLC


@inner
def _radiotap(buf, o, end):
    if o + 8 > end:
        return TRUNCATED, o, ET_NONE
    it_len = u16(buf, o + 2, False)
    if buf[o] != 0 or it_len < 8:
        return MALFORMED, o, ET_NONE
    if o + it_len > end:
        return TRUNCATED, o, ET_NONE
    present = u32(buf, o + 4, False)
    padded = False
    if present & 2:  # Flags field present: it follows the presence words and TSFT (8, 8-aligned)
        p = 4
        while p + 4 <= it_len and (u32(buf, o + p, False) & 0x8000_0000):
            p += 4
        p += 4
        if present & 1:
            p = ((p + 7) & ~7) + 8
        if p < it_len:
            padded = (buf[o + p] & 0x20) != 0
    return _dot11(buf, o + it_len, end, padded)


@inner
def wifi_link(buf, start, end, linktype):
    """``(reason, offset, ethertype)`` of an 802.11 frame, bare (105) or after radiotap (127)."""
    if linktype == 105:
        return _dot11(buf, start, end, False)
    if linktype == 127:
        return _radiotap(buf, start, end)
    return UNSUPPORTED, start, ET_NONE


@inner
def ppi_inner(buf, start, end):
    """``(reason, offset, linktype)`` of the frame after a PPI header."""
    if start + 8 > end:
        return TRUNCATED, start, 0
    pph_len = u16(buf, start + 2, False)
    if buf[start] != 0 or pph_len < 8:
        return MALFORMED, start, 0
    if start + pph_len > end:
        return TRUNCATED, start, 0
    return OK, start + pph_len, u32(buf, start + 4, False)
