"""Spans in the private view carry grid times and public positions only: a live session's
LazyHH and DPSW releases show neither the exact packet count (``end``) nor real packet stamps,
and a time epoch's bounds are the grid's."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from dptop.engine.core.clock import MAX_CELLS, TimeGrid
from dptop.engine.core.keys import KeyBatch, keys_from_addresses
from dptop.engine.core.settings import Settings
from dptop.monitor.clocks import LiveClock
from dptop.monitor.config import RunConfig, SourceSpec
from dptop.monitor.publish import publish_json
from dptop.monitor.session import Session
from dptop.monitor.states import State

S = 1_000_000_000
START = 1_700_000_000 * S
DNS = Path(__file__).parent / "data" / "amp.dns.RRSIG.fragmented.pcap"


def live_view(per_second=(777, 777, 777), seed=None) -> dict:
    """The private view of a live LazyHH + DPSW session on an injected clock, ``per_second[i]``
    packets of one source in second i."""
    now = [START]
    s = Session(RunConfig(("lazyhh", "dpsw"), Settings(k=4, epsilon=0.5, epoch_seconds=1.0, window=1000,
                                                       horizon=4096, seed=seed)))
    s.spec = SourceSpec("live", iface="lo", lateness=0.5)
    s.public["time_range"] = (START, None)
    s.grid = TimeGrid(START, S, MAX_CELLS)
    s.fanout.live = True
    s.clock = LiveClock(s.grid, 0.5, s.fanout, now_ns=lambda: now[0])
    s.truth.start()
    try:
        assert s._start_lanes()
        rng = np.random.default_rng(1)
        for step, n in enumerate(per_second, start=1):
            stamps = START + (step - 1) * S + np.sort(rng.integers(0, S, n))
            now[0] = START + step * S
            s.clock(KeyBatch(keys_from_addresses(["192.0.2.1"] * len(stamps)), stamps.astype(np.int64)))
            now[0] += S // 2 + 1
            s.clock.tick()
        for lane in s.lanes.values():
            lane.worker.finish(30)
        return publish_json(s, "capture")
    finally:
        s.close(5.0)


def test_live_lazyhh_and_dpsw_spans_show_no_exact_count_nor_packet_stamp():
    view = live_view()
    spans = [r["span"] for a in view["algorithms"].values() for r in a["releases"]]
    assert spans and set(view["algorithms"]) == {"lazyhh", "dpsw"}
    for span in spans:
        assert "end" not in span and "start" not in span, span
        assert span["t_start"] == START / 1e9 and span["t_end"] is None, span


def test_live_lazyhh_threshold_is_hidden_with_its_position():
    """LazyHH's τ(t) is a function of its output step t (the exact count where positions are
    private): two captures one packet apart must publish the same thresholds (none)."""
    views = [live_view(counts, seed=5) for counts in ((777, 777, 777), (777, 776, 777))]
    thresholds = [[r["threshold"] for r in v["algorithms"]["lazyhh"]["releases"]] for v in views]
    assert thresholds[0] and thresholds[0] == thresholds[1], thresholds
    assert set(thresholds[0]) == {None}
    assert any(r["threshold"] is not None for r in views[0]["algorithms"]["dpsw"]["releases"])  # DPSW's τ is public


def test_time_epochs_show_grid_bounds_and_noisy_positions():
    s = Session(RunConfig(("dpss",), Settings(k=4, epsilon=0.5, epoch_seconds=1.0)))
    s.open(SourceSpec("file", path=str(DNS)))
    try:
        assert s.wait(60) is State.FINISHED, s.error
        spans = [r["span"] for r in publish_json(s, "replay")["algorithms"]["dpss"]["releases"]]
    finally:
        s.close(2.0)
    assert len(spans) > 3
    for a, b in zip(spans, spans[1:]):
        assert b["t_start"] == a["t_end"] and b["index"] == a["index"] + 1
        assert b["start"] == a["end"]  # released noisy lengths, chained (engine/single_release/epochs.py)
