"""A Ctrl-C that Python dropped still ends the command.

The command checks its parameters on the main thread, and some checks run a numba kernel (a
sketch's defaults come from one), which numba compiles there on first use. llvmlite's compiler
calls back into Python through ctypes; a SIGINT that arrives while LLVM works is raised as
``KeyboardInterrupt`` inside such a callback, where ctypes prints it as an "Exception ignored"
traceback and drops it, and the command went on to capture. ``DroppedInterrupts`` keeps that
traceback off the terminal and remembers the interrupt, and ``check`` raises it again where the
command can end (after its checks, before any work starts).
"""
from __future__ import annotations

import sys


class DroppedInterrupts:
    """While entered: a ``KeyboardInterrupt`` that reaches ``sys.unraisablehook`` (raised where
    Python cannot propagate it: a ctypes callback, a finaliser) is remembered, not printed; any
    other unraisable exception goes to the hook that was there before."""

    def __init__(self):
        self.dropped = False
        self._previous = None

    def __enter__(self) -> DroppedInterrupts:
        self._previous, sys.unraisablehook = sys.unraisablehook, self._hook
        return self

    def __exit__(self, *exc) -> None:
        sys.unraisablehook = self._previous

    def _hook(self, unraisable) -> None:
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
            self.dropped = True
        else:
            self._previous(unraisable)

    def check(self) -> None:
        """Raise ``KeyboardInterrupt`` if one was dropped."""
        if self.dropped:
            raise KeyboardInterrupt
