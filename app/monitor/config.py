"""What a monitoring session reads and runs: the source, the algorithms and their settings."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dptop.engine.core import registry
from dptop.capture import synth
from dptop.capture.live import COUNT, DURATION
from dptop.capture.replay import MAX_GAP, SPEED
from dptop.engine.core.keykinds import KEY_KINDS, KeyKind
from dptop.engine.core.facts import NO_FACTS, PublicFacts
from dptop.engine.core.settings import SEED, Range, Settings, check_ranges
from dptop.engine.core.settings import Counting
from dptop.engine.privacy.calibration import per_update
from dptop.engine.privacy.units import Unit, counted_unit
from dptop.monitor.footprints import MemoryLimit, default_limit, memory_error

PER_ALGORITHM = ("k_tilde", "window")
"""Settings fields one algorithm's ``RunConfig.extras`` may set for it alone (a value tuned for
LazyHH's k~ is not DPSS's)."""
NON_PRIVATE_FIELDS = ("k", "k_tilde", "extra")
"""The settings fields the non-private baselines read (a change of epsilon does not restart them)."""


LIVE_EPOCH_SECONDS = 10.0
"""A live source's single-release epochs when neither ``epoch_seconds`` nor ``epoch_packets`` is
given: cells of the wall clock, so releases appear while the capture runs."""

LATENESS_SECONDS = 1.0
"""Live time epochs: a cell closes this long after its end on the wall clock, so a packet stamped
just before a boundary and delivered just after it (socket ring, batching) still counts in its own
epoch. Public: a parameter, never derived from the traffic; a packet later than this is a counted drop."""
LATENESS = Range("lateness", 0.0, 3600.0)



@dataclass(frozen=True)
class SourceSpec:
    """What to read: ``kind`` is "file", "live" or "synth".

    ``time_range`` (ns, ns) is the declared public range of a replay's time epochs (default: the
    file's own first and last stamps, then stated as public). ``loop`` is offered for synthetic
    streams only: a loop pass repeats every packet, which a real capture's guarantee cannot absorb.
    """

    kind: str = "file"
    path: str | None = None
    speed: float | None = None  # None: as fast as possible
    max_gap: float = 5.0  # paced replay: longest wait (s) for the next packet
    loop: bool = False
    iface: str | None = None
    bpf: str | None = None
    count: int | None = None  # live: stop after this many packets
    duration: float | None = None  # live: stop after this many seconds from the first packet slot
    time_range: tuple[int, int] | None = None
    skew: float = 1.1
    domain: int = 1 << 16
    length: int = 1 << 18
    seed: int = 1
    rate: int = 20_000
    lateness: float = LATENESS_SECONDS  # live: public allowance for a packet delivered after its epoch closed

    def __post_init__(self):
        if not (isinstance(self.lateness, (int, float)) and 0 <= self.lateness <= 60):
            raise ValueError(f"--lateness ({self.lateness!r}) must be in [0, 60] seconds")
        if self.kind not in ("file", "live", "synth"):
            raise ValueError(f"source kind ({self.kind!r}) must be 'file', 'live' or 'synth'")
        if self.loop and self.kind != "synth":
            raise ValueError("loop replays every packet again (each pass multiplies what it reveals about them); "
                             "it is offered for synthetic streams only")
        for value, rule in ((self.speed, SPEED), (self.max_gap, MAX_GAP), (self.count, COUNT),
                            (self.duration, DURATION)):
            if value is not None:
                rule.check(value)
        if self.kind == "synth":
            for value, rule in ((self.skew, synth.SKEW), (self.domain, synth.DOMAIN), (self.length, synth.LENGTH),
                                (self.rate, synth.RATE), (self.seed, SEED)):
                rule.check(value)

    def label(self) -> str:
        if self.kind == "file":
            return Path(self.path or "").name
        if self.kind == "live":
            return f"{self.iface}" + (f" [{self.bpf}]" if self.bpf else "")
        return f"synthetic Zipf({self.skew:g}) over {self.domain} sources"


BYTE_UNIT = Range("byte-unit", 1, 65536, integer=True)
BYTE_CAP = Range("byte-cap", 1, 4096, integer=True)


@dataclass(frozen=True)
class CountingChoice:
    """The user's choice of what a packet counts as (``--key``, ``--weight``, ``--byte-unit``,
    ``--byte-cap``): its key (``key``, a ``keykinds.KeyKind`` value: source or destination address,
    port, protocol, pair, network), one unit or ⌈length / ``unit``⌉ units of ``unit`` bytes capped
    at ``cap`` (``weight``). ``counted()`` is what the engine is told (``engine.core.settings.Counting``).
    In bytes every algorithm sees a packet as up to ``cap`` updates: it runs calibrated per update so
    that the requested guarantee holds per packet by group privacy (engine/privacy/calibration.py)."""

    key: str = "src"
    weight: str = "packets"
    unit: int = 64
    cap: int = 24

    def __post_init__(self):
        if self.key not in KEY_KINDS:
            raise ValueError(f"--key ({self.key!r}) must be one of {', '.join(KEY_KINDS)}")
        if self.weight not in ("packets", "bytes"):
            raise ValueError(f"--weight ({self.weight!r}) must be 'packets' or 'bytes'")
        BYTE_UNIT.check(self.unit)
        BYTE_CAP.check(self.cap)

    @property
    def group(self) -> int:
        """Updates one packet may contribute (group privacy factor of the per-packet guarantee)."""
        return self.cap if self.weight == "bytes" else 1

    @property
    def kind(self) -> KeyKind:
        return KeyKind(self.key)

    def counted(self) -> Counting:
        """What an algorithm is told a packet counts as (``engine.core.settings.Counting``)."""
        return Counting(self.kind, self.group, self.unit if self.weight == "bytes" else None)

    @property
    def update_unit(self) -> str:
        """What one counted update is, in words: "packet", or "64 bytes" weighted by bytes (a packet
        is then ⌈length/64⌉ of them, at most ``cap``); the run JSON's ``settings.unit``."""
        return f"{self.unit} bytes" if self.weight == "bytes" else "packet"

    def counted_unit(self) -> Unit:
        """The typed unit guarantees are stated for (key kind, byte cap)."""
        return counted_unit(self.counted())

    def describe(self) -> str:
        what = self.kind.label
        if self.weight == "packets":
            return f"packets per {what}"
        return (f"bytes per {what}, counted in units of {self.unit} bytes (a packet counts "
                f"⌈length/{self.unit}⌉ units, at most {self.cap}); estimates are shown in bytes")


