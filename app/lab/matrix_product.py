"""The product as the conformance matrix (dptop.lab.product_matrix) drives it: ``Product`` runs a
cell's capture through a monitor session on each surface and returns the features a user can read;
each broken variant (dptop.lab.matrix_broken) overrides one of its steps.
"""
from __future__ import annotations

import io
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from dptop.engine.core import registry
from dptop.lab.matrix_captures import EPOCHS, SECOND, T0
from dptop.lab.matrix_cells import Cell, config, spec
from dptop.lab.matrix_features import line_features, seeded_features, stated_facts
from dptop.lab.product_audit import view_features
from dptop.monitor import publish
from dptop.monitor.config import RunConfig, SourceSpec
from dptop.monitor.precheck import SourceFacts
from dptop.monitor.session import Session
from dptop.monitor.sources import refuse_data_stop
from dptop.monitor.states import State
from dptop.monitor.stepped import SteppedSession
from dptop.releaselines import ReleaseLines

LATENESS_NS = 50_000_000  # a live cell closes this long after its end
STEPPING_FAMILIES = ("continual observation", "sliding window")
"""Families whose live outputs step in the stream: their packets arrive one at a time, so a step
driven by the count (not the public clock) shows as it would on a slow link. The others' releases
are their epochs', whatever the arrivals; their packets stamped before a close arrive together."""


