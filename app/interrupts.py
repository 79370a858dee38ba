"""A stop signal (SIGINT, SIGTERM, SIGHUP) ends the command at any instant of its start.

The command's own handlers (dptop.headless.stop_on_signals) come once its session starts, a second
or two after the process does (numba, numpy and the kernels load first). Before them, ``stop_at_start``
makes each of the three signals raise ``Interrupted`` (a ``KeyboardInterrupt``) where the start is,
so the command ends in one line with 128 + the signal, its outputs untouched; a command that does
not stop on them itself gets the process's own handling back once its checks are done (``end_of_start``).

It also takes back a SIGINT the process inherited ignored: a shell starts a command run in the
background (``dptop ... &`` in a script) with SIGINT ignored, and Python keeps that, so a ``kill
-INT`` sent before the session started was discarded and the command ran on to its end, while one
sent later stopped it. A SIGHUP inherited ignored stays ignored from start to end
(``stop_signals``): ``nohup`` asked for it.

The command checks its parameters on the main thread, and some checks run a numba kernel (a
sketch's defaults come from one), which numba compiles there on first use. llvmlite's compiler
calls back into Python through ctypes; a signal that arrives while LLVM works is raised inside such
a callback, where ctypes prints it as an "Exception ignored" traceback and drops it, and the command
went on to capture. ``DroppedInterrupts`` keeps that traceback off the terminal and remembers the
interrupt, and ``check`` raises it again where the command can end (after its checks, before any
work starts).
"""
from __future__ import annotations

import signal
import sys

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """A stop signal received while the command starts: ``signum``."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_interrupted(signum, frame) -> None:
    raise Interrupted(signum)


def stop_signals() -> tuple[signal.Signals, ...]:
    """The signals that stop the command: SIGINT, SIGTERM, and SIGHUP unless it is ignored (the
    command runs under ``nohup``, to outlive its terminal)."""
    return tuple(s for s in STOP_SIGNALS if not (s == signal.SIGHUP and signal.getsignal(s) == signal.SIG_IGN))


_BEFORE_THE_START: dict = {}  # each signal's handling before stop_at_start


def stop_at_start() -> None:
    """From now until ``end_of_start`` or the command's own handlers: each stop signal raises
    ``Interrupted``."""
    for signum in stop_signals():
        _BEFORE_THE_START[signum] = signal.signal(signum, _raise_interrupted)


class Deferred:
    """While entered, a stop signal is remembered rather than raised; on leaving, the first one is
    raised as ``Interrupted``. For the loading of the command line: an exception raised while an
    extension module initialises (numpy's C core) comes out as numpy's ``ImportError`` traceback,
    not as the interrupt. A signal waits at most the load (about half a second)."""

    def __init__(self):
        self.signum: int | None = None

    def _remember(self, signum, frame) -> None:
        self.signum = self.signum or signum

    def __enter__(self) -> Deferred:
        for signum in _BEFORE_THE_START:
            signal.signal(signum, self._remember)
        return self

    def __exit__(self, *exc) -> None:
        for signum in _BEFORE_THE_START:
            signal.signal(signum, _raise_interrupted)
        if self.signum is not None and exc[0] is None:
            raise Interrupted(self.signum)


def end_of_start() -> None:
    """The command starts a run that does not stop on these signals itself (the window, the
    terminal view, the lab's commands): the process handles them as it did before ``stop_at_start``."""
    while _BEFORE_THE_START:
        signum, handler = _BEFORE_THE_START.popitem()
        signal.signal(signum, handler)


def exit_status(exc: KeyboardInterrupt) -> int:
    """Say in one line on stderr that the command was interrupted by ``exc``; its exit status."""
    signum = getattr(exc, "signum", signal.SIGINT)
    name = "" if signum == signal.SIGINT else f"{signal.Signals(signum).name}: "
    print(f"dptop: {name}interrupted", file=sys.stderr)
    return 128 + int(signum)


class DroppedInterrupts:
    """While entered: a ``KeyboardInterrupt`` that reaches ``sys.unraisablehook`` (raised where
    Python cannot propagate it: a ctypes callback, a finaliser) is remembered, not printed; any
    other unraisable exception goes to the hook that was there before."""

    def __init__(self):
        self.dropped: KeyboardInterrupt | None = None
        self._previous = None

    def __enter__(self) -> DroppedInterrupts:
        self._previous, sys.unraisablehook = sys.unraisablehook, self._hook
        return self

    def __exit__(self, *exc) -> None:
        sys.unraisablehook = self._previous

    def _hook(self, unraisable) -> None:
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
            self.dropped = self.dropped or unraisable.exc_value or KeyboardInterrupt()
        else:
            self._previous(unraisable)

    def check(self) -> None:
        """Raise the first ``KeyboardInterrupt`` dropped, if one was."""
        if self.dropped is not None:
            raise self.dropped
