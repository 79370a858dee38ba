"""Which agents an epoch covers: those that delivered it, and those that should have and did not
(the collector releases a cell once this is known, and at the stop whatever is known then).
"""
from __future__ import annotations

import time

from dptop.cluster.agents import AdmittedPoint, AgentStatus
from dptop.cluster.merger import Merger


def epoch_cover(cell: int, merger: Merger, agents: dict[str, AgentStatus], points: dict[str, AdmittedPoint],
                expected: tuple[str, ...], expect_until: float) -> tuple[list[str], list[str]]:
    """(covered, missing) of ``cell``: every agent that delivered it, and those that should have
    and did not (gone, or its summaries lost with the scheduler), and the expected ones that never
    joined (an epoch waits for those until ``expect_until``, time.monotonic()). An agent still
    starting or running that has not delivered it (slow, not lost) -> not ready (None, None)."""
    delivered = merger.delivered(cell)
    missing = []
    for name, a in agents.items():
        p = points.get(name)
        if a.state == "missing" or p is None:
            missing.append(name)
            continue
        if name in delivered or cell < p.first_cell:
            continue
        if cell in p.dropped or a.gone:
            missing.append(name)
            continue
        if a.state == "finished" and cell > p.through:
            continue
        return None, None  # still to come
    absent = [n for n in expected if n not in agents]
    if absent and time.monotonic() < expect_until:
        return None, None  # an expected agent may still join
    return sorted(delivered), missing + absent


def final_cover(cell: int, merger: Merger, agents: dict[str, AgentStatus], points: dict[str, AdmittedPoint],
                expected: tuple[str, ...], expect_until: float) -> tuple[list[str], list[str]]:
    """``epoch_cover`` at the stop: whoever has not delivered the cell now is not covered."""
    covered, missing = epoch_cover(cell, merger, agents, points, expected, expect_until)
    if covered is None:
        delivered = merger.delivered(cell)
        covered = sorted(delivered)
        missing = [n for n, p in points.items() if n not in delivered and cell >= p.first_cell] + \
            [n for n in expected if n not in points]
    return covered, missing
