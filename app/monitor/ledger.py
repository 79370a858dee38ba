"""The privacy ledger: what has been published about the packets of one session.

One ledger answers for the CLI's JSON ``budget``, the GUI's budget panel and the export alike.
Every algorithm instance that published at least one release is a *segment* (an Apply starts a
new one; earlier segments stay counted). Costs are stated per unit protected:

* packet-level guarantees (unit "one packet") share one line. When their neighbouring relations
  differ, the total is stated for substitution of one packet's source: an add/remove (ε, δ)
  counts there as (2ε, 2e^ε·δ) by group privacy (a substitution is one removal plus one
  addition), as the budget panel always did;
* every other unit (a client host per epoch, one report of a local-DP agent) has its own line and
  never adds to the packet-level total (a different unit is a different promise).

Within one algorithm, segments cover disjoint packets (an Apply restarts it on the packets that
follow), so the worst packet pays the largest segment cost; across algorithms costs add up
(sequential composition: they read the same packets). Seeded noise makes the whole line NOT
private, and the total says so.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from dptop.engine.core.release import NEIGHBOUR_ADD_REMOVE, NEIGHBOUR_SUBSTITUTE, Guarantee
from dptop.engine.privacy.composition import Cost, compose_sequential, group_privacy

PACKET = "one packet"

COMPOSITION = "sequential (every private algorithm reads the same packets)"
MIXED_NOTE = ("the algorithms protect different neighbouring relations, so the total is stated for "
              "substitution of one packet's source: an add/remove guarantee (ε, δ) counts as "
              "(2ε, 2e^ε·δ) by group privacy; packet presence (add/remove) is not covered by the total")


@dataclass
class _Segment:
    name: str
    generation: int
    guarantee: Guarantee
    releases: int = 0
    note: str = ""
    group: int = 1  # updates one packet may contribute (bytes mode): the cost per packet is that of a group


@dataclass(frozen=True)
class LedgerLine:
    """One algorithm's worst per-unit cost so far, in its group's relation."""

    name: str
    cost: Cost
    relation: str
    unit: str
    measure: str
    segments: int
    releases: int
    private: bool
    scope: str
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class LedgerGroup:
    unit: str
    relation: str
    total: Cost
    private: bool
    lines: tuple[LedgerLine, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict:
        return {"unit": self.unit, "neighbouring": self.relation, "epsilon": self.total.epsilon,
                "delta": self.total.delta, "rho": self.total.rho, "private": self.private,
                "composition": COMPOSITION, "notes": list(self.notes),
                "algorithms": {ln.name: {"epsilon": ln.cost.epsilon, "delta": ln.cost.delta, "rho": ln.cost.rho,
                                         "neighbouring": ln.relation, "measure": ln.measure,
                                         "segments": ln.segments, "releases": ln.releases,
                                         "private": ln.private, "scope": ln.scope, "notes": list(ln.notes)}
                               for ln in self.lines}}


def _cost(g: Guarantee) -> Cost:
    return Cost(g.epsilon, g.delta or 0.0, g.rho)


def in_relation(g: Guarantee, relation: str) -> Cost:
    """``g``'s cost stated for ``relation`` (add/remove -> substitution by group privacy 2)."""
    cost = _cost(g)
    if relation == NEIGHBOUR_SUBSTITUTE and g.neighbouring == NEIGHBOUR_ADD_REMOVE:
        return group_privacy(cost, 2) if cost.delta > 0 else Cost(2 * cost.epsilon)
    return cost


def per_packet(cost: Cost, group: int) -> Cost:
    """The cost of one packet that contributes ``group`` updates (group privacy)."""
    if group <= 1:
        return cost
    return group_privacy(cost, group) if cost.delta > 0 else Cost(group * cost.epsilon)


def unit_of(g: Guarantee) -> str:
    """The ledger line a guarantee belongs to: every packet-level unit ("one packet", "one packet
    (its source address)") is one line."""
    return PACKET if g.unit.startswith(PACKET) else g.unit


