"""What a packet counts for: its key kind (source or destination address, destination port, IP
protocol, (source, destination) pair, or a source/destination network).

Every kind is a 128-bit key in the ``dptop.engine.core.keys`` layout, so every algorithm runs on
every kind unchanged. Address kinds (``src``, ``dst``) are the addresses themselves. The others live
in ``ffff::/16``, which no counted packet has as source or destination (capture drops those), with
a 16-bit tag that says how to read them back, so a label is always exactly what was counted
(docs/dpss-eehh.md P11):

* ``dport``  ``hi = TAG_PORT``, ``lo`` = the TCP/UDP/SCTP destination port (packets without one
  are not counted under this kind);
* ``proto``  ``hi = TAG_PROTO``, ``lo`` = the IPv4 protocol / IPv6 last next header;
* ``pair``   two IPv4 ends: ``hi = TAG_PAIR4``, ``lo = src << 32 | dst``; a pair with an IPv6 end is
  a 96-bit hash under a per-process OS seed (``hi = TAG_PAIR6 | 32 bits``), whose label is kept
  in ``PAIR_NAMES`` when the pair is first keyed (a collision merges two pairs' counts: one packet
  still changes one key by one, so no guarantee changes);
* ``src/24`` ... ``dst/16``: ``hi = TAG_NET | l`` with ``l`` the prefix length in the 128-bit space
  (IPv4 /24 is 120, IPv6 /48 is 48), ``lo`` = the network's significant 64-bit word (the mapped
  IPv4 word, or the IPv6 upper word) with the host bits cleared. IPv4 takes /24 or /16, IPv6 /48
  or /32.

``KeyKind.label`` is the wording the guarantees and the views read ("destination port").
"""
from __future__ import annotations

import enum
import os

import numpy as np

from dptop.engine.core.keys import (FLOW_PORT, IPV4_MAPPED, KEY_DTYPE, PAIR_NAMES, TAG_NET,
                                    TAG_PAIR4, TAG_PAIR6, TAG_PORT, TAG_PROTO, KeyBatch, decode_key)

_PAIR_SEED = np.uint64(int.from_bytes(os.urandom(8), "little"))
_U = np.uint64


class KeyKind(enum.Enum):
    """The key a packet counts for; the value is the name in ``--key``, the window and the JSON."""

    SRC = "src"
    DST = "dst"
    DPORT = "dport"
    PROTO = "proto"
    PAIR = "pair"
    SRC24 = "src/24"
    SRC16 = "src/16"
    DST24 = "dst/24"
    DST16 = "dst/16"

    @property
    def label(self) -> str:
        """What one key is, in the words of a guarantee ("… per destination port")."""
        return _LABELS[self]

    @property
    def address(self) -> bool:
        """The key is one host address (the only kinds the user-level and local-DP address searches take)."""
        return self in (KeyKind.SRC, KeyKind.DST)

    @property
    def side(self) -> str | None:
        """"src" or "dst" for address and network kinds."""
        return self.value[:3] if self.value[:3] in ("src", "dst") else None

    @property
    def prefixes(self) -> tuple[int, int] | None:
        """(IPv4, IPv6) prefix lengths of a network kind."""
        return {"24": (24, 48), "16": (16, 32)}.get(self.value[4:]) if "/" in self.value else None

    def hierarchy(self) -> tuple[tuple[int, int, int, tuple[int, ...]], ...]:
        """Prefix trees over this kind's keys for a search that expands heavy prefixes (DPSW's
        hierarchy, docs/dpsw-sketch.md §5.2 (b)): ``(hi, lo, base, levels)`` per tree, the fixed
        words, the length in the 128-bit key space they fix, and the levels to expand. A network
        kind's tree ends at its own prefix: its keys are the hierarchy's last level."""
        if self is KeyKind.DPORT:
            return ((TAG_PORT, 0, 112, (120, 128)),)
        if self is KeyKind.PROTO:
            return ((TAG_PROTO, 0, 120, (128,)),)
        if self is KeyKind.PAIR:
            return ((TAG_PAIR4, 0, 64, tuple(range(72, 129, 8))), (TAG_PAIR6, 0, 32, tuple(range(48, 129, 16))))
        v4, v6 = self.prefixes
        return ((TAG_NET | (96 + v4), IPV4_MAPPED, 96, tuple(range(104, 97 + v4, 8))),
                (TAG_NET | v6, 0, 64, tuple(range(72, 65 + v6, 8))))

    def keys(self, batch: KeyBatch) -> tuple[np.ndarray, np.ndarray | None]:
        """This kind's keys of ``batch``'s packets and, when some packets have none (no port), the
        mask of those that count."""
        side = self.side
        if side == "dst" or self is KeyKind.PAIR:
            if batch.dst is None:
                raise ValueError(f"--key {self.value}: this source does not provide destination addresses")
        if self.address:
            return (batch.keys if side == "src" else batch.dst), None
        if self.prefixes is not None:
            return network_keys(batch.keys if side == "src" else batch.dst, *self.prefixes), None
        if self is KeyKind.PAIR:
            return pair_keys(batch.keys, batch.dst), None
        if batch.flow is None:
            raise ValueError(f"--key {self.value}: this source does not provide protocols and ports")
        flow = batch.flow.astype(np.uint64)
        out = np.empty((len(flow), 2), KEY_DTYPE)
        if self is KeyKind.PROTO:
            out[:, 0], out[:, 1] = _U(TAG_PROTO), (flow >> _U(16)) & _U(0xFF)
            return out, None
        out[:, 0], out[:, 1] = _U(TAG_PORT), flow & _U(0xFFFF)
        has = (flow & _U(FLOW_PORT)) != 0
        return out, None if has.all() else has


