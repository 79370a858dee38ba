"""Cluster subcommands: ``agent`` (a live capture point) and ``collect`` (the live collector);
``cluster-bench`` is the lab's (dptop.lab.cluster_bench).

``add_subcommands(subparsers)`` adds them to dptop's parser; ``python -m dptop.cluster`` runs them
on their own. A scheduler to join is any Dask scheduler, e.g. ``dask scheduler --host 127.0.0.1``.
"""
from __future__ import annotations

import argparse
from dataclasses import replace
import sys
import time

from dptop.capture.live import DURATION
from dptop.cluster.connect import check_tls
from dptop.engine.core.settings import EXTRA_RANGES, RANGES, SEED, Range, Settings, check_ranges, parse_param
from dptop.options import Parser, json_target, nonempty, ranged
from dptop.output import write_json

LIVE_DEFAULT = ("exact", "dpmg", "misragries")
EXPECT_TIMEOUT = Range("expect-timeout", 0.0, 3600.0)


def scheduler_arg(text: str) -> str:
    """``--scheduler``: tcp://HOST:PORT, or tls://HOST:PORT with certificates in Dask's configuration."""
    try:
        return check_tls(nonempty("--scheduler (tcp://HOST:PORT or tls://HOST:PORT)")(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--scheduler {exc}") from None


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


def check_collect(args) -> None:
    """The algorithms (mergeable ones) and their parameters, before connecting to anything."""
    from dptop.cluster.plan import check_names

    try:
        args.names = check_names(n.strip() for n in args.algorithms.split(",") if n.strip())
    except ValueError as exc:
        raise ValueError(f"--algorithms: {exc}") from None
    args.settings = Settings(k=args.k, k_tilde=args.k_tilde, epsilon=args.epsilon, delta=args.delta, seed=args.seed,
                             epoch_seconds=args.epoch_seconds, extra=dict(args.param))
    check_ranges(args.settings)


def cmd_collect(args) -> int:
    from dptop.cluster.collector import Collector

    names, settings = args.names, args.settings
    expect = [n.strip() for n in (args.expect or "").split(",") if n.strip()]
    collector = Collector(args.scheduler, names, settings, expect=expect, expect_timeout=args.expect_timeout).start()
    quiet = args.json_out == "-"
    absent = []
    if expect:
        print(f"dptop: waiting up to {args.expect_timeout:g} s for agents {', '.join(expect)}", file=sys.stderr)
        absent = collector.wait_for_expected()
        if absent:
            print(f"dptop: error: expected agent(s) not joined after {args.expect_timeout:g} s: {', '.join(absent)} "
                  f"(their traffic is in no release; every release names them as NOT covered)", file=sys.stderr)
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
    summary = collect_json(result, args.top)
    gone = summary["missing"]
    if args.json_out:
        write_json(summary, args.json_out)
    if not quiet:
        exact = next(iter(result.releases.get("exact", [])), None)
        print(f"exact top {_coverage(exact.status if exact else {'agents': [a.name for a in result.agents if not a.gone]})}:",
              ", ".join(f"{it.address} {it.estimate:.0f}" for it in result.exact_top(args.top)))
        for name, rels in result.releases.items():
            for rel in rels[-3:]:
                items = ", ".join(f"{it.address} {it.estimate:.0f}" for it in rel.items[:10]) or "(nothing released)"
                print(f"{name} epoch {rel.span.index} {_coverage(rel.status)} {items}")
    if [g for g in gone if g not in absent]:  # one line per cause: those never joined were named above
        print(f"dptop: error: not covered (lost, failed or never joined): {', '.join(gone)}", file=sys.stderr)
    if not result.agents:  # an empty result is no network, not a quiet one
        print("dptop: error: no capture point joined the scheduler (name those expected with --expect)",
              file=sys.stderr)
    return 1 if gone or not result.agents else 0


def _coverage(status: dict) -> str:
    """``[agents: a, b; partial: c; NOT covered: d]`` of a release's status."""
    text = f"[agents: {', '.join(status.get('agents', [])) or 'none'}"
    if status.get("agents_partial"):
        text += f"; partial (until lost): {', '.join(status['agents_partial'])}"
    if status.get("agents_missing"):
        text += f"; NOT covered: {', '.join(status['agents_missing'])}"
    return text + "]"


def collect_json(result, top: int) -> dict:
    """``collect --json``: the merged result, ``partial`` when an agent was lost or never joined, and
    those agents under ``missing`` (dptop.monitor.schemas.COLLECT)."""
    gone = [a.name for a in result.agents if a.gone]
    return {**result.to_json(top), "partial": bool(gone), "missing": gone}


def add_subcommands(subparsers) -> None:
    """Add ``agent`` and ``collect`` to an argparse subparsers object."""
    p = subparsers.add_parser("agent", help="run a live capture point that joins a Dask scheduler")
    p.add_argument("--iface", type=nonempty("--iface"), required=True,
                   help="interface to capture on (needs root or CAP_NET_RAW)")
    p.add_argument("--scheduler", type=scheduler_arg, required=True, metavar="tcp|tls://HOST:PORT",
                   help="the Dask scheduler to join")
    p.add_argument("--name", type=nonempty("--name"), default=None,
                   help="capture point name (default HOSTNAME:IFACE; unique per scheduler)")
    p.add_argument("--bpf", default=None, help="BPF capture filter (default: every packet)")
    p.set_defaults(func=cmd_agent)

    p = subparsers.add_parser("collect", help="merge the live capture points of a Dask scheduler and release")
    p.add_argument("--scheduler", type=scheduler_arg, required=True, metavar="tcp|tls://HOST:PORT",
                   help="the Dask scheduler the capture points joined")
    p.add_argument("--algorithms", type=nonempty("--algorithms"), default=",".join(LIVE_DEFAULT),
                   help="comma-separated mergeable algorithms (exact, spacesaving, misragries, countmin, dpmg, eehh-cms)")
    p.add_argument("--k", type=ranged(RANGES["k"]), default=16, help="report the keys above 1/k of the traffic")
    p.add_argument("--k-tilde", type=ranged(RANGES["k_tilde"]), default=None,
                   help="counters each algorithm keeps (default: each algorithm's own)")
    p.add_argument("--epsilon", type=ranged(RANGES["epsilon"]), default=0.5, help="privacy budget epsilon per epoch")
    p.add_argument("--delta", type=ranged(RANGES["delta"]), default=1e-6, help="privacy budget delta per epoch")
    p.add_argument("--seed", type=ranged(SEED), default=None, help="seeded noise: reproducible and NOT private (default: none, fresh noise)")
    p.add_argument("--epoch-seconds", type=ranged(RANGES["epoch_seconds"]), default=None,
                   help="time epochs (default: one epoch, the whole run)")
    p.add_argument("--param", type=_param, action="append", default=[], metavar="NAME=VALUE",
                   help="an option of one algorithm, e.g. --param width=2048 (repeatable; default: none)")
    p.add_argument("--duration", type=ranged(DURATION), default=None, help="stop after S seconds (default: Ctrl-C)")
    p.add_argument("--expect", type=nonempty("--expect"), default=None, metavar="NAME,NAME",
                   help="agents the run is for: epochs wait for them (up to --expect-timeout), and those that "
                        "never join are named as not covered (default: whoever joins)")
    p.add_argument("--expect-timeout", type=ranged(EXPECT_TIMEOUT), default=60.0, metavar="S",
                   help="how long to wait for the expected agents (default 60)")
    p.add_argument("--top", type=ranged(replace(EXTRA_RANGES["top"], name="top")), default=10,
                   help="length of the exact top in the JSON")
    p.add_argument("--json", dest="json_out", type=json_target, default=None, metavar="OUT|-",
                   help="write the JSON result to the file OUT, or to stdout with - (default: no JSON)")
    p.set_defaults(func=cmd_collect, check=check_collect)


def main(argv=None) -> int:
    from dptop.capture.pcap import CaptureError

    parser = Parser(prog="python -m dptop.cluster")
    add_subcommands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        if getattr(args, "check", None) is not None:
            args.check(args)
        return args.func(args)
    except (ValueError, OSError, CaptureError) as exc:
        print(f"dptop: error: {exc}", file=sys.stderr)
        return 2