def is_seeded(g: Guarantee) -> bool:
    return "NOT private" in (g.noise or "")


class Ledger:
    """Thread-safe record of the segments of one session (``record`` from any thread)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._segments: dict[tuple[str, int], _Segment] = {}
        self.notes: list[str] = []

    def record(self, name: str, generation: int, guarantee: Guarantee | None, releases: int, note: str = "",
               group: int = 1) -> None:
        """Algorithm ``name`` (instance ``generation``) has published ``releases`` releases so far;
        one packet is ``group`` of its updates (byte counting)."""
        if guarantee is None or releases <= 0:
            return
        with self._lock:
            seg = self._segments.get((name, generation))
            if seg is None:
                if group > 1:
                    note = (note + "; " if note else "") + (f"bytes: a packet is up to {group} updates, so its "
                                                            f"cost is {group} updates' by group privacy")
                seg = self._segments[(name, generation)] = _Segment(name, generation, guarantee, note=note,
                                                                    group=group)
            seg.guarantee, seg.releases = guarantee, max(seg.releases, releases)

    def note(self, text: str) -> None:
        with self._lock:
            if text not in self.notes:
                self.notes.append(text)

    def groups(self) -> list[LedgerGroup]:
        with self._lock:
            segments = list(self._segments.values())
            notes = tuple(self.notes)
        by_unit: dict[str, list[_Segment]] = {}
        for seg in segments:
            by_unit.setdefault(unit_of(seg.guarantee), []).append(seg)
        groups = [self._group(unit, segs, notes if unit == PACKET else ()) for unit, segs in by_unit.items()]
        return sorted(groups, key=lambda g: (g.unit != PACKET, g.unit))

    def _group(self, unit: str, segments: list[_Segment], notes: tuple) -> LedgerGroup:
        relations = {s.guarantee.neighbouring for s in segments}
        relation = relations.pop() if len(relations) == 1 else NEIGHBOUR_SUBSTITUTE
        if len({s.guarantee.neighbouring for s in segments}) > 1:
            notes = (*notes, MIXED_NOTE)
        by_name: dict[str, list[_Segment]] = {}
        for seg in segments:
            by_name.setdefault(seg.name, []).append(seg)
        lines = []
        for name, segs in by_name.items():
            costs = [per_packet(in_relation(s.guarantee, relation), s.group) for s in segs]
            worst = max(costs, key=lambda c: (c.epsilon, c.delta))
            latest = max(segs, key=lambda s: s.generation).guarantee
            private = not any(is_seeded(s.guarantee) for s in segs)
            seg_notes = tuple(dict.fromkeys(s.note for s in segs if s.note))
            lines.append(LedgerLine(name, worst, relation, unit, latest.measure, len(segs),
                                    sum(s.releases for s in segs), private, latest.scope, seg_notes))
        total = compose_sequential(ln.cost for ln in lines)
        return LedgerGroup(unit, relation, total, all(ln.private for ln in lines), tuple(lines), notes)

    def to_json(self) -> dict | None:
        """The CLI's ``budget`` (contract: ``epsilon``, ``delta``, ``composition``, ``neighbouring``):
        the packet-level group at the top, every other unit under ``other_units``."""
        groups = self.groups()
        if not groups:
            return None
        main, others = (groups[0], groups[1:]) if groups[0].unit == PACKET else (None, groups)
        out = main.to_json() if main is not None else {"epsilon": 0.0, "delta": 0.0, "rho": None,
                                                       "unit": PACKET, "private": True, "algorithms": {}}
        if not out["private"]:
            out["notes"] = [*out.get("notes", []), "seeded noise: NOT private"]
        out["total"] = ("NOT private (seeded noise)" if not out["private"] else
                        f"(ε = {out['epsilon']:.6g}, δ = {out['delta']:.3g}) per packet, {out['neighbouring']}"
                        if main is not None else "no packet-level release")
        if others:
            out["other_units"] = [g.to_json() for g in others]
        return out
