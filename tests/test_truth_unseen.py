"""A live lane's exact comparison is made over the packets it saw (dptop.monitor.unseen.Unseen): a
lane whose full queue refused batches is compared with a brute-force count over the keys its
algorithm was handed, not over every packet of its span; a lane that refused nothing gets the
same answer as before; a live session carries a lane's refusals to its panel, its line, the JSON
and the report. Headless (the window's comparison line is checked where its extra is installed)."""
import random
import threading
import time
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest

from dptop.engine.core.base import Algorithm
from dptop.engine.core.keys import KeyBatch, keys_from_addresses
from dptop.engine.core.release import Release, ReleasedItem, Span
from dptop.engine.core.settings import Settings
from dptop.engine.core.worker import QueueBound, Worker
from dptop.monitor.config import CountingChoice
from dptop.monitor.explain import drops_of
from dptop.monitor.fanout import Fanout
from dptop.monitor.result import session_json, truth_json
from dptop.monitor.truth import Truth
from dptop.monitor.unseen import Unseen
from dptop.report import private_block
from dptop.runresult import Counting, Lane

from tests.test_live_epochs import START, S, deliver, drained, live_session  # noqa: F401 - a fixture

BATCH = 2000
K = 8
HEAVY_IN_STALL = 999_999  # the source that sends most packets while the slow lane is held up
BURST = int(keys_from_addresses(["198.51.100.7"])[0, 1])


class Held(Algorithm):
    """Keeps a copy of every key it is handed, each batch waiting at ``gate`` first."""

    name = "held"

    def __init__(self, settings, name, gate):
        super().__init__(settings)
        self.name, self.gate, self.seen = name, gate, []

    def warm_up(self):
        pass

    def update(self, keys):
        self.gate.wait()
        self.seen.append(np.array(keys))

    def release(self):
        return Release(self.name, Span(0, self.packets), ())

    def reset(self):
        pass


def brute(keys) -> Counter:
    return Counter(map(tuple, keys.tolist()))


def test_unseen_ranges_and_positions_match_a_brute_force_set_of_refused_positions():
    """Random refusals (merged, forgotten by age and by count): ``within`` gives exactly the refused
    positions of any span, ``position`` the global position of the lane's n-th packet; either
    says LookupError only where ranges were forgotten."""
    rng = random.Random(7)
    checked = 0
    for _ in range(400):
        unseen = Unseen(limit=rng.choice([1, 2, 3, 100]))
        origin = rng.randint(0, 5)
        pos, oldest, refused = origin, 0, set()
        for _ in range(rng.randint(0, 30)):
            n = rng.randint(1, 4)
            if rng.random() < 0.5:
                if rng.random() < 0.2:
                    oldest = max(oldest, rng.randint(0, pos))
                unseen.add(pos, pos + n, oldest)
                refused.update(range(pos, pos + n))
            pos += n
        assert len(unseen.ranges) <= unseen.limit
        seen = [g for g in range(origin, pos) if g not in refused]
        for i, g in enumerate(seen):
            try:
                assert unseen.position(i, origin) == g
                checked += 1
            except LookupError:
                assert g < unseen.known_from
            try:
                assert unseen.position(i + 1, origin, end=True) == g + 1
            except LookupError:
                assert g < unseen.known_from
        for a in range(origin, pos + 1):
            for b in range(a, pos + 1):
                try:
                    gaps = unseen.within(a, b)
                except LookupError:
                    assert a < unseen.known_from
                    continue
                assert {x for p, q in gaps for x in range(p, q)} == {x for x in refused if a <= x < b}
    assert checked > 1000


