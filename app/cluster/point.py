"""One capture point's side of a cluster run: key batches in, small summaries out (never packets).

``CapturePoint.feed`` gives every batch to the exact counter and the whole-stream summarizers and
splits it by the plan's epoch rule over per-epoch summarizers (order inside an epoch is kept:
Misra-Gries and SpaceSaving depend on it). ``take_epoch`` hands one epoch's summaries over and
forgets them (a live agent calls it when the epoch's time is over, a file agent at the end);
``take_exact`` hands over the exact counts since the last call, so a live collector's exact view
follows the agents while they run.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dptop.cluster.plan import EpochSummarizers, Plan, declaration
from dptop.engine.core.keys import KeyBatch


@dataclass
class PointCounters:
    """What a capture point has seen (public to the operator, never part of a release)."""

    ip_packets: int = 0
    outside_grid: int = 0
    """Packets whose time stamp falls outside the public time grid (no private release covers them)."""
    late: int = 0
    """Packets of an epoch already handed over (live agents only; counted, never merged)."""
    epochs_shipped: list = field(default_factory=list)


def _frozen(keys: np.ndarray) -> np.ndarray:
    """``keys`` read-only, as every KeyBatch's are: the kernels ``dptop compile`` built take them as
    they are, where writable keys would compile a second variant inside a running agent."""
    keys.flags.writeable = False
    return keys


class CapturePoint:
    def __init__(self, plan: Plan):
        self.plan = plan
        self.whole = plan.whole_summarizers()
        self.exact = self.whole.pop(plan.truth)
        self._factory = EpochSummarizers(plan) if plan.private else None
        self._open: dict[int, dict] = {}
        self._closed: set[int] = set()
        self.counters = PointCounters()

    def feed(self, batch: KeyBatch) -> None:
        if len(batch) == 0:
            return
        self.exact.update(batch.keys)
        for s in self.whole.values():
            s.update(batch.keys)
        if self._factory is not None:
            for epoch, keys in self._split(batch):
                if epoch in self._closed:
                    self.counters.late += len(keys)
                    continue
                if epoch not in self._open:
                    self._open[epoch] = self._factory.new(epoch)
                for s in self._open[epoch].values():
                    s.update(keys)
        self.counters.ip_packets += len(batch)

    def _split(self, batch: KeyBatch):
        """(epoch, keys) pieces of ``batch`` in epoch order, arrival order kept inside each."""
        mode = self.plan.epoch_mode
        if mode == "stream":
            return [(0, batch.keys)]
        if mode == "packets":
            n = self.plan.settings.epoch_packets
            first = self.counters.ip_packets
            out, i = [], 0
            while i < len(batch):
                epoch = (first + i) // n
                j = min(len(batch), (epoch + 1) * n - first)
                out.append((epoch, batch.keys[i:j]))
                i = j
            return out
        cells = self.plan.grid.cell_of(batch.ts_ns)
        outside = int(np.count_nonzero(cells < 0))
        self.counters.outside_grid += outside
        order = np.argsort(cells, kind="stable")[outside:]
        sorted_cells = cells[order]
        cuts = np.flatnonzero(np.diff(sorted_cells)) + 1
        return [(int(sorted_cells[part[0]]), _frozen(batch.keys[order[part]]))
                for part in np.split(np.arange(len(order)), cuts) if len(part)]

    def open_epochs(self) -> list[int]:
        return sorted(self._open)

    def take_epoch(self, epoch: int) -> dict:
        """Summaries of ``epoch`` (empty dict if it saw no packet); later packets of it count as late."""
        self._closed.add(epoch)
        self.counters.epochs_shipped.append(epoch)
        return {name: s.summary() for name, s in self._open.pop(epoch, {}).items()}

    def take_exact(self):
        """Exact counts since the last call (a ``CountSummary`` delta)."""
        summary = self.exact.summary()
        self.exact = declaration(self.plan.truth).summarizer(self.plan.settings, self.plan.master)
        return summary

    def take_whole(self) -> dict:
        """The whole-stream baselines and the last exact-count delta (under ``plan.truth``)."""
        return {self.plan.truth: self.take_exact(), **{name: s.summary() for name, s in self.whole.items()}}
