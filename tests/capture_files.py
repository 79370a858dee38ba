"""Small capture-file writers for the capture tests (struct, byte by byte, obviously correct)."""
from __future__ import annotations

import ipaddress
import struct
from typing import NamedTuple


def ipv4(src: str, dst: str = "192.0.2.200", payload: bytes = b"") -> bytes:
    """A 20-byte IPv4 header (checksum left 0: the parser does not check it) + payload."""
    return struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 0, 0, 64, 17, 0,
                       ipaddress.IPv4Address(src).packed, ipaddress.IPv4Address(dst).packed) + payload


def ipv6(src: str, dst: str = "2001:db8::200", payload: bytes = b"") -> bytes:
    return struct.pack(">IHBB16s16s", 6 << 28, len(payload), 17, 64,
                       ipaddress.IPv6Address(src).packed, ipaddress.IPv6Address(dst).packed) + payload


def ether(ethertype: int, payload: bytes, tags: tuple = ()) -> bytes:
    """Ethernet frame; ``tags`` = ((tpid, vid), ...) outermost first."""
    head = b"\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02"
    for tpid, vid in tags:
        head += struct.pack(">HH", tpid, vid)
    return head + struct.pack(">H", ethertype) + payload


def pcap(frames, linktype: int = 1, big: bool = False, ns: bool = False, modified: bool = False,
         times=None) -> bytes:
    """Classic pcap bytes; ``times`` in ns (default: 1 s apart from 1.7e9 s + 123456789 ns)."""
    e = ">" if big else "<"
    magic = 0xA1B2CD34 if modified else (0xA1B23C4D if ns else 0xA1B2C3D4)
    out = [struct.pack(e + "IHHiIII", magic, 2, 4, 0, 0, 65535, linktype)]
    for i, frame in enumerate(frames):
        t = times[i] if times is not None else (1_700_000_000 + i) * 10**9 + 123_456_789
        frac = t % 10**9 if ns else (t % 10**9) // 1000
        out.append(struct.pack(e + "IIII", t // 10**9, frac, len(frame), len(frame)))
        if modified:
            out.append(struct.pack(e + "IHBB", 0, 0, 0, 0))
        out.append(frame)
    return b"".join(out)


def _block(e: str, btype: int, body: bytes) -> bytes:
    body += b"\x00" * (-len(body) % 4)
    n = len(body) + 12
    return struct.pack(e + "II", btype, n) + body + struct.pack(e + "I", n)


def shb(big: bool = False) -> bytes:
    e = ">" if big else "<"
    return _block(e, 0x0A0D0D0A, struct.pack(e + "IHHq", 0x1A2B3C4D, 1, 0, -1))


def idb(linktype: int, big: bool = False, tsresol: int | None = None, tsoffset: int | None = None,
        snaplen: int = 0) -> bytes:
    e = ">" if big else "<"
    opts = b""
    if tsresol is not None:
        opts += struct.pack(e + "HH", 9, 1) + bytes([tsresol]) + b"\x00" * 3
    if tsoffset is not None:
        opts += struct.pack(e + "HHq", 14, 8, tsoffset)
    if opts:
        opts += struct.pack(e + "HH", 0, 0)
    return _block(e, 1, struct.pack(e + "HHI", linktype, 0, snaplen) + opts)


def epb(iface: int, ts_units: int, frame: bytes, big: bool = False) -> bytes:
    e = ">" if big else "<"
    return _block(e, 6, struct.pack(e + "IIIII", iface, ts_units >> 32, ts_units & 0xFFFFFFFF,
                                    len(frame), len(frame)) + frame)


def spb(frame: bytes, big: bool = False) -> bytes:
    e = ">" if big else "<"
    return _block(e, 3, struct.pack(e + "I", len(frame)) + frame)


def block(btype: int, body: bytes, big: bool = False) -> bytes:
    return _block(">" if big else "<", btype, body)


class LinkCase(NamedTuple):
    name: str
    linktype: int
    frame: bytes
    expected: object
    """``(source, destination)`` as written, or the name of the skip reason."""
    big_endian: bool = False
    """The frame's own fields are big-endian, so a file holding it must be too (NFLOG TLVs are
    in the writing host's byte order)."""


def link_corpus() -> list[LinkCase]:
    """A frame for every supported link-layer path. Frames are built with scapy's layers where it
    has them (PPP, HDLC, 802.11, radiotap, PPI, Ethernet, 802.1Q, MPLS), else byte by byte from
    the formats' specifications."""
    from scapy.all import HDLC, IP, LLC, PPI, PPP, SNAP, UDP, Dot1Q, Dot11, Dot11QoS, Ether, IPv6, RadioTap, Raw
    from scapy.contrib.mpls import MPLS

    v4 = IP(src="198.51.100.1", dst="203.0.113.7") / UDP(sport=1, dport=2)
    v6 = IPv6(src="2001:db8::11", dst="2001:db8::99") / UDP(sport=1, dport=2)
    ok4, ok6 = ("198.51.100.1", "203.0.113.7"), ("2001:db8::11", "2001:db8::99")
    snap4 = LLC(dsap=0xAA, ssap=0xAA, ctrl=3) / SNAP(OUI=0, code=0x0800) / v4
    snap6 = LLC(dsap=0xAA, ssap=0xAA, ctrl=3) / SNAP(OUI=0, code=0x86DD) / v6
    data_to_ds = Dot11(type=2, subtype=0, FCfield=0x01, addr1="02:00:00:00:00:01",
                       addr2="02:00:00:00:00:02", addr3="02:00:00:00:00:03")
    qos_wds = Dot11(type=2, subtype=8, FCfield=0x03, addr4="02:00:00:00:00:04") / Dot11QoS(TID=5)
    eth = Ether(src="02:00:00:00:00:02", dst="02:00:00:00:00:01")
    b = bytes
    cases = [
        ("ppp v4", 9, b(PPP(proto=0x0021) / v4), ok4),
        ("ppp hdlc-framed v6", 9, b(HDLC() / PPP(proto=0x0057) / v6), ok6),
        ("ppp compressed protocol", 9, b"\x21" + b(v4), ok4),
        ("ppp mpls", 9, b(PPP(proto=0x0281) / MPLS(label=16, s=1) / v6), ok6),
        ("ppp lcp", 9, b(HDLC() / PPP(proto=0xC021)) + b"\x01\x01\x00\x04", "non-ip"),
        ("ppp-hdlc v4", 50, b(HDLC() / PPP(proto=0x0021) / v4), ok4),
        ("ppp-hdlc cisco framing", 50, b"\x0f\x00\x86\xdd" + b(v6), ok6),
        ("cisco hdlc v4", 104, b"\x0f\x00\x08\x00" + b(v4), ok4),
        ("cisco hdlc slarp", 104, b"\x8f\x00\x80\x35" + b"\x00" * 20, "non-ip"),
        ("frame relay v4", 107, b"\x18\x41\x03\xcc" + b(v4), ok4),
        ("frame relay v6 padded", 107, b"\x18\x41\x03\x00\x8e" + b(v6), ok6),
        ("frame relay snap", 107, b"\x18\x41\x03\x00\x80\x00\x00\x00\x08\x00" + b(v4), ok4),
        ("frame relay 3-byte address", 107, b"\x18\x40\x01\x03\xcc" + b(v4), ok4),
        ("802.11 data to-ds", 105, b(data_to_ds / snap4), ok4),
        ("802.11 qos 4-address", 105, b(qos_wds / snap6), ok6),
        ("802.11 beacon", 105, b(Dot11(type=0, subtype=8)) + b"\x00" * 12,
         "802.11 frame without data (management, control, null)"),
        ("802.11 null data", 105, b(Dot11(type=2, subtype=4)),
         "802.11 frame without data (management, control, null)"),
        ("802.11 protected", 105, b(Dot11(type=2, FCfield=0x40) / Raw(b"\x00" * 40)),
         "802.11 protected (encrypted) frame"),
        ("radiotap 802.11", 127, b(RadioTap() / data_to_ds / snap4), ok4),
        ("radiotap tsft+flags datapad qos", 127,
         b(RadioTap(present="TSFT+Flags", Flags=0x20, mac_timestamp=5) / Dot11(type=2, subtype=8) / Dot11QoS())
         + b"\x00\x00" + b(snap6), ok6),
        ("ppi 802.11", 192, b(PPI(dlt=105) / data_to_ds / snap4), ok4),
        ("fddi llc/snap", 10, b"\x50" + b"\x02\x00\x00\x00\x00\x01" * 2 + b(snap4), ok4),
        ("ipoib v6", 242, b"\x00" * 40 + b"\x86\xdd\x00\x00" + b(v6), ok6),
        ("nflog v4", 239, b"\x02\x00\x00\x00" + struct.pack("<HH", 8, 10) + b"pfx\x00"
         + struct.pack("<HH", 4 + len(b(v4)), 9) + b(v4), ok4),
        ("nflog v6 big-endian tlvs", 239, b"\x0a\x00\x00\x01" + struct.pack(">HH", 5, 10) + b"x\x00\x00\x00"
         + struct.pack(">HH", 4 + len(b(v6)), 9) + b(v6), ok6, True),
        ("pktap ethernet", 258, struct.pack("<III", 108, 1, 1) + b"\x00" * 96 + b(eth / v4), ok4),
        ("ipnet v6", 226, struct.pack(">BBHIIIII", 1, 26, 0, len(b(v6)), 1, 0, 0, 0) + b(v6), ok6),
        ("ipnet v4", 226, struct.pack(">BBHIIIII", 1, 2, 0, len(b(v4)), 1, 0, 0, 0) + b(v4), ok4),
        ("vn-tag", 1, b(Ether(type=0x8926)) + b"\x00\x00\x00\x05\x08\x00" + b(v4), ok4),
        ("e-tag", 1, b(Ether(type=0x893F)) + b"\x00\x00\x00\x00\x00\x07\x86\xdd" + b(v6), ok6),
        ("pbb i-tag", 1, b(Ether(type=0x88E7)) + b"\x00\x00\x01\x00" + b(eth)[:12] + b"\x08\x00" + b(v4), ok4),
        ("qinq mpls", 1, b(eth / Dot1Q(vlan=5) / Dot1Q(vlan=6, type=0x8847) / MPLS(label=7, s=1) / v4), ok4),
    ]
    return [LinkCase(*c) for c in cases]
