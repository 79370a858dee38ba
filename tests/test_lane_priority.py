"""A live lane's thread runs nicer than the capture's (dptop.monitor.lanes.LIVE_LANE_NICE), so the
thread reading the kernel's ring goes first on a busy machine; a replay's lanes keep the process's
priority (a replay loses nothing by waiting)."""
import os
import sys

import pytest

from dptop.engine.core.facts import PublicFacts
from dptop.monitor.config import RunConfig
from dptop.monitor.lanes import LIVE_LANE_NICE, Lane

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread priority is Linux's")


@pytest.mark.parametrize("live", [True, False], ids=["live", "replay"])
def test_a_live_lane_runs_nicer_than_its_process_and_a_replay_lane_does_not(live):
    own = os.getpriority(os.PRIO_PROCESS, 0)
    lane = Lane("exact", RunConfig(("exact",)), PublicFacts(), generation=0, history=16, live=live)
    try:
        assert lane.error is None and lane.worker is not None
        nice = os.getpriority(os.PRIO_PROCESS, lane.worker.thread.native_id)
        assert nice == (min(19, own + LIVE_LANE_NICE) if live else own)
        assert os.getpriority(os.PRIO_PROCESS, 0) == own  # the calling thread keeps its priority
    finally:
        lane.worker.stop()
        lane.worker.join(10)
