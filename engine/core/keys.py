"""Item keys: one source address as two unsigned 64-bit words ``(hi, lo)``.

Every address is stored as its full 128-bit IPv6 form, so no two addresses ever share a key and
the label shown for a key is exactly the address that was counted (docs/dpss-eehh.md pitfall P11,
docs/dp-misra-gries.md §3.2: no 64-bit fold of IPv6).

* IPv6 ``a``: ``hi`` = upper 64 bits, ``lo`` = lower 64 bits.
* IPv4 ``a.b.c.d``: the IPv4-mapped IPv6 address ``::ffff:a.b.c.d``, i.e. ``hi = 0`` and
  ``lo = 0xffff_0000_0000 | ipv4``. An IPv6 packet whose source is literally ``::ffff:a.b.c.d`` is
  the same host and gets the same key.

A batch of keys is a C-contiguous ``uint64`` array of shape ``(n, 2)``: column 0 is ``hi``,
column 1 is ``lo``. Sources in ``ff00::/8`` (multicast) can never be packet sources; capture drops
them, which leaves ``hi >= 0xff00...`` free for sentinels (``EMPTY`` slots, dummy keys).
"""
from __future__ import annotations

import ipaddress
import os

import numpy as np

from dptop.engine.core.jit import inner

KEY_DTYPE = np.uint64
IPV4_MAPPED = 0xFFFF_0000_0000
EMPTY_WORD = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
"""Both words all ones: the empty-slot sentinel of every hash table (a multicast address)."""
SENTINEL_HI = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
"""``hi`` of reserved non-address keys (``(SENTINEL_HI, j)`` with small ``j`` = dummy key j)."""
FLOW_PORT = 1 << 24
"""Bit of a packet's flow word (``KeyBatch.flow``) set when it carries a destination port: bits
0-15 are the port, bits 16-23 the upper-layer protocol number."""


def empty_keys(n: int) -> np.ndarray:
    """A zeroed ``(n, 2)`` key array."""
    return np.zeros((n, 2), dtype=KEY_DTYPE)


def encode_address(address: str | ipaddress.IPv4Address | ipaddress.IPv6Address) -> tuple[int, int]:
    """Address string (IPv4 or IPv6) -> ``(hi, lo)`` Python ints."""
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    if ip.version == 4:
        return 0, IPV4_MAPPED | int(ip)
    value = int(ip)
    return value >> 64, value & 0xFFFF_FFFF_FFFF_FFFF


def decode_key(hi: int, lo: int) -> str:
    """``(hi, lo)`` -> address string; IPv4-mapped keys print as dotted quads; keys that are not
    addresses (ports, protocols, pairs, networks: dptop.engine.core.keykinds) print as themselves."""
    hi, lo = int(hi), int(lo)
    if (hi >> 48) == 0xFFFF and hi != 0xFFFF_FFFF_FFFF_FFFF:
        return decode_tagged(hi, lo)
    if hi == 0 and (lo >> 32) == 0xFFFF:
        return str(ipaddress.IPv4Address(lo & 0xFFFF_FFFF))
    return str(ipaddress.IPv6Address((hi << 64) | lo))


_TAG = 0xFFFF << 48
TAG_PORT, TAG_PROTO, TAG_PAIR4, TAG_PAIR6, TAG_NET = (_TAG | t << 32 for t in range(1, 6))
"""Tags of the keys that are not addresses (``hi`` in ffff::/16; dptop.engine.core.keykinds)."""
PAIR_NAMES: dict[tuple[int, int], str] = {}
"""Labels of the hashed (IPv6) pair keys seen in this process."""
_LOW32 = 0xFFFF_FFFF


def decode_tagged(hi: int, lo: int) -> str:
    """The label of a key that is not an address (``keys.decode_key`` calls this for ``ffff::/16``)."""
    tag = hi & ~_LOW32
    if tag == TAG_PORT:
        return str(lo)
    if tag == TAG_PROTO:
        return PROTOCOL_NAMES.get(lo, str(lo))
    if tag == TAG_PAIR4:
        return f"{decode_key(0, IPV4_MAPPED | lo >> 32)} → {decode_key(0, IPV4_MAPPED | lo & _LOW32)}"
    if tag == TAG_PAIR6:
        return PAIR_NAMES.get((hi, lo), f"pair {hi & _LOW32:08x}{lo:016x}")
    if tag == TAG_NET:
        length = hi & 0xFF
        return f"{decode_key(0, lo)}/{length - 96}" if length >= 96 else f"{decode_key(lo, 0)}/{length}"
    return f"key {hi:016x}{lo:016x}"


PROTOCOL_NAMES = {1: "1 (ICMP)", 2: "2 (IGMP)", 4: "4 (IPIP)", 6: "6 (TCP)", 17: "17 (UDP)", 41: "41 (IPv6)",
                  47: "47 (GRE)", 50: "50 (ESP)", 51: "51 (AH)", 58: "58 (ICMPv6)", 89: "89 (OSPF)",
                  103: "103 (PIM)", 112: "112 (VRRP)", 132: "132 (SCTP)"}
"""IANA protocol numbers shown with their names (the number always leads, so labels sort and parse)."""


def keys_from_addresses(addresses) -> np.ndarray:
    """A list of address strings -> ``(n, 2)`` key array."""
    out = empty_keys(len(addresses))
    for i, a in enumerate(addresses):
        out[i, 0], out[i, 1] = encode_address(a)
    return out


def addresses_from_keys(keys: np.ndarray) -> list[str]:
    """``(n, 2)`` key array -> address strings."""
    return [decode_key(h, l) for h, l in keys.tolist()]


