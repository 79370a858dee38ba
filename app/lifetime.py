"""The ``dptop`` process's start and end (dptop.entry, dptop.cli): two pieces of work the
interpreter does for nothing in a command, measured on ``dptop replay`` of a 10-packet capture
(about 1.5 CPU-s in all, on a loaded machine).

The collector: start-up (numpy, numba and its typing registries, the command line, the kernels
loaded from the cache) builds about 180,000 objects that live as long as the process, and each full
collection during start-up and the run traversed them all again (0.14 CPU-s replaying 10 packets,
0.27 s replaying 4M). ``begin`` turns the collector off before the imports; ``started``, once the
command's checks are done, freezes what start-up built (``gc.freeze``: left out of every later
collection) and turns the collector on again, so a long run still collects the cycles it makes. The
few objects start-up left unreachable (2,789 measured) are frozen with the rest, never freed.

The end: once the command returned, the interpreter waits for its threads and runs the exit
handlers, then frees every module and object one by one (numba's and LLVM's: about 0.3 CPU-s). A
command whose outputs are all written and closed when it returns (``end_without_teardown``:
``replay`` and ``capture``) ends the process right after the last exit handler (``os._exit`` with
the command's status) once stdout and stderr are flushed; where they cannot be (a closed pipe), the
interpreter ends as before and reports it. Nothing happens unless ``begin`` ran: a test calling
``dptop.cli.main`` in its own process keeps its collector and its end.
"""
from __future__ import annotations

import atexit
import gc
import os
import sys


class _Lifetime:
    began = False
    collector_off = False
    without_teardown = False
    status: int | None = None


_LIFE = _Lifetime()


def begin() -> None:
    """At the start of the ``dptop`` command, before its imports: the collector off, and the end
    handler registered first of all, so that it runs last of the exit handlers (they run in
    reverse order of registration: logging, temporary folders, worker processes all end first)."""
    if _LIFE.began:
        return
    _LIFE.began = True
    _LIFE.collector_off = gc.isenabled()
    gc.disable()
    atexit.register(_end)


def started() -> None:
    """The command's checks are done: what start-up built is frozen and the collector on again."""
    if _LIFE.collector_off:
        _LIFE.collector_off = False
        gc.freeze()
        gc.enable()


def end_without_teardown() -> None:
    """The running command writes and closes everything it outputs before it returns."""
    _LIFE.without_teardown = True


def returned(status: int) -> None:
    """The command returned ``status`` (the process's exit status)."""
    _LIFE.status = status


def _end() -> None:
    if not (_LIFE.without_teardown and isinstance(_LIFE.status, int)):
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(_LIFE.status)
