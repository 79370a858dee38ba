"""Local-DP accounting (docs/local-dp.md §10.2) and the guarantee the local-DP panels carry.

* An agent sends at most R reports per window (``--param reports=R``), a uniform sample of the
  window's packets; ``--epsilon`` is then the agent's **window budget** ε_w and each report gets
  ε = ε_w/R. Sequential composition bounds what the collector learns from one agent's window by
  R·ε = ε_w, whatever the packets were. ``reports=all`` reports every packet at ε = ``--epsilon``
  each; the window budget is then not capped (it grows with the agent's packets, which persistent
  flows repeat: §10.2), and the guarantee says so.
* Windows are the epochs of the run (``--epoch-seconds`` / ``--epoch-packets``); without either,
  windows of ``DEFAULT_WINDOW_SECONDS`` of packet time.
* The guarantee's unit is "one report", its model "local DP" and its measure pure ε-LDP: a
  different promise from the central-DP panels (unit "one packet"), so the ledger keeps it on its
  own line and never adds it to theirs (§10.3 item 8).
"""
from __future__ import annotations

import math

from dptop.engine.privacy.guarantee import Guarantee
from dptop.engine.privacy.measures import PureDP
from dptop.engine.privacy.units import Relation, Unit, UnitKind
from dptop.engine.core.settings import check_epsilon, check_positive_int
from dptop.engine.single_release.epochs import check_epoch_options

MODEL_LOCAL = "local DP"
DEFAULT_REPORTS = 1000
DEFAULT_WINDOW_SECONDS = 1.0
GAPS = ("the collector needs no trust, but it sees which agent reported and how often: report "
        "counts reveal traffic volume (docs/local-dp.md §10.3 item 1)",
        "a malicious agent can send arbitrary symbols (poisoning, §10.3 item 6); malformed or "
        "expired reports are rejected and counted",
        "no amplification by sampling is claimed (§10.3 item 7)",
        "estimates count reports, not packets")


def parse_reports(value) -> int | None:
    """``reports``: an integer R >= 1, or ``all`` (None: every packet is a report)."""
    if value == "all":
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"reports ({value!r}) must be an integer >= 1 (reports per agent per window) or 'all'")
    return value


def report_epsilon(epsilon: float, reports: int | None) -> float:
    """ε of one report: the window budget split over R reports, or ``epsilon`` itself for 'all'."""
    epsilon = check_epsilon(epsilon)
    return epsilon if reports is None else epsilon / check_positive_int("reports", reports)


def window_epsilon(per_report: float, reports: int | None) -> float:
    """An agent's budget per window: R·ε, unbounded (inf) when every packet is reported."""
    return math.inf if reports is None else reports * per_report


def window_options(epoch_packets, epoch_seconds) -> tuple[int | None, float]:
    """(window packets, window seconds): the run's epochs, else the default time window."""
    packets, seconds = check_epoch_options(epoch_packets, epoch_seconds)
    if packets is None and seconds is None:
        seconds = DEFAULT_WINDOW_SECONDS
    return packets, seconds


def window_text(packets: int | None, seconds: float | None) -> str:
    return f"{packets} packets" if packets is not None else f"{seconds:g} s of packet time"


def local_guarantee(per_report: float, reports: int | None, window: str, noise: str, seeded: bool, notes=(),
                    unit=None) -> Guarantee:
    """"ε-LDP per report, R reports per agent per window, untrusted collector"; what one packet
    pays for it is ``units.per_packet`` (R·ε per agent window, or ε when every packet reports)."""
    if reports is None:
        cap = "every packet reported (no cap: the window budget grows with the agent's packets)"
    else:
        cap = (f"<= {reports} reports per agent per window of {window} (window budget "
               f"ε={window_epsilon(per_report, reports):g} per agent)")
    scope = f"ε-LDP per report, {cap}, untrusted collector"
    return Guarantee(MODEL_LOCAL, PureDP(per_report), Relation.SUBSTITUTE, Unit(UnitKind.REPORT, reports=reports),
                     scope, noise, seeded, (*notes, *GAPS)).counted(unit)
