"""``dptop top``: the terminal view, in the manner of iftop and htop (Textual).

The same ``dptop.monitor.session.Session`` as the window and the CLI, polled on a timer: a status
line (source, state, packets, drops, the key counted, the sort), each shown private panel's
guarantee in short and the session's budget, the private releases beside the exact (non-private)
baseline, and the same explanation as the window where a panel is empty (dptop.monitor.explain),
in the words of the key counted. Every text wraps at word boundaries, so an 80x24 terminal (ssh,
tmux) shows it whole; ``g`` shows the guarantees in full. A wide terminal shows two or more
private panels side by side (``PANEL_WIDTH`` columns each). Keys: ``a``/``z`` next/previous
private algorithm, ``s`` sort (private estimate or address), ``k`` the next key kind (source,
destination, port, protocol, pair, networks: restarts the session, a new key is a new stream),
``g`` the full guarantees, space freezes the tables, ``q`` quits: the sessions are told to stop
and the view exits at once, restoring the terminal without waiting for the key reader's last polls
(``PromptDriver``) nor for the sessions' threads (daemons that write nothing). With ``serve`` the
private feed (dptop.feed) serves whichever session the view runs.
"""
from __future__ import annotations

import signal
import termios
from dataclasses import replace

from textual.app import App, ComposeResult
from textual.containers import Horizontal
from textual.drivers.linux_driver import LinuxDriver
from textual.widgets import DataTable, Footer, Static

from dptop.engine.core.keykinds import KeyKind
from dptop.monitor import catalogue
from dptop.monitor.config import RunConfig, SourceSpec
from dptop.monitor.memory import limit_arenas, release_memory
from dptop.monitor.explain import detectable_text, drops_of, reason_text, threshold_of
from dptop.monitor.session import Session
from dptop.report import key_noun

REFRESH_SECONDS = 0.5
ROWS = 40  # rows kept in each table (the terminal scrolls them)
SORTS = ("estimate", "address")
PANEL_WIDTH = 44  # columns a private panel needs (key, estimate, exact and the border)
EXACT_WIDTH = 50  # columns the exact panel keeps beside several private ones (an IPv6 address and a count)


