"""The project's TX-ring sender (dptop.capture.lab.txring): its frames and, on a veth pair between
two namespaces (root), the exact count it offers by the receiving interface's kernel counter."""
import os
import subprocess

import numpy as np
import pytest

from dptop.capture.lab import txring
from dptop.capture.lab.netns import VethLab


def test_frames_are_ipv4_from_10_8_with_zipf_sources():
    sources, n = 1000, 200_000
    f = txring.frames(n, sources=sources, seed=3)
    assert f.shape == (n, 34)
    assert (f[:, 12:14] == (8, 0)).all() and (f[:, 14] == 0x45).all() and (f[:, 23] == 253).all()
    assert (f[:, 26] == 10).all()
    _, counts = np.unique(f[:, 26:30].view(">u4")[:, 0], return_counts=True)
    counts = np.sort(counts)[::-1]
    share = np.arange(1, sources + 1, dtype=float) ** -1.1
    share /= share.sum()
    # the ten largest sources within 5 % of their Zipf 1.1 share (200,000 draws: sd under 1 %)
    np.testing.assert_allclose(counts[:10] / n, share[:10], rtol=0.05)
    # a uniform draw (the broken variant) is far off
    assert not np.allclose(np.full(10, 1 / sources), share[:10], rtol=0.05)


@pytest.mark.live
@pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and raw sockets need root")
def test_the_sender_offers_exactly_its_count_paced():
    with VethLab() as lab:
        before = lab.rx_packets()
        out = subprocess.run(lab.sender(50_000, 50_000), capture_output=True, text=True, check=True, timeout=60)
        count, seconds, cpu = out.stdout.split()
        assert lab.rx_packets() - before == int(count) == 50_000
    assert float(seconds) >= 0.9 and float(cpu) > 0  # paced: a second of frames never leaves as one burst


def softnet_processed() -> list[int]:
    """Frames each CPU's receive backlog processed (/proc/net/softnet_stat, first column)."""
    with open("/proc/net/softnet_stat") as fh:
        return [int(line.split()[0], 16) for line in fh]


@pytest.mark.live
@pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and raw sockets need root")
def test_the_receive_side_runs_on_other_cpus_than_the_sender_and_a_full_speed_count_is_exact():
    """The lab steers the receiving veth's frames (RPS) off the sender's pinned CPU; at full speed
    the receiving CPU's backlog refuses frames now and then (ENOBUFS) and the sender sends them
    again, so the interface still counts exactly the frames asked for."""
    with VethLab() as lab:
        if lab.sender_cpu is None:
            pytest.skip("one CPU: nothing to steer")
        mask = lab.run(lab.rx_ns, ["cat", f"/sys/class/net/{lab.rx}/queues/rx-0/rps_cpus"]).stdout
        assert int(mask.replace(",", ""), 16) == sum(1 << c for c in lab.receive_cpus)
        command = lab.sender(300_000, None)
        assert command[command.index("taskset"):][:3] == ["taskset", "-c", str(lab.sender_cpu)]
        before, processed = lab.rx_packets(), softnet_processed()
        out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=120)
        after = softnet_processed()
        assert lab.rx_packets() - before == int(out.stdout.split()[0]) == 300_000
    assert sum(after[c] - processed[c] for c in lab.receive_cpus) >= 300_000
