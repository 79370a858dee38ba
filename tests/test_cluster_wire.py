"""The summaries' wire format (dptop.cluster.wire): every summary type survives a round trip bit
for bit, and anything else an agent sends — a crafted pickle first — is rejected with one line and
never executed, by the live collector (in-process and over a loopback Dask scheduler) and by an
archive replay."""
from __future__ import annotations

import os
import pickle
import time

import msgpack
import numpy as np
import pytest

from dptop.cluster import archive
from dptop.cluster.collector import Collector
from dptop.cluster.plan import Plan, new_master
from dptop.cluster.point import CapturePoint
from dptop.cluster.wire import FORMAT, VERSION, WireError, decode, encode
from dptop.engine.core.keys import KeyBatch
from dptop.engine.core.settings import Settings

NAMES = ("exact", "spacesaving", "misragries", "countmin", "dpmg", "eehh-cms")


class Marker:
    """Unpickling it creates ``path``: the proof that the collector ran an agent's code."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (os.mkdir, (self.path,))


@pytest.fixture(scope="module")
def shipped():
    """(epoch 0's summaries, the whole-stream summaries) of a capture point fed 300 packets."""
    settings = Settings(k=4, epoch_packets=200)
    point = CapturePoint(Plan(NAMES, settings, new_master(settings)))
    keys = np.random.default_rng(5).zipf(1.3, (300, 2)).clip(0, 50).astype(np.uint64)
    point.feed(KeyBatch(keys, np.arange(300, dtype=np.int64)))
    return point.take_epoch(0), point.take_whole()


def test_every_summary_type_round_trips_exactly(shipped):
    for summaries in shipped:
        back = decode(encode(summaries))
        assert list(back) == list(summaries)
        for name, s in summaries.items():
            b = back[name]
            assert type(b) is type(s), name
            for field, value in vars(s).items():
                got = getattr(b, field)
                if isinstance(value, np.ndarray):
                    assert got.dtype == value.dtype and got.shape == value.shape and np.array_equal(got, value), (name, field)
                    assert got.flags.writeable
                else:
                    assert got == value and type(got) is int, (name, field)
    epoch, whole = shipped
    assert {type(s).__name__ for s in (*epoch.values(), *whole.values())} == {
        "CountSummary", "MGSummary", "SSSummary", "SketchSummary"}


def _doc(payload: bytes) -> dict:
    return msgpack.unpackb(payload, raw=False)


def _pack(doc: dict) -> bytes:
    return msgpack.packb(doc, use_bin_type=True)


def _edit(shipped, change) -> bytes:
    doc = _doc(encode(shipped[1]))
    change(doc)
    return _pack(doc)


BROKEN = {
    "a pickle": lambda s: pickle.dumps(s[1]),
    "not bytes": lambda s: s[1],
    "truncated": lambda s: encode(s[1])[:-3],
    "another format": lambda s: _edit(s, lambda d: d.update(format="other")),
    "a future version": lambda s: _edit(s, lambda d: d.update(version=VERSION + 1)),
    "an extra top field": lambda s: _edit(s, lambda d: d.update(code="x")),
    "an unknown algorithm": lambda s: _edit(s, lambda d: d["summaries"].update(evil=d["summaries"]["exact"])),
    "a wrong summary type": lambda s: _edit(s, lambda d: d["summaries"]["exact"].update(type="mg")),
    "a missing field": lambda s: _edit(s, lambda d: d["summaries"]["exact"].pop("n")),
    "a negative count": lambda s: _edit(s, lambda d: d["summaries"]["exact"].update(n=-1)),
    "a float count": lambda s: _edit(s, lambda d: d["summaries"]["exact"].update(n=1.5)),
    "an object dtype": lambda s: _edit(s, lambda d: d["summaries"]["exact"]["keys"].update(dtype="|O")),
    "a big-endian dtype": lambda s: _edit(s, lambda d: d["summaries"]["exact"]["counts"].update(dtype=">i8")),
    "a wrong key width": lambda s: _edit(s, lambda d: d["summaries"]["exact"]["keys"].update(
        shape=[d["summaries"]["exact"]["keys"]["shape"][0] * 2, 1])),
    "a short array": lambda s: _edit(s, lambda d: d["summaries"]["exact"]["counts"].update(
        data=d["summaries"]["exact"]["counts"]["data"][:-8])),
    "keys and counts of different lengths": lambda s: _edit(s, lambda d: d["summaries"]["exact"].update(
        counts={"dtype": "<i8", "shape": [0], "data": b""})),
    "three-dimensional cells": lambda s: _edit(s, lambda d: d["summaries"]["countmin"]["cells"].update(
        shape=[1, *d["summaries"]["countmin"]["cells"]["shape"]])),
    "a msgpack extension": lambda s: _pack({"format": FORMAT, "version": VERSION,
                                            "summaries": msgpack.ExtType(1, b"x")}),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_anything_else_is_one_wire_error(shipped, case):
    with pytest.raises(WireError) as err:
        decode(BROKEN[case](shipped))
    message = str(err.value)
    assert message and "\n" not in message and len(message) < 200, message


def _collector(names=("exact", "dpmg")) -> Collector:
    return Collector(None, names, Settings(k=4))  # never started: its message handler on its own


def test_a_crafted_pickle_from_an_agent_is_rejected_and_never_runs(tmp_path, shipped):
    marker = tmp_path / "ran"
    evil = pickle.dumps(Marker(marker))
    pickle.loads(evil)  # the payload works: unpickled, it creates the marker
    assert marker.exists()
    marker.rmdir()

    collector = _collector()
    beat = {"kind": "beat", "run": collector.run, "time": time.time(), "iface": "lo", "first_cell": None,
            "packets": 3, "ip_packets": 3, "kernel_drops": 0, "queue_drops": 0, "late": 0, "error": None}
    good = {"kind": "beat", "agent": "good", **{k: v for k, v in beat.items() if k != "kind"},
            "exact": encode({"exact": shipped[1]["exact"]})}
    collector._handle(good)
    for agent, msg in (("beat", {**beat, "exact": evil}), ("epoch", {"kind": "epoch", "epoch": 0, "summaries": evil}),
                       ("done", {"kind": "done", "whole": evil, "packets": 3, "ip_packets": 3, "kernel_drops": 0,
                                 "late": 0, "last_cell": 0})):
        collector._handle({**msg, "agent": agent})
        collector._handle({**good, "agent": agent})  # a rejected agent's later messages are ignored
    assert not marker.exists()
    status = {a.name: a for a in collector.status()}
    assert status["good"].state == "running"
    for agent in ("beat", "epoch", "done"):
        assert status[agent].state == "failed" and status[agent].gone
        assert status[agent].error.startswith("rejected, nothing of it merged: not a dptop-summaries payload")
        assert "\n" not in status[agent].error
    assert collector.exact().n == shipped[1]["exact"].n  # only the good agent's counts
    assert collector._merger.pending_epochs() == []


def test_summaries_outside_the_run_are_rejected(shipped):
    collector = _collector(("exact", "dpmg"))
    collector._handle({"kind": "epoch", "agent": "a", "epoch": 0, "summaries": encode(shipped[0])})  # eehh-cms too
    collector._handle({"kind": "epoch", "agent": "b", "epoch": 0, "summaries": encode({"dpmg": shipped[0]["dpmg"]})})
    collector._handle({"kind": "frob", "agent": "c"})
    collector._handle({"kind": "beat", "agent": "d", "exact": encode({"exact": shipped[1]["exact"]})})  # no counters
    status = {a.name: a for a in collector.status()}
    assert status["a"].state == "failed" and "this run takes dpmg" in status["a"].error
    assert status["b"].state == "starting"
    assert status["c"].state == "failed" and "unknown kind 'frob'" in status["c"].error
    assert status["d"].state == "failed" and "malformed 'beat' message" in status["d"].error
    assert collector.exact().n == 0 and collector._merger.delivered(0) == {"b"}


def test_a_pickle_posted_on_the_run_topic_over_loopback_never_runs(tmp_path):
    """Any client of the scheduler can post on the run's topic: the collector rejects it."""
    from distributed import Client

    from dptop.cluster.connect import local_cluster
    from dptop.cluster.live import topic

    marker = tmp_path / "ran"
    cluster = local_cluster(0)  # a scheduler on 127.0.0.1, no workers
    collector = Collector(cluster.scheduler_address, ("exact",), Settings(k=4)).start()
    try:
        with Client(cluster.scheduler_address, timeout="10s") as intruder:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not collector.status():  # until the subscription is up
                intruder.log_event(topic(collector.run), {"kind": "done", "agent": "intruder",
                                                          "whole": pickle.dumps(Marker(marker)), "packets": 1,
                                                          "ip_packets": 1, "kernel_drops": 0, "late": 0,
                                                          "last_cell": 0})
                time.sleep(0.2)
        (agent,) = collector.status()
        assert (agent.name, agent.state) == ("intruder", "failed") and "not a dptop-summaries payload" in agent.error
    finally:
        result = collector.stop(timeout=1)
        cluster.close()
    assert not marker.exists()
    assert result.exact.n == 0 and [a.name for a in result.agents] == ["intruder"]


def test_an_archive_shipment_of_pickles_is_missing_and_never_runs(tmp_path, monkeypatch, shipped):
    marker = tmp_path / "ran"
    real = archive.summarize_file

    def evil(path, plan, stop=None):
        ship = real(path, plan, stop)
        if path.endswith("b.pcap"):
            return archive.Shipment(ship.report, pickle.dumps(Marker(marker)), {})
        return ship

    from dptop.capture.synth import write_zipf_pcap

    paths = [tmp_path / "a.pcap", tmp_path / "b.pcap"]
    for i, p in enumerate(paths):
        write_zipf_pcap(p, 1.1, 100, 2000, seed=i)
    monkeypatch.setattr(archive, "summarize_file", evil)
    result = archive.replay_archive(paths, ("exact", "dpmg"), Settings(k=4))
    assert not marker.exists()
    (missing,) = result.missing
    assert missing.name == str(paths[1]) and result.partial
    assert missing.error.startswith("its summaries were rejected, nothing of them merged: not a dptop-summaries")
    assert [a.name for a in result.agents] == [str(paths[0])] and result.exact.n == 2000
    (rel,) = result.releases["dpmg"]
    assert rel.status["agents"] == [str(paths[0])] and rel.status["agents_missing"] == [str(paths[1])]
