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
from dptop.engine.core.clock import parse_time_range
from dptop.engine.core.keykinds import KEY_KINDS
from dptop.engine.core.settings import Settings, parse_param
from dptop.monitor.config import Counting, RunConfig, SourceSpec, config_errors
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
    p.add_argument("--key", choices=KEY_KINDS, default="src",
                   help="count per source address (default), destination address, destination port, IP protocol, "
                        "(source, destination) pair, or source/destination network (IPv4 /24 or /16, IPv6 /48 or /32)")
    p.add_argument("--weight", choices=("packets", "bytes"), default="packets",
                   help="count packets (default) or bytes: a packet counts ceil(length/BYTE_UNIT) units, at most "
                        "BYTE_CAP, and its guarantee is that of BYTE_CAP units by group privacy")
    p.add_argument("--byte-unit", type=int, default=64, help="bytes per counted unit with --weight bytes (default 64)")
    p.add_argument("--byte-cap", type=int, default=24, help="units one packet may count at most (default 24)")
    p.add_argument("--top", type=int, default=None, help="length of exact.top (default max(k, 10); 0 = all)")
    p.add_argument("--json", dest="json_out", default=None, metavar="OUT|-", help="write the JSON result to OUT or stdout")
    p.add_argument("--serve", default=None, metavar="[HOST:]PORT",
                   help="serve the private view while running: /releases (JSON) and /metrics (Prometheus); "
                        "loopback unless HOST is given (needs the 'feed' extra)")


def settings_from_args(args) -> Settings:
    return Settings(k=args.k, k_tilde=args.k_tilde, epsilon=args.epsilon, delta=args.delta, seed=args.seed,
                    epoch_packets=args.epoch_packets, epoch_seconds=args.epoch_seconds, horizon=args.horizon,
                    restart=args.restart, window=args.window, gamma=args.gamma, extra=dict(args.param))


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


def config_from_args(args) -> RunConfig:
    names = algorithm_names(args.algorithms)
    settings = settings_from_args(args)
    top = args.top if args.top is not None else max(args.k, 10)
    if top < 0:
        raise ValueError(f"--top ({top}) must be >= 0 (0 = every source)")
    counting = Counting(args.key, args.weight, args.byte_unit, args.byte_cap)
    config = RunConfig(tuple(names), settings.with_(extra={**settings.extra, "top": top}), counting=counting)
    for name, error in config_errors(config).items():
        raise ValueError(error if name == "settings" else f"{name}: {error}")
    return config


def cmd_replay(args) -> int:
    from dptop.headless import run

    config = config_from_args(args)
    if len(args.path) > 1 or args.cluster:
        from dptop.headless import run_archive

        return run_archive(args.path, config, args.cluster, args.json_out, config.settings.extra["top"],
                           parse_time_range(args.time_range) if args.time_range else None)
    time_range = parse_time_range(args.time_range) if args.time_range else None
    if time_range and args.epoch_seconds is None:
        raise ValueError("--time-range is the public range of time epochs: give --epoch-seconds too")
    spec = SourceSpec("file", path=str(args.path[0]), speed=args.speed, time_range=time_range, max_gap=args.max_gap)
    return run("replay", spec, config, args.json_out, config.settings.extra["top"], args.serve)


def cmd_capture(args) -> int:
    from dptop.headless import run

    config = config_from_args(args)
    spec = SourceSpec("live", iface=args.iface, bpf=args.bpf, count=args.count, duration=args.duration)
    return run("capture", spec, config, args.json_out, config.settings.extra["top"], args.serve)


def _write_json(result: dict, out: str) -> None:
    text = json.dumps(result, indent=2, default=str)
    if out == "-":
        sys.stdout.write(text + "\n")
    else:
        Path(out).write_text(text + "\n")


def cmd_synth(args) -> int:
    from dptop.capture.synth import write_zipf_pcap

    write_zipf_pcap(args.pcap, args.skew, args.domain, args.length, args.seed, rate_pps=args.rate)
    print(f"wrote {args.length} packets (Zipf {args.skew}, domain {args.domain}, seed {args.seed}) to {args.pcap}")
    return 0


def cmd_bench(args) -> int:
    from dptop import replaybench
    from dptop.engine.bench.suite import print_report, run_all

    wanted = None if args.only is None else {n.strip() for n in args.only.split(",")}
    engine_only = None if wanted is None else ",".join(wanted - {"replay", "capture"}) or "none"
    tables = sys.stderr if args.json_out == "-" else sys.stdout
    report = run_all(quick=args.quick, only=engine_only, anchors=args.anchors, tables=tables)
    if wanted is None or "capture" in wanted:
        from dptop.capture.bench import run_bench

        report["reports"].append(run_bench(args.quick))
        print_report(report["reports"][-1], tables)
    if wanted is None or "replay" in wanted:
        show = lambda line: print(line, file=tables, flush=True)  # noqa: E731
        report["reports"].append({"name": "startup", "rows": replaybench.startup(quick=args.quick, progress=show)})
        report["reports"].append({"name": "replay", "rows": replaybench.run(quick=args.quick, progress=show)})
    if args.json_out:
        _write_json(report, args.json_out)
    return 0


