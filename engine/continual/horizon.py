"""The horizon T of continual-observation algorithms and the two ways to run past it (docs/lazyhh.md §7).

GaussBM trees, the sketch depth and the thresholds are calibrated for at most T arrivals, fixed
before the first packet. ``ContinualAlgorithm`` handles the two options of §7:

* **fixed horizon** (§7.2): one instance; when it has seen T arrivals it stops *visibly*: the last
  output stays published with ``horizon_reached`` in its status, later packets are only counted.
* **restart** (§7.3): a fresh instance (new hash seeds, noise, candidates, t = 0) per epoch of T
  arrivals. Epochs are disjoint, so the outputs of all epochs together keep the per-epoch
  guarantee (parallel composition), but counts start from zero in every epoch.

For a replayed file T defaults to the file's packet count (``PublicFacts.stream_length``), which is
public under substitution neighbours (both neighbours have the same length, §1.2) and otherwise an
assumed fact the guarantee lists. T counts updates: weighted by bytes a packet is up to G updates,
so T is then G times the packet count and the horizon is never reached before the file ends. A live stream
has no length: it runs on the public clock (``ClockSteps``, docs/lazyhh.md §7.5). **One output step
is one cell of the session's time grid**: the packets stamped in a cell enter the stream during it,
and the release of the step is made when the clock closes the cell, whatever arrived; a horizon
(segment) is ``SEGMENT_STEPS`` steps (restart) and holds at most T arrivals, T = ``--horizon`` or
``DEFAULT_HORIZON``: an instance that reaches T before its segment ends stops visibly until the
next segment starts on the clock. The number of releases, their instants and their spans are thus
functions of the clock and the parameters only, never of a packet count. ``segments_cost`` is the
privacy map of the segments.
"""
from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, replace

import numpy as np

from dptop.engine.core.facts import NO_FACTS, PublicFact, PublicFacts
from dptop.engine.core.base import Algorithm
from dptop.engine.continual.gaussbm import HorizonExceeded
from dptop.engine.core.keys import KeyBatch
from dptop.engine.core.release import Release, Span
from dptop.engine.core.settings import PACKETS, Counting, Settings, check_positive_int
from dptop.engine.core.status import AlgorithmStatus
from dptop.engine.privacy.measures import Measure, compose

DEFAULT_HORIZON = 1 << 20
"""T_max of one segment of a live capture when no horizon is given: 1,048,576 arrivals, restarted
(§7.3). Short enough that at ε = 0.5 a source with 30 % of 2,000 packets/s passes LazyHH's
threshold within a minute and one with 10 % within three (``lazyhh.release_after``), long enough
that the cold start recurs at most every ~9 minutes at that rate."""
SOURCE_SEGMENT = "live segment (default, restarted)"

SEGMENT_STEPS = 360
"""Output steps (cells of the public clock) in one segment of a live stream: an hour at the default
10 s cells, after which a fresh instance starts on the clock (§7.3, §7.5)."""
SOURCE_CLOCK = "live segment on the public clock (at most T arrivals a segment)"

HORIZON_FROM_FILE = "file packet count"
MODE_FIXED = "fixed horizon"
MODE_RESTART = "restart per horizon"


def resolve_horizon(settings: Settings, facts: PublicFacts = NO_FACTS, counting: Counting = PACKETS,
                    minimum: int = 1) -> tuple[int, str]:
    """(T, where it came from). An explicit ``Settings.horizon`` must be >= ``minimum`` (e.g. k~);
    a file length (times the updates a packet may make, ``counting.cap``) shorter than that is
    raised to ``minimum``: a longer horizon than the stream is always valid (§7.2, monotonicity)
    and the choice depends on public facts only."""
    if settings.horizon is not None:
        horizon = check_positive_int("horizon", settings.horizon)
        if horizon < minimum:
            raise ValueError(f"horizon ({horizon}) must be >= {minimum} (T_max >= k~, docs/lazyhh.md §6.1)")
        return horizon, "--horizon"
    if facts.length:
        length = check_positive_int("stream_length", facts.length)
        return max(length * counting.cap, minimum), HORIZON_FROM_FILE
    return max(DEFAULT_HORIZON, minimum), SOURCE_SEGMENT


