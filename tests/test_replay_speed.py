"""End-to-end speed regression (slow): a replay with ``exact`` through the monitor session stays
within 3x of the parser alone on the same file (dptop.lab.replaybench, side by side, alternating)."""
import tempfile
from pathlib import Path

import pytest

from dptop.capture.synth import write_zipf_pcap
from dptop.lab.replaybench import parse_only, replay


@pytest.mark.slow
def test_replay_with_exact_within_3x_of_the_parser():
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "z.pcap"
        write_zipf_pcap(path, 1.1, 1 << 20, 1 << 22, seed=3, rate_pps=1_000_000)
        replay(path, ("exact",))  # warm: kernels loaded, file in the page cache
        parser, ours = [], []
        for _ in range(3):
            parser.append(parse_only(path)[1])
            ours.append(replay(path, ("exact",))[1])
    ratio = min(ours) / min(parser)
    print(f"\nreplay with exact: {min(ours):.3f} s, parser alone {min(parser):.3f} s: {ratio:.2f}x")
    assert ratio <= 3.0, f"replay with exact takes {ratio:.2f}x the parser alone"
