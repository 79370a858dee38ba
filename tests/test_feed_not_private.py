"""``--seed`` runs say NOT private on ``/metrics`` too, on every series, as they do in the JSON,
the private view and the screen; a run on OS noise says private on every series."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("prometheus_client")

from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from dptop.engine.core.settings import Settings  # noqa: E402
from dptop.feed import _Collector  # noqa: E402
from dptop.monitor.config import RunConfig, SourceSpec  # noqa: E402
from dptop.monitor.publish import publish_json  # noqa: E402
from dptop.monitor.session import Session  # noqa: E402
from dptop.monitor.states import State  # noqa: E402

DNS = Path(__file__).parent / "data" / "amp.dns.RRSIG.fragmented.pcap"


def scrape(seed):
    session = Session(RunConfig(("dpss", "lazyhh", "exact"), Settings(k=4, epsilon=0.5, seed=seed)))
    session.open(SourceSpec("file", path=str(DNS)))
    try:
        assert session.wait(60) is State.FINISHED, session.error
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(publish_json(session, "serve")))  # the view itself, built once
        return list(text_string_to_metric_families(generate_latest(registry).decode()))
    finally:
        session.close(2.0)


def test_seeded_runs_say_not_private_on_every_series():
    families = scrape(seed=7)
    samples = [(f, s) for f in families for s in f.samples]
    assert samples and any(s.name == "dptop_private_estimate" for _, s in samples)
    for family, sample in samples:
        assert sample.labels.get("private") == "false" or sample.name == "dptop_not_private", sample
        assert family.documentation.startswith("NOT private"), family.name
    assert [s.value for _, s in samples if s.name == "dptop_not_private"] == [1.0]


def test_private_runs_carry_no_marker():
    samples = [s for f in scrape(seed=None) for s in f.samples]
    assert samples and all(s.labels.get("private") == "true" for s in samples)
    assert not any(s.name == "dptop_not_private" for s in samples)
