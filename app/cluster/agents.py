"""The collector's record of its agents: what a user is shown of each (``AgentStatus``) and what the
collector itself keeps of each admitted capture point (``AdmittedPoint``), never the agent's word.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class AgentStatus:
    name: str
    address: str
    iface: str = ""
    state: str = "starting"
    """starting, running, lost, failed, finished, or missing (expected, never joined)."""
    packets: int = 0
    ip_packets: int = 0
    packets_per_second: float = 0.0
    kernel_drops: int = 0
    queue_drops: int = 0
    late: int = 0
    """Packets of a cell already shipped or released (counted, not merged)."""
    seen: float = 0.0
    """time.monotonic() of the last good answer."""
    first_cell: int | None = None
    last_cell: int | None = None
    error: str | None = None

    @property
    def gone(self) -> bool:
        return self.state in ("lost", "failed", "missing")

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "seen"}


@dataclass
class AdmittedPoint:
    """The collector's own record of an admitted capture point (never the agent's word)."""

    address: str
    first_cell: int
    through: int
    """The last cell it delivered (or that was lost on the way)."""
    asked: int
    """The last cell the collector asked for."""
    dropped: set = field(default_factory=set)
    """Cells whose summaries never arrived (answers lost with the scheduler): not covered."""
    future: object = None
    sent: float = 0.0
    seq: int = 0
    final: bool = False


SILENT = "no answer"


def pullable(a: AgentStatus) -> bool:
    """Still pulled: starting, running, or lost by silence only (its answer brings it back; the
    epochs released meanwhile name it as not covered)."""
    return a.state in ("starting", "running") or a.state == "lost" and (a.error or "").startswith(SILENT)
