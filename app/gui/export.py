"""Export: the private view (dptop.monitor.publish, the same as ``--publish``) to JSON and CSV; a plot to PNG.

Non-private releases, exact counts and operational figures are never written here: the file is
meant to be shared, so it holds exactly what the guarantees cover -- the private releases with
their typed guarantees, the ledger and the public facts with their provenance.
"""
from __future__ import annotations

import csv
import time

from dptop.monitor.publish import publish_json, write_whole

CSV_FIELDS = ("algorithm", "release", "span_kind", "span_index", "span_start", "span_end", "t_start", "t_end",
              "threshold", "rank", "address", "estimate", "model", "measure", "epsilon", "delta", "rho",
              "neighbouring", "unit", "scope", "noise")


def export_json(path, session) -> dict:
    """Write the session's private view with the export time (whole or not at all)."""
    data = {**publish_json(session, "gui"), "exported_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    write_whole(str(path), data)
    return data


def csv_rows(view: dict):
    """One row per released item of the private view (or per empty release)."""
    for name, alg in view["algorithms"].items():
        for i, r in enumerate(alg["releases"]):
            g, sp = r["guarantee"], r["span"]
            base = {"algorithm": name, "release": i, "span_kind": sp["kind"], "span_index": sp["index"],
                    "span_start": sp.get("start"), "span_end": sp.get("end"), "t_start": sp["t_start"],
                    "t_end": sp["t_end"], "threshold": r["threshold"],
                    **{k: g[k] for k in ("model", "measure", "epsilon", "delta", "rho", "neighbouring", "unit",
                                         "scope", "noise")}}
            if not r["items"]:  # an empty release is a release too: one row without an item
                yield {**base, "rank": "", "address": "", "estimate": ""}
            for rank, it in enumerate(r["items"], 1):
                yield {**base, "rank": rank, "address": it["address"], "estimate": it["estimate"]}


def export_csv(path, view: dict) -> int:
    """One row per released item (or per empty release); returns the number of rows."""
    n = 0
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for row in csv_rows(view):
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
            n += 1
    return n


def save_png(widget, path) -> bool:
    """Render ``widget`` (a plot) to a PNG file."""
    return widget.grab().save(str(path), "PNG")
