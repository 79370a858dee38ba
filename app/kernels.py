"""``dptop compile``: numba kernels compiled into the user's cache before they are needed.

``make`` compiles what the first run needs (``--first``: the pcap parser and the default
algorithms, what ``make demo`` runs); everything else compiles on first use, the session saying
so while it does. Plain ``dptop compile`` compiles every kernel. Kernels are compiled in
``workers`` processes at once (one per core, two at most: numba compiles on one thread), one taking
the list from the front and the other from the back, so the two meet in the middle and algorithms
that share kernels (listed next to each other) are rarely compiled twice.

Numba compiles a kernel once per argument types, and an algorithm's warm-up types only what its
first batch and live view need. ``dptop compile`` also compiles, per algorithm, what comes later
or from other callers (dptop.monitor.warming: writable keys, IPv6 keys, the release at an epoch's
end) and, as its own task, the exact counter's growth paths, so none of them compiles while
packets wait (or in each test process); a live session reaches the same paths before it opens
its socket.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import queue
import sys
import time

import numpy as np

PCAP, PCAPNG = "pcap parser", "pcapng parser"
"""The capture parser's two record walks (the bundled capture is a classic pcap)."""
LIVE = "live capture"
"""The receive ring's walk and the batch parser of live capture (``dptop live``, a capture agent)."""
EXACT = "exact counter"
"""The exact counter's paths a warm-up leaves cold: its tables growing, heavy sources, IPv6 keys,
byte weights and point queries (the truth beside every session reaches them as traffic grows)."""


def _compile(task: str, every_path: bool) -> None:
    if task in (PCAP, PCAPNG):
        from dptop.capture.pcap import warm_up

        warm_up(pcap=task == PCAP, pcapng=task == PCAPNG)
        if task == PCAP and every_path:  # a file replayed on a time grid: the packets its cells keep in order
            from dptop.capture.epochorder import _longest_nondecreasing

            _longest_nondecreasing(np.zeros(4, dtype=np.int32))
    elif task == LIVE:
        from dptop.capture.live import warm_up as warm_live

        warm_live()
    elif task == EXACT:
        from dptop.monitor.warming import exact_paths

        exact_paths()
    else:
        from dptop.engine.core import registry
        from dptop.engine.core.settings import Settings
        from dptop.monitor import catalogue
        from dptop.monitor.warming import other_paths

        catalogue.warm_up(task)
        if every_path:  # what the warm-up leaves to first use (dptop.monitor.warming)
            other_paths(registry.make(task, Settings()))


def _worker(tasks: list[str], every_path: bool, front, back, lock, done, from_back: bool) -> None:
    while True:
        with lock:
            if front.value > back.value:
                return
            if from_back:
                i, back.value = back.value, back.value - 1
            else:
                i, front.value = front.value, front.value + 1
        t0 = time.perf_counter()
        try:
            _compile(tasks[i], every_path)
            done.put((tasks[i], time.perf_counter() - t0, None))
        except Exception as exc:  # noqa: BLE001 - reported in the parent's one line
            done.put((tasks[i], time.perf_counter() - t0, f"{type(exc).__name__}: {exc}"))


def compile_kernels(tasks: list[str], workers: int | None = None, progress=None, every_path: bool = True) -> list[str]:
    """Compile ``tasks`` (``PCAP``, ``PCAPNG``, ``LIVE``, ``EXACT`` and algorithm names); one progress line each as
    it finishes; ``every_path=False`` compiles only what a session's start does. Returns the errors
    (``"name: what"``), empty when every kernel compiled."""
    from dptop.engine.core.jit import cache_dir, prune

    progress = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    prune(cache_dir())  # this install's folder marked in use, week-old folders of other sources removed
    workers = max(1, min(workers or os.cpu_count() or 1, 2, len(tasks)))
    ctx = mp.get_context("spawn")  # a fresh interpreter: no numba state or threads inherited
    front, back, lock, done = ctx.Value("i", 0, lock=False), ctx.Value("i", len(tasks) - 1, lock=False), \
        ctx.Lock(), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(tasks, every_path, front, back, lock, done, w == 1), daemon=True)
             for w in range(workers)]
    for p in procs:
        p.start()
    errors, finished = [], 0
    while finished < len(tasks):
        try:
            task, seconds, error = done.get(timeout=0.5)
        except queue.Empty:
            if not any(p.is_alive() for p in procs):
                errors.append("a compiling process ended early")
                break
            continue
        finished += 1
        progress(f"dptop:   [{finished}/{len(tasks)}] {task} {seconds:.1f} s" + (f" failed: {error}" if error else ""))
        if error:
            errors.append(f"{task}: {error}")
    for p in procs:
        p.join()
    return errors
