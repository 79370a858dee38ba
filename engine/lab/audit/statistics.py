"""Empirical privacy audit: can a mechanism's outputs on two neighbouring streams be told apart
better than its stated (ε, δ) allows?

A mechanism M is (ε, δ)-DP when, for neighbours X ~ X' and every set E of outputs,
P[M(X) ∈ E] <= e^ε·P[M(X') ∈ E] + δ, in both directions. The auditor runs M many times on each
side and looks for an event E that breaks this inequality *with a stated confidence*:

1. Each run's output becomes a flat record of numeric **features** (``features_of``): the estimate
   of every released label (absent = not released), the number of released labels, their mean,
   the public noisy length, the released label set as a category, or whatever the case defines.
2. The runs of each side are split in two halves. On the **selection** half, events are enumerated
   per feature — "label x released", "value >= v", "value < v" (absent counts as below every v),
   "value in [v_i, v_i+1)" (histogram bins of a released value) and their complements — plus the
   union "one of the labels seen on one side only is released". Each event is scored in both
   directions by a cheap approximate lower bound of its privacy loss, and the best ``events``
   (event, direction) pairs are kept.
3. On the untouched **test** half, each kept pair gets exact one-sided Clopper-Pearson bounds:
   p_lo for the side that should be smaller-or-equal-times-e^ε-plus-δ's opposite, q_hi for the
   other. A pair shows a violation when p_lo > e^ε·q_hi + δ. Its privacy-loss lower bound is
   ε_lb = ln((p_lo − δ)/q_hi).

Honesty of the confidence statement: the events are fixed before the test half is looked at, and
every one of the 2m one-sided bounds (m tested pairs, summed over all neighbour pairs of a target
via ``alpha_share``) is taken at level α/(2m) (Bonferroni). If M really is (ε, δ)-DP, the audit
reports a violation with probability at most α = 1 − confidence.

The features and events are dptop.engine.lab.audit.events; the Clopper-Pearson bounds,
computed without scipy, are dptop.engine.lab.audit.binomial.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from dptop.engine.lab.audit.binomial import cp_lower, cp_upper, loss_lower_bound, normal_quantile, wilson_bounds
from dptop.engine.lab.audit.events import Event, Table, candidate_events

# ---------------------------------------------------------------- the audit of one neighbour pair

@dataclass
class Finding:
    """One tested (event, direction) on the test half."""

    event: str
    direction: str  # "X vs X'" means P[M(X) ∈ E] <= e^ε·P[M(X') ∈ E] + δ was tested
    hits_first: int
    hits_second: int
    runs: int
    p_lower: float
    q_upper: float
    epsilon_lower_bound: float
    violation: bool


@dataclass
class PairAudit:
    """The audit of one neighbour pair."""

    pair: str
    note: str
    runs: int
    findings: list[Finding] = field(default_factory=list)
    structural: list[str] = field(default_factory=list)
    """White-box findings: the proof's premise fails on this pair (dptop.engine.lab.audit.structure)."""

    @property
    def epsilon_lower_bound(self) -> float:
        return max([0.0] + [f.epsilon_lower_bound for f in self.findings if math.isfinite(f.epsilon_lower_bound)])

    @property
    def statistical_violation(self) -> bool:
        return any(f.violation for f in self.findings)

    @property
    def violation(self) -> bool:
        return self.statistical_violation or bool(self.structural)


def audit_pair(runs_x: list[dict], runs_xp: list[dict], epsilon: float, delta: float, alpha: float,
               events: int = 3, pair: str = "", note: str = "") -> PairAudit:
    """Audit one neighbour pair from the records of ``len(runs_x)`` runs per side.

    ``alpha`` is this pair's share of the error probability: each of the ``events`` tested
    (event, direction) pairs uses α/(2·events) per one-sided bound (Bonferroni)."""
    if len(runs_x) != len(runs_xp) or len(runs_x) < 4:
        raise ValueError(f"runs per side must be equal and >= 4, got {len(runs_x)} and {len(runs_xp)}")
    tx, txp = Table(runs_x), Table(runs_xp)
    sel_a, sel_b, test_a, test_b = tx.half(True), txp.half(True), tx.half(False), txp.half(False)
    n_test = test_a.runs
    per_bound = alpha / (2 * events)
    chosen = select_events(candidate_events(sel_a, sel_b), sel_a, sel_b, epsilon, delta, per_bound, events)
    result = PairAudit(pair, note, len(runs_x))
    for ev, forward in chosen:
        first, second = (test_a, test_b) if forward else (test_b, test_a)
        k1, k2 = int(ev.hits(first).sum()), int(ev.hits(second).sum())
        p_lo, q_hi = cp_lower(k1, n_test, per_bound), cp_upper(k2, n_test, per_bound)
        eps_lb = loss_lower_bound(p_lo, q_hi, delta)
        result.findings.append(Finding(
            ev.describe(), "X vs X'" if forward else "X' vs X", k1, k2, n_test, p_lo, q_hi, eps_lb,
            p_lo > math.exp(epsilon) * q_hi + delta))
    return result


