"""Where the ``dpsw`` algorithm's labels come from (docs/dpsw-sketch.md §5.1–§5.2): the prefix
hierarchy (its levels, one channel per level with ρ split over them and the share of ρ an event
spends, the children a level expands to), a public candidate file, or the synthetic domain of the
paper's experiment [004 §5]. None of them is taken from the monitored traffic (§5.2 (c))."""
from __future__ import annotations

import functools
import ipaddress
from pathlib import Path

import numpy as np

from dptop.engine.core.keys import IPV4_MAPPED, encode_address
from dptop.engine.sliding_window.dpsw import Channel
from dptop.engine.sliding_window.dpsw_kernels import FAMILY_ANY, FAMILY_V4, FAMILY_V6
from dptop.engine.sliding_window.geometry import Geometry, budgets, position_costs

IPV4_LEVELS = (8, 16, 24, 32)
IPV6_LEVELS = (8, 16, 24, 32, 40, 48, 56, 64)
MAX_CANDIDATES = 1 << 22


def parse_levels(value, name: str, top: int) -> tuple[int, ...]:
    """``"8,16,24,32"`` (or a sequence) -> increasing prefix lengths; first <= 16, steps <= 16, last <= top."""
    if isinstance(value, str):
        if value.strip().lower() in ("", "off", "none"):
            return ()
        parts = value.replace(";", ",").split(",")
    elif isinstance(value, int):
        parts = [value]
    else:
        parts = list(value)
    try:
        levels = tuple(int(str(p).strip().lstrip("/")) for p in parts)
    except ValueError:
        raise ValueError(f"{name} ({value!r}) must be comma-separated prefix lengths, e.g. '8,16,24,32'") from None
    steps = [b - a for a, b in zip((0,) + levels, levels)]
    if not levels or min(steps) < 1 or max(steps) > 16 or levels[-1] > top:
        raise ValueError(f"{name} ({value!r}) must be increasing prefix lengths in [1, {top}] "
                         "with steps of at most 16 bits (each step expands 2^step children)")
    return levels


def load_candidates(path) -> np.ndarray:
    """A public candidate file -> ``(n, 2)`` keys (CIDR prefixes expanded to their addresses)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"candidates ({str(path)!r}) must be a readable file of addresses or CIDR prefixes")
    keys: set[tuple[int, int]] = set()
    for number, line in enumerate(path.read_text().splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            net = ipaddress.ip_network(text, strict=False)
        except ValueError:
            raise ValueError(f"candidates {path.name}:{number}: {text!r} is not an address or CIDR prefix") from None
        if len(keys) + net.num_addresses > MAX_CANDIDATES:
            raise ValueError(f"candidates ({path.name}) expand to more than {MAX_CANDIDATES} addresses")
        keys.update(encode_address(a) for a in (net.hosts() if net.num_addresses > 2 else net))
    out = np.array(sorted(keys), dtype=np.uint64).reshape(-1, 2)
    return out


def domain_keys(n: int) -> np.ndarray:
    """Keys of the synthetic Zipf domain: the IPv4 hosts of ranks 1..n (dptop.engine.core.workload)."""
    from dptop.engine.core.workload import ipv4_of_rank, keys_of_ipv4
    return keys_of_ipv4(ipv4_of_rank(np.arange(1, n + 1, dtype=np.int64)))


@functools.lru_cache(maxsize=32)
def children_offsets(parent: int, child: int) -> np.ndarray:
    """``(2^(child−parent), 2)`` words to OR into a /parent key (128-bit space) for its /child children."""
    shift = 128 - child
    vals = [c << shift for c in range(1 << (child - parent))]
    out = np.array([(v >> 64, v & ((1 << 64) - 1)) for v in vals], dtype=np.uint64)
    out.flags.writeable = False
    return out


def hierarchy_channels(rho: float, kind, levels4, levels6) -> tuple[list[Channel], dict, dict]:
    """The channels of the prefix hierarchy (§5.2 (b)), with each tree's channels (``groups``, name ->
    channel indices, top level first) and root (``roots``, name -> (hi, lo, prefix length) in the
    128-bit key space). Address keys: IPv4 levels ``levels4`` and IPv6 levels ``levels6``, each
    family's levels splitting ρ equally (they share the position counter, so each family may use the
    full ρ). Other key kinds: their ``KeyKind.hierarchy`` trees, one family, ρ split over every level."""
    chans, groups, roots = [], {}, {}
    if not kind.address:  # one family: every channel sees every key, ρ split over all
        trees = kind.hierarchy()
        total = sum(len(levels) for *_, levels in trees)
        for i, (hi, lo, base, levels) in enumerate(trees):
            groups[f"t{i}"] = list(range(len(chans), len(chans) + len(levels)))
            roots[f"t{i}"] = (hi, lo, base)
            chans += [Channel(rho / total, FAMILY_ANY, p) for p in levels]
        return chans, groups, roots
    for fam, levels, base in ((FAMILY_V4, levels4, 96), (FAMILY_V6, levels6, 0)):
        if levels:
            g = "v4" if fam == FAMILY_V4 else "v6"
            groups[g] = list(range(len(chans), len(chans) + len(levels)))
            roots[g] = (0, IPV4_MAPPED if fam == FAMILY_V4 else 0, base)
            chans += [Channel(rho / len(levels), fam, base + p) for p in levels]
    return chans, groups, roots


def hierarchy_budget_use(geometry: Geometry, channels, groups: dict, address: bool, rho: float) -> float:
    """max over positions of the ρ one event spends in the channels that see it, as a share of ρ
    (must be <= 1, §3.4): per address family (``address``), else over every channel."""
    g = geometry
    worst = 0.0
    families = list(groups.values()) if address else [sum(groups.values(), [])]
    for chans in families:
        cost = sum(position_costs(g.I, g.Ip, budgets(channels[c].rho, g.alpha, g.m)) for c in chans)
        worst = max(worst, float(np.max(cost)))
    return worst / rho
