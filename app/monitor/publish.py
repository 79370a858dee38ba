"""The private view (``--publish OUT``, the GUI's export): exactly what the guarantees cover.

Releases of the private algorithms with their typed guarantees, the ledger, the public
parameters, and the public facts with their provenance. Nothing exact: no packet counts, drops,
status or ground truth; a release's span (``public_span``) keeps its times only where they are
the public grid's (a time epoch's bounds, a live continual output step's cells: ``clock_steps``),
and its packet positions only where they are derived from noisy lengths, the
packet epochs or a replay's record count (a fact the guarantee names). ``schema_version`` and
``SCHEMA`` (JSON Schema, draft 2020-12) state the format; extend, never rename.
"""
from __future__ import annotations

from dptop import __version__
from dptop.engine.continual.horizon import ClockSteps
from dptop.engine.core.facts import Provenance, PublicFact
from dptop.monitor.precheck import FILE_SPAN
from dptop.monitor.result import shown_releases
from dptop.monitor.session import Session
from dptop.output import JsonOut

SCHEMA_VERSION = 1
PARAMETERS = ("k", "k_tilde", "epsilon", "delta", "seed", "epoch_packets", "epoch_seconds", "horizon", "restart",
              "window", "gamma")
"""The user's public parameters (the settings minus facts read from the data)."""
SPAN_FIELDS = ("kind", "index", "t_start", "t_end")
"""Span fields every release shows (times ``None`` where no public clock gives them)."""
POSITION_FAMILIES = ("single-release", "continual observation", "sliding window")
"""Families whose ``start``/``end`` may be public (``public_span``); never local DP (``end``
counts reports there)."""


def time_range_facts(session: Session) -> tuple[PublicFact, ...]:
    """The session's time range as the private view names it, with its provenance (the grid of
    every time epoch); none before the range is known."""
    if "time_range" not in session.public:
        return ()
    start, end = session.public["time_range"]
    value = {"start_s": start / 1e9, "end_s": None if end is None else end / 1e9}
    src = session.public_source
    if src == "declared":
        return (PublicFact("time_range", value, Provenance.DECLARED, "the grid of the time epochs"),)
    if src == FILE_SPAN:
        return (PublicFact("time_range", value, Provenance.ASSUMED,
                           f"the grid of the time epochs, from {src}; NOT covered: one packet stamped before the "
                           f"first or after the last moves the grid (declare --time-range to cover it)"),)
    return (PublicFact("time_range", value, Provenance.METADATA, f"the grid of the time epochs: {src}"),)


def clock_steps(session: Session, name: str) -> ClockSteps | None:
    """The public clock on whose cells every lane of ``name`` steps (a live continual algorithm,
    docs/lazyhh.md §7.5), when it is the session's own grid; None otherwise (a replay, a lane
    released at a packet's arrival or at a wall instant)."""
    grid = session.grid
    lanes = [*(r for r in session.retired if r.name == name), session.lanes.get(name)]
    algorithms = [lane.worker.algorithm for lane in lanes if lane is not None and lane.worker is not None]
    clocks = {getattr(a, "clock", None) for a in algorithms}
    if grid is None or not session.fanout.live or len(clocks) != 1:
        return None
    clock = clocks.pop()
    on_grid = isinstance(clock, ClockSteps) and (clock.start_ns, clock.epoch_ns) == (grid.start_ns, grid.epoch_ns)
    return clock if on_grid else None


def clock_times(span, clock: ClockSteps) -> tuple[float, float] | None:
    """``span``'s times recomputed from ``clock``: (start of its first cell, end of its last), or
    None when either is not one of the clock's bounds (a packet's stamp, a wall instant). A span
    of no step yet ends where it starts."""
    if span.t_start is None or span.t_end is None:
        return None
    first = round((span.t_start * 1e9 - clock.start_ns) / clock.epoch_ns)
    last = round((span.t_end * 1e9 - clock.start_ns) / clock.epoch_ns) - 1
    times = clock.bounds(first, last)
    return times if first >= 0 and last >= first - 1 and times == (span.t_start, span.t_end) else None


def public_span(span, family: str, session: Session, clock: ClockSteps | None = None) -> dict:
    """``span`` as the private view shows it. Times: a time epoch's bounds are the public grid's,
    and so are the cells of an output step on the public ``clock`` (``clock_steps``: a live
    continual release covers its segment's cells up to the one whose close made it); any other
    span starts at the grid's start (None without a grid) and shows no end, since its stamps are
    a packet's (a replay) or the instant a view asked for it (live).
    Positions (``start``/``end``): kept where they come from noisy lengths or packet epochs
    (single release: engine/single_release/epochs.py) or, for the continual and
    sliding-window families, from a replay's record count on the output schedule (no time
    epochs); in a live session or on a grid they count the packets seen, and stay out (the
    operator's JSON has them)."""
    d = span.to_json()
    grid = session.grid if session.config.settings.epoch_seconds is not None else None
    out = {"kind": d["kind"], "index": d["index"], "t_start": None, "t_end": None}
    stepped = None if clock is None or span.kind == "epoch" else clock_times(span, clock)
    if span.kind == "epoch" and grid is not None:
        out.update(t_start=d["t_start"], t_end=d["t_end"])
    elif stepped is not None:
        out.update(t_start=stepped[0], t_end=stepped[1])
    elif grid is not None:
        out["t_start"] = grid.start_ns / 1e9
    if family == "single-release":  # positions from the released noisy lengths (epochs.py)
        public = True
    else:  # on a grid, the step a cell's end reached counts that cell's packets
        public = family in POSITION_FAMILIES and not session.fanout.live and grid is None
    if public:
        out.update(start=d["start"], end=d["end"])
    return out


