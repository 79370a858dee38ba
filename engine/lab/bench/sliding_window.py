"""Sliding-window benchmark (``dptop bench`` EXTRA_BENCHES) and the reference utility experiment.

``run_bench(quick)``: DPSW ingest rate at depth 2 and 5 with the default prefix hierarchy (4 IPv4 +
8 IPv6 channels), the flat sketch, the hierarchy at w = 100 000 and 1 000 000 (``INGEST_WINDOWS``),
the exact window, and the hierarchy's heavy-hitter query latency (uncached, full search).
``window_experiment``: DPSW vs the exact window on the authors' setting
(Zipf 1.1, 2^20 packets over 2^20 items, w = 250000, ten substreams, α = 0.75, ε = 1, δ = 3e-11).
"""
from __future__ import annotations

import time

import numpy as np

from dptop.engine.core.workload import ipv4_of_rank, keys_of_ipv4, zipf_ranks
from dptop.engine.lab.bench.suite import batched_rates
from dptop.engine.sliding_window.dpsw_hh import DPSWHeavyHitters
from dptop.engine.core.settings import Settings
from dptop.engine.baselines.window import ExactWindow

EXPERIMENT = dict(skew=1.1, domain=1 << 20, packets=1 << 20, window=250_000, epsilon=1.0, delta=3e-11)
GAMMAS = (0.005, 0.01)


INGEST_WINDOWS = (100_000, 1_000_000)
"""Windows of the extra ingest rows (depth 5, the default hierarchy): the substream length, and
with it how often sketches are reused, is w/10."""


def _settings(depth: int, window: int | None = None, **extra) -> Settings:
    e = EXPERIMENT
    return Settings(window=window or e["window"], gamma=0.005, epsilon=e["epsilon"], delta=e["delta"],
                    extra={"depth": depth, **extra})


def run_bench(quick: bool) -> dict:
    e = EXPERIMENT
    n = (1 << 19) if quick else (1 << 21)
    ranks = zipf_ranks(e["skew"], e["domain"], n, 1)
    keys = keys_of_ipv4(ipv4_of_rank(ranks))
    rows = []
    for depth in (2, 5):
        for label, extra in (("hierarchy (IPv4 4 + IPv6 8 levels)", {}), ("flat (1 channel)", {"domain_scan": 1})):
            alg = DPSWHeavyHitters(_settings(depth, **extra))
            rate, cpu_rate = batched_rates(alg.update, keys)
            row = {"structure": f"dpsw {label}", "depth": depth, "updates_per_s": round(rate),
                   "updates_per_cpu_s": round(cpu_rate),
                   "memory_MB": round(alg.sketch.memory_bytes / 2**20, 1)}
            if not extra:
                lat = []
                for _ in range(5 if quick else 20):
                    alg._cache_key = None
                    t0 = time.perf_counter()
                    rel = alg.release()
                    lat.append(time.perf_counter() - t0)
                row["hh_query_ms_median"] = round(1e3 * float(np.median(lat)), 2)
                row["hh_query_ms_max"] = round(1e3 * max(lat), 2)
                row["released"] = len(rel.items)
            rows.append(row)
    for window in INGEST_WINDOWS:
        alg = DPSWHeavyHitters(_settings(5, window))
        rate, cpu_rate = batched_rates(alg.update, keys)
        rows.append({"structure": f"dpsw hierarchy (IPv4 4 + IPv6 8 levels), w={window}", "depth": 5,
                     "window": window, "updates_per_s": round(rate), "updates_per_cpu_s": round(cpu_rate),
                     "memory_MB": round(alg.sketch.memory_bytes / 2**20, 1)})
    ex = ExactWindow(e["window"])
    rate, cpu_rate = batched_rates(ex.add, keys)
    rows.append({"structure": "window-exact", "depth": None, "updates_per_s": round(rate),
                 "updates_per_cpu_s": round(cpu_rate),
                 "memory_MB": round((ex.ring.nbytes + 3 * ex.table.hi.nbytes) / 2**20, 1)})
    return {"name": "sliding window (DPSW-Sketch, window-exact)", "rows": rows,
            "notes": (f"Zipf {e['skew']} over {e['domain']} IPv4 hosts, {n} packets, w={e['window']}, 10 substreams, "
                      f"alpha=3/4, width 4096, eps={e['epsilon']}, delta={e['delta']:g} (rows with a window: that w); HH query = full top-down "
                      "search of both families, uncached (it runs on demand, not per substream); the authors' "
                      "C++ side by side: --anchors DIR")}


def _prf(reported: set, truth: set) -> tuple[float, float, float]:
    tp = len(reported & truth)
    p = tp / len(reported) if reported else 1.0
    r = tp / len(truth) if truth else 1.0
    return p, r, (2 * p * r / (p + r) if tp else 0.0)


def window_experiment(queries: int = 20, seed: int = 7, depth: int = 5, extra: dict | None = None) -> dict:
    """DPSW (domain scan and prefix hierarchy) vs exact window counts at ``queries`` evenly spaced times
    in ``[w, n]``: mean precision/recall/F1 of the γ-heavy hitters for γ in ``GAMMAS`` and MAE/MRE of
    the 100 heaviest items (hierarchy: leaf /32 estimates)."""
    e = EXPERIMENT
    w, n, N = e["window"], e["packets"], e["domain"]
    ranks = zipf_ranks(e["skew"], N, n, seed)
    keys = keys_of_ipv4(ipv4_of_rank(ranks))
    times = np.linspace(w, n, queries + 1).astype(int)[1:]
    out = {}
    for mode, mode_extra in (("scan", {"domain_scan": N}), ("hierarchy", {})):
        algs = {g: DPSWHeavyHitters(Settings(window=w, gamma=g, epsilon=e["epsilon"], delta=e["delta"],
                                             extra={"depth": depth, **mode_extra, **(extra or {})}))
                for g in GAMMAS}
        scores = {g: [] for g in GAMMAS}
        mae, mre, lat = [], [], []
        done = 0
        for t in times:
            true = np.bincount(ranks[t - w:t], minlength=N + 1)[1:]
            for g, alg in algs.items():
                alg.update(keys[done:t])
                t0 = time.perf_counter()
                rel = alg.release()
                lat.append(time.perf_counter() - t0)
                reported = {int(it.lo) & 0xFFFF_FFFF for it in rel.items}
                heavy = set(ipv4_of_rank(np.nonzero(true >= g * w)[0] + 1).tolist())
                scores[g].append(_prf(reported, heavy))
            done = t
            top = np.argsort(-true, kind="stable")[:100]
            est = algs[GAMMAS[0]].estimate(keys_of_ipv4(ipv4_of_rank(top + 1)))
            err = np.abs(est - true[top])
            mae.append(float(err.mean()))
            mre.append(float((err / true[top]).mean()))
        out[mode] = {g: dict(zip(("precision", "recall", "f1"), np.mean(scores[g], axis=0).round(4).tolist()))
                     for g in GAMMAS}
        out[mode].update(mae=round(float(np.mean(mae)), 1), mre=round(float(np.mean(mre)), 4),
                         query_ms_median=round(1e3 * float(np.median(lat)), 2))
    return out
