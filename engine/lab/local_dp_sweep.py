"""Utility of the four schemes against ε: NDCG, precision, recall and AAE (docs/local-dp.md §8, test L7).

``sweep`` runs each scheme's agent and collector (``pipeline``) over the same synthetic item
streams for every ε and averages the metrics over ``runs`` streams. It is what ``dptop
sweep-ldp`` prints and what a tuning view can call. It scores the collector's top-k as 003 does
(no release threshold). Data [D] (003's captions name Normal and
Exponential data over 500 or 2000 values without their parameters): ``zipf`` (skew 1.5, rank r
is item r − 1), ``normal`` (mean d/2, standard deviation d/10, rounded and clipped to [0, d)),
``exponential`` (floor of an exponential of mean d/20, clipped). With ``seed`` the streams and
the randomizers are seeded (reproducible, NOT private); without, the randomizers use the OS
CSPRNG.
"""
from __future__ import annotations

import numpy as np

from dptop.engine.core.workload import zipf_ranks
from dptop.engine.local_dp.metrics import counts_of, score
from dptop.engine.local_dp.pipeline import SCHEMES, Pipeline, make_halves

DATA = ("zipf", "normal", "exponential")
EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0)
METRICS = ("ndcg", "precision", "recall", "aae")


def synthetic_items(data: str, d: int, n: int, seed: int) -> np.ndarray:
    """``n`` items in [0, d) (see the module docstring)."""
    if data == "zipf":
        return zipf_ranks(1.5, d, n, seed) - 1
    rng = np.random.default_rng(seed)
    if data == "normal":
        x = np.rint(rng.normal(d / 2, d / 10, n))
    elif data == "exponential":
        x = np.floor(rng.exponential(d / 20, n))
    else:
        raise ValueError(f"data ({data!r}) must be one of {', '.join(DATA)}")
    return np.clip(x, 0, d - 1).astype(np.int64)


def run_scheme(scheme: str, items: np.ndarray, epsilon: float, d: int, k: int, heavy: int,
               every: int = 1024, seed: int | None = None, **options) -> list[tuple[int, float]]:
    """One scheme over ``items`` (values in [0, d), d − 1 is never released): its top-k."""
    agent, collector = make_halves(scheme, epsilon, d + 1, heavy, seed=seed, **options)
    Pipeline(agent, collector, every, d + 1).run(items)
    return collector.top(k, d)


def sweep(schemes=SCHEMES, epsilons=EPSILONS, data: str = "zipf", d: int = 1000, n: int = 1 << 20, k: int = 10,
          heavy: dict | None = None, runs: int = 3, seed: int | None = 1, progress=None) -> list[dict]:
    """Mean metrics per (scheme, ε) over ``runs`` streams; ``heavy`` maps a scheme to its λ_h
    (default 48k for BGR/DSR, 4k for BDR/CNR, capped at d − 1)."""
    heavy = {s: min(d - 1, (48 if s in ("bgr", "dsr") else 4) * k) for s in schemes} | (heavy or {})
    streams = [synthetic_items(data, d, n, (seed or 0) + r) for r in range(runs)]
    truth = [counts_of(items) for items in streams]
    rows = []
    for scheme in schemes:
        for eps in epsilons:
            scores = [score(run_scheme(scheme, items, eps, d, k, heavy[scheme],
                                       seed=None if seed is None else seed + 1000 * r), counts, k)
                      for r, (items, counts) in enumerate(zip(streams, truth))]
            row = {"scheme": scheme, "epsilon": eps, "data": data, "d": d, "n": n, "k": k,
                   "heavy": heavy[scheme], "runs": runs}
            row.update({m: float(np.mean([s[m] for s in scores])) for m in METRICS})
            rows.append(row)
            if progress:
                progress(row)
    return rows


def non_decreasing(rows: list[dict], metric: str, tolerance: float) -> dict[str, bool]:
    """Per scheme: ``metric`` never drops by more than ``tolerance`` as ε grows (L7)."""
    out = {}
    for scheme in dict.fromkeys(r["scheme"] for r in rows):
        values = [r[metric] for r in sorted((r for r in rows if r["scheme"] == scheme), key=lambda r: r["epsilon"])]
        out[scheme] = all(b >= a - tolerance for a, b in zip(values, values[1:]))
    return out
