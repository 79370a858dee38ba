"""Outputs are written whole or not at all (dptop.output): a previous JSON target survives every
failed run unchanged, a closed pipe or a full disk is one line and exit 1, nothing is left behind."""
from __future__ import annotations

import errno
import json
import os
import subprocess
import sys

import pytest

from dptop.capture.synth import write_zipf_pcap
from dptop.cli import main
from dptop.output import JsonOut, OutputError

OLD = '{"previous": "run"}\n'


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    pcap = tmp_path_factory.mktemp("out") / "z.pcap"
    write_zipf_pcap(pcap, 1.1, 1 << 14, 50_000, seed=3)
    return pcap


def _leftovers(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


@pytest.mark.parametrize("argv, code", [
    (["replay", "{missing}", "--json", "{out}"], 1),  # an input that does not exist
    (["replay", "{bad}", "--json", "{out}"], 1),  # an input that is not a capture
    (["replay", "{pcap}", "--speed", "0", "--json", "{out}"], 2),
    (["replay", "{pcap}", "--epoch-seconds", "1e-6", "--time-range", "1700000000:1700000100", "--json", "{out}"],
     2),  # a grid of too many epochs
    (["replay", "{pcap}", "--algorithms", "exact", "--param", "top=-1", "--json", "{out}"], 2),
    (["replay", "{pcap}", "{bad}", "--algorithms", "dpss", "--json", "{out}"], 2),  # not mergeable
])
def test_a_previous_json_survives_a_failed_run_unchanged(tmp_path, capture, capsys, argv, code):
    out, bad = tmp_path / "o.json", tmp_path / "bad.pcap"
    out.write_text(OLD)
    bad.write_text("not a capture")
    names = {"missing": tmp_path / "nope.pcap", "bad": bad, "pcap": capture, "out": out}
    assert main([a.format(**names) for a in argv]) == code
    err = capsys.readouterr().err
    assert err.startswith("dptop: error:") and err.count("\n") == 1 and "Traceback" not in err, err
    assert out.read_text() == OLD and _leftovers(tmp_path) == []


def test_a_completed_run_replaces_the_json_whole(tmp_path, capture, capsys):
    out = tmp_path / "o.json"
    out.write_text(OLD)
    assert main(["replay", str(capture), "--algorithms", "exact", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["exact"]["total"] == 50_000 and _leftovers(tmp_path) == []


def test_a_full_disk_leaves_the_previous_file_and_no_temporary(tmp_path, monkeypatch):
    out = tmp_path / "o.json"
    out.write_text(OLD)
    writer = JsonOut(str(out))

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OutputError, match="No space left on device; the previous file is unchanged"):
        writer.write({"big": "x" * 100_000})
    assert out.read_text() == OLD and _leftovers(tmp_path) == []


def test_a_closed_pipe_is_one_line_and_exit_1(capture):
    """``--json - | head -c 10``: the reader goes away after 10 bytes of a large document."""
    proc = subprocess.Popen([sys.executable, "-m", "dptop", "replay", str(capture), "--algorithms", "exact",
                             "--top", "0", "--json", "-"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert len(proc.stdout.read(10)) == 10
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 1
    assert err.splitlines()[-1] == "dptop: error: cannot write the JSON to stdout: the reader closed the pipe", err
    assert "Traceback" not in err and "Exception ignored" not in err
