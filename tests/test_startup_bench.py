"""The start-up rows of ``dptop bench``: the window timing path really opens the window and
reports a time (offscreen here), and the rows carry the targets they are held to."""
import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"

from dptop.lab import replaybench


def test_time_to_window_opens_the_window_and_reports_seconds(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    seconds = replaybench._window_seconds()
    assert seconds is not None and 0 < seconds < 120


def test_startup_rows_name_their_targets(monkeypatch):
    monkeypatch.setattr(replaybench, "_wall", lambda command, env=None: 0.5)
    monkeypatch.setattr(replaybench, "_window_seconds", lambda: None)  # no Qt: reported, not invented
    monkeypatch.setattr(replaybench, "load_average", lambda: 1.25)
    lines = []
    rows = replaybench.startup(quick=True, repeats=1, progress=lines.append)
    assert [(r["what"], r["seconds"], r["target_s"]) for r in rows] == [("first CLI result", 0.5, 1.5),
                                                                        ("first window", None, 3.0)]
    assert lines == ["startup first CLI result   0.50 s (target < 1.5 s)  load 1.25",
                     "startup first window       n/a (no Qt) (target < 3 s)  load 1.25"]
    assert [r["load"] for r in rows] == [1.25, 1.25]
