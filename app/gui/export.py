"""Export: the private releases (only those) with their guarantee, to JSON and CSV; a plot to PNG.

Non-private releases and true counts are never written here: the file is meant to be shared, so
it holds exactly what the private mechanisms published (``Release.to_json``) and the session's
ledger, the same one the budget panel and the CLI's JSON show.
"""
from __future__ import annotations

import csv
import json
import time
from pathlib import Path

from dptop.monitor.private import private_view

CSV_FIELDS = ("algorithm", "release", "span_kind", "span_index", "span_start", "span_end", "t_start", "t_end",
              "threshold", "rank", "address", "estimate", "model", "measure", "epsilon", "delta", "rho",
              "neighbouring", "unit", "scope", "noise")


def private_releases(releases: dict) -> dict:
    """``{name: [Release, ...]}`` -> the same restricted to releases that carry a guarantee."""
    out = {}
    for name, rels in releases.items():
        kept = [r for r in rels if r is not None and r.guarantee is not None]
        if kept:
            out[name] = kept
    return out


def export_json(path, session) -> dict:
    """Write the session's shareable part (``dptop.monitor.private.private_view``: private releases,
    their guarantees, the ledger) with the export time."""
    data = {**private_view(session).to_json(), "exported_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    Path(path).write_text(json.dumps(data, indent=2, default=str) + "\n")
    return data


def csv_rows(releases: dict):
    for name, rels in private_releases(releases).items():
        for i, r in enumerate(rels):
            g, sp = r.guarantee, r.span
            base = {"algorithm": name, "release": i, "span_kind": sp.kind, "span_index": sp.index,
                    "span_start": sp.start, "span_end": sp.end, "t_start": sp.t_start, "t_end": sp.t_end,
                    "threshold": r.threshold, "model": g.model, "measure": g.measure, "epsilon": g.epsilon,
                    "delta": g.delta, "rho": g.rho, "neighbouring": g.neighbouring, "unit": g.unit,
                    "scope": g.scope, "noise": g.noise}
            if not r.items:  # an empty release is a release too: one row without an item
                yield {**base, "rank": "", "address": "", "estimate": ""}
            for rank, it in enumerate(r.items, 1):
                yield {**base, "rank": rank, "address": it.address, "estimate": it.estimate}


def export_csv(path, releases: dict) -> int:
    """One row per released item (or per empty release); returns the number of rows."""
    n = 0
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for row in csv_rows(releases):
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
            n += 1
    return n


def save_png(widget, path) -> bool:
    """Render ``widget`` (a plot) to a PNG file."""
    return widget.grab().save(str(path), "PNG")
