"""The public finite domain Ω every agent and the collector share (docs/local-dp.md §10.1 step 1).

A packet's item is the index of its source address in Ω, ``0 <= item < size``:

* ``ipv4/N`` (8 <= N <= 32): the IPv4 /N prefix, 2^N values;
* ``ipv6/N`` (16 <= N <= 56): the IPv6 /N prefix, 2^N values;
* an inventory file (``--param inventory=FILE``): one address a line (blank lines and ``#``
  comments skipped), the published list of hosts, in sorted key order.

The last index, ``size − 1``, is **other**: every packet outside the prefix family or the
inventory. Out-of-domain packets are reported like any other (as "other"), so whether a packet is
reported never depends on its address; "other" is never released.
"""
from __future__ import annotations

import ipaddress
from pathlib import Path

import numpy as np

from dptop.engine.core.jit import kernel
from dptop.engine.core.keys import IPV4_MAPPED, encode_address
from dptop.engine.core.release import ReleasedItem

_MAPPED_TAG = np.uint64(0xFFFF)
_LOW32 = np.uint64(0xFFFF_FFFF)
FAMILIES = {"ipv4": (8, 32), "ipv6": (16, 56)}


@kernel
def ipv4_of_keys(keys, out):
    """IPv4 address of each key (IPv4-mapped), else −1."""
    for i in range(len(keys)):
        if keys[i, 0] == 0 and (keys[i, 1] >> np.uint64(32)) == _MAPPED_TAG:
            out[i] = np.int64(keys[i, 1] & _LOW32)
        else:
            out[i] = -1


@kernel
def _prefix_items(keys, v6, bits, other, out):
    for i in range(len(keys)):
        mapped = keys[i, 0] == 0 and (keys[i, 1] >> np.uint64(32)) == _MAPPED_TAG
        if v6 and not mapped:
            out[i] = np.int64(keys[i, 0] >> np.uint64(64 - bits))
        elif mapped and not v6:
            out[i] = np.int64((keys[i, 1] & _LOW32) >> np.uint64(32 - bits))
        else:
            out[i] = other


@kernel
def _inventory_items(keys, his, los, other, out):
    """Binary search of each key in the sorted inventory (hi, lo); absent keys are ``other``."""
    for i in range(len(keys)):
        hi, lo = keys[i, 0], keys[i, 1]
        a, b = 0, len(his)
        while a < b:
            m = (a + b) // 2
            if his[m] < hi or (his[m] == hi and los[m] < lo):
                a = m + 1
            else:
                b = m
        out[i] = a if a < len(his) and his[a] == hi and los[a] == lo else other


class Domain:
    """A public domain: ``size`` values (the last is "other"), ``items(keys)``, ``label(i)``."""

    def __init__(self, name: str, size: int, family: str = "", bits: int = 0, inventory=None):
        self.name, self.size, self.family, self.bits = name, size, family, bits
        self.other = size - 1
        self._inventory = inventory  # (his, los) sorted, or None

    def items(self, keys: np.ndarray) -> np.ndarray:
        out = np.empty(len(keys), dtype=np.int64)
        if self._inventory is not None:
            _inventory_items(keys, self._inventory[0], self._inventory[1], self.other, out)
        else:
            _prefix_items(keys, self.family == "ipv6", self.bits, self.other, out)
        return out

    def label(self, item: int, estimate: float) -> ReleasedItem:
        """The released item for index ``item`` (< size − 1)."""
        if self._inventory is not None:
            return ReleasedItem(int(self._inventory[0][item]), int(self._inventory[1][item]), estimate)
        if self.family == "ipv4":
            lo = IPV4_MAPPED | (int(item) << (32 - self.bits))
            return ReleasedItem(0, lo, estimate, None if self.bits == 32 else 96 + self.bits)
        value = int(item) << (128 - self.bits)
        return ReleasedItem(value >> 64, value & ((1 << 64) - 1), estimate, self.bits)

    def describe(self) -> str:
        return f"{self.name} ({self.size - 1} values + other)"


def prefix_domain(spec: str) -> Domain:
    """``ipv4/16``, ``ipv6/48``, ... (see the module docstring for the allowed lengths)."""
    family, _, bits = str(spec).partition("/")
    if family not in FAMILIES or not bits.isdigit() or not FAMILIES[family][0] <= int(bits) <= FAMILIES[family][1]:
        rules = "; ".join(f"{f}/N with {lo} <= N <= {hi}" for f, (lo, hi) in FAMILIES.items())
        raise ValueError(f"domain ({spec!r}) must be {rules}, or use inventory=FILE")
    return Domain(f"{family} /{bits} prefixes", (1 << int(bits)) + 1, family, int(bits))


def inventory_domain(path) -> Domain:
    """A published inventory: one address a line."""
    p = Path(str(path))
    try:
        lines = p.read_text().splitlines()
    except OSError as exc:
        raise ValueError(f"inventory ({str(path)!r}) cannot be read: {exc.strerror or exc}") from None
    keys = set()
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            keys.add(encode_address(ipaddress.ip_address(text)))
        except ValueError:
            raise ValueError(f"inventory ({p}) line {number}: {text!r} is not an IP address") from None
    if len(keys) < 2:
        raise ValueError(f"inventory ({p}) must list at least 2 addresses, found {len(keys)}")
    rows = sorted(keys)
    his = np.array([r[0] for r in rows], dtype=np.uint64)
    los = np.array([r[1] for r in rows], dtype=np.uint64)
    return Domain(f"inventory {p.name}", len(rows) + 1, inventory=(his, los))
