"""One monitoring session, headless: the source, one worker per algorithm ("lane"), ground truth,
the public clock of time epochs and the privacy ledger. The CLI and the GUI are views over it.

Its concerns live beside it: where packets come from (``sources``), the one tee to truth and lanes
(``fanout``), the live and looping clocks (``clocks``), the state machine (``states``: a stop or
close that lands while the source is still being opened ends the start instead of being lost, and
``close`` joins every thread the session ever started) and Apply (``apply``).

Public facts a guarantee takes as given (``public``): a replay's record count (the continual
observation horizon) and, with time epochs, the time range (declared, or the file's own first and
last stamps), all read in one pass before the replay (``precheck.SourceFacts``, handed over by the
command's check or read here); a live capture's clock starts when the capture opens, after every
kernel is ready. Packets reach the lanes in the canonical cell order of the public grid
(capture/epochorder.py, and ``clocks.LiveClock`` on the wall clock). A live capture without epochs
of its own gets ``LIVE_EPOCH_SECONDS`` cells; a cell closes ``SourceSpec.lateness`` seconds after
its end, and packets of the next cell wait until then.
"""
from __future__ import annotations

import threading
import time
from dataclasses import replace

from dptop.engine.core.clock import TimeGrid
from dptop.engine.core.jit import compiles
from dptop.engine.core.keys import tick
from dptop.engine.core.worker import Worker
from dptop.engine.core.facts import Provenance, PublicFact, PublicFacts
from dptop.monitor import sources
from dptop.monitor.apply import APPLIED_NOTE, lanes_after, retired
from dptop.monitor.clocks import AHEAD, IDLE_TICK, LATE, LiveClock, LoopClock, PacedClock
from dptop.monitor.config import LIVE_EPOCH_SECONDS, RunConfig, SourceSpec
from dptop.monitor.fanout import Fanout
from dptop.monitor.lanes import Lane, LaneView, SessionSnapshot
from dptop.monitor.ledger import Ledger
from dptop.monitor.precheck import SourceFacts, read_facts, typed_facts
from dptop.monitor.states import Lifecycle, State
from dptop.monitor.truth import Truth, WorkerDied

__all__ = ["AHEAD", "COMPILING", "LATE", "Session", "State", "on_public_clock", "published"]

COMPILING = "compiling kernels (first use since install)..."
"""The starting phase while numba compiles a kernel the cache does not hold."""


def on_public_clock(config: RunConfig, seconds: float) -> RunConfig:
    """``config`` with epochs of ``seconds`` of the public clock where it names no epochs of its own:
    a capture that does not end (a live interface, a looped stream) releases as it runs."""
    s = config.settings
    if s.epoch_seconds is None and s.epoch_packets is None:
        return replace(config, settings=s.with_(epoch_seconds=seconds))
    return config


def published(snap) -> int:
    """Releases an algorithm has shown: its history, or at least the live view on screen (a
    sliding-window query made when displayed is a release too)."""
    return snap.releases or int(snap.latest is not None and snap.latest.guarantee is not None)


