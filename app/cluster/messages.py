"""The two messages a capture point sends the collector, in dptop's own versioned msgpack format.

* a **point report** (``dptop-point-report``): a live agent's answer to the collector's pull, its
  counters and the summaries of the cells the collector asked for (each a dptop.cluster.wire
  payload);
* a **shipment** (``dptop-shipment``): an archive task's result, one capture file's report, its
  whole-stream summaries and per-epoch summaries.

Both travel as bytes, never as pickled objects: the collector's Dask client deserializes msgpack
only (dptop.cluster.connect), and ``decode_*`` reads plain msgpack (no extension types) and checks
every field's presence, type and bounds before anything of it touches the collector's state; a
malformed message is one ``WireError`` naming what is wrong.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields

import msgpack

from dptop.cluster.wire import WireError, read_document
from dptop.engine.core.clock import MAX_CELLS

VERSION = 1
COUNT_MAX = 1 << 62
"""Bound of every counter (packets, drops): larger is no capture point's."""
TEXT_MAX = 300
PAYLOAD_MAX = 1 << 28
"""Bound of one message (256 MiB): a summary is kilobytes to a few megabytes."""
POINT_STATES = ("starting", "running", "finished", "stopped", "unknown")
"""``stopped``: the capture ended by itself (its error says why); ``unknown``: the agent holds no
capture point of the run it was asked about."""


@dataclass(frozen=True)
class PointReport:
    """A live capture point's answer to one pull (dptop.cluster.live)."""

    run: str
    state: str
    iface: str = ""
    packets: int = 0
    ip_packets: int = 0
    kernel_drops: int = 0
    queue_drops: int = 0
    late: int = 0
    """Packets of a cell already shipped, or of one before the point joined (counted, not merged)."""
    outside_grid: int = 0
    through: int = -1
    """The last cell this point has shipped (-1: none)."""
    error: str | None = None
    epochs: dict = field(default_factory=dict)
    """cell -> wire payload of that cell's summaries."""
    exact: bytes | None = None
    """Exact counts since the last pull (only when the run asked for the exact baseline)."""
    whole: bytes | None = None
    """The whole-stream baselines, in the final answer only."""


_KINDS = {"run": "text", "state": "text", "iface": "text", "packets": "count", "ip_packets": "count",
          "kernel_drops": "count", "queue_drops": "count", "late": "count", "outside_grid": "count",
          "through": "cell", "error": "text?", "epochs": "cells", "exact": "bytes?", "whole": "bytes?"}


def encode_report(report: PointReport) -> bytes:
    return _pack("dptop-point-report", {f.name: getattr(report, f.name) for f in fields(report)})


def decode_report(data) -> PointReport:
    """The ``PointReport`` in ``data``, or ``WireError``."""
    report = PointReport(**_checked(_unpack("dptop-point-report", data), _KINDS))
    if report.state not in POINT_STATES:
        raise WireError(f"dptop-point-report: state {report.state[:20]!r} is none of {', '.join(POINT_STATES)}")
    return report


SHIPMENT_REPORT = {"packets": "count", "ip_packets": "count", "skipped": "counts", "warnings": "texts",
                   "outside_grid": "count", "seconds": "seconds", "cpu_seconds": "seconds", "cut_short": "flag"}
"""A shipment's report fields (archive.AgentReport's own, those the capture point measures)."""


def encode_shipment(report: dict | None, whole: bytes = b"", epochs: dict | None = None,
                    error: str | None = None) -> bytes:
    """A capture file's summaries, or (``error``) why it delivers none."""
    return _pack("dptop-shipment", {"report": report or {}, "whole": whole, "epochs": epochs or {},
                                    "error": None if error is None else error[:TEXT_MAX]})


def decode_shipment(data) -> tuple[dict, bytes, dict, str | None]:
    """(report fields, whole payload, cell -> payload, error) of a shipment, or ``WireError``."""
    doc = _checked(_unpack("dptop-shipment", data),
                   {"report": "map", "whole": "bytes", "epochs": "cells", "error": "text?"})
    if doc["error"] is not None:
        return {}, b"", {}, doc["error"]
    return _checked(doc["report"], SHIPMENT_REPORT), doc["whole"], doc["epochs"], None


def _pack(kind: str, body: dict) -> bytes:
    return msgpack.packb({"format": kind, "version": VERSION, **body}, use_bin_type=True)


def _unpack(kind: str, data) -> dict:
    return read_document(kind, VERSION, data, PAYLOAD_MAX)


def _checked(doc, kinds: dict) -> dict:
    """``doc`` with exactly the fields of ``kinds``, each of its kind and within its bounds."""
    if not isinstance(doc, dict) or set(doc) != set(kinds):
        got = ", ".join(sorted(str(k)[:20] for k in doc)) if isinstance(doc, dict) else type(doc).__name__
        raise WireError(f"expected the fields {', '.join(kinds)}; got {got[:200]}")
    for name, kind in kinds.items():
        if not _valid(doc[name], kind):
            raise WireError(f"field {name}: {str(doc[name])[:40]!r} is not {_WHAT[kind.rstrip('?')]}")
    return doc


def _is_int(value, low: int, high: int) -> bool:
    return type(value) is int and low <= value < high


def _valid(value, kind: str) -> bool:
    if kind.endswith("?"):
        return value is None or _valid(value, kind[:-1])
    if kind == "count":
        return _is_int(value, 0, COUNT_MAX)
    if kind == "cell":
        return _is_int(value, -1, MAX_CELLS)
    if kind == "text":
        return isinstance(value, str) and len(value) <= TEXT_MAX
    if kind == "bytes":
        return isinstance(value, bytes)
    if kind == "flag":
        return type(value) is bool
    if kind == "seconds":
        return type(value) in (int, float) and 0 <= value < 1e9
    if kind == "map":
        return isinstance(value, dict)
    if kind == "texts":
        return isinstance(value, list) and len(value) <= 100 and all(_valid(v, "text") for v in value)
    if kind == "counts":
        return (isinstance(value, dict) and len(value) <= 100
                and all(_valid(k, "text") and _valid(v, "count") for k, v in value.items()))
    if kind == "cells":
        return (isinstance(value, dict) and len(value) <= MAX_CELLS
                and all(_is_int(k, 0, MAX_CELLS) and isinstance(v, bytes) for k, v in value.items()))
    raise AssertionError(kind)


_WHAT = {"count": f"an integer in [0, 2**62)", "cell": f"a cell in [-1, {MAX_CELLS})", "text": "a short text",
         "bytes": "bytes", "flag": "true or false", "seconds": "a number of seconds", "map": "a map",
         "texts": "a list of short texts", "counts": "a map of names to counts",
         "cells": f"a map of cells in [0, {MAX_CELLS}) to bytes"}
