"""The local-DP algorithms in the product: registry and `dptop list`, options and their errors,
accounting (reports per agent per window, the guarantee and its unit), domains, and the CLI's
JSON contract for `dptop replay --algorithms ldp-...` and `dptop sweep-ldp`."""
import json
import math

import numpy as np
import pytest

from dptop.cli import main
from dptop.engine.core import registry
from dptop.engine.core.keys import KeyBatch, addresses_from_keys, keys_from_addresses
from dptop.engine.core.facts import PublicFacts
from dptop.engine.core.settings import Settings
from dptop.engine.core.workload import ipv4_of_rank, keys_of_ipv4, zipf_ranks
from dptop.engine.privacy.units import UnitKind
from dptop.engine.local_dp.domain import inventory_domain, prefix_domain

NAMES = ("ldp-bgr", "ldp-dsr", "ldp-bdr", "ldp-cnr", "ldp-dsr-prefix")


def make(name, facts=PublicFacts(), **extra):
    settings = extra.pop("settings", {})
    return registry.make(name, Settings(**{"k": 4, "epsilon": 2.0, "seed": 1, **settings}, extra=extra), facts)


def zipf_batch(n=4096, seed=1, ts_step_ns=0):
    keys = keys_of_ipv4(ipv4_of_rank(zipf_ranks(1.5, 50, n, seed)))
    return KeyBatch(keys, np.arange(n, dtype=np.int64) * ts_step_ns)


def test_registered_and_listed(capsys):
    for name in NAMES:
        cls = registry.get(name)
        assert cls.private and cls.family == "local DP"
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in NAMES)


@pytest.mark.parametrize("extra, match", [
    ({"reports": 0}, "reports"), ({"reports": "some"}, "reports"), ({"reports": 2.5}, "reports"),
    ({"snapshot": 0}, "snapshot"), ({"domain": "ipv4/99"}, "domain"), ({"domain": "ipx/16"}, "domain"),
    ({"ed": "b^C"}, "ed"), ({"inventory": "/nonexistent/inventory.txt"}, "inventory"),
    ({"domain": "ipv4/16", "inventory": "x"}, "exclusive"), ({"bogus": 1}, "bogus"), ({"alpha": 0}, "alpha"),
])
def test_invalid_options_name_the_parameter(extra, match):
    with pytest.raises(ValueError, match=match):
        make("ldp-dsr", **extra)


@pytest.mark.parametrize("name, extra, match", [
    ("ldp-bdr", {"split": 1.5}, "split"), ("ldp-bdr", {"split": "half"}, "split"), ("ldp-cnr", {"light": 0}, "light"),
    ("ldp-dsr-prefix", {"levels": "8,40"}, "levels"), ("ldp-dsr-prefix", {"levels": "16,8"}, "levels"),
    ("ldp-dsr-prefix", {"levels": "off"}, "levels"),
    ("ldp-dsr-prefix", {"fanout": 0}, "fanout"), ("ldp-bdr", {"domain": "ipv4/8", "settings": {"k_tilde": 256}}, "k_tilde"),
])
def test_invalid_scheme_options(name, extra, match):
    with pytest.raises(ValueError, match=match):
        make(name, **extra)


def test_inventory_file_errors(tmp_path):
    bad = tmp_path / "inv.txt"
    bad.write_text("# hosts\n10.0.0.1\n\nnot-an-address\n")
    with pytest.raises(ValueError, match="line 4"):
        inventory_domain(bad)
    bad.write_text("10.0.0.1\n")
    with pytest.raises(ValueError, match="at least 2"):
        inventory_domain(bad)


def test_guarantee_is_local_dp_per_report_with_the_window_budget():
    alg = make("ldp-dsr", reports=8, settings={"epsilon": 2.0, "epoch_seconds": 5.0})
    g = alg.guarantee()
    assert (g.model, g.measure, g.unit.label()) == ("local DP", "pure ε-LDP per report", "one report")
    assert g.epsilon == 0.25 and g.delta is None and g.rho is None
    assert "ε-LDP per report, <= 8 reports per agent per window of 5 s of packet time" in g.scope
    assert "window budget ε=2 per agent" in g.scope and "untrusted collector" in g.scope
    assert g.seeded and not g.private and "NOT private" in g.noise  # seeded run
    assert alg.status().window_budget_per_agent == 2.0
    every = make("ldp-dsr", reports="all").guarantee()
    assert every.epsilon == 2.0 and "every packet reported" in every.scope
    assert make("ldp-bgr", reports="all", settings={"seed": None}).guarantee().noise.startswith("exact integer")


