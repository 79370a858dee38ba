"""Algorithm names (the CLI's ``--algorithms``) -> classes.

Each algorithm module decorates its classes with ``@register``; ``MODULES`` lists the modules to
import so that every name is known. ``make(name, settings, facts, counting)`` builds one instance.

A mergeable algorithm's entry also holds its mergeability (``dptop.engine.core.mergeable``), declared
with ``declare_mergeable`` beside its summarizers (``MERGE_MODULES``); ``mergeable(name)`` reads it,
None for an algorithm that cannot be merged.
"""
from __future__ import annotations

import importlib

from dptop.engine.core.facts import NO_FACTS, PublicFacts
from dptop.engine.core.mergeable import EpochMerge, Mergeability, WholeStreamMerge
from dptop.engine.core.settings import PACKETS, Counting, Settings

MODULES = (
    "dptop.engine.baselines.exact",
    "dptop.engine.baselines.spacesaving",
    "dptop.engine.baselines.misragries",
    "dptop.engine.single_release.dpss",
    "dptop.engine.single_release.dpmg",
    "dptop.engine.single_release.eehh",
    "dptop.engine.baselines.countmin",
    "dptop.engine.continual.lazysketch",
    "dptop.engine.continual.lazyhh",
    "dptop.engine.baselines.window",
    "dptop.engine.sliding_window.dpsw_hh",
    "dptop.engine.user_level.hostdp",
    "dptop.engine.local_dp.domain_schemes",
    "dptop.engine.local_dp.prefix_scheme",
)

MERGE_MODULES = (
    "dptop.engine.baselines.merge",
    "dptop.engine.single_release.merged",
)
"""The modules that declare mergeability (beside the summarizers they declare)."""

_REGISTRY: dict[str, type] = {}
_MERGEABLE: dict[str, Mergeability] = {}


def register(cls):
    """Class decorator: make ``cls`` available under ``cls.name``."""
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"algorithm name {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def declare_mergeable(cls, declaration: Mergeability) -> None:
    """Declare how registered algorithm ``cls`` is summarized at capture points and merged."""
    if not isinstance(declaration, (WholeStreamMerge, EpochMerge)):
        raise TypeError(f"{cls.name}: a mergeability is a WholeStreamMerge or an EpochMerge, "
                        f"not {type(declaration).__name__}")
    if _REGISTRY.get(cls.name) is not cls:
        raise ValueError(f"{cls.name!r}: only a registered algorithm can declare mergeability")
    if cls.name in _MERGEABLE and _MERGEABLE[cls.name] != declaration:
        raise ValueError(f"algorithm {cls.name!r} declared mergeable twice")
    _MERGEABLE[cls.name] = declaration


def _load() -> dict[str, type]:
    for module in MODULES + MERGE_MODULES:
        importlib.import_module(module)
    return _REGISTRY


def names() -> list[str]:
    """Every name, in ``MODULES`` order (then each module's own), whatever module was imported first."""
    registry = _load()
    rank = {module: i for i, module in enumerate(MODULES)}
    return sorted(registry, key=lambda name: rank.get(registry[name].__module__, len(MODULES)))


def get(name: str) -> type:
    registry = _load()
    if name not in registry:
        raise ValueError(f"unknown algorithm {name!r}; known: {', '.join(sorted(registry))}")
    return registry[name]


def make(name: str, settings: Settings, facts: PublicFacts = NO_FACTS, counting: Counting = PACKETS):
    """``name`` built from the user's parameters, the source's public facts and the counting."""
    return get(name)(settings, facts, counting)


def mergeable(name: str) -> Mergeability | None:
    """How known algorithm ``name`` is merged across capture points, or None if it cannot be."""
    get(name)
    return _MERGEABLE.get(name)


def mergeable_names() -> list[str]:
    """Every algorithm that declares mergeability, in declaration order."""
    _load()
    return list(_MERGEABLE)
