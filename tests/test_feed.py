"""``--serve``: the private feed serves exactly the private view's latest releases and the ledger,
never an exact count; read back by a real Prometheus server where one is installed."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from dptop.feed import Feed, parse_serve  # noqa: E402
from dptop.monitor.config import CountingChoice, RunConfig, SourceSpec  # noqa: E402
from dptop.monitor.publish import publish_json  # noqa: E402
from dptop.monitor.session import Session  # noqa: E402

DNS = Path(__file__).parent / "data" / "amp.dns.RRSIG.fragmented.pcap"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read()


def series(text: str) -> dict:
    """``{(name, frozenset(labels)): value}`` of a Prometheus text exposition."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def expected(view_json: dict) -> dict:
    """The estimate series the latest release of each private algorithm must give."""
    out = {}
    for name, a in view_json["algorithms"].items():
        if not a["releases"]:
            continue
        rel = a["releases"][-1]
        g = rel["guarantee"]
        for rank, it in enumerate(rel["items"], 1):
            labels = {"algorithm": name, "key_kind": view_json["counting"]["key"], "key": it["address"],
                      "rank": str(rank), "epsilon": f"{g['epsilon']:g}", "delta": f"{g['delta']:g}",
                      "private": "true" if view_json["private"] else "false"}
            out[("dptop_private_estimate", frozenset(labels.items()))] = it["estimate"]
    return out


def test_parse_serve():
    assert parse_serve("9100") == ("127.0.0.1", 9100)
    assert parse_serve("0.0.0.0:80") == ("0.0.0.0", 80)
    assert parse_serve("[::1]:9100") == ("::1", 9100)
    for bad in ("x", "70000", ":9100", "host:"):
        with pytest.raises(ValueError, match="--serve"):
            parse_serve(bad)


def test_metrics_during_a_paced_replay_are_the_released_estimates(tmp_path):
    """``dptop replay FILE --speed 0.5 --serve 127.0.0.1:PORT``: each scrape's estimate series equal
    the latest private releases of /releases read just before and after it (when those agree),
    and no series carries an exact count (the exact baseline runs beside them)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "dptop", "replay", str(DNS), "--speed", "0.5", "--epoch-seconds", "1",
                             "--algorithms", "dpss,exact,countmin", "--key", "dport", "--serve", f"127.0.0.1:{port}",
                             "--json", str(tmp_path / "out.json")], stderr=subprocess.PIPE, text=True)
    try:
        checked, deadline = 0, time.monotonic() + 60
        while checked < 3 and time.monotonic() < deadline:
            try:
                before = json.loads(get(f"http://127.0.0.1:{port}/releases"))
                text = get(f"http://127.0.0.1:{port}/metrics").decode()
                after = json.loads(get(f"http://127.0.0.1:{port}/releases"))
            except OSError:
                time.sleep(0.3)
                continue
            want = expected(before)
            if want and want == expected(after):
                got = series(text)
                assert {k: v for k, v in got.items() if k[0] == "dptop_private_estimate"} == want
                algorithms = {dict(labels).get("algorithm") for _, labels in got} - {None}
                assert algorithms == {"dpss"}, algorithms  # nothing of exact or countmin
                assert got[("dptop_budget_epsilon", frozenset({("private", "true")}))] == before["budget"]["epsilon"]
                assert set(before["algorithms"]) == {"dpss"} and "exact" not in before
                checked += 1
            time.sleep(0.5)
        assert checked == 3, "no stable releases seen in 60 s"
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert "serving the private view at http://127.0.0.1:" in err


@pytest.fixture(scope="module")
def finished_session():
    session = Session(RunConfig(("dpss", "exact", "lazyhh"), counting=CountingChoice(key="src/24")))
    session.open(SourceSpec("file", path=str(DNS)))
    while session.wait(0.2) not in ("finished", "stopped", "failed"):
        pass
    yield session
    session.close(timeout=5.0)


def test_feed_answers_only_its_two_paths_on_loopback(finished_session):
    feed = Feed(lambda: publish_json(finished_session, "serve")).start()
    try:
        assert feed.host == "127.0.0.1"
        with pytest.raises(urllib.error.HTTPError) as err:
            get(f"http://127.0.0.1:{feed.port}/")
        assert err.value.code == 404
        view = json.loads(get(f"http://127.0.0.1:{feed.port}/releases"))
        assert set(view["algorithms"]) == {"dpss", "lazyhh"} and view["counting"]["key"] == "src/24"
        assert "exact" not in view["algorithms"] and view["schema_version"] == 1
    finally:
        feed.close()


def test_a_real_prometheus_reads_the_series_back(finished_session, tmp_path):
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("prometheus not installed (apt-get install prometheus)")
    feed = Feed(lambda: publish_json(finished_session, "serve")).start()
    web = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: dptop\n    static_configs:\n"
                      f"      - targets: ['127.0.0.1:{feed.port}']\n")
    prom = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
                             f"--web.listen-address=127.0.0.1:{web}"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=tmp_path, env={**os.environ, "HOME": str(tmp_path)})
    try:
        want = {dict(labels)["key"]: v for (name, labels), v in
                expected(publish_json(finished_session, "serve")).items() if dict(labels)["algorithm"] == "dpss"}
        assert want
        got, deadline = {}, time.monotonic() + 60
        query = "dptop_private_estimate{algorithm=%22dpss%22}"
        while got != want and time.monotonic() < deadline:
            time.sleep(1)
            try:
                answer = json.loads(get(f"http://127.0.0.1:{web}/api/v1/query?query={query}"))
            except OSError:
                continue
            got = {r["metric"]["key"]: float(r["value"][1]) for r in answer["data"]["result"]}
        assert got == want
        top = json.loads(get(f"http://127.0.0.1:{web}/api/v1/query?query="
                             "topk(3,%20dptop_private_estimate{algorithm=%22dpss%22})"))["data"]["result"]
        assert sorted(float(r["value"][1]) for r in top) == sorted(want.values())[-3:]
    finally:
        prom.terminate()
        prom.wait(timeout=30)
        feed.close()


def test_the_window_feed_follows_its_current_session(finished_session):
    """``dptop gui --serve``: the feed serves whichever session the window runs, 503 while none."""
    from dptop.feed import serve_current
    current = {"session": None}
    feed = serve_current(lambda: current["session"], f"127.0.0.1:{free_port()}")
    try:
        with pytest.raises(urllib.error.HTTPError) as err:
            get(f"http://127.0.0.1:{feed.port}/releases")
        assert err.value.code == 503
        assert "dptop_private_estimate" not in get(f"http://127.0.0.1:{feed.port}/metrics").decode()
        current["session"] = finished_session
        assert json.loads(get(f"http://127.0.0.1:{feed.port}/releases"))["counting"]["key"] == "src/24"
        assert "dptop_private_estimate{" in get(f"http://127.0.0.1:{feed.port}/metrics").decode()
    finally:
        feed.close()
