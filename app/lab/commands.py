"""``dptop bench`` and ``dptop audit``: the benchmarks (updates/s, the capture path, replay, soak, live)
and the empirical privacy audits (a release mechanism on neighbouring streams, or the product
conformance matrix), the command line's lab tools beside the monitor's commands in dptop.cli."""
from __future__ import annotations

import sys

from dptop.engine.core.settings import SEED, Range
from dptop.engine.lab.audit.cases import CONFIDENCE, EVENTS, RUNS
from dptop.options import json_target, names_arg, nonempty, ranged
from dptop.output import write_json

JOBS = Range("jobs", 1, 64, integer=True)

SOAK_MINUTES = Range("soak-minutes", 0.1, 24 * 60.0)
BENCH_NAMES = ("algorithms", "single-release", "continual", "sliding-window", "local-dp", "anchors", "capture",
               "replay", "soak", "live", "window")
"""What ``dptop bench --only`` names (dptop.engine.lab.bench.suite.EXTRA_BENCHES by their last part)."""


def cmd_bench(args) -> int:
    from dptop.lab import replaybench
    from dptop.engine.lab.bench.suite import print_report, run_all

    wanted = None if args.only is None else {n.strip() for n in args.only.split(",")}
    outside_engine = {"replay", "capture", "soak", "live", "window"}
    engine_only = None if wanted is None else ",".join(wanted - outside_engine) or "none"
    tables = sys.stderr if args.json_out == "-" else sys.stdout
    show = lambda line: print(line, file=tables, flush=True)  # noqa: E731
    report = run_all(quick=args.quick, only=engine_only, anchors=args.anchors, tables=tables)
    if wanted is None or "capture" in wanted:
        from dptop.capture.lab.bench import run_bench

        report["reports"].append(run_bench(args.quick))
        print_report(report["reports"][-1], tables)
    if wanted is not None and "soak" in wanted:
        from dptop.lab import soakbench

        config = args.capture_defaults()  # capture's defaults
        report["reports"].append({"name": "soak", "rows": soakbench.rows(config, args.soak_minutes, progress=show)})
        print_report(report["reports"][-1], tables)
    if wanted is not None and "live" in wanted:
        from dptop.lab import livebench

        report["reports"].append(livebench.report(args.quick, progress=show))
        print_report(report["reports"][-1], tables)
    if wanted is not None and "window" in wanted:
        from dptop.lab import livewindow

        report["reports"].append({"name": "window", "rows": livewindow.rows(args.quick, progress=show)})
        print_report(report["reports"][-1], tables)
    if wanted is None or "replay" in wanted:
        report["reports"].append({"name": "startup", "rows": replaybench.startup(quick=args.quick, progress=show)})
        report["reports"].append({"name": "replay", "rows": replaybench.run(quick=args.quick, progress=show)})
        report["reports"].append({"name": "replay lanes", "rows": replaybench.lanes(quick=args.quick, progress=show)})
    if args.json_out:
        write_json(report, args.json_out)
    return 0


def _audit_targets() -> dict:
    from dptop.engine.lab.audit import cases as audit_cases
    from dptop.lab.product_audit import PRODUCT_TARGETS
    from dptop.lab.audit_paths import PATH_TARGETS

    return {**audit_cases.TARGETS, **PRODUCT_TARGETS, **PATH_TARGETS}


def check_audit(args) -> None:
    if (args.mechanism is None) == (args.product is None):
        raise ValueError("dptop audit: give --mechanism NAME (or list) or --product")
    if args.product is not None:
        return
    if args.cells is not None or args.jobs != 1:
        raise ValueError("dptop audit: --cells and --jobs go with --product")
    if args.mechanism != "list" and args.mechanism not in _audit_targets():
        raise ValueError(f"--mechanism: unknown audit mechanism {args.mechanism!r}; known: "
                         f"{', '.join(_audit_targets())}")


