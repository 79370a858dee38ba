"""``dptop capture``'s text on three bundled captures (sent onto a veth pair and captured live with
``--seed``): with and without epochs, in bytes and per destination port. A live run's figures vary
with timing, so each run's result JSON is kept (tests/data/golden/capture-*.json, made by
tests/data/golden/capture_runs.py) and rendered here by the same code the command ends with
(dptop.report): the text is compared with its golden file, and every table is read back with its
columns aligned and its figures equal to the JSON's. Regenerate the golden texts with
``DPTOP_GOLDEN=write pytest tests/test_capture_golden.py`` and read the difference."""
from __future__ import annotations

import json
import os

import pytest

from dptop.report import render_csv, render_text
from dptop.runresult import RunResult
from tests.conftest import DATA_DIR
from tests.tablecheck import number, tables

GOLDEN = DATA_DIR / "golden"
RUNS = {  # fixture: (the bundled capture sent, what the run shows)
    "dns": ("amp.dns.RRSIG.fragmented.pcap", "no epochs: a window and a horizon"),
    "dns-epochs": ("amp.dns.RRSIG.fragmented.pcap", "2 s time epochs"),
    "dns-bytes": ("amp.dns.RRSIG.fragmented.pcap", "bytes, 3 s time epochs"),
    "syn-dport": ("amp.TCP.syn.optionallyACK.optionallysamePort.pcapng", "--key dport, packet epochs"),
    "demo-epochs": ("demo.pcap.gz", "3 s time epochs and a window"),
}


def result_of(run: str) -> dict:
    return json.loads((GOLDEN / f"capture-{run}.json").read_text())


@pytest.mark.parametrize("run", list(RUNS))
def test_capture_text_matches_its_golden_file(run):
    text = render_text(RunResult.from_json(result_of(run)))
    golden = GOLDEN / f"capture-{run}.txt"
    if os.environ.get("DPTOP_GOLDEN") == "write":
        golden.write_text(text)
    assert text == golden.read_text(), f"{run}: the capture's text changed; see {golden}"


@pytest.mark.parametrize("run", list(RUNS))
def test_capture_tables_read_back_equal_the_json(run):
    result = result_of(run)
    text = render_text(RunResult.from_json(result))
    assert result["source"]["iface"] and text.startswith(f"{result['source']['iface']}: ")
    assert "seeded noise (--seed): the figures below are NOT private" in text
    found = tables(text)  # asserts every column is aligned
    exact, key = found[0], found[0]["header"][1]
    assert exact["title"].startswith("exact top (NOT private)")
    top = result["exact"]["top"]
    assert [(r[key], number(r[exact["header"][2]])) for r in exact["rows"]] == \
        [(t["address"], t["count"]) for t in top[:len(exact["rows"])]]
    assert [number(r["share"]) for r in exact["rows"]] == \
        [round(100 * t["count"] / result["exact"]["total"], 1) for t in top[:len(exact["rows"])]]

    counting = result.get("counting") or {}
    scale = counting["unit"] if counting.get("weight") == "bytes" else 1
    shown = [t for t in found[1:] if "± a priori" in t["header"]]
    expected = []  # (release, its exact counts) of every release the text shows in full, in order
    for name, a in result["algorithms"].items():
        if not a.get("private"):
            continue
        truth = {t["release"]: t for t in a["truth"]}
        releases = a["releases"]
        last = 3 if releases and releases[-1]["span"]["kind"] == "epoch" else 1
        for i in range(max(0, len(releases) - last), len(releases)):
            if releases[i]["items"]:
                expected.append((name, releases[i], truth[i]))
    assert len(shown) == len(expected) and shown, (run, len(shown), len(expected))
    for table, (name, release, truth) in zip(shown, expected):
        estimate = table["header"][2]
        assert [(r[key], number(r[estimate])) for r in table["rows"]] == \
            [(it["address"], round(it["estimate"])) for it in release["items"]], (name, table)
        assert [number(r["exact"]) for r in table["rows"]] == truth["counts"]
        assert [number(r["share"]) for r in table["rows"]] == \
            [round(100 * c / truth["packets"], 1) for c in truth["counts"]]
        assert estimate == ("private bytes" if scale > 1 else "private packets")
    status = text[text.index("status (operational"):]
    for name, a in result["algorithms"].items():
        assert f"\n  {name} " in status and a["releases_published"] == len(a["releases"])


def test_each_case_the_issue_names_is_covered():
    """With and without epochs, bytes weighting and --key dport, over three bundled captures."""
    settings = {run: result_of(run)["settings"] for run in RUNS}
    counting = {run: result_of(run)["counting"] for run in RUNS}
    kinds = {run: {r["span"]["kind"] for a in result_of(run)["algorithms"].values() if a.get("private")
                   for r in a["releases"]} for run in RUNS}
    assert any("epoch" in k for k in kinds.values()) and any("epoch" not in k for k in kinds.values())
    assert any(c["weight"] == "bytes" for c in counting.values())
    assert any(c["key"] == "dport" for c in counting.values())
    assert all(s["seed"] == 7 for s in settings.values())
    assert len({capture for capture, _ in RUNS.values()}) == 3


def test_capture_csv_has_the_rows_of_the_text():
    import csv
    import io

    result = result_of("syn-dport")  # its one private algorithm with releases in full: dpss
    written = [(r["key"], r["estimate"], r["exact"]) for r in csv.DictReader(io.StringIO(render_csv(RunResult.from_json(result))))
               if r["algorithm"] == "dpss"]
    shown = [(row["port"], row["private packets"].replace(",", ""), row["exact"].replace(",", ""))
             for t in tables(render_text(RunResult.from_json(result))) if "± a priori" in t["header"] for row in t["rows"]]
    assert written == shown and written
