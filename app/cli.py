"""``dptop`` command line: replay, capture, synth, bench, gui and demo.

The JSON written by ``replay`` and ``capture`` is a contract other tools rely on:
``source.{packets, ip_packets, skipped}``, ``exact.{total, top: [{address, count}]}`` and, per
algorithm under ``algorithms``, ``private``, ``guarantee``, ``updates_per_second`` and
``releases: [{span, threshold, items: [{address, estimate}]}]``. Extend it; never rename.
Nothing here imports Qt except the ``gui``/``demo`` commands, lazily.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from dptop import __version__
from dptop.engine.core import registry
from dptop.engine.baselines.exact import Exact
from dptop.engine.core.runner import Runner
from dptop.engine.core.settings import Settings, parse_param
from dptop.resources import DEMO_CAPTURE

DEFAULT_ALGORITHMS = ("dpss", "lazyhh", "dpsw", "exact", "spacesaving", "misragries", "countmin")


def _param_arg(text: str) -> tuple[str, object]:
    try:
        return parse_param(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--algorithms", default=None,
                   help="comma-separated names (default: the private trio and the baselines available); "
                        "'dptop list' shows them")
    p.add_argument("--k", type=int, default=16, help="heavy hitters: report items above n/k (default 16)")
    p.add_argument("--k-tilde", type=int, default=None, help="tracked counters/candidates k~ (default per algorithm)")
    p.add_argument("--epsilon", type=float, default=0.5,
                   help="privacy budget epsilon per packet and algorithm (default 0.5; continual observation needs < 1)")
    p.add_argument("--delta", type=float, default=1e-6, help="privacy budget delta (default 1e-6)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed the noise for a reproducible run (the output is then NOT private)")
    p.add_argument("--epoch-packets", type=int, default=None, help="single-release epochs of N packets")
    p.add_argument("--epoch-seconds", type=float, default=None, help="single-release epochs of S seconds of packet time")
    p.add_argument("--horizon", type=int, default=None, help="continual observation horizon T_max in packets")
    p.add_argument("--restart", action="store_true", help="continual observation: fresh instance every horizon")
    p.add_argument("--window", type=int, default=None, help="sliding window w in packets")
    p.add_argument("--gamma", type=float, default=None, help="sliding window heavy-hitter fraction G (items above G*w)")
    p.add_argument("--param", type=_param_arg, action="append", default=[], metavar="NAME=VALUE",
                   help="algorithm-specific option, e.g. --param depth=5 (repeatable)")
    p.add_argument("--top", type=int, default=None, help="length of exact.top (default max(k, 10); 0 = all)")
    p.add_argument("--json", dest="json_out", default=None, metavar="OUT|-", help="write the JSON result to OUT or stdout")


def settings_from_args(args, stream_length: int | None = None) -> Settings:
    return Settings(k=args.k, k_tilde=args.k_tilde, epsilon=args.epsilon, delta=args.delta, seed=args.seed,
                    epoch_packets=args.epoch_packets, epoch_seconds=args.epoch_seconds, horizon=args.horizon,
                    restart=args.restart, window=args.window, gamma=args.gamma, stream_length=stream_length,
                    extra=dict(args.param))


def algorithm_names(spec: str | None) -> list[str]:
    known = registry.names()
    if spec is None:
        return [n for n in DEFAULT_ALGORITHMS if n in known]
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names:
        raise ValueError("--algorithms names no algorithm")
    for n in names:
        registry.get(n)  # raises with the list of known names
    return list(dict.fromkeys(names))


def build_runner(names: list[str], settings: Settings, top: int | None) -> tuple[Runner, str]:
    """A runner over ``names`` plus the exact baseline that backs the JSON's ``exact`` section."""
    algorithms = [registry.make(n, settings) for n in names]
    exact_name = "exact"
    if "exact" not in names:
        exact_name = "exact (reference)"
        reference = Exact(settings)
        reference.name = exact_name
        algorithms.append(reference)
    for a in algorithms:
        if a.name == "exact" or a.name == exact_name:
            a.settings = a.settings.with_(extra={**a.settings.extra, "top": top})
    return Runner(algorithms), exact_name


def result_json(command: str, settings: Settings, source: dict, runner: Runner, exact_name: str, names) -> dict:
    snap = runner.snapshot().by_name()
    exact = next(a for a in runner.algorithms if a.name == exact_name)
    top = exact.release()
    algorithms = {}
    for name in names:
        s = snap[name]
        algorithms[name] = {
            "private": s.private,
            "family": s.family,
            "guarantee": None if s.guarantee is None else s.guarantee.to_json(),
            "updates_per_second": s.updates_per_second,
            "packets": s.packets,
            "drops": s.drops,
            "status": s.status,
            "releases": [r.to_json() for r in runner.releases(name)],
        }
    private = [snap[n].guarantee for n in names if snap[n].guarantee is not None]
    return {
        "dptop": __version__,
        "command": command,
        "settings": {k: v for k, v in vars(settings).items()},
        "source": source,
        "exact": {"total": exact.counter.total, "distinct": exact.counter.size,
                  "top": [{"address": it.address, "count": int(it.estimate)} for it in top.items]},
        "algorithms": algorithms,
        "budget": budget_json(private),
    }


