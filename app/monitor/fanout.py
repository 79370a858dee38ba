"""The one place a session's packets go through: a tee to the ground truth first (lossless), then to
every lane, ``feed`` (lossless) for replays and the clock's ticks, ``offer`` (counted drops) for live
packets; each batch counted as the algorithms count it (dptop.monitor.config.CountingChoice), but
for host-level lanes, which read each packet's source and destination as captured
(``Algorithm.host_pairs``)."""
from __future__ import annotations

import numpy as np

from dptop.engine.core.keys import KeyBatch
from dptop.monitor.config import CountingChoice
from dptop.monitor.lanes import Lane
from dptop.monitor.truth import Truth


def counted(batch: KeyBatch, c: CountingChoice) -> tuple[KeyBatch, tuple | None]:
    """``batch`` as the algorithms count it: the key kind's keys (packets without one, such as a
    port, left out), and in bytes each packet repeated ⌈length/unit⌉ times, at most ``cap``; plus,
    in bytes, (keys, true byte counts) for the exact baseline."""
    if c.key == "src" and c.weight == "packets":
        return batch, None
    keys, has = c.kind.keys(batch)
    length = batch.length
    if has is not None:
        keys, length, batch = keys[has], None if length is None else length[has], batch.take(has, batch.epoch)
    if c.weight == "packets":
        return KeyBatch(keys, batch.ts_ns, epoch=batch.epoch), None
    if length is None:
        raise ValueError("--weight bytes: this source does not provide packet lengths")
    units = np.clip(-(-length.astype(np.int64) // c.unit), 1, c.cap)
    out = KeyBatch(np.repeat(keys, units, axis=0), np.repeat(batch.ts_ns, units), epoch=batch.epoch)
    return out, (keys, length)


class Fanout:
    """The tee from a source to the truth and the lanes. ``lanes`` is replaced, never mutated (the
    source's thread iterates it while an Apply swaps it); ``cell`` is the public clock's open cell,
    the last one a batch was tagged with; ``missed``: live packets at least one lane did not take
    (each lane's worker counts its own drops)."""

    def __init__(self, truth: Truth, counting: CountingChoice, live: bool):
        self.truth = truth
        self.counting = counting
        self.live = live
        self.lanes: dict[str, Lane] = {}
        self.cell = 0
        self.missed = 0

    def __call__(self, batch: KeyBatch) -> bool:
        """Hand ``batch`` to the truth and every lane, each taking or refusing it whole (live: a
        full queue refuses it, counted per lane and once in ``missed``, its positions kept in the
        lane's ``unseen`` for its exact comparison; replays and the clock's ticks wait for room).
        Always True: what a lane refused is counted here, not by the source."""
        captured = batch  # what a lane reading both ends of each packet takes (Algorithm.host_pairs)
        batch, exact = counted(batch, self.counting)
        if batch.epoch is not None:
            self.cell = batch.epoch
        first = self.truth.feed(batch, exact)
        refused = False
        for lane in list(self.lanes.values()):
            if lane.worker is None:
                continue
            if lane.origin is None:
                lane.origin = first
            own = captured if lane.host_pairs else batch
            if self.live and len(batch):
                if not lane.worker.offer(own):
                    refused = True
                    lane.unseen.add(first, first + len(batch), self.truth.rec.first)
            else:  # replays, and the clock's ticks: a lost tick would leave its epochs unreleased
                lane.worker.feed(own)
        if refused:
            self.missed += len(batch)
        return True
