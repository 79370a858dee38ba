"""Apply: a running session switched to new parameters restarts exactly the algorithms whose settings
changed (or that were enabled) and stops the disabled ones; what the replaced lanes published stays
in the ledger, the panels and the export (``Session.retired``). A session whose source has ended
keeps its lanes and parameters: the new ones are for the next start."""
from __future__ import annotations

from typing import Callable

from dptop.engine.core.facts import PublicFacts
from dptop.monitor.config import RunConfig, affected
from dptop.monitor.lanes import Lane

APPLIED_NOTE = ("parameters applied during the run take effect on the packets after the Apply; "
                "releases published before stay counted")


def lanes_after(old: dict[str, Lane], config: RunConfig, facts: PublicFacts,
                new_lane: Callable[[str], Lane]) -> tuple[dict[str, Lane], list[str]]:
    """The lane set after applying ``config`` to a session reading its source: a lane whose
    settings did not change (and that did not fail) is kept; any other enabled algorithm gets a
    new lane (``new_lane``). Returns the lanes and the names restarted."""
    lanes: dict[str, Lane] = {}
    restarted = []
    for name in config.names:
        lane = old.get(name)
        if lane is not None and lane.error is None and not affected(name, lane.settings,
                                                                     config.settings_for(name, facts)):
            lanes[name] = lane
        else:
            lanes[name] = new_lane(name)
            restarted.append(name)
    return lanes, restarted


def retired(old: dict[str, Lane], new: dict[str, Lane]) -> list[Lane]:
    """The lanes of ``old`` that ``new`` no longer runs (their workers are to be stopped)."""
    return [lane for name, lane in old.items() if new.get(name) is not lane and lane.worker is not None]
