"""Keys beyond the address (dptop.engine.core.keykinds): destination port, protocol, pair, networks.

Against scapy on every bundled capture it dissects; through the CLI's exact baseline; DPSS finds
the dominant port of the demo; the labels read back exactly what was counted. scapy's counts come
from tests/data/keykinds_golden.json.gz (checked against each capture's sha256); the slow test
redissects every capture with scapy and compares it with that cache."""
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from dptop.capture.pcap import read_capture
from dptop.cli import main
from dptop.engine.core.keykinds import PAIR_NAMES, KeyKind, network_keys, pair_keys
from dptop.engine.core.keys import decode_key, keys_from_addresses
from dptop.resources import DEMO_CAPTURE
from tests.scapy_flows import BYTE_KINDS, KINDS, bundled_captures, golden_counts, scapy_counts

DATA = Path(__file__).parent / "data"
CAPTURES = bundled_captures()


def labels(keys: np.ndarray) -> Counter:
    return Counter(decode_key(h, lo) for h, lo in keys.tolist())


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_every_kind_equals_scapys_count_on_the_bundled_captures(path):
    batch, _ = read_capture(path)
    for kind in KINDS:
        keys, has = KeyKind(kind).keys(batch)
        got = labels(keys if has is None else keys[has])
        assert got == golden_counts(path, kind), (path.name, kind)


@pytest.mark.slow
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_golden_counts_equal_scapys_dissection(path):
    """The cache the default run reads is what scapy counts today (a changed capture, rule or scapy
    version shows here; `python -m tests.scapy_flows` remakes it)."""
    for kind in KINDS + BYTE_KINDS:
        assert golden_counts(path, kind) == scapy_counts(path, kind), (path.name, kind)


@pytest.mark.parametrize("kind", KINDS)
def test_cli_exact_counts_per_key_equal_scapys(capsys, kind):
    for path in (DEMO_CAPTURE, DATA / "amp.dns.RRSIG.fragmented.pcap", DATA / "zeek_ipv6.pcap"):
        assert main(["replay", str(path), "--key", kind, "--algorithms", "exact", "--top", "0", "--json", "-"]) == 0
        out = json.loads(capsys.readouterr().out)
        got = {r["address"]: r["count"] for r in out["exact"]["top"]}
        assert got == dict(golden_counts(path, kind)), (path.name, kind)
        assert out["counting"]["key"] == kind and KeyKind(kind).label in out["counting"]["text"]


def test_the_demo_has_a_dominant_port_and_dpss_releases_it(capsys):
    ports = golden_counts(DEMO_CAPTURE, "dport")
    (top, count), (_, second) = ports.most_common(2)
    assert count > 1.2 * second  # a dominant port: 21 (the TCP SYN attack waves)
    assert main(["replay", str(DEMO_CAPTURE), "--key", "dport", "--algorithms", "dpss", "--json", "-"]) == 0
    out = json.loads(capsys.readouterr().out)
    release = out["algorithms"]["dpss"]["releases"][-1]
    assert release["items"][0]["address"] == top
    assert release["guarantee"]["epsilon"] > 0


def test_ports_protocols_fragments_and_extension_headers(tmp_path):
    """The flow word against hand-built packets: IPv6 hop-by-hop and fragment headers, IPv4 later
    fragments (protocol but no port), a TCP header cut before its destination port."""
    frames = [
        Ether() / IPv6(src="2001:db8::1", dst="2001:db8::2") / IPv6ExtHdrHopByHop() / UDP(dport=53),
        Ether() / IPv6(src="2001:db8::1", dst="2001:db8::2") / IPv6ExtHdrFragment(offset=0) / TCP(dport=443),
        Ether() / IPv6(src="2001:db8::1", dst="2001:db8::2") / IPv6ExtHdrFragment(offset=8, nh=6) / (b"x" * 16),
        Ether() / IP(src="192.0.2.1", dst="192.0.2.2", frag=100, proto=17) / (b"y" * 16),
        Ether() / IP(src="192.0.2.1", dst="192.0.2.2") / UDP(dport=5353),
    ]
    raw = [bytes(f) for f in frames] + [bytes(Ether() / IP(src="192.0.2.1", dst="192.0.2.2") / TCP(dport=80))[:14 + 20 + 3]]
    path = tmp_path / "flows.pcap"
    wrpcap(str(path), [Ether(r) for r in raw])
    batch, _ = read_capture(path)
    ports, has = KeyKind.DPORT.keys(batch)
    assert [decode_key(*k) for k in ports[has].tolist()] == ["53", "443", "5353"]
    assert has.tolist() == [True, True, False, False, True, False]
    protos, _ = KeyKind.PROTO.keys(batch)
    assert [decode_key(*k) for k in protos.tolist()] == ["17 (UDP)", "6 (TCP)", "6 (TCP)", "17 (UDP)", "17 (UDP)",
                                                        "6 (TCP)"]