def cmd_audit(args) -> int:
    """Empirical privacy audit of a release mechanism (dptop.engine.lab.audit) or of the product path
    (dptop.lab.product_audit: capture files through a monitor session and its JSON)."""
    from dptop.engine.lab.audit import cases as audit_cases

    if args.product is not None:
        from dptop.lab.product_matrix import audit_product

        return audit_product(args.product == "quick", 3, only=args.cells, jobs=args.jobs)
    targets = _audit_targets()
    if args.mechanism == "list":
        for name, cls in targets.items():
            print(f"{name:28s} {'broken' if cls.broken else 'real':7s} {cls.description}")
        return 0
    if args.json_out == "-":
        report = None
    else:
        def report(pair):
            verdict = "VIOLATION" if pair.violation else "no violation"
            print(f"  {pair.pair}: {verdict}, ε lower bound {pair.epsilon_lower_bound:.3f}", flush=True)
    result = audit_cases.run_target(targets[args.mechanism](), args.runs, args.confidence, args.seed, args.events,
                                    report)
    if args.json_out:
        write_json(result.to_json(), args.json_out)
    if args.json_out != "-":
        print(result.summary())
    return 0


def add_subcommands(sub, capture_defaults) -> None:
    """Add ``bench`` and ``audit`` to an argparse subparsers object; ``capture_defaults()`` is the
    run configuration of ``dptop capture --iface lo`` (what ``bench --only soak`` runs)."""
    p = sub.add_parser("bench", help="benchmark every algorithm (updates/s) and the capture path")
    p.add_argument("--quick", action="store_true", help="smaller streams (a smoke run)")
    p.add_argument("--only", type=names_arg("--only", BENCH_NAMES), default=None,
                   help="comma-separated bench names: algorithms, capture, single-release, continual, "
                        "sliding-window, anchors, replay (end to end), soak (live, on request only), live (line rate "
                        "between two namespaces, root, on request only), window (the window on a 2,000 packets/s "
                        "link between two namespaces: seconds until each private panel shows a 30 %% and a 10 %% "
                        "source, three runs of 200 s, root and Xvfb, on request only) (default: all but soak, live "
                        "and window)")
    p.add_argument("--soak-minutes", type=ranged(SOAK_MINUTES), default=5.0, metavar="M",
                   help="--only soak: minutes of live capture on lo at 20,000 packets/s (root; the day-long "
                        "target is 60)")
    p.add_argument("--anchors", type=nonempty("--anchors"), default=None, metavar="DIR",
                   help="folder with the papers' authors' C++ timing programs, timed side by side with ours "
                        "(default: none, not timed)")
    p.add_argument("--json", dest="json_out", type=json_target, default=None, metavar="OUT|-",
                   help="write the report as JSON to the file OUT, or to stdout with - (default: no JSON)")
    p.set_defaults(func=cmd_bench, capture_defaults=capture_defaults)

    p = sub.add_parser("audit", help="empirical privacy audit of a release mechanism on neighbouring streams")
    p.add_argument("--mechanism", type=nonempty("--mechanism"), default=None,
                   help="mechanism to audit, or 'list' to list them (default: none; give it or --product)")
    p.add_argument("--product", choices=("quick", "all"), nargs="?", const="all", default=None,
                   help="the product conformance matrix (surfaces x algorithms x keys x weights x neighbours x "
                        "range paths) and its broken variants; 'quick': the default suite's slice")
    p.add_argument("--runs", type=ranged(RUNS), default=2000, help="runs per neighbouring stream (default 2000)")
    p.add_argument("--cells", type=nonempty("--cells"), default=None, metavar="TEXT",
                   help="--product: only the cells whose label (surface/algorithm/key/weight/neighbour/path) "
                        "contains TEXT or matches it as a pattern, e.g. 'timing/*/default' (default: every cell)")
    p.add_argument("--jobs", type=ranged(JOBS), default=1,
                   help="--product: cells run at once, each in a process of its own (default 1)")
    p.add_argument("--confidence", type=ranged(CONFIDENCE), default=0.95,
                   help="confidence of the violation statement (default 0.95)")
    p.add_argument("--events", type=ranged(EVENTS), default=3, help="events tested per neighbour pair (default 3)")
    p.add_argument("--seed", type=ranged(SEED), default=None,
                   help="seed every run's noise (reproducible; default: the OS CSPRNG)")
    p.add_argument("--json", dest="json_out", type=json_target, default=None, metavar="OUT|-",
                   help="write the JSON result to the file OUT, or to stdout with - (default: no JSON)")
    p.set_defaults(func=cmd_audit, check=check_audit)
