"""The GUI's exact baseline (app/gui/truth.py) against plain-Python counts over the same spans.

Headless: no Qt is created here (dptop.gui's package init only pins None/True/False, see there).
"""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from dptop.gui.sweep import Sweep, parse_values, settings_for
from dptop.gui.truth import Recording, Truth, prefix_count, resolve_span
from dptop.capture.pcap import read_keys
from dptop.engine.core.keys import KeyBatch, keys_from_addresses
from dptop.engine.core.release import Release, ReleasedItem, Span
from dptop.engine.core.settings import Settings

DEMO = Path(__file__).resolve().parents[1] / "resources" / "demo.pcap"


@pytest.fixture(scope="module")
def demo():
    keys, ts, _ = read_keys(DEMO)
    return keys, ts


def naive(keys) -> Counter:
    return Counter(map(tuple, keys.tolist()))


def release_of(keys, span: Span, n_items: int = 5, private=False) -> Release:
    """A release naming the n most frequent sources of ``keys`` (its estimates are arbitrary)."""
    items = tuple(ReleasedItem(h, l, 1.0) for (h, l), _ in naive(keys).most_common(n_items))
    from dptop.engine.core.release import MODEL_CONTINUAL, MEASURE_APPROX, Guarantee
    g = Guarantee(MODEL_CONTINUAL, MEASURE_APPROX, 1.0, 1e-6) if private else None
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
    # time lookup follows the running maximum of the stamps, as engine/single_release/epochs.py does
    tmax = np.maximum.accumulate(ts)
    for probe in (int(tmax[-900]), int(tmax[-1]) + 1, int(tmax[-1000])):
        want = len(keys) - 1000 + int(np.searchsorted(tmax[-1000:], probe, side="left"))
        assert rec.position_of_time(probe) == want


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
        t0 = float(np.maximum.accumulate(ts)[1500]) / 1e9 // 2 * 2  # the 2 s epoch holding packet 1500
        cases["epoch"] = (Span(0, 0, "epoch", 3, t0, t0 + 2.0), 0)
        expected = {}
        for name, (span, origin) in cases.items():
            if span.t_start is not None:
                tm = np.maximum.accumulate(ts)
                a = int(np.searchsorted(tm, round(t0 * 1e9), "left"))
                b = int(np.searchsorted(tm, round((t0 + 2) * 1e9), "left"))
            else:
                a, b = origin + span.start, origin + span.end
            rel = release_of(keys[a:b], span)
            expected[name] = (rel, a, b, naive(keys[a:b]))
            truth.request(name, rel, origin, k=8, epoch_seconds=2.0)
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
    assert resolve_span(rel, 0, None, rec, finished=False) is None
    rec.append(KeyBatch(keys[100:300], ts[100:300]))
    assert resolve_span(rel, 0, None, rec, finished=False) == (0, 200)
    # a private whole-stream release (noisy positions) covers everything once the stream ends
    whole = release_of(keys[:300], Span(5, 290, "stream"), private=True)
    assert resolve_span(whole, 0, None, rec, finished=False) is None
    assert resolve_span(whole, 0, None, rec, finished=True) == (0, 300)


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
