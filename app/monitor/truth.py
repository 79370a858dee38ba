"""The exact baseline each GUI panel is compared with: true counts over the span a release covers.

Headless (no Qt). A ``Truth`` thread receives the same batches as the algorithms (the session's
tee, in the canonical order of the public clock) and keeps exact counts of the whole stream (the
JSON's ``exact``) and a ``Recording`` of the last ``capacity`` keys with their time-epoch cell. The
session asks for the truth of each lane's latest release; the answer covers exactly the packets
that release covers (dptop.monitor.recording.resolve_span), and is computed cheaply: epochs and
windows count their slice once; prefixes (continual observation, which re-publishes a longer
prefix every 0.1 s) keep one growing counter per start position ("anchor") and subtract the few
packets that arrived after the release's end.

A live lane whose full queue refused batches did not see them (dptop.monitor.unseen.Unseen: their
positions, as ranges): its comparison leaves them out, so it is made over exactly the packets the
lane saw, and its own count-based positions map to the stream's around them.

The true counts are the non-private baseline shown *next to* private estimates, for released
labels only; recall/precision/ARE (dptop.engine.core.metrics) use the exact heavy set over the same span.
"""
from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass

import numpy as np

from dptop.engine.baselines.exact import ExactCounter
from dptop.engine.core.keys import KEY_DTYPE, KeyBatch
from dptop.engine.core.metrics import Utility, average_relative_error, precision, recall
from dptop.engine.core.release import Release
from dptop.monitor.recording import Recording, keys_between, resolve_span
from dptop.monitor.unseen import Unseen

ANCHOR_IDLE_SECONDS = 5.0  # drop a prefix counter nobody asked about for this long


@dataclass(frozen=True)
class TruthResult:
    """Exact facts about one release's span: true counts of its labels, the heavy set size and
    the utility of the release (dptop.engine.core.metrics definitions; heavy = count > ``heavy_threshold``)."""

    release: Release
    start: int
    end: int
    counts: tuple[int, ...]  # true count of each released item, in release order
    heavy_threshold: float
    utility: Utility
    note: str = ""
    unseen: int = 0  # packets of [start, end) the lane did not see (its queue refused them): left out

    @property
    def packets(self) -> int:
        """The packets compared: those of the span the lane saw."""
        return self.end - self.start - self.unseen


def heavy_threshold(release: Release, k: int, gamma: float | None, n: int) -> float:
    """What 'heavy' means for a span of ``n`` packets: count > γ·n for windows with a γ, else n/k."""
    if release.span.kind == "window" and gamma:
        return float(gamma) * n
    return n / max(1, k)


def utility_of(release: Release, counts, heavy: set) -> Utility:
    reported = {(it.hi, it.lo) for it in release.items}
    pairs = [(it.estimate, c) for it, c in zip(release.items, counts)]
    return Utility(recall(reported, heavy), precision(reported, heavy), average_relative_error(pairs),
                   len(reported), len(heavy))


def prefix_count(keys: np.ndarray, hi: int, lo: int, prefix: int) -> int:
    """Packets in ``keys`` whose source lies in the network ``(hi, lo)/prefix`` (128-bit form)."""
    mask_hi = ((1 << 64) - 1) ^ ((1 << max(0, 64 - prefix)) - 1)
    mask_lo = ((1 << 64) - 1) ^ ((1 << min(64, 128 - prefix)) - 1) if prefix > 64 else 0
    match = (keys[:, 0] & np.uint64(mask_hi)) == np.uint64(hi & mask_hi)
    if mask_lo:
        match &= (keys[:, 1] & np.uint64(mask_lo)) == np.uint64(lo & mask_lo)
    return int(np.count_nonzero(match))