def _release(release, family: str, facts, scale: int, session: Session, clock: ClockSteps | None) -> dict:
    g = release.guarantee.with_facts(facts)
    items = [{"address": it.address, "estimate": it.estimate * scale} for it in release.items]
    span = public_span(release.span, family, session, clock)
    threshold = None if release.threshold is None else release.threshold * scale
    if family == "continual observation" and "end" not in span:
        threshold = None  # LazyHH's τ(t) is a function of its output step t, a position kept private here
    return {"span": span, "threshold": threshold, "items": items, "guarantee": g.to_json()}


def publish_json(session: Session, command: str, shown: dict | None = None) -> dict:
    """The private view of ``session`` (see the module docstring); ``shown``: per algorithm, the
    releases a view printed while it ran (dptop.monitor.result.shown_releases)."""

    snap = session.snapshot()
    c = session.config.counting
    scale = c.unit if c.weight == "bytes" else 1
    grid = time_range_facts(session) if session.config.settings.epoch_seconds is not None else ()
    facts: dict[str, PublicFact] = {f.name: f for f in grid}
    algorithms = {}
    for v in snap.lanes:
        s = v.algorithm
        if s is None or not s.private or s.guarantee is None:
            continue
        given = (*grid, *session.ledger.tuned(v.name))
        facts.update({f.name: f for f in (*s.guarantee.facts, *given)})
        rels = [r for r in shown_releases(session.releases(v.name), (shown or {}).get(v.name, []))
                if r.guarantee is not None]
        clock = clock_steps(session, v.name)
        algorithms[v.name] = {"family": s.family, "guarantee": s.guarantee.with_facts(given).to_json(),
                              "releases": [_release(r, s.family, given, scale, session, clock) for r in rels]}
    guarantees = [a["guarantee"] for a in algorithms.values()]
    return {
        "schema_version": SCHEMA_VERSION,
        "dptop": __version__,
        "command": command,
        "private": all(g["private"] for g in guarantees),
        "parameters": {k: getattr(session.config.settings, k) for k in PARAMETERS},
        "counting": {"key": c.key, "weight": c.weight, "byte_unit": c.unit, "byte_cap": c.cap, "text": c.describe()},
        "public_facts": [f.to_json() for f in facts.values()],
        "algorithms": algorithms,
        "budget": snap.budget,
    }


def write_whole(path: str, result: dict) -> None:
    """Write ``result`` as JSON to ``path`` whole or not at all (``dptop.output.JsonOut``)."""
    JsonOut(path, "the private view").write(result)


NUMBER_OR_NULL = {"type": ["number", "null"]}
_FACT = {"type": "object", "required": ["name", "value", "provenance", "why"], "properties": {
    "name": {"type": "string"}, "provenance": {"enum": [p.name.lower() for p in Provenance]},
    "provenance_text": {"type": "string"}, "why": {"type": "string"}}}
GUARANTEE_SCHEMA = {"type": "object", "required": ["model", "measure", "epsilon", "delta", "rho", "neighbouring", "unit",
                                             "scope", "noise", "notes", "text", "private", "relation", "unit_kind",
                                             "key", "public_facts"],
              "properties": {"epsilon": {"type": "number"}, "delta": NUMBER_OR_NULL, "rho": NUMBER_OR_NULL, "private": {"type": "boolean"},
                             "relation": {"enum": ["add_remove", "substitute"]},
                             "unit_kind": {"enum": ["packet", "host", "report"]},
                             "public_facts": {"type": "array", "items": _FACT}}}
_SPAN = {"type": "object", "required": list(SPAN_FIELDS), "additionalProperties": False,
         "properties": {"kind": {"type": "string"}, "index": {"type": "integer"}, "t_start": NUMBER_OR_NULL, "t_end": NUMBER_OR_NULL,
                        "start": {"type": "integer"}, "end": {"type": "integer"}}}
_RELEASE = {"type": "object", "required": ["span", "threshold", "items", "guarantee"], "additionalProperties": False,
            "properties": {"span": _SPAN, "threshold": NUMBER_OR_NULL, "guarantee": GUARANTEE_SCHEMA,
                           "items": {"type": "array", "items": {
                               "type": "object", "required": ["address", "estimate"], "additionalProperties": False,
                               "properties": {"address": {"type": "string"}, "estimate": {"type": "number"}}}}}}
_BUDGET = {"type": ["object", "null"], "required": ["epsilon", "delta", "composition", "neighbouring", "private",
                                                    "algorithms", "total"]}
SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "dptop private view",
    "type": "object",
    "required": ["schema_version", "dptop", "command", "private", "parameters", "counting", "public_facts",
                 "algorithms", "budget"],
    "additionalProperties": False,
    "properties": {
        "schema_version": {"const": SCHEMA_VERSION},
        "dptop": {"type": "string"}, "command": {"type": "string"}, "private": {"type": "boolean"},
        "parameters": {"type": "object", "additionalProperties": False,
                       "properties": {k: {} for k in PARAMETERS}},
        "counting": {"type": "object"},
        "public_facts": {"type": "array", "items": _FACT},
        "algorithms": {"type": "object", "additionalProperties": {
            "type": "object", "required": ["family", "guarantee", "releases"], "additionalProperties": False,
            "properties": {"family": {"type": "string"}, "guarantee": GUARANTEE_SCHEMA,
                           "releases": {"type": "array", "items": _RELEASE}}}},
        "budget": _BUDGET,
        "exported_at": {"type": "string"},
    },
}
