"""One release per epoch for single-release mechanisms (dpss-eehh.md §9, dp-misra-gries.md §10).

A single-release mechanism (DPSS, DP-MG, EEHH) reads a stream once and publishes once. The live
monitor cuts the stream into public tumbling **epochs**; each epoch gets a fresh instance (new
summary, new noise, new hash seeds), is released once when it closes, and is then discarded.

* ``--epoch-seconds S``: epochs are the cells of the fixed grid ``[i·S, (i+1)·S)`` of packet time
  (``KeyBatch.ts_ns``, seconds since the Unix epoch). The grid does not depend on the data, so
  under add/remove of one packet every packet lies in exactly one epoch and the session is
  (ε, δ) per packet by parallel composition. Every grid cell from the first packet's to the last
  packet's is released, empty ones included, so the *number* of releases does not reveal whether
  a quiet cell saw a packet. Replay follows packet time; the clock is the latest packet time seen
  (a packet stamped earlier than the open epoch is counted in the open epoch).
* ``--epoch-packets N``: epochs of N packets. The spec warns (§9, P16) that count-based boundaries
  shift when one packet is removed, so the add/remove guarantee does **not** compose across
  epochs. What does hold: under *substitution* of one packet's source the boundaries are fixed,
  so each epoch's add/remove (ε, δ) gives (2ε, 2e^ε·δ) per packet by group privacy, and that is
  the guarantee these releases carry (with a note saying why).
* No epoch option: the whole stream is one epoch, released by ``finish()``.

Subclasses provide ``_new_state()``, ``_feed(state, keys)``, ``_publish(state)`` and ``cost()``;
this class owns the epoch bookkeeping, the per-epoch ``Budget`` (spent before noise is drawn) and
the ``Guarantee`` text. Public spans: count-based epochs give exact packet positions (public under
substitution); otherwise ``Span.start``/``end`` are built from the released noisy lengths ñ, never
from the exact count (P9).
"""
from __future__ import annotations

import math
from abc import abstractmethod

import numpy as np

from dptop.engine.privacy.composition import Budget, Cost, group_privacy
from dptop.engine.core.base import Algorithm
from dptop.engine.core.keys import KeyBatch
from dptop.engine.privacy.noise import NoiseSource
from dptop.engine.core.release import (MEASURE_APPROX, MEASURE_PURE, MODEL_SINGLE, NEIGHBOUR_ADD_REMOVE,
                            NEIGHBOUR_SUBSTITUTE, Guarantee, Release, Span)
from dptop.engine.core.settings import check_positive_int

MAX_EMPTY_EPOCHS = 100_000
"""A packet-time jump over more empty epochs than this is refused (a corrupt timestamp would
otherwise produce millions of empty releases)."""

COUNT_EPOCH_NOTE = (
    "count-based epochs: boundaries shift when one packet is removed (dpss-eehh.md §9, P16), so "
    "the add/remove guarantee holds only within one epoch; across epochs the stated guarantee is "
    "for substitution of one packet's source, by group privacy (2ε, 2e^ε·δ)")


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


