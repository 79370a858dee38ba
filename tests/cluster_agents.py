"""Helpers of the cluster tests: a Dask scheduler in its own process on loopback, and ``dptop agent``s
served in threads of the test process whose capture is fed by the test (keys in, time stamps from the
agent's own, injectable, clock), so a run needs neither root nor a network interface."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time

import numpy as np

from dptop.capture.source import SourceStats
from dptop.cluster.live import AgentPlugin, serve_agent
from dptop.engine.core.keys import KeyBatch


def wait_for(cond, timeout: float, poll: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(poll)
    return bool(cond())


class FakeCapture:
    """A capture the test feeds: ``send(keys)`` hands one batch to the capture point, stamped now
    by the agent's clock."""

    def __init__(self, sink, clock):
        self.sink, self.clock, self.packets, self.finished = sink, clock, 0, False

    def start(self):
        pass

    def stop(self):
        self.finished = True

    def join(self, timeout=None):
        pass

    def send(self, keys):
        keys = np.asarray(keys, dtype=np.uint64).reshape(-1, 2)
        self.packets += len(keys)
        self.sink(KeyBatch(keys, np.full(len(keys), self.clock(), dtype=np.int64)))

    def stats(self):
        return SourceStats(packets=self.packets, ip_packets=self.packets)


class FakePlugin(AgentPlugin):
    def __init__(self, clock=time.time_ns):
        super().__init__("fake0", None, clock)
        self.opened = threading.Event()
        self.capture = None

    def open(self, sink):
        self.capture = FakeCapture(sink, self.clock)
        self.opened.set()
        return self.capture

    def send(self, keys) -> None:
        self.opened.wait(60)
        self.capture.send(keys)


class Agent:
    """``dptop agent`` ``name`` on a fake capture, served in a thread until ``stop``."""

    def __init__(self, address: str, name: str, plugin: AgentPlugin | None = None, security=None):
        self.name, self.plugin = name, plugin or FakePlugin()
        self.lines: list[str] = []
        self.error: Exception | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(address, security), daemon=True)
        self._thread.start()

    def _serve(self, address, security):
        try:
            serve_agent(address, self.plugin, self.name, say=self.lines.append, stop=self._stop, security=security)
        except Exception as exc:  # noqa: BLE001 - the test reads it
            self.error = exc

    def stop(self, timeout: float = 30) -> None:
        self._stop.set()
        self._thread.join(timeout)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Scheduler:
    """``dask scheduler`` on 127.0.0.1 in its own process (so whatever it unpickles runs there,
    never in the test's process)."""

    def __init__(self, folder, port: int = 0):
        self.file = os.path.join(str(folder), f"scheduler-{port}-{time.monotonic_ns()}.json")
        self.port = port
        self.proc = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                      "--port", str(port), "--no-dashboard", "--scheduler-file", self.file],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert wait_for(lambda: os.path.exists(self.file) and os.path.getsize(self.file) > 0, 60), "no scheduler"
        time.sleep(0.2)
        with open(self.file) as f:
            self.address = json.load(f)["address"]

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)


def agent_workers(client) -> set[str]:
    """Names of the workers carrying the dptop-agent resource."""
    return {str(w["name"]) for w in client.scheduler_info(n_workers=-1)["workers"].values()
            if (w.get("resources") or {}).get("dptop-agent")}
