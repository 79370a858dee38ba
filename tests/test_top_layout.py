"""``dptop top`` whole at 80x24 and side by side on a wide terminal (Textual's pilot): every text
wraps at word boundaries, so no visible line ends in a cut word; ``g`` shows the guarantees in
full; a file runs on 10 s time epochs as a live link does; hints use the counted key's words;
``q`` exits without joining anything first."""
from __future__ import annotations

import asyncio
import io
import time

import pytest

pytest.importorskip("textual")

from rich.console import Console  # noqa: E402

from dptop.cli import build_parser, check_top  # noqa: E402
from dptop.resources import DEMO_CAPTURE  # noqa: E402
from dptop.top import TopApp, panels_that_fit  # noqa: E402


def top_args(*extra):
    args = build_parser().parse_args(["top", str(DEMO_CAPTURE), "--speed", "50", *extra])
    check_top(args)
    return args


def screen_lines(app) -> list[str]:
    """The screen as text, one string per row, as a terminal shows it."""
    console = Console(width=app.size.width, height=app.size.height, file=io.StringIO(), record=True,
                      force_terminal=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text().splitlines()


def whole_words(rows: list[str], text: str) -> list[str]:
    """The rows that are not a run of whole words of ``text`` (a cut word, an ellipsis)."""
    full = " " + " ".join(text.split()) + " "
    return [row for row in rows if row.strip() and f" {' '.join(row.split())} " not in full]


async def until(pilot, cond, seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while not cond() and time.monotonic() < deadline:
        await pilot.pause(0.1)
    return cond()


def run(size, scenario, *extra):
    args = top_args(*extra)

    async def go():
        app = TopApp(args.spec, args.config, refresh=0.1, facts=args.facts)
        try:
            async with app.run_test(size=size) as pilot:
                await scenario(app, pilot)
        finally:
            app.close_sessions()
    asyncio.run(go())


def test_80x24_no_visible_line_ends_in_a_cut_word():
    async def scenario(app, pilot):
        assert await until(pilot, lambda: app.session.snapshot().lanes and all(
            v.algorithm is not None and v.algorithm.guarantee is not None
            for v in app.session.snapshot().lanes if v.name in app.private_names))
        for full in (False, True):
            if full:
                await pilot.press("g")
            await pilot.pause(0.5)
            lines = screen_lines(app)
            assert len(lines) == 24 and max(map(len, lines)) <= 80
            for widget in ("status", "guarantee", "reason"):
                region = app.query_one(f"#{widget}").region
                rows = lines[region.y:region.y + region.height]
                assert not whole_words(rows, app.last_text[widget]), (widget, rows, app.last_text[widget])
            assert "…" not in "\n".join(lines[:app.query_one("#tables").region.y])
            assert "q quit" in lines[-1] and "g guarantee" in lines[-1]
        # the full guarantee holds every word of the short one and the scope
        assert "neighbours:" in app.last_text["guarantee"]
    run((80, 24), scenario)


def test_wide_terminal_shows_private_panels_side_by_side():
    assert panels_that_fit(80, 3) == 1 and panels_that_fit(200, 3) == 3 and panels_that_fit(150, 3) == 2

    async def scenario(app, pilot):
        assert await until(pilot, lambda: len(app.shown()) == 3)
        await pilot.pause(0.3)
        shown = [app.query_one(f"#{app.panel_id(i)}") for i in range(3)]
        assert all(t.display for t in shown)
        assert [t.region.x for t in shown] == sorted(t.region.x for t in shown)  # one row, left to right
        assert len({t.region.y for t in shown}) == 1
        assert [t.border_title.split(" ")[0] for t in shown] == app.private_names
    run((200, 50), scenario)


def test_a_file_runs_on_time_epochs_and_hints_use_the_key_words():
    args = top_args("--key", "dst")
    assert args.config.settings.epoch_seconds == 10.0
    assert top_args("--epoch-packets", "5000", "--algorithms", "exact").config.settings.epoch_seconds is None
    with pytest.raises(ValueError, match="--epoch-packets releases on a paced replay"):  # a count is no clock
        top_args("--epoch-packets", "5000")

    async def scenario(app, pilot):
        assert await until(pilot, lambda: any(
            "epoch" in (app.query_one("#private").border_title or "") for _ in [0]))
        assert "private destination" in str(app.query_one("#private").columns[next(iter(
            app.query_one("#private").columns))].label)
        assert " source" not in app.explanation(next(v for v in app.session.snapshot().lanes if v.name == "dpss"))
    run((80, 24), scenario, "--key", "dst")


def test_q_stops_the_sessions_and_exits_without_joining_them():
    """The quit path asks the sessions to stop, once, and exits: no join is on the path between
    the key and the exit (their threads are daemons that write nothing)."""
    events = []

    async def scenario(app, pilot):
        session = app.session
        stop, close = session.stop, session.close
        session.stop = lambda *a, **k: (events.append("stop"), stop(*a, **k))[1]
        session.close = lambda *a, **k: (events.append("close"), close(*a, **k))[1]
        await pilot.pause(0.5)
        await pilot.press("q")
        assert await until(pilot, lambda: not app.is_running, 10)
        assert events == ["stop"]
        app.stop_sessions()  # what run_top does once the view has exited
        assert events == ["stop"]
    run((80, 24), scenario)
