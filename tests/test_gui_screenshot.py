"""A screenshot of the main window during a replay of the bundled capture, under Xvfb.

The test starts its own Xvfb on a free display number and runs the application in a subprocess
(``python -m dptop.gui.launch --screenshot``), which grabs the window with ``QWidget.grab()``. The
PNG is kept under the test's temporary directory (its path is printed). Skipped when Xvfb or the
Qt xcb platform plugin's libraries are missing.
"""
import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("Xvfb") is None, reason="Xvfb is not installed (apt-get install xvfb)")


def free_display() -> int:
    for n in range(90, 400):
        if not Path(f"/tmp/.X{n}-lock").exists() and not Path(f"/tmp/.X11-unix/X{n}").exists():
            return n
    pytest.skip("no free X display number")


@pytest.fixture
def xvfb():
    n = free_display()
    proc = subprocess.Popen(["Xvfb", f":{n}", "-screen", "0", "1600x1000x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not Path(f"/tmp/.X11-unix/X{n}").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.skip(f"Xvfb :{n} did not start")
        time.sleep(0.05)
    yield f":{n}"
    proc.terminate()
    proc.wait(5)


def test_screenshot_of_the_window_during_a_replay(xvfb, tmp_path):
    out = tmp_path / "dptop-screenshot.png"
    env = {**os.environ, "DISPLAY": xvfb, "QT_QPA_PLATFORM": "xcb"}
    done = subprocess.run([sys.executable, "-m", "dptop.gui.launch", "--screenshot", str(out), "--seconds", "8"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    if 'Could not load the Qt platform plugin "xcb"' in done.stderr:
        pytest.skip("Qt's xcb plugin cannot load (missing libxcb-* libraries)")
    assert done.returncode == 0, done.stderr[-2000:]
    print(f"\nscreenshot: {out}")
    from PySide6.QtGui import QImage

    image = QImage(str(out))
    assert image.width() >= 1200 and image.height() >= 800
    # not a blank grab: many distinct colours across the window
    colours = {image.pixel(x, y) for x in range(0, image.width(), 23) for y in range(0, image.height(), 23)}
    assert len(colours) > 50