def budget_json(guarantees) -> dict | None:
    """Sequential composition of every private panel's budget over the same packets."""
    from dptop.engine.privacy.composition import Cost, compose_sequential

    if not guarantees:
        return None
    total = compose_sequential(Cost(g.epsilon, g.delta or 0.0, g.rho) for g in guarantees)
    return {"epsilon": total.epsilon, "delta": total.delta, "rho": total.rho,
            "composition": "sequential (all private algorithms see the same packets)",
            "neighbouring": sorted({g.neighbouring for g in guarantees})}


def _write_json(result: dict, out: str) -> None:
    text = json.dumps(result, indent=2, default=str)
    if out == "-":
        sys.stdout.write(text + "\n")
    else:
        Path(out).write_text(text + "\n")


def _print_table(result: dict, file=None) -> None:
    file = file or sys.stdout
    src = result["source"]
    print(f"{src.get('path', src.get('iface', ''))}: {src['packets']} packets, {src['ip_packets']} with an IP source",
          file=file)
    print("exact top:", ", ".join(f"{r['address']} {r['count']}" for r in result["exact"]["top"][:10]), file=file)
    for name, a in result["algorithms"].items():
        label = a["guarantee"]["text"] if a["guarantee"] else "non-private"
        rel = a["releases"][-1] if a["releases"] else None
        items = ", ".join(f"{i['address']} {i['estimate']:.0f}" for i in rel["items"][:10]) if rel else ""
        thr = f" threshold {rel['threshold']:.1f}" if rel and rel["threshold"] is not None else ""
        print(f"\n{name} [{label}] {a['updates_per_second'] / 1e6:.2f}M updates/s{thr}", file=file)
        if not items:
            st = a["status"]
            why = st.get("note") or ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in st.items()
                                              if k.startswith("packets_until") and v)
            items = "(nothing released" + (f" — {why})" if why else ")")
        print(f"  {items}", file=file)


def _finish(args, command, settings, source, runner, exact_name, names) -> int:
    result = result_json(command, settings, source, runner, exact_name, names)
    if args.json_out:
        _write_json(result, args.json_out)
    if args.json_out != "-":
        _print_table(result)
    return 0


def cmd_replay(args) -> int:
    from dptop.capture.pcap import count_packets
    from dptop.capture.replay import FileReplay

    path = Path(args.path)
    stream_length = count_packets(path)
    settings = settings_from_args(args, stream_length=stream_length)
    names = algorithm_names(args.algorithms)
    runner, exact_name = build_runner(names, settings, args.top if args.top is not None else max(args.k, 10))
    runner.start()
    replay = FileReplay(path, runner.feed, speed=args.speed, records=stream_length)
    try:
        replay.start()
        replay.join()
        runner.finish()
    finally:
        replay.stop()
        runner.stop()
    st = replay.stats()
    source = {"path": str(path), "packets": st.packets, "ip_packets": st.ip_packets, "skipped": dict(st.skipped),
              "warnings": list(st.warnings)}
    for w in st.warnings:
        print(f"dptop: warning: {w}", file=sys.stderr)
    return _finish(args, "replay", settings, source, runner, exact_name, names)


def cmd_capture(args) -> int:
    from dptop.capture.live import LiveCapture

    settings = settings_from_args(args)
    names = algorithm_names(args.algorithms)
    runner, exact_name = build_runner(names, settings, args.top if args.top is not None else max(args.k, 10))
    runner.start()
    live = LiveCapture(args.iface, runner.offer, bpf=args.bpf, count=args.count, duration=args.duration)
    try:
        live.start()
        while not live.stats().finished:
            time.sleep(0.05)
    except KeyboardInterrupt:
        pass
    finally:
        live.stop()
    live.join()
    runner.finish()
    st = live.stats()
    source = {"iface": args.iface, "bpf": args.bpf, "packets": st.packets, "ip_packets": st.ip_packets,
              "skipped": dict(st.skipped), "kernel_drops": st.kernel_drops, "queue_drops": st.queue_drops,
              "warnings": list(st.warnings)}
    return _finish(args, "capture", settings, source, runner, exact_name, names)


