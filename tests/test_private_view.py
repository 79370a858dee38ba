"""The private view (``dptop replay --publish``) on neighbouring captures built independently.

Each pair is a base capture and a neighbour under one relation (a packet added in the middle
or at either end, re-stamped, its source changed, its length changed; one client host with its
replies). Both sides run three times, eight when a field looks distinguishing (a noisy estimate
can repeat on each side by chance: 198 three times against 200 three times, once in CI); a
field of the private view that is constant within each side and different between the sides
distinguishes the neighbours with certainty, which no guarantee allows -- unless the guarantee names it as an assumed public fact. Each view is
also checked against the JSON Schema, and must carry no exact figure (no ``packets``,
``status`` or ground truth)."""
from __future__ import annotations

import json

import pytest

from dptop.cli import main
from tests.capture_files import ether, ipv4, pcap

jsonschema = pytest.importorskip("jsonschema")

T0 = 1_700_000_000 * 10**9
RANGE = ["--epoch-seconds", "2", "--time-range", "1700000000:1700000010"]
HEAVY = [f"10.0.0.{i}" for i in range(1, 6)]
CLIENTS = [f"172.16.0.{i}" for i in range(1, 61)]
SERVERS = [f"198.51.100.{i}" for i in range(1, 9)]


def base_packets() -> list[tuple[int, str, str, int]]:
    """(ts ns, src, dst, payload bytes) over 10 s: three heavy sources with 5/6 of the packets in
    shares 5:3:2 (42 %, 25 %, 17 %: far above every threshold, so what is released and its order
    are the same in every run), and 60 clients with 1/6 (0.3 % each: far below) to 8 servers."""
    share = [0, 0, 0, 0, 0, 1, 1, 1, 2, 2]
    out = []
    for i in range(3000):
        src = CLIENTS[i % 60] if i % 6 == 0 else HEAVY[share[i % 10]]
        dst = SERVERS[(i // 60) % 8] if src in CLIENTS else "192.0.2.200"
        out.append((T0 + 500_000_000 + i * 3_000_000, src, dst, 40 + (i * 37) % 900))
    return out


def write(path, packets) -> str:
    packets = sorted(packets)
    frames = [ether(0x0800, ipv4(s, d, b"\0" * n)) for _, s, d, n in packets]
    path.write_bytes(pcap(frames, ns=True, times=[t for t, *_ in packets]))
    return str(path)


def neighbours():
    base = base_packets()
    mid, first, last = base[1500], base[0], base[-1]
    added_mid = (mid[0] + 1, "10.0.0.99", "192.0.2.200", 100)
    busy = [(T0 + 2 * 10**9 + i * 1000, "172.16.0.200", f"203.0.113.{i % 250}", 60) for i in range(200)]
    busy += [(t + 500, d, s, 60) for t, s, d, _ in busy]  # the replies
    return {
        # relation, options, base, neighbour
        "add-middle": (RANGE + ["--algorithms", "dpss,dpmg,eehh-cms"], base, base + [added_mid]),
        "add-before-first": (RANGE + ["--algorithms", "dpss,dpmg"], base, base + [(first[0] - 10**8, *first[1:])]),
        "add-after-last": (RANGE + ["--algorithms", "dpss,dpmg"], base, base + [(last[0] + 10**8, *last[1:])]),
        "remove-middle": (RANGE + ["--algorithms", "dpss,eehh-cms"], base, base[:1500] + base[1501:]),
        "restamp": (RANGE + ["--algorithms", "dpss"], base, base[:1500] + [(mid[0] + 3 * 10**9, *mid[1:])] + base[1501:]),
        "source": (["--algorithms", "lazyhh,dpsw"], base, base[:1500] + [(mid[0], "10.9.9.9", *mid[2:])] + base[1501:]),
        "length": (RANGE + ["--algorithms", "dpss", "--weight", "bytes"], base,
                   base[:1500] + [(mid[0], mid[1], mid[2], 1400)] + base[1501:]),
        "client-with-replies": (RANGE + ["--algorithms", "hostdp-dst", "--clients", "172.16.0.0/24"], base,
                                base + busy),
    }


def flatten(value, path="") -> dict:
    if isinstance(value, dict):
        return {k: v for key, sub in value.items() for k, v in flatten(sub, f"{path}.{key}").items()}
    if isinstance(value, list):
        out = {f"{path}#len": len(value)}
        for i, sub in enumerate(value):
            out.update(flatten(sub, f"{path}[{i}]"))
        return out
    return {path: value}


def publish(tmp_path, capture, options, run) -> dict:
    out = tmp_path / f"view-{run}.json"
    assert main(["replay", capture, "--publish", str(out), *options]) == 0
    return json.loads(out.read_text())


def distinguishing(side_a: list[dict], side_b: list[dict]) -> dict:
    """Fields constant within each side and different between them."""
    fa, fb = [flatten(v) for v in side_a], [flatten(v) for v in side_b]
    out = {}
    for key in set().union(*fa, *fb):
        a, b = {json.dumps(f.get(key)) for f in fa}, {json.dumps(f.get(key)) for f in fb}
        if len(a) == 1 and len(b) == 1 and a != b:
            out[key] = (a.pop(), b.pop())
    return out


@pytest.mark.parametrize("case", list(neighbours()))
def test_no_private_field_tells_the_neighbours_apart(tmp_path, capsys, case):
    from dptop.monitor.publish import SCHEMA

    options, base, other = neighbours()[case]
    a, b = write(tmp_path / "a.pcap", base), write(tmp_path / "b.pcap", other)
    side_a = [publish(tmp_path, a, options, f"a{i}") for i in range(3)]
    side_b = [publish(tmp_path, b, options, f"b{i}") for i in range(3)]
    if distinguishing(side_a, side_b):  # a noisy estimate can repeat three times by chance: five runs more
        side_a += [publish(tmp_path, a, options, f"a{i}") for i in range(3, 8)]
        side_b += [publish(tmp_path, b, options, f"b{i}") for i in range(3, 8)]
    capsys.readouterr()
    for view in side_a + side_b:
        jsonschema.validate(view, SCHEMA)
        assert view["private"] and view["algorithms"]
        assert not any(k.endswith((".packets", ".status")) for k in flatten(view))
    assert distinguishing(side_a, side_b) == {}, case


def test_undeclared_time_range_is_a_named_assumption(tmp_path, capsys):
    """Without --time-range the grid is the file's span: a packet before the first stamp moves it
    (and with it what each epoch holds). The view says so: the time range is listed as an
    assumed public fact, NOT covered, in the view and in every release's guarantee."""
    base = base_packets()
    other = base + [(base[0][0] - 10**8, *base[0][1:])]
    a, b = write(tmp_path / "a.pcap", base), write(tmp_path / "b.pcap", other)
    options = ["--epoch-seconds", "2", "--algorithms", "dpss"]
    side_a = [publish(tmp_path, a, options, f"a{i}") for i in range(2)]
    side_b = [publish(tmp_path, b, options, f"b{i}") for i in range(2)]
    capsys.readouterr()
    (fact,) = side_a[0]["public_facts"]
    assert fact["name"] == "time_range" and fact["provenance"] == "assumed" and "NOT covered" in fact["why"]
    assert all(r["guarantee"]["public_facts"] == [fact] for r in side_a[0]["algorithms"]["dpss"]["releases"])
    differing = distinguishing(side_a, side_b)
    assert ".public_facts[0].value.start_s" in differing  # the difference is the named fact's


def test_one_corrupt_stamp_is_dropped_and_counted(tmp_path, capsys):
    base = base_packets()
    corrupt = write(tmp_path / "c.pcap", base + [(T0 + 10**9 * 10**6, *base[5][1:])])  # ~11.6 days later
    assert main(["replay", corrupt, "--epoch-seconds", "0.01", "--algorithms", "dpss", "--json", "-"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["source"]["skipped"] == {"outside the public time range": 1}


def test_a_tuned_parameter_is_recorded_as_chosen_from_the_packets(tmp_path):
    """A value applied from a sweep over the recorded packets is named in the ledger and in the
    private view as chosen from those packets, not covered."""
    from dptop.monitor.config import RunConfig, SourceSpec
    from dptop.monitor.publish import SCHEMA, publish_json
    from dptop.monitor.session import Session
    from dptop.engine.core.settings import Settings

    capture = write(tmp_path / "a.pcap", base_packets())
    session = Session(RunConfig(("dpss",), Settings(epsilon=0.5)))
    session.open(SourceSpec("file", path=capture))
    session.tuned("dpss", "epsilon", 0.25)
    session.apply(RunConfig(("dpss",), Settings(epsilon=0.25)))
    while session.wait(0.2) not in ("finished", "failed", "stopped"):
        pass
    view = publish_json(session, "replay")
    session.close(timeout=5.0)
    jsonschema.validate(view, SCHEMA)
    (fact,) = view["budget"]["tuning"]["dpss"]
    assert (fact["name"], fact["value"], fact["provenance"]) == ("epsilon", 0.25, "chosen_from_data")
    assert any("NOT covered" in n for n in view["budget"]["notes"])
    assert fact in view["algorithms"]["dpss"]["guarantee"]["public_facts"]


def test_unwritable_publish_target_is_one_line_before_the_run(tmp_path, capsys):
    capture = write(tmp_path / "a.pcap", base_packets()[:100])
    assert main(["replay", capture, "--algorithms", "dpss", "--publish", str(tmp_path / "missing" / "v.json")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"dptop: error: cannot write the private view to {tmp_path / 'missing' / 'v.json'}: "
                   "No such file or directory"]
