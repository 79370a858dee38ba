"""``dptop`` command line: replay, capture, synth, bench, gui and demo.

The JSON written by ``replay`` and ``capture`` is a contract other tools rely on:
``source.{packets, ip_packets, skipped}``, ``exact.{total, top: [{address, count}]}`` and, per
algorithm under ``algorithms``, ``private``, ``guarantee``, ``updates_per_second`` and
``releases: [{span, threshold, items: [{address, estimate}]}]``. Extend it; never rename.
Nothing here imports Qt except the ``gui``/``demo`` commands, lazily.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from dptop import lifetime
from dptop.engine.core.extras import FEED, GUI, LIVE, require
from dptop.capture import synth
from dptop.capture.live import COUNT, DURATION
from dptop.capture.replay import MAX_GAP, SPEED
from dptop.engine.core.settings import SEED, Range
from dptop.interrupts import DroppedInterrupts, end_of_start, exit_status
from dptop.monitor import catalogue, defaults
from dptop.monitor.config import LIVE_EPOCH_SECONDS, SourceSpec, config_errors
from dptop.monitor.memory import map_large_blocks
from dptop.monitor.sources import refuse_data_stop
from dptop.options import InstalledVersion, Parser, check_live, document_defaults, nonempty, ranged
from dptop.output import silence_stdout
from dptop.resources import DEMO_CAPTURE
from dptop.runargs import (add_live_options, add_report_options, add_run_options, add_serve_options, algorithm_names,
                           check_serve, cluster_arg, config_from_args, report_form, time_range_arg)

REFRESH = Range("refresh", 0.05, 3600.0)
def check_replay(args) -> None:
    """Everything ``replay`` checks before it starts (``args.config``, ``args.spec``): the
    algorithms and their parameters, and the capture and its time grid (one file) or the archive
    plan (several files)."""
    args.config = config_from_args(args)
    if args.cluster:
        from dptop.cluster.connect import check_cluster

        check_cluster(args.cluster, insecure=args.insecure)  # plain tcp:// beyond loopback only with --insecure
    args.form = report_form(args)
    if len(args.path) > 1 or args.cluster:
        if args.key != "src" or args.weight != "packets" or args.publish:
            raise ValueError("several files or --cluster count packets per source only, with --json: "
                             "--key, --weight and --publish need one file without --cluster")
        args.spec = None
        return
    if args.time_range and args.epoch_seconds is None:
        raise ValueError("--time-range is the public range of time epochs: give --epoch-seconds too")
    from dptop.monitor.precheck import check_source

    args.spec = SourceSpec("file", path=str(args.path[0]), speed=args.speed, time_range=args.time_range,
                           max_gap=args.max_gap)
    refuse_data_stop(args.spec, args.config.names, args.config.settings)
    args.facts = check_source(args.spec, args.config.settings.epoch_seconds)  # the one read before the replay
    if "t_max" in args.config.settings.extra:  # an explicit T_max is checked against the file's packet count
        for name, error in config_errors(args.config, args.facts.facts()).items():
            raise ValueError(f"{name}: {error}")


def cmd_replay(args) -> int:
    from dptop.headless import run, run_archive

    lifetime.end_without_teardown()  # its outputs are written whole and closed when run returns
    config = args.config
    if args.spec is None:
        return run_archive(args.path, config, args.cluster, args.json_out, config.settings.extra["top"],
                           args.time_range, args.form, args.baselines)
    return run("replay", args.spec, config, args.json_out, config.settings.extra["top"], args.publish,
               serve=args.serve, facts=args.facts, form=args.form, baselines=args.baselines, progress=args.progress)


def check_capture(args) -> None:
    """What ``capture`` checks before any output: the algorithms and their parameters, then the
    interface, the permission and the BPF filter (a capture socket opened and closed again)."""
    args.config = config_from_args(args)
    args.form = report_form(args)
    args.spec = SourceSpec("live", iface=args.iface, bpf=args.bpf, count=args.count, duration=args.duration,
                           lateness=args.lateness)
    refuse_data_stop(args.spec, args.config.names, args.config.settings)
    check_live(args.iface, args.bpf)


def cmd_capture(args) -> int:
    from dptop.headless import run

    lifetime.end_without_teardown()
    return run("capture", args.spec, args.config, args.json_out, args.config.settings.extra["top"], args.publish,
               lines=not args.quiet, serve=args.serve, form=args.form, baselines=args.baselines,
               progress=args.progress)


def check_top(args) -> None:
    """What ``dptop top`` checks before it starts: one source, the algorithms and a terminal."""
    if (args.iface is None) == (args.path is None):
        raise ValueError("dptop top reads one source: give a capture FILE or --iface IF")
    if args.path is not None and args.epoch_seconds is None and args.epoch_packets is None:
        args.epoch_seconds = LIVE_EPOCH_SECONDS  # a file shows its epochs as a live link does, not one at its end
    args.config = config_from_args(args)
    args.facts = None
    if args.iface is not None:
        args.spec = SourceSpec("live", iface=args.iface, bpf=args.bpf, count=args.count, duration=args.duration,
                               lateness=args.lateness)
        refuse_data_stop(args.spec, args.config.names, args.config.settings)
        check_live(args.iface, args.bpf)
    else:
        from dptop.monitor.precheck import check_source

        args.spec = SourceSpec("file", path=str(args.path), speed=args.speed, time_range=args.time_range,
                               max_gap=args.max_gap)
        refuse_data_stop(args.spec, args.config.names, args.config.settings)
        args.facts = check_source(args.spec, args.config.settings.epoch_seconds)


def cmd_top(args) -> int:
    """The terminal view (dptop.top) on an interface or a capture file."""
    if not sys.stdout.isatty():
        raise ValueError("dptop top needs a terminal (use replay or capture for a table or --json)")
    from dptop.top import run_top

    run_top(args.spec, args.config, args.refresh, args.serve, facts=args.facts)
    sys.stdout.flush()
    sys.stderr.flush()
    # the terminal is restored and the sessions closed: nothing is left to write, and the
    # interpreter's own teardown of numba and numpy would keep a quit waiting for seconds
    os._exit(0)


def _add_top(sub) -> None:
    p = sub.add_parser("top", help="terminal view like iftop/htop: private panels beside the exact baseline")
    p.add_argument("path", nargs="?", default=None, help="capture file to replay (default: none; give a file or --iface)")
    p.add_argument("--iface", type=nonempty("--iface"), default=None,
                   help="live interface, e.g. eth0 (needs root or CAP_NET_RAW; default: none, give a file or --iface)")
    p.add_argument("--bpf", default=None, help="BPF capture filter, e.g. 'ip and not port 22' (default: every packet)")
    stop = p.add_mutually_exclusive_group()
    stop.add_argument("--duration", type=ranged(DURATION), default=None,
                      help="live: stop after S seconds (default: run until q)")
    stop.add_argument("--count", type=ranged(COUNT), default=None,
                      help="live: stop after N IP packets (default: run until q)")
    add_live_options(p)
    p.add_argument("--speed", type=ranged(SPEED), default=1.0,
                   help="file: follow packet timestamps at this speed (default 1, real time)")
    p.add_argument("--max-gap", type=ranged(MAX_GAP), default=5.0, metavar="S",
                   help="file: wait at most S s for the next packet (default 5)")
    p.add_argument("--time-range", type=time_range_arg, default=None, metavar="START:END",
                   help="file: public range of the time epochs, START:END in Unix seconds (default: the file's "
                        "first to last packet stamp)")
    p.add_argument("--refresh", type=ranged(REFRESH), default=0.5, metavar="S",
                   help="seconds between redraws (default 0.5)")
    add_serve_options(p, "serve the private view while running: /releases (JSON) and /metrics (Prometheus); "
                         "loopback unless HOST is given (needs the 'feed' extra; default: not served)")
    add_run_options(p, json_out=False)
    p.set_defaults(func=cmd_top, check=check_top, json_out=None, publish=None)


def cmd_synth(args) -> int:
    from dptop.capture.synth import write_zipf_pcap

    write_zipf_pcap(args.pcap, args.skew, args.domain, args.length, args.seed, rate_pps=args.rate)
    print(f"wrote {args.length} packets (Zipf {args.skew}, domain {args.domain}, seed {args.seed}) to {args.pcap}")
    return 0


def cmd_compile(args) -> int:
    """Compile kernels into the user cache now (``make`` runs ``--first`` after installing), so the
    first replay or window starts at once; the rest compile on first use."""
    from dptop.engine.core.jit import cache_dir
    from dptop.kernels import EXACT, LIVE, PCAP, PCAPNG, compile_kernels

    tasks = [PCAP, *algorithm_names(None)] if args.first else [PCAP, PCAPNG, LIVE, EXACT, *catalogue.names()]
    t0 = time.perf_counter()
    what = "the pcap parser and the default algorithms" if args.first else "every kernel"
    print(f"dptop: compiling {what} into {cache_dir()} (once per install) ...", file=sys.stderr, flush=True)
    errors = compile_kernels(tasks, every_path=not args.first)
    if errors:
        print(f"dptop: error: {len(errors)} did not compile: {'; '.join(errors)}", file=sys.stderr)
        return 1
    print(f"dptop: kernels ready in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0


def cmd_list(args) -> int:
    """One row per algorithm: name, privacy, family in columns as wide as their longest entry,
    then its description in plain words, wrapped to the terminal beside them."""
    import shutil
    import textwrap

    rows = [(e.name, "private" if e.private else "not private", e.family, e.summary) for e in catalogue.entries()]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    indent = sum(widths) + 2 * 3
    width = max(40, shutil.get_terminal_size((100, 24)).columns - indent)
    for row in rows:
        lines = textwrap.wrap(row[3], width, break_on_hyphens=False) or [""]  # "over-estimated" stays whole
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + lines[0])
        for line in lines[1:]:
            print(" " * indent + line)
    return 0


def has_display() -> bool:
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")) or \
        os.environ.get("QT_QPA_PLATFORM") in ("offscreen", "minimal", "vnc")


def cmd_gui(args) -> int:
    path = args.path
    if not has_display():
        print("dptop: no display found (DISPLAY/WAYLAND_DISPLAY unset); running the headless replay instead.\n"
              "       Start it on a desktop, or under Xvfb: xvfb-run dptop gui", file=sys.stderr)
        demo = defaults.demo_args() if path in (None, str(DEMO_CAPTURE)) else []
        return cmd_replay(prepare(["replay", str(path or DEMO_CAPTURE), *demo]))
    require(GUI)
    from dptop.gui.launch import run_gui

    return run_gui(path, getattr(args, "serve", None))


MONITOR_COMMANDS = ("replay", "capture", "synth", "top", "compile", "list", "gui", "demo")
"""The monitor's own commands; the others are the lab's (bench, audit, sweep-*, cluster-bench) and
the cluster's (agent, collect), each defined in its own module."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; for one of the ``MONITOR_COMMANDS`` (``command``, the first word of
    the arguments), without the lab's and the cluster's commands, which nothing parsed then can
    reach: their modules load the audit's cases and mechanisms, the sweeps' schemes and the
    cluster's messages (0.15-0.2 CPU-s, a tenth of a 10-packet replay). ``dptop -h`` and a
    misspelt command get the whole list."""
    parser = Parser(prog="dptop", description="Differentially private top talkers: heavy hitters "
                                     "of network traffic under differential privacy, next to the exact answer.")
    parser.add_argument("--version", action=InstalledVersion)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("replay", help="run the algorithms over a pcap/pcapng capture (or an archive of them)")
    p.add_argument("path", nargs="+", help="capture file; several files are the capture points of one network, "
                                           "merged (mergeable algorithms only)")
    p.add_argument("--cluster", type=cluster_arg, default=None, metavar="local:N|tcp://HOST:PORT|tls://HOST:PORT",
                   help="farm the files out to Dask workers, which ship summaries, not packets (default: "
                        "one process)")
    p.add_argument("--insecure", action="store_true",
                   help="allow a plain tcp:// --cluster beyond loopback (anyone on the network can run code on its "
                        "workers; default: refused)")
    p.add_argument("--speed", type=ranged(SPEED), default=None,
                   help="follow packet timestamps at this speed (default: as fast as possible)")
    p.add_argument("--max-gap", type=ranged(MAX_GAP), default=5.0, metavar="S",
                   help="paced replay: wait at most S seconds for the next packet (default 5)")
    p.add_argument("--time-range", type=time_range_arg, default=None, metavar="START:END",
                   help="public range of the time epochs, Unix seconds START:END or ISO 8601 START/END "
                        "(default: the file's first to last packet stamp, then stated as public)")
    add_run_options(p)
    add_report_options(p)
    p.set_defaults(func=cmd_replay, check=check_replay)

    p = sub.add_parser("capture", help="run the algorithms on live traffic (needs root or CAP_NET_RAW)")
    p.add_argument("--iface", type=nonempty("--iface"), required=True,
                   help="the network interface to capture on, e.g. eth0 or lo (ip link lists them)")
    p.add_argument("--bpf", default=None, help="BPF capture filter, e.g. 'ip and not port 22' (default: every packet)")
    stop = p.add_mutually_exclusive_group()
    stop.add_argument("--duration", type=ranged(DURATION), default=None,
                      help="stop after S seconds (default: run until Ctrl-C)")
    stop.add_argument("--count", type=ranged(COUNT), default=None,
                      help="stop after N IP packets (default: run until Ctrl-C)")
    add_live_options(p)
    p.add_argument("--quiet", action="store_true", help="no line per release while the capture runs")
    add_run_options(p)
    add_report_options(p)
    p.set_defaults(func=cmd_capture, check=check_capture)

    p = sub.add_parser("synth", help="write a synthetic Zipf capture (a real pcap file)")
    p.add_argument("--skew", type=ranged(synth.SKEW), default=1.1,
                   help="Zipf exponent of the source popularity: larger is more skewed")
    p.add_argument("--domain", type=ranged(synth.DOMAIN), default=1 << 16, help="number of distinct sources")
    p.add_argument("--length", type=ranged(synth.LENGTH), default=1 << 20, help="number of packets")
    p.add_argument("--seed", type=ranged(SEED), default=1, help="seed of the pseudo-random sources (same seed, same file)")
    p.add_argument("--rate", type=ranged(synth.RATE), default=100_000, help="packets per second of packet time (the stamps written)")
    p.add_argument("--pcap", type=nonempty("--pcap"), required=True, help="the pcap file to write")
    p.set_defaults(func=cmd_synth)

    lab = command not in MONITOR_COMMANDS
    if lab:
        from dptop.lab.commands import add_subcommands as add_lab_commands

        add_lab_commands(sub, capture_defaults=lambda: config_from_args(build_parser("capture").parse_args(
            ["capture", "--iface", "lo"])))
    _add_top(sub)
    if lab:
        from dptop.cluster.cli import add_subcommands
        from dptop.lab.cluster_bench import add_subcommand as add_cluster_bench
        from dptop.lab.sweeps import add_subcommands as add_sweeps

        add_sweeps(sub)
        add_subcommands(sub)
        add_cluster_bench(sub)

    p = sub.add_parser("compile", help="compile every kernel into the user cache now (make compiles --first)")
    p.add_argument("--first", action="store_true",
                   help="only what the first run needs: the pcap parser and the default algorithms")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("list", help="list the algorithms")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("gui", help="open the monitor window")
    p.add_argument("path", nargs="?", default=None, help="capture to replay (default: none, pick in the window)")
    add_serve_options(p, "serve the private view of the window's session: /releases and /metrics (loopback by default)")
    p.set_defaults(func=cmd_gui)

    p = sub.add_parser("demo", help="open the monitor window replaying the bundled capture")
    p.set_defaults(func=cmd_gui, path=str(DEMO_CAPTURE))
    document_defaults(parser)
    return parser


def prepare(argv) -> argparse.Namespace:
    """Parse ``argv`` and run the command's checks (``check``): everything that comes before it
    starts or touches an output. Raises ``SystemExit`` (usage), ``ValueError`` or ``CaptureError``."""
    return _check(build_parser(_command(argv)).parse_args(argv))


def _command(argv) -> str | None:
    """The command ``argv`` names first (``None``: an option such as ``-h`` comes first)."""
    argv = sys.argv[1:] if argv is None else argv
    return argv[0] if argv and not argv[0].startswith("-") else None


def _check(args) -> argparse.Namespace:
    if getattr(args, "iface", None) is not None:
        require(LIVE)
    if getattr(args, "serve", None) is not None:
        require(FEED)
    check_serve(args)
    if getattr(args, "check", None) is not None:
        args.check(args)
    return args


def main(argv=None) -> int:
    """Exit codes: 0 done, 1 runtime error, 2 usage (bad option or parameter), 128 + signal."""
    map_large_blocks()
    try:
        with DroppedInterrupts() as interrupts:
            try:
                args = build_parser(_command(argv)).parse_args(argv)
            except SystemExit as exc:  # a usage error (one line, dptop.options.Parser), -h or --version
                return exc.code if isinstance(exc.code, int) else 2
            return _dispatch(args, interrupts)
    except KeyboardInterrupt as exc:  # before the command's own handlers (dptop.interrupts)
        return exit_status(exc)


def _dispatch(args, interrupts: DroppedInterrupts | None = None) -> int:
    from dptop.capture.pcap import CaptureError

    try:
        args = _check(args)  # may compile kernels on this thread, where a Ctrl-C can be dropped
        lifetime.started()
        if interrupts is not None:
            interrupts.check()
        if args.func not in (cmd_replay, cmd_capture):  # the others do not stop on SIGTERM/SIGHUP themselves
            end_of_start()
        return args.func(args)
    except ValueError as exc:
        print(f"dptop: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        silence_stdout()
        print("dptop: error: cannot write to stdout: the reader closed the pipe", file=sys.stderr)
        return 1
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

    text, name = traceback.format_exc(), f"error-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    for folder in (Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dptop",
                   Path(tempfile.gettempdir())):  # a read-only cache folder: the temporary one
        try:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text)
            return str(folder / name)
        except OSError:
            continue
    return "no file (neither the cache folder nor the temporary folder can be written)"


if __name__ == "__main__":
    sys.exit(main())
