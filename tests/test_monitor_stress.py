"""The session's state machine under random start / apply / pause / resume / stop / close
sequences (hypothesis stateful testing): every transition is valid from every state, nothing
hangs, and afterwards the thread count and memory are back to the baseline."""
import gc
import threading
import time
import tracemalloc

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from dptop.capture.synth import write_zipf_pcap
from dptop.engine.core.settings import Settings
from dptop.monitor.config import RunConfig, SourceSpec
from dptop.monitor.session import Session

NAMES = ("exact", "dpss", "lazyhh", "dpsw")
RSS_TOLERANCE = 256 * 2**20
"""Bytes the last round's RSS may exceed the peak of the earlier ones by: glibc keeps the arenas
its threads grew and the heap fragments, so RSS plateaus (measured: 371, 400, 489, 489, 446 MiB
over five rounds of 75 transitions; +82 MiB once inside the full suite) rather than returning to
the byte. The leak check proper is on traced allocations (Python objects and numpy arrays)."""
TRACED_TOLERANCE = 16 * 2**20  # bytes of traced allocations the last round may keep


def rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096


def dptop_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("dptop")]


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    path = tmp_path_factory.mktemp("stress") / "z.pcap"
    write_zipf_pcap(path, 1.1, 10_000, 1_000_000, seed=4, rate_pps=100_000)  # 10 s of packet time
    return path


def machine(path):
    class Sessions(RuleBasedStateMachine):
        def __init__(self):
            super().__init__()
            self.session = None
            self.all = []

        def _new(self, epsilon, epochs):
            base = Settings(k=8, epsilon=epsilon, epoch_seconds=1.0 if epochs else None, horizon=1 << 20)
            return RunConfig(NAMES, base)

        @rule(speed=st.sampled_from([None, 2.0, 20.0]), epochs=st.booleans())
        def start(self, speed, epochs):
            if self.session is not None:
                self.session.stop()
            self.session = Session(self._new(0.5, epochs), record_packets=1 << 16)
            self.all.append(self.session)
            self.session.open(SourceSpec("file", path=str(path), speed=speed))

        @precondition(lambda self: self.session is not None)
        @rule(epsilon=st.sampled_from([0.25, 0.5, 0.75]), epochs=st.booleans())
        def apply(self, epsilon, epochs):
            self.session.apply(self._new(epsilon, epochs))

        @precondition(lambda self: self.session is not None)
        @rule()
        def pause(self):
            self.session.pause()

        @precondition(lambda self: self.session is not None)
        @rule()
        def resume(self):
            self.session.resume()

        @precondition(lambda self: self.session is not None)
        @rule(flush=st.booleans())
        def stop(self, flush):
            self.session.stop(flush=flush)

        @precondition(lambda self: self.session is not None)
        @rule()
        def close(self):
            assert self.session.close(timeout=5.0) == [], "close left threads running"
            assert self.session.state in ("stopped", "finished", "failed")
            self.session = None

        @rule(ms=st.integers(0, 300))
        def wait(self, ms):
            time.sleep(ms / 1000)
            if self.session is not None:
                snap = self.session.snapshot()
                assert snap.state in ("idle", "starting", "running", "paused", "finished", "stopping", "stopped",
                                      "failed")
                assert snap.error is None, snap.error

        def teardown(self):
            for s in self.all:
                assert s.close(timeout=5.0) == []
    return Sessions


def _run(path, examples, steps):
    Session(RunConfig(NAMES, Settings(k=8)))  # nothing started: must not leave threads either
    warm = Session(RunConfig(NAMES, Settings(k=8, epoch_seconds=1.0)))  # kernels and caches loaded once
    warm.open(SourceSpec("file", path=str(path)))
    assert warm.wait(300) == "finished", warm.error
    assert warm.close(5.0) == []
    del warm
    baseline_threads = threading.active_count()
    state_machine = machine(path)
    state_machine.TestCase.settings = settings(max_examples=examples, stateful_step_count=steps, deadline=None,
                                               suppress_health_check=list(HealthCheck))
    peaks = []
    tracemalloc.start()
    try:
        for _ in range(2):  # earlier rounds: the allocator's arenas and pools grow to their plateau
            state_machine.TestCase().runTest()
            gc.collect()
            peaks.append(rss())
        baseline, traced = max(peaks), tracemalloc.get_traced_memory()[0]
        state_machine.TestCase().runTest()
        gc.collect()
        time.sleep(0.2)
        kept = tracemalloc.get_traced_memory()[0] - traced
    finally:
        tracemalloc.stop()
    assert dptop_threads() == []
    assert threading.active_count() <= baseline_threads
    assert kept < TRACED_TOLERANCE, f"the last round kept {kept / 2**20:.1f} MiB of traced allocations"
    grown = rss() - baseline
    print(f"\n3 x {examples * steps} transitions: the last round kept {kept / 2**20:+.2f} MiB of traced "
          f"allocations; its RSS is {grown / 2**20:+.1f} MiB over the earlier peak")
    assert grown < RSS_TOLERANCE, f"RSS grew by {grown / 2**20:.0f} MiB"


def test_random_transitions_leave_no_thread_and_no_memory_behind(capture):
    _run(capture, examples=2, steps=20)


@pytest.mark.slow
def test_three_hundred_random_transitions(capture):
    _run(capture, examples=12, steps=25)  # 300 transitions per round
