"""Record walks over a capture held in a ``uint8`` buffer (numba; no per-packet Python).

Each walk starts at byte ``pos``, writes keys and ``int64`` nanosecond timestamps into
``keys[n_out:]`` / ``ts[n_out:]`` until ``n_max`` keys, the end of the buffer, or a block it
leaves to Python, and returns where it stopped and why:

* ``FULL`` — the output arrays are full; call again from ``pos``.
* ``END`` — ``pos`` is exactly the end of the buffer.
* ``PARTIAL`` — the bytes from ``pos`` on are not a whole record: more data is needed, or at
  end of file the file was cut off mid-record.
* ``BAD`` — the record at ``pos`` is impossible (length field out of range): the file is
  corrupt from there on.
* ``HEADER`` — (pcapng) a section header or interface description block at ``pos``; Python
  parses it (rare) and calls again.

Skip reasons (dptop.capture.linklayer codes) are added to ``counts``.
"""
from __future__ import annotations

import numpy as np

from dptop.capture.linklayer import MALFORMED, OK, UNKNOWN_INTERFACE, UNSUPPORTED, source_of
from dptop.engine.core.jit import inner, kernel

FULL, END, PARTIAL, BAD, HEADER = 0, 1, 2, 3, 4

MAX_RECORD = 1 << 24
"""Largest captured length accepted (16 MiB, far above any link's snapshot length); a larger
length field means the file is corrupt from that record on."""

SHB = 0x0A0D0D0A
IDB = 1
PB = 2  # obsolete Packet Block
SPB = 3
EPB = 6

_NS = np.int64(1_000_000_000)


@inner
def u32(buf, o, big):
    if big:
        return ((np.int64(buf[o]) << 24) | (np.int64(buf[o + 1]) << 16)
                | (np.int64(buf[o + 2]) << 8) | np.int64(buf[o + 3]))
    return (np.int64(buf[o]) | (np.int64(buf[o + 1]) << 8) | (np.int64(buf[o + 2]) << 16)
            | (np.int64(buf[o + 3]) << 24))


@inner
def u16(buf, o, big):
    if big:
        return (np.int64(buf[o]) << 8) | np.int64(buf[o + 1])
    return np.int64(buf[o]) | (np.int64(buf[o + 1]) << 8)


@kernel
def walk_pcap(buf, pos, big, frac_ns, rec_hdr, linktype, keys, ts, n_out, n_max, counts):
    """Classic pcap records (``rec_hdr`` 16, or 24 for the 'modified' Kuznetzov format);
    ``frac_ns`` = 1000 for microsecond files, 1 for nanosecond files.
    Returns ``(pos, n_out, records, stop)``."""
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
        reason, hi, lo = source_of(buf, start, start + incl, linktype)
        if reason == OK:
            keys[n_out, 0] = hi
            keys[n_out, 1] = lo
            ts[n_out] = u32(buf, pos, big) * _NS + u32(buf, pos + 4, big) * frac_ns
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
                keys, ts, n_out, n_max, counts, last_ts):
    """pcapng blocks of one section whose interfaces are described by the ``if_*`` arrays
    (link type, snap length, timestamp conversion); packets of an interface with an unsupported
    link type are counted in ``if_unsup``. Simple Packet Blocks carry no time: they get the
    last time seen. Returns ``(pos, n_out, records, stop, last_ts)``."""
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
                if n_if > 0 and if_snap[0] > 0 and cap > if_snap[0]:
                    cap = if_snap[0]
                if start + cap > body_end:
                    cap = body_end - start
                t = last_ts
            else:
                iface = u32(buf, pos + 8, big) if btype == EPB else u16(buf, pos + 8, big)
                start = pos + 28
                cap = u32(buf, pos + 20, big)
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
                reason, hi, lo = source_of(buf, start, start + cap, if_link[iface])
                if reason == OK:
                    keys[n_out, 0] = hi
                    keys[n_out, 1] = lo
                    ts[n_out] = t
                    n_out += 1
                elif reason == UNSUPPORTED:
                    if_unsup[iface] += 1
                else:
                    counts[reason] += 1
        pos += blen
    return pos, n_out, records, stop, last_ts
