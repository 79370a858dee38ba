"""Synthetic traffic as a real pcap file: the Zipf stream of ``dptop.engine.core.workload`` with
minimal Ethernet + IPv4 headers that tcpdump, Wireshark and scapy read.

Each record holds the 34 header bytes (as a capture with snap length 34 would); its original
length and the IPv4 total length say how long the packet was on the wire, so readers see
destinations and wire lengths as in a real capture.
"""
from __future__ import annotations

import shutil
import struct
from pathlib import Path

import numpy as np

from dptop.engine.core.settings import SEED, Range
from dptop.engine.core.workload import ipv4_of_rank, ranks_of, zipf_cdf

_RECORD = np.dtype([
    ("ts_sec", "<u4"), ("ts_usec", "<u4"), ("incl_len", "<u4"), ("orig_len", "<u4"),
    ("eth", "S12"), ("ethertype", ">u2"),
    ("ver_ihl", "u1"), ("tos", "u1"), ("total_len", ">u2"), ("ident", ">u2"), ("frag", ">u2"),
    ("ttl", "u1"), ("proto", "u1"), ("csum", ">u2"), ("src", ">u4"), ("dst", ">u4"),
])


def _ipv4_checksums(rec: np.ndarray) -> np.ndarray:
    words = rec[["ver_ihl", "tos"]]
    header = np.zeros((len(rec), 10), dtype=np.uint32)
    header[:, 0] = (words["ver_ihl"].astype(np.uint32) << 8) | words["tos"]
    header[:, 1] = rec["total_len"]
    header[:, 2] = rec["ident"]
    header[:, 3] = rec["frag"]
    header[:, 4] = (rec["ttl"].astype(np.uint32) << 8) | rec["proto"]
    header[:, 6] = rec["src"] >> 16
    header[:, 7] = rec["src"] & 0xFFFF
    header[:, 8] = rec["dst"] >> 16
    header[:, 9] = rec["dst"] & 0xFFFF
    total = header.sum(axis=1)
    while (total >> 16).any():
        total = (total & 0xFFFF) + (total >> 16)
    return (~total & 0xFFFF).astype(np.uint16)


WIRE_LENGTHS = np.array([64, 576, 1500])
WIRE_SHARES = np.array([0.5, 0.15, 0.35])
"""The wire-length mix of ``write_zipf_pcap``: small (acknowledgements), mid-size, full MTU."""


HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
"""magic, version 2.4, thiszone, sigfigs, snaplen, linktype Ethernet"""


def _records(src_ipv4: np.ndarray, ts_ns: np.ndarray, dst_ipv4, wire_len, first: int = 0) -> bytes:
    """The records of a classic little-endian microsecond pcap; ``first`` numbers the IPv4 ident."""
    if np.any(np.asarray(wire_len) < 34):
        raise ValueError(f"wire_len (min {np.min(wire_len)}) must be >= 34 (the Ethernet and IPv4 headers)")
    rec = np.zeros(len(src_ipv4), dtype=_RECORD)
    rec["ts_sec"] = ts_ns // 1_000_000_000
    rec["ts_usec"] = (ts_ns // 1000) % 1_000_000
    rec["incl_len"] = 34
    rec["orig_len"] = wire_len
    rec["eth"] = b"\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02"
    rec["ethertype"] = 0x0800
    rec["ver_ihl"] = 0x45
    rec["total_len"] = rec["orig_len"] - 14
    rec["ident"] = (np.arange(len(rec)) + first) & 0xFFFF
    rec["ttl"] = 64
    rec["proto"] = 253
    rec["src"] = src_ipv4
    rec["dst"] = dst_ipv4
    rec["csum"] = _ipv4_checksums(rec)
    return rec.tobytes()


def write_pcap(path, src_ipv4: np.ndarray, ts_ns: np.ndarray, dst_ipv4=0xC0A8_0001, wire_len=34) -> None:
    """Write a classic little-endian microsecond pcap (Ethernet, IPv4, protocol 253 'testing');
    ``dst_ipv4`` and ``wire_len`` (>= 34 bytes) are one value or one per packet."""
    body = _records(src_ipv4, ts_ns, dst_ipv4, wire_len)
    with open(path, "wb") as f:
        f.write(HEADER)
        f.write(body)


SKEW = Range("skew", 0.0, 100.0, open_low=True)
DOMAIN = Range("domain", 1, 1 << 24, integer=True)
"""Hosts of a synthetic stream (the Zipf weights take 8 bytes each)."""
LENGTH = Range("length", 1, 1 << 30, integer=True)
"""Packets of a synthetic stream (50 bytes each in the file)."""
RATE = Range("rate", 1, 10**9, integer=True)
"""Packets per second of packet time (at most one per nanosecond)."""


BLOCK = 1 << 20
"""Packets generated and written at a time: memory stays a few hundred MiB at any length."""


def write_zipf_pcap(path, skew, domain, length, seed, rate_pps=100_000) -> None:
    """``dptop synth``: a Zipf capture with packets spaced at ``rate_pps``. Sources and
    destinations are independent Zipf streams over the same hosts (seeds ``seed`` and
    ``seed + 1``); wire lengths follow ``WIRE_LENGTHS`` / ``WIRE_SHARES`` (seed ``seed + 2``).
    Written ``BLOCK`` packets at a time (the same file as at once), after a check that the
    folder has room for it; a file that cannot be written whole is removed."""
    skew, domain, length, rate_pps, seed = (SKEW.check(skew), DOMAIN.check(domain), LENGTH.check(length),
                                            RATE.check(rate_pps), SEED.check(seed))
    need = len(HEADER) + length * _RECORD.itemsize
    free = shutil.disk_usage(Path(path).resolve().parent).free
    if need > free:
        raise ValueError(f"--length {length}: the capture takes {need / 2**30:.1f} GiB, the folder of {path} has "
                         f"{free / 2**30:.1f} GiB free")
    cdf = zipf_cdf(skew, domain)
    src_rng, dst_rng, wire_rng = (np.random.default_rng(seed + i) for i in range(3))
    gap = 1_000_000_000 // rate_pps
    try:
        with open(path, "wb") as f:
            f.write(HEADER)
            for at in range(0, length, BLOCK):
                n = min(BLOCK, length - at)
                src, dst = (ipv4_of_rank(ranks_of(cdf, rng.random(n))) for rng in (src_rng, dst_rng))
                wire = wire_rng.choice(WIRE_LENGTHS, size=n, p=WIRE_SHARES)
                ts = (np.arange(at, at + n, dtype=np.int64) * gap) + 1_700_000_000_000_000_000
                f.write(_records(src, ts, dst, wire, at))
    except BaseException:
        Path(path).unlink(missing_ok=True)
        raise
