"""Small capture-file writers for the capture tests (struct, byte by byte, obviously correct)."""
from __future__ import annotations

import ipaddress
import struct


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
