"""``dptop top``: the terminal view, driven by Textual's headless pilot at 80x24 and once for real
under tmux (capture-pane), each run on a tmux server of its own (-L): the next test's
new-session raced the default server still exiting after the last kill-session."""
from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time

import pytest

pytest.importorskip("textual")

from dptop.cli import build_parser, config_from_args  # noqa: E402
from dptop.monitor.config import SourceSpec  # noqa: E402
from dptop.monitor.explain import reason_text  # noqa: E402
from dptop.resources import DEMO_CAPTURE  # noqa: E402
from dptop.top import TopApp  # noqa: E402

DEMO_ARGS = ["--algorithms", "dpss,lazyhh,dpsw,exact", "--k", "16", "--k-tilde", "1024", "--epoch-seconds", "10",
             "--window", "20000", "--gamma", "0.04"]
SMALL = os.path.join(os.path.dirname(__file__), "data", "amp.dns.RRSIG.fragmented.pcap")


def config(*args):
    return config_from_args(build_parser().parse_args(["top", "x.pcap", *args]))


def rows(app, table: str) -> list[tuple]:
    t = app.query_one(f"#{table}")
    return [tuple(str(c) for c in t.get_row_at(i)) for i in range(t.row_count)]


def text(app, widget: str) -> str:
    return app.last_text.get(widget, "")


