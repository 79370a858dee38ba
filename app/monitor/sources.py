"""Where a session's packets come from: a capture file (its facts read once before, by the command's
check or here), a synthetic stream written to a temporary file, or a live interface. Each opener
returns a ``dptop.capture.source.Source`` whose sink is the session's fan-out (or a clock before it)."""
from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path

import numpy as np

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


def cell_counts(path: str, grid: TimeGrid) -> np.ndarray:
    """IP packets per cell of ``grid`` in the file at ``path`` (what a paced replay's clock waits
    for before it closes a cell: ``clocks.PacedClock``); one more read of the stamps."""
    from dptop.capture.epochorder import read_stamps

    cells = grid.cell_of(read_stamps(path)[1])
    return np.bincount(cells[cells >= 0], minlength=grid.cells)


def refuse_data_stop(spec: SourceSpec, names, settings=None) -> None:
    """Refuse, with private algorithms, what lets the data choose when releases happen:
    ``--count N`` stops a live capture at the N-th packet (the stop, and with it how many releases
    exist and what the last one covers); ``--epoch-packets N`` (``settings.epoch_packets``) on a
    live capture or a paced replay closes each epoch at the N-th packet's arrival, and without a
    time grid a continual algorithm's output steps follow the packet count (docs/dpss-eehh.md §9
    P16, docs/lazyhh.md §7.5 P1): a view then reveals by its timing what no guarantee covers.
    ``--duration`` is the public stop, ``--epoch-seconds`` the public clock."""
    from dptop.monitor.catalogue import entry

    chosen = [n for n in names if entry(n).private]
    if not chosen:
        return
    if spec.kind == "live" and spec.count is not None:
        raise ValueError(f"--count stops on the N-th packet, a stop the data chooses, which no guarantee "
                         f"covers; use --duration with private algorithms ({', '.join(chosen)})")
    paced = spec.kind == "live" or spec.speed is not None
    if paced and settings is not None and settings.epoch_packets is not None:
        where = "a live capture" if spec.kind == "live" else "a paced replay (--speed)"
        raise ValueError(f"--epoch-packets releases on {where} at the N-th packet's arrival (and output steps "
                         f"follow the packet count), an instant the data chooses, which no guarantee covers; use "
                         f"--epoch-seconds, the public clock, with private algorithms ({', '.join(chosen)})")


def wall_grid(spec: SourceSpec, epoch_seconds: float) -> tuple[TimeGrid, tuple[int, int | None]]:
    """A live capture's public grid and time range: it starts now, with nothing fed yet, and ends
    after the capture's ``duration`` if it has one (else open-ended)."""
    start = time.time_ns()
    if spec.duration is None:
        return TimeGrid(start, round(epoch_seconds * 1e9), MAX_CELLS), (start, None)
    end = start + round(spec.duration * 1e9)
    return TimeGrid.over(start, end, epoch_seconds), (start, end)


def warm_live(lanes) -> threading.Thread:
    """Compile (or load from the cache) a live capture's kernels and every path its ``lanes``'
    algorithms reach after their first batch (dptop.monitor.warming: the exact counter's
    growth, an epoch's release), on a thread of their own, started now, so a session can give up
    waiting for it at a stop (first use: half a minute on a busy machine) and its view can write
    what it has. The thread touches nothing but numba's kernels and scratch instances and ends by
    itself; ``LiveCapture`` and the lanes then find them ready, so no lane stops to compile while
    its queue fills."""
    from dptop.capture.live import warm_up
    from dptop.monitor.warming import warm_lanes

    algorithms = [lane.worker.algorithm for lane in lanes if lane.worker is not None]

    def warm() -> None:
        warm_up()
        warm_lanes(algorithms)

    warming = threading.Thread(target=warm, name="dptop-capture-kernels", daemon=True)
    warming.start()
    return warming


def live_capture(spec: SourceSpec, sink):
    from dptop.capture.live import LiveCapture

    return LiveCapture(spec.iface, sink, bpf=spec.bpf or None, count=spec.count, duration=spec.duration)
