"""The collector's side: merge what capture points shipped and release once per epoch.

Merges run in a fixed agent order (the order agents were named), so a run is reproducible even
for the merges that are not associative (Misra-Gries, SpaceSaving). Every release names the
capture points whose data it holds (its status's ``agents``) and, in its guarantee notes and status,
those expected but missing (lost before they delivered): their packets of that epoch are in no
release, and the release does not claim them.
"""
from __future__ import annotations

from dataclasses import dataclass

from dptop.cluster.plan import Plan, declaration
from dptop.engine.baselines.merge import CountSummary
from dptop.engine.core.mergeable import WholeStreamMerge
from dptop.engine.core.release import Release, Span
from dptop.engine.core.status import Covered


class Merger:
    def __init__(self, plan: Plan, agents: list[str]):
        self.plan = plan
        self.agents = list(agents)
        self._whole: dict[str, dict] = {}
        self._exact: dict[str, CountSummary] = {}
        self._epochs: dict[int, dict[str, dict]] = {}
        self._algorithms = {n: plan.release_algorithm(n) for n in plan.private}
        self.releases: dict[str, list[Release]] = {n: [] for n in plan.names}

    def add_agent(self, agent: str) -> None:
        if agent not in self.agents:
            self.agents.append(agent)

    def add_exact(self, agent: str, delta: CountSummary) -> None:
        """Exact counts are a running sum per agent (deltas merge associatively)."""
        self.add_agent(agent)
        self._exact[agent] = self._exact[agent].merge(delta) if agent in self._exact else delta

    def add_whole(self, agent: str, summaries: dict) -> None:
        """An agent's final whole-stream baselines (and its last exact-count delta)."""
        summaries = dict(summaries)
        self.add_exact(agent, summaries.pop(self.plan.truth))
        self._whole[agent] = summaries

    def add_epoch(self, agent: str, epoch: int, summaries: dict) -> None:
        self.add_agent(agent)
        self._epochs.setdefault(epoch, {})[agent] = summaries

    def delivered(self, epoch: int) -> set[str]:
        return set(self._epochs.get(epoch, {}))

    def _ordered(self, by_agent: dict) -> list[str]:
        return [a for a in self.agents if a in by_agent]

    def release_epoch(self, epoch: int, covered, missing=()) -> list[Release]:
        """Merge and release every private algorithm's ``epoch`` from the ``covered`` agents (an
        agent without packets in it ships nothing); ``missing`` agents are named as not covered."""
        by_agent = self._epochs.pop(epoch, {})
        covered = [a for a in self.agents if a in set(covered)]
        missing = [a for a in self.agents if a in set(missing)]
        notes = (f"merged from {len(covered)} capture point(s): {', '.join(covered) or 'none'}",)
        if missing:
            notes += (f"NOT covered: capture point(s) {', '.join(missing)} lost before delivering this "
                      f"epoch; their packets of this epoch are in no release",)
        coverage = Covered(agents=tuple(covered), agents_missing=tuple(missing))
        grid = self.plan.grid
        out = []
        for name, alg in self._algorithms.items():
            parts = [by_agent[a][name] for a in covered if name in by_agent.get(a, {})]
            merged = declaration(name).merge(parts) if parts else None
            packets = max((p.n for p in parts), default=0)
            state = None if merged is None else alg.state_of(merged)
            rel = alg.publish(state, packets, epoch, None if grid is None else grid.first_cell + epoch,
                              notes, coverage)
            self.releases[name].append(rel)
            out.append(rel)
        return out

    def pending_epochs(self) -> list[int]:
        return sorted(self._epochs)

    def exact(self) -> CountSummary:
        """The exact counts merged over every capture point, as far as each has shipped them."""
        parts = [self._exact[a] for a in self._ordered(self._exact)]
        return declaration(self.plan.truth).merge(parts) if parts else CountSummary.empty()

    def release_whole(self, gone=()) -> list[Release]:
        """The non-private baselines over the whole merged stream (one release each). ``gone``:
        agents lost before their final summaries; the exact counts hold what they shipped until
        then (``agents_partial``), the other baselines nothing of theirs (``agents_missing``)."""
        covered = self._ordered(self._whole)
        gone = set(gone)
        settings = self.plan.settings
        out = []
        for name in self.plan.names:
            merge = declaration(name)
            if not isinstance(merge, WholeStreamMerge):
                continue
            if merge.ground_truth:  # running deltas: what every agent shipped, lost ones included
                merged = self.exact()
                shipped = self._ordered(self._exact)
                agents, partial = tuple(a for a in shipped if a not in gone), tuple(a for a in shipped if a in gone)
            else:
                parts = [self._whole[a][name] for a in covered if name in self._whole[a]]
                if not parts:
                    continue
                merged = merge.merge(parts)
                agents, partial = tuple(covered), None
            missing = tuple(a for a in self.agents if a in gone and a not in agents and a not in (partial or ()))
            items, figures = merge.release(merged, settings)
            status = Covered(figures=figures, agents=agents, agents_partial=partial, agents_missing=missing,
                             coverage_first=True)
            rel = Release(name, Span(0, merged.n), items, status=status)
            self.releases[name].append(rel)
            out.append(rel)
        return out


@dataclass(frozen=True)
class MergedResult:
    """A merged run: per-agent reports, the merged exact counts and per algorithm its releases
    (baselines: one over the whole merged stream; private: one per epoch, each naming the capture
    points it covers)."""

    agents: tuple
    exact: CountSummary
    releases: dict
    plan: Plan

    def exact_top(self, n: int | None = None):
        return self.exact.top(n)

    def to_json(self, top: int = 10) -> dict:
        """The replay JSON's sections for a merged run: ``agents``, ``exact`` (total, distinct,
        top) and per algorithm whether it is private, its guarantee and its releases."""
        algorithms = {}
        for name, rels in self.releases.items():
            guarantee = next((r.guarantee for r in rels if r.guarantee is not None), None)
            algorithms[name] = {"private": guarantee is not None,
                                "guarantee": None if guarantee is None else guarantee.to_json(),
                                "releases": [r.to_json() for r in rels]}
        return {"agents": [a.to_json() for a in self.agents],
                "exact": {"total": self.exact.n, "distinct": len(self.exact.keys),
                          "top": [{"address": it.address, "count": int(it.estimate)} for it in self.exact_top(top)]},
                "algorithms": algorithms}
