"""The privacy ledger: what has been published about the packets of one session, composed by types.

One ledger answers for the CLI's JSON ``budget``, the GUI's budget panel and the export alike.
Every algorithm instance that published at least one release is a *segment* (an Apply starts a
new one; earlier segments stay counted). Nothing here reads a guarantee's words: costs are typed
measures (``dptop.engine.privacy``), converted by functions.

* **Per packet** (the top line): every lane that reads the packets pays for one packet, whatever
  its own unit: a packet-level release its cost (bytes already counted by group privacy); a
  host-level release the host's cost for the epoch holding the packet (one packet changes one
  host's epoch); a local-DP lane its agent's window budget R·ε (one packet may change the whole
  sample), or ε when every packet is a report. When relations differ, the total is stated for
  substitution of one packet's key: an add/remove cost counts as a group of 2, (2ε, (1+e^ε)·δ).
* **Per unit** (``other_units``): a host-level line per epoch and over the session (a host present
  in every epoch is covered by every release: basic composition), a local-DP line per report.

Within one algorithm, segments cover disjoint packets (an Apply restarts it on the packets that
follow), so the worst packet pays the largest segment cost; across algorithms costs add up
(sequential composition: they read the same packets). Seeded noise makes the whole line NOT
private, and the total says so.

One ledger per source: every session over the same source joins it (``join``) as a *reading*.
A capture file read again (``dptop top``'s key switch, a restart of the window) reads the same
packets, so its costs add to the earlier readings'; a live capture started again reads later
packets, so its readings stay disjoint like Apply's segments.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace

from dptop.engine.core.facts import PublicFact
from dptop.engine.privacy.guarantee import Guarantee
from dptop.engine.privacy.measures import Measure, compose, render
from dptop.engine.privacy.units import PACKET, Relation, Unit, UnitKind, in_relation

COMPOSITION = "sequential (every private algorithm reads the same packets)"
MIXED_NOTE = ("the algorithms protect different neighbouring relations, so the total is stated for "
              "substitution of one packet's key: an add/remove guarantee (ε, δ) counts as "
              "(2ε, (1+e^ε)·δ) by group privacy; packet presence (add/remove) is not covered by the total")


@dataclass
class _Segment:
    name: str
    generation: int
    guarantee: Guarantee
    releases: int = 0
    note: str = ""
    rereading: int = 0  # readings with the same number read disjoint packets; different ones the same


@dataclass(frozen=True)
class LedgerLine:
    """One algorithm's worst cost so far, per unit of its group (``per``: what the cost is for)."""

    name: str
    cost: Measure
    relation: Relation
    unit: Unit
    segments: int
    releases: int
    private: bool
    scope: str
    notes: tuple[str, ...] = ()
    session: Measure | None = None  # host-level: over all the epochs released so far

    def to_json(self, key_unit: Unit) -> dict:
        out = {"epsilon": self.cost.epsilon, "delta": self.cost.delta, "rho": self.cost.rho,
               "neighbouring": key_unit.neighbouring(self.relation), "measure": self.cost.label,
               "segments": self.segments, "releases": self.releases, "private": self.private,
               "scope": self.scope, "notes": list(self.notes), "unit": self.unit.label()}
        if self.session is not None:
            out["session"] = {"epsilon": self.session.epsilon, "delta": self.session.delta,
                              "epochs": self.releases, "composition": "basic, over the epochs released"}
        return out


