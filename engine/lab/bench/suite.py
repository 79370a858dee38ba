"""``dptop bench``: updates/s of every registered algorithm, plus each family's own benchmarks.

The core suite feeds each algorithm a fixed synthetic stream (Zipf 1.1 and 1.5, 2^24 updates —
2^20 with ``--quick`` — k in {128, 512}) after a warm-up, and reports the median of three runs,
the algorithms alternating (ABC ABC ABC), with the ratio to the exact-count baseline measured in
the same runs. Every printed row carries ``load``, the 1-minute load average when it was measured
(benches that do not stamp their rows get the load when their table is printed): the machine may
be shared. Modules in
``EXTRA_BENCHES`` add their own tables (capture parser vs scapy, LazyCMS vs PunctualCMS,
DPSW query latency, ...) through ``run_bench(quick) -> {"name", "rows", "notes"}``.
"""
from __future__ import annotations

import importlib
import statistics
import sys
import time

from dptop.engine.core.workload import zipf_keys
from dptop.engine.lab.bench.load import load_average
from dptop.engine.core import registry
from dptop.engine.core.facts import PublicFacts
from dptop.engine.core.settings import Settings

EXTRA_BENCHES: tuple[str, ...] = ("dptop.engine.lab.bench.single_release", "dptop.engine.lab.bench.continual",
                                   "dptop.engine.lab.bench.sliding_window", "dptop.engine.lab.bench.local_dp")
"""Engine benches beside the core table; ``--only`` names them by their last part
(``single-release``, ``continual``, ``sliding-window``, ``local-dp``). The capture and end-to-end
replay benches are run by the app (the engine never imports capture)."""
SKIP_IN_CORE = {"punctual-cms", "punctual-cs", "hostdp-dst", "hostdp-src", "exact-clients", "exact-servers"}
"""Algorithms too slow for 2^24 updates by design (their own bench measures them), and the
user-level ones, which need (client, server) pairs rather than bare source keys."""


def batched_rates(push, keys, batch: int = 1 << 16) -> tuple[float, float]:
    """Keys per second through ``push(keys[i:i+batch])`` after one warm-up batch (compilation):
    by wall clock and by this process's CPU time (the fairer figure on a shared machine; kernels
    are single-threaded)."""
    push(keys[:batch])
    t0, c0 = time.perf_counter(), time.process_time()
    for s in range(batch, len(keys), batch):
        push(keys[s:s + batch])
    n = len(keys) - batch
    return n / (time.perf_counter() - t0), n / max(time.process_time() - c0, 1e-9)


def _time_update(name: str, settings: Settings, facts: PublicFacts, keys) -> float:
    """Seconds of one ``update`` of the whole stream on a fresh instance (built before the clock)."""
    alg = registry.make(name, settings, facts)
    t0 = time.perf_counter()
    alg.update(keys)
    return time.perf_counter() - t0


def core_bench(quick: bool, names: list[str] | None = None) -> dict:
    length = 1 << (20 if quick else 24)
    names = names or [n for n in registry.names() if n not in SKIP_IN_CORE]
    rows = []
    for skew in (1.1, 1.5):
        keys = zipf_keys(skew, 1 << 24, length, seed=7)
        for k in (128, 512):
            settings = Settings(k=k, epsilon=0.5, delta=1e-3, window=length // 4, gamma=0.01)
            facts = PublicFacts.of(length)
            for name in names:
                registry.make(name, settings, facts).update(keys[:1024])  # warm-up: compile or load the kernels
            times: dict[str, list[float]] = {name: [] for name in names}
            for _ in range(1 if quick else 3):  # alternating: every algorithm once per round
                for name in names:
                    times[name].append(_time_update(name, settings, facts, keys))
            load = load_average()
            rates = {name: length / statistics.median(ts) for name, ts in times.items()}
            base = rates.get("exact")
            for name in names:
                rows.append({"algorithm": name, "skew": skew, "k": k, "updates": length,
                             "updates_per_second": rates[name],
                             "ratio_to_exact": rates[name] / base if base else None, "load": load})
    return {"name": "algorithms", "rows": rows,
            "notes": f"Zipf streams of {length} updates over 2^24 items; median of {1 if quick else 3} alternating "
                     "runs after warm-up; ratio_to_exact = updates/s divided by the exact-count baseline's in the "
                     "same runs; load: 1-minute load average after each (skew, k) round"}


def _fmt(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v / 1e6:.2f}M" if v > 1e4 else f"{v:.3g}"
    return str(v)


def _print_table(rows: list[dict], out) -> None:
    cols = list(dict.fromkeys(c for r in rows for c in r))
    widths = [max(len(c), *(len(_fmt(r.get(c, ""))) for r in rows)) for c in cols]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths)), file=out)
    for r in rows:
        print("  ".join(_fmt(r.get(c, "")).ljust(w) for c, w in zip(cols, widths)), file=out)


def print_report(report: dict, out) -> None:
    """One table per run of consecutive rows with the same columns."""
    print(f"\n== {report['name']} ==", file=out)
    load = load_average()
    for row in report["rows"]:
        row.setdefault("load", load)
    group: list[dict] = []
    for row in report["rows"] + [None]:
        if group and (row is None or row.keys() != group[-1].keys()):
            _print_table(group, out)
            group = []
        if row is not None:
            group.append(row)
    if report.get("notes"):
        print(report["notes"], file=out)
    out.flush()


def run_all(quick: bool = False, only: str | None = None, anchors: str | None = None, tables=None) -> dict:
    """Every bench (or those named in ``only``); tables go to ``tables`` (stdout by default; the
    CLI passes stderr when the JSON goes to stdout). ``anchors``: the C++ drivers' folder
    (``dptop.engine.lab.bench.anchors``); without it the side-by-side table shows "—", with it the
    utility table (``dptop.engine.lab.bench.utility``) follows."""
    from dptop.engine.lab.bench.anchors import run_anchors

    out = tables or sys.stdout
    wanted = None if only is None else {n.strip() for n in only.split(",")}
    reports = []
    if wanted is None or "algorithms" in wanted:
        reports.append(core_bench(quick))
        print_report(reports[-1], out)
    for module in EXTRA_BENCHES:
        short = module.rsplit(".", 1)[-1].replace("_", "-")
        if wanted is not None and short not in wanted and module not in wanted:
            continue
        reports.append(importlib.import_module(module).run_bench(quick))
        print_report(reports[-1], out)
    if wanted is None or "anchors" in wanted:
        reports.append(run_anchors(anchors, quick))
        print_report(reports[-1], out)
        if anchors is not None:
            from dptop.engine.lab.bench.utility import run_utility

            reports.append(run_utility(anchors, quick))
            print_report(reports[-1], out)
    return {"quick": quick, "anchors": anchors, "reports": reports}
