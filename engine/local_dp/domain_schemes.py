"""The 003 schemes over a public finite domain as registered local-DP algorithms (003;
docs/local-dp.md §4–§6): BGR (GRR over the whole domain), DSR (domain shrinking), BDR (budget
division) and CNR (BDR with a buffer of cold candidates), each one agent–collector pipeline into
HeavyGuardian. The options, windows and releases they share are in ``scheme``."""
from __future__ import annotations

import math
from dataclasses import dataclass

from dptop.engine.core.registry import register
from dptop.engine.core.settings import check_positive_int
from dptop.engine.local_dp.bdr import bdr_epsilons
from dptop.engine.local_dp.domain import inventory_domain, prefix_domain
from dptop.engine.local_dp.dsr import grr_mechanism
from dptop.engine.local_dp.grr import grr_variance
from dptop.engine.local_dp.pipeline import Pipeline, make_halves
from dptop.engine.core.status import DetectionLimit
from dptop.engine.local_dp.scheme import COMMON, LocalDP, LocalStatus


@dataclass(frozen=True, kw_only=True)
class DomainStatus(LocalStatus):
    """``LocalStatus`` and the address domain, with the GRR error of one item's estimate now."""

    domain: str
    grr_error_per_item: float


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

    def detectable(self) -> DetectionLimit:
        """About the reports a source needs among the ``n`` reports of the run (R per window times
        the windows, at most the packets; from the public length and time range of a replay, else
        one window) to clear τ w.p. 0.9: GRR's zero-item σ times √(2 ln(d/α)) (τ's Gaussian form)
        plus 1.2816 σ; from the parameters alone."""
        n, over = self.reports_expected()
        if n is None:
            return DetectionLimit(None, None, None, over,
                                  note="every packet is reported and the stream length is not public")
        sigma = self.grr_error(n, self.epsilon, self.domain.size)
        z = math.sqrt(2 * math.log(max(self.domain.size, 2) / self.alpha)) if self.alpha < 1 else 0.0
        count = math.ceil(sigma * (z + 1.2816))
        note = ""
        if count > n:
            note = (f"nothing can be released: at ε = {self.epsilon:.3g} per report (the window budget "
                    f"split over {self.reports_cap or 'every'} reports) a source needs about {count:,} "
                    f"of {over} over {self.domain.describe()}; raise --epsilon, lower --param reports "
                    f"or take a smaller domain")
        return DetectionLimit(count, count / n, sigma, over, note=note)

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

    def status(self) -> DomainStatus:
        sent = self._engine.pipelines[0].collector.reports
        return self.local_status(DomainStatus, domain=self.domain.describe(),
                                 grr_error_per_item=self.grr_error(max(sent, 1), self.epsilon, self.domain.size))

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