@dataclass(frozen=True)
class ClockSteps:
    """The public clock a live stream's output steps follow (docs/lazyhh.md §7.5): cell ``c`` of
    the grid is ``[start_ns + c·epoch_ns, start_ns + (c + 1)·epoch_ns)``, a segment is ``segment``
    cells, aligned on multiples of it."""

    start_ns: int
    epoch_ns: int
    segment: int = SEGMENT_STEPS

    @classmethod
    def of(cls, settings: Settings, facts: PublicFacts) -> "ClockSteps | None":
        """The clock of a source without a length (live) whose time grid is known; None otherwise
        (a replay keeps the arrival schedule: its length is public, docs/lazyhh.md §1.2)."""
        if facts.length is not None or facts.span is None or settings.epoch_seconds is None:
            return None
        return cls(int(facts.span[0]), max(1, round(settings.epoch_seconds * 1e9)))

    def bounds(self, first_cell: int, cell: int) -> tuple[float, float]:
        """[start of ``first_cell``, end of ``cell``) in Unix seconds."""
        start = self.start_ns + first_cell * self.epoch_ns
        return start / 1e9, (self.start_ns + (cell + 1) * self.epoch_ns) / 1e9


def segments_cost(per_segment: Measure, overlap: int = 1) -> Measure:
    """The privacy cost of a run in segments, per packet (§7.3): disjoint segments with fresh
    randomness compose in parallel, so any number of them costs one segment's (ε, δ~); segments
    that overlap so that each packet lies in ``overlap`` instances compose sequentially
    (``measures.compose``: a zCDP segment adds its ρ)."""
    overlap = check_positive_int("overlap", overlap)
    return compose([per_segment] * overlap)


@dataclass(frozen=True, kw_only=True)
class HorizonStatus(AlgorithmStatus):
    """Public facts about a continual algorithm's horizon: its ``mode`` (fixed or restarted), T and
    where it came from, the segment (``epoch``), the packets seen in it and still to come before T,
    whether T was reached and the packets counted after it."""

    mode: str
    horizon: int
    horizon_source: str
    epoch: int
    packets_seen: int
    packets_total: int
    packets_until_horizon: int
    horizon_reached: bool
    packets_after_horizon: int


