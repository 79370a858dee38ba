"""The summaries' wire format (dptop.cluster.wire) and the messages around it (dptop.cluster.messages):
every summary type survives a round trip bit for bit, and anything else an agent sends — a crafted
pickle first, a field of the wrong type or out of its bounds — is one line and never executed, by
the live collector's checks and by an archive replay (over a Dask scheduler: test_cluster_trust.py)."""
from __future__ import annotations

import os
import pickle

import msgpack
import numpy as np
import pytest

from dptop.cluster import archive
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


def test_a_crafted_pickle_as_an_answer_is_rejected_and_never_runs(tmp_path, shipped):
    """A point report or a shipment carrying a pickle where summaries go: one WireError, never loaded."""
    from dptop.cluster.messages import PointReport, decode_report, decode_shipment, encode_report, encode_shipment

    marker = tmp_path / "ran"
    evil = pickle.dumps(Marker(marker))
    pickle.loads(evil)  # the payload works: unpickled, it creates the marker
    assert marker.exists()
    marker.rmdir()
    report = decode_report(encode_report(PointReport("r" * 12, "running", exact=evil, epochs={3: evil})))
    for payload in (report.exact, report.epochs[3]):
        with pytest.raises(WireError, match="not a dptop-summaries payload"):
            decode(payload)
    for data in (evil, encode_shipment({}, evil, {}), msgpack.packb({"format": "dptop-point-report", "version": 1,
                                                                      "run": evil}, use_bin_type=True)):
        with pytest.raises(WireError) as err:
            decode_report(data) if b"point-report" in data else decode_shipment(data)
        assert "\n" not in str(err.value)
    assert not marker.exists()


BAD_REPORTS = {
    "a text cell": {"through": "x"},
    "a cell 2**40": {"through": 2 ** 40},
    "a negative count": {"packets": -1},
    "a float count": {"packets": 1.5},
    "a huge count": {"late": 2 ** 63},
    "an unknown state": {"state": "root"},
    "a long text": {"error": "x" * 10_000},
    "cells out of range": {"epochs": {2 ** 40: b""}},
    "a text cell key": {"epochs": {"x": b""}},
    "summaries not bytes": {"exact": ["x"]},
    "an extra field": {"code": "x"},
}


@pytest.mark.parametrize("case", sorted(BAD_REPORTS))
def test_every_field_of_a_point_report_is_checked(case):
    from dataclasses import asdict

    from dptop.cluster.messages import PointReport, decode_report

    doc = {"format": "dptop-point-report", "version": 1, **asdict(PointReport("r" * 12, "running"))}
    doc.update(BAD_REPORTS[case])
    with pytest.raises(WireError) as err:
        decode_report(msgpack.packb(doc, use_bin_type=True))
    assert "\n" not in str(err.value) and len(str(err.value)) < 300, str(err.value)


def test_an_archive_shipment_of_pickles_is_missing_and_never_runs(tmp_path, monkeypatch, shipped):
    marker = tmp_path / "ran"
    real = archive.summarize_file

    def evil(path, plan, stop=None):
        return pickle.dumps(Marker(marker)) if path.endswith("b.pcap") else real(path, plan, stop)

    from dptop.capture.synth import write_zipf_pcap

    paths = [tmp_path / "a.pcap", tmp_path / "b.pcap"]
    for i, p in enumerate(paths):
        write_zipf_pcap(p, 1.1, 100, 2000, seed=i)
    monkeypatch.setattr(archive, "summarize_file", evil)
    result = archive.replay_archive(paths, ("exact", "dpmg"), Settings(k=4))
    assert not marker.exists()
    (missing,) = result.missing
    assert missing.name == str(paths[1]) and result.partial
    assert missing.error.startswith("its summaries were rejected, nothing of them merged: not a dptop-shipment")
    assert [a.name for a in result.agents] == [str(paths[0])] and result.exact.n == 2000
    (rel,) = result.releases["dpmg"]
    assert rel.status.agents == (str(paths[0]),) and rel.status.agents_missing == (str(paths[1]),)
