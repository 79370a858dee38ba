"""``dptop capture``'s running log: one line per release while the capture runs.

Single-release algorithms print every epoch's release when it is published; continual-observation
and sliding-window algorithms, whose output changes with every few packets, print their current
release once per epoch of the public clock (the same cadence), so a capture of S seconds prints
about S / epoch lines per algorithm. Lines carry only what the release itself publishes (labels,
private estimates, threshold, the wall time it covers), never an exact figure.
"""
from __future__ import annotations

import sys
import time


def release_line(name: str, release, top: int = 5) -> str:
    """``12:00:10 dpss epoch 3 [12:00:00-12:00:10] τ 812: 127.0.0.2 6,012 · 127.0.0.3 2,010``."""
    span = release.span
    when = ""
    if span.t_start is not None and span.t_end is not None:
        when = f" [{_clock(span.t_start)}-{_clock(span.t_end)}]"
    where = f"{span.kind} {span.index}" if span.kind in ("epoch", "horizon") else span.kind
    thr = "" if release.threshold is None else f" τ {release.threshold:,.0f}"
    items = " · ".join(f"{it.address} {it.estimate:,.0f}" for it in release.items[:top]) or "(nothing above τ)"
    more = f" (+{len(release.items) - top})" if len(release.items) > top else ""
    return f"{_clock(time.time())} {name} {where}{when}{thr}: {items}{more}"


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


class ReleaseLines:
    """Polls a session and prints the lines of new releases (call ``update()`` from the CLI loop)."""

    def __init__(self, session, stream=None):
        self.session, self.stream = session, stream or sys.stdout
        self.seen: dict[tuple[str, int], int] = {}  # (name, generation) -> releases printed
        self.cell = -1

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
                        self._print(release_line(lane.name, release))
                    self.seen[key] = snap.releases
            elif cell_closed and snap.latest is not None:
                self._print(release_line(lane.name, snap.latest))

    def _print(self, line: str) -> None:
        try:
            print(line, file=self.stream, flush=True)
        except (BrokenPipeError, ValueError):
            pass
