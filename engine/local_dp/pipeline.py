"""The agent and collector halves wired in one process (docs/local-dp.md §10.1), and the agent's sampler.

``Pipeline.run(items)`` hands the agent a snapshot, lets it randomize up to ``every`` items
against it, passes the ``Reports`` to the collector, and takes a fresh snapshot every ``every``
reports: the agents of a deployment poll at a bounded rate (§10.3 item 5), so they randomize
against a snapshot up to ``every`` reports old, and the collector debiases each report by its
tag and version (§10.3 item 3). Only ``Snapshot`` and ``Reports`` cross between the halves; a
transport (Dask, sockets) can replace ``run``'s two calls without touching either half.

``Reservoir`` caps the reports of one agent per window at R (§10.2): a uniform sample of R of the
window's packets (Vitter's algorithm R on CSPRNG words), reported when the window closes.
"""
from __future__ import annotations

import time

import numpy as np

from dptop.engine.core.jit import kernel
from dptop.engine.local_dp.bdr import BDRAgent, BDRCollector
from dptop.engine.local_dp.dsr import DSRAgent, DSRCollector
from dptop.engine.local_dp.entropy import RESERVE, Entropy, WordBuffer, below, drive
from dptop.engine.local_dp.heavyguardian import ED_RULES
from dptop.engine.local_dp.protocol import report_bytes, snapshot_bytes

SCHEMES = ("bgr", "dsr", "bdr", "cnr")


def make_halves(scheme: str, epsilon: float, domain_size: int, heavy: int, *, split: float = 0.5,
                light: int | None = None, ed: str = "b^-C", seed: int | None = None):
    """(agent, collector) of ``scheme`` over a domain of ``domain_size`` values. With ``seed``
    both draw from seeded generators (NOT private)."""
    if scheme not in SCHEMES:
        raise ValueError(f"scheme ({scheme!r}) must be one of {', '.join(SCHEMES)}")
    if ed not in ED_RULES:
        raise ValueError(f"ed ({ed!r}) must be one of {', '.join(ED_RULES)}")
    agent_entropy = Entropy(None if seed is None else 2 * seed)
    collector_entropy = Entropy(None if seed is None else 2 * seed + 1)
    if scheme in ("bgr", "dsr"):
        return (DSRAgent(epsilon, domain_size, heavy, agent_entropy),
                DSRCollector(epsilon, domain_size, heavy, collector_entropy, shrink=scheme == "dsr",
                             rule=ED_RULES[ed]))
    if heavy > domain_size - 2:
        raise ValueError(f"k_tilde ({heavy}) must be <= domain size − 2 = {domain_size - 2} for {scheme}: "
                         "the cold part needs at least 2 values")
    return (BDRAgent(epsilon, split, domain_size, agent_entropy),
            BDRCollector(epsilon, split, domain_size, heavy, collector_entropy, nominate=scheme == "cnr",
                         light=heavy if light is None else light, rule=ED_RULES[ed]))


class Pipeline:
    """One agent and one collector, snapshots every ``every`` reports (see the module docstring)."""

    def __init__(self, agent, collector, every: int, item_values: int, parents=None):
        self.agent, self.collector, self.every = agent, collector, every
        self.item_values = item_values
        self.parents = parents  # prefix mode: callable giving the current parent prefixes
        self.snap = None
        self.since = 0
        self.upload = self.download = self.snapshots = 0
        self.agent_seconds = self.collector_seconds = 0.0

    def refresh(self) -> None:
        self.snap = self.collector.snapshot(None if self.parents is None else self.parents())
        self.since = 0
        self.snapshots += 1
        self.download += snapshot_bytes(self.snap, self.item_values)

    def run(self, items: np.ndarray) -> None:
        i = 0
        while i < len(items):
            if self.snap is None or self.since >= self.every:
                self.refresh()
            take = min(len(items) - i, self.every - self.since)
            t0 = time.perf_counter()
            reports = self.agent.randomize(items[i:i + take], self.snap)
            t1 = time.perf_counter()
            self.collector.insert(reports)
            self.collector_seconds += time.perf_counter() - t1
            self.agent_seconds += t1 - t0
            self.upload += len(reports) * report_bytes(self.item_values)
            i += take
            self.since += take


@kernel
def _reservoir_batch(items, kept, meta, words, pos, start):
    """Vitter's algorithm R over ``items[start:]``; ``meta`` = [seen, R]. Returns the index reached."""
    r = meta[1]
    i = start
    while i < len(items) and len(words) - pos[0] >= RESERVE:
        seen = meta[0]
        if seen < r:
            kept[seen] = items[i]
        else:
            j = below(words, pos, seen + 1)
            if j < r:
                kept[j] = items[i]
        meta[0] = seen + 1
        i += 1
    return i


class Reservoir:
    """A uniform sample of at most R of the items of one window (data-independent positions)."""

    def __init__(self, r: int, entropy: Entropy):
        self.buffer = WordBuffer(entropy)
        self.kept = np.zeros(r, np.int64)
        self.meta = np.array([0, r], np.int64)

    @property
    def seen(self) -> int:
        return int(self.meta[0])

    def add(self, items: np.ndarray) -> None:
        drive(self.buffer, len(items), lambda w, p, s: _reservoir_batch(items, self.kept, self.meta, w, p, s))

    def drain(self) -> np.ndarray:
        """The sample (in slot order), and a fresh window."""
        out = self.kept[:min(self.seen, len(self.kept))].copy()
        self.meta[0] = 0
        return out
