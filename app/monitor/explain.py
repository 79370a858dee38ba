"""What every view says about a lane and the session, from the snapshot alone (no Qt): why a
private panel is empty, its current threshold, its a-priori detection limit, and the drops.

The window (dptop.gui.panel, dptop.gui.source_panel, dptop.gui.plots), the terminal view
(dptop.top) and the CLI share these words, so a panel explains itself the same way everywhere.
"""
from __future__ import annotations

from dataclasses import dataclass


def threshold_of(view) -> float | None:
    """The current suppression threshold: the latest release's, else the live status's."""
    a = view.algorithm
    if a is None:
        return None
    if a.latest is not None and a.latest.threshold is not None:
        return float(a.latest.threshold)
    for key in ("threshold", "tau"):
        if a.status.get(key) is not None:
            return float(a.status[key])
    return None


def reason_text(view) -> str:
    """Why the panel is empty (or a caveat about what it shows); '' when there is nothing to say."""
    if view.error:
        return f"Cannot run with these settings: {view.error}"
    a = view.algorithm
    if a is None:
        return "Not started."
    if a.error:
        return f"Stopped by an error: {a.error}"
    if not a.ready:
        return "Compiling kernels (first start after install; later starts load them from the cache)…"
    rel, st = a.latest, a.status
    if rel is not None and rel.status.get("suppressed"):
        return str(rel.status["suppressed"])
    empty = rel is None or not rel.items
    if st.get("horizon_reached"):
        return (f"Horizon T = {st.get('horizon'):,} reached: the last output stays published; "
                f"{st.get('packets_after_horizon', 0):,} later packets ignored (enable restart).")
    need = st.get("packets_until_release")
    if empty and need:
        return (f"Nothing can be released yet: {int(need):,} more packets needed in this epoch "
                "before any source can pass the threshold.")
    if empty and st.get("note"):
        return str(st["note"])
    if empty and isinstance(st.get("detectable"), dict) and st["detectable"].get("note"):
        return str(st["detectable"]["note"])
    if rel is None:
        if a.private and a.family == "single-release":
            return f"Waiting for epoch {st.get('epoch', 0)} to close ({st.get('epoch_mode', '')} epochs)."
        return "Waiting for the first release."
    if empty:
        thr = threshold_of(view)
        if thr is not None:
            return f"No source above the threshold τ = {thr:,.0f} in this release."
        return "The release is empty."
    return ""


def detectable_text(limit) -> str:
    """The a-priori detection limit of the status (``{"count", "share"}``, either may be missing):
    the smallest source the algorithm can release at all, known before any packet; with
    ``after`` (continual observation on a live stream) the packets a source of a given share
    needs before it is released."""
    if not isinstance(limit, dict):
        return ""
    bits = [f"≥ {limit['count']:,.0f} pkts" if limit.get("count") is not None else "",
            f"≥ {limit['share']:.1%} of the span" if limit.get("share") is not None else ""]
    bits = [b for b in bits if b]
    text = f"detectable: {' and '.join(bits)}" if bits else ""
    after = limit.get("after")
    if isinstance(after, dict) and after:
        when = ", ".join(f"{float(share):.0%} source after {int(n):,} pkts" if n is not None
                         else f"{float(share):.0%} source never in a segment" for share, n in after.items())
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
