"""The window on a live link (root, Xvfb): how long after the first packet each private panel
shows a heavy source, with the window's first-start defaults (dptop.monitor.defaults).

Two network namespaces joined by a veth pair (dptop.capture.lab.netns); the project's paced
sender (dptop.capture.lab.paced, ``--iface``) offers ``RATE`` frames/s for ``SECONDS`` s in the
sender's namespace, one source sending 30 % of them, another 10 %, the rest uniform over
``OTHERS`` other sources. In the receiver's namespace the window (``MainWindow`` with fresh
preferences, 1280×720 on its own Xvfb screen) captures the veth end as a user does: source
"Interface", that interface, Start. Once its session runs, it starts the sender and every
``POLL`` s reads the addresses each private panel's table shows (what the user sees), keeping
the first second, counted from the sender's first packet, at which each source appears; it grabs
the screen at ``SHOTS`` seconds. Run as

    python -m dptop.lab.livewindow [--runs 3] [--seconds 200] [--shots DIR] [--json OUT]

(one JSON line per run, then the medians); ``tests/test_gui_live.py`` runs it once.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dptop.capture.lab.netns import VethLab
from dptop.engine.lab.bench.load import load_average

RATE = 2000
SECONDS = 200.0
SOURCES = {"10.0.0.30": 0.3, "10.0.0.10": 0.1}
"""The heavy sources and their shares of the link."""
OTHERS = 10_000
PANELS = ("dpss", "dpsw", "lazyhh")
TARGETS = {"dpss": {0.3: 60, 0.1: 60}, "dpsw": {0.3: 60, 0.1: 60}, "lazyhh": {0.3: 60, 0.1: 180}}
"""Seconds after the first packet by which each panel must show each share's source (the window's
defaults are chosen for these: dptop.monitor.defaults)."""
POLL = 0.5
SHOTS = (60, 180)
SCREEN = (1280, 720)
START_TIMEOUT = 600.0  # the window's session running (first start compiles kernels)
ROOT_NOTE = "the live window run needs root (network namespaces, a veth pair, packet sockets) and Xvfb"


def available() -> str | None:
    """Why this machine cannot run it (None: it can)."""
    if os.geteuid() != 0:
        return ROOT_NOTE
    if shutil.which("Xvfb") is None:
        return ROOT_NOTE + ": Xvfb not found"
    return None


def _free_display() -> int:
    n = 90 + os.getpid() % 100
    while Path(f"/tmp/.X11-unix/X{n}").exists() or Path(f"/tmp/.X{n}-lock").exists():
        n += 1
    return n


def one_run(seconds: float = SECONDS, shots: Path | None = None) -> dict:
    """One run in fresh namespaces on a fresh Xvfb screen: {"first": {panel: {share: s or None}},
    "sent", "drops", "load"}."""
    with VethLab() as lab, tempfile.TemporaryDirectory(prefix="dptop-livewindow-") as tmp:
        display = _free_display()
        screen = f"{SCREEN[0]}x{SCREEN[1]}x24"
        xvfb = subprocess.Popen(["Xvfb", f":{display}", "-screen", "0", screen, "-nolisten", "tcp"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while not Path(f"/tmp/.X11-unix/X{display}").exists():
                if xvfb.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"Xvfb :{display} did not start")
                time.sleep(0.1)
            out = Path(tmp) / "run.json"
            sender = lab.command(lab.tx_ns, [sys.executable, "-m", "dptop.capture.lab.paced", "--iface", lab.tx,
                                              "--rate", str(RATE), "--seconds", str(seconds), "--others", str(OTHERS),
                                              *(f"--share={a}={s}" for a, s in SOURCES.items())])
            argv = [sys.executable, "-m", "dptop.lab.livewindow", "--window", lab.rx, "--sender", json.dumps(sender),
                    "--seconds", str(seconds), "--json", str(out), "--settings", str(Path(tmp) / "dptop.ini")]
            if shots is not None:
                argv += ["--shots", str(shots)]
            env = {**os.environ, "DISPLAY": f":{display}", "QT_QPA_PLATFORM": "xcb"}
            proc = subprocess.run(lab.command(lab.rx_ns, argv), env=env, capture_output=True, text=True,
                                  timeout=START_TIMEOUT + seconds + 120)
            if proc.returncode != 0 or not out.exists():
                raise RuntimeError(f"the window run failed ({proc.returncode}): {proc.stderr[-2000:]}")
            row = json.loads(out.read_text())
        finally:
            xvfb.terminate()
            xvfb.wait(10)
    row["load"] = load_average()
    return row


def medians(rows: list[dict]) -> dict:
    """Per panel and share: the median seconds over ``rows`` (a run that never showed it counts as
    later than any that did: None if half or more never did)."""
    out = {}
    for panel in PANELS:
        out[panel] = {}
        for share in TARGETS[panel]:
            values = sorted((r["first"][panel][str(share)] for r in rows), key=lambda v: (v is None, v))
            middle = values[(len(values) - 1) // 2: len(values) // 2 + 1]
            out[panel][str(share)] = None if None in middle else statistics.median(middle)
    return out


def rows(quick: bool = False, progress=print, runs: int = 3, seconds: float = SECONDS,
         shots: Path | None = None) -> list[dict]:
    """``dptop bench --only window`` rows: one per run (``runs``; one with ``quick``), the seconds
    per panel and share, then their medians and the targets; ``shots``: the first run's screenshots."""
    why = available()
    if why:
        return [{"bench": "window", "note": why}]
    out, raw = [], []
    for i in range(1 if quick else runs):
        row = one_run(seconds, shots if i == 0 else None)
        raw.append(row)
        out.append(_flat(f"run {i + 1}", row["first"], drops=row.get("drops"), load=row["load"]))
        if progress:
            progress(f"window run {i + 1}: {row['first']} ({row.get('drops')}, load {row['load']:.2f})")
    out.append(_flat("median", medians(raw)))
    out.append(_flat("target", {p: {str(s): t for s, t in row.items()} for p, row in TARGETS.items()}))
    return out


