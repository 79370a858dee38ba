"""The interface every algorithm implements (one verb set, as in Apache DataSketches).

* ``update(keys)`` — feed a ``(n, 2) uint64`` key batch through the numba hot path.
* ``release()`` — a frozen ``Release`` of the current state. For a private single-release
  mechanism this *spends budget*: only the epoch logic calls it.
* ``reset()`` — back to the empty state (fresh noise and hash seeds for private ones).

The runner talks to algorithms through three more methods with safe defaults:

* ``consume(batch)`` — update with a ``KeyBatch`` and return the releases that became due
  (an epoch closed, a continual-observation output step passed). Default: ``update`` and none.
* ``live()`` — what the GUI may show right now at no extra privacy cost. Non-private: a fresh
  ``release()``. Private: the last published release (re-showing it is post-processing).
* ``finish()`` — the end of the stream: the final releases (for single release, the release of
  the last, possibly partial, epoch).

``guarantee()`` and ``status()`` describe the algorithm before and during a run so the GUI can
show the promise and the current threshold up front; ``footprint(settings, facts)`` states the
memory its state takes from the parameters alone, so a run too large for the machine is refused
before anything is allocated.

An algorithm is given three things, each typed: the user's parameters (``Settings``), the public
facts about the source (``PublicFacts``, each with its provenance) and what a packet counts as
(``Counting``). It sizes and calibrates itself from these only, never from the counts it sees.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from dptop.engine.core.keys import KeyBatch
from dptop.engine.core.release import Release, Span
from dptop.engine.core.facts import NO_FACTS, PublicFacts
from dptop.engine.core.settings import PACKETS, Counting, Settings
from dptop.engine.core.status import NO_STATUS, AlgorithmStatus, DetectionLimit


@dataclass(frozen=True)
class Footprint:
    """The bytes an algorithm's state arrays take (``nbytes``), computed from its parameters before
    anything is allocated, and the parameter that sizes them as the user sets it (``sized_by``,
    e.g. "k~ = 16777216")."""

    nbytes: int
    sized_by: str


class Algorithm(ABC):
    name: ClassVar[str]
    private: ClassVar[bool] = False
    family: ClassVar[str] = "baseline"
    parameters: ClassVar[tuple[str, ...] | None] = ()
    """The ``Settings.extra`` options (``--param NAME=VALUE``) this algorithm reads; None if it
    does not declare them (then no option is refused on its behalf)."""
    address_keys: ClassVar[bool] = False
    """True for algorithms that read addresses, not keys (host-level sets, local-DP address
    domains): they run on ``--key src`` or ``dst`` only (``keykinds.KeyKind.address``)."""
    host_pairs: ClassVar[bool] = False
    """True for algorithms that read each packet's two ends themselves (host-level sets: a user
    and its items are the packet's source and destination whatever ``--key`` counts): a session
    feeds them the packets as captured, before the key kind and the byte weight are applied."""

    def __init__(self, settings: Settings, facts: PublicFacts = NO_FACTS, counting: Counting = PACKETS):
        self.settings, self.facts, self.counting = settings, facts, counting
        self.packets = 0
        self._last: Release | None = None

    @abstractmethod
    def update(self, keys: np.ndarray) -> None:
        """Process a ``(n, 2) uint64`` key batch."""

    @abstractmethod
    def release(self) -> Release:
        """The output for the stream seen so far."""

    @abstractmethod
    def reset(self) -> None:
        """Forget everything (and redraw any randomness)."""

    def guarantee(self) -> "Guarantee | None":  # noqa: F821 - dptop.engine.privacy.guarantee (built on the core)
        """The guarantee releases carry (``None`` for non-private baselines)."""
        return None

    def status(self) -> AlgorithmStatus:
        """Public, display-only facts (threshold, packets until the horizon, ...), typed
        (dptop.engine.core.status)."""
        return NO_STATUS

    def detectable(self) -> DetectionLimit | None:
        """A-priori detection limit from the parameters and public facts alone, before any data
        (DataSketches style): the smallest ``count`` (and ``share`` of the packets it is measured
        over) a source needs to be released with probability >= 0.9, the typical ``error`` of a
        released estimate, over what (``over``); ``None`` for non-private baselines."""
        return None

    @classmethod
    def footprint(cls, settings: Settings, facts: PublicFacts = NO_FACTS,
                  counting: Counting = PACKETS) -> Footprint:
        """The memory of the state an instance built from ``settings`` and ``facts`` (its defaults
        chosen, ``with_defaults``) allocates: the arrays its state constructor makes, computed from the
        parameters alone, never by building it. Every registered algorithm states it."""
        raise NotImplementedError(f"{cls.__name__} does not state its memory")

    @classmethod
    def with_defaults(cls, settings: Settings, facts: PublicFacts = NO_FACTS,
                      counting: Counting = PACKETS) -> Settings:
        """``settings`` with this algorithm's unset parameters chosen from the public ``facts``
        (the replay's packet count) and the ``counting``; the CLI and the GUI both go through it. A choice made from a
        fact that is not covered (``Provenance.covered``) is listed in the guarantee."""
        return settings

    def warm_up(self) -> None:
        """Compile (or load from the numba cache) the update and query kernels on a scratch
        instance fed synthetic keys, so neither the first real batch nor the first live view is
        charged the compile time. The scratch instance sees no real data, so this costs no privacy."""
        scratch = type(self)(self.settings, self.facts, self.counting)
        warm = np.zeros((64, 2), dtype=np.uint64)
        warm[:, 1] = 0xFFFF_0A00_0000 + np.arange(64, dtype=np.uint64) % 7
        scratch.update(KeyBatch(warm).keys)  # read-only, like real batches: numba types differ
        scratch.live()

    def span(self) -> Span:
        return Span(0, self.packets)

    def consume(self, batch: KeyBatch) -> list[Release]:
        self.update(batch.keys)
        self.packets += len(batch)
        return []

    def live(self) -> Release | None:
        if not self.private:
            self._last = self.release()
        return self._last

    def finish(self) -> list[Release]:
        self._last = self.release()
        return [self._last]

