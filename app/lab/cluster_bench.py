"""``dptop cluster-bench`` (also ``dptop bench --only cluster`` when the CLI passes this module to
``dptop.engine.lab.bench.suite.run_all(extra_benches=...)``): archive replay across Dask workers.

The same ``files`` Zipf captures (synthetic pcaps, ``packets`` each: 2^22, 2^18 with ``quick``) are
replayed through ``replay_archive`` with every mergeable algorithm, in this process and on embedded
LocalClusters of 1, 2 and 4 single-threaded worker processes, all started and warmed up (kernels
loaded) before timing. Contenders are measured alternately, best of ``rounds``; ratios are taken
from the same run. A second table replays with 1-second time epochs and reports the bytes each
capture point ships per epoch. The load average is recorded before and after: on a shared machine
the speed-up is bounded by the free cores, not by the number of workers.
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

from dptop.capture.pcap import open_capture
from dptop.capture.synth import write_zipf_pcap
from dptop.cluster.archive import replay_archive
from dptop.cluster.connect import local_cluster, local_workers
from dptop.cluster.plan import TimeGrid, mergeable_names
from dptop.engine.core.settings import Range, Settings
from dptop.options import json_target, ranged, ranged_list
from dptop.output import write_json

RATE_PPS = 100_000
BENCH_FILES = Range("files", 1, 1024, integer=True)
BENCH_PACKETS = Range("packets", 1, 1 << 30, integer=True)


def _write_files(folder: Path, files: int, packets: int) -> list[Path]:
    paths = [folder / f"tap{i}.pcap" for i in range(files)]
    for i, p in enumerate(paths):
        write_zipf_pcap(p, 1.1, 1 << 16, packets, seed=100 + i, rate_pps=RATE_PPS)
    return paths


def _grid_of(paths) -> TimeGrid:
    first = last = None
    for p in paths:
        with open_capture(p) as reader:
            for b in reader.batches(1 << 20):
                lo, hi = int(b.ts_ns.min()), int(b.ts_ns.max())
                first, last = lo if first is None else min(first, lo), hi if last is None else max(last, hi)
    return TimeGrid.covering(first, last, 1_000_000_000)


def run_bench(quick: bool = False, workers=(1, 2, 4), files: int = 8, packets: int | None = None,
              rounds: int | None = None) -> dict:
    packets = packets or (1 << 18 if quick else 1 << 22)
    rounds = rounds or (1 if quick else 2)
    settings = Settings(k=16)
    names = mergeable_names()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="dptop-cluster-bench-") as tmp, contextlib.ExitStack() as stack:
        paths = _write_files(Path(tmp), files, packets)
        clients = {"in-process": None}
        for n in workers:
            from distributed import Client

            clients[f"local:{n}"] = stack.enter_context(Client(stack.enter_context(local_cluster(n))))
        for client in clients.values():  # warm-up: every worker loads the kernels
            replay_archive(paths[:1] * max(workers), names, settings.with_(seed=0), cluster=client)
        seconds = {name: [] for name in clients}
        last = {}
        for _ in range(rounds):
            for name, client in clients.items():
                t0 = time.perf_counter()
                last[name] = replay_archive(paths, names, settings, cluster=client)
                seconds[name].append(time.perf_counter() - t0)
        grid = _grid_of(paths)
        timed = replay_archive(paths, names, settings.with_(epoch_seconds=1.0), grid=grid)
    load_after = os.getloadavg()
    best = {name: min(s) for name, s in seconds.items()}
    one = best["in-process"]
    w1 = best.get("local:1")
    rows = []
    for name, s in best.items():
        res = last[name]
        rows.append({"run": name, "files": files, "packets_per_file": packets, "seconds": s,
                     "packets_per_second": files * packets / s, "speedup_vs_one_process": one / s,
                     "speedup_vs_1_worker": None if w1 is None else w1 / s,
                     "busy_workers": sum(a.seconds for a in res.agents) / seconds[name][-1],
                     "task_cpu_seconds": sum(a.cpu_seconds for a in res.agents),
                     "bytes_shipped_per_agent": sum(a.bytes_shipped for a in res.agents) / files})
    for a in timed.agents:
        rows.append({"run": "1 s time epochs", "agent": Path(a.name).name, "epochs": a.epochs,
                     "bytes_per_epoch": a.bytes_per_epoch, "bytes_once": a.bytes_shipped - a.epoch_bytes})
    return {"name": "cluster", "rows": rows,
            "notes": (f"{files} Zipf 1.1 captures of {packets} packets, algorithms {', '.join(names)}; "
                      f"best of {rounds} alternating rounds; workers are single-threaded processes; "
                      f"busy_workers = summed task time of the last round / its wall time (how many "
                      f"workers really ran at once), task_cpu_seconds = their summed CPU time; bytes_per_epoch = per-epoch private summaries (dpmg, eehh-cms) per capture point, "
                      f"bytes_once = exact counts + baselines shipped once; "
                      f"{os.cpu_count()} cores, load average {load_before[0]:.2f} before, {load_after[0]:.2f} after")}


def cmd_cluster_bench(args) -> int:
    from dptop.engine.lab.bench.suite import print_report

    report = run_bench(quick=args.quick, workers=args.workers, files=args.files, packets=args.packets)
    print_report(report, sys.stdout)
    if args.json_out:
        write_json(report, args.json_out)
    return 0


def add_subcommand(subparsers) -> None:
    """Add ``cluster-bench`` to an argparse subparsers object."""
    p = subparsers.add_parser("cluster-bench", help="archive replay speed-up on 1, 2, 4 Dask workers and bytes shipped")
    p.add_argument("--quick", action="store_true", help="small files (a smoke run)")
    p.add_argument("--workers", type=ranged_list(local_workers()), default="1,2,4", help="comma-separated worker counts to time")
    p.add_argument("--files", type=ranged(BENCH_FILES), default=8, help="capture files in the archive")
    p.add_argument("--packets", type=ranged(BENCH_PACKETS), default=None, help="packets per file (default 2^22, quick 2^18)")
    p.add_argument("--json", dest="json_out", type=json_target, default=None, metavar="OUT",
                   help="write the report as JSON to OUT (default: no JSON)")
    p.set_defaults(func=cmd_cluster_bench)
