"""What every capture point computes, decided once by the collector and shipped to the agents.

A ``Plan`` names the algorithms, the run ``Settings``, the epoch rule and the collector's secret
``master`` (from which every shared hash seed is derived, ``merge.derive_seeds``). Non-private
baselines and the exact counts summarise the whole stream (as they do in one process); the private
single-release algorithms summarise each public epoch:

* no epoch option: one epoch, the whole stream;
* ``epoch_packets`` N: epoch j is packets [jN, (j+1)N) **of each capture point** (boundaries are
  public under substitution of one packet's source, as in one process);
* a ``TimeGrid``: cell c is packet time [start + c·S, start + (c+1)·S); each packet goes to the cell
  of its own time stamp (no running maximum), packets outside the grid are counted, not released.

Only algorithms that declare their mergeability in the engine registry are accepted
(``registry.mergeable``, ``dptop.engine.core.mergeable``): a ``WholeStreamMerge`` summarises the
whole stream, an ``EpochMerge`` each epoch; the plan reads both from the registry, never by name.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field

from dptop.engine.core import registry
from dptop.engine.core.facts import NO_FACTS, Provenance, PublicFacts
from dptop.engine.core.mergeable import EpochMerge, Mergeability, WholeStreamMerge
from dptop.engine.core.settings import Settings, check_positive_int
from dptop.engine.core.clock import TimeGrid
from dptop.engine.single_release.epochs import check_epoch_options

WHY_REFUSED = ("their privacy under merging is covered by no privacy argument (SpaceSaving's eviction-order "
               "argument, continual-observation trees and the sliding-window sketch do not survive a "
               "merge; eehh-cs's envelope is experimental)")


def mergeable_names() -> tuple[str, ...]:
    """Every algorithm cluster mode runs: those that declare their mergeability in the registry."""
    return tuple(registry.mergeable_names())


def declaration(name: str) -> Mergeability:
    """How mergeable algorithm ``name`` is summarized and merged (its registry declaration)."""
    found = registry.mergeable(name)
    if found is None:
        raise ValueError(f"{name} declares no mergeability")
    return found


def ground_truth() -> str:
    """The name of the exact counts every capture point ships (the one ground-truth declaration)."""
    names = [n for n in mergeable_names()
             if isinstance(found := registry.mergeable(n), WholeStreamMerge) and found.ground_truth]
    if len(names) != 1:
        raise RuntimeError(f"the registry declares {len(names)} ground truths, not one")
    return names[0]


def check_names(names) -> tuple[str, ...]:
    """Known, mergeable algorithm names, in order without repeats; refuses the others by name."""
    names = tuple(dict.fromkeys(names))
    if not names:
        raise ValueError("algorithms: name at least one algorithm")
    refused = [n for n in names if registry.mergeable(n) is None]  # unknown names raise with the known ones
    if refused:
        raise ValueError(f"not available in cluster mode: {', '.join(refused)} — {WHY_REFUSED}; "
                         f"cluster mode runs {', '.join(mergeable_names())}")
    return names


def new_master(settings: Settings) -> bytes:
    """The collector's secret for shared hash seeds: OS randomness, or derived from
    ``settings.seed`` for reproducible (NOT private) runs."""
    if settings.seed is None:
        return os.urandom(32)
    return hashlib.sha256(f"dptop-cluster-seed/{settings.seed}".encode()).digest()


@dataclass(frozen=True)
class Plan:
    """What the collector ships to every capture point (small and picklable)."""

    names: tuple[str, ...]
    settings: Settings
    master: bytes = field(repr=False)
    agents: int = 1
    grid: TimeGrid | None = None

    def __post_init__(self):
        object.__setattr__(self, "names", check_names(self.names))
        check_positive_int("agents", self.agents)
        packets, seconds = check_epoch_options(self.settings.epoch_packets, self.settings.epoch_seconds)
        if self.grid is not None and packets is not None:
            raise ValueError(f"epoch_packets ({packets}) and a time grid are exclusive: choose one")
        if seconds is not None and self.grid is None:
            raise ValueError(f"epoch_seconds ({seconds:g}) in cluster mode needs a public time grid "
                             f"(start_ns, epoch_ns, cells) shared by every capture point")
        if self.grid is not None:  # the releases' guarantee text follows the grid
            object.__setattr__(self, "settings", self.settings.with_(epoch_seconds=self.grid.epoch_ns / 1e9))

    @property
    def facts(self) -> PublicFacts:
        """The run's public facts: the declared time grid's range, if any (every capture point shares it)."""
        if self.grid is None:
            return NO_FACTS
        return PublicFacts.of(time_range=(self.grid.start_ns, self.grid.end_ns), range_provenance=Provenance.DECLARED)

    @property
    def epoch_mode(self) -> str:
        return "grid" if self.grid is not None else "packets" if self.settings.epoch_packets else "stream"

    @property
    def private(self) -> tuple[str, ...]:
        """The algorithms released per epoch (``EpochMerge``), in the plan's order."""
        return tuple(n for n in self.names if isinstance(declaration(n), EpochMerge))

    @property
    def truth(self) -> str:
        """The exact counts' name: every capture point ships them, asked for or not."""
        return ground_truth()

    @property
    def whole(self) -> frozenset:
        """The names of the whole-stream summaries a capture point ships (``whole_summarizers``)."""
        return frozenset({self.truth, *self.names}) - set(self.private)

    def release_algorithm(self, name: str):
        """The collector's releasing instance of private algorithm ``name``."""
        return declaration(name).releaser(self.settings, self.facts, self.agents)

    def whole_summarizers(self) -> dict:
        """Summarizers over the whole stream: the exact counts plus every baseline named."""
        out = {}
        for name in (self.truth, *self.names):
            found = declaration(name)
            if isinstance(found, WholeStreamMerge) and name not in out:
                out[name] = found.summarizer(self.settings, self.master)
        return out


class EpochSummarizers:
    """A capture point's factory of per-epoch summarizers for the plan's private algorithms."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self._algorithms = {n: plan.release_algorithm(n) for n in plan.private}

    def new(self, epoch: int) -> dict:
        return {name: alg.summarizer(self.plan.master, epoch) for name, alg in self._algorithms.items()}
