"""``--serve [HOST:]PORT``: the private view of a running session over HTTP, and nothing else.

* ``/releases`` — the private view's JSON, the schema of ``--publish`` (``dptop.monitor.publish``);
* ``/metrics`` — the same in the Prometheus text format (prometheus_client, extra ``feed``): one
  series ``dptop_private_estimate`` per key of each private algorithm's latest release, labelled
  with the algorithm, the key kind, the key, its rank and the guarantee's ε and δ; the release's
  threshold and index; the ledger (``dptop_budget_epsilon`` / ``_delta``, per algorithm too).

A run whose noise is seeded (``--seed``) says so on every series: a ``private="false"`` label, the
help text starting with ``NOT private``, and the marker series ``dptop_not_private``.

No exact count, no packet or drop counter and no process metric is served (the registry holds
only this collector). ``dptop_private_releases`` counts every release published (the ledger's
count), not only the history the view still holds. Loopback unless another host is named, and
another host only with ``--serve-config`` (TLS, basic auth: dptop.feedconfig) or
``--serve-insecure``. The documents are built at most once per period and shared by every client
(``Documents``); the server (dptop.feedserver) bounds connections, time and request size.
"""
from __future__ import annotations

import json
import math
import time

from dptop.engine.core.extras import FEED, require
from dptop.feedconfig import LOOPBACK, ServeSpec, WebConfig, parse_serve
from dptop.feedserver import HttpServer
from dptop.monitor.publish import publish_json

__all__ = ["Feed", "LOOPBACK", "ServeSpec", "metric_families", "parse_serve", "serve", "serve_current"]

NOT_PRIVATE = "NOT private (seeded noise)"


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
    ledger = (view["budget"] or {}).get("algorithms") or {}
    for name, a in view["algorithms"].items():  # the ledger counts every release, the view holds the latest
        published.add_metric([name, flag], max(len(a["releases"]), int((ledger.get(name) or {}).get("releases") or 0)))
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
        return () if self.view is None else metric_families(self.view)


class Documents:
    """The feed's documents (``/releases``, ``/metrics``) from one private view, built at most once
    per ``REFRESH`` seconds and no more often than ``BUSY`` times its last build took, so the cost
    to the session is bounded whatever the number of clients; every client of a period shares the
    same bytes, and both documents of a period show the same releases. ``view()`` builds the
    private view (None: no session, 503, not kept). Called on one thread only."""

    REFRESH = 1.0
    BUSY = 10.0

    def __init__(self, view):
        from prometheus_client import CollectorRegistry, generate_latest
        import prometheus_client.core  # noqa: F401 - loaded now, before the feed listens

        self.view, self._render, self._registry = view, generate_latest, CollectorRegistry
        self._made, self._took, self._current = -math.inf, 0.0, None
        self._answers: dict[str, tuple[int, str, bytes]] = {}
        self._render(CollectorRegistry(auto_describe=False))

    def answer(self, path: str) -> tuple[int, str, bytes]:
        if path not in ("/metrics", "/releases"):
            return 404, "text/plain", b"dptop private feed: /releases (JSON), /metrics (Prometheus)\n"
        now = time.monotonic()
        if self._current is None or now - self._made >= max(self.REFRESH, self.BUSY * self._took):
            self._current, self._answers = self.view(), {}
            self._made, self._took = now, time.monotonic() - now
        if path not in self._answers:
            self._answers[path] = self._build(path, self._current)
        return self._answers[path]

    def _build(self, path: str, view: dict | None) -> tuple[int, str, bytes]:
        from prometheus_client import CONTENT_TYPE_LATEST

        if path == "/metrics":
            registry = self._registry(auto_describe=False)
            registry.register(_Collector(view))
            return 200, CONTENT_TYPE_LATEST, self._render(registry)
        if view is None:
            return 503, "text/plain", b"no session is running\n"
        return 200, "application/json", json.dumps(view, default=str).encode()


class Feed:
    """The HTTP server of ``--serve`` (dptop.feedserver) on a daemon thread; ``view()`` builds the
    private view. Everything it needs is imported and loaded before it listens."""

    def __init__(self, view, host: str = LOOPBACK, port: int = 0, config: WebConfig | None = None):
        require(FEED)
        self.documents = Documents(view)
        context = None if config is None else config.ssl_context()
        authorize = None if config is None or not config.users else config.authorizer()
        try:
            self.server = HttpServer(self.documents.answer, host, port, context, authorize)
        except OSError as exc:
            raise OSError(f"--serve {join_host(host, port)}: {exc.strerror or exc}") from None
        self.host, self.port = host, self.server.port
        self.url = f"{'https' if context else 'http'}://{join_host(host, self.port)}"

    def start(self) -> "Feed":
        self.server.start()
        return self

    def close(self) -> None:
        self.server.close()


def join_host(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def serve(session, where) -> Feed:
    """Start the feed of ``session``'s private view at ``where`` (``[HOST:]PORT`` or a ``ServeSpec``)."""
    return serve_current(lambda: session, where)


def serve_current(current, where) -> Feed:
    """The feed of whichever session ``current()`` returns (the window's, which Start replaces);
    answers 503 while there is none."""
    spec = where if isinstance(where, ServeSpec) else ServeSpec(*parse_serve(where))
    return Feed(lambda: None if current() is None else publish_json(current(), "serve"), spec.host, spec.port,
                spec.config).start()
