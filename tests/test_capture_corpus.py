"""The fast parser against scapy on every capture in tests/data and ../shared/pcaps/main and robust.

Reference = scapy's dissection of each frame (``conf.l2types`` layer of the link type, with
scapy's MPLS contrib loaded) plus the parser's documented rules (capture/linklayer.py): the
source and destination of the first IP/IPv6 layer and the record's wire length, dropped when the
source is in ff00::/8, when the header's version nibble disagrees with the layer scapy chose, or
when an IPv4 header's length fields are impossible. Frames come from scapy's own ``PcapReader``
except in the files listed in ``SCAPY_READER_DIFFERS``, where a plain struct walk in this file
(``naive_frames``) supplies them and the reason is stated. Counts are cross-checked with
STATS.txt (made by another tool); its known disagreements are listed in ``STATS_DIFFERS``.

Dissecting every capture with scapy takes about half a minute, so the default run compares the
parser with scapy's reference as cached in tests/data/corpus_golden.json.gz (per capture: its
sha256, the frames scapy read and a sha256 of the reference rows); the slow tests redissect every
capture, compare the whole files, and check the cache against a fresh dissection.
``python -m tests.test_capture_corpus`` remakes the cache from scapy.
"""
from __future__ import annotations

import functools
import gzip
import hashlib
import ipaddress
import json
import re
import struct
from pathlib import Path

import pytest

from dptop.capture.pcap import CaptureError, read_capture, read_keys
from dptop.engine.core.keys import addresses_from_keys
from tests.conftest import DATA_DIR, SHARED_PCAPS

scapy_all = pytest.importorskip("scapy.all")
scapy_all.load_contrib("mpls")
from scapy.all import IP, IPv6, PcapReader, conf  # noqa: E402

LIMIT = 3000  # frames compared per file in the default run; -m slow compares whole files

SCAPY_READER_DIFFERS = {
    "gopacket_test_loopback.pcap": "BSD NULL with AF_INET6 = 30: scapy binds only Linux's value 10",
    "tcpdump_quic_vn.pcap": "BSD NULL with AF_INET6 = 30: scapy binds only Linux's value 10",
    "tcpdump_nfs-attr-oobr.pcap": "link type 0x30000001: scapy does not mask the flag bits (1 = Ethernet)",
    "test010.pcapng": "Simple Packet Blocks with IDB snaplen 0 (= no limit): scapy returns empty frames",
    "test011.pcapng": "Simple Packet Blocks with IDB snaplen 0 (= no limit): scapy returns empty frames",
    "test016.pcapng": "Simple Packet Blocks with IDB snaplen 0 (= no limit): scapy returns empty frames",
    "test018.pcapng": "Simple Packet Blocks with IDB snaplen 0 (= no limit): scapy returns empty frames",
    "test100.pcapng": "Simple Packet Blocks with IDB snaplen 0 (= no limit): scapy returns empty frames",
}

STATS_DIFFERS = {
    # file: (our ip_packets, why STATS.txt says otherwise)
    "tcpdump_nfs-attr-oobr.pcap": (2, "STATS tool did not mask link type 0x30000001; 2 frames carry IPv4"),
    "zeek_mpls-6in6-broken.pcap.gz": (1666, "24 ff00::/8 sources, 96 ffff::/16 destinations, 22 version-mismatched "
                                      "headers and 3 IPv4 headers with a total length below their header length dropped"),
}


def corpus() -> list[Path]:
    if not SHARED_PCAPS.is_dir():
        return []
    files = sorted((SHARED_PCAPS / "main").iterdir()) + sorted(
        p for p in (SHARED_PCAPS / "robust").rglob("*") if p.is_file())
    return files


FILES = corpus()
IDS = [str(p.relative_to(SHARED_PCAPS)) for p in FILES]
CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".pcap.gz", ".pcapng.gz")
"""Names a capture copied into tests/data ends with; the folder also holds golden tables and notes."""
CAPTURE_MAGICS = {b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d",
                  b"\x0a\x0d\x0d\x0a"}
"""First four bytes of a pcap (either byte order, micro- or nanosecond) or a pcapng file."""
DATA_FILES = sorted(p for p in DATA_DIR.iterdir() if p.is_file() and p.name.endswith(CAPTURE_SUFFIXES))
needs_corpus = pytest.mark.skipif(not FILES, reason=f"{SHARED_PCAPS} not present (clean clone)")


