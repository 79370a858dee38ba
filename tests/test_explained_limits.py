"""Panels that explain themselves: the local-DP panels state the reports a source needs (and that
nothing can be released at the defaults), DPSS says why its limit rises with ε."""
import json

from dptop.engine.core.facts import PublicFacts
from dptop.cli import main
from dptop.engine.core import registry
from dptop.engine.core.settings import Settings
from tests.conftest import DNS_CAPTURE


def test_local_dp_defaults_state_the_reports_needed(capsys):
    limit = registry.make("ldp-bgr", Settings(), PublicFacts.of(4412)).detectable()
    assert limit.count > 1000 and "nothing can be released" in limit.note and "0.0005" in limit.note
    assert main(["replay", str(DNS_CAPTURE), "--algorithms", "ldp-bgr", "--json", "-"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["algorithms"]["ldp-bgr"]["status"]["detectable"]["note"] == limit.note
    assert out["algorithms"]["ldp-bgr"]["releases"][-1]["items"] == []


def test_local_dp_limit_falls_with_epsilon_and_reports():
    """Over a public replay of 300 one-second windows: the share a source needs falls as ε per
    report grows (a larger budget, or fewer reports sharing it), down to one a dominant source has."""
    shares = [registry.make("ldp-bgr", Settings(epsilon=e, extra={"reports": r}),
                                    PublicFacts.of(152_625, (0, 300 * 10**9))).detectable().share
              for e, r in ((0.5, 1000), (30, 1000), (60, 100), (60, 10))]
    assert shares == sorted(shares, reverse=True) and shares[0] > 1 and shares[-1] < 0.1


def test_dpss_says_why_its_limit_rises_with_epsilon():
    limits = [registry.make("dpss", Settings(epsilon=e, epoch_packets=20_000)).detectable() for e in (0.1, 0.5, 0.9)]
    shares = [lim.share for lim in limits]
    assert shares == sorted(shares) and shares[-1] < 1 / 16
    assert all("ñ/k − γ leads" in lim.why and "rises toward n/k" in lim.why for lim in limits)
