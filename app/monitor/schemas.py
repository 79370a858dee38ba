"""JSON Schemas (draft 2020-12) of every subcommand's ``--json`` output, by subcommand; the private
view (``--publish``, the feed's ``/releases``) is ``dptop.monitor.publish.SCHEMA``. They state the
contract other tools rely on (extend, never rename): ``required`` lists the fields a reader may count
on, and further fields may be added."""
from __future__ import annotations

from dptop.monitor.publish import GUARANTEE_SCHEMA, NUMBER_OR_NULL, SCHEMA as PRIVATE_VIEW

_COUNTS = {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}}
_ITEM = {"type": "object", "required": ["address", "estimate"],
         "properties": {"address": {"type": "string"}, "estimate": {"type": "number"}}}
_SPAN = {"type": "object", "required": ["kind", "index"],
         "properties": {"kind": {"type": "string"}, "index": {"type": "integer"}, "t_start": NUMBER_OR_NULL, "t_end": NUMBER_OR_NULL}}
_RELEASE = {"type": "object", "required": ["span", "threshold", "items"],
            "properties": {"span": _SPAN, "threshold": NUMBER_OR_NULL, "items": {"type": "array", "items": _ITEM},
                           "guarantee": {"oneOf": [{"type": "null"}, GUARANTEE_SCHEMA]}, "status": {"type": "object"}}}
_TRUTH = {"type": "object", "required": ["release", "packets"],
          "properties": {"release": {"type": "integer", "minimum": 0}, "packets": {"type": ["integer", "null"]},
                         "counts": {"type": ["array", "null"], "items": {"type": "integer"}},
                         "unseen": {"type": "integer", "minimum": 0}, "note": {"type": "string"}}}
"""Exact counts of one shown release's labels over the packets it covers and its lane saw (NOT
private): ``packets`` those compared, ``unseen`` those of the span the lane's full queue refused."""
_ALGORITHM = {"type": "object", "required": ["private", "releases"],
              "properties": {"private": {"type": ["boolean", "null"]},
                             "guarantee": {"oneOf": [{"type": "null"}, GUARANTEE_SCHEMA]},
                             "updates_per_second": NUMBER_OR_NULL, "packets_per_second": NUMBER_OR_NULL, "busy_share": NUMBER_OR_NULL,
                             "packets": {"type": "integer"}, "drops": {"type": "integer"},
                             "status": {"type": "object"}, "error": {"type": ["string", "null"]},
                             "releases_published": {"type": "integer"},
                             "releases": {"type": "array", "items": _RELEASE},
                             "truth": {"type": "array", "items": _TRUTH}}}
_EXACT = {"type": "object", "required": ["total", "top"],
          "properties": {"total": {"type": "integer", "minimum": 0}, "distinct": {"type": "integer", "minimum": 0},
                         "top": {"type": "array", "items": {
                             "type": "object", "required": ["address", "count"],
                             "properties": {"address": {"type": "string"}, "count": {"type": "integer"}}}}}}
_SOURCE = {"type": "object", "required": ["packets", "ip_packets", "skipped"],
           "properties": {"packets": {"type": "integer", "minimum": 0}, "ip_packets": {"type": "integer", "minimum": 0},
                          "skipped": _COUNTS, "warnings": {"type": "array", "items": {"type": "string"}}}}
_BUDGET = PRIVATE_VIEW["properties"]["budget"]

RUN = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "dptop replay / capture result",
    "type": "object",
    "required": ["dptop", "command", "partial", "settings", "source", "exact", "algorithms", "budget", "non_private"],
    "properties": {
        "dptop": {"type": "string"}, "command": {"enum": ["replay", "capture"]}, "partial": {"type": "boolean"},
        "settings": {"type": "object", "required": ["k", "epsilon", "delta"],
                     "properties": {"key": {"type": "string"}, "unit": {"type": "string"}}},
        "counting": {"type": "object", "required": ["key", "weight", "text"]},
        "source": _SOURCE,
        "public": {"type": "object"},
        "dropped": _COUNTS,
        "drops": {"type": "object", "required": ["total", "clock", "kernel", "queue", "lanes"]},
        "exact": _EXACT,
        "algorithms": {"type": "object", "additionalProperties": _ALGORITHM},
        "budget": _BUDGET,
        "non_private": {"type": "object", "required": ["fields", "note"]},
        "error": {"type": "string"},
        "agents": {"type": "array", "items": {"type": "object", "required": ["path", "packets", "ip_packets"]}},
        "missing": {"type": "array", "items": {"type": "object", "required": ["path", "error"]}},
    },
}
"""``replay`` (one file or an archive of several: then also ``agents`` and ``missing``) and ``capture``."""

COLLECT = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "dptop collect result",
    "type": "object",
    "required": ["agents", "exact", "algorithms", "partial", "missing"],
    "properties": {"agents": {"type": "array", "items": {"type": "object"}}, "exact": _EXACT,
                   "algorithms": {"type": "object", "additionalProperties": _ALGORITHM},
                   "partial": {"type": "boolean"}, "missing": {"type": "array"}},
}

_REPORT = {"type": "object", "required": ["name", "rows"],
           "properties": {"name": {"type": "string"}, "rows": {"type": "array", "items": {"type": "object"}},
                          "notes": {"type": "string"}}}
BENCH = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "dptop bench report",
    "type": "object",
    "required": ["quick", "reports"],
    "properties": {"quick": {"type": "boolean"}, "reports": {"type": "array", "items": _REPORT}},
}
CLUSTER_BENCH = {**_REPORT, "$schema": "https://json-schema.org/draft/2020-12/schema",
                 "title": "dptop cluster-bench report"}

AUDIT = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "dptop audit result",
    "type": "object",
    "required": ["mechanism", "broken", "epsilon", "delta", "confidence", "violation", "epsilon_lower_bound", "pairs"],
    "properties": {
        "mechanism": {"type": "string"}, "broken": {"type": "boolean"}, "epsilon": {"type": "number"},
        "delta": {"type": "number"}, "confidence": {"type": "number"}, "violation": {"type": "boolean"},
        "epsilon_lower_bound": {"type": "number"},
        "pairs": {"type": "array", "items": {"type": "object", "required": ["pair", "violation"]}},
    },
}

SWEEP = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "dptop sweep-lazyhh / sweep-ldp rows",
    "type": "object",
    "required": ["sweep", "rows"],
    "properties": {"sweep": {"enum": ["lazyhh", "ldp"]},
                   "rows": {"type": "array", "items": {"type": "object", "required": ["epsilon"]}}},
}

BY_COMMAND = {"replay": RUN, "capture": RUN, "collect": COLLECT, "bench": BENCH, "cluster-bench": CLUSTER_BENCH,
              "audit": AUDIT, "sweep-lazyhh": SWEEP, "sweep-ldp": SWEEP, "--publish": PRIVATE_VIEW}
"""The schema of each subcommand's ``--json`` (``--publish``: the private view of replay and capture)."""
