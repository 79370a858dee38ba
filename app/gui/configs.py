"""The window's run configurations: the first start's defaults, the demo's settings, and how a
configuration is remembered between starts (QSettings stores it as JSON)."""
from __future__ import annotations

import json
from dataclasses import asdict

from dptop.engine.core.settings import Settings
from dptop.monitor import catalogue, defaults
from dptop.monitor.config import CountingChoice, RunConfig
from dptop.monitor.ledger import Ledger

DEMO_SPEED = defaults.DEMO_SPEED


def default_config() -> RunConfig:
    """First start (no saved settings): the command line's defaults (``dptop.monitor.defaults``),
    so a capture gives the same answer here as in ``dptop replay`` and ``dptop top``."""
    return defaults.run_config()


def demo_config() -> RunConfig:
    """``dptop demo``: the same settings as the headless demo (``defaults.DEMO``)."""
    return defaults.demo_config()


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
                     CountingChoice(**d.get("counting", {})))


