"""What an algorithm is given: the user's parameters (``Settings``) and what a packet counts as
(``Counting``); the facts about the source are ``engine.core.facts.PublicFacts``.

One frozen ``Settings`` holds every user-facing parameter and nothing read from the data; each
algorithm reads the fields it needs and validates them in its constructor with messages that name
the parameter, the value and the rule. Fields left ``None`` take the algorithm's documented default.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from dptop.engine.core.keykinds import KeyKind


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
    extra: dict = field(default_factory=dict)
    """Algorithm-specific options, keyed by option name (e.g. ``{"depth": 5}``); each algorithm
    names the ones it reads (``Algorithm.parameters``), the integer ones that size memory are
    checked against ``EXTRA_RANGES``."""

    def with_(self, **changes) -> "Settings":
        return replace(self, **changes)


@dataclass(frozen=True)
class Counting:
    """What one packet counts as for an algorithm: the kind of its key (``key``) and the updates it
    may contribute (``cap``: 1 counting packets; weighted by bytes, the cap G on its
    ⌈length / ``byte_unit``⌉ units). Guarantees are restated per packet from it
    (``engine.privacy.units.counted_unit``: group privacy over ``cap`` updates)."""

    key: KeyKind = KeyKind.SRC
    cap: int = 1
    byte_unit: int | None = None
    """Bytes per update when weighted by bytes; None when a packet counts once."""

    def __post_init__(self):
        if not isinstance(self.key, KeyKind):
            object.__setattr__(self, "key", KeyKind(self.key))
        check_positive_int("byte cap", self.cap)

    @property
    def weighted(self) -> bool:
        """Whether a packet counts its bytes (up to ``cap`` updates) rather than once."""
        return self.byte_unit is not None

    def amount(self, n: int) -> str:
        """``n`` updates in words: "n packets", or "n units of 64 bytes" when weighted by bytes."""
        return f"{n} units of {self.byte_unit} bytes" if self.weighted else f"{n} packets"


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


PACKETS = Counting()
"""One packet counts once, by its source address (the default of every algorithm)."""


def check_epsilon(epsilon: float, upper: float | None = None) -> float:
    epsilon = float(epsilon)
    if not epsilon > 0 or epsilon != epsilon or epsilon == float("inf"):
        raise ValueError(f"epsilon ({epsilon:g}) must be > 0 and finite")
    if upper is not None and not epsilon < upper:
        raise ValueError(f"epsilon ({epsilon:g}) must be < {upper:g} for this mechanism")
    return epsilon


def check_delta(delta: float) -> float:
    """A mechanism's δ, the user's or a share of it, is a probability in (0, 1); the δ a user may
    give is ``RANGES["delta"]``, inside it."""
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


@dataclass(frozen=True)
class Range:
    """The valid values of one numeric parameter, defined once and used wherever it is checked
    (the CLI's option parser, the GUI's fields, the constructors): a number in ``[low, high]``
    (``(low, ...`` when ``open_low``), an integer when ``integer``. ``name`` is how the message
    names it (``epsilon``, ``--param depth``, ``--speed``)."""

    name: str
    low: float
    high: float
    integer: bool = False
    open_low: bool = False
    open_high: bool = False

    def rule(self) -> str:
        return f"{'(' if self.open_low else '['}{self.low!r}, {self.high!r}{')' if self.open_high else ']'}"

    def __contains__(self, value) -> bool:
        return (self.low < value if self.open_low else self.low <= value) and (
            value < self.high if self.open_high else value <= self.high)

    def check(self, value):
        """``value`` if it is in the range, else ``ValueError`` naming the parameter, the value and
        the rule (nan, infinities, booleans and, for integers, fractions are outside)."""
        kind = "an integer" if self.integer else "a number"
        number = (int,) if self.integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, number) and not (
                self.integer and isinstance(value, float) and value.is_integer()):
            raise ValueError(f"{self.name} ({value!r}) must be {kind} in {self.rule()}")
        if value != value or value not in self:
            raise ValueError(f"{self.name} ({value!r}) must be in {self.rule()}")
        return int(value) if self.integer else value

    def parse(self, text: str):
        """The option's text as a checked number (argparse ``type=``)."""
        try:
            value = int(text) if self.integer else float(text)
        except ValueError:
            raise ValueError(f"{self.name} ({text!r}) must be {'an integer' if self.integer else 'a number'} "
                             f"in {self.rule()}") from None
        return self.check(value)


RANGES = {r.name: r for r in (
    # checked before any algorithm allocates anything
    Range("k", 1, 1 << 22, integer=True),
    Range("k_tilde", 2, 1 << 24, integer=True),
    Range("epsilon", 1e-6, 64.0),  # below, noise scales (1/ε, ρ = ε²/2...) leave the float range
    Range("delta", 1e-100, 0.5, open_high=True),  # below, δ split over releases underflows to 0
    # (ln(1/δ) overflows); under 1/2 as LazyHH's analysis needs (docs/lazyhh.md §6.1), so every algorithm
    # takes every δ of the range
    Range("epoch_packets", 1, 1 << 40, integer=True),
    Range("epoch_seconds", 1e-6, 1e7),
    Range("horizon", 1, 1 << 40, integer=True),
    Range("window", 2, 1 << 32, integer=True),
    Range("gamma", 0.0, 1.0, open_low=True, open_high=True),
)}
"""The documented valid range of every shared parameter (README.md, "Command line": "Parameters are checked")."""
SEED = Range("seed", 0, (1 << 63) - 1, integer=True)
"""``--seed``: any non-negative 64-bit integer."""

EXTRA_RANGES = {name: Range(f"--param {name}", low, high, integer=True) for name, (low, high) in (
    ("depth", (1, 64)), ("width", (2, 1 << 26)), ("top", (0, 1 << 24)), ("t_max", (1, 1 << 48)),
    ("substreams", (1, 1 << 20)), ("max_nodes", (1, 1 << 20)), ("domain_scan", (1, 1 << 24)))}
"""Ranges of the integer ``--param`` options that size memory."""


def check_ranges(settings: Settings) -> None:
    """Raise ``ValueError`` naming the first parameter outside its documented range."""
    for name, r in RANGES.items():
        value = getattr(settings, name)
        if value is not None:
            r.check(value)
    if settings.seed is not None:
        SEED.check(settings.seed)
    for name, r in EXTRA_RANGES.items():
        value = settings.extra.get(name)
        if value is not None:
            r.check(value)