def select_events(events: list[Event], a: Table, b: Table, epsilon: float, delta: float,
                  per_bound: float, count: int) -> list[tuple[Event, bool]]:
    """The ``count`` (event, direction) pairs with the largest approximate ε lower bound on the
    selection halves (direction True: X's probability over X''s)."""
    if not events:
        return []
    n = a.runs
    ka = np.array([ev.hits(a).sum() for ev in events], dtype=np.float64)
    kb = np.array([ev.hits(b).sum() for ev in events], dtype=np.float64)
    z = normal_quantile(per_bound)
    a_lo, a_hi = wilson_bounds(ka, n, z)
    b_lo, b_hi = wilson_bounds(kb, n, z)
    with np.errstate(divide="ignore", invalid="ignore"):
        fwd = np.log(np.maximum(a_lo - delta, 1e-300) / b_hi)
        bwd = np.log(np.maximum(b_lo - delta, 1e-300) / a_hi)
    # tie-break on the raw gap so that all-zero selections still pick informative events
    score = np.concatenate([fwd + 1e-9 * (ka - kb), bwd + 1e-9 * (kb - ka)])
    order = np.argsort(-score, kind="stable")
    out, seen = [], set()
    for j in order:
        ev, forward = events[j % len(events)], j < len(events)
        key = (ev, forward)
        if key in seen:
            continue
        seen.add(key)
        out.append(key)
        if len(out) == count:
            break
    return out


# ---------------------------------------------------------------- results

@dataclass
class AuditResult:
    """The audit of one mechanism over its neighbour pairs, at one confidence."""

    mechanism: str
    broken: bool
    epsilon: float
    delta: float
    confidence: float
    runs: int
    pairs: list[PairAudit]
    seconds: float = 0.0
    description: str = ""

    @property
    def epsilon_lower_bound(self) -> float:
        return max([0.0] + [p.epsilon_lower_bound for p in self.pairs])

    @property
    def violation(self) -> bool:
        return any(p.violation for p in self.pairs)

    @property
    def statistical_violation(self) -> bool:
        return any(p.statistical_violation for p in self.pairs)

    @property
    def structural(self) -> list[str]:
        return [f"{p.pair}: {v}" for p in self.pairs for v in p.structural]

    def summary(self) -> str:
        verdict = "VIOLATION" if self.violation else "no violation"
        text = (f"{self.mechanism}: {verdict} of (ε={self.epsilon:g}, δ={self.delta:.3g}) at confidence "
                f"{self.confidence:g} over {self.runs} runs per side; measured ε lower bound "
                f"{self.epsilon_lower_bound:.3f}")
        if self.structural:
            text += "; proof premise broken (white-box): " + "; ".join(self.structural)
        return text

    def to_json(self) -> dict:
        return {
            "mechanism": self.mechanism, "broken": self.broken, "description": self.description,
            "epsilon": self.epsilon, "delta": self.delta, "confidence": self.confidence,
            "runs_per_side": self.runs, "violation": self.violation,
            "statistical_violation": self.statistical_violation, "structural_violations": self.structural,
            "epsilon_lower_bound": self.epsilon_lower_bound, "seconds": round(self.seconds, 3),
            "pairs": [{"pair": p.pair, "note": p.note, "violation": p.violation, "structural": p.structural,
                       "epsilon_lower_bound": p.epsilon_lower_bound,
                       "findings": [_finite(asdict(f)) for f in p.findings]} for p in self.pairs],
        }


def _finite(d: dict) -> dict:
    """JSON has no infinities: a lower bound of −inf (no evidence) becomes None."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}
