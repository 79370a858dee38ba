"""A session's lanes: one worker per algorithm (dptop.engine.core.worker.Worker), and the immutable
views the snapshot gives out."""
from __future__ import annotations

import os
from dataclasses import dataclass

from dptop.engine.core import registry
from dptop.engine.core.facts import PublicFacts
from dptop.engine.core.status import NO_STATUS, AlgorithmStatus
from dptop.engine.core.worker import AlgorithmSnapshot, QueueBound, Worker
from dptop.monitor.config import RunConfig
from dptop.monitor.states import State
from dptop.monitor.truth import TruthResult
from dptop.monitor.unseen import Unseen

STALL_SECONDS = 10.0
"""A live lane's queue holds this many seconds of the rate offered to it: a lane (or the whole
process) held up this long loses nothing. Longer than the 5 s a stall must not lose, since a live
lane also waits behind the ring's reader on a busy machine (``LIVE_LANE_NICE``)."""
LIVE_QUEUE = QueueBound(cap=1 << 23, floor=1 << 20, seconds=STALL_SECONDS)
"""A live lane holds at least 2^20 packets (10 s at 105k packets/s) and at most 2^23 (10 s at 840k
packets/s, 5 s at 1.68M): at most ``LIVE_QUEUE_MEMORY`` bytes of queued packets for all lanes
together (they share the batches, so the slowest lane's backlog is what is held)."""
LIVE_QUEUE_MEMORY = LIVE_QUEUE.memory
"""403 MB (48 bytes a queued packet, ``runner.PACKET_BYTES``)."""
LIVE_LANE_NICE = 10
"""A live lane's thread runs this much nicer (lower CPU priority) than the rest of the process: on
a busy machine the thread reading the kernel's ring goes first, since the ring holds 5 s at a
million frames/s (dptop.capture.ring) where a lane's queue holds ``STALL_SECONDS``; the lane catches
up from its queue. Measured on a veth at the sender's top rate with the machine loaded:
the reading thread got under a tenth of a core while four busy lanes shared the process's time
with it, and the ring overflowed."""
REPLAY_QUEUE = QueueBound(cap=1 << 18)
"""A replay lane holds 2^18 packets (the reader waits for room, nothing is dropped): enough to keep
it busy, few enough that the batches in flight stay small."""


class Lane:
    """One algorithm's worker, where it joined the stream (``origin``, a position of the truth's
    stream) and the positions of the batches its full queue refused (``unseen``), which its exact
    comparison leaves out."""

    def __init__(self, name: str, config: RunConfig, facts: PublicFacts, generation: int, history: int,
                 clock_start: float | None = None, live: bool = False, worker: type[Worker] = Worker):
        """``worker``: the kind of worker that runs the algorithm (its own thread; or, in a session
        the caller drives, ``dptop.monitor.stepped.InlineWorker``, in the caller's)."""
        self.name, self.generation = name, generation
        self.settings = config.settings_for(name, facts)
        self.origin: int | None = None
        self.unseen = Unseen()
        self.error: str | None = None
        self.view: LaneView | None = None
        self.viewed_at = 0.0
        self.worker: Worker | None = None
        self.host_pairs = registry.get(name).host_pairs  # fed the packets as captured (fanout)
        try:
            self.worker = worker(registry.make(name, self.settings, facts, config.counting.counted()),
                                 LIVE_QUEUE if live else REPLAY_QUEUE,
                                 live_interval=0.1, history=history, clock_start=clock_start).start()
        except (ValueError, TypeError) as exc:
            self.error = str(exc)
        thread_id = None if self.worker is None else self.worker.thread.native_id  # None: not a thread of its own
        if live and thread_id is not None:
            nicer(thread_id, LIVE_LANE_NICE)

    def snapshot(self, want_live: bool = False) -> AlgorithmSnapshot | None:
        """The worker's snapshot; ``want_live``: a view will show it, so ask for a fresh live view."""
        return None if self.worker is None else self.worker.snapshot(want_live)

    def exact(self, top: int | None) -> tuple[int, int, tuple] | None:
        """(packets, distinct keys, the ``top`` heaviest) of an exact baseline's counter since the
        lane started; None for a lane without one."""
        counter = None if self.worker is None else getattr(self.worker.algorithm, "counter", None)
        return None if counter is None else (counter.total, counter.size, counter.top(top))

    @property
    def ready(self) -> bool:
        return self.worker is None or self.worker.warmed


def nicer(thread_id: int, by: int) -> None:
    """Lower the CPU priority of the thread ``thread_id`` (its kernel id) by ``by`` nice steps (a
    raise needs no privilege; where the platform has no per-thread priority, nothing happens)."""
    try:
        os.setpriority(os.PRIO_PROCESS, thread_id, min(19, os.getpriority(os.PRIO_PROCESS, thread_id) + by))
    except (AttributeError, OSError):
        pass


@dataclass(frozen=True)
class LaneView:
    name: str
    generation: int
    origin: int
    settings: object
    algorithm: AlgorithmSnapshot | None
    error: str | None
    truth: TruthResult | None = None

    @property
    def status(self) -> AlgorithmStatus:
        """The algorithm's live status with its a-priori detection limit (dptop.engine.core.status)."""
        return NO_STATUS if self.algorithm is None else self.algorithm.status


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
    missed: int = 0  # live packets at least one lane's full queue refused (dptop.monitor.fanout;
    # the account every view renders: dptop.monitor.explain.drops_of)
