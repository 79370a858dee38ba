"""Record walks over a capture held in a ``uint8`` buffer (numba; no per-packet Python).

Each walk starts at byte ``pos``, writes source keys, destination keys, ``int64`` nanosecond
timestamps and ``uint32`` (original wire length, flow word) pairs into ``keys[n_out:]``, ``dst[n_out:]``,
``ts[n_out:]``, ``length[n_out:]`` until ``n_max`` rows, the end of the buffer, or a block it
leaves to Python, and returns where it stopped and why:

* ``FULL`` — the output arrays are full; call again from ``pos``.
* ``END`` — ``pos`` is exactly the end of the buffer.
* ``PARTIAL`` — the bytes from ``pos`` on are not a whole record: more data is needed, or at
  end of file the file was cut off mid-record.
* ``BAD`` — the record at ``pos`` is impossible (length field out of range): the file is
  corrupt from there on.
* ``HEADER`` — (pcapng) a section header or interface description block at ``pos`` that the walk
  leaves to Python: cut by the end of the buffer, invalid, needing a warning, an interface table
  that is full, or a non-Ethernet interface in the Ethernet-only loop. Python parses it and calls
  again; every other header block is read inside the walk, so a file of millions of them costs
  no Python per block.

Skip reasons (dptop.capture.wire codes) are added to ``counts``.
"""
from __future__ import annotations

import numpy as np

from dptop.capture.linklayer import frame_addresses, store
from dptop.capture.wire import MALFORMED, OK, UNKNOWN_INTERFACE, UNSUPPORTED, u16, u32
from dptop.engine.core.jit import hot, inner

FULL, END, PARTIAL, BAD, HEADER = 0, 1, 2, 3, 4

MAX_RECORD = 1 << 24
"""Largest captured length accepted (16 MiB, far above any link's snapshot length); a larger
length field means the file is corrupt from that record on. pcapng header blocks are held to
the same bound, so no length field makes the reader buffer more than this."""

SHB = 0x0A0D0D0A
IDB = 1
PB = 2  # obsolete Packet Block
SPB = 3
EPB = 6

_NS = np.int64(1_000_000_000)
_POW10 = np.array([10 ** i for i in range(19)], np.int64)

MAX_TSOFFSET_S = 1 << 32
"""Largest ``if_tsoffset`` magnitude taken (seconds): its nanoseconds, plus any time stamp up to
about 2100, still fit the int64 nanosecond clock. A larger offset is ignored with a warning."""


@hot
def walk_pcap(buf, pos, big, frac_ns, rec_hdr, linktype, keys, dst, ts, length, n_out, n_max, counts):
    """Classic pcap records (``rec_hdr`` 16, or 24 for the 'modified' Kuznetzov format);
    ``frac_ns`` = 1000 for microsecond files, 1 for nanosecond files.
    Returns ``(pos, n_out, records, stop)``."""
    if linktype == 1:  # an Ethernet-only copy of the loop (linklayer.frame_addresses)
        if not big and rec_hdr == 16:  # the usual file: constant byte order and header length
            return _walk_pcap(buf, pos, False, frac_ns, 16, 1, keys, dst, ts, length, n_out, n_max, counts, True)
        return _walk_pcap(buf, pos, big, frac_ns, rec_hdr, linktype, keys, dst, ts, length, n_out, n_max,
                          counts, True)
    return _walk_pcap(buf, pos, big, frac_ns, rec_hdr, linktype, keys, dst, ts, length, n_out, n_max,
                      counts, False)


@hot
def count_pcap(buf, pos, big, rec_hdr, until):
    """The record walk of ``walk_pcap`` without reading the frames (``count_packets``): returns
    ``(pos, records, stop)``; ``FULL`` once ``pos`` reaches byte ``until``."""
    n = len(buf)
    records = 0
    while pos < until:
        if pos + rec_hdr > n:
            return pos, records, PARTIAL if pos < n else END
        incl = u32(buf, pos + 8, big)
        if incl > MAX_RECORD:
            return pos, records, BAD
        if pos + rec_hdr + incl > n:
            return pos, records, PARTIAL
        records += 1
        pos += rec_hdr + incl
    return pos, records, FULL