def cmd_synth(args) -> int:
    from dptop.capture.synth import write_zipf_pcap

    write_zipf_pcap(args.pcap, args.skew, args.domain, args.length, args.seed, rate_pps=args.rate)
    print(f"wrote {args.length} packets (Zipf {args.skew}, domain {args.domain}, seed {args.seed}) to {args.pcap}")
    return 0


def cmd_bench(args) -> int:
    from dptop.engine.bench.suite import run_all

    report = run_all(quick=args.quick, only=args.only)
    if args.json_out:
        _write_json(report, args.json_out)
    return 0


def summary_line(cls) -> str:
    """The first line of a class docstring as plain text (reStructuredText ``literals`` unquoted)."""
    return (cls.__doc__ or "").strip().splitlines()[0].replace("``", "")


def cmd_list(args) -> int:
    for name in registry.names():
        cls = registry.get(name)
        print(f"{name:16s} {'private' if cls.private else 'non-private':12s} {cls.family:15s} {summary_line(cls)}")
    return 0


def cmd_audit(args) -> int:
    """Empirical privacy audit of one release mechanism (dptop.engine.audit.statistics)."""
    from dptop.engine.audit import cases as audit_cases

    if args.mechanism == "list":
        for name, cls in audit_cases.TARGETS.items():
            print(f"{name:20s} {'broken' if cls.broken else 'real':7s} {cls.description}")
        return 0
    if args.json_out == "-":
        report = None
    else:
        def report(pair):
            verdict = "VIOLATION" if pair.violation else "no violation"
            print(f"  {pair.pair}: {verdict}, ε lower bound {pair.epsilon_lower_bound:.3f}", flush=True)
    result = audit_cases.run(args.mechanism, args.runs, args.confidence, args.seed, args.events, report)
    if args.json_out:
        _write_json(result.to_json(), args.json_out)
    if args.json_out != "-":
        print(result.summary())
    return 0


# --- LazyHH sweep ----------------------------------------------------------------------------------
def cmd_sweep_lazyhh(args) -> int:
    """Recall/precision of LazyHH over ε × k~/k on a Zipf 1.1 stream (dptop.engine.bench.continual.sweep)."""
    from dptop.engine.bench.continual import sweep

    eps = [float(x) for x in args.epsilons.split(",")]
    ratios = [int(x) for x in args.ratios.split(",")]
    quiet = args.json_out == "-"
    show = None if quiet else (lambda r: print(
        f"eps={r['epsilon']:<5g} k~/k={r['k_tilde_over_k']} (k~={r['k_tilde']}): recall {r['recall']} "
        f"precision {r['precision']} ({r['released']} released / {r['true_hh']} true, τ={r['threshold']}) "
        f"{r['note']}", flush=True))
    rows = sweep(length=args.length, k=args.k, epsilons=eps, ratios=ratios, delta=args.delta, progress=show)
    if args.json_out:
        _write_json({"sweep": "lazyhh", "length": args.length, "k": args.k, "delta": args.delta, "rows": rows},
                    args.json_out)
    return 0


def _add_sweep_lazyhh(sub) -> None:
    p = sub.add_parser("sweep-lazyhh", help="LazyHH recall/precision over epsilon x k~/k (Zipf 1.1)")
    p.add_argument("--length", type=int, default=1 << 24, help="stream length = horizon (default 2^24)")
    p.add_argument("--k", type=int, default=128)
    p.add_argument("--delta", type=float, default=1e-3)
    p.add_argument("--epsilons", default="0.1,0.2,0.32,0.5,0.9")
    p.add_argument("--ratios", default="1,2,4,8", help="k~/k values; 1 runs k~ = k + 1 (k~ > k is required)")
    p.add_argument("--json", dest="json_out", default=None, metavar="OUT|-")
    p.set_defaults(func=cmd_sweep_lazyhh)


# --- local-DP sweep -------------------------------------------------------------------------------
def cmd_sweep_ldp(args) -> int:
    """NDCG, precision, recall and AAE of the local-DP schemes against ε (dptop.engine.local_dp.sweep)."""
    from dptop.engine.local_dp.sweep import sweep

    quiet = args.json_out == "-"
    show = None if quiet else (lambda r: print(
        f"{r['scheme']:4s} eps={r['epsilon']:<5g} ndcg {r['ndcg']:.3f} precision {r['precision']:.3f} "
        f"recall {r['recall']:.3f} aae {r['aae']:.0f} (k~={r['heavy']}, {r['runs']} runs)", flush=True))
    rows = sweep(schemes=args.schemes.split(","), epsilons=[float(x) for x in args.epsilons.split(",")],
                 data=args.data, d=args.domain, n=args.length, k=args.k, runs=args.runs, seed=args.seed,
                 progress=show)
    if args.json_out:
        _write_json({"sweep": "ldp", "data": args.data, "rows": rows}, args.json_out)
    return 0


