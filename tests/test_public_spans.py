"""Spans in the private view carry grid times and public positions only: a live session's
LazyHH and DPSW releases show neither the exact packet count (``end``) nor real packet stamps,
a live LazyHH's output steps show the public clock's cells, and a time epoch's bounds are the
grid's."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from dptop.engine.continual.horizon import ClockSteps
from dptop.engine.core.clock import MAX_CELLS, TimeGrid
from dptop.engine.core.keys import KeyBatch, keys_from_addresses
from dptop.engine.core.release import Span
from dptop.engine.core.settings import Settings
from dptop.monitor.config import RunConfig, SourceSpec
from dptop.monitor.publish import clock_times, publish_json
from dptop.monitor.states import State
from dptop.monitor.stepped import SteppedSession

S = 1_000_000_000
START = 1_700_000_000 * S
DNS = Path(__file__).parent / "data" / "amp.dns.RRSIG.fragmented.pcap"


def live_view(per_second=(777, 777, 777), seed=None, render=publish_json) -> dict:
    """The private view (or what ``render`` makes) of a live LazyHH + DPSW session on an injected
    clock, ``per_second[i]`` packets of one source in second i. The session runs in the test's
    thread (dptop.monitor.stepped: what it computes is the threaded session's,
    tests/test_stepped_session.py)."""
    now = [START]
    s = SteppedSession(RunConfig(("lazyhh", "dpsw"), Settings(k=4, epsilon=0.5, epoch_seconds=1.0, window=1000,
                                                              horizon=4096, seed=seed)))
    s.open_live(SourceSpec("live", iface="lo", lateness=0.5), TimeGrid(START, S, MAX_CELLS), now_ns=lambda: now[0])
    try:
        assert s.state is State.RUNNING, s.error
        rng = np.random.default_rng(1)
        for step, n in enumerate(per_second, start=1):
            stamps = START + (step - 1) * S + np.sort(rng.integers(0, S, n))
            now[0] = START + step * S
            s.feed(KeyBatch(keys_from_addresses(["192.0.2.1"] * len(stamps)), stamps.astype(np.int64)))
            now[0] += S // 2 + 1
            s.tick()
        for lane in s.lanes.values():
            lane.worker.finish()
        return render(s, "capture")
    finally:
        s.close(5.0)


@pytest.fixture(scope="module")
def neighbour_views() -> list[dict]:
    """The private views of two live captures one packet apart (seeded alike)."""
    return [live_view(counts, seed=5) for counts in ((777, 777, 777), (777, 776, 777))]


def test_live_spans_show_no_exact_count_nor_packet_stamp(neighbour_views):
    """No span shows a position; LazyHH's steps are the public clock's cells (docs/lazyhh.md §7.5),
    so its spans end on the grid (recomputed from the clock); DPSW's views are made at wall
    instants, so its spans show no end."""
    view = neighbour_views[0]
    assert set(view["algorithms"]) == {"lazyhh", "dpsw"}
    for a in view["algorithms"].values():
        assert a["releases"]
        for r in a["releases"]:
            assert "end" not in r["span"] and "start" not in r["span"], r["span"]
            assert r["span"]["t_start"] == START / 1e9, r["span"]
    assert {r["span"]["t_end"] for r in view["algorithms"]["dpsw"]["releases"]} == {None}
    ends = [r["span"]["t_end"] for r in view["algorithms"]["lazyhh"]["releases"]]
    assert set(ends) == {(START + c * S) / 1e9 for c in (1, 2, 3)}, ends


def test_live_lazyhh_spans_do_not_tell_neighbours_apart(neighbour_views):
    """The grid times a live LazyHH's spans show are the clock's: the same for two captures one
    packet apart, as are the number of releases."""
    spans = [[r["span"] for r in v["algorithms"]["lazyhh"]["releases"]] for v in neighbour_views]
    assert spans[0] == spans[1] and all(s["t_end"] is not None for s in spans[0]), spans


def test_a_packet_stamp_is_not_taken_for_the_clock():
    """``clock_times`` keeps a span's times only where both are bounds of the clock (a check on a
    lane ``clock_steps`` found stepping on the clock: float seconds cannot tell a stamp within a
    few hundred ns of a bound from the bound)."""
    clock = ClockSteps(START, S)
    on = Span(0, 9, "horizon", 0, START / 1e9, (START + 3 * S) / 1e9)
    assert clock_times(on, clock) == (START / 1e9, (START + 3 * S) / 1e9)
    assert clock_times(replace(on, t_end=(START + 3 * S + S // 2) / 1e9), clock) is None  # a packet's stamp
    assert clock_times(replace(on, t_start=(START + 7_000) / 1e9), clock) is None
    assert clock_times(replace(on, t_end=None), clock) is None
    assert clock_times(replace(on, t_end=START / 1e9), clock) == (START / 1e9, START / 1e9)  # no step yet
    assert clock_times(replace(on, t_start=(START - S) / 1e9, t_end=START / 1e9), clock) is None  # before the clock


def test_live_lazyhh_threshold_is_hidden_with_its_position(neighbour_views):
    """LazyHH's τ(t) is a function of its output step t (the exact count where positions are
    private): two captures one packet apart must publish the same thresholds (none)."""
    thresholds = [[r["threshold"] for r in v["algorithms"]["lazyhh"]["releases"]] for v in neighbour_views]
    assert thresholds[0] and thresholds[0] == thresholds[1], thresholds
    assert set(thresholds[0]) == {None}
    assert any(r["threshold"] is not None for r in neighbour_views[0]["algorithms"]["dpsw"]["releases"])  # DPSW's τ


def test_time_epochs_show_grid_bounds_and_noisy_positions():
    s = SteppedSession(RunConfig(("dpss",), Settings(k=4, epsilon=0.5, epoch_seconds=1.0)))
    s.open(SourceSpec("file", path=str(DNS)))
    try:
        assert s.replay() is State.FINISHED, s.error
        spans = [r["span"] for r in publish_json(s, "replay")["algorithms"]["dpss"]["releases"]]
    finally:
        s.close(2.0)
    assert len(spans) > 3
    for a, b in zip(spans, spans[1:]):
        assert b["t_start"] == a["t_end"] and b["index"] == a["index"] + 1
        assert b["start"] == a["end"]  # released noisy lengths, chained (engine/single_release/epochs.py)
