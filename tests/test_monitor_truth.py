"""The monitor's exact baseline (app/monitor/truth.py) against plain-Python counts over the same
spans. Headless: no Qt."""
import time
from collections import Counter

import numpy as np
import pytest

from dptop.monitor.sweep import Sweep, parse_values, settings_for
from dptop.monitor.recording import Recording, resolve_span
from dptop.monitor.truth import Truth, prefix_count
from dptop.capture.pcap import read_keys
from dptop.engine.core.keys import KeyBatch, keys_from_addresses
from dptop.engine.core.release import Release, ReleasedItem, Span
from dptop.engine.core.settings import Settings

from tests.conftest import DNS_CAPTURE as DEMO


@pytest.fixture(scope="module")
def demo():
    keys, ts, _ = read_keys(DEMO)
    return keys, ts


def naive(keys) -> Counter:
    return Counter(map(tuple, keys.tolist()))


def release_of(keys, span: Span, n_items: int = 5, private=False) -> Release:
    """A release naming the n most frequent sources of ``keys`` (its estimates are arbitrary)."""
    items = tuple(ReleasedItem(h, l, 1.0) for (h, l), _ in naive(keys).most_common(n_items))
    from dptop.engine.core.release import MODEL_CONTINUAL
    from dptop.engine.privacy.guarantee import Guarantee
    from dptop.engine.privacy.measures import ApproxDP
    g = Guarantee(MODEL_CONTINUAL, ApproxDP(1.0, 1e-6)) if private else None
    return Release("test", span, items, None, g)


def test_recording_wraps_and_slices_like_the_stream(demo):
    keys, ts = demo
    rec = Recording(1000)
    for start in range(0, len(keys), 333):
        rec.append(KeyBatch(keys[start:start + 333], ts[start:start + 333]))
    assert rec.pos == len(keys) and rec.first == len(keys) - 1000
    got, _ = rec.slice(len(keys) - 700, len(keys) - 50)
    assert np.array_equal(got, keys[len(keys) - 700:len(keys) - 50])
    with pytest.raises(ValueError, match="not in the recording"):
        rec.slice(0, 10)


def test_recording_finds_the_packets_of_a_time_epoch(demo):
    """Batches arrive in cell order (the public clock's canonical order); a cell's packets are
    contiguous and found by their tag, the ticks (empty batches) move the clock."""
    keys, ts = demo
    rec = Recording(1000)
    cells = [0] * 300 + [2] * 500 + [3] * 700
    rec.append(KeyBatch(keys[:300], ts[:300], epoch=0))
    rec.append(KeyBatch(keys[:0], ts[:0], epoch=2))
    rec.append(KeyBatch(keys[300:800], ts[300:800], epoch=2))
    rec.append(KeyBatch(keys[800:1500], ts[800:1500], epoch=3))
    assert rec.last_cell == 3 and rec.first == 500
    for cell in (2, 3, 4):
        want = 500 + int(np.searchsorted(np.array(cells[500:]), cell, side="left"))
        assert rec.position_of_cell(cell) == want


def test_truth_counts_epoch_prefix_and_window_spans(demo):
    keys, ts = demo
    truth = Truth(capacity=1 << 14).start()
    try:
        for start in range(0, len(keys), 500):
            truth.feed(KeyBatch(keys[start:start + 500], ts[start:start + 500]))
        cases = {
            "window": (Span(1000, 3000, "window"), 0),
            "prefix": (Span(0, 4000, "prefix"), 0),
            "late": (Span(0, 1500, "horizon", 1), 2000),  # a lane that joined at position 2000
        }
        cases["epoch"] = (Span(0, 0, "epoch", 7, 7.0, 8.0), 0)  # the tagged cell 7 (fed below)
        truth.feed(KeyBatch(keys[:600], ts[:600], epoch=7))
        truth.feed(KeyBatch(keys[:0], ts[:0], epoch=8))
        n = len(keys)
        expected = {}
        for name, (span, origin) in cases.items():
            a, b = (n, n + 600) if span.t_start is not None else (origin + span.start, origin + span.end)
            rel = release_of(keys[:600] if span.t_start is not None else keys[a:b], span)
            expected[name] = (rel, a, b, naive(keys[:600] if span.t_start is not None else keys[a:b]))
            truth.request(name, rel, origin, k=8)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(truth.result(n) for n in cases):
            time.sleep(0.02)
        for name, (rel, a, b, counts) in expected.items():
            r = truth.result(name)
            assert r is not None, f"no truth for {name}"
            assert (r.start, r.end) == (a, b), name
            assert r.counts == tuple(counts[(it.hi, it.lo)] for it in rel.items), name
            heavy = {key for key, c in counts.items() if c > (b - a) / 8}
            assert r.utility.true_heavy == len(heavy), name
            assert r.utility.recall == len(heavy & {(it.hi, it.lo) for it in rel.items}) / len(heavy), name
    finally:
        truth.stop()
        truth.join(1)
    assert not truth.is_alive()


def test_truth_waits_for_packets_it_has_not_seen(demo):
    keys, ts = demo
    rec = Recording(1 << 13)
    rec.append(KeyBatch(keys[:100], ts[:100]))
    rel = release_of(keys[:200], Span(0, 200, "prefix"))
    assert resolve_span(rel, 0, rec, finished=False) is None
    rec.append(KeyBatch(keys[100:300], ts[100:300]))
    assert resolve_span(rel, 0, rec, finished=False) == (0, 200)
    # a private whole-stream release (noisy positions) covers everything once the stream ends
    whole = release_of(keys[:300], Span(5, 290, "stream"), private=True)
    assert resolve_span(whole, 0, rec, finished=False) is None
    assert resolve_span(whole, 0, rec, finished=True) == (0, 300)


def test_prefix_count_counts_every_address_in_the_network():
    keys = keys_from_addresses(["10.0.0.1", "10.0.0.2", "10.0.1.1", "11.0.0.1", "2001:db8::1", "2001:db8:1::1"])
    from dptop.engine.core.keys import encode_address

    assert prefix_count(keys, *encode_address("10.0.0.0"), 96 + 24) == 2
    assert prefix_count(keys, *encode_address("10.0.0.0"), 96 + 8) == 3
    assert prefix_count(keys, *encode_address("2001:db8::"), 48) == 1
    assert prefix_count(keys, *encode_address("2001:db8::"), 32) == 2


def test_sweep_runs_on_recorded_packets(demo):
    keys, ts = demo
    base = Settings(k=4, epsilon=0.5, epoch_seconds=5.0)
    sweep = Sweep("dpss", base, "epsilon", parse_values("0.25, 2"), keys, ts, repetitions=1).start()
    sweep.thread.join(60)
    points, progress, done, error = sweep.result()
    assert done and error is None and progress == 1.0
    assert [p.value for p in points] == [0.25, 2.0]
    assert all(0.0 <= p.recall <= 1.0 and 0.0 <= p.precision <= 1.0 for p in points)
    with pytest.raises(ValueError, match="epsilon"):
        Sweep("dpss", base, "epsilon", [-1.0], keys, ts)
    with pytest.raises(ValueError, match="numbers"):
        parse_values("0.1, x")
    assert settings_for(base, "k_tilde", 2).k_tilde == 8
