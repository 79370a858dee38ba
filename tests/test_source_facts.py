"""The public facts of a capture file from one read (app/monitor/precheck.py): the same facts the
separate passes give (record count, time span, the canonical-order plan), and ``dptop replay``
opening the capture twice in all (the facts, the replay), an explicit T_max included."""
import builtins
import json

import numpy as np
import pytest

from dptop.capture.epochorder import plan, time_range
from dptop.capture.pcap import count_packets
from dptop.capture.synth import write_pcap
from dptop.cli import main
from dptop.engine.core.clock import TimeGrid
from dptop.monitor.config import SourceSpec
from dptop.monitor.precheck import FILE_SPAN, check_source, read_facts
from tests.conftest import DNS_CAPTURE

T0 = 1_700_000_000 * 10**9


def shuffled_capture(tmp_path, n=2000, seed=1):
    rng = np.random.default_rng(seed)
    ts = np.sort(rng.integers(0, 10 * 10**9, n))
    swap = rng.choice(n, 40, replace=False)
    ts[swap] = rng.integers(0, 10 * 10**9, 40)  # out of order
    path = tmp_path / "shuffled.pcap"
    write_pcap(path, (0x0A00_0000 + rng.integers(0, 50, n)).astype(np.uint32), T0 + ts)
    return path


@pytest.mark.parametrize("declared", [None, (T0 + 10**9, T0 + 5 * 10**9)])
def test_one_read_gives_what_the_separate_passes_give(tmp_path, declared):
    path = shuffled_capture(tmp_path)
    facts = read_facts(path, declared, 1.0)
    first, last = time_range(path)
    span = declared or (first, last + 1)
    assert facts.stream_length == count_packets(path) == 2000
    assert facts.time_range == span and facts.provenance == ("declared" if declared else FILE_SPAN)
    assert (facts.grid.start_ns, facts.grid.epoch_ns, facts.grid.cells) == (span[0], 10**9, -(-(span[1] - span[0]) // 10**9))
    ref = plan(path, TimeGrid.over(*span, 1.0))
    assert facts.plan.outside == ref.outside and len(ref.held_pos) > 0
    for field in ("held_pos", "held_cell", "held_sorted"):
        assert np.array_equal(getattr(facts.plan, field), getattr(ref, field))
    assert np.array_equal(facts.plan.held.keys, ref.held.keys)
    assert facts.public() == {"stream_length": 2000, "time_range": span}


def test_without_epochs_only_the_count_and_live_sources_have_none():
    facts = read_facts(DNS_CAPTURE, None, None)
    assert (facts.stream_length, facts.time_range, facts.grid, facts.plan) == (4412, None, None, None)
    assert check_source(SourceSpec("live", iface="lo"), 1.0) is None
    assert facts.fits(DNS_CAPTURE, SourceSpec("file", str(DNS_CAPTURE)), None)
    assert not facts.fits(DNS_CAPTURE, SourceSpec("file", str(DNS_CAPTURE)), 1.0)


@pytest.fixture
def opened(monkeypatch):
    """The paths ``open`` was called with while the test runs."""
    paths = []
    real = builtins.open

    def counting(file, *args, **kwargs):
        paths.append(str(file))
        return real(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting)
    return paths


@pytest.mark.parametrize("extra", [[], ["--param", "t_max=100000", "--algorithms", "exact,eehh-cms"]])
def test_replay_opens_the_capture_twice(tmp_path, opened, extra):
    """Facts and replay: an in-order capture is read twice (out-of-order packets would add one
    read for themselves, capture/epochorder.py)."""
    out = tmp_path / "out.json"
    args = ["replay", str(DNS_CAPTURE), "--epoch-seconds", "10", "--json", str(out)]
    assert main(args + (extra or ["--algorithms", "exact,dpss"])) == 0
    assert opened.count(str(DNS_CAPTURE)) == 2
    result = json.loads(out.read_text())
    assert result["public"]["stream_length"] == 4412 and result["source"]["packets"] == 4412


def test_stamps_in_order_count_the_packets_outside_as_the_cells_do(tmp_path):
    ts = np.arange(0, 10 * 10**9, 10**7)  # 1000 packets over 10 s, in order
    path = tmp_path / "ordered.pcap"
    write_pcap(path, np.full(len(ts), 0x0A00_0001, np.uint32), T0 + ts)
    from dptop.capture.epochorder import plan_cells

    for declared in ((T0 + 2 * 10**9, T0 + 5 * 10**9 + 1), (T0 - 10**9, T0 + 20 * 10**9), (T0, T0 + 1)):
        facts = read_facts(path, declared, 0.5)
        ref = plan_cells(path, facts.grid, facts.grid.cell_of(T0 + ts))
        assert facts.plan.outside == ref.outside and len(facts.plan.held_pos) == len(ref.held_pos) == 0
