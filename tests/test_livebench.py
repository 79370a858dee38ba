"""The live bench's drop-account check (dptop.lab.livebench.account), its summary and its note:
pure functions over a run's JSON and stderr, checked against hand-made runs and broken variants;
and the harness waits for the capture's own socket before it offers traffic."""
import os
import subprocess
import sys
import time

import pytest

from dptop.capture.lab.netns import LASTING_SOCKET, VethLab
from dptop.lab import livebench


def capture_json(offered: int, seen: dict[str, int], kernel: int = 0, late: int = 0) -> dict:
    counted = min(seen.values())
    return {"algorithms": {n: {"packets": k} for n, k in seen.items()},
            "drops": {"total": offered - counted, "clock": late, "kernel": kernel,
                      "queue": offered - counted - kernel - late, "offered": offered,
                      "by_lane": {n: {"seen": k, "refused": 0, "missed": offered - k} for n, k in seen.items()}}}


def test_an_honest_account_holds_on_the_json_and_stderr():
    result = capture_json(1_000, {"dpss": 990, "exact": 1_000}, kernel=4)
    figures, wrong = livebench.account(result, "dptop: drops 10 of 1,000 offered (late 0, kernel 4, queues 6)\n", 1_000)
    assert wrong == []
    assert figures["counted"] == 990 and figures["dropped"] == 10 and figures["kernel"] == 4
    assert figures["dropped_per_lane"] == "dpss 10, exact 0"


def test_every_broken_view_is_caught():
    good = capture_json(1_000, {"dpss": 990, "exact": 1_000})
    line = "drops 10 of 1,000 offered"
    assert livebench.account(good, line, 1_001)[1]  # the kernel offered one more than the JSON says
    summed = capture_json(1_000, {"dpss": 990, "exact": 1_000})
    summed["drops"]["total"] = 20  # lanes summed instead of offered - counted
    assert livebench.account(summed, line, 1_000)[1]
    lane = capture_json(1_000, {"dpss": 990, "exact": 1_000})
    lane["drops"]["by_lane"]["exact"]["missed"] = 3
    assert livebench.account(lane, line, 1_000)[1]
    assert livebench.account(good, "drops 9 of 1,000 offered", 1_000)[1]  # the status disagrees with the JSON
    assert livebench.account(good, "", 1_000)[1]  # packets lost, and the status does not say so
    assert livebench.account(capture_json(1_000, {"exact": 1_000}), "", 1_000)[1] == []  # none lost, no line


def run(contender: str, rate, offered: int, counted: int, ok: bool = True) -> dict:
    return {"contender": contender, "rate": rate, "offered": offered, "offered_per_s": offered, "counted": counted,
            "dropped": offered - counted, "dropped_per_lane": "", "kernel": 0, "late": 0, "queue": offered - counted,
            "account_ok": ok, "account_differs": "" if ok else "total 1 in the JSON", "cpu_us_per_packet": 1.0,
            "sender_cpu_us_per_packet": 0.7, "load": 0.5}


def test_summary_and_verdict():
    runs = [run(name, "max", 900_000, 900_000) for _ in range(3) for name in livebench.CONTENDERS]
    rows = livebench.summary(runs)
    assert [r["contender"] for r in rows] == list(livebench.CONTENDERS) and all(r["clean"] == "3/3" for r in rows)
    assert "PASS" in livebench.verdict(runs) and "9 of 9 dptop runs" in livebench.verdict(runs)
    runs[4] = run("dptop trio + exact", "max", 900_000, 899_999, ok=False)  # one packet short, account broken
    assert livebench.summary(runs)[1]["clean"] == "2/3" and livebench.summary(runs)[1]["account"] == "2/3"
    note = livebench.verdict(runs)
    assert "FAIL" in note and "DIFFERS" in note
    slow = [run(name, "max", 700_000, 700_000) for _ in range(3) for name in livebench.CONTENDERS]
    assert "FAIL" in livebench.verdict(slow)  # every packet kept, but below the acceptance's rate


CHECK_THEN_CAPTURE = """
import mmap, socket, struct, sys, time
check = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)  # the command's check: opened, closed again
time.sleep(0.3)
check.close()
time.sleep(2.0)  # kernels compiling
capture = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
time.sleep(1.5)  # its ring being set (a large one, a busy machine)
capture.setsockopt(263, 10, 2)  # PACKET_VERSION: TPACKET_V3
capture.setsockopt(263, 5, struct.pack("7I", 1 << 16, 4, 2048, 128, 100, 0, 0))  # PACKET_RX_RING
ring = mmap.mmap(capture.fileno(), 4 << 16)
print(time.monotonic(), flush=True)
time.sleep(60)
"""


@pytest.mark.live
@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_the_traffic_waits_for_the_capture_socket_not_the_check_socket():
    """``dptop capture`` opens a socket while it checks its options and closes it, builds its
    algorithms, then opens the one it reads and maps its ring: the bench offered its frames 0.5 s
    after the first one, to a capture still starting (lost frames, or a SIGINT before it ever
    read), and once the socket was a second old, before a ring that took longer was set (frames
    the capture never saw: 84k-162k of 3M at the top rate with a 612 MiB ring, load 8-10)."""
    with VethLab() as lab:
        before = lab.packet_socket_inodes()
        proc = subprocess.Popen(lab.command(lab.rx_ns, [sys.executable, "-c", CHECK_THEN_CAPTURE]),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            lab.wait_capturing(proc, before, timeout=60)
            ready = time.monotonic()
            opened = float(proc.stdout.readline())
            assert ready >= opened + LASTING_SOCKET
        finally:
            proc.kill()
            proc.communicate()
