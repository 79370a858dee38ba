"""Soak (slow, root): live capture on lo at 20,000 packets/s with ``dptop capture``'s default
algorithms for DPTOP_LIVE_SOAK_MINUTES (default 60); RSS, threads and drops sampled every minute;
after the first five minutes RSS grows by at most 0.5 MiB per minute, the thread count stays put
and no packet is lost in the kernel or the queues."""
import os

import pytest

from dptop.lab import soakbench
from dptop.cli import build_parser, config_from_args

MINUTES = float(os.environ.get("DPTOP_LIVE_SOAK_MINUTES", "60"))


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.skipif(os.geteuid() != 0, reason="live capture needs root (CAP_NET_RAW)")
def test_live_capture_at_20k_packets_per_second_keeps_memory_threads_and_drops_flat():
    config = config_from_args(build_parser().parse_args(["capture", "--iface", "lo"]))
    result = soakbench.soak(config, MINUTES, every=min(60.0, MINUTES * 60 / 5))
    samples = result["samples"]
    assert result["error"] is None and len(samples) >= 4, result
    assert {s["state"] for s in samples} == {"running"}
    assert len({s["threads"] for s in samples[1:]}) == 1, samples
    assert samples[-1]["packets"] >= 0.9 * result["sent"], (samples[-1], result["sent"])
    growth = result["growth_mib_per_min"]
    print(f"\nlive soak {MINUTES:g} min at {soakbench.RATE:,} packets/s: {samples}; growth after minute "
          f"{soakbench.WARM_UP_MINUTES:g}: {growth} MiB/min")
    if MINUTES >= soakbench.WARM_UP_MINUTES + 5:  # a short run only checks threads and drops
        assert growth is not None and growth <= soakbench.GROWTH_LIMIT, samples
    assert samples[-1]["kernel"] + samples[-1]["queues"] <= 0.001 * result["sent"], samples[-1]
