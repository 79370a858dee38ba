"""Capture files -> key batches: classic pcap and pcapng, plain or gzip-compressed.

* pcap: both byte orders, microsecond (a1b2c3d4) and nanosecond (a1b23c4d) magic, and the
  'modified' format (a1b2cd34, 24-byte record headers). The link type is the low 16 bits of the
  header's link-type field (the upper bits carry the FCS flag and length).
* pcapng: SHB (either byte order, several sections), IDB (per-interface link type, snap length,
  ``if_tsresol``, ``if_tsoffset``), EPB, SPB and the obsolete PB; other blocks are skipped.

Every length field is checked against ``records.MAX_RECORD`` before anything is buffered, so a
corrupt or hostile length never makes the reader hold more than that (plus one gzip chunk).
Warnings are kept once each, with a count when repeated.

The record walk is numba (dptop.capture.records) over chunks read from the file or decompressed gzip
chunks; Python only parses file and interface headers. Frames become keys by capture.linklayer;
the rest are counted in ``CaptureStats.skipped`` by reason. A file cut off mid-record yields
every complete record plus a warning; a file that is not a capture raises ``CaptureError``.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np

from dptop.capture import records as rec
from dptop.capture.filebytes import GzipBytes, open_bytes
from dptop.capture.linklayer import LINKTYPE_MASK, SUPPORTED_LINKTYPES, BlockPool, batch_of, output_rows
from dptop.capture.wire import N_REASONS, REASON_NAMES, UNSUPPORTED
from dptop.engine.core.keys import KeyBatch, concat

MAX_TSOFFSET_S = rec.MAX_TSOFFSET_S
COUNT_STEP = 1 << 24
"""Bytes ``count_packets`` walks per kernel call: the pages behind are released between calls."""
MAX_WARNINGS = 64
"""Distinct warnings kept per reader; later new ones are counted in one last line."""
_LINK_SUPPORTED = np.zeros(LINKTYPE_MASK + 1, np.bool_)
_LINK_SUPPORTED[sorted(SUPPORTED_LINKTYPES)] = True


class CaptureError(Exception):
    """A capture file that cannot be read; the message names the file and what was expected."""


@dataclass
class CaptureStats:
    """What a reader has done so far (updated after every kernel call)."""

    packets: int = 0
    """Records read (every packet record, IP or not)."""
    ip_packets: int = 0
    """Keys emitted."""
    skipped: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    """Each distinct warning once, in order of first appearance; ``(n times)`` when repeated."""
    bytes_done: int = 0
    bytes_total: int = 0
    format: str = ""
    incomplete: bool = False
    """The reader stopped before the end of the file's data (a corrupt record, corrupt gzip data, a
    file that shrank while it was read): what it read is a part of the capture."""
    _seen: dict[str, int] = field(default_factory=dict, repr=False)
    _index: dict[str, int] = field(default_factory=dict, repr=False)
    _more: int = field(default=0, repr=False)

    @property
    def fraction(self) -> float | None:
        return min(1.0, self.bytes_done / self.bytes_total) if self.bytes_total else None

    def warn(self, text: str, times: int = 1) -> None:
        """Add a warning; a repeated one is shown once with its count. Past ``MAX_WARNINGS``
        distinct ones, new ones are only counted (a hostile file cannot grow the list)."""
        if text not in self._seen and len(self._seen) >= MAX_WARNINGS:
            self._more += times
            more = f"{self._more} more warnings not shown"
            self.warnings[MAX_WARNINGS:] = [more]
            return
        self._seen[text] = count = self._seen.get(text, 0) + times
        index = self._index.setdefault(text, len(self._index))
        line = text if count == 1 else f"{text} ({count} times)"
        if index < len(self.warnings):
            self.warnings[index] = line
        else:
            self.warnings.append(line)


PCAP_MAGICS = {  # first four bytes -> (big endian, ns per fraction unit, record header length)
    b"\xd4\xc3\xb2\xa1": (False, 1000, 16), b"\xa1\xb2\xc3\xd4": (True, 1000, 16),
    b"\x4d\x3c\xb2\xa1": (False, 1, 16), b"\xa1\xb2\x3c\x4d": (True, 1, 16),
    b"\x34\xcd\xb2\xa1": (False, 1000, 24), b"\xa1\xb2\xcd\x34": (True, 1000, 24),
}
PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"
_EXPECTED = ("expected a pcap file (magic a1b2c3d4 or a1b23c4d, either byte order), "
             "a pcapng file (section header 0a0d0d0a) or either of them gzip-compressed")


def _linktype_name(lt: int) -> str:
    return f"unsupported link type {lt}"


class CaptureReader:
    """Reads one capture file in key batches. Use ``open_capture(path)``."""

    def __init__(self, path):
        self.path = Path(path)
        self._src = open_bytes(self.path, CaptureError)
        self.stats = CaptureStats(bytes_total=self._src.size)
        self._counts = np.zeros(N_REASONS, np.int64)
        self._link_idbs = np.zeros(LINKTYPE_MASK + 1, np.int64)  # interfaces read by the walk, per link type
        self._link_noted = np.zeros(LINKTYPE_MASK + 1, np.int64)  # ... of them already warned about
        self._link_unsup = np.zeros(LINKTYPE_MASK + 1, np.int64)  # packets of unsupported link types
        self._pos = 0
        self._done = False
        try:
            self._start()
        except BaseException:
            self._src.close()
            raise

    # ----- file header -------------------------------------------------------------------
    def _ensure(self, n: int) -> bool:
        """At least ``n`` bytes from ``_pos`` are in the buffer (refilling gzip chunks)."""
        while len(self._src.buf) - self._pos < n:
            if not self._src.refill(self._pos):
                return False
            self._pos = 0
        return True

    def _fail(self, what: str) -> CaptureError:
        return CaptureError(f"{self.path}: {what}")

    def _start(self) -> None:
        gz = " (gzip)" if isinstance(self._src, GzipBytes) else ""
        if not self._ensure(4):
            have = len(self._src.buf)
            raise self._fail(f"{'empty file' if have == 0 else f'only {have} bytes'}; {_EXPECTED}")
        magic = bytes(self._src.buf[:4])
        if magic in PCAP_MAGICS:
            self._big, self._frac_ns, self._rec_hdr = PCAP_MAGICS[magic]
            self.stats.format = ("pcap-ns" if self._frac_ns == 1 else "pcap") + gz
            if not self._ensure(24):
                raise self._fail(f"pcap file header cut off ({len(self._src.buf)} of 24 bytes)")
            major, _minor, _zone, _sigfigs, _snap, lt = struct.unpack(
                (">" if self._big else "<") + "HHiIII", bytes(self._src.buf[4:24]))
            if major != 2:
                self.stats.warn(f"{self.path}: pcap version {major} (expected 2)")
            self._linktype = lt & LINKTYPE_MASK
            self._note_linktype(self._linktype)
            self._pos = 24
            self._walk = self._walk_pcap
        elif magic == PCAPNG_MAGIC:
            self.stats.format = "pcapng" + gz
            self._if = _Interfaces()
            self._last_ts = 0
            self._big = False
            self._section(first=True)
            self._walk = self._walk_pcapng
        else:
            raise self._fail(f"not a capture file: it starts with {magic.hex()}; {_EXPECTED}")

    def _note_linktype(self, lt: int, times: int = 1) -> None:
        if lt not in SUPPORTED_LINKTYPES:
            self.stats.warn(
                f"{self.path}: link type {lt} is not supported; its packets are counted as skipped "
                f"(supported: {', '.join(map(str, sorted(SUPPORTED_LINKTYPES)))})", times)

    def _section(self, first: bool = False) -> bool:
        """Parse the SHB at ``_pos``; False (with a warning) if it is broken."""
        if not self._ensure(28):
            if first:
                raise self._fail("pcapng section header block cut off")
            self.stats.warn(f"{self.path}: pcapng section header cut off at end of file")
            return False
        buf = self._src.buf
        bom = bytes(buf[self._pos + 8:self._pos + 12])
        if bom not in (b"\x1a\x2b\x3c\x4d", b"\x4d\x3c\x2b\x1a"):
            msg = f"pcapng section header has byte-order magic {bom.hex()} (expected 1a2b3c4d either way round)"
            if first:
                raise self._fail(msg)
            self.stats.warn(f"{self.path}: {msg}; stopped reading there")
            return False
        self._big = bom == b"\x1a\x2b\x3c\x4d"
        blen = rec.u32(buf, self._pos + 4, self._big)
        major, minor = rec.u16(buf, self._pos + 12, self._big), rec.u16(buf, self._pos + 14, self._big)
        msg = None
        if blen < 28 or blen % 4 or blen > rec.MAX_RECORD or not self._ensure(blen):
            msg = f"pcapng section header has an invalid length ({blen})"
        elif major != 1:  # a new major version is not readable as 1.x (pcapng spec, Section Header Block)
            msg = f"pcapng section has format version {major}.{minor} (only 1.x is known)"
        if msg is not None:
            if first:
                raise self._fail(msg)
            self.stats.warn(f"{self.path}: {msg}; stopped reading there")
            return False
        self._if.n = 0
        self._pos += blen
        return True

    def _interface(self) -> bool:
        """Parse the IDB at ``_pos``; False (with a warning) if it is broken."""
        if not self._ensure(12):
            return self._cut("interface description block")
        blen = rec.u32(self._src.buf, self._pos + 4, self._big)
        if blen < 20 or blen % 4 or blen > rec.MAX_RECORD:
            self.stats.warn(
                f"{self.path}: interface description block at byte {self._src.base + self._pos} "
                f"has an invalid length ({blen}); stopped reading there")
            return False
        if not self._ensure(blen):
            return self._cut("interface description block")
        block = bytes(self._src.buf[self._pos:self._pos + blen])
        e = ">" if self._big else "<"
        lt, _reserved, snap = struct.unpack(e + "HHI", block[8:16])
        resol, offset = 6, 0
        o = 16
        while o + 4 <= blen - 4:
            code, olen = struct.unpack(e + "HH", block[o:o + 4])
            if code == 0 or o + 4 + olen > blen - 4:
                break
            value = block[o + 4:o + 4 + olen]
            if code == 9 and olen >= 1:
                resol = value[0]
            elif code == 14 and olen >= 8:
                offset = struct.unpack(e + "q", value[:8])[0]
            o += 4 + ((olen + 3) & ~3)
        self._if.add(lt & LINKTYPE_MASK, snap, resol, offset, self.stats.warn, self.path)
        self._note_linktype(lt & LINKTYPE_MASK)
        self._pos += blen
        return True

    def _cut(self, what: str) -> bool:
        self.stats.warn(f"{self.path}: file cut off inside a pcapng {what} "
                                   f"after {self.stats.packets} packets")
        return False

    # ----- record walk -------------------------------------------------------------------
    def _walk_pcap(self, rows, n, n_max):
        return rec.walk_pcap(self._src.buf, self._pos, self._big, self._frac_ns, self._rec_hdr,
                             self._linktype, *rows, n, n_max, self._counts)

    def _count_pcap(self, rows, n, n_max):
        pos, records, stop = rec.count_pcap(self._src.buf, self._pos, self._big, self._rec_hdr,
                                            self._pos + COUNT_STEP)
        return pos, n, records, stop

    def _walk_pcapng(self, rows, n, n_max):
        f = self._if
        pos, n, records, stop, self._last_ts, self._big, f.n = rec.walk_pcapng(
            self._src.buf, self._pos, self._big, f.link, f.snap, f.mul, f.div, f.shift, f.off, f.n,
            f.ether_only, _LINK_SUPPORTED, self._link_idbs, self._link_unsup, *rows, n, n_max,
            self._counts, self._last_ts)
        return pos, n, records, stop

    def _sync(self) -> None:
        skipped = {REASON_NAMES[r]: int(c) for r, c in enumerate(self._counts.tolist())
                   if c and r != UNSUPPORTED}
        if self._walk == self._walk_pcapng:  # per link type tables: only the pcapng walk fills them
            unsup = {int(lt): int(self._link_unsup[lt]) for lt in np.flatnonzero(self._link_unsup)}
            for lt in np.flatnonzero((self._link_idbs != self._link_noted) & ~_LINK_SUPPORTED):
                self._note_linktype(int(lt), int(self._link_idbs[lt] - self._link_noted[lt]))
            self._link_noted[:] = self._link_idbs
        else:
            unsup = {self._linktype: int(self._counts[UNSUPPORTED])} if self._counts[UNSUPPORTED] else {}
        for lt, c in unsup.items():
            skipped[_linktype_name(lt)] = c
        self.stats.skipped = skipped
        self.stats.bytes_done = self._src.done(self._pos)

    def _fill(self, rows) -> int:
        """Fill ``rows`` (``linklayer.output_rows``) from the file; the number of rows written
        (< their length only at the end, or after each step of ``count_packets``' walk)."""
        n, n_max = 0, len(rows[0])
        while n < n_max and not self._done:
            self._pos, n, records, stop = self._walk(rows, n, n_max)
            self.stats.packets += records
            if stop == rec.FULL:
                break
            if stop == rec.HEADER:
                btype = rec.u32(self._src.buf, self._pos, self._big)
                ok = self._section() if btype == rec.SHB else self._interface()
                self._done = not ok
            elif stop == rec.END or stop == rec.PARTIAL:
                if not self._src.refill(self._pos):
                    self._end(stop)
                else:
                    self._pos = 0
            elif stop == rec.BAD:
                self.stats.warn(
                    f"{self.path}: record at byte {self._src.base + self._pos} has an impossible length "
                    f"field (corrupt file); stopped after {self.stats.packets} packets")
                self._done = self.stats.incomplete = True
        self.stats.ip_packets += n
        self._sync()
        return n

    def _end(self, stop: int) -> None:
        self._done = True
        self.stats.incomplete = self.stats.incomplete or self._src.cut
        if self._src.warning:
            self.stats.warn(self._src.warning)
        left = len(self._src.buf) - self._pos
        if stop == rec.PARTIAL and left > 0 and not self._src.cut:  # a cut file: its own warning says it
            self.stats.warn(
                f"{self.path}: file cut off mid-record after {self.stats.packets} packets "
                f"({left} trailing bytes ignored)")

    def batches(self, batch_size: int = 65536) -> Iterator[KeyBatch]:
        """Batches of ``batch_size`` packets (the last may be shorter) in file order, with
        source and destination keys, time stamps and wire lengths."""
        if batch_size < 1:
            raise ValueError(f"batch_size ({batch_size}) must be >= 1")
        pool = BlockPool()
        while not self._done:
            rows = pool.rows(batch_size)
            n = self._fill(rows)
            if n:
                yield batch_of(rows, n)

    def close(self) -> None:
        self._done = True
        self._src.close()

    def __enter__(self) -> "CaptureReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Interfaces:
    """Per-interface arrays of the current pcapng section: the first ``n`` entries (the record
    walk appends most; Python those it leaves, growing the arrays when full). ``ether_only``
    until an interface of another link type appears in the file."""

    def __init__(self):
        self.n = 0
        self.ether_only = True
        self.link = np.zeros(4, np.int64)
        self.snap = np.zeros(4, np.int64)
        self.mul = np.ones(4, np.int64)
        self.div = np.ones(4, np.int64)
        self.shift = np.full(4, -1, np.int64)
        self.off = np.zeros(4, np.int64)

    def add(self, link: int, snap: int, resol: int, offset_s: int, warn, path) -> None:
        self.ether_only = self.ether_only and link == 1
        if self.n == len(self.link):
            for name in ("link", "snap", "mul", "div", "shift", "off"):
                old = getattr(self, name)
                new = np.empty(2 * len(old), np.int64)
                new[:len(old)] = old
                setattr(self, name, new)
        i = self.n
        if abs(offset_s) > MAX_TSOFFSET_S:
            warn(f"{path}: interface {i} has if_tsoffset {offset_s} s, beyond +-{MAX_TSOFFSET_S} s "
                 f"(the nanosecond clock would overflow); the offset is ignored")
            offset_s = 0
        self.link[i], self.snap[i], self.off[i] = link, snap, offset_s * 1_000_000_000
        self.mul[i], self.div[i], self.shift[i] = 1, 1, -1
        if resol & 0x80:
            self.shift[i] = min(resol & 0x7F, 62)
        elif resol <= 9:
            self.mul[i] = 10 ** (9 - resol)
        elif resol <= 18:
            self.div[i] = 10 ** (resol - 9)
        else:
            warn(f"{path}: interface {i} has timestamp resolution 10^-{resol}; read as 10^-18")
            self.div[i] = 10 ** 9
        self.n += 1


def open_capture(path) -> CaptureReader:
    """Open a pcap / pcapng file (optionally gzip-compressed); raises ``CaptureError``."""
    return CaptureReader(path)


def read_capture(path, batch_size: int = 1 << 20) -> tuple[KeyBatch, CaptureStats]:
    """The whole file as one ``KeyBatch`` (with ``dst`` and ``length``) and the reader's stats."""
    with open_capture(path) as reader:
        parts = list(reader.batches(batch_size))
        stats = reader.stats
    if not parts:
        return batch_of(output_rows(0), 0), stats
    return concat(parts), stats


def read_keys(path, batch_size: int = 1 << 20) -> tuple[np.ndarray, np.ndarray, CaptureStats]:
    """The whole file: source keys ``(n, 2) uint64``, ``ts_ns`` ``int64`` and the reader's stats."""
    batch, stats = read_capture(path, batch_size)
    return batch.keys, batch.ts_ns, stats


def count_packets(path) -> int:
    """Number of packet records in the file (one pass of the record walk, keys discarded)."""
    with open_capture(path) as reader:
        if reader._walk == reader._walk_pcap:  # records only: the frames are never read
            reader._walk = reader._count_pcap
        rows = output_rows(1 << 16)
        while not reader._done:
            reader._fill(rows)
        return reader.stats.packets


def warm_up(pcap: bool = True, pcapng: bool = True) -> None:
    """Compile (or load from numba's cache) the record walks of classic pcap and of pcapng now,
    e.g. off the GUI thread at start, instead of on the first file read."""
    rows = output_rows(1)
    buf, counts, if_arr = np.zeros(16, np.uint8), np.zeros(N_REASONS, np.int64), np.zeros(1, np.int64)
    if pcap:
        rec.walk_pcap(buf, 0, False, 1000, 16, 1, *rows, 0, 1, counts)
        rec.count_pcap(buf, 0, False, 16, 16)
    link = np.zeros(LINKTYPE_MASK + 1, np.int64)
    for ether_only in (True, False) if pcapng else ():
        rec.walk_pcapng(buf, 0, False, if_arr, if_arr, if_arr, if_arr, if_arr, if_arr, 0, ether_only,
                        _LINK_SUPPORTED, link, link, *rows, 0, 1, counts, 0)
