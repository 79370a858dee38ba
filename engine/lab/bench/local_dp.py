"""Local-DP benchmark (``dptop bench`` EXTRA_BENCHES): reports/s of each scheme's agent and
collector, and packets/s of the agent's whole path on sampled input.

Workload: Zipf 1.5 over a published inventory of 1000 addresses (d = 1001 with "other"),
ε = 2 per report, k = 10 with each algorithm's default λ_h, snapshots every 1024 reports,
2^22 reports (2^20 with ``quick``) after a warm-up of 2^16 (compilation, a populated sketch).
The agent and collector halves are timed separately inside the same pipeline run
(``Pipeline.agent_seconds``/``collector_seconds``). The agent path on packets adds the domain
lookup (key -> inventory index) and, for ``reports=R``, the reservoir sampler, each timed on the
same keys; ``agent_packets_per_s`` is the rate of lookup + randomizer in sequence (one core).
The prefix search is timed the same way over the same keys (no inventory). The machine may be
shared: rates are medians of ``repeats`` runs.
"""
from __future__ import annotations

import statistics
import time

import numpy as np

from dptop.engine.core.workload import ipv4_of_rank, keys_of_ipv4, zipf_ranks
from dptop.engine.local_dp.scheme import HEAVY_PER_K
from dptop.engine.local_dp.domain import Domain, ipv4_of_keys
from dptop.engine.local_dp.entropy import Entropy
from dptop.engine.local_dp.pipeline import SCHEMES, Pipeline, Reservoir, make_halves
from dptop.engine.local_dp.prefix import PrefixSearch

D, K, EPS, EVERY, WARM = 1000, 10, 2.0, 1024, 1 << 16


def inventory(d: int = D) -> Domain:
    addresses = np.sort(keys_of_ipv4(ipv4_of_rank(np.arange(1, d + 1)))[:, 1])
    return Domain("bench inventory", d + 1, inventory=(np.zeros(d, np.uint64), addresses))


def _median_rate(fn, n: int, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return n / statistics.median(times)


def scheme_row(scheme: str, items: np.ndarray, lookup_rate: float) -> dict:
    heavy = min(D - 1, HEAVY_PER_K[scheme] * K)
    agent, collector = make_halves(scheme, EPS, D + 1, heavy)
    pipe = Pipeline(agent, collector, EVERY, D + 1)
    pipe.run(items[:WARM])
    a0, c0 = pipe.agent_seconds, pipe.collector_seconds
    pipe.run(items[WARM:])
    n = len(items) - WARM
    agent_rate = n / (pipe.agent_seconds - a0)
    return {"scheme": scheme, "heavy_cells": heavy, "reports": n,
            "agent_reports_per_s": round(agent_rate), "collector_reports_per_s": round(n / (pipe.collector_seconds - c0)),
            "agent_packets_per_s": round(1 / (1 / agent_rate + 1 / lookup_rate)),
            "upload_bytes_per_report": round(pipe.upload / (n + WARM), 2),
            "download_bytes_per_report": round(pipe.download / (n + WARM), 2)}


def prefix_row(keys: np.ndarray) -> dict:
    search = PrefixSearch(4.0, HEAVY_PER_K["prefix"] * K, 2 * K, EVERY)
    addresses = np.empty(len(keys), np.int64)
    ipv4_of_keys(keys, addresses)
    search.run(addresses[:WARM])
    t0 = time.perf_counter()
    search.run(addresses[WARM:])
    wall = time.perf_counter() - t0
    n = len(keys) - WARM
    agent = sum(p.agent_seconds for p in search.pipelines)
    collector = sum(p.collector_seconds for p in search.pipelines)
    return {"scheme": "dsr-prefix (ε=4)", "heavy_cells": search.pipelines[0].collector.heavy, "reports": n,
            "agent_reports_per_s": round(n / agent), "collector_reports_per_s": round(n / collector),
            "pipeline_reports_per_s": round(n / wall)}


def run_bench(quick: bool) -> dict:
    n = 1 << (20 if quick else 22)
    repeats = 1 if quick else 3
    keys = keys_of_ipv4(ipv4_of_rank(zipf_ranks(1.5, D, n, 7)))
    domain = inventory()
    domain.items(keys[:1024])
    lookup = _median_rate(lambda: domain.items(keys), n, repeats)
    items = domain.items(keys)
    sampler = Reservoir(1000, Entropy())
    sampler.add(items[:1024])
    sample = _median_rate(lambda: sampler.add(items), n, repeats)
    rows = [{"stage": "agent: key -> inventory index", "packets_per_s": round(lookup)},
            {"stage": "agent: reservoir sampler (reports=1000)", "packets_per_s": round(sample)}]
    rows += [scheme_row(s, items, lookup) for s in SCHEMES]
    rows.append(prefix_row(keys))
    notes = (f"Zipf 1.5 over an inventory of {D} addresses, ε = {EPS} per report (prefix: ε = 4, no inventory), "
             f"k = {K}, default λ_h, snapshots every {EVERY} reports, {n - WARM} reports after a warm-up of {WARM}; "
             "agent and collector timed separately in one pipeline run (wall clock, one core each); "
             "agent_packets_per_s = inventory lookup + randomizer in sequence. Shared machine: figures vary.")
    return {"name": "local DP", "rows": rows, "notes": notes}
