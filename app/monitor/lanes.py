"""A session's lanes: one runner per algorithm, and the immutable views the snapshot gives out."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from dptop.engine.core.facts import PublicFacts
from dptop.engine.core.keys import KeyBatch
from dptop.engine.core.runner import AlgorithmSnapshot, Runner
from dptop.monitor.config import RunConfig
from dptop.monitor.states import State
from dptop.monitor.status import LaneStatus
from dptop.monitor.truth import TruthResult

CHUNK_SECONDS = 0.2
"""A lane is fed chunks it processes in about this long, so it notices a stop well within a second."""
LIVE_QUEUE = 8
"""Chunks a live lane holds before it drops packets: bursts of over a second ride through."""
REPLAY_QUEUE = 4
"""Chunks a replay lane holds (the reader waits for room, nothing is dropped): enough to keep it
busy, few enough that the batches in flight stay small (each chunk holds its batch's block)."""


class Lane:
    """One algorithm's runner and where it joined the stream."""

    def __init__(self, name: str, config: RunConfig, facts: PublicFacts, generation: int, history: int, make,
                 clock_start: float | None = None, live: bool = False):
        self.name, self.generation = name, generation
        self.settings = config.settings_for(name, facts)
        self.origin: int | None = None
        self.error: str | None = None
        self.view: LaneView | None = None
        self.viewed_at = 0.0
        self.rate = 0.0  # packets per CPU-second measured so far (0: unknown)
        self.runner: Runner | None = None
        try:
            self.runner = Runner([make(name, self.settings, facts, config.counting.counted())], queue_size=LIVE_QUEUE if live else REPLAY_QUEUE,
                                 live_interval=0.1, history=history, clock_start=clock_start).start()
        except (ValueError, TypeError) as exc:
            self.error = str(exc)

    def snapshot(self) -> AlgorithmSnapshot | None:
        if self.runner is None:
            return None
        snap = self.runner.snapshot().algorithms[0]
        self.rate = snap.updates_per_second
        return snap

    def exact(self, top: int | None) -> tuple[int, int, tuple] | None:
        """(packets, distinct keys, the ``top`` heaviest) of an exact baseline's counter since the
        lane started; None for a lane without one."""
        counter = None if self.runner is None else getattr(self.runner.algorithms[0], "counter", None)
        return None if counter is None else (counter.total, counter.size, counter.top(top))

    @property
    def ready(self) -> bool:
        return self.runner is None or all(w.ready or w.done for w in self.runner.workers)

    def chunks(self, batch: KeyBatch):
        """``batch`` cut into pieces this algorithm processes in about ``CHUNK_SECONDS`` (its rate
        while busy so far, read from the worker without its lock: a stale value only sizes chunks)."""
        worker = self.runner.workers[0]
        if worker.busy > 0:
            self.rate = worker.packets / worker.busy
        size = max(1024, int(self.rate * CHUNK_SECONDS)) if self.rate > 0 else 4096
        if len(batch) <= size:
            yield batch
            return
        for start in range(0, len(batch), size):
            yield batch.slice(start, start + size)


@dataclass(frozen=True)
class LaneView:
    name: str
    generation: int
    origin: int
    settings: object
    algorithm: AlgorithmSnapshot | None
    error: str | None
    truth: TruthResult | None = None

    @cached_property
    def status(self) -> LaneStatus:
        """The algorithm's live status, typed (dptop.monitor.status)."""
        return LaneStatus.of(None if self.algorithm is None else self.algorithm.status)


@dataclass(frozen=True)
class SessionSnapshot:
    time: float
    state: State
    phase: str  # what a starting session is doing ("compiling kernels...")
    error: str | None
    source: object  # dptop.capture.source.SourceStats or None
    source_label: str
    lanes: tuple[LaneView, ...]
    truth_packets: int
    dropped: dict  # packets dropped by the public clock, by reason (operational)
    budget: dict | None  # the ledger (dptop.monitor.ledger)
