"""Starting the window: ``dptop gui``/``dptop demo`` (``run_gui``), the README screenshot
(``screenshot``) and the start-up bench (``time_to_window``); ``python -m dptop.gui.launch
[--screenshot OUT [--seconds S] | --time-to-window T] [PATH]``."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from PySide6.QtCore import QSettings, QTimer
from PySide6.QtWidgets import QApplication

from dptop.gui.configs import DEMO_SPEED, demo_config
from dptop.gui.main import MainWindow
from dptop.resources import DEMO_CAPTURE


def screenshot(out: str, path: str = str(DEMO_CAPTURE), seconds: float = 8.0, size=(1600, 1000),
               front: str = "throughput") -> int:
    """Open the window on ``path`` (demo settings, fresh preferences), replay for ``seconds`` and
    save ``QWidget.grab()`` of the window to ``out`` (the README screenshot and its test), with the
    bottom tab ``front`` (a key of ``MainWindow.docks``) in front; the tuning tab runs its sweep
    from half-way."""
    import tempfile

    app = QApplication.instance() or QApplication(sys.argv[:1])
    with tempfile.TemporaryDirectory() as tmp:
        window = MainWindow(config=demo_config(), settings=QSettings(str(Path(tmp) / "dptop.ini"),
                                                                         QSettings.Format.IniFormat))
        window.resize(*size)
        window.show()
        window.open_file(path, speed=DEMO_SPEED)

        def grab():
            window.grab().save(out, "PNG")
            window.close()

        window.docks[front].raise_()
        if front == "tuning":
            QTimer.singleShot(int(seconds * 500), window.tuning.start)
        QTimer.singleShot(int(seconds * 1000), grab)
        return app.exec()


def run_gui(path: str | None = None, serve: str | None = None) -> int:
    """Open the window; replay ``path`` if given (the bundled demo capture at 10x); ``serve``:
    the private feed of the window's current session (dptop.feed) at ``[HOST:]PORT``."""
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("dptop")
    app.setOrganizationName("dptop")
    demo = path is not None and Path(path).resolve() == DEMO_CAPTURE
    window = MainWindow(config=demo_config() if demo else None)
    import signal

    signal.signal(signal.SIGINT, lambda *_: window.close())  # Ctrl+C in the terminal closes cleanly
    if serve is not None:
        from dptop.feed import serve_current

        window.feed = serve_current(lambda: window.session, serve)
    window.show()
    if path:
        window.open_file(path, speed=DEMO_SPEED if demo else None)
    return app.exec()


def time_to_window(since: float) -> int:
    """Open the window (fresh preferences), and once it is shown print the seconds since the
    Unix time ``since`` (the start-up bench passes the moment it launched this process)."""
    import tempfile

    app = QApplication.instance() or QApplication(sys.argv[:1])
    with tempfile.TemporaryDirectory() as tmp:
        window = MainWindow(settings=QSettings(str(Path(tmp) / "dptop.ini"), QSettings.Format.IniFormat))
        window.show()

        def shown():
            print(f"{time.time() - since:.3f}", flush=True)
            window.close()

        QTimer.singleShot(0, shown)
        return app.exec()


if __name__ == "__main__":  # python -m dptop.gui.launch [--screenshot OUT [--seconds S] | --time-to-window T] [PATH]
    import argparse

    parser = argparse.ArgumentParser(prog="python -m dptop.gui.launch")
    parser.add_argument("path", nargs="?", default=None)
    parser.add_argument("--screenshot", default=None, metavar="PNG")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--time-to-window", type=float, default=None, metavar="UNIX_TIME")
    args = parser.parse_args()
    if args.time_to_window is not None:
        sys.exit(time_to_window(args.time_to_window))
    if args.screenshot:
        sys.exit(screenshot(args.screenshot, args.path or str(DEMO_CAPTURE), args.seconds))
    sys.exit(run_gui(args.path))
