"""The run's JSON (``--json``) lists every exact figure under ``non_private`` (the contract of
dptop.monitor.result): each of its fields is either private output (released items with their
guarantee, the budget), a user parameter, or lies under a path ``non_private.fields`` names, on a
replay (whole stream, packet epochs, a time grid) and on a live capture alike."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from dptop.cli import main
from dptop.monitor.publish import PARAMETERS
from dptop.monitor.result import listed, session_json
from tests.test_public_spans import live_view

DNS = Path(__file__).parent / "data" / "amp.dns.RRSIG.fragmented.pcap"
PRIVATE_OUTPUT = ("dptop", "command", "partial", "error", "counting", "budget", "non_private",
                  "settings.{" + ", ".join((*PARAMETERS, "extra", "key", "unit")) + "}",
                  "algorithms.*.{private, family, guarantee, error}",
                  "algorithms.*.releases[*].{algorithm, items, guarantee}")
"""What the run's JSON may hold beside its listed exact figures (``listed``'s notation)."""


def leaves(x, path=""):
    """The JSON paths of ``x``'s leaves (a list's items as ``[*]``)."""
    if isinstance(x, dict):
        for k, v in x.items():
            yield from leaves(v, f"{path}.{k}" if path else k)
    elif isinstance(x, list):
        for v in x:
            yield from leaves(v, f"{path}[*]")
    else:
        yield path


def unlisted(result: dict) -> set[str]:
    fields = result["non_private"]["fields"]
    return {p for p in leaves(result) if not listed(p, fields) and not listed(p, PRIVATE_OUTPUT)}


@pytest.mark.parametrize("extra", [[], ["--epoch-packets", "1000"], ["--epoch-seconds", "1"]],
                         ids=["whole", "packet-epochs", "grid"])
def test_every_exact_figure_of_a_replay_is_listed(tmp_path, extra):
    out = tmp_path / "run.json"
    assert main(["replay", str(DNS), "--algorithms", "dpss,lazyhh,dpsw,eehh-cms,dpmg,exact", "--epsilon", "0.5",
                 *extra, "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert any("packets_seen" in p for p in map(str, leaves(result)))  # an exact figure is there to list
    assert not unlisted(result), sorted(unlisted(result))


def test_every_exact_figure_of_a_live_capture_is_listed():
    result = live_view(render=lambda s, command: session_json(s, command, 10))
    assert result["algorithms"]["lazyhh"]["exact_spans"]
    assert not unlisted(result), sorted(unlisted(result))


def test_listed_reads_the_notation():
    fields = ("source", "algorithms.*.{packets, truth}", "algorithms.*.releases[*].{status}")
    assert listed("source.packets", fields) and listed("algorithms.dpss.truth[*].counts[*]", fields)
    assert listed("algorithms.dpss.releases[*].status.packets_seen", fields)
    assert not listed("sources", fields) and not listed("algorithms.dpss.releases[*].items[*].estimate", fields)
    assert not listed("algorithms.dpss", fields)
