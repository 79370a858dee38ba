"""The full JSON of a run (the CLI's ``--json``), one builder for a session and for a merged
archive of several files; the private view (``--publish``, the GUI's export) is
``dptop.monitor.publish``.

Contract (extended, never renamed): ``source.{packets, ip_packets, skipped}``,
``exact.{total, top: [{address, count}]}``, per algorithm under ``algorithms``: ``private``,
``guarantee``, ``updates_per_second``, ``releases: [{span, threshold, items: [{address,
estimate}]}]``, and ``budget`` (the ledger: ``epsilon``, ``delta``, ``composition``,
``neighbouring``). Only the released items (with their ``guarantee``) of private algorithms and
the ``budget`` are private output, beside the user's parameters; everything listed under
``non_private`` (``NON_PRIVATE``) is an exact operational fact for the person running dptop,
a release's span, threshold and status included (the private view shows their public part).
"""
from __future__ import annotations

from dptop import __version__
from dptop.monitor.config import CountingChoice
from dptop.monitor.explain import drops_of
from dptop.monitor.ledger import Ledger
from dptop.monitor.session import Session
from dptop.monitor.recording import resolve_span, seen_keys
from dptop.monitor.truth import slice_truth

TRUTH_RELEASES = 3
"""Releases per algorithm whose exact counts (over the packets each covers) the JSON carries: the
last few, the ones the table shows."""


NON_PRIVATE = ("source", "exact", "dropped", "drops", "public", "settings.{stream_length, time_range}",
               "algorithms.*.{packets, drops, status, updates_per_second, packets_per_second, busy_share, truth, "
               "exact_spans, releases_published}",
               "algorithms.*.releases[*].{span, threshold, status}", "agents", "missing", "seconds")
"""Every exact figure of the run's JSON, as paths (``*`` any key, ``{a, b}`` either, a listed
field with everything under it; ``listed``): the file's facts the lanes were sized from, the
operational figures (a merged archive's ``agents``, ``missing`` and ``seconds`` too), and each
release's span, threshold and status as the engine made them (packets seen, the arrival of an
output step, packet stamps, τ(t) at the exact count), whose public part alone the private view
shows (dptop.monitor.publish.public_span)."""
NON_PRIVATE_NOTE = ("exact operational figures for the operator (packet counts, drops, the ground truth, each "
                    "release's span, threshold and status as the engine made them); not private, never part of the "
                    "private view (--publish) or of the export, which show a release's public span and threshold")


def listed(path: str, fields=NON_PRIVATE) -> bool:
    """Whether the JSON path ``path`` (keys joined by ``.``, a list's items as ``[*]``) lies under
    one of ``fields`` (``NON_PRIVATE``'s notation; a list's name stands for its items)."""
    keys = [k.removesuffix("[*]") for k in path.split(".")]
    for field in fields:
        head, _, options = field.partition("{")
        parts = [p.removesuffix("[*]") for p in head.rstrip(".").split(".")] if head else []
        if options:
            parts.append({o.strip() for o in options.rstrip("}").split(",")})
        if len(parts) <= len(keys) and all(p == "*" or k == p or (isinstance(p, set) and k in p)
                                           for p, k in zip(parts, keys)):
            return True
    return False


def source_json(session: Session) -> dict:
    spec, st = session.spec, session.source_stats()
    out = {"packets": st.packets if st else 0, "ip_packets": st.ip_packets if st else 0,
           "skipped": dict(st.skipped) if st else {}, "warnings": list(st.warnings) if st else []}
    if spec is not None and spec.kind == "live":
        out.update(iface=spec.iface, bpf=spec.bpf, kernel_drops=st.kernel_drops if st else 0,
                   queue_drops=st.queue_drops if st else 0,
                   interface_events=[e.to_json() for e in st.interface_events] if st else [])
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


COUNTED_SPANS = ("continual observation", "sliding window")
"""Families whose live spans are positions in the packets seen (a count of the data, never a
public fact on a live source): the run's JSON shows ``start``/``end`` as null and keeps the exact
span under ``exact_spans`` (non-private)."""
SPAN_EXACT = ("start", "end", "t_start", "t_end")


def hides_positions(family: str | None, session: Session) -> bool:
    """Whether a release of ``family`` in ``session`` has a span counted from the data: a live
    continual or sliding-window lane (its times are the public clock's only on a time grid: the
    output steps of docs/lazyhh.md §7.5, a window's view at the clock's instants)."""
    return bool(session.fanout.live) and family in COUNTED_SPANS


