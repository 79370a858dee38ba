"""Run settings shared by the CLI, the GUI and every algorithm factory.

One frozen ``Settings`` holds every user-facing parameter; each algorithm reads the fields it
needs and validates them in its constructor with messages that name the parameter, the value and
the rule (HOUSE_STYLE.md). Fields left ``None`` take the algorithm's documented default.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Settings:
    k: int = 16
    """Heavy-hitter target: report items above n/k (at most k of them)."""
    k_tilde: int | None = None
    """Tracked counters / candidates k~ (default per algorithm, e.g. 2k for DPSS)."""
    epsilon: float = 0.5
    delta: float = 1e-6
    seed: int | None = None
    """Seed for reproducible runs: switches noise to a seeded generator (NOT private)."""
    epoch_packets: int | None = None
    epoch_seconds: float | None = None
    horizon: int | None = None
    restart: bool = False
    window: int | None = None
    gamma: float | None = None
    stream_length: int | None = None
    """Packet count of a replayed file when known before the run (public under substitution)."""
    time_range: tuple[int, int | None] | None = None
    """Public time range ``(start_ns, end_ns)`` of the session's time epochs; ``end_ns`` None for
    an open-ended live capture (engine/core/clock.py)."""
    key: str = "src"
    """The key kind the stream's keys are (``dptop.engine.core.keykinds.KeyKind`` value): read by
    algorithms whose structure depends on it (DPSW's prefix hierarchy, host-level searches)."""
    extra: dict = field(default_factory=dict)
    """Algorithm-specific options, keyed by option name (e.g. ``{"depth": 5}``)."""

    def with_(self, **changes) -> "Settings":
        return replace(self, **changes)


def check_positive_int(name: str, value, minimum: int = 1) -> int:
    """Raise ``ValueError`` naming the parameter unless ``value`` is an int >= minimum."""
    if isinstance(value, bool) or not isinstance(value, (int,)) and not (
        hasattr(value, "__index__")
    ):
        raise ValueError(f"{name} ({value!r}) must be an integer >= {minimum}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} ({value}) must be >= {minimum}")
    return value


def check_epsilon(epsilon: float, upper: float | None = None) -> float:
    epsilon = float(epsilon)
    if not epsilon > 0 or epsilon != epsilon or epsilon == float("inf"):
        raise ValueError(f"epsilon ({epsilon:g}) must be > 0 and finite")
    if upper is not None and not epsilon < upper:
        raise ValueError(f"epsilon ({epsilon:g}) must be < {upper:g} for this mechanism")
    return epsilon


def check_delta(delta: float) -> float:
    delta = float(delta)
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta ({delta:g}) must be in (0, 1)")
    return delta


def parse_param(text: str) -> tuple[str, object]:
    """``NAME=VALUE`` (the CLI's ``--param``, the GUI's option field) -> (name, int | float | str)."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise ValueError(f"--param wants NAME=VALUE, got {text!r}")
    for cast in (int, float):
        try:
            return name.replace("-", "_"), cast(value)
        except ValueError:
            pass
    return name.replace("-", "_"), value


RANGES = {
    # name: (low, high, inclusive low) -- checked before any algorithm allocates anything
    "k": (1, 1 << 22, True),
    "k_tilde": (2, 1 << 24, True),
    "epsilon": (0.0, 64.0, False),
    "delta": (0.0, 0.5, False),
    "epoch_packets": (1, 1 << 40, True),
    "epoch_seconds": (1e-6, 1e7, True),
    "horizon": (1, 1 << 40, True),
    "window": (2, 1 << 32, True),
    "gamma": (0.0, 1.0, False),
}
"""The documented valid range of every shared parameter (README, "Parameters")."""

EXTRA_RANGES = {"depth": (1, 64), "width": (2, 1 << 26), "top": (0, 1 << 24), "t_max": (1, 1 << 48),
                "substreams": (1, 1 << 20), "max_nodes": (1, 1 << 20), "domain_scan": (1, 1 << 24)}
"""Ranges of the integer ``--param`` options that size memory."""


def check_ranges(settings: Settings) -> None:
    """Raise ``ValueError`` naming the first parameter outside its documented range."""
    for name, (low, high, closed) in RANGES.items():
        value = getattr(settings, name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            raise ValueError(f"{name} ({value!r}) must be a number")
        if not ((value >= low) if closed else (value > low)) or value > high:
            bracket = "[" if closed else "("
            raise ValueError(f"{name} ({value!r}) must be in {bracket}{low!r}, {high!r}]")
    for name, (low, high) in EXTRA_RANGES.items():
        value = settings.extra.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"--param {name} ({value!r}) must be an integer in [{low}, {high}]")
