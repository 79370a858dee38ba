"""One monitoring session, headless: the source, one runner per algorithm ("lane"), ground truth,
the public clock of time epochs and the privacy ledger. The CLI and the GUI are views over it.

States: ``idle -> starting -> running (<-> paused) -> finished``, or ``stopping -> stopped`` on a
stop, or ``failed``. Every method is valid in every state: a stop or close that lands while the
source is still being opened (counting a file, planning epochs, compiling kernels) ends the start
instead of being lost, and ``close`` joins every thread the session ever started.

Public facts a guarantee takes as given (``public``): a replay's record count (the continual
observation horizon) and, with time epochs, the time range (declared, or the file's own first and
last stamps); a live capture's clock starts when the capture opens, after every kernel is ready.
The source's sink is a tee: truth first (lossless), then every lane, ``feed`` (lossless) for
replays and ``offer`` (counted drops) for live capture, all in the canonical cell order of the
public grid (capture/epochorder.py, and ``_live_sink`` on the wall clock). A live capture without
epochs of its own gets ``LIVE_EPOCH_SECONDS`` cells; a cell closes ``SourceSpec.lateness``
seconds after its end, and packets of the next cell wait until then.
"""
from __future__ import annotations

import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from dptop.engine.core import registry
from dptop.engine.core.clock import MAX_CELLS, TimeGrid
from dptop.engine.core.jit import compiles
from dptop.engine.core.keys import KeyBatch, tick
from dptop.engine.core.runner import Runner
from dptop.engine.privacy.facts import Provenance, PublicFact
from dptop.monitor.config import LIVE_EPOCH_SECONDS, RunConfig, SourceSpec, affected
from dptop.monitor.ledger import Ledger
from dptop.monitor.lanes import Lane, LaneView, SessionSnapshot
from dptop.monitor.truth import Truth

REPLAY_BATCH = 1 << 16
COMPILING = "compiling kernels (first start after install)..."
"""The starting phase while numba compiles a kernel the cache does not hold."""
"""Replay batch size: large, so the per-batch Python work of the threads stays small; slow
algorithms get it in chunks (``Lane.chunks``)."""

LATE = "stamped in an epoch the clock had closed"
AHEAD = "stamped ahead of the capture clock"

STATES = ("idle", "starting", "running", "paused", "finished", "stopping", "stopped", "failed")


def joined(pieces: list[KeyBatch], cell: int) -> KeyBatch:
    """The packets of ``pieces`` (all of one cell, in arrival order) as one batch."""
    optional = [None if any(getattr(p, f) is None for p in pieces) else np.concatenate([getattr(p, f) for p in pieces])
                for f in ("dst", "length")]
    return KeyBatch(np.concatenate([p.keys for p in pieces]), np.concatenate([p.ts_ns for p in pieces]),
                    *optional, epoch=cell)


def published(snap) -> int:
    """Releases an algorithm has shown: its history, or at least the live view on screen (a
    sliding-window query made when displayed is a release too)."""
    return snap.releases or int(snap.latest is not None and snap.latest.guarantee is not None)


