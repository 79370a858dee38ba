"""What an algorithm declares when its state can be summarized at many capture points and merged
at one collector (the cluster reads these from the registry, ``registry.mergeable``).

An algorithm is mergeable in one of two ways:

* ``WholeStreamMerge`` — a non-private summary: each capture point summarizes its whole stream,
  the collector merges the summaries in a fixed order and releases once.
* ``EpochMerge`` — a private release: each capture point summarizes each public epoch without
  noise, the collector merges one epoch's summaries and a releasing instance adds the noise once
  (every packet lies in one capture point and one epoch, so the releases compose in parallel).

An algorithm with no declaration is not mergeable: its privacy or accuracy after a merge is not
established, and the cluster refuses it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from dptop.engine.core.facts import PublicFacts
from dptop.engine.core.release import Release, ReleasedItem
from dptop.engine.core.settings import Settings
from dptop.engine.core.status import Covered, ReleaseStatus


class Summarizer(Protocol):
    """A capture point's side: key batches in, one summary out."""

    def update(self, keys: np.ndarray) -> None: ...

    def summary(self) -> Any: ...


class EpochReleaser(Protocol):
    """The collector's releasing instance of a private mergeable algorithm."""

    def summarizer(self, master: bytes, epoch: int) -> Summarizer:
        """A capture point's summarizer of ``epoch`` (hash seeds derived from the collector's ``master``)."""

    def state_of(self, merged: Any) -> Any:
        """The release's state built from one epoch's merged summary (fresh noise added here, if any)."""

    def publish(self, state: Any, packets: int, epoch: int, cell: int | None, notes: tuple,
                coverage: Covered) -> Release:
        """The epoch's release from ``state`` (None: no capture point shipped anything for it),
        its status the ``coverage`` with the mechanism's figures."""


@dataclass(frozen=True)
class WholeStreamMerge:
    """A non-private summary over each capture point's whole stream, released once after the merge."""

    summary: type
    """The summary class that travels (its ``merge(other)`` combines two)."""
    summarizer: Callable[[Settings, bytes], Summarizer]
    """(settings, the collector's secret) -> a capture point's summarizer."""
    merge: Callable[[Sequence[Any]], Any]
    """Summaries in a fixed capture-point order -> the merged summary."""
    release: Callable[[Any, Settings], tuple[tuple[ReleasedItem, ...], ReleaseStatus]]
    """(merged summary, settings) -> the released items and the figures the summary states."""
    ground_truth: bool = False
    """The exact counts: every capture point ships them (as running deltas), asked for or not."""


@dataclass(frozen=True)
class EpochMerge:
    """A private release per public epoch from the merge of the capture points' epoch summaries."""

    summary: type
    """The summary class that travels (its ``merge(other)`` combines two)."""
    releaser: Callable[[Settings, PublicFacts, int], EpochReleaser]
    """(settings, the run's public facts, number of capture points) -> the releasing instance."""
    merge: Callable[[Sequence[Any]], Any]
    """Summaries in a fixed capture-point order -> the merged summary."""


Mergeability = WholeStreamMerge | EpochMerge
