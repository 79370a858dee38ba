"""The utility table beside the authors' C++ (dptop.engine.lab.bench.utility): its scoring, and the
table end to end against a stand-in driver (slow)."""
import json
import stat

import pytest

from dptop.engine.lab.bench.utility import run_utility, score


def test_score_counts_heavy_hitters_at_or_above_n_over_k():
    counts = {1: 50, 2: 25, 3: 24, 4: 1}  # n = 100, k = 4: heavy = {1, 2} (count >= 25)
    f1, mre, p, r = score({1: 55.0, 3: 30.0}, counts, 100, 4)
    assert (p, r) == (0.5, 0.5) and f1 == pytest.approx(0.5)
    assert mre == pytest.approx((5 / 50 + 6 / 24) / 2)
    assert score({}, counts, 100, 4)[:4] == (0.0, 0.0, 1.0, 0.0)
    assert score({1: 50.0, 2: 25.0}, counts, 100, 4) == (1.0, 0.0, 1.0, 1.0)


@pytest.mark.slow
def test_table_against_a_stand_in_driver(tmp_path):
    """A driver that releases nothing: C++ F1 0 on every row, ours from the real algorithms."""
    drv = tmp_path / "dphh-driver"
    drv.write_text("#!/bin/sh\necho '" + json.dumps({"updates": 1, "cpu_s": 0, "wall_s": 0, "released": []}) + "'\n")
    drv.chmod(drv.stat().st_mode | stat.S_IEXEC)
    rep = run_utility(str(tmp_path), quick=True, only=("dpss",))
    assert len(rep["rows"]) == 8 and {r["skew"] for r in rep["rows"]} == {1.1, 1.5}
    assert all(r["cpp_f1"] == 0.0 and r["f1"] > 0.9 for r in rep["rows"])
