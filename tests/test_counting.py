"""What a packet counts as (--key src|dst, --weight packets|bytes) on a real capture, against
scapy: per-destination packet counts and per-source byte sums (record wire length) in the exact
baseline; private byte estimates in bytes with the unit cap stated in the guarantee's ledger."""
import json

import pytest

from dptop.cli import main
from dptop.resources import DEMO_CAPTURE
from tests.scapy_flows import golden_counts


@pytest.fixture(scope="module")
def scapy_counts():
    """Per-source bytes (record wire length) and per-destination packets by scapy's dissection of the
    demo capture, read from the golden cache (tests/scapy_flows.py; a slow test redissects it)."""
    return golden_counts(DEMO_CAPTURE, "src bytes"), golden_counts(DEMO_CAPTURE, "dst")


def _run(capsys, *args):
    assert main(["replay", str(DEMO_CAPTURE), "--top", "0", "--json", "-", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_exact_bytes_per_source_equal_scapys_sums(capsys, scapy_counts):
    out = _run(capsys, "--algorithms", "exact", "--weight", "bytes")
    got = {r["address"]: r["count"] for r in out["exact"]["top"]}
    assert got == dict(scapy_counts[0])
    assert out["counting"]["weight"] == "bytes" and "64 bytes" in out["counting"]["text"]


def test_destination_view_counts_destinations(capsys, scapy_counts):
    out = _run(capsys, "--algorithms", "exact", "--key", "dst")
    assert {r["address"]: r["count"] for r in out["exact"]["top"]} == dict(scapy_counts[1])


def test_private_byte_estimates_are_in_bytes_and_cost_the_unit_cap(capsys, scapy_counts):
    out = _run(capsys, "--algorithms", "dpss", "--weight", "bytes", "--byte-unit", "100", "--byte-cap", "15",
               "--epsilon", "0.5")
    top_src, top_bytes = scapy_counts[0].most_common(1)[0]
    items = {it["address"]: it["estimate"] for it in out["algorithms"]["dpss"]["releases"][-1]["items"]}
    assert top_src in items and abs(items[top_src] - top_bytes) < 0.2 * top_bytes  # units of 100 B, capped
    line = out["budget"]["algorithms"]["dpss"]
    g = out["algorithms"]["dpss"]["guarantee"]
    assert line["epsilon"] == pytest.approx(0.5) and line["delta"] == pytest.approx(1e-6)  # calibrated per packet
    assert g["unit"] == "one packet (byte weight capped at 15 units)" and "15 updates" in " ".join(g["notes"])
