"""``dptop capture``'s running log: one line per release while the capture runs.

Single-release algorithms print every epoch's release when it is published; continual-observation
and sliding-window algorithms, whose output changes with every few packets, print their current
release once per epoch of the public clock (the same cadence: the first release made after an
epoch closes, a live view asked for at the close), so a capture of S seconds prints
about S / epoch lines per algorithm. Lines carry only what the release itself publishes (labels,
private estimates, threshold, the span in the units it counts), never an exact figure. Every
release printed is kept in ``shown``, so the JSON and the private view hold each one
(dptop.monitor.result.shown_releases).
"""
from __future__ import annotations

import sys
import time

from dptop.report import span_text


def release_line(name: str, release, units: str = "packets", scale: int = 1, top: int = 5) -> str:
    """``12:00:10 dpss epoch 3, 12:00:00-12:00:10 UTC, τ 812: 127.0.0.2 6,012 · 127.0.0.3 2,010``;
    a window says how many units it holds (``the last 100,000 packets``), not a clock range."""
    where = span_text(release.span.to_json(), units)
    thr = "" if release.threshold is None else f", τ {release.threshold * scale:,.0f}"
    items = " · ".join(f"{it.address} {it.estimate * scale:,.0f}" for it in release.items[:top]) or "(nothing above τ)"
    more = f" (+{len(release.items) - top})" if len(release.items) > top else ""
    return f"{time.strftime('%H:%M:%S', time.localtime())} {name} {where}{thr}: {items}{more}"


class ReleaseLines:
    """Polls a session and prints the lines of new releases (call ``update()`` from the CLI loop)."""

    def __init__(self, session, stream=None):
        self.session, self.stream = session, stream or sys.stdout
        self.seen: dict[tuple[str, int], int] = {}  # (name, generation) -> releases printed
        self.shown: dict[str, list] = {}  # name -> the releases printed, in order
        self.cell = -1
        self.due: dict[tuple[str, int], object] = {}  # (name, generation) -> its latest when an epoch closed
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
                        self._print(lane.name, release)
                    self.seen[key] = snap.releases
            elif cell_closed:  # the window is queried on demand (DPSW): ask for its answer now
                lane.snapshot(want_live=True)
                self.due[key] = snap.latest
            elif key in self.due and snap.latest is not None and snap.latest is not self.due[key]:
                self._print(lane.name, snap.latest)  # the first release made since the epoch closed
                del self.due[key]

    def _print(self, name: str, release) -> None:
        self.shown.setdefault(name, []).append(release)
        try:
            print(release_line(name, release, self.units, self.scale), file=self.stream, flush=True)
        except (BrokenPipeError, ValueError):
            pass
