"""The local-DP algorithms of ``dptop list``: ldp-bgr, ldp-dsr, ldp-bdr, ldp-cnr, ldp-dsr-prefix.

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
from typing import ClassVar

import numpy as np

from dptop.engine.core import registry
from dptop.engine.core.base import Algorithm, Footprint
from dptop.engine.core.clock import CellOrdered
from dptop.engine.core.keys import IPV4_MAPPED, KeyBatch
from dptop.engine.core.registry import register
from dptop.engine.core.release import Release, ReleasedItem, Span
from dptop.engine.privacy.guarantee import Guarantee
from dptop.engine.core.settings import PACKETS, check_positive_int
from dptop.engine.privacy.units import counted_unit
from dptop.engine.local_dp.accounting import (local_guarantee, parse_reports, report_epsilon, window_epsilon,
                                              window_options, window_text, DEFAULT_REPORTS)
from dptop.engine.single_release.epochs import time_grid
from dptop.engine.local_dp.bdr import bdr_epsilons
from dptop.engine.local_dp.domain import inventory_domain, ipv4_of_keys, prefix_domain
from dptop.engine.local_dp.dsr import grr_mechanism
from dptop.engine.local_dp.entropy import BLOCK, Entropy
from dptop.engine.local_dp.grr import grr_variance
from dptop.engine.local_dp.heavyguardian import ED_RULES
from dptop.engine.local_dp.pipeline import Pipeline, Reservoir, make_halves
from dptop.engine.local_dp.prefix import PrefixSearch, level_budget, parse_levels
from dptop.engine.core.facts import NO_FACTS, Provenance, PublicFact

DEFAULT_SNAPSHOT = 1024
DEFAULT_ALPHA = 0.05
HEAVY_PER_K = {"bgr": 48, "dsr": 48, "bdr": 4, "cnr": 4, "prefix": 12}
CELL_BYTES = 25
"""Bytes of one collector cell, at most: a label, an estimate, a count (8 each) and a flag."""
PREFIX_LEVELS = "8,12,16,20,24,28,32"
"""ldp-dsr-prefix's default levels of the IPv4 prefix tree (``--param levels``)."""
"""Bytes of one collector cell, at most: a label, an estimate, a count (8 each) and a flag."""
"""Default λ_h = this × k (HeavyGuardian with w = 1 needs far more cells than k to admit the
true top-k under GRR noise; measured in tests/test_ldp_utility.py)."""
COMMON = ("domain", "inventory", "reports", "snapshot", "ed", "alpha")


def check_names(extra: dict) -> None:
    """Every ``--param`` must be one some registered algorithm reads."""
    known = {"top"}
    for name in registry.names():
        known.update(getattr(registry.get(name), "parameters", None) or ())
    for name in extra:
        if name not in known:
            raise ValueError(f"unknown --param {name!r} (local-DP options: {', '.join(LocalDP.all_parameters())})")


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
        return sorted({p for c in (LDPBGR, LDPDSR, LDPBDR, LDPCNR, LDPDSRPrefix) for p in c.parameters})

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

    def status(self) -> dict:
        pipes = self._engine.pipelines
        sent = sum(p.collector.reports for p in pipes)
        rejected = {r: sum(p.collector.rejected[r] for p in pipes) for r in pipes[0].collector.rejected}
        agent_s = sum(p.agent_seconds for p in pipes)
        coll_s = sum(p.collector_seconds for p in pipes)
        return {"scheme": self.scheme, "epsilon_per_report": self.epsilon,
                "reports_per_window": "all" if self.reports_cap is None else self.reports_cap,
                "window_budget_per_agent": ("unbounded" if self.reports_cap is None
                                            else window_epsilon(self.epsilon, self.reports_cap)),
                "window": window_text(self.window_packets, self.window_seconds), "windows": self._windows,
                "packets_in_window": self._in_window, "reports": sent, "rejected": rejected,
                "heavy_cells": self.heavy, "snapshots": sum(p.snapshots for p in pipes),
                "upload_bytes": sum(p.upload for p in pipes), "download_bytes": sum(p.download for p in pipes),
                "agent_reports_per_second": sent / agent_s if agent_s else None,
                "collector_reports_per_second": sent / coll_s if coll_s else None}


