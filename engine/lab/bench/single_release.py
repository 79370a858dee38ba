"""Benchmark of the single-release family: updates/s of dpss, dpmg, eehh-cms, eehh-cs, and the
latency of a release.

Zipf 1.1 and 1.5 streams of 2^24 updates (2^20 with ``quick``) over 100,000 values (the paper's
synthetic setup, docs/dpss-eehh.md §8.1), k = 128, k~ = 2k for the counter summaries and 4k for EEHH,
ε = 0.1, δ = 10^-3, EEHH T_max = 2^25. Each run gets a fresh instance whose state (and, for EEHH,
its d·w cell noise) is built before the clock starts; the stream is fed in capture-sized batches
of 2^16 keys; the figure is the median of three runs after a warm-up, the algorithms alternating
(ABCD ABCD ABCD); ``load`` is the 1-minute load average after them. Release rows: the time to
publish one epoch (noise on every tracked counter, threshold, ordering) at k = 512, k~ = 1024,
median of 20 releases of the same summary. The authors' C++ is measured side by side only by
``dptop bench --anchors DIR`` (``dptop.engine.lab.bench.anchors``).
"""
from __future__ import annotations

import statistics
import time

from dptop.engine.core import registry
from dptop.engine.core.settings import Settings
from dptop.engine.core.workload import zipf_keys
from dptop.engine.lab.bench.load import load_average

BATCH = 1 << 16
ALGORITHMS = ("dpss", "dpmg", "eehh-cms", "eehh-cs")


def _settings(name: str, k: int) -> Settings:
    k_tilde = 4 * k if name.startswith("eehh") else 2 * k
    return Settings(k=k, k_tilde=k_tilde, epsilon=0.1, delta=1e-3, extra={"t_max": 1 << 25})


def _seconds(name: str, keys) -> float:
    """Seconds of one run on a fresh instance and state (allocation and cell noise before the clock)."""
    alg = registry.make(name, _settings(name, 128))
    state = alg._new_state()
    t0 = time.perf_counter()
    for start in range(0, len(keys), BATCH):
        alg._feed(state, keys[start:start + BATCH])
    return time.perf_counter() - t0


def _rates(keys, repeats: int) -> dict[str, float]:
    """Updates/s of every algorithm: medians of ``repeats`` rounds, the algorithms alternating."""
    for name in ALGORITHMS:
        registry.make(name, _settings(name, 128)).update(keys[:BATCH])  # compile or load the kernels
    times: dict[str, list[float]] = {name: [] for name in ALGORITHMS}
    for _ in range(repeats):
        for name in ALGORITHMS:
            times[name].append(_seconds(name, keys))
    return {name: len(keys) / statistics.median(ts) for name, ts in times.items()}


def release_ms(name: str, keys, k: int = 512, k_tilde: int = 1024, repeats: int = 20) -> float:
    """Median milliseconds of one ``_publish`` (the whole release of an epoch) on one summary."""
    alg = registry.make(name, Settings(k=k, k_tilde=k_tilde, epsilon=0.1, delta=1e-3, extra={"t_max": 1 << 25}))
    state = alg._new_state()
    alg._feed(state, keys)
    alg._publish(state)  # compile the sampler
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        alg._publish(state)
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def run_bench(quick: bool) -> dict:
    length = 1 << (20 if quick else 24)
    rows = []
    for skew in (1.1, 1.5):
        keys = zipf_keys(skew, 100_000, length, seed=11)
        rates = _rates(keys, repeats=3)
        load = load_average()
        for name in ALGORITHMS:
            rows.append({"algorithm": name, "skew": skew, "updates": length, "updates_per_second": rates[name],
                         "load": load})
    keys = zipf_keys(1.1, 100_000, 1 << 20, seed=11)
    for name in ALGORITHMS[:3]:
        rows.append({"algorithm": name, "release": "k=512 k~=1024", "release_ms": round(release_ms(name, keys), 3),
                     "load": load_average()})
    return {"name": "single-release", "rows": rows,
            "notes": f"Zipf over 100,000 values, {length} updates, k=128, k~=2k (EEHH 4k), ε=0.1, δ=1e-3, "
                     "EEHH T_max=2^25; batches of 2^16; median of 3 alternating runs after warm-up; state and sketch "
                     "noise built before timing. release_ms: one epoch's release at k=512, k~=1024 "
                     "(EEHH k~=1024 tracked labels), median of 20. The authors' C++: --anchors DIR."}


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(run_bench("--quick" in sys.argv), indent=1))
