"""Checking an agent's answer before anything of it is merged: every cell in it is one the collector
asked for, and every summary is of an algorithm the run takes (a malformed answer raises
``WireError``; the collector then fails that agent alone).
"""
from __future__ import annotations

from dptop.cluster.agents import AdmittedPoint
from dptop.cluster.messages import PointReport
from dptop.cluster.plan import Plan
from dptop.cluster.wire import WireError, decode


def check_report(plan: Plan, run: str, p: AdmittedPoint, r: PointReport):
    """The decoded summaries of an answer, once every cell in it is one the collector asked for."""
    if r.run != run:
        raise WireError(f"an answer for run {r.run[:12]!r}, not this run's")
    if plan.grid is None:
        cells = [0] if r.whole is not None and plan.private else []
        if sorted(r.epochs) != cells:
            raise WireError("the whole-stream epoch comes with the final summaries only")
    elif r.state != "unknown":
        if not p.through <= r.through <= p.asked:
            raise WireError(f"through cell {r.through}: the collector asked up to {p.asked} (last {p.through})")
        cells = sorted(r.epochs)
        if cells and (cells != list(range(cells[0], r.through + 1)) or cells[0] <= p.through):
            raise WireError(f"cells {cells[0]}..{cells[-1]} are not the ones asked ({p.through + 1}..{r.through})")
    epochs = {cell: decode_summaries(payload, set(plan.private)) for cell, payload in r.epochs.items()}
    truth = plan.truth
    exact = None if r.exact is None else decode_summaries(r.exact, {truth}, need={truth})[truth]
    whole = None if r.whole is None else decode_summaries(r.whole, plan.whole, need={truth})
    if (exact is not None or whole is not None and whole[truth].n) and truth not in plan.names:
        raise WireError("exact counts this run did not ask for")
    if whole is not None and not p.final:
        raise WireError("final summaries before the final pull")
    return epochs, exact, whole


def decode_summaries(payload, allowed: set, need: set = frozenset()) -> dict:
    """The decoded summaries of ``payload``: only the ``allowed`` algorithms, the ``need`` ones present."""
    summaries = decode(payload)
    if not set(need) <= set(summaries) <= allowed:
        raise WireError(f"summaries of {', '.join(sorted(summaries)) or 'nothing'}; this run takes "
                        f"{', '.join(sorted(allowed)) or 'none'}" + (f" and needs {', '.join(sorted(need))}" if need else ""))
    return summaries
