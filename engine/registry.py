"""Algorithm names (the CLI's ``--algorithms``) -> classes.

Each algorithm module decorates its classes with ``@register``; ``MODULES`` lists the modules to
import so that every name is known. ``make(name, settings)`` builds one instance.
"""
from __future__ import annotations

import importlib

from engine.settings import Settings

MODULES = (
    "engine.exact",
    "engine.spacesaving",
    "engine.misragries",
    "engine.dpss",
    "engine.dpmg",
    "engine.eehh",
    "engine.countmin",
    "engine.lazysketch",
    "engine.lazyhh",
    "engine.window",
    "engine.dpsw_hh",
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


def make(name: str, settings: Settings):
    return get(name)(settings)
