"""Cluster subcommands: ``agent`` (a live capture point), ``collect`` (the live collector) and
``cluster-bench`` (archive-replay speed-up and bytes shipped).

``add_subcommands(subparsers)`` adds them to dptop's parser; ``python -m dptop.cluster`` runs them
on their own. A scheduler to join is any Dask scheduler, e.g. ``dask scheduler --host 127.0.0.1``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from dptop.engine.core.settings import Settings, parse_param

LIVE_DEFAULT = ("exact", "dpmg", "misragries")


def _param(text: str):
    try:
        return parse_param(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cmd_agent(args) -> int:
    from dptop.cluster.live import default_name, serve_agent

    name = args.name or default_name(args.iface)
    print(f"dptop agent {name}: capturing on {args.iface}, joining {args.scheduler} (Ctrl-C stops)", flush=True)
    try:
        serve_agent(args.scheduler, args.iface, name, args.bpf)
    except KeyboardInterrupt:
        pass
    return 0


def _status_line(a) -> str:
    return (f"  {a.name:24s} {a.state:9s} {a.packets:>10d} packets {a.packets_per_second:>10.0f}/s "
            f"drops {a.kernel_drops + a.queue_drops}" + (f"  ({a.error})" if a.error else ""))


def cmd_collect(args) -> int:
    from dptop.cluster.collector import Collector

    names = [n.strip() for n in args.algorithms.split(",") if n.strip()]
    settings = Settings(k=args.k, k_tilde=args.k_tilde, epsilon=args.epsilon, delta=args.delta, seed=args.seed,
                        epoch_seconds=args.epoch_seconds, extra=dict(args.param))
    collector = Collector(args.scheduler, names, settings).start()
    quiet = args.json_out == "-"
    deadline = None if args.duration is None else time.monotonic() + args.duration
    try:
        while deadline is None or time.monotonic() < deadline:
            time.sleep(1.0)
            if not quiet:
                print(f"{time.strftime('%H:%M:%S')} agents:", flush=True)
                for a in collector.status():
                    print(_status_line(a), flush=True)
    except KeyboardInterrupt:
        pass
    result = collector.stop()
    if args.json_out:
        text = json.dumps(result.to_json(args.top), indent=2, default=str)
        sys.stdout.write(text + "\n") if args.json_out == "-" else Path(args.json_out).write_text(text + "\n")
    if not quiet:
        print("exact top:", ", ".join(f"{it.address} {it.estimate:.0f}" for it in result.exact_top(args.top)))
        for name, rels in result.releases.items():
            for rel in rels[-3:]:
                items = ", ".join(f"{it.address} {it.estimate:.0f}" for it in rel.items[:10]) or "(nothing released)"
                print(f"{name} epoch {rel.span.index} [agents: {', '.join(rel.status.get('agents', []))}"
                      f"{'; NOT covered: ' + ', '.join(rel.status['agents_missing']) if rel.status.get('agents_missing') else ''}]"
                      f" {items}")
    return 0


def cmd_cluster_bench(args) -> int:
    from dptop.cluster.bench import run_bench
    from dptop.engine.bench.suite import print_report

    report = run_bench(quick=args.quick, workers=[int(w) for w in args.workers.split(",")],
                       files=args.files, packets=args.packets)
    print_report(report, sys.stdout)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n")
    return 0


def add_subcommands(subparsers) -> None:
    """Add ``agent``, ``collect`` and ``cluster-bench`` to an argparse subparsers object."""
    p = subparsers.add_parser("agent", help="run a live capture point that joins a Dask scheduler")
    p.add_argument("--iface", required=True, help="interface to capture on (needs root or CAP_NET_RAW)")
    p.add_argument("--scheduler", required=True, metavar="tcp://HOST:PORT")
    p.add_argument("--name", default=None, help="capture point name (default HOSTNAME:IFACE; unique per scheduler)")
    p.add_argument("--bpf", default=None, help="BPF capture filter")
    p.set_defaults(func=cmd_agent)

    p = subparsers.add_parser("collect", help="merge the live capture points of a Dask scheduler and release")
    p.add_argument("--scheduler", required=True, metavar="tcp://HOST:PORT")
    p.add_argument("--algorithms", default=",".join(LIVE_DEFAULT),
                   help="comma-separated mergeable algorithms (exact, spacesaving, misragries, countmin, dpmg, eehh-cms)")
    p.add_argument("--k", type=int, default=16)
    p.add_argument("--k-tilde", type=int, default=None)
    p.add_argument("--epsilon", type=float, default=0.5)
    p.add_argument("--delta", type=float, default=1e-6)
    p.add_argument("--seed", type=int, default=None, help="seeded noise: reproducible and NOT private")
    p.add_argument("--epoch-seconds", type=float, default=None, help="time epochs (default: one epoch, the whole run)")
    p.add_argument("--param", type=_param, action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--duration", type=float, default=None, help="stop after S seconds (default: Ctrl-C)")
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--json", dest="json_out", default=None, metavar="OUT|-")
    p.set_defaults(func=cmd_collect)

    p = subparsers.add_parser("cluster-bench", help="archive replay speed-up on 1, 2, 4 Dask workers and bytes shipped")
    p.add_argument("--quick", action="store_true", help="small files (a smoke run)")
    p.add_argument("--workers", default="1,2,4")
    p.add_argument("--files", type=int, default=8)
    p.add_argument("--packets", type=int, default=None, help="packets per file (default 2^22, quick 2^18)")
    p.add_argument("--json", dest="json_out", default=None, metavar="OUT")
    p.set_defaults(func=cmd_cluster_bench)


def main(argv=None) -> int:
    from dptop.capture.pcap import CaptureError

    parser = argparse.ArgumentParser(prog="python -m dptop.cluster")
    add_subcommands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, OSError, CaptureError) as exc:
        print(f"dptop: error: {exc}", file=sys.stderr)
        return 2
