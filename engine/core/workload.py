"""Synthetic Zipf workloads: the key streams that tests, benchmarks and the DPSW domain scan use.

Rank r (1 = heaviest) of a Zipf(skew) law over ``domain`` items maps to the IPv4 address
``(r * 2654435761 + 10.0.0.0) mod 2^32``, a bijection, so distinct ranks are distinct hosts and
the heavy hitters do not all sit in one subnet. ``dptop.capture.synth`` writes the same stream
as a pcap file.
"""
from __future__ import annotations

import numpy as np

from dptop.engine.core.keys import IPV4_MAPPED, KEY_DTYPE

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
    return ranks_of(zipf_cdf(skew, domain), np.random.default_rng(seed).random(length))


def zipf_cdf(skew: float, domain: int) -> np.ndarray:
    """The cumulative Zipf law over ranks ``1..domain`` (``ranks_of`` draws from it)."""
    weights = np.arange(1, domain + 1, dtype=np.float64) ** -float(skew)
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    return cdf


def ranks_of(cdf: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Ranks for uniform draws ``u`` in [0, 1) under ``cdf`` (in pieces, the same stream as whole)."""
    return np.minimum(np.searchsorted(cdf, u, side="right"), len(cdf) - 1).astype(np.int64) + 1


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