class Session:
    def __init__(self, config: RunConfig, record_packets: int = 1 << 20, history: int = 4096, make=registry.make):
        self.config = config
        self._make = make  # name, settings -> algorithm (the audit's broken variants substitute one)
        self.history = history
        self.truth = Truth(record_packets)  # started by open(): a session never opened owns no thread
        self.ledger = Ledger()
        self.lanes: dict[str, Lane] = {}  # replaced, never mutated (the sink iterates it)
        self.source = None
        self.spec: SourceSpec | None = None
        self.public: dict = {}
        self.public_source = ""  # where the public time range came from
        self.grid: TimeGrid | None = None
        self.state, self.phase, self.error = "idle", "", None
        self.dropped: dict[str, int] = {}
        self._cell = 0  # the public clock's current cell (time epochs)
        self._clock = threading.RLock()  # the capture thread and the session thread both move the clock
        self._pending: dict[int, list[KeyBatch]] = {}  # live: packets of cells after the open one, held
        # until the open cell closes (its end + the lateness allowance on the wall clock)
        self._generation = 0
        self._lock = threading.RLock()  # state transitions and the lane set
        self._stopping = threading.Event()
        self._flush = False
        self._starter: threading.Thread | None = None
        self._tmp = None
        self._runners: list[Runner] = []  # every runner whose threads may still run (close joins them)

    # ----- state ---------------------------------------------------------------------------
    def _set(self, state: str, phase: str = "") -> bool:
        """Move to ``state`` unless a stop already decided the outcome."""
        with self._lock:
            if self._stopping.is_set() and state in ("starting", "running", "paused", "finished"):
                return False
            self.state, self.phase = state, phase
            return True

    def open(self, spec: SourceSpec) -> None:
        """Start reading ``spec`` (returns at once; see ``snapshot().state``). Once per session."""
        with self._lock:
            if self._starter is not None:
                raise RuntimeError("a session reads one source; open a new session for another")
            self.spec = spec
            if "exact" not in self.config.names or self.config.counting.weight == "bytes":
                self.truth.count_all()  # else the exact lane's counter answers (one exact table, not two)
            self.truth.start()
            self._set("starting", "opening the source")
            self._starter = threading.Thread(target=self._run, name="dptop-session", daemon=True)
            self._starter.start()

    def _run(self) -> None:
        try:
            source = self._open_source(self.spec)
            if source is None:
                return
            self.source = source
            if not self._set("running"):
                source.stop()
                return
            source.start()
            while source.is_alive() and not self._stopping.is_set():
                source.join(0.1)
                self._tick()
            if self._stopping.is_set() and not self._flush:
                return
            source.stop()
            source.join()
            self._tick(final=True)
        except Exception as exc:  # noqa: BLE001 - shown by the views
            with self._lock:
                self.error, self.state = f"{type(exc).__name__}: {exc}", "failed"
            return
        self._finish_lanes()
        self._set("finished") or self._set_stopped()

    def _set_stopped(self) -> None:
        with self._lock:
            if self.state != "failed":
                self.state = "stopped"

    def _finish_lanes(self) -> None:
        self.truth.finish()
        for lane in list(self.lanes.values()):
            if lane.runner is not None:
                try:
                    lane.runner.finish()
                except Exception:  # noqa: BLE001 - the lane's snapshot carries the error
                    pass
                self._record(lane)

    # ----- the source ----------------------------------------------------------------------
    def _open_source(self, spec: SourceSpec):
        if spec.kind == "live":
            s = self.config.settings
            if s.epoch_seconds is None and s.epoch_packets is None:  # releases while the capture runs
                self.config = replace(self.config, settings=s.with_(epoch_seconds=LIVE_EPOCH_SECONDS))
            return self._open_live(spec, self.config.settings.epoch_seconds)
        epoch_seconds = self.config.settings.epoch_seconds
        from dptop.capture.pcap import count_packets
        from dptop.capture.replay import FileReplay

        path = spec.path
        if spec.kind == "synth":
            from dptop.capture.synth import write_zipf_pcap

            self.phase = "writing the synthetic stream"
            self._tmp = tempfile.TemporaryDirectory(prefix="dptop-synth-")
            path = str(Path(self._tmp.name) / "zipf.pcap")
            write_zipf_pcap(path, spec.skew, spec.domain, spec.length, spec.seed, rate_pps=spec.rate)
        self.phase = "counting packets"
        self.public = {"stream_length": count_packets(path)}
        if spec.loop and epoch_seconds is not None:
            return self._open_loop(path, spec, epoch_seconds)
        if epoch_seconds is not None:
            self.phase = "planning time epochs"
            start, end = self._time_range(path, spec.time_range, epoch_seconds)
            self.public["time_range"] = (int(start), int(end))
            self.grid = TimeGrid.over(start, end, epoch_seconds)
        if self._stopping.is_set():
            return None
        if not self._start_lanes():
            return None
        return FileReplay(path, self._sink, speed=spec.speed, loop=spec.loop, batch_size=REPLAY_BATCH,
                          records=self.public["stream_length"], grid=self._replay_grid(), max_gap=spec.max_gap)

    def _open_loop(self, path, spec: SourceSpec, epoch_seconds: float):
        """A looping synthetic stream with time epochs: its stamps only grow (each pass is shifted
        past the last), so the grid is open-ended from the stream's first stamp (a public fact of
        the generator, like a live capture's start) and each packet goes to the cell of its stamp."""
        from dptop.capture import epochorder
        from dptop.capture.replay import FileReplay

        start = (epochorder.time_range(path) or (0, 0))[0]
        self.public["time_range"] = (start, None)
        self.public_source = "the synthetic stream's first stamp (open-ended: the stream loops)"
        self.grid = TimeGrid(start, round(epoch_seconds * 1e9), MAX_CELLS)
        if self._stopping.is_set() or not self._start_lanes():
            return None
        return FileReplay(path, self._cell_sink, speed=spec.speed, loop=True, batch_size=REPLAY_BATCH,
                          records=self.public["stream_length"], max_gap=spec.max_gap)

    def _cell_sink(self, batch: KeyBatch) -> bool:
        """Packets in stamp order, each run of one cell tagged with it (epochorder.by_cell)."""
        from dptop.capture.epochorder import OUTSIDE, by_cell

        for cell, piece in by_cell(batch, self.grid):
            if cell < 0:
                self.dropped[OUTSIDE] = self.dropped.get(OUTSIDE, 0) + len(piece)
            elif not self._sink(piece):
                return False
        return True

    def _time_range(self, path, declared: tuple[int, int] | None, epoch_seconds: float) -> tuple[int, int]:
        """The public range of a replay's time epochs and its provenance (``precheck.public_time_range``)."""
        from dptop.monitor.precheck import public_time_range

        span, self.public_source = public_time_range(path, declared, epoch_seconds)
        return span

    def _replay_grid(self) -> TimeGrid | None:
        """The grid the replay reads the file in (its canonical order)."""
        return self.grid

    def _open_live(self, spec: SourceSpec, epoch_seconds: float | None):
        from dptop.capture.live import LiveCapture

        if epoch_seconds is not None:  # provisional, so the lanes can be built while kernels compile
            self.public["time_range"] = (time.time_ns(), None)
        if not self._start_lanes():  # kernels first: the socket opens only once they are ready
            return None
        if epoch_seconds is not None:  # the clock starts now, with nothing fed yet
            start = time.time_ns()
            end = None if spec.duration is None else start + round(spec.duration * 1e9)
            self.public["time_range"] = (start, end)
            self.public_source = "the capture's wall clock"
            self.grid = TimeGrid(start, round(epoch_seconds * 1e9), MAX_CELLS) if end is None else \
                TimeGrid.over(start, end, epoch_seconds)
            self._restart_all()
            if not self._start_lanes(build=False):
                return None
        return LiveCapture(spec.iface, self._live_sink, bpf=spec.bpf or None, count=spec.count,
                           duration=spec.duration)

    def _start_lanes(self, build: bool = True) -> bool:
        """Build the lanes and wait until every kernel is compiled (or loaded from the cache); the
        phase says "compiling kernels" only once numba compiles one (a kernel missing from the cache)."""
        self.phase = "starting the algorithms..."
        before = compiles()
        with self._lock:
            if self._stopping.is_set():
                return False
            if build:
                self.lanes = {n: self._lane(n) for n in self.config.names}
        while not all(lane.ready for lane in self.lanes.values()):
            if self._stopping.is_set():
                return False
            if compiles() > before:
                self.phase = COMPILING
            time.sleep(0.02)
        self.phase = ""
        return True

    def _restart_all(self) -> None:
        with self._lock:
            old, self.lanes = self.lanes, {n: self._lane(n) for n in self.config.names}
        for lane in old.values():
            if lane.runner is not None:
                lane.runner.stop()

    def _lane(self, name: str) -> Lane:
        self._generation += 1
        clock = self.public.get("time_range", (None,))[0] if self.spec is not None and self.spec.kind == "live" else None
        lane = Lane(name, self.config, self.public, self._generation, self.history, self._make,
                    clock_start=None if clock is None else clock / 1e9)
        if lane.runner is not None:
            self._runners = [r for r in self._runners if any(w.thread.is_alive() for w in r.workers)]
            self._runners.append(lane.runner)
            if self.grid is not None:  # the clock's tick naming the lane's first cell
                lane.runner.feed(tick(self._cell))
        return lane

    # ----- the sink ------------------------------------------------------------------------
    def _counted(self, batch: KeyBatch) -> tuple[KeyBatch, tuple | None]:
        """``batch`` as the algorithms count it (dptop.monitor.config.Counting): the key kind's keys
        (packets without one, such as a port, left out), and in bytes each packet repeated
        ⌈length/unit⌉ times, at most ``cap``; plus, in bytes, (keys, true byte counts) for the exact baseline."""
        c = self.config.counting
        if c.key == "src" and c.weight == "packets":
            return batch, None
        keys, has = c.kind.keys(batch)
        length = batch.length
        if has is not None:
            keys, length, batch = keys[has], None if length is None else length[has], batch.take(has, batch.epoch)
        if c.weight == "packets":
            return KeyBatch(keys, batch.ts_ns, epoch=batch.epoch), None
        if length is None:
            raise ValueError("--weight bytes: this source does not provide packet lengths")
        units = np.clip(-(-length.astype(np.int64) // c.unit), 1, c.cap)
        counted = KeyBatch(np.repeat(keys, units, axis=0), np.repeat(batch.ts_ns, units), epoch=batch.epoch)
        return counted, (keys, length)

    def _sink(self, batch: KeyBatch) -> bool:
        batch, exact = self._counted(batch)
        if batch.epoch is not None:
            self._cell = batch.epoch
        first = self.truth.feed(batch, exact)
        live = self.spec is not None and self.spec.kind == "live"
        accepted = True
        for lane in list(self.lanes.values()):
            if lane.runner is None:
                continue
            if lane.origin is None:
                lane.origin = first
            for piece in lane.chunks(batch):
                if live and len(piece):
                    accepted = lane.runner.offer(piece) and accepted
                else:  # replays, and the clock's ticks: a lost tick would leave its epochs unreleased
                    lane.runner.feed(piece)
        return accepted

    def _live_sink(self, batch: KeyBatch) -> bool:
        """Live packets on the wall-clock grid: each to the cell of its own stamp. The open cell
        takes its packets at once; packets of a later cell the wall clock has reached wait until
        the open cell closes (``SourceSpec.lateness`` after its end); stamps in a closed cell or
        ahead of the wall clock are dropped and counted (truth and lanes alike never see them)."""
        if self.grid is None:
            return self._sink(batch)
        with self._clock:
            return self._place(batch)

    def _place(self, batch: KeyBatch) -> bool:
        self._tick()
        cells = self.grid.cell_of(batch.ts_ns)
        wall = self._wall_cell(time.time_ns())
        late = cells < self._cell
        ahead = cells > wall
        for reason, mask in ((LATE, late), (AHEAD, ahead)):
            if mask.any():
                self.dropped[reason] = self.dropped.get(reason, 0) + int(np.count_nonzero(mask))
        later = ~(late | ahead) & (cells > self._cell)
        for cell in np.unique(cells[later]).tolist():
            self._pending.setdefault(cell, []).append(batch.take(np.flatnonzero(cells == cell), cell))
        keep = np.flatnonzero(cells == self._cell)
        return self._sink(batch.take(keep, self._cell)) if len(keep) else True

    def _wall_cell(self, now_ns: int) -> int:
        cell = int(self.grid.cell_of(np.array([now_ns]))[0])
        return self.grid.cells if cell < 0 and now_ns >= self.grid.start_ns else cell

    def _tick(self, final: bool = False) -> None:
        """Live capture: close the cells the wall clock has left ``lateness`` seconds ago (an
        empty tagged batch), then hand over the packets held for the cells that opened."""
        if self.grid is None or self.spec is None or self.spec.kind != "live":
            return
        with self._clock:
            self._close_cells(final)

    def _close_cells(self, final: bool) -> None:
        now = time.time_ns()
        if final:  # the stop is public: the cell it falls in is the last one released
            cell = self._wall_cell(now) + 1
        else:
            cell = self._wall_cell(now - round(self.spec.lateness * 1e9))
        if cell <= self._cell:
            return
        for held in sorted(c for c in self._pending if c <= cell):
            self._sink(tick(held))
            self._sink(joined(self._pending.pop(held), held))  # one batch: the lanes' queues are short
        if cell > self._cell:
            self._cell = cell
            self._sink(tick(cell))

    # ----- controls ------------------------------------------------------------------------
    def pause(self) -> None:
        with self._lock:
            if self.source is not None and self.state == "running":
                self.source.pause()
                self.state = "paused"

    def resume(self) -> None:
        with self._lock:
            if self.source is not None and self.state == "paused":
                self.source.resume()
                self.state = "running"

    def tuned(self, name: str, parameter: str, value) -> None:
        """Record that ``name``'s ``parameter`` = ``value`` was chosen by a sweep over the recorded
        packets (before the Apply that puts it in the run): the ledger and the private view say the
        choice is not covered (engine/privacy/facts.py, CHOSEN_FROM_DATA)."""
        self.ledger.record_tuning(name, PublicFact(
            parameter, value, Provenance.CHOSEN_FROM_DATA,
            "a sweep scored each value against the exact answer on the recorded packets; the choice depends "
            "on those packets and no guarantee covers it (Liu and Talwar 2019; Papernot and Steinke 2022)"))

    def apply(self, config: RunConfig) -> list[str]:
        """Switch to ``config``; restarts (new runner, fresh state) exactly the algorithms whose
        settings changed or that were enabled, stops the disabled ones. Releases published
        before stay in the ledger. Returns the restarted names."""
        with self._lock:
            old = self.lanes
            new: dict[str, Lane] = {}
            restarted = []
            self.config = config
            running = self.state in ("starting", "running", "paused") and not self._stopping.is_set()
            for name in config.names:
                lane = old.get(name)
                target = config.settings_for(name, self.public)
                if lane is not None and not affected(name, lane.settings, target) and lane.error is None:
                    new[name] = lane
                elif running and (self.source is not None or old):
                    new[name] = self._lane(name)
                    restarted.append(name)
            self.lanes = new
        for name, lane in old.items():
            if new.get(name) is not lane and lane.runner is not None:
                lane.runner.stop()
                self._record(lane)
        if restarted:
            self.ledger.note("parameters applied during the run take effect on the packets after the Apply; "
                             "releases published before stay counted")
        return restarted

    def stop(self, flush: bool = False) -> None:
        """Ask every thread to end (returns at once; idempotent). ``flush``: stop the source but
        let the algorithms finish what they have (final releases, e.g. after Ctrl-C)."""
        with self._lock:
            self._flush = flush and self.state in ("running", "paused")
            self._stopping.set()
            if self.state not in ("failed", "finished", "stopped"):
                self.state = "stopping"
        if self.source is not None:
            self.source.stop()
        if not self._flush:
            for runner in list(self._runners):
                runner.stop()
            self.truth.stop()
            with self._lock:
                if self.state == "stopping":
                    self.state = "stopped"

    def wait(self, timeout: float | None = None) -> str:
        """Wait for the session to end (finished, stopped or failed); returns the state."""
        if self._starter is not None and self._starter.ident is not None:
            self._starter.join(timeout)
        with self._lock:
            if self.state == "stopping" and (self._starter is None or not self._starter.is_alive()):
                self.state = "stopped"
            return self.state

    def threads(self) -> list[threading.Thread]:
        """Every thread this session started."""
        out = [t for t in (self._starter, self.truth._thread) if t is not None]
        if self.source is not None and self.source._thread is not None:
            out.append(self.source._thread)
        for runner in self._runners:
            out.extend(w.thread for w in runner.workers)
        return out

    def close(self, timeout: float = 1.0) -> list[str]:
        """Stop and wait up to ``timeout`` seconds in total; returns the names of threads still alive."""
        self.stop()
        deadline = time.monotonic() + timeout
        threads = self.threads()
        for t in threads:
            if t.ident is not None:
                t.join(max(0.0, deadline - time.monotonic()))
        if self._tmp is not None and not (self._starter and self._starter.is_alive()):
            self._tmp.cleanup()
        return [t.name for t in threads if t.is_alive()]

    # ----- reading -------------------------------------------------------------------------
    def _record(self, lane: Lane) -> None:
        snap = lane.snapshot()
        if snap is not None:
            self.ledger.record(lane.name, lane.generation, snap.guarantee, published(snap))

    def snapshot(self, lanes: int | None = None) -> SessionSnapshot:
        """The session now. ``lanes``: refresh at most that many lanes' views (the least recently
        refreshed) and reuse the others' previous ones, so a 20 Hz timer spreads the lock work."""
        current = list(self.lanes.values())
        due = current if lanes is None else sorted(current, key=lambda l: l.viewed_at)[:lanes]
        now = time.monotonic()
        for lane in due:
            snap = lane.snapshot()
            truth = None
            if snap is not None:
                self.ledger.record(lane.name, lane.generation, snap.guarantee, published(snap))
                if snap.latest is not None:
                    s = lane.settings
                    self.truth.request(lane.name, snap.latest, lane.origin or 0, s.k, s.gamma)
                truth = self.truth.result(lane.name)
            lane.view = LaneView(lane.name, lane.generation, lane.origin or 0, lane.settings, snap, lane.error,
                                 truth)
            lane.viewed_at = now
        views = [lane.view if lane.view is not None else
                 LaneView(lane.name, lane.generation, lane.origin or 0, lane.settings, None, lane.error)
                 for lane in current]
        stats = self.source_stats()
        state = self.state
        if state == "running" and stats is not None and stats.paused:
            state = "paused"
        return SessionSnapshot(time.monotonic(), state, self.phase, self.error or self.truth.error, stats,
                               "" if self.spec is None else self.spec.label(), tuple(views), self.truth.fed,
                               dict(self.dropped), self.ledger.to_json())

    def exact(self, top: int | None) -> tuple[int, int, tuple]:
        """(packets, distinct keys, the ``top`` heaviest; None = all) of the whole session: the
        truth's counter, or the ``exact`` lane's when that one counts every packet."""
        if self.truth.total is not None:
            return self.truth.exact(top)
        lane = self.lanes.get("exact")
        if lane is None or lane.runner is None or lane.origin not in (None, 0):  # never started, or restarted
            return 0, 0, ()
        counter = lane.runner.algorithms[0].counter
        return counter.total, counter.size, counter.top(top)

    @property
    def cell(self) -> int:
        """The public clock's open cell (time epochs; 0 otherwise)."""
        return self._cell

    def source_stats(self):
        """The source's counters (``dptop.capture.source.SourceStats``), or None before it opened."""
        return None if self.source is None else self.source.stats()

    def releases(self, name: str):
        lane = self.lanes.get(name)
        return [] if lane is None or lane.runner is None else lane.runner.releases(name)
