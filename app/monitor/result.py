"""The JSON of a session, one builder for the CLI (``--json``) and the GUI's export.

Contract (extended, never renamed): ``source.{packets, ip_packets, skipped}``,
``exact.{total, top: [{address, count}]}``, per algorithm under ``algorithms``: ``private``,
``guarantee``, ``updates_per_second``, ``releases: [{span, threshold, items: [{address,
estimate}]}]``, and ``budget`` (the ledger: ``epsilon``, ``delta``, ``composition``,
``neighbouring``). Only the ``releases`` (with their ``guarantee``) of private algorithms and the
``budget`` are private output; everything listed under ``non_private`` is an exact operational
fact for the person running dptop.
"""
from __future__ import annotations

from dptop import __version__
from dptop.monitor.session import Session

NON_PRIVATE = ("source", "exact", "dropped", "public",
               "algorithms.*.{packets, drops, status, updates_per_second, packets_per_second, busy_share}")
NON_PRIVATE_NOTE = ("exact operational figures for the operator (packet counts, drops, the ground truth); "
                    "not private, never part of a release or of the export")


def source_json(session: Session) -> dict:
    spec, st = session.spec, session.source_stats()
    out = {"packets": st.packets if st else 0, "ip_packets": st.ip_packets if st else 0,
           "skipped": dict(st.skipped) if st else {}, "warnings": list(st.warnings) if st else []}
    if spec is not None and spec.kind == "live":
        out.update(iface=spec.iface, bpf=spec.bpf, kernel_drops=st.kernel_drops if st else 0,
                   queue_drops=st.queue_drops if st else 0)
    elif spec is not None:
        out["path"] = spec.path if spec.kind == "file" else f"synthetic ({spec.label()})"
    return out


def public_json(session: Session) -> dict:
    """The facts the guarantees take as public, and where they came from."""
    out = dict(session.public)
    if "time_range" in out:
        start, end = out["time_range"]
        out["time_range"] = {"start": start / 1e9, "end": None if end is None else end / 1e9,
                             "from": session.public_source}
    return out


def release_json(release, scale: int) -> dict:
    """``Release.to_json`` with estimates and threshold in bytes when counting byte units."""
    out = release.to_json()
    if scale != 1:
        out["items"] = [{**it, "estimate": it["estimate"] * scale} for it in out["items"]]
        if out["threshold"] is not None:
            out["threshold"] *= scale
    return out


def algorithm_json(lane_view, releases, scale: int = 1) -> dict:
    s = lane_view.algorithm
    if s is None:
        return {"private": None, "error": lane_view.error, "releases": []}
    return {
        "private": s.private,
        "family": s.family,
        "guarantee": None if s.guarantee is None else s.guarantee.to_json(),
        "updates_per_second": s.updates_per_second,
        "packets_per_second": s.packets_per_second,
        "busy_share": s.busy_share,
        "packets": s.packets,
        "drops": s.drops,
        "status": s.status,
        "error": s.error,
        "releases_published": s.releases,
        "releases": [release_json(r, scale) for r in releases],
    }


def session_json(session: Session, command: str, top: int | None, partial: bool = False) -> dict:
    session.truth.wait_idle()
    snap = session.snapshot()
    total, distinct, items = session.exact(top or None)  # 0 = every source
    c = session.config.counting
    scale = c.unit if c.weight == "bytes" else 1
    algorithms = {v.name: algorithm_json(v, session.releases(v.name), scale) for v in snap.lanes}
    out = {
        "dptop": __version__,
        "command": command,
        "partial": partial,
        "settings": {k: v for k, v in vars(session.config.settings).items()},
        "counting": {**vars(session.config.counting), "text": session.config.counting.describe()},
        "source": source_json(session),
        "public": public_json(session),
        "dropped": snap.dropped,
        "exact": {"total": total, "distinct": distinct,
                  "top": [{"address": it.address, "count": int(it.estimate)} for it in items]},
        "algorithms": algorithms,
        "budget": snap.budget,
        "non_private": {"fields": list(NON_PRIVATE), "note": NON_PRIVATE_NOTE},
    }
    if snap.error:
        out["error"] = snap.error
    return out
