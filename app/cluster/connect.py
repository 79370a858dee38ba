"""Where cluster work runs: in this process, an embedded Dask ``LocalCluster``, or an existing
Dask scheduler.

``cluster`` is ``None`` (in-process, no Dask), ``"local:N"`` (a LocalCluster of N single-threaded
worker processes on 127.0.0.1, closed afterwards), ``"tcp://HOST:PORT"`` or ``"tls://HOST:PORT"``
(a running scheduler; its workers need dptop installed and, for archive replay, the files at the
same paths), or a ``distributed.Client`` the caller owns (tests use this with ``processes=False``).

Over ``tls://`` every client and worker takes its certificates from Dask's own configuration
(``distributed.comm.tls.*``, e.g. the ``DASK_DISTRIBUTED__COMM__TLS__CA_FILE`` environment
variable), which Dask's ``Security`` reads; dptop names no certificate itself. Dask's TLS is
mutual: the scheduler takes only peers whose certificate its CA signed. A plain ``tcp://``
address beyond loopback is refused unless the caller says ``insecure`` (anyone who reaches a
Dask scheduler can run code on its workers: README, "What an attacker on the network can do").

Every dptop client deserializes msgpack only (``client_for``): a result or message that another
peer pickled is refused by Dask's protocol before any of it is loaded.
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import threading
from pathlib import Path

from dptop.engine.core.extras import CLUSTER, require
from dptop.engine.core.settings import Range

CLUSTER_RULE = "cluster ({!r}) must be local:N (N >= 1 workers), tcp://HOST:PORT or tls://HOST:PORT"
TLS_CONFIG = "distributed.comm.tls.ca-file"
WORKERS_PER_CPU = 2
"""Single-threaded local workers per usable CPU: more only queue for the same cores (and each is
a process holding its own kernels)."""


def local_workers() -> Range:
    """How many workers ``local:N`` may start on this machine."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return Range(f"local workers (this machine: {cpus} CPUs, at most {WORKERS_PER_CPU} per CPU)", 1,
                 WORKERS_PER_CPU * cpus, integer=True)
_LOCAL = re.compile(r"local:(\d+)")
_TCP = re.compile(r"(tcp|tls)://([^\s/]+):\d+")
LOOPBACK = re.compile(r"localhost|127(\.\d{1,3}){3}|\[::1\]")
DESERIALIZERS = ["msgpack"]
"""What a dptop client loads from the network: plain msgpack, never a pickle."""


def check_cluster(cluster, insecure: bool = False):
    """Validate a cluster spec (a string or a Client); returns it. ``insecure``: a plain
    ``tcp://`` address beyond loopback is allowed."""
    if cluster is None or not isinstance(cluster, str):
        return cluster
    require(CLUSTER)
    m = _LOCAL.fullmatch(cluster)
    if m:
        try:
            local_workers().check(int(m.group(1)))
        except ValueError as exc:
            raise ValueError(f"cluster ({cluster!r}): {exc}") from None
        return cluster
    if _TCP.fullmatch(cluster):
        return check_tls(cluster, insecure)
    raise ValueError(CLUSTER_RULE.format(cluster))


def check_tls(address: str, insecure: bool = False) -> str:
    """``address``; a ``tls://`` one only when Dask's configuration names the certificates, a plain
    ``tcp://`` one only on loopback unless ``insecure``."""
    require(CLUSTER)
    m = _TCP.fullmatch(address)
    if m is None:
        raise ValueError(f"{address!r} is not tcp://HOST:PORT or tls://HOST:PORT")
    if m.group(1) == "tcp" and not insecure and not LOOPBACK.fullmatch(m.group(2)):
        raise ValueError(f"{address}: plain tcp:// beyond loopback lets anyone on the network run code on the "
                         f"agents and read their summaries; use tls:// with certificates (see the README), or "
                         f"--insecure on a network you trust")
    if address.startswith("tls://"):
        import dask

        if not dask.config.get(TLS_CONFIG, None):
            raise ValueError(f"{address}: TLS needs the user's certificates in Dask's configuration "
                             f"({TLS_CONFIG} and the client's and worker's cert and key, e.g. "
                             f"DASK_DISTRIBUTED__COMM__TLS__CA_FILE; see the README)")
    return address


def local_cluster(workers: int, processes: bool = True):
    """An embedded LocalCluster of ``workers`` single-threaded workers, no dashboard: worker
    processes talk over loopback TCP, thread workers (``processes=False``) in-process."""
    from distributed import LocalCluster

    where = {"host": "127.0.0.1"} if processes else {}
    # the scheduler always serves health routes over HTTP: on a free loopback port, no dashboard
    http = {"dashboard": False, "dashboard_address": "127.0.0.1:0"}
    with _terminal_signals_ignored():
        return LocalCluster(n_workers=workers, threads_per_worker=1, processes=processes, dashboard_address=None,
                            silence_logs=logging.ERROR, scheduler_kwargs=http, **where)


