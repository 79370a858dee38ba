"""The contract between a packet source (file replay, live capture) and the engine's runner.

A ``Source`` owns one worker thread that pushes ``KeyBatch`` objects into ``sink``; the sink
returns False when it dropped the batch (a full queue), and the source counts those packets in
``queue_drops``. Lifecycle: ``start()`` once; ``stop()`` wakes a
blocked worker at once and is harmless before ``start()`` or twice; ``join()`` re-raises the
worker's exception; ``pause()``/``resume()``; ``stats()`` is an immutable snapshot any thread
may take. State flags are set by the caller's thread before the worker runs (no races on start).
"""
from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable

from dptop.engine.core.keys import KeyBatch


@dataclass(frozen=True)
class InterfaceEvent:
    """A live source's interface changed: ``kind`` "down", "up" (``down_seconds``: the gap it
    was down) or "gone" (deleted or replaced: the capture ends), at Unix time ``time``."""

    kind: str
    iface: str
    time: float
    down_seconds: float | None = None

    def text(self) -> str:
        if self.kind == "gone":
            return f"interface {self.iface} disappeared: the capture ends, results so far are written"
        if self.kind == "down":
            return f"interface {self.iface} is down: nothing is captured until it is up again"
        return f"interface {self.iface} is up again after {self.down_seconds:.1f} s down"

    def to_json(self) -> dict:
        out = {"event": self.kind, "iface": self.iface, "time": self.time}
        if self.down_seconds is not None:
            out["down_seconds"] = round(self.down_seconds, 3)
        return out


@dataclass(frozen=True)
class SourceStats:
    packets: int = 0
    """Packet records seen (IP or not)."""
    ip_packets: int = 0
    """Keys handed to the sink (including batches the sink dropped)."""
    skipped: dict = field(default_factory=dict)
    bytes_done: int = 0
    bytes_total: int = 0
    fraction: float | None = None
    """Progress through the file (None for live capture)."""
    kernel_drops: int = 0
    queue_drops: int = 0
    """Keys in batches the sink refused."""
    paused: bool = False
    finished: bool = False
    error: str | None = None
    warnings: tuple[str, ...] = ()
    incomplete: bool = False
    """The source stopped before the end of its data (a file cut or corrupt under the replay)."""
    packet_time_ns: int | None = None
    """Time stamp of the last packet handed to the sink."""
    interface_events: tuple[InterfaceEvent, ...] = ()
    """A live source's interface going down, up or away, in order."""

    @property
    def interface_gone(self) -> bool:
        return any(e.kind == "gone" for e in self.interface_events)


class Source(ABC):
    """One worker thread feeding ``sink``. Subclasses implement ``_run`` (and ``_close``)."""

    thread_name = "dptop-source"

    def __init__(self, sink: Callable[[KeyBatch], bool]):
        if not callable(sink):
            raise TypeError(f"sink ({sink!r}) must be callable")
        self._sink = sink
        self._cv = threading.Condition()
        self._stopping = False
        self._paused = False
        self._finished = False
        self._released = False
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._fed = 0
        self._queue_drops = 0
        self._packet_time_ns: int | None = None

    # ----- control (any thread) --------------------------------------------------------
    def start(self) -> None:
        """Start the worker thread (once). After ``stop()`` it does nothing."""
        with self._cv:
            if self._thread is not None:
                raise RuntimeError(f"{type(self).__name__} already started")
            self._thread = threading.Thread(target=self._main, name=self.thread_name, daemon=True)
            if self._stopping:
                self._finished = True
                return
        self._thread.start()

    def run(self) -> None:
        """Run the source to its end in the calling thread instead of a thread of its own (once,
        instead of ``start``; a session its caller drives step by step reads a file so);
        ``join`` then re-raises its exception."""
        with self._cv:
            if self._thread is not None:
                raise RuntimeError(f"{type(self).__name__} already started")
            self._thread = threading.Thread(target=self._main, name=self.thread_name, daemon=True)  # never started
        self._main()

    def stop(self) -> None:
        """Ask the worker to end and wake it at once (harmless before start and when repeated).
        Before start it releases the source's resources (file, socket) itself."""
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
            started = self._thread is not None and self._thread.ident is not None
        self._interrupt()
        if not started:
            self._release()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the worker to end; re-raise its exception."""
        thread = self._thread
        if thread is not None and thread.ident is not None:
            thread.join(timeout)
        if self._error is not None:
            raise self._error

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def thread(self) -> threading.Thread | None:
        """The worker thread, once ``start`` made it."""
        return self._thread

    def pause(self) -> None:
        with self._cv:
            self._paused = True
            self._cv.notify_all()

    def resume(self) -> None:
        with self._cv:
            self._paused = False
            self._cv.notify_all()

    def stats(self) -> SourceStats:
        """An immutable snapshot of the source's progress and counters."""
        return SourceStats(
            queue_drops=self._queue_drops, paused=self._paused, finished=self._finished,
            error=None if self._error is None else f"{type(self._error).__name__}: {self._error}",
            packet_time_ns=self._packet_time_ns, **self._counters())

    # ----- for subclasses (worker thread) ----------------------------------------------
    @abstractmethod
    def _run(self) -> None:
        """Produce batches with ``_emit`` until done or ``_stopping``."""

    def _counters(self) -> dict:
        """Fields of ``SourceStats`` the subclass knows (packets, skipped, bytes, ...)."""
        return {"ip_packets": self._fed}

    def _interrupt(self) -> None:
        """Wake a worker blocked outside ``_sleep``/``_hold`` (e.g. close a socket)."""

    def _close(self) -> None:
        """Release resources; runs once, in the worker when it ends (or in ``stop()`` before start)."""

    def _emit(self, batch: KeyBatch) -> bool:
        """Hand ``batch`` to the sink; count it as a queue drop if refused."""
        if len(batch) == 0:
            return True
        self._fed += len(batch)
        self._packet_time_ns = int(batch.ts_ns[-1])
        accepted = self._sink(batch) is not False
        if not accepted:
            self._queue_drops += len(batch)
        return accepted

    def _sleep(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, waking early on stop or pause; False when stopping."""
        with self._cv:
            if seconds > 0:
                self._cv.wait_for(lambda: self._stopping or self._paused, timeout=seconds)
            return not self._stopping

    def _hold(self) -> bool:
        """Block while paused; False when stopping."""
        with self._cv:
            self._cv.wait_for(lambda: self._stopping or not self._paused)
            return not self._stopping

    @property
    def stopping(self) -> bool:
        return self._stopping

    def _release(self) -> None:
        with self._cv:
            if self._released:
                return
            self._released = True
        self._close()

    def _main(self) -> None:
        try:
            if not self._stopping:
                self._run()
        except BaseException as exc:  # re-raised by join(), shown by stats().error
            self._error = exc
        finally:
            try:
                self._release()
            finally:
                self._finished = True
