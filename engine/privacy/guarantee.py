"""What a private release promises, as typed objects; every word a user reads is rendered from them.

A ``Guarantee`` holds the typed cost (``measures``), the relation and unit it protects (``units``),
the public facts it takes as given (``facts``), whether its noise is seeded (then NOT private), and
display words (model, scope, noise source, notes) that decide nothing. ``counted`` restates a
guarantee for what a packet counts as (its key kind, its byte weight: group privacy), and
``per_packet`` gives the cost one packet pays, for the ledger.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from dptop.engine.core.facts import PublicFact
from dptop.engine.privacy.measures import Measure, group, render
from dptop.engine.privacy.units import PACKET, Relation, Unit, UnitKind, per_packet

MEASURE_LDP = "pure ε-LDP per report"


@dataclass(frozen=True)
class Guarantee:
    model: str
    cost: Measure
    relation: Relation = Relation.ADD_REMOVE
    unit: Unit = PACKET
    scope: str = ""
    noise: str = ""
    seeded: bool = False
    notes: tuple[str, ...] = ()
    facts: tuple[PublicFact, ...] = ()

    # --- the words of the JSON contract, rendered ------------------------------------------------
    @property
    def measure(self) -> str:
        return MEASURE_LDP if self.unit.kind is UnitKind.REPORT else self.cost.label

    @property
    def epsilon(self) -> float:
        return self.cost.epsilon

    @property
    def delta(self) -> float | None:
        return self.cost.delta

    @property
    def rho(self) -> float | None:
        return self.cost.rho

    @property
    def neighbouring(self) -> str:
        return self.unit.neighbouring(self.relation)

    @property
    def packet_level(self) -> bool:
        return self.unit.packet_level

    @property
    def private(self) -> bool:
        return not self.seeded

    def numbers(self, equals: str = "=") -> list[str]:
        return render(self.cost, equals)

    def describe(self) -> str:
        """One line for a panel header."""
        parts = [self.model, f"{self.measure} ({', '.join(self.numbers())})", f"neighbours: {self.neighbouring}"]
        if self.scope:
            parts.append(self.scope)
        if self.seeded:
            parts.append("seeded noise: NOT private")
        return "; ".join(parts)

    def to_json(self) -> dict:
        return {"model": self.model, "measure": self.measure, "epsilon": self.epsilon, "delta": self.delta,
                "rho": self.rho, "neighbouring": self.neighbouring, "unit": self.unit.label(), "scope": self.scope,
                "noise": self.noise, "notes": list(self.notes), "text": self.describe(), "private": self.private,
                "relation": self.relation.name.lower(), "unit_kind": self.unit.kind.value,
                "key": self.unit.key.value, "byte_cap": self.unit.group,
                "public_facts": [f.to_json() for f in self.facts]}

    # --- conversions ----------------------------------------------------------------------------
    def counted(self, unit: Unit | None) -> "Guarantee":
        """This per-update guarantee restated for packets counted as ``unit`` (key kind and byte
        cap): the cost of one packet is that of ``unit.group`` updates by group privacy."""
        if unit is None or self.unit.kind is UnitKind.HOST:  # a host's distinct pairs ignore repeats
            return self
        if self.unit.kind is UnitKind.REPORT:  # a report's cost stays; per_packet counts the reports
            return replace(self, unit=replace(self.unit, key=unit.key, group=unit.group))
        cost = group(self.cost, unit.group)
        note = (() if unit.group <= 1 else
                (f"bytes: one packet is up to {unit.group} updates; each update costs "
                 f"({', '.join(render(self.cost))}), so one packet costs ({', '.join(render(cost))}) by group privacy",))
        return replace(self, cost=cost, unit=replace(self.unit, key=unit.key, group=unit.group),
                       notes=(*self.notes, *note))

    def with_facts(self, facts) -> "Guarantee":
        return replace(self, facts=(*self.facts, *(f for f in facts if f not in self.facts)))

    def per_packet(self) -> Measure:
        """What one packet pays for this guarantee's releases (``units.per_packet``); bytes are
        already inside a ``counted`` packet guarantee."""
        unit = self.unit if self.unit.kind is not UnitKind.PACKET else replace(self.unit, group=1)
        return per_packet(self.cost, unit)

    @property
    def packet_relation(self) -> Relation:
        """The packet relation ``per_packet`` holds under: a local-DP report covers a changed
        item, not a packet's presence (report counts are visible, docs/local-dp.md §10.3 item 1)."""
        return Relation.SUBSTITUTE if self.unit.kind is UnitKind.REPORT else self.relation
