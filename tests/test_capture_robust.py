"""Hostile and unusual capture files, each built here: the reader finishes with correct counts or
one clear warning / error, quickly and in bounded memory."""
from __future__ import annotations

import gzip
import struct
import time
import tracemalloc
import zlib

import pytest

from dptop.capture.pcap import MAX_TSOFFSET_S, CaptureError, open_capture, read_capture
from dptop.engine.core.keys import addresses_from_keys
from tests.capture_files import epb, ether, idb, ipv4, pcap, shb


def write(tmp_path, name, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return p


def gzip_with_zeros(head: bytes, zeros: int) -> bytes:
    """gzip of ``head`` followed by ``zeros`` zero bytes, compressed in pieces (no big buffer)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    parts = [z.compress(head)]
    for _ in range(zeros // len(chunk)):
        parts.append(z.compress(chunk))
    parts.append(z.flush())
    return b"".join(parts)


def huge_section_header(big_length: int) -> bytes:
    """A pcapng section header block that claims ``big_length`` bytes."""
    body = struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1)
    return struct.pack("<II", 0x0A0D0D0A, big_length) + body + struct.pack("<I", big_length)


@pytest.mark.parametrize("where", ["first", "second"])
def test_gzip_pcapng_with_huge_section_length_is_bounded(tmp_path, where):
    """A section header claiming 846 MB, gzip-compressed with 64 MB of zeros behind it: the
    length is refused before anything is buffered (no decompressing the whole stream). Read in
    small batches after a warm-up, so the memory measured is the reader's own."""
    good = shb() + idb(1) + epb(0, 1, ether(0x0800, ipv4("10.0.0.1")))
    head = (good if where == "second" else b"") + huge_section_header(0x3270_0000)
    path = write(tmp_path, "bomb.pcapng.gz", gzip_with_zeros(head, 64 << 20))
    assert path.stat().st_size < 200_000
    read_capture(write(tmp_path, "warm.pcapng.gz", gzip.compress(good)))  # kernels loaded before measuring
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        if where == "first":
            with pytest.raises(CaptureError, match=r"section header has an invalid length \(846200832\)"):
                open_capture(path)
        else:
            with open_capture(path) as reader:
                keys = [k for b in reader.batches(1024) for k in addresses_from_keys(b.keys)]
            assert keys == ["10.0.0.1"]
            assert any("invalid length (846200832); stopped reading there" in w for w in reader.stats.warnings)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    took = time.perf_counter() - t0
    t1 = time.perf_counter()
    assert len(gzip.decompress(path.read_bytes())) > 64 << 20  # what reading it all would cost
    whole = time.perf_counter() - t1
    assert peak < 16 << 20 and took < whole / 2, (took, whole)  # a ratio, not seconds


def test_huge_if_tsoffset_is_ignored_with_a_warning(tmp_path):
    """An if_tsoffset beyond the int64 nanosecond clock (9.2e9 s) used to raise OverflowError."""
    frame = ether(0x0800, ipv4("10.0.0.2"))
    for offset in (10**10, -(10**10), 2**63 - 1):
        data = shb() + idb(1, tsresol=9, tsoffset=offset) + epb(0, 1_700_000_000_000_000_000, frame)
        batch, stats = read_capture(write(tmp_path, "o.pcapng", data))
        assert addresses_from_keys(batch.keys) == ["10.0.0.2"]
        assert batch.ts_ns.tolist() == [1_700_000_000_000_000_000]
        assert stats.warnings == [f"{tmp_path / 'o.pcapng'}: interface 0 has if_tsoffset {offset} s, beyond "
                                  f"+-{MAX_TSOFFSET_S} s (the nanosecond clock would overflow); the offset is ignored"]
    data = shb() + idb(1, tsresol=9, tsoffset=MAX_TSOFFSET_S) + epb(0, 5, frame)
    batch, stats = read_capture(write(tmp_path, "ok.pcapng", data))
    assert batch.ts_ns.tolist() == [MAX_TSOFFSET_S * 10**9 + 5] and stats.warnings == []


@pytest.mark.parametrize("field", [0x0400_0001, 0x2400_0001, 0xF7FF_0001])
def test_fcs_flag_bits_of_the_link_type_field(tmp_path, field):
    """Ethernet with the FCS-length-present flag (bit 26) and an FCS length (bits 28-31): the link
    type is the low 16 bits, the FCS at the end of each frame does not matter."""
    frames = [ether(0x0800, ipv4(f"10.0.1.{i}")) + b"\xde\xad\xbe\xef" for i in range(5)]
    batch, stats = read_capture(write(tmp_path, "fcs.pcap", pcap(frames, linktype=field)))
    assert addresses_from_keys(batch.keys) == [f"10.0.1.{i}" for i in range(5)]
    assert (stats.packets, stats.ip_packets, stats.skipped, stats.warnings) == (5, 5, {}, [])


def test_repeated_warning_is_shown_once_with_its_count(tmp_path):
    """Sixteen interfaces of one unsupported link type: one warning line, and the packets of all
    of them under one skip reason."""
    data = shb() + b"".join(idb(147) for _ in range(16)) + b"".join(epb(i, 1, b"abcd") for i in range(16))
    path = write(tmp_path, "u.pcapng", data)
    batch, stats = read_capture(path)
    assert len(batch) == 0 and stats.skipped == {"unsupported link type 147": 16}
    assert len(stats.warnings) == 1
    assert stats.warnings[0].startswith(f"{path}: link type 147 is not supported")
    assert stats.warnings[0].endswith("(16 times)")


def test_unknown_pcapng_major_version(tmp_path):
    """A section of format version 2.x cannot be read as 1.x: a clear error when it is the first,
    a warning and the packets so far when a later one is."""
    frame = epb(0, 1, ether(0x0800, ipv4("10.0.0.3")))
    v2 = bytearray(shb())
    struct.pack_into("<H", v2, 12, 2)
    with pytest.raises(CaptureError, match=r"format version 2\.0 \(only 1\.x is known\)"):
        read_capture(write(tmp_path, "v2.pcapng", bytes(v2) + idb(1) + frame))
    batch, stats = read_capture(write(tmp_path, "v12.pcapng", shb() + idb(1) + frame + bytes(v2) + idb(1) + frame))
    assert addresses_from_keys(batch.keys) == ["10.0.0.3"]
    assert stats.warnings and "format version 2.0" in stats.warnings[0]


def test_gzip_of_fcs_capture(tmp_path):
    """The same link-type rule for a gzip-compressed file (read in chunks)."""
    frames = [ether(0x86DD, bytes(40)) for _ in range(3)] + [ether(0x0800, ipv4("10.0.2.1"))]
    batch, stats = read_capture(write(tmp_path, "f.pcap.gz", gzip.compress(pcap(frames, linktype=0x0400_0001))))
    assert addresses_from_keys(batch.keys) == ["10.0.2.1"] and stats.skipped == {"bad IP version": 3}
