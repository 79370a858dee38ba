"""The runner: feeds several algorithms the same key batches, one ``worker.Worker`` each on its own
thread (tests, benches), and reads them together as one ``Snapshot``. The monitor's lanes use
``Worker`` directly."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from dptop.engine.core.base import Algorithm
from dptop.engine.core.keys import KeyBatch
from dptop.engine.core.release import Release
from dptop.engine.core.worker import AlgorithmSnapshot, QueueBound, Worker


@dataclass(frozen=True)
class Snapshot:
    time: float
    packets_fed: int
    batches_fed: int
    algorithms: tuple[AlgorithmSnapshot, ...] = field(default_factory=tuple)

    def by_name(self) -> dict[str, AlgorithmSnapshot]:
        return {a.name: a for a in self.algorithms}

    @property
    def drops(self) -> int:
        return sum(a.drops for a in self.algorithms)

    @property
    def errors(self) -> dict[str, str]:
        return {a.name: a.error for a in self.algorithms if a.error}


class Runner:
    """Feeds ``algorithms`` in parallel, one ``Worker`` each over the same batches. Use as
    ``start``, then ``feed``/``offer`` batches, then ``finish`` or ``stop`` (both idempotent)."""

    def __init__(self, algorithms: list[Algorithm], queue_size: int = 32, live_interval: float = 0.1,
                 history: int = 4096, clock_start: float | None = None):
        """``queue_size``: batches each worker holds (``QueueBound.items``)."""
        names = [a.name for a in algorithms]
        if len(set(names)) != len(names):
            raise ValueError(f"each algorithm may run once; got {names}")
        bound = QueueBound(cap=1 << 62, items=queue_size)
        self.workers = [Worker(a, bound, live_interval, history, clock_start) for a in algorithms]
        self._closed = False
        self._fed_lock = threading.Lock()
        self.packets_fed = 0
        self.batches_fed = 0

    @property
    def algorithms(self) -> list[Algorithm]:
        return [w.algorithm for w in self.workers]

    def start(self) -> "Runner":
        for w in self.workers:
            w.start()
        return self

    def _count_fed(self, batch: KeyBatch) -> None:
        with self._fed_lock:
            self.packets_fed += len(batch)
            self.batches_fed += 1

    def feed(self, batch: KeyBatch) -> bool:
        """Give ``batch`` to every algorithm, waiting for queue room (lossless). Returns False
        only when the runner was stopped."""
        if self._closed:
            return False
        self._count_fed(batch)
        for w in self.workers:
            w.feed(batch)
        return not self._closed

    def offer(self, batch: KeyBatch) -> bool:
        """Give ``batch`` to every algorithm without waiting; a full queue drops it for that
        algorithm and counts the drop. Returns True when every live algorithm took it."""
        if self._closed:
            return False
        self._count_fed(batch)
        return all([w.offer(batch) for w in self.workers])

    def finish(self, timeout: float | None = None) -> Snapshot:
        """Process everything queued, publish final releases, stop the threads, re-raise errors."""
        self._closed = True
        deadline = None if timeout is None else time.monotonic() + timeout
        for w in self.workers:
            w.close()
        self.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return self.snapshot()

    def stop(self) -> None:
        """Abandon queued work and stop promptly (safe before start and when repeated)."""
        self._closed = True
        for w in self.workers:
            w.stop()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the threads; re-raise the first algorithm error as ``AlgorithmError``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for w in self.workers:
            if w.thread.is_alive():
                w.thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        for w in self.workers:
            w.join(0)

    def releases(self, name: str) -> list[Release]:
        """The releases of ``name`` still held (the last ``history``; a copy)."""
        for w in self.workers:
            if w.name == name:
                return w.releases()
        raise KeyError(name)

    def snapshot(self) -> Snapshot:
        with self._fed_lock:
            packets, batches = self.packets_fed, self.batches_fed
        return Snapshot(time.time(), packets, batches, tuple(w.snapshot() for w in self.workers))
