"""The side-by-side table against the authors' C++ (dptop.engine.lab.bench.anchors): which rows it
runs, how a ratio counts the work, and the load average printed beside every bench row."""
import io
import json
import stat

import pytest

from dptop.engine.lab.bench import anchors
from dptop.engine.lab.bench.suite import print_report


def test_every_pair_runs_on_both_skews_at_both_k_without_drivers():
    rows = anchors.run_anchors(None, quick=True)["rows"]
    dphh = [r for r in rows if r["dptop"] != "dpsw hierarchy"]
    for name, _, _ in anchors.PAIRS:
        for skew in (1.1, 1.5):
            for k in (128, 512):
                works = sorted(r["work"] for r in dphh if (r["dptop"], r["skew"], r["k"]) == (name, skew, k))
                assert works == (["row-update", "update"] if name.startswith("eehh") else ["update"])
    dpsw = [(r["skew"], r["window"], r["depth"]) for r in rows if r["dptop"] == "dpsw hierarchy"]
    assert sorted(dpsw) == sorted((skew, w, d) for skew in (1.1, 1.5) for w, d in anchors.DPSW_POINTS)
    assert all(r["ratio_cpu"] is None for r in rows)


def test_ratio_counts_row_updates_only_where_asked():
    m = {"ours_cpu_s": 1.0, "ours_wall_s": 2.0, "ours_depth": 40, "cpp_cpu_s": 1.5, "cpp_wall_s": 3.0, "cpp_depth": 32}
    per_update = anchors._row("eehh-cms", "cmssohh", {}, m)
    per_row = anchors._row("eehh-cms", "cmssohh", {}, m, per_row=True)
    assert per_update["ratio_cpu"] == 1.5 and per_update["ratio_wall"] == 1.5
    assert per_row["ratio_cpu"] == pytest.approx(40 * 1.5 / 32, abs=0.01)
    assert (per_row["depth"], per_row["cpp_depth"]) == (40, 32)
    assert per_update["load"] >= 0


def test_print_report_puts_the_load_beside_rows_that_lack_it():
    out = io.StringIO()
    report = {"name": "x", "rows": [{"a": 1}, {"a": 2, "load": 7.5}], "notes": ""}
    print_report(report, out)
    assert "load" in out.getvalue().splitlines()[2]
    assert report["rows"][1]["load"] == 7.5 and isinstance(report["rows"][0]["load"], float)


@pytest.mark.slow
def test_table_against_stand_in_drivers(tmp_path):
    """Drivers that report fixed seconds: ours measured for real, the ratio follows."""
    for exe, depth in (("dphh-driver", 32), ("dpsw-driver", 1)):
        drv = tmp_path / exe
        drv.write_text("#!/bin/sh\necho '" + json.dumps({"updates": 1, "cpu_s": 1.0, "wall_s": 1.0, "depth": depth})
                       + "'\n")
        drv.chmod(drv.stat().st_mode | stat.S_IEXEC)
    rows = anchors.run_anchors(str(tmp_path), quick=True)["rows"]
    assert all(r["ratio_cpu"] > 1 and r["cpp_cpu_s"] == 1.0 and "load" in r for r in rows)
    per_row = [r for r in rows if r.get("work") == "row-update"]
    assert per_row and all(r["width"] == 2 * r["k_tilde"] and r["cpp_depth"] == 32 for r in per_row)