def naive_frames(path: Path, limit: int | None):
    """``(linktype, frame, wire length)`` of each packet record: a plain struct walk (pcap and pcapng)."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    out = []
    if data[:4] != b"\x0a\x0d\x0d\x0a":
        e = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
        lt = struct.unpack(e + "I", data[20:24])[0] & 0xFFFF
        o = 24
        while o + 16 <= len(data) and (limit is None or len(out) < limit):
            n, wire = struct.unpack(e + "II", data[o + 8:o + 16])
            if o + 16 + n > len(data):
                break
            out.append((lt, data[o + 16:o + 16 + n], wire))
            o += 16 + n
        return out
    o, e, links, snaps = 0, "<", [], []
    while o + 12 <= len(data) and (limit is None or len(out) < limit):
        if data[o:o + 4] == b"\x0a\x0d\x0d\x0a":
            e = "<" if data[o + 8:o + 12] == b"\x4d\x3c\x2b\x1a" else ">"
            links, snaps = [], []
            if struct.unpack(e + "H", data[o + 12:o + 14])[0] != 1:  # unknown major version: stop
                break
        btype, blen = struct.unpack(e + "II", data[o:o + 8])
        body = data[o + 8:o + blen - 4]
        if btype == 1:
            lt, _, snap = struct.unpack(e + "HHI", body[:8])
            links.append(lt)
            snaps.append(snap)
        elif btype == 6:
            iface, _, _, cap, wire = struct.unpack(e + "IIIII", body[:20])
            out.append((links[iface], body[20:20 + cap], wire))
        elif btype == 3:
            orig = struct.unpack(e + "I", body[:4])[0]
            cap = min(orig, snaps[0] or orig, len(body) - 4)
            out.append((links[0], body[4:4 + cap], orig))
        o += blen
    return out


def scapy_frames(path: Path, limit: int | None):
    out = []
    with PcapReader(str(path)) as reader:
        for pkt in reader:
            if limit is not None and len(out) >= limit:
                break
            out.append(pkt)
    return out


def dissect(linktype: int, frame: bytes):
    """scapy's dissection of one frame (a frame scapy cannot dissect is raw, as in PcapReader)."""
    cls = conf.l2types.num2layer.get(linktype)
    if linktype in (0, 108) and len(frame) >= 4:  # NULL/LOOP: family in either byte order
        family = min(struct.unpack("<I", frame[:4])[0], struct.unpack(">I", frame[:4])[0])
        cls = IP if family == 2 else IPv6 if family in (24, 28, 30) else None
        frame = frame[4:]
    try:
        return None if cls is None else cls(frame)
    except Exception:
        return None


def outer_ip(pkt):
    """The outermost IP or IPv6 layer scapy found, if the parser's rules accept it."""
    layer = pkt
    while layer and not isinstance(layer, (IP, IPv6)):
        layer = layer.payload
    if not layer or layer.src is None or layer.version != (4 if isinstance(layer, IP) else 6):
        return None
    if isinstance(layer, IP):
        hlen = 4 * layer.ihl
        if hlen < 20 or 0 < layer.len < hlen:
            return None
    return layer


def reference_source(pkt) -> str | None:
    """The parser's rules on top of scapy's dissection (see the module docstring)."""
    return (reference(pkt, 0) or (None,))[0]


def reference(pkt, wire_len: int) -> tuple[str, str, int] | None:
    """``(source, destination, wire length)`` by the parser's rules, or None for a skipped packet."""
    layer = None if pkt is None else outer_ip(pkt)
    if layer is None or ipaddress.ip_address(layer.src) in ipaddress.ip_network("ff00::/8"):
        return None
    if ipaddress.ip_address(layer.dst) in ipaddress.ip_network("ffff::/16"):
        return None
    return str(ipaddress.ip_address(layer.src)), str(ipaddress.ip_address(layer.dst)), wire_len


def scapy_reference(path: Path, limit: int | None) -> tuple[int, list[tuple[str, str, int]]]:
    """The frames read (at most ``limit``) and their reference rows, by scapy's dissection."""
    if path.name in SCAPY_READER_DIFFERS:
        pkts = [(dissect(lt, frame), wire) for lt, frame, wire in naive_frames(path, limit)]
    else:
        pkts = [(p, p.wirelen) for p in scapy_frames(path, limit)]
    return len(pkts), [r for r in (reference(p, wire) for p, wire in pkts) if r is not None]


