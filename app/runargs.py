"""The options every run command shares (replay, capture, top): their argparse definitions, the
checked option types, and the ``RunConfig`` they build. One place, so the CLI's subcommands and the
parameter table test read the same ranges."""
from __future__ import annotations

import argparse
from dataclasses import replace

from dptop.engine.core.clock import parse_time_range
from dptop.engine.core.keykinds import KEY_KINDS
from dptop.engine.core.settings import EXTRA_RANGES, RANGES, SEED, Settings, parse_param
from dptop.monitor import catalogue, defaults
from dptop.monitor.config import (BYTE_CAP, BYTE_UNIT, LATENESS, LATENESS_SECONDS, LIVE_EPOCH_SECONDS, CountingChoice,
                                  RunConfig, config_errors)
from dptop.monitor.footprints import ENV, MemoryLimit, parse_size
from dptop.options import json_target, nonempty, ranged

DEFAULT_ALGORITHMS = defaults.ALGORITHMS


def param_arg(text: str) -> tuple[str, object]:
    try:
        return parse_param(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


PUBLISH_TARGET = nonempty("--publish (a file name, or - for stdout)")


def add_run_options(p: argparse.ArgumentParser, json_out: bool = True) -> None:
    p.add_argument("--algorithms", default=None,
                   help="comma-separated names (default: the private trio and exact, "
                        f"{','.join(DEFAULT_ALGORITHMS)}; with --baselines also {','.join(defaults.BASELINES)}); "
                        "'dptop list' shows them")
    p.add_argument("--k", type=ranged(RANGES["k"]), default=defaults.K,
                   help=f"report the keys above 1/k of the traffic, at most k of them (default {defaults.K})")
    p.add_argument("--k-tilde", type=ranged(RANGES["k_tilde"]), default=None,
                   help="counters or candidates each algorithm keeps, k~ (default: each algorithm's own, see dptop list)")
    p.add_argument("--epsilon", type=ranged(RANGES["epsilon"]), default=defaults.EPSILON,
                   help=f"privacy budget epsilon per packet and algorithm (default {defaults.EPSILON:g}; continual "
                        "observation needs < 1)")
    p.add_argument("--delta", type=ranged(RANGES["delta"]), default=defaults.DELTA,
                   help=f"privacy budget delta (default {defaults.DELTA:g})")
    p.add_argument("--seed", type=ranged(SEED), default=None,
                   help="seed the noise for a reproducible run (the output is then NOT private; default: none, fresh noise from the operating system)")
    p.add_argument("--epoch-packets", type=ranged(RANGES["epoch_packets"]), default=None,
                   help="single-release algorithms publish once per N packets (default: time epochs on a live interface, else one release at the end of the file)")
    p.add_argument("--epoch-seconds", type=ranged(RANGES["epoch_seconds"]), default=None,
                   help="single-release algorithms publish once per S seconds of packet time (default: 10 s on a live interface and in dptop top, else one release at the end of the file)")
    p.add_argument("--horizon", type=ranged(RANGES["horizon"]), default=None,
                   help="continual algorithms (lazyhh) count at most N packets, their horizon (default: the file's packet count, or about a million on a live interface)")
    p.add_argument("--restart", action="store_true", help="continual algorithms start afresh after each horizon instead of stopping")
    p.add_argument("--window", type=ranged(RANGES["window"]), default=None, help="sliding-window algorithms (dpsw) look at the last N packets (default 100,000, or the whole file when shorter)")
    p.add_argument("--gamma", type=ranged(RANGES["gamma"]), default=None,
                   help="sliding-window algorithms report keys holding more than this share of the window (default: 1/k)")
    p.add_argument("--param", type=param_arg, action="append", default=[], metavar="NAME=VALUE",
                   help="an option of one algorithm, e.g. --param depth=5 (repeatable; default: none, each algorithm's own choice; dptop list says which an algorithm reads)")
    p.add_argument("--key", choices=KEY_KINDS, default="src",
                   help="count per source address (default), destination address, destination port, IP protocol, "
                        "(source, destination) pair, or source/destination network (IPv4 /24 or /16, IPv6 /48 or /32)")
    p.add_argument("--weight", choices=("packets", "bytes"), default="packets",
                   help="count packets (default) or bytes: a packet counts ceil(length/BYTE_UNIT) units, at most "
                        "BYTE_CAP; private algorithms are calibrated so their guarantee holds per packet")
    p.add_argument("--byte-unit", type=ranged(BYTE_UNIT), default=64,
                   help="bytes per counted unit with --weight bytes (default 64)")
    p.add_argument("--byte-cap", type=ranged(BYTE_CAP), default=24, help="units one packet may count at most (default 24)")
    p.add_argument("--clients", type=clients_arg, default=None, metavar="PREFIXES",
                   help="hostdp-dst: the protected client hosts (e.g. 10.0.0.0/8,2001:db8::/32); each packet belongs "
                        "to its client end in both directions (default: the packets one host sends)")
    p.add_argument("--top", type=ranged(replace(EXTRA_RANGES["top"], name="top")), default=None,
                   help="length of exact.top (default max(k, 10); 0 = all)")
    p.add_argument("--memory-limit", type=memory_limit_arg, default=None, metavar="SIZE",
                   help=f"refuse a run whose algorithms' state would take more than SIZE (e.g. 8G, 512M; default "
                        f"{ENV}, else a quarter of the machine's memory)")
    if json_out:
        p.add_argument("--json", dest="json_out", type=json_target, default=None, metavar="OUT|-",
                       help="write the JSON result to the file OUT, or to stdout with - (default: no JSON)")
        p.add_argument("--publish", type=PUBLISH_TARGET, default=None, metavar="OUT",
                       help="write the private view to OUT: the releases with their guarantees, the budget and the "
                            "public facts with their provenance; nothing exact (default: not written)")
        add_serve_options(p, "serve the private view while running: /releases (JSON) and /metrics (Prometheus); "
                             "loopback unless HOST is given (needs the 'feed' extra; default: not served)")


def add_serve_options(p: argparse.ArgumentParser, text: str) -> None:
    """``--serve``, ``--serve-config`` and ``--serve-insecure`` (checked together by ``check_serve``)."""
    p.add_argument("--serve", type=serve_arg, default=None, metavar="[HOST:]PORT", help=text)
    p.add_argument("--serve-config", type=nonempty("--serve-config"), default=None, metavar="FILE",
                   help="the feed's TLS certificate and key, client CA and basic-auth users (bcrypt), in the "
                        "Prometheus exporters' web configuration format; needed for a HOST beyond loopback (default: plain HTTP on loopback)")
    p.add_argument("--serve-insecure", action="store_true",
                   help="allow --serve on a HOST beyond loopback without TLS (anyone who reaches it reads the feed; default: refused)")


def check_serve(args) -> None:
    """Replace ``args.serve`` by its checked ``ServeSpec`` (dptop.feedconfig.serve_spec)."""
    serve = getattr(args, "serve", None)
    if serve is None:
        if getattr(args, "serve_config", None) or getattr(args, "serve_insecure", False):
            raise ValueError("--serve-config and --serve-insecure go with --serve [HOST:]PORT")
        return
    if isinstance(serve, str):
        from dptop.feedconfig import serve_spec

        args.serve = serve_spec(serve, args.serve_config, args.serve_insecure)


FORMATS = ("table", "csv", "json")


def add_report_options(p: argparse.ArgumentParser) -> None:
    """What ``replay`` and ``capture`` print on stdout at the end."""
    p.add_argument("--format", choices=FORMATS, default="table",
                   help="what goes to stdout at the end: aligned tables for people, csv (one row per key shown) "
                        "or json (the same as --json -) for scripts (default table)")
    p.add_argument("--progress", choices=("auto", "always", "never"), default="auto",
                   help="progress lines on stderr: auto shows them on a terminal only, never on a pipe or a file "
                        "(default auto)")
    p.add_argument("--baselines", action="store_true",
                   help="also print the non-private baselines (SpaceSaving, Misra-Gries, CountMin) beside the "
                        "exact top, and without --algorithms also run SpaceSaving and Misra-Gries (default: the "
                        "defaults' baseline is exact alone)")


def report_form(args) -> str:
    """``--format``, with ``json`` turned into the JSON on stdout (``--json -``)."""
    if args.format != "json":
        return args.format
    if args.json_out not in (None, "-"):
        raise ValueError(f"--format json writes the JSON to stdout: drop --json {args.json_out}, or keep it and "
                         f"choose --format table or csv")
    args.json_out = "-"
    return "table"


def add_live_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lateness", type=ranged(LATENESS), default=LATENESS_SECONDS, metavar="S",
                   help=f"live time epochs: a packet delivered up to S seconds after its epoch ended still counts "
                        f"in it; later ones are counted drops (default {LATENESS_SECONDS:g}); single-release "
                        f"epochs default to {LIVE_EPOCH_SECONDS:g} s of wall clock on a live interface")


