"""Live capture between two network namespaces (root): a veth pair, the TX-ring sender, the
receiving interface's kernel counter as ground truth (dptop.capture.lab.netns).

* a stall, with the default settings: the capturing process stopped (SIGSTOP) for 3 s while 100,000
  frames/s arrive loses nothing (the kernel's ring and the lanes' queues hold it), a packet of an
  epoch that closed during the stall counts as late, and the drop account says offered - counted
  per lane (default run; the other two are slow);
* the interface deleted mid-capture: one line naming it, exit 1, the JSON written with
  ``partial: true`` and a "gone" event;
* the interface down and up again: the capture goes on counting, reports the gap, and does not
  spin a core while the interface is down.
"""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from dptop.capture.lab.netns import VethLab
from dptop.monitor.config import LATENESS_SECONDS

pytestmark = [pytest.mark.live,
              pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and live capture need root")]

DPTOP = [sys.executable, "-m", "dptop"]


def start_capture(lab: VethLab, out, *args: str) -> subprocess.Popen:
    before = lab.packet_socket_inodes()
    cap = subprocess.Popen(lab.command(lab.rx_ns, [*DPTOP, "capture", "--iface", lab.rx, "--json", str(out), *args]),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lab.wait_capturing(cap, before)  # the socket it reads, not its check's (kernels compile first)
    except RuntimeError as exc:
        pytest.fail(str(exc))
    return cap


def flowing(lab: VethLab, packets: int, timeout: float = 60.0) -> None:
    """Wait until ``packets`` more frames reached the receiving interface."""
    start, deadline = lab.rx_packets(), time.monotonic() + timeout
    while lab.rx_packets() - start < packets:
        assert time.monotonic() < deadline, "the sender does not send"
        time.sleep(0.1)


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


TRIO = ("--algorithms", "dpss,lazyhh,dpsw,exact")
SHORT_EPOCHS = ("--epoch-seconds", "2")
"""Epochs of 2 s: an epoch's close (its end plus the 1 s lateness) falls inside any 3 s stall."""


@pytest.mark.parametrize("algorithms", [(), pytest.param(TRIO, marks=pytest.mark.slow),
                                        pytest.param(SHORT_EPOCHS, marks=pytest.mark.slow)],
                         ids=["defaults", "trio", "late"])
def test_a_process_stopped_for_3_s_at_100k_per_s_loses_nothing(tmp_path, algorithms):
    """The ring and the lanes' queues hold the stall, so no packet is lost; a packet whose epoch's
    close (its end plus the lateness, on the public clock) came due while the process was stopped
    is late by the spec and counted as late, never as lost (``late``: certainly some)."""
    out = tmp_path / "out.json"
    with VethLab() as lab:
        before = lab.rx_packets()
        cap = start_capture(lab, out, *algorithms)
        sender = subprocess.Popen(lab.sender(500_000, 100_000), stdout=subprocess.PIPE, text=True)
        flowing(lab, 100_000)
        stopped = time.time()
        cap.send_signal(signal.SIGSTOP)
        time.sleep(3)
        cap.send_signal(signal.SIGCONT)
        resumed = time.time()
        assert sender.wait(60) == 0
        time.sleep(2)
        cap.send_signal(signal.SIGINT)
        printed, err = cap.communicate(timeout=120)
        offered = lab.rx_packets() - before
    result = json.loads(out.read_text())
    drops = result["drops"]
    assert offered >= 500_000
    assert drops["offered"] == offered and drops["kernel"] == 0 and drops["queue"] == 0, (drops, err)
    for name, lane in drops["by_lane"].items():  # lost: nothing; late: counted, and in every lane alike
        assert lane["refused"] == 0 and lane["missed"] == drops["clock"], (name, drops)
        assert lane["seen"] == result["algorithms"][name]["packets"] == offered - drops["clock"], name
    assert drops["total"] == drops["clock"]
    assert f"drops {drops['total']:,} of {offered:,} offered" in printed + err or not drops["total"]
    start, epoch = result["public"]["time_range"]["start"], result["settings"]["epoch_seconds"]
    closes = [start + (c + 1) * epoch + LATENESS_SECONDS for c in range(int((resumed - start) // epoch) + 2)]
    if not any(stopped - 0.5 < close < resumed + 2 for close in closes):  # no epoch closed during the stall
        assert drops["clock"] == 0, drops
    else:  # at most the packets the stall held back
        assert drops["clock"] <= 100_000 * (resumed + 2 - stopped), drops
    if algorithms == SHORT_EPOCHS:
        assert drops["clock"] > 0, drops


@pytest.mark.slow
def test_the_interface_deleted_mid_capture_ends_it_with_its_results(tmp_path):
    out = tmp_path / "out.json"
    with VethLab() as lab:
        cap = start_capture(lab, out, "--algorithms", "exact")
        sender = subprocess.Popen(lab.sender(2_000_000, 50_000), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        flowing(lab, 50_000)
        lab.run(lab.rx_ns, ["ip", "link", "del", lab.rx])
        _, err = cap.communicate(timeout=60)
        sender.kill()
        sender.wait()
    assert cap.returncode == 1, err
    lines = [line for line in err.splitlines() if lab.rx in line and "disappeared" in line]
    assert len(lines) == 1, err
    result = json.loads(out.read_text())
    assert result["partial"] is True and result["exact"]["total"] > 0
    assert [e["event"] for e in result["source"]["interface_events"]] == ["gone"]


@pytest.mark.slow
def test_down_and_up_keeps_counting_reports_the_gap_and_does_not_spin(tmp_path):
    out = tmp_path / "out.json"
    with VethLab() as lab:
        before = lab.rx_packets()
        cap = start_capture(lab, out, "--algorithms", "exact")
        sender = subprocess.Popen(lab.sender(400_000, 50_000), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        flowing(lab, 50_000)
        lab.run(lab.rx_ns, ["ip", "link", "set", lab.rx, "down"])
        at_down = lab.rx_packets() - before
        time.sleep(0.5)
        cpu0 = cpu_seconds(cap.pid)
        time.sleep(2)
        cpu_down = cpu_seconds(cap.pid) - cpu0
        lab.run(lab.rx_ns, ["ip", "link", "set", lab.rx, "up"])
        sender.wait(60)
        time.sleep(2)
        cap.send_signal(signal.SIGINT)
        _, err = cap.communicate(timeout=60)
        offered = lab.rx_packets() - before
    assert cpu_down < 0.5, f"{cpu_down:.2f} CPU-seconds in 2 s while the interface was down"
    result = json.loads(out.read_text())
    events = result["source"]["interface_events"]
    assert [e["event"] for e in events] == ["down", "up"], events
    assert 2.0 <= events[1]["down_seconds"] < 10
    assert sum(f"interface {lab.rx} is" in line for line in err.splitlines()) == 2, err
    counted = result["exact"]["total"]
    assert at_down < offered and counted == offered  # counting again after the up, nothing lost
