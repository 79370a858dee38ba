"""Every check that can fail before packets flow runs before any output: one line on stderr, its
exit code, nothing on stdout (an unknown interface, a BPF filter that does not compile, a missing
permission, an unknown option)."""
import os
from ctypes.util import find_library

import pytest

from dptop.cli import main

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="opening a capture socket needs root (CAP_NET_RAW)")
needs_libpcap = pytest.mark.skipif(find_library("pcap") is None,
                                   reason="compiling a BPF filter needs libpcap (apt-get install libpcap0.8)")


def one_line(capsys) -> str:
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("dptop: error: ")
    return lines[0]


def test_unknown_interface_is_one_line_exit_2(capsys):
    assert main(["capture", "--iface", "nosuch0", "--duration", "1"]) == 2
    assert "no network interface 'nosuch0'" in one_line(capsys)


@needs_root
@needs_libpcap
@pytest.mark.parametrize("command", ["capture", "top"])
def test_bad_bpf_filter_is_one_line_exit_2(capsys, command):
    assert main([command, "--iface", "lo", "--bpf", "udp portt 5", "--duration", "1"]) == 2
    line = one_line(capsys)
    assert line.startswith("dptop: error: --bpf:") and "udp portt 5" in line


@needs_root
def test_missing_permission_is_one_line_exit_1(capsys, monkeypatch):
    from scapy.config import conf

    def refuse(**kwargs):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(conf, "L2listen", refuse)
    assert main(["capture", "--iface", "lo", "--duration", "1"]) == 1
    assert "setcap" in one_line(capsys)


@pytest.mark.parametrize("command", ["replay x.pcap", "capture --iface lo", "top x.pcap", "list"])
def test_misspelled_option_points_at_its_subcommand_help(capsys, command):
    argv = command.split()
    assert main([*argv, "--epsilonn", "1"]) == 2
    line = one_line(capsys)
    assert line.endswith(f"(see dptop {argv[0]} -h)") and "--epsilonn" in line
