"""The wire format of the summaries a capture point ships to the collector.

A payload is msgpack of one map: ``format`` (``"dptop-summaries"``), ``version`` (``VERSION``) and
``summaries``, a map from algorithm name to one summary: its ``type`` (``count``, ``mg``, ``ss``,
``sketch``), its integer fields and its numpy arrays, each as ``dtype`` (a little-endian numpy
dtype string), ``shape`` and raw ``data``. Nothing in a payload is ever executed: ``decode``
reads plain msgpack (no extension types), checks the format and version, that every algorithm
name carries the summary type its registry declaration ships (``registry.mergeable``), every field's presence and type, every array's dtype,
dimensions and byte length, and that the arrays of one summary agree; anything else is one
``WireError`` naming what is wrong. The summaries are those of dptop.engine.baselines.merge.
"""
from __future__ import annotations

from dataclasses import fields

import msgpack
import numpy as np

from dptop.engine.baselines.merge import CountSummary, MGSummary, SketchSummary, SSSummary
from dptop.engine.core import registry

FORMAT = "dptop-summaries"
VERSION = 1
KEYS = ("<u8", (None, 2))
COUNTS = ("<i8", (None,))
SCHEMA = {
    "count": (CountSummary, {"keys": KEYS, "counts": COUNTS}),
    "mg": (MGSummary, {"keys": KEYS, "counts": COUNTS}),
    "ss": (SSSummary, {"keys": KEYS, "counts": COUNTS}),
    "sketch": (SketchSummary, {"cells": ("<i8", (None, None)), "seeds": ("<u8", None),
                               "candidates": KEYS}),
}
"""Per summary type: its class and, per array field, its dtype and shape (None: any length; a
shape of None: one or two dimensions). The class's other fields are non-negative integers."""
TYPE_OF = {cls: tag for tag, (cls, _) in SCHEMA.items()}


def summary_type(name) -> str | None:
    """The summary type mergeable algorithm ``name`` ships (its declaration's summary), or None."""
    if not isinstance(name, str) or name not in registry.mergeable_names():
        return None
    return TYPE_OF[registry.mergeable(name).summary]


class WireError(ValueError):
    """A payload that is not a valid summaries payload of this version."""


def encode(summaries: dict) -> bytes:
    """``summaries`` (algorithm name -> summary) as one payload."""
    out = {}
    for name, summary in summaries.items():
        tag = TYPE_OF[type(summary)]
        arrays = SCHEMA[tag][1]
        item = {"type": tag}
        for f in fields(summary):
            value = getattr(summary, f.name)
            if f.name in arrays:
                a = np.ascontiguousarray(value, dtype=np.dtype(arrays[f.name][0]))
                item[f.name] = {"dtype": a.dtype.str, "shape": list(a.shape), "data": a.tobytes()}
            else:
                item[f.name] = int(value)
        out[name] = item
    return msgpack.packb({"format": FORMAT, "version": VERSION, "summaries": out}, use_bin_type=True)


def decode(data) -> dict:
    """The summaries of a payload ``encode`` wrote, or ``WireError``."""
    doc = read_document(FORMAT, VERSION, data)
    summaries = doc.get("summaries")
    if not isinstance(summaries, dict) or set(doc) != {"summaries"}:
        raise WireError(f"{FORMAT}: the payload holds exactly format, version and summaries")
    return {name: _summary(name, item) for name, item in summaries.items()}


def read_document(kind: str, version: int, data, max_bytes: int | None = None) -> dict:
    """The fields (but ``format`` and ``version``) of a msgpack map of format ``kind`` at ``version``,
    read as plain msgpack (no extension types), or ``WireError``."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise WireError(f"a {kind} payload must arrive as bytes, not {type(data).__name__}")
    if max_bytes is not None and len(data) > max_bytes:
        raise WireError(f"a {kind} payload of {len(data)} bytes is larger than {max_bytes}")

    def no_extension(code, _):
        raise WireError(f"not a {kind} payload (msgpack extension type {code})")

    try:
        doc = msgpack.unpackb(bytes(data), raw=False, strict_map_key=False, ext_hook=no_extension)
    except WireError:
        raise
    except Exception as exc:  # msgpack's errors for every kind of malformed input
        raise WireError(f"not a {kind} payload (not msgpack: {type(exc).__name__})") from None
    if not isinstance(doc, dict) or doc.get("format") != kind:
        raise WireError(f"not a {kind} payload (no format field)")
    if doc.get("version") != version:
        raise WireError(f"{kind} version {str(doc.get('version'))[:20]!r} is not supported (this collector reads {version})")
    return {k: v for k, v in doc.items() if k not in ("format", "version")}


def _summary(name, item):
    tag = summary_type(name)
    if tag is None:
        raise WireError(f"{FORMAT}: unknown algorithm {str(name)[:40]!r}")
    if not isinstance(item, dict) or item.get("type") != tag:
        raise WireError(f"{FORMAT}: {name} must be a {tag} summary")
    cls, arrays = SCHEMA[tag]
    names = [f.name for f in fields(cls)]
    if set(item) != {"type", *names}:
        raise WireError(f"{FORMAT}: {name}'s {tag} summary has fields {', '.join(names)}")
    values = {}
    for field in names:
        if field in arrays:
            values[field] = _array(f"{name}.{field}", item[field], *arrays[field])
        elif type(item[field]) is not int or item[field] < 0:
            raise WireError(f"{FORMAT}: {name}.{field} must be a non-negative integer")
        else:
            values[field] = item[field]
    rows = {len(values[f]) for f in ("keys", "counts") if f in values}
    if len(rows) > 1:
        raise WireError(f"{FORMAT}: {name}'s keys and counts differ in length")
    return cls(**values)


def _array(where: str, item, dtype: str, shape) -> np.ndarray:
    if not isinstance(item, dict) or set(item) != {"dtype", "shape", "data"}:
        raise WireError(f"{FORMAT}: {where} must be an array (dtype, shape, data)")
    got, dims, data = item["dtype"], item["shape"], item["data"]
    if got != dtype:
        raise WireError(f"{FORMAT}: {where} has dtype {str(got)[:20]!r}, expected {dtype!r}")
    if (not isinstance(dims, list) or not all(type(d) is int and d >= 0 for d in dims)
            or (len(dims) not in (1, 2) if shape is None else len(dims) != len(shape))
            or any(want is not None and d != want for d, want in zip(dims, shape or ()))):
        raise WireError(f"{FORMAT}: {where} has shape {str(dims)[:40]}, expected {_shape_text(shape)}")
    itemsize = np.dtype(dtype).itemsize
    if not isinstance(data, bytes) or len(data) != int(np.prod(dims, dtype=object)) * itemsize:
        raise WireError(f"{FORMAT}: {where}'s data does not hold shape {dims} of {dtype}")
    return np.frombuffer(data, dtype=dtype).reshape(dims).astype(dtype[1:], copy=True)


def _shape_text(shape) -> str:
    if shape is None:
        return "one or two dimensions"
    return "(" + ", ".join("n" if d is None else str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
