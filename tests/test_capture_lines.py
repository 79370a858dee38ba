"""A live capture on loopback (capture/lab/paced.py sends a 30 % source at 2,000 packets/s): every
release line printed while it runs is one of the JSON's releases, for every private algorithm
(a continual or sliding-window algorithm's line too, not only its last answer: its labels,
estimates and public threshold, its span being the epoch of the public clock it follows), and so
is every release of the private view (--publish); the final table reads back aligned."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from dptop.lab.matrix_features import parse_line
from dptop.report import span_text
from dptop.runresult import span_from_json
from tests.tablecheck import tables

LINE = re.compile(r"^\d\d:\d\d:\d\d (\S+) (.*)$")


def items_of(release: dict) -> str:
    """A release's items as dptop.releaselines prints them, from the JSON."""
    items = " · ".join(f"{it['address']} {it['estimate']:,.0f}" for it in release["items"][:5]) or "(nothing above τ)"
    return items + (f" (+{len(release['items']) - 5})" if len(release["items"]) > 5 else "")


def line_of(release: dict, family: str) -> tuple[str | None, str | None, str]:
    """What a printed line must show of the JSON's ``release``: a single-release epoch's span and
    threshold; for the other families only the threshold where it is public (a window's), their
    span being the epoch of the public clock whose close the line follows."""
    where = span_text(span_from_json(release["span"]), "packets") if family == "single-release" else None
    public = family in ("single-release", "sliding window") and release["threshold"] is not None
    return where, (f"{release['threshold']:,.0f}" if public else None), items_of(release)


def public_of(release: dict) -> dict:
    """What the private view shows of a release: a live continual or window span keeps no packet
    positions (dptop.monitor.publish.public_span), so the view is matched field by field."""
    return {"span": release["span"], "threshold": release["threshold"],
            "items": [(it["address"], it["estimate"]) for it in release["items"]]}


def view_holds(view: dict, release: dict) -> bool:
    """The view's release ``view`` is the JSON's ``release``: kind, index, threshold, items, and
    the positions where the view keeps them (a threshold hidden with them: LazyHH's τ(t))."""
    span, got = release["span"], view["span"]
    return (got["kind"] == span["kind"] and got["index"] == span.get("index", 0)
            and all(got[f] == span.get(f) for f in ("start", "end") if f in got)
            and (view["threshold"] == release["threshold"] or (view["threshold"] is None and "end" not in got))
            and view["items"] == [(it["address"], it["estimate"]) for it in release["items"]])


@pytest.mark.live
@pytest.mark.skipif(os.geteuid() != 0, reason="a live capture needs root (CAP_NET_RAW)")
def test_every_release_line_of_a_live_capture_is_in_the_json_and_the_private_view(tmp_path):
    port = 30000 + os.getpid() % 20000
    out, view, text = tmp_path / "run.json", tmp_path / "view.json", tmp_path / "stdout.txt"
    capture = subprocess.Popen(
        [sys.executable, "-m", "dptop", "capture", "--iface", "lo", "--bpf", f"udp dst port {port}",
         "--duration", "14", "--epoch-seconds", "3", "--json", str(out), "--publish", str(view),
         "--progress", "always"], stdout=text.open("w"), stderr=subprocess.PIPE, text=True)
    for line in capture.stderr:  # the first progress line: the capture is running
        if "packets read" in line:
            break
    sender = subprocess.Popen([sys.executable, "-m", "dptop.capture.lab.paced", "--rate", "2000", "--seconds", "8",
                               "--share", "127.0.0.2=0.3", "--port", str(port)], stdout=subprocess.DEVNULL)
    try:
        _, stderr = capture.communicate(timeout=600)
    finally:
        sender.kill()
    stdout = text.read_text()
    assert capture.returncode == 0, stderr
    result, private = json.loads(out.read_text()), json.loads(view.read_text())
    printed: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        m = LINE.match(line)
        if m:
            printed.setdefault(m.group(1), []).append(f"{m.group(1)} {m.group(2)}")
    private_names = [n for n, a in result["algorithms"].items() if a["private"]]
    assert set(printed) == set(private_names), stdout
    for name in private_names:
        json_releases, family = result["algorithms"][name]["releases"], result["algorithms"][name]["family"]
        in_json = [line_of(r, family) for r in json_releases]
        in_view = [public_of(r) for r in private["algorithms"][name]["releases"]]
        assert len(printed[name]) >= 2, printed[name]
        for line in printed[name]:
            _, _, where, threshold, items = parse_line(f"00:00:00 {line}")
            got = (where if family == "single-release" else None, threshold, items)
            assert got in in_json, (line, in_json)
            shown = json_releases[in_json.index(got)]
            assert any(view_holds(v, shown) for v in in_view), (line, in_view)
            if family != "single-release":  # the epoch whose close it follows, never a count of packets
                assert where.startswith("after epoch ") and not re.search(r"packets [\d,]+-", where), line
    # the last epochs' tables read back aligned, with the exact counts beside
    assert any("127.0.0.2" in [r["source"] for r in t["rows"]] for t in tables(stdout)[1:]), stdout
