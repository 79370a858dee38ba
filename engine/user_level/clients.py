"""Declared protected hosts (``--clients PREFIXES``): each packet belongs to its protected end.

Without a declaration a host-level lane protects what one host sends (its packets as the user);
replies to it belong to the other end. With declared client prefixes, a packet whose source is a
client belongs to that client, and one whose destination is a client also does (a reply): the
user is always the client and the item the other end, in both directions, so one client host
with all its packets in the epoch is the unit. Packets with no client end, or with clients at
both ends, are dropped and counted (they belong to no single protected host).
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import numpy as np

from dptop.engine.core.keys import IPV4_MAPPED

_ALL = (1 << 64) - 1


def _mask(bits: int) -> tuple[int, int]:
    """(hi, lo) masks of the first ``bits`` of a 128-bit key."""
    full = ((1 << bits) - 1) << (128 - bits) if bits else 0
    return full >> 64, full & _ALL


@dataclass(frozen=True)
class ClientPrefixes:
    """Address prefixes of the protected (client) hosts, as (net hi, net lo, mask hi, mask lo)."""

    text: str
    nets: tuple[tuple[int, int, int, int], ...]

    @classmethod
    def parse(cls, text: str) -> "ClientPrefixes":
        nets = []
        for part in str(text).replace(";", ",").split(","):
            part = part.strip()
            if not part:
                continue
            try:
                net = ipaddress.ip_network(part, strict=False)
            except ValueError:
                raise ValueError(f"clients ({part!r}) must be address prefixes such as 10.0.0.0/8,2001:db8::/32") from None
            if net.version == 4:
                value, bits = IPV4_MAPPED | int(net.network_address), 96 + net.prefixlen
            else:
                value, bits = int(net.network_address), net.prefixlen
            mhi, mlo = _mask(bits)
            nets.append(((value >> 64) & mhi, value & _ALL & mlo, mhi, mlo))
        if not nets:
            raise ValueError(f"clients ({text!r}) names no prefix")
        return cls(str(text), tuple(nets))

    def contains(self, keys: np.ndarray) -> np.ndarray:
        """Which rows of ``(n, 2) uint64`` keys fall in a declared prefix."""
        hi, lo = keys[:, 0], keys[:, 1]
        out = np.zeros(len(keys), dtype=bool)
        for nhi, nlo, mhi, mlo in self.nets:
            out |= ((hi & np.uint64(mhi)) == np.uint64(nhi)) & ((lo & np.uint64(mlo)) == np.uint64(nlo))
        return out


def client_pairs(src: np.ndarray, dst: np.ndarray, clients: ClientPrefixes) -> tuple[np.ndarray, np.ndarray]:
    """``(pairs, kept)``: ``(m, 4)`` rows (client hi, lo, other end hi, lo) for the packets with
    exactly one client end, and the boolean mask of those packets."""
    s, d = clients.contains(src), clients.contains(dst)
    kept = s ^ d
    users = np.where(s[:, None], src, dst)[kept]
    items = np.where(s[:, None], dst, src)[kept]
    return np.concatenate([users, items], axis=1), kept
