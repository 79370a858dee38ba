"""What every view says about a lane and the session, from the snapshot alone (no Qt): why a
private panel is empty, its current threshold, its a-priori detection limit, and the drops.

The window (dptop.gui.panel, dptop.gui.source_panel, dptop.gui.plots), the terminal view
(dptop.top) and the CLI share these words, so a panel explains itself the same way everywhere.
"""
from __future__ import annotations

from dataclasses import dataclass

from dptop.monitor.status import DetectionLimit, ReleaseStatus


def threshold_of(view) -> float | None:
    """The current suppression threshold: the latest release's, else the live status's."""
    a = view.algorithm
    if a is None:
        return None
    if a.latest is not None and a.latest.threshold is not None:
        return float(a.latest.threshold)
    return view.status.threshold


def reason_text(view, noun: str = "source") -> str:
    """Why the panel is empty (or a caveat about what it shows); '' when there is nothing to say.
    ``noun``: the counted key kind in the view's words (source, destination, port, ...)."""
    if view.error:
        return f"Cannot run with these settings: {view.error}"
    a = view.algorithm
    if a is None:
        return "Not started."
    if a.error:
        return f"Stopped by an error: {a.error}"
    if not a.ready:
        return "Compiling kernels (first use since install; later starts load them from the cache)…"
    rel, st = a.latest, view.status
    suppressed = None if rel is None else ReleaseStatus.of(rel.status).suppressed
    if suppressed:
        return suppressed
    empty = rel is None or not rel.items
    if st.horizon_reached:
        return (f"Horizon T = {st.horizon or 0:,} reached: the last output stays published; "
                f"{st.packets_after_horizon:,} later packets ignored (enable restart).")
    if empty and st.note:
        return st.note
    if empty and st.detectable is not None and st.detectable.note:
        return st.detectable.note
    # from the parameters alone (no count of this epoch's packets: that is exact)
    floor = (f" An epoch needs at least {st.min_packets:,} packets before any {noun} can pass the threshold, "
             "even without noise.") if st.min_packets else ""
    if rel is None:
        if a.private and a.family == "single-release":
            return f"Waiting for epoch {st.epoch or 0} to close ({st.epoch_mode} epochs).{floor}"
        return "Waiting for the first release."
    if empty:
        thr = threshold_of(view)
        if thr is not None:
            return f"No {noun} above the threshold τ = {thr:,.0f} in this release.{floor}"
        return f"The release is empty.{floor}"
    return ""


def detectable_text(limit: DetectionLimit | None, noun: str = "source") -> str:
    """The a-priori detection limit (count and share, either may be unknown): the smallest source
    the algorithm can release at all, known before any packet; with ``after`` (continual
    observation on a live stream) the packets a source of a given share needs before it is released."""
    if limit is None:
        return ""
    bits = [f"≥ {limit.count:,.0f} pkts" if limit.count is not None else "",
            f"≥ {limit.share:.1%} of the span" if limit.share is not None else ""]
    bits = [b for b in bits if b]
    text = f"detectable: {' and '.join(bits)}" if bits else ""
    if limit.after:
        when = ", ".join(f"{share:.0%} {noun} after {n:,} pkts" if n is not None
                         else f"{share:.0%} {noun} never in a segment" for share, n in limit.after)
        text = f"{text}; {when}" if text else when
    return text


@dataclass(frozen=True)
class Drops:
    """Packets lost on the way to the algorithms, by where (operational facts, never private):
    ``clock`` stamped in an epoch the public clock had already closed (beyond the lateness
    allowance) or ahead of it, ``kernel`` the socket's ring, ``queue`` batches the session refused,
    ``lanes`` batches an algorithm's full queue refused (summed over algorithms)."""

    clock: int = 0
    kernel: int = 0
    queue: int = 0
    lanes: int = 0

    @property
    def total(self) -> int:
        return self.clock + self.kernel + self.queue + self.lanes

    def text(self) -> str:
        return (f"drops {self.total:,} (late {self.clock:,}, kernel {self.kernel:,}, "
                f"queues {self.queue + self.lanes:,})")


def drops_of(snap) -> Drops:
    """The ``Drops`` of a ``SessionSnapshot``."""
    src = snap.source
    return Drops(sum(snap.dropped.values()), src.kernel_drops if src else 0, src.queue_drops if src else 0,
                 sum(lane.algorithm.drops for lane in snap.lanes if lane.algorithm is not None))
