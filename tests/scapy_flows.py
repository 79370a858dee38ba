"""Reference keys of a capture read by scapy (an independent dissector), for the key-kind tests:
destination ports, protocols, (source, destination) pairs and /24 (IPv6 /48) source networks of
the packets whose outer IP header dptop keys (multicast sources and ``ffff::/16`` destinations
left out, as capture does)."""
from __future__ import annotations

import functools
import gzip
import hashlib
import ipaddress
import json
from collections import Counter
from pathlib import Path

from scapy.contrib.mpls import MPLS  # noqa: F401  (binds ethertype 0x8847 to MPLS, as dptop reads it)
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import (IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop,
                                IPv6ExtHdrRouting)
from scapy.layers.ipsec import AH
from scapy.layers.sctp import SCTP
from scapy.packet import Padding, Raw
from scapy.utils import PcapReader, rdpcap

_EXT = (IPv6ExtHdrHopByHop, IPv6ExtHdrRouting, IPv6ExtHdrDestOpt, AH)
KINDS = ("dport", "proto", "pair", "src/24", "dst")  # key kinds (--key), counted in packets
BYTE_KINDS = ("src bytes",)  # wire bytes per source (--weight bytes)
SCAPY_CANNOT = {
    "gopacket_test_loopback.pcap": "scapy does not dissect its loopback header (family 30, IPv6)",
    "zeek_mpls-6in6-broken.pcap.gz": "broken frames scapy reads as IPv4 where dptop counts a bad header",
}


def _outer_ip(pkt):
    layer = pkt
    while layer is not None and layer.__class__.__name__ not in ("NoPayload",):
        if isinstance(layer, (IP, IPv6)):
            return layer
        layer = layer.payload
    return None


def flow_of(ip) -> tuple[int, int | None]:
    """(protocol, destination port or None) of the outer IP header ``ip``."""
    if isinstance(ip, IP):
        proto, up, first = ip.proto, ip.payload, ip.frag == 0
    else:
        proto, up, first = ip.nh, ip.payload, True
        for _ in range(8):
            if isinstance(up, IPv6ExtHdrFragment):
                first = first and up.offset == 0
                proto, up = up.nh, up.payload
            elif isinstance(up, _EXT):
                proto, up = up.nh, up.payload
            else:
                break
    port = None
    if first and isinstance(up, (TCP, UDP, SCTP)) and up.dport is not None:
        port = int(up.dport)
    elif first and proto in (6, 17, 132) and isinstance(up, (Raw, Padding)) and len(up.load) >= 4:
        port = int.from_bytes(up.load[2:4], "big")  # a header cut after its ports (snap length)
    return int(proto), port


def _keyed(ip) -> bool:
    if isinstance(ip, IPv6):
        return not ip.src.lower().startswith("ff") and not ip.dst.lower().startswith("ffff:")
    return True


def _net(address: str) -> str:
    a = ipaddress.ip_address(address)
    if a.version == 6 and a.ipv4_mapped is not None:
        a = a.ipv4_mapped
    return str(ipaddress.ip_network(f"{a}/{24 if a.version == 4 else 48}", strict=False))


def _addr(address: str) -> str:
    a = ipaddress.ip_address(address)
    return str(a.ipv4_mapped) if a.version == 6 and a.ipv4_mapped is not None else str(a)


def scapy_counts(path, kind: str) -> Counter:
    """Counter of labels (as dptop prints them) of ``kind`` (one of KINDS or BYTE_KINDS)."""
    return Counter(_all_counts(str(path))[kind])


@functools.lru_cache(maxsize=None)
def _all_counts(path: str) -> dict:
    from dptop.engine.core.keys import PROTOCOL_NAMES
    out = {kind: Counter() for kind in KINDS + BYTE_KINDS}
    for pkt in PcapReader(path) if not path.endswith(".gz") else rdpcap(path):
        ip = _outer_ip(pkt)
        if ip is None or not _keyed(ip):
            continue
        proto, port = flow_of(ip)
        if port is not None:
            out["dport"][str(port)] += 1
        out["proto"][PROTOCOL_NAMES.get(proto, str(proto))] += 1
        out["pair"][f"{_addr(ip.src)} → {_addr(ip.dst)}"] += 1
        out["src/24"][_net(ip.src)] += 1
        out["dst"][_addr(ip.dst)] += 1
        out["src bytes"][_addr(ip.src)] += pkt.wirelen or len(pkt)
    return out


# --- Golden counts: scapy's counts of the bundled captures, cached with their provenance -----------
# Dissecting every bundled capture with scapy takes minutes; the default suite reads these counts
# instead, after checking each capture's sha256. `python -m tests.scapy_flows` rewrites the file from
# scapy; the slow test in test_keykinds.py redissects and compares, so the cache cannot drift.
GOLDEN = Path(__file__).parent / "data" / "keykinds_golden.json.gz"


def _sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def write_golden(paths) -> dict:
    import scapy
    doc = {"provenance": {"made_by": "python -m tests.scapy_flows (tests/scapy_flows.py, _all_counts)",
                          "dissector": f"scapy {scapy.VERSION}",
                          "kinds": list(KINDS + BYTE_KINDS)},
           "captures": {}}
    for path in paths:
        counts = _all_counts(str(path))
        doc["captures"][Path(path).name] = {
            "sha256": _sha256(path),
            "counts": {kind: dict(sorted(counts[kind].items())) for kind in KINDS + BYTE_KINDS}}
    text = json.dumps(doc, indent=0, ensure_ascii=False) + "\n"
    with open(GOLDEN, "wb") as fh, gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0) as gz:
        gz.write(text.encode("utf-8"))  # no name or time stamp: the same counts give the same bytes
    return doc


@functools.lru_cache(maxsize=None)
def _golden() -> dict:
    return json.loads(gzip.decompress(GOLDEN.read_bytes()).decode("utf-8"))["captures"]


def golden_counts(path, kind: str) -> Counter:
    """scapy's Counter of ``kind`` for a bundled capture, from the cache; the capture must be the
    one the cache was made from (same sha256), else the cache is stale and says how to remake it."""
    entry = _golden().get(Path(path).name)
    if entry is None or entry["sha256"] != _sha256(path):
        raise AssertionError(f"{GOLDEN.name} has no counts for this copy of {Path(path).name}: "
                             "run `python -m tests.scapy_flows` to remake them from scapy")
    return Counter(entry["counts"][kind])


def bundled_captures() -> list[Path]:
    """The captures test_keykinds compares (those scapy dissects the way dptop reads them)."""
    from dptop.resources import DEMO_CAPTURE
    data = Path(__file__).parent / "data"
    return sorted(p for p in data.glob("*.pcap*") if p.name not in SCAPY_CANNOT) + [Path(DEMO_CAPTURE)]


if __name__ == "__main__":
    made = write_golden(bundled_captures())
    print(f"{GOLDEN}: {len(made['captures'])} captures, {made['provenance']['dissector']}")