class Product:
    """The product as the matrix drives it; each broken variant overrides one step."""

    view = staticmethod(publish.publish_json)
    speed = 4.0  # the timing surface: 4 s of capture in 1 s of wall time

    def facts(self, source: SourceSpec, epoch_seconds: float | None) -> SourceFacts | None:
        """The facts handed to a session with ``source`` (None: the session reads them itself)."""
        return None

    def replay(self, cell: Cell, path: Path, seed: int | None, ledger=None) -> Session:
        """``path`` replayed as fast as it goes through a session driven in this thread
        (dptop.monitor.stepped: the threaded session's releases, ledger and private view)."""
        session = SteppedSession(config(cell, seed), record_packets=1 << 12, ledger=ledger)
        source = spec(cell, path)
        session.open(source, self.facts(source, session.config.settings.epoch_seconds))
        if session.replay() is not State.FINISHED:
            session.close(5.0)
            raise RuntimeError(f"replay of {path.name} ended {session.state}: {session.error}")
        return session

    def metrics(self, view: dict) -> dict[str, float]:
        from dptop.feed import metric_families

        return {f"{s.name}{sorted(s.labels.items())}": s.value for f in metric_families(view) for s in f.samples}

    def features(self, cell: Cell, path: Path, seed: int | None) -> dict[str, float]:
        if cell.surface == "timing":
            return self.timing(cell, path, seed)
        if cell.surface in ("capture", "lines"):
            return self.capture(cell, path, seed)
        if cell.surface == "top":
            return self.key_switch(cell, path, seed)
        session = self.replay(cell, path, seed)
        try:
            view = self.view(session, "audit")
        finally:
            session.close(5.0)
        if cell.surface == "metrics":  # served beside /releases, whose view names the public facts
            return {**self.metrics(view), **stated_facts(view)}
        if cell.surface == "seeded":
            return seeded_features(view, self.metrics(view))
        return view_features(view)

    def key_switch(self, cell: Cell, path: Path, seed: int | None) -> dict[str, float]:
        """``k`` in ``dptop top``: a second session over the same file, on the next key; its
        budget must be the sequential cost of both readings."""
        first = self.replay(cell, path, seed)
        other = replace(cell, key="dst" if cell.key == "src" else "src")
        second = self.replay(other, path, seed, ledger=self.ledger_after(first))
        try:
            own = sequential_cost((first, second))
            shown = (second.snapshot().budget or {}).get("epsilon", 0.0)
            return {"budget below the sequential cost of both readings": float(shown < own - 1e-9)}
        finally:
            first.close(5.0)
            second.close(5.0)

    @staticmethod
    def ledger_after(session: Session):
        return session.ledger

    @staticmethod
    def live_config(cell: Cell, seed: int | None) -> RunConfig:
        """The run a live capture's lanes are built from (its time epochs: the public clock)."""
        return config(cell, seed)

    @staticmethod
    def one_at_a_time(cell: Cell) -> bool:
        """Whether a live cell's packets arrive one at a time (``STEPPING_FAMILIES``)."""
        return registry.get(cell.algorithm).family in STEPPING_FAMILIES

    @staticmethod
    def refuse(source: SourceSpec, run: RunConfig) -> None:
        """What a live capture or a paced replay refuses before it opens
        (sources.refuse_data_stop: ``--count``, ``--epoch-packets``), as ``Session`` does."""
        refuse_data_stop(source, run.names, run.settings)

    stop_after: int | None = None  # a capture stopped at its N-th packet (refused: ``--count``)
    duration: int | None = EPOCHS  # the public stop (``--duration``, seconds); None: open-ended
    release_lines = staticmethod(ReleaseLines)  # what prints ``capture``'s running log

    def capture(self, cell: Cell, path: Path, seed: int | None, out: io.StringIO | None = None) -> dict[str, float]:
        """A live capture's path without a socket: the packets of ``path`` offered to the live
        clock (clocks.LiveClock) on an injected wall clock at the instants of their stamps (one at a
        time or together, ``STEPPING_FAMILIES``), every close at the session's tick, the stop at the
        end of the public duration; the private view as ``capture --publish`` writes it, or
        (surface ``lines``) the lines ``capture`` prints while it runs (dptop.releaselines, into
        ``out`` when given), each continual or window line printed before the capture goes on,
        so that every close prints one. The session runs in this thread (dptop.monitor.stepped),
        so no lane's queue fills and every close has been consumed when the lines are read."""
        from dptop.capture.pcap import read_capture
        from dptop.engine.core.clock import MAX_CELLS, TimeGrid

        now = [T0]
        end = None if self.duration is None else T0 + self.duration * SECOND
        run = self.live_config(cell, seed)
        source = SourceSpec("live", iface="lo", lateness=LATENESS_NS / 1e9, duration=self.duration,
                            count=self.stop_after)
        try:
            self.refuse(source, run)
        except ValueError as exc:  # the same line whatever the capture
            return {f"refused: {exc}": 1.0}
        session = SteppedSession(run, record_packets=1 << 12)
        session.open_live(source, TimeGrid(T0, SECOND, MAX_CELLS), now_ns=lambda: now[0])
        out = io.StringIO() if out is None else out
        lines = self.release_lines(session, out) if cell.surface == "lines" else None
        try:
            printed(lines)

            def next_close() -> int:
                return T0 + (session.cell + 1) * SECOND + LATENESS_NS

            def advance(to_ns: int) -> None:  # the session's ticks up to ``to_ns``: each close on time
                while (due := next_close()) <= to_ns:
                    now[0] = due
                    session.tick()
                    printed(lines)
                now[0] = max(now[0], to_ns)

            fed, stop_ns = 0, end
            packets, _ = read_capture(path)
            one_at_a_time = self.one_at_a_time(cell)
            while fed < len(packets):
                if self.stop_after is not None and fed >= self.stop_after:
                    stop_ns = now[0]
                    break
                advance(int(packets.ts_ns[fed]))
                upto = fed + 1 if one_at_a_time else max(fed + 1, int(np.searchsorted(packets.ts_ns, next_close())))
                if self.stop_after is not None:
                    upto = min(upto, self.stop_after)
                now[0] = max(now[0], int(packets.ts_ns[upto - 1]))
                session.feed(packets.slice(fed, upto))
                fed = upto
            advance(now[0] if stop_ns is None else stop_ns)
            session.tick(final=True)
            printed(lines)
            session.finish()
            if lines is not None:
                lines.update()  # the single releases the finish published
                return line_features(out.getvalue())
            return view_features(self.view(session, "audit"))
        finally:
            session.close(5.0)

    def timing(self, cell: Cell, path: Path, seed: int | None) -> dict[str, float]:
        """When the number of releases of a paced replay changes, relative to the first change, in
        halves of an epoch's wall time (what a scraper polling /metrics sees)."""
        run, source = config(cell, seed), spec(cell, path, self.speed)
        try:
            self.refuse(source, run)  # as the session does before it opens the file
        except ValueError as exc:  # the same line whatever the capture
            return {f"refused: {exc}": 1.0}
        session = Session(run, record_packets=1 << 12)
        session.open(source, self.facts(source, session.config.settings.epoch_seconds))
        seen, instants = 0, []
        try:
            while not session.state.ended:
                n = len(session.releases(cell.algorithm))
                instants += [time.monotonic()] * (n - seen)
                seen = max(seen, n)
                time.sleep(0.002)
            n = len(session.releases(cell.algorithm))
            instants += [time.monotonic()] * (n - seen)
            facts = stated_facts(self.view(session, "audit")) if not session.error else {}
        finally:
            session.close(5.0)
        if session.error:
            raise RuntimeError(f"the paced replay of {path.name} failed: {session.error}")
        quantum = 1.0 / self.speed / 2
        # served beside /releases, whose view names the public facts (a file's span moves the grid)
        return {**{f"release {i} instant": round((t - instants[0]) / quantum) for i, t in enumerate(instants)},
                **facts}


def sequential_cost(sessions) -> float:
    """The per-packet ε of ``sessions``' releases as readings of the same packets, in a ledger of
    their own (every measure composed as the ledger composes it: zCDP releases add their ρ, which
    costs less than the sum of their ε)."""
    from dptop.monitor.ledger import Ledger

    ledger = Ledger()
    for session in sessions:
        reading = ledger.join(rereads=True)
        for lane in session.snapshot().lanes:
            if lane.algorithm is not None and lane.algorithm.guarantee is not None:
                ledger.record(lane.name, 1, lane.algorithm.guarantee, 1, reading=reading)
    return (ledger.to_json() or {}).get("epsilon", 0.0)


def printed(lines) -> None:
    """Let ``lines`` see the session now and print the line of every epoch close it saw: the close
    asks each continual or window lane for a live view, which the stepped session's lane makes at
    once, so the second look prints it (the first release the lane made after the close)."""
    if lines is None:
        return
    lines.update()
    if lines.due:
        lines.update()
    if lines.due:
        raise RuntimeError(f"no release after an epoch's close: {sorted(n for n, _ in lines.due)}")
