"""Synthetic traffic: Zipf-distributed source addresses, as key arrays or as a real pcap file.

Rank r (1 = heaviest) of a Zipf(skew) law over ``domain`` items maps to the IPv4 address
``(r * 2654435761 + 10.0.0.0) mod 2^32`` — a bijection, so distinct ranks are distinct hosts and
the heavy hitters do not all sit in one subnet. ``write_pcap`` emits minimal Ethernet + IPv4
headers that tcpdump, Wireshark and scapy read.
"""
from __future__ import annotations

import struct

import numpy as np

from engine.keys import IPV4_MAPPED, KEY_DTYPE, KeyBatch

_SCRAMBLE = 2654435761
_BASE = 0x0A00_0000


def zipf_ranks(skew: float, domain: int, length: int, seed: int) -> np.ndarray:
    """``length`` ranks in ``[1, domain]`` drawn i.i.d. with P(r) proportional to r^-skew."""
    if not skew > 0:
        raise ValueError(f"skew ({skew}) must be > 0")
    if not 1 <= domain <= 1 << 32:
        raise ValueError(f"domain ({domain}) must be in [1, 2^32]")
    if length < 0:
        raise ValueError(f"length ({length}) must be >= 0")
    weights = np.arange(1, domain + 1, dtype=np.float64) ** -float(skew)
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    u = np.random.default_rng(seed).random(length)
    return np.minimum(np.searchsorted(cdf, u, side="right"), domain - 1).astype(np.int64) + 1


def ipv4_of_rank(ranks: np.ndarray) -> np.ndarray:
    """Rank -> IPv4 address as uint32 (bijective on 32 bits)."""
    return ((ranks.astype(np.uint64) * np.uint64(_SCRAMBLE) + np.uint64(_BASE)) & np.uint64(0xFFFF_FFFF)).astype(np.uint32)


def keys_of_ipv4(addresses: np.ndarray) -> np.ndarray:
    keys = np.zeros((len(addresses), 2), dtype=KEY_DTYPE)
    keys[:, 1] = np.uint64(IPV4_MAPPED) | addresses.astype(np.uint64)
    return keys


def zipf_keys(skew: float, domain: int, length: int, seed: int) -> np.ndarray:
    """``(length, 2)`` key array of a Zipf stream."""
    return keys_of_ipv4(ipv4_of_rank(zipf_ranks(skew, domain, length, seed)))


def zipf_batches(skew, domain, length, seed, batch_size=1 << 16, rate_pps=1_000_000):
    """The Zipf stream as ``KeyBatch``es with timestamps spaced at ``rate_pps``."""
    keys = zipf_keys(skew, domain, length, seed)
    ts = (np.arange(length, dtype=np.int64) * (1_000_000_000 // rate_pps)) + 1_700_000_000_000_000_000
    for start in range(0, length, batch_size):
        yield KeyBatch(keys[start:start + batch_size], ts[start:start + batch_size])


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


def write_pcap(path, src_ipv4: np.ndarray, ts_ns: np.ndarray, dst_ipv4: int = 0xC0A8_0001) -> None:
    """Write a classic little-endian microsecond pcap (Ethernet, IPv4, protocol 253 'testing')."""
    rec = np.zeros(len(src_ipv4), dtype=_RECORD)
    rec["ts_sec"] = ts_ns // 1_000_000_000
    rec["ts_usec"] = (ts_ns // 1000) % 1_000_000
    rec["incl_len"] = rec["orig_len"] = 34
    rec["eth"] = b"\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02"
    rec["ethertype"] = 0x0800
    rec["ver_ihl"] = 0x45
    rec["total_len"] = 20
    rec["ident"] = np.arange(len(rec)) & 0xFFFF
    rec["ttl"] = 64
    rec["proto"] = 253
    rec["src"] = src_ipv4
    rec["dst"] = dst_ipv4
    rec["csum"] = _ipv4_checksums(rec)
    # magic, version 2.4, thiszone, sigfigs, snaplen, linktype Ethernet
    header = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    with open(path, "wb") as f:
        f.write(header)
        f.write(rec.tobytes())


def write_zipf_pcap(path, skew, domain, length, seed, rate_pps=100_000) -> None:
    """``dptop synth``: a Zipf capture with packets spaced at ``rate_pps``."""
    src = ipv4_of_rank(zipf_ranks(skew, domain, length, seed))
    ts = np.arange(length, dtype=np.int64) * (1_000_000_000 // rate_pps) + 1_700_000_000_000_000_000
    write_pcap(path, src, ts)