def fast_rows(path: Path):
    """The parser's ``(source, destination, wire length)`` rows of ``path`` and its stats."""
    batch, stats = read_capture(path)
    return list(zip(addresses_from_keys(batch.keys), addresses_from_keys(batch.dst), batch.length.tolist())), stats


def check_file(path: Path, limit: int | None):
    fast, stats = fast_rows(path)
    frames, ref = scapy_reference(path, limit)
    if limit is None or frames < limit:
        assert fast == ref, f"{path.name}: {stats}"
        assert stats.packets == frames
    else:
        assert fast[:len(ref)] == ref, f"{path.name}: first {limit} packets"


# --- The reference cached with its provenance ----------------------------------------------------
GOLDEN = DATA_DIR / "corpus_golden.json.gz"


def rows_digest(rows) -> str:
    return hashlib.sha256(json.dumps([list(r) for r in rows]).encode()).hexdigest()


def golden_name(path: Path) -> str:
    """``shared/<path under pcaps>`` or ``data/<name>``: the cache's key of a capture."""
    return f"data/{path.name}" if path.parent == DATA_DIR else f"shared/{path.relative_to(SHARED_PCAPS)}"


def golden_entry(path: Path, limit: int | None) -> dict:
    """What scapy's dissection gives for ``path``, as the cache stores it."""
    frames, ref = scapy_reference(path, limit)
    return {"sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "limit": limit, "frames": frames,
            "rows": len(ref), "rows_sha256": rows_digest(ref)}


def write_golden() -> dict:
    import scapy
    doc = {"provenance": {"made_by": "python -m tests.test_capture_corpus (golden_entry)",
                          "dissector": f"scapy {scapy.VERSION}",
                          "rows": "sha256 of the JSON list of [source, destination, wire length] rows, "
                                  "of the first `limit` frames (all when null)"},
           "captures": {golden_name(p): golden_entry(p, LIMIT) for p in FILES}
           | {golden_name(p): golden_entry(p, None) for p in DATA_FILES}}
    text = json.dumps(doc, indent=0, sort_keys=True) + "\n"
    with open(GOLDEN, "wb") as fh, gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0) as gz:
        gz.write(text.encode())  # no name or time stamp: the same reference gives the same bytes
    return doc


@functools.lru_cache(maxsize=None)
def _golden() -> dict:
    return json.loads(gzip.decompress(GOLDEN.read_bytes()))["captures"]


def cached_entry(path: Path, limit: int | None) -> dict:
    """The cache's entry for this very copy of ``path`` (same sha256, same limit); else the cache is
    stale and says how to remake it."""
    entry = _golden().get(golden_name(path))
    if entry is None or entry["limit"] != limit or entry["sha256"] != hashlib.sha256(path.read_bytes()).hexdigest():
        raise AssertionError(f"{GOLDEN.name} has no reference for this copy of {golden_name(path)}: "
                             "run `python -m tests.test_capture_corpus` to remake it from scapy")
    return entry


def check_file_against_golden(path: Path, limit: int | None):
    """``check_file`` with scapy's reference read from the cache."""
    fast, stats = fast_rows(path)
    entry = cached_entry(path, limit)
    where = f"{path.name}: differs from scapy's cached reference (pytest -m slow {__file__} -k {path.name} shows how)"
    if limit is None or entry["frames"] < limit:
        assert (len(fast), rows_digest(fast)) == (entry["rows"], entry["rows_sha256"]), f"{where}; {stats}"
        assert stats.packets == entry["frames"]
    else:
        assert rows_digest(fast[:entry["rows"]]) == entry["rows_sha256"], f"{where}, first {limit} packets"


@needs_corpus
@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_sources_equal_scapy_dissection(path):
    """Source, destination and wire length of every packet, as scapy dissects them (cached)."""
    check_file_against_golden(path, LIMIT)


@pytest.mark.parametrize("path", DATA_FILES, ids=[p.name for p in DATA_FILES])
def test_repo_copies_equal_scapy_dissection(path):
    check_file_against_golden(path, None)


@pytest.mark.slow
@pytest.mark.parametrize("path", DATA_FILES, ids=[p.name for p in DATA_FILES])
def test_repo_copies_equal_a_fresh_scapy_dissection(path):
    check_file(path, None)


@pytest.mark.slow
@pytest.mark.parametrize("path", FILES + DATA_FILES, ids=[golden_name(p) for p in FILES + DATA_FILES])
def test_golden_reference_equals_scapys_dissection(path):
    """The cache the default run reads is what scapy gives today (a changed capture, rule or scapy
    version shows here; `python -m tests.test_capture_corpus` remakes it)."""
    limit = None if path in DATA_FILES else LIMIT
    assert cached_entry(path, limit) == golden_entry(path, limit)


