"""A worker: one algorithm on its own thread, with its queue and what it has published (``Worker``).

One ``Worker`` per algorithm; numba kernels release the GIL, so algorithms really run in parallel.
``feed`` (file replay) waits for room so nothing is lost, ``offer`` (live capture) never waits and
counts a drop when the queue is full. Batches are read-only (``KeyBatch`` freezes its arrays) and
shared, never copied; the worker cuts a batch into pieces it processes in about ``CHUNK_SECONDS``
(so it notices a stop well within a second), never the producer, so a batch is taken or refused
whole.

A queue is bounded in packets (``QueueBound``), sized in time on a live stream: it holds
``seconds`` of the rate offered to it (measured per second of wall time), between a floor and a cap
in packets, so a stall of that long loses nothing at any rate up to ``cap / seconds``. A queued
packet costs at most ``PACKET_BYTES`` (its key, destination, stamp, length and flow); lanes fed the
same batches in the same order share them, so all lanes together hold at most the slowest lane's
backlog.

Views read an immutable ``AlgorithmSnapshot`` (taken under the worker's lock): latest release,
throughput (per second of wall time since the first batch, and per CPU-second of the algorithm's
thread), packets, queue depth, drops and errors. ``live()`` views are taken only when a view asked
for one (``want_live``, which ``snapshot`` does), at most every ``live_interval`` seconds and only
once the work (on a slow stream: the wall time) since the last one is at least ``LIVE_WORK_RATIO``
times what that view cost, so a costly view slows the display, never the algorithm, and nobody
watching costs nothing. The release history kept in memory is bounded (``history``); ``released``
counts every release ever published. An exception in an algorithm's thread is recorded in the
snapshot, stops that algorithm only, and is re-raised by ``join``/``finish``. ``runner.Runner``
runs several workers over the same batches (tests, benches).
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, replace

from dptop.engine.core.base import Algorithm
from dptop.engine.core.keys import KeyBatch
from dptop.engine.core.release import Release
from dptop.engine.core.status import NO_STATUS, AlgorithmStatus, DetectionLimit

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
    status: AlgorithmStatus  # with the algorithm's a-priori ``detectable`` limit
    error: str | None
    done: bool
    ready: bool  # False while the kernels compile
    packets_per_second: float = 0.0  # packets per second of wall time since the first batch
    busy_share: float = 0.0  # CPU-seconds of the thread per wall second over the same time
    queued: int = 0  # packets waiting in the queue



CHUNK_SECONDS = 0.2
"""A worker processes a batch in pieces of about this long, so it notices a stop well within a second."""
PACKET_BYTES = 48
"""Memory one queued packet holds: key and destination (16 bytes each), stamp (8), length and flow (4 each)."""


@dataclass(frozen=True)
class QueueBound:
    """How much a worker's queue holds, in packets: ``seconds`` of the rate offered to it, at least
    ``floor`` and at most ``cap`` (``seconds`` None: always ``cap``); ``items`` also bounds the
    number of batches (None: no such bound). A batch larger than the bound enters an empty queue."""

    cap: int
    floor: int = 0
    seconds: float | None = None
    items: int | None = None

    def packets(self, rate: float) -> int:
        if self.seconds is None:
            return self.cap
        return int(min(self.cap, max(self.floor, self.seconds * rate)))

    @property
    def memory(self) -> int:
        """The most memory the queued packets may hold, in bytes."""
        return self.cap * PACKET_BYTES


class Worker:
    """One algorithm, its queue and its thread. ``start``, then ``feed``/``offer`` batches, then
    ``finish`` (drain and final releases) or ``stop`` (abandon queued work); both idempotent. Every
    field another thread reads is read under ``lock`` (``snapshot``, ``warmed``, ``releases``)."""

    def __init__(self, algorithm: Algorithm, bound: QueueBound, live_interval: float = 0.1, history: int = 4096,
                 clock_start: float | None = None):
        """``clock_start``: Unix seconds at which a live capture's public clock started; releases
        made without a wall time then carry [their start or the clock's, the moment made]."""
        self.algorithm = algorithm
        self.bound = bound
        self.clock_start = clock_start
        self.live_interval = live_interval
        self.lock = threading.Lock()
        self._room = threading.Condition(self.lock)  # the queue changed (an item in or out, a stop)
        self._queue: deque = deque()
        self._queued = 0  # packets in the queue
        self._stopping = False
        self._closed = False
        self._started = False
        self._rate = 0.0  # packets offered per wall second, the last full second
        self._window = (time.monotonic(), 0)  # start of the current second and packets offered in it
        self._live_wanted = False
        self.packets = 0
        self.busy = 0.0  # CPU-seconds inside consume()
        self.first = None  # wall time of the first batch
        self.last = None  # wall time the last batch was done
        self.drops = 0
        self.history: deque[Release] = deque(maxlen=history)
        self.released = 0
        self.latest: Release | None = None
        self.status: AlgorithmStatus | None = None  # None until the first publish
        self.exception: BaseException | None = None
        self.done = False
        self.ready = False  # kernels compiled / loaded from the cache
        self.detectable: DetectionLimit | None = None  # the algorithm's a-priori detection limit
        self.thread = threading.Thread(target=self._run, name=f"dptop-{algorithm.name}", daemon=True)

    @property
    def name(self) -> str:
        return self.algorithm.name

    # ----- producer side -------------------------------------------------------------------
    def start(self) -> "Worker":
        with self.lock:
            if self._started:
                return self
            self._started = True
        self.thread.start()
        return self

    def _fits(self, n: int) -> bool:
        limit = self.bound.packets(self._rate)
        items = self.bound.items
        return not self._queue or (self._queued + n <= limit and (items is None or len(self._queue) < items))

    def _put(self, item, n: int) -> None:
        self._queue.append(item)
        self._queued += n
        self._room.notify_all()

    def _measure(self, n: int) -> None:
        """Count ``n`` packets offered into the current second of wall time (under the lock)."""
        start, seen = self._window
        now = time.monotonic()
        if now - start >= 1.0:
            self._rate = (seen + n) / (now - start)
            self._window = (now, 0)
        else:
            self._window = (start, seen + n)

    def feed(self, batch: KeyBatch) -> bool:
        """Queue ``batch``, waiting for room (lossless). False once stopped, closed or done."""
        with self.lock:
            self._measure(len(batch))
            while not (self._stopping or self._closed or self.done):
                if self._fits(len(batch)):
                    self._put(batch, len(batch))
                    return True
                self._room.wait(0.05)
            return False

    def offer(self, batch: KeyBatch) -> bool:
        """Queue ``batch`` without waiting; a full queue refuses it whole and counts it as dropped.
        True when queued (or the worker already ended: nothing is lost that it would have seen)."""
        with self.lock:
            if self._stopping or self._closed or self.done:
                return self.done
            self._measure(len(batch))
            if self._fits(len(batch)):
                self._put(batch, len(batch))
                return True
            self.drops += len(batch)
            return False

    def want_live(self) -> None:
        """Ask for a live view at the next occasion (a view is about to be shown)."""
        with self.lock:
            self._live_wanted = True
            self._room.notify_all()

    def close(self) -> None:
        """No more batches: the thread processes what is queued, publishes its final releases and ends."""
        with self.lock:
            if not self._closed and self._started:
                self._closed = True
                self._put(_FINISH, 0)

    def finish(self, timeout: float | None = None) -> AlgorithmSnapshot:
        """``close``, wait for the thread, re-raise an error; the final snapshot."""
        self.close()
        self.join(timeout)
        return self.snapshot()

    def stop(self) -> None:
        """Abandon queued work and stop promptly (safe before start and when repeated)."""
        with self.lock:
            self._stopping = self._closed = True
            self._queue.clear()
            self._queued = 0
            self._room.notify_all()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the thread; re-raise an algorithm error as ``AlgorithmError``."""
        if self.thread.is_alive():
            self.thread.join(timeout)
        if self.exception is not None:
            raise AlgorithmError(f"algorithm {self.name!r} failed: {self.exception}") from self.exception

    # ----- the thread ----------------------------------------------------------------------
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
            status = replace(status, detectable=self.detectable)
        with self.lock:
            self.history.extend(releases)
            self.released += len(releases) + sum(r.released_before for r in releases)
            if live is not None:
                self.latest = live
            elif releases:
                self.latest = releases[-1]
            self.status = status

    def _next(self):
        """The next queued item, or None when a live view is wanted and the queue is empty."""
        with self.lock:
            while not self._queue and not self._stopping:
                if self._live_wanted:
                    return None
                self._room.wait(self.live_interval)
            if self._stopping:
                return _STOP
            item = self._queue.popleft()
            self._queued -= 0 if item is _FINISH else len(item)
            self._room.notify_all()
            return item

    def _pieces(self, batch: KeyBatch):
        """``batch`` in pieces this algorithm processes in about ``CHUNK_SECONDS`` (its rate while busy)."""
        size = max(1024, int(self.packets / self.busy * CHUNK_SECONDS)) if self.busy > 0 else 1 << 16
        if len(batch) <= size:
            yield batch
            return
        for start in range(0, len(batch), size):
            yield batch.slice(start, start + size)

    def _run(self) -> None:
        alg = self.algorithm
        last_live, live_cost, work = 0.0, 0.0, 0.0
        try:
            limit = alg.detectable()
            self.detectable = None if limit is None else limit.explained()
            alg.warm_up()
            with self.lock:
                self.ready = True
                self._room.notify_all()
            while True:
                item = self._next()
                if item is _STOP:
                    return
                if item is _FINISH:
                    self._publish(alg.finish(), None)
                    return
                released = []
                if item is not None:
                    for piece in self._pieces(item):
                        if self._stopping:
                            return
                        w0, c0 = time.perf_counter(), time.thread_time()
                        released += alg.consume(piece)
                        w1, c1 = time.perf_counter(), time.thread_time()
                        work += c1 - c0
                        with self.lock:
                            self.busy += c1 - c0
                            self.packets += len(piece)
                            self.first = w0 if self.first is None else self.first
                            self.last = w1
                live = None
                now = time.perf_counter()
                since = now - last_live
                if (self._live_wanted and since >= self.live_interval
                        and LIVE_WORK_RATIO * live_cost <= max(work, since)):
                    with self.lock:
                        self._live_wanted = False
                    live = alg.live()
                    last_live = time.perf_counter()
                    live_cost, work = last_live - now, 0.0
                elif item is None:  # a view is wanted but not due yet: wait for work or the due time
                    with self.lock:
                        if not self._queue and not self._stopping:
                            self._room.wait(max(0.005, self.live_interval - since, LIVE_WORK_RATIO * live_cost - since))
                if released or live is not None or self.status is None:
                    self._publish(released, live)
        except BaseException as exc:  # noqa: BLE001 - recorded, surfaced by join()
            with self.lock:
                self.exception = exc
        finally:
            with self.lock:
                self.done = True
                self._queue.clear()
                self._queued = 0
                self._room.notify_all()

    # ----- what views read -----------------------------------------------------------------
    @property
    def warmed(self) -> bool:
        """The kernels are compiled (or loaded from the cache) and the thread takes batches, or it ended."""
        with self.lock:
            return self.ready or self.done

    def wait_warmed(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds for ``warmed``; whether it is."""
        with self._room:
            return self._room.wait_for(lambda: self.ready or self.done, timeout)

    def releases(self) -> list[Release]:
        """The releases still held (the last ``history``; a copy)."""
        with self.lock:
            return list(self.history)

    def snapshot(self, want_live: bool = False) -> AlgorithmSnapshot:
        """The algorithm now; ``want_live``: also ask for a fresh live view (a view shows it)."""
        alg = self.algorithm
        with self.lock:
            if want_live:
                self._live_wanted = True
                self._room.notify_all()
            rate = self.packets / self.busy if self.busy > 0 else 0.0
            wall = (self.last - self.first) if self.first is not None and self.last > self.first else 0.0
            error = None if self.exception is None else f"{type(self.exception).__name__}: {self.exception}"
            return AlgorithmSnapshot(alg.name, alg.private, alg.family, self.packets, rate,
                                     len(self._queue), self.drops, self.released, self.latest,
                                     alg.guarantee(), self.status or NO_STATUS, error, self.done, self.ready,
                                     self.packets / wall if wall else 0.0, self.busy / wall if wall else 0.0,
                                     self._queued)
