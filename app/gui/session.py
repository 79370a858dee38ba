"""One monitoring session: a packet source, one runner per algorithm ("lane") and the truth thread.

Headless (no Qt): the window owns a ``Session`` and polls ``snapshot()`` from its timer. Every
lane is its own ``dptop.engine.core.runner.Runner`` with one algorithm, so applying new settings restarts
only the algorithms they affect: the old runner is stopped and a new one joins the stream at
the current position (its ``origin``, used to line its spans up with the truth's recording).

The source's sink is a tee: truth first (lossless), then every lane — ``feed`` (lossless) for
file replays, ``offer`` (counted drops) for live capture. Opening a source (counting a file's
packets, writing a synthetic capture, building the algorithms) happens on a starter thread that
then waits for the source to end and publishes the final releases, so the GUI thread never runs
engine work.
"""
from __future__ import annotations

import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from dptop.engine.core import registry
from dptop.engine.core.keys import KeyBatch
from dptop.engine.core.runner import AlgorithmSnapshot, Runner
from dptop.engine.core.settings import Settings

from dptop.gui.truth import Truth

GUI_BATCH = 1 << 16
"""Replay batch size: large, so the per-batch Python work of the threads (which competes with the
GUI for the GIL) stays small; slow algorithms get it in chunks (``Lane.chunks``)."""

CHUNK_SECONDS = 0.2
"""A lane is fed chunks it processes in about this long, so it notices a stop well within a second."""

NON_PRIVATE_FIELDS = ("k", "k_tilde", "extra")
"""The settings fields the non-private baselines read (a change of epsilon does not restart them)."""


@dataclass(frozen=True)
class SourceSpec:
    """What to read: ``kind`` is "file", "live" or "synth"."""

    kind: str = "file"
    path: str | None = None
    speed: float | None = None  # None: as fast as possible
    loop: bool = False
    iface: str | None = None
    bpf: str | None = None
    skew: float = 1.1
    domain: int = 1 << 16
    length: int = 1 << 18
    seed: int = 1
    rate: int = 20_000

    def label(self) -> str:
        if self.kind == "file":
            return Path(self.path or "").name
        if self.kind == "live":
            return f"{self.iface}" + (f" [{self.bpf}]" if self.bpf else "")
        return f"synthetic Zipf({self.skew:g}) over {self.domain} sources"


@dataclass(frozen=True)
class RunConfig:
    """The enabled algorithms, the shared settings and per-algorithm ``extra`` options."""

    names: tuple[str, ...]
    settings: Settings = field(default_factory=Settings)
    extras: dict = field(default_factory=dict)

    def settings_for(self, name: str, stream_length: int | None = None) -> Settings:
        s = self.settings.with_(extra=dict(self.extras.get(name, {})))
        return s.with_(stream_length=stream_length) if stream_length else s


def affected(name: str, old: Settings, new: Settings) -> bool:
    """Whether switching ``name`` from ``old`` to ``new`` settings needs a restart."""
    if registry.get(name).private:
        return old != new
    return any(getattr(old, f) != getattr(new, f) for f in NON_PRIVATE_FIELDS)


def build(name: str, settings: Settings):
    """Construct algorithm ``name`` (raises the constructor's ValueError with its reason)."""
    return registry.make(name, settings)


class Lane:
    """One algorithm's runner and where it joined the stream."""

    def __init__(self, name: str, settings: Settings, generation: int):
        self.name, self.settings, self.generation = name, settings, generation
        self.origin: int | None = None
        self.error: str | None = None
        self.view: LaneView | None = None  # the last snapshot taken (Session.snapshot)
        self.viewed_at = 0.0
        self.runner: Runner | None = None
        try:
            self.runner = Runner([build(name, settings)], queue_size=8, live_interval=0.1).start()
        except (ValueError, TypeError) as exc:
            self.error = str(exc)

    def snapshot(self) -> AlgorithmSnapshot | None:
        if self.runner is None:
            return None
        snap = self.runner.snapshot().algorithms[0]
        self.rate = snap.updates_per_second
        return snap

    rate = 0.0  # updates/s measured so far (0: unknown)

    def chunks(self, batch: KeyBatch):
        """``batch`` cut into pieces this algorithm processes in about ``CHUNK_SECONDS``."""
        size = max(1024, int(self.rate * CHUNK_SECONDS)) if self.rate > 0 else 4096
        if len(batch) <= size:
            yield batch
            return
        for start in range(0, len(batch), size):
            yield batch.slice(start, start + size)


