"""What an algorithm says about itself, typed: its live status between releases (operational,
never private: ``Algorithm.status``) and its a-priori detection limit (``Algorithm.detectable``).

Each family of algorithms has its own frozen status class, a subclass of ``AlgorithmStatus``,
whose fields are its figures in the order the JSON states them. The views read the attributes
``AlgorithmStatus`` names (a family without one answers its default); ``to_json`` is for the
output edges only (the run JSON, a release's status).
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
class AlgorithmStatus:
    """An algorithm's live status (public parameters and operational counts, never part of a
    release's privacy claim). The attributes below are what the views read; a family's status
    class declares those it has as fields: ``threshold`` the current suppression threshold τ;
    single release: the open ``epoch``, its ``epoch_mode``, ``packets_in_epoch`` (exact: never
    shown in a private panel) and ``min_packets`` (the epoch length below which no source can pass
    τ even without noise); continual observation: the ``horizon`` T, whether it was reached, the
    packets counted after it and ``packets_until_output``; ``note`` a caveat in plain words.
    ``detectable`` is the algorithm's a-priori limit, attached by the worker that runs it.

    A family's field named like one of these takes the answer above as its default (dataclasses read
    a field's default from the class), so a family states every field it has when it is built."""

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
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "detectable" or (f.metadata.get(_OMIT) and value == f.default):
                continue
            out[f.name] = _json(value)
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
