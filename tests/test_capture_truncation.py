"""A capture file cut while it is replayed: one warning line, exit 1, the JSON written with
``partial: true`` (never a SIGBUS); a file read in part never exits 0 as complete; ``dptop synth``
writes any length in bounded memory and checks the room it needs first."""
import json
import os
import subprocess
import sys
import threading
import time

import pytest

from dptop.capture import synth
from dptop.capture.filebytes import CHUNK
from dptop.capture.pcap import open_capture


def test_a_file_cut_under_the_reader_is_a_warning_and_incomplete(tmp_path):
    path = tmp_path / "big.pcap"
    synth.write_zipf_pcap(path, 1.1, 1000, 3 * CHUNK // 50, 1)
    with open_capture(path) as reader:
        batches = reader.batches(1000)
        first = next(batches)
        os.truncate(path, CHUNK // 2)  # past the first chunk, already read
        rest = sum(len(b) for b in batches)
        stats = reader.stats
    assert len(first) + rest < 3 * CHUNK // 50
    assert stats.incomplete and any("shrank" in w for w in stats.warnings)


def test_a_file_shorter_than_counted_is_a_partial_replay(tmp_path):
    """Cut before the replay opened it (after its records were counted): incomplete, one warning."""
    from dptop.capture.replay import FileReplay

    path = tmp_path / "cut.pcap"
    synth.write_zipf_pcap(path, 1.1, 1000, 10_000, 1)
    fed = []
    os.truncate(path, 24 + 4000 * 50)
    replay = FileReplay(path, lambda b: fed.append(len(b)) or True, records=10_000)
    replay.start()
    replay.join()
    stats = replay.stats()
    assert sum(fed) == 4000 and stats.incomplete
    assert [w for w in stats.warnings if "4000 of the 10000 records" in w]


def reading_position(pid: int, path) -> int | None:
    """Where process ``pid`` reads ``path`` (its open descriptor's offset), or None."""
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path):
                return int(open(f"/proc/{pid}/fdinfo/{fd}").read().split()[1])
    except OSError:
        return None
    return None


def test_truncating_a_capture_during_a_paced_replay(tmp_path):
    """``dptop replay FILE --speed 4`` and the file cut to 1 MiB while the paced replay reads it:
    exit 1, one warning line naming the shrink, no traceback, the JSON with ``partial: true``."""
    path = tmp_path / "long.pcap"
    synth.write_zipf_pcap(path, 1.1, 1000, 500_000, 1, rate_pps=8_000)  # about 60 s of packets, 25 MB
    size = path.stat().st_size
    out = tmp_path / "out.json"
    proc = subprocess.Popen([sys.executable, "-m", "dptop", "replay", str(path), "--speed", "4",
                             "--algorithms", "dpss,exact", "--json", str(out), "--progress", "always"],  # a pipe: asked
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = []
    reader = threading.Thread(target=lambda: err.extend(iter(lambda: proc.stderr.read(1), "")), daemon=True)
    reader.start()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:  # the paced replay (its progress), not the check
        pos = reading_position(proc.pid, path)
        if "records read (" in "".join(err) and pos is not None and CHUNK <= pos < size - CHUNK:
            break
        time.sleep(0.2)
    os.truncate(path, 1 << 20)
    proc.wait(timeout=300)
    reader.join(10)
    err = "".join(err)
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    warnings = [ln for ln in err.splitlines() if ln.startswith("dptop: warning")]
    assert len(warnings) == 1 and "shrank" in warnings[0], err
    result = json.loads(out.read_text())
    assert result["partial"] is True
    assert 0 < result["source"]["packets"] < 500_000


def test_synth_checks_the_room_it_needs(tmp_path, monkeypatch, capsys):
    """2^30 packets take 50 GiB: refused in one line (a usage error) where there is less room."""
    from collections import namedtuple

    from dptop.cli import main

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(synth.shutil, "disk_usage", lambda _: usage(1 << 40, 0, 10 << 30))
    assert main(["synth", "--length", str(1 << 30), "--pcap", str(tmp_path / "huge.pcap")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "50.0 GiB" in err and "10.0 GiB free" in err, err
    assert not (tmp_path / "huge.pcap").exists()


def test_synth_writes_in_blocks_the_same_file(tmp_path, monkeypatch):
    whole, blocks = tmp_path / "whole.pcap", tmp_path / "blocks.pcap"
    synth.write_zipf_pcap(whole, 1.2, 500, 70_000, 4)
    monkeypatch.setattr(synth, "BLOCK", 1 << 12)
    synth.write_zipf_pcap(blocks, 1.2, 500, 70_000, 4)
    assert whole.read_bytes() == blocks.read_bytes()