@inner
def _walk_pcap(buf, pos, big, frac_ns, rec_hdr, linktype, keys, dst, ts, length, n_out, n_max, counts,
               ether_only):
    n = len(buf)
    records = 0
    stop = FULL
    while n_out < n_max:
        if pos + rec_hdr > n:
            stop = PARTIAL if pos < n else END
            break
        incl = u32(buf, pos + 8, big)
        if incl > MAX_RECORD:
            stop = BAD
            break
        start = pos + rec_hdr
        if start + incl > n:
            stop = PARTIAL
            break
        records += 1
        reason, src_hi, src_lo, dst_hi, dst_lo, flow = frame_addresses(buf, start, start + incl, linktype, ether_only)
        if reason == OK:
            store(keys, dst, ts, length, n_out, src_hi, src_lo, dst_hi, dst_lo, flow,
                  u32(buf, pos, big) * _NS + u32(buf, pos + 4, big) * frac_ns, u32(buf, pos + 12, big))
            n_out += 1
        else:
            counts[reason] += 1
        pos = start + incl
    return pos, n_out, records, stop


@inner
def pcapng_time(raw, mul, div, shift, offset_ns):
    """pcapng timestamp units -> ns: ``raw * mul // div`` for a power-of-ten resolution,
    ``raw / 2^shift`` seconds when ``shift >= 0`` (a power-of-two resolution)."""
    if shift >= 0:
        whole = raw >> shift
        frac = raw - (whole << shift)
        if shift <= 32:
            return offset_ns + whole * _NS + ((frac * _NS) >> shift)
        return offset_ns + whole * _NS + np.int64(np.float64(frac) * 1e9 / np.float64(2.0) ** shift)
    return offset_ns + (raw * mul) // div


@hot
def walk_pcapng(buf, pos, big, if_link, if_snap, if_mul, if_div, if_shift, if_off, n_if, ether_only,
                link_supported, link_idbs, link_unsup, keys, dst, ts, length, n_out, n_max, counts, last_ts):
    """pcapng blocks: the packets, and the section headers and interface descriptions that are
    whole in the buffer, valid and need no warning (so the walk stays linear in the file however
    many of them there are). The first ``n_if`` entries of the ``if_*`` arrays describe the current
    section's interfaces (link type, snap length, timestamp conversion); an interface block is
    appended there and counted in ``link_idbs`` by link type; packets of an unsupported link type
    (``link_supported``) are counted in ``link_unsup``. ``ether_only``: every interface so far is
    Ethernet (an interface of another type stops the walk so the caller can switch). Simple Packet
    Blocks carry no time: they get the last time seen.
    Returns ``(pos, n_out, records, stop, last_ts, big, n_if)``."""
    if ether_only:  # an Ethernet-only copy of the loop (linklayer.frame_addresses)
        return _walk_pcapng(buf, pos, big, if_link, if_snap, if_mul, if_div, if_shift, if_off, n_if,
                            link_supported, link_idbs, link_unsup, keys, dst, ts, length, n_out, n_max,
                            counts, last_ts, True)
    return _walk_pcapng(buf, pos, big, if_link, if_snap, if_mul, if_div, if_shift, if_off, n_if,
                        link_supported, link_idbs, link_unsup, keys, dst, ts, length, n_out, n_max, counts,
                        last_ts, False)


@inner
def _section_order(buf, pos):
    """0 little-endian, 1 big-endian, -1 not a byte-order magic, from a section header at ``pos``."""
    b = buf[pos + 8]
    if b == 0x1A and buf[pos + 9] == 0x2B and buf[pos + 10] == 0x3C and buf[pos + 11] == 0x4D:
        return 1
    if b == 0x4D and buf[pos + 9] == 0x3C and buf[pos + 10] == 0x2B and buf[pos + 11] == 0x1A:
        return 0
    return -1


@inner
def _interface_options(buf, pos, blen, big):
    """``(if_tsresol, if_tsoffset)`` of the interface block at ``pos`` (defaults 6 and 0)."""
    resol, offset = 6, np.int64(0)
    o = pos + 16
    end = pos + blen - 4
    while o + 4 <= end:
        code, olen = u16(buf, o, big), u16(buf, o + 2, big)
        if code == 0 or o + 4 + olen > end:
            break
        if code == 9 and olen >= 1:
            resol = np.int64(buf[o + 4])
        elif code == 14 and olen >= 8:
            lo, hi = u32(buf, o + 4, big), u32(buf, o + 8, big)
            if big:
                lo, hi = hi, lo
            offset = (hi << 32) | lo  # wraps to the signed 64-bit value
        o += 4 + ((olen + 3) & ~3)
    return resol, offset


