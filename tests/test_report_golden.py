"""``dptop replay``'s text on three bundled captures, with and without epochs, in bytes and per
destination port: compared with golden files (seeded noise, so the private figures reproduce; the
status block's rates are left out), and every table read back with its columns aligned and its
figures equal to the JSON of the same run. Regenerate the golden files with
``DPTOP_GOLDEN=write pytest tests/test_report_golden.py`` and read the difference."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dptop.cli import main
from dptop.resources import DEMO_CAPTURE
from tests.conftest import DATA_DIR, DNS_CAPTURE
from tests.tablecheck import number, tables

GOLDEN = DATA_DIR / "golden"
SYN = DATA_DIR / "amp.TCP.syn.optionallyACK.optionallysamePort.pcapng"
CASES = {
    "dns": (DNS_CAPTURE, []),
    "dns-epochs": (DNS_CAPTURE, ["--epoch-seconds", "5"]),
    "dns-bytes": (DNS_CAPTURE, ["--weight", "bytes", "--algorithms", "dpss,dpsw,exact"]),
    "dns-dport-epochs": (DNS_CAPTURE, ["--key", "dport", "--epoch-seconds", "10"]),
    "syn": (SYN, []),
    "syn-dport": (SYN, ["--key", "dport", "--epoch-packets", "500", "--algorithms", "dpss,dpsw,exact"]),
    "demo-epochs": (DEMO_CAPTURE, ["--epoch-seconds", "30", "--algorithms", "dpss,dpsw,exact"]),
    "demo-bytes": (DEMO_CAPTURE, ["--weight", "bytes", "--algorithms", "dpss,exact", "--baselines"]),
}


def replay(capsys, tmp_path, path: Path, extra: list[str]) -> tuple[str, dict]:
    out = tmp_path / "run.json"
    assert main(["replay", str(path), "--seed", "7", *extra, "--json", str(out)]) == 0
    return capsys.readouterr().out, json.loads(out.read_text())


def stable(text: str) -> str:
    """The text without the status block's measured rates (they change from run to run)."""
    return text[:text.index("status (operational")]


@pytest.mark.parametrize("case", list(CASES))
def test_replay_text_matches_its_golden_file_and_its_json(capsys, tmp_path, case):
    path, extra = CASES[case]
    text, result = replay(capsys, tmp_path, path, extra)
    golden = GOLDEN / f"{case}.txt"
    shown = stable(text).replace(str(path), path.name)
    if os.environ.get("DPTOP_GOLDEN") == "write":
        golden.write_text(shown)
    assert shown == golden.read_text(), f"{case}: the table changed; see {golden}"

    found = tables(text)
    exact = found[0]
    assert exact["title"].startswith("exact top (NOT private)")
    top = result["exact"]["top"]
    key = exact["header"][1]
    assert [(r[key], number(r[exact["header"][2]])) for r in exact["rows"]] == \
        [(t["address"], t["count"]) for t in top[:len(exact["rows"])]]
    private = [(name, a) for name, a in result["algorithms"].items() if a.get("private")]
    tables_of_releases = [t for t in found[1:] if "± a priori" in t["header"]]
    expected = []
    for name, a in private:
        truth = {t["release"]: t for t in a["truth"]}
        for i, release in enumerate(a["releases"]):
            if i in truth and release["items"]:
                expected.append((release, truth[i]))
    expected = [e for e in expected if e[0]["items"]]
    # each table shown is one of the releases the JSON holds with its exact counts, in order
    assert len(tables_of_releases) <= len(expected) and tables_of_releases
    for table in tables_of_releases:
        estimate_column = table["header"][2]
        got = [(r[key], number(r[estimate_column]), number(r["exact"])) for r in table["rows"]]
        match = [(release, truth) for release, truth in expected
                 if [(it["address"], round(it["estimate"])) for it in release["items"]] ==
                 [(g[0], g[1]) for g in got]]
        assert match, (table, expected)
        release, truth = match[0]
        assert [g[2] for g in got] == truth["counts"]
        assert [number(r["share"]) for r in table["rows"]] == \
            [round(100 * c / truth["packets"], 1) for c in truth["counts"]]
    assert "seeded noise (--seed): the figures below are NOT private" in text
    status = text[text.index("status (operational"):]
    for name, a in result["algorithms"].items():
        assert f"\n  {name} " in status


def test_bytes_exact_top_and_the_exact_baseline_agree(capsys, tmp_path):
    text, result = replay(capsys, tmp_path, DNS_CAPTURE, ["--weight", "bytes", "--algorithms", "dpss,exact"])
    exact = tables(text)[0]
    counted = {it["address"]: it["estimate"] for it in result["algorithms"]["exact"]["releases"][-1]["items"]}
    for row in exact["rows"]:
        assert number(row["as counted"]) == counted[row["source"]]
        assert number(row["bytes"]) == next(t["count"] for t in result["exact"]["top"] if t["address"] == row["source"])


def test_only_the_last_epochs_in_full_and_one_line_for_the_rest(capsys, tmp_path):
    text, result = replay(capsys, tmp_path, DNS_CAPTURE, ["--epoch-seconds", "2", "--algorithms", "dpss,exact"])
    releases = result["algorithms"]["dpss"]["releases"]
    assert len(releases) >= 10
    assert text.count("  epoch ") == 3
    assert f"earlier, epochs 0-{len(releases) - 4}: {len(releases) - 3} releases" in text


def test_baselines_only_when_asked_and_the_exact_top_once(capsys, tmp_path):
    text, _ = replay(capsys, tmp_path, DNS_CAPTURE, [])
    assert "spacesaving (NOT private)" not in text and text.count("exact top") == 1
    text, _ = replay(capsys, tmp_path, DNS_CAPTURE, ["--baselines"])
    assert "spacesaving (NOT private)" in text and text.count("exact top") == 1


def test_csv_has_one_row_per_key_shown(capsys, tmp_path):
    import csv
    import io

    assert main(["replay", str(DNS_CAPTURE), "--seed", "7", "--algorithms", "dpss,exact", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert rows[0]["algorithm"] == "exact-top" and rows[0]["key"] == "24.132.150.54" and rows[0]["exact"] == "1994"
    dpss = [r for r in rows if r["algorithm"] == "dpss"]
    assert dpss and dpss[0]["key"] == "24.132.150.54" and dpss[0]["private"] == "true"


def test_format_json_is_the_json_on_stdout(capsys):
    assert main(["replay", str(DNS_CAPTURE), "--algorithms", "exact", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["exact"]["total"] == 4412
    assert main(["replay", str(DNS_CAPTURE), "--format", "json", "--json", "x.json"]) == 2


def test_a_file_without_an_ip_packet_says_so_instead_of_an_empty_top(capsys, tmp_path):
    import struct

    path = tmp_path / "arp.pcap"
    arp = bytes(6) + bytes.fromhex("0242ac110002") + b"\x08\x06" + bytes(28)
    header = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    records = b"".join(struct.pack("<IIII", 1_700_000_000 + i, 0, len(arp), len(arp)) + arp for i in range(5))
    path.write_bytes(header + records)
    assert main(["replay", str(path), "--algorithms", "dpss,exact"]) == 0
    out = capsys.readouterr().out
    assert "exact top (NOT private): nothing counted: no packet carried a source address" in out
    assert "exact top (non-private): \n" not in out and "read 5 packets, 0 with an IP address" in out