class Epoched(Algorithm):
    """Base class of the single-release private algorithms: one fresh instance per epoch."""

    private = True
    family = "single-release"
    measure = MEASURE_APPROX

    def __init__(self, settings):
        super().__init__(settings)
        self.epoch_packets, self.epoch_seconds = check_epoch_options(
            settings.epoch_packets, settings.epoch_seconds)
        self._epoch_ns = None if self.epoch_seconds is None else round(self.epoch_seconds * 1e9)
        self.noise = NoiseSource(settings.seed)
        self.reset()

    # --- what subclasses provide -------------------------------------------------------------
    @abstractmethod
    def cost(self) -> Cost:
        """The (ε, δ) of one epoch's release under add/remove of one packet."""

    @abstractmethod
    def _new_state(self):
        """A fresh summary / sketch (new noise and hash seeds)."""

    @abstractmethod
    def _feed(self, state, keys: np.ndarray) -> None:
        """Feed one key batch to ``state``."""

    @abstractmethod
    def _publish(self, state) -> tuple[tuple, float | None, int | None, dict]:
        """Release ``state`` (``None`` = an epoch without packets): ``(items, threshold,
        noisy_length or None, public status)``. Called once per epoch, after the budget is spent."""

    def notes(self) -> tuple[str, ...]:
        """Extra guarantee notes of the mechanism."""
        return ()

    def epoch_status(self) -> dict:
        """Extra live status (public parameters, e.g. the packets needed before anything passes)."""
        return {}

    # --- Algorithm verbs -----------------------------------------------------------------------
    def reset(self) -> None:
        self.packets = 0
        self._last = None
        self._index = 0
        self._grid = None  # grid cell of the open epoch (epoch_seconds mode)
        self._offset = 0  # released noisy length so far (span positions)
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
        elif self._epoch_ns is not None:
            self._consume_timed(batch, out)
        else:
            self.update(batch.keys)
        self.packets += len(batch)
        return out

    def finish(self) -> list[Release]:
        """Release the last (possibly partial) epoch; a stream without packets releases once."""
        if self._epoch.packets > 0 or self._grid is not None or self._last is None:
            return [self._close()]
        return []

    def live(self) -> Release | None:
        return self._last

    def status(self) -> dict:
        """Live facts for the operator's display. ``packets_in_epoch`` is the exact count (the
        same view as the non-private panels); it is never part of a release."""
        mode = ("packets" if self.epoch_packets is not None else
                "seconds" if self.epoch_seconds is not None else "whole stream")
        return {"epoch": self._index, "epoch_mode": mode, "packets_in_epoch": self._epoch.packets,
                **self.epoch_status()}

    def guarantee(self, span: Span | None = None, extra_notes: tuple[str, ...] = ()) -> Guarantee:
        cost = self.cost()
        neighbouring, notes = NEIGHBOUR_ADD_REMOVE, [*self.notes(), *extra_notes]
        if self.epoch_packets is not None:
            cost = group_privacy(cost, 2) if cost.delta > 0 else Cost(2 * cost.epsilon)
            neighbouring = NEIGHBOUR_SUBSTITUTE
            notes.append(COUNT_EPOCH_NOTE)
        pure = self.measure == MEASURE_PURE
        return Guarantee(MODEL_SINGLE, self.measure, cost.epsilon, None if pure else cost.delta,
                         None, neighbouring, "one packet", self._scope(span), self.noise.label,
                         tuple(notes))

    # --- epoch bookkeeping ---------------------------------------------------------------------
    def _scope(self, span: Span | None) -> str:
        if self.epoch_packets is not None:
            rule = f"count-based epochs of {self.epoch_packets} packets"
            if span is None:
                return f"one release per epoch ({rule})"
            return f"epoch {span.index}: packets {span.start}–{span.end - 1} ({rule})"
        if self.epoch_seconds is not None:
            rule = f"epochs of {self.epoch_seconds:g} s of packet time"
            if span is None or span.t_start is None:
                return f"one release per epoch ({rule})"
            return f"epoch {span.index}: packet time [{span.t_start:.3f}, {span.t_end:.3f}) s ({rule})"
        return "whole stream: one release at its end"

    def publish(self, state, packets: int, index: int, cell: int | None = None,
                notes: tuple[str, ...] = (), status: dict | None = None) -> Release:
        """Release epoch ``index`` from a ``state`` built elsewhere (merged from several capture
        points, dptop.cluster): ``packets`` sets a count epoch's span, ``cell`` is a time epoch's
        grid cell, ``notes``/``status`` say what the release covers. Spends that epoch's budget."""
        self._epoch = _Epoch(Budget(self.cost()))
        self._epoch.state, self._epoch.packets, self._index = state, packets, index
        if cell is not None:
            self._grid = cell
        return self._close(notes, status or {})

    def _close(self, extra_notes: tuple[str, ...] = (), extra_status: dict | None = None) -> Release:
        ep = self._epoch
        ep.budget.spend(self.cost())  # before any noise is drawn; refuses a second release
        items, threshold, n_noisy, status = self._publish(ep.state)
        span = self._span(ep, n_noisy)
        rel = Release(self.name, span, tuple(items), threshold, self.guarantee(span, extra_notes),
                      {**status, **(extra_status or {})})
        self._last = rel
        self._index += 1
        if self._grid is not None:
            self._grid += 1
        self._epoch = _Epoch(Budget(self.cost()))
        return rel

    def _span(self, ep: _Epoch, n_noisy: int | None) -> Span:
        if self.epoch_packets is not None:
            start = self._index * self.epoch_packets
            return Span(start, start + ep.packets, "epoch", self._index)
        start = self._offset
        self._offset += max(int(n_noisy or 0), 0)
        if self._epoch_ns is not None and self._grid is not None:
            t0 = self._grid * self._epoch_ns / 1e9
            return Span(start, self._offset, "epoch", self._index, t0, t0 + self.epoch_seconds)
        return Span(start, self._offset, "stream" if self._epoch_ns is None else "epoch", self._index)

    def _consume_counted(self, keys: np.ndarray, out: list) -> None:
        i = 0
        while i < len(keys):
            take = min(len(keys) - i, self.epoch_packets - self._epoch.packets)
            self.update(keys[i:i + take])
            i += take
            if self._epoch.packets == self.epoch_packets:
                out.append(self._close())

    def _consume_timed(self, batch: KeyBatch, out: list) -> None:
        if len(batch) == 0:
            return
        cells = batch.ts_ns // self._epoch_ns
        if self._grid is not None:
            cells = np.maximum(cells, self._grid)
        cells = np.maximum.accumulate(cells)
        cuts = np.flatnonzero(np.diff(cells)) + 1
        starts = np.concatenate(([0], cuts))
        ends = np.concatenate((cuts, [len(cells)]))
        for a, b in zip(starts.tolist(), ends.tolist()):
            cell = int(cells[a])
            if self._grid is None:
                self._grid = cell
            if cell - self._grid > MAX_EMPTY_EPOCHS:
                raise ValueError(
                    f"packet time jumps by {cell - self._grid} epochs of {self.epoch_seconds:g} s "
                    f"(more than {MAX_EMPTY_EPOCHS}); use a larger --epoch-seconds or fix the capture's timestamps")
            while self._grid < cell:
                out.append(self._close())  # the open epoch, then any empty ones before ``cell``
            self.update(batch.keys[a:b])
