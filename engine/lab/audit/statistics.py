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

Clopper-Pearson bounds are computed here without scipy: the binomial tail is the regularized
incomplete beta function I_x(a, b), evaluated by its continued fraction (modified Lentz) and
inverted by bisection (tests compare with scipy.stats).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

# ---------------------------------------------------------------- exact binomial confidence bounds

_TINY = 1e-300


def _beta_cf(a: float, b: float, x: float) -> float:
    """Continued fraction of I_x(a, b) (modified Lentz), for x < (a + 1)/(a + b + 2)."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 100_000):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + num / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) for a, b > 0 and x in [0, 1]."""
    if not (a > 0 and b > 0):
        raise ValueError(f"betainc needs a, b > 0, got a={a}, b={b}")
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_cf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_cf(b, a, 1.0 - x) / b


def binom_sf(k: int, n: int, p: float) -> float:
    """P[Bin(n, p) >= k] = I_p(k, n − k + 1)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    return betainc(k, n - k + 1, p)


def _bisect(f, target: float) -> float:
    """The p in [0, 1] with f(p) = target for an increasing f (60 halvings)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if f(mid) < target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def cp_lower(k: int, n: int, alpha: float) -> float:
    """One-sided Clopper-Pearson lower bound: P[p < bound] <= alpha for k successes in n."""
    _check_counts(k, n, alpha)
    if k == 0:
        return 0.0
    return _bisect(lambda p: binom_sf(k, n, p), alpha)


def cp_upper(k: int, n: int, alpha: float) -> float:
    """One-sided Clopper-Pearson upper bound: P[p > bound] <= alpha for k successes in n."""
    _check_counts(k, n, alpha)
    if k == n:
        return 1.0
    # P[Bin(n, p) <= k] = 1 − sf(k + 1) decreases in p; solve sf(k + 1) = 1 − alpha.
    return _bisect(lambda p: binom_sf(k + 1, n, p), 1.0 - alpha)


def _check_counts(k: int, n: int, alpha: float) -> None:
    if not 0 <= k <= n or n < 1:
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha ({alpha!r}) must be in (0, 1)")


