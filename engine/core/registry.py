"""Algorithm names (the CLI's ``--algorithms``) -> classes.

Each algorithm module decorates its classes with ``@register``; ``MODULES`` lists the modules to
import so that every name is known. ``make(name, settings, facts, counting)`` builds one instance.
"""
from __future__ import annotations

import importlib

from dptop.engine.core.facts import NO_FACTS, PublicFacts
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

_REGISTRY: dict[str, type] = {}


def register(cls):
    """Class decorator: make ``cls`` available under ``cls.name``."""
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"algorithm name {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def _load() -> dict[str, type]:
    for module in MODULES:
        importlib.import_module(module)
    return _REGISTRY


def names() -> list[str]:
    return list(_load())


def get(name: str) -> type:
    registry = _load()
    if name not in registry:
        raise ValueError(f"unknown algorithm {name!r}; known: {', '.join(sorted(registry))}")
    return registry[name]


def make(name: str, settings: Settings, facts: PublicFacts = NO_FACTS, counting: Counting = PACKETS):
    """``name`` built from the user's parameters, the source's public facts and the counting."""
    return get(name)(settings, facts, counting)