def settings_from_args(args) -> Settings:
    return Settings(k=args.k, k_tilde=args.k_tilde, epsilon=args.epsilon, delta=args.delta, seed=args.seed,
                    epoch_packets=args.epoch_packets, epoch_seconds=args.epoch_seconds, horizon=args.horizon,
                    restart=args.restart, window=args.window, gamma=args.gamma,
                    extra={**dict(args.param), **({"clients": args.clients} if args.clients else {})})


def memory_limit_arg(text: str) -> MemoryLimit:
    try:
        return MemoryLimit(parse_size(text), "--memory-limit")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def clients_arg(text: str) -> str:
    from dptop.engine.user_level.clients import ClientPrefixes

    if not text.strip():
        raise argparse.ArgumentTypeError("--clients must name address prefixes, e.g. 10.0.0.0/8,2001:db8::/32")
    try:
        ClientPrefixes.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--{exc}") from None
    return text


def serve_arg(text: str) -> str:
    from dptop.feedconfig import parse_serve

    try:
        parse_serve(text)
        return text
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def time_range_arg(text: str) -> tuple[int, int]:
    try:
        return parse_time_range(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cluster_arg(text: str) -> str:
    from dptop.cluster.connect import check_cluster

    try:
        return check_cluster(text, insecure=True)  # the address's form; plain tcp:// beyond loopback: check_replay
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def algorithm_names(spec: str | None, baselines: bool = False) -> list[str]:
    """The names ``--algorithms`` gives, or the defaults (with ``--baselines``, the cheap baselines too)."""
    known = catalogue.names()
    if spec is None:
        return [n for n in (*DEFAULT_ALGORITHMS, *(defaults.BASELINES if baselines else ())) if n in known]
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names:
        raise ValueError("--algorithms names no algorithm")
    for n in names:
        try:
            catalogue.entry(n)
        except ValueError as exc:  # names the list of known ones
            raise ValueError(f"--algorithms: {exc}") from None
    return list(dict.fromkeys(names))


def config_from_args(args) -> RunConfig:
    names = algorithm_names(args.algorithms, getattr(args, "baselines", False))
    settings = settings_from_args(args)
    top = args.top if args.top is not None else settings.extra.get("top", max(args.k, 10))
    counting = CountingChoice(args.key, args.weight, args.byte_unit, args.byte_cap)
    config = RunConfig(tuple(names), settings.with_(extra={**settings.extra, "top": top}), counting=counting,
                       memory_limit=args.memory_limit)
    for name, error in config_errors(config).items():
        raise ValueError(error if name == "settings" else f"{name}: {error}")
    return config