def _wilson(k: np.ndarray, n: int, z: float) -> tuple[np.ndarray, np.ndarray]:
    """Approximate (lower, upper) bounds, vectorized: only used to *rank* events on the selection
    half, never for the reported statement."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 1e-12, 1.0)


def _z_of(alpha: float) -> float:
    """Standard normal quantile 1 − alpha by bisection on erfc (no scipy)."""
    lo, hi = 0.0, 40.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if 0.5 * math.erfc(mid / math.sqrt(2.0)) > alpha:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def loss_lower_bound(p_lo: float, q_hi: float, delta: float) -> float:
    """ε_lb = ln((p_lo − δ)/q_hi): the smallest ε consistent with the bounds (−inf if none)."""
    if p_lo - delta <= 0.0:
        return -math.inf
    return math.log((p_lo - delta) / q_hi)


def loss_interval(k1: int, k2: int, n: int, confidence: float) -> tuple[float, float]:
    """Two-sided interval for ln(p/q) of one *fixed* event with k1/n hits on X and k2/n on X'
    (four one-sided Clopper-Pearson bounds at (1 − confidence)/4 each)."""
    a = (1.0 - confidence) / 4.0
    p_lo, p_hi = cp_lower(k1, n, a), cp_upper(k1, n, a)
    q_lo, q_hi = cp_lower(k2, n, a), cp_upper(k2, n, a)
    lo = math.log(p_lo / q_hi) if p_lo > 0 else -math.inf
    hi = math.log(p_hi / q_lo) if q_lo > 0 else math.inf
    return lo, hi


# ---------------------------------------------------------------- outputs as feature records

def features_of(items, noisy_length: float | None = None, prefix: str = "") -> dict[str, float]:
    """A release's items (objects with ``address`` and ``estimate``) and the noisy length its status
    states as a flat record: ``item <address>`` -> estimate, ``count``, ``mean``, ``labels`` (the
    label set as a category, ``set <...>`` = 1) and ``noisy_length`` when there is one."""
    out: dict[str, float] = {}
    labels = []
    total = 0.0
    for it in items:
        out[f"{prefix}item {it.address}"] = float(it.estimate)
        labels.append(it.address)
        total += float(it.estimate)
    out[f"{prefix}count"] = float(len(labels))
    if labels:
        out[f"{prefix}mean"] = total / len(labels)
    out[f"{prefix}set {','.join(sorted(labels)) or '-'}"] = 1.0
    if noisy_length is not None:
        out[f"{prefix}noisy_length"] = float(noisy_length)
    return out


# ---------------------------------------------------------------- events

@dataclass(frozen=True)
class Event:
    """A set of outputs, defined on one feature (absent = below every value) or on a label union.

    kind: ``ge`` (x >= lo), ``lt`` (x < lo or absent), ``in`` (lo <= x < hi), ``out`` (not in),
    ``present``, ``absent``, ``any`` / ``none`` (some / no feature of ``features`` present).
    """

    kind: str
    feature: str = ""
    lo: float = math.nan
    hi: float = math.nan
    features: tuple[str, ...] = ()

    def describe(self) -> str:
        f = self.feature
        return {
            "ge": f"{f} >= {self.lo:g}",
            "lt": f"{f} < {self.lo:g} or absent",
            "in": f"{self.lo:g} <= {f} < {self.hi:g}",
            "out": f"not ({self.lo:g} <= {f} < {self.hi:g})",
            "present": f"{f} released",
            "absent": f"{f} not released",
            "any": f"any of [{', '.join(self.features)}] released",
            "none": f"none of [{', '.join(self.features)}] released",
        }[self.kind]

    def hits(self, table: "Table") -> np.ndarray:
        """Boolean per run."""
        if self.kind in ("any", "none"):
            cols = [table.column(f) for f in self.features]
            anyp = np.zeros(table.runs, dtype=bool)
            for c in cols:
                anyp |= ~np.isnan(c)
            return anyp if self.kind == "any" else ~anyp
        x = table.column(self.feature)
        present = ~np.isnan(x)
        with np.errstate(invalid="ignore"):
            if self.kind == "present":
                return present
            if self.kind == "absent":
                return ~present
            if self.kind == "ge":
                return present & (x >= self.lo)
            if self.kind == "lt":
                return ~(present & (x >= self.lo))
            inside = present & (x >= self.lo) & (x < self.hi)
        return inside if self.kind == "in" else ~inside


class Table:
    """Runs × features, NaN where a feature is absent from a run's record."""

    def __init__(self, records: list[dict[str, float]]):
        self.runs = len(records)
        self._records = records
        self._cols: dict[str, np.ndarray] = {}

    def names(self) -> set[str]:
        out: set[str] = set()
        for r in self._records:
            out.update(r)
        return out

    def column(self, name: str) -> np.ndarray:
        col = self._cols.get(name)
        if col is None:
            col = np.array([r.get(name, math.nan) for r in self._records], dtype=np.float64)
            self._cols[name] = col
        return col

    def half(self, first: bool) -> "Table":
        mid = self.runs // 2
        return Table(self._records[:mid] if first else self._records[mid:2 * mid])


MAX_CUTS = 64
MAX_FEATURES = 400


def _cuts(values: np.ndarray) -> np.ndarray:
    """Candidate cut points of a feature: every distinct value, or MAX_CUTS quantiles."""
    v = np.unique(values[~np.isnan(values)])
    if len(v) > MAX_CUTS:
        v = np.unique(np.quantile(v, np.linspace(0, 1, MAX_CUTS)))
    return v


def candidate_events(a: Table, b: Table) -> list[Event]:
    """Events suggested by the selection halves of both sides (module docstring, step 2)."""
    names = sorted(a.names() | b.names())
    if len(names) > MAX_FEATURES:  # keep the features present most often
        freq = {n: int(np.sum(~np.isnan(a.column(n))) + np.sum(~np.isnan(b.column(n)))) for n in names}
        names = sorted(sorted(names, key=lambda n: -freq[n])[:MAX_FEATURES])
    events: list[Event] = []
    for name in names:
        xa, xb = a.column(name), b.column(name)
        events += [Event("present", name), Event("absent", name)]
        cuts = _cuts(np.concatenate([xa, xb]))
        for i, v in enumerate(cuts):
            events += [Event("ge", name, float(v)), Event("lt", name, float(v))]
            if i + 1 < len(cuts):
                events += [Event("in", name, float(v), float(cuts[i + 1])),
                           Event("out", name, float(v), float(cuts[i + 1]))]
    labels = [n for n in names if n.startswith("item ")]
    for side, other in ((a, b), (b, a)):
        only = tuple(n for n in labels
                     if np.any(~np.isnan(side.column(n))) and not np.any(~np.isnan(other.column(n))))
        if only:
            events += [Event("any", features=only), Event("none", features=only)]
    return list(dict.fromkeys(events))


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
    z = _z_of(per_bound)
    a_lo, a_hi = _wilson(ka, n, z)
    b_lo, b_hi = _wilson(kb, n, z)
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
