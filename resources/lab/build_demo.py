"""Build ``resources/demo.pcap.gz``, the capture ``dptop demo`` replays, from public captures.

``python -m dptop.resources.lab.build_demo [--captures DIR] [--out FILE]`` (DIR defaults to the
shared captures folder beside the repository; provenance and licences in resources/SOURCES.md).

The demo is a *composed* stream: real packets of public attack captures (real addresses, wire
lengths and order) laid on one timeline of ``DURATION`` seconds by ``PLAN``. Each part takes a
slice of one capture, repeats it ``copies`` times end to end and re-times it to fill its
interval, keeping the capture's relative spacing (a capture recorded in one instant is spread
evenly). Frames keep their link-layer and IP headers and the transport's two ports only (the
monitor reads nothing else) and their original wire length. The output is deterministic: gzip without name or time stamp.

Why repeat: the continual-observation panel (LazyHH) releases a source only once it has sent
some 15k packets (its suppression threshold at ε = 0.5, docs/lazyhh.md §6.3), and the public
captures hold at most 2,000 packets of any one Internet source. The copies model recurring
attack waves so that three sources pass that bar within the demo's first minute of capture
time, while the per-epoch and sliding-window panels see several heavy sources throughout.
Repetition means a demo packet is not a distinct real packet: the stream shows the product, it
is no privacy-meaningful trace.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import struct
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np

DNS = "amp.dns.RRSIG.fragmented.pcap"
SYN = "amp.TCP.syn.optionallyACK.optionallysamePort.pcapng"
ECHO = "zeek_echo-connections.pcap.gz"
FLOOD = "pkt.TCP.synflood.spoofed.pcap"
BACNET = "amp.UDP.bacnet.IOT.37810.pcapng"
REFLECTION = "amp.TCP.reflection.SYNACK.pcap"

INPUTS = {  # name -> sha256 of the file as published (resources/SOURCES.md)
    DNS: "db8b55f728bd3828e0669190ddfd828d588db180a3f6b315a1677336719933c8",
    SYN: "4ee88c005948234120dd9a1ce76168d763c42babd8aae54bf0d98d4ae336c97a",
    ECHO: "381cdf0c0aa8e2ac1c72296a32e05b28afe935b55c567d368cdabd118bda8c5d",
    FLOOD: "3c5fc7467a0205fd083115926416064d6f256af7705131adeb909f94ef66e7fa",
    BACNET: "0070a4212ddab4a7ab96ce46f0d5f8ed5218c14a21873367e322a88b2b8e7849",
    REFLECTION: "9339d7bc9d78e04a189b027890355d0b3c2687a720c32606acfa31d5325cd87e",
}


class Part(NamedTuple):
    """Packets ``[first, first + count)`` of ``capture``, ``copies`` times, over ``[start, end)`` s."""

    capture: str
    first: int
    count: int
    copies: int
    start: float
    end: float


DURATION = 300.0
PLAN = (
    # a minute of attack waves: three sources pass LazyHH's threshold within it
    Part(DNS, 0, 4412, 9, 0.0, 60.0),
    Part(SYN, 0, 896, 45, 0.0, 60.0),
    Part(ECHO, 0, 16000, 1, 0.0, 60.0),
    Part(FLOOD, 0, 3000, 1, 0.0, 60.0),
    # quieter afterwards: the attacks go on at a lower rate; an IoT and a TCP reflection pass
    Part(DNS, 0, 4412, 3, 60.0, DURATION),
    Part(SYN, 0, 896, 12, 60.0, DURATION),
    Part(ECHO, 16000, 6000, 1, 60.0, DURATION),
    Part(FLOOD, 3000, 6000, 1, 60.0, DURATION),
    Part(BACNET, 0, 9617, 1, 150.0, 200.0),
    Part(REFLECTION, 0, 7996, 1, 220.0, 260.0),
)

EPOCH = 1632239124.430031
"""The timeline's zero: the first packet of the DNS capture (2021-09-21), in Unix seconds."""

ETHERNET = 1
PCAP_MAGIC_US = 0xA1B2C3D4


