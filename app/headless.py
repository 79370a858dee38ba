"""The command line's view of a monitoring session: ``dptop replay`` and ``dptop capture``.

One ``dptop.monitor.session.Session`` does the work, exactly as behind the window. This view
adds what a terminal user expects: the source is checked and the ``--json`` destination prepared
before any work (a bad capture or path fails at once, the target untouched; the JSON is written
whole or not at all, dptop.output), a progress line on stderr for long runs, SIGINT, SIGTERM and
SIGHUP stop the source and flush the algorithms so the table and the JSON still come out, marked
``"partial": true`` (exit 130 / 143 / 129), and the table is printed even when writing the JSON
fails.
"""
from __future__ import annotations

import signal
import sys
import threading
import time
from contextlib import contextmanager

from dptop.monitor.config import RunConfig, SourceSpec
from dptop.monitor.footprints import default_limit
from dptop.monitor.memory import MemoryWatch
from dptop.engine.core.jit import compiles
from dptop.interrupts import stop_signals
from dptop.monitor.result import archive_json, session_json
from dptop.monitor.publish import publish_json
from dptop.monitor.session import Session
from dptop.output import JsonOut, OutputError, silence_stdout
from dptop.releaselines import ReleaseLines
from dptop.report import key_noun, render_csv, render_text, si
from dptop.runresult import RunResult

PROGRESS_AFTER = 1.0  # seconds before the first progress line
PROGRESS_EVERY_PIPE = 10.0  # seconds between lines on a pipe or a file (--progress always)
PHASE_EVERY = 5.0  # seconds between the lines of a start that lasts (kernels compiling on first use)


