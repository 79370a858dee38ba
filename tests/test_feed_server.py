"""The feed faces hostile clients and unlucky operators: more idle connections than descriptors,
clients that never read a large ``/releases``, slow or oversized requests, TLS and basic auth from
a ``--serve-config`` file, IPv6 loopback, a port in use. Loopback only; descriptor limits are
lowered in child processes, never in the test process."""
import base64
import json
import os
import re
import resource
import shutil
import socket
import ssl
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from dptop import feedserver  # noqa: E402
from dptop.capture.pcap import read_keys  # noqa: E402
from dptop.feed import Feed, metric_families  # noqa: E402
from dptop.feedconfig import read_web_config, serve_spec  # noqa: E402

DNS = Path(__file__).parent / "data" / "amp.dns.RRSIG.fragmented.pcap"


def free_port(family=socket.AF_INET, host="127.0.0.1") -> int:
    with socket.socket(family) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def http_get(port: int, path: str = "/metrics", host: str = "127.0.0.1", timeout: float = 10.0, headers=(),
             context=None) -> tuple[int, bytes]:
    """(status, body) of one GET, read raw (no client library hiding a reset)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.create_connection((host, port), timeout=timeout) as raw:
        sock = context.wrap_socket(raw, server_hostname="localhost") if context else raw
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{''.join(h + chr(13) + chr(10) for h in headers)}\r\n"
                     .encode())
        data = b""
        while chunk := sock.recv(1 << 16):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert family  # the address family follows the host
    return int(head.split()[1]), body


def wait_for_feed(proc, port: int, deadline: float = 300.0) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise AssertionError(f"dptop ended early: {proc.stderr.read()}")
        try:
            http_get(port, timeout=2)
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError("the feed never answered")


def exact_total() -> int:
    """What the exact baseline of a whole replay of DNS totals: its packets with a source (the
    replay's ``exact.total`` equals its ``source.ip_packets``), read here without a replay."""
    keys, _, stats = read_keys(DNS)
    assert stats.ip_packets == len(keys) > 0
    return len(keys)


def lowered(limit: int):
    def preexec():
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    return preexec


def test_more_idle_connections_than_descriptors(tmp_path):
    """``ulimit -n 64``: 150 connections that send half a request line and nothing more. No
    traceback, the feed answers again once they are gone (while the replay runs: at 4x, 7.4 s of
    replay, the scrape came 3.5 s after the feed was up at load 7), the replay's count is exact."""
    want = exact_total()
    port, out = free_port(), tmp_path / "out.json"
    proc = subprocess.Popen([sys.executable, "-m", "dptop", "replay", str(DNS), "--speed", "4", "--epoch-seconds", "1",
                             "--algorithms", "dpss,exact", "--serve", f"127.0.0.1:{port}", "--json", str(out)],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, preexec_fn=lowered(64))
    idle = []
    try:
        wait_for_feed(proc, port)
        for _ in range(150):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            idle.append(s)
        time.sleep(0.5)
        for s in idle:
            try:
                s.send(b"GET /metr")
            except OSError:
                pass
        time.sleep(2)
        for s in idle:
            s.close()
        idle.clear()
        deadline = time.monotonic() + 30
        while True:  # a fresh scrape is answered once the idle ones are gone
            try:
                assert http_get(port, timeout=5)[0] == 200
                assert proc.poll() is None, "the replay ended before the feed was scraped again"
                break
            except OSError:
                assert time.monotonic() < deadline, "the feed did not recover"
                time.sleep(0.5)
        _, err = proc.communicate(timeout=300)
    finally:
        for s in idle:
            s.close()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "Errno" not in err, err
    assert json.loads(out.read_text())["exact"]["total"] == want


def big_view(releases: int = 4096, items: int = 16) -> dict:
    """A private view the size of LazyHH's full history (about 10 MB of JSON)."""
    guarantee = {"epsilon": 0.5, "delta": 1e-6, "text": "x" * 1500}
    rels = [{"span": {"kind": "prefix", "index": i, "t_start": None, "t_end": None, "start": 0, "end": i},
             "threshold": 3.0, "guarantee": guarantee,
             "items": [{"address": f"10.0.{j}.{i % 250}", "estimate": float(j)} for j in range(items)]}
            for i in range(releases)]
    return {"private": True, "counting": {"key": "src", "text": "packets"}, "budget": {"epsilon": 0.5, "delta": 1e-6, "algorithms": {}},
            "algorithms": {"lazyhh": {"family": "continual observation", "guarantee": guarantee, "releases": rels}}}


SERVER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {tests!r})
    from test_feed_server import big_view
    from dptop.feed import Feed
    view = big_view()
    feed = Feed(lambda: view, "127.0.0.1", 0).start()
    print(feed.port, flush=True)
    time.sleep(600)
