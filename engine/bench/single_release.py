"""Benchmark of the single-release family: updates/s of dpss, dpmg, eehh-cms, eehh-cs.

Zipf 1.1 and 1.5 streams of 2^24 updates (2^20 with ``quick``) over 100,000 values (the paper's
synthetic setup, dpss-eehh.md §8.1), k = 128, k~ = 2k for the counter summaries and 4k for EEHH,
ε = 0.1, δ = 10^-3, EEHH T_max = 2^25. Each run gets a fresh instance whose state (and, for EEHH,
its d·w cell noise) is built before the clock starts; the stream is fed in capture-sized batches
of 2^16 keys; the figure is the median of three runs after a warm-up. Targets (the authors' C++ on
this machine type): DPSS 15M/s (1.1) and 35M/s (1.5), EEHH-CMS 3M/s, EEHH-CS 1M/s.
"""
from __future__ import annotations

import statistics
import time

from dptop.engine.core.workload import zipf_keys
from dptop.engine.core import registry
from dptop.engine.core.settings import Settings

TARGETS = {"dpss": {1.1: 15e6, 1.5: 35e6}, "eehh-cms": {1.1: 3e6, 1.5: 3e6}, "eehh-cs": {1.1: 1e6, 1.5: 1e6}}
BATCH = 1 << 16


def _settings(name: str, k: int) -> Settings:
    k_tilde = 4 * k if name.startswith("eehh") else 2 * k
    return Settings(k=k, k_tilde=k_tilde, epsilon=0.1, delta=1e-3, extra={"t_max": 1 << 25})


def _rate(name: str, keys, repeats: int) -> float:
    settings = _settings(name, 128)
    warm = registry.make(name, settings)
    warm.update(keys[:BATCH])  # compile or load the cached kernels
    times = []
    for _ in range(repeats):
        alg = registry.make(name, settings)
        state = alg._new_state()  # allocation and cell noise are not part of the update rate
        t0 = time.perf_counter()
        for start in range(0, len(keys), BATCH):
            alg._feed(state, keys[start:start + BATCH])
        times.append(time.perf_counter() - t0)
    return len(keys) / statistics.median(times)


def run_bench(quick: bool) -> dict:
    length = 1 << (20 if quick else 24)
    rows = []
    for skew in (1.1, 1.5):
        keys = zipf_keys(skew, 100_000, length, seed=11)
        for name in ("dpss", "dpmg", "eehh-cms", "eehh-cs"):
            rate = _rate(name, keys, repeats=3)
            target = TARGETS.get(name, {}).get(skew)
            rows.append({"algorithm": name, "skew": skew, "updates": length, "updates_per_second": rate,
                         "target": target, "meets_target": None if target is None else rate >= target})
    return {"name": "single-release", "rows": rows,
            "notes": f"Zipf over 100,000 values, {length} updates, k=128, k~=2k (EEHH 4k), ε=0.1, δ=1e-3, "
                     "EEHH T_max=2^25; batches of 2^16; median of 3 runs after warm-up; state and sketch "
                     "noise built before timing"}


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(run_bench("--quick" in sys.argv), indent=1))
