"""The positions of the stream (the truth's, dptop.monitor.truth) a live lane did not see: the
batches its full queue refused (dptop.monitor.fanout), kept as ranges so its exact comparison
leaves them out (dptop.monitor.recording.seen_keys) and its own packet positions map to the stream's
(``Unseen.position``, for count-based spans)."""
from __future__ import annotations

import bisect


def _end(r: tuple[int, int]) -> int:
    return r[1]


class Unseen:
    """Global positions of the batches one live lane refused (its full queue), as disjoint
    increasing ranges ``[a, b)``, adjacent refusals merged: its exact comparison leaves them out,
    and its own packet positions (count-based spans) map to global ones around them (``position``).

    Bounded: ranges that end before the recording's oldest packet are forgotten (no span that old
    is answered) and at most ``limit`` are kept (about 130 bytes each: 0.5 MB a lane at most); a
    forgotten range still counts by its length, and nothing before ``known_from`` (the last
    forgotten range's end) is answered. One producer (the fanout) adds; readers take the state, a
    tuple swapped whole."""

    def __init__(self, limit: int = 4096):
        self.limit = int(limit)
        self._state: tuple[tuple[tuple[int, int], ...], int, int] = ((), 0, 0)  # ranges, known_from, forgotten

    @property
    def ranges(self) -> tuple[tuple[int, int], ...]:
        return self._state[0]

    @property
    def known_from(self) -> int:
        return self._state[1]

    def add(self, a: int, b: int, oldest: int = 0) -> None:
        """The lane did not see positions ``[a, b)`` (after every earlier range); ``oldest``: the
        recording's oldest position, before which nothing is asked any more."""
        if b <= a:
            return
        ranges, known_from, forgotten = self._state
        if ranges and ranges[-1][1] == a:
            ranges = (*ranges[:-1], (ranges[-1][0], b))
        else:
            ranges = (*ranges, (a, b))
        cut = max(bisect.bisect_right(ranges, oldest, key=_end), len(ranges) - self.limit)
        if cut > 0:
            known_from = ranges[cut - 1][1]
            forgotten += sum(q - p for p, q in ranges[:cut])
            ranges = ranges[cut:]
        self._state = (ranges, known_from, forgotten)

    def within(self, a: int, b: int) -> tuple[tuple[int, int], ...]:
        """The unseen ranges clipped to ``[a, b)``. Raises ``LookupError`` when some may be forgotten."""
        ranges, known_from, _ = self._state
        if a < known_from:
            raise LookupError(f"span [{a}, {b}) starts before the lane's refusals still held")
        out = []
        for p, q in ranges[bisect.bisect_right(ranges, a, key=_end):]:
            if p >= b:
                break
            out.append((max(p, a), min(q, b)))
        return tuple(out)

    def position(self, n: int, origin: int, end: bool = False) -> int:
        """The global position of the lane's ``n``-th packet since its ``origin`` (``end``: the
        position just after its ``n``-th packet, a span's exclusive end: no refusal right after it
        included). Raises ``LookupError`` when it lies before ranges already forgotten."""
        ranges, known_from, forgotten = self._state
        g = origin + n + forgotten
        for p, q in ranges:
            if p > g or (end and p == g):
                break
            g += q - p
        if g < known_from or (end and forgotten and g == known_from):  # an end never follows a refusal
            raise LookupError(f"lane position {n:,} lies before the lane's refusals still held")
        return g