def test_reports_per_window_are_capped():
    """Windows of 1000 packets, R = 10: the collector receives 10 reports per window, sampled."""
    alg = make("ldp-bgr", reports=10, settings={"epoch_packets": 1000})
    releases = alg.consume(zipf_batch(4500)) + alg.finish()
    assert len(releases) == 5 and [r.span.index for r in releases] == [1, 2, 3, 4, 5]
    assert alg.status().reports == 50 and releases[-1].span.end == 50  # spans count reports, not packets


def test_time_windows_default_to_one_second():
    alg = make("ldp-bgr", reports=3)
    out = alg.consume(zipf_batch(1000, ts_step_ns=10_000_000))  # 10 s of packet time
    assert len(out) == 9 and alg.status().reports == 27
    assert alg.status().window == "1 s of packet time"


def test_releases_are_top_k_without_other(tmp_path):
    inv = tmp_path / "inv.txt"
    inv.write_text("10.0.0.1\n10.0.0.2\n10.0.0.3\n")
    keys = keys_from_addresses(["10.0.0.1"] * 3000 + ["10.0.0.2"] * 1000 + ["192.0.2.9"] * 5000)
    alg = make("ldp-dsr", inventory=str(inv), reports="all", settings={"epsilon": 6.0, "k": 3})
    alg.consume(KeyBatch(keys))
    rel = alg.finish()[-1]
    assert [it.address for it in rel.items][:2] == ["10.0.0.1", "10.0.0.2"]
    assert rel.threshold > 0 and all(it.estimate > rel.threshold for it in rel.items)
    assert alg.live().items == rel.items
    plain = make("ldp-dsr", inventory=str(inv), reports="all", alpha=1, settings={"epsilon": 6.0, "k": 3})
    plain.consume(KeyBatch(keys))
    assert plain.finish()[-1].threshold == 0.0


def test_threshold_suppresses_noise_and_follows_bernstein():
    """Uniform traffic over 2^16 /16 prefixes at ε = 0.5 per report: no prefix is significant,
    so nothing is published; the threshold is Bernstein's bound at level α/d."""
    keys = keys_of_ipv4(np.random.default_rng(1).integers(0, 1 << 32, 20_000).astype(np.uint32))
    alg = make("ldp-bgr", reports="all", settings={"epsilon": 0.5})
    alg.consume(KeyBatch(keys))
    rel = alg.finish()[-1]
    assert rel.items == () and rel.threshold > 0
    col = alg._engine.pipelines[0].collector
    L = math.log(((1 << 16) + 1) / 0.05)
    a = col.null_step * L / 3
    assert rel.threshold == pytest.approx(max(a + math.sqrt(a * a + 2 * col.null_var * L), col.unit()))
    assert col.null_step == pytest.approx(1 / (col.latest.entire.p - col.latest.entire.q))
    assert make("ldp-bgr", reports="all", alpha=1).threshold() == 0.0


def test_prefix_domains_label_networks():
    d16 = prefix_domain("ipv4/16")
    keys = keys_from_addresses(["10.1.2.3", "2001:db8::1", "10.1.200.1"])
    assert d16.items(keys).tolist() == [0x0A01, d16.other, 0x0A01]
    assert d16.label(0x0A01, 5.0).address == "10.1.0.0/16"
    d32 = prefix_domain("ipv6/32")
    assert d32.items(keys).tolist() == [d32.other, 0x20010DB8, d32.other]
    assert d32.label(0x20010DB8, 1.0).address == "2001:db8::/32"
    assert prefix_domain("ipv6/48").size == (1 << 48) + 1


def test_ledger_unit_is_never_one_packet():
    """Local-DP guarantees have their own unit (one report); the ledger also charges one packet
    what it costs through its reports (test_privacy_model)."""
    assert all(make(n, reports="all").guarantee().unit.kind is UnitKind.REPORT for n in NAMES)