async def until(pilot, cond, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while not cond() and time.monotonic() < deadline:
        await pilot.pause(0.1)
    return cond()


def test_pilot_panels_keys_and_80x24():
    async def scenario():
        app = TopApp(SourceSpec("file", path=str(DEMO_CAPTURE)), config(*DEMO_ARGS), refresh=0.1)
        try:
            async with app.run_test(size=(80, 24)) as pilot:
                assert await until(pilot, lambda: app.session.state == "finished")
                assert await until(pilot, lambda: len(rows(app, "private")) >= 2)
                assert app.algorithm == "dpss" and "budget, all panels: (ε = " in text(app, "guarantee")
                assert "dpss: approximate DP (ε=0.5" in text(app, "guarantee")
                # the capture's top source, exact and labelled so (once the table shows the final answer:
                # the session can finish between two refreshes)
                top = [("24.132.150.54", "23,928")]
                assert await until(pilot, lambda: rows(app, "exact")[:1] == top), rows(app, "exact")
                assert "NOT private" in app.query_one("#exact").border_title
                # the exact count over the same epoch arrives beside each private estimate
                assert await until(pilot, lambda: all(r[2] != "…" for r in rows(app, "private")))
                released = rows(app, "private")
                estimates = [float(r[1].replace(",", "")) for r in released]
                assert estimates == sorted(estimates, reverse=True)
                await pilot.press("s")
                assert await until(pilot, lambda: "by address" in text(app, "status"))
                by_address = rows(app, "private")
                assert sorted(by_address) == sorted(released) and by_address != released
                await pilot.press("a")
                assert await until(pilot, lambda: app.algorithm == "lazyhh" and "lazyhh" in
                                   app.query_one("#private").border_title)
                await pilot.press("z")
                await pilot.press("z")
                assert app.algorithm == "dpsw"
                await pilot.press("space")
                assert await until(pilot, lambda: "FROZEN" in text(app, "status"))
                await pilot.press("space")
                await pilot.press("k")
                assert await until(pilot, lambda: "per destination" in text(app, "status"))
                assert app.session.config.counting.key == "dst" and app.old == []  # the old session was closed
                await pilot.press("k")
                assert await until(pilot, lambda: "per destination port" in text(app, "status"))
                assert app.session.config.counting.key == "dport"
                region = app.screen.size
                assert (region.width, region.height) == (80, 24)
                for widget in ("#status", "#guarantee", "#private", "#exact", "#reason"):
                    r = app.query_one(widget).region
                    assert r.height > 0 and r.right <= 80 and r.bottom <= 24, widget
        finally:
            assert app.close_sessions() == []

    asyncio.run(scenario())


def test_pilot_empty_panel_says_why_like_the_window():
    async def scenario():
        app = TopApp(SourceSpec("file", path=SMALL), config("--algorithms", "lazyhh,exact", "--k", "8"), refresh=0.1)
        try:
            async with app.run_test(size=(80, 24)) as pilot:
                assert await until(pilot, lambda: app.session.state == "finished")
                await pilot.pause(0.5)
                view = next(v for v in app.session.snapshot().lanes if v.name == "lazyhh")
                assert rows(app, "private") == [] and reason_text(view)
                assert await until(pilot, lambda: text(app, "reason").startswith(reason_text(view)))
        finally:
            app.close_sessions()

    asyncio.run(scenario())


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")
def test_under_tmux_80x24(tmp_path):
    name = f"dptop-test-{os.getpid()}"
    dptop = [sys.executable, "-m", "dptop", "top", str(DEMO_CAPTURE), "--speed", "10", *DEMO_ARGS]
    # Textual draws on stderr: a crash leaves its traceback on the pane, which the asserts read
    command = " ".join(f"'{a}'" for a in dptop) + f"; echo exit $? > {tmp_path / 'rc'}; sleep 5"
    subprocess.run(["tmux", "-L", name, "new-session", "-d", "-s", name, "-x", "80", "-y", "24", command], check=True)
    try:
        screen = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(0.5)
            screen = subprocess.run(["tmux", "-L", name, "capture-pane", "-p", "-t", name], capture_output=True,
                                    text=True).stdout
            if "24.132.150.54" in screen and "dpss · epoch" in screen:
                break
        lines = screen.splitlines()
        assert "dpss · epoch" in screen and "exact, NOT private" in screen, screen
        assert "budget, all panels" in screen and "q quit" in screen, screen
        assert len(lines) <= 24 and max(map(len, lines)) <= 80, screen
        subprocess.run(["tmux", "-L", name, "send-keys", "-t", name, "q"], check=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (tmp_path / "rc").exists():
            time.sleep(0.2)
        assert (tmp_path / "rc").read_text().strip() == "exit 0", "dptop top did not quit cleanly on q"
    finally:
        subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True)


@pytest.mark.live
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")
@pytest.mark.skipif(os.geteuid() != 0, reason="live capture needs root (CAP_NET_RAW)")
def test_live_on_lo_under_tmux_shows_the_top_source_within_15_s(tmp_path):
    """``dptop top --iface lo`` at default settings, a sender at 2,000 packets/s whose top source
    sends 30 %: the private table (DPSS, 10 s epochs) names that source within 15 s."""
    name = f"dptop-live-{os.getpid()}"
    port = 40000 + os.getpid() % 20000
    dptop = [sys.executable, "-m", "dptop", "top", "--iface", "lo", "--bpf", f"udp dst port {port}"]
    command = " ".join(f"'{a}'" for a in dptop) + "; sleep 5"
    subprocess.run(["tmux", "-L", name, "new-session", "-d", "-s", name, "-x", "80", "-y", "24", command], check=True)

    def pane() -> str:
        return subprocess.run(["tmux", "-L", name, "capture-pane", "-p", "-t", name], capture_output=True, text=True).stdout

    sender = None
    try:
        deadline = time.monotonic() + 120
        while "· running ·" not in pane() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "· running ·" in pane(), pane()
        sender = subprocess.Popen([sys.executable, "-m", "dptop.capture.lab.paced", "--rate", "2000", "--seconds", "30",
                                   "--share", "127.0.0.2=0.3", "--port", str(port)], stdout=subprocess.DEVNULL)
        t0 = time.monotonic()
        seen = None
        while time.monotonic() - t0 < 15 and seen is None:
            rows = [line for line in pane().splitlines() if line.startswith("│ 127.0.0.2")]
            seen = time.monotonic() - t0 if rows else None
            time.sleep(0.2)
        assert seen is not None, pane()
        print(f"\n127.0.0.2 in the private table {seen:.1f} s after the sender started")
    finally:
        if sender is not None:
            sender.kill()
        subprocess.run(["tmux", "-L", name, "send-keys", "-t", name, "q"], capture_output=True)
        time.sleep(1)
        subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True)


def test_cli_top_needs_one_source_and_a_terminal(capsys):
    from dptop.cli import main

    assert main(["top"]) == 2
    assert "give a capture FILE or --iface IF" in capsys.readouterr().err
    assert main(["top", str(DEMO_CAPTURE), "--iface", "lo"]) == 2
    assert main(["top", str(DEMO_CAPTURE), "--refresh", "0"]) == 2
    assert "--refresh" in capsys.readouterr().err
    assert main(["top", str(DEMO_CAPTURE)]) == 2  # pytest's stdout is not a terminal
    assert "needs a terminal" in capsys.readouterr().err
