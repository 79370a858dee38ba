"""The public facts of a session's source, read once before it starts: the views call
``check_source`` first, so a capture that cannot be opened or a time grid that cannot be laid over
it fails at once, before any output is touched, and the facts it read (``SourceFacts``) are handed
to the session, which reads the file once more only to replay it."""
from __future__ import annotations

from dataclasses import dataclass

from dptop.capture import epochorder
from dptop.capture.pcap import count_packets
from dptop.engine.core.clock import MAX_CELLS, TimeGrid
from dptop.engine.core.facts import PublicFacts, Provenance
from dptop.monitor.config import SourceSpec

FILE_SPAN = ("the file's first and last packet stamps (stamps so far off that the span would pass the grid's "
             "limit are dropped as corrupt and counted; the range is then the stamps around their median)")
"""One wording whether or not a stamp was dropped: the words must not tell which happened."""
LOOP_SPAN = "the synthetic stream's first stamp (open-ended: the stream loops)"


@dataclass(frozen=True, eq=False)
class SourceFacts:
    """Every public fact of a capture file a session needs, from one read: the record count (the
    continual observation horizon) and, with time epochs, the public time range (ns, end exclusive;
    ``None`` end: open-ended), where it came from, its grid and the file's plan on that grid
    (canonical order, capture/epochorder.py)."""

    path: str
    epoch_seconds: float | None  # what they were read for (with the declared range and the loop)
    declared: tuple[int, int] | None
    loop: bool
    stream_length: int
    time_range: tuple[int, int | None] | None = None
    provenance: str = ""
    grid: TimeGrid | None = None
    plan: epochorder.CellPlan | None = None

    def fits(self, path, spec: SourceSpec, epoch_seconds: float | None) -> bool:
        """Whether these are the facts a session replaying ``path`` for ``spec`` needs."""
        return (self.path, self.epoch_seconds, self.declared, self.loop) == (
            str(path), epoch_seconds, spec.time_range, spec.loop)

    def public(self) -> dict:
        """The facts a guarantee takes as public, by name (``Session.public``)."""
        out: dict = {"stream_length": self.stream_length}
        if self.time_range is not None:
            out["time_range"] = self.time_range
        return out

    def facts(self) -> PublicFacts:
        """The same facts typed, each with its provenance (``typed_facts``)."""
        return typed_facts(self.public(), self.provenance)


def typed_facts(public: dict, source: str) -> PublicFacts:
    """A session's public facts (``Session.public``: the stream length, the time range) typed with
    their provenance: a file's packet count is read from its packets (assumed); the time range is
    declared, assumed (the file's own span), or the live clock's or loop's start (metadata) as
    ``source`` (``Session.public_source``) says."""
    provenance = (Provenance.DECLARED if source == "declared" else
                  Provenance.ASSUMED if source == FILE_SPAN else Provenance.METADATA)
    return PublicFacts.of(public.get("stream_length"), public.get("time_range"), range_provenance=provenance,
                          range_why=f"the grid of the time epochs: {source}" if source else "")


def read_facts(path, declared: tuple[int, int] | None, epoch_seconds: float | None,
               loop: bool = False) -> SourceFacts:
    """The facts of the capture at ``path`` in one read (``CaptureError`` if it cannot be read,
    ``ValueError`` for a grid with too many cells, ``TimeGrid.over``). The public time range is the
    declared one, else the file's own span (an assumed public fact, named in every release; no IP
    packet: one empty epoch); when stray stamps would stretch that span past the grid's limit, the
    span of the stamps around the median (the rest dropped, counted). A looping stream's grid is
    open-ended from its first stamp (its stamps only grow, pass after pass)."""
    path = str(path)
    read = (path, epoch_seconds, declared, loop)
    if epoch_seconds is None:
        return SourceFacts(*read, count_packets(path))
    records, ts = epochorder.read_stamps(path)
    cell = max(1, round(epoch_seconds * 1e9))
    if loop:
        start = int(ts.min()) if len(ts) else 0
        return SourceFacts(*read, records, (start, None), LOOP_SPAN, TimeGrid(start, cell, MAX_CELLS))
    if declared:
        span, provenance = declared, "declared"
    elif not len(ts):
        span, provenance = (0, 1), FILE_SPAN
    else:
        first, last = int(ts.min()), int(ts.max())
        if (last + 1 - first + cell - 1) // cell > MAX_CELLS:
            first, last = epochorder.bulk_span(ts, cell, MAX_CELLS)
        span, provenance = (first, last + 1), FILE_SPAN
    grid = TimeGrid.over(span[0], span[1], epoch_seconds)
    return SourceFacts(*read, records, (int(span[0]), int(span[1])), provenance, grid,
                       epochorder.plan_stamps(path, grid, ts))


def check_source(spec: SourceSpec, epoch_seconds: float | None) -> SourceFacts | None:
    """The facts of a capture file (``read_facts``); ``None`` for a live or synthetic source, whose
    facts only exist once it starts."""
    if spec.kind != "file":
        return None
    return read_facts(spec.path, spec.time_range, epoch_seconds, spec.loop)