def read_pcap(path: Path) -> tuple[np.ndarray, list[bytes], np.ndarray]:
    """(stamps in µs, frames, wire lengths) of a classic Ethernet pcap file (plain or gzip)."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    magic = struct.unpack("<I", data[:4])[0]
    order = {PCAP_MAGIC_US: "<", 0xD4C3B2A1: ">", 0xA1B23C4D: "<", 0x4D3CB2A1: ">"}.get(magic)
    if order is None:
        raise ValueError(f"{path.name}: not a classic pcap file (magic {magic:#010x})")
    nano = magic in (0xA1B23C4D, 0x4D3CB2A1)
    if struct.unpack(order + "I", data[20:24])[0] != ETHERNET:
        raise ValueError(f"{path.name}: link type must be Ethernet (1)")
    stamps, frames, wire = [], [], []
    pos = 24
    while pos + 16 <= len(data):
        sec, frac, incl, orig = struct.unpack(order + "IIII", data[pos:pos + 16])
        frames.append(data[pos + 16:pos + 16 + incl])
        stamps.append(sec * 1_000_000 + (frac // 1000 if nano else frac))
        wire.append(orig)
        pos += 16 + incl
    return np.array(stamps, dtype=np.int64), frames, np.array(wire, dtype=np.int64)


def headers(frame: bytes) -> bytes:
    """The frame cut four bytes after its IP header (IPv4 with options, IPv6 fixed header): the
    transport's source and destination ports, nothing of the payload; others whole up to 58 bytes."""
    ethertype = frame[12:14]
    if ethertype == b"\x08\x00" and len(frame) > 14:
        return frame[:14 + 4 * (frame[14] & 0x0F) + 4]
    return frame[:58]


def retime(stamps: np.ndarray, copies: int, start: float, end: float) -> np.ndarray:
    """Offsets (µs from the timeline's zero) of ``copies`` end-to-end repetitions of packets
    stamped ``stamps``, scaled to fill ``[start, end)``; out-of-order stamps count as no gap."""
    gaps = np.maximum(np.diff(stamps), 0).astype(float)
    mean = gaps.mean() if len(gaps) else 0.0
    one = np.concatenate([gaps, [mean]])  # the gap after the last packet leads into the next copy
    steps = np.tile(one, copies)[:-1] if mean > 0 else np.ones(copies * len(stamps) - 1)
    position = np.concatenate([[0.0], np.cumsum(steps)])
    scale = (end - start) / (position[-1] + (steps.mean() if len(steps) else 1.0))
    return np.round((start + position * scale) * 1e6).astype(np.int64)


def build(captures: Path) -> bytes:
    """The demo capture (uncompressed pcap bytes) from the captures in ``captures``."""
    cache: dict[str, tuple] = {}
    rows = []  # (offset µs, part, index in part, frame, wire length)
    for p, part in enumerate(PLAN):
        if part.capture not in cache:
            path = captures / part.capture
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if digest != INPUTS[part.capture]:
                raise ValueError(f"{path}: sha256 {digest} is not the published file's {INPUTS[part.capture]}")
            cache[part.capture] = read_pcap(path)
        stamps, frames, wire = cache[part.capture]
        end = part.first + part.count
        if end > len(frames):
            raise ValueError(f"{part.capture} holds {len(frames)} packets, the plan asks for [{part.first}, {end})")
        offsets = retime(stamps[part.first:end], part.copies, part.start, part.end)
        for i, offset in enumerate(offsets.tolist()):
            j = part.first + i % part.count
            rows.append((offset, p, i, headers(frames[j]), int(wire[j])))
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    base = round(EPOCH * 1e6)
    out = io.BytesIO()
    out.write(struct.pack("<IHHiIII", PCAP_MAGIC_US, 2, 4, 0, 0, 65535, ETHERNET))
    for offset, _, _, frame, wire in rows:
        sec, usec = divmod(base + offset, 1_000_000)
        out.write(struct.pack("<IIII", sec, usec, len(frame), wire))
        out.write(frame)
    return out.getvalue()


def write(pcap: bytes, out: Path) -> None:
    with open(out, "wb") as fh, gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0, compresslevel=9) as gz:
        gz.write(pcap)


def main(argv=None) -> int:
    resources = Path(__file__).resolve().parents[1]
    parser = argparse.ArgumentParser(prog="python -m dptop.resources.lab.build_demo", description=__doc__.split("\n")[0])
    parser.add_argument("--captures", type=Path, default=resources.parent.parent / "shared" / "pcaps" / "main",
                        help="folder holding the public captures (default: the shared captures folder beside the repository)")
    parser.add_argument("--out", type=Path, default=resources / "demo.pcap.gz")
    args = parser.parse_args(argv)
    try:
        pcap = build(args.captures)
    except (OSError, ValueError) as exc:
        print(f"build_demo: {exc}", file=sys.stderr)
        return 1
    write(pcap, args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size:,} bytes; pcap sha256 {hashlib.sha256(pcap).hexdigest()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
