"""Where cluster work runs: in this process, an embedded Dask ``LocalCluster``, or an existing
Dask scheduler.

``cluster`` is ``None`` (in-process, no Dask), ``"local:N"`` (a LocalCluster of N single-threaded
worker processes on 127.0.0.1, closed afterwards), ``"tcp://HOST:PORT"`` (a running scheduler; its
workers need dptop installed and, for archive replay, the files at the same paths), or a
``distributed.Client`` the caller owns (tests use this with ``processes=False``).
"""
from __future__ import annotations

import contextlib
import logging
import re

CLUSTER_RULE = "cluster ({!r}) must be None, local:N (N >= 1 workers) or tcp://HOST:PORT"
_LOCAL = re.compile(r"local:(\d+)")
_TCP = re.compile(r"tcp://[^\s:/]+:\d+")


def check_cluster(cluster):
    """Validate a cluster spec (a string or a Client); returns it."""
    if cluster is None or not isinstance(cluster, str):
        return cluster
    m = _LOCAL.fullmatch(cluster)
    if (m and int(m.group(1)) >= 1) or _TCP.fullmatch(cluster):
        return cluster
    raise ValueError(CLUSTER_RULE.format(cluster))


def local_cluster(workers: int, processes: bool = True):
    """An embedded LocalCluster of ``workers`` single-threaded workers, no dashboard: worker
    processes talk over loopback TCP, thread workers (``processes=False``) in-process."""
    from distributed import LocalCluster

    where = {"host": "127.0.0.1"} if processes else {}
    # the scheduler always serves health routes over HTTP: on a free loopback port, no dashboard
    http = {"dashboard": False, "dashboard_address": "127.0.0.1:0"}
    return LocalCluster(n_workers=workers, threads_per_worker=1, processes=processes, dashboard_address=None,
                        silence_logs=logging.ERROR, scheduler_kwargs=http, **where)


@contextlib.contextmanager
def connect(cluster):
    """Yield a ``distributed.Client`` for ``cluster`` (``None`` for in-process), closing what it opened."""
    cluster = check_cluster(cluster)
    if cluster is None or not isinstance(cluster, str):
        yield cluster
        return
    from distributed import Client

    if cluster.startswith("local:"):
        with local_cluster(int(cluster.split(":")[1])) as lc, Client(lc) as client:
            yield client
    else:
        with Client(cluster, timeout="10s") as client:
            yield client


def describe(cluster) -> str:
    if cluster is None:
        return "in-process"
    return cluster if isinstance(cluster, str) else f"client of {cluster.scheduler.address}"
