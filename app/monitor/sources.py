"""Where a session's packets come from: a capture file (its facts read once before, by the command's
check or here), a synthetic stream written to a temporary file, or a live interface. Each opener
returns a ``dptop.capture.source.Source`` whose sink is the session's fan-out (or a clock before it)."""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

from dptop.engine.core.clock import MAX_CELLS, TimeGrid
from dptop.monitor.config import SourceSpec
from dptop.monitor.precheck import SourceFacts

REPLAY_BATCH = 1 << 16
"""Replay batch size: large, so the per-batch Python work of the threads stays small; slow
algorithms get it in chunks (``Lane.chunks``)."""
LIVE_CLOCK = "the capture's wall clock"


class SyntheticFile:
    """A synthetic stream (``dptop synth``'s generator) written to a temporary capture file,
    removed by ``cleanup``."""

    def __init__(self, spec: SourceSpec):
        from dptop.capture.synth import write_zipf_pcap

        self._dir = tempfile.TemporaryDirectory(prefix="dptop-synth-")
        self.path = str(Path(self._dir.name) / "zipf.pcap")
        write_zipf_pcap(self.path, spec.skew, spec.domain, spec.length, spec.seed, rate_pps=spec.rate)

    def cleanup(self) -> None:
        self._dir.cleanup()


def file_replay(path: str, sink, spec: SourceSpec, facts: SourceFacts, plan):
    """The replay of ``path``: ``plan`` (canonical order on the public grid) or file order."""
    from dptop.capture.replay import FileReplay

    return FileReplay(path, sink, speed=spec.speed, loop=spec.loop, batch_size=REPLAY_BATCH,
                      records=facts.stream_length, plan=plan, max_gap=spec.max_gap)


def wall_grid(spec: SourceSpec, epoch_seconds: float) -> tuple[TimeGrid, tuple[int, int | None]]:
    """A live capture's public grid and time range: it starts now, with nothing fed yet, and ends
    after the capture's ``duration`` if it has one (else open-ended)."""
    start = time.time_ns()
    if spec.duration is None:
        return TimeGrid(start, round(epoch_seconds * 1e9), MAX_CELLS), (start, None)
    end = start + round(spec.duration * 1e9)
    return TimeGrid.over(start, end, epoch_seconds), (start, end)


def live_capture(spec: SourceSpec, sink):
    from dptop.capture.live import LiveCapture

    return LiveCapture(spec.iface, sink, bpf=spec.bpf or None, count=spec.count, duration=spec.duration)
