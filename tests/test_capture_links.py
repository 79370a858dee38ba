"""Link layers beyond plain Ethernet (capture/link_*.py) on a corpus written here with scapy
(tests/capture_files.link_corpus), and the parser's per-source counts against tshark's outer
``ip.src`` / ``ipv6.src`` on that corpus and on the real captures in tests/data and
../shared/pcaps. The tshark tests skip where tshark is not installed (``apt-get install tshark``)."""
from __future__ import annotations

import ipaddress
import shutil
import subprocess
from collections import Counter

import numpy as np
import pytest

from dptop.capture.linklayer import SUPPORTED_LINKTYPES, addresses_of_frames, output_rows
from dptop.capture.pcap import read_capture
from dptop.capture.wire import N_REASONS, OK, REASON_NAMES
from dptop.engine.core.keys import addresses_from_keys
from tests.capture_files import epb, idb, link_corpus, pcap, shb
from tests.conftest import DATA_DIR, SHARED_PCAPS

scapy_all = pytest.importorskip("scapy.all")

CASES = link_corpus()
TSHARK = shutil.which("tshark")
needs_tshark = pytest.mark.skipif(TSHARK is None, reason="tshark not installed (apt-get install tshark)")


def rows_of(path):
    batch, stats = read_capture(path)
    return list(zip(addresses_from_keys(batch.keys), addresses_from_keys(batch.dst), batch.length.tolist())), stats


def write_case(path, case):
    if case.big_endian:
        path.write_bytes(pcap([case.frame], linktype=case.linktype, big=True))
    else:
        with scapy_all.PcapWriter(str(path), linktype=case.linktype) as w:
            w.write(scapy_all.Raw(case.frame))


def test_corpus_covers_every_link_type():
    assert {c.linktype for c in CASES} == SUPPORTED_LINKTYPES - {0, 12, 14, 101, 108, 113, 228, 229, 276}
    # the rest have their own cases in test_capture_pcap.LINK_CASES


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_link_type_gives_the_written_addresses(tmp_path, case):
    path = tmp_path / "l.pcap"
    write_case(path, case)
    rows, stats = rows_of(path)
    if isinstance(case.expected, tuple):
        assert rows == [(*case.expected, len(case.frame))], stats
    else:
        assert rows == [] and stats.skipped == {case.expected: 1}, stats


def test_every_cut_of_every_frame_is_read_safely():
    """Each frame cut at every length: either the whole frame's addresses (the cut left the IP
    header) or a skip reason; never another address, never out of bounds."""
    for case in CASES:
        n = len(case.frame)
        buf = np.frombuffer(bytearray(case.frame * n), np.uint8)
        offsets = np.arange(n, dtype=np.int64) * n
        lengths = np.arange(n, dtype=np.int64)
        rows, counts = output_rows(n), np.zeros(N_REASONS, np.int64)
        got = addresses_of_frames(buf, offsets, lengths, np.zeros(n, np.int64), case.linktype, *rows, counts)
        assert got + counts.sum() == n and counts[OK] == 0
        if isinstance(case.expected, tuple):
            assert set(zip(addresses_from_keys(rows[0][:got]), addresses_from_keys(rows[1][:got]))) <= {case.expected}
        else:
            assert set(REASON_NAMES[r] for r in np.flatnonzero(counts)) <= {case.expected, "truncated header"}


def tshark_sources(path) -> Counter:
    """Per-source packet counts of tshark's outer IP layer (the first ``ip`` or ``ipv6`` in
    ``frame.protocols``), with the parser's rule on sources applied (ff00::/8 dropped)."""
    out = subprocess.run([TSHARK, "-n", "-r", str(path), "-T", "fields", "-e", "frame.protocols",
                          "-e", "ip.src", "-e", "ipv6.src", "-E", "occurrence=f"],
                         capture_output=True, text=True, check=False).stdout
    counts = Counter()
    for line in out.splitlines():
        protocols, v4, v6 = (line.split("\t") + ["", ""])[:3]
        outer = next((p for p in protocols.split(":") if p in ("ip", "ipv6")), None)
        src = v4 if outer == "ip" else v6 if outer == "ipv6" else ""
        if src and ipaddress.ip_address(src) not in ipaddress.ip_network("ff00::/8"):
            counts[str(ipaddress.ip_address(src))] += 1
    return counts


def our_sources(path) -> Counter:
    return Counter(addresses_from_keys(read_capture(path)[0].keys))


@needs_tshark
def test_link_corpus_sources_equal_tshark(tmp_path):
    """All cases in one pcapng (one interface per case), the big-endian one in a pcap of its own."""
    little = [c for c in CASES if not c.big_endian]
    data = shb() + b"".join(idb(c.linktype) for c in little)
    data += b"".join(epb(i, 1_700_000_000_000_000 + i, c.frame) for i, c in enumerate(little))
    (tmp_path / "all.pcapng").write_bytes(data)
    for c in CASES:
        if c.big_endian:
            write_case(tmp_path / f"{c.linktype}-be.pcap", c)
    for path in sorted(tmp_path.iterdir()):
        ours, theirs = our_sources(path), tshark_sources(path)
        assert ours == theirs, path.name
    want = Counter(c.expected[0] for c in CASES if isinstance(c.expected, tuple))
    assert sum((our_sources(p) for p in tmp_path.iterdir()), Counter()) == want


def real_captures():
    files = sorted(p for p in DATA_DIR.iterdir() if p.name != "SOURCES.md")
    if SHARED_PCAPS.is_dir():
        files += sorted(p for p in SHARED_PCAPS.rglob("*") if p.is_file() and p.suffix in (".pcap", ".pcapng", ".gz"))
    return files


REAL = real_captures()
TSHARK_DIFFERS = {
    "zeek_mpls-6in6-broken.pcap.gz": (
        {"143.9.0.0": 1}, "frame 1088: an MPLS payload whose IPv4 header claims 52 bytes with 27 left and "
        "total length 0 (segmentation offload); Wireshark's MPLS payload heuristic calls it data"),
}
"""Per-source counts the parser has beyond tshark's, and why."""


@needs_tshark
@pytest.mark.parametrize("path", REAL, ids=[f"{p.parent.name}/{p.name}" for p in REAL])
def test_real_capture_sources_equal_tshark(path):
    extra = Counter(TSHARK_DIFFERS.get(path.name, ({}, ""))[0])
    assert our_sources(path) == tshark_sources(path) + extra
