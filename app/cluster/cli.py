"""Cluster subcommands: ``agent`` (a live capture point) and ``collect`` (the live collector);
``cluster-bench`` is the lab's (dptop.lab.cluster_bench).

``add_subcommands(subparsers)`` adds them to dptop's parser; ``python -m dptop.cluster`` runs them
on their own. A scheduler to join is any Dask scheduler, e.g. ``dask scheduler --host 127.0.0.1``.
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from dataclasses import replace

from dptop.capture.live import DURATION
from dptop.cluster.connect import check_tls
from dptop.engine.core.settings import EXTRA_RANGES, RANGES, SEED, Range, Settings, check_ranges, parse_param
from dptop.engine.core.status import Covered, ReleaseStatus
from dptop.options import Parser, check_live, json_target, nonempty, ranged
from dptop.output import write_json

LIVE_DEFAULT = ("exact", "dpmg", "misragries")
EXPECT_TIMEOUT = Range("expect-timeout", 0.0, 3600.0)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def scheduler_arg(text: str) -> str:
    """``--scheduler``: tcp://HOST:PORT, or tls://HOST:PORT with certificates in Dask's configuration
    (plain tcp:// beyond loopback is checked with ``--insecure``, in the command's check)."""
    try:
        return check_tls(nonempty("--scheduler (tcp://HOST:PORT or tls://HOST:PORT)")(text), insecure=True)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--scheduler {exc}") from None


def check_scheduler(args) -> None:
    try:
        check_tls(args.scheduler, insecure=args.insecure)
    except ValueError as exc:
        raise ValueError(f"--scheduler {exc}") from None


def _param(text: str):
    try:
        return parse_param(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def check_agent(args) -> None:
    """The scheduler address, the interface and filter, and the agent's name (over TLS, its
    certificate's CN), before joining anything."""
    from dptop.cluster.connect import check_reachable
    from dptop.cluster.live import agent_name

    check_scheduler(args)
    args.name = agent_name(args.scheduler, args.iface, args.name)
    check_live(args.iface, args.bpf)  # each refusal names --iface or --bpf
    check_reachable(args.scheduler)  # a refused certificate: one line, before the capture's kernels compile


def cmd_agent(args) -> int:
    from dptop.cluster.live import AgentPlugin, serve_agent

    print(f"dptop agent {args.name}: capturing on {args.iface}, joining {args.scheduler} (Ctrl-C stops)", flush=True)
    stop = threading.Event()
    with _signals_stop(stop):  # INT, TERM or HUP: a requested stop, exit 0
        try:
            serve_agent(args.scheduler, AgentPlugin(args.iface, args.bpf), args.name,
                        say=lambda line: print(line, flush=True), stop=stop)
        except ConnectionError as exc:
            print(f"dptop: error: {exc}", file=sys.stderr)
            return 1
    return 0


class _signals_stop:
    """INT, TERM and HUP set ``stop`` (the first one is kept in the yielded dict's ``signal``)."""

    def __init__(self, stop: threading.Event):
        self.stop, self.got, self.old = stop, {"signal": None}, {}

    def _handler(self, signum, frame):
        if self.got["signal"] is None:
            self.got["signal"] = signum
        self.stop.set()

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self.old = {s: signal.signal(s, self._handler) for s in STOP_SIGNALS}
        return self.got

    def __exit__(self, *exc):
        for s, h in self.old.items():
            signal.signal(s, h)


def _status_line(a) -> str:
    return (f"  {a.name:24s} {a.state:9s} {a.packets:>10d} packets {a.packets_per_second:>10.0f}/s "
            f"drops {a.kernel_drops + a.queue_drops}" + (f"  ({a.error})" if a.error else ""))


def check_collect(args) -> None:
    """The algorithms (mergeable ones) and their parameters, before connecting to anything."""
    from dptop.cluster.plan import check_names

    check_scheduler(args)
    try:
        args.names = check_names(n.strip() for n in args.algorithms.split(",") if n.strip())
    except ValueError as exc:
        raise ValueError(f"--algorithms: {exc}") from None
    args.settings = Settings(k=args.k, k_tilde=args.k_tilde, epsilon=args.epsilon, delta=args.delta, seed=args.seed,
                             epoch_seconds=args.epoch_seconds, extra=dict(args.param))
    check_ranges(args.settings)


def cmd_collect(args) -> int:
    """Exit codes: 0 only when every epoch of the run was released with every agent covered, 1
    otherwise, 128 + signal on INT, TERM or HUP (the JSON is written all the same, ``partial``)."""
    from dptop.cluster.collector import Collector

    names, settings = args.names, args.settings
    expect = [n.strip() for n in (args.expect or "").split(",") if n.strip()]
    stop = threading.Event()
    quiet = args.json_out == "-"
    absent, said = [], set()
    with _signals_stop(stop) as got:
        collector = Collector(args.scheduler, names, settings, expect=expect, expect_timeout=args.expect_timeout)
        collector.start()
        if expect:
            print(f"dptop: waiting up to {args.expect_timeout:g} s for agents {', '.join(expect)}", file=sys.stderr)
            absent = collector.wait_for_expected(stop=stop)
            if absent and not stop.is_set():
                print(f"dptop: error: expected agent(s) not joined after {args.expect_timeout:g} s: "
                      f"{', '.join(absent)} (their traffic is in no release; every release names them as NOT covered)",
                      file=sys.stderr)
        deadline = None if args.duration is None else time.monotonic() + args.duration
        while (deadline is None or time.monotonic() < deadline) and not collector.fatal:
            if stop.wait(min(1.0, max(0.0, deadline - time.monotonic())) if deadline else 1.0):
                break
            _say_news(collector, said)
            if not quiet:
                print(f"{time.strftime('%H:%M:%S')} agents:", flush=True)
                for a in collector.status():
                    print(_status_line(a), flush=True)
        if got["signal"] is not None:
            print(f"dptop: {signal.Signals(got['signal']).name}: stopping, writing what was merged so far",
                  file=sys.stderr)
        result = collector.stop()
        _say_news(collector, said)
        summary = collect_json(result, args.top, cut=got["signal"] is not None, gaps=collector.gaps,
                               fatal=collector.fatal, refused=collector.refused())
        if args.json_out:
            write_json(summary, args.json_out)
    gone = summary["missing"]
    if not quiet:
        exact = next(iter(result.releases.get(result.plan.truth, [])), None)
        print(f"exact top {_coverage(exact.status if exact else Covered(agents=tuple(a.name for a in result.agents if not a.gone)))}:",
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
    if collector.fatal:
        print(f"dptop: error: {collector.fatal}", file=sys.stderr)
    if got["signal"] is not None:
        return 128 + got["signal"]
    return 1 if summary["partial"] or not result.agents else 0


def _say_news(collector, said: set) -> None:
    """One line per scheduler gap and per refused worker, once."""
    for gap in collector.gaps:
        if ("gap", gap["start"]) not in said:
            said.add(("gap", gap["start"]))
            print(f"dptop: the scheduler was lost for {gap['seconds']:.1f} s at "
                  f"{time.strftime('%H:%M:%S', time.localtime(gap['start']))}; reconnected, the run goes on",
                  file=sys.stderr)
    for address, why in collector.refused().items():
        if ("refused", address) not in said:
            said.add(("refused", address))
            print(f"dptop: {why}", file=sys.stderr)


def _coverage(status: ReleaseStatus) -> str:
    """``[agents: a, b; partial: c; NOT covered: d]`` of a release's status."""
    text = f"[agents: {', '.join(status.agents) or 'none'}"
    if status.agents_partial:
        text += f"; partial (until lost): {', '.join(status.agents_partial)}"
    if status.agents_missing:
        text += f"; NOT covered: {', '.join(status.agents_missing)}"
    return text + "]"


def collect_json(result, top: int, cut: bool = False, gaps=(), fatal: str | None = None, refused=None) -> dict:
    """``collect --json``: the merged result; those agents lost, failed or never joined under
    ``missing`` and every private release's epoch that does not cover them all under
    ``epochs_not_covered``;
    ``partial`` unless every epoch of the run was released with every agent covered (a signal,
    ``cut``, makes it partial too); the scheduler's ``gaps``, the ``refused`` workers, the ``error``
    that ended the run (dptop.monitor.schemas.COLLECT)."""
    gone = [a.name for a in result.agents if a.gone]
    uncovered = sorted({r.span.index for rels in result.releases.values() for r in rels
                        if r.guarantee is not None and r.status.agents_missing})
    return {**result.to_json(top), "partial": bool(gone or uncovered or cut or fatal), "missing": gone,
            "epochs_not_covered": uncovered, "stopped_by_signal": cut, "gaps": list(gaps),
            "refused": sorted((refused or {}).values()), "error": fatal}


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
    p.add_argument("--insecure", action="store_true",
                   help="allow a plain tcp:// scheduler beyond loopback (anyone on the network can then run code "
                        "here; default: refused)")
    p.set_defaults(func=cmd_agent, check=check_agent)

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
    p.add_argument("--insecure", action="store_true",
                   help="allow a plain tcp:// scheduler beyond loopback (anyone on the network can then read "
                        "the summaries and run code on the agents; default: refused)")
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
    except (ValueError, CaptureError) as exc:
        print(f"dptop: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the scheduler unreachable, a certificate refused, a second collector
        print(f"dptop: error: {exc}", file=sys.stderr)
        return 1
