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


DESCRIPTIONS = {
    "spacesaving": "Not private. Keeps k~ counters (default 2k) and reports the k largest: close to exact, "
                   "never over-counting by more than the stream length / k~.",
    "misragries": "Not private. Keeps k~ counters (default 2k) and reports the k largest: every count is "
                  "an underestimate by at most the stream length / (k~ + 1).",
    "countmin": "Not private. A CountMin sketch (4 rows; width: --param width, default the power of two "
                "at least 8k) with a heap of its k~ heaviest keys: counts may be over-estimated.",
    "exact": "Not private. Exact counts of every key; reports the k largest (--param top=N; 0 for all).",
    "window-exact": "Not private. Exact counts over the last --window packets: the keys above gamma x window "
                    "when --gamma is set, else the k largest.",
    "exact-clients": "Not private. Exact number of distinct clients per destination (the truth beside "
                     "hostdp-dst).",
    "exact-servers": "Not private. Exact number of distinct destinations per source (the truth beside "
                     "hostdp-src).",
    "dpss": "Private. One release per epoch: the keys whose noisy count passes a threshold set by epsilon, "
            "delta and k, with noise added to the counts and to the epoch's length.",
    "dpmg": "Private. Misra-Gries with k~ counters, noised once per epoch (--param mode=A, the default, "
            "with discrete noise, or pure for delta = 0).",
    "eehh-cms": "Private. One release per epoch from a noisy CountMin sketch, sized so that its error "
                "stays below a stated bound (--param width, default from that bound).",
    "eehh-cs": "Private, experimental. One release per epoch from a noisy Count Sketch; its error bound is "
               "not yet established.",
    "lazyhh": "Private. Continual release: the heavy hitters so far, updated as packets arrive, until the "
              "horizon (--horizon, default the file's length) is reached; k~ candidates (default 4k).",
    "lazy-cms": "Private. Continual release of counts from a noisy CountMin sketch that is refreshed only "
                "when a count has moved enough (fast).",
    "lazy-cs": "Private. Continual release of counts from a noisy Count Sketch refreshed only when a count "
               "has moved enough (fast).",
    "punctual-cms": "Private. Continual release from a CountMin sketch noised at every output time (the "
                    "slow reference the lazy version is measured against).",
    "punctual-cs": "Private. Continual release from a Count Sketch noised at every output time (the slow "
                   "reference the lazy version is measured against).",
    "dpsw": "Private. Sliding window: the keys above gamma x window among the last --window packets "
            "(default 100,000), refreshed as packets arrive.",
    "hostdp-dst": "Private per client host. Servers contacted by the most clients in each epoch; one client "
                  "with all its packets in an epoch is protected.",
    "hostdp-src": "Private per destination host. Clients contacting the most servers in each epoch; one "
                  "destination with all its packets in an epoch is protected.",
    "ldp-bgr": "Private on each device (local DP). Every report is randomized over the whole key domain "
               "before it leaves; the collector counts the heavy ones.",
    "ldp-dsr": "Private on each device (local DP). Reports are randomized over a domain that shrinks to the "
               "hot keys once the collector's table is full.",
    "ldp-bdr": "Private on each device (local DP). Each report's budget is split: first whether the key is "
               "hot, then which one.",
    "ldp-cnr": "Private on each device (local DP). As ldp-bdr, with a buffer that proposes new candidate "
               "keys (less certain).",
    "ldp-dsr-prefix": "Private on each device (local DP). Finds heavy IPv4 addresses one prefix level at a "
                      "time, /8 first, extending only the hot prefixes.",
}
"""What ``dptop list`` and the views say of each algorithm, in plain words with its defaults (the
papers' terms and references stay in each class's docstring)."""


@dataclass(frozen=True)
class AlgorithmEntry:
    """One algorithm as the views show it: its ``--algorithms`` name, whether it is private, its
    family (single release, continual observation, ...), its description in plain words
    (``DESCRIPTIONS``, else the first paragraph of its docstring as one line), and whether it only
    counts addresses (not ports, protocols or pairs)."""

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
    return AlgorithmEntry(name, cls.private, cls.family, DESCRIPTIONS.get(name) or _summary(cls), cls.address_keys)


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
