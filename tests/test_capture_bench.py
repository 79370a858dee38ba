"""dptop.capture.lab.bench: the ``dptop bench`` capture table has the rows and numbers it promises."""
import pytest

from dptop.capture.lab.bench import run_bench


@pytest.mark.slow
def test_capture_bench_quick():
    report = run_bench(quick=True)
    assert report["name"] == "capture" and "RawPcapReader" in report["notes"] + str(report["rows"])
    parser, raw, full = report["rows"][:3]
    assert parser["packets_per_second"] > raw["packets_per_second"] > full["packets_per_second"] > 0
    assert raw["parser_ratio"] == pytest.approx(parser["packets_per_second"] / raw["packets_per_second"])
    for row in report["rows"][3:]:  # live rows (root only): every packet sent was captured
        assert row["received"] + row["kernel_drops"] <= row["packets"]