class Session:
    lane_worker: type[Worker] = Worker
    """What runs each lane's algorithm and what keeps the ground truth: threads of their own here;
    a session the caller drives step by step (``dptop.monitor.stepped``) runs both in its thread."""
    truth_keeper: type[Truth] = Truth

    def __init__(self, config: RunConfig, record_packets: int = 1 << 20, history: int = 4096,
                 ledger: Ledger | None = None):
        """``ledger``: the ledger of an earlier session over the same source (one ledger per
        source: ``dptop top``'s key switch, the window's restart), which this one joins."""
        self.config = config
        self.history = history
        self.truth = self.truth_keeper(record_packets)  # started by open(): a session never opened owns no thread
        self.ledger = Ledger() if ledger is None else ledger
        self._reading = 0  # this session's reading of the ledger's source (``Ledger.join``)
        self.life = Lifecycle()
        self.fanout = Fanout(self.truth, config.counting, live=False)
        self.clock: LiveClock | LoopClock | PacedClock | None = None
        self.source = None
        self.spec: SourceSpec | None = None
        self.facts: SourceFacts | None = None
        self.public: dict = {}
        self.public_source = ""  # where the public time range came from
        self.grid: TimeGrid | None = None
        self._generation = 0
        self._stopping = threading.Event()
        self._flush = False
        self._stopped_starting = False  # a stop came before the live source ran: ``_run`` says when it ended
        self._starter: threading.Thread | None = None
        self._synthetic: sources.SyntheticFile | None = None
        self._workers: list[Worker] = []  # every worker whose thread may still run (close joins them)
        self.retired: list[Lane] = []  # lanes an Apply replaced: their releases stay published

    # ----- what the views read -------------------------------------------------------------
    @property
    def state(self) -> State:
        return self.life.state

    @property
    def phase(self) -> str:
        return self.life.phase

    @property
    def error(self) -> str | None:
        return self.life.error

    @property
    def stopped_by(self) -> str | None:
        """A worker thread that died and ended the run early (its results are partial)."""
        return None if self.truth.error is None else f"the ground-truth thread stopped: {self.truth.error}"

    @property
    def lanes(self) -> dict[str, Lane]:
        """The current lanes by algorithm (replaced, never mutated: the source's thread iterates it)."""
        return self.fanout.lanes

    @property
    def dropped(self) -> dict[str, int]:
        """Packets dropped by the public clock, by reason."""
        return {} if self.clock is None else self.clock.dropped

    @property
    def cell(self) -> int:
        """The public clock's open cell (time epochs; 0 otherwise)."""
        return self.fanout.cell

    # ----- the run -------------------------------------------------------------------------
    def open(self, spec: SourceSpec, facts: SourceFacts | None = None) -> None:
        """Start reading ``spec`` (returns at once; see ``snapshot().state``). Once per session.
        ``facts``: what the command's check already read of the file (``precheck.check_source``),
        so the file is not read for them again."""
        with self.life.lock:
            self._begin(spec, facts)
            self._starter = threading.Thread(target=self._run, name="dptop-session", daemon=True)
            self._starter.start()

    def _begin(self, spec: SourceSpec, facts: SourceFacts | None) -> None:
        """Take ``spec`` as the session's one source (under ``life.lock``)."""
        if self.spec is not None:
            raise RuntimeError("a session reads one source; open a new session for another")
        self.spec, self.facts = spec, facts
        self._reading = self.ledger.join(rereads=spec.kind != "live")
        self.fanout.live = spec.kind == "live"
        if "exact" not in self.config.names or self.config.counting.weight == "bytes":
            self.truth.count_all()  # else the exact lane's counter answers (one exact table, not two)
        self.truth.start()
        self.life.move(State.STARTING, "opening the source")

    def _run(self) -> None:
        try:
            self._read()
        finally:  # a stop that came while the source was opening ends here, once nothing runs on
            with self.life.lock:
                if self._stopping.is_set() and self.state == State.STOPPING:
                    self.life.move(State.STOPPED)

    def _read(self) -> None:
        try:
            source = self._open_source(self.spec)
            if source is None:
                return
            self.source = source
            if not self.life.move(State.RUNNING):
                source.stop()
                return
            if isinstance(self.clock, PacedClock):
                self.clock.start()
            source.start()
            while source.is_alive() and not self._stopping.is_set() and not self.truth.died:
                source.join(self._due())
                self._tick()
            while isinstance(self.clock, PacedClock) and not self.clock.done and not self._stopping.is_set():
                time.sleep(self._due())  # the replay ended: its last cells close on the public clock
                self._tick()
            if self._stopping.is_set() and not self._flush:
                return
        except Exception as exc:  # noqa: BLE001 - shown by the views
            self.life.fail(f"{type(exc).__name__}: {exc}")
            return
        self._conclude(source)

    def _conclude(self, source) -> None:
        """The source ended (or was stopped with a flush): the public clock's last close, every
        lane's final releases, recorded in the ledger, and the session's end state."""
        try:
            if source is not None:
                source.stop()
                try:
                    source.join()
                except WorkerDied:  # the lanes still release what they read (``stopped_by``)
                    pass
            self._tick(final=True)
        except Exception as exc:  # noqa: BLE001 - shown by the views
            self.life.fail(f"{type(exc).__name__}: {exc}")
            return
        self._finish_lanes()
        self.life.move(State.FINISHED) or self.life.move(State.STOPPED)

    def _finish_lanes(self) -> None:
        self.truth.finish()
        self.truth.wait_idle()  # ``stopped_by`` is settled before the session says it ended
        for lane in list(self.lanes.values()):
            if lane.worker is not None:
                try:
                    lane.worker.finish()
                except Exception:  # noqa: BLE001 - the lane's snapshot carries the error
                    pass
                self._record(lane)

    def _tick(self, final: bool = False) -> None:
        if self.clock is not None:
            self.clock.tick(final)

    def _due(self) -> float:
        """Seconds until the public clock's next close (the session's thread looks then)."""
        return IDLE_TICK if self.clock is None else max(1e-3, self.clock.due())

    # ----- the source ----------------------------------------------------------------------
    def _open_source(self, spec: SourceSpec):
        if spec.kind == "live":
            return self._open_live(spec)
        sources.refuse_data_stop(spec, self.config.names, self.config.settings)
        path = spec.path
        if spec.kind == "synth":
            self.life.phase = "writing the synthetic stream"
            self._synthetic = sources.SyntheticFile(spec)
            path = self._synthetic.path
        if self.facts is None or not self.facts.fits(path, spec, self.config.settings.epoch_seconds):
            self.life.phase = "reading the capture's public facts"
            self.facts = read_facts(path, spec.time_range, self.config.settings.epoch_seconds, spec.loop)
        self.public = self.facts.public()
        self.public_source, self.grid = self.facts.provenance, self.facts.grid
        sink = self.fanout
        if spec.loop and self.grid is not None:
            self.clock = sink = LoopClock(self.grid, self.fanout)
        elif spec.speed is not None and self.grid is not None:  # releases on the replay's public clock
            counts = sources.cell_counts(path, self.grid)
            self.clock = sink = PacedClock(self.grid, spec.speed, spec.lateness, self.fanout, counts)
        if self._stopping.is_set() or not self._start_lanes():
            return None
        plan = None if isinstance(self.clock, LoopClock) else self.facts.plan  # canonical order on the grid
        return sources.file_replay(path, sink, spec, self.facts, plan)

    def _open_live(self, spec: SourceSpec):
        sources.refuse_data_stop(spec, self.config.names, self.config.settings)
        self.config = on_public_clock(self.config, LIVE_EPOCH_SECONDS)
        epoch_seconds = self.config.settings.epoch_seconds
        if epoch_seconds is not None:  # provisional, so the lanes can be built while kernels compile
            self.public["time_range"] = (time.time_ns(), None)
        # kernels first, the lanes' then the capture's and the lanes' later paths (one compile at a
        # time; a stop does not wait for the one under way): the socket opens only once they are ready
        if not self._start_lanes() or not self._start_lanes(sources.warm_live(self.lanes.values()), build=False):
            return None
        sink = self.fanout
        if epoch_seconds is not None:  # the clock starts now, with nothing fed yet
            self.grid, self.public["time_range"] = sources.wall_grid(spec, epoch_seconds)
            self.public_source = sources.LIVE_CLOCK
            self.clock = sink = LiveClock(self.grid, spec.lateness, self.fanout)
            if not self._restart_all() or not self._start_lanes(build=False):
                return None
        return sources.live_capture(spec, sink)

    def _start_lanes(self, warming: threading.Thread | None = None, build: bool = True) -> bool:
        """Build the lanes and wait until every kernel is compiled (or loaded from the cache), and
        ``warming`` has ended; False at once on a stop. The phase says "compiling kernels" only
        once numba compiles one (a kernel missing from the cache)."""
        self.life.phase = "starting the algorithms..."
        before = compiles()
        with self.life.lock:
            if self._stopping.is_set():
                return False
            if build:
                self.fanout.lanes = {n: self._lane(n) for n in self.config.names}
        while (waiting := [lane for lane in self.lanes.values() if not lane.ready]) or (
                warming is not None and warming.is_alive()):
            if self._stopping.is_set():
                return False
            if compiles() > before:
                self.life.phase = COMPILING
            if waiting:
                waiting[0].worker.wait_warmed(0.02)
            else:
                warming.join(0.02)
        self.life.phase = ""
        return True

    def _restart_all(self) -> bool:
        """Rebuild every lane (False, nothing built, once the session is stopping)."""
        with self.life.lock:
            if self._stopping.is_set():
                return False
            old, self.fanout.lanes = self.lanes, {n: self._lane(n) for n in self.config.names}
        for lane in old.values():
            if lane.worker is not None:
                lane.worker.stop()
        return True

    def public_facts(self) -> PublicFacts:
        """The public facts so far (``public``), typed with their provenance: what every lane is built from."""
        return typed_facts(self.public, self.public_source)

    def _lane(self, name: str) -> Lane:
        self._generation += 1
        live = self.fanout.live
        clock = self.public.get("time_range", (None,))[0] if live else None
        lane = Lane(name, self.config, self.public_facts(), self._generation, self.history,
                    clock_start=None if clock is None else clock / 1e9, live=live, worker=self.lane_worker)
        if lane.worker is not None:
            self._workers = [w for w in self._workers if w.thread.is_alive()]
            self._workers.append(lane.worker)
            if self.grid is not None:  # the clock's tick naming the lane's first cell
                lane.worker.feed(tick(self.cell))
        return lane

    # ----- controls ------------------------------------------------------------------------
    def pause(self) -> None:
        with self.life.lock:
            if self.source is not None and self.life.move(State.PAUSED):
                self.source.pause()
                if isinstance(self.clock, PacedClock):  # a pause is public: the replay's clock stands still
                    self.clock.pause()

    def resume(self) -> None:
        with self.life.lock:
            if self.source is not None and self.state == State.PAUSED and self.life.move(State.RUNNING):
                if isinstance(self.clock, PacedClock):
                    self.clock.resume()
                self.source.resume()

    def tuned(self, name: str, parameter: str, value) -> None:
        """Record that ``name``'s ``parameter`` = ``value`` was chosen by a sweep over the recorded
        packets (before the Apply that puts it in the run): the ledger and the private view say the
        choice is not covered (engine/core/facts.py, CHOSEN_FROM_DATA)."""
        self.ledger.record_tuning(name, PublicFact(
            parameter, value, Provenance.CHOSEN_FROM_DATA,
            "a sweep scored each value against the exact answer on the recorded packets; the choice depends "
            "on those packets and no guarantee covers it (Liu and Talwar 2019; Papernot and Steinke 2022)"))

    def apply(self, config: RunConfig) -> list[str]:
        """Switch to ``config`` (``dptop.monitor.apply``). Returns the restarted names. Raises
        ``ValueError`` (one line), the session unchanged, for what the command line refuses on
        this source (``sources.refuse_data_stop``: epochs of packets on a live capture or a paced
        replay, with private algorithms). A capture that does not end keeps its clock's epochs
        where ``config`` names none (the window's "whole stream": ``on_public_clock``)."""
        with self.life.lock:
            old = self.lanes
            if not (self.state.active and not self._stopping.is_set() and (self.source is not None or bool(old))):
                return []  # the source has ended: its lanes and parameters stay as published
            sources.refuse_data_stop(self.spec, config.names, config.settings)
            if self.grid is not None and (self.spec.kind == "live" or self.spec.loop):
                config = on_public_clock(config, self.config.settings.epoch_seconds)  # the clock it runs on
            self.config = config
            new, restarted = lanes_after(old, config, self.public_facts(), self._lane)
            self.fanout.lanes = new
        for lane in retired(old, new):
            lane.worker.stop()
            self._record(lane)
            self.retired.append(lane)
        if restarted:
            self.ledger.note(APPLIED_NOTE)
        return restarted

    def stop(self, flush: bool = False) -> None:
        """Ask every thread to end (returns at once; idempotent). ``flush``: stop the source but
        let the algorithms finish what they have (final releases, e.g. after Ctrl-C)."""
        with self.life.lock:
            # a live start may still open the socket: ``_run`` says stopped once it ended (a file's
            # start, reading the file's facts, is left to end by itself, as before)
            self._stopped_starting |= self.state == State.STARTING and self.fanout.live
            self._flush = flush and self.state in (State.RUNNING, State.PAUSED)
            self._stopping.set()
            self.life.move(State.STOPPING)
        if isinstance(self.clock, PacedClock):
            self.clock.stop()
        if self.source is not None:
            self.source.stop()
        if not self._flush:
            for worker in list(self._workers):
                worker.stop()
            self.truth.stop()
            with self.life.lock:  # a stop while starting: ``_run`` says it once nothing it opened runs on
                if self.state == State.STOPPING and not (self._stopped_starting and self._starter.is_alive()):
                    self.life.move(State.STOPPED)

    def wait(self, timeout: float | None = None) -> State:
        """Wait for the session to end (finished, stopped or failed); returns the state."""
        if self._starter is not None and self._starter.ident is not None:
            self._starter.join(timeout)
        with self.life.lock:
            if self.state == State.STOPPING and (self._starter is None or not self._starter.is_alive()):
                self.life.move(State.STOPPED)
            return self.state

    def threads(self) -> list[threading.Thread]:
        """Every thread this session started."""
        out = [t for t in (self._starter, self.truth.thread) if t is not None]
        if self.source is not None and self.source.thread is not None:
            out.append(self.source.thread)
        out.extend(w.thread for w in self._workers)
        return out

    def close(self, timeout: float = 1.0) -> list[str]:
        """Stop and wait up to ``timeout`` seconds in total; returns the names of threads still alive."""
        self.stop()
        deadline = time.monotonic() + timeout
        threads = self.threads()
        for t in threads:
            if t.ident is not None:
                t.join(max(0.0, deadline - time.monotonic()))
        if self._synthetic is not None and not (self._starter and self._starter.is_alive()):
            self._synthetic.cleanup()
        return [t.name for t in threads if t.is_alive()]

    # ----- reading -------------------------------------------------------------------------
    def _record(self, lane: Lane) -> None:
        snap = lane.snapshot()
        if snap is not None:
            self.ledger.record(lane.name, lane.generation, snap.guarantee, published(snap), reading=self._reading)

    def snapshot(self, lanes: int | None = None) -> SessionSnapshot:
        """The session now. ``lanes``: refresh at most that many lanes' views (the least recently
        refreshed) and reuse the others' previous ones, so a 20 Hz timer spreads the lock work."""
        current = list(self.lanes.values())
        due = current if lanes is None else sorted(current, key=lambda l: l.viewed_at)[:lanes]
        now = time.monotonic()
        for lane in due:
            snap = lane.snapshot(want_live=True)  # a view shows it: the next live view is due
            truth = None
            if snap is not None:
                self.ledger.record(lane.name, lane.generation, snap.guarantee, published(snap), reading=self._reading)
                if snap.latest is not None:
                    s = lane.settings
                    self.truth.request(lane.name, snap.latest, lane.origin or 0, s.k, s.gamma, lane.unseen)
                truth = self.truth.result(lane.name)
            lane.view = LaneView(lane.name, lane.generation, lane.origin or 0, lane.settings, snap, lane.error,
                                 truth)
            lane.viewed_at = now
        views = [lane.view if lane.view is not None else
                 LaneView(lane.name, lane.generation, lane.origin or 0, lane.settings, None, lane.error)
                 for lane in current]
        stats = self.source_stats()
        state = self.state
        if state == State.RUNNING and stats is not None and stats.paused:
            state = State.PAUSED
        return SessionSnapshot(time.monotonic(), state, self.phase, self.error or self.truth.error, stats,
                               "" if self.spec is None else self.spec.label(), tuple(views), self.truth.fed,
                               dict(self.dropped), self.ledger.to_json(), self.fanout.missed)

    def exact(self, top: int | None) -> tuple[int, int, tuple]:
        """(packets, distinct keys, the ``top`` heaviest; None = all) of the whole session: the
        truth's counter, or the ``exact`` lane's when that one counts every packet."""
        if self.truth.total is not None:
            return self.truth.exact(top)
        lane = self.lanes.get("exact")
        if lane is None or lane.origin not in (None, 0):  # never started, or restarted
            return 0, 0, ()
        return lane.exact(top) or (0, 0, ())

    def source_stats(self):
        """The source's counters (``dptop.capture.source.SourceStats``), or None before it opened."""
        return None if self.source is None else self.source.stats()

    def releases(self, name: str):
        """``name``'s releases, oldest first: those of the lanes an Apply replaced, then the current one's."""
        lanes = [*(r for r in self.retired if r.name == name), self.lanes.get(name)]
        return [rel for lane in lanes if lane is not None and lane.worker is not None
                for rel in lane.worker.releases()]