class ContinualAlgorithm(Algorithm):
    """An algorithm whose instance is built for a horizon of T arrivals (fixed or restarted).

    Subclasses provide ``_new_instance()`` (fresh randomness), ``_feed(keys)`` (process keys that
    fit in the horizon; return the batch index of the last output step or -1) and
    ``_release(end_packet, t_end, computed)`` (the release that covers the epoch up to
    ``end_packet``)."""

    private = True
    family = "continual observation"

    def __init__(self, settings: Settings, facts=NO_FACTS, counting=PACKETS, minimum_horizon: int = 1):
        super().__init__(settings, facts, counting)
        self.horizon, self.horizon_source = resolve_horizon(settings, facts, counting, minimum_horizon)
        self.restart = bool(settings.restart) or self.horizon_source == SOURCE_SEGMENT
        self.clock = ClockSteps.of(settings, facts)
        if self.clock is not None and self.horizon_source == SOURCE_SEGMENT:
            self.horizon_source = SOURCE_CLOCK

    def reset(self) -> None:
        self.packets = 0
        self.epoch = 0
        self.epoch_start = 0
        self.after_horizon = 0
        self.exhausted = False
        self._t_first = None
        self._t_last = None
        self.cell: int | None = None  # the open cell of the clock (``ClockSteps``), once one was named
        self.first_cell = 0  # the first cell of the current segment
        self._stepped: Release | None = None  # the release of the last closed step
        self._new_epoch()

    def _new_epoch(self) -> None:
        self.t = 0
        self.instance = self._new_instance()

    @abstractmethod
    def _new_instance(self):
        """A fresh instance for one horizon (new hash seeds and noise)."""

    @abstractmethod
    def _feed(self, keys: np.ndarray) -> int:
        """Process ``keys`` (they fit in the horizon); return the index of the last output step or -1."""

    @abstractmethod
    def _release(self, end_packet: int, t_end: float | None, computed: bool) -> Release:
        """The release covering the epoch up to ``end_packet``; ``computed`` marks a fresh output step."""

    @property
    def mode(self) -> str:
        return MODE_RESTART if self.restart else MODE_FIXED

    def span_to(self, end_packet: int, t_end: float | None) -> Span:
        return Span(self.epoch_start, end_packet, kind="horizon" if self.restart else "prefix",
                    index=self.epoch, t_start=self._t_first, t_end=t_end)

    def _ingest(self, keys: np.ndarray, ts_ns: np.ndarray | None) -> list[Release]:
        releases: list[Release] = []
        i, n = 0, len(keys)
        while i < n:
            if self.exhausted:
                self.after_horizon += n - i
                break
            take = min(self.horizon - self.t, n - i)
            if self._t_first is None and ts_ns is not None:
                self._t_first = float(ts_ns[i]) / 1e9
            last = self._feed(keys[i:i + take])
            self.t += take
            self.packets += take
            if ts_ns is not None:
                self._t_last = float(ts_ns[i + take - 1]) / 1e9
            if last >= 0:
                at = None if ts_ns is None else float(ts_ns[i + last]) / 1e9
                end = self.packets - take + last + 1
                releases.append(self._release(end, at, computed=True))
                self._last = releases[-1]
            i += take
            if self.t == self.horizon:
                if self.restart:
                    self.epoch += 1
                    self.epoch_start = self.packets
                    self._t_first = None
                    self._new_epoch()
                else:
                    self.exhausted = True
        return releases

    def update(self, keys: np.ndarray) -> None:
        """Feed a key batch; with a fixed horizon, raises ``HorizonExceeded`` once arrivals pass T
        (the arrivals up to T are processed, the rest ignored and counted)."""
        before = self.after_horizon
        self._ingest(np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1, 2), None)
        if self.after_horizon > before:
            raise HorizonExceeded(
                f"fixed horizon T = {self.horizon} reached; {self.after_horizon} later arrivals ignored "
                "(use restart to start a fresh instance per horizon)"
            )

    def consume(self, batch: KeyBatch) -> list[Release]:
        """The releases whose output step fell in ``batch`` (at most one per epoch: the latest); on
        the public clock (a tagged batch, ``self.clock``), one release per cell the batch's cell
        closes, then its packets enter the open step."""
        if self.clock is not None and batch.epoch is not None:
            return self._consume_on_clock(batch)
        out = self._ingest(batch.keys, batch.ts_ns)
        latest: dict[int, Release] = {r.span.index: r for r in out}
        return list(latest.values())

    def _consume_on_clock(self, batch: KeyBatch) -> list[Release]:
        """Close every cell before ``batch.epoch`` (one output step each, empty ones included:
        the schedule is the clock's), then feed the batch to the open step. Arrivals past T in a
        segment are counted, not fed (the instance has stopped until the next segment)."""
        out: list[Release] = []
        if self.cell is None:  # the lane joins the clock at its open cell (a start or an Apply)
            self.cell = batch.epoch
            self.first_cell = batch.epoch // self.clock.segment * self.clock.segment
        while self.cell < batch.epoch:
            out.append(self._close_step())
        keys = batch.keys
        if len(keys):  # the arrival rate the operator's status states (never released)
            self._t_first = float(batch.ts_ns[0]) / 1e9 if self._t_first is None else self._t_first
            self._t_last = float(batch.ts_ns[-1]) / 1e9
        take = 0 if self.exhausted else min(len(keys), self.horizon - self.t)
        if take:
            self._feed(keys[:take])  # the k~ schedule inside a step prunes; its outputs are never released
            self.t += take
            self.packets += take
        self.after_horizon += len(keys) - take
        self.exhausted = self.exhausted or self.t >= self.horizon  # T reached: stopped until the segment ends
        return out

    def _close_step(self) -> Release:
        """The output step of the open cell, released at its close (a stopped instance re-releases
        its last output over the longer span); at a segment's last cell, a fresh instance for the
        next segment (restart) or the end of the fixed horizon."""
        t_start, t_end = self.clock.bounds(self.first_cell, self.cell)
        if self._stepped is None or not self.exhausted:
            self._output_now()
            self._stepped = self._release(self.packets, t_end, computed=True)
        self._stepped = replace(self._stepped, span=replace(self._stepped.span, t_start=t_start, t_end=t_end))
        self._last = self._stepped
        self.cell += 1
        if self.cell % self.clock.segment == 0:
            if self.restart:
                self.epoch += 1
                self.epoch_start = self.packets
                self.first_cell = self.cell
                self.exhausted = False
                self._stepped = self._t_first = None
                self._new_epoch()
            else:
                self.exhausted = True
        return self._last

    def warm_up(self) -> None:
        """The base warm-up, and on the public clock the step's OUTPUT, run once on the fresh
        instance before any packet (t = 0: no candidate, nothing published), so the first close
        does not wait for its compilation."""
        super().warm_up()
        if self.clock is not None:
            self._output_now()

    def _output_now(self) -> None:
        """Compute the output of the current step (an algorithm whose output is computed on a
        schedule recomputes it here; a sketch queried on demand needs nothing)."""

    def release(self) -> Release:
        """Re-release of the current output (post-processing, no privacy cost); on the public
        clock, the release of the last closed step (nothing computed between two closes)."""
        if self.clock is not None and self.cell is not None:
            if self._stepped is not None:
                return self._stepped
            t = self.clock.bounds(self.first_cell, self.first_cell - 1)[0]  # no step closed yet: nothing
            return replace(self._release(self.epoch_start, t, computed=False), items=(), threshold=None,
                           span=replace(self.span_to(self.epoch_start, t), t_start=t))
        return self._release(self.packets, self._t_last, computed=False)

    def live(self) -> Release:
        """The current output for a view, a new object each time it is asked for (a view waiting
        for the first release after a close tells them apart); on the public clock, the last
        closed step's release, nothing computed."""
        self._last = replace(self.release())
        return self._last

    def finish(self) -> list[Release]:
        self._last = self.release()
        return [self._last]

    def arrival_rate(self) -> float | None:
        """Arrivals per second of packet time in this segment (public under substitution: every
        arrival and its time are, docs/lazyhh.md §1.2); None before two stamps."""
        if self._t_first is None or self._t_last is None or self._t_last <= self._t_first or self.t < 2:
            return None
        return (self.t - 1) / (self._t_last - self._t_first)

    def horizon_status(self, status_type: type[HorizonStatus], **figures) -> HorizonStatus:
        """A ``status_type`` of the horizon's public facts (mode, T, packets seen and still to come
        before T) and the algorithm's own ``figures``."""
        return status_type(mode=self.mode, horizon=self.horizon, horizon_source=self.horizon_source,
                           epoch=self.epoch, packets_seen=self.t, packets_total=self.packets,
                           packets_until_horizon=self.horizon - self.t, horizon_reached=self.exhausted,
                           packets_after_horizon=self.after_horizon, **figures)

    def horizon_facts(self) -> tuple[PublicFact, ...]:
        """The file's packet count, when the horizon T was taken from it and no guarantee covers
        it as given (a substitution neighbour has as many packets, an add/remove one not)."""
        if self.horizon_source != HORIZON_FROM_FILE:
            return ()
        per = f" times the {self.counting.cap} updates a packet may make" if self.counting.cap > 1 else ""
        return tuple(PublicFact(f.name, f.value, f.provenance,
                                f"the horizon T = {self.horizon} is the file's packet count{per}; public under "
                                f"substitution of one packet's key") for f in self.facts.assumed("stream_length"))

    def horizon_scope(self) -> str:
        if self.clock is not None:
            steps = f"{self.clock.segment} cells of {self.clock.epoch_ns / 1e9:g} s of the public clock"
            return (f"each segment of {steps} (one output step a cell, released at its close; "
                    + ("a fresh instance per segment, disjoint segments compose in parallel, counts restart at 0; "
                       if self.restart else "one segment, then the instance stops; ")
                    + f"at most T = {self.horizon} arrivals a segment, after which it stops until the segment ends)")
        if self.restart:
            return (f"each epoch of T = {self.horizon} arrivals (fresh instance per epoch; disjoint "
                    "epochs compose in parallel, counts restart at 0)")
        return f"fixed horizon T = {self.horizon} arrivals; the instance stops when it is reached"
