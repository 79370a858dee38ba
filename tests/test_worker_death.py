"""A worker thread that dies stops the run: one line, the results so far written with
``partial: true``, exit 1 (never a run that hangs, never a feed that waits forever)."""
import errno
import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from dptop.engine.core.keys import KEY_DTYPE, KeyBatch
from dptop.headless import run
from dptop.monitor import truth as truth_module
from dptop.monitor.config import RunConfig, SourceSpec
from dptop.monitor.truth import Truth, WorkerDied

DNS = Path(__file__).parent / "data" / "amp.dns.RRSIG.fragmented.pcap"


class DescriptorsOut(truth_module.ExactCounter):
    """An exact counter whose kernels fail to load after ``ok`` additions (EMFILE)."""

    ok = 1
    slow = 0.0

    def add(self, *args):
        DescriptorsOut.ok -= 1
        if DescriptorsOut.ok < 0:
            time.sleep(DescriptorsOut.slow)  # the source may end first: the run still says partial
            raise OSError(errno.EMFILE, "Too many open files")
        return super().add(*args)


def test_a_feed_to_a_dead_truth_raises_instead_of_waiting(monkeypatch):
    monkeypatch.setattr(truth_module, "ExactCounter", DescriptorsOut)
    DescriptorsOut.ok = 1  # the warm-up load passes, the first batch fails
    truth = Truth(1024, queue_size=1).start()
    batch = KeyBatch(np.zeros((4, 2), KEY_DTYPE))
    truth.count_all()
    done = threading.Event()

    def producer():
        try:
            for _ in range(100):
                truth.feed(batch)
        except WorkerDied:
            done.set()

    worker = threading.Thread(target=producer, daemon=True)
    worker.start()
    worker.join(20)
    truth.stop()
    assert done.is_set(), "feed kept waiting for a dead thread"
    assert truth.died and "Too many open files" in truth.error


def test_a_dead_truth_thread_stops_the_run_with_partial_results(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(truth_module, "ExactCounter", DescriptorsOut)
    monkeypatch.setattr(DescriptorsOut, "slow", 0.5)  # the whole file is read before the thread dies
    DescriptorsOut.ok = 1
    out = tmp_path / "out.json"
    config = RunConfig(("dpss", "countmin"))
    rc = run("replay", SourceSpec("file", path=str(DNS)), config, str(out), 10)
    err = capsys.readouterr().err
    assert rc == 1
    lines = [ln for ln in err.splitlines() if ln.startswith("dptop: error")]
    assert len(lines) == 1 and "ground-truth thread stopped" in lines[0] and "Too many open files" in lines[0]
    assert "Traceback" not in err
    result = json.loads(out.read_text())
    assert result["partial"] is True and "ground-truth" not in json.dumps(result["algorithms"])
    assert set(result["algorithms"]) == {"dpss", "countmin"}
    assert result["algorithms"]["dpss"]["releases"], "the lanes still release what they read"


def test_the_memory_watch_says_when_a_run_outgrows_its_limit():
    from dptop.monitor.footprints import MemoryLimit
    from dptop.monitor.memory import MemoryWatch

    watch = MemoryWatch(MemoryLimit(8 << 20, "--memory-limit"))
    assert watch.exceeded() is None
    block = np.ones(64 << 20, np.uint8)  # touched: resident
    said = watch.exceeded()
    assert said is not None and "--memory-limit" in said and "\n" not in said
    del block
    assert MemoryWatch(None).exceeded() is None


def test_a_run_past_its_memory_limit_stops_with_partial_results(monkeypatch, tmp_path, capsys):
    """The limit holds for the whole run: once past it, the run stops, one line, partial JSON, exit 1."""
    from dptop import headless

    monkeypatch.setattr(headless.MemoryWatch, "exceeded", lambda self: "the run's memory grew past the limit")
    out = tmp_path / "out.json"
    rc = run("replay", SourceSpec("file", path=str(DNS), speed=0.5), RunConfig(("dpss", "exact")), str(out), 10)
    err = capsys.readouterr().err
    assert rc == 1
    assert [ln for ln in err.splitlines() if ln.startswith("dptop: error")] == [
        "dptop: error: the run's memory grew past the limit; writing what was computed so far"]
    result = json.loads(out.read_text())
    assert result["partial"] is True and result["exact"]["total"] < 100_000