def test_every_capture_has_a_cached_reference():
    """No capture the default run compares lacks its entry, and the cache names no capture it
    would not compare (a stale entry is a check that no longer runs)."""
    names = {golden_name(p) for p in DATA_FILES}
    names |= {golden_name(p) for p in FILES} if FILES else {n for n in _golden() if n.startswith("shared/")}
    assert set(_golden()) == names


def test_every_capture_copy_is_checked():
    """No capture in tests/data escapes the dissection check by its name: every file left out is
    neither pcap nor pcapng (by its magic number, after gunzip)."""
    for p in DATA_DIR.rglob("*"):
        if not p.is_file() or p in DATA_FILES:
            continue
        head = p.read_bytes()[:4] if not p.name.endswith(".gz") else gzip.open(p).read(4)
        assert head not in CAPTURE_MAGICS, f"{p} is a capture the corpus test leaves out"


@pytest.mark.slow
@needs_corpus
@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_sources_equal_scapy_dissection_whole_file(path):
    check_file(path, None)


@needs_corpus
@pytest.mark.parametrize("path", [p for p in FILES if p.name in SCAPY_READER_DIFFERS],
                         ids=[i for i, p in zip(IDS, FILES) if p.name in SCAPY_READER_DIFFERS])
def test_scapy_reader_difference_is_as_stated(path):
    """The stated reason is real: scapy's own reader gives fewer IP sources than its dissection
    of the frames the naive walk finds."""
    ours = [s for lt, f, _ in naive_frames(path, None) if (s := reference_source(dissect(lt, f)))]
    theirs = [s for s in map(reference_source, scapy_frames(path, None)) if s is not None]
    assert len(theirs) < len(ours)


def stats_txt() -> dict[str, dict[str, int]]:
    text = (SHARED_PCAPS / "STATS.txt").read_text()
    out = {}
    for name, fields in re.findall(r"shared/pcaps/\S*?([^/\s]+)\n\s+(size=.*)", text):
        out[name] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", fields)}
    return out


@needs_corpus
def test_counts_cross_check_stats_txt():
    table = stats_txt()
    assert len(table) >= 20
    for name, row in table.items():
        path = next(p for p in FILES if p.name == name)
        keys, _, stats = read_keys(path)
        assert stats.packets == row["pkts"], name
        want = STATS_DIFFERS.get(name, (row["ip_pkts"], ""))[0]
        assert stats.ip_packets == len(keys) == want, (name, stats)
        v6 = sum(1 for a in addresses_from_keys(keys) if ":" in a)
        if name not in STATS_DIFFERS:
            assert v6 == row["v6"], name


@needs_corpus
@pytest.mark.parametrize("path", [p for p in FILES if "robust" in p.parts], ids=lambda p: p.name)
def test_robust_files_partial_or_clear_error(path):
    """Every robustness file reads to the end (partial results and warnings allowed) or raises
    CaptureError naming it; the stats add up."""
    try:
        keys, ts, stats = read_keys(path)
    except CaptureError as exc:
        assert str(path) in str(exc)
        return
    assert stats.ip_packets == len(keys) == len(ts)
    assert stats.packets == stats.ip_packets + sum(stats.skipped.values())
    stopped = any("stopped reading there" in w for w in stats.warnings)
    assert stats.bytes_done == stats.bytes_total or stopped


@needs_corpus
def test_truncated_copy_of_real_capture(tmp_path):
    src = SHARED_PCAPS / "main" / "amp.TCP.reflection.SYNACK.pcap"
    whole = addresses_from_keys(read_keys(src)[0])
    data = src.read_bytes()
    for cut in (len(data) - 1, len(data) * 2 // 3):
        (tmp_path / "cut.pcap").write_bytes(data[:cut])
        keys, _, stats = read_keys(tmp_path / "cut.pcap")
        complete = len(naive_frames(tmp_path / "cut.pcap", None))
        assert stats.packets == complete
        assert addresses_from_keys(keys) == whole[:len(keys)]
        assert any("cut off mid-record" in w for w in stats.warnings)


if __name__ == "__main__":
    if not FILES:
        raise SystemExit(f"{SHARED_PCAPS} is needed to remake {GOLDEN}")
    made = write_golden()
    print(f"{GOLDEN}: {len(made['captures'])} captures, {made['provenance']['dissector']}")
