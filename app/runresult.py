"""A run's JSON (dptop.monitor.result) read back as typed objects, once, for the text report
(dptop.report): the source, what was counted, the exact top, per algorithm its guarantee's text,
releases, exact counts and public status, the budget and the drops. Each type's ``from_json``
reads the keys the contract names (extended, never renamed); the report renders from these
objects only.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from dptop.engine.core.release import Span
from dptop.engine.core.status import DetectionLimit
from dptop.monitor.explain import Drops


@dataclass(frozen=True)
class Counting:
    """What a packet counted as: its ``key`` kind, packets or ``bytes`` (units of ``unit`` bytes,
    at most ``cap`` per packet) and the choice in words (``text``; '' when the run did not say)."""

    key: str = "src"
    weight: str = "packets"
    unit: int = 1
    cap: int = 1
    text: str = ""

    @property
    def in_bytes(self) -> bool:
        return self.weight == "bytes"

    @property
    def scale(self) -> int:
        """Bytes per counted unit (1 when counting packets)."""
        return self.unit if self.in_bytes else 1

    @classmethod
    def from_json(cls, d: dict | None) -> "Counting":
        if not d:
            return cls()
        return cls(d.get("key", "src"), d.get("weight", "packets"), d.get("unit", 1), d.get("cap", 1),
                   d.get("text") or "")


@dataclass(frozen=True)
class Item:
    """One released key as the JSON states it: its address label and estimate (in the shown measure)."""

    address: str
    estimate: float

    @classmethod
    def from_json(cls, d: dict) -> "Item":
        return cls(d["address"], d["estimate"])


@dataclass(frozen=True)
class ShownRelease:
    """One release: the span it covers, the threshold applied (None: none) and its items."""

    span: Span
    threshold: float | None
    items: tuple[Item, ...]

    @classmethod
    def from_json(cls, d: dict) -> "ShownRelease":
        return cls(span_from_json(d["span"]), d.get("threshold"), tuple(Item.from_json(it) for it in d["items"]))


def span_from_json(d: dict) -> Span:
    return Span(d.get("start"), d.get("end"), d["kind"], d.get("index", 0), d.get("t_start"), d.get("t_end"))


@dataclass(frozen=True)
class Truth:
    """The exact counts of release ``release``'s keys over the packets it covers (NOT private):
    ``packets`` the lane saw of them, ``unseen`` those its queue refused, ``counts`` in item order;
    ``note`` why they are unknown."""

    release: int
    packets: int | None = None
    unseen: int | None = None
    counts: tuple | None = None
    note: str | None = None

    @classmethod
    def from_json(cls, d: dict) -> "Truth":
        counts = d.get("counts")
        return cls(d["release"], d.get("packets"), d.get("unseen"), None if counts is None else tuple(counts),
                   d.get("note"))


@dataclass(frozen=True)
class LaneStatus:
    """What the report reads of an algorithm's public status: its ``note`` and a-priori
    ``detectable`` limit (dptop.engine.core.status)."""

    note: str = ""
    detectable: DetectionLimit | None = None

    @classmethod
    def from_json(cls, d: dict | None) -> "LaneStatus":
        d = d or {}
        limit = d.get("detectable")
        return cls(str(d.get("note", "")), DetectionLimit.from_json(limit) if limit else None)


@dataclass(frozen=True)
class Lane:
    """One algorithm's entry: ``private`` (None: it never ran), its guarantee in words (None:
    none), ``error``, releases, exact counts of the last ones, status and operational figures."""

    private: bool | None
    guarantee: str | None = None
    error: str | None = None
    releases: tuple[ShownRelease, ...] = ()
    truth: tuple[Truth, ...] = ()
    status: LaneStatus = field(default_factory=LaneStatus)
    packets_per_second: float = 0.0
    busy_share: float = 0.0
    releases_published: int = 0

    def truth_of(self, index: int) -> Truth | None:
        """The exact counts of release ``index``, when the JSON carries them."""
        return next((t for t in self.truth if t.release == index), None)

    @classmethod
    def from_json(cls, d: dict) -> "Lane":
        g = d.get("guarantee")
        return cls(d.get("private"), None if g is None else g.get("text", ""), d.get("error"),
                   tuple(ShownRelease.from_json(r) for r in d.get("releases") or []),
                   tuple(Truth.from_json(t) for t in d.get("truth") or []), LaneStatus.from_json(d.get("status")),
                   d.get("packets_per_second") or 0, d.get("busy_share") or 0, d.get("releases_published", 0))


@dataclass(frozen=True)
class Exact:
    """The exact top over the whole stream (NOT private): ``total`` counted, ``distinct`` keys (None:
    not stated) and ``top`` as (address, count)."""

    total: int
    distinct: int | None
    top: tuple[tuple[str, int], ...]

    @classmethod
    def from_json(cls, d: dict) -> "Exact":
        return cls(d.get("total"), d.get("distinct"), tuple((r["address"], r["count"]) for r in d["top"]))


@dataclass(frozen=True)
class Source:
    """Where the packets came from (a file, an interface or several files) and how many were read."""

    packets: int
    ip_packets: int
    skipped: dict
    where: str

    @classmethod
    def from_json(cls, d: dict) -> "Source":
        return cls(d["packets"], d["ip_packets"], dict(d.get("skipped") or {}),
                   d.get("path") or d.get("iface") or ", ".join(d.get("paths", [])))


@dataclass(frozen=True)
class RunResult:
    """A run as the report renders it. ``covered`` and ``missing``: the capture files of a merged
    run (``covered`` None for any other run); ``dropped`` packets by the public clock per reason;
    ``budget`` the ledger's total in words (None: no private algorithm ran)."""

    source: Source
    counting: Counting
    exact: Exact
    algorithms: dict[str, Lane]
    budget: str | None = None
    dropped: dict = field(default_factory=dict)
    drops: Drops = field(default_factory=Drops)
    partial: bool = False
    seeded: bool = False
    covered: tuple[str, ...] | None = None
    missing: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, d: dict) -> "RunResult":
        budget = d.get("budget")
        return cls(Source.from_json(d["source"]), Counting.from_json(d.get("counting")), Exact.from_json(d["exact"]),
                   {name: Lane.from_json(a) for name, a in d["algorithms"].items()},
                   budget["total"] if budget else None, dict(d.get("dropped") or {}),
                   Drops.from_json(d.get("drops") or {}), bool(d.get("partial")),
                   d.get("settings", {}).get("seed") is not None,
                   tuple(a["path"] for a in d["agents"]) if "agents" in d else None,
                   tuple(m["path"] for m in d.get("missing") or []))