def random_seed64() -> np.uint64:
    """A 64-bit hash seed from the OS (hash-flooding defence; it never affects privacy)."""
    return np.uint64(int.from_bytes(os.urandom(8), "little"))


LO_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)
"""Multiplies the low word in ``hash_key`` (``hashtable.homes`` computes the same hash in steps)."""
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)


@inner
def mix64(x):
    """splitmix64 finaliser: a bijective avalanche of one uint64."""
    x = (x ^ (x >> _S30)) * _M2
    x = (x ^ (x >> _S27)) * _M3
    return x ^ (x >> _S31)


@inner
def hash_key(hi, lo, seed):
    """64-bit hash of key ``(hi, lo)`` under ``seed`` (all uint64). Use the top bits for buckets."""
    return mix64(mix64(hi ^ seed) ^ (lo * LO_MULTIPLIER) ^ seed)


class KeyBatch:
    """What capture hands the engine, in arrival order: ``keys`` ``(n, 2) uint64`` (the packet
    source), packet times ``ts_ns`` (``int64`` ns since the Unix epoch) and, where the source
    knows them, ``dst`` ``(n, 2) uint64`` (the packet destination), ``length`` (``uint32``
    bytes on the wire, the record's original length) and ``flow`` (``uint32``: protocol and
    destination port, see ``FLOW_PORT``). Read-only once built: the runner gives the
    same batch to every algorithm thread. Algorithms read ``keys``; the monitor decides what
    ``keys`` holds (a ``keykinds.KeyKind`` of the packet, packets or byte units) before they see the batch.

    ``epoch`` is set when the stream runs on a public ``TimeGrid`` (engine/core/clock.py): every
    packet of the batch lies in that cell, batches arrive in cell order, and an empty batch with
    a larger ``epoch`` is the public clock's tick that closes the cells before it."""

    __slots__ = ("keys", "ts_ns", "dst", "length", "epoch", "flow")
    OPTIONAL = ("dst", "length", "flow")

    def __init__(self, keys: np.ndarray, ts_ns: np.ndarray | None = None, dst: np.ndarray | None = None,
                 length: np.ndarray | None = None, epoch: int | None = None, flow: np.ndarray | None = None):
        keys = _frozen(keys, KEY_DTYPE).reshape(-1, 2)
        n = len(keys)
        self.keys = keys
        self.ts_ns = np.zeros(n, dtype=np.int64) if ts_ns is None else _frozen(ts_ns, np.int64)
        self.dst = None if dst is None else _frozen(dst, KEY_DTYPE).reshape(-1, 2)
        self.length = None if length is None else _frozen(length, np.uint32)
        self.flow = None if flow is None else _frozen(flow, np.uint32)
        self.epoch = epoch
        for name in ("ts_ns", "dst", "length", "flow"):
            arr = getattr(self, name)
            if arr is not None and len(arr) != n:
                raise ValueError(f"{name} has {len(arr)} entries but keys has {n}")

    def __len__(self) -> int:
        return len(self.keys)

    def slice(self, start: int, stop: int) -> "KeyBatch":
        return self.take(slice(start, stop), self.epoch)

    def take(self, index: np.ndarray, epoch: int | None = None) -> "KeyBatch":
        """The packets at ``index`` (positions, a mask or a slice), in that order, tagged with ``epoch``.
        Every packet in order (the usual case on a public clock: a whole batch in the open cell) is
        the same arrays tagged anew, not a copy."""
        if _whole(index, len(self)):
            return self.tagged(epoch)
        return KeyBatch(self.keys[index], self.ts_ns[index], epoch=epoch,
                        **{f: None if getattr(self, f) is None else getattr(self, f)[index] for f in self.OPTIONAL})

    def tagged(self, epoch: int | None) -> "KeyBatch":
        """The same packets (the same read-only arrays) tagged with ``epoch``."""
        out = object.__new__(KeyBatch)
        for name in self.__slots__:
            setattr(out, name, getattr(self, name))
        out.epoch = epoch
        return out

    def with_times(self, ts_ns: np.ndarray) -> "KeyBatch":
        """The same packets stamped ``ts_ns``."""
        return KeyBatch(self.keys, ts_ns, self.dst, self.length, self.epoch, self.flow)


def _whole(index, n: int) -> bool:
    """Whether ``index`` (positions, a mask or a slice) picks every one of ``n`` packets in order."""
    if isinstance(index, slice):
        return index.step in (None, 1) and index.indices(n)[:2] == (0, n)
    index = np.asarray(index)
    if len(index) != n:
        return False
    if index.dtype == np.bool_:
        return bool(index.all())
    return n == 0 or (index[0] == 0 and index[-1] == n - 1 and bool((np.diff(index) == 1).all()))


def concat(batches: list[KeyBatch], epoch: int | None = None) -> KeyBatch:
    """One batch of ``batches`` in order (optional fields kept where every batch has them)."""
    def cat(name):
        arrays = [getattr(b, name) for b in batches]
        return None if any(a is None for a in arrays) else np.concatenate(arrays)

    return KeyBatch(cat("keys"), cat("ts_ns"), epoch=epoch, **{f: cat(f) for f in KeyBatch.OPTIONAL})


def tick(epoch: int) -> KeyBatch:
    """The public clock's tick: an empty batch (every optional field present) naming ``epoch``."""
    return KeyBatch(np.zeros((0, 2), KEY_DTYPE), np.zeros(0, np.int64), np.zeros((0, 2), KEY_DTYPE),
                    np.zeros(0, np.uint32), epoch, np.zeros(0, np.uint32))


def _frozen(arr, dtype) -> np.ndarray:
    out = np.ascontiguousarray(arr, dtype=dtype)
    out.flags.writeable = False
    return out