def public_positions(span: dict, timed: bool) -> dict:
    """``span`` with its positions null (the keys kept: extend, never rename), and its times too
    unless they are the public clock's (``timed``)."""
    return {**span, "start": None, "end": None, **({} if timed else {"t_start": None, "t_end": None})}


def release_json(release, scale: int) -> dict:
    """``Release.to_json`` with estimates and threshold in bytes when counting byte units."""
    out = release.to_json()
    if scale != 1:
        out["items"] = [{**it, "estimate": it["estimate"] * scale} for it in out["items"]]
        if out["threshold"] is not None:
            out["threshold"] *= scale
    return out


def algorithm_entry(private: bool | None, guarantee, releases: list[dict], *, family: str | None = None,
                    packets: int = 0, updates_per_second: float | None = None, packets_per_second: float = 0.0,
                    busy_share: float = 0.0, drops: int = 0, status: dict | None = None, error: str | None = None,
                    published: int | None = None) -> dict:
    """One algorithm's entry: whether it is private, its guarantee (typed, rendered here) and
    ``releases`` (JSON), then its operational figures (non-private)."""
    return {
        "private": private,
        "family": family,
        "guarantee": None if guarantee is None else guarantee.to_json(),
        "updates_per_second": updates_per_second,
        "packets_per_second": packets_per_second,
        "busy_share": busy_share,
        "packets": packets,
        "drops": drops,
        "status": status or {},
        "error": error,
        "releases_published": len(releases) if published is None else published,
        "releases": releases,
    }


def algorithm_json(lane_view, releases, scale: int = 1, counted_spans: bool = False, timed: bool = False) -> dict:
    """One lane's entry; ``counted_spans`` (``hides_positions``): each release's span without its
    exact positions (and its times unless ``timed``: on the public clock), which go to the entry's
    ``exact_spans`` (non-private, one per release, in order)."""
    s = lane_view.algorithm
    if s is None:
        return {"private": None, "error": lane_view.error, "releases": []}
    shown = [release_json(r, scale) for r in releases]
    exact = None
    if counted_spans:
        exact = [{k: r["span"][k] for k in SPAN_EXACT} for r in shown]
        shown = [{**r, "span": public_positions(r["span"], timed)} for r in shown]
    entry = algorithm_entry(s.private, s.guarantee, shown, family=s.family,
                            packets=s.packets, updates_per_second=s.updates_per_second,
                            packets_per_second=s.packets_per_second, busy_share=s.busy_share, drops=s.drops,
                            status=s.status.to_json(), error=s.error, published=max(s.releases, len(releases)))
    if exact is not None:
        entry["exact_spans"] = exact
    return entry


def exact_json(total: int, distinct: int, items) -> dict:
    return {"total": total, "distinct": distinct,
            "top": [{"address": it.address, "count": int(it.estimate)} for it in items]}


def settings_json(settings, counting: CountingChoice, facts=None) -> dict:
    """The user's parameters, with the fields the contract has always carried beside them (the key
    kind counted, what one counted update is, ``CountingChoice.update_unit``, and the public facts
    the lanes were built from: ``public`` says their provenance)."""
    return {**vars(settings), "stream_length": None if facts is None else facts.length,
            "time_range": None if facts is None or facts.time_range is None else list(facts.time_range.value),
            "key": counting.key, "unit": counting.update_unit}


def result_json(command: str, settings: dict, source: dict, exact: dict, algorithms: dict, budget: dict | None,
                partial: bool, error: str | None = None, **sections) -> dict:
    """The JSON of a run in the contract's order (``settings``: ``settings_json``); ``sections``: what
    a kind of run adds (a session's ``counting``, ``public``, ``dropped``, ``drops``; an archive's
    ``agents``, ``missing``)."""
    out = {"dptop": __version__, "command": command, "partial": partial,
           "settings": settings, **sections, "source": source,
           "exact": exact, "algorithms": algorithms, "budget": budget,
           "non_private": {"fields": list(NON_PRIVATE), "note": NON_PRIVATE_NOTE}}
    if error:
        out["error"] = error
    return out


