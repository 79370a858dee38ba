"""A session's state machine (app/monitor/states.py): every pair of states tried, the legal
transitions taken and every other refused; and the sessions that walk the paths (a stop while
starting, pause and resume, an ended session that stays ended)."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import itertools
import time

import pytest

from dptop.engine.core.settings import Settings
from dptop.monitor.config import RunConfig, SourceSpec
from dptop.monitor.session import Session
from dptop.monitor.states import ENDED, TRANSITIONS, Lifecycle, State
from tests.conftest import DNS_CAPTURE

LEGAL = {
    ("idle", "starting"), ("idle", "stopping"),
    ("starting", "running"), ("starting", "stopping"), ("starting", "failed"),
    ("running", "paused"), ("running", "finished"), ("running", "stopping"), ("running", "failed"),
    ("paused", "running"), ("paused", "finished"), ("paused", "stopping"), ("paused", "failed"),
    ("stopping", "stopped"), ("stopping", "failed"),
}
"""Written out by hand, so a change to the table has to change this too."""


def lifecycle_in(state: State) -> Lifecycle:
    """A lifecycle brought to ``state`` along legal transitions only."""
    paths = {State.IDLE: [], State.STARTING: ["starting"], State.RUNNING: ["starting", "running"],
             State.PAUSED: ["starting", "running", "paused"], State.FINISHED: ["starting", "running", "finished"],
             State.STOPPING: ["stopping"], State.STOPPED: ["stopping", "stopped"], State.FAILED: ["starting", "failed"]}
    life = Lifecycle()
    for step in paths[state]:
        assert life.move(State(step))
    assert life.state is state
    return life


@pytest.mark.parametrize("old,new", list(itertools.product(State, State)))
def test_every_transition_is_taken_or_refused_by_the_table(old, new):
    life = lifecycle_in(old)
    legal = (old.value, new.value) in LEGAL
    assert (new in TRANSITIONS[old]) == legal
    assert life.move(new, "phase") is legal
    assert life.state is (new if legal else old)


def test_ended_states_are_final_and_fail_keeps_the_first_error():
    assert ENDED == {s for s in State if not TRANSITIONS[s]}
    life = lifecycle_in(State.RUNNING)
    assert life.fail("boom") and life.state is State.FAILED and life.error == "boom"
    assert not life.fail("later") and life.error == "boom"
    assert str(State.RUNNING) == "running" and State.RUNNING == "running"


def wait_for(session, states, timeout=120.0):
    deadline = time.monotonic() + timeout
    while session.state not in states and time.monotonic() < deadline:
        time.sleep(0.01)
    return session.state


def test_a_stop_while_starting_ends_stopped_and_nothing_revives_it():
    session = Session(RunConfig(("exact",)))
    try:
        session.open(SourceSpec("file", str(DNS_CAPTURE)))
        assert session.state in (State.STARTING, State.RUNNING, State.FINISHED)
        session.stop()
        assert session.wait(30) in (State.STOPPED, State.FINISHED)
        ended = session.state
        session.resume()
        session.pause()
        assert session.state is ended
    finally:
        assert session.close(5.0) == []


def test_pause_and_resume_a_paced_replay_then_it_finishes():
    session = Session(RunConfig(("exact",), Settings(k=4)))
    try:
        session.open(SourceSpec("file", str(DNS_CAPTURE), speed=50.0))
        assert wait_for(session, {State.RUNNING}) is State.RUNNING, session.error
        session.pause()
        assert session.state is State.PAUSED and session.snapshot().state is State.PAUSED
        session.resume()
        assert session.state in (State.RUNNING, State.FINISHED)
        session.stop(flush=True)
        assert session.wait(60) is State.STOPPED
    finally:
        assert session.close(5.0) == []


def test_a_failing_source_fails_the_session_with_one_line(tmp_path):
    """A capture that cannot be read is reported (naming the file, in one line), not raised."""
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"not a capture at all")
    session = Session(RunConfig(("exact",)))
    try:
        session.open(SourceSpec("file", str(bad)))
        assert session.wait(30) is State.FAILED
        assert session.state == "failed"
        assert session.error and "\n" not in session.error
        assert "bad.pcap" in session.snapshot().error
    finally:
        assert session.close(1.0) == []
