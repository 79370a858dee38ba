"""Mergeability is declared by the algorithm, in its engine registry entry, and the cluster reads it
from there: cluster mode runs exactly the declared algorithms, refuses every other one in one line,
ships each one's declared summary type on the wire, and keeps no list of names of its own."""
from __future__ import annotations

import argparse
from dataclasses import dataclass
import re

import numpy as np
import pytest

from dptop.cluster.cli import add_subcommands, main
from dptop.cluster.merger import Merger
from dptop.cluster.plan import Plan, check_names, ground_truth, mergeable_names, new_master
from dptop.cluster.point import CapturePoint
from dptop.cluster.wire import TYPE_OF, WireError, decode, encode, summary_type
from dptop.engine.baselines.merge import CountSummarizer, CountSummary, merge_all
from dptop.engine.core import registry
from dptop.engine.core.keys import KeyBatch
from dptop.engine.core.mergeable import EpochMerge, WholeStreamMerge
from dptop.engine.core.settings import Settings
from dptop.engine.core.status import NO_FIGURES, ReleaseStatus

WIRE_TYPES = {"exact": "count", "spacesaving": "ss", "misragries": "mg", "countmin": "sketch",
              "dpmg": "mg", "eehh-cms": "sketch"}
"""Pinned: the algorithms whose merge a privacy or accuracy argument covers, and the summary type
each ships (the wire format). Declaring another algorithm mergeable must be a decision a test sees."""
UNDECLARED = sorted(set(registry.names()) - set(WIRE_TYPES))


def _accepted(names) -> set[str]:
    out = set()
    for name in names:
        try:
            check_names([name])
        except ValueError:
            continue
        out.add(name)
    return out


def two_agents_merged(plan: Plan):
    """Agents a (key (1, 1) x5, (2, 2) x2) and b ((2, 2) x4, (3, 3) x1), each summarizing epoch 0
    and the whole stream, their summaries sent through the wire format to one merger."""
    points = {}
    for agent, keys in (("a", [[1, 1]] * 5 + [[2, 2]] * 2), ("b", [[2, 2]] * 4 + [[3, 3]])):
        points[agent] = point = CapturePoint(plan)
        keys = np.array(keys, np.uint64)
        point.feed(KeyBatch(keys, np.arange(len(keys), dtype=np.int64)))
    merger = Merger(plan, list(points))
    for agent, point in points.items():
        merger.add_epoch(agent, 0, decode(encode(point.take_epoch(0))))
        merger.add_whole(agent, decode(encode(point.take_whole())))
    return points, merger

def test_the_cluster_runs_exactly_the_declared_algorithms():
    declared = {n for n in registry.names() if registry.mergeable(n) is not None}
    assert _accepted(registry.names()) == declared == set(mergeable_names()) == set(WIRE_TYPES)
    assert UNDECLARED and "dpss" in UNDECLARED and "lazyhh" in UNDECLARED
    assert {n for n in WIRE_TYPES if isinstance(registry.mergeable(n), EpochMerge)} == {"dpmg", "eehh-cms"}
    assert ground_truth() == "exact"


def test_the_wire_takes_each_declared_summary_type_and_nothing_else():
    for name in registry.names():
        declared = registry.mergeable(name)
        assert summary_type(name) == (None if declared is None else TYPE_OF[declared.summary]) == WIRE_TYPES.get(name)
    payload = encode({"lazyhh": CountSummary.empty()})
    with pytest.raises(WireError, match="unknown algorithm 'lazyhh'"):
        decode(payload)


