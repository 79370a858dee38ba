"""A Ctrl-C while the command starts ends it in one line (exit 130), never a run that goes on.

The checks compile numba kernels on the main thread on first use (a sketch's defaults come from
one); llvmlite calls back into Python through ctypes, and a KeyboardInterrupt raised inside such
a callback was printed as "Exception ignored" and dropped: the capture then ran to its end. The
first test drops an interrupt exactly there, through a ctypes callback, as llvmlite's does; the
second sends real SIGINTs to ``dptop capture`` compiling from an empty kernel cache."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from dptop.capture.synth import write_zipf_pcap

DROP_IN_A_CALLBACK = textwrap.dedent("""
    import ctypes, signal, sys
    import dptop.cli as cli

    def interrupted_in_a_callback():
        signal.raise_signal(signal.SIGINT)  # KeyboardInterrupt here: ctypes prints it and drops it

    checked = cli.config_from_args

    def config_from_args(args):  # the check that compiles kernels on first use
        ctypes.CFUNCTYPE(None)(interrupted_in_a_callback)()
        return checked(args)

    cli.config_from_args = config_from_args
    sys.exit(cli.main(sys.argv[1:]))
""")


def test_an_interrupt_dropped_in_a_ctypes_callback_during_the_checks_ends_the_command(tmp_path):
    pcap, out = tmp_path / "z.pcap", tmp_path / "out.json"
    write_zipf_pcap(pcap, 1.1, 100, 2_000, seed=1)
    proc = subprocess.run([sys.executable, "-c", DROP_IN_A_CALLBACK, "replay", str(pcap), "--algorithms", "exact",
                           "--json", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 130, (proc.returncode, proc.stderr)
    assert proc.stderr.strip() == "dptop: interrupted", proc.stderr  # no "Exception ignored", no traceback
    assert proc.stdout == "" and not out.exists()  # the replay never started


@pytest.mark.live
@pytest.mark.skipif(os.geteuid() != 0, reason="a live capture needs root (CAP_NET_RAW)")
@pytest.mark.parametrize("delay", [pytest.param(1.0, marks=pytest.mark.slow), 1.5,
                                   pytest.param(2.0, marks=pytest.mark.slow)])  # the default run samples one instant
def test_ctrl_c_while_kernels_compile_ends_the_capture_in_one_line(tmp_path, delay):
    """From an empty cache: LazyHH's defaults compile on the main thread during the checks, then
    the session starts. Whenever the signal lands, the capture ends at once (130) in one line:
    "interrupted" before the session starts, its SIGINT line once it has."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    proc = subprocess.Popen([sys.executable, "-m", "dptop", "capture", "--iface", "lo", "--algorithms", "lazyhh",
                             "--bpf", "udp and port 47998", "--quiet"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=60)  # a hang guard: a dropped interrupt captured forever
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"the capture ran on after SIGINT at {delay} s: {err[-600:]}")
    lines = [line for line in err.splitlines() if line.strip()]
    # 130, or ended by SIGINT itself (a shell shows 130 too): CPython 3.11 exits that way once a
    # KeyboardInterrupt passed through code run by exec() of a string, as numba's generated code is
    assert proc.returncode in (130, -signal.SIGINT), (delay, proc.returncode, err)
    assert "Traceback" not in err and "ignored" not in err, err
    assert lines[:1] in (["dptop: interrupted"], ["dptop: SIGINT: stopping, writing what was computed so far"]), err
