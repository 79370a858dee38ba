"""Interface events (down, up, gone) reach stderr as one line each whatever ``--progress`` says: on a
pipe, where no progress line is written, a capture must still say that its interface went away."""
import io
from types import SimpleNamespace

import pytest

from dptop.capture.source import InterfaceEvent, SourceStats
from dptop.headless import Progress
from dptop.monitor.config import CountingChoice


@pytest.mark.parametrize("mode", ["never", "auto"])
def test_interface_events_are_said_on_a_pipe_in_every_progress_mode(mode):
    events = (InterfaceEvent("down", "veth0", 1.0), InterfaceEvent("up", "veth0", 3.5, 2.5))
    stats = SourceStats(interface_events=events[:1])
    session = SimpleNamespace(config=SimpleNamespace(counting=CountingChoice()), source_stats=lambda: stats, phase="")
    pipe = io.StringIO()  # not a terminal: no progress line in "auto" either
    progress = Progress(session, stream=pipe, mode=mode)
    progress.update()
    stats = SourceStats(interface_events=events)
    progress.update()
    progress.update()  # each event once
    assert pipe.getvalue().splitlines() == [f"dptop: {e.text()}" for e in events]