@pytest.mark.parametrize("name", UNDECLARED)
def test_an_undeclared_algorithm_is_refused_in_one_line(name, capsys):
    assert main(["collect", "--scheduler", "tcp://127.0.0.1:1", "--algorithms", f"exact,{name}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dptop: error: --algorithms: not available in cluster mode: ") and "\n" not in err
    assert re.search(rf": {re.escape(name)} — ", err), err
    with pytest.raises(ValueError, match=f"not available in cluster mode: {re.escape(name)} "):
        Plan((name,), Settings(k=4), b"\0" * 32)


def test_collect_help_lists_the_declared_algorithms():
    sub = argparse.ArgumentParser(prog="dptop").add_subparsers()
    add_subcommands(sub)
    text = " ".join(sub.choices["collect"].format_help().split())
    listed = re.search(r"mergeable algorithms \(([^)]*)\)", text).group(1)
    assert tuple(listed.split(", ")) == tuple(mergeable_names())


@dataclass(frozen=True, kw_only=True)
class Declared(ReleaseStatus):
    """A newly declared baseline's figure."""

    declared: bool


class Tally:
    """A stand-in algorithm registered for one test: exact counts under another name."""

    name = "tally-for-a-test"


@pytest.fixture
def scratch_registry(monkeypatch):
    """The registry as it is, in copies this test may change."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._load()))
    monkeypatch.setattr(registry, "_MERGEABLE", dict(registry._MERGEABLE))
    registry.register(Tally)


def test_the_cluster_follows_a_new_declaration(scratch_registry):
    with pytest.raises(ValueError, match=f"not available in cluster mode: {Tally.name} "):
        check_names([Tally.name])
    released = []

    def release(merged, settings):
        released.append(merged.n)
        return merged.top(settings.k), Declared(declared=True)

    registry.declare_mergeable(Tally, WholeStreamMerge(
        CountSummary, lambda settings, master: CountSummarizer(), merge_all, release))
    assert Tally.name in mergeable_names() and check_names([Tally.name]) == (Tally.name,)

    settings = Settings(k=2, seed=3)
    plan = Plan((Tally.name, "dpmg"), settings, new_master(settings))
    assert plan.private == ("dpmg",) and plan.whole == {"exact", Tally.name}
    points, merger = two_agents_merged(plan)
    (tally,) = merger.release_whole()
    assert released == [12] and tally.algorithm == Tally.name and tally.status.figures.declared is True
    assert [(it.estimate) for it in tally.items] == [6, 5]  # key (2, 2): 2 + 4, key (1, 1): 5
    (private,) = merger.release_epoch(0, covered=list(points))
    assert private.algorithm == "dpmg" and private.status.agents == ("a", "b")


def test_only_a_registered_algorithm_declares_a_mergeability(scratch_registry):
    declared = WholeStreamMerge(CountSummary, lambda s, m: CountSummarizer(), merge_all, lambda m, s: ((), NO_FIGURES))

    class Unknown:
        name = "not-registered"

    with pytest.raises(ValueError, match="only a registered algorithm"):
        registry.declare_mergeable(Unknown, declared)
    with pytest.raises(TypeError, match="WholeStreamMerge or an EpochMerge"):
        registry.declare_mergeable(Tally, {"summary": CountSummary})
    registry.declare_mergeable(Tally, declared)
    with pytest.raises(ValueError, match="declared mergeable twice"):
        registry.declare_mergeable(Tally, WholeStreamMerge(CountSummary, lambda s, m: CountSummarizer(), merge_all,
                                                           lambda m, s: ((), NO_FIGURES)))


def test_every_mergeable_release_states_a_typed_status_that_renders():
    """Each declared whole-stream and epoch merge releases a typed status (the summary's figures
    inside the coverage) whose JSON has the coverage in the contract's order: a release that
    came back with a dict (as countmin's once did) fails here, not in a user's replay."""
    names = tuple(mergeable_names())
    settings = Settings(k=2, seed=3)
    plan = Plan(names, settings, new_master(settings))
    points, merger = two_agents_merged(plan)
    whole, epoch = merger.release_whole(), merger.release_epoch(0, covered=list(points))
    assert {r.algorithm for r in whole + epoch} >= set(names) - {"exact"}
    for rel in whole:
        assert isinstance(rel.status.figures, ReleaseStatus), rel.algorithm
        assert list(rel.to_json()["status"])[:1] == ["agents"] and rel.status.agents == ("a", "b"), rel.algorithm
    for rel in epoch:
        assert isinstance(rel.status.figures, ReleaseStatus), rel.algorithm
        assert list(rel.to_json()["status"])[-2:] == ["agents", "agents_missing"], rel.algorithm
