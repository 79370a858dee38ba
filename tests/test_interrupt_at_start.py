"""A Ctrl-C while the command starts ends it in one line (exit 130), never a run that goes on.

The checks compile numba kernels on the main thread on first use (a sketch's defaults come from
one); llvmlite calls back into Python through ctypes, and a KeyboardInterrupt raised inside such
a callback was printed as "Exception ignored" and dropped: the capture then ran to its end. The
first test drops an interrupt exactly there, through a ctypes callback, as llvmlite's does; the
second sends real SIGINTs to ``dptop capture`` compiling from an empty kernel cache. The others
stop the start with SIGINT inherited ignored (as a shell starts a background command): a signal
raised at a named point (while dptop.cli loads, during the checks), then real signals."""
import json
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


SIGNAL_AT_A_POINT = textwrap.dedent("""
    import signal, sys
    from importlib.abc import MetaPathFinder

    point, signum, nohup = sys.argv[1], signal.Signals[sys.argv[2]], sys.argv[3] == "nohup"
    del sys.argv[1:4]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a shell starts a command it runs in the background
    if nohup:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    class SignalWhileTheCommandLineLoads(MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "dptop.cli":
                signal.raise_signal(signum)
            return None

    class SignalWhileNumpysCoreInitialises(MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "datetime" and "numpy" in sys.modules:  # imported by numpy's C core as it initialises
                signal.raise_signal(signum)
            return None

    if point == "import":
        sys.meta_path.insert(0, SignalWhileTheCommandLineLoads())
    elif point == "numpy":  # raised in an extension module's initialisation: numpy's ImportError traceback
        sys.meta_path.insert(0, SignalWhileNumpysCoreInitialises())
    elif point == "run":  # a command that does not stop on signals itself (as the window): its run
        import dptop.cli as cli

        listed = cli.cmd_list

        def cmd_list(args):
            signal.raise_signal(signum)
            return listed(args)

        cli.cmd_list = cmd_list
    elif point == "session":  # at the first progress update: the session's handlers are in place
        import dptop.headless as headless

        update = headless.Progress.update

        def first_update(progress):
            if not getattr(headless, "signalled", False):
                headless.signalled = True
                signal.raise_signal(signum)
            update(progress)

        headless.Progress.update = first_update
    else:  # during the checks, before the session installs the command's own handlers
        import dptop.cli as cli

        checked = cli.config_from_args

        def config_from_args(args):
            signal.raise_signal(signum)
            return checked(args)

        cli.config_from_args = config_from_args
    from dptop.entry import main

    sys.exit(main())
""")


@pytest.mark.parametrize("point, sig", [("import", signal.SIGINT), ("numpy", signal.SIGINT), ("checks", signal.SIGINT),
                                        ("import", signal.SIGHUP), ("checks", signal.SIGTERM)], ids=lambda v: getattr(v, "name", str(v)))
def test_a_stop_signal_before_the_session_starts_ends_the_command_in_one_line(tmp_path, point, sig):
    """The signal raised at a named point of the start, SIGINT inherited ignored (``dptop ... &`` in
    a script): a SIGINT was discarded and the replay ran to its end (exit 0); a SIGTERM or a SIGHUP
    killed the process without a line. Now: one line, 128 + the signal, no output touched."""
    pcap, out = tmp_path / "z.pcap", tmp_path / "out.json"
    write_zipf_pcap(pcap, 1.1, 100, 2_000, seed=1)
    proc = subprocess.run([sys.executable, "-c", SIGNAL_AT_A_POINT, point, sig.name, "-", "replay", str(pcap),
                           "--algorithms", "exact", "--json", str(out)], capture_output=True, text=True, timeout=120)
    interrupted = "dptop: interrupted" if sig == signal.SIGINT else f"dptop: {sig.name}: interrupted"
    assert (proc.returncode, proc.stderr.strip()) == (128 + sig, interrupted), proc.stderr
    assert proc.stdout == "" and not out.exists()


@pytest.mark.parametrize("point", ["checks", "session"])
def test_a_sighup_ignored_as_nohup_does_stays_ignored(tmp_path, point):
    """``nohup dptop ...``: the command outlives its terminal, before its session starts and while
    it runs (it stopped once the session's handlers were in place, exit 129)."""
    pcap, out = tmp_path / "z.pcap", tmp_path / "out.json"
    write_zipf_pcap(pcap, 1.1, 100, 2_000, seed=1)
    proc = subprocess.run([sys.executable, "-c", SIGNAL_AT_A_POINT, point, "SIGHUP", "nohup", "replay", str(pcap),
                           "--algorithms", "exact", "--json", str(out), "--progress", "always"],
                          capture_output=True, text=True, timeout=120)
    assert (proc.returncode, "SIGHUP" in proc.stderr) == (0, False), proc.stderr
    assert json.loads(out.read_text())["partial"] is False


def test_a_command_that_does_not_stop_on_signals_itself_runs_with_the_process_handling_them():
    """The start's handlers end with the checks of ``list`` (as of the window, where a SIGTERM
    raised in a Qt paint printed a traceback and the window ran on): SIGTERM ends it as by default."""
    proc = subprocess.run([sys.executable, "-c", SIGNAL_AT_A_POINT, "run", "SIGTERM", "-", "list"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGTERM and "Traceback" not in proc.stderr, (proc.returncode, proc.stderr)


IGNORING_SIGINT = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); " \
                  "os.execv(sys.executable, [sys.executable, '-m', 'dptop', *sys.argv[1:]])"


@pytest.mark.parametrize("delay, sig", [(0.5, signal.SIGINT), *(pytest.param(d, s, marks=pytest.mark.slow)
                                        for d in (1.0, 1.5, 3.0) for s in (signal.SIGINT, signal.SIGTERM,
                                                                                 signal.SIGHUP))], ids=lambda v: getattr(v, "name", str(v)))
def test_a_real_stop_signal_at_any_instant_ends_a_background_replay(tmp_path, delay, sig):
    """``dptop replay`` started with SIGINT ignored, as a shell starts a background command, and a
    real signal at ``delay`` s: before the session's handlers it was discarded (SIGINT) and the
    paced replay ran its 30 s. At any instant: 128 + the signal, one line, the JSON whole or absent."""
    pcap, out = tmp_path / "z.pcap", tmp_path / "out.json"
    write_zipf_pcap(pcap, 1.1, 100, 3_000, seed=1, rate_pps=100)  # 30 s of packet time, replayed at speed 1
    proc = subprocess.Popen([sys.executable, "-c", IGNORING_SIGINT, "replay", str(pcap), "--algorithms", "exact",
                             "--speed", "1", "--json", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    time.sleep(delay)
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=20)  # well before the replay's own end
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"the replay ran on after {sig.name} at {delay} s: {err[-600:]}")
    lines = [line for line in err.splitlines() if line.strip()]
    assert proc.returncode == 128 + sig, (delay, proc.returncode, err)
    assert "Traceback" not in err and "ignored" not in err, err
    started = f"dptop: {sig.name}: stopping, writing what was computed so far"
    interrupted = "dptop: interrupted" if sig == signal.SIGINT else f"dptop: {sig.name}: interrupted"
    assert lines[:1] in ([started], [interrupted]), err
    if lines[:1] == [started]:
        assert json.loads(out.read_text())["partial"] is True
    else:
        assert not out.exists()