def slice_truth(release: Release, keys: np.ndarray, k: int, gamma: float | None) -> tuple:
    """(counts of the released labels, heavy set, heavy threshold) over a key slice (the
    sweeps use it too). A released network (``item.prefix``) counts every address inside it."""
    counter = ExactCounter(max(1024, len(keys) // 4))
    counter.add(keys)
    counts = tuple(counter.count_of(it.hi, it.lo) if it.prefix is None else prefix_count(keys, it.hi, it.lo, it.prefix)
                   for it in release.items)
    allk, allc = counter.items()
    thr = heavy_threshold(release, k, gamma, len(keys))
    heavy = {(int(h), int(l)) for h, l in allk[allc > thr].tolist()}
    return counts, heavy, thr


class _Anchor:
    """Exact counts from global position ``start`` up to the recording's end."""

    def __init__(self, start: int, rec: Recording):
        self.start = start
        self.counter = ExactCounter()
        keys, _ = rec.slice(start, rec.pos)
        self.counter.add(keys)
        self.used = time.monotonic()


class WorkerDied(RuntimeError):
    """A worker thread the session relies on has ended with an error."""


@dataclass
class _Request:
    release: Release
    origin: int
    k: int
    gamma: float | None
    unseen: Unseen | None = None


class Truth:
    """The baseline thread. ``feed`` (any one producer thread) is lossless and waits for room, and
    raises ``WorkerDied`` once the thread has died (a feed never waits for a dead thread);
    ``request`` / ``result`` are for the GUI thread; ``stop`` ends the thread promptly."""

    def __init__(self, capacity: int = 1 << 20, queue_size: int = 64):
        self.rec = Recording(capacity)
        self.total: ExactCounter | None = None  # every packet of the session, when ``count_all`` was called
        self._queue: queue.Queue = queue.Queue(maxsize=queue_size)
        self._lock = threading.Lock()
        self._requests: dict[str, _Request] = {}
        self._results: dict[str, TruthResult] = {}
        self._anchors: dict[int, _Anchor] = {}
        self._stop = threading.Event()
        self._finished = False
        self._fed = 0
        self.error: str | None = None
        self._thread = threading.Thread(target=self._run, name="dptop-truth", daemon=True)

    # ----- producer side -----------------------------------------------------------------
    def start(self) -> "Truth":
        self._thread.start()
        return self

    def feed(self, batch: KeyBatch, exact: tuple | None = None) -> int:
        """Queue ``batch`` (as the algorithms count it); returns the global position of its first
        update. ``exact``: (keys, weights) for the whole-session exact counts when they differ
        from ``batch`` (byte counting: true bytes, not capped units)."""
        first = self._fed
        self._fed += len(batch)
        while not self._stop.is_set():
            if self.died:
                raise WorkerDied(f"the ground-truth thread stopped: {self.error}")
            try:
                self._queue.put((batch, exact), timeout=0.05)
                break
            except queue.Full:
                continue
        return first

    @property
    def died(self) -> bool:
        """The thread has ended with an error, its last act (the session stops the run)."""
        return self.error is not None

    @property
    def fed(self) -> int:
        return self._fed

    def finish(self) -> None:
        """The stream ended: whole-stream releases can be resolved."""
        try:
            self.feed(KeyBatch(np.zeros((0, 2), KEY_DTYPE)))  # wakes the thread after the data
        except WorkerDied:
            pass
        self._finished = True

    def stop(self) -> None:
        self._stop.set()
        try:  # wake the thread now, not at its next poll (a session's close waited 50 ms for it)
            self._queue.put_nowait((None, None))
        except queue.Full:  # it has work, and sees the stop after the batch in hand
            pass

    def join(self, timeout: float | None = None) -> None:
        if self._thread.ident is not None:
            self._thread.join(timeout)

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    @property
    def thread(self) -> threading.Thread:
        """The truth's worker thread (started by ``start``)."""
        return self._thread

    # ----- GUI side ----------------------------------------------------------------------
    def request(self, panel: str, release: Release, origin: int, k: int, gamma: float | None = None,
                unseen: Unseen | None = None) -> None:
        """Ask for the truth of ``release`` (the latest request per panel wins) over the packets its
        lane saw (``unseen``: the lane's refused positions)."""
        with self._lock:
            self._requests[panel] = _Request(release, origin, k, gamma, unseen)

    def result(self, panel: str) -> TruthResult | None:
        with self._lock:
            return self._results.get(panel)

    def count_all(self) -> None:
        """Keep exact counts of every packet from now on (the session calls it before the first
        batch unless an ``exact`` lane already counts them)."""
        self.total = ExactCounter()

    def exact(self, top: int | None) -> tuple[int, int, tuple]:
        """(packets, distinct sources, the ``top`` heaviest as ReleasedItems; None = all) so far."""
        with self._lock:
            return self.total.total, self.total.size, self.total.top(top)

    def wait_idle(self, timeout: float = 10.0) -> None:
        """Wait until every batch fed so far has been counted (the views read ``exact`` after it)."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks and time.monotonic() < deadline and self._thread.is_alive():
            time.sleep(0.005)

    def recording(self, last: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """A copy of the last ``last`` recorded keys and time stamps (thread-safe)."""
        with self._lock:
            n = self.rec.pos - self.rec.first if last is None else min(last, self.rec.pos - self.rec.first)
            return self.rec.slice(self.rec.pos - n, self.rec.pos)

    # ----- worker ------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            ExactCounter().add(np.zeros((1, 2), KEY_DTYPE))  # load the kernels before the first request
            while not self._stop.is_set():
                try:
                    batch, exact = self._queue.get(timeout=0.05)
                except queue.Empty:
                    batch = None
                else:
                    if batch is None:  # the wake of ``stop``
                        self._queue.task_done()
                        continue
                    self._count(batch, exact)
                    self._queue.task_done()
                if batch is None or self._queue.empty():
                    self._answer()
        except BaseException as exc:  # noqa: BLE001 - the session stops the run and says it in one line
            self.error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__

    def _count(self, batch: KeyBatch, exact: tuple | None) -> None:
        """Record ``batch`` and count it (the whole session's counts, every anchor's)."""
        with self._lock:
            self.rec.append(batch)
            if self.total is not None:
                self.total.add(*((batch.keys,) if exact is None else exact))
        for anchor in list(self._anchors.values()):
            anchor.counter.add(batch.keys)

    def _answer(self) -> None:
        with self._lock:
            pending = dict(self._requests)
        now = time.monotonic()
        for panel, req in pending.items():
            done = self._results.get(panel)
            if done is not None and done.release is req.release:
                continue
            try:
                result = self._compute(req)
            except LookupError as exc:
                result = TruthResult(req.release, 0, 0, (), 0.0, Utility(0, 0, 0, 0, 0), note=str(exc))
            if result is None:
                continue
            with self._lock:
                if self._requests.get(panel) is req:
                    self._results[panel] = result
        for start in [s for s, a in self._anchors.items() if now - a.used > ANCHOR_IDLE_SECONDS]:
            del self._anchors[start]

    def _compute(self, req: _Request) -> TruthResult | None:
        rel, rec = req.release, self.rec
        ab = resolve_span(rel, req.origin, rec, self._finished, req.unseen)
        if ab is None:
            return None
        a, b = ab
        gaps = () if req.unseen is None else req.unseen.within(a, b)
        missing = sum(q - p for p, q in gaps)
        networks = any(it.prefix is not None for it in rel.items)
        if (rel.span.kind in ("prefix", "horizon", "stream") and b - a > 4 * (rec.pos - b + missing) + 65536
                and not networks):
            counts, heavy, thr = self._prefix_truth(rel, a, b, req, gaps)
        else:
            keys, missing = keys_between(rec, a, b, gaps)
            counts, heavy, thr = slice_truth(rel, keys, req.k, req.gamma)
        return TruthResult(rel, a, b, counts, thr, utility_of(rel, counts, heavy), unseen=missing)

    def _prefix_truth(self, rel: Release, a: int, b: int, req: _Request, gaps: tuple):
        """Counts over ``[a, b)`` as (anchor at a, up to now) minus (b, now) and minus the ``gaps``
        (the positions in ``[a, b)`` the lane did not see)."""
        anchor = self._anchors.get(a)
        if anchor is None:
            anchor = self._anchors[a] = _Anchor(a, self.rec)
        anchor.used = time.monotonic()
        excluded = ExactCounter()
        excluded.add(self.rec.slice(b, self.rec.pos)[0])
        for p, q in gaps:
            excluded.add(self.rec.slice(p, q)[0])
        counts = tuple(anchor.counter.count_of(it.hi, it.lo) - excluded.count_of(it.hi, it.lo)
                       for it in rel.items)
        thr = heavy_threshold(rel, req.k, req.gamma, b - a - sum(q - p for p, q in gaps))
        keys, c = anchor.counter.items()
        heavy = set()
        for (h, l), cnt in zip(keys[c > thr].tolist(), c[c > thr].tolist()):
            if cnt - excluded.count_of(h, l) > thr:
                heavy.add((h, l))
        return counts, heavy, thr