@dataclass(frozen=True)
class LaneView:
    name: str
    generation: int
    origin: int
    settings: Settings
    algorithm: AlgorithmSnapshot | None
    error: str | None


@dataclass(frozen=True)
class SessionSnapshot:
    time: float
    state: str  # idle, starting, running, paused, finished, stopped, failed
    error: str | None
    source: object  # dptop.capture.source.SourceStats or None
    source_label: str
    lanes: tuple[LaneView, ...]
    truth_packets: int


class Session:
    def __init__(self, config: RunConfig, record_packets: int = 1 << 20):
        self.config = config
        self.truth = Truth(record_packets).start()
        self.lanes: dict[str, Lane] = {}  # replaced, never mutated (the sink iterates it)
        self.source = None
        self.spec: SourceSpec | None = None
        self.stream_length: int | None = None
        self.state = "idle"
        self.error: str | None = None
        self._generation = 0
        self._stopping = threading.Event()
        self._starter: threading.Thread | None = None
        self._tmp = None
        self._retired: list[threading.Thread] = []  # threads of runners replaced by ``apply``

    # ----- source ------------------------------------------------------------------------
    def open(self, spec: SourceSpec) -> None:
        """Start reading ``spec`` (returns at once; see ``snapshot().state``). Once per session."""
        if self._starter is not None:
            raise RuntimeError("a session reads one source; open a new session for another")
        self.spec, self.state = spec, "starting"
        self._starter = threading.Thread(target=self._start, name="dptop-session", daemon=True)
        self._starter.start()

    def _make_source(self, spec: SourceSpec):
        if spec.kind == "live":
            from dptop.capture.live import LiveCapture

            return LiveCapture(spec.iface, self._sink, bpf=spec.bpf or None)
        from dptop.capture.pcap import count_packets
        from dptop.capture.replay import FileReplay

        path = spec.path
        if spec.kind == "synth":
            from dptop.capture.synth import write_zipf_pcap

            self._tmp = tempfile.TemporaryDirectory(prefix="dptop-synth-")
            path = str(Path(self._tmp.name) / "zipf.pcap")
            write_zipf_pcap(path, spec.skew, spec.domain, spec.length, spec.seed, rate_pps=spec.rate)
        self.stream_length = count_packets(path)
        return FileReplay(path, self._sink, speed=spec.speed, loop=spec.loop, batch_size=GUI_BATCH,
                          records=self.stream_length)

    def _start(self) -> None:
        try:
            source = self._make_source(self.spec)
            if self._stopping.is_set():
                source.stop()
                return
            self.lanes = {n: self._lane(n) for n in self.config.names}
            self.source = source
            self.state = "running"
            source.start()
            while source.is_alive() and not self._stopping.is_set():
                source.join(0.1)
            source.join(0)
        except Exception as exc:  # noqa: BLE001 - shown in the window
            self.error, self.state = f"{type(exc).__name__}: {exc}", "failed"
            return
        if self._stopping.is_set():
            return
        self.truth.finish()
        for lane in list(self.lanes.values()):
            if lane.runner is not None:
                try:
                    lane.runner.finish()
                except Exception:  # noqa: BLE001 - the lane's snapshot carries the error
                    pass
        if not self._stopping.is_set():
            self.state = "finished"

    def _lane(self, name: str) -> Lane:
        self._generation += 1
        return Lane(name, self.config.settings_for(name, self.stream_length), self._generation)

    def _sink(self, batch: KeyBatch) -> bool:
        first = self.truth.feed(batch)
        live = self.spec is not None and self.spec.kind == "live"
        accepted = True
        for lane in list(self.lanes.values()):
            if lane.runner is None:
                continue
            if lane.origin is None:
                lane.origin = first
            for piece in lane.chunks(batch):
                if live:
                    accepted = lane.runner.offer(piece) and accepted
                else:
                    lane.runner.feed(piece)
        return accepted

    def pause(self) -> None:
        if self.source is not None and self.state == "running":
            self.source.pause()
            self.state = "paused"

    def resume(self) -> None:
        if self.source is not None and self.state == "paused":
            self.source.resume()
            self.state = "running"

    # ----- settings ----------------------------------------------------------------------
    def apply(self, config: RunConfig) -> list[str]:
        """Switch to ``config``; restarts (new runner, fresh state) exactly the algorithms whose
        settings changed or that were enabled, stops the disabled ones. Returns the restarted names."""
        old = self.lanes
        new: dict[str, Lane] = {}
        restarted = []
        self.config = config
        for name in config.names:
            lane = old.get(name)
            target = config.settings_for(name, self.stream_length)
            if lane is not None and not affected(name, lane.settings, target) and lane.error is None:
                new[name] = lane
            elif self.source is not None or self.state == "starting":
                new[name] = self._lane(name)
                restarted.append(name)
        self.lanes = new
        for name, lane in old.items():
            if new.get(name) is not lane and lane.runner is not None:
                lane.runner.stop()
                self._retired.extend(w.thread for w in lane.runner.workers)
                self.truth.forget(name)
        return restarted

    # ----- reading -----------------------------------------------------------------------
    def snapshot(self, lanes: int | None = None) -> SessionSnapshot:
        """The session now. ``lanes``: refresh at most that many lanes' runner snapshots (the
        ones least recently refreshed) and reuse the others' previous ones — each runner snapshot
        takes its worker's locks, so a 20 Hz timer with many algorithms spreads them out."""
        current = list(self.lanes.values())
        due = current if lanes is None else sorted(current, key=lambda l: l.viewed_at)[:lanes]
        now = time.monotonic()
        for lane in due:
            lane.view = LaneView(lane.name, lane.generation, lane.origin or 0, lane.settings,
                                 lane.snapshot(), lane.error)
            lane.viewed_at = now
        views = [lane.view if lane.view is not None else
                 LaneView(lane.name, lane.generation, lane.origin or 0, lane.settings, None, lane.error)
                 for lane in current]
        stats = None if self.source is None else self.source.stats()
        state = self.state
        if state == "running" and stats is not None and stats.paused:
            state = "paused"
        return SessionSnapshot(time.monotonic(), state, self.error or self.truth.error, stats,
                               "" if self.spec is None else self.spec.label(), tuple(views), self.truth.fed)

    def releases(self, name: str):
        lane = self.lanes.get(name)
        return [] if lane is None or lane.runner is None else lane.runner.releases(name)

    # ----- shutdown ----------------------------------------------------------------------
    def stop(self) -> None:
        """Ask every thread to end (returns at once; idempotent)."""
        self._stopping.set()
        if self.state not in ("failed",):
            self.state = "stopped"
        if self.source is not None:
            self.source.stop()
        for lane in list(self.lanes.values()):
            if lane.runner is not None:
                lane.runner.stop()
        self.truth.stop()

    def threads(self) -> list[threading.Thread]:
        """Every thread this session started (for the close-latency check)."""
        out = [t for t in (self._starter, self.truth._thread) if t is not None]
        if self.source is not None and self.source._thread is not None:
            out.append(self.source._thread)
        for lane in self.lanes.values():
            if lane.runner is not None:
                out.extend(w.thread for w in lane.runner.workers)
        return out

    def close(self, timeout: float = 1.0) -> list[str]:
        """Stop and wait up to ``timeout`` seconds in total; returns the names of threads still alive."""
        self.stop()
        deadline = time.monotonic() + timeout
        threads = self.threads() + self._retired
        for t in threads:
            if t.ident is not None:
                t.join(max(0.0, deadline - time.monotonic()))
        if self._tmp is not None:
            self._tmp.cleanup()
        return [t.name for t in threads if t.is_alive()]
