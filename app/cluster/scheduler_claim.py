"""One collector per scheduler: the functions the collector runs on the Dask scheduler to claim it,
give it up, and read the certificate name of every worker's connection.
"""
from __future__ import annotations


class SchedulerTaken(ConnectionError):
    """Another collector, still connected, holds the scheduler."""


def scheduler_side():
    """Functions run on the scheduler, defined here so they travel by value (the scheduler needs no
    dptop): ``claim`` makes this client the scheduler's collector unless another one that is still
    connected holds it, ``release`` gives it up; ``peer_names`` is the certificate CN of every
    worker's connection."""

    def claim(dask_scheduler, holder, run):
        held = getattr(dask_scheduler, "dptop_collector", None)
        if held is not None and held[0] != holder and held[0] in dask_scheduler.clients:
            return list(held)
        dask_scheduler.dptop_collector = (holder, run)
        return None

    def release(dask_scheduler, holder):
        if getattr(dask_scheduler, "dptop_collector", (None,))[0] == holder:
            dask_scheduler.dptop_collector = None

    def peer_names(dask_scheduler):
        out = {}
        for address, stream in dask_scheduler.stream_comms.items():
            info = getattr(getattr(stream, "comm", None), "extra_info", None) or {}
            subject = (info.get("peercert") or {}).get("subject", ())
            out[address] = next((v for rdn in subject for k, v in rdn if k == "commonName"), None)
        return out

    return claim, release, peer_names
