"""Optional dependencies, installed through the package's extras.

A plain install replays captures and runs the terminal view; the window (``gui``), capture from an
interface (``live``), the cluster (``cluster``) and the Prometheus feed (``feed``) each need an
extra. ``require`` is called in a command's check, before anything starts: a missing extra is one
line naming what to install, never a traceback halfway through a run.
"""
from __future__ import annotations

from dataclasses import dataclass
import importlib.util


@dataclass(frozen=True)
class Extra:
    """One extra of ``pip install 'dptop[NAME]'``: what it serves and the modules it brings."""

    name: str
    serves: str
    modules: tuple[str, ...]


GUI = Extra("gui", "the monitor window", ("PySide6", "pyqtgraph"))
LIVE = Extra("live", "live capture", ("scapy",))
CLUSTER = Extra("cluster", "the cluster", ("dask", "distributed"))
FEED = Extra("feed", "--serve", ("prometheus_client",))


class MissingExtra(ValueError):
    """An extra the command needs is not installed."""


def missing(extra: Extra) -> list[str]:
    """The modules of ``extra`` that cannot be imported here (found without importing them)."""
    return [m for m in extra.modules if _spec(m) is None]


def _spec(module: str):
    try:
        return importlib.util.find_spec(module)
    except (ImportError, ValueError):  # a broken install, or a module blocked in sys.modules
        return None


def require(extra: Extra) -> None:
    """Raise ``MissingExtra`` (one line: what, which modules, the pip command) unless ``extra`` is
    installed whole."""
    absent = missing(extra)
    if absent:
        raise MissingExtra(f"{extra.serves} needs {', '.join(absent)}, not installed here: "
                           f"pip install 'dptop[{extra.name}]'")
