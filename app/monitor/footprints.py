"""Memory before allocation: a run states what its algorithms' state will take, from their
parameters alone (``Algorithm.footprint``), and one whose total exceeds a limit is refused with
one line naming the parameter, before anything is allocated.

A running algorithm holds its state twice at its start (``Algorithm.warm_up`` compiles the kernels
on a scratch instance of the same settings), so a run needs twice the sum of the footprints. The
default limit is a quarter of the machine's memory (MemTotal, /proc/meminfo): the capture, the
exact truth beside the private view, the views and the other users of the machine need the rest.
``--memory-limit`` or the environment variable ``DPTOP_MEMORY_LIMIT`` set it.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from dptop.engine.core.base import Footprint

ENV = "DPTOP_MEMORY_LIMIT"
SHARE = 0.25
"""The default limit's share of the machine's memory."""
COPIES = 2
"""States one algorithm holds at once: its own and, while it starts, its warm-up scratch."""
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?)\s*([KMGT]?)(?:I?B)?\s*", re.IGNORECASE)


@dataclass(frozen=True)
class MemoryLimit:
    """The most a run's algorithm state may take (``nbytes``) and where that figure comes from."""

    nbytes: int
    source: str


def parse_size(text: str, what: str = "--memory-limit") -> int:
    """``"8G"``, ``"512MiB"``, ``"1.5g"`` or a byte count -> bytes (units of 1024); a positive size."""
    m = _SIZE.fullmatch(str(text))
    size = int(float(m.group(1)) * _UNITS[m.group(2).upper()]) if m else 0
    if size <= 0:
        raise ValueError(f"{what} ({text!r}) must be a positive size such as 8G, 512M or a byte count")
    return size


def machine_memory() -> int | None:
    """The machine's memory in bytes (MemTotal), None where /proc/meminfo does not say."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def default_limit() -> MemoryLimit | None:
    """``DPTOP_MEMORY_LIMIT`` if set, else a quarter of the machine's memory; None if unknown."""
    text = os.environ.get(ENV)
    if text:
        return MemoryLimit(parse_size(text, ENV), ENV)
    total = machine_memory()
    if total is None:
        return None
    return MemoryLimit(int(total * SHARE), f"a quarter of this machine's {human(total)}")


def human(nbytes: int) -> str:
    for unit in ("TiB", "GiB", "MiB", "KiB"):
        scale = _UNITS[unit[0]]
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} bytes"


def memory_error(footprints: dict[str, Footprint], limit: MemoryLimit | None) -> str | None:
    """One line refusing the run if its algorithms need more than ``limit``, naming the largest
    and the parameter that sizes it; None if it fits (or no limit is known)."""
    if limit is None or not footprints:
        return None
    need = COPIES * sum(f.nbytes for f in footprints.values())
    if need <= limit.nbytes:
        return None
    name, largest = max(footprints.items(), key=lambda item: item[1].nbytes)
    others = f" ({human(need)} for the run)" if len(footprints) > 1 else ""
    return (f"{name}: {largest.sized_by} needs {human(COPIES * largest.nbytes)} of memory{others}, more than the "
            f"limit of {human(limit.nbytes)} ({limit.source}); lower it, or set --memory-limit or {ENV}")