TERMINAL_SIGNALS = (signal.SIGINT, signal.SIGHUP)
"""Sent by a terminal to its whole foreground process group (Ctrl-C, a closed window)."""


@contextlib.contextmanager
def _terminal_signals_ignored():
    """Worker processes started meanwhile ignore Ctrl-C and hang-ups (an ignored disposition
    survives their exec, and Python then installs no KeyboardInterrupt handler): the main process
    alone handles them, stops the tasks and gathers what they read, instead of every worker dying
    with a traceback. The price: a Ctrl-C while the workers start (a few seconds) is not seen."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, signal.SIG_IGN) for s in TERMINAL_SIGNALS}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def quiet_dask(folder: Path | None = None):
    """Dask's own log lines (a worker lost, connections closed at shutdown) go to a log file under
    ``folder`` (default ``~/.cache/dptop``), created only if something is logged, instead of the
    user's terminal; dptop says what matters in its own lines."""
    folder = folder or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dptop"
    folder.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(folder / f"dask-{os.getpid()}.log", delay=True)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    saved = []
    for name in ("distributed", "tornado", "asyncio"):
        log = logging.getLogger(name)
        saved.append((log, log.handlers[:], log.propagate))
        log.handlers[:] = [handler]
        log.propagate = False
    try:
        yield
    finally:
        for log, handlers, propagate in saved:
            log.handlers[:] = handlers
            log.propagate = propagate
        handler.close()


@contextlib.contextmanager
def connect(cluster):
    """Yield a ``distributed.Client`` for ``cluster`` (``None`` for in-process), closing what it opened."""
    cluster = check_cluster(cluster, insecure=True)  # the caller checked the address against its policy
    if cluster is None or not isinstance(cluster, str):
        yield cluster
        return
    from distributed import Client

    if cluster.startswith("local:"):
        with local_cluster(int(cluster.split(":")[1])) as lc, Client(lc, deserializers=DESERIALIZERS) as client:
            yield client
    else:
        with client_for(cluster) as client:
            yield client


def client_for(address: str):
    """A ``distributed.Client`` of ``address`` that loads msgpack only from the network (it still
    pickles the tasks it sends: those are its own)."""
    from distributed import Client

    return Client(address, timeout="10s", deserializers=DESERIALIZERS)


def describe(cluster) -> str:
    if cluster is None:
        return "in-process"
    return cluster if isinstance(cluster, str) else f"client of {cluster.scheduler.address}"


def certificate_name(path: str | None) -> str | None:
    """The common name (CN) of the certificate at ``path``, or None without one. Over TLS an agent
    is named by its certificate, and the collector checks that name against the certificate the
    scheduler saw (dptop.cluster.collector)."""
    import ssl

    if not path:
        return None
    try:
        decoded = ssl._ssl._test_decode_cert(path)  # the standard library's only PEM reader
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"the certificate {path}: {exc}") from None
    return common_name(decoded.get("subject", ()))


def common_name(subject) -> str | None:
    """The CN of a certificate subject as ``ssl`` gives it (a tuple of RDN tuples)."""
    for rdn in subject or ():
        for key, value in rdn:
            if key == "commonName":
                return value
    return None


def check_reachable(address: str, role: str = "worker", security=None, timeout: float = 5.0) -> None:
    """Connect to the scheduler once as ``role`` and shake hands, so a refused certificate, a
    missing one or an unreachable scheduler is one ``ConnectionError`` line before a worker starts
    (a Dask worker would retry, or fail with a traceback)."""
    import asyncio
    import ssl

    from distributed import Security
    from distributed.comm import connect

    try:
        security = security or Security()
        args = security.get_connection_args(role)
    except (OSError, ValueError, ssl.SSLError) as exc:
        raise ConnectionError(f"{address}: the {role}'s TLS configuration is unusable ({exc})") from None
    if address.startswith("tls://"):
        tls = security.get_tls_config_for_role(role)
        if not (tls.get("cert") and tls.get("ca_file")):
            raise ConnectionError(f"{address}: TLS needs this {role}'s own certificate and key "
                                  f"(distributed.comm.tls.{role}.cert and .key) and the CA (tls.ca-file)")

    async def shake():
        comm = await connect(address, timeout=timeout, **args)
        await comm.close()

    try:
        asyncio.run(shake())
    except (OSError, ssl.SSLError, asyncio.TimeoutError) as exc:
        cause = exc.__cause__ or exc.__context__
        why = f"{exc}" + (f" ({cause})" if cause is not None and str(cause) not in str(exc) else "")
        if "CERTIFICATE" in why.upper() or "ALERT" in why.upper() or isinstance(cause, ssl.SSLError):
            why = f"the TLS handshake failed: the scheduler refused this {role}'s certificate or this {role} " \
                  f"refused the scheduler's ({why})"
        raise ConnectionError(f"cannot join {address}: {' '.join(why.split())[:300]}") from None
