"""Public facts: what a guarantee takes as given, each with where it came from.

A guarantee covers the packets given its public facts; a fact read from the packets themselves is
named as an assumption (``ASSUMED``), so a reader knows what the guarantee does not cover.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass


class Provenance(enum.Enum):
    DECLARED = "declared by the user"
    METADATA = "read from capture metadata"
    ASSUMED = "assumed public, read from the data"
    PARAMETER = "a public parameter"
    CHOSEN_FROM_DATA = "chosen from the recorded packets: NOT covered by any guarantee"


@dataclass(frozen=True)
class PublicFact:
    """``name`` = ``value`` (JSON-ready), its ``provenance`` and a short ``why`` it is needed."""

    name: str
    value: object
    provenance: Provenance
    why: str = ""

    def describe(self) -> str:
        return f"{self.name} = {self.value} ({self.provenance.value}{': ' + self.why if self.why else ''})"

    def to_json(self) -> dict:
        return {"name": self.name, "value": self.value, "provenance": self.provenance.name.lower(),
                "provenance_text": self.provenance.value, "why": self.why}
