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
* ``HEADER`` — (pcapng) a section header or interface description block at ``pos``; Python
  parses it (rare) and calls again.

Skip reasons (dptop.capture.wire codes) are added to ``counts``.
"""
from __future__ import annotations

import numpy as np

from dptop.capture.linklayer import frame_addresses, store
from dptop.capture.wire import MALFORMED, OK, UNKNOWN_INTERFACE, UNSUPPORTED, u16, u32
from dptop.engine.core.jit import inner, kernel

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


@kernel
def walk_pcap(buf, pos, big, frac_ns, rec_hdr, linktype, keys, dst, ts, length, n_out, n_max, counts):
    """Classic pcap records (``rec_hdr`` 16, or 24 for the 'modified' Kuznetzov format);
    ``frac_ns`` = 1000 for microsecond files, 1 for nanosecond files.
    Returns ``(pos, n_out, records, stop)``."""
    if linktype == 1:  # an Ethernet-only copy of the loop (linklayer.frame_addresses)
        return _walk_pcap(buf, pos, big, frac_ns, rec_hdr, linktype, keys, dst, ts, length, n_out, n_max,
                          counts, True)
    return _walk_pcap(buf, pos, big, frac_ns, rec_hdr, linktype, keys, dst, ts, length, n_out, n_max,
                      counts, False)


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


@kernel
def walk_pcapng(buf, pos, big, if_link, if_snap, if_mul, if_div, if_shift, if_off, if_unsup,
                keys, dst, ts, length, n_out, n_max, counts, last_ts):
    """pcapng blocks of one section whose interfaces are described by the ``if_*`` arrays
    (link type, snap length, timestamp conversion); packets of an interface with an unsupported
    link type are counted in ``if_unsup``. Simple Packet Blocks carry no time: they get the
    last time seen. Returns ``(pos, n_out, records, stop, last_ts)``."""
    if np.all(if_link == 1):  # an Ethernet-only copy of the loop (linklayer.frame_addresses)
        return _walk_pcapng(buf, pos, big, if_link, if_snap, if_mul, if_div, if_shift, if_off, if_unsup,
                            keys, dst, ts, length, n_out, n_max, counts, last_ts, True)
    return _walk_pcapng(buf, pos, big, if_link, if_snap, if_mul, if_div, if_shift, if_off, if_unsup,
                        keys, dst, ts, length, n_out, n_max, counts, last_ts, False)


@inner
def _walk_pcapng(buf, pos, big, if_link, if_snap, if_mul, if_div, if_shift, if_off, if_unsup,
                 keys, dst, ts, length, n_out, n_max, counts, last_ts, ether_only):
    n = len(buf)
    n_if = len(if_link)
    records = 0
    stop = FULL
    while n_out < n_max:
        if pos + 12 > n:
            stop = PARTIAL if pos < n else END
            break
        btype = u32(buf, pos, big)
        if btype == SHB or btype == IDB:
            stop = HEADER
            break
        blen = u32(buf, pos + 4, big)
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
                reason, src_hi, src_lo, dst_hi, dst_lo, flow = frame_addresses(buf, start, start + cap,
                                                                               if_link[iface], ether_only)
                if reason == OK:
                    store(keys, dst, ts, length, n_out, src_hi, src_lo, dst_hi, dst_lo, flow, t, wire)
                    n_out += 1
                elif reason == UNSUPPORTED:
                    if_unsup[iface] += 1
                elif reason != OK:
                    counts[reason] += 1
        pos += blen
    return pos, n_out, records, stop, last_ts
