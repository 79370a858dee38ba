"""What every view says about a lane and the session, from the snapshot alone (no Qt): why a
private panel is empty, its current threshold, its a-priori detection limit, and the drops.

The window (dptop.gui.panel, dptop.gui.source_panel, dptop.gui.plots), the terminal view
(dptop.top) and the CLI share these words, so a panel explains itself the same way everywhere.
"""
from __future__ import annotations

from dataclasses import dataclass

from dptop.engine.core.status import DetectionLimit


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
    suppressed = None if rel is None else rel.suppressed
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
class LaneLoss:
    """One lane's share of the account: ``seen`` packets it took (processed or queued), ``refused``
    the batches its own full queue refused, ``missed`` every offered packet it did not see since it
    joined (the kernel's and the clock's drops, which no lane sees, and its own refusals)."""

    name: str
    seen: int
    refused: int
    missed: int


@dataclass(frozen=True)
class Drops:
    """The one account of packets lost on the way to the algorithms (operational facts, never
    private), in the units the lanes count (packets by default): ``offered`` what reached the
    socket (handed over, or dropped by the kernel) or the file; ``clock`` stamped in an epoch the
    public clock had already closed (beyond the lateness allowance) or ahead of it; ``kernel`` the
    socket's ring; ``queue`` packets at least one lane's full queue refused (each once); ``lanes``
    those refusals summed over lanes; ``by_lane`` each lane's own account. ``total`` = ``offered``
    minus the packets every lane saw = ``clock + kernel + queue``. Every view renders this object
    (``text``, ``lane_text``, dptop.monitor.result's JSON), so all say the same numbers."""

    clock: int = 0
    kernel: int = 0
    queue: int = 0
    lanes: int = 0
    offered: int = 0
    by_lane: tuple[LaneLoss, ...] = ()

    @property
    def total(self) -> int:
        return self.clock + self.kernel + self.queue

    def lane(self, name: str) -> LaneLoss | None:
        return next((loss for loss in self.by_lane if loss.name == name), None)

    def text(self) -> str:
        return (f"drops {self.total:,} of {self.offered:,} offered (late {self.clock:,}, kernel {self.kernel:,}, "
                f"queues {self.queue:,})")

    def lane_text(self, name: str) -> str:
        """What a lane that lost packets says beside its panel ('' when it lost none)."""
        loss = self.lane(name)
        if loss is None or not loss.missed:
            return ""
        return (f"lost {loss.missed:,} of the packets offered (its own queue {loss.refused:,}): "
                "its exact comparison is made over the packets it saw")

    def to_json(self) -> dict:
        return {"total": self.total, "clock": self.clock, "kernel": self.kernel, "queue": self.queue,
                "lanes": self.lanes, "offered": self.offered,
                "by_lane": {x.name: {"seen": x.seen, "refused": x.refused, "missed": x.missed} for x in self.by_lane}}

    @classmethod
    def from_json(cls, d: dict) -> "Drops":
        return cls(d.get("clock", 0), d.get("kernel", 0), d.get("queue", 0), d.get("lanes", 0), d.get("offered", 0),
                   tuple(LaneLoss(name, x["seen"], x["refused"], x["missed"])
                         for name, x in (d.get("by_lane") or {}).items()))


def drops_of(snap) -> Drops:
    """The ``Drops`` of a ``SessionSnapshot``: lanes that joined later (an Apply) count from their origin."""
    src = snap.source
    clock = sum(snap.dropped.values())
    kernel = src.kernel_drops if src else 0
    offered = snap.truth_packets + clock + kernel
    by_lane = []
    for view in snap.lanes:
        a = view.algorithm
        if a is None:
            continue
        seen = a.packets + a.queued
        by_lane.append(LaneLoss(view.name, seen, a.drops, clock + kernel + a.drops if view.origin == 0 else a.drops))
    return Drops(clock, kernel, snap.missed, sum(x.refused for x in by_lane), offered, tuple(by_lane))
