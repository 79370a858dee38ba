"""A monitor session its caller drives step by step, without a thread: ``SteppedSession``.

The same session (``dptop.monitor.session.Session``: its lanes, fan-out, public clocks, ledger and
every view over it, ``publish_json`` included), with each lane's algorithm run by an
``InlineWorker`` and the ground truth kept by an ``InlineTruth``, both in the caller's thread: a
batch handed to the session has been consumed by every lane when the call returns, so what the
threaded session reaches after its threads have waited for each other is reached here at once,
in the same order (for a file, the canonical order on the public grid). The caller replays a
file (``open`` then ``replay``), or feeds batches itself (``feed``), moves the public clock
(``tick``, with the live clock's wall time injected: ``open_live``) and ends it (``finish``),
reading ``snapshot``/``releases`` whenever it likes.

For audits and tests of what a session computes (the product's conformance matrix, the
product-path audit): the threaded session remains the product, and its own tests check its
threads, stops and signals. A seeded run gives the same releases and the same private view in
both (tests/test_stepped_session.py).
"""
from __future__ import annotations

import time

from dptop.engine.core.clock import TimeGrid
from dptop.engine.core.keys import KeyBatch
from dptop.engine.core.worker import AlgorithmSnapshot, Worker
from dptop.monitor import sources
from dptop.monitor.clocks import LiveClock
from dptop.monitor.config import SourceSpec
from dptop.monitor.precheck import SourceFacts
from dptop.monitor.session import Session
from dptop.monitor.states import State
from dptop.monitor.truth import Truth


class InlineWorker(Worker):
    """A worker whose algorithm runs in the caller's thread: ``start`` warms it up, ``feed`` and
    ``offer`` consume the batch before they return (nothing is queued, nothing dropped), ``close``
    publishes the final releases, and a view that asks for a live one (``snapshot(want_live)``)
    gets it at once. An algorithm's error is recorded as the threaded worker records it."""

    def start(self) -> "InlineWorker":
        if not self._started:
            self._started = True
            self._guarded(self._warm)
        return self

    def _warm(self) -> None:
        limit = self.algorithm.detectable()
        self.detectable = None if limit is None else limit.explained()
        self.algorithm.warm_up()
        self.ready = True

    def feed(self, batch: KeyBatch) -> bool:
        if self._stopping or self._closed or self.done:
            return False
        self._guarded(self._consume, batch)
        return True

    def offer(self, batch: KeyBatch) -> bool:
        return self.done if self._stopping or self._closed or self.done else self.feed(batch)

    def _consume(self, batch: KeyBatch) -> None:
        """``batch`` in the pieces the threaded worker cuts (``Worker._pieces``: a continual
        algorithm may release at the end of each), published as it publishes them."""
        released = []
        for piece in self._pieces(batch):
            w0, c0 = time.perf_counter(), time.thread_time()
            released += self.algorithm.consume(piece)
            w1, c1 = time.perf_counter(), time.thread_time()
            self.busy += c1 - c0
            self.packets += len(piece)
            self.first = w0 if self.first is None else self.first
            self.last = w1
        if released or self.status is None:
            self._publish(released, None)

    def close(self) -> None:
        if not self._closed and self._started and not self.done:
            self._closed = True
            self._guarded(lambda: self._publish(self.algorithm.finish(), None))
            self.done = True

    def stop(self) -> None:
        self._stopping = self._closed = self.done = True

    def snapshot(self, want_live: bool = False) -> AlgorithmSnapshot:
        if want_live and self.ready and not self.done:
            self._guarded(lambda: self._publish([], self.algorithm.live()))
        return super().snapshot()

    def _guarded(self, step, *args) -> None:
        """Run ``step``; an error stops this algorithm only and is kept for its snapshot and ``join``."""
        try:
            step(*args)
        except Exception as exc:  # noqa: BLE001 - recorded, surfaced by join()
            self.exception, self.done = exc, True


class InlineTruth(Truth):
    """The ground truth in the caller's thread: each batch is recorded and counted when fed, and
    a request is answered when made."""

    def start(self) -> "InlineTruth":
        return self

    def feed(self, batch: KeyBatch, exact: tuple | None = None) -> int:
        first = self._fed
        self._fed += len(batch)
        if not self._stop.is_set():
            self._count(batch, exact)
        return first

    def request(self, panel, release, origin, k, gamma=None, unseen=None) -> None:
        super().request(panel, release, origin, k, gamma, unseen)
        self._answer()


class SteppedSession(Session):
    """A ``Session`` without threads (see the module docstring). A file: ``open`` reads its facts
    and builds the lanes, ``replay`` feeds it to the end and finishes. A live capture's path
    without a socket: ``open_live``, then ``feed``, ``tick`` and ``finish``. Paced and looping
    replays run on the wall clock: the threaded session's."""

    lane_worker = InlineWorker
    truth_keeper = InlineTruth

    def open(self, spec: SourceSpec, facts: SourceFacts | None = None) -> None:
        """Read ``spec``'s public facts and build its lanes (state RUNNING, or FAILED with the
        error the threaded session would show)."""
        if spec.kind == "live" or spec.speed is not None or spec.loop:
            raise ValueError("a stepped session replays a file as fast as it goes (open_live: a live capture's clock)")
        with self.life.lock:
            self._begin(spec, facts)
        try:
            self.source = self._open_source(spec)
        except Exception as exc:  # noqa: BLE001 - shown by the views, as the threaded session shows it
            self.life.fail(f"{type(exc).__name__}: {exc}")
            return
        self.life.move(State.RUNNING)

    def replay(self) -> State:
        """Feed the opened file to the end and ``finish``; the state the session ends in."""
        if self.state is State.RUNNING:
            self.source.run()
            self._conclude(self.source)
        return self.state

    def open_live(self, spec: SourceSpec, grid: TimeGrid, now_ns) -> None:
        """A live capture of ``spec`` whose packets the caller feeds, on the public ``grid`` and the
        wall clock ``now_ns`` (a function giving nanoseconds): the public clock (``clocks.LiveClock``)
        starts at the grid's start and ends ``spec.duration`` later (or never), and every lane is
        built on it. What the threaded session decides before its socket opens is the caller's:
        the refusals (``sources.refuse_data_stop``), the clock's epochs (``on_public_clock``), the
        grid (``sources.wall_grid``)."""
        with self.life.lock:
            self._begin(spec, None)
        end = None if spec.duration is None else grid.start_ns + round(spec.duration * 1e9)
        self.grid, self.public["time_range"], self.public_source = grid, (grid.start_ns, end), sources.LIVE_CLOCK
        self.clock = LiveClock(grid, spec.lateness, self.fanout, now_ns=now_ns)
        self._start_lanes()
        self.life.move(State.RUNNING)

    def feed(self, batch: KeyBatch) -> None:
        """Hand ``batch`` to the session as its source would: to the public clock, or to the
        fan-out (truth and lanes) when it has none. Every lane has consumed it on return."""
        (self.fanout if self.clock is None else self.clock)(batch)

    def tick(self, final: bool = False) -> None:
        """What the threaded session's thread does at each instant its clock names: close the
        cells that are due (``final``: the stop is public, the cell it falls in is the last)."""
        self._tick(final)

    def finish(self) -> State:
        """The capture ends: the final close, every lane's final releases, recorded in the ledger."""
        if self.state is State.RUNNING:
            self._conclude(self.source)
        return self.state
