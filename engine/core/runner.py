"""The runner: feeds every algorithm the same key batches, each on its own thread.

One owner thread per algorithm; numba kernels release the GIL, so algorithms really run in
parallel. Each thread has a bounded queue: ``feed`` (file replay) waits for room so nothing is
lost, ``offer`` (live capture) never waits and counts a drop per algorithm whose queue is full.
Batches are read-only (``KeyBatch`` freezes its arrays) and shared, never copied.

The GUI and CLI read an immutable ``Snapshot``: latest release per algorithm, throughput (per
second of wall time since the first batch, and per CPU-second of the algorithm's thread), packets,
queue depths, drops and errors. ``live()`` views are taken at most every ``live_interval`` seconds
and only once the work (on a slow stream: the wall time) since the last one is at least
``LIVE_WORK_RATIO`` times what that view cost, so a costly view slows the display, never the
algorithm. The release history kept in memory
is bounded (``history``); ``released`` counts every release ever published. An exception in an algorithm's thread is
recorded in the snapshot, stops that algorithm only, and is re-raised by ``join``/``finish``.
"""
from __future__ import annotations

import queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace

from dptop.engine.core.base import Algorithm, explained
from dptop.engine.core.keys import KeyBatch
from dptop.engine.core.release import Release

_STOP = object()
_FINISH = object()

LIVE_WORK_RATIO = 20.0
"""A live view is taken only after at least this many times its own cost of algorithm work, or
of wall time on a slow stream: views cost at most ~1/20 of the work or of one core."""


class AlgorithmError(RuntimeError):
    """An algorithm's thread failed; ``__cause__`` is the original exception."""


@dataclass(frozen=True)
class AlgorithmSnapshot:
    name: str
    private: bool
    family: str
    packets: int  # packets processed
    updates_per_second: float  # packets per CPU-second of the algorithm's thread (rate while busy)
    queue_depth: int
    drops: int  # packets dropped because the queue was full
    releases: int  # releases published so far
    latest: Release | None
    guarantee: "Guarantee | None"  # noqa: F821 - dptop.engine.privacy.guarantee
    status: dict
    error: str | None
    done: bool
    ready: bool  # False while the kernels compile
    packets_per_second: float = 0.0  # packets per second of wall time since the first batch
    busy_share: float = 0.0  # CPU-seconds of the thread per wall second over the same time


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


class _Worker:
    """One algorithm, its queue and its thread."""

    def __init__(self, algorithm: Algorithm, queue_size: int, live_interval: float, history: int,
                 clock_start: float | None = None):
        self.algorithm = algorithm
        self.clock_start = clock_start
        self.queue: queue.Queue = queue.Queue(maxsize=queue_size)
        self.live_interval = live_interval
        self.lock = threading.Lock()
        self.packets = 0
        self.busy = 0.0  # CPU-seconds inside consume()
        self.first = None  # wall time of the first batch
        self.last = None  # wall time the last batch was done
        self.drops = 0
        self.history: deque[Release] = deque(maxlen=history)
        self.released = 0
        self.latest: Release | None = None
        self.status: dict = {}
        self.exception: BaseException | None = None
        self.done = False
        self.ready = False  # kernels compiled / loaded from the cache
        self.detectable: dict | None = None  # the algorithm's a-priori detection limit
        self.thread = threading.Thread(target=self._run, name=f"dptop-{algorithm.name}", daemon=True)

    def _stamp(self, release: Release | None) -> Release | None:
        """On a live clock, a release without a wall time gets the public one it covers: from the
        clock's start (or its own) to the moment it was made."""
        if release is None or self.clock_start is None or release.span.t_end is not None:
            return release
        span = release.span
        t_start = self.clock_start if span.t_start is None else span.t_start
        return replace(release, span=replace(span, t_start=t_start, t_end=time.time()))

    def _publish(self, releases: list[Release], live: Release | None) -> None:
        if self.clock_start is not None:
            releases, live = [self._stamp(r) for r in releases], self._stamp(live)
        status = self.algorithm.status()
        if self.detectable is not None:
            status["detectable"] = self.detectable
        with self.lock:
            self.history.extend(releases)
            self.released += len(releases) + sum(r.released_before for r in releases)
            if live is not None:
                self.latest = live
            elif releases:
                self.latest = releases[-1]
            self.status = status

    def _run(self) -> None:
        alg = self.algorithm
        last_live, live_cost, work = 0.0, 0.0, 0.0
        try:
            self.detectable = explained(alg.detectable())
            alg.warm_up()
            with self.lock:
                self.ready = True
            while True:
                item = self.queue.get()
                if item is _STOP:
                    return
                if item is _FINISH:
                    self._publish(alg.finish(), None)
                    return
                w0, c0 = time.perf_counter(), time.thread_time()
                released = alg.consume(item)
                w1, c1 = time.perf_counter(), time.thread_time()
                work += c1 - c0
                with self.lock:
                    self.busy += c1 - c0
                    self.packets += len(item)
                    self.first = w0 if self.first is None else self.first
                    self.last = w1
                live = None
                since = w1 - last_live
                if since >= self.live_interval and LIVE_WORK_RATIO * live_cost <= max(work, since):
                    live = alg.live()
                    last_live = time.perf_counter()
                    live_cost, work = last_live - w1, 0.0
                if released or live is not None or not self.status:
                    self._publish(released, live)
        except BaseException as exc:  # noqa: BLE001 - recorded, surfaced by join()
            with self.lock:
                self.exception = exc
        finally:
            with self.lock:
                self.done = True
            self._drain()

    def _drain(self) -> None:
        """Empty the queue so producers blocked on it wake up."""
        while True:
            try:
                self.queue.get_nowait()
            except queue.Empty:
                return

    def snapshot(self) -> AlgorithmSnapshot:
        alg = self.algorithm
        with self.lock:
            rate = self.packets / self.busy if self.busy > 0 else 0.0
            wall = (self.last - self.first) if self.first is not None and self.last > self.first else 0.0
            error = None if self.exception is None else f"{type(self.exception).__name__}: {self.exception}"
            return AlgorithmSnapshot(alg.name, alg.private, alg.family, self.packets, rate,
                                     self.queue.qsize(), self.drops, self.released, self.latest,
                                     alg.guarantee(), dict(self.status), error, self.done, self.ready,
                                     self.packets / wall if wall else 0.0, self.busy / wall if wall else 0.0)


