"""Outputs as feature records, and the events (sets of outputs) the privacy audit tests on them
(dptop.engine.lab.audit.statistics, steps 1 and 2 of its method).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def features_of(items, status: dict | None = None, prefix: str = "") -> dict[str, float]:
    """A release's items (objects with ``address`` and ``estimate``) and public status as a flat
    record: ``item <address>`` -> estimate, ``count``, ``mean``, ``labels`` (the label set as a
    category, ``set <...>`` = 1) and ``noisy_length`` when the status has one."""
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
    if status and status.get("noisy_length") is not None:
        out[f"{prefix}noisy_length"] = float(status["noisy_length"])
    return out


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
