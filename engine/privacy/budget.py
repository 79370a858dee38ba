"""A budget that refuses to spend past its total **before** any noise is drawn.

Costs are the typed measures of ``measures`` (``PureDP``, ``ApproxDP``, ``ZCDP``); what has been
spent composes by ``measures.compose`` and is checked against the total by ``measures.within``.
"""
from __future__ import annotations

from dptop.engine.privacy.measures import Measure, compose, render, within

SLACK = 1e-12
"""Relative float slack of the check: a spend that gives back the total exactly is never refused."""


class Budget:
    """A budget ledger: ``spend`` raises before any noise is drawn if the total would be exceeded.

    Single-release mechanisms own one ``Budget`` per instance (per epoch) sized to the configured
    cost, so a second release from the same instance is refused (docs/dpss-eehh.md P4, P5).
    """

    def __init__(self, total: Measure):
        self.total = total
        self.spent: list[Measure] = []

    def spent_total(self) -> Measure:
        return compose(self.spent)

    def spend(self, cost: Measure) -> None:
        after = compose([*self.spent, cost])
        if not within(after, self.total, SLACK):
            raise RuntimeError(
                f"privacy budget exceeded: spending ({', '.join(render(cost))}) would bring the total to "
                f"({', '.join(render(after))}) > budget ({', '.join(render(self.total))})")
        self.spent.append(cost)