def panels_that_fit(width: int, private: int) -> int:
    """How many private panels side by side a terminal ``width`` columns wide shows (at least one)."""
    return max(1, min(private, (width - EXACT_WIDTH) // PANEL_WIDTH))


def fmt_count(x: float) -> str:
    """12345.6 -> '12,346'; 1.2e7 -> '12.0M' (narrow columns)."""
    return f"{x / 1e6:.1f}M" if abs(x) >= 1e7 else f"{x:,.0f}"


def private_rows(view, sort: str) -> list[tuple[str, str, str]]:
    """(address, private estimate, exact count over the same span) of the release's own items."""
    a = view.algorithm
    rel = None if a is None else a.latest
    if rel is None:
        return []
    truth = view.truth
    same = truth is not None and [it.address for it in truth.release.items] == [it.address for it in rel.items]
    counts = truth.counts if same else (None,) * len(rel.items)  # the exact answer lags a fresh release
    rows = list(zip(rel.items, counts))
    if sort == "address":
        rows.sort(key=lambda r: (r[0].hi, r[0].lo))
    return [(it.address, fmt_count(it.estimate), "…" if c is None else fmt_count(c)) for it, c in rows[:ROWS]]


def exact_rows(session: Session, snap, sort: str) -> tuple[str, list[tuple[str, str]]]:
    """The exact baseline: the ``exact`` lane's latest answer, else the whole session's counter."""
    lane = next((v for v in snap.lanes if v.name == "exact" and v.algorithm is not None), None)
    if lane is not None and lane.algorithm.latest is not None:
        items = lane.algorithm.latest.items
        where = lane.algorithm.latest.span.kind
    else:
        items = session.exact(ROWS)[2]
        where = "stream"
    items = list(items[:ROWS])
    if sort == "address":
        items.sort(key=lambda it: (it.hi, it.lo))
    return where, [(it.address, fmt_count(it.estimate)) for it in items]


def guarantee_lines(panels: list[tuple[str | None, object]], budget: str, full: bool = False) -> list[str]:
    """One line per shown panel: its guarantee in numbers and neighbours (``full``: with its model
    and scope, every word of it), then the session's budget (every private panel together)."""
    lines = []
    for name, g in panels or [(None, None)]:
        if g is None:
            lines.append(f"{name or 'no private algorithm'}: not started")
        elif full:
            lines.append(f"{name}: {g.measure} ({', '.join(g.numbers())}) · {g.describe()}")
        else:
            lines.append(f"{name}: {g.measure} ({', '.join(g.numbers())}) · {g.neighbouring}")
    lines.append(f"budget, all panels: {budget or '—'}")
    if not full:
        lines.append("g: each guarantee in full (model, neighbours, scope)")
    return lines


class PromptDriver(LinuxDriver):
    """Textual's terminal driver, except that input stops without waiting for the key reader.

    Textual's reader thread polls the terminal every 0.1 s and, once told to stop, polls once
    more; stopping input waits for it, up to 0.2 s of the time between ``q`` and the exit. Here
    stopping input tells the reader to stop and returns: input that arrives after that is dropped
    (as the flush of the terminal's input drops it), and the reader ends by itself within 0.2 s
    or with the process. A resume (after Ctrl-Z) waits for the old reader before starting anew.
    """

    def disable_input(self) -> None:
        if self.exit_event.is_set():
            return
        signal.signal(signal.SIGWINCH, signal.SIG_DFL)
        if self._writer_thread is not None:  # None when application mode never started (a stopped job)
            self._disable_mouse_support()
        self.exit_event.set()  # stays set: the reader reads it until it ends
        try:
            termios.tcflush(self.fileno, termios.TCIFLUSH)
        except termios.error:
            pass

    def start_application_mode(self) -> None:
        if self._key_thread is not None:
            self._key_thread.join()
        self.exit_event.clear()
        super().start_application_mode()

    def process_message(self, message) -> None:
        if not self.exit_event.is_set():
            super().process_message(message)


class TopApp(App):
    """The terminal view of one session (a new one when the counted key changes)."""

    TITLE = "dptop top"
    ENABLE_COMMAND_PALETTE = False  # its footer entry would push "q quit" off an 80-column line
    CSS = """
    Screen { layout: vertical; }
    #status { height: auto; max-height: 2; background: $boost; }
    #guarantee { height: auto; max-height: 8; color: $text-muted; }
    #tables { height: 1fr; min-height: 6; }
    .private { width: 1fr; }
    #exact { width: 1fr; }
    DataTable { border: round $primary-darken-2; height: 100%; }
    #reason { height: auto; max-height: 4; color: $warning; }
    """
    BINDINGS = [("a", "algorithm(1)", "next"), ("z", "algorithm(-1)", "previous"), ("s", "sort", "sort"),
                ("k", "key", "key"), ("g", "guarantee", "guarantee"), ("space", "freeze", "freeze"),
                ("q", "quit", "quit")]

    def __init__(self, spec: SourceSpec, config: RunConfig, refresh: float = REFRESH_SECONDS,
                 serve: str | None = None, facts=None):
        super().__init__()
        limit_arenas()
        self.spec, self.config, self.refresh_seconds = spec, config, refresh
        self.facts = facts  # the file's public facts, read by the command's check (a restart reuses them)
        self.feed = None
        if serve is not None:
            from dptop.feed import serve_current

            self.feed = serve_current(lambda: self.session, serve)
        self.session: Session | None = None
        self.old: list[Session] = []
        self.private_names = [n for n in config.names if _private(n)]
        self.selected = 0
        self.sort = SORTS[0]
        self.frozen = False
        self.full = False  # the guarantees in full (g)
        self.last_text: dict[str, str] = {}
        self.sessions_stopped = False  # q told them to stop

    def get_driver_class(self):
        driver = super().get_driver_class()
        return PromptDriver if driver is LinuxDriver else driver

    # ----- layout and session --------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(id="status")
        yield Static(id="guarantee")
        with Horizontal(id="tables"):
            for i in range(max(1, len(self.private_names))):
                yield DataTable(id=self.panel_id(i), classes="private", show_cursor=False, zebra_stripes=True)
            yield DataTable(id="exact", show_cursor=False, zebra_stripes=True)
        yield Static(id="reason")
        yield Footer()

    def on_mount(self) -> None:
        self.label_columns()
        self.open_session()
        self.set_interval(self.refresh_seconds, self.refresh_view)
        self.refresh_view()

    def open_session(self) -> None:
        ledger = None
        if self.session is not None:
            ledger = self.session.ledger  # one ledger per source: a new key reads the same packets again
            if self.session.close(1.0):
                self.old.append(self.session)  # still winding down: joined again on quit
            release_memory()
        self.session = Session(self.config, ledger=ledger)
        self.session.open(self.spec, self.facts)

    def close_sessions(self, timeout: float = 2.0) -> list[str]:
        alive = []
        for s in [*self.old, *([self.session] if self.session is not None else [])]:
            alive += s.close(timeout)
        self.old = []
        return alive

    def label_columns(self) -> None:
        """Column headers in the counted key kind's words (again after ``k``)."""
        for table in self.query(".private").results(DataTable):
            table.clear(columns=True)
            table.add_columns(f"private {self.noun}", "estimate", "exact")
        exact = self.query_one("#exact", DataTable)
        exact.clear(columns=True)
        exact.add_columns(f"exact {self.noun}", "count")
        self.last_text = {k: v for k, v in self.last_text.items() if not k.endswith("-rows")}

    @staticmethod
    def panel_id(i: int) -> str:
        """The table of the i-th shown private panel: ``private`` (the selected one), ``private-1``, ..."""
        return "private" if i == 0 else f"private-{i}"

    @property
    def noun(self) -> str:
        """The counted key kind in one word or two: source, destination, port, ..."""
        return key_noun(self.config.counting.key)

    def shown(self) -> list[str]:
        """The private algorithms shown side by side, the selected one first."""
        if not self.private_names:
            return []
        n = panels_that_fit(self.size.width, len(self.private_names))
        return [self.private_names[(self.selected + j) % len(self.private_names)] for j in range(n)]

    def on_resize(self, event) -> None:
        self.refresh_view(force=True)

    # ----- keys ------------------------------------------------------------------------------
    def action_algorithm(self, step: int) -> None:
        if self.private_names:
            self.selected = (self.selected + step) % len(self.private_names)
            self.refresh_view(force=True)

    def action_sort(self) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        self.refresh_view(force=True)

    def key_kinds(self) -> list[KeyKind]:
        """The kinds every configured algorithm runs on (host-level ones read addresses only)."""
        address_only = any(catalogue.entry(n).address_keys for n in self.config.names)
        return [k for k in KeyKind if k.address or not address_only]

    def action_key(self) -> None:
        counting = self.config.counting
        kinds = self.key_kinds()
        now = counting.kind if counting.kind in kinds else kinds[-1]
        after = kinds[(kinds.index(now) + 1) % len(kinds)]
        self.config = replace(self.config, counting=replace(counting, key=after.value))
        self.label_columns()
        self.open_session()
        self.refresh_view(force=True)

    def action_guarantee(self) -> None:
        self.full = not self.full
        self.refresh_view(force=True)

    def action_quit(self) -> None:
        """Exit at once: the sessions are told to stop now; nothing waits for their threads."""
        self.stop_sessions()
        self.exit()

    def stop_sessions(self) -> None:
        """Tell every session to stop (once: a second stop would wait on their locks for nothing)."""
        if not self.sessions_stopped:
            self.sessions_stopped = True
            for s in [*self.old, *([self.session] if self.session is not None else [])]:
                s.stop()

    def action_freeze(self) -> None:
        self.frozen = not self.frozen
        self.refresh_view(force=True)

    # ----- the timer -------------------------------------------------------------------------
    @property
    def algorithm(self) -> str | None:
        return self.private_names[self.selected] if self.private_names else None

    def refresh_view(self, force: bool = False) -> None:
        session = self.session
        if session is None or not self.is_running:  # not yet, or the widgets are being taken down
            return
        snap = session.snapshot()
        self._set("status", self.status_line(snap))
        shown = self.shown()
        views = {v.name: v for v in snap.lanes}
        panels = [(name, None if views.get(name) is None or views[name].algorithm is None
                   else views[name].algorithm.guarantee) for name in shown]
        budget = (snap.budget or {}).get("total", "")
        self._set("guarantee", "\n".join(guarantee_lines(panels, budget, self.full)))
        if self.frozen and not force:
            return
        self.query_one("#exact").styles.min_width = EXACT_WIDTH if len(shown) > 1 else None
        view = views.get(self.algorithm)
        self._set("reason", "" if view is None else self.explanation(view, drops_of(snap).lane_text(view.name)))
        for i, table in enumerate(self.query(".private").results(DataTable)):
            name = shown[i] if i < len(shown) else None
            table.display = i == 0 or name is not None
            if name is None and i > 0:
                continue
            v = views.get(name)
            if v is not None:
                self._fill(self.panel_id(i), private_rows(v, self.sort), f"{v.name}{self._span(v)}")
            else:
                self._fill(self.panel_id(i), [], "no private algorithm selected" if name is None else f"{name}")
        where, rows = exact_rows(session, snap, self.sort)
        self._fill("exact", rows, f"exact, NOT private: {where}")

    def status_line(self, snap) -> str:
        src = snap.source
        packets = 0 if src is None else src.ip_packets
        key = self.config.counting.kind.label
        state = snap.error or (f"{snap.state}: {snap.phase}" if snap.phase else snap.state)
        frozen = " · FROZEN" if self.frozen else ""
        return (f"{snap.source_label} · {state} · {packets:,} pkts · drops {drops_of(snap).total:,} · "
                f"per {key} · by {self.sort}{frozen}")

    def explanation(self, view, loss: str = "") -> str:
        parts = [reason_text(view, self.noun), loss]
        thr = threshold_of(view)
        limit = detectable_text(view.status.detectable, self.noun)
        tail = " · ".join(x for x in (f"τ = {thr:,.0f}" if thr is not None else "", limit) if x)
        return "\n".join(p for p in (*parts, tail) if p)

    @staticmethod
    def _span(view) -> str:
        rel = None if view.algorithm is None else view.algorithm.latest
        if rel is None:
            return ""
        sp = rel.span
        where = f"{sp.kind} {sp.index}" if sp.kind in ("epoch", "horizon") else sp.kind
        return f" · {where}, {max(0, sp.end - sp.start):,} pkts"

    def _set(self, widget: str, text: str) -> None:
        if self.last_text.get(widget) != text:
            self.last_text[widget] = text
            self.query_one(f"#{widget}", Static).update(text)

    def _fill(self, table: str, rows: list, title: str) -> None:
        key = f"{table}-rows"
        signature = repr((rows, title))
        if self.last_text.get(key) == signature:
            return
        self.last_text[key] = signature
        t = self.query_one(f"#{table}", DataTable)
        t.border_title = title
        t.clear()
        t.add_rows(rows)


def _private(name: str) -> bool:
    return catalogue.entry(name).private


def run_top(spec: SourceSpec, config: RunConfig, refresh: float = REFRESH_SECONDS, serve: str | None = None,
            facts=None) -> TopApp:
    """Run the terminal view until the user quits; returns the app (its sessions stopped, their
    threads ending by themselves: daemons that write nothing, so the quit does not wait for them).
    ``facts``: the file's public facts the command's check read (``precheck.SourceFacts``)."""
    app = TopApp(spec, config, refresh, serve, facts)
    try:
        app.run()
    finally:
        app.stop_sessions()
        if app.feed is not None:
            app.feed.close()  # its log is closed whole
    return app