def _flat(run: str, first: dict, **more) -> dict:
    row = {"bench": "window", "run": run}
    for panel in PANELS:
        for share in TARGETS[panel]:
            seconds = first[panel][str(share)]
            row[f"{panel} {share:.0%} (s)"] = "never" if seconds is None else seconds
    return {**row, **more}


# ----- the window's side (in the receiver's namespace, on the Xvfb screen) ----------------------------------

def window_run(iface: str, sender: list[str], seconds: float, out: Path, store: Path, shots: Path | None) -> int:
    """Open the window with fresh preferences on ``iface``, start ``sender`` once its session runs,
    poll the private panels, write the run's JSON to ``out``."""
    from PySide6.QtCore import QSettings, QTimer
    from PySide6.QtWidgets import QApplication

    from dptop.gui.main import MainWindow
    from dptop.gui.source_panel import KIND_KEYS
    from dptop.monitor.explain import drops_of
    from dptop.monitor.states import State

    app = QApplication.instance() or QApplication(sys.argv[:1])
    window = MainWindow(settings=QSettings(str(store), QSettings.Format.IniFormat))  # the defaults: no saved config
    window.resize(*SCREEN)
    window.show()
    bar = window.source_panel
    bar.kind.setCurrentIndex(KIND_KEYS.index("live"))
    bar.iface.setCurrentText(iface)
    if bar.iface.currentText() != iface:
        raise RuntimeError(f"the window does not offer {iface}")
    bar.start.click()
    state: dict = {"sender": None, "t0": None, "first": {p: {str(s): None for s in TARGETS[p]} for p in PANELS},
                   "shots": []}
    address = {str(share): a for a, share in SOURCES.items()}
    started = time.monotonic()

    def finish(error: str | None = None) -> None:
        timer.stop()
        result = {"first": state["first"], "shots": state["shots"], "error": error,
                  "settings": {"k": window.config.settings.k, "epsilon": window.config.settings.epsilon,
                               "algorithms": list(window.config.names)}}
        if state["sender"] is not None:
            sent = json.loads(state["sender"].communicate(timeout=60)[0].splitlines()[-1])
            first_packet = sent["first"]
            result["sent"] = sent
            result["first"] = {p: {s: None if t is None else round(t - first_packet, 1) for s, t in row.items()}
                               for p, row in state["first"].items()}
            result["shots"] = [(name, round(t - first_packet, 1)) for name, t in state["shots"]]
        snap = None if window.session is None else window.session.snapshot()
        result["drops"] = None if snap is None else drops_of(snap).text()
        out.write_text(json.dumps(result))
        window.close()
        app.quit()

    def poll() -> None:
        now = time.time()
        session = window.session
        if state["sender"] is None:
            if session is not None and session.state is State.RUNNING:
                state["sender"] = subprocess.Popen(sender, stdout=subprocess.PIPE, text=True)
                state["t0"] = now
            elif time.monotonic() - started > START_TIMEOUT or session is None or session.state.ended:
                finish(f"the session did not run: {None if session is None else session.state}")
            return
        for panel in PANELS:
            shown = {row.address for row in window.panels[panel].model.rows()}
            for share, t in state["first"][panel].items():
                if t is None and address[share] in shown:
                    state["first"][panel][share] = now
        since = now - state["t0"]
        for at in SHOTS:
            name = f"window-{at}s.png"
            if shots is not None and since >= at and name not in (n for n, _ in state["shots"]):
                screen = app.primaryScreen().grabWindow(0)
                screen.save(str(shots / name), "PNG")
                state["shots"].append((name, now))
        if state["sender"].poll() is not None and since >= seconds:
            finish()

    timer = QTimer()
    timer.setInterval(int(POLL * 1000))
    timer.timeout.connect(poll)
    timer.start()
    return app.exec()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m dptop.lab.livewindow", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--seconds", type=float, default=SECONDS)
    p.add_argument("--shots", type=Path, default=None, help="directory for the screenshots of the first run")
    p.add_argument("--json", type=Path, default=None, help="write the runs and medians here")
    p.add_argument("--window", default=None, help=argparse.SUPPRESS)  # the window's side: its interface
    p.add_argument("--sender", default=None, help=argparse.SUPPRESS)
    p.add_argument("--settings", type=Path, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.window:
        return window_run(args.window, json.loads(args.sender), args.seconds, args.json, args.settings, args.shots)
    why = available()
    if why:
        print(why, file=sys.stderr)
        return 2
    if args.shots is not None:
        args.shots.mkdir(parents=True, exist_ok=True)
    runs = []
    for i in range(args.runs):
        row = one_run(args.seconds, args.shots if i == 0 else None)
        runs.append(row)
        print(json.dumps(row), flush=True)
    report = {"runs": runs, "median": medians(runs), "targets": TARGETS}
    print(json.dumps({"median": report["median"]}), flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
