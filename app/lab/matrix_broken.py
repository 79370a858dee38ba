"""The broken variants of the product conformance matrix (dptop.lab.product_matrix): each finding of
the review that made the matrix, one product step broken, with the cell that must report it.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from dptop.lab.matrix_captures import SECOND, T0, base_stream
from dptop.lab.matrix_cells import COUNT_EPOCHS, Cell, config
from dptop.lab.matrix_product import Product
from dptop.monitor import publish
from dptop.monitor.config import SourceSpec
from dptop.monitor.precheck import SourceFacts, read_facts
from dptop.releaselines import ReleaseLines
from dptop.report import span_text


def accept(source: SourceSpec, run) -> None:
    """A product that refuses no stop and no epochs the data chooses."""


class ArrivalRelease(Product):
    """Finding 2: releases when a later packet shows up, not on the public clock: the session is
    handed the file's facts without their grid (the time range and the canonical plan kept), so
    a paced replay has no public clock and an epoch closes when the next cell's first packet
    arrives."""

    def facts(self, source: SourceSpec, epoch_seconds: float | None) -> SourceFacts | None:
        if source.speed is None:  # an unpaced replay has no public clock to remove
            return None
        facts = read_facts(source.path, source.time_range, epoch_seconds, source.loop)
        return replace(facts, grid=None)


class CountStop(Product):
    """Finding 3: a capture stopped at its N-th packet, with no public stop besides (``--count N``
    alone: an open-ended range). N is the number of packets ``x`` holds before its third cell, so
    its N-th packet is the last of the second cell; with the first packet removed the N-th is the
    first of the third cell, which the stop then closes too: two releases against three."""

    duration = None
    refuse = staticmethod(accept)  # the stop is not refused

    @property
    def stop_after(self):
        ts = base_stream()[2]
        return int(np.searchsorted(ts, T0 + 2 * SECOND))


class LedgerPerSession(Product):
    """Finding 5: a key switch starts a new ledger."""

    @staticmethod
    def ledger_after(session):
        return None


class SeededMetrics(Product):
    """Finding 6: /metrics of a seeded run without the NOT-private marker."""

    def metrics(self, view):
        return {k.replace(", ('private', 'false')", ""): v for k, v in super().metrics(view).items()
                if not k.startswith("dptop_not_private")}


def _exact_spans(session, command):
    """The private view with each release's span as the engine made it (exact counts, stamps)."""
    view = publish.publish_json(session, command)
    for name, a in view["algorithms"].items():
        for out, rel in zip(a["releases"], [r for r in session.releases(name) if r.guarantee is not None]):
            out["span"] = {k: v for k, v in rel.span.to_json().items()}
    return view


class ExactSpans(Product):
    """Finding 8: spans carry the exact packet count and real packet stamps."""
    view = staticmethod(_exact_spans)


class _ExactLines(ReleaseLines):
    def epoch_line(self, lane, snap, cell):
        """The line as the engine's span says it: the packets seen so far, their stamps."""
        release = snap.latest
        thr = "" if release.threshold is None else f", τ {release.threshold:,.0f}"
        items = " · ".join(f"{it.address} {it.estimate:,.0f}" for it in release.items) or "(nothing above τ)"
        return f"00:00:00 {lane.name} {span_text(release.span, self.units)}{thr}: {items}"


class ExactLines(Product):
    """Finding 8 on ``capture``'s running log: each continual or window line with the engine's
    span (the exact count of packets seen, the window's exact positions)."""
    release_lines = staticmethod(_ExactLines)


class CountSteps(Product):
    """Output steps driven by the packet count on a live capture: the lanes are built without
    the clock's epochs (the session's clock still ticks), so a continual algorithm computes and
    releases an output every k~ packets, and one packet more or less changes how many exist."""

    @staticmethod
    def live_config(cell, seed):
        run = config(cell, seed)
        return replace(run, settings=run.settings.with_(epoch_seconds=None))


class CountEpochs(Product):
    """``--epoch-packets`` accepted on a live capture: single-release epochs close at the N-th
    packet and a continual algorithm, without the clock's epochs, releases an output every k~
    packets, so one packet more or less changes how many releases exist."""

    refuse = staticmethod(accept)


BROKEN = {"arrival-release": (ArrivalRelease, Cell("timing", "dpss", neighbour="added-end")),
          "count-stop": (CountStop, Cell("capture", "dpss", neighbour="removed-start")),
          "ledger-per-session": (LedgerPerSession, Cell("top", "dpss")),
          "seeded-metrics": (SeededMetrics, Cell("seeded", "dpss")),
          "exact-spans": (ExactSpans, Cell("capture", "dpsw", neighbour="removed-start")),
          "exact-lines": (ExactLines, Cell("lines", "lazyhh", neighbour="removed-middle")),
          "count-steps": (CountSteps, Cell("capture", "lazyhh", neighbour="removed-start")),
          "count-epochs": (CountEpochs, Cell("capture", "lazyhh", neighbour="removed-start", path=COUNT_EPOCHS))}
"""Each broken variant with the cell that must report it."""
