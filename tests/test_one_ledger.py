"""One ledger per source: every session over the same packets joins it, so ``dptop top``'s key
switch (a new session replaying the same file) adds its cost to the earlier ones' instead of
starting at zero; a live capture started again reads later packets (disjoint, like an Apply). The
replays run in the test's thread (dptop.monitor.stepped); ``top``'s key switch runs the product's
threaded sessions."""
from __future__ import annotations

import asyncio
import os

import pytest

from dptop.engine.core.settings import Settings
from dptop.monitor.config import RunConfig, SourceSpec
from dptop.monitor.ledger import Ledger
from dptop.monitor.publish import publish_json
from dptop.monitor.states import State
from dptop.monitor.stepped import SteppedSession

SMALL = os.path.join(os.path.dirname(__file__), "data", "amp.dns.RRSIG.fragmented.pcap")


def replayed(ledger, key="src"):
    from dataclasses import replace

    config = RunConfig(("dpss",), Settings(k=4, epsilon=0.5, delta=1e-6))
    session = SteppedSession(replace(config, counting=replace(config.counting, key=key)), ledger=ledger)
    session.open(SourceSpec("file", path=SMALL))
    assert session.replay() is State.FINISHED, session.error
    return session


def test_sessions_over_the_same_file_add_up_in_one_ledger():
    first = replayed(None)
    assert first.snapshot().budget["epsilon"] == pytest.approx(0.5)
    second = replayed(first.ledger, "dst")
    third = replayed(first.ledger, "dport")
    for s in (first, second, third):
        s.close(2.0)
    budget = publish_json(third, "serve")["budget"]  # what the feed serves
    assert budget["epsilon"] == pytest.approx(1.5) and budget["algorithms"]["dpss"]["segments"] == 3


def test_a_live_restart_reads_later_packets_only():
    session = replayed(None)
    guarantee = session.snapshot().lanes[0].algorithm.guarantee
    session.close(2.0)
    ledger = Ledger()
    for rereads, expected in ((False, 0.5), (False, 0.5), (True, 1.0)):
        reading = ledger.join(rereads)
        ledger.record("dpss", 1, guarantee, 1, reading=reading)
        assert ledger.to_json()["epsilon"] == pytest.approx(expected)


def test_top_key_switches_keep_one_ledger():
    """After source, destination and port over the same file, the feed's budget is the sequential
    cost of the three readings (ε 1.5), not the last session's (ε 0.5)."""
    pytest.importorskip("textual")
    from dptop.cli import build_parser, config_from_args
    from dptop.top import TopApp

    config = config_from_args(build_parser().parse_args(["top", SMALL, "--algorithms", "dpss", "--epsilon", "0.5"]))

    async def scenario():
        app = TopApp(SourceSpec("file", path=SMALL), config, refresh=0.1)
        try:
            async with app.run_test(size=(80, 24)) as pilot:
                for key in ("src", "dst", "dport"):
                    while not (app.session.config.counting.key == key and app.session.state == State.FINISHED):
                        await pilot.pause(0.1)
                    app.session.snapshot()  # the ledger records what the view has seen
                    if key != "dport":
                        await pilot.press("k")
                return publish_json(app.session, "serve")["budget"]["epsilon"]
        finally:
            assert app.close_sessions() == []

    assert asyncio.run(asyncio.wait_for(scenario(), 120)) == pytest.approx(1.5)
