"""Soak (slow): a looped synthetic stream through a session with every private algorithm for
DPTOP_SOAK_SECONDS (default 600); resident memory must level off (the release history is a
bounded ring, the truth a bounded recording), not grow with the packets."""
import os
import time

import pytest

from dptop.engine.core.settings import Settings
from dptop.monitor.config import RunConfig, SourceSpec
from dptop.monitor.session import Session

SECONDS = float(os.environ.get("DPTOP_SOAK_SECONDS", "600"))
SLOPE_LIMIT = 1.0  # MiB per minute over the second half of the run


def rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096 / 2**20


@pytest.mark.slow
def test_looped_synthetic_stream_keeps_memory_flat():
    config = RunConfig(("dpss", "lazyhh", "dpsw", "exact"),
                       Settings(k=8, epsilon=0.5, epoch_packets=1 << 16, horizon=1 << 22, restart=True))
    session = Session(config, history=1024)
    samples = []
    try:
        session.open(SourceSpec("synth", skew=1.1, domain=1 << 16, length=1 << 20, seed=5, loop=True))
        t0 = time.monotonic()
        while time.monotonic() - t0 < SECONDS:
            time.sleep(min(10.0, SECONDS / 20))
            snap = session.snapshot()
            assert snap.error is None and snap.state == "running", snap.error
            samples.append((time.monotonic() - t0, rss_mib(), snap.truth_packets))
    finally:
        assert session.close(5.0) == []
    half = [s for s in samples if s[0] >= SECONDS / 2]
    slope = (half[-1][1] - half[0][1]) / max(1e-9, (half[-1][0] - half[0][0]) / 60)
    print(f"\nsoak {SECONDS:.0f} s, {samples[-1][2]:,} packets: RSS {samples[0][1]:.0f} -> {samples[-1][1]:.0f} MiB, "
          f"second-half slope {slope:+.2f} MiB/min")
    assert slope < SLOPE_LIMIT, [f"{t:.0f}s {r:.0f}MiB" for t, r, _ in samples]
