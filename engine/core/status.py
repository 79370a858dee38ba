"""What an algorithm says about itself, typed: its live status between releases (operational,
never private: ``Algorithm.status``), its a-priori detection limit (``Algorithm.detectable``) and
the public figures each release states beside its items (``Release.status``).

Each family of algorithms has its own frozen status class, a subclass of ``AlgorithmStatus`` (live)
or ``ReleaseStatus`` (per release), whose fields are its figures in the order the JSON states them.
The views read the attributes the base classes name (a family without one answers its default);
``to_json`` is for the output edges only (the run JSON, the private view).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace

_OMIT = "omit_default"


def optional(default=None):
    """A field the JSON states only when it differs from ``default`` (a figure some runs lack)."""
    return field(default=default, metadata={_OMIT: True})


def _json(value):
    if isinstance(value, Mapping):
        return {k: _json(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_json(v) for v in value]
    return value


def _figures(status, skip: str = "") -> dict:
    """``status``'s fields in order as JSON values, an optional one only when set, ``skip`` left out."""
    out = {}
    for f in fields(status):
        value = getattr(status, f.name)
        if f.name == skip or (f.metadata.get(_OMIT) and value == f.default):
            continue
        out[f.name] = _json(value)
    return out


@dataclass(frozen=True, kw_only=True)
class ReleaseStatus:
    """The display-only figures one release states beside its items (public parameters and noisy
    figures for a private release; a baseline's are exact, NOT private). The attributes below are what the views read; a family's class declares those
    it has as fields: ``noisy_length`` the epoch's noisy stream length, ``suppressed`` why the
    release was withheld as a whole ('' when it was not); on a release merged from capture points
    (dptop.cluster) the ``agents`` it covers, those covered only until they were lost
    (``agents_partial``) and those it does not cover (``agents_missing``)."""

    noisy_length = None
    suppressed = ""
    agents = ()
    agents_partial = ()
    agents_missing = ()

    def to_json(self) -> dict:
        """The figures in field order."""
        return _figures(self)


NO_FIGURES = ReleaseStatus()
"""The status of a release with nothing to say beside its items."""


@dataclass(frozen=True, kw_only=True)
class Covered(ReleaseStatus):
    """A release merged from capture points: the mechanism's own ``figures`` and the capture points
    it covers. ``agents_partial`` is None where the release keeps no such account (the JSON then
    omits it); ``coverage_first`` puts the coverage before the figures in the JSON (a whole-stream
    baseline), else after them (an epoch)."""

    figures: ReleaseStatus = NO_FIGURES
    agents: tuple[str, ...] = ()
    agents_partial: tuple[str, ...] | None = None
    agents_missing: tuple[str, ...] = ()
    coverage_first: bool = False

    @property
    def noisy_length(self):
        return self.figures.noisy_length

    @property
    def suppressed(self) -> str:
        return self.figures.suppressed

    def to_json(self) -> dict:
        coverage = {"agents": list(self.agents)}
        if self.agents_partial is not None:
            coverage["agents_partial"] = list(self.agents_partial)
        coverage["agents_missing"] = list(self.agents_missing)
        figures = self.figures.to_json()
        return {**coverage, **figures} if self.coverage_first else {**figures, **coverage}


@dataclass(frozen=True)
class DetectionLimit:
    """The smallest source an algorithm can release at all (with probability 0.9), known from its
    parameters and the public facts before any packet: ``count`` packets, a ``share`` of ``over``
    (both None when the length is not public), ``error`` the typical error of an estimate at that
    count; ``note``: why nothing (or what) can be released; ``why``: which term sets the limit;
    ``after``: on a restarting continual stream, (share, packets before a source of that share is
    released, None: never within a segment)."""

    count: int | float | None
    share: float | None
    error: float | None
    over: str
    after: tuple[tuple[float, int | None], ...] = ()
    note: str = ""
    why: str = ""

    def explained(self) -> "DetectionLimit":
        """This limit with a plain note when no source can be released (a share above 1)."""
        if self.share is not None and self.share > 1 and not self.note:
            return replace(self, note=f"nothing can be released here: a source would need {self.count} packets, "
                                       f"more than {self.over} holds")
        return self

    @classmethod
    def from_json(cls, d: dict) -> "DetectionLimit":
        """The limit a run's JSON states (``to_json``'s keys), for a reader of that file."""
        after = tuple((float(share), n) for share, n in (d.get("after") or {}).items())
        return cls(d.get("count"), d.get("share"), d.get("error"), d.get("over", ""), after, d.get("note", ""),
                   d.get("why", ""))

    def to_json(self) -> dict:
        out = {"count": self.count, "share": self.share, "error": self.error, "over": self.over}
        if self.after:
            out["after"] = {str(share): n for share, n in self.after}
        if self.note:
            out["note"] = self.note
        if self.why:
            out["why"] = self.why
        return out


@dataclass(frozen=True, kw_only=True)
class AlgorithmStatus(ReleaseStatus):
    """An algorithm's live status (public parameters and operational counts, never part of a
    release's privacy claim). The attributes below are what the views read; a family's status
    class declares those it has as fields: ``threshold`` the current suppression threshold τ;
    single release: the open ``epoch``, its ``epoch_mode``, ``packets_in_epoch`` (exact: never
    shown in a private panel) and ``min_packets`` (the epoch length below which no source can pass
    τ even without noise); continual observation: the ``horizon`` T, whether it was reached, the
    packets counted after it and ``packets_until_output``; ``note`` a caveat in plain words.
    ``detectable`` is the algorithm's a-priori limit, attached by the worker that runs it.

    A family's field named like one of these takes the answer above as its default (dataclasses read
    a field's default from the class), so a family states every field it has when it is built.
    A continual, sliding-window or local algorithm's release states its status at that moment."""

    threshold = None
    epoch = None
    epoch_mode = ""
    packets_in_epoch = None
    min_packets = None
    horizon = None
    horizon_reached = False
    packets_after_horizon = 0
    packets_until_output = None
    note = ""

    detectable: DetectionLimit | None = None

    def to_json(self) -> dict:
        """The figures in field order, ``detectable`` last (absent when there is none)."""
        out = _figures(self, skip="detectable")
        if self.detectable is not None:
            out["detectable"] = self.detectable.to_json()
        return out


NO_STATUS = AlgorithmStatus()
"""The status of an algorithm with nothing to say (the non-private baselines)."""


@dataclass(frozen=True, kw_only=True)
class EpochStatus(AlgorithmStatus):
    """A single-release mechanism's open epoch: its index, how epochs are cut (packets, seconds or
    the whole stream), its exact packet count and, on a time grid, the packets dropped for falling
    in a closed cell or outside the range."""

    epoch: int
    epoch_mode: str
    packets_in_epoch: int
    packets_dropped: int | None = optional()
