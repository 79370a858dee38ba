"""One release per epoch for single-release mechanisms (docs/dpss-eehh.md §9, docs/dp-misra-gries.md §10).

A single-release mechanism (DPSS, DP-MG, EEHH) reads a stream once and publishes once. The live
monitor cuts the stream into public tumbling **epochs**; each epoch gets a fresh instance (new
summary, new noise, new hash seeds), is released once when it closes, and is then discarded.

* ``--epoch-seconds S``: epochs are the cells of a public ``TimeGrid`` (engine/core/clock.py) over
  the session's public time range (``PublicFacts.time_range``: the replay's declared or file range,
  the live session's wall clock). Each packet belongs to the cell of its own stamp: the monitor
  hands over batches in cell order tagged with their cell (``KeyBatch.epoch``), and an empty
  tagged batch is the clock's tick. Untagged batches are cut by their own stamps here. A packet
  whose cell has closed, or outside the range, is dropped and counted (operational). Every cell of
  the range is released, empty ones included, so under add/remove of one packet every other
  packet keeps its epoch, the number and time bounds of the releases are fixed, and the session is
  (ε, δ) per packet by parallel composition. An open-ended range (live capture without a
  duration) releases through the cell its final tick names. The session starts each instance with
  a tick naming its first cell (0, or the clock's cell when an Apply restarts it).
* ``--epoch-packets N``: epochs of N packets. docs/dpss-eehh.md warns (§9, P16) that count-based boundaries
  shift when one packet is removed, so the add/remove guarantee does **not** compose across
  epochs. What does hold: under *substitution* of one packet's source the boundaries are fixed,
  so each epoch's add/remove (ε, δ) gives (2ε, 2e^ε·δ) per packet by group privacy, and that is
  the guarantee these releases carry (with a note saying why).
* No epoch option: the whole stream is one epoch, released by ``finish()``.

Empty epochs in bulk: a stamp far ahead (days on a 1 s grid) leaves up to ``MAX_CELLS`` empty cells
to release at once, each still released (its noise drawn: an epoch's emptiness is not public). The
runner keeps only its last ``history`` releases, so of a run longer than ``SHOWN`` only the last
``SHOWN`` are built as ``Release`` objects; the earlier ones are released unseen: their budget is
a fresh epoch's (parallel composition), their noisy lengths ñ are drawn in bulk and move the span
positions exactly as one by one, and the next release counts them (``Release.released_before``).
What any view can read (the history, the latest release, the count) has the same law as one by
one, at a few microseconds per empty epoch instead of a release object each. The ``SHOWN`` that
are built cost little too: their noisy lengths are drawn in one kernel call just before they are
released (the same law as one draw each, ``NoiseSource.dlap_array``), an empty epoch's counters
draw nothing (there are none), and the guarantee's constant part is built once per instance.

Subclasses provide ``_new_state()``, ``_feed(state, keys)``, ``_publish(state)`` and ``cost()``;
this class owns the epoch bookkeeping, the per-epoch ``Budget`` (spent before noise is drawn) and
the ``Guarantee`` text. Public spans: count-based epochs give exact packet positions (public under
substitution); otherwise ``Span.start``/``end`` are built from the released noisy lengths ñ, never
from the exact count (P9).
"""
from __future__ import annotations

import math
from abc import abstractmethod
from dataclasses import replace

import numpy as np

from dptop.engine.privacy.budget import Budget
from dptop.engine.privacy.guarantee import Guarantee
from dptop.engine.privacy.measures import Measure
from dptop.engine.privacy.units import Relation, counted_unit, in_relation
from dptop.engine.core.base import Algorithm
from dptop.engine.core.clock import MAX_CELLS, CellOrdered, TimeGrid
from dptop.engine.core.keys import KeyBatch
from dptop.engine.privacy.noise import NoiseSource
from dptop.engine.core.release import MODEL_SINGLE, Release, Span
from dptop.engine.core.settings import PACKETS, check_positive_int
from dptop.engine.core.facts import NO_FACTS
from dptop.engine.core.status import Covered, DetectionLimit, EpochStatus, ReleaseStatus

SHOWN = 4096
"""Releases of a run of empty epochs built as objects: at least the runner's ``history``."""
BULK_DRAWS = 1 << 20
"""Noisy lengths drawn per kernel call (bounded memory for any run of empty epochs)."""

COUNT_EPOCH_NOTE = (
    "count-based epochs: boundaries shift when one packet is removed (docs/dpss-eehh.md §9, P16), so "
    "the add/remove guarantee holds only within one epoch; across epochs the stated guarantee is "
    "for substitution of one packet's key, by group privacy (2ε, (1+e^ε)·δ)")