@dataclass(frozen=True)
class RunConfig:
    """The enabled algorithms, the shared settings, per-algorithm ``extra`` options, what a
    packet counts as and the memory their state may take (None: ``footprints.default_limit``)."""

    names: tuple[str, ...]
    settings: Settings = field(default_factory=Settings)
    extras: dict = field(default_factory=dict)
    counting: CountingChoice = field(default_factory=CountingChoice)
    memory_limit: MemoryLimit | None = None

    def settings_for(self, name: str, facts: PublicFacts = NO_FACTS) -> Settings:
        """``name``'s parameters: its own options, calibrated per update for the counting, with the
        defaults its class picks from the session's public ``facts`` (``Algorithm.with_defaults``).
        Its own ``extras`` may set ``PER_ALGORITHM`` fields (k~, w) for it alone."""
        own = self.extras.get(name, {})
        fields = {f: own[f] for f in PER_ALGORITHM if f in own}
        extra = {k: v for k, v in own.items() if k not in fields}
        s = self.settings.with_(extra={**self.settings.extra, **extra}, **fields)
        cls = registry.get(name)
        counted = self.counting.counted()
        return cls.with_defaults(per_update(cls, s, counted), facts, counted)

    def make(self, name: str, facts: PublicFacts = NO_FACTS):
        """``name`` built by the registry from its settings, the public ``facts`` and the counting."""
        return registry.make(name, self.settings_for(name, facts), facts, self.counting.counted())


def affected(name: str, old: Settings, new: Settings) -> bool:
    """Whether switching ``name`` from ``old`` to ``new`` settings needs a restart."""
    if registry.get(name).private:
        return old != new
    return any(getattr(old, f) != getattr(new, f) for f in NON_PRIVATE_FIELDS)


def check_params(names, extra: dict) -> None:
    """Every ``--param`` option must be one that a selected algorithm reads (``Algorithm.parameters``)."""
    declared = [registry.get(n).parameters for n in names]
    if any(p is None for p in declared):
        return
    known = {p for ps in declared for p in ps} | {"top"}
    for name in extra:
        if name not in known:
            raise ValueError(f"unknown --param {name!r} (options of {', '.join(names)}: "
                             f"{', '.join(sorted(known))})")


def config_errors(config: RunConfig, facts: PublicFacts = NO_FACTS) -> dict[str, str]:
    """Every reason ``config`` cannot run, by algorithm name ("settings" for the shared ones): the
    documented ranges first, then the memory the algorithms' state would take (both before
    anything allocates), then each constructor's own checks, so the CLI and the GUI refuse the
    same things with the same words. ``facts``: public facts known before the run (a replay's
    ``stream_length``), against which e.g. an explicit t_max is checked."""
    try:
        check_ranges(config.settings)
        check_params(config.names, config.settings.extra)
    except ValueError as exc:
        return {"settings": str(exc)}
    errors = {}
    kind = config.counting.kind
    for name in config.names:
        if registry.get(name).address_keys and not kind.address:
            errors[name] = (f"{name} reads host addresses (its domain or its protected unit is a host): it runs with "
                            f"--key src or dst, not {kind.value}")
    placeholder = placeholder_facts(config.settings, facts)
    counted = config.counting.counted()
    footprints = {}
    for name in config.names:
        try:
            footprints[name] = registry.get(name).footprint(config.settings_for(name, placeholder), placeholder,
                                                            counted)
        except (ValueError, TypeError, ArithmeticError):
            pass  # parameters its constructor refuses below, in its own words
    try:
        too_large = memory_error(footprints, config.memory_limit or default_limit())
    except ValueError as exc:  # a malformed DPTOP_MEMORY_LIMIT
        return {"settings": str(exc)}
    if too_large:
        return {"settings": too_large}
    for name in config.names:
        if name in errors:
            continue
        try:
            check_ranges(config.settings_for(name))
            config.make(name, placeholder)
        except (ValueError, TypeError, MemoryError) as exc:
            errors[name] = str(exc) if not isinstance(exc, MemoryError) else "not enough memory for these parameters"
    return errors


def placeholder_facts(settings: Settings, facts: PublicFacts = NO_FACTS) -> PublicFacts:
    """``facts`` with a stand-in time range of one epoch when time epochs are asked for and no
    range is known yet (a check before the source is open): what the constructors need to run
    their own checks, never used for a release."""
    if settings.epoch_seconds is None or facts.time_range is not None:
        return facts
    return facts.with_(time_range=PublicFacts.of(time_range=(0, max(1, round(settings.epoch_seconds * 1e9)))).time_range)