@inner
def _walk_pcapng(buf, pos, big, if_link, if_snap, if_mul, if_div, if_shift, if_off, n_if, link_supported,
                 link_idbs, link_unsup, keys, dst, ts, length, n_out, n_max, counts, last_ts, ether_only):
    n = len(buf)
    records = 0
    stop = FULL
    while n_out < n_max:
        if pos + 12 > n:
            stop = PARTIAL if pos < n else END
            break
        btype = u32(buf, pos, big)
        if btype == SHB:
            order = _section_order(buf, pos) if pos + 28 <= n else -1
            if order < 0:
                stop = HEADER
                break
            sblen = u32(buf, pos + 4, order == 1)
            if (sblen < 28 or sblen % 4 != 0 or sblen > MAX_RECORD or pos + sblen > n
                    or u16(buf, pos + 12, order == 1) != 1):
                stop = HEADER
                break
            big = order == 1
            n_if = 0
            pos += sblen
            continue
        blen = u32(buf, pos + 4, big)
        if btype == IDB:
            if blen < 20 or blen % 4 != 0 or blen > MAX_RECORD or pos + blen > n or n_if == len(if_link):
                stop = HEADER
                break
            lt = u16(buf, pos + 8, big)
            resol, offset = _interface_options(buf, pos, blen, big)
            if (ether_only and lt != 1) or offset > MAX_TSOFFSET_S or offset < -MAX_TSOFFSET_S or (
                    resol < 0x80 and resol > 18):
                stop = HEADER  # the caller switches loops or warns
                break
            if_link[n_if], if_snap[n_if], if_off[n_if] = lt, u32(buf, pos + 12, big), offset * _NS
            if_mul[n_if], if_div[n_if], if_shift[n_if] = 1, 1, -1
            if resol >= 0x80:
                if_shift[n_if] = min(resol & 0x7F, 62)
            elif resol <= 9:
                if_mul[n_if] = _POW10[9 - resol]
            else:
                if_div[n_if] = _POW10[resol - 9]
            link_idbs[lt] += 1
            n_if += 1
            pos += blen
            continue
        if blen < 12 or blen % 4 != 0 or blen > MAX_RECORD + 64:
            stop = BAD
            break
        if pos + blen > n:
            stop = PARTIAL
            break
        if u32(buf, pos + blen - 4, big) != blen:
            stop = BAD
            break
        body_end = pos + blen - 4
        if btype == EPB or btype == PB or btype == SPB:
            records += 1
            if blen < (16 if btype == SPB else 32):
                counts[MALFORMED] += 1
                pos += blen
                continue
            if btype == SPB:
                iface = 0
                start = pos + 12
                cap = u32(buf, pos + 8, big)
                wire = cap
                if n_if > 0 and if_snap[0] > 0 and cap > if_snap[0]:
                    cap = if_snap[0]
                if start + cap > body_end:
                    cap = body_end - start
                t = last_ts
            else:
                iface = u32(buf, pos + 8, big) if btype == EPB else u16(buf, pos + 8, big)
                start = pos + 28
                cap = u32(buf, pos + 20, big)
                wire = u32(buf, pos + 24, big)
                t = 0
                if iface < n_if:
                    raw = (u32(buf, pos + 12, big) << 32) | u32(buf, pos + 16, big)
                    t = pcapng_time(raw, if_mul[iface], if_div[iface], if_shift[iface], if_off[iface])
            if start + cap > body_end:
                counts[MALFORMED] += 1
            elif iface >= n_if:
                counts[UNKNOWN_INTERFACE] += 1
            else:
                last_ts = t
                lt = if_link[iface]
                reason, src_hi, src_lo, dst_hi, dst_lo, flow = frame_addresses(buf, start, start + cap, lt,
                                                                               ether_only)
                if reason == OK:
                    store(keys, dst, ts, length, n_out, src_hi, src_lo, dst_hi, dst_lo, flow, t, wire)
                    n_out += 1
                elif reason == UNSUPPORTED:
                    link_unsup[lt] += 1
                elif reason != OK:
                    counts[reason] += 1
        pos += blen
    return pos, n_out, records, stop, last_ts, big, n_if