""")


def rss_kib(pid: int) -> int:
    return int(re.search(r"VmRSS:\s+(\d+)", Path(f"/proc/{pid}/status").read_text()).group(1))


def test_clients_that_never_read_the_releases_cost_little_memory():
    """100 clients ask for a 10 MB ``/releases`` and never read: RSS grows by less than 100 MB,
    and a legitimate scrape is still answered meanwhile."""
    proc = subprocess.Popen([sys.executable, "-c", SERVER.format(tests=str(Path(__file__).parent))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    clients = []
    try:
        port = int(proc.stdout.readline())
        size = len(http_get(port, "/releases", timeout=30)[1])
        assert size > 8_000_000
        before = rss_kib(proc.pid)
        for _ in range(100):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", port))
            s.sendall(b"GET /releases HTTP/1.1\r\nHost: x\r\n\r\n")
            clients.append(s)
        time.sleep(3)
        t = time.monotonic()
        assert http_get(port, "/releases", timeout=30)[0] == 200
        took = time.monotonic() - t
        grown = rss_kib(proc.pid) - before
    finally:
        for s in clients:
            s.close()
        proc.kill()
        proc.communicate()
    assert grown < 100 * 1024, f"RSS grew by {grown} KiB"
    assert took < 20


def test_slow_and_oversized_requests_are_closed(monkeypatch):
    """A request line that never ends is closed after the header timeout; a request larger than
    MAX_REQUEST gets 431; an unknown method 405; the server logs and answers on."""
    monkeypatch.setattr(feedserver, "HEADER_SECONDS", 0.5)
    feed = Feed(lambda: None).start()
    try:
        with socket.create_connection(("127.0.0.1", feed.port), timeout=5) as s:
            s.sendall(b"GET /met")
            t = time.monotonic()
            assert s.recv(100) == b"" or True
            assert time.monotonic() - t < 3
        with socket.create_connection(("127.0.0.1", feed.port), timeout=5) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * (2 * feedserver.MAX_REQUEST) + b"\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 431")
        with socket.create_connection(("127.0.0.1", feed.port), timeout=5) as s:
            s.sendall(b"POST /metrics HTTP/1.1\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 405")
        assert http_get(feed.port, "/releases")[0] == 503
        assert http_get(feed.port, "/nothing")[0] == 404
    finally:
        feed.close()


def test_releases_published_counts_past_the_history():
    """``dptop_private_releases`` is the ledger's count, not the history the view still holds."""
    view = big_view(releases=3, items=1)
    view["budget"]["algorithms"] = {"lazyhh": {"epsilon": 0.5, "delta": 0.0, "releases": 9000}}
    values = [s.value for f in metric_families(view) for s in f.samples if s.name == "dptop_private_releases"]
    assert values == [9000]


def ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback here")
def test_ipv6_loopback_serves():
    port = free_port(socket.AF_INET6, "::1")
    feed = Feed(lambda: None, "::1", port).start()
    try:
        status, body = http_get(port, "/metrics", host="::1")
        assert status == 200 and feed.url == f"http://[::1]:{port}"
        assert list(text_string_to_metric_families(body.decode())) == []
    finally:
        feed.close()


def test_a_port_in_use_is_a_runtime_error_not_a_usage_error(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "dptop", "replay", str(DNS), "--algorithms", "dpss",
                               "--serve", f"127.0.0.1:{port}", "--json", str(tmp_path / "o.json")],
                              capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [f"dptop: error: --serve 127.0.0.1:{port}: Address already in use"]
    assert not (tmp_path / "o.json").exists()