def _add_sweep_ldp(sub) -> None:
    p = sub.add_parser("sweep-ldp", help="local-DP schemes: NDCG/precision/recall against epsilon")
    p.add_argument("--schemes", default="bgr,dsr,bdr,cnr")
    p.add_argument("--epsilons", default="0.5,1,2,4,8")
    p.add_argument("--data", default="zipf", help="zipf (1.5), normal or exponential")
    p.add_argument("--domain", type=int, default=1000, help="domain size d (default 1000)")
    p.add_argument("--length", type=int, default=1 << 20, help="reports per run (default 2^20)")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--seed", type=int, default=1, help="seed streams and randomizers (NOT private)")
    p.add_argument("--json", dest="json_out", default=None, metavar="OUT|-")
    p.set_defaults(func=cmd_sweep_ldp)


def has_display() -> bool:
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")) or \
        os.environ.get("QT_QPA_PLATFORM") in ("offscreen", "minimal", "vnc")


def cmd_gui(args) -> int:
    path = args.path
    if not has_display():
        print("dptop: no display found (DISPLAY/WAYLAND_DISPLAY unset); running the headless replay instead.\n"
              "       Start it on a desktop, or under Xvfb: xvfb-run dptop gui", file=sys.stderr)
        replay_args = build_parser().parse_args(["replay", str(path or DEMO_CAPTURE)])
        return cmd_replay(replay_args)
    from dptop.gui.main import run_gui

    return run_gui(path)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dptop", description="Differentially private top talkers: heavy hitters "
                                     "of network traffic under differential privacy, next to the exact answer.")
    parser.add_argument("--version", action="version", version=f"dptop {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("replay", help="run the algorithms over a pcap/pcapng capture")
    p.add_argument("path")
    p.add_argument("--speed", type=float, default=None, help="follow packet timestamps at this speed (default: as fast as possible)")
    _add_run_options(p)
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("capture", help="run the algorithms on live traffic (needs root or CAP_NET_RAW)")
    p.add_argument("--iface", required=True)
    p.add_argument("--bpf", default=None, help="BPF capture filter, e.g. 'ip and not port 22'")
    stop = p.add_mutually_exclusive_group()
    stop.add_argument("--duration", type=float, default=None, help="stop after S seconds")
    stop.add_argument("--count", type=int, default=None, help="stop after N IP packets")
    _add_run_options(p)
    p.set_defaults(func=cmd_capture)

    p = sub.add_parser("synth", help="write a synthetic Zipf capture (a real pcap file)")
    p.add_argument("--skew", type=float, default=1.1)
    p.add_argument("--domain", type=int, default=1 << 16)
    p.add_argument("--length", type=int, default=1 << 20)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rate", type=int, default=100_000, help="packets per second of packet time")
    p.add_argument("--pcap", required=True)
    p.set_defaults(func=cmd_synth)

    p = sub.add_parser("bench", help="benchmark every algorithm (updates/s) and the capture path")
    p.add_argument("--quick", action="store_true", help="smaller streams (a smoke run)")
    p.add_argument("--only", default=None, help="comma-separated bench names")
    p.add_argument("--json", dest="json_out", default=None, metavar="OUT|-")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("audit", help="empirical privacy audit of a release mechanism on neighbouring streams")
    p.add_argument("--mechanism", required=True, help="mechanism to audit, or 'list' to list them")
    p.add_argument("--runs", type=int, default=2000, help="runs per neighbouring stream (default 2000)")
    p.add_argument("--confidence", type=float, default=0.95,
                   help="confidence of the violation statement (default 0.95)")
    p.add_argument("--events", type=int, default=3, help="events tested per neighbour pair (default 3)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed every run's noise (reproducible; default: the OS CSPRNG)")
    p.add_argument("--json", dest="json_out", default=None, metavar="OUT|-", help="write the JSON result to OUT or stdout")
    p.set_defaults(func=cmd_audit)

    _add_sweep_lazyhh(sub)
    _add_sweep_ldp(sub)

    p = sub.add_parser("list", help="list the algorithms")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("gui", help="open the monitor window")
    p.add_argument("path", nargs="?", default=None, help="capture to replay (default: none, pick in the window)")
    p.set_defaults(func=cmd_gui)

    p = sub.add_parser("demo", help="open the monitor window replaying the bundled capture")
    p.set_defaults(func=cmd_gui, path=str(DEMO_CAPTURE))
    return parser


def main(argv=None) -> int:
    from dptop.capture.pcap import CaptureError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, OSError, CaptureError) as exc:
        print(f"dptop: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
