"""The base of the local-DP algorithms of ``dptop list`` (ldp-bgr, ldp-dsr, ldp-bdr, ldp-cnr in
``domain_schemes``; ldp-dsr-prefix in ``prefix_scheme``) [003; docs/local-dp.md §10].

Each is an ordinary registered ``Algorithm`` fed ``KeyBatch``es (docs/local-dp.md §10): the **agent** half
maps each packet's source into the public domain, samples at most R packets per window
(``accounting``), randomizes them (ε-LDP per report) and sends (version, tag, symbol); the
**collector** half, which nobody has to trust, validates and debiases the reports into its
HeavyGuardian and publishes the top-k. Both halves run in this process (``pipeline.Pipeline``);
only ``Snapshot`` and ``Reports`` pass between them.

Releases (post-processing of the reports, so they cost nothing more): one when each window
closes and one at the end; ``live()`` shows the collector's current top-k. ``items[].estimate``
is the estimated number of reports of the item; only items above the threshold τ are listed
(``threshold``: a bound that a zero-count item's estimate exceeds with probability <= α/d,
``alpha`` = 1 for 003's plain top-k), never "other".

Options (``--param``): ``domain`` (ipv4/16 default, ipv4/24, ipv6/32, ipv6/48, ...) or
``inventory=FILE``; ``reports`` (R per agent per window, default 1000, or ``all``); ``snapshot``
(reports between hot-set snapshots, default 1024); ``ed`` (``b^-C``, or [C]'s ``1-b^-C``);
``alpha`` (threshold level, default 0.05); ``split`` (BDR/CNR: ε1/ε, default 0.5); ``light`` (CNR buffer cells, default k~); ``levels`` and
``fanout`` (prefix search). ``--k-tilde`` sets the heavy cells λ_h (defaults below, measured
in the bench and the tests).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

import numpy as np

from dptop.engine.core import registry
from dptop.engine.core.base import Algorithm, Footprint
from dptop.engine.core.clock import CellOrdered
from dptop.engine.core.keys import IPV4_MAPPED, KeyBatch
from dptop.engine.core.release import Release, ReleasedItem, Span
from dptop.engine.privacy.guarantee import Guarantee
from dptop.engine.core.settings import PACKETS, check_positive_int
from dptop.engine.privacy.units import counted_unit
from dptop.engine.local_dp.accounting import (local_guarantee, parse_reports, report_epsilon, window_epsilon,
                                              window_options, window_text, DEFAULT_REPORTS)
from dptop.engine.single_release.epochs import time_grid
from dptop.engine.local_dp.entropy import BLOCK, Entropy
from dptop.engine.local_dp.heavyguardian import ED_RULES
from dptop.engine.local_dp.pipeline import Reservoir
from dptop.engine.core.facts import NO_FACTS, Provenance, PublicFact
from dptop.engine.core.status import AlgorithmStatus

DEFAULT_SNAPSHOT = 1024
DEFAULT_ALPHA = 0.05
HEAVY_PER_K = {"bgr": 48, "dsr": 48, "bdr": 4, "cnr": 4, "prefix": 12}
"""Default λ_h = this × k (HeavyGuardian with w = 1 needs far more cells than k to admit the
true top-k under GRR noise; measured in tests/test_ldp_utility.py)."""
CELL_BYTES = 25
"""Bytes of one collector cell, at most: a label, an estimate, a count (8 each) and a flag."""
COMMON = ("domain", "inventory", "reports", "snapshot", "ed", "alpha")


def check_names(extra: dict) -> None:
    """Every ``--param`` must be one some registered algorithm reads."""
    known = {"top"}
    for name in registry.names():
        known.update(getattr(registry.get(name), "parameters", None) or ())
    for name in extra:
        if name not in known:
            raise ValueError(f"unknown --param {name!r} (local-DP options: {', '.join(LocalDP.all_parameters())})")


@dataclass(frozen=True, kw_only=True)
class LocalStatus(AlgorithmStatus):
    """The scheme, its budget per report and per window (R reports, "all": unbounded), the windows,
    and what the collector saw: reports received and rejected (by reason), heavy cells, snapshots,
    bytes up and down, and the agents' and the collector's rates."""

    scheme: str
    epsilon_per_report: float
    reports_per_window: int | str
    window_budget_per_agent: float | str
    window: str
    windows: int
    packets_in_window: int
    reports: int
    rejected: Mapping[str, int]
    heavy_cells: int
    snapshots: int
    upload_bytes: int
    download_bytes: int
    agent_reports_per_second: float | None
    collector_reports_per_second: float | None


class LocalDP(CellOrdered, Algorithm):
    """Base of the local-DP algorithms: options, agent sampling per window, releases."""

    private = True
    family = "local DP"
    address_keys = True
    scheme: ClassVar[str] = ""
    parameters: ClassVar[tuple[str, ...]] = COMMON

    def __init__(self, settings, facts=NO_FACTS, counting=PACKETS):
        super().__init__(settings, facts, counting)
        x = dict(settings.extra)
        check_names(x)
        self.k = check_positive_int("k", settings.k)
        self.reports_cap = parse_reports(x.get("reports", DEFAULT_REPORTS))
        self.epsilon = report_epsilon(settings.epsilon, self.reports_cap)
        self.every = check_positive_int("snapshot", x.get("snapshot", DEFAULT_SNAPSHOT))
        self.alpha = x.get("alpha", DEFAULT_ALPHA)
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float)) or not 0 < self.alpha <= 1:
            raise ValueError(f"alpha ({self.alpha!r}) must be in (0, 1]: the chance that a zero-count item is "
                             "published (1: no threshold)")
        self.ed = str(x.get("ed", "b^-C"))
        if self.ed not in ED_RULES:
            raise ValueError(f"ed ({self.ed!r}) must be one of {', '.join(ED_RULES)}")
        self.window_packets, self.window_seconds = window_options(settings.epoch_packets, settings.epoch_seconds)
        # with the session's time epochs, reporting windows are its public grid (every cell, empty ones too)
        self.grid, self._bounded = time_grid(facts, settings.epoch_seconds) if facts.span else (None, False)
        default = HEAVY_PER_K[self.scheme] * self.k
        self.heavy = check_positive_int("k_tilde", settings.k_tilde if settings.k_tilde is not None else default)
        self._configure(x)
        self.reset()

    @classmethod
    def footprint(cls, settings, facts=NO_FACTS, counting=PACKETS):
        """Each pipeline's agent and collector (a buffer of ``BLOCK`` random words each, λ_h hot
        cells and, for CNR, as many cold ones), the report sampler's buffer and its R reports; λ_h
        = k~ (default a multiple of k, ``HEAVY_PER_K``), from the parameters alone."""
        x = settings.extra
        heavy = settings.k_tilde if settings.k_tilde is not None else HEAVY_PER_K[cls.scheme] * settings.k
        cells = heavy + (int(x.get("light") or heavy) if cls.scheme == "cnr" else 0)
        reports = parse_reports(x.get("reports", DEFAULT_REPORTS))
        sampler = 0 if reports is None else 8 * (BLOCK + reports)
        return Footprint(cls.pipelines(x) * (16 * BLOCK + CELL_BYTES * cells) + sampler, f"k~ = {heavy}")

    @classmethod
    def pipelines(cls, extra: dict) -> int:
        """Agent-collector pairs the scheme runs."""
        return 1

    @classmethod
    def all_parameters(cls) -> list[str]:
        """Every ``--param`` a registered local-DP algorithm reads."""
        schemes = [registry.get(name) for name in registry.names()]
        return sorted({p for c in schemes if issubclass(c, LocalDP) for p in c.parameters})

    # --- what subclasses provide -------------------------------------------------------------
    def _configure(self, extra: dict) -> None:
        """Read the scheme's own options (domain, split, ...)."""

    def _new_engine(self):
        """An object with ``run(items)``, ``top(k)`` and ``pipelines`` (agent+collector pairs)."""
        raise NotImplementedError

    def _items(self, keys: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _label(self, item: int, estimate: float) -> ReleasedItem:
        raise NotImplementedError

    def notes(self) -> tuple[str, ...]:
        return ()

    # --- Algorithm verbs -----------------------------------------------------------------------
    def reset(self) -> None:
        self.packets = 0
        self._last = None
        self._windows = 0
        self._cell = None  # time window of the open window
        self._in_window = 0
        self._index, self._joined, self.dropped = 0, False, 0  # public grid: the open cell; late packets
        seed = self.settings.seed
        self._engine = self._new_engine()
        self._sampler = None if self.reports_cap is None else Reservoir(
            self.reports_cap, Entropy(None if seed is None else seed + 7919))

    def update(self, keys: np.ndarray) -> None:
        items = self._items(keys)
        if self._sampler is None:
            self._engine.run(items)
        else:
            self._sampler.add(items)

    def consume(self, batch: KeyBatch) -> list[Release]:
        out: list[Release] = []
        if self.grid is not None:  # windows are the cells of the public grid (CellOrdered)
            self._consume_timed(batch, out)
            return out
        if len(batch) == 0:  # a tick without a public grid: reporting windows follow the packets
            return out
        if self.window_packets is not None:
            i = 0
            while i < len(batch):
                take = min(len(batch) - i, self.window_packets - self._in_window)
                self._feed(batch.keys[i:i + take])
                i += take
                if self._in_window == self.window_packets:
                    out.append(self._close_window())
            return out
        cells = batch.ts_ns // round(self.window_seconds * 1e9)
        if self._cell is not None:
            cells = np.maximum(cells, self._cell)
        cells = np.maximum.accumulate(cells)
        edges = [0, *(np.flatnonzero(np.diff(cells)) + 1).tolist(), len(batch)]
        for a, b in zip(edges[:-1], edges[1:]):
            if self._cell is not None and cells[a] != self._cell and self._in_window:
                out.append(self._close_window())
            self._cell = int(cells[a])
            self._feed(batch.keys[a:b])
        return out

    def _close(self) -> Release:
        """The open grid cell's window (``CellOrdered``)."""
        self._index += 1
        return self._close_window()

    def _fill(self, keys: np.ndarray) -> None:
        self._feed(keys)

    def _feed(self, keys: np.ndarray) -> None:
        self.update(keys)
        self.packets += len(keys)
        self._in_window += len(keys)

    def _close_window(self) -> Release:
        if self._sampler is not None:
            self._engine.run(self._sampler.drain())
        self._windows += 1
        self._in_window = 0
        self._last = self.release()
        return self._last

    def threshold(self) -> float:
        """τ: what a zero-count item's estimate exceeds with probability at most α/d, d the values a
        report can name (Bernstein's bound, ``CollectorBase.threshold``), so that over the whole
        domain noise is published with probability at most α; α = 1 publishes 003's top-k
        unfiltered (τ = 0). Post-processing of the reports: no privacy cost [D]."""
        if self.alpha >= 1.0:
            return 0.0
        return self._engine.threshold(math.log(max(self._engine.domain_size(), 2) / self.alpha))

    def release(self) -> Release:
        tau = self.threshold()
        labels = (self._label(i, e) for i, e in self._engine.top(self.k) if e > tau)
        items = tuple(sorted(labels, key=lambda it: (-it.estimate, it.hi, it.lo)))
        reports = sum(p.collector.reports for p in self._engine.pipelines)  # what the collector sees (public)
        return Release(self.name, Span(0, reports, "stream", self._windows), items, tau,
                       self.guarantee(), self.status())

    def live(self) -> Release | None:
        """The collector's current top-k: post-processing of the reports, free to show."""
        return self.release()

    def finish(self) -> list[Release]:
        if self.grid is not None:  # every cell left in a bounded range; nothing more in an open one
            out = []
            while self._bounded and self._index < self.grid.cells:
                out.append(self._close())
            return out
        if self._in_window or self._last is None:
            return [self._close_window()]
        return []

    def warm_up(self) -> None:
        """Compile the agent, collector and sampler kernels on a scratch instance (no real data)."""
        scratch = type(self)(self.settings, self.facts, self.counting)
        warm = np.zeros((64, 2), dtype=np.uint64)
        warm[:, 1] = IPV4_MAPPED + 0x0A00_0000 + np.arange(64, dtype=np.uint64) % 7
        scratch.update(KeyBatch(warm).keys)
        scratch._engine.run(scratch._items(KeyBatch(warm).keys))

    def guarantee(self) -> Guarantee:
        window = window_text(self.window_packets, self.window_seconds)
        entropy = self._engine.pipelines[0].agent.buffer.entropy
        return local_guarantee(self.epsilon, self.reports_cap, window, entropy.label, entropy.seeded, self.notes(),
                               counted_unit(self.counting)).with_facts((self.reports_fact(),))

    def reports_fact(self) -> PublicFact:
        """The number of reports the collector received: public in the local model (every report
        reaches the untrusted collector; the guarantee covers what a report says, not that it was
        sent). The threshold τ is a function of it (the variance a zero-count estimate gathers), so
        every release names it; read from the data, it is an assumed fact."""
        reports = sum(p.collector.reports for p in self._engine.pipelines)
        return PublicFact("reports", reports, Provenance.ASSUMED,
                          "the reports the collector received; the threshold grows with them")

    def status(self) -> LocalStatus:
        return self.local_status(LocalStatus)

    def local_status(self, status_type: type[LocalStatus], **figures) -> LocalStatus:
        """A ``status_type`` of the collector's and the agents' figures, and a scheme's own ``figures``."""
        pipes = self._engine.pipelines
        sent = sum(p.collector.reports for p in pipes)
        rejected = {r: sum(p.collector.rejected[r] for p in pipes) for r in pipes[0].collector.rejected}
        agent_s = sum(p.agent_seconds for p in pipes)
        coll_s = sum(p.collector_seconds for p in pipes)
        return status_type(
            scheme=self.scheme, epsilon_per_report=self.epsilon,
            reports_per_window="all" if self.reports_cap is None else self.reports_cap,
            window_budget_per_agent=("unbounded" if self.reports_cap is None
                                     else window_epsilon(self.epsilon, self.reports_cap)),
            window=window_text(self.window_packets, self.window_seconds), windows=self._windows,
            packets_in_window=self._in_window, reports=sent, rejected=MappingProxyType(rejected),
            heavy_cells=self.heavy, snapshots=sum(p.snapshots for p in pipes),
            upload_bytes=sum(p.upload for p in pipes), download_bytes=sum(p.download for p in pipes),
            agent_reports_per_second=sent / agent_s if agent_s else None,
            collector_reports_per_second=sent / coll_s if coll_s else None, **figures)
