"""What the views know of the algorithms: names and descriptions, never instances.

The views (CLI, terminal view, window, feed) list and describe the algorithms through this module
and run them only through a session; the import contracts forbid them the registry and the
algorithm packages. ``preview`` is the one place a view's question ("what would this guarantee
be?") builds an algorithm: a scratch instance checked against the memory limit first, which sees
no data.
"""
from __future__ import annotations

from dataclasses import dataclass

from dptop.engine.core import registry
from dptop.engine.core.facts import NO_FACTS, PublicFacts
from dptop.engine.core.settings import PACKETS, Counting, Settings
from dptop.engine.privacy.guarantee import Guarantee
from dptop.monitor.footprints import default_limit, memory_error


@dataclass(frozen=True)
class AlgorithmEntry:
    """One algorithm as the views show it: its ``--algorithms`` name, whether it is private, its
    family (single release, continual observation, ...), the first paragraph of its docstring as
    one line, and whether it only counts addresses (not ports, protocols or pairs)."""

    name: str
    private: bool
    family: str
    summary: str
    address_keys: bool


def _summary(cls) -> str:
    return " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split()).replace("``", "")


def names() -> list[str]:
    """Every algorithm's name, in the registry's order (the order of ``dptop list``)."""
    return registry.names()


def entry(name: str) -> AlgorithmEntry:
    """The entry of ``name``; ``ValueError`` naming the known ones for an unknown name."""
    cls = registry.get(name)
    return AlgorithmEntry(name, cls.private, cls.family, _summary(cls), cls.address_keys)


def entries() -> list[AlgorithmEntry]:
    return [entry(n) for n in names()]


def preview(name: str, settings: Settings, facts: PublicFacts = NO_FACTS,
            counting: Counting = PACKETS) -> Guarantee | None:
    """The guarantee ``name`` would carry under ``settings`` (its defaults chosen as a session
    chooses them, ``RunConfig.settings_for``), the public ``facts`` and the ``counting``; None for
    a non-private baseline. From a scratch instance built only if its memory fits the limit
    (``ValueError`` otherwise)."""
    cls = registry.get(name)
    if not cls.private:
        return None
    error = memory_error({name: cls.footprint(settings, facts, counting)}, default_limit())
    if error:
        raise ValueError(error)
    return cls(settings, facts, counting).guarantee()


def warm_up(name: str) -> None:
    """Compile (or load from numba's cache) the kernels of ``name`` on a scratch instance of the
    default settings, which sees no data."""
    registry.make(name, Settings()).warm_up()
