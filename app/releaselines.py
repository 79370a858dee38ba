"""``dptop capture``'s running log: one line per release while the capture runs.

Single-release algorithms print every epoch's release when it is published; continual-observation,
sliding-window and local-DP algorithms, whose output changes with every few packets, print their
current release once per epoch of the public clock (the same cadence: the first release made after
an epoch closes, a live view asked for at the close), so a capture of S seconds prints about
S / epoch lines per algorithm. Lines carry only what the guarantee covers or takes as public:
labels and private estimates, a single-release epoch's span (grid times, or
positions from noisy lengths) and its threshold, and for the other families the epoch of the
public clock whose close the line follows (its grid times) with the public size of what the
release covers (a declared or default window, a horizon T), never the packets seen so far, a
packet's stamp or a threshold computed from the exact count (LazyHH's τ(t), local DP's). The
operator's exact positions stay in the run's JSON. Every release printed is kept in ``shown``,
so the JSON and the private view hold each one (dptop.monitor.result.shown_releases).
"""
from __future__ import annotations

import sys
import time

from dptop.report import span_text

PUBLIC_THRESHOLD = ("single-release", "sliding window")
"""Families whose threshold is a function of parameters and noisy figures only (DPSS's noisy
length, DPSW's (γ − 1/b)·w, docs/dpsw-sketch.md); a continual algorithm's τ(t) follows the count t
of packets seen (docs/lazyhh.md) and a local-DP threshold the count of reports, both exact."""


def clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def items_text(release, scale: int, top: int) -> str:
    items = " · ".join(f"{it.address} {it.estimate * scale:,.0f}" for it in release.items[:top])
    return (items or "(nothing above τ)") + (f" (+{len(release.items) - top})" if len(release.items) > top else "")


def release_line(name: str, release, units: str = "packets", scale: int = 1, top: int = 5) -> str:
    """A single-release epoch's line: ``12:00:10 dpss epoch 3, 12:00:00-12:00:10 UTC, τ 812:
    127.0.0.2 6,012 · 127.0.0.3 2,010``, led by the epoch's public end (its grid time) where it has
    one, else the moment it is printed (packet epochs, cut at public positions)."""
    span = release.span
    at = span.t_end if span.t_end is not None else time.time()
    thr = "" if release.threshold is None else f", τ {release.threshold * scale:,.0f}"
    return f"{clock(at)} {name} {span_text(span, units)}{thr}: {items_text(release, scale, top)}"


def covered(family: str, algorithm, units: str) -> str:
    """What a continual, sliding-window or local-DP release covers, in public terms only: the
    window or horizon size the algorithm was built with (a parameter, its default, or a public fact
    its guarantee names), never how many packets it has seen."""
    window, horizon = getattr(algorithm, "window", None), getattr(algorithm, "horizon", None)
    if family == "sliding window" and window is not None:
        return f"the last {window:,} {units}"
    if family == "continual observation" and horizon is not None:
        if getattr(algorithm, "restart", False):
            return f"the current segment of at most {horizon:,} {units}"
        return f"the stream so far (horizon {horizon:,} {units})"
    return "the stream so far"


def epoch_line(name: str, release, cell: int, grid, what: str, threshold: bool, scale: int = 1,
               top: int = 5) -> str:
    """A continual, sliding-window or local-DP line after the close of epoch ``cell`` of ``grid``:
    ``12:00:10 lazyhh after epoch 0, 12:00:00-12:00:10 UTC, the stream so far (horizon 1,048,576
    packets): 127.0.0.2 6,012``; led by the epoch's end on the grid."""
    start = (grid.start_ns + cell * grid.epoch_ns) / 1e9
    end = start + grid.epoch_ns / 1e9
    bounds = f"{time.strftime('%H:%M:%S', time.gmtime(start))}-{time.strftime('%H:%M:%S', time.gmtime(end))} UTC"
    thr = f", τ {release.threshold * scale:,.0f}" if threshold and release.threshold is not None else ""
    return f"{clock(end)} {name} after epoch {cell}, {bounds}, {what}{thr}: {items_text(release, scale, top)}"


class ReleaseLines:
    """Polls a session and prints the lines of new releases (call ``update()`` from the CLI loop)."""

    def __init__(self, session, stream=None):
        self.session, self.stream = session, stream or sys.stdout
        self.seen: dict[tuple[str, int], int] = {}  # (name, generation) -> releases printed
        self.shown: dict[str, list] = {}  # name -> the releases printed, in order
        self.cell = -1
        self.due: dict[tuple[str, int], tuple[object, int]] = {}  # (name, generation) -> (latest, epoch) at a close
        c = session.config.counting
        self.scale = c.unit if c.weight == "bytes" else 1
        self.units = f"{c.unit}-byte units" if c.weight == "bytes" else "packets"

    def update(self) -> None:
        cell_closed = self.session.cell != self.cell and self.cell >= 0
        self.cell = self.session.cell if self.cell < 0 or cell_closed else self.cell
        for lane in list(self.session.lanes.values()):
            snap = lane.snapshot()
            if snap is None or not snap.private:
                continue
            key = (lane.name, lane.generation)
            if snap.family == "single-release":
                done = self.seen.get(key, 0)
                if snap.releases > done:
                    for release in self.session.releases(lane.name)[-(snap.releases - done):]:
                        self._print(lane.name, release, release_line(lane.name, release, self.units, self.scale))
                    self.seen[key] = snap.releases
            elif cell_closed:  # the window is queried on demand (DPSW): ask for its answer now
                lane.snapshot(want_live=True)
                self.due[key] = (snap.latest, self.closed())
            elif key in self.due and snap.latest is not None and snap.latest is not self.due[key][0]:
                cell = self.due.pop(key)[1]  # the first release made since the epoch closed
                self._print(lane.name, snap.latest, self.epoch_line(lane, snap, cell))

    def closed(self) -> int:
        """The last epoch closed: the one before the open cell, or the last of a bounded time range
        (the final close of a capture with ``--duration`` goes past it)."""
        grid, end = self.session.grid, self.session.public.get("time_range", (None, None))[1]
        last = self.session.cell - 1
        return last if end is None or grid is None else min(last, (end - grid.start_ns - 1) // grid.epoch_ns)

    def epoch_line(self, lane, snap, cell: int) -> str:
        """The line of ``snap.latest``, a continual, window or local-DP release made after ``cell`` closed."""
        what = covered(snap.family, lane.worker.algorithm, self.units)
        return epoch_line(lane.name, snap.latest, cell, self.session.grid, what, snap.family in PUBLIC_THRESHOLD,
                          self.scale)

    def _print(self, name: str, release, line: str) -> None:
        self.shown.setdefault(name, []).append(release)
        try:
            print(line, file=self.stream, flush=True)
        except (BrokenPipeError, ValueError):
            pass
