"""A lane's live status and its a-priori detection limit as the views read them: frozen dataclasses
read by attribute, made once from the engine's status (``Algorithm.status`` plus the worker's
``detectable``, engine/core/worker.py). The engine's words are mapped here and only here, so a
name an engine writes and no view reads (or the reverse) shows up in one place and in its test.
The engine's own mapping stays the JSON's ``status`` (an operational figure, never private)."""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping


def _number(value) -> float | None:
    return None if value is None else float(value)


def _integer(value) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True)
class DetectionLimit:
    """The smallest source an algorithm can release at all (with probability 0.9), known from its
    parameters and the public facts before any packet: ``count`` packets, a ``share`` of ``over``
    (either unknown when the length is not public); ``note``: why nothing (or what) can be released;
    ``after``: on a restarting continual stream, (share, packets before a source of that share is
    released, None: never within a segment)."""

    count: float | None = None
    share: float | None = None
    error: float | None = None  # the estimate's error at that count
    over: str = ""
    note: str = ""
    after: tuple[tuple[float, int | None], ...] = ()

    @classmethod
    def of(cls, limit) -> "DetectionLimit | None":
        if not isinstance(limit, Mapping):
            return None
        after = limit.get("after") or {}
        return cls(_number(limit.get("count")), _number(limit.get("share")), _number(limit.get("error")),
                   str(limit.get("over") or ""),
                   str(limit.get("note") or ""),
                   tuple((float(share), _integer(n)) for share, n in after.items()))


@dataclass(frozen=True)
class LaneStatus:
    """What a running algorithm says about itself between releases (operational, not private):
    ``threshold`` its current suppression threshold (τ); single release: the open ``epoch``, its
    ``epoch_mode`` and ``packets_in_epoch`` (exact: never shown in a private panel), and
    ``min_packets``, the epoch length below which no source can pass τ even with zero noise (DPSS,
    from the parameters alone); continual observation: ``horizon`` T, whether
    it was reached, the packets counted after it and ``packets_until_output`` (the next output
    time); ``note`` a caveat in plain words; ``detectable`` the a-priori limit; ``figures`` the
    engine's whole mapping."""

    threshold: float | None = None
    epoch: int | None = None
    epoch_mode: str = ""
    packets_in_epoch: int | None = None
    min_packets: int | None = None
    horizon: int | None = None
    horizon_reached: bool = False
    packets_after_horizon: int = 0
    packets_until_output: int | None = None
    note: str = ""
    detectable: DetectionLimit | None = None
    figures: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def of(cls, status: Mapping | None) -> "LaneStatus":
        st = dict(status or {})
        threshold = st.get("threshold", st.get("tau"))
        return cls(_number(threshold), _integer(st.get("epoch")), str(st.get("epoch_mode") or ""),
                   _integer(st.get("packets_in_epoch")), _integer(st.get("min_packets")), _integer(st.get("horizon")),
                   bool(st.get("horizon_reached")), int(st.get("packets_after_horizon") or 0),
                   _integer(st.get("packets_until_output")), str(st.get("note") or ""),
                   DetectionLimit.of(st.get("detectable")), MappingProxyType(st))


@dataclass(frozen=True)
class ReleaseStatus:
    """What a release says about itself: ``suppressed`` why it was withheld (empty: it was not)."""

    suppressed: str = ""

    @classmethod
    def of(cls, status: Mapping | None) -> "ReleaseStatus":
        return cls(str((status or {}).get("suppressed") or ""))
