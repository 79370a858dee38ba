"""Prefix extension over the public IPv4 prefix tree: full addresses without a domain scan.

003 has no answer for huge domains (docs/local-dp.md §10.3 item 2, §12 item 7): GRR over 2^32 addresses is
hopeless. ``PrefixSearch`` runs one DSR agent/collector pair per level of the public tree
(default /8, /16, /24, /32). Level 1 randomizes over the 256 /8 prefixes; level ℓ > 1 over the
2^(len_ℓ − len_ℓ−1) children of the ``fanout`` hottest prefixes of level ℓ − 1 at the time of its
snapshot (plus "other": not under any of them, or not IPv4). Each version of a level's domain is
published in its snapshot (the parents), so the agents and the collector agree on it, and
every report is debiased against the domain of the version it names (``dsr``, prefix mode).

**Budget split across levels** [D]: report i of an agent goes to level i mod L (a public
schedule, independent of the data), at the full ε per report. Each level therefore receives
1/L of an agent's reports, i.e. ε_window/L of its window budget; no report is split in ε. (Giving
every level its own reports beats splitting ε within a report: GRR's variance grows like
1/(e^ε − 1)², so L reports at ε each are worth far more than one report at ε/L.) Estimates of the
last level are scaled by L, its share of the reports.
"""
from __future__ import annotations

import numpy as np

from dptop.engine.local_dp.dsr import OTHER, DSRAgent, DSRCollector
from dptop.engine.local_dp.entropy import Entropy
from dptop.engine.local_dp.heavyguardian import ED_RULES
from dptop.engine.local_dp.pipeline import Pipeline
from dptop.engine.sliding_window.dpsw_labels import parse_levels as dpsw_levels

DEFAULT_LEVELS = (8, 16, 24, 32)


def level_budget(window_epsilon: float, levels: int) -> float:
    """Privacy map of the split: the share of an agent's window budget each level receives
    (1/L of its reports, each at the full ε per report)."""
    if levels < 1:
        raise ValueError(f"levels ({levels}) must be >= 1")
    return window_epsilon / levels


def parse_levels(value) -> tuple[int, ...]:
    """``levels`` (``"8,12,16,..."``): the IPv4 prefix lengths of the tree, as for ``dpsw``."""
    levels = dpsw_levels(value, "levels", 32)
    if not levels:
        raise ValueError(f"levels ({value!r}) must name at least one prefix length")
    return levels


class PrefixSearch:
    """L levels of DSR over the IPv4 prefix tree (see the module docstring)."""

    def __init__(self, epsilon: float, heavy: int, fanout: int, every: int, levels=DEFAULT_LEVELS,
                 ed: str = "b^-C", seed: int | None = None):
        self.levels = tuple(levels)
        self.fanout = fanout
        self.pipelines: list[Pipeline] = []
        self.cursor = 0  # reports sent so far (their level is the index mod L)
        prev = 0
        for i, bits in enumerate(self.levels):
            shift = bits - prev
            prev = bits
            agent = DSRAgent(epsilon, 0, heavy, Entropy(None if seed is None else 2 * seed + 10 * i), shift)
            collector = DSRCollector(epsilon, 0, heavy, Entropy(None if seed is None else 2 * seed + 10 * i + 1),
                                     rule=ED_RULES[ed], shift=shift)
            parents = (lambda: np.zeros(1, np.int64)) if i == 0 else self._parents_of(i - 1)
            self.pipelines.append(Pipeline(agent, collector, every, 1 << bits, parents))

    def _parents_of(self, level: int):
        return lambda: self.hot(level, self.fanout)

    def hot(self, level: int, limit: int) -> np.ndarray:
        """The ``limit`` hottest prefixes of ``level`` (estimate > 0, "other" excluded), sorted."""
        top = self.pipelines[level].collector.top(limit, OTHER)
        return np.sort(np.array([i for i, _ in top], np.int64))

    def run(self, addresses: np.ndarray) -> None:
        """Feed IPv4 addresses (int64; −1 = not IPv4), one report each, levels round-robin."""
        L = len(self.levels)
        start = (-self.cursor) % L  # the first address goes to level self.cursor mod L
        for i, p in enumerate(self.pipelines):
            mine = addresses[(start + i) % L::L] if L > 1 else addresses
            p.run(np.where(mine >= 0, mine >> (32 - self.levels[i]), OTHER))
        self.cursor += len(addresses)

    def threshold(self, log_term: float) -> float:
        """The last level's threshold, in the same scale as ``top``."""
        return self.pipelines[-1].collector.threshold(log_term) * len(self.levels)

    def domain_size(self) -> int:
        """Values a last-level report can name (its latest domain)."""
        latest = self.pipelines[-1].collector.latest
        return latest.entire.d if latest is not None else 2

    def top(self, k: int) -> list[tuple[int, float]]:
        """The last level's top-k as (prefix, estimated reports), scaled by L."""
        L = len(self.levels)
        return [(i, e * L) for i, e in self.pipelines[-1].collector.top(k, OTHER)]