def test_replay_json_contract(tmp_path, capsys):
    pcap = tmp_path / "z.pcap"
    assert main(["synth", "--skew", "1.5", "--domain", "200", "--length", "20000", "--pcap", str(pcap)]) == 0
    capsys.readouterr()
    inventory = tmp_path / "inventory.txt"
    inventory.write_text("".join(f"{a}\n" for a in addresses_from_keys(keys_of_ipv4(ipv4_of_rank(np.arange(1, 201))))))
    argv = ["replay", str(pcap), "--algorithms", "ldp-dsr,ldp-dsr-prefix,exact", "--k", "5", "--epsilon", "4",
            "--param", "reports=all", "--param", f"inventory={inventory}", "--seed", "3", "--json", "-"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    truth = out["exact"]["top"][0]["address"]
    for name in ("ldp-dsr", "ldp-dsr-prefix"):
        a = out["algorithms"][name]
        assert a["private"] is True and a["guarantee"]["unit"] == "one report"
        assert "untrusted collector" in a["guarantee"]["text"]
        rel = a["releases"][-1]
        assert set(rel) >= {"span", "threshold", "items"} and rel["span"]["end"] == 20000
        assert rel["items"] and set(rel["items"][0]) == {"address", "estimate"}
        assert rel["items"][0]["address"] == truth, (name, rel["items"])


def test_cli_bad_param_is_one_line(capsys, tmp_path):
    pcap = tmp_path / "z.pcap"
    main(["synth", "--length", "100", "--pcap", str(pcap)])
    assert main(["replay", str(pcap), "--algorithms", "ldp-dsr", "--param", "reports=0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "reports" in err


def test_sweep_ldp_cli(capsys):
    assert main(["sweep-ldp", "--schemes", "dsr,bgr", "--epsilons", "1,8", "--domain", "50", "--length", "20000",
                 "--k", "3", "--runs", "1", "--json", "-"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [(r["scheme"], r["epsilon"]) for r in rows] == [("dsr", 1.0), ("dsr", 8.0), ("bgr", 1.0), ("bgr", 8.0)]
    assert all(0 <= r["ndcg"] <= 1 and 0 <= r["precision"] <= 1 for r in rows)
    assert rows[1]["ndcg"] >= rows[0]["ndcg"] and not math.isnan(rows[1]["aae"])


def test_a_priori_error_and_level_budget_by_exact_values():
    from dptop.engine.local_dp.domain_schemes import LDPDSR
    from dptop.engine.local_dp.prefix import level_budget

    # GRR over d = 2 at ε = ln 3: p = 3/4, q = 1/4, Var = n·q(1−q)/(p−q)² = n·3/4 -> n = 4/3·100²
    assert LDPDSR.grr_error(13_333, math.log(3), 2) == pytest.approx(100.0, rel=1e-4)
    assert level_budget(7.0, 7) == 1.0
    notes = make("ldp-dsr-prefix", reports=70, settings={"epsilon": 7.0}).guarantee().notes
    assert any("ε_window/7 = 1)" in n for n in notes)


def test_reporting_windows_are_the_public_grid():
    """With the session's time epochs, windows are its grid cells: 7 cells of a declared 7 s range
    give 7 windows although packets fall in only 5 of them; spans count reports."""
    t0 = 1_700_000_000 * 10**9
    alg = make("ldp-dsr", PublicFacts.of(time_range=(t0, t0 + 7 * 10**9)), reports=10, settings={"epoch_seconds": 1.0})
    ts = t0 + np.sort(np.random.default_rng(1).integers(10**9, 6 * 10**9, 500))
    releases = alg.consume(KeyBatch(keys_of_ipv4(np.full(500, 0x0A00_0001, np.uint32)), ts)) + alg.finish()
    assert [r.span.index for r in releases] == [1, 2, 3, 4, 5, 6, 7]
    assert [r.span.end for r in releases] == [0, 10, 20, 30, 40, 50, 50]


def test_a_threshold_that_follows_the_report_count_names_that_count_as_a_public_fact():
    """τ grows with the reports the collector received, so two captures one packet apart publish
    different thresholds; every release names the count it used as an assumed public fact (the
    local model shows every report to the collector), so the difference is declared."""
    keys = keys_of_ipv4(np.random.default_rng(2).integers(0, 1 << 32, 5000).astype(np.uint32))
    out = []
    for n in (5000, 4999):
        alg = make("ldp-bgr", reports="all", settings={"epsilon": 0.5})
        alg.consume(KeyBatch(keys[:n]))
        out.append(alg.finish()[-1])
    assert out[0].threshold != out[1].threshold
    for rel, n in zip(out, (5000, 4999)):
        facts = {f.name: f for f in rel.guarantee.facts}
        assert facts["reports"].value == n and facts["reports"].provenance.name == "ASSUMED"
        assert facts["reports"].to_json()["provenance"] == "assumed"
