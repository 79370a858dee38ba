"""The defaults every view starts from: the command line (``dptop replay``/``capture``, through
``runargs``), ``dptop top``, the window's first start and ``dptop demo``, windowed or headless.

One set, so the same capture gives the same answer in every view. A replay releases once per
file unless epochs are asked for (its horizon and window are the file's length, public facts); a
live capture gets single-release epochs of ``config.LIVE_EPOCH_SECONDS`` of wall clock and the
algorithms' live defaults (LazyHH's segments and k~, DPSW's window). Chosen so that on a link of
2,000 packets/s a source sending 10 % of them is released by DPSS and DPSW within 60 s and by
LazyHH within 180 s, one sending 30 % by all three within 60 s (``tests/test_gui_defaults.py``
replays such a link on the public clock and measures the seconds per panel).
"""
from __future__ import annotations

from dptop.engine.core.settings import Settings
from dptop.monitor import catalogue
from dptop.monitor.config import RunConfig

ALGORITHMS = ("dpss", "lazyhh", "dpsw", "exact")
"""The private trio (one per model: single release, continual observation, sliding window) and the
exact counts beside them. The other non-private baselines run only when a user asks for them
(``--baselines`` adds ``BASELINES``; ``--algorithms`` names any): SpaceSaving and Misra-Gries cost
about 14 % of a default replay's CPU and were printed only with ``--baselines`` anyway."""

BASELINES = ("spacesaving", "misragries")
"""The cheap non-private baselines ``--baselines`` runs beside the defaults (CountMin, as costly per
packet as LazyHH, only by name)."""

K = 16
"""Heavy hitters: items above n/k, at most k of them."""
EPSILON = 0.5
"""Per packet and algorithm (continual observation needs < 1)."""
DELTA = 1e-6

DEMO_SPEED = 10.0
"""``dptop demo`` replays the bundled capture at this multiple of real time (no loop)."""


def settings() -> Settings:
    return Settings(k=K, epsilon=EPSILON, delta=DELTA)


def algorithms() -> tuple[str, ...]:
    """``ALGORITHMS`` this install offers (extras may leave some out)."""
    known = catalogue.names()
    return tuple(n for n in ALGORITHMS if n in known)


def run_config() -> RunConfig:
    """What a run does when nothing is asked for (``top`` is the CLI's own: max(k, 10))."""
    s = settings()
    return RunConfig(algorithms(), s.with_(extra={"top": max(s.k, 10)}))


DEMO = {"epoch_seconds": 10.0, "k_tilde": 1024, "window": 20_000, "gamma": 0.04}
"""``dptop demo`` (resources/SOURCES.md), windowed and headless alike: the defaults with epochs of
10 s of packet time, so the 300 s capture releases as a live link would; k~ = 1024 keeps LazyHH's
threshold near 14.5k packets over the file's 152,629, which the attack waves' sources pass after
~55 s of packet time; DPSW over the last 20,000 packets with γ = 0.04 (800 packets)."""


def demo_config() -> RunConfig:
    base = run_config()
    return RunConfig(base.names, base.settings.with_(**DEMO))


def demo_args() -> list[str]:
    """``DEMO`` as ``dptop replay`` options (the headless demo)."""
    out = ["--algorithms", ",".join(algorithms())]
    for name, value in DEMO.items():
        out += [f"--{name.replace('_', '-')}", f"{value:g}"]
    return out
