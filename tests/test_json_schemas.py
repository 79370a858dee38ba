"""Every subcommand's ``--json`` output against its JSON Schema (app/monitor/schemas.py), and the
private view (``--publish``) against ``dptop.monitor.publish.SCHEMA``; the schemas themselves are
valid draft 2020-12 and refuse an output with a contract field missing."""
import json
import os
import shutil

import pytest

from dptop.cli import main
from dptop.monitor.schemas import BY_COMMAND
from tests.conftest import DNS_CAPTURE

jsonschema = pytest.importorskip("jsonschema")


def valid(command: str, path) -> dict:
    data = json.loads(path.read_text())
    jsonschema.validate(data, BY_COMMAND[command])
    return data


def test_the_schemas_are_valid_and_name_the_contract():
    for schema in {id(s): s for s in BY_COMMAND.values()}.values():
        jsonschema.Draft202012Validator.check_schema(schema)
    assert {"source", "exact", "algorithms", "budget"} <= set(BY_COMMAND["replay"]["required"])


def test_replay_json_and_private_view(tmp_path):
    out, view = tmp_path / "out.json", tmp_path / "view.json"
    assert main(["replay", str(DNS_CAPTURE), "--epoch-seconds", "10", "--algorithms", "exact,dpss,dpmg",
                 "--json", str(out), "--publish", str(view)]) == 0
    result = valid("replay", out)
    valid("--publish", view)
    broken = dict(result)
    del broken["exact"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, BY_COMMAND["replay"])


@pytest.mark.parametrize("weight, want", [([], "packet"), (["--weight", "bytes", "--byte-unit", "128"], "128 bytes")])
def test_the_settings_say_what_one_counted_update_is(tmp_path, weight, want):
    """``settings.unit`` is what one counted update is (never null), as ``counting`` describes it."""
    out = tmp_path / "out.json"
    assert main(["replay", str(DNS_CAPTURE), "--algorithms", "exact,dpmg", *weight, "--json", str(out)]) == 0
    result = valid("replay", out)
    assert result["settings"]["unit"] == want and result["settings"]["key"] == result["counting"]["key"]
    assert (result["counting"]["weight"] == "bytes") == (want != "packet")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**result, "settings": {**result["settings"], "unit": None}}, BY_COMMAND["replay"])


def test_replay_of_an_archive_goes_through_the_same_contract(tmp_path):
    paths = []
    for name in ("a.pcap", "b.pcap"):
        paths.append(tmp_path / name)
        shutil.copy(DNS_CAPTURE, paths[-1])
    out = tmp_path / "archive.json"
    assert main(["replay", *map(str, paths), "--algorithms", "exact,dpmg", "--json", str(out)]) == 0
    result = valid("replay", out)
    assert [a["path"] for a in result["agents"]] == list(map(str, paths)) and result["missing"] == []
    assert result["source"]["packets"] == 2 * 4412 and result["budget"]["algorithms"]
    dpmg = result["algorithms"]["dpmg"]
    assert dpmg["private"] is True and dpmg["packets"] == result["source"]["ip_packets"]


@pytest.mark.live
@pytest.mark.skipif(os.geteuid() != 0, reason="live capture needs root")
def test_capture_json_and_private_view(tmp_path):
    out, view = tmp_path / "out.json", tmp_path / "view.json"
    assert main(["capture", "--iface", "lo", "--duration", "1", "--algorithms", "exact,dpss", "--quiet",
                 "--json", str(out), "--publish", str(view)]) == 0
    assert valid("capture", out)["command"] == "capture"
    valid("--publish", view)


@pytest.mark.parametrize("command, argv", [
    ("audit", ["audit", "--mechanism", "dpss", "--runs", "30", "--seed", "1"]),
    ("sweep-ldp", ["sweep-ldp", "--length", "2000", "--domain", "50", "--runs", "1", "--epsilons", "1",
                   "--seed", "1"]),
    ("sweep-lazyhh", ["sweep-lazyhh", "--length", "20000", "--k", "4", "--epsilons", "0.5", "--ratios", "4"]),
    ("bench", ["bench", "--quick", "--only", "capture"]),
])
def test_the_other_subcommands(tmp_path, command, argv):
    out = tmp_path / f"{command}.json"
    assert main(argv + ["--json", str(out)]) == 0
    valid(command, out)
