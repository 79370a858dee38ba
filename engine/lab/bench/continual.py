"""Continual-observation benchmarks (``dptop bench`` EXTRA_BENCHES) and the LazyHH sweep.

``run_bench(quick)``:

* LazyCMS vs PunctualCMS at equal width (d = 3 as in 001 §6.1, T = 2^20, ε = 0.5, δ = 1e-3): updates/s
  of each and their ratio (001 reports up to 250×). PunctualCMS pushes d·w cells per arrival, so it is
  timed on fewer arrivals (its per-arrival cost does not depend on how many).
* LazyHH arrivals/s at 001's CAIDA point (k = 128, k~ = 4k, ε = 0.5, δ = 1e-3, T = stream length).
* Not quick: the sweep below at 2^24 arrivals.

``sweep(...)``: recall and precision at the end of a Zipf 1.1 stream against the exact heavy hitters
(count > t/k) over ε × k~/k. k~/k = 1 is not allowed (k~ > k, docs/lazyhh.md §6.1): that column runs the
nearest valid value, k~ = k + 1, and says so.
"""
from __future__ import annotations

import time

from dptop.engine.core.workload import zipf_keys
from dptop.engine.lab.bench.suite import batched_rates
from dptop.engine.baselines.exact import ExactCounter
from dptop.engine.core.keys import KeyBatch
from dptop.engine.continual.lazyhh import LazyHH
from dptop.engine.continual.lazysketch import LazySketch, PunctualSketch
from dptop.engine.core.settings import Settings

SWEEP_EPSILONS = (0.1, 0.2, 0.32, 0.5, 0.9)
SWEEP_RATIOS = (1, 2, 4, 8)


def sketch_rows(quick: bool) -> list[dict]:
    T, d = 1 << 20, 3
    keys = zipf_keys(1.1, 1 << 20, 1 << (18 if quick else 20), seed=7)
    rows = []
    for w in ((33, 55, 256) if quick else (33, 55, 256, 1024, 4096)):
        lazy = LazySketch(T, 0.5, 1e-3, w, d)
        lazy_wall, lazy_cpu = batched_rates(lazy.update, keys, 1 << 14)
        punct = PunctualSketch(T, 0.5, 1e-3, w, d)
        n_p = min(len(keys), max(1 << 11, (1 << (20 if quick else 22)) // w))
        p_wall, p_cpu = batched_rates(punct.update, keys[:n_p], max(64, n_p // 16))
        rows.append({"sketch": "LazyCMS vs PunctualCMS", "width": w, "depth": d,
                     "lazy_updates_per_s": round(lazy_wall), "punctual_updates_per_s": round(p_wall),
                     "speedup": round(lazy_wall / p_wall, 1), "speedup_cpu": round(lazy_cpu / p_cpu, 1),
                     "lazy_H": lazy.height, "punctual_H": punct.height})
    return rows


def lazyhh_row(length: int) -> dict:
    keys = zipf_keys(1.1, 1 << 24, length, seed=7)
    alg = LazyHH(Settings(k=128, k_tilde=512, epsilon=0.5, delta=1e-3, horizon=length))
    wall, cpu = batched_rates(lambda k: alg.consume(KeyBatch(k)), keys, 1 << 16)
    p = alg.params
    return {"sketch": "LazyHH k=128 k~=512", "width": p.width, "depth": p.depth, "arrivals": length,
            "arrivals_per_s": round(wall), "arrivals_per_cpu_s": round(cpu),
            "us_per_arrival": round(1e6 / wall, 3), "sketch_MB": round(LazySketch.memory_bytes(p.depth, p.width, p.height) / 2**20, 1)}


def sweep(length: int = 1 << 24, k: int = 128, epsilons=SWEEP_EPSILONS, ratios=SWEEP_RATIOS,
          delta: float = 1e-3, seed: int = 7, progress=None) -> list[dict]:
    """Recall/precision of LazyHH at the end of a Zipf 1.1 stream (domain 2^24) for each ε and k~/k."""
    keys = zipf_keys(1.1, 1 << 24, length, seed=seed)
    exact = ExactCounter()
    exact.add(keys)
    all_keys, counts = exact.items()
    truth = {tuple(x) for x, c in zip(all_keys.tolist(), counts) if c > length / k}
    rows = []
    for ratio in ratios:
        k_tilde = k * ratio if ratio > 1 else k + 1
        for eps in epsilons:
            alg = LazyHH(Settings(k=k, k_tilde=k_tilde, epsilon=eps, delta=delta, horizon=length))
            t0 = time.perf_counter()
            for s in range(0, length, 1 << 18):
                alg.consume(KeyBatch(keys[s:s + (1 << 18)]))
            rel = alg.finish()[-1]
            got = {(it.hi, it.lo) for it in rel.items}
            hit = len(truth & got)
            rows.append({"epsilon": eps, "k_tilde_over_k": ratio, "k_tilde": k_tilde,
                         "note": "k~/k = 1 invalid (k~ > k): ran k~ = k + 1" if ratio == 1 else "",
                         "true_hh": len(truth), "released": len(got),
                         "recall": round(hit / len(truth), 3) if truth else None,
                         "precision": round(hit / len(got), 3) if got else None,
                         "threshold": round(rel.threshold), "t_over_k": round(length / k),
                         "seconds": round(time.perf_counter() - t0, 1)})
            if progress:
                progress(rows[-1])
    return rows


def run_bench(quick: bool) -> dict:
    rows = sketch_rows(quick)
    rows.append(lazyhh_row(1 << (22 if quick else 24)))
    notes = ("LazyCMS vs PunctualCMS: d = 3, T = 2^20, ε = 0.5, δ = 1e-3, Zipf 1.1; speedup = ratio of "
             "updates/s (wall; speedup_cpu from process CPU time). LazyHH: k = 128, k~ = 512 (w = ⌈e·k~⌉, "
             "d = ⌈ln(4T/β)⌉, β = δ/2), T = stream length, batches of 2^16.")
    if not quick:
        rows.extend(sweep())
        notes += (" Sweep: Zipf 1.1 over 2^24 items, 2^24 arrivals, k = 128, δ = 1e-3; recall/precision at the "
                  "end against count > t/k; k~/k = 1 runs k~ = k + 1 (k~ > k is required).")
    return {"name": "continual observation (lazy)", "rows": rows, "notes": notes}