def check_epoch_options(epoch_packets, epoch_seconds) -> tuple[int | None, float | None]:
    """At most one epoch option; each > 0."""
    if epoch_packets is not None and epoch_seconds is not None:
        raise ValueError(
            f"epoch_packets ({epoch_packets}) and epoch_seconds ({epoch_seconds}) are exclusive: choose one")
    if epoch_packets is not None:
        epoch_packets = check_positive_int("epoch_packets", epoch_packets)
    if epoch_seconds is not None:
        s = float(epoch_seconds)
        if not (s > 0 and math.isfinite(s)) or round(s * 1e9) < 1:
            raise ValueError(f"epoch_seconds ({epoch_seconds!r}) must be > 0 (and at least 1 ns)")
        epoch_seconds = s
    return epoch_packets, epoch_seconds


class _Epoch:
    """One epoch's instance: its algorithm state (allocated at the first packet) and budget."""

    __slots__ = ("state", "budget", "packets")

    def __init__(self, budget: Budget):
        self.state = None
        self.budget = budget
        self.packets = 0


class Epoched(CellOrdered, Algorithm):
    """Base class of the single-release private algorithms: one fresh instance per epoch."""

    private = True
    family = "single-release"

    def __init__(self, settings, facts=NO_FACTS, counting=PACKETS):
        super().__init__(settings, facts, counting)
        self.epoch_packets, self.epoch_seconds = check_epoch_options(
            settings.epoch_packets, settings.epoch_seconds)
        self.grid, self._bounded = time_grid(facts, self.epoch_seconds)
        self.noise = NoiseSource(settings.seed)
        self.reset()

    # --- what subclasses provide -------------------------------------------------------------
    @abstractmethod
    def cost(self) -> Measure:
        """The cost of one epoch's release under add/remove of one packet (``PureDP`` or ``ApproxDP``)."""

    @abstractmethod
    def _new_state(self):
        """A fresh summary / sketch (new noise and hash seeds)."""

    @abstractmethod
    def _feed(self, state, keys: np.ndarray) -> None:
        """Feed one key batch to ``state``."""

    @abstractmethod
    def _publish(self, state) -> tuple[tuple, float | None, int | None, ReleaseStatus]:
        """Release ``state`` (``None`` = an epoch without packets): ``(items, threshold,
        noisy_length or None, public status)``. Called once per epoch, after the budget is spent."""

    def notes(self) -> tuple[str, ...]:
        """Extra guarantee notes of the mechanism."""
        return ()

    def epoch_status(self, **epoch) -> EpochStatus:
        """The live status from the open ``epoch``'s figures (``EpochStatus``'s fields); a mechanism
        with more to say (public parameters, e.g. the packets needed before anything passes) returns
        its own subclass."""
        return EpochStatus(**epoch)

    def assumed_facts(self) -> tuple:
        """Public facts read from the data that the mechanism was sized from (listed, not covered)."""
        return ()

    def epoch_size(self) -> tuple[int | None, str]:
        """Packets per epoch from public facts: the count epoch, the replayed stream, or the
        average time epoch of a replay (its packet count over its public time range)."""
        length = self.facts.length
        if self.epoch_packets is not None:
            return self.epoch_packets, f"an epoch of {self.epoch_packets} packets"
        if self.grid is None:
            return (length, "the whole stream") if length else (None, "the whole stream")
        if length and self._bounded:
            n = max(1, length // self.grid.cells)
            return n, f"a {self.epoch_seconds:g} s epoch (about {n} packets on average)"
        return None, f"a {self.epoch_seconds:g} s epoch"

    def detectable(self) -> DetectionLimit | None:
        n, over = self.epoch_size()
        if n is None:
            return DetectionLimit(None, None, None, over,
                                  note="depends on the packets in the epoch, which is not public")
        limit = self.limit(n)
        if limit is None:
            return None
        count, error = limit
        note = (f"no release is possible with these parameters: a source would need >= {count} "
                f"packets, more than the {n} of {over}") if count > n else ""
        return DetectionLimit(count, count / n, error, over, note=note)

    def limit(self, n: int) -> tuple[int, float] | None:
        """(count released w.p. >= 0.9, typical error of an estimate) in an epoch of ``n`` packets;
        None where no bound is worked out (EEHH)."""
        return None

    # --- Algorithm verbs -----------------------------------------------------------------------
    def reset(self) -> None:
        self.packets = 0
        self._last = None
        self._index = 0  # the open epoch (in time mode: its grid cell)
        self.dropped = 0  # packets of cells already closed or outside the range (time mode)
        self._joined = False  # time mode: the first tagged batch (the session's tick) sets the start cell
        self._offset = 0  # released noisy length so far (span positions)
        self._unseen = 0  # empty epochs released in bulk since the last release object
        self._length_draws: list[int] = []  # noisy-length noise drawn in bulk for the empty epochs next
        self._guarantee = None  # (noise source, the guarantee without its scope), built at the first release
        self._epoch = _Epoch(Budget(self.cost()))
        self._epoch.state = self._new_state()  # built now so the first packets do not wait for it

    def update(self, keys: np.ndarray) -> None:
        """Feed the open epoch (no boundary handling; ``consume`` is the epoch-aware path)."""
        if len(keys) == 0:
            return
        ep = self._epoch
        if ep.state is None:
            ep.state = self._new_state()
        self._feed(ep.state, keys)
        ep.packets += len(keys)

    def release(self) -> Release:
        """Close the open epoch now and publish it (spends that epoch's budget)."""
        return self._close()

    def consume(self, batch: KeyBatch) -> list[Release]:
        out: list[Release] = []
        if self.epoch_packets is not None:
            self._consume_counted(batch.keys, out)
        elif self.grid is not None:
            self._consume_timed(batch, out)
        else:
            self.update(batch.keys)
        self.packets += len(batch)
        return out

    def finish(self) -> list[Release]:
        """Release the last (possibly partial) epoch; a stream without packets releases once. On a
        time grid: every cell left in a bounded range; nothing more in an open-ended one."""
        if self.grid is not None:
            out: list[Release] = []
            if self._bounded:
                self._close_through(self.grid.cells, out)
            return out
        if self._epoch.packets > 0 or self._last is None:
            return [self._close()]
        return []

    def live(self) -> Release | None:
        return self._last

    def status(self) -> EpochStatus:
        """Live facts for the operator's display. ``packets_in_epoch`` is the exact count (the
        same view as the non-private panels); it is never part of a release."""
        mode = ("packets" if self.epoch_packets is not None else
                "seconds" if self.epoch_seconds is not None else "whole stream")
        return self.epoch_status(epoch=self._index, epoch_mode=mode, packets_in_epoch=self._epoch.packets,
                                 packets_dropped=self.dropped if self.grid is not None else None)

    def guarantee(self, span: Span | None = None, extra_notes: tuple[str, ...] = ()) -> Guarantee:
        if extra_notes:
            return self._guarantee_for(span, extra_notes)
        if self._guarantee is None or self._guarantee[0] is not self.noise:  # the noise names its label
            self._guarantee = (self.noise, self._guarantee_for(None, ()))
        return replace(self._guarantee[1], scope=self._scope(span))

    def _guarantee_for(self, span: Span | None, extra_notes: tuple[str, ...]) -> Guarantee:
        cost, relation, notes = self.cost(), Relation.ADD_REMOVE, [*self.notes(), *extra_notes]
        if self.epoch_packets is not None:
            cost, relation = in_relation(cost, relation, Relation.SUBSTITUTE), Relation.SUBSTITUTE
            notes.append(COUNT_EPOCH_NOTE)
        return Guarantee(MODEL_SINGLE, cost, relation, scope=self._scope(span), noise=self.noise.label,
                         seeded=self.noise.seeded, notes=tuple(notes),
                         facts=self.assumed_facts()).counted(counted_unit(self.counting))

    # --- epoch bookkeeping ---------------------------------------------------------------------
    def _scope(self, span: Span | None) -> str:
        if self.epoch_packets is not None:
            rule = f"count-based epochs of {self.epoch_packets} packets"
            if span is None:
                return f"one release per epoch ({rule})"
            return f"epoch {span.index}: packets {span.start}–{span.end - 1} ({rule})"
        if self.epoch_seconds is not None:
            rule = f"epochs of {self.epoch_seconds:g} s of packet time on a public grid"
            if span is None or span.t_start is None:
                return f"one release per epoch ({rule})"
            return f"epoch {span.index}: packet time [{span.t_start:.3f}, {span.t_end:.3f}) s ({rule})"
        return "whole stream: one release at its end"

    def publish(self, state, packets: int, index: int, cell: int | None = None,
                notes: tuple[str, ...] = (), coverage: Covered | None = None) -> Release:
        """Release epoch ``index`` from a ``state`` built elsewhere (merged from several capture
        points, dptop.cluster): ``packets`` sets a count epoch's span, ``cell`` is a time epoch's
        grid cell, ``notes``/``coverage`` say what the release covers (the mechanism's figures go
        into the coverage's). Spends that epoch's budget."""
        self._epoch = _Epoch(Budget(self.cost()))
        self._epoch.state, self._epoch.packets, self._index = state, packets, index
        if cell is not None:
            self._grid = cell
        return self._close(notes, coverage)

    def _close(self, extra_notes: tuple[str, ...] = (), coverage: Covered | None = None) -> Release:
        ep = self._epoch
        ep.budget.spend(self.cost())  # before any noise is drawn; refuses a second release
        items, threshold, n_noisy, status = self._publish(ep.state)
        span = self._span(ep, n_noisy)
        if coverage is not None:
            status = replace(coverage, figures=status)
        rel = Release(self.name, span, tuple(items), threshold, self.guarantee(span, extra_notes), status,
                      released_before=self._unseen)
        self._unseen = 0
        self._last = rel
        self._index += 1
        self._epoch = _Epoch(Budget(self.cost()))
        return rel

    def _span(self, ep: _Epoch, n_noisy: int | None) -> Span:
        if self.epoch_packets is not None:
            start = self._index * self.epoch_packets
            return Span(start, start + ep.packets, "epoch", self._index)
        start = self._offset
        self._offset += max(int(n_noisy or 0), 0)
        if self.grid is not None:
            return Span(start, self._offset, "epoch", self._index, *self.grid.bounds(self._index))
        return Span(start, self._offset, "stream", self._index)

    def _consume_counted(self, keys: np.ndarray, out: list) -> None:
        i = 0
        while i < len(keys):
            take = min(len(keys) - i, self.epoch_packets - self._epoch.packets)
            self.update(keys[i:i + take])
            i += take
            if self._epoch.packets == self.epoch_packets:
                out.append(self._close())

    def _fill(self, keys: np.ndarray) -> None:
        self.update(keys)

    def _to_cell(self, cell: int, keys: np.ndarray, out: list) -> None:
        if self._index < cell < self.grid.cells:
            self._close_through(cell, out)
        super()._to_cell(cell, keys, out)

    def _close_through(self, cell: int, out: list) -> None:
        """Release every epoch before ``cell``: the open one, then the empty ones, all but the last
        ``SHOWN`` of a long run in bulk (see the module docstring)."""
        if self._epoch.packets:
            out.append(self._close())
        unseen = cell - self._index - SHOWN
        if unseen > 0:
            self._offset += self.empty_lengths(unseen)
            self._index += unseen
            self._unseen += unseen
            self._epoch = _Epoch(Budget(self.cost()))
        eps_n = getattr(self, "eps_n", None)
        if eps_n is not None and cell - self._index > 1:
            self._length_draws = self.noise.dlap_array(eps_n, cell - self._index).tolist()[::-1]
        try:
            while self._index < cell:
                out.append(self._close())
        finally:
            self._length_draws = []

    def length_noise(self) -> int:
        """One DLap(ε_n) draw for a noisy length ñ = n + DLap(ε_n) (docs/dpss-eehh.md §4.5): one
        drawn in bulk for the run of empty epochs being released (noise that carries no data, each
        released only with its own epoch, after that epoch's budget is spent), else a fresh draw."""
        if self._length_draws:
            return self._length_draws.pop()
        return self.noise.dlap(self.eps_n)

    def empty_lengths(self, count: int) -> int:
        """The span positions ``count`` empty epochs take: the sum of their noisy lengths
        ñ = 0 + DLap(ε_n) clipped at 0 (docs/dpss-eehh.md §4.5, as ``_span``), drawn in bulk;
        0 for a mechanism that releases no length (no ``eps_n``: DP-MG's pure mode)."""
        eps_n = getattr(self, "eps_n", None)
        if eps_n is None:
            return 0
        total = 0
        for at in range(0, count, BULK_DRAWS):
            total += int(np.maximum(self.noise.dlap_array(eps_n, min(BULK_DRAWS, count - at)), 0).sum())
        return total


def time_grid(facts, epoch_seconds: float | None) -> tuple[TimeGrid | None, bool]:
    """The public grid of time epochs over ``facts.time_range`` (``PublicFacts``), and whether its
    range has an end (engine/core/clock.py)."""
    if epoch_seconds is None:
        return None, False
    if facts.span is None:
        raise ValueError("epoch_seconds needs a public time range (time_range: the replay's declared or file "
                         "range, or the live session's clock)")
    start, end = facts.span
    if end is None:
        return TimeGrid(int(start), round(epoch_seconds * 1e9), MAX_CELLS), False
    return TimeGrid.over(int(start), int(end), epoch_seconds), True
