"""The runner: every algorithm gets every batch; errors surface; stop is prompt and idempotent."""
import threading
import time

import numpy as np
import pytest

from dptop.engine.core.base import Algorithm
from dptop.engine.core.keys import KeyBatch
from dptop.engine.core.release import Release, Span
from dptop.engine.core.runner import Runner
from dptop.engine.core.worker import PACKET_BYTES, AlgorithmError, QueueBound, Worker
from dptop.engine.core.settings import Settings
from dptop.engine.core.registry import make


class Recorder(Algorithm):
    """Records the sum of every batch it sees; optionally fails or blocks."""

    name = "recorder"

    def __init__(self, settings, name="recorder", fail_at=None, gate=None):
        super().__init__(settings)
        self.name = name
        self.fail_at = fail_at
        self.gate = gate
        self.seen = []

    def warm_up(self):
        pass

    def update(self, keys):
        if self.gate is not None:
            self.gate.wait()
        if self.fail_at is not None and len(self.seen) == self.fail_at:
            raise RuntimeError("boom in update")
        self.seen.append(int(keys[:, 1].sum()))

    def release(self):
        return Release(self.name, Span(0, self.packets), ())

    def reset(self):
        self.seen = []


def _batches(n, size=100):
    rng = np.random.default_rng(0)
    out = []
    for _ in range(n):
        keys = np.zeros((size, 2), dtype=np.uint64)
        keys[:, 1] = rng.integers(0, 1000, size)
        out.append(KeyBatch(keys))
    return out


def test_every_algorithm_receives_every_batch_in_order():
    algs = [Recorder(Settings(), name=f"r{i}") for i in range(4)]
    runner = Runner(algs, queue_size=2).start()
    batches = _batches(200)
    for b in batches:
        assert runner.feed(b)
    snap = runner.finish(timeout=10)
    expected = [int(b.keys[:, 1].sum()) for b in batches]
    for a in algs:
        assert a.seen == expected
    assert snap.packets_fed == 200 * 100
    assert all(s.packets == 200 * 100 and s.done and s.drops == 0 for s in snap.algorithms)
    assert all(len(runner.releases(a.name)) == 1 for a in algs)


def test_real_algorithms_in_parallel_match_serial_results():
    from dptop.engine.core.workload import zipf_keys

    keys = zipf_keys(1.2, 5000, 100_000, seed=2)
    settings = Settings(k=8)
    runner = Runner([make(n, settings) for n in ("exact", "spacesaving")]).start()
    for i in range(0, len(keys), 8192):
        runner.feed(KeyBatch(keys[i:i + 8192]))
    runner.finish(timeout=30)
    serial = make("spacesaving", settings)
    serial.update(keys)
    assert runner.releases("spacesaving")[-1].items == serial.release().items
    exact = runner.releases("exact")[-1]
    assert sum(1 for _ in exact.items) == 8


def test_exception_reaches_snapshot_and_caller():
    good = Recorder(Settings(), name="good")
    bad = Recorder(Settings(), name="bad", fail_at=3)
    runner = Runner([good, bad], queue_size=4).start()
    for b in _batches(20):
        runner.feed(b)
    with pytest.raises(AlgorithmError, match="'bad' failed: boom in update") as info:
        runner.finish(timeout=10)
    assert isinstance(info.value.__cause__, RuntimeError)
    snap = runner.snapshot().by_name()
    assert snap["bad"].error == "RuntimeError: boom in update"
    assert snap["good"].error is None and len(good.seen) == 20


def test_offer_counts_drops_when_a_queue_is_full():
    gate = threading.Event()
    slow = Recorder(Settings(), name="slow", gate=gate)
    fast = Recorder(Settings(), name="fast")
    runner = Runner([slow, fast], queue_size=2).start()
    results = [runner.offer(b) for b in _batches(10)]
    assert not all(results)
    gate.set()
    snap = runner.finish(timeout=10).by_name()
    # slow holds at most one batch in update() and two queued, so at least 7 of 10 batches drop
    # for it; fast's queue always has at least as much room as slow's.
    assert snap["slow"].drops >= 700 and snap["slow"].packets + snap["slow"].drops == 1000
    assert snap["fast"].drops <= snap["slow"].drops
    assert snap["fast"].packets + snap["fast"].drops == 1000


def test_stop_is_prompt_idempotent_and_safe_before_start():
    Runner([Recorder(Settings())]).stop()  # before start
    gate = threading.Event()
    runner = Runner([Recorder(Settings(), gate=gate)], queue_size=1).start()
    feeder = threading.Thread(target=lambda: [runner.feed(b) for b in _batches(50)])
    feeder.start()
    time.sleep(0.1)
    runner.stop()
    gate.set()
    runner.stop()
    feeder.join(timeout=30)  # hang guards: a feeder blocked on the full queue would never return
    runner.join(timeout=30)
    assert not feeder.is_alive()
    assert all(w.done for w in runner.workers)
    assert runner.feed(_batches(1)[0]) is False


def test_duplicate_names_rejected():
    with pytest.raises(ValueError, match="each algorithm may run once"):
        Runner([Recorder(Settings()), Recorder(Settings())])


def test_a_live_queue_holds_seconds_of_the_offered_rate_and_takes_a_first_batch_whole():
    """No first-batch cut: a batch far above any piece size is queued whole (the worker cuts it);
    the bound follows the rate offered (``seconds`` of it, within floor and cap)."""
    bound = QueueBound(cap=1 << 20, floor=1 << 12, seconds=5.0)
    assert (bound.packets(0.0), bound.packets(10_000.0), bound.packets(1e9)) == (1 << 12, 50_000, 1 << 20)
    assert bound.memory == (1 << 20) * PACKET_BYTES
    gate = threading.Event()
    rec = Recorder(Settings(), gate=gate)
    worker = Worker(rec, bound).start()
    assert worker.offer(_batches(1)[0])
    deadline = time.monotonic() + 60
    while worker.snapshot().queue_depth and time.monotonic() < deadline:  # the thread holds it, blocked
        time.sleep(0.01)
    big = _batches(1, size=200_000)[0]  # far above the floor: enters the empty queue whole
    assert worker.offer(big) and worker.snapshot().queued == 200_000
    assert not worker.offer(_batches(1)[0])  # the queue holds more than its bound: refused whole, counted
    gate.set()
    snap = worker.finish(10)
    assert snap.packets == 200_100 and snap.drops == 100
    assert len(rec.seen) > 1  # the worker cut the batch into pieces itself


def test_live_views_are_taken_only_when_a_view_asks():
    views = []

    class Viewed(Recorder):
        def live(self):
            views.append(self.packets)
            return super().release()

    worker = Worker(Viewed(Settings()), QueueBound(cap=1 << 20), live_interval=0.01).start()
    for b in _batches(50):
        worker.feed(b)
    deadline = time.monotonic() + 10
    while worker.snapshot().packets < 5000 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    assert views == []  # nobody looked
    worker.snapshot(want_live=True)
    while not views and time.monotonic() < deadline:
        time.sleep(0.01)
    assert views == [5000]
    worker.finish(10)
