"""What a session would refuse about its source, checked before it starts: the views call
``check_source`` first, so a capture that cannot be opened or a time grid that cannot be laid over
it fails at once, before any output is touched (the session itself then meets no surprise)."""
from __future__ import annotations

from dptop.capture import epochorder
from dptop.capture.pcap import open_capture
from dptop.engine.core.clock import TimeGrid
from dptop.monitor.config import SourceSpec

FILE_STAMPS = "the file's first and last packet stamps"


def public_time_range(path, declared: tuple[int, int] | None) -> tuple[tuple[int, int], str]:
    """The public range of a replay's time epochs and where it came from: the declared one, else
    the file's own first and last stamps (no IP packet: one empty epoch)."""
    if declared:
        return declared, "declared"
    span = epochorder.time_range(path)
    return ((0, 1) if span is None else (span[0], span[1] + 1)), FILE_STAMPS


def check_source(spec: SourceSpec, epoch_seconds: float | None) -> None:
    """Raise ``CaptureError`` for a capture file that cannot be opened and ``ValueError`` for time
    epochs whose grid over the public range has too many cells (``TimeGrid.over``)."""
    if spec.kind != "file":
        return
    with open_capture(spec.path):
        pass
    if epoch_seconds is not None:
        (start, end), _ = public_time_range(spec.path, spec.time_range)
        TimeGrid.over(start, end, epoch_seconds)
