"""What a session would refuse about its source, checked before it starts: the views call
``check_source`` first, so a capture that cannot be opened or a time grid that cannot be laid over
it fails at once, before any output is touched (the session itself then meets no surprise)."""
from __future__ import annotations

from dptop.capture import epochorder
from dptop.capture.pcap import open_capture
from dptop.engine.core.clock import MAX_CELLS, TimeGrid
from dptop.monitor.config import SourceSpec

FILE_SPAN = ("the file's first and last packet stamps (stamps so far off that the span would pass the grid's "
             "limit are dropped as corrupt and counted; the range is then the stamps around their median)")
"""One wording whether or not a stamp was dropped: the words must not tell which happened."""


def public_time_range(path, declared: tuple[int, int] | None, epoch_seconds: float) -> tuple[tuple[int, int], str]:
    """The public range of a replay's time epochs and where it came from: the declared one, else
    the file's own span (an assumed public fact, named in every release; no IP packet: one empty
    epoch); when stray stamps would stretch that span past the grid's limit, the span of the stamps
    around the median (the rest dropped, counted)."""
    if declared:
        return declared, "declared"
    span = epochorder.time_range(path)
    if span is None:
        return (0, 1), FILE_SPAN
    cell = max(1, round(epoch_seconds * 1e9))
    if (span[1] + 1 - span[0] + cell - 1) // cell > MAX_CELLS:
        span = epochorder.bulk_range(path, cell, MAX_CELLS)
    return (span[0], span[1] + 1), FILE_SPAN


def check_source(spec: SourceSpec, epoch_seconds: float | None) -> None:
    """Raise ``CaptureError`` for a capture file that cannot be opened and ``ValueError`` for time
    epochs whose grid over the public range has too many cells (``TimeGrid.over``)."""
    if spec.kind != "file":
        return
    with open_capture(spec.path):
        pass
    if epoch_seconds is not None:
        (start, end), _ = public_time_range(spec.path, spec.time_range, epoch_seconds)
        TimeGrid.over(start, end, epoch_seconds)
