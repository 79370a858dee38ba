"""Public facts: what a guarantee takes as given, each with where it came from.

A mechanism sizes and calibrates itself from its parameters (``settings.Settings``) and these
facts only, never from the counts it sees. A guarantee covers the packets given its public facts;
a fact read from the packets themselves is named as an assumption (``ASSUMED``), so a reader knows
what the guarantee does not cover (docs: the README's privacy section lists every fact a default
may assume).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, replace


class Provenance(enum.Enum):
    DECLARED = "declared by the user"
    METADATA = "read from capture metadata"
    ASSUMED = "assumed public, read from the data"
    PARAMETER = "a public parameter"
    CHOSEN_FROM_DATA = "chosen from the recorded packets: NOT covered by any guarantee"

    @property
    def covered(self) -> bool:
        """Whether a guarantee holds with this fact as given, whatever the packets: a declared
        value, capture metadata or a parameter, not a value read from the packets."""
        return self in (Provenance.DECLARED, Provenance.METADATA, Provenance.PARAMETER)


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


@dataclass(frozen=True)
class PublicFacts:
    """Every fact about the source a mechanism may read, each a ``PublicFact`` or None (not known):

    * ``stream_length``: the packets of a replayed file (an int), counted before the run;
    * ``time_range``: ``(start_ns, end_ns)`` of the session's time epochs, ``end_ns`` None for an
      open-ended live capture (engine/core/clock.py).

    A default that uses a fact whose provenance is not ``covered`` lists it in its guarantee
    (``Guarantee.facts``) so the release and the ledger say it is assumed."""

    stream_length: PublicFact | None = None
    time_range: PublicFact | None = None

    @classmethod
    def of(cls, stream_length: int | None = None, time_range: tuple | None = None,
           length_provenance: Provenance = Provenance.ASSUMED,
           range_provenance: Provenance = Provenance.DECLARED, range_why: str = "") -> "PublicFacts":
        """Facts from plain values: a file's packet count is read from its packets (``ASSUMED``
        unless stated otherwise); a time range is declared unless stated otherwise."""
        return cls(
            None if stream_length is None else PublicFact(
                "stream_length", int(stream_length), length_provenance, "the replayed file's packet count"),
            None if time_range is None else PublicFact(
                "time_range", tuple(time_range), range_provenance, range_why or "the grid of the time epochs"))

    @property
    def length(self) -> int | None:
        """The stream length, whatever its provenance (a default using it lists it if assumed)."""
        return None if self.stream_length is None else self.stream_length.value

    @property
    def covered_length(self) -> int | None:
        """The stream length only when a guarantee covers it as given (declared, metadata)."""
        fact = self.stream_length
        return fact.value if fact is not None and fact.provenance.covered else None

    @property
    def span(self) -> tuple[int, int | None] | None:
        return None if self.time_range is None else self.time_range.value

    def assumed(self, *names: str) -> tuple[PublicFact, ...]:
        """The facts among ``names`` that are known and not covered (to list in a guarantee)."""
        facts = (getattr(self, name) for name in names)
        return tuple(f for f in facts if f is not None and not f.provenance.covered)

    def with_(self, **changes) -> "PublicFacts":
        return replace(self, **changes)


NO_FACTS = PublicFacts()
"""Nothing known about the source (a live capture before its clock starts, a unit test)."""
