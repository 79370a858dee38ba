"""What a guarantee protects: the unit, the neighbouring relation, and conversions between units.

* ``KeyKind`` (``engine.core.keykinds``): what a packet is counted under; wording takes the
  kind's ``label``, so a new key kind needs no new sentence.
* ``Relation``: add/remove one unit, or substitution of the counted key of one unit.
* ``Unit``: one packet (optionally with its byte weight capped at G updates), one protected host
  with all its packets in one epoch, or one local-DP report.
* Conversions, each a pure function returning a typed cost (``measures``): ``in_relation``
  (add/remove -> substitution is a group of 2), ``per_packet`` (bytes: group privacy over G
  updates; a host-level lane: one packet changes one host's epoch; a local-DP lane: one packet
  changes at most its agent's window of reports).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from dptop.engine.core.keykinds import KeyKind
from dptop.engine.core.settings import Counting
from dptop.engine.privacy.measures import Measure, PureDP, group


class Relation(enum.Enum):
    ADD_REMOVE = "add/remove"
    SUBSTITUTE = "substitution"


class UnitKind(enum.Enum):
    PACKET = "packet"
    HOST = "host"
    REPORT = "report"


@dataclass(frozen=True)
class Unit:
    """One protected unit. ``group``: updates one packet may contribute (bytes: the cap G);
    ``host``: a host-level unit in words ("the packets one host sends in the epoch");
    ``reports``: a local-DP agent's reports per window (None: every packet is a report)."""

    kind: UnitKind = UnitKind.PACKET
    key: KeyKind = KeyKind.SRC
    group: int = 1
    host: str = "one host with all its packets in the epoch"
    reports: int | None = None

    @property
    def packet_level(self) -> bool:
        return self.kind is UnitKind.PACKET

    def label(self) -> str:
        if self.kind is UnitKind.HOST:
            return self.host
        if self.kind is UnitKind.REPORT:
            return "one report"
        return "one packet" + (f" (byte weight capped at {self.group} units)" if self.group > 1 else "")

    def neighbouring(self, relation: Relation) -> str:
        """The neighbouring relation in words (the JSON's ``neighbouring``)."""
        if self.kind is UnitKind.HOST:
            return f"add/remove {self.host}"
        if self.kind is UnitKind.REPORT:
            return "any two items of one report (the agent randomizes it)"
        if relation is Relation.SUBSTITUTE:
            return f"substitution of one packet's {self.key.label}"
        return "add/remove one packet"


PACKET = Unit()


def counted_unit(counting: Counting) -> Unit:
    """The unit a packet-level guarantee protects for ``counting``: one packet by its key kind,
    up to ``counting.cap`` updates (bytes)."""
    return Unit(key=counting.key, group=counting.cap)


def in_relation(cost: Measure, relation: Relation, target: Relation) -> Measure:
    """``cost`` under ``relation`` restated for ``target``: substitution is one removal plus one
    addition (a group of 2); add/remove is not implied by substitution (None)."""
    if relation is target:
        return cost
    if relation is Relation.ADD_REMOVE and target is Relation.SUBSTITUTE:
        return group(cost, 2)
    raise ValueError(f"a {relation.value} guarantee does not cover {target.value} neighbours")


def per_packet(cost: Measure, unit: Unit) -> Measure:
    """The cost to one packet of a release whose ``cost`` protects ``unit``:

    * a packet weighted by bytes is ``unit.group`` updates (group privacy);
    * a protected host's epoch holds all its packets, so one packet costs at most the host's cost;
    * a local-DP agent's window of reports composes to R·ε whatever its packets (one packet may
      change the whole sample), and with every packet reported a packet is one report.
    """
    if unit.kind is UnitKind.PACKET:
        return group(cost, unit.group)
    if unit.kind is UnitKind.HOST:
        return cost
    if unit.reports is None:
        return group(cost, unit.group)
    return PureDP(unit.reports * cost.epsilon)

