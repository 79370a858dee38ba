"""Replay a capture file into the engine, following its packet time stamps.

``speed=None`` feeds as fast as the sink takes it; ``speed=s`` plays ``s`` seconds of capture
per wall-clock second: a packet stamped ``t`` is handed over when ``(t - t_first) / s`` seconds
of (unpaused) wall time have passed; a wait longer than ``max_gap`` seconds (an idle gap, or a
corrupt stamp far ahead) is cut to ``max_gap`` and reported as a warning. Batches are split at the packets due so far, so pacing is
smooth whatever ``batch_size``; the sequence of keys and time stamps is identical at every speed
(only batch boundaries differ), so a replay gives the same releases as the capture seen live
(a replay follows packet timestamps). Out-of-order stamps are paced by their
running maximum. ``loop=True`` starts over at the end with stamps shifted by one file span plus
one mean packet gap per pass, so time keeps increasing.

``plan`` (an ``epochorder.CellPlan`` on a public ``TimeGrid``, worked out before the replay) reads
the file in canonical order instead (capture/epochorder.py): batches tagged with their cell, each
packet in the cell of its own stamp, packets outside the grid dropped and counted. Looping is
refused then: a pass repeats every packet (the grid is fixed).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import numpy as np

from dptop.capture import epochorder
from dptop.capture.pcap import CaptureStats, count_packets, open_capture
from dptop.capture.source import Source
from dptop.engine.core.keys import KeyBatch
from dptop.engine.core.settings import Range

SPEED = Range("speed", 1e-3, 1e6)
"""Seconds of capture per wall-clock second of a paced replay (None: as fast as possible)."""
MAX_GAP = Range("max-gap", 1e-3, 3600.0)
"""Longest wait (s) for the next packet of a paced replay."""

_MAX_SLEEP = 0.05  # re-check pause/stop at least this often while waiting for a packet's time


class FileReplay(Source):
    """A capture file as a ``Source``. Opening happens here, so a bad file raises
    ``CaptureError`` at construction. ``records`` is the file's record count when the caller
    already has it (``count_packets``, the facts of the file); it drives the progress fraction."""

    thread_name = "dptop-replay"

    def __init__(self, path, sink: Callable[[KeyBatch], bool], speed: float | None = None,
                 loop: bool = False, batch_size: int = 65536, records: int | None = None, plan=None,
                 max_gap: float = 5.0):
        if speed is not None:
            SPEED.check(speed)
        if not (isinstance(batch_size, int) and batch_size >= 1):
            raise ValueError(f"batch_size ({batch_size!r}) must be an integer >= 1")
        MAX_GAP.check(max_gap)
        super().__init__(sink)
        self.max_gap = float(max_gap)
        self.skipped_gap = 0.0  # seconds of idle wall time skipped by the gap cap
        self.path = Path(path)
        self.speed = speed
        self.loop = bool(loop)
        self.batch_size = batch_size
        if loop and plan is not None:
            raise ValueError("loop replays every packet again; it cannot run on a fixed public time range")
        self._reader = open_capture(self.path)
        self._plan = plan
        # progress counts records handed over: the reader reads ahead of the pacing
        self._records = count_packets(self.path) if records is None else records
        self._done_stats = CaptureStats()  # totals of finished passes
        self._pending = 0  # keys read but not yet handed over

    def _counters(self) -> dict:
        cur = self._reader.stats
        done = self._done_stats
        skipped = dict(done.skipped)
        for reason, c in cur.skipped.items():
            skipped[reason] = skipped.get(reason, 0) + c
        if self._plan is not None and self._plan.outside:
            skipped[epochorder.OUTSIDE] = self._plan.outside
        return {
            "packets": done.packets + cur.packets - self._pending,
            "ip_packets": self._fed,
            "skipped": skipped,
            "bytes_done": cur.bytes_done,
            "bytes_total": cur.bytes_total,
            "incomplete": cur.incomplete or done.incomplete,
            "fraction": (min(1.0, max(0, cur.packets - self._pending) / self._records)
                         if self._records else cur.fraction),
            "warnings": tuple(done.warnings) + tuple(cur.warnings) + (
                (f"paced replay skipped {self.skipped_gap:.1f} s of idle gaps longer than {self.max_gap:g} s "
                 f"(--max-gap)",) if self.skipped_gap else ()),
        }

    def _run(self) -> None:
        offset = 0  # added to every time stamp of the current pass
        clock = None  # [wall start, first packet time] of the pacing clock
        while True:
            lo = hi = None
            batches = self._reader.batches(self.batch_size)
            if self._plan is not None:
                batches = epochorder.canonical(batches, self._plan)
            for batch in batches:
                if not len(batch):
                    continue
                ts = batch.ts_ns + offset if offset else batch.ts_ns
                if self.loop:  # the pass's time span shifts the next pass
                    lo = int(ts.min()) if lo is None else min(lo, int(ts.min()))
                    hi = int(ts.max()) if hi is None else max(hi, int(ts.max()))
                if clock is None:
                    clock = [time.monotonic(), int(ts[0])]
                if not self._feed(batch if ts is batch.ts_ns else batch.with_times(ts),
                                  clock):
                    return
            if not self.loop or lo is None or self.stopping:
                self._check_whole()
                return
            span, keys = hi - lo, self._reader.stats.ip_packets
            offset += span + (span // (keys - 1) if keys > 1 and span > 0 else 1_000_000)
            self._next_pass()

    def _check_whole(self) -> None:
        """A file that ends with fewer records than it held when it was counted changed before or
        under the replay: what was read is a part of it."""
        cur = self._reader.stats
        if not self.stopping and not cur.incomplete and self._records and cur.packets < self._records:
            cur.warn(f"{self.path}: {cur.packets} of the {self._records} records counted before the replay "
                     f"(the file changed since); the replay ends there")
            cur.incomplete = True

    def _next_pass(self) -> None:
        cur = self._reader.stats
        done = self._done_stats
        done.packets += cur.packets
        done.ip_packets += cur.ip_packets
        for reason, c in cur.skipped.items():
            done.skipped[reason] = done.skipped.get(reason, 0) + c
        done.warnings.extend(w for w in cur.warnings if w not in done.warnings)
        done.incomplete = done.incomplete or cur.incomplete
        self._reader.close()
        self._reader = open_capture(self.path)

    def _feed(self, batch: KeyBatch, clock: list) -> bool:
        """Hand ``batch`` over, paced; False when stopping."""
        n = len(batch)
        self._pending = n
        due_ts = np.maximum.accumulate(batch.ts_ns) if self.speed is not None else None
        i = 0
        while i < n:
            paused_at = time.monotonic()
            if not self._hold():
                return False
            clock[0] += time.monotonic() - paused_at  # the replay clock stands still while paused
            if due_ts is None:
                j = n
            else:
                now_ts = clock[1] + (time.monotonic() - clock[0]) * self.speed * 1e9
                j = int(np.searchsorted(due_ts, now_ts, side="right"))
                if j <= i:
                    wait = (float(due_ts[i]) - now_ts) / (self.speed * 1e9)
                    if wait > self.max_gap:  # an idle gap (or a corrupt stamp): skip all but max_gap of it
                        clock[0] -= wait - self.max_gap
                        self.skipped_gap += wait - self.max_gap
                        continue
                    if not self._sleep(min(wait, _MAX_SLEEP)):
                        return False
                    continue
            self._emit(batch.slice(i, j))
            self._pending = n - j
            i = j
        return not self.stopping

    def _close(self) -> None:
        self._reader.close()