def keys_of(rng, n, cell):
    """``n`` Zipf-like sources; while the slow lane is held up (cell 1) most packets are one source."""
    keys = np.zeros((n, 2), np.uint64)
    keys[:, 1] = np.minimum(rng.zipf(1.3, n), 5000).astype(np.uint64)
    if cell == 1:
        keys[: n * 3 // 4, 1] = HEAVY_IN_STALL
    return keys


@pytest.fixture(scope="module")
def run():
    """A live fanout to a slow lane (a queue of 5,000 packets, held up while cell 1 is offered, so
    it refuses most of that cell's batches) and a fast lane that keeps up; 176,000 packets."""
    rng = np.random.default_rng(3)
    gates = {"slow": threading.Event(), "fast": threading.Event()}
    for gate in gates.values():
        gate.set()
    lanes = {name: SimpleNamespace(worker=Worker(Held(Settings(), name, gate), QueueBound(cap=5000)).start(),
                                   origin=None, unseen=Unseen(), settings=Settings(k=K), host_pairs=False)
             for name, gate in gates.items()}
    truth = Truth(capacity=1 << 18).start()
    fanout = Fanout(truth, CountingChoice(), live=True)
    fanout.lanes = lanes
    stream = []

    def offer(cell, batches):
        for _ in range(batches):
            keys = keys_of(rng, BATCH, cell)
            stream.append(keys)
            fanout(KeyBatch(keys, epoch=cell))
            drain()

    def drain():  # a lane whose gate is open empties its queue before the next batch
        deadline = time.monotonic() + 30
        for name, lane in lanes.items():
            while gates[name].is_set() and lane.worker.snapshot().queued and time.monotonic() < deadline:
                time.sleep(0.001)

    offer(0, 40)
    gates["slow"].clear()
    offer(1, 8)
    gates["slow"].set()
    drain()
    offer(2, 40)
    fanout(KeyBatch(np.zeros((0, 2), np.uint64), epoch=3))  # the clock's tick closing cell 2
    snaps = {name: lane.worker.finish(30) for name, lane in lanes.items()}
    truth.finish()
    truth.wait_idle()
    seen = {name: np.concatenate(lane.worker.algorithm.seen) for name, lane in lanes.items()}
    yield SimpleNamespace(truth=truth, lanes=lanes, snaps=snaps, seen=seen, all=np.concatenate(stream),
                          session=SimpleNamespace(truth=truth, lanes=lanes))
    truth.stop()
    truth.join(1)


def ask(truth, name, release, lane, unseen=True):
    """The truth's answer for ``release`` of ``lane`` (``unseen``: leave out what it refused)."""
    truth.request(name, release, lane.origin, K, None, lane.unseen if unseen else None)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        result = truth.result(name)
        if result is not None and result.release is release:
            return result
        time.sleep(0.01)
    raise AssertionError(f"no truth for {name}")


def labels(keys, extra=()):
    """A release naming the 6 heaviest sources of ``keys`` and ``extra`` (arbitrary estimates)."""
    top = [lo for (_, lo), _ in brute(keys).most_common(6)]
    return tuple(ReleasedItem(0, int(lo), 1.0) for lo in dict.fromkeys([*top, *extra]))


def spans(seen):
    """(span, the keys the lane's algorithm had in it) for a count-based window across the stall
    (in the lane's own positions: it saw at most 3 batches of it), the whole prefix (answered from
    an anchor counter) and the time epoch of the stall (cell 1)."""
    n = len(seen)
    start = 40 * BATCH - 3000
    stall = slice(40 * BATCH, 40 * BATCH + len(seen) - 80 * BATCH)
    return {"window": (Span(start, start + 12000, "window"), seen[start:start + 12000]),
            "prefix": (Span(0, n, "prefix"), seen),
            "epoch": (Span(0, 0, "epoch", 1, 1.0, 2.0), seen[stall])}


def test_a_lane_that_refused_batches_is_compared_over_the_packets_it_saw(run):
    try:
        from dptop.gui import panel
    except ImportError:  # the window's extra is not installed
        panel = None
    slow, seen = run.snaps["slow"], run.seen["slow"]
    refused = 48 * BATCH + 40 * BATCH - len(seen)
    assert slow.drops == refused >= 5 * BATCH and slow.packets == len(seen)  # at most 3 batches fit while held
    assert sum(q - p for p, q in run.lanes["slow"].unseen.ranges) == refused
    cell1 = run.all[40 * BATCH:48 * BATCH]
    for kind, (span, keys) in spans(seen).items():
        release = Release("slow", span, labels(keys, [HEAVY_IN_STALL]))
        got = ask(run.truth, f"slow-{kind}", release, run.lanes["slow"])
        want = brute(keys)
        assert got.counts == tuple(want[(it.hi, it.lo)] for it in release.items), kind
        assert got.packets == len(keys) and got.unseen == refused, kind
        heavy = {key for key, c in want.items() if c > len(keys) / K}
        assert abs(got.heavy_threshold - len(keys) / K) < 1e-9, kind
        assert got.utility.true_heavy == len(heavy), kind
        reported = {(it.hi, it.lo) for it in release.items}
        assert got.utility.recall == len(heavy & reported) / len(heavy), kind
        if panel is not None:  # the window's line under the panel says what the comparison is over
            assert f"over the {len(keys):,} packets it saw (its queue refused {refused:,})" in panel.utility_text(got)
    # the comparison over every packet of the stall would differ: the lane missed most of its heavy source
    assert brute(cell1)[(0, HEAVY_IN_STALL)] - brute(spans(seen)["epoch"][1])[(0, HEAVY_IN_STALL)] >= 3 * BATCH


def test_a_lane_that_refused_nothing_gets_the_answer_over_every_packet(run):
    fast, seen = run.snaps["fast"], run.seen["fast"]
    assert fast.drops == 0 and not run.lanes["fast"].unseen.ranges and np.array_equal(seen, run.all)
    for kind, (span, keys) in spans(seen).items():
        release = Release("fast", span, labels(keys, [HEAVY_IN_STALL]))
        with_ranges = ask(run.truth, f"fast-{kind}", release, run.lanes["fast"])
        without = ask(run.truth, f"fast-{kind}-plain", release, run.lanes["fast"], unseen=False)
        assert with_ranges == without and with_ranges.unseen == 0, kind
        want = brute(keys)
        assert with_ranges.counts == tuple(want[(it.hi, it.lo)] for it in release.items), kind


def test_the_json_says_how_many_packets_of_each_span_the_lane_did_not_see(run):
    out = {}
    for name in ("slow", "fast"):
        pairs = spans(run.seen[name])
        releases = [Release(name, span, labels(keys, [HEAVY_IN_STALL])) for span, keys in pairs.values()]
        out[name] = truth_json(run.session, name, releases, 1, last=len(releases))
        for entry, (span, keys), release in zip(out[name], pairs.values(), releases):
            want = brute(keys)
            assert entry["packets"] == len(keys)
            assert entry["counts"] == [want[(it.hi, it.lo)] for it in release.items]
    refused = run.snaps["slow"].drops
    assert [e["unseen"] for e in out["slow"]] == [refused] * 3
    assert [e["unseen"] for e in out["fast"]] == [0] * 3


def test_a_live_session_compares_each_lane_over_the_batches_it_took(live_session):
    """The session's wiring: a refusal (injected: the dpss lane's queue is full while a burst from
    one source arrives) reaches the panel's comparison, the lane's line and the JSON."""
    s, clock = live_session
    worker, refused = s.lanes["dpss"].worker, []
    take = worker.offer

    def full_for_the_burst(b):  # what Worker.offer does with a full queue
        if BURST not in b.keys[:, 1].tolist():
            return take(b)
        worker.drops += len(b)
        refused.append(len(b))
        return False

    worker.offer = full_for_the_burst
    deliver(s, clock, 0.2, [0.1, 0.2])
    clock.now = START + round(1.55 * S)
    s.clock.tick()  # closes epoch 0: epoch 1's packets go to the lanes as they come
    deliver(s, clock, 1.6, [1.05, 1.1, 1.15], "198.51.100.7")
    deliver(s, clock, 1.7, [1.3, 1.4])
    clock.now = START + round(2.6 * S)
    s.clock.tick()  # closes epoch 1
    drained(s)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        view = next(v for v in s.snapshot().lanes if v.name == "dpss")
        if view.truth is not None and view.truth.release.span.index == 1:
            break
        time.sleep(0.02)
    truth = view.truth
    assert refused == [3] and truth is not None and truth.release.span.index == 1
    assert (truth.packets, truth.unseen) == (2, 3)  # epoch 1 held 5 packets; the lane saw the 2 of 192.0.2.1
    assert truth.heavy_threshold == 2 / 4 and truth.utility.true_heavy == 1  # over all 5: 5/4, and 2 heavy
    assert "made over the packets it saw" in drops_of(s.snapshot()).lane_text("dpss")
    out = session_json(s, "capture", 10)
    entries = {e["release"]: e for e in out["algorithms"]["dpss"]["truth"]}
    released = [r.span.index for r in s.releases("dpss")]
    assert {released[i]: (e["packets"], e["unseen"]) for i, e in entries.items()} == {0: (2, 0), 1: (2, 3)}
    report = "\n".join(private_block("dpss", Lane.from_json(out["algorithms"]["dpss"]), Counting.from_json(out["counting"]), 1))
    assert "exact over the same packets: 2 (its queue refused 3 more)" in report, report
