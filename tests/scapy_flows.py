"""Reference keys of a capture read by scapy (an independent dissector), for the key-kind tests:
destination ports, protocols, (source, destination) pairs and /24 (IPv6 /48) source networks of
the packets whose outer IP header dptop keys (multicast sources and ``ffff::/16`` destinations
left out, as capture does)."""
from __future__ import annotations

import functools
import ipaddress
from collections import Counter

from scapy.contrib.mpls import MPLS  # noqa: F401  (binds ethertype 0x8847 to MPLS, as dptop reads it)
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import (IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop,
                                IPv6ExtHdrRouting)
from scapy.layers.ipsec import AH
from scapy.layers.sctp import SCTP
from scapy.packet import Padding, Raw
from scapy.utils import PcapReader, rdpcap

_EXT = (IPv6ExtHdrHopByHop, IPv6ExtHdrRouting, IPv6ExtHdrDestOpt, AH)


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
    """Counter of labels (as dptop prints them) of ``kind`` ("dport", "proto", "pair", "src/24")."""
    return Counter(_all_counts(str(path))[kind])


@functools.lru_cache(maxsize=None)
def _all_counts(path: str) -> dict:
    from dptop.engine.core.keys import PROTOCOL_NAMES
    out = {kind: Counter() for kind in ("dport", "proto", "pair", "src/24")}
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
    return out