@dataclass(frozen=True)
class LedgerGroup:
    unit: Unit
    relation: Relation
    total: Measure
    private: bool
    lines: tuple[LedgerLine, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    session: Measure | None = None

    def to_json(self) -> dict:
        out = {"unit": self.unit.label(), "unit_kind": self.unit.kind.value,
               "neighbouring": self.unit.neighbouring(self.relation), "relation": self.relation.name.lower(),
               "epsilon": self.total.epsilon, "delta": self.total.delta or 0.0, "rho": self.total.rho,
               "measure": self.total.label, "private": self.private, "composition": COMPOSITION,
               "notes": list(self.notes), "algorithms": {ln.name: ln.to_json(self.unit) for ln in self.lines}}
        if self.session is not None:
            out["session"] = {"epsilon": self.session.epsilon, "delta": self.session.delta,
                              "composition": "basic, over every epoch released (a host present in all of them)"}
        return out


def _worst(costs) -> Measure:
    return max(costs, key=lambda c: (c.epsilon, c.delta or 0.0))


def _host_caveats(host: list[_Segment], every: list[_Segment]) -> tuple[str, ...]:
    """What a host-level line does not cover: the other lanes protect one packet, not a host, and
    the facts they assume (a file's packet count sizing a horizon or a window) change when a host's
    packets are removed."""
    names = sorted({s.name for s in host})
    others = sorted({s.name for s in every if s.guarantee.packet_level})
    if not others:
        return ()
    facts = {(f.name, s.name) for s in every if s.guarantee.packet_level
             for f in s.guarantee.facts if not f.provenance.covered}
    out = [f"covers the releases of {', '.join(names)} only: {', '.join(others)} protect one packet, not a host"]
    out += [f"NOT covered for a host: {fact} (assumed, read from the data) sizes {name}; removing a host's packets "
            f"changes it" for fact, name in sorted(facts)]
    return tuple(out)


def _arithmetic(lines) -> str:
    terms = " + ".join(f"{ln.name} ({', '.join(render(ln.cost))})" for ln in lines)
    return f"per packet: {terms} = ({', '.join(render(compose(ln.cost for ln in lines).approx()))})"


class Ledger:
    """Thread-safe record of the segments of one session (``record`` from any thread)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._segments: dict[tuple[str, int], _Segment] = {}
        self.notes: list[str] = []
        self._tuned: dict[str, list[PublicFact]] = {}  # algorithm -> parameters chosen from the packets
        self._readings: list[int] = []  # per reading (a session on the source), its rereading number

    def join(self, rereads: bool) -> int:
        """A session starts reading this ledger's source: its reading number (``record``'s
        ``reading``). ``rereads``: it reads packets an earlier reading read (a capture file replayed
        again), so its costs compose with theirs; else (a live capture started again) it reads
        later packets only."""
        with self._lock:
            last = self._readings[-1] if self._readings else 0
            self._readings.append(last + 1 if rereads or not self._readings else last)
            return len(self._readings) - 1

    def record(self, name: str, generation: int, guarantee: Guarantee | None, releases: int, note: str = "",
               reading: int = 0) -> None:
        """Algorithm ``name`` (instance ``generation`` of the session's ``reading``) has published
        ``releases`` releases so far."""
        if guarantee is None or releases <= 0:
            return
        with self._lock:
            rereading = self._readings[reading] if reading < len(self._readings) else 0
            seg = self._segments.get((reading, name, generation))
            if seg is None:
                seg = self._segments[(reading, name, generation)] = _Segment(name, generation, guarantee, note=note,
                                                                             rereading=rereading)
            seg.guarantee, seg.releases = guarantee, max(seg.releases, releases)

    def record_tuning(self, name: str, fact: PublicFact) -> None:
        """A parameter of ``name`` applied from a sweep over the recorded packets: the choice is a
        function of those packets that no guarantee covers (the hyperparameter-tuning leak: Liu and
        Talwar 2019; Papernot and Steinke 2022); recorded, never charged."""
        with self._lock:
            self._tuned.setdefault(name, []).append(fact)

    def tuned(self, name: str) -> tuple[PublicFact, ...]:
        with self._lock:
            return tuple(self._tuned.get(name, ()))

    def note(self, text: str) -> None:
        with self._lock:
            if text not in self.notes:
                self.notes.append(text)

    def _snapshot(self) -> tuple[list[_Segment], tuple[str, ...]]:
        with self._lock:
            return [replace(s) for s in self._segments.values()], tuple(self.notes)

    def packet_group(self) -> LedgerGroup | None:
        """Every lane's cost to one packet, composed (the module docstring)."""
        segments, notes = self._snapshot()
        if not segments:
            return None
        relations = {s.guarantee.packet_relation for s in segments}
        relation = relations.pop() if len(relations) == 1 else Relation.SUBSTITUTE
        if len({s.guarantee.packet_relation for s in segments}) > 1:
            notes = (*notes, MIXED_NOTE)
        key = segments[0].guarantee.unit.key
        lines = self._lines(segments, lambda g: in_relation(g.per_packet(), g.packet_relation, relation), relation)
        if len(lines) > 1:
            notes = (*notes, _arithmetic(lines))
        return LedgerGroup(replace(PACKET, key=key), relation, compose(ln.cost for ln in lines),
                           all(ln.private for ln in lines), tuple(lines), notes)

    def unit_groups(self) -> list[LedgerGroup]:
        """One group per host-level or local-DP unit, in that unit's own terms."""
        segments, _ = self._snapshot()
        by_unit: dict[Unit, list[_Segment]] = {}
        for seg in segments:
            if not seg.guarantee.packet_level:
                by_unit.setdefault(replace(seg.guarantee.unit, group=1), []).append(seg)
        groups = []
        for unit, segs in sorted(by_unit.items(), key=lambda kv: kv[0].label()):
            relation = segs[0].guarantee.relation
            lines = self._lines(segs, lambda g: g.cost, relation)
            session = None
            if unit.kind is UnitKind.HOST:
                lines = [replace(ln, session=compose([ln.cost] * ln.releases)) for ln in lines]
                session = compose(ln.session for ln in lines)
            notes = (() if unit.kind is not UnitKind.HOST else
                     ("per epoch: a host is one user in each epoch; over the session a host present in E epochs "
                      "is covered by E releases (line 'session')", *_host_caveats(segs, segments)))
            groups.append(LedgerGroup(unit, relation, compose(ln.cost for ln in lines),
                                      all(ln.private for ln in lines), tuple(lines), notes, session))
        return groups

    @staticmethod
    def _lines(segments: list[_Segment], cost_of, relation: Relation) -> list[LedgerLine]:
        by_name: dict[str, list[_Segment]] = {}
        for seg in segments:
            by_name.setdefault(seg.name, []).append(seg)
        lines = []
        for name, segs in by_name.items():
            latest = max(segs, key=lambda s: (s.rereading, s.generation)).guarantee
            notes = tuple(dict.fromkeys(s.note for s in segs if s.note))
            rereadings: dict[int, list[Measure]] = {}
            for seg in segs:
                rereadings.setdefault(seg.rereading, []).append(cost_of(seg.guarantee))
            cost = compose(_worst(costs) for costs in rereadings.values())  # the same packets, read again
            if len(rereadings) == 1:
                cost = _worst(next(iter(rereadings.values())))
            lines.append(LedgerLine(name, cost, relation, latest.unit, len(segs), sum(s.releases for s in segs),
                                    all(s.guarantee.private for s in segs), latest.scope, notes))
        return lines

    def to_json(self) -> dict | None:
        """The CLI's ``budget`` (contract: ``epsilon``, ``delta``, ``composition``, ``neighbouring``):
        the per-packet group of every lane at the top, every other unit under ``other_units``."""
        main = self.packet_group()
        if main is None:
            return None
        out = main.to_json()
        if not out["private"]:
            out["notes"] = [*out.get("notes", []), "seeded noise: NOT private"]
        out["total"] = ("NOT private (seeded noise)" if not out["private"] else
                        f"({', '.join(render(main.total.approx(), ' = '))}) per packet, {out['neighbouring']}")
        others = self.unit_groups()
        if others:
            out["other_units"] = [g.to_json() for g in others]
        with self._lock:
            tuned = {name: [f.to_json() for f in facts] for name, facts in self._tuned.items()}
        if tuned:
            out["tuning"] = tuned
            out["notes"] = [*out["notes"], "parameters chosen by a sweep over the recorded packets (tuning): the "
                                           "choice is NOT covered by the budget (" + ", ".join(
                                               f"{n}: {f['name']} = {f['value']}" for n, fs in tuned.items()
                                               for f in fs) + ")"]
        return out