_LABELS = {
    KeyKind.SRC: "source address", KeyKind.DST: "destination address",
    KeyKind.DPORT: "destination port (TCP, UDP, SCTP)", KeyKind.PROTO: "IP protocol",
    KeyKind.PAIR: "(source, destination) address pair",
    KeyKind.SRC24: "source network (IPv4 /24, IPv6 /48)", KeyKind.SRC16: "source network (IPv4 /16, IPv6 /32)",
    KeyKind.DST24: "destination network (IPv4 /24, IPv6 /48)",
    KeyKind.DST16: "destination network (IPv4 /16, IPv6 /32)",
}
KEY_KINDS = tuple(k.value for k in KeyKind)


def is_v4(keys: np.ndarray) -> np.ndarray:
    return (keys[:, 0] == 0) & ((keys[:, 1] >> _U(32)) == _U(0xFFFF))


def network_keys(keys: np.ndarray, v4_bits: int, v6_bits: int) -> np.ndarray:
    """Address keys -> network keys: IPv4 /``v4_bits``, IPv6 /``v6_bits`` (``v6_bits`` <= 64)."""
    v4 = is_v4(keys)
    out = np.empty_like(keys)
    l4, l6 = 96 + v4_bits, v6_bits
    out[:, 0] = np.where(v4, _U(TAG_NET | l4), _U(TAG_NET | l6))
    mask4 = _U(((1 << 64) - 1) ^ ((1 << (128 - l4)) - 1))
    mask6 = _U(((1 << 64) - 1) ^ ((1 << (64 - l6)) - 1))
    out[:, 1] = np.where(v4, keys[:, 1] & mask4, keys[:, 0] & mask6)
    return out


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on an array (wrapping uint64 arithmetic)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> _U(30))) * _U(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> _U(27))) * _U(0x94D049BB133111EB)
        return x ^ (x >> _U(31))


def pair_keys(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """(source, destination) address keys -> pair keys; the hashed ones are named in ``PAIR_NAMES``."""
    out = np.empty_like(src)
    both4 = is_v4(src) & is_v4(dst)
    out[:, 0] = _U(TAG_PAIR4)
    out[:, 1] = ((src[:, 1] & _U(0xFFFF_FFFF)) << _U(32)) | (dst[:, 1] & _U(0xFFFF_FFFF))
    if not both4.all():
        six = ~both4
        a = _mix(src[six, 0] ^ _PAIR_SEED)
        a = _mix(a ^ src[six, 1])
        a = _mix(a ^ dst[six, 0])
        h = _mix(a ^ dst[six, 1])
        g = _mix(h ^ _PAIR_SEED)
        out[six, 0] = _U(TAG_PAIR6) | (g & _U(0xFFFF_FFFF))
        out[six, 1] = h
        rows = np.concatenate([out[six], src[six], dst[six]], axis=1)
        for r in np.unique(rows, axis=0).tolist():
            if (r[0], r[1]) not in PAIR_NAMES:
                PAIR_NAMES[(r[0], r[1])] = f"{decode_key(r[2], r[3])} → {decode_key(r[4], r[5])}"
    return out
