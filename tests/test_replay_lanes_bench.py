"""``dptop bench --only replay``'s lane split: each default lane's CPU inside its algorithm during a
session replay beside the same algorithm alone on the same batches, and the session's CPU outside
the algorithms."""
import pytest

from dptop.capture.synth import write_zipf_pcap
from dptop.lab import replaybench
from dptop.runargs import DEFAULT_ALGORITHMS


def test_the_split_measures_every_default_lane_in_the_session_and_alone(tmp_path):
    path = tmp_path / "zipf.pcap"
    write_zipf_pcap(path, 1.1, 1 << 12, 20_000, seed=3, rate_pps=100_000)
    total, busy, alone = replaybench._lane_split(path, DEFAULT_ALGORITHMS)
    assert set(busy) == set(alone) == set(DEFAULT_ALGORITHMS)
    assert all(v > 0 for v in busy.values()) and all(v > 0 for v in alone.values())
    assert total > sum(busy.values())  # the parser, the truth and the threads cost something too


def test_the_rows_are_medians_and_the_rest_is_the_session_minus_its_algorithms(monkeypatch):
    names = DEFAULT_ALGORITHMS
    runs = iter([(9.0, {n: 9.0 for n in names}, {n: 9.0 for n in names}),  # the warm run: not counted
                 (3.0, {n: 0.2 for n in names}, {n: 0.1 for n in names}),
                 (2.0, {n: 0.1 for n in names}, {n: 0.1 for n in names}),
                 (4.0, {n: 0.3 for n in names}, {n: 0.2 for n in names})])
    monkeypatch.setattr(replaybench, "write_zipf_pcap", lambda *a, **k: None)
    monkeypatch.setattr(replaybench, "_lane_split", lambda path, n: next(runs))
    monkeypatch.setattr(replaybench, "load_average", lambda: 1.5)
    lines = []
    rows = replaybench.lanes(repeats=3, progress=lines.append, length=1_000_000)
    assert [r["part"] for r in rows] == [*names, "outside the algorithms"]
    for r in rows[:-1]:
        assert (r["cpu_s"], r["alone_cpu_s"], r["ns_per_packet"]) == (0.2, 0.1, pytest.approx(200.0))
        assert r["vs_alone"] == pytest.approx(2.0)
    rest = sorted(t - len(names) * b for t, b in ((3.0, 0.2), (2.0, 0.1), (4.0, 0.3)))[1]
    assert rows[-1]["cpu_s"] == pytest.approx(rest) and rows[-1]["alone_cpu_s"] is None
    assert len(lines) == len(rows) and lines[0].endswith("alone 0.100 s (2.00x), load 1.50")
