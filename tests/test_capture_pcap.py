"""dptop.capture.pcap on small files written here (every format variant and link type) and on the
copies in tests/data: exact keys, time stamps, skip reasons, warnings and errors."""
from __future__ import annotations

import gzip
import shutil
import struct

import numpy as np
import pytest

from dptop.capture.pcap import CaptureError, count_packets, open_capture, read_keys
from tests.capture_files import block, epb, ether, idb, ipv4, ipv6, pcap, shb, spb
from dptop.engine.core.keys import addresses_from_keys
from tests.conftest import DNS_CAPTURE


def write(tmp_path, name, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return p


def addrs(path):
    keys, ts, stats = read_keys(path)
    return addresses_from_keys(keys), ts, stats


FRAMES = [ether(0x0800, ipv4("10.0.0.1")), ether(0x86DD, ipv6("2001:db8::7")),
          ether(0x0806, b"\x00" * 28), ether(0x0800, ipv4("203.0.113.9"))]
EXPECTED = ["10.0.0.1", "2001:db8::7", "203.0.113.9"]


@pytest.mark.parametrize("big", [False, True], ids=["le", "be"])
@pytest.mark.parametrize("ns", [False, True], ids=["us", "ns"])
def test_pcap_byte_orders_and_resolutions(tmp_path, big, ns):
    times = [1_700_000_000_987_654_321 + i * 1_000_001_001 for i in range(4)]
    got, ts, stats = addrs(write(tmp_path, "a.pcap", pcap(FRAMES, big=big, ns=ns, times=times)))
    assert got == EXPECTED
    want = np.array([times[0], times[1], times[3]])
    assert ts.tolist() == (want if ns else want // 1000 * 1000).tolist()
    assert (stats.packets, stats.ip_packets, stats.skipped, stats.warnings) == (4, 3, {"non-ip": 1}, [])
    assert stats.bytes_done == stats.bytes_total == (tmp_path / "a.pcap").stat().st_size


def test_modified_pcap_format(tmp_path):
    got, _, stats = addrs(write(tmp_path, "m.pcap", pcap(FRAMES, modified=True, big=True)))
    assert got == EXPECTED and stats.packets == 4


def test_gzip_of_pcap_and_pcapng(tmp_path):
    raw = pcap(FRAMES * 3000)
    plain = addrs(write(tmp_path, "p.pcap", raw))
    packed = addrs(write(tmp_path, "p.pcap.gz", gzip.compress(raw)))
    assert packed[0] == plain[0] == EXPECTED * 3000
    assert packed[1].tolist() == plain[1].tolist()
    assert packed[2].format == "pcap (gzip)" and packed[2].fraction == 1.0
    ng = shb() + idb(1) + b"".join(epb(0, i, f) for i, f in enumerate(FRAMES))
    assert addrs(write(tmp_path, "n.gz", gzip.compress(ng)))[0] == EXPECTED


def test_gzip_chunk_boundaries(tmp_path, monkeypatch):
    """Records cut by every possible decompression chunk boundary are still read whole."""
    import dptop.capture.filebytes as fb
    monkeypatch.setattr(fb, "CHUNK", 37)
    raw = pcap(FRAMES * 50)
    got, _, stats = addrs(write(tmp_path, "c.pcap.gz", gzip.compress(raw)))
    assert got == EXPECTED * 50 and stats.warnings == []
    ng = shb() + idb(1) + b"".join(epb(0, i, f) for i, f in enumerate(FRAMES * 20)) + shb(big=True) + idb(1, big=True)
    ng += b"".join(epb(0, i, f, big=True) for i, f in enumerate(FRAMES * 20))
    got, _, stats = addrs(write(tmp_path, "c.pcapng.gz", gzip.compress(ng)))
    assert got == EXPECTED * 40 and stats.warnings == [] and stats.packets == 160


LINK_CASES = [
    ("vlan", 1, ether(0x0800, ipv4("10.1.1.1"), tags=((0x8100, 5),)), "10.1.1.1"),
    ("qinq", 1, ether(0x86DD, ipv6("2001:db8::1"), tags=((0x88A8, 1), (0x8100, 2))), "2001:db8::1"),
    ("three tags", 1, ether(0x0800, ipv4("10.1.1.3"), tags=((0x9100, 1), (0x88A8, 2), (0x8100, 3))), "10.1.1.3"),
    ("mpls v4", 1, ether(0x8847, struct.pack(">I", (16 << 12)) + struct.pack(">I", (17 << 12) | 0x100)
                         + ipv4("10.2.2.2")), "10.2.2.2"),
    ("mpls v6 in vlan", 1, ether(0x8848, struct.pack(">I", (16 << 12) | 0x100) + ipv6("2001:db8::2"),
                                 tags=((0x8100, 9),)), "2001:db8::2"),
    ("pppoe", 1, ether(0x8864, b"\x11\x00\x00\x01\x00\x16\x00\x21" + ipv4("10.3.3.3")), "10.3.3.3"),
    ("snap", 1, struct.pack(">6s6sH", b"\x01" * 6, b"\x02" * 6, 48)
     + b"\xaa\xaa\x03\x00\x00\x00\x08\x00" + ipv4("10.4.4.4"), "10.4.4.4"),
    ("sll", 113, struct.pack(">HHH8sH", 0, 1, 6, b"\x00" * 8, 0x0800) + ipv4("10.5.5.5"), "10.5.5.5"),
    ("sll vlan", 113, struct.pack(">HHH8sH", 0, 1, 6, b"\x00" * 8, 0x8100) + b"\x00\x07\x86\xdd"
     + ipv6("2001:db8::5"), "2001:db8::5"),
    ("sll2", 276, struct.pack(">HHIHBB8s", 0x86DD, 0, 2, 1, 0, 6, b"\x00" * 8) + ipv6("2001:db8::6"), "2001:db8::6"),
    ("raw101 v4", 101, ipv4("10.6.6.6"), "10.6.6.6"),
    ("raw101 v6", 101, ipv6("2001:db8::8"), "2001:db8::8"),
    ("raw12", 12, ipv4("10.6.6.7"), "10.6.6.7"),
    ("raw14", 14, ipv6("2001:db8::9"), "2001:db8::9"),
    ("ipv4 228", 228, ipv4("10.7.7.7"), "10.7.7.7"),
    ("ipv6 229", 229, ipv6("2001:db8::a"), "2001:db8::a"),
    ("null le v4", 0, struct.pack("<I", 2) + ipv4("10.8.8.8"), "10.8.8.8"),
    ("null be v6", 0, struct.pack(">I", 30) + ipv6("2001:db8::b"), "2001:db8::b"),
    ("loop 24", 108, struct.pack(">I", 24) + ipv6("2001:db8::c"), "2001:db8::c"),
    ("loop 28", 108, struct.pack("<I", 28) + ipv6("2001:db8::d"), "2001:db8::d"),
    ("mapped v6 = v4 key", 229, ipv6("::ffff:10.9.9.9"), "10.9.9.9"),
    ("linktype flag bits masked", 0x3000_0001, ether(0x0800, ipv4("10.10.10.10")), "10.10.10.10"),
]


@pytest.mark.parametrize("linktype,frame,want", [c[1:] for c in LINK_CASES], ids=[c[0] for c in LINK_CASES])
def test_link_types(tmp_path, linktype, frame, want):
    got, _, stats = addrs(write(tmp_path, "l.pcap", pcap([frame], linktype=linktype)))
    assert got == [want], stats


SKIP_CASES = [
    ("arp", 1, ether(0x0806, b"\x00" * 28), "non-ip"),
    ("short ethernet", 1, b"\x00" * 13, "truncated header"),
    ("ipv4 header cut", 1, ether(0x0800, ipv4("10.0.0.1")[:19]), "truncated header"),
    ("ipv6 header cut", 1, ether(0x86DD, ipv6("2001:db8::1")[:39]), "truncated header"),
    ("vlan tag cut", 1, ether(0x8100, b"\x00\x01"), "truncated header"),
    ("version 6 under 0x0800", 1, ether(0x0800, ipv6("2001:db8::1")), "bad IP version"),
    ("multicast source", 1, ether(0x86DD, ipv6("ff02::1")), "multicast source"),
    ("mpls non-ip payload", 1, ether(0x8847, struct.pack(">I", 0x100) + b"\x00" * 40), "non-ip"),
    ("mpls stack cut", 1, ether(0x8847, struct.pack(">I", 0)), "truncated header"),
    ("null unknown family", 0, struct.pack("<I", 7) + ipv4("10.0.0.1"), "non-ip"),
    ("raw garbage", 101, b"\x10" * 40, "non-ip"),
    ("empty frame", 1, b"", "truncated header"),
    ("unsupported link type", 147, ipv4("10.0.0.1"), "unsupported link type 147"),
]


@pytest.mark.parametrize("linktype,frame,reason", [c[1:] for c in SKIP_CASES], ids=[c[0] for c in SKIP_CASES])
def test_skip_reasons(tmp_path, linktype, frame, reason):
    got, _, stats = addrs(write(tmp_path, "s.pcap", pcap([frame, frame], linktype=linktype)))
    assert got == [] and stats.skipped == {reason: 2} and stats.packets == 2


def test_unsupported_link_type_warns(tmp_path):
    _, _, stats = addrs(write(tmp_path, "u.pcap", pcap([b"xx"], linktype=147)))
    assert any("link type 147 is not supported" in w for w in stats.warnings)


def test_pcapng_interfaces_resolutions_and_sections(tmp_path):
    """Two interfaces with different link types and time resolutions (10^-9, 2^-10 with an
    offset), a Simple Packet Block, other blocks skipped, then a big-endian second section."""
    t_ns = 1_700_000_000_123_456_789
    data = (shb() + idb(1) + idb(101, tsresol=9) + idb(1, tsresol=0x80 | 10, tsoffset=100)
            + block(4, b"\x00" * 8)  # name resolution block: skipped
            + epb(0, t_ns // 1000, ether(0x0800, ipv4("10.0.0.1")))
            + epb(1, t_ns, ipv6("2001:db8::1"))
            + epb(2, (5 << 10) + 512, ether(0x0800, ipv4("10.0.0.2")))
            + spb(ether(0x0800, ipv4("10.0.0.3")))
            + block(5, b"\x00" * 20)  # interface statistics block: skipped
            + epb(3, 0, ether(0x0800, ipv4("10.0.0.4")))  # no such interface
            + shb(big=True) + idb(113, big=True, tsresol=3)
            + epb(0, 42, struct.pack(">HHH8sH", 0, 1, 6, b"\x00" * 8, 0x0800) + ipv4("10.0.0.5"), big=True)
            + epb(1, 42, ipv4("10.0.0.6"), big=True))  # interface 1 of the first section is gone
    got, ts, stats = addrs(write(tmp_path, "m.pcapng", data))
    assert got == ["10.0.0.1", "2001:db8::1", "10.0.0.2", "10.0.0.3", "10.0.0.5"]
    assert ts.tolist() == [t_ns // 1000 * 1000, t_ns, 105_500_000_000, 105_500_000_000, 42_000_000]
    assert stats.packets == 7 and stats.skipped == {"unknown interface": 2}
    assert stats.format == "pcapng" and stats.warnings == []


def test_pcapng_unsupported_interface_counted_by_link_type(tmp_path):
    data = shb() + idb(147) + idb(1) + epb(0, 1, b"abc") + epb(1, 2, ether(0x0800, ipv4("10.0.0.1")))
    got, _, stats = addrs(write(tmp_path, "u.pcapng", data))
    assert got == ["10.0.0.1"] and stats.skipped == {"unsupported link type 147": 1}


def test_pcapng_malformed_blocks(tmp_path):
    good = epb(0, 1, ether(0x0800, ipv4("10.0.0.1")))
    bad_caplen = bytearray(epb(0, 1, ether(0x0800, ipv4("10.0.0.9"))))
    struct.pack_into("<I", bad_caplen, 20, 4000)  # captured length beyond the block
    got, _, stats = addrs(write(tmp_path, "b.pcapng", shb() + idb(1) + good + bytes(bad_caplen) + good))
    assert got == ["10.0.0.1", "10.0.0.1"] and stats.skipped == {"malformed record": 1}
    broken = bytearray(good)
    struct.pack_into("<I", broken, len(broken) - 4, 999)  # trailing length disagrees
    got, _, stats = addrs(write(tmp_path, "c.pcapng", shb() + idb(1) + good + bytes(broken) + good))
    assert got == ["10.0.0.1"] and "corrupt" in stats.warnings[0]


@pytest.mark.parametrize("kind", ["pcap", "pcapng", "pcap.gz"])
def test_truncated_file_yields_complete_records_and_warns(tmp_path, kind):
    frames = [ether(0x0800, ipv4(f"10.0.{i // 256}.{i % 256}")) for i in range(300)]
    raw = pcap(frames) if kind != "pcapng" else shb() + idb(1) + b"".join(epb(0, i, f) for i, f in enumerate(frames))
    whole = addrs(write(tmp_path, "w", raw))[0]
    for cut in (len(raw) - 1, len(raw) - 30, len(raw) // 2 + 7):
        data = raw[:cut]
        got, _, stats = addrs(write(tmp_path, "t", gzip.compress(data) if kind == "pcap.gz" else data))
        assert 0 < len(got) < 300 and got == whole[:len(got)]
        assert stats.packets == len(got)
        assert any("cut off" in w and f"after {len(got)} packets" in w for w in stats.warnings), stats.warnings


def test_truncated_gzip_stream(tmp_path):
    packed = gzip.compress(pcap(FRAMES * 2000))
    got, _, stats = addrs(write(tmp_path, "g.pcap.gz", packed[: len(packed) // 2]))
    assert 0 < len(got) < 6000 and got == (EXPECTED * 2000)[:len(got)]
    assert any("gzip data ends early" in w for w in stats.warnings)


def test_impossible_record_length_stops_with_warning(tmp_path):
    raw = bytearray(pcap(FRAMES))
    struct.pack_into("<I", raw, 24 + 16 + len(FRAMES[0]) + 8, 0x7FFF_FFFF)
    got, _, stats = addrs(write(tmp_path, "x.pcap", bytes(raw)))
    assert got == ["10.0.0.1"] and "impossible length" in stats.warnings[0]


@pytest.mark.parametrize("data,match", [
    (b"", "empty file"),
    (b"\xd4\xc3", "only 2 bytes"),
    (b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", "not a capture file: it starts with 47455420.*expected a pcap"),
    (b"\xd4\xc3\xb2\xa1\x02\x00", "pcap file header cut off"),
    (b"\x0a\x0d\x0d\x0a\x1c\x00\x00\x00\x01\x02\x03\x04" + b"\x00" * 16, "byte-order magic 01020304"),
    (gzip.compress(b"hello, not a capture", mtime=0), "not a capture file"),
    (b"\x1f\x8b\x08\x00garbage-garbage-garbage", "corrupt gzip data"),
])
def test_not_a_capture_is_a_clear_error(tmp_path, data, match):
    p = write(tmp_path, "notes.txt", data)
    with pytest.raises(CaptureError, match=match) as info:
        open_capture(p)
    assert str(p) in str(info.value)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(CaptureError, match="cannot read capture file"):
        open_capture(tmp_path / "nope.pcap")
    with pytest.raises(CaptureError, match="cannot read capture file"):
        open_capture(tmp_path)


def test_batches_split_the_same_stream(tmp_path):
    p = write(tmp_path, "b.pcap", pcap(FRAMES * 1000))
    whole = read_keys(p)
    for size in (1, 7, 3000, 1 << 16):
        with open_capture(p) as r:
            batches = list(r.batches(size))
        assert all(len(b) == size for b in batches[:-1])
        assert np.array_equal(np.concatenate([b.keys for b in batches]), whole[0])
        assert np.array_equal(np.concatenate([b.ts_ns for b in batches]), whole[1])
    with pytest.raises(ValueError, match=r"batch_size \(0\) must be >= 1"):
        next(open_capture(p).batches(0))


def test_count_packets(tmp_path, data_dir):
    assert count_packets(write(tmp_path, "c.pcap", pcap(FRAMES * 10))) == 40
    assert count_packets(DNS_CAPTURE) == 4412
    assert count_packets(data_dir / "le_test202.pcapng") == 8


def test_repo_copies_read(tmp_path, data_dir):
    """The captures in tests/data (clean clone): counts as published with the public captures (their STATS.txt; provenance in tests/data/SOURCES.md)."""
    keys, ts, stats = read_keys(DNS_CAPTURE)
    assert (stats.packets, stats.ip_packets, len(keys)) == (4412, 4412, 4412)
    assert np.all(np.diff(ts) >= 0)
    top = max(set(a := addresses_from_keys(keys)), key=a.count)
    assert top == "24.132.150.54" and round(100 * a.count(top) / len(a), 1) == 45.2
    _, _, stats = read_keys(data_dir / "amp.TCP.syn.optionallyACK.optionallysamePort.pcapng")
    assert (stats.packets, stats.ip_packets) == (896, 896)
    shutil.copy(data_dir / "zeek_mpls-6in6-broken.pcap.gz", tmp_path / "renamed.pcap")
    assert read_keys(tmp_path / "renamed.pcap")[2].format == "pcap (gzip)"  # found by content, not name


def _big_endian_copy(data: bytes) -> bytes:
    """A little-endian classic pcap rewritten big-endian (the same records, every header field
    byte-swapped); a cut-off last record is dropped."""
    magic, major, minor, zone, sigfigs, snap, link = struct.unpack("<IHHiIII", data[:24])
    out = [struct.pack(">IHHiIII", magic, major, minor, zone, sigfigs, snap, link)]
    pos = 24
    while pos + 16 <= len(data):
        sec, frac, incl, orig = struct.unpack("<IIII", data[pos:pos + 16])
        if pos + 16 + incl > len(data):
            break
        out.append(struct.pack(">IIII", sec, frac, incl, orig) + data[pos + 16:pos + 16 + incl])
        pos += 16 + incl
    return b"".join(out)


def _whole(path):
    with open_capture(path) as r:
        parts = list(r.batches(1 << 12))
        stats = r.stats
    fields = [np.concatenate([getattr(b, f) for b in parts]) if parts else np.zeros(0)
              for f in ("keys", "dst", "ts_ns", "length", "flow")]
    return fields, stats


def test_little_endian_loop_reads_as_the_general_one(tmp_path, data_dir):
    """Little-endian Ethernet pcaps go through their own copy of the record loop (constant byte
    order and header length); the same records big-endian go through the general one. Every
    field of every key, the skip reasons and the record counts agree on the real captures."""
    checked = 0
    for path in sorted(data_dir.glob("*.pcap")):
        data = path.read_bytes()
        if data[:4] != b"\xd4\xc3\xb2\xa1":
            continue
        le, le_stats = _whole(path)
        be, be_stats = _whole(write(tmp_path, path.name, _big_endian_copy(data)))
        for a, b in zip(le, be):
            assert np.array_equal(a, b), path.name
        assert (le_stats.packets, le_stats.ip_packets, le_stats.skipped) == \
               (be_stats.packets, be_stats.ip_packets, be_stats.skipped), path.name
        assert count_packets(path) == le_stats.packets, path.name
        checked += struct.unpack("<I", data[20:24])[0] == 1  # Ethernet files take the fast loop
    assert checked >= 5