def test_labels_read_back_what_was_counted():
    src = keys_from_addresses(["192.0.2.77", "2001:db8:aa:bb::1", "10.1.2.3"])
    dst = keys_from_addresses(["198.51.100.9", "2001:db8::2", "2001:db8::3"])
    assert [decode_key(*k) for k in network_keys(src, 24, 48).tolist()] == [
        "192.0.2.0/24", "2001:db8:aa::/48", "10.1.2.0/24"]
    assert [decode_key(*k) for k in network_keys(src, 16, 32).tolist()] == [
        "192.0.0.0/16", "2001:db8::/32", "10.1.0.0/16"]
    pairs = pair_keys(src, dst)
    assert [decode_key(*k) for k in pairs.tolist()] == [
        "192.0.2.77 → 198.51.100.9", "2001:db8:aa:bb::1 → 2001:db8::2", "10.1.2.3 → 2001:db8::3"]
    assert len({tuple(k) for k in pairs.tolist()}) == 3 and len(PAIR_NAMES) >= 2
    # no key of another kind looks like an address: all live in ffff::/16, never a counted address
    for kind in (KeyKind.DPORT, KeyKind.PROTO, KeyKind.PAIR, KeyKind.SRC24):
        assert kind.label and not kind.address


def test_destinations_in_the_tag_range_are_not_counted(tmp_path):
    path = tmp_path / "ffff.pcap"
    wrpcap(str(path), [Ether() / IPv6(src="2001:db8::1", dst="ffff:1::1") / UDP(dport=1),
                       Ether() / IPv6(src="2001:db8::1", dst="ff02::1") / UDP(dport=2)])
    batch, stats = read_capture(path)
    assert len(batch) == 1 and sum(stats.skipped.values()) == 1


@pytest.mark.parametrize("kind, top", [("dport", "21"), ("src/24", "24.132.150.0/24")])
def test_dpsw_searches_the_kinds_own_prefix_tree(capsys, kind, top):
    """DPSW's hierarchy over ports and networks (a network kind's keys are its last level): the
    window's heaviest key is found, and ρ is split over every level (its budget use, summed over
    all levels as every level sees every packet, is that of one address family's)."""
    from dptop.engine.core import registry
    from dptop.engine.core.settings import Counting, Settings
    assert main(["replay", str(DEMO_CAPTURE), "--key", kind, "--algorithms", "dpsw,window-exact", "--json", "-"]) == 0
    out = json.loads(capsys.readouterr().out)
    exact = out["algorithms"]["window-exact"]["releases"][-1]["items"]
    private = out["algorithms"]["dpsw"]["releases"][-1]["items"]
    assert exact[0]["address"] == top and private[0]["address"] == top
    assert abs(private[0]["estimate"] - exact[0]["estimate"]) < 0.05 * exact[0]["estimate"]
    dpsw = registry.make("dpsw", Settings(window=10_000), counting=Counting(KeyKind(kind)))
    by_address = registry.make("dpsw", Settings(window=10_000)).budget_use()
    assert dpsw.budget_use() == pytest.approx(by_address) and by_address <= 1.0
    assert KeyKind(kind).label in dpsw.guarantee().neighbouring


def test_address_only_algorithms_refuse_other_keys(capsys):
    assert main(["replay", str(DATA / "zeek_ipv6.pcap"), "--key", "dport", "--algorithms", "exact,hostdp-dst"]) == 2
    assert "--key src or dst, not dport" in capsys.readouterr().err
