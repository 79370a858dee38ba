"""The command line's view of a monitoring session: ``dptop replay`` and ``dptop capture``.

One ``dptop.monitor.session.Session`` does the work, exactly as behind the window. This view
adds what a terminal user expects: the ``--json`` destination is opened before any work (a bad
path fails at once), a progress line on stderr for long runs, SIGINT and SIGTERM stop the source
and flush the algorithms so the table and the JSON still come out, marked ``"partial": true``
(exit 130 / 143), and the table is printed even when writing the JSON fails.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from contextlib import contextmanager

from dptop.monitor.config import RunConfig, SourceSpec
from dptop.monitor.result import session_json
from dptop.monitor.publish import publish_json, write_whole
from dptop.monitor.session import Session

DONE = ("finished", "stopped", "failed")
PROGRESS_AFTER = 1.0  # seconds before the first progress line
PROGRESS_EVERY_PIPE = 10.0  # seconds between lines when stderr is not a terminal


class JsonOut:
    """``--json OUT|-``: opened (and one byte written, so a full device fails now) before the run."""

    def __init__(self, target: str | None):
        self.target, self.fh = target, None
        if target and target != "-":
            self.fh = open(target, "w")
            self.fh.write("\n")
            self.fh.flush()
        self.rewrite = self.fh is not None and os.path.isfile(target)  # not /dev/null, a pipe or a tty

    def write(self, result: dict) -> None:
        text = json.dumps(result, indent=2, default=str) + "\n"
        if self.target == "-":
            sys.stdout.write(text)
            sys.stdout.flush()
            return
        if self.fh is None:
            return
        if self.rewrite:
            self.fh.seek(0)
            self.fh.truncate()
        self.fh.write(text)
        self.fh.flush()

    def close(self) -> None:
        if self.fh is not None:
            try:
                self.fh.close()
            except OSError:
                pass


class Progress:
    """``replay: 3.2M/10.0M packets (32 %), 4.1M/s, ETA 2 s`` on stderr."""

    def __init__(self, session: Session, stream=None):
        self.session, self.stream = session, stream or sys.stderr
        self.tty = self.stream.isatty()
        self.start = time.monotonic()
        self.last = 0.0
        self.shown = False
        self.phase = ""

    def update(self) -> None:
        now = time.monotonic()
        phase = self.session.phase
        if phase and phase != self.phase and now - self.start > 0.5:
            self._line(phase)
            self.phase = phase
        elapsed = now - self.start
        if elapsed < PROGRESS_AFTER or (not self.tty and now - self.last < PROGRESS_EVERY_PIPE):
            return
        st = self.session.source_stats()
        if st is None:
            return
        rate = st.ip_packets / elapsed if elapsed else 0.0
        text = f"{si(st.ip_packets)} packets, {si(rate)}/s"
        if st.fraction:
            total = self.session.public.get("stream_length") or 0
            eta = elapsed * (1 - st.fraction) / st.fraction
            text = (f"{si(st.packets)}/{si(total)} records ({100 * st.fraction:.0f} %), "
                    f"{si(rate)} IP packets/s, ETA {eta:.0f} s")
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


def si(n: float) -> str:
    """12345678 -> '12.3M'."""
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= scale:
            return f"{n / scale:.3g}{unit}"
    return f"{n:.0f}"


SECOND_SIGNAL_AFTER = 0.5
"""Seconds after the first signal before another one counts as a second request: ``timeout``
signals the command and then its whole process group, so one request can arrive twice."""


@contextmanager
def stop_on_signals(session: Session):
    """SIGINT / SIGTERM: the first stops the source and flushes the algorithms, a second one (at
    least SECOND_SIGNAL_AFTER s later) abandons the flush; either way the results computed so far
    are written. Yields a dict whose ``signal`` names the first signal received."""
    got: dict = {"signal": None, "at": 0.0}

    def handler(signum, frame):
        if got["signal"] is None:
            got["signal"], got["at"] = signum, time.monotonic()
            print(f"\ndptop: {signal.Signals(signum).name}: stopping, writing what was computed so far",
                  file=sys.stderr)
            session.stop(flush=True)
        elif time.monotonic() - got["at"] >= SECOND_SIGNAL_AFTER:
            session.stop()

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield got
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def run(command: str, spec: SourceSpec, config: RunConfig, json_target: str | None, top: int,
        publish: str | None = None) -> int:
    """Run a session to its end and report it (and its private view to ``publish``); returns the exit code."""
    if publish and not os.access(os.path.dirname(os.path.abspath(publish)), os.W_OK):
        print(f"dptop: error: cannot write the private view to {publish}: its folder is missing or not writable",
              file=sys.stderr)
        return 1
    out = JsonOut(json_target)
    session = Session(config)
    with stop_on_signals(session) as got:  # until the results are written: a late signal cannot cut them
        try:
            session.open(spec)
            progress = Progress(session)
            while session.wait(0.2) not in DONE:
                progress.update()
            progress.done()
            result = session_json(session, command, top, partial=got["signal"] is not None)
            private = publish_json(session, command) if publish else None
        finally:
            session.close(timeout=5.0)
        rc = 0
        if result.get("error"):
            print(f"dptop: error: {result['error']}", file=sys.stderr)
            rc = 1
        for warning in result["source"].get("warnings", []):
            print(f"dptop: warning: {warning}", file=sys.stderr)
        rc = report(result, out, json_target) or rc
        if private is not None:
            try:
                write_whole(publish, private)
            except OSError as exc:
                print(f"dptop: error: cannot write the private view to {publish}: {exc.strerror or exc}",
                      file=sys.stderr)
                rc = rc or 1
    if got["signal"] is not None:
        return 128 + int(got["signal"])
    return rc


def report(result: dict, out: JsonOut, json_target: str | None) -> int:
    """The table on stdout (unless the JSON goes there) and the JSON; 1 if the JSON cannot be written."""
    if json_target != "-":
        print_table(result)
    try:
        out.write(result)
    except OSError as exc:
        print(f"dptop: error: cannot write the JSON to {json_target}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    finally:
        out.close()
    return 0


def print_table(result: dict, file=None) -> None:
    file = file or sys.stdout
    src = result["source"]
    where = src.get("path") or src.get("iface", "")
    partial = " (partial: interrupted)" if result.get("partial") else ""
    print(f"{where}: {src['packets']} packets, {src['ip_packets']} with an IP source{partial}", file=file)
    for reason, n in result.get("dropped", {}).items():
        print(f"  dropped by the public clock: {n} {reason}", file=file)
    print("exact top (non-private):", ", ".join(f"{r['address']} {r['count']}" for r in result["exact"]["top"][:10]),
          file=file)
    for name, a in result["algorithms"].items():
        if a.get("guarantee") is None and a.get("error"):
            print(f"\n{name}: error: {a['error']}", file=file)
            continue
        label = a["guarantee"]["text"] if a.get("guarantee") else "non-private"
        rel = a["releases"][-1] if a["releases"] else None
        items = ", ".join(f"{i['address']} {i['estimate']:.0f}" for i in rel["items"][:10]) if rel else ""
        thr = f" threshold {rel['threshold']:.1f}" if rel and rel["threshold"] is not None else ""
        print(f"\n{name} [{label}] {a['packets_per_second'] / 1e6:.2f}M packets/s "
              f"(busy {100 * a['busy_share']:.0f} % of a core){thr}", file=file)
        if not items:
            items = "(nothing released" + (f": {why}" if (why := empty_reason(a)) else "") + ")"
        print(f"  {items}", file=file)
    budget = result.get("budget")
    if budget:
        print(f"\nprivacy budget: {budget['total']}", file=file)


def empty_reason(algorithm: dict) -> str:
    """Why a private panel is empty, from public figures only (its parameters and limits)."""
    st = algorithm.get("status") or {}
    limit = st.get("detectable") or {}
    if limit.get("note"):
        return str(limit["note"])
    if limit.get("count"):
        return (f"a source needs >= {limit['count']} packets ({100 * limit['share']:.1f} %) in {limit['over']} "
                f"to be released with probability 0.9")
    return str(st.get("note", ""))


def run_archive(paths, config: RunConfig, cluster: str | None, json_target: str | None, top: int,
                time_range: tuple[int, int] | None) -> int:
    """``dptop replay A B ... [--cluster ...]``: each file a capture point, summaries merged and
    released once (dptop.cluster.archive); the same JSON contract plus ``agents``."""
    from dptop import __version__
    from dptop.cluster.archive import replay_archive
    from dptop.engine.core.clock import TimeGrid
    from dptop.monitor.ledger import Ledger

    out = JsonOut(json_target)
    settings = config.settings
    grid = None
    if settings.epoch_seconds is not None:
        if time_range is None:
            raise ValueError("time epochs over several files need the public --time-range")
        grid = TimeGrid.over(*time_range, settings.epoch_seconds)
        settings = settings.with_(time_range=time_range)
    merged = replay_archive(paths, config.names, settings, cluster, grid=grid)
    result = {"dptop": __version__, "command": "replay", "partial": False,
              "settings": {k: v for k, v in vars(config.settings).items()}, **merged.to_json(top or 10**9)}
    agents = result["agents"]
    skipped: dict = {}
    for a in agents:
        for reason, n in (a.get("skipped") or {}).items():
            skipped[reason] = skipped.get(reason, 0) + n
    result["source"] = {"paths": [str(p) for p in paths], "packets": sum(a.get("packets", 0) for a in agents),
                        "ip_packets": sum(a.get("ip_packets", a.get("packets", 0)) for a in agents),
                        "skipped": skipped, "warnings": [], "cluster": result.pop("cluster", None)}
    ledger = Ledger()
    for name, rels in merged.releases.items():
        g = next((r.guarantee for r in rels if r.guarantee is not None), None)
        ledger.record(name, 1, g, len(rels))
    result["budget"] = ledger.to_json()
    for a in result["algorithms"].values():
        a.setdefault("packets", result["source"]["ip_packets"])
        a.setdefault("updates_per_second", None)
        a.setdefault("packets_per_second", 0.0)
        a.setdefault("busy_share", 0.0)
        a.setdefault("status", {})
    return report(result, out, json_target)
