"""``dptop sweep-lazyhh`` and ``dptop sweep-ldp``: utility sweeps over synthetic streams (the
command line's research tools, apart from the monitor's commands in dptop.cli)."""
from __future__ import annotations

from dptop.capture import synth
from dptop.engine.core.settings import RANGES, SEED, Range
from dptop.engine.local_dp.pipeline import SCHEMES
from dptop.options import json_target, names_arg, ranged, ranged_list
from dptop.output import write_json


# --- LazyHH sweep ----------------------------------------------------------------------------------
SWEEP_LENGTH = Range("length", 1, 1 << 30, integer=True)
"""Packets (or reports) of a sweep's synthetic stream."""
SWEEP_RUNS = Range("runs", 1, 1000, integer=True)
RATIO = Range("k~/k", 1, 1 << 10, integer=True)

def cmd_sweep_lazyhh(args) -> int:
    """Recall/precision of LazyHH over ε × k~/k on a Zipf 1.1 stream (dptop.engine.lab.bench.continual.sweep)."""
    from dptop.engine.lab.bench.continual import sweep

    eps, ratios = args.epsilons, args.ratios
    quiet = args.json_out == "-"
    show = None if quiet else (lambda r: print(
        f"eps={r['epsilon']:<5g} k~/k={r['k_tilde_over_k']} (k~={r['k_tilde']}): recall {r['recall']} "
        f"precision {r['precision']} ({r['released']} released / {r['true_hh']} true, τ={r['threshold']}) "
        f"{r['note']}", flush=True))
    rows = sweep(length=args.length, k=args.k, epsilons=eps, ratios=ratios, delta=args.delta, progress=show)
    if args.json_out:
        write_json({"sweep": "lazyhh", "length": args.length, "k": args.k, "delta": args.delta, "rows": rows},
                    args.json_out)
    return 0


def _add_sweep_lazyhh(sub) -> None:
    p = sub.add_parser("sweep-lazyhh", help="LazyHH recall/precision over epsilon x k~/k (Zipf 1.1)")
    p.add_argument("--length", type=ranged(SWEEP_LENGTH), default=1 << 24, help="stream length = horizon (default 2^24)")
    p.add_argument("--k", type=ranged(RANGES["k"]), default=128, help="heavy hitters: the keys above 1/k")
    p.add_argument("--delta", type=ranged(RANGES["delta"]), default=1e-3, help="privacy budget delta")
    p.add_argument("--epsilons", type=ranged_list(RANGES["epsilon"]), default="0.1,0.2,0.32,0.5,0.9",
                   help="comma-separated privacy budgets epsilon to sweep")
    p.add_argument("--ratios", type=ranged_list(RATIO), default="1,2,4,8",
                   help="k~/k values; 1 runs k~ = k + 1 (k~ > k is required)")
    p.add_argument("--json", dest="json_out", type=json_target, default=None, metavar="OUT|-",
                   help="write the rows as JSON to the file OUT, or to stdout with - (default: no JSON)")
    p.set_defaults(func=cmd_sweep_lazyhh)


# --- local-DP sweep -------------------------------------------------------------------------------
def cmd_sweep_ldp(args) -> int:
    """NDCG, precision, recall and AAE of the local-DP schemes against ε (dptop.engine.lab.local_dp_sweep)."""
    from dptop.engine.lab.local_dp_sweep import sweep

    quiet = args.json_out == "-"
    show = None if quiet else (lambda r: print(
        f"{r['scheme']:4s} eps={r['epsilon']:<5g} ndcg {r['ndcg']:.3f} precision {r['precision']:.3f} "
        f"recall {r['recall']:.3f} aae {r['aae']:.0f} (k~={r['heavy']}, {r['runs']} runs)", flush=True))
    rows = sweep(schemes=args.schemes.split(","), epsilons=args.epsilons,
                 data=args.data, d=args.domain, n=args.length, k=args.k, runs=args.runs, seed=args.seed,
                 progress=show)
    if args.json_out:
        write_json({"sweep": "ldp", "data": args.data, "rows": rows}, args.json_out)
    return 0


def _add_sweep_ldp(sub) -> None:
    p = sub.add_parser("sweep-ldp", help="local-DP schemes: NDCG/precision/recall against epsilon")
    p.add_argument("--schemes", type=names_arg("--schemes", SCHEMES), default="bgr,dsr,bdr,cnr",
                   help="comma-separated local-DP schemes to compare")
    p.add_argument("--epsilons", type=ranged_list(RANGES["epsilon"]), default="0.5,1,2,4,8",
                   help="comma-separated privacy budgets epsilon per report")
    p.add_argument("--data", choices=("zipf", "normal", "exponential"), default="zipf",
                   help="zipf (1.5), normal or exponential")
    p.add_argument("--domain", type=ranged(synth.DOMAIN), default=1000, help="domain size d (default 1000)")
    p.add_argument("--length", type=ranged(SWEEP_LENGTH), default=1 << 20, help="reports per run (default 2^20)")
    p.add_argument("--k", type=ranged(RANGES["k"]), default=10, help="heavy hitters: the k most frequent")
    p.add_argument("--runs", type=ranged(SWEEP_RUNS), default=3, help="runs per point, averaged")
    p.add_argument("--seed", type=ranged(SEED), default=1, help="seed streams and randomizers (NOT private)")
    p.add_argument("--json", dest="json_out", type=json_target, default=None, metavar="OUT|-",
                   help="write the rows as JSON to the file OUT, or to stdout with - (default: no JSON)")
    p.set_defaults(func=cmd_sweep_ldp)


def add_subcommands(sub) -> None:
    """Add ``sweep-lazyhh`` and ``sweep-ldp`` to dptop's subparsers."""
    _add_sweep_lazyhh(sub)
    _add_sweep_ldp(sub)