class Progress:
    """``dptop: 3.2M/10.0M records read (32 %), 3.1M packets counted per port, 4.1M/s, ETA 2 s`` on
    stderr, on a terminal only unless ``mode`` is ``always``; the interface's events (down, up, gone)
    always, one line each."""

    def __init__(self, session: Session, stream=None, mode: str = "auto"):
        self.session, self.stream = session, stream or sys.stderr
        self.tty = self.stream.isatty()
        self.shows = mode == "always" or (mode == "auto" and self.tty)
        self.start = time.monotonic()
        self.last = 0.0
        self.shown = False
        self.phase, self.phase_since, self.phase_shown = "", 0.0, 0.0
        self.compiled = compiles()
        self.events = 0  # interface events already shown
        c = session.config.counting
        units = f"{c.unit}-byte units" if c.weight == "bytes" else "packets"
        self.counted_as = f"{units} counted per {key_noun(c.key)}"

    def update(self) -> None:
        st = self.session.source_stats()
        for event in () if st is None else st.interface_events[self.events:]:  # always said, as warnings are
            self._line(event.text())
            self.events += 1
        if not self.shows:
            return
        now = time.monotonic()
        phase = self.session.phase
        if phase and phase != self.phase and now - self.start > 0.5:
            self._line(phase)
            self.phase, self.phase_since, self.phase_shown = phase, now, now
        elif phase and phase == self.phase and now - self.phase_shown >= PHASE_EVERY:
            compiling = compiles() > self.compiled and "compiling" not in phase
            self._line(f"{phase.rstrip('.')}{': compiling kernels (first use since install)' if compiling else ''}, "
                       f"{now - self.phase_since:.0f} s")
            self.phase_shown = now
        elapsed = now - self.start
        if st is None or elapsed < PROGRESS_AFTER:
            return
        # no packet read yet while numba compiles the reader's kernels (a first use since install)
        compiling = st.packets == 0 and compiles() > self.compiled
        if not self.tty and now - self.last < (PHASE_EVERY if compiling else PROGRESS_EVERY_PIPE):
            return
        counted = self.session.truth.fed  # what the algorithms count: packets with the key, or byte units
        rate = counted / elapsed if elapsed else 0.0
        text = f"{si(st.packets)} packets read, {si(counted)} {self.counted_as}, {si(rate)}/s"
        if compiling:
            text = f"compiling kernels (first use since install), {elapsed:.0f} s"
        elif st.fraction:
            total = self.session.public.get("stream_length") or 0
            eta = elapsed * (1 - st.fraction) / st.fraction
            text = (f"{si(st.packets)}/{si(total)} records read ({100 * st.fraction:.0f} %), {si(counted)} "
                    f"{self.counted_as}, {si(rate)}/s" + (f", ETA {eta:.0f} s" if st.fraction < 1 else ""))
        self._line(text, overwrite=self.tty)
        self.last = now

    def _line(self, text: str, overwrite: bool = False) -> None:
        end = "\r" if overwrite else "\n"
        self.stream.write(f"dptop: {text}\033[K{end}" if overwrite else f"dptop: {text}{end}")
        self.stream.flush()
        self.shown = self.shown or overwrite

    def done(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()


SECOND_SIGNAL_AFTER = 0.5
"""Seconds after the first signal before another one counts as a second request: ``timeout``
signals the command and then its whole process group, so one request can arrive twice."""


@contextmanager
def stop_on_signals(first, second=None):
    """SIGINT / SIGTERM / SIGHUP (a closed terminal, a dropped ssh): the first calls ``first``
    (a session stops its source and flushes the algorithms), a second one (at least
    SECOND_SIGNAL_AFTER s later) ``second`` (abandon the flush); either way the results computed
    so far are written. Yields a dict whose ``signal`` names the first signal received. A SIGHUP
    ignored (``nohup``) stays ignored (dptop.interrupts.stop_signals)."""
    got: dict = {"signal": None, "at": 0.0}

    def handler(signum, frame):
        if got["signal"] is None:
            got["signal"], got["at"] = signum, time.monotonic()
            print(f"\ndptop: {signal.Signals(signum).name}: stopping, writing what was computed so far",
                  file=sys.stderr)
            first()
        elif second is not None and time.monotonic() - got["at"] >= SECOND_SIGNAL_AFTER:
            second()

    old = {s: signal.signal(s, handler) for s in stop_signals()}
    try:
        yield got
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def run(command: str, spec: SourceSpec, config: RunConfig, json_target: str | None, top: int,
        publish: str | None = None, lines: bool = False, serve: str | None = None, facts=None,
        form: str = "table", baselines: bool = False, progress: str = "auto") -> int:
    """Run a session to its end and report it (and its private view to ``publish``); returns the exit
    code. ``lines``: print one line per release while it runs (on stderr when the JSON goes to stdout).
    ``serve``: where the private feed (dptop.feed) serves while it runs (``[HOST:]PORT`` or the
    checked ``ServeSpec`` of the ``--serve*`` options). ``facts``: what the command's check read of
    the file (``dptop.monitor.precheck.SourceFacts``). ``form``: the text on stdout, ``table`` or
    ``csv`` (dptop.report); ``baselines``: show the non-private baselines; ``progress``: ``auto``
    (on a terminal only), ``always`` or ``never``."""
    out, private_out, feed = JsonOut(json_target), None, None  # the checks ran before (cli: check_replay)
    try:
        private_out = JsonOut(publish, "the private view") if publish else None
        session = Session(config)
        if serve is not None:
            feed = start_feed(session, serve)
    except BaseException:
        discard(out, private_out)
        raise
    watch, over = MemoryWatch(config.memory_limit or default_limit()), None
    with stop_on_signals(lambda: session.stop(flush=True), session.stop) as got:  # until the results are written: a late signal cannot cut them
        try:
            session.open(spec, facts)
            progress = Progress(session, mode=progress)
            log = ReleaseLines(session, sys.stderr if json_target == "-" else sys.stdout) if lines else None
            while not session.wait(0.2).ended:
                if over is None and (over := watch.exceeded()) is not None:
                    session.stop(flush=True)  # the algorithms still release what they read
                progress.update()
                if log is not None:
                    log.update()
            progress.update()  # the last interface events
            progress.done()
            stats = session.source_stats()
            cut = stats is not None and stats.incomplete  # the file was read in part: its warning says why
            gone = stats is not None and stats.interface_gone  # the captured interface went away
            shown = log.shown if log is not None else None
            result = session_json(session, command, top,
                                  partial=got["signal"] is not None or session.stopped_by is not None or cut
                                  or gone or over is not None, shown=shown)
            private = publish_json(session, command, shown) if publish else None
        except BaseException:
            discard(out, private_out)
            raise
        finally:
            if feed is not None:
                feed.close()
            session.close(timeout=5.0)
        rc = 0
        if session.stopped_by is not None or over is not None:  # one line, the results so far, exit 1
            print(f"dptop: error: {session.stopped_by or over}; writing what was computed so far", file=sys.stderr)
            rc = 1
        elif result.get("error"):
            print(f"dptop: error: {result['error']}", file=sys.stderr)
            discard(out, private_out)  # a failed run writes no JSON: a previous file stays as it was
            private = None
            rc = 1
        for warning in result["source"].get("warnings", []):
            print(f"dptop: warning: {warning}", file=sys.stderr)
        rc = rc or int(cut or gone)
        rc = report(result, out, json_target, form, baselines) or rc
        if private is not None:
            try:
                private_out.write(private)
            except OutputError as exc:
                print(f"dptop: error: {exc}", file=sys.stderr)
                rc = rc or 1
            finally:
                private_out.close()
    if got["signal"] is not None:
        return 128 + int(got["signal"])
    return rc


def start_feed(session: Session, serve):
    """The private feed of ``session`` at ``serve`` (dptop.feed), announced on stderr."""
    from dptop.feed import serve as start

    feed = start(session, serve)  # a port that cannot be bound is one ValueError line (dptop.feed.Feed)
    print(f"dptop: serving the private view at {feed.url}/metrics and /releases", file=sys.stderr)
    return feed


def discard(*outputs: JsonOut | None) -> None:
    """Close outputs unwritten: their targets stay as they were."""
    for output in outputs:
        if output is not None:
            output.close()


def report(result: dict, out: JsonOut, json_target: str | None, form: str = "table",
           baselines: bool = False) -> int:
    """The table (or CSV) on stdout unless the JSON goes there, and the JSON; 1 if either cannot be
    written (one line: a closed pipe, a full disk, a permission)."""
    rc = 0
    try:
        if json_target != "-":
            try:
                sys.stdout.write((render_csv if form == "csv" else render_text)(RunResult.from_json(result), baselines))
                sys.stdout.flush()
            except BrokenPipeError:
                silence_stdout()
                print("dptop: error: cannot write the table to stdout: the reader closed the pipe", file=sys.stderr)
                rc = 1
        out.write(result)
    except OutputError as exc:
        print(f"dptop: error: {exc}", file=sys.stderr)
        return 1
    finally:
        out.close()
    return rc


def run_archive(paths, config: RunConfig, cluster: str | None, json_target: str | None, top: int,
                time_range: tuple[int, int] | None, form: str = "table", baselines: bool = False) -> int:
    """``dptop replay A B ... [--cluster ...]``: each file a capture point, summaries merged and
    released once (dptop.cluster.archive); the same JSON contract plus ``agents`` and ``missing``.
    A file that cannot be read is one line and missing from the merge (exit 1, the others'
    results written, ``partial``); a signal stops the tasks, which ship what they read."""
    from dptop.cluster.archive import check_archive, replay_archive
    from dptop.cluster.connect import quiet_dask
    from dptop.engine.core.clock import TimeGrid

    settings = config.settings
    grid = None
    if settings.epoch_seconds is not None:
        if time_range is None:
            raise ValueError("time epochs over several files need the public --time-range")
        grid = TimeGrid.over(*time_range, settings.epoch_seconds)
    check_archive(paths, config.names, settings, cluster, grid)
    out = JsonOut(json_target)
    stop = threading.Event()
    try:
        with quiet_dask(), stop_on_signals(stop.set) as got:
            merged = replay_archive(paths, config.names, settings, cluster, grid=grid, stop=stop,
                                    progress=lambda text: print(f"dptop: {text}", file=sys.stderr, flush=True))
    except BaseException:
        out.close()
        raise
    for m in merged.missing:
        print(f"dptop: error: not covered: {m.error if m.name in m.error else f'{m.name}: {m.error}'}",
              file=sys.stderr)
    result = archive_json(merged, paths, config, top)
    rc = report(result, out, json_target, form, baselines)
    if got["signal"] is not None:
        return 128 + int(got["signal"])
    return rc or (1 if merged.missing else 0)