def cmd_compile(args) -> int:
    """Compile every kernel into the user cache now (``make`` runs it once after installing), so
    the first replay or window starts at once."""
    from dptop.capture.pcap import warm_up
    from dptop.engine.core.jit import cache_dir

    names = registry.names()
    t0 = time.perf_counter()
    print(f"dptop: compiling kernels into {cache_dir()} (once per install) ...", file=sys.stderr, flush=True)
    warm_up()
    for i, name in enumerate(names, 1):
        t1 = time.perf_counter()
        registry.make(name, Settings()).warm_up()
        print(f"dptop:   [{i}/{len(names)}] {name} {time.perf_counter() - t1:.1f} s", file=sys.stderr, flush=True)
    print(f"dptop: kernels ready in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
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
    """Empirical privacy audit of a release mechanism (dptop.engine.audit) or of the product path
    (dptop.monitor.audit: capture files through a monitor session and its JSON)."""
    from dptop.engine.audit import cases as audit_cases
    from dptop.monitor.audit import PRODUCT_TARGETS

    targets = {**audit_cases.TARGETS, **PRODUCT_TARGETS}
    if args.mechanism == "list":
        for name, cls in targets.items():
            print(f"{name:28s} {'broken' if cls.broken else 'real':7s} {cls.description}")
        return 0
    if args.mechanism not in targets:
        raise ValueError(f"unknown audit mechanism {args.mechanism!r}; known: {', '.join(targets)}")
    if args.json_out == "-":
        report = None
    else:
        def report(pair):
            verdict = "VIOLATION" if pair.violation else "no violation"
            print(f"  {pair.pair}: {verdict}, ε lower bound {pair.epsilon_lower_bound:.3f}", flush=True)
    result = audit_cases.run_target(targets[args.mechanism](), args.runs, args.confidence, args.seed, args.events,
                                    report)
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

    return run_gui(path, getattr(args, "serve", None))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dptop", description="Differentially private top talkers: heavy hitters "
                                     "of network traffic under differential privacy, next to the exact answer.")
    parser.add_argument("--version", action="version", version=f"dptop {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("replay", help="run the algorithms over a pcap/pcapng capture (or an archive of them)")
    p.add_argument("path", nargs="+", help="capture file; several files are the capture points of one network, "
                                           "merged (mergeable algorithms only)")
    p.add_argument("--cluster", default=None, metavar="local:N|tcp://HOST:PORT",
                   help="farm the files out to Dask workers, which ship summaries, not packets")
    p.add_argument("--speed", type=float, default=None, help="follow packet timestamps at this speed (default: as fast as possible)")
    p.add_argument("--max-gap", type=float, default=5.0, metavar="S",
                   help="paced replay: wait at most S seconds for the next packet (default 5)")
    p.add_argument("--time-range", default=None, metavar="START:END",
                   help="public range of the time epochs, Unix seconds START:END or ISO 8601 START/END "
                        "(default: the file's first to last packet stamp, then stated as public)")
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
    p.add_argument("--only", default=None, help="comma-separated bench names: algorithms, capture, single-release, "
                   "continual, sliding-window, anchors, replay (end to end)")
    p.add_argument("--anchors", default=None, metavar="DIR",
                   help="folder with the authors' C++ timing drivers: time them side by side (see dptop.engine.bench.anchors)")
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
    p.add_argument("--serve", default=None, metavar="[HOST:]PORT",
                   help="serve the private view while running: /releases (JSON) and /metrics (Prometheus); "
                        "loopback unless HOST is given (needs the 'feed' extra)")
    p.set_defaults(func=cmd_audit)

    _add_sweep_lazyhh(sub)
    _add_sweep_ldp(sub)

    from dptop.cluster.cli import add_subcommands

    add_subcommands(sub)

    p = sub.add_parser("compile", help="compile every kernel into the user cache now (make does it once)")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("list", help="list the algorithms")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("gui", help="open the monitor window")
    p.add_argument("path", nargs="?", default=None, help="capture to replay (default: none, pick in the window)")
    p.add_argument("--serve", default=None, metavar="[HOST:]PORT",
                   help="serve the private view of the window's session: /releases and /metrics (loopback by default)")
    p.set_defaults(func=cmd_gui)

    p = sub.add_parser("demo", help="open the monitor window replaying the bundled capture")
    p.set_defaults(func=cmd_gui, path=str(DEMO_CAPTURE))
    return parser


def main(argv=None) -> int:
    """Exit codes: 0 done, 1 runtime error, 2 usage (bad option or parameter), 128 + signal."""
    try:
        args = build_parser().parse_args(argv)
        return _dispatch(args)
    except KeyboardInterrupt:
        print("dptop: interrupted", file=sys.stderr)
        return 130


def _dispatch(args) -> int:
    from dptop.capture.pcap import CaptureError

    try:
        return args.func(args)
    except ValueError as exc:
        print(f"dptop: error: {exc}", file=sys.stderr)
        return 2
    except (CaptureError, OSError, MemoryError) as exc:
        text = f"{exc.strerror}: {exc.filename}" if isinstance(exc, OSError) and exc.strerror and exc.filename \
            else str(exc) or type(exc).__name__
        print(f"dptop: error: {text}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        raise
    except Exception:  # noqa: BLE001 - no traceback reaches a user: one line and a log file
        print(f"dptop: internal error ({sys.exc_info()[1]!r}); details in {_log_traceback()}", file=sys.stderr)
        return 1


def _log_traceback() -> str:
    import tempfile
    import traceback

    folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dptop"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        folder = Path(tempfile.gettempdir())
    path = folder / f"error-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    path.write_text(traceback.format_exc())
    return str(path)


if __name__ == "__main__":
    sys.exit(main())
