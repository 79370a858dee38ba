"""What ``dptop replay`` loads and how its process ends: the lab, the window, the terminal view, the
cluster, scapy and SciPy stay unloaded by a replay; a monitor command's parser gives the same
parsing and help as the whole command line; the collector is off while the process starts and on
(with start-up frozen) once the command's checks are done; a replay ends without the interpreter's
teardown, with its status and its output whole, while other commands keep theirs."""
import argparse
import json
import struct
import subprocess
import sys

import pytest

from dptop.capture.synth import write_zipf_pcap
from dptop.cli import MONITOR_COMMANDS, build_parser

NOT_FOR_A_REPLAY = ("dptop.lab", "dptop.engine.lab", "dptop.capture.lab", "dptop.resources.lab", "dptop.gui",
                    "dptop.top", "dptop.cluster", "PySide6", "pyqtgraph", "textual", "scapy", "dask", "distributed",
                    "scipy.linalg", "scipy.stats")


@pytest.fixture(scope="module")
def pcap(tmp_path_factory):
    path = tmp_path_factory.mktemp("startup") / "zipf.pcap"
    write_zipf_pcap(path, 1.1, 100, 2000, seed=3, rate_pps=1000)
    return path


def _python(code: str, *argv) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *map(str, argv)], capture_output=True, text=True, timeout=600)


def test_a_replay_loads_neither_the_lab_nor_a_view_nor_scipy(pcap, tmp_path):
    """The modules a whole ``dptop replay`` (default algorithms, JSON written) has loaded when it
    returns; the same check finds the lab once ``dptop bench -h`` has built its parser."""
    code = ("import sys\nfrom dptop.cli import main\n"
            "status = main(sys.argv[1:])\n"
            f"print(sorted(m for m in sys.modules if m.startswith({NOT_FOR_A_REPLAY!r})))\n"
            "sys.exit(status)\n")
    run = _python(code, "replay", pcap, "--json", tmp_path / "out.json")
    assert run.returncode == 0, run.stderr
    loaded = run.stdout.strip().splitlines()[-1]
    assert loaded == "[]", loaded
    assert json.loads((tmp_path / "out.json").read_text())["source"]["packets"] == 2000
    helped = _python(code, "bench", "-h")
    assert helped.returncode == 0 and "dptop.lab.commands" in helped.stdout.splitlines()[-1]


def _subcommands(parser) -> dict:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def test_a_monitor_command_parses_and_helps_as_the_whole_command_line():
    """``build_parser(command)`` leaves out only the lab's and the cluster's commands: each monitor
    command's parser is the whole command line's, help and defaults included."""
    whole = _subcommands(build_parser())
    assert set(MONITOR_COMMANDS) < set(whole)
    assert {"bench", "audit", "agent", "collect", "cluster-bench"} <= set(whole) - set(MONITOR_COMMANDS)
    for command in MONITOR_COMMANDS:
        alone = _subcommands(build_parser(command))
        assert set(alone) == set(MONITOR_COMMANDS), command
        assert alone[command].format_help() == whole[command].format_help(), command
    argv = ["replay", "a.pcap", "--k", "7", "--seed", "3", "--algorithms", "dpss,exact"]
    assert vars(build_parser("replay").parse_args(argv)) == vars(build_parser().parse_args(argv))


def test_the_collector_is_off_while_the_process_starts_and_on_after_the_checks():
    code = ("import gc\nfrom dptop import lifetime\n"
            "lifetime.started()\nassert gc.isenabled() and gc.get_freeze_count() == 0\n"  # begin never ran
            "lifetime.begin()\nassert not gc.isenabled()\n"
            "import numpy\n"
            "lifetime.started()\nassert gc.isenabled() and gc.get_freeze_count() > 1000, gc.get_freeze_count()\n"
            "print('ok')\n")
    run = _python(code)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr


TEARDOWN_PROBE = """
import atexit
import os
import sys

# registered before dptop's own end handler, so run after it: only if the interpreter's end goes on
atexit.register(os.write, 2, b"torn down\\n")
sys.argv = ["dptop", *sys.argv[1:]]
from dptop.entry import main
sys.exit(main())
"""


def test_a_replay_ends_without_teardown_and_other_commands_keep_it(pcap, tmp_path):
    out = tmp_path / "out.json"
    run = _python(TEARDOWN_PROBE, "replay", pcap, "--json", out)
    assert run.returncode == 0, run.stderr
    assert "torn down" not in run.stderr
    assert "privacy budget" in run.stdout  # the table, flushed whole before the end
    assert json.loads(out.read_text())["source"]["packets"] == 2000
    listed = _python(TEARDOWN_PROBE, "list")
    assert listed.returncode == 0 and "torn down" in listed.stderr and "lazyhh" in listed.stdout
    refused = _python(TEARDOWN_PROBE, "replay", pcap, "--k", "0")  # a usage error: its status, its line
    assert refused.returncode == 2 and refused.stderr.startswith("dptop: error: argument --k")


def test_a_replay_of_a_corrupt_capture_ends_without_teardown_with_its_status(pcap, tmp_path):
    """A record with an impossible length ends the read: one warning, the partial JSON, exit 1."""
    data, at = bytearray(pcap.read_bytes()), 24
    for _ in range(1000):  # the 1001st record's length field says 2^31 bytes
        at += 16 + struct.unpack_from("<I", data, at + 8)[0]
    struct.pack_into("<I", data, at + 8, 1 << 31)
    corrupt = tmp_path / "corrupt.pcap"
    corrupt.write_bytes(bytes(data))
    out = tmp_path / "out.json"
    run = _python(TEARDOWN_PROBE, "replay", corrupt, "--json", out)
    assert run.returncode == 1, run.stderr
    assert "torn down" not in run.stderr and "impossible length" in run.stderr and "Traceback" not in run.stderr
    assert json.loads(out.read_text())["source"]["packets"] == 1000
