"""A session's life as a state machine: ``idle -> starting -> running (<-> paused) -> finished``,
or ``stopping -> stopped`` on a stop, or ``failed``. A transition the table does not hold is
refused (``Lifecycle.move`` returns False and the state stays): a stop that decided the outcome
cannot be undone by a thread that ends later, and an ended session stays ended."""
from __future__ import annotations

import threading
from enum import Enum


class State(str, Enum):
    """The state of a session; its value is the word the views and the JSON show."""

    IDLE = "idle"
    STARTING = "starting"
    RUNNING = "running"
    PAUSED = "paused"
    FINISHED = "finished"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"

    def __str__(self) -> str:
        return self.value

    @property
    def ended(self) -> bool:
        return self in ENDED

    @property
    def active(self) -> bool:
        """Reading its source, or about to (an Apply restarts lanes only then)."""
        return self in (State.STARTING, State.RUNNING, State.PAUSED)


ENDED = frozenset({State.FINISHED, State.STOPPED, State.FAILED})

TRANSITIONS: dict[State, frozenset[State]] = {
    State.IDLE: frozenset({State.STARTING, State.STOPPING}),
    State.STARTING: frozenset({State.RUNNING, State.STOPPING, State.FAILED}),
    State.RUNNING: frozenset({State.PAUSED, State.FINISHED, State.STOPPING, State.FAILED}),
    State.PAUSED: frozenset({State.RUNNING, State.FINISHED, State.STOPPING, State.FAILED}),  # the source may end
    # before the pause reaches it
    State.STOPPING: frozenset({State.STOPPED, State.FAILED}),
    State.FINISHED: frozenset(),
    State.STOPPED: frozenset(),
    State.FAILED: frozenset(),
}
"""Every legal transition; anything else is refused."""


class Lifecycle:
    """The state, the phase a starting session is in, and the error that failed it, moved under one
    lock by the session's thread and the views' calls alike."""

    def __init__(self):
        self.lock = threading.RLock()
        self.state = State.IDLE
        self.phase = ""
        self.error: str | None = None

    def move(self, to: State, phase: str = "") -> bool:
        """Go to ``to`` if the table allows it from the current state; False (nothing changes) if not."""
        with self.lock:
            if to not in TRANSITIONS[self.state]:
                return False
            self.state, self.phase = to, phase
            return True

    def fail(self, error: str) -> bool:
        """Go to ``failed`` with ``error`` (refused once the session ended)."""
        with self.lock:
            if not self.move(State.FAILED):
                return False
            self.error = error
            return True