def shown_releases(kept: list, shown: list) -> list:
    """The releases a session kept and those a view showed while it ran (a continual or
    sliding-window algorithm's current answer, printed once per epoch: dptop.releaselines), each
    once, in the order they were made."""
    if not shown:
        return list(kept)
    ids = {id(r) for r in kept}
    merged = [*kept, *(r for r in shown if id(r) not in ids)]
    return sorted(merged, key=lambda r: (r.span.t_end or 0.0, r.span.end))


def truth_json(session: Session, name: str, releases: list, scale: int, last: int = TRUTH_RELEASES) -> list[dict]:
    """Exact counts of the released labels over exactly the packets each of the ``last`` releases
    covers and the lane saw (dptop.monitor.recording.resolve_span, seen_keys), in counted units times
    ``scale``: ``release`` (its index in ``releases``), ``packets`` (the span's packets the lane
    saw), ``unseen`` (those its full queue refused), ``counts`` (in release order), or a ``note``
    when the span is older than the truth's recording. Call once the session ended."""
    lane = session.lanes.get(name)
    if lane is None:
        return []
    rec, out = session.truth.rec, []
    for i in range(max(0, len(releases) - last), len(releases)):
        release = releases[i]
        try:
            span = resolve_span(release, lane.origin or 0, rec, True, lane.unseen)
            if span is None:
                continue
            keys, unseen = seen_keys(rec, *span, lane.unseen)
        except LookupError as exc:
            out.append({"release": i, "packets": None, "counts": None, "note": str(exc)})
            continue
        counts, _, _ = slice_truth(release, keys, lane.settings.k, lane.settings.gamma)
        out.append({"release": i, "packets": len(keys) * scale, "unseen": unseen * scale,
                    "counts": [c * scale for c in counts]})
    return out


def session_json(session: Session, command: str, top: int | None, partial: bool = False,
                 shown: dict | None = None) -> dict:
    """The run's JSON; ``shown``: per algorithm, the releases a view printed while it ran
    (``shown_releases``), so the JSON holds every release a user saw."""
    session.truth.wait_idle()
    snap = session.snapshot()
    c = session.config.counting
    scale = c.unit if c.weight == "bytes" else 1
    algorithms = {}
    for v in snap.lanes:
        releases = shown_releases(session.releases(v.name), (shown or {}).get(v.name, []))
        family = v.algorithm.family if v.algorithm is not None else None
        algorithms[v.name] = entry = algorithm_json(v, releases, scale, hides_positions(family, session),
                                                    session.grid is not None)
        if entry.get("private") and not session.truth.died:  # a dead truth's recording stops short of the lanes'
            entry["truth"] = truth_json(session, v.name, releases, scale)
    return result_json(command, settings_json(session.config.settings, c, session.public_facts()),
                       source_json(session),
                       exact_json(*session.exact(top or None)), algorithms, snap.budget, partial, snap.error,
                       counting={**vars(c), "text": c.describe()}, public=public_json(session),
                       dropped=snap.dropped, drops=drops_of(snap).to_json())


def archive_json(merged, paths, config, top: int | None) -> dict:
    """A merged run over several capture files (dptop.cluster.archive.ArchiveResult): the same
    contract, every algorithm's releases recorded in the same ledger as a session's, plus
    ``agents`` (one report per file), ``missing`` and ``cluster``."""
    agents = [a.to_json() for a in merged.agents]
    skipped: dict = {}
    for a in agents:
        for reason, n in (a.get("skipped") or {}).items():
            skipped[reason] = skipped.get(reason, 0) + n
    source = {"paths": [str(p) for p in paths], "packets": sum(a["packets"] for a in agents),
              "ip_packets": sum(a["ip_packets"] for a in agents), "skipped": skipped, "warnings": [],
              "cluster": merged.cluster}
    ledger = Ledger()
    algorithms = {}
    for name, rels in merged.releases.items():
        guarantee = next((r.guarantee for r in rels if r.guarantee is not None), None)
        ledger.record(name, 1, guarantee, len(rels))
        algorithms[name] = algorithm_entry(guarantee is not None, guarantee, [r.to_json() for r in rels],
                                           packets=source["ip_packets"])
    exact = exact_json(merged.exact.n, len(merged.exact.keys), merged.exact_top(top or 10**9))
    return result_json("replay", settings_json(config.settings, config.counting), source, exact, algorithms,
                       ledger.to_json(), merged.partial,
                       agents=agents, missing=[m.to_json() for m in merged.missing], seconds=merged.seconds)
