"""The window's run configurations: the first start's defaults, the demo's settings, and how a
configuration is remembered between starts (QSettings stores it as JSON)."""
from __future__ import annotations

import json
from dataclasses import asdict

from dptop.engine.core.settings import Settings
from dptop.monitor import catalogue
from dptop.monitor.config import Counting, RunConfig
from dptop.monitor.ledger import Ledger

PREFERRED = ("dpss", "lazyhh", "dpsw", "exact", "spacesaving")


DEMO_SPEED = 10.0
"""The bundled demo capture replays at this multiple of real time (no loop)."""


def default_config() -> RunConfig:
    """First start (no saved settings): the preferred algorithms and epochs of 5 s of packet
    time; everything else is the algorithms' own default (a replay's horizon is its length)."""
    names = tuple(n for n in PREFERRED if n in catalogue.names())
    return RunConfig(names, Settings(k=8, epsilon=0.5, delta=1e-6, epoch_seconds=5.0))


def demo_config() -> RunConfig:
    """``dptop demo``: settings under which the three private panels release several sources on
    the bundled capture (resources/SOURCES.md) within its first minute of packet time (6 s at
    10x). k = 16, epochs of 10 s: DPSS releases the 3-7 sources above ~n/16 of each epoch.
    k~ = 1024: LazyHH's suppression threshold stays near 14.5k packets over the horizon (the
    file's 152,629 packets), which the attack waves' three sources pass after ~55 s of packet
    time. DPSW: the last 20,000 packets, γ = 0.04 (800 packets). The exact baseline beside them:
    four panels, so each shows several rows at 1600x1000."""
    return RunConfig(("dpss", "lazyhh", "dpsw", "exact"), Settings(k=16, k_tilde=1024, epsilon=0.5, delta=1e-6,
                                                                  epoch_seconds=10.0, window=20_000, gamma=0.04))


def preview_ledger(guarantees: dict) -> dict | None:
    """What the configured algorithms would spend, as a ledger of one release each (no session yet)."""
    ledger = Ledger()
    for name, g in guarantees.items():
        ledger.record(name, 0, g, 1)
    return ledger.to_json()


def config_to_json(config: RunConfig) -> str:
    return json.dumps({"names": list(config.names), "settings": asdict(config.settings), "extras": config.extras,
                       "counting": asdict(config.counting)})


def config_from_json(text: str) -> RunConfig:
    d = json.loads(text)
    known = set(catalogue.names())
    settings = Settings(**{k: v for k, v in d["settings"].items() if k in Settings.__dataclass_fields__})
    return RunConfig(tuple(n for n in d["names"] if n in known), settings, d.get("extras", {}),
                     Counting(**d.get("counting", {})))


