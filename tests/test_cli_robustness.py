"""Results survive: SIGINT/SIGTERM/SIGHUP during a replay flush what was computed into a valid partial
JSON (exit 130/143); a bad --json path fails before any work; a corrupt far-future stamp does not
stall a paced replay (--max-gap)."""
import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from dptop.capture.synth import write_pcap, write_zipf_pcap

T0 = 1_700_000_000 * 10**9


def _dptop(*argv, **kw):
    return subprocess.Popen([sys.executable, "-m", "dptop", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kw)


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_leaves_a_valid_partial_json_with_the_exact_counts_so_far(tmp_path, sig, code):
    pcap, out = tmp_path / "z.pcap", tmp_path / "out.json"
    write_zipf_pcap(pcap, 1.1, 1000, 200_000, seed=1, rate_pps=10_000)  # 20 s of packet time
    proc = _dptop("replay", str(pcap), "--algorithms", "dpss,exact", "--speed", "1", "--json", str(out),
                  "--progress", "always")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and "records" not in proc.stderr.readline():
        pass  # the first progress line: the replay is under way
    time.sleep(0.3)  # 3,000 packets more at 10,000/s: the signal lands mid-stream
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr and signal.Signals(sig).name in stderr
    result = json.loads(out.read_text())
    assert result["partial"] is True
    seen = result["source"]["ip_packets"]
    assert 0 < seen < 200_000
    assert result["exact"]["total"] == seen == result["algorithms"]["exact"]["packets"]
    assert len(result["algorithms"]["dpss"]["releases"]) == 1  # the flushed whole-stream release
    assert "partial: interrupted" in stdout


def test_one_request_delivered_twice_still_flushes_everything(tmp_path):
    """``timeout`` signals the command and then its process group: the same SIGINT arrives twice
    within milliseconds. It is one request: the flush completes and the JSON holds every packet read."""
    pcap, out = tmp_path / "z.pcap", tmp_path / "out.json"
    write_zipf_pcap(pcap, 1.1, 1 << 16, 1 << 20, seed=4, rate_pps=1 << 18)  # 4 s of packet time
    # paced (--speed 1): the signal lands mid-stream however fast the machine; at 262,144 packets/s
    # the slow lanes have batches queued when it comes (PunctualSketch, the slow baseline, falls
    # behind and holds the reader back)
    proc = _dptop("replay", str(pcap), "--algorithms", "lazyhh,dpsw,punctual-cms,exact", "--speed", "1",
                  "--json", str(out), "--progress", "always")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and "records" not in proc.stderr.readline():
        pass
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.005)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr
    result = json.loads(out.read_text())
    seen = result["source"]["ip_packets"]
    assert result["partial"] and 0 < seen < 1 << 20 and result["exact"]["total"] == seen
    assert {name: a["packets"] for name, a in result["algorithms"].items()} == \
        dict.fromkeys(("lazyhh", "dpsw", "punctual-cms", "exact"), seen)


def test_an_unwritable_json_path_fails_before_the_replay(tmp_path):
    pcap = tmp_path / "z.pcap"
    write_zipf_pcap(pcap, 1.1, 1000, 1000, seed=1, rate_pps=1)  # 1000 s of packets: at 0.001x, 11 days
    for target in ("/dev/full", str(tmp_path / "missing" / "out.json")):
        proc = _dptop("replay", str(pcap), "--algorithms", "exact", "--speed", "0.001", "--json", target)
        _, stderr = proc.communicate(timeout=120)  # ends only if it fails before replaying
        assert proc.returncode == 1 and stderr.startswith("dptop: error:"), stderr
        assert "Traceback" not in stderr


def test_a_corrupt_far_future_stamp_does_not_stall_a_paced_replay(tmp_path):
    pcap = tmp_path / "gap.pcap"
    ts = T0 + np.arange(100, dtype=np.int64) * 10**6
    ts[50] = T0 + 10**18  # about 31 years ahead
    write_pcap(pcap, np.full(100, 0x0A00_0001, np.uint32), ts)
    proc = _dptop("replay", str(pcap), "--algorithms", "exact", "--speed", "1", "--max-gap", "1", "--json", "-")
    stdout, stderr = proc.communicate(timeout=120)  # a stall would wait 31 years
    assert proc.returncode == 0, stderr
    result = json.loads(stdout)
    assert result["exact"]["total"] == 100 and "--max-gap" in stderr


@pytest.mark.skipif(not os.path.exists("/usr/bin/timeout"), reason="needs coreutils timeout")
def test_timeout_sigint_as_in_the_readme(tmp_path):
    pcap, out = tmp_path / "z.pcap", tmp_path / "out.json"
    write_zipf_pcap(pcap, 1.1, 1000, 200_000, seed=2, rate_pps=5_000)  # 40 s of packet time
    proc = subprocess.Popen(["timeout", "--preserve-status", "-s", "INT", "600", sys.executable, "-m", "dptop", "replay",
                             str(pcap), "--algorithms", "exact", "--speed", "1", "--json", str(out), "--progress", "always"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not re.match(r"dptop: [1-9][\d.]*\w?/\S+ records read", proc.stderr.readline()):
        pass  # a progress line with records read: the replay is under way
    # what timeout does when its time is up, without waiting for it: the signal to the replay, then
    # to its process group (the replay gets it twice)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert out.read_text().strip(), stderr  # the result, not only the byte written at the start
    result = json.loads(out.read_text())
    assert result["partial"] and result["exact"]["total"] == result["source"]["ip_packets"] > 0


def loading(pid: int, library: str, timeout: float = 30.0) -> None:
    """Wait until process ``pid`` has mapped a shared library whose name holds ``library`` (or ended)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/maps") as fh:
                if library in fh.read():
                    return
        except OSError:  # ended
            return
        time.sleep(0.005)


def test_ctrl_c_while_the_command_loads_ends_in_one_line():
    """The command line loads numba and numpy first (about half a second): a Ctrl-C then printed a
    KeyboardInterrupt traceback. Signals land at several instants of the load, counted from numpy's
    arrival in the process (before our imports the interpreter itself is starting, outside any code
    of ours: a fixed 0.15 s from the launch hit its site import on a loaded machine)."""
    command = os.path.join(os.path.dirname(sys.executable), "dptop")
    for delay in (0.0, 0.1, 0.2, 0.35):
        proc = subprocess.Popen([command, "list"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        loading(proc.pid, "_multiarray_umath")
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert "Traceback" not in err and proc.returncode in (0, 130), (delay, proc.returncode, err)
        assert proc.returncode == 0 or err.strip() == "dptop: interrupted", err