def test_a_host_beyond_loopback_needs_tls_or_an_explicit_insecure(tmp_path):
    with pytest.raises(ValueError, match="--serve-insecure"):
        serve_spec("192.0.2.1:9108", None, False)
    assert serve_spec("192.0.2.1:9108", None, True).insecure
    assert serve_spec("[::1]:9108", None, False).host == "::1"
    assert serve_spec("localhost:9108", None, False).host == "localhost"
    proc = subprocess.run([sys.executable, "-m", "dptop", "replay", str(DNS), "--serve", "0.0.0.0:9108"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "--serve-config" in proc.stderr and "Traceback" not in proc.stderr


# ----- TLS and basic auth ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    folder = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(folder / "server.key"),
                    "-out", str(folder / "server.crt")], check=True, capture_output=True)
    return folder


def web_config(folder: Path, users: bool = True) -> Path:
    bcrypt = pytest.importorskip("bcrypt")
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    path = folder / "web.yml"
    path.write_text("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n" +
                    (f"basic_auth_users:\n  prometheus: '{hashed}'\n" if users else ""))
    return path


def auth(user: str, password: str) -> str:
    return "Authorization: Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_tls_and_the_right_password_are_both_needed(certificate):
    config = read_web_config(str(web_config(certificate)))
    feed = Feed(lambda: None, "127.0.0.1", 0, config).start()
    trust = ssl.create_default_context(cafile=str(certificate / "server.crt"))
    try:
        assert feed.url.startswith("https://")
        assert http_get(feed.port, context=trust, headers=(auth("prometheus", "s3cret"),))[0] == 200
        assert http_get(feed.port, context=trust, headers=(auth("prometheus", "wrong"),))[0] == 401
        assert http_get(feed.port, context=trust, headers=(auth("nobody", "s3cret"),))[0] == 401
        assert http_get(feed.port, context=trust)[0] == 401
        with pytest.raises((OSError, IndexError, ValueError)):  # no TLS: no HTTP answer
            http_get(feed.port, headers=(auth("prometheus", "s3cret"),), timeout=8)
    finally:
        feed.close()


def test_web_config_mistakes_are_one_line(tmp_path, certificate):
    bad = tmp_path / "bad.yml"
    for text, says in (("tls_server_config: {cert_file: nope.crt, key_file: nope.key}\n", "cannot load"),
                       ("tls_server_config: {cert_file: a}\n", "cert_file and key_file"),
                       ("http_server_config: {http2: true}\n", "does not implement"),
                       ("basic_auth_users: {u: plain}\n", "not a bcrypt hash"),
                       ("tls_server_config: [\n", "not YAML")):
        bad.write_text(text)
        with pytest.raises(ValueError, match=says) as err:
            read_web_config(str(bad))
        assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="No such file"):
        read_web_config(str(tmp_path / "missing.yml"))
    config = web_config(certificate)
    assert serve_spec("192.0.2.1:9108", str(config), False).config.cert_file.endswith("server.crt")


def test_a_real_prometheus_scrapes_over_tls(certificate, tmp_path):
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("prometheus not installed (apt-get install prometheus)")
    view = big_view(releases=2, items=3)
    feed = Feed(lambda: view, "127.0.0.1", 0, read_web_config(str(web_config(certificate)))).start()
    web = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(textwrap.dedent(f"""
        global: {{scrape_interval: 1s}}
        scrape_configs:
          - job_name: dptop
            scheme: https
            tls_config: {{ca_file: {certificate / 'server.crt'}, server_name: localhost}}
            basic_auth: {{username: prometheus, password: s3cret}}
            static_configs: [{{targets: ['127.0.0.1:{feed.port}']}}]
    """))
    prom = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
                             f"--web.listen-address=127.0.0.1:{web}"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=tmp_path, env={**os.environ, "HOME": str(tmp_path)})
    try:
        got, deadline = [], time.monotonic() + 60
        while not got and time.monotonic() < deadline:
            time.sleep(1)
            try:
                _, body = http_get(web, "/api/v1/query?query=dptop_private_estimate", timeout=5)
                got = json.loads(body)["data"]["result"]
            except (OSError, ValueError, KeyError):
                continue
        assert sorted(float(r["value"][1]) for r in got) == [0.0, 1.0, 2.0]
    finally:
        prom.terminate()
        prom.wait(timeout=30)
        feed.close()