class _DomainScheme(LocalDP):
    """A 003 scheme over a public finite domain (``domain`` or ``inventory``)."""

    def _configure(self, extra: dict) -> None:
        if "inventory" in extra and "domain" in extra:
            raise ValueError(f"domain ({extra['domain']!r}) and inventory ({extra['inventory']!r}) are "
                             "exclusive: choose one")
        self.domain = (inventory_domain(extra["inventory"]) if "inventory" in extra
                       else prefix_domain(extra.get("domain", "ipv4/16")))
        self.heavy = min(self.heavy, self.domain.size - 2) if self.settings.k_tilde is None else self.heavy
        self.split = extra.get("split", 0.5)
        if isinstance(self.split, bool) or not isinstance(self.split, (int, float)):
            raise ValueError(f"split ({self.split!r}) must be a number in (0, 1): the share of epsilon for M_judge")
        self.light = extra.get("light")
        if self.light is not None:
            self.light = check_positive_int("light", self.light)

    def _new_engine(self):
        seed = self.settings.seed
        agent, collector = make_halves(self.scheme, self.epsilon, self.domain.size, self.heavy, split=self.split,
                                       light=self.light, ed=self.ed, seed=seed)
        return _Engine(Pipeline(agent, collector, self.every, self.domain.size), self.domain.other)

    def _items(self, keys):
        return self.domain.items(keys)

    def _label(self, item, estimate):
        return self.domain.label(item, estimate)

    @staticmethod
    def grr_error(reports: int, epsilon: float, domain_size: int) -> float:
        """A-priori standard deviation of one item's estimate after ``reports`` GRR reports over the
        whole domain (docs/local-dp.md §1.1; BGR, DSR's entire phase): from the parameters alone."""
        m = grr_mechanism(epsilon, domain_size)
        return float(math.sqrt(grr_variance(reports, 0, m.p, m.q)))

    def detectable(self) -> dict | None:
        """About the reports a source needs among the ``n`` reports of the run (R per window times
        the windows, at most the packets; from the public length and time range of a replay, else
        one window) to clear τ w.p. 0.9: GRR's zero-item σ times √(2 ln(d/α)) (τ's Gaussian form)
        plus 1.2816 σ; from the parameters alone."""
        n, over = self.reports_expected()
        if n is None:
            return {"count": None, "share": None, "error": None, "over": over,
                    "note": "every packet is reported and the stream length is not public"}
        sigma = self.grr_error(n, self.epsilon, self.domain.size)
        z = math.sqrt(2 * math.log(max(self.domain.size, 2) / self.alpha)) if self.alpha < 1 else 0.0
        count = math.ceil(sigma * (z + 1.2816))
        limit = {"count": count, "share": count / n, "error": sigma, "over": over}
        if count > n:
            limit["note"] = (f"nothing can be released: at ε = {self.epsilon:.3g} per report (the window budget "
                             f"split over {self.reports_cap or 'every'} reports) a source needs about {count:,} "
                             f"of {over} over {self.domain.describe()}; raise --epsilon, lower --param reports "
                             f"or take a smaller domain")
        return limit

    def reports_expected(self) -> tuple[int | None, str]:
        """(reports the collector will receive, in words) from public facts: the replay's length,
        its windows (time range or packet epochs) and the cap R."""
        length, cap = self.facts.length, self.reports_cap
        windows = None
        if self.window_packets is not None and length:
            windows = -(-length // self.window_packets)
        elif self.facts.span is not None and self.facts.span[1] is not None:
            start, end = self.facts.span
            windows = int((end - start) // round(self.window_seconds * 1e9)) + 1
        if cap is None:
            return length, f"the {length:,} reports of the run" if length else "the run"
        n = cap * (windows or 1)
        n = min(n, length) if length else n
        return n, (f"the {n:,} reports of the run ({windows:,} windows of at most {cap:,})" if windows
                   else f"a window of {n:,} reports")

    def status(self) -> dict:
        sent = self._engine.pipelines[0].collector.reports
        return {**super().status(), "domain": self.domain.describe(),
                "grr_error_per_item": self.grr_error(max(sent, 1), self.epsilon, self.domain.size)}

    def notes(self):
        return (f"{self.scheme.upper()} over {self.domain.describe()}: one HeavyGuardian bucket (w = 1, docs/local-dp.md "
                f"§2.1) of λ_h = {self.heavy} cells, ED P = b^-C with ln b = 77/1000 ({self.ed}); agents "
                f"randomize against a hot-set snapshot refreshed every {self.every} reports",)


class _Engine:
    """One pipeline and the item it never releases."""

    def __init__(self, pipeline: Pipeline, other: int):
        self.pipelines = [pipeline]
        self.other = other

    def run(self, items):
        self.pipelines[0].run(items)

    def top(self, k):
        return self.pipelines[0].collector.top(k, self.other)

    def threshold(self, log_term):
        return self.pipelines[0].collector.threshold(log_term)

    def domain_size(self):
        return self.other + 1


@register
class LDPBGR(_DomainScheme):
    """BGR: GRR over the whole domain into HeavyGuardian (docs/local-dp.md §4), epsilon-LDP per report."""

    name = "ldp-bgr"
    scheme = "bgr"


@register
class LDPDSR(_DomainScheme):
    """DSR: domain shrinking to the hot set while HeavyGuardian is full (docs/local-dp.md §5), epsilon-LDP per report."""

    name = "ldp-dsr"
    scheme = "dsr"


@register
class LDPBDR(_DomainScheme):
    """BDR: budget division, judge hot/cold then GRR within (docs/local-dp.md §6.1-6.2), epsilon-LDP per report."""

    name = "ldp-bdr"
    scheme = "bdr"
    parameters = (*COMMON, "split")

    def notes(self):
        e1, e2 = bdr_epsilons(self.epsilon, self.split)
        return (*super().notes(), f"budget division ε1 = {e1:.4g} (M_judge) + ε2 = {e2:.4g} (M_hot/M_cold) = ε "
                                  "(003 Thm 4.1)")


@register
class LDPCNR(LDPBDR):
    """CNR: BDR with a buffer that nominates cold candidates (docs/local-dp.md §6.3, low confidence), epsilon-LDP per report."""

    name = "ldp-cnr"
    scheme = "cnr"
    parameters = (*COMMON, "split", "light")

    def notes(self):
        return (*super().notes(), "CNR is known only from the reference implementation [C] (docs/local-dp.md §6.3): low "
                                  f"confidence; buffer of {self.light or self.heavy} cold candidates")


@register
class LDPDSRPrefix(LocalDP):
    """DSR per level of the IPv4 prefix tree, /8 then extending hot prefixes: full addresses, epsilon-LDP per report."""

    name = "ldp-dsr-prefix"
    scheme = "prefix"
    parameters = ("reports", "snapshot", "ed", "alpha", "levels", "fanout")

    @classmethod
    def pipelines(cls, extra: dict) -> int:
        """One per level of the prefix tree."""
        return len(parse_levels(extra.get("levels", PREFIX_LEVELS)))

    def _configure(self, extra: dict) -> None:
        self.levels = parse_levels(extra.get("levels", PREFIX_LEVELS))
        self.fanout = check_positive_int("fanout", extra.get("fanout", 2 * self.k))

    def _new_engine(self):
        return PrefixSearch(self.epsilon, self.heavy, self.fanout, self.every, self.levels, self.ed,
                            self.settings.seed)

    def _items(self, keys):
        out = np.empty(len(keys), np.int64)
        ipv4_of_keys(keys, out)
        return out

    def _label(self, item, estimate):
        bits = self.levels[-1]
        return ReleasedItem(0, IPV4_MAPPED | (int(item) << (32 - bits)), estimate, None if bits == 32 else 96 + bits)

    def notes(self):
        L = len(self.levels)
        return (f"prefix extension over IPv4 /{', /'.join(map(str, self.levels))}: level 1 over the 256 /8s, "
                f"each further level over the children of the {self.fanout} hottest prefixes above; DSR with "
                f"λ_h = {self.heavy} cells per level",
                f"budget split across levels: report i goes to level i mod {L} (public schedule), so each level "
                f"gets 1/{L} of an agent's reports (ε_window/{L}"
                + ("" if self.reports_cap is None else
                   f" = {level_budget(self.epsilon * self.reports_cap, L):.4g}")
                + f") at the full ε per report; estimates are scaled by {L}",
                "IPv6 sources are reported as 'other' (the prefix tree is IPv4)")
