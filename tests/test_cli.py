"""The CLI's JSON contract: `dptop replay ... --json -` and friends."""
import json
from collections import Counter
from pathlib import Path

import pytest

from dptop.cli import main
from tests.conftest import DNS_CAPTURE

CONTRACT_ALGORITHMS = "exact,spacesaving,misragries,countmin"


def run_json(capsys, argv):
    assert main(argv + ["--json", "-"]) == 0
    return json.loads(capsys.readouterr().out)


def scapy_sources(path: Path) -> Counter:
    """Independent count: scapy's full dissection of every packet."""
    from scapy.all import IP, IPv6, PcapReader  # noqa: PLC0415

    counts = Counter()
    with PcapReader(str(path)) as reader:
        for pkt in reader:
            if IP in pkt:
                counts[pkt[IP].src] += 1
            elif IPv6 in pkt:
                counts[pkt[IPv6].src] += 1
    return counts


def test_replay_json_contract(capsys):
    out = run_json(capsys, ["replay", str(DNS_CAPTURE), "--algorithms", CONTRACT_ALGORITHMS, "--k", "16"])
    src = out["source"]
    assert src["packets"] == 4412 and src["ip_packets"] == 4412 and isinstance(src["skipped"], dict)
    assert out["exact"]["total"] == 4412
    top = out["exact"]["top"]
    assert top[0] == {"address": "24.132.150.54", "count": 1994}
    assert [r["count"] for r in top] == sorted((r["count"] for r in top), reverse=True)
    assert set(out["algorithms"]) == set(CONTRACT_ALGORITHMS.split(","))
    for name, alg in out["algorithms"].items():
        assert alg["private"] is False and alg["guarantee"] is None
        assert alg["updates_per_second"] > 0
        assert len(alg["releases"]) == 1
        rel = alg["releases"][0]
        assert set(rel) >= {"span", "threshold", "items"}
        assert rel["span"]["start"] == 0 and rel["span"]["end"] == 4412
        assert len(rel["items"]) == 16
        assert rel["items"][0]["address"] == "24.132.150.54"
        assert all(set(it) >= {"address", "estimate"} for it in rel["items"])
    assert out["budget"] is None


def _main_captures():
    from tests.conftest import SHARED_PCAPS

    files = sorted((SHARED_PCAPS / "main").glob("*")) if SHARED_PCAPS.is_dir() else []
    return [pytest.param(f, id=f.name, marks=[pytest.mark.slow] if f.stat().st_size > 1_500_000 else [])
            for f in files]


@pytest.mark.parametrize("path", _main_captures())
def test_exact_top_matches_scapy_dissection(capsys, path):
    out = run_json(capsys, ["replay", str(path), "--algorithms", "exact", "--top", "0"])
    truth = scapy_sources(path)
    got = {r["address"]: r["count"] for r in out["exact"]["top"]}
    assert got == dict(truth)
    assert out["exact"]["total"] == sum(truth.values()) == out["source"]["ip_packets"]


def test_synth_writes_a_pcap_scapy_reads(tmp_path, capsys):
    pcap = tmp_path / "z.pcap"
    assert main(["synth", "--skew", "1.5", "--domain", "100", "--length", "3000", "--seed", "3", "--pcap", str(pcap)]) == 0
    capsys.readouterr()
    truth = scapy_sources(pcap)
    assert sum(truth.values()) == 3000
    out = run_json(capsys, ["replay", str(pcap), "--algorithms", "exact", "--top", "0"])
    assert {r["address"]: r["count"] for r in out["exact"]["top"]} == dict(truth)


@pytest.mark.parametrize("argv, message, code", [
    (["replay", "/nonexistent.pcap"], "/nonexistent.pcap", 1),
    (["replay", str(DNS_CAPTURE), "--algorithms", "nosuch"], "unknown algorithm 'nosuch'", 2),
    (["replay", str(DNS_CAPTURE), "--algorithms", "spacesaving", "--k", "0"], "k (0) must be in [1, 4194304]", 2),
    (["replay", str(DNS_CAPTURE), "--epsilon", "1e300"], "epsilon (1e+300) must be in [1e-06, 64.0]", 2),
    (["replay", str(DNS_CAPTURE), "--k", "1000000000"], "k (1000000000) must be in", 2),
    (["replay", str(DNS_CAPTURE), "--algorithms", "countmin", "--param", "width=1099511627776"], "--param width", 2),
    (["replay", str(DNS_CAPTURE), "--algorithms", "countmin", "--param", "depth=-3"], "--param depth (-3)", 2),
    (["replay", str(DNS_CAPTURE), "--algorithms", "dpss", "--param", "bogus=1"], "unknown --param 'bogus'", 2),
    (["replay", str(DNS_CAPTURE), "--top", "-1"], "top (-1) must be in [0, 16777216]", 2),
    (["replay", str(DNS_CAPTURE), "--time-range", "1:2"], "give --epoch-seconds too", 2),
])
def test_bad_input_gives_clear_error(capsys, argv, message, code):
    """One line naming the parameter, exit 2 for usage and 1 for runtime errors, no traceback."""
    assert main(argv) == code
    err = capsys.readouterr().err
    assert err.startswith("dptop: error:") and message in err and "Traceback" not in err
    assert err.count("\n") == 1, err


def test_list_names_the_baselines(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in CONTRACT_ALGORITHMS.split(","):
        assert name in out


@pytest.mark.parametrize("columns", ["60", "80", "100", "140"])
def test_list_aligns_its_columns_and_gives_whole_descriptions(capsys, monkeypatch, columns):
    """Every row starts its description at the same column, wrapped lines continue under it, and
    each algorithm's plain description (dptop.monitor.catalogue) is printed whole, at any width
    (a word is never broken at its hyphen)."""
    from dptop.monitor import catalogue

    monkeypatch.setenv("COLUMNS", columns)
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    starts, described, name = set(), {}, None
    for line in lines:
        if not line.startswith(" "):
            name = line.split()[0]
            start = line.rindex("  ") + 2  # columns are two spaces apart or more, a description's words one
            starts.add(start)
            described[name] = line[start:]
        else:
            starts.add(len(line) - len(line.lstrip()))
            described[name] += " " + line.strip()
    assert len(starts) == 1, starts
    assert described == {e.name: e.summary for e in catalogue.entries()}
    assert any("is measured against" in d for d in described.values())


def test_demo_without_display_says_so_and_replays_headless(monkeypatch, capsys):
    for var in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(var, raising=False)
    assert main(["demo"]) == 0
    captured = capsys.readouterr()
    assert "no display found" in captured.err and "headless replay" in captured.err
    assert "152,629 packets" in captured.out and "24.132.150.54" in captured.out  # resources/SOURCES.md
