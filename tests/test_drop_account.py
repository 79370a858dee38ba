"""The one drop account (dptop.monitor.explain.Drops): a live batch a lane's full queue refuses is
counted once for the session and once for that lane; per lane, offered minus what it saw is what
it missed; the total is offered minus what every lane saw; the JSON and the text say the same."""
import threading
import time
from types import SimpleNamespace

import numpy as np

from dptop.capture.source import SourceStats
from dptop.engine.core.base import Algorithm
from dptop.engine.core.keys import KeyBatch
from dptop.engine.core.release import Release, Span
from dptop.engine.core.worker import QueueBound, Worker
from dptop.engine.core.settings import Settings
from dptop.monitor.config import CountingChoice
from dptop.monitor.explain import Drops, drops_of
from dptop.monitor.fanout import Fanout
from dptop.monitor.lanes import LaneView
from dptop.monitor.truth import Truth
from dptop.monitor.unseen import Unseen


class Gated(Algorithm):
    name = "gated"

    def __init__(self, settings, name, gate):
        super().__init__(settings)
        self.name, self.gate = name, gate

    def warm_up(self):
        pass

    def update(self, keys):
        self.gate.wait()

    def release(self):
        return Release(self.name, Span(0, self.packets), ())

    def reset(self):
        pass


def test_offered_minus_seen_is_what_each_lane_missed_and_the_total_counts_each_packet_once():
    slow_gate, fast_gate = threading.Event(), threading.Event()
    fast_gate.set()
    bound = QueueBound(cap=250)  # the slow lane holds one batch in update and two queued
    lanes = {name: SimpleNamespace(worker=Worker(Gated(Settings(), name, gate), bound).start(), origin=None,
                                   unseen=Unseen(), host_pairs=False)
             for name, gate in (("slow", slow_gate), ("fast", fast_gate))}
    truth = Truth().start()
    fanout = Fanout(truth, CountingChoice(), live=True)
    fanout.lanes = lanes
    for i in range(20):
        keys = np.zeros((100, 2), np.uint64)
        keys[:, 1] = i
        fanout(KeyBatch(keys))
        fast = lanes["fast"].worker
        deadline = time.monotonic() + 30
        while fast.packets < 100 * (i + 1) and time.monotonic() < deadline:  # the fast lane keeps up, however busy
            time.sleep(0.001)                                                 # the machine: it drains each batch
    slow_gate.set()
    snaps = {name: lane.worker.finish(10) for name, lane in lanes.items()}
    truth.finish()
    truth.stop()
    kernel, clock = 7, 3
    snap = SimpleNamespace(
        source=SourceStats(kernel_drops=kernel), dropped={"late": clock}, truth_packets=truth.fed, missed=fanout.missed,
        lanes=tuple(LaneView(name, 1, 0, None, s, None) for name, s in snaps.items()))
    drops = drops_of(snap)
    offered = 2000 + kernel + clock
    assert drops.offered == offered and snaps["slow"].drops >= 1000 and snaps["fast"].drops == 0
    for name, s in snaps.items():
        loss = drops.lane(name)
        assert loss.seen == s.packets and offered - loss.seen == loss.missed, name
    assert drops.total == offered - min(s.packets for s in snaps.values()) == kernel + clock + fanout.missed
    assert drops.lanes == snaps["slow"].drops and drops.queue == snaps["slow"].drops  # one lane refused: once
    for name, s in snaps.items():  # the positions each lane did not see, for its exact comparison
        assert sum(q - p for p, q in lanes[name].unseen.ranges) == s.drops, name
    assert Drops.from_json(drops.to_json()) == drops
    assert drops.text().startswith(f"drops {drops.total:,} of {offered:,} offered")
    assert drops.lane_text("fast").startswith(f"lost {kernel + clock:,} ")
    assert drops.lane_text("slow").startswith(f"lost {drops.lane('slow').missed:,} ")