class Runner:
    """Feeds ``algorithms`` in parallel. Use as ``start``, then ``feed``/``offer`` batches, then
    ``finish`` (drain and final releases) or ``stop`` (abandon queued work). Both are idempotent."""

    def __init__(self, algorithms: list[Algorithm], queue_size: int = 32, live_interval: float = 0.1,
                 history: int = 4096, clock_start: float | None = None):
        """``clock_start``: Unix seconds at which a live capture's public clock started; releases
        made without a wall time then carry [their start or the clock's, the moment made]."""
        names = [a.name for a in algorithms]
        if len(set(names)) != len(names):
            raise ValueError(f"each algorithm may run once; got {names}")
        self.workers = [_Worker(a, queue_size, live_interval, history, clock_start) for a in algorithms]
        self._stop = threading.Event()
        self._started = False
        self._closed = False
        self._fed_lock = threading.Lock()
        self.packets_fed = 0
        self.batches_fed = 0

    @property
    def algorithms(self) -> list[Algorithm]:
        return [w.algorithm for w in self.workers]

    def start(self) -> "Runner":
        if not self._started:
            self._started = True
            for w in self.workers:
                w.thread.start()
        return self

    def _count_fed(self, batch: KeyBatch) -> None:
        with self._fed_lock:
            self.packets_fed += len(batch)
            self.batches_fed += 1

    def feed(self, batch: KeyBatch) -> bool:
        """Give ``batch`` to every algorithm, waiting for queue room (lossless). Returns False
        only when the runner was stopped."""
        if self._stop.is_set() or self._closed:
            return False
        self._count_fed(batch)
        for w in self.workers:
            while not w.done:
                try:
                    w.queue.put(batch, timeout=0.05)
                    break
                except queue.Full:
                    if self._stop.is_set():
                        return False
        return True

    def offer(self, batch: KeyBatch) -> bool:
        """Give ``batch`` to every algorithm without waiting; a full queue drops it for that
        algorithm and counts the drop. Returns True when every live algorithm took it."""
        if self._stop.is_set() or self._closed:
            return False
        self._count_fed(batch)
        accepted = True
        for w in self.workers:
            if w.done:
                continue
            try:
                w.queue.put_nowait(batch)
            except queue.Full:
                with w.lock:
                    w.drops += len(batch)
                accepted = False
        return accepted

    def _send_control(self, item) -> None:
        """Queue ``_STOP`` (after emptying the queue) or ``_FINISH`` (behind the data) for every
        thread still running."""
        for w in self.workers:
            while not w.done:
                if item is _STOP:
                    w._drain()
                try:
                    w.queue.put(item, timeout=0.05)
                    break
                except queue.Full:
                    continue

    def finish(self, timeout: float | None = None) -> Snapshot:
        """Process everything queued, publish final releases, stop the threads, re-raise errors."""
        if not self._closed and self._started:
            self._closed = True
            self._send_control(_FINISH)
        self.join(timeout)
        return self.snapshot()

    def stop(self) -> None:
        """Abandon queued work and stop promptly (safe before start and when repeated)."""
        self._stop.set()
        self._closed = True
        if self._started:
            self._send_control(_STOP)

    def join(self, timeout: float | None = None) -> None:
        """Wait for the threads; re-raise the first algorithm error as ``AlgorithmError``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for w in self.workers:
            if w.thread.is_alive():
                w.thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        for w in self.workers:
            if w.exception is not None:
                raise AlgorithmError(f"algorithm {w.algorithm.name!r} failed: {w.exception}") from w.exception

    def releases(self, name: str) -> list[Release]:
        """The releases of ``name`` still held (the last ``history``; a copy)."""
        for w in self.workers:
            if w.algorithm.name == name:
                with w.lock:
                    return list(w.history)
        raise KeyError(name)

    def snapshot(self) -> Snapshot:
        with self._fed_lock:
            packets, batches = self.packets_fed, self.batches_fed
        return Snapshot(time.time(), packets, batches, tuple(w.snapshot() for w in self.workers))
