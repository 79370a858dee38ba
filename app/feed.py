"""``--serve [HOST:]PORT``: the private view of a running session over HTTP, and nothing else.

* ``/releases`` — the private view's JSON, the schema of ``--publish`` (``dptop.monitor.publish``);
* ``/metrics`` — the same in the Prometheus text format (prometheus_client, extra ``feed``): one
  series ``dptop_private_estimate`` per key of each private algorithm's latest release, labelled
  with the algorithm, the key kind, the key, its rank and the guarantee's ε and δ; the release's
  threshold and index; the ledger (``dptop_budget_epsilon`` / ``_delta``, per algorithm too).

A run whose noise is seeded (``--seed``) says so on every series: a ``private="false"`` label, the
help text starting with ``NOT private``, and the marker series ``dptop_not_private``.

No exact count, no packet or drop counter and no process metric is served (the registry holds
only this collector). Loopback unless another host is named; every request is answered from one
``publish_json`` built for it.
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from dptop.engine.core.extras import FEED, require
from dptop.monitor.publish import publish_json

LOOPBACK = "127.0.0.1"
NOT_PRIVATE = "NOT private (seeded noise)"


def parse_serve(text: str) -> tuple[str, int]:
    """``PORT`` or ``HOST:PORT`` (``[v6]:PORT``) -> (host, port); host defaults to loopback."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]") if sep else LOOPBACK
    try:
        number = int(port)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535 or (sep and not host):
        raise ValueError(f"--serve ({text!r}) must be PORT or HOST:PORT with a port in [0, 65535]")
    return host, number


def metric_families(view: dict):
    """The Prometheus metric families of the private view ``view`` (``publish_json``; estimates
    and thresholds are already in the unit shown)."""
    from prometheus_client.core import GaugeMetricFamily

    kind = view["counting"]["key"]
    private = view["private"] and (view["budget"] or {}).get("private", True)
    flag, say = ("true", "") if private else ("false", NOT_PRIVATE + ": ")
    est = GaugeMetricFamily("dptop_private_estimate",
                            f"{say}private estimate of the latest release, {view['counting']['text']}",
                            labels=["algorithm", "key_kind", "key", "rank", "epsilon", "delta", "private"])
    thr = GaugeMetricFamily("dptop_private_threshold",
                            f"{say}threshold an estimate had to exceed in the latest release",
                            labels=["algorithm", "key_kind", "epsilon", "delta", "private"])
    index = GaugeMetricFamily("dptop_private_release_index",
                              f"{say}epoch, horizon or window index of the latest release",
                              labels=["algorithm", "key_kind", "private"])
    published = GaugeMetricFamily("dptop_private_releases", f"{say}releases published so far",
                                  labels=["algorithm", "private"])
    for name, a in view["algorithms"].items():
        published.add_metric([name, flag], len(a["releases"]))
        if not a["releases"]:
            continue
        rel = a["releases"][-1]
        g = rel["guarantee"]
        eps, delta = f"{g['epsilon']:g}", "" if g["delta"] is None else f"{g['delta']:g}"
        for rank, item in enumerate(rel["items"], 1):
            est.add_metric([name, kind, item["address"], str(rank), eps, delta, flag], item["estimate"])
        if rel["threshold"] is not None:
            thr.add_metric([name, kind, eps, delta, flag], rel["threshold"])
        index.add_metric([name, kind, flag], rel["span"]["index"])
    yield from (est, thr, index, published)
    yield from ledger_families(view["budget"], flag, say)
    if not private:
        marker = GaugeMetricFamily("dptop_not_private", f"{NOT_PRIVATE}: every series of this feed",
                                   labels=["reason"])
        marker.add_metric(["seeded noise (--seed)"], 1.0)
        yield marker


def ledger_families(budget: dict | None, flag: str = "true", say: str = ""):
    from prometheus_client.core import GaugeMetricFamily

    if not budget:
        return
    unit = budget.get("neighbouring", "")
    for what in ("epsilon", "delta"):
        total = GaugeMetricFamily(f"dptop_budget_{what}", f"{say}the ledger's total {what} per packet ({unit})",
                                  labels=["private"])
        total.add_metric([flag], float(budget.get(what) or 0.0))
        yield total
        per = GaugeMetricFamily(f"dptop_budget_algorithm_{what}", f"{say}{what} per packet spent by each algorithm",
                                labels=["algorithm", "private"])
        for name, line in (budget.get("algorithms") or {}).items():
            per.add_metric([name, flag], float(line.get(what) or 0.0))
        yield per


class _Collector:
    def __init__(self, view):
        self.view = view

    def collect(self):
        view = self.view()
        return () if view is None else metric_families(view)


class Feed:
    """The HTTP server of ``--serve``, on a daemon thread; ``view()`` builds the private view."""

    def __init__(self, view, host: str = LOOPBACK, port: int = 0):
        require(FEED)
        from prometheus_client import CollectorRegistry

        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(view))
        self.view, self.registry = view, registry
        feed = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                feed.answer(self)

            def log_message(self, *args):
                pass

        try:
            self.server = ThreadingHTTPServer((host, port), Handler)
        except OSError as exc:
            raise ValueError(f"--serve {host}:{port}: {exc.strerror or exc}") from None
        self.server.daemon_threads = True
        self.host, self.port = host, self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, name="dptop-feed", daemon=True)

    def start(self) -> "Feed":
        self.thread.start()
        return self

    def answer(self, request) -> None:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
        path = request.path.split("?", 1)[0]
        code, ctype = 200, "text/plain"
        if path == "/metrics":
            body, ctype = generate_latest(self.registry), CONTENT_TYPE_LATEST
        elif path == "/releases":
            view = self.view()
            body, ctype = (json.dumps(view, default=str).encode(), "application/json") if view else \
                (b"no session is running\n", ctype)
            code = 200 if view else 503
        else:
            code, body = 404, b"dptop private feed: /releases (JSON), /metrics (Prometheus)\n"
        try:
            request.send_response(code)
            request.send_header("Content-Type", ctype)
            request.send_header("Content-Length", str(len(body)))
            request.end_headers()
            request.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve(session, where: str) -> Feed:
    """Start the feed of ``session``'s private view at ``where`` (``[HOST:]PORT``)."""
    return serve_current(lambda: session, where)


def serve_current(current, where: str) -> Feed:
    """The feed of whichever session ``current()`` returns (the window's, which Start replaces);
    answers 503 while there is none."""
    host, port = parse_serve(where)
    return Feed(lambda: None if current() is None else publish_json(current(), "serve"), host, port).start()
